//! priority/fairway against priority/multifactor on the docker cluster of each Slurm
//! version that builds it (22.05 and 24.11): one slurmctld, one association tree, one
//! usage history and one set of pending jobs, read under each plugin in turn.
//!
//! slurmctld is restarted between the plugins (PriorityType needs a restart), so both
//! see exactly the same state: usage from StateSaveLocation, the same recovered jobs
//! with the same accrue times. `sprio -l` and `sshare -l` are compared field by field,
//! for Fair Tree and for classic fair share, with Fairway's own terms off. The tree
//! holds a `Fairshare=parent` account, a user with zero shares and users with no usage.
//! Also: usage survives kill -9 of slurmctld, and the starvation bound (`max_wait`) on a
//! busy cluster: a lifted large job starts by its reservation while backfill fills the
//! GPUs around it. Run by `make e2e`; ignored by a plain `cargo test`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use fairway_tests::fairshare::{close, num, raw_usage};
use fairway_tests::{DockerCluster, Slurm};

const SLURM_CONF: &str = "/etc/slurm/slurm.conf";
const FAIRWAY_TOML: &str = "/etc/slurm/fairway.toml";

/// Weights beside the cluster's own (fair share 10000, age 1000, QOS 5000), so every
/// factor counts, and two partitions that never start jobs, to keep them pending.
const EXTRA_CONF: &str = "
PriorityWeightAssoc=300
PriorityWeightJobSize=1000
PriorityWeightPartition=2000
PriorityWeightTRES=CPU=700,Mem=300,GRES/gpu=900
PartitionName=held Nodes=c[1-4] PriorityJobFactor=3 State=DOWN
PartitionName=held2 Nodes=c[3-4] PriorityJobFactor=1 State=DOWN
";

/// Pending jobs: sizes, QOS, nice, GPUs, a multi-partition job, several users.
const PENDING: &[(&str, &[&str])] = &[
    ("fw_alice", &["-p", "held", "-n", "4"]),
    ("fw_alice", &["-p", "held", "-n", "1", "--qos=high"]),
    ("fw_bob", &["-p", "held", "-n", "2", "--nice=40"]),
    ("fw_bob", &["-p", "held", "-N", "2", "--gres=gpu:h100:8", "-n", "16"]),
    ("fw_carol", &["-p", "held,held2", "-n", "2", "--qos=high"]),
    ("fw_carol", &["-p", "held", "-n", "1", "--qos=scavenger", "--mem=2000"]),
    ("fw_dave", &["-p", "held", "-A", "ops", "-n", "2"]),
    ("fw_dave", &["-p", "held", "-n", "1", "-t", "30"]),
];

fn cluster() -> DockerCluster {
    DockerCluster::from_env().expect("the docker cluster is up")
}

/// One comparison: fair-share algorithm, and whether Fairway's terms are on (then
/// multifactor gets them from `site_factor/fairway`, as a site adopting Fairway one
/// step at a time would run it).
struct Round {
    name: &'static str,
    classic: bool,
    terms: bool,
}

const ROUNDS: [Round; 3] = [
    Round { name: "Fair Tree", classic: false, terms: false },
    Round { name: "classic", classic: true, terms: false },
    Round { name: "Fairway's terms (site_factor/fairway on multifactor)", classic: false, terms: true },
];

/// Whether the cluster runs priority/fairway (not where it cannot be built); says so if not.
fn runs_fairway_priority(c: &DockerCluster, conf: &str) -> bool {
    let yes = conf.lines().any(|l| l == "PriorityType=priority/fairway");
    if !yes {
        eprintln!("skipped: priority/fairway is not built for Slurm {}", c.version);
    }
    yes
}

/// slurm.conf with `priority_type` and the extra weights (and classic fair share).
fn slurm_conf(orig: &str, priority_type: &str, r: &Round) -> String {
    let classic = r.classic;
    let mut conf: String = orig
        .lines()
        .filter(|l| !l.starts_with("PriorityType=") && !l.starts_with("PrioritySiteFactorPlugin="))
        .map(|l| format!("{l}\n"))
        .collect();
    conf.push_str(&format!("PriorityType={priority_type}\n"));
    if r.terms && priority_type == "priority/multifactor" {
        conf.push_str("PrioritySiteFactorPlugin=site_factor/fairway\n");
    }
    conf.push_str(EXTRA_CONF);
    if classic {
        conf.push_str("PriorityFlags=NO_FAIR_TREE\n");
    }
    conf
}

