//! `fairway predict` and `fairway trace` as a user runs them.

use std::path::PathBuf;
use std::process::Command;

fn fairway(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fairway")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn eagle() -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../trace/fixtures/eagle_sample.csv");
    p.to_str().unwrap().to_string()
}

#[test]
fn eval_on_eagle_as_json() {
    let (code, stdout, stderr) = fairway(&["predict", "eval", "--trace", &eagle(), "--format", "eagle", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["train_jobs"], 700);
    assert_eq!(v["test_jobs"], 300);
    let results = v["results"].as_array().unwrap();
    let names: Vec<&str> = results.iter().map(|r| r["predictor"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["time limit", "last two (Tsafrir)", "learned: typical", "learned: upper q, fixed", "learned: upper q, online"]
    );
    for r in results {
        assert_eq!(r["jobs"], 300, "{r}");
        for k in ["mae_s", "median_ae_s"] {
            assert!(r[k].as_f64().unwrap() >= 0.0, "{r}");
        }
        for k in ["within_50", "within_100", "under_rate"] {
            assert!((0.0..=1.0).contains(&r[k].as_f64().unwrap()), "{r}");
        }
        assert!(r["within_50"].as_f64() <= r["within_100"].as_f64());
    }
    // Sanity: Eagle users ask for ~3x what they use, so the limit rarely under-predicts.
    assert!(results[0]["under_rate"].as_f64().unwrap() < 0.05);
    let cal = &v["calibration"];
    assert_eq!(cal["fit_jobs"].as_u64().unwrap() + cal["calibration_jobs"].as_u64().unwrap(), 700);
    assert!(cal["under_rate"].as_f64().unwrap() <= 0.15);
    // Eagle's 300 newest jobs are one burst: none ends before the last is submitted, so
    // the online calibration has nothing to learn from and equals the fixed offsets.
    assert_eq!(v["online"]["jobs"], 0);
    assert_eq!(results[3]["under_rate"], results[4]["under_rate"]);
}

#[test]
fn eval_prints_a_table_and_csv() {
    let (code, stdout, stderr) = fairway(&["predict", "eval", "--trace", &eagle(), "--format", "eagle"]);
    assert_eq!(code, 0, "{stderr}");
    for want in [
        "MAE (s)",
        "median AE (s)",
        "within ±50%",
        "under-predicted",
        "last two (Tsafrir)",
        "typical run time: MAE",
        "upper quantile: 14.7% under-predicted online",
    ] {
        assert!(stdout.contains(want), "{want} missing from\n{stdout}");
    }
    // Not a terminal: no progress bar on stderr.
    assert!(stderr.is_empty(), "{stderr}");
    let (code, stdout, _) = fairway(&["predict", "eval", "--trace", &eagle(), "--format", "eagle", "--csv"]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 6);
    assert!(lines[0].starts_with("predictor,jobs,mae_s"));
}

#[test]
fn synth_then_train_writes_a_loadable_model() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("synth.txt");
    let model = dir.path().join("model.json");
    let (code, _, stderr) =
        fairway(&["trace", "synth", "--jobs", "300", "--seed", "5", "--out", trace.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let text = std::fs::read_to_string(&trace).unwrap();
    assert!(text.starts_with("JobID|User|Account|JobName|"));
    assert_eq!(text.lines().count(), 301);
    let (code, stdout, stderr) = fairway(&[
        "predict",
        "train",
        "--trace",
        trace.to_str().unwrap(),
        "--format",
        "sacct",
        "--out",
        model.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("calibrated on"), "{stdout}");
    fairway_core::predict::LearnedPredictor::load(&model).unwrap();
}

#[test]
fn a_drifting_workload_scored_with_a_model_trained_before_the_drift() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let run = |args: &[&str]| {
        let (code, stdout, stderr) = fairway(args);
        assert_eq!(code, 0, "{args:?}: {stderr}");
        stdout
    };
    run(&["trace", "synth", "--jobs", "1500", "--seed", "3", "--out", &path("before.txt")]);
    run(&[
        "trace",
        "synth",
        "--jobs",
        "1500",
        "--seed",
        "3",
        "--drift",
        "2.5",
        "--drift-from",
        "0",
        "--out",
        &path("after.txt"),
    ]);
    run(&["predict", "train", "--trace", &path("before.txt"), "--format", "sacct", "--out", &path("model.json")]);
    let out = run(&[
        "predict",
        "eval",
        "--trace",
        &path("after.txt"),
        "--format",
        "sacct",
        "--model",
        &path("model.json"),
        "--json",
        "--plot",
        &path("windows.svg"),
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((v["train_jobs"].as_u64(), v["test_jobs"].as_u64()), (Some(0), Some(1500)));
    let under = |i: usize| v["results"][i]["under_rate"].as_f64().unwrap();
    assert!(under(3) > 0.3, "fixed offsets: {}", under(3));
    assert!(under(4) < 0.22, "online: {}", under(4));
    assert!(v["online"]["shift"].as_f64().unwrap() > 0.3, "{}", v["online"]);
    let svg = std::fs::read_to_string(path("windows.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("calibrated online") && svg.contains("target"), "{svg:.300}");
    // Step 0: the model's offsets as trained.
    let out = run(&[
        "predict",
        "eval",
        "--trace",
        &path("after.txt"),
        "--format",
        "sacct",
        "--model",
        &path("model.json"),
        "--online-step",
        "0",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["results"][3]["under_rate"], v["results"][4]["under_rate"]);
}

#[test]
fn bad_input_is_reported_not_panicked() {
    let (code, _, stderr) = fairway(&["predict", "eval", "--trace", "/nonexistent", "--format", "eagle"]);
    assert_eq!(code, 3, "an unreadable file is a failure, not a usage error");
    assert!(stderr.contains("/nonexistent"), "{stderr}");
    let (code, _, stderr) = fairway(&["predict", "eval", "--trace", &eagle(), "--format", "nope"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("sacct-json"), "{stderr}");
    let (code, _, stderr) =
        fairway(&["predict", "eval", "--trace", &eagle(), "--format", "eagle", "--online-step", "2"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("online step 2 is not in [0, 1]"), "{stderr}");
    let (code, _, stderr) = fairway(&["trace", "synth", "--drift", "0", "--out", "-"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("--drift"), "{stderr}");
}
