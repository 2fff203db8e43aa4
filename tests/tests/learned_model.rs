//! A learned run-time model (what `fairway predict train` writes) in the plugins on real
//! Slurm: priority/fairway and job_submit/fairway load it from fairway.toml's
//! `[predictor] model`, predict with it where they would otherwise use the mean of the
//! last two runs (the predicted-work term, `time=auto`), and take a new model without a
//! restart: job_submit when the file changes, priority/fairway on `scontrol reconfigure`.
//! Its upper quantile is calibrated online: jobs that outlive their prediction widen the
//! `time=auto` limits of the jobs submitted after them.

use std::time::Duration;

use fairway_core::predict::{
    Features, JobKey, JobRequest, LearnedPredictor, OnlineCalibration, RuntimePredictor, TrainConfig,
};
use fairway_tests::{Cluster, ClusterSpec, Slurm};

/// A model trained on jobs that all ran about `runtime` seconds (0-4% more).
fn model_json(runtime: u64) -> String {
    let history = RuntimePredictor::default();
    let examples: Vec<(Features, u64, Option<u64>)> = (0..80u32)
        .map(|i| {
            let req = JobRequest {
                key: JobKey { user: 1000 + i % 3, account: "vision".into(), name: format!("job{}", i % 5), gpus: 0 },
                time_limit: Some(3 * 3600),
                nodes: Some(1),
                cpus: Some(1),
                submit: 1_700_000_000 + i64::from(i) * 600,
            };
            (Features::new(&history, &req), runtime + u64::from(i % 5) * runtime / 100, req.time_limit)
        })
        .collect();
    let model = LearnedPredictor::train(&examples, &TrainConfig::default()).expect("model trains");
    let file = std::env::temp_dir().join(format!("fairway-model-{}-{runtime}.json", std::process::id()));
    model.save(&file).unwrap();
    let json = std::fs::read_to_string(&file).unwrap();
    let _ = std::fs::remove_file(&file);
    json
}

fn show(c: &Cluster, job: u32) -> String {
    c.cmd("scontrol", &["-o", "show", "job", &job.to_string()]).unwrap().stdout
}

fn field(shown: &str, key: &str) -> String {
    let prefix = format!("{key}=");
    shown.split_whitespace().find_map(|f| f.strip_prefix(prefix.as_str())).unwrap_or("").to_string()
}

/// Submits a held `time=auto` job for a key with no history; returns the run time the
/// job_submit plugin predicted (recorded in AdminComment) and the limit it set (minutes).
fn time_auto(c: &Cluster, name: &str) -> (u64, String) {
    let out = c
        .run_as(
            "fw_alice",
            "sbatch",
            &["--parsable", "-J", name, "--comment=fairway: time=auto", "--hold", "--wrap=true"],
        )
        .unwrap();
    assert!(out.ok(), "{out:?}");
    let j = show(c, out.stdout.trim().parse().unwrap());
    let predicted = field(&j, "AdminComment")
        .strip_prefix("fairway:predicted_runtime=")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no prediction recorded: {j}"));
    (predicted, field(&j, "TimeLimit"))
}

/// The run time the priority plugin assumed for `job`, from its DebugFlags=Priority line.
fn expected_runtime(c: &Cluster, job: u32) -> Option<u64> {
    let tag = format!("job_id={job} ");
    let log = c.log("slurmctld");
    let line = log.lines().rev().find(|l| l.contains("Fairway terms") && l.contains(&tag))?;
    let rest = line.split("expected_runtime=Some(").nth(1)?;
    rest.split(')').next()?.parse().ok()
}

