//! Tests on a real Slurm (the host's 22.05) started by the harness.

use std::time::Duration;

use fairway_tests::{free_port, processes_mentioning, Cluster, ClusterSpec};

fn fairway_version() -> &'static str {
    fairway_core::VERSION
}

#[test]
fn plugins_load_in_slurmctld_and_a_job_runs() {
    let c = Cluster::start(&ClusterSpec::default()).expect("cluster starts");
    let log = c.log("slurmctld");
    let slurm = c.cmd("scontrol", &["--version"]).unwrap().stdout;
    let slurm = slurm.trim().trim_start_matches("slurm-wlm ").trim_start_matches("slurm ");
    for plugin in ["priority/fairway", "job_submit/fairway"] {
        let line = format!("{plugin}: Fairway {} loaded in slurmctld, built for Slurm {slurm}", fairway_version());
        assert!(log.contains(&line), "missing `{line}` in slurmctld.log:\n{log}");
    }
    let job = c.sbatch("fw_alice", &["--wrap=echo hello from fairway", "-o", "out-%j.txt"]).expect("sbatch");
    c.wait_job(job, &["COMPLETED"], Duration::from_secs(60)).unwrap();
    let out = std::fs::read_to_string(c.dir().join(format!("jobs/out-{job}.txt"))).unwrap();
    assert_eq!(out.trim(), "hello from fairway");
    c.stop().unwrap();
}
