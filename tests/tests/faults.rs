//! Faults a production cluster meets, on real Slurm 22.05 with Fairway's plugins: the
//! accounting database away for minutes, slurmctld restarted meanwhile.

use std::time::Duration;

use fairway_tests::fairshare::{raw_usage, wait_for_decay_pass};
use fairway_tests::{Cluster, ClusterSpec, Slurm};

/// slurmdbd and MariaDB killed for several decay passes, with slurmctld killed and
/// restarted while they are away: fair share lives in slurmctld (assoc_mgr and its state
/// files), so usage keeps accruing, survives the restart, and is neither lost nor charged
/// twice when the database returns; slurmctld says the database is away, no Fairway
/// plugin fails, and the jobs' records reach the database once it is back.
#[test]
fn usage_survives_the_accounting_database_going_away() {
    let spec = ClusterSpec {
        slurm_conf_extra: vec!["PriorityCalcPeriod=1".into(), "PriorityWeightFairshare=1000".into()],
        fairway_toml: Some("[priority]\nweight_predicted_work = 100\n".into()),
        ..ClusterSpec::default()
    };
    let mut c = Cluster::start(&spec).expect("cluster starts");
    c.kill("slurmdbd").unwrap();
    c.kill("mariadb").unwrap();

    let first = c.sbatch("fw_alice", &["-n", "2", "--wrap=sleep 10"]).unwrap();
    c.wait_job(first, &["COMPLETED"], Duration::from_secs(60)).unwrap();
    wait_for_decay_pass(&c);
    let charged = raw_usage(&c, "fw_alice");
    assert!(charged >= 15.0, "2 CPUs × 10 s should be ~20 CPU-seconds, got {charged}");

    // slurmctld crashes and comes back with the database still away.
    c.kill_slurmctld().unwrap();
    c.restart_slurmctld().unwrap();
    let restarted = raw_usage(&c, "fw_alice");
    assert!((restarted - charged).abs() <= 1.0, "usage changed across the restart: {charged} -> {restarted}");

    let second = c.sbatch("fw_alice", &["-n", "1", "--wrap=sleep 6"]).unwrap();
    c.wait_job(second, &["COMPLETED"], Duration::from_secs(60)).unwrap();
    wait_for_decay_pass(&c);
    let away = raw_usage(&c, "fw_alice");
    assert!(away - restarted >= 4.0, "a job run while the database is away adds usage: {restarted} -> {away}");

    c.restart_accounting().unwrap();
    let recorded = |job: u32| -> anyhow::Result<bool> {
        let out = c.cmd("sacct", &["-n", "-X", "-P", "-j", &job.to_string(), "-o", "State"])?;
        Ok(out.stdout.trim() == "COMPLETED")
    };
    c.wait_until("both jobs recorded in the database", || Ok(recorded(first)? && recorded(second)?)).unwrap();
    wait_for_decay_pass(&c);
    let back = raw_usage(&c, "fw_alice");
    eprintln!("RawUsage of fw_alice: {charged} → {restarted} (restart) → {away} (database away) → {back} (back)");
    assert!((back - away).abs() <= 1.0, "usage moved when the database came back: {away} -> {back}");
    assert!(c.is_running("slurmctld"));
    let log = c.log("slurmctld");
    // Slurm's own words (src/common/slurm_persist_conn.c), once per outage at least.
    assert!(
        log.contains("failed to open persistent connection") || log.contains("Sending PersistInit msg"),
        "slurmctld never said the database was away:\n{log}"
    );
    assert!(!log.contains("internal error"), "a Fairway plugin failed:\n{log}");
    c.stop().unwrap();
}
