//! `fairway explain` as a user runs it, on real Slurm: a job held by a QoS limit, a job
//! its owner held, the priority sum equal to sprio's, and PrivateData respected.

use std::path::PathBuf;
use std::time::Duration;

use fairway_tests::{Cluster, ClusterSpec, Slurm};

/// The `fairway` command built beside these tests (`make test-slurm` builds it first).
fn fairway_bin() -> String {
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let bin = target.join("debug/fairway");
    assert!(bin.exists(), "{} is missing: cargo build -p fairway-cli", bin.display());
    bin.display().to_string()
}

#[test]
fn explain_says_why_a_job_waits_and_shows_no_one_elses_job() {
    let fairway = fairway_bin();
    let spec = ClusterSpec {
        slurm_conf_extra: vec![
            "PriorityWeightFairshare=1000".into(),
            "PriorityWeightAge=100".into(),
            "PriorityWeightQOS=500".into(),
            "PrivateData=jobs".into(),
        ],
        fairway_toml: Some("[priority]\nmax_wait = \"1-00:00:00\"\n".into()),
        ..ClusterSpec::default()
    };
    let c = Cluster::start(&spec).expect("cluster starts");
    let out = c.cmd("sacctmgr", &["-i", "modify", "qos", "high", "set", "GrpTRES=cpu=1"]).unwrap();
    assert!(out.ok(), "{out:?}");

    let running = c.sbatch("fw_alice", &["--qos=high", "-n", "1", "--wrap=sleep 300"]).unwrap();
    c.wait_job(running, &["RUNNING"], Duration::from_secs(60)).unwrap();
    let limited = c.sbatch("fw_alice", &["--qos=high", "-n", "1", "--wrap=true"]).unwrap();
    let held = c.sbatch("fw_bob", &["--hold", "--wrap=true"]).unwrap();
    let reason = |job: u32| c.cmd("squeue", &["-h", "-j", &job.to_string(), "-o", "%r"]).unwrap().stdout;
    c.wait_until("the QoS limit as the reason", || Ok(reason(limited).trim() == "QOSGrpCpuLimit")).unwrap();

    let explain = |user: &str, job: u32, json: bool| {
        let id = job.to_string();
        let mut args = vec!["explain", id.as_str()];
        if json {
            args.push("--json");
        }
        c.run_as(user, &fairway, &args).unwrap()
    };
    let text = explain("fw_alice", limited, false);
    assert!(text.ok(), "{text:?}");
    eprintln!("{}", text.stdout);
    assert!(text.stdout.contains("the QoS high has reached a limit (Grp Cpu Limit)"), "{}", text.stdout);
    assert!(text.stdout.contains("sacctmgr show qos high"), "{}", text.stdout);
    assert!(text.stdout.contains("of max_wait's 1-00:00:00"), "{}", text.stdout);

    // The breakdown is sprio's, to the unit.
    let sprio = c.cmd("sprio", &["-h", "-j", &limited.to_string(), "-o", "%Y|%F|%Q"]).unwrap().stdout;
    let sprio: Vec<f64> = sprio.trim().split('|').map(|v| v.trim().parse().unwrap()).collect();
    let json: serde_json::Value = serde_json::from_str(&explain("fw_alice", limited, true).stdout).unwrap();
    assert_eq!(json["blocker"]["reason"], "QOSGrpCpuLimit");
    assert_eq!(json["priority"][0]["priority"].as_f64(), Some(sprio[0]), "{json}");
    let factor = |name: &str| {
        json["priority"][0]["factors"].as_array().unwrap().iter().find(|f| f[0] == name).unwrap()[1].as_f64()
    };
    assert_eq!(factor("fairshare"), Some(sprio[1]));
    assert_eq!(factor("qos"), Some(sprio[2]));
    assert!(sprio[2] > 0.0, "QoS high's priority shows in the breakdown");
    assert_eq!(json["user"], "fw_alice");
    assert_eq!(json["queue"][0]["position"], 1, "{json}");

    let bob = explain("fw_bob", held, false);
    assert!(bob.stdout.contains("[JobHeldUser]"), "{bob:?}");
    assert!(bob.stdout.contains(&format!("scontrol release {held}")), "{bob:?}");

    // PrivateData=jobs: fw_bob learns nothing of fw_alice's job.
    let peek = explain("fw_bob", limited, false);
    assert!(!peek.ok(), "{peek:?}");
    assert!(!peek.stdout.contains("QoS high") && !peek.stdout.contains("priority"), "{peek:?}");
    assert_eq!(peek.code, 3, "{peek:?}");
    c.stop().unwrap();
}
