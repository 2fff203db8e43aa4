//! Fairway's `gpu/nvml` in the host's slurmd (22.05), through `slurmd -G`: slurmd loads
//! the gpu plugin, merges what it reports with gres.conf and prints each GPU, without
//! starting any daemon. No NVIDIA driver here: an empty `libnvidia-ml.so` makes Slurm
//! select `gpu/nvml` (it only checks that the library opens), and the plugin, finding no
//! NVML behind it, reads the node's topology file from `fairway.toml`.

use std::path::Path;
use std::process::Command;

use fairway_core::topology::{GresStyle, Topology};
use fairway_tests::{Cluster, ClusterSpec};

/// Builds an empty `libnvidia-ml.so` in `dir`: Slurm selects `gpu/nvml` once it opens.
fn stand_in_nvml(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let cc = Command::new("cc")
        .args(["-shared", "-o"])
        .arg(dir.join("libnvidia-ml.so"))
        .args(["-x", "c", "/dev/null"])
        .status();
    assert!(cc.unwrap().success(), "cc could not build the stand-in libnvidia-ml.so");
}

/// This host's short name, which the plugin looks up in `[gpu.topology]`.
fn host() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    host.trim().split('.').next().unwrap().to_string()
}

/// Runs `slurmd -G` on a node of this host's name with `fairway_toml`, the shipped topology
/// files in `topology/`, and a DGX-like node; returns its output.
fn slurmd_g(fairway_toml: &str) -> (bool, String) {
    slurmd_g_on(fairway_toml, "Sockets=2 CoresPerSocket=56 ThreadsPerCore=1 Gres=gpu:h100:8", &[])
}

/// [`slurmd_g`] with this `NodeName=` line's hardware and more slurmd arguments.
fn slurmd_g_on(fairway_toml: &str, node: &str, args: &[&str]) -> (bool, String) {
    slurmd_g_with(fairway_toml, node, args, Toml::BesideSlurmConf)
}

/// Where [`slurmd_g_with`] puts `fairway.toml`.
#[derive(PartialEq)]
enum Toml {
    /// Beside `slurm.conf`, as on a node with local configuration files.
    BesideSlurmConf,
    /// `slurm.conf` and `gres.conf` in a `conf-cache` directory, as configless slurmd
    /// keeps slurmctld's, and `fairway.toml` (with the topology files) elsewhere, named
    /// by `FAIRWAY_CONF` when `named` is true.
    Configless { named: bool },
}

fn slurmd_g_with(fairway_toml: &str, node: &str, args: &[&str], toml: Toml) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path();
    let d = &if toml == Toml::BesideSlurmConf { site.to_path_buf() } else { site.join("conf-cache") };
    std::fs::create_dir_all(d).unwrap();
    let plugins = fairway_tests::plugin_dir();
    assert!(plugins.join("gpu_nvml.so").exists(), "no gpu_nvml.so in {}: run make plugins", plugins.display());
    stand_in_nvml(&d.join("stub"));
    let host = host();
    let host = host.as_str();
    std::fs::create_dir_all(site.join("topology")).unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for f in ["dgx-h100.toml", "a100-pcie-mig.toml"] {
        std::fs::copy(repo.join("config/topology").join(f), site.join("topology").join(f)).unwrap();
    }
    std::fs::write(
        d.join("slurm.conf"),
        format!(
            "ClusterName=t\nSlurmctldHost=localhost\nPluginDir={}:/usr/lib/x86_64-linux-gnu/slurm-wlm\n\
             GresTypes=gpu\nSlurmdSpoolDir={}/spool\n\
             NodeName={host} {node}\nPartitionName=p Nodes={host}\n",
            plugins.display(),
            d.display()
        ),
    )
    .unwrap();
    std::fs::write(d.join("gres.conf"), "AutoDetect=nvml\n").unwrap();
    std::fs::write(site.join("fairway.toml"), fairway_toml.replace("HOST", host)).unwrap();
    let mut slurmd = Command::new("slurmd");
    slurmd.arg("-G").args(args).env("SLURM_CONF", d.join("slurm.conf")).env("LD_LIBRARY_PATH", d.join("stub"));
    slurmd.env_remove("FAIRWAY_CONF");
    if toml == (Toml::Configless { named: true }) {
        slurmd.env("FAIRWAY_CONF", site.join("fairway.toml"));
    }
    let out = slurmd.output().unwrap();
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

