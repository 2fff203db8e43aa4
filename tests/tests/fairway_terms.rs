//! Fairway's own priority terms on real Slurm: deadline urgency in sprio's SITE column,
//! the starvation bound, and runtime history learned at job end and kept on disk.

use std::time::Duration;

use fairway_tests::{Cluster, ClusterSpec, Slurm};

fn sprio_site_and_priority(c: &Cluster, job: u32) -> (i64, u64) {
    let out = c.cmd("sprio", &["-h", "-j", &job.to_string(), "-o", "%S %Y"]).unwrap();
    let mut f = out.stdout.split_whitespace();
    let site = f.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("sprio: {out:?}"));
    (site, f.next().and_then(|v| v.parse().ok()).unwrap())
}

fn squeue_priority(c: &Cluster, job: u32) -> u64 {
    c.cmd("squeue", &["-h", "-j", &job.to_string(), "-o", "%Q"]).unwrap().stdout.trim().parse().unwrap()
}

#[test]
fn deadline_starvation_and_learned_runtimes() {
    let spec = ClusterSpec {
        slurm_conf_extra: vec![
            "PriorityCalcPeriod=1".into(),
            "PriorityWeightQOS=10000".into(),
            "PriorityWeightAge=0".into(),
            "PriorityWeightFairshare=0".into(),
            "DebugFlags=Priority".into(),
        ],
        fairway_toml: Some(
            "[priority]\nweight_deadline = 5000\nweight_predicted_work = 100\nmax_wait = \"0:20\"\n".into(),
        ),
        ..ClusterSpec::default()
    };
    let c = Cluster::start(&spec).expect("cluster starts");

    // Learn: a completed job's run time is recorded for its key.
    let learn = c.sbatch("fw_alice", &["-J", "eval", "-t", "10", "--wrap=sleep 3"]).unwrap();
    c.wait_job(learn, &["COMPLETED"], Duration::from_secs(60)).unwrap();

    // Hold the node so everything below stays pending.
    let out = c.cmd("scontrol", &["update", &format!("NodeName={}", c.node), "State=DRAIN", "Reason=terms"]).unwrap();
    assert!(out.ok(), "{out:?}");
    let urgent = c.sbatch("fw_bob", &["-J", "urgent", "-t", "30", "--deadline=now+40minutes", "--wrap=true"]).unwrap();
    let relaxed = c.sbatch("fw_bob", &["-J", "relaxed", "-t", "30", "--wrap=true"]).unwrap();
    let high = c.sbatch("fw_alice", &["-J", "important", "-t", "30", "--qos=high", "--wrap=true"]).unwrap();
    let scavenger = c.sbatch("fw_bob", &["-J", "sweep", "-t", "30", "--qos=scavenger", "--wrap=true"]).unwrap();

    let (site_urgent, _) = sprio_site_and_priority(&c, urgent);
    let (site_relaxed, _) = sprio_site_and_priority(&c, relaxed);
    // 30 of 40 minutes needed: urgency 30 / (30 + 10) = 0.75 → 3750, plus predicted work.
    assert!(site_urgent > site_relaxed + 3000, "deadline urgency not in SITE: {site_urgent} vs {site_relaxed}");
    assert!(squeue_priority(&c, urgent) > squeue_priority(&c, relaxed));
    assert!(squeue_priority(&c, scavenger) < squeue_priority(&c, high), "QOS still orders non-starving jobs");

    // Starvation: after max_wait (20 s) and the next decay pass, the scavenger job,
    // lowest by every other term, rises above all non-starving jobs.
    c.wait_until("the scavenger job starves past max_wait", || Ok(squeue_priority(&c, scavenger) >= 0xF000_0000))
        .unwrap();
    // Once all four starve, the one starving longest (`urgent`, submitted first) goes first
    // of all (terms::FIRST_STARVING); the others keep their usual order (QOS), not the
    // order in which they started starving: `high` was submitted after `relaxed`.
    c.wait_until("all four jobs starve", || {
        Ok([urgent, relaxed, high, scavenger].iter().all(|&j| squeue_priority(&c, j) >= 0xF000_0000))
    })
    .unwrap();
    c.wait_until("the longest-starving job goes first", || Ok(squeue_priority(&c, urgent) == 0xFFF0_0000)).unwrap();
    assert!(squeue_priority(&c, high) > squeue_priority(&c, relaxed), "QOS no longer orders starving jobs");
    assert!(squeue_priority(&c, relaxed) < 0xFFF0_0000, "two jobs first in one partition");
    assert!(c.log("slurmctld").contains("Fairway terms"), "no per-job log under DebugFlags=Priority");

    // The learned history was saved by a decay pass and holds the completed job.
    let history = std::fs::read_to_string(c.dir().join("state/fairway-predictor.json")).unwrap();
    assert!(history.contains("|eval|"), "{history}");
    c.stop().unwrap();
}

/// Sites that keep priority/multifactor get the same terms from site_factor/fairway,
/// without losing a site factor an admin set.
#[test]
fn site_factor_plugin_adds_the_terms_to_multifactor() {
    let spec = ClusterSpec {
        priority_type: "priority/multifactor".into(),
        slurm_conf_extra: vec![
            "PrioritySiteFactorPlugin=site_factor/fairway".into(),
            "PriorityWeightAge=0".into(),
            "PriorityCalcPeriod=1".into(),
        ],
        fairway_toml: Some("[priority]\nweight_deadline = 5000\nmax_wait = \"1:00\"\n".into()),
        ..ClusterSpec::default()
    };
    let c = Cluster::start(&spec).expect("cluster starts");
    let log = c.log("slurmctld");
    assert!(log.contains("site_factor/fairway: Fairway"), "site_factor/fairway not loaded:\n{log}");
    let out = c.cmd("scontrol", &["update", &format!("NodeName={}", c.node), "State=DRAIN", "Reason=terms"]).unwrap();
    assert!(out.ok(), "{out:?}");
    let urgent = c.sbatch("fw_bob", &["-t", "30", "--deadline=now+40minutes", "--wrap=true"]).unwrap();
    let relaxed = c.sbatch("fw_bob", &["-t", "30", "--wrap=true"]).unwrap();
    let (site_urgent, _) = sprio_site_and_priority(&c, urgent);
    let (site_relaxed, _) = sprio_site_and_priority(&c, relaxed);
    assert!(site_urgent >= 3000 && site_relaxed == 0, "SITE {site_urgent} / {site_relaxed}");

    // An admin's site factor stays, with Fairway's part on top.
    let out = c.cmd("scontrol", &["update", &format!("JobId={urgent}"), "SiteFactor=100"]).unwrap();
    assert!(out.ok(), "{out:?}");
    let (site_after, _) = sprio_site_and_priority(&c, urgent);
    assert!((site_after - (100 + site_urgent)).abs() <= 50, "admin SiteFactor lost: {site_urgent} -> {site_after}");

    // Past max_wait both starve (terms::STARVING_SITE on top); the one starving longest
    // (`urgent`, submitted first) gets terms::FIRST_STARVING_SITE more.
    c.wait_until("both jobs starve", || Ok(sprio_site_and_priority(&c, relaxed).0 >= 0x7000_0000)).unwrap();
    c.wait_until("the longest-starving job goes first", || Ok(sprio_site_and_priority(&c, urgent).0 >= 0x7800_0000))
        .unwrap();
    assert!(sprio_site_and_priority(&c, relaxed).0 < 0x7800_0000, "two jobs first in one partition");
    assert!(squeue_priority(&c, urgent) > squeue_priority(&c, relaxed));
    c.stop().unwrap();
}
