//! Fairway's `gpu/nvml` in the host's slurmd (22.05), through `slurmd -G`: slurmd loads
//! the gpu plugin, merges what it reports with gres.conf and prints each GPU, without
//! starting any daemon. No NVIDIA driver here: an empty `libnvidia-ml.so` makes Slurm
//! select `gpu/nvml` (it only checks that the library opens), and the plugin, finding no
//! NVML behind it, reads the node's topology file from `fairway.toml`.

use std::path::Path;
use std::process::Command;

use fairway_core::topology::{GresStyle, Topology};

/// Runs `slurmd -G` on a node of this host's name with `fairway_toml`; returns its output.
fn slurmd_g(fairway_toml: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let plugins = fairway_tests::plugin_dir();
    assert!(plugins.join("gpu_nvml.so").exists(), "no gpu_nvml.so in {}: run make plugins", plugins.display());
    std::fs::create_dir_all(d.join("stub")).unwrap();
    let cc = Command::new("cc")
        .args(["-shared", "-o"])
        .arg(d.join("stub/libnvidia-ml.so"))
        .args(["-x", "c", "/dev/null"])
        .status()
        .unwrap();
    assert!(cc.success(), "cc could not build the stand-in libnvidia-ml.so");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let host = host.trim().split('.').next().unwrap();
    std::fs::create_dir_all(d.join("topology")).unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::fs::copy(repo.join("config/topology/dgx-h100.toml"), d.join("topology/dgx-h100.toml")).unwrap();
    std::fs::write(
        d.join("slurm.conf"),
        format!(
            "ClusterName=t\nSlurmctldHost=localhost\nPluginDir={}:/usr/lib/x86_64-linux-gnu/slurm-wlm\n\
             GresTypes=gpu\nSlurmdSpoolDir={}/spool\n\
             NodeName={host} Sockets=2 CoresPerSocket=56 ThreadsPerCore=1 Gres=gpu:h100:8\nPartitionName=p Nodes={host}\n",
            plugins.display(),
            d.display()
        ),
    )
    .unwrap();
    std::fs::write(d.join("gres.conf"), "AutoDetect=nvml\n").unwrap();
    std::fs::write(d.join("fairway.toml"), fairway_toml.replace("HOST", host)).unwrap();
    let out = Command::new("slurmd")
        .arg("-G")
        .env("SLURM_CONF", d.join("slurm.conf"))
        .env("LD_LIBRARY_PATH", d.join("stub"))
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

#[test]
fn slurmd_takes_cores_and_links_from_the_topology_file() {
    let (ok, out) = slurmd_g("[gpu.topology]\n\"HOST\" = \"topology/dgx-h100.toml\"\n");
    assert!(ok, "{out}");
    assert!(
        out.contains("gpu/nvml: ") && out.contains("NVML cannot read the GPUs") && out.contains("8 GPU(s) from"),
        "{out}"
    );
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let expected = Topology::load(&repo.join("config/topology/dgx-h100.toml")).unwrap().gres_gpus(GresStyle::Fairway);
    for (i, g) in expected.iter().enumerate() {
        let line = out
            .lines()
            .find(|l| l.contains(" Gres Name=gpu ") && l.contains(&format!(" Index={i} ")))
            .unwrap_or_else(|| panic!("no GPU {i} in slurmd -G:\n{out}"));
        for want in [format!("File={}", g.file), format!("Cores={}", g.cores), format!("Links={}", g.links)] {
            assert!(line.split_whitespace().any(|f| f == want), "GPU {i}: no {want} in {line}");
        }
    }
}

#[test]
fn without_a_topology_file_or_with_a_broken_fairway_toml_slurmd_still_runs_on_gres_conf() {
    // No entry for this node: the plugin says so and reports nothing.
    let (ok, out) = slurmd_g("[gpu.topology]\n\"not-this-node\" = \"topology/dgx-h100.toml\"\n");
    assert!(ok, "{out}");
    assert!(out.contains("gives this node no [gpu.topology] file; reporting no GPUs"), "{out}");
    assert!(!out.contains("Links=-1"), "{out}");
    // A file that is not there: an error naming it, still no crash.
    let (ok, out) = slurmd_g("[gpu.topology]\n\"HOST\" = \"topology/none.toml\"\n");
    assert!(ok, "{out}");
    assert!(out.contains("none.toml") && out.contains("reporting no GPUs"), "{out}");
    // An invalid fairway.toml: the plugin refuses to start, with the reason; slurmd goes on.
    let (ok, out) = slurmd_g("[gpu.topology]\n\"HOST[1\" = \"topology/dgx-h100.toml\"\n");
    assert!(ok, "{out}");
    assert!(out.contains("invalid hostlist") && out.contains("fix fairway.toml"), "{out}");
}