/// Configless Slurm sends slurmd only Slurm's own files: `fairway.toml` is not beside
/// the cached `slurm.conf`. The plugin then reads `/etc/slurm/fairway.toml` (absent on a
/// test host: it says where it looked) or the file `FAIRWAY_CONF` names.
#[test]
fn a_configless_slurmd_reads_fairway_toml_from_fairway_conf_or_etc_slurm() {
    let toml = "[gpu.topology]\n\"HOST\" = \"topology/dgx-h100.toml\"\n";
    let node = "Sockets=2 CoresPerSocket=56 ThreadsPerCore=1 Gres=gpu:h100:8";
    let (ok, out) = slurmd_g_with(toml, node, &[], Toml::Configless { named: true });
    assert!(ok, "{out}");
    assert!(out.contains("8 GPU(s) from ") && out.contains("/topology/dgx-h100.toml"), "{out}");
    assert!(out.lines().any(|l| l.contains(" Index=7 ") && l.contains("Links=")), "{out}");
    if !Path::new("/etc/slurm/fairway.toml").exists() {
        let (ok, out) = slurmd_g_with(toml, node, &[], Toml::Configless { named: false });
        assert!(ok, "{out}");
        assert!(out.contains("/etc/slurm/fairway.toml gives this node no [gpu.topology] file"), "{out}");
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

#[test]
fn a_gpu_in_mig_mode_is_one_gpu_per_instance() {
    let (ok, out) = slurmd_g_on(
        "[gpu.topology]\n\"HOST\" = \"topology/a100-pcie-mig.toml\"\n",
        "Sockets=2 CoresPerSocket=32 ThreadsPerCore=1 Gres=gpu:nvidia_a100_80gb_pcie_3g.40gb:1,\
         gpu:nvidia_a100_80gb_pcie_2g.20gb:1,gpu:nvidia_a100_80gb_pcie_1g.10gb:2,gpu:nvidia_a100_80gb_pcie:3",
        &[],
    );
    assert!(ok, "{out}");
    assert!(out.contains("4 GPU(s) from"), "{out}");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let expected =
        Topology::load(&repo.join("config/topology/a100-pcie-mig.toml")).unwrap().gres_gpus(GresStyle::Fairway);
    assert_eq!(expected.len(), 7);
    let lines: Vec<&str> = out.lines().filter(|l| l.contains(" Gres Name=gpu ")).collect();
    assert_eq!(lines.len(), 7, "{out}");
    for g in &expected {
        let line = lines
            .iter()
            .find(|l| l.split_whitespace().any(|f| f == format!("File={}", g.file)))
            .unwrap_or_else(|| panic!("no GPU with File={} in slurmd -G:\n{out}", g.file));
        assert!(line.split_whitespace().any(|f| f == format!("Type={}", g.type_name)), "{line}");
        assert!(line.split_whitespace().any(|f| f == format!("Cores={}", g.cores)), "{line}");
    }
    // The instances of GPU 0 and GPU 1 itself, as Slurm's own gpu/nvml would give them.
    assert!(lines.iter().any(|l| l.contains("Type=nvidia_a100_80gb_pcie_3g.40gb")
        && l.contains("File=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21,/dev/nvidia-caps/nvidia-cap22")));
    assert!(lines.iter().any(|l| l.contains("Type=nvidia_a100_80gb_pcie ") && l.contains("File=/dev/nvidia1 ")));
}

/// 22.05's `slurmd -G` does not print a GPU's unique id, the MIG UUID that Slurm puts in
/// `CUDA_VISIBLE_DEVICES`; slurmctld logs it (DebugFlags=Gres) for each GPU a node
/// registers. A host cluster whose slurmd finds Fairway's `gpu/nvml` (stand-in NVML
/// library) and a small MIG topology. (No job runs on them: Slurm only hands a job
/// character devices, and this machine has no /dev/nvidia*.)
#[test]
fn slurmd_registers_mig_instances_with_their_uuids() {
    let stub = tempfile::tempdir().unwrap();
    stand_in_nvml(stub.path());
    // config/topology/a100-pcie-mig.toml cut down to this machine: GPU 0 with two of its
    // MIG instances and GPU 1 whole, on core 0.
    let topo = r#"
[cpu]
sockets = 1
cores_per_socket = 1
threads_per_core = 1
[[numa]]
id = 0
socket = 0
cores = "0"
[[gpu]]
index = 0
name = "NVIDIA A100 80GB PCIe"
type = "a100"
memory_mib = 81920
pci_bus_id = "00000000:17:00.0"
uuid = "GPU-5e6b1a90-0000-4000-8000-000000000000"
numa = 0
[[gpu.mig]]
profile = "3g.40gb"
uuid = "MIG-5e6b1a90-0000-4000-8000-000000000a02"
gi_cap_minor = 21
ci_cap_minor = 22
[[gpu.mig]]
profile = "1g.10gb"
uuid = "MIG-5e6b1a90-0000-4000-8000-000000000a0a"
gi_cap_minor = 93
ci_cap_minor = 94
[[gpu]]
index = 1
name = "NVIDIA A100 80GB PCIe"
type = "a100"
memory_mib = 81920
pci_bus_id = "00000000:31:00.0"
uuid = "GPU-5e6b1a90-0000-4000-8000-000000000001"
numa = 0
"#;
    let spec = ClusterSpec {
        gres: Some((
            "gpu:nvidia_a100_80gb_pcie_3g.40gb:1,gpu:nvidia_a100_80gb_pcie_1g.10gb:1,gpu:nvidia_a100_80gb_pcie:1"
                .into(),
            "AutoDetect=nvml\n".into(),
        )),
        fairway_toml: Some(format!("[gpu.topology]\n\"{}\" = \"mig.toml\"\n", host())),
        config_files: vec![("mig.toml".into(), topo.into())],
        slurmd_env: vec![("LD_LIBRARY_PATH".into(), stub.path().display().to_string())],
        slurm_conf_extra: vec!["DebugFlags=Gres".into()],
        ctld_debug: "verbose".into(),
        ..ClusterSpec::default()
    };
    let c = Cluster::start(&spec).unwrap_or_else(|e| panic!("cluster starts: {e:#}"));
    let log = c.log("slurmd");
    assert!(log.contains("2 GPU(s) from"), "{log}");
    let node = c.cmd("scontrol", &["-o", "show", "node", &c.node]).unwrap().stdout;
    assert!(node.contains("State=IDLE "), "{node}");
    let ctld = c.log("slurmctld");
    for (ty, uuid) in [
        ("nvidia_a100_80gb_pcie_3g.40gb", "MIG-5e6b1a90-0000-4000-8000-000000000a02"),
        ("nvidia_a100_80gb_pcie_1g.10gb", "MIG-5e6b1a90-0000-4000-8000-000000000a0a"),
        ("nvidia_a100_80gb_pcie", "(null)"),
    ] {
        let want = format!("Gres:gpu Type:{ty} UniqueId:{uuid} ");
        assert!(ctld.contains(&want), "slurmctld.log has no {want:?}:\n{ctld}");
    }
    c.stop().unwrap();
}
