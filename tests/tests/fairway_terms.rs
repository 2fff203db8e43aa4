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
            "[priority]\nweight_deadline = 5000\ndeadline_qos = [\"high\"]\nweight_predicted_work = 100\n\
             max_wait = \"0:20\"\n"
                .into(),
        ),
        users: vec![
            ("fw_alice".into(), "vision".into()),
            ("fw_bob".into(), "nlp".into()),
            ("fw_carol".into(), "nlp".into()),
        ],
        ..ClusterSpec::default()
    };
    let c = Cluster::start(&spec).expect("cluster starts");

    // Learn: a completed job's run time is recorded for its key.
    let learn = c.sbatch("fw_alice", &["-J", "eval", "-t", "10", "--wrap=sleep 3"]).unwrap();
    c.wait_job(learn, &["COMPLETED"], Duration::from_secs(60)).unwrap();

    // Hold the node so everything below stays pending.
    let out = c.cmd("scontrol", &["update", &format!("NodeName={}", c.node), "State=DRAIN", "Reason=terms"]).unwrap();
    assert!(out.ok(), "{out:?}");
    let urgent = c
        .sbatch("fw_bob", &["-J", "urgent", "-t", "30", "--qos=high", "--deadline=now+40minutes", "--wrap=true"])
        .unwrap();
    let relaxed = c.sbatch("fw_bob", &["-J", "relaxed", "-t", "30", "--wrap=true"]).unwrap();
    // Any user can set --deadline: outside deadline_qos it buys nothing.
    let claimed =
        c.sbatch("fw_bob", &["-J", "claimed", "-t", "30", "--deadline=now+40minutes", "--wrap=true"]).unwrap();
    let high = c.sbatch("fw_alice", &["-J", "important", "-t", "30", "--qos=high", "--wrap=true"]).unwrap();
    let scavenger = c.sbatch("fw_carol", &["-J", "sweep", "-t", "30", "--qos=scavenger", "--wrap=true"]).unwrap();

    let (site_urgent, _) = sprio_site_and_priority(&c, urgent);
    let (site_relaxed, _) = sprio_site_and_priority(&c, relaxed);
    // 30 of 40 minutes needed: urgency 30 / (30 + 10) = 0.75 → 3750, plus predicted work.
    assert!(site_urgent > site_relaxed + 3000, "deadline urgency not in SITE: {site_urgent} vs {site_relaxed}");
    let (site_claimed, _) = sprio_site_and_priority(&c, claimed);
    assert_eq!(site_claimed, site_relaxed, "a deadline outside deadline_qos counted");
    assert!(squeue_priority(&c, urgent) > squeue_priority(&c, relaxed));
    assert!(squeue_priority(&c, scavenger) < squeue_priority(&c, high), "QOS still orders non-starving jobs");

    // Starvation: after max_wait (20 s) and the next decay pass, fw_carol's scavenger job,
    // lowest by every other term, rises above all jobs that are not lifted.
    const LIFTED: u64 = 0xF000_0000;
    const FIRST: u64 = 0xFFF0_0000;
    // A job is lifted by the pass after the one that saw it starve: up to 20 s plus two
    // PriorityCalcPeriods (a minute each) from here.
    let lift = Duration::from_secs(200);
    c.wait_until_within("the scavenger job starves past max_wait", lift, || {
        Ok(squeue_priority(&c, scavenger) >= LIFTED)
    })
    .unwrap();
    // The one starving longest (`urgent`, submitted first) goes first of all
    // (terms::FIRST_STARVING); each other user's longest-starving job is lifted.
    c.wait_until("the longest-starving job goes first", || Ok(squeue_priority(&c, urgent) == FIRST)).unwrap();
    assert!(squeue_priority(&c, scavenger) < FIRST, "two jobs first in one partition");
    // But not fw_alice's: she used the node (the job learned above) and fw_bob and
    // fw_carol have not, so her fair-share factor is below the upper quartile of the
    // users waiting, and fair share decides her wait. Her job stays below the lifted ones, QOS
    // `high` or not.
    let lifted = |j| squeue_priority(&c, j) >= LIFTED;
    assert!(!lifted(high), "the heaviest user's starving job lifted");
    assert!(squeue_priority(&c, scavenger) > squeue_priority(&c, high), "a lifted job below one that is not");
    // fw_bob's other starving jobs are not lifted while his longest-starving one waits:
    // a user's flood of starving jobs cannot jump everyone else's.
    for flood in [relaxed, claimed] {
        assert!(squeue_priority(&c, flood) < LIFTED, "job {flood} of fw_bob lifted beside his job {urgent}");
        assert!(squeue_priority(&c, flood) < squeue_priority(&c, scavenger), "job {flood} above a lifted job");
    }
    // Once that job is gone, his next-longest starving job (`relaxed`) takes its place.
    assert!(c.cmd("scancel", &[&urgent.to_string()]).unwrap().ok());
    c.wait_until_within("fw_bob's next starving job goes first", lift, || Ok(squeue_priority(&c, relaxed) == FIRST))
        .unwrap();
    assert!(squeue_priority(&c, claimed) < LIFTED, "two of fw_bob's jobs lifted");
    let log = c.log("slurmctld");
    assert!(
        log.lines().any(|l| l.contains("Fairway terms") && l.contains("job_id=")),
        "no per-job log under DebugFlags=Priority"
    );

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
        fairway_toml: Some(
            "[priority]\nweight_deadline = 5000\ndeadline_qos = [\"high\"]\nmax_wait = \"0:30\"\n".into(),
        ),
        ..ClusterSpec::default()
    };
    let c = Cluster::start(&spec).expect("cluster starts");
    let log = c.log("slurmctld");
    assert!(log.contains("site_factor/fairway: Fairway"), "site_factor/fairway not loaded:\n{log}");
    let out = c.cmd("scontrol", &["update", &format!("NodeName={}", c.node), "State=DRAIN", "Reason=terms"]).unwrap();
    assert!(out.ok(), "{out:?}");
    let urgent = c.sbatch("fw_bob", &["-t", "30", "--qos=high", "--deadline=now+40minutes", "--wrap=true"]).unwrap();
    let relaxed = c.sbatch("fw_alice", &["-t", "30", "--wrap=true"]).unwrap();
    let claimed = c.sbatch("fw_bob", &["-t", "30", "--deadline=now+40minutes", "--wrap=true"]).unwrap();
    let (site_urgent, _) = sprio_site_and_priority(&c, urgent);
    let (site_relaxed, _) = sprio_site_and_priority(&c, relaxed);
    assert!(site_urgent >= 3000 && site_relaxed == 0, "SITE {site_urgent} / {site_relaxed}");
    assert_eq!(sprio_site_and_priority(&c, claimed).0, 0, "a deadline outside deadline_qos counted");

    // An admin's site factor stays, with Fairway's part on top.
    let out = c.cmd("scontrol", &["update", &format!("JobId={urgent}"), "SiteFactor=100"]).unwrap();
    assert!(out.ok(), "{out:?}");
    let (site_after, _) = sprio_site_and_priority(&c, urgent);
    assert!((site_after - (100 + site_urgent)).abs() <= 50, "admin SiteFactor lost: {site_urgent} -> {site_after}");

    // Past max_wait, each user's longest-starving job is lifted (terms::STARVING_SITE on
    // top) by the pass after the one that saw it starve; the one starving longest
    // (`urgent`, submitted first) gets terms::FIRST_STARVING_SITE more.
    let lift = Duration::from_secs(240);
    c.wait_until_within("both users' jobs starve", lift, || Ok(sprio_site_and_priority(&c, relaxed).0 >= 0x7000_0000))
        .unwrap();
    c.wait_until("the longest-starving job goes first", || Ok(sprio_site_and_priority(&c, urgent).0 >= 0x7800_0000))
        .unwrap();
    assert!(sprio_site_and_priority(&c, relaxed).0 < 0x7800_0000, "two jobs first in one partition");
    // fw_bob's second starving job is not lifted beside his first.
    assert!(sprio_site_and_priority(&c, claimed).0 < 0x7000_0000, "two of one user's jobs lifted");
    assert!(squeue_priority(&c, urgent) > squeue_priority(&c, relaxed));
    c.stop().unwrap();
}