#[test]
fn plugins_predict_with_a_learned_model_and_reload_it() {
    let spec = ClusterSpec {
        slurm_conf_extra: vec![
            "PriorityCalcPeriod=1".into(),
            "PriorityWeightAge=0".into(),
            "PriorityWeightFairshare=0".into(),
            "DebugFlags=Priority".into(),
        ],
        job_submit_plugins: vec!["fairway".into()],
        fairway_toml: Some(
            "[priority]\nweight_predicted_work = 100\n\n[predictor]\nmodel = \"model.json\"\n\n\
             [job_submit.time]\nauto_margin = 0.5\nrecord_prediction = true\n"
                .into(),
        ),
        config_files: vec![("model.json".into(), model_json(300))],
        ..ClusterSpec::default()
    };
    let c = Cluster::start(&spec).expect("cluster starts");
    let log = c.log("slurmctld");
    assert!(
        log.matches("learned run-time model").count() >= 2,
        "priority/fairway and job_submit/fairway should both load the model:\n{log}"
    );

    // job_submit: a job never seen before gets the model's estimate (about 300 s), where
    // the mean of the last two runs would have nothing.
    let (predicted, limit) = time_auto(&c, "fresh-a");
    eprintln!("model of ~300 s: job_submit predicted {predicted} s, time=auto set {limit}");
    assert!((250..=400).contains(&predicted), "predicted {predicted} s");
    assert_eq!(limit, format!("00:{:02}:00", (predicted as f64 * 1.5 / 60.0).ceil() as u64));

    // priority/fairway: the predicted-work term assumes the model's run time, not the
    // 30-minute limit a job with no history would otherwise be taken at.
    let out = c.cmd("scontrol", &["update", &format!("NodeName={}", c.node), "State=DRAIN", "Reason=model"]).unwrap();
    assert!(out.ok(), "{out:?}");
    let job = c.sbatch("fw_bob", &["-J", "fresh-b", "-t", "30", "--wrap=true"]).unwrap();
    c.wait_until("the priority plugin logs the job's terms", || Ok(expected_runtime(&c, job).is_some())).unwrap();
    let assumed = expected_runtime(&c, job).unwrap();
    eprintln!("model of ~300 s: priority/fairway assumed {assumed} s for a 30-minute job");
    assert!((250..=400).contains(&assumed), "priority/fairway assumed {assumed} s");

    // A new model (about 1200 s): job_submit takes it when the file changes, the
    // priority plugin on `scontrol reconfigure`.
    std::fs::write(c.slurm_conf().with_file_name("model.json"), model_json(1200)).unwrap();
    let (predicted, _) = time_auto(&c, "fresh-c");
    assert!((1000..=1600).contains(&predicted), "job_submit kept the old model: {predicted} s");
    let loads = c.log("slurmctld").matches("learned run-time model").count();
    assert!(c.cmd("scontrol", &["reconfigure"]).unwrap().ok());
    c.wait_until("priority/fairway reloads the model", || {
        Ok(c.log("slurmctld").matches("learned run-time model").count() > loads)
    })
    .unwrap();
    let job = c.sbatch("fw_bob", &["-J", "fresh-d", "-t", "60", "--wrap=true"]).unwrap();
    c.wait_until("the priority plugin logs the job's terms", || Ok(expected_runtime(&c, job).is_some())).unwrap();
    let assumed = expected_runtime(&c, job).unwrap();
    eprintln!("model of ~1200 s: job_submit predicted {predicted} s, priority/fairway assumed {assumed} s");
    assert!((1000..=1600).contains(&assumed), "priority/fairway kept the old model: {assumed} s");

    // A model file that does not load keeps the one in use, and says why.
    std::fs::write(c.slurm_conf().with_file_name("model.json"), "{ not a model").unwrap();
    assert!(c.cmd("scontrol", &["reconfigure"]).unwrap().ok());
    c.wait_until("the bad model is reported", || Ok(c.log("slurmctld").contains("keeping the model loaded before")))
        .unwrap();
    let (predicted, _) = time_auto(&c, "fresh-e");
    assert!((1000..=1600).contains(&predicted), "a bad model file replaced the good one: {predicted} s");
    c.stop().unwrap();
}

/// Minutes of a `TimeLimit` of under an hour (`00:MM:00`).
fn minutes(limit: &str) -> u64 {
    limit.split(':').nth(1).and_then(|m| m.parse().ok()).unwrap_or_else(|| panic!("limit {limit}"))
}

/// A cluster whose model predicts jobs of about 20 s, with a large calibration step (each
/// miss multiplies the upper quantile by e^(0.5 × 0.85) ≈ 1.53), and the Fairway priority
/// plugin `site_factor` says (site_factor/fairway on multifactor, else priority/fairway).
fn drifting_cluster(site_factor: bool) -> Cluster {
    let mut spec = ClusterSpec {
        job_submit_plugins: vec!["fairway".into()],
        fairway_toml: Some(
            "[predictor]\nmodel = \"model.json\"\ncalibration_step = 0.5\n\n\
             [job_submit.time]\nauto_margin = 2.0\nrecord_prediction = true\n"
                .into(),
        ),
        config_files: vec![("model.json".into(), model_json(20))],
        ..ClusterSpec::default()
    };
    if site_factor {
        spec.priority_type = "priority/multifactor".into();
        spec.slurm_conf_extra =
            vec!["PrioritySiteFactorPlugin=site_factor/fairway".into(), "PriorityCalcPeriod=1".into()];
    }
    let c = Cluster::start(&spec).expect("cluster starts");
    assert!(c.log("slurmctld").contains("starting from the model's own offsets"), "{}", c.log("slurmctld"));
    c
}

