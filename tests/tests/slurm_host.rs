//! Foundation tests on a real Slurm (the host's 22.05) started by the harness.

use std::net::TcpListener;
use std::process::Command;
use std::time::Duration;

use fairway_tests::{processes_mentioning, Cluster, ClusterSpec, Slurm};

fn slurm_version(c: &Cluster) -> String {
    let v = c.cmd("scontrol", &["--version"]).unwrap().stdout;
    v.split_whitespace().last().unwrap_or_default().to_string()
}

#[test]
fn plugins_load_in_slurmctld_and_a_job_runs() {
    let c = Cluster::start(&ClusterSpec::default()).expect("cluster starts");
    let log = c.log("slurmctld");
    let slurm = slurm_version(&c);
    for plugin in ["priority/fairway", "job_submit/fairway"] {
        let line = format!("{plugin}: Fairway {} loaded in slurmctld, built for Slurm {slurm}", fairway_core::VERSION);
        assert!(log.contains(&line), "missing `{line}` in slurmctld.log:\n{log}");
    }
    assert!(log.contains("fairway.toml not found: Fairway's terms are off"), "{log}");

    let job = c.sbatch("fw_alice", &["--wrap=echo hello from fairway", "-o", "out-%j.txt"]).expect("sbatch");
    c.wait_job(job, &["COMPLETED"], Duration::from_secs(60)).unwrap();
    let out = std::fs::read_to_string(c.dir().join(format!("jobs/out-{job}.txt"))).unwrap();
    assert_eq!(out.trim(), "hello from fairway");
    c.stop().unwrap();
}

/// sshare loads the priority plugin itself under classic fair share (it calls
/// priority_p_calc_fs_factor for the FairShare column), outside slurmctld, where
/// slurmctld-only symbols do not exist.
#[test]
fn sshare_loads_the_priority_plugin_outside_slurmctld() {
    let spec = ClusterSpec {
        slurm_conf_extra: vec!["PriorityFlags=NO_FAIR_TREE".into()],
        fairway_toml: Some("[priority]\nweight_deadline = 10\n".into()),
        ..ClusterSpec::default()
    };
    let c = Cluster::start(&spec).expect("cluster starts");

    let out = Command::new("sshare")
        // -vv: debug level, where the plugin announces itself in clients
        .args(["-vv", "-a", "-P", "-o", "Account,User,NormShares,EffectvUsage,FairShare"])
        .env("SLURM_CONF", c.slurm_conf())
        .env("LD_DEBUG", "files")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "sshare failed: {stderr}");
    let plugin = c.plugin_dir().join("priority_fairway.so");
    let loaded = format!("file={}", plugin.display());
    assert!(
        stderr.lines().any(|l| l.contains(&loaded) && l.contains("dynamically loaded")),
        "sshare did not load {loaded}"
    );
    // The plugin's own run-time probes for slurmctld-only symbols are expected to fail
    // here; any other unresolved symbol is a linking bug.
    let probes = ["slurmctld_config", "slurmctld_tres_cnt"];
    let unresolved: Vec<&str> = stderr
        .lines()
        .filter(|l| {
            l.contains("undefined symbol") && !probes.iter().any(|p| l.contains(&format!("undefined symbol: {p} ")))
        })
        .collect();
    assert!(unresolved.is_empty(), "{unresolved:?}");
    let init = format!("priority/fairway: Fairway {} loaded in sshare", fairway_core::VERSION);
    assert!(stderr.contains(&init), "init did not run in sshare");

    // With no usage yet, the classic factor is 2^0 = 1 for every user with shares: the
    // long double arguments crossed the C shim intact.
    let users: Vec<Vec<&str>> =
        stdout.lines().skip(1).map(|l| l.split('|').collect()).filter(|f: &Vec<&str>| !f[1].is_empty()).collect();
    assert!(users.len() >= 2, "no user rows:\n{stdout}");
    for f in users {
        assert_eq!(f[4], "1.000000", "FairShare of {f:?}");
    }
    c.stop().unwrap();
}

/// A panic inside a plugin callback is caught at the FFI boundary: the submission
/// fails with an error, slurmctld stays up and says what happened.
#[test]
fn a_panic_in_a_callback_is_contained() {
    let mut c = Cluster::start(&ClusterSpec::default()).expect("cluster starts");
    let err = c.sbatch("fw_bob", &["--comment=fairway-test:panic", "--wrap=true"]).expect_err("must be rejected");
    assert!(err.contains("Batch job submission failed"), "{err}");

    assert!(c.is_running("slurmctld"), "slurmctld died:\n{}", c.log_tails());
    assert!(c.cmd("scontrol", &["ping"]).unwrap().stdout.contains("is UP"));
    let log = c.log("slurmctld");
    assert!(
        log.contains("job_submit/fairway: job_submit: internal error (panic: fault injected by job comment at crates/ffi/src/plugin/mod.rs"),
        "no panic report in slurmctld.log:\n{log}"
    );
    // And the next job is served normally.
    let job = c.sbatch("fw_bob", &["--wrap=true"]).expect("slurmctld still accepts jobs");
    c.wait_job(job, &["COMPLETED"], Duration::from_secs(60)).unwrap();
    c.stop().unwrap();
}