/// The predicted-work term rewards a short prediction, and history is the user's to
/// write: decoy jobs of the same name and GPU count must not talk a long job's rank down.
#[test]
fn predicted_work_cannot_be_talked_down() {
    let spec = ClusterSpec {
        slurm_conf_extra: vec!["PriorityWeightAge=0".into(), "PriorityWeightFairshare=0".into()],
        fairway_toml: Some("[priority]\nweight_predicted_work = 1000\n".into()),
        ..ClusterSpec::default()
    };
    let c = Cluster::start(&spec).expect("cluster starts");
    let done = |user: &str, args: &[&str]| {
        let id = c.sbatch(user, args).unwrap();
        c.wait_job(id, &["COMPLETED"], Duration::from_secs(180)).unwrap();
    };
    // A two-day limit and no comparable history: ranked by the limit, 1000 / (1 + 48) = 20.
    let ranked_by_limit = 1000.0 / 49.0;

    let site = |j| sprio_site_and_priority(&c, j).0 as f64;
    let node = |state: &str| {
        let out =
            c.cmd("scontrol", &["update", &format!("NodeName={}", c.node), &format!("State={state}"), "Reason=t"]);
        assert!(out.as_ref().is_ok_and(|o| o.ok()), "{out:?}");
    };

    // Attack 1: decoys under a short limit, then the long job under a long one. (Decoys of
    // a second, not `true`: a 0 s run used to count as no prediction at all.)
    done("fw_alice", &["-J", "train", "-t", "1", "--wrap=sleep 1"]);
    done("fw_alice", &["-J", "train", "-t", "1", "--wrap=sleep 1"]);
    node("DRAIN");
    let train = c.sbatch("fw_alice", &["-J", "train", "-t", "2-0", "--wrap=true"]).unwrap();
    assert!(
        (site(train) - ranked_by_limit).abs() <= 1.0,
        "decoys with a 1-minute limit moved a 2-day job's rank: SITE {} (ranked by its limit: {ranked_by_limit:.0})",
        site(train)
    );
    c.cmd("scancel", &[&train.to_string()]).unwrap();
    node("RESUME");

    // Attack 2: decoys under the long limit itself, then a job that runs far longer than
    // they did (ranked as 1 s, it runs 75 s). Every ranking of the user is then raised by
    // that overrun (75x), which takes a 10-minute job to its limit: 1000 / (1 + 1/6) = 857.
    // (A real attack's long job outlives a 1 s rank by days, which reaches any limit.)
    let eval_limit = 1000.0 / (1.0 + 600.0 / 3600.0);
    done("fw_alice", &["-J", "eval", "-t", "10", "--wrap=sleep 1"]);
    done("fw_alice", &["-J", "eval", "-t", "10", "--wrap=sleep 1"]);
    done("fw_alice", &["-J", "eval", "-t", "10", "--wrap=sleep 75"]);
    // An honest user's history still counts.
    done("fw_bob", &["-J", "eval", "-t", "10", "--wrap=sleep 1"]);
    done("fw_bob", &["-J", "eval", "-t", "10", "--wrap=sleep 1"]);

    node("DRAIN");
    let eval = c.sbatch("fw_alice", &["-J", "eval", "-t", "10", "--wrap=true"]).unwrap();
    let honest = c.sbatch("fw_bob", &["-J", "eval", "-t", "10", "--wrap=true"]).unwrap();
    assert!(
        (site(eval) - eval_limit).abs() <= 1.0,
        "a user whose job outlived its rank of about a second kept the rank: SITE {} (ranked by its limit: {eval_limit:.0})",
        site(eval)
    );
    assert!(site(honest) > 900.0, "an honest history lost its rank: SITE {}", site(honest));
    c.stop().unwrap();
}

