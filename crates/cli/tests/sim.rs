//! `fairway sim` end to end.

use std::process::Command;

fn fairway(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fairway")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn compares_policies_as_json_and_plots_them() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("cdf.svg");
    let (code, out, err) = fairway(&[
        "sim",
        "--synth",
        "--jobs",
        "300",
        "--nodes",
        "4",
        "--compare",
        "multifactor,fairway,sjf-oracle",
        "--json",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let results = v["results"].as_array().unwrap();
    let policies: Vec<&str> = results.iter().map(|r| r["policy"].as_str().unwrap()).collect();
    assert_eq!(policies, ["multifactor", "fairway", "sjf-oracle"]);
    assert_eq!(v["workload"]["jobs"], 300);
    assert!(results.iter().all(|r| r["mean_jct"].as_f64().unwrap() > 0.0));
    let svg = std::fs::read_to_string(svg).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("CDF of JCT") && svg.contains("sjf-oracle"), "{svg:.300}");
    assert!(err.contains("simulated in"), "{err}");
}

#[test]
fn table_has_ratios_to_multifactor() {
    let (code, out, err) =
        fairway(&["sim", "--synth", "--jobs", "200", "--nodes", "2", "--compare", "fifo,multifactor", "--markdown"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("| multifactor |"), "{out}");
    let mf = out.lines().find(|l| l.starts_with("| multifactor")).unwrap();
    let cells: Vec<&str> = mf.split('|').map(str::trim).filter(|c| !c.is_empty()).collect();
    assert_eq!(cells[cells.len() - 3..], ["1.00", "1.00", "1.00"], "{mf}");
}

#[test]
fn csv_has_one_header_and_a_row_per_policy() {
    let (code, out, err) =
        fairway(&["sim", "--synth", "--jobs", "200", "--nodes", "2", "--compare", "fifo,multifactor", "--csv"]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(lines[0].starts_with("policy,") && lines[0].contains(",mean_jct,"), "{}", lines[0]);
    assert!(lines[1].starts_with("fifo,") && lines[2].starts_with("multifactor,"), "{out}");
    assert_eq!(lines[1].split(',').count(), lines[0].split(',').count());
}

#[test]
fn refuses_without_a_workload_and_names_bad_policies() {
    let (code, _, err) = fairway(&["sim", "--policy", "fifo"]);
    assert_eq!(code, 2);
    assert!(err.contains("--synth"), "{err}");
    let (code, _, err) = fairway(&["sim", "--synth", "--policy", "lottery"]);
    assert_ne!(code, 0);
    assert!(err.contains("sjf-oracle"), "{err}");
}

fn topology_file(name: &str) -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/topology").join(name).display().to_string()
}

#[test]
fn reports_placement_with_a_topology_and_preemption_costs() {
    let topo = topology_file("pcie-a100-nvlink-pairs.toml");
    let (code, out, err) = fairway(&[
        "sim",
        "--synth",
        "--jobs",
        "400",
        "--nodes",
        "4",
        "--topology",
        &topo,
        "--preempt",
        "high:normal",
        "--grace",
        "60",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let r = &v["results"][0];
    assert_eq!(v["workload"]["gpus"], 16, "4 GPUs per node from the topology file");
    assert!(r["multi_gpu_allocations"].as_u64().unwrap() > 0, "{r}");
    for k in ["topology_nvlink_split", "first_free_nvlink_split", "topology_socket_split", "first_free_socket_split"] {
        assert!((0.0..=1.0).contains(&r[k].as_f64().unwrap()), "{k}: {r}");
    }
    assert!(r["preemptions"].as_u64().unwrap() > 0, "a loaded 16-GPU cluster preempts: {r}");
    assert_eq!(r["lost_gpu_hours"].as_f64(), Some(0.0), "with a grace nothing is redone: {r}");

    // A node count the topology does not have, and a malformed pair: clear errors.
    let (code, _, err) = fairway(&["sim", "--synth", "--gpus-per-node", "8", "--topology", &topo]);
    assert_ne!(code, 0);
    assert!(err.contains("node 0 has 8 GPUs but the topology has 4"), "{err}");
    let (code, _, err) = fairway(&["sim", "--synth", "--preempt", "high"]);
    assert_ne!(code, 0);
    assert!(err.contains("is not PREEMPTOR:VICTIM"), "{err}");
}

#[test]
fn qos_priorities_reorder_the_queue_and_bad_ones_are_refused() {
    let run = |extra: &[&str]| {
        let mut args = vec!["sim", "--synth", "--jobs", "400", "--nodes", "2", "--policy", "multifactor", "--json"];
        args.extend_from_slice(extra);
        let (code, out, err) = fairway(&args);
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["results"][0]["mean_wait"].as_f64().unwrap()
    };
    // On a loaded cluster, putting a tenth of the jobs (QoS high) first changes the waits.
    let plain = run(&[]);
    let with_qos = run(&["--qos-priority", "high=1000,normal=0", "--weight-qos", "100000"]);
    assert_ne!(plain, with_qos, "QoS priorities changed nothing");

    let (code, _, err) = fairway(&["sim", "--synth", "--qos-priority", "high=urgent", "--weight-qos", "1"]);
    assert_ne!(code, 0);
    assert!(err.contains("`high=urgent` is not NAME=PRIORITY"), "{err}");
    let (code, _, err) = fairway(&["sim", "--synth", "--qos-priority", "high=1000"]);
    assert_ne!(code, 0);
    assert!(err.contains("--weight-qos"), "{err}");
}
