//! `fairway explain` as a user runs it, on real Slurm: a job held by a QoS limit, a job
//! its owner held, the priority sum equal to sprio's, Fairway's terms one by one from
//! the status priority/fairway publishes, and PrivateData respected; `fairway metrics`
//! and `fairway serve` against squeue and sshare.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use fairway_tests::{fairway_bin, free_port, Cluster, ClusterSpec, Slurm};

#[test]
fn explain_says_why_a_job_waits_and_shows_no_one_elses_job() {
    let fairway = fairway_bin();
    let spec = ClusterSpec {
        slurm_conf_extra: vec![
            "PriorityWeightFairshare=1000".into(),
            "PriorityWeightAge=100".into(),
            "PriorityWeightQOS=500".into(),
            "PriorityCalcPeriod=1".into(),
            "PrivateData=jobs".into(),
        ],
        fairway_toml: Some("[priority]\nmax_wait = \"1-00:00:00\"\nweight_predicted_work = 1000\n".into()),
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

    // Fair share: the path from root to the user and the user's rank, as sshare shows
    // them to fw_alice.
    let fs = &json["fair_share"];
    let names: Vec<&str> = fs["path"].as_array().unwrap().iter().map(|l| l["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["root", "ml", "vision", "fw_alice"], "{json}");
    let sshare = c.run_as("fw_alice", "sshare", &["-a", "-h", "-P", "-o", "Account,User,LevelFS,FairShare"]).unwrap();
    let rows: Vec<Vec<&str>> = sshare.stdout.lines().map(|l| l.split('|').map(str::trim).collect()).collect();
    let vision = rows.iter().find(|r| r[0] == "vision" && r[1].is_empty()).unwrap();
    assert_eq!(fs["path"][2]["level_fs"], vision[2], "{json}\n{}", sshare.stdout);
    let alice = rows.iter().find(|r| r[0] == "vision" && r[1] == "fw_alice").unwrap();
    assert_eq!(fs["factor"], alice[3], "{json}\n{}", sshare.stdout);
    let users = rows.iter().filter(|r| !r[1].is_empty()).count();
    assert_eq!(fs["rank"][1], users, "{json}\n{}", sshare.stdout);
    assert!(text.stdout.contains(&format!("fair share of fw_alice in vision: factor {}", alice[3])), "{}", text.stdout);

    let bob = explain("fw_bob", held, false);
    assert!(bob.stdout.contains("[JobHeldUser]"), "{bob:?}");
    assert!(bob.stdout.contains(&format!("scontrol release {held}")), "{bob:?}");

    // PrivateData=jobs: fw_bob learns nothing of fw_alice's job.
    let peek = explain("fw_bob", limited, false);
    assert!(!peek.ok(), "{peek:?}");
    assert!(!peek.stdout.contains("QoS high") && !peek.stdout.contains("priority"), "{peek:?}");
    assert_eq!(peek.code, 3, "{peek:?}");

    // Fairway's terms, one by one, from the status of the next pass. Under
    // PrivateData=jobs only SlurmUser and root may read it.
    let status = c.dir().join("state/fairway-status.json");
    let published = |job: u32| -> bool {
        let Ok(text) = std::fs::read_to_string(&status) else { return false };
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["jobs"].as_array().unwrap().iter().any(|j| j["id"] == job)
    };
    c.wait_until("a pass publishes the job's terms", || Ok(published(limited))).unwrap();
    assert_eq!(std::fs::metadata(&status).unwrap().permissions().mode() & 0o777, 0o600);
    let alice = explain("fw_alice", limited, false);
    assert!(alice.stdout.contains("Fairway's terms: not readable here"), "{alice:?}");
    let site = |c: &Cluster| -> f64 {
        let s = c.cmd("sprio", &["-h", "-j", &limited.to_string(), "-o", "%S"]).unwrap().stdout;
        s.trim().parse().unwrap()
    };
    let admin = c.cmd(&fairway, &["explain", &limited.to_string(), "--json"]).unwrap();
    let admin: serde_json::Value = serde_json::from_str(&admin.stdout).expect("explain --json as root");
    let terms = &admin["fairway_terms"];
    // No history and no time limit: a day is assumed, 1000 / (1 + 24 GPU-hours) = 40.
    assert_eq!(terms["site_bonus"].as_f64(), Some(site(&c)), "{admin}");
    assert_eq!(terms["site_bonus"], 40, "{admin}");
    assert!(terms["expected_runtime"].is_null() && terms["starving_for"].is_null(), "{admin}");

    // job_submit/fairway's decisions: the three jobs above accepted, one refused.
    let refused = c.run_as("fw_bob", "sbatch", &["--comment=fairway: bogus=1", "--wrap=true"]).unwrap();
    assert!(!refused.ok(), "{refused:?}");
    let counters = c.dir().join("state/fairway-submit.json");
    c.wait_until("the counters published", || {
        Ok(std::fs::read_to_string(&counters).is_ok_and(|t| t.contains("\"directive\":1")))
    })
    .unwrap();

    // Metrics, as root (SlurmUser sees every job), against squeue and sshare.
    let metrics = c.cmd(&fairway, &["metrics"]).unwrap();
    assert!(metrics.ok(), "{metrics:?}");
    let m = metrics.stdout;
    eprintln!("{m}");
    let count = |args: &[&str]| c.cmd("squeue", args).unwrap().stdout.lines().count();
    let pending_high = count(&["-h", "-t", "PD", "-q", "high", "-A", "vision"]);
    assert_eq!(pending_high, 1);
    assert!(
        m.contains(&format!(
            "fairway_jobs{{state=\"pending\",partition=\"debug\",qos=\"high\",account=\"vision\"}} {pending_high}\n"
        )),
        "{m}"
    );
    assert!(
        m.contains("fairway_jobs{state=\"running\",partition=\"debug\",qos=\"high\",account=\"vision\"} 1\n"),
        "{m}"
    );
    let shares = c.cmd("sshare", &["-h", "-P", "-A", "vision", "-o", "Account,User,NormShares"]).unwrap().stdout;
    let norm = shares.lines().find(|l| l.split('|').nth(1) == Some("")).unwrap().split('|').nth(2).unwrap().to_string();
    let norm: f64 = norm.trim().parse().unwrap();
    assert!(m.contains(&format!("fairway_account_norm_shares{{account=\"vision\"}} {norm}\n")), "{norm}: {m}");
    assert!(m.contains("fairway_max_wait_seconds 86400\n"), "{m}");
    assert!(m.contains("fairway_starving_jobs{partition=\"debug\"} 0\n"), "{m}");
    assert!(m.contains("\nfairway_priority_pass_jobs "), "{m}");
    let decided = |outcome: &str| -> f64 {
        let prefix = format!("fairway_job_submit_requests_total{{request=\"submit\",outcome=\"{outcome}\"}} ");
        m.lines().find_map(|l| l.strip_prefix(prefix.as_str())).map_or(0.0, |v| v.parse().unwrap())
    };
    assert_eq!(decided("accepted") + decided("changed"), 3.0, "{m}");
    assert!(
        m.contains("fairway_job_submit_requests_total{request=\"submit\",outcome=\"refused\",rule=\"directive\"} 1\n"),
        "{m}"
    );
    assert!(m.ends_with("# EOF\n"));

    // The same over HTTP, as Prometheus scrapes it.
    let addr = format!("127.0.0.1:{}", free_port());
    let mut serve = Command::new(&fairway)
        .args(["serve", "--listen", &addr])
        .env("SLURM_CONF", c.slurm_conf())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut scraped = String::new();
    c.wait_until("fairway serve answers", || {
        let Ok(mut s) = TcpStream::connect(&addr) else { return Ok(false) };
        s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n")?;
        scraped.clear();
        s.read_to_string(&mut scraped)?;
        Ok(true)
    })
    .unwrap();
    let _ = serve.kill();
    let _ = serve.wait();
    assert!(scraped.starts_with("HTTP/1.0 200") || scraped.starts_with("HTTP/1.1 200"), "{scraped}");
    // Header names are case-insensitive (hyper writes them in lower case).
    assert!(scraped.to_ascii_lowercase().contains("content-type: application/openmetrics-text"), "{scraped}");
    assert!(scraped.contains("fairway_account_norm_shares{account=\"vision\"}"), "{scraped}");

    // Without PrivateData=jobs the owner sees the terms too (the file becomes 0644 at
    // the next pass after a reconfigure).
    let conf = std::fs::read_to_string(c.slurm_conf()).unwrap().replace("PrivateData=jobs\n", "");
    std::fs::write(c.slurm_conf(), conf).unwrap();
    assert!(c.cmd("scontrol", &["reconfigure"]).unwrap().ok());
    c.wait_until("the status becomes readable", || {
        Ok(std::fs::metadata(&status)?.permissions().mode() & 0o777 == 0o644)
    })
    .unwrap();
    let alice = explain("fw_alice", limited, false);
    eprintln!("{}", alice.stdout);
    assert!(alice.stdout.contains("Fairway's part of site: +40 ="), "{alice:?}");
    assert!(alice.stdout.contains("predicted work (run time unknown: one day assumed)"), "{alice:?}");
    c.stop().unwrap();
}