/// Deadline urgency is granted per QoS (`deadline_qos`); the QoS's own knobs then make it
/// cost and cap it: priority/fairway charges a deadline job's usage at its QoS's
/// `UsageFactor`, as multifactor does, and `MaxJobsPU` bounds how many of a user's jobs
/// run with it at once.
#[test]
fn a_deadline_qos_charges_its_usage_factor_and_keeps_its_limits() {
    let spec = ClusterSpec {
        slurm_conf_extra: vec!["PriorityCalcPeriod=1".into(), "PriorityWeightFairshare=1000".into()],
        fairway_toml: Some("[priority]\nweight_deadline = 5000\ndeadline_qos = [\"high\"]\n".into()),
        ..ClusterSpec::default()
    };
    let c = Cluster::start(&spec).expect("cluster starts");
    let out = c.cmd("sacctmgr", &["-i", "modify", "qos", "high", "set", "UsageFactor=2", "MaxJobsPU=1"]).unwrap();
    assert!(out.ok(), "{out:?}");
    let urgent = c
        .sbatch("fw_bob", &["--qos=high", "--deadline=now+40minutes", "-t", "5", "-n", "1", "--wrap=sleep 10"])
        .unwrap();
    let plain = c.sbatch("fw_alice", &["-t", "5", "-n", "1", "--wrap=sleep 10"]).unwrap();
    c.wait_job(urgent, &["RUNNING"], Duration::from_secs(60)).unwrap();
    // The cap: bob's second deadline job waits for his first.
    let second =
        c.sbatch("fw_bob", &["--qos=high", "--deadline=now+40minutes", "-t", "5", "-n", "1", "--wrap=true"]).unwrap();
    let reason = || c.cmd("squeue", &["-h", "-j", &second.to_string(), "-o", "%r"]).unwrap().stdout;
    c.wait_until("the QoS's per-user job limit holds it", || Ok(reason().trim() == "QOSMaxJobsPerUserLimit")).unwrap();
    assert!(sprio_site_and_priority(&c, second).0 > 0, "it claims deadline urgency meanwhile");

    // The cost: usage charged at twice the run time for the deadline QoS's job.
    c.wait_job(urgent, &["COMPLETED"], Duration::from_secs(60)).unwrap();
    c.wait_job(plain, &["COMPLETED"], Duration::from_secs(60)).unwrap();
    let elapsed = |job: u32| -> f64 {
        let out = c.cmd("sacct", &["-n", "-X", "-P", "-j", &job.to_string(), "-o", "ElapsedRaw"]).unwrap();
        out.stdout.trim().parse().unwrap_or_else(|_| panic!("{out:?}"))
    };
    let usage = |user: &str| -> f64 {
        let out = c.cmd("sshare", &["-h", "-P", "-u", user, "-o", "User,RawUsage"]).unwrap().stdout;
        out.lines().find_map(|l| l.strip_prefix(&format!("{user}|"))).map_or(0.0, |v| v.trim().parse().unwrap())
    };
    c.wait_until("both jobs' usage reaches sshare", || Ok(usage("fw_bob") > 0.0 && usage("fw_alice") > 0.0)).unwrap();
    let (bob, alice) = (usage("fw_bob"), usage("fw_alice"));
    let (bob_ran, alice_ran) = (elapsed(urgent), elapsed(plain));
    eprintln!("fw_bob: {bob} CPU-s charged for {bob_ran} s in high; fw_alice: {alice} for {alice_ran} s in normal");
    // One CPU each; two CPU-seconds of slack for where accrual and sacct cut the run
    // (charged at 1, bob would be 10 off).
    assert!((bob - 2.0 * bob_ran).abs() <= 2.0, "UsageFactor=2 not charged: {bob} for {bob_ran} s");
    assert!((alice - alice_ran).abs() <= 2.0, "{alice} for {alice_ran} s");
    c.stop().unwrap();
}

