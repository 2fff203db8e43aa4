//! Usage survives a crash (kill -9 of slurmctld loses at most one calc period) and a
//! rollback to priority/multifactor.

use std::time::Duration;

use fairway_tests::fairshare::{raw_usage, wait_for_decay_pass};
use fairway_tests::{Cluster, ClusterSpec, Slurm};

/// Usage survives kill -9 of slurmctld, and a rollback to priority/multifactor.
///
/// The site ran multifactor until 30 days ago (its last-decay file says so: the clock has
/// moved 30 days since), then Fairway. Rolled back, multifactor must continue from
/// Fairway's last pass, as it would have from its own: it decays over one calc period,
/// not over the 30 days (with a 7-day half-life that would leave 5% of everyone's usage).
#[test]
fn usage_survives_kill_9_and_a_rollback_to_multifactor() {
    let spec = ClusterSpec {
        slurm_conf_extra: vec!["PriorityCalcPeriod=1".into(), "PriorityWeightFairshare=1000".into()],
        ..ClusterSpec::default()
    };
    let mut c = Cluster::start(&spec).expect("cluster starts");
    let multifactor_file = c.dir().join("state/priority_last_decay_ran");
    c.kill_slurmctld().unwrap();
    let month_ago =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64 - 30 * 86_400;
    // Slurm's pack_time: last pass, last reset, each a big-endian int64.
    std::fs::write(&multifactor_file, [month_ago.to_be_bytes(), 0i64.to_be_bytes()].concat()).unwrap();
    c.restart_slurmctld().unwrap();

    let job = c.sbatch("fw_alice", &["-n", "2", "--wrap=sleep 10"]).unwrap();
    c.wait_job(job, &["COMPLETED"], Duration::from_secs(60)).unwrap();
    wait_for_decay_pass(&c);
    let before = raw_usage(&c, "fw_alice");
    assert!(before >= 15.0, "2 CPUs × 10 s should be ~20 CPU-seconds, got {before}");

    c.kill_slurmctld().unwrap();
    c.restart_slurmctld().unwrap();
    let after = raw_usage(&c, "fw_alice");
    eprintln!("RawUsage of fw_alice: {before} before kill -9, {after} after restart");
    // Decay over one calc period with a 7-day half-life is ~0.007%; allow rounding.
    assert!((after - before).abs() <= 1.0, "usage changed across the crash: {before} -> {after}");
    assert!(c.log("slurmctld").contains("fairway"), "plugin did not load after restart");

    // Roll back: the same StateSaveLocation, PriorityType=priority/multifactor.
    c.kill_slurmctld().unwrap();
    let conf = std::fs::read_to_string(c.slurm_conf()).unwrap();
    assert!(conf.contains("PriorityType=priority/fairway"), "{conf}");
    std::fs::write(c.slurm_conf(), conf.replace("PriorityType=priority/fairway", "PriorityType=priority/multifactor"))
        .unwrap();
    let fairway_pass = std::fs::metadata(&multifactor_file).and_then(|m| m.modified()).ok();
    c.restart_slurmctld().unwrap();
    c.wait_until("multifactor's first decay pass", || {
        Ok(std::fs::metadata(&multifactor_file).and_then(|m| m.modified()).ok() != fairway_pass)
    })
    .unwrap();
    let rolled_back = raw_usage(&c, "fw_alice");
    eprintln!("RawUsage of fw_alice: {before} under Fairway, {rolled_back} after multifactor's first pass");
    assert!(
        (rolled_back - before).abs() <= 1.0,
        "multifactor decayed usage over more than a calc period: {before} -> {rolled_back}"
    );
    let types = c.cmd("scontrol", &["show", "config"]).unwrap().stdout;
    assert!(types.lines().any(|l| l.starts_with("PriorityType") && l.contains("priority/multifactor")), "{types}");
    c.stop().unwrap();
}