/// An invalid fairway.toml stops slurmctld at startup with file, line, key and why,
/// the way Slurm treats an invalid slurm.conf.
#[test]
fn invalid_fairway_toml_is_reported_with_file_line_and_key() {
    for (toml, expect) in [
        (
            "[priority]\nweight_deadline = 1\nweight_bogus = 3\n",
            "fairway.toml:3:1: key `priority.weight_bogus`: unknown field `weight_bogus`",
        ),
        (
            "[priority]\nweight_deadline = \"lots\"\n",
            "fairway.toml:2:19: key `priority.weight_deadline`: invalid type: string \"lots\", expected u32",
        ),
        ("\n[predictor]\nquantile = 2.0\n", "fairway.toml:3:12: key `predictor.quantile`: 2 is out of range"),
    ] {
        let spec = ClusterSpec { fairway_toml: Some(toml.into()), slurmd: false, ..ClusterSpec::default() };
        let err = match Cluster::start(&spec) {
            Ok(_) => panic!("slurmctld started with an invalid fairway.toml:\n{toml}"),
            Err(e) => format!("{e:#}"),
        };
        assert!(err.contains("slurmctld exited"), "{err}");
        assert!(err.contains(expect), "expected `{expect}` in:\n{err}");
    }
}

/// The harness starts and stops repeatedly and leaves no daemon, port or file behind.
#[test]
fn harness_restarts_cleanly_and_leaves_nothing_behind() {
    for round in 0..2 {
        let c = Cluster::start(&ClusterSpec::default()).expect("cluster starts");
        // A running job at teardown time: its slurmstepd must go too.
        let job = c.sbatch("fw_alice", &["--wrap=sleep 300"]).unwrap();
        c.wait_job(job, &["RUNNING"], Duration::from_secs(60)).unwrap();
        let dir = c.dir().to_path_buf();
        let ports = c.ports();
        c.stop().unwrap();
        assert!(
            processes_mentioning(&dir).is_empty(),
            "round {round}: processes left: {:?}",
            processes_mentioning(&dir)
        );
        assert!(!dir.exists(), "round {round}: {} left behind", dir.display());
        for p in ports {
            assert!(TcpListener::bind(("127.0.0.1", p)).is_ok(), "round {round}: port {p} still bound");
        }
    }
}

/// The harness describes GPUs through gres.conf (here without device files: this
/// machine has none) and Slurm schedules them.
#[test]
fn gres_from_the_spec_reaches_slurm() {
    let spec = ClusterSpec {
        gres: Some(("gpu:a100:4".into(), "Name=gpu Type=a100 File={dir}/dev/nvidia[0-3]\n".into())),
        ..ClusterSpec::default()
    };
    let c = Cluster::start(&spec).expect("cluster starts");
    let node = c.cmd("scontrol", &["-o", "show", "node", &c.node]).unwrap().stdout;
    assert!(node.contains("Gres=gpu:a100:4"), "{node}");
    let job = c.sbatch("fw_alice", &["--gpus=a100:2", "--wrap=true"]).expect("sbatch");
    c.wait_job(job, &["COMPLETED"], Duration::from_secs(60)).unwrap();
    // slurmdbd records the job asynchronously.
    c.wait_until("sacct shows the job's GPUs", || {
        let acct = c.cmd("sacct", &["-n", "-X", "-P", "-j", &job.to_string(), "-o", "AllocTRES"])?.stdout;
        Ok(acct.contains("gres/gpu=2"))
    })
    .unwrap();
    let err = c.sbatch("fw_alice", &["--gpus=a100:8", "--wrap=true"]).expect_err("more GPUs than exist");
    assert!(err.contains("Requested node configuration is not available"), "{err}");
    c.stop().unwrap();
}

/// slurmctld.log explains a configuration that would count Fairway's terms twice, as
/// `fairway check-config` does.
#[test]
fn slurmctld_log_explains_conflicting_priority_settings() {
    let spec = ClusterSpec {
        slurm_conf_extra: vec!["PrioritySiteFactorPlugin=site_factor/fairway".into()],
        slurmd: false,
        ..ClusterSpec::default()
    };
    let c = Cluster::start(&spec).expect("cluster starts");
    let log = c.log("slurmctld");
    assert!(log.contains("priority/fairway: PriorityType=priority/fairway and PrioritySiteFactorPlugin=site_factor/fairway both add Fairway's terms"), "{log}");
    c.stop().unwrap();
}
