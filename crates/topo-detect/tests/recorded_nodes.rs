//! Fairway's reading of real GPU nodes, recorded there by `scripts/capture-gpu-node.sh`
//! (`fixtures/<node>/`, provenance in `fixtures/MANIFEST.md`), checked against what
//! NVIDIA's own tools recorded on the same machine at the same time. No GPU is needed here:
//! the NVML half is compared as recorded, the sysfs half is replayed from the copied files.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use fairway_core::topology::{CoreSet, GresStyle, Topology};
use fairway_topo_detect::sysfs::{sysfs_bus_id, CpuLayout};
use serde_json::Value;

const NODES: [&str; 1] = ["h200-vm"];

fn dir(node: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(node)
}

fn read(node: &str, file: &str) -> String {
    std::fs::read_to_string(dir(node).join(file)).unwrap_or_else(|e| panic!("{node}/{file}: {e}"))
}

fn topology(node: &str) -> Topology {
    Topology::load(&dir(node).join("fairway-topo.toml")).unwrap()
}

#[test]
fn detected_gpus_are_what_nvidia_tools_report() {
    for node in NODES {
        let t = topology(node);
        let nvml: Value = serde_json::from_str(&read(node, "nvml.json")).unwrap();
        let smi = read(node, "nvidia-smi-q.txt");
        let theirs = nvml["gpus"].as_array().unwrap();
        assert_eq!(t.gpus.len(), theirs.len(), "{node}");
        let layout = CpuLayout::read(&dir(node).join("sysfs/sys")).unwrap();
        for (g, n) in t.gpus.iter().zip(theirs) {
            assert_eq!(g.name, n["name"], "{node}");
            assert_eq!(g.uuid, n["uuid"], "{node}");
            assert_eq!(g.pci_bus_id, n["pci_bus_id"], "{node}");
            assert_eq!(g.minor as u64, n["minor"].as_u64().unwrap(), "{node}");
            assert_eq!(g.memory_mib, n["memory_mib"].as_u64().unwrap(), "{node}");
            // NVML's CPU affinity, in OS CPU numbers, is the GPU's local CPUs from sysfs.
            let cpus: BTreeSet<u32> =
                n["cpu_affinity"].as_array().unwrap().iter().map(|c| c.as_u64().unwrap() as u32).collect();
            let cores: BTreeSet<u32> = cpus.iter().map(|c| layout.core_of_cpu[c]).collect();
            assert_eq!(g.cores, CoreSet::from_iter(cores), "{node}: GPU {} cores", g.index);
            // MIG mode off (current, pending) and no NVLink: one whole GPU, no lanes.
            if n["mig_mode"] == serde_json::json!([0, 0]) {
                assert!(g.mig.is_empty(), "{node}");
            }
            if n["nvlink_remote_bus_ids"] == serde_json::json!(["error: Not Supported"]) {
                assert!((0..t.gpus.len()).all(|j| t.nvlink.lanes(g.index, j) == 0), "{node}");
            }
            for want in [&g.uuid, &g.pci_bus_id] {
                assert!(smi.lines().any(|l| l.trim_end().ends_with(&format!(": {want}"))), "{node}: {want}");
            }
        }
    }
}

#[test]
fn the_sysfs_half_replays_to_the_same_topology() {
    for node in NODES {
        let t = topology(node);
        let sys = dir(node).join("sysfs/sys");
        let layout = CpuLayout::read(&sys).unwrap();
        assert_eq!(
            (layout.sockets, layout.cores_per_socket, layout.threads_per_core),
            (t.cpu.sockets, t.cpu.cores_per_socket, t.cpu.threads_per_core),
            "{node}"
        );
        assert_eq!(layout.numa, t.numa, "{node}");
        for g in &t.gpus {
            assert!(sys.join("bus/pci/devices").join(sysfs_bus_id(&g.pci_bus_id)).exists(), "{node}");
            assert_eq!(layout.numa_of_pci(&sys, &g.pci_bus_id).unwrap(), g.numa, "{node}");
            assert_eq!(layout.local_cores_of_pci(&sys, &g.pci_bus_id).unwrap(), g.cores, "{node}");
        }
    }
}

#[test]
fn gres_lines_and_slurmd_agree_with_the_topology() {
    for node in NODES {
        let t = topology(node);
        for (file, style) in [
            ("gres-autodetect.conf", GresStyle::Autodetect),
            ("gres-static.conf", GresStyle::Static),
            ("gres-fairway.conf", GresStyle::Fairway),
        ] {
            assert_eq!(read(node, file).lines().collect::<Vec<_>>(), t.gres_conf(style), "{node}/{file}");
        }
        // Debian's slurmd 22.05 with Fairway's gpu/nvml over the real NVML: each GPU as
        // slurmd merged it, with the plugin's Type, File, Cores and Links.
        let out = read(node, "slurmd-G.txt") + &read(node, "slurmd-G.txt.err");
        assert!(out.contains(&format!("{} GPU(s) from NVML", t.gpus.len())), "{node}: {out}");
        let lines: Vec<&str> = out.lines().filter(|l| l.contains(" Gres Name=gpu ")).collect();
        let want = t.gres_gpus(GresStyle::Fairway);
        assert_eq!(lines.len(), want.len(), "{node}: {out}");
        for (line, g) in lines.iter().zip(&want) {
            for f in [
                format!("Type={}", g.type_name),
                format!("File={}", g.file),
                format!("Cores={}", g.cores),
                format!("Links={}", g.links),
            ] {
                assert!(line.split_whitespace().any(|w| w == f), "{node}: no {f} in {line}");
            }
        }
    }
}