/// PriorityUsageResetPeriod=NOW clears usage when slurmctld starts with it.
#[test]
fn usage_reset_now_clears_usage_on_restart() {
    let spec = ClusterSpec {
        slurm_conf_extra: vec!["PriorityCalcPeriod=1".into(), "PriorityWeightFairshare=1000".into()],
        ..ClusterSpec::default()
    };
    let mut c = Cluster::start(&spec).expect("cluster starts");
    let job = c.sbatch("fw_bob", &["--wrap=sleep 3"]).unwrap();
    c.wait_job(job, &["COMPLETED"], Duration::from_secs(60)).unwrap();
    assert!(raw_usage(&c, "fw_bob") >= 2.0, "no usage recorded");
    // The job is finished and its usage saved before slurmctld restarts.
    wait_for_decay_pass(&c);
    let mut conf = std::fs::read_to_string(c.slurm_conf()).unwrap();
    conf.push_str("PriorityUsageResetPeriod=NOW\n");
    std::fs::write(c.slurm_conf(), conf).unwrap();
    c.kill_slurmctld().unwrap();
    c.restart_slurmctld().unwrap();
    c.wait_until("usage cleared", || Ok(raw_usage(&c, "fw_bob") == 0.0)).unwrap();
    c.stop().unwrap();
}

/// A panic inside a decay pass costs that pass, not the thread; and `scontrol
/// reconfigure` while jobs end neither hangs slurmctld nor sends Fairway's state
/// anywhere but StateSaveLocation (a NULL read mid-reconfigure once renamed it over
/// /dev/null).
#[test]
fn the_decay_thread_outlives_a_panic_and_reconfigures() {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let spec = ClusterSpec { slurm_conf_extra: vec!["PriorityCalcPeriod=1".into()], ..ClusterSpec::default() };
    let c = Cluster::start(&spec).expect("cluster starts");
    // Every pass panics at this job (test builds only; held, so it never runs).
    c.sbatch("fw_alice", &["--hold", "--comment=fairway-test:decay-panic", "--wrap=true"]).unwrap();
    wait_for_decay_pass(&c);
    wait_for_decay_pass(&c);
    let log = c.log("slurmctld");
    let panics = log.matches("decay pass: internal error (panic: fault injected by job comment").count();
    assert!(panics >= 2, "{panics} panicking passes logged, the thread should have run on:\n{log}");

    for _ in 0..4 {
        let job = c.sbatch("fw_bob", &["--wrap=sleep 2"]).unwrap();
        let out = c.cmd("scontrol", &["reconfigure"]).unwrap();
        assert!(out.ok(), "{out:?}");
        c.wait_job(job, &["COMPLETED"], Duration::from_secs(120)).unwrap();
    }
    let ping = c.cmd("scontrol", &["ping"]).unwrap();
    assert!(ping.stdout.contains("UP"), "{ping:?}");
    let null = std::fs::metadata("/dev/null").unwrap();
    assert!(null.file_type().is_char_device(), "/dev/null is no longer a device: {null:?}");
    let state = std::fs::metadata(c.dir().join("state/fairway_priority_last_decay")).unwrap();
    assert!(state.is_file(), "{state:?}");
    assert_eq!(state.permissions().mode() & 0o777, 0o600, "state files are private");
    c.stop().unwrap();
}