/// Two `time=auto` jobs that run 30 s where about 20 s was predicted: both outlive their
/// prediction (their limit, 3× it, lets them finish). Returns the time=auto prediction
/// and limit before and after, and the saved calibration once it learned from both.
fn run_drifting_jobs(c: &Cluster) -> ((u64, String), (u64, String), OnlineCalibration) {
    let state = c.dir().join("state/fairway-calibration.json");
    let before = time_auto(c, "drift-probe-a");
    eprintln!("before: predicted {} s, time=auto set {}", before.0, before.1);
    assert!((15..=30).contains(&before.0), "predicted {} s", before.0);
    let jobs: Vec<u32> = (0..2)
        .map(|i| {
            c.sbatch("fw_alice", &["-J", &format!("drift-{i}"), "--comment=fairway: time=auto", "--wrap=sleep 30"])
                .unwrap()
        })
        .collect();
    for &j in &jobs {
        assert_eq!(c.wait_job(j, &["COMPLETED", "TIMEOUT", "FAILED"], Duration::from_secs(180)).unwrap(), "COMPLETED");
    }
    c.wait_until("the calibration learned from both jobs", || {
        Ok(OnlineCalibration::load(&state).ok().flatten().is_some_and(|s| s.jobs == 2))
    })
    .unwrap();
    let learned = OnlineCalibration::load(&state).unwrap().unwrap();
    assert_eq!(learned.misses, 2, "{learned:?}");
    assert!((learned.shift - 0.85).abs() < 1e-9, "{learned:?}");

    // The next time=auto job: the prediction and its limit widen by e^0.85 ≈ 2.3.
    let after = time_auto(c, "drift-probe-b");
    eprintln!("after two misses: predicted {} s, time=auto set {}", after.0, after.1);
    let expected = ((before.0 as f64).ln_1p() + learned.shift).exp_m1();
    assert!(
        (after.0 as f64 - expected).abs() <= 0.1 * expected,
        "predicted {} s, expected about {expected:.0}",
        after.0
    );
    assert!(minutes(&after.1) > minutes(&before.1), "{} → {}", before.1, after.1);
    (before, after, learned)
}

#[test]
fn time_auto_limits_widen_when_jobs_outlive_their_prediction() {
    let mut c = drifting_cluster(false);
    let state = c.dir().join("state/fairway-calibration.json");
    let ((before, _), (after, _), _) = run_drifting_jobs(&c);

    // The calibration is saved as jobs end: it survives slurmctld's kill -9.
    c.kill_slurmctld().unwrap();
    c.restart_slurmctld().unwrap();
    assert!(c.log("slurmctld").contains("after 2 finished jobs"), "{}", c.log("slurmctld"));
    assert_eq!(time_auto(&c, "drift-probe-c").0, after);

    // A corrupt state file: job_submit says so and uses the model's own offsets; a
    // restarted slurmctld says so too, starts again from them, and carries on.
    std::fs::write(&state, "{ not a calibration").unwrap();
    assert_eq!(time_auto(&c, "drift-probe-d").0, before);
    assert!(c.log("slurmctld").contains("not a calibration state"), "{}", c.log("slurmctld"));
    c.kill_slurmctld().unwrap();
    c.restart_slurmctld().unwrap();
    let log = c.log("slurmctld");
    assert!(log.contains("online calibration starts again from the model's own offsets"), "{log}");
    // slurmctld's plugin, the file's writer, keeps the bad file aside for the admin.
    let kept = state.with_file_name("fairway-calibration.json.unreadable");
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), "{ not a calibration");
    assert!(c.is_running("slurmctld"));
    assert_eq!(time_auto(&c, "drift-probe-e").0, before);
    c.stop().unwrap();
}

/// Sites on priority/multifactor: site_factor/fairway learns from the jobs that ended at
/// its next update (every `PriorityCalcPeriod`).
#[test]
fn site_factor_plugin_calibrates_time_auto_limits_too() {
    let c = drifting_cluster(true);
    assert!(c.log("slurmctld").contains("site_factor/fairway: Fairway"), "{}", c.log("slurmctld"));
    run_drifting_jobs(&c);
    c.stop().unwrap();
}

