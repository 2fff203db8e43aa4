//! `fairway topo` as an admin runs it.

use std::process::Command;

fn fairway(args: &[&str]) -> (i32, String, String) {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let out = Command::new(env!("CARGO_BIN_EXE_fairway")).current_dir(root).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn dgx_h100_matrix() {
    let (code, stdout, stderr) = fairway(&["topo", "--file", "config/topology/dgx-h100.toml"]);
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "DGX H100");
    assert_eq!(lines[1], "      GPU0  GPU1  GPU2  GPU3  GPU4  GPU5  GPU6  GPU7  Cores   NUMA  Socket");
    assert_eq!(lines[2], "GPU0  X     NV18  NV18  NV18  NV18  NV18  NV18  NV18  0-55    0     0");
    assert_eq!(lines[9], "GPU7  NV18  NV18  NV18  NV18  NV18  NV18  NV18  X     56-111  1     1");
    assert!(
        stdout.contains("GPU4: NVIDIA H100 80GB HBM3 (h100), 81559 MiB, 00000000:9D:00.0, /dev/nvidia4,"),
        "{stdout}"
    );
}

#[test]
fn l40s_matrix_has_no_nvlink() {
    let (code, stdout, _) = fairway(&["topo", "--file", "config/topology/pcie-l40s.toml"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("\nGPU0  X     NODE  NODE  NODE  SYS   SYS   SYS   SYS   0-31   0     0\n"), "{stdout}");
}

#[test]
fn gres_conf_for_the_pairs_node() {
    let file = "config/topology/pcie-a100-nvlink-pairs.toml";
    let (code, stdout, _) = fairway(&["topo", "--file", file, "--gres-conf"]);
    assert_eq!(code, 0);
    assert_eq!(
        stdout,
        "Name=gpu Type=nvidia_a100_80gb_pcie File=/dev/nvidia0 Cores=0-31 Links=-1,12,0,0\n\
         Name=gpu Type=nvidia_a100_80gb_pcie File=/dev/nvidia1 Cores=0-31 Links=12,-1,0,0\n\
         Name=gpu Type=nvidia_a100_80gb_pcie File=/dev/nvidia2 Cores=32-63 Links=0,0,-1,12\n\
         Name=gpu Type=nvidia_a100_80gb_pcie File=/dev/nvidia3 Cores=32-63 Links=0,0,12,-1\n"
    );
    let (_, stdout, _) = fairway(&["topo", "--file", file, "--gres-conf", "--style", "static"]);
    assert_eq!(stdout.lines().next(), Some("Name=gpu Type=a100 File=/dev/nvidia0 Cores=0-31 Links=-1,12,0,0"));
}

#[test]
fn gres_conf_for_dgx_h100_in_both_styles() {
    let file = "config/topology/dgx-h100.toml";
    let (_, auto, _) = fairway(&["topo", "--file", file, "--gres-conf"]);
    assert_eq!(
        auto.lines().nth(4),
        Some("Name=gpu Type=nvidia_h100_80gb_hbm3 File=/dev/nvidia4 Cores=56-111 Links=0,0,0,0,-1,0,0,0")
    );
    let (_, stat, _) = fairway(&["topo", "--file", file, "--gres-conf", "--style", "static"]);
    assert_eq!(
        stat.lines().next(),
        Some("Name=gpu Type=h100 File=/dev/nvidia0 Cores=0-55 Links=-1,18,18,18,18,18,18,18")
    );
}

#[test]
fn invalid_file_exits_2_with_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("node.toml");
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../config/topology/pcie-a100-nvlink-pairs.toml"
    ))
    .unwrap()
    .replacen("numa = 1\n", "numa = 2\n", 1);
    std::fs::write(&bad, &text).unwrap();
    let (code, _, stderr) = fairway(&["topo", "--file", bad.to_str().unwrap()]);
    assert_eq!(code, 1, "an invalid topology file is an invalid configuration");
    let line = text.lines().position(|l| l == "numa = 2").unwrap() + 1;
    assert!(
        stderr.contains(&format!("node.toml:{line}:8: key `gpu[2].numa`: NUMA node 2 is not declared in [[numa]]")),
        "{stderr}"
    );
}

#[test]
fn without_file_or_nvml_the_message_names_file() {
    let (code, _, stderr) = fairway(&["topo"]);
    // On a node with an NVIDIA driver this reads the real GPUs instead.
    if code != 0 {
        assert_eq!(code, 3);
        assert!(stderr.contains("pass it with --file"), "{stderr}");
        assert!(stderr.contains("NVML is not available"), "{stderr}");
    }
}

#[test]
fn toml_describes_the_node_as_a_topology_file() {
    // Every shipped node, MIG instances included, prints as a file that reads back equal
    // and shows the same matrix.
    for f in ["dgx-h100.toml", "pcie-a100-nvlink-pairs.toml", "a100-pcie-mig.toml", "pcie-l40s.toml"] {
        let file = format!("config/topology/{f}");
        let (code, toml, stderr) = fairway(&["topo", "--file", &file, "--toml"]);
        assert_eq!(code, 0, "{stderr}");
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join(f);
        std::fs::write(&copy, &toml).unwrap();
        let copy = copy.to_str().unwrap();
        assert_eq!(fairway(&["topo", "--file", copy]).1, fairway(&["topo", "--file", &file]).1, "{f}:\n{toml}");
        for style in ["autodetect", "fairway"] {
            assert_eq!(
                fairway(&["topo", "--file", copy, "--gres-conf", "--style", style]).1,
                fairway(&["topo", "--file", &file, "--gres-conf", "--style", style]).1,
                "{f}"
            );
        }
    }
    let (code, _, stderr) = fairway(&["topo", "--toml", "--gres-conf"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("cannot be used with"), "{stderr}");
}