/// fairway.toml without `[priority]`: Fairway's own terms off.
fn terms_off(orig: &str) -> String {
    let mut out = String::new();
    let mut skip = false;
    for l in orig.lines() {
        if l.starts_with('[') {
            skip = l.trim() == "[priority]";
        }
        if !skip {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

fn restart_ctld(c: &DockerCluster, priority_type: &str) {
    c.restart("ctld").unwrap();
    c.wait_for("slurmctld answers", Duration::from_secs(180), || {
        Ok(c.cmd("scontrol", &["ping"])?.stdout.contains("UP"))
    })
    .unwrap();
    let shown = c.cmd("scontrol", &["show", "config"]).unwrap().stdout;
    assert!(
        shown.lines().any(|l| l.starts_with("PriorityType") && l.trim_end().ends_with(priority_type)),
        "slurmctld did not come back with {priority_type}:\n{shown}"
    );
}

/// The ctld container's clock (Unix seconds).
fn ctld_clock(c: &DockerCluster) -> i64 {
    c.exec("ctld", &["date", "+%s"]).unwrap().stdout.trim().parse().unwrap()
}

/// Waits for the decay thread's pass after a restart: each plugin records the time of
/// its last pass in StateSaveLocation (multifactor in `priority_last_decay_ran`,
/// Fairway in `fairway_priority_last_decay`) once the pass is done.
fn wait_decay_pass(c: &DockerCluster, file: &str, since: i64) {
    let path = format!("/var/spool/slurmctld/{file}");
    c.wait_for(&format!("a decay pass ({file})"), Duration::from_secs(150), || {
        let out = c.exec("ctld", &["stat", "-c", "%Y", &path])?;
        Ok(out.ok() && out.stdout.trim().parse::<i64>().is_ok_and(|t| t > since))
    })
    .unwrap();
}

type Row = BTreeMap<&'static str, String>;

const SPRIO: [(&str, &str); 13] = [
    ("job", "%i"),
    ("partition", "%r"),
    ("user", "%u"),
    ("priority", "%Y"),
    ("site", "%S"),
    ("age", "%A"),
    ("assoc", "%B"),
    ("fairshare", "%F"),
    ("jobsize", "%J"),
    ("partition_f", "%P"),
    ("qos", "%Q"),
    ("nice", "%N"),
    ("tres", "%T"),
];

const SSHARE: [&str; 9] =
    ["Account", "User", "RawShares", "NormShares", "RawUsage", "NormUsage", "EffectvUsage", "FairShare", "LevelFS"];

/// (sprio rows, sshare rows, when they were read).
fn snapshot(c: &DockerCluster) -> (Vec<Row>, Vec<Row>, Instant) {
    let fmt: Vec<&str> = SPRIO.iter().map(|f| f.1).collect();
    let sprio = c.cmd("sprio", &["-h", "-o", &fmt.join("|")]).unwrap();
    assert!(sprio.ok(), "{sprio:?}");
    let sprio = sprio
        .stdout
        .lines()
        .map(|l| SPRIO.iter().map(|f| f.0).zip(l.split('|').map(|v| v.trim().to_string())).collect());
    let sshare = c.cmd("sshare", &["-a", "-l", "-P", "-n", "-o", &SSHARE.join(",")]).unwrap();
    assert!(sshare.ok(), "{sshare:?}");
    let sshare = sshare.stdout.lines().map(|l| SSHARE.iter().copied().zip(l.split('|').map(str::to_string)).collect());
    (sprio.collect(), sshare.collect(), Instant::now())
}

/// Fields that depend on when they were read: age grows (PriorityMaxAge 7 days at
/// weight 1000: 1 point per 605 s) and usage decays (7-day half-life: 1e-4 per 10 min).
fn compare(what: &str, fw: &(Vec<Row>, Vec<Row>, Instant), mf: &(Vec<Row>, Vec<Row>, Instant)) {
    let secs = mf.2.duration_since(fw.2).as_secs_f64();
    let age_slack = 1.0 + secs * 1000.0 / 604_800.0;
    for (name, rows) in [("fairway", fw), ("multifactor", mf)] {
        eprintln!("{what}: sprio under {name}:");
        rows.0.iter().for_each(|r| eprintln!("  {r:?}"));
        eprintln!("{what}: sshare under {name}:");
        rows.1.iter().for_each(|r| eprintln!("  {r:?}"));
    }
    assert!(fw.0.len() > PENDING.len(), "{what}: sprio shows too few rows");
    assert_eq!(fw.0.len(), mf.0.len(), "{what}: sprio rows");
    let distinct: std::collections::BTreeSet<&String> = mf.0.iter().map(|r| &r["priority"]).collect();
    assert!(distinct.len() >= 5, "{what}: too few distinct priorities to compare");
    for (a, b) in fw.0.iter().zip(&mf.0) {
        let who = format!("{what}: job {} in {}", a["job"], a["partition"]);
        for (f, _) in SPRIO {
            match f {
                "age" | "priority" => {
                    assert!(
                        close(&a[f], &b[f], 0.0, age_slack),
                        "{who}: {f} {} (fairway) vs {} (multifactor)",
                        a[f],
                        b[f]
                    )
                }
                _ => assert_eq!(a[f], b[f], "{who}: {f} (fairway left, multifactor right)"),
            }
        }
    }
    assert_eq!(fw.1.len(), mf.1.len(), "{what}: sshare rows");
    assert!(mf.1.iter().any(|r| num(&r["RawUsage"]) > 0.0), "{what}: no usage to compare");
    assert!(mf.1.iter().any(|r| r["User"].is_empty() && r["RawShares"] == "parent"), "{what}: no Fairshare=parent");
    assert!(mf.1.iter().any(|r| !r["User"].is_empty() && r["RawShares"] == "0"), "{what}: no zero-share user");
    let rel = 1e-3;
    for (a, b) in fw.1.iter().zip(&mf.1) {
        let who = format!("{what}: {}/{}", a["Account"].trim(), a["User"]);
        for f in ["Account", "User", "RawShares", "NormShares"] {
            assert_eq!(a[f], b[f], "{who}: {f}");
        }
        for f in ["RawUsage", "NormUsage", "EffectvUsage", "FairShare", "LevelFS"] {
            assert!(close(&a[f], &b[f], rel, 1e-6), "{who}: {f} {} (fairway) vs {} (multifactor)", a[f], b[f]);
        }
    }
}

#[test]
#[ignore = "needs the docker cluster: make e2e"]
fn priorities_and_fair_share_equal_multifactors_on_the_same_state() {
    let c = cluster();
    let conf = c.read_file("ctld", SLURM_CONF).unwrap();
    if !runs_fairway_priority(&c, &conf) {
        return;
    }
    let toml = c.read_file("ctld", FAIRWAY_TOML).unwrap();
    let _restore = Restore { c: &c, conf: &conf, toml: &toml };
    cancel_users_jobs(&c);
    // A Fairshare=parent account whose one user has zero shares of its own.
    for args in [
        &["-i", "add", "account", "ops", "Parent=ml", "Cluster=fairway", "Fairshare=parent"][..],
        &["-i", "add", "user", "fw_dave", "Account=ops", "Cluster=fairway", "Fairshare=0"],
        &["-i", "modify", "user", "fw_dave", "where", "account=ops", "set", "QOS=normal,high,scavenger"],
        &["-i", "modify", "account", "vision", "set", "Priority=10"],
    ] {
        let out = c.cmd("sacctmgr", args).unwrap();
        // Idempotent, so the test can run again on the same cluster.
        let said = format!("{}{}", out.stdout, out.stderr).to_lowercase();
        assert!(out.ok() || said.contains("already") || said.contains("nothing"), "{args:?}: {out:?}");
    }
    c.wait_for("slurmctld sees the ops association", Duration::from_secs(60), || {
        Ok(c.cmd("scontrol", &["show", "assoc_mgr", "flags=assoc", "accounts=ops"])?
            .stdout
            .contains("UserName=fw_dave"))
    })
    .unwrap();
    // Usage that differs per user (fw_carol none).
    let jobs: Vec<u32> = [
        ("fw_alice", &["-n", "8", "--wrap=sleep 8"][..]),
        ("fw_bob", &["-n", "2", "--wrap=sleep 5"]),
        ("fw_dave", &["-A", "ops", "-n", "1", "--wrap=sleep 3"]),
    ]
    .iter()
    .map(|(u, a)| c.sbatch(u, a).unwrap_or_else(|e| panic!("sbatch {a:?} as {u}: {e}")))
    .collect();
    for j in jobs {
        c.wait_job(j, &["COMPLETED"], Duration::from_secs(120)).unwrap();
    }

    let mut pending = Vec::new();
    for r in &ROUNDS {
        c.write_file("ctld", FAIRWAY_TOML, &if r.terms { toml.clone() } else { terms_off(&toml) }).unwrap();
        c.write_file("ctld", SLURM_CONF, &slurm_conf(&conf, "priority/fairway", r)).unwrap();
        let since = ctld_clock(&c);
        restart_ctld(&c, "priority/fairway");
        if pending.is_empty() {
            // 24.11 takes several QOS per job: one priority per partition and QOS.
            let multi_qos: &[(&str, &[&str])] = &[("fw_alice", &["-p", "held", "-n", "1", "--qos=high,normal"])];
            let extra = if c.version == "22.05" { &[][..] } else { multi_qos };
            for (user, args) in PENDING.iter().chain(extra) {
                let mut all = args.to_vec();
                all.push("--wrap=true");
                pending.push(c.sbatch(user, &all).unwrap_or_else(|e| panic!("sbatch {args:?} as {user}: {e}")));
            }
        }
        wait_decay_pass(&c, "fairway_priority_last_decay", since);
        let fw = snapshot(&c);
        c.write_file("ctld", SLURM_CONF, &slurm_conf(&conf, "priority/multifactor", r)).unwrap();
        let since = ctld_clock(&c);
        restart_ctld(&c, "priority/multifactor");
        wait_decay_pass(&c, "priority_last_decay_ran", since);
        let mf = snapshot(&c);
        compare(r.name, &fw, &mf);
        let site_set = mf.0.iter().any(|row| num(&row["site"]) != 0.0);
        assert_eq!(site_set, r.terms, "{}: SITE column set only with Fairway's terms on", r.name);
    }

    for j in &pending {
        let _ = c.cmd("scancel", &[&j.to_string()]);
    }
}

/// Puts the cluster's own slurm.conf and fairway.toml back and restarts slurmctld with
/// them, also when the test fails, so the tests that follow run on the usual cluster.
struct Restore<'a> {
    c: &'a DockerCluster,
    conf: &'a str,
    toml: &'a str,
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        let c = self.c;
        let restored =
            c.write_file("ctld", SLURM_CONF, self.conf).and_then(|_| c.write_file("ctld", FAIRWAY_TOML, self.toml));
        if let Err(e) = restored.and_then(|_| c.restart("ctld")) {
            eprintln!("could not restore the cluster's configuration: {e}");
            return;
        }
        let up = c.wait_for("slurmctld answers", Duration::from_secs(180), || {
            Ok(c.cmd("scontrol", &["ping"])?.stdout.contains("UP"))
        });
        let idle = up.and_then(|_| {
            c.wait_for("nodes idle again", Duration::from_secs(120), || {
                let s = c.cmd("sinfo", &["-h", "-p", "gpu", "-o", "%T"])?.stdout;
                Ok(!s.trim().is_empty() && s.lines().all(|l| l.trim() == "idle"))
            })
        });
        if let Err(e) = idle {
            eprintln!("the cluster did not come back after restoring its configuration: {e}");
        }
    }
}

/// Usage survives a crash: kill -9 of slurmctld loses at most one calc period of it
/// (priority/fairway saves usage after every decay pass that added some).
#[test]
#[ignore = "needs the docker cluster: make e2e"]
fn usage_survives_kill_9_of_slurmctld() {
    let c = cluster();
    let conf = c.read_file("ctld", SLURM_CONF).unwrap();
    if !runs_fairway_priority(&c, &conf) {
        return;
    }
    let start = raw_usage(&c, "fw_bob");
    let job = c.sbatch("fw_bob", &["-n", "4", "--wrap=sleep 10"]).unwrap();
    c.wait_job(job, &["COMPLETED"], Duration::from_secs(120)).unwrap();
    let since = ctld_clock(&c);
    wait_decay_pass(&c, "fairway_priority_last_decay", since);
    let before = raw_usage(&c, "fw_bob");
    assert!(before - start >= 30.0, "4 CPUs × 10 s should add ~40 CPU-seconds: {start} -> {before}");

    c.kill_9_and_start("ctld").unwrap();
    c.wait_for("slurmctld answers", Duration::from_secs(180), || {
        Ok(c.cmd("scontrol", &["ping"])?.stdout.contains("UP"))
    })
    .unwrap();
    let after = raw_usage(&c, "fw_bob");
    eprintln!("RawUsage of fw_bob: {before} before kill -9, {after} after the restart");
    // One calc period's decay at a 7-day half-life is ~0.007%; allow rounding.
    assert!((after - before).abs() <= 1.0, "usage changed across the crash: {before} -> {after}");
}

/// `max_wait` for this test: short, so that the job starves at the next pass.
const SHORT_MAX_WAIT: &str = "max_wait = \"0:05\"";

/// The floor of a predicted limit for this test: two minutes, twice PriorityCalcPeriod
/// (as check-config asks), so that the stream's jobs end long before their limit is due
/// for an extension.
const SHORT_MIN_LIMIT: &str = "min_predicted_limit = \"2:00\"";

/// The time limit of the job that holds one of the large job's GPUs past the lift.
const HOLD_MINUTES: i64 = 8;

/// The stream's jobs: 15 s on one GPU, asking for 10 minutes (given 2 once their run
/// history predicts 15 s).
const STREAM_JOB: &[&str] = &["-J", "fw-stream", "-p", "gpu", "--gres=gpu:1", "-t", "10", "--wrap=sleep 15"];

/// slurm.conf with backfill every 5 s instead of 30 (`bf_interval`), so that the test
/// sees several backfill cycles in the minute the large job waits for its nodes.
fn with_quick_backfill(conf: &str) -> String {
    let mut out = String::new();
    let mut set = false;
    for l in conf.lines() {
        if let Some(params) = l.strip_prefix("SchedulerParameters=") {
            out.push_str(&format!("SchedulerParameters={params},bf_interval=5\n"));
            set = true;
        } else {
            out.push_str(l);
            out.push('\n');
        }
    }
    if !set {
        out.push_str("SchedulerParameters=bf_interval=5\n");
    }
    out
}

/// A job's priority as squeue shows it (`%Q`), for a job id or an array's pending tasks.
fn queue_priority(c: &DockerCluster, job: &str) -> Option<u64> {
    let out = c.cmd("squeue", &["-h", "-t", "PD", "-j", job, "-o", "%Q"]).ok()?;
    out.stdout.lines().next()?.trim().parse().ok()
}

/// Start time (Unix seconds) and node list of every task of `job` that started, from sacct.
fn starts(c: &DockerCluster, job: u32) -> Vec<(i64, String)> {
    let out = c
        .exec(
            "login",
            &["env", "SLURM_TIME_FORMAT=%s", "sacct", "-X", "-n", "-P", "-j", &job.to_string(), "-o", "Start,NodeList"],
        )
        .unwrap();
    out.stdout
        .lines()
        .filter_map(|l| {
            let (start, nodes) = l.split_once('|')?;
            Some((start.trim().parse().ok()?, nodes.trim().to_string()))
        })
        .collect()
}

/// Cancels every test user's jobs.
fn cancel_users_jobs(c: &DockerCluster) {
    for u in ["fw_alice", "fw_bob", "fw_carol", "fw_dave"] {
        let _ = c.cmd("scancel", &["-u", u]);
    }
}

/// Cancels the test's jobs and waits for an empty queue before its configuration is
/// restored (declared after [`Restore`], so dropped first).
struct CancelAll<'a>(&'a DockerCluster);