/// `[job_submit.time] predicted_limits = "extended"`: a `time=auto` job that outlives its
/// predicted limit is not killed at it. priority/fairway extends the limit before it runs
/// out (seen in scontrol while the job runs, logged, and in the accounting database) and
/// the job completes. The same job submitted while the setting was `on_request` (time=auto
/// as before) is killed at its predicted limit: what the extension saves.
#[test]
fn predicted_limits_are_extended_before_they_run_out() {
    let toml = |mode: &str| {
        format!(
            "[predictor]\nmodel = \"model.json\"\n\n[job_submit.time]\nauto_margin = 0.5\n\
             predicted_limits = \"{mode}\"\nmin_predicted_limit = \"1:00\"\n"
        )
    };
    let spec = ClusterSpec {
        slurm_conf_extra: vec!["PriorityCalcPeriod=1".into()],
        job_submit_plugins: vec!["fairway".into()],
        fairway_toml: Some(toml("on_request")),
        config_files: vec![("model.json".into(), model_json(20))],
        ..ClusterSpec::default()
    };
    let c = Cluster::start(&spec).expect("cluster starts");
    // About 20 s predicted: a one-minute limit, for jobs that run 100 s.
    let args = ["--comment=fairway: time=auto", "--wrap=sleep 100"];
    let killed = c.sbatch("fw_alice", &[&["-J", "long-a"][..], &args].concat()).unwrap();
    std::fs::write(c.slurm_conf().with_file_name("fairway.toml"), toml("extended")).unwrap();
    // job_submit/fairway rereads an edited fairway.toml once it has been at rest a moment.
    c.wait_until("job_submit/fairway reads the new fairway.toml", || {
        let probe = c
            .sbatch("fw_alice", &["-J", "probe", "--hold", "--comment=fairway: time=auto", "--wrap=true"])
            .map_err(anyhow::Error::msg)?;
        let extended = show(&c, probe).contains("fairway:extend_to");
        c.cmd("scancel", &[&probe.to_string()])?;
        Ok(extended)
    })
    .unwrap();
    let out = c.run_as("fw_alice", "sbatch", &[&["--parsable", "-J", "long-b"][..], &args].concat()).unwrap();
    assert!(out.ok(), "{out:?}");
    eprint!("{}", out.stderr);
    let kept: u32 = out.stdout.trim().parse().unwrap();
    let shown = show(&c, kept);
    assert_eq!(field(&shown, "TimeLimit"), "00:01:00", "{shown}");
    assert!(field(&shown, "AdminComment").contains("fairway:extend_to=UNLIMITED"), "{shown}");
    let shown = show(&c, killed);
    assert_eq!(field(&shown, "TimeLimit"), "00:01:00", "{shown}");
    assert!(!shown.contains("fairway:extend_to"), "{shown}");

    c.wait_until("the predicted limit is extended", || Ok(minutes(&field(&show(&c, kept), "TimeLimit")) > 1)).unwrap();
    let limit = field(&show(&c, kept), "TimeLimit");
    eprintln!("job {kept}: limit 00:01:00 extended to {limit} while it runs");
    let log = c.log("slurmctld");
    assert!(log.contains(&format!("JobId={kept}: predicted time limit 1 min extended")), "{log}");
    let end = ["COMPLETED", "TIMEOUT", "FAILED", "CANCELLED"];
    assert_eq!(c.wait_job(killed, &end, Duration::from_secs(180)).unwrap(), "TIMEOUT");
    assert_eq!(c.wait_job(kept, &end, Duration::from_secs(240)).unwrap(), "COMPLETED");
    c.wait_until("the accounting database has the extended limit", || {
        let out = c.cmd("sacct", &["-n", "-X", "-P", "-j", &kept.to_string(), "-o", "Timelimit"])?;
        Ok(out.stdout.trim().split(':').nth(1).and_then(|m| m.parse::<u64>().ok()).is_some_and(|m| m > 1))
    })
    .unwrap();
    let out =
        c.cmd("sacct", &["-X", "-j", &format!("{killed},{kept}"), "-o", "JobID,JobName,State,Timelimit"]).unwrap();
    eprint!("{}", out.stdout);
    c.stop().unwrap();
}