/// Every state file Fairway's controller plugins write, found unreadable when slurmctld
/// starts (truncated, not what it should be, of a newer format): slurmctld starts, each
/// plugin logs what was wrong and what it does instead, keeps the bad file aside as
/// `<name>.unreadable` for the admin (its next save would otherwise destroy it), and the
/// cluster schedules and writes good files again.
#[test]
fn unreadable_state_files_are_set_aside_and_slurmctld_carries_on() {
    let spec = ClusterSpec {
        slurm_conf_extra: vec![
            "PriorityCalcPeriod=1".into(),
            "PreemptType=preempt/fairway".into(),
            "PreemptMode=REQUEUE".into(),
        ],
        fairway_toml: Some("[priority]\nweight_predicted_work = 100\n".into()),
        ..ClusterSpec::default()
    };
    let mut c = Cluster::start(&spec).expect("cluster starts");
    assert!(c.log("slurmctld").contains("preempt/fairway: Fairway"), "{}", c.log("slurmctld"));
    let state = c.dir().join("state");
    let history = state.join("fairway-predictor.json");
    let last_decay = state.join("fairway_priority_last_decay");
    let preemptions = state.join("fairway-preemptions.json");
    let aside =
        |p: &std::path::Path| p.with_file_name(format!("{}.unreadable", p.file_name().unwrap().to_string_lossy()));

    let job = c.sbatch("fw_alice", &["-J", "nightly-eval", "--wrap=sleep 2"]).unwrap();
    c.wait_job(job, &["COMPLETED"], Duration::from_secs(60)).unwrap();
    // Saved by the pass after the job ended (which wrote both last-decay files already).
    c.wait_until("the run-time history saved", || Ok(history.exists())).unwrap();
    let good_history = std::fs::read(&history).unwrap();
    let learned = fairway_core::predict::RuntimePredictor::from_json(&good_history).unwrap();
    assert_eq!(learned.len(), 1, "{}", String::from_utf8_lossy(&good_history));

    // A full disk's truncation, garbage, and a file from a newer Fairway.
    c.kill_slurmctld().unwrap();
    let truncated = &good_history[..good_history.len() / 2];
    std::fs::write(&history, truncated).unwrap();
    std::fs::write(&last_decay, "garbage\n").unwrap();
    std::fs::write(&preemptions, r#"{"format":99,"jobs":{}}"#).unwrap();
    c.restart_slurmctld().unwrap();
    let log = c.log("slurmctld");
    for (file, then) in [
        (&history, "starting with no run-time history"),
        (&last_decay, "ignored"),
        (&preemptions, "the preemption budget starts afresh"),
    ] {
        let kept = format!("the file is kept as {}; {then}", aside(file).display());
        assert!(log.contains(&kept), "no \"{kept}\" in the log:\n{log}");
    }
    assert!(log.contains("not a run-time history: EOF"), "{log}");
    assert!(log.contains("format 99 (this Fairway reads 1)"), "{log}");
    // multifactor's twin of the last-decay file is good: decay continues from it.
    assert!(log.contains("continuing decay from priority/multifactor's last pass"), "{log}");
    assert_eq!(std::fs::read(aside(&history)).unwrap(), truncated);
    assert_eq!(std::fs::read_to_string(aside(&last_decay)).unwrap(), "garbage\n");
    assert!(!preemptions.exists(), "the newer file was moved, not left to be overwritten");

    // It schedules, learns and saves good files again.
    let job = c.sbatch("fw_alice", &["-J", "nightly-eval", "--wrap=sleep 1"]).unwrap();
    c.wait_job(job, &["COMPLETED"], Duration::from_secs(60)).unwrap();
    wait_for_decay_pass(&c);
    c.wait_until("the run-time history saved again", || Ok(history.exists())).unwrap();
    let saved = std::fs::read(&history).unwrap();
    let relearned = fairway_core::predict::RuntimePredictor::from_json(&saved).unwrap();
    assert_eq!(relearned.len(), 1, "{}", String::from_utf8_lossy(&saved));
    let decay = std::fs::read_to_string(&last_decay).unwrap();
    assert_eq!(decay.split_whitespace().filter(|t| t.parse::<i64>().is_ok()).count(), 2, "{decay:?}");
    assert!(c.is_running("slurmctld"));

    // History written by a newer Fairway is refused, even where its fields would parse.
    c.kill_slurmctld().unwrap();
    std::fs::write(&history, r#"{"format":2,"history":{"1000|a|n|1":[5,7]}}"#).unwrap();
    c.restart_slurmctld().unwrap();
    let log = c.log("slurmctld");
    assert!(log.contains("run-time history of format 2; this Fairway reads format 1"), "{log}");
    assert!(std::fs::read_to_string(aside(&history)).unwrap().contains("\"format\":2"));
    assert!(c.is_running("slurmctld"));
    c.stop().unwrap();
}