/// `scontrol reconfigure` re-reads fairway.toml's `[priority]`, as multifactor re-reads its
/// weights from slurm.conf: a pending job's SITE follows the new weight from the next
/// pass, and turning the terms off leaves multifactor's sum. (22.05; 24.05+ restarts
/// slurmctld on reconfigure, which reads the file anew anyway.)
#[test]
fn scontrol_reconfigure_rereads_the_terms() {
    let spec = ClusterSpec {
        slurm_conf_extra: vec![
            "PriorityCalcPeriod=1".into(),
            "PriorityWeightAge=0".into(),
            "PriorityWeightFairshare=0".into(),
        ],
        fairway_toml: Some("[priority]\nweight_predicted_work = 1000\n".into()),
        ..ClusterSpec::default()
    };
    let c = Cluster::start(&spec).expect("cluster starts");
    let out = c.cmd("scontrol", &["update", &format!("NodeName={}", c.node), "State=DRAIN", "Reason=t"]).unwrap();
    assert!(out.ok(), "{out:?}");
    // No history: ranked by its one-hour limit, the weight / (1 + 1).
    let job = c.sbatch("fw_alice", &["-J", "reconf", "-t", "60", "--wrap=true"]).unwrap();
    let site = || sprio_site_and_priority(&c, job).0;
    c.wait_until_within("the first pass ranks the job", Duration::from_secs(90), || Ok(site() == 500)).unwrap();

    let toml = c.dir().join("fairway.toml");
    let reconfigure = |text: &str| {
        std::fs::write(&toml, text).unwrap();
        let out = c.cmd("scontrol", &["reconfigure"]).unwrap();
        assert!(out.ok(), "{out:?}");
    };
    reconfigure("[priority]\nweight_predicted_work = 3000\n");
    c.wait_until_within("the new weight applies", Duration::from_secs(150), || Ok(site() == 1500)).unwrap();
    reconfigure("# no [priority]: Fairway's terms off\n");
    c.wait_until_within("the terms are off", Duration::from_secs(150), || Ok(site() == 0)).unwrap();
    assert!(c.log("slurmctld").contains("Fairway terms off"), "the reconfigure did not say the terms are off");
    c.stop().unwrap();
}
