//! A learned run-time model (what `fairway predict train` writes) in the plugins on real
//! Slurm: priority/fairway and job_submit/fairway load it from fairway.toml's
//! `[predictor] model`, predict with it where they would otherwise use the mean of the
//! last two runs (the predicted-work term, `time=auto`), and take a new model without a
//! restart: job_submit when the file changes, priority/fairway on `scontrol reconfigure`.

use fairway_core::predict::{Features, JobKey, JobRequest, LearnedPredictor, RuntimePredictor, TrainConfig};
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