impl Drop for CancelAll<'_> {
    fn drop(&mut self) {
        cancel_users_jobs(self.0);
        let _ = self.0.wait_for("the queue is empty", Duration::from_secs(60), || {
            Ok(self.0.cmd("squeue", &["-h"])?.stdout.trim().is_empty())
        });
    }
}

/// The starvation bound and predicted limits on a busy cluster, with the shipped
/// fairway.toml (`max_wait` shortened to 5 s, the predicted-limit floor to 2 minutes;
/// backfill every 5 s): a two-node job of 16 H100s, whose other factors put it below a
/// stream of 1-GPU jobs (here `--nice`, standing in for, say, a long prediction), would
/// wait until the stream of 1,000 jobs ran dry (about ten minutes). Once it has waited
/// `max_wait` the plugin lifts it above the stream (its user is not a heavy one), Slurm's
/// backfill reserves the two H100 nodes for it, and it starts once the jobs on them end:
/// by the time limit of the longest of them (an 8-minute job of another user), while
/// backfill keeps starting the stream's jobs on the GPUs it does not need and, on its own
/// nodes, those whose predicted limit (2 minutes, not their own 10) ends before the
/// reservation. The stream's jobs name no account: their history is found under the
/// user's default one.
#[test]
#[ignore = "needs the docker cluster: make e2e"]
fn a_starving_large_job_starts_within_its_bound_while_backfill_keeps_the_gpus_busy() {
    let c = cluster();
    let conf = c.read_file("ctld", SLURM_CONF).unwrap();
    if !runs_fairway_priority(&c, &conf) {
        return;
    }
    let toml = c.read_file("ctld", FAIRWAY_TOML).unwrap();
    let priority_type = conf.lines().find_map(|l| l.strip_prefix("PriorityType=")).unwrap().to_string();
    let short = toml
        .replace("max_wait = \"3-00:00:00\"", SHORT_MAX_WAIT)
        .replace("min_predicted_limit = \"10:00\"", SHORT_MIN_LIMIT);
    assert!(
        short.contains(SHORT_MAX_WAIT) && short.contains(SHORT_MIN_LIMIT),
        "the cluster's fairway.toml sets no max_wait of 3 days or predicted limit floor of 10 minutes:\n{toml}"
    );
    let _restore = Restore { c: &c, conf: &conf, toml: &toml };
    let _cancel = CancelAll(&c);
    cancel_users_jobs(&c);
    // The stream's run history: two runs of 15 s, saved when slurmctld stops below.
    let history: Vec<u32> = (0..2).map(|_| c.sbatch("fw_alice", STREAM_JOB).unwrap()).collect();
    for j in history {
        assert_eq!(c.wait_job(j, &["COMPLETED", "FAILED", "TIMEOUT"], Duration::from_secs(90)).unwrap(), "COMPLETED");
    }
    c.write_file("ctld", FAIRWAY_TOML, &short).unwrap();
    c.write_file("ctld", SLURM_CONF, &with_quick_backfill(&conf)).unwrap();
    restart_ctld(&c, &priority_type);

    // One H100 held for up to HOLD_MINUTES (it runs 2 minutes, well past the lift, which
    // comes at the first priority pass after max_wait: within 65 s; the stream's jobs on
    // c1/c2 end every 15 s or so, so several rounds of them can start in between): the
    // large job's reservation cannot start before that job's limit, and backfill may fill
    // its nodes until then.
    // Backfill plans on a 60-s grid (bf_resolution): the reservation begins on the grid
    // line before that limit, and a stream job fits before it only if its 2-minute limit,
    // rounded up to the grid, ends by then. With a 4-minute hold that left 0 to 60 s
    // after the lift, by the minute's phase (the test failed when no stream job ended
    // on c1/c2 within it); 8 minutes leave over two minutes.
    // A name of its own, so that no earlier run's history predicts it a shorter limit.
    let name = format!("fw-hold-{}", ctld_clock(&c));
    let hold_limit = HOLD_MINUTES.to_string();
    let long = c
        .sbatch("fw_dave", &["-J", &name, "-p", "gpu", "--gres=gpu:h100:1", "-t", &hold_limit, "--wrap=sleep 120"])
        .unwrap();
    c.wait_job(long, &["RUNNING"], Duration::from_secs(60)).unwrap();
    let large = c
        .sbatch("fw_bob", &["-p", "gpu", "-N", "2", "--gres=gpu:h100:8", "--nice=100000", "-t", "5", "--wrap=sleep 5"])
        .unwrap();
    let stream = c.sbatch("fw_alice", &[&["--array=1-1000"][..], STREAM_JOB].concat()).unwrap();
    let (large_id, stream_id) = (large.to_string(), stream.to_string());
    let submitted = ctld_clock(&c);
    // A predicted limit, extendable up to the 10 minutes asked for.
    let shown = c.cmd("scontrol", &["-o", "show", "job", &format!("{stream}_1")]).unwrap().stdout;
    assert!(shown.contains(" TimeLimit=00:02:00 "), "{shown}");
    assert!(shown.contains("fairway:extend_to=10"), "{shown}");

    // Until it starts: when its priority first rises above the stream's.
    let mut lifted = None;
    c.wait_for("the large job starts", Duration::from_secs(480), || {
        let state = c.job_state(large)?;
        if lifted.is_none() && state == "PENDING" {
            if let (Some(l), Some(s)) = (queue_priority(&c, &large_id), queue_priority(&c, &stream_id)) {
                if l > s {
                    lifted = Some(ctld_clock(&c));
                }
            }
        }
        Ok(state != "PENDING")
    })
    .unwrap();
    let shown = c.cmd("scontrol", &["-o", "show", "job", &large_id]).unwrap().stdout;
    c.wait_for("slurmdbd has the large job's start", Duration::from_secs(60), || Ok(!starts(&c, large).is_empty()))
        .unwrap();
    let start = |job: u32| starts(&c, job).first().map(|s| s.0).unwrap_or_else(|| panic!("job {job} has no start"));
    let (large_start, long_start) = (start(large), start(long));
    let lifted =
        lifted.unwrap_or_else(|| panic!("the large job never rose above the stream before it started:\n{shown}"));
    let still_pending = c.cmd("squeue", &["-h", "-t", "PD", "-r", "-j", &stream_id]).unwrap().stdout.lines().count();
    let tasks = starts(&c, stream);
    let (mut on_its_nodes, mut elsewhere) = (0, 0);
    for (t, nodes) in &tasks {
        if *t >= lifted && *t < large_start {
            if nodes == "c1" || nodes == "c2" {
                on_its_nodes += 1;
            } else {
                elsewhere += 1;
            }
        }
    }
    eprintln!(
        "Slurm {}: large job {large} submitted at +0 s, lifted by +{} s, started at +{} s (the \
         {HOLD_MINUTES}-minute job on its nodes started at +{} s); {} of the stream's jobs started while it \
         waited after the lift ({on_its_nodes} on c1/c2, {elsewhere} on c3/c4), {still_pending} still pending",
        c.version,
        lifted - submitted,
        large_start - submitted,
        long_start - submitted,
        on_its_nodes + elsewhere
    );
    // It starved: the stream, above it, kept it from starting until it was lifted.
    assert!(large_start - submitted >= 5, "it started before max_wait:\n{shown}");
    assert!(still_pending > 100, "the stream ran dry ({still_pending} pending): the lift was not needed");
    // Within its bound: by the limit of the longest job on its nodes, plus a few
    // backfill cycles for slack.
    assert!(
        large_start <= (long_start + HOLD_MINUTES * 60).max(lifted) + 15,
        "it started {} s after the limit of the job on its nodes:\n{shown}",
        large_start - long_start - HOLD_MINUTES * 60
    );
    // Backfill kept the GPUs busy meanwhile: the stream's jobs started on the A100 nodes
    // (the large job does not need them) and on its own, where their predicted limit
    // ends before the reservation (their own 10 minutes would not).
    assert!(elsewhere > 0, "no job started on c3/c4 after the lift: {tasks:?}");
    assert!(on_its_nodes > 0, "no job backfilled on c1/c2 after the lift: {tasks:?}");
}
