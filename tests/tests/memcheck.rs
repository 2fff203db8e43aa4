//! slurmctld with Fairway's plugins under a sustained mixed load: submissions (held,
//! with directives, deadlines, limits, two QoS), `scontrol update`, releases that run,
//! cancellations, preemptions and `scontrol reconfigure`, while priority passes run
//! every minute. slurmctld's resident memory is sampled after every round of 100 jobs.
//!
//! `make test-slurm` runs it with 1,000 jobs. `make memcheck` runs 10,000 with
//! slurmctld under valgrind's memcheck and counts invalid accesses and definite leaks,
//! all of them and those with a Fairway frame in their stack, into
//! `bench/results/memcheck.md` (`FAIRWAY_MEMCHECK_JOBS`, `FAIRWAY_VALGRIND=1`,
//! `FAIRWAY_MEMCHECK_REPORT`).

use std::time::{Duration, Instant};

use fairway_tests::{Cluster, ClusterSpec, Slurm};

const ROUND: usize = 100;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// slurmctld's resident set, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// One valgrind error or leak record.
#[derive(Debug)]
struct Finding {
    kind: String,
    fairway: bool,
    text: String,
}

/// The error and definite-leak records of a valgrind log (records are separated by
/// `==PID== ` lines with nothing after them). A record is Fairway's when a frame names
/// one of its plugins or crates.
fn findings(log: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    let body = |l: &str| l.split_once("== ").map_or(String::new(), |(_, b)| b.to_string());
    let lines: Vec<String> = log.lines().filter(|l| l.starts_with("==")).map(body).collect();
    for record in lines.split(|l| l.trim().is_empty()) {
        let Some(first) = record.first() else { continue };
        let kind = if first.starts_with("Invalid read") {
            "invalid read"
        } else if first.starts_with("Invalid write") {
            "invalid write"
        } else if first.starts_with("Invalid free") || first.starts_with("Mismatched free") {
            "invalid free"
        } else if first.starts_with("Conditional jump") || first.starts_with("Use of uninitialised") {
            "uninitialised value"
        } else if first.starts_with("Syscall param") {
            "syscall param"
        } else if first.contains("definitely lost in loss record") {
            "definitely lost"
        } else {
            continue;
        };
        let text = record.join("\n");
        let fairway = text.contains("fairway");
        // tracing keeps the global dispatcher a plugin installs at load for the life of
        // the process, by design (it cannot be unset): one allocation per plugin load,
        // which valgrind calls lost once Slurm unloads the library at shutdown.
        let kind = if kind == "definitely lost" && text.contains("tracing::subscriber::set_global_default") {
            "lost at unload: tracing's global dispatcher (once per plugin load)"
        } else {
            kind
        };
        out.push(Finding { kind: kind.into(), fairway, text });
    }
    out
}

/// Waits until none of `jobs` is pending, running or completing. (MinJobAge=5 purges an
/// ended job within seconds, so its end state may never be seen.)
fn wait_done(c: &Cluster, jobs: &[u32], patience: Duration) {
    let start = Instant::now();
    loop {
        let active = c.cmd("squeue", &["-h", "-t", "PD,R,CG", "-o", "%i"]).unwrap().stdout;
        let active: Vec<u32> = active.split_whitespace().filter_map(|i| i.parse().ok()).collect();
        if !jobs.iter().any(|j| active.contains(j)) {
            return;
        }
        assert!(start.elapsed() < patience, "jobs {jobs:?} still active after {patience:?}:\n{}", c.log_tails());
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn slurmctld_under_load() {
    let total = env_usize("FAIRWAY_MEMCHECK_JOBS", 1000).max(ROUND);
    let valgrind = std::env::var("FAIRWAY_VALGRIND").is_ok_and(|v| v == "1");
    let wrapper: Vec<String> = if valgrind {
        [
            "valgrind",
            "--tool=memcheck",
            "--leak-check=full",
            "--show-leak-kinds=definite",
            "--errors-for-leak-kinds=definite",
            "--num-callers=40",
            "--keep-debuginfo=yes",
            "--error-limit=no",
            "--log-file={dir}/log/valgrind.%p.log",
        ]
        .map(String::from)
        .to_vec()
    } else {
        Vec::new()
    };
    // The same load on stock Slurm (multifactor, preempt/qos, no job_submit plugin): what
    // slurmctld's memory does without Fairway, to read Fairway's own figures against.
    let stock = std::env::var("FAIRWAY_MEMCHECK_STOCK").is_ok_and(|v| v == "1");
    let (priority, preempt, job_submit) = if stock {
        ("priority/multifactor", "preempt/qos", vec![])
    } else {
        ("priority/fairway", "preempt/fairway", vec!["fairway".to_string()])
    };
    let spec = ClusterSpec {
        priority_type: priority.into(),
        job_submit_plugins: job_submit,
        slurm_conf_extra: vec![
            "PriorityCalcPeriod=1".into(),
            "PriorityWeightFairshare=1000".into(),
            "PriorityWeightQOS=1000".into(),
            format!("PreemptType={preempt}"),
            "PreemptMode=REQUEUE".into(),
            // Finished jobs leave slurmctld's memory soon, so what remains is what leaks.
            "MinJobAge=5".into(),
        ],
        fairway_toml: Some(
            "[priority]\nweight_predicted_work = 100\nweight_deadline = 500\ndeadline_qos = [\"normal\"]\n\
             max_wait = \"1:00:00\"\n\n[preempt]\nmin_runtime = 0\nmax_preemptions = 0\nmin_grace = 1\n\
             default_grace = 1\n\n[job_submit]\nrecord_changes = true\n\n[job_submit.time]\nauto_margin = 0.5\n\
             record_prediction = true\n"
                .into(),
        ),
        slurmctld_wrapper: wrapper,
        ..ClusterSpec::default()
    };
    let started = Instant::now();
    let mut c = Cluster::start(&spec).expect("cluster starts");
    let out = c.cmd("sacctmgr", &["-i", "modify", "qos", "high", "set", "Preempt=scavenger"]).unwrap();
    assert!(out.ok(), "{out:?}");
    let pid = c.daemon_pid("slurmctld").unwrap();
    let victim = c.sbatch("fw_alice", &["--qos=scavenger", "-n", "1", "--requeue", "--wrap=sleep 100000"]).unwrap();

    let patience = Duration::from_secs(if valgrind { 1800 } else { 180 });
    let users = ["fw_alice", "fw_bob"];
    let (mut submitted, mut refused, mut samples) = (0usize, Vec::new(), Vec::new());
    for round in 0..total / ROUND {
        let mut held = Vec::new();
        for i in 0..ROUND {
            let n = round * ROUND + i;
            let name = format!("eval-{}", n % 50);
            let mut args = vec!["--hold", "-J", &name];
            let deadline = "--deadline=now+2hour";
            let extra: &[&str] = match i % 5 {
                0 => &[],
                1 => &["--comment=fairway: ckpt=2m"],
                2 => &[deadline],
                3 => &["-t", "10"],
                _ => &["--qos=scavenger"],
            };
            args.extend_from_slice(extra);
            args.push("--wrap=true");
            match c.sbatch(users[n % 2], &args) {
                Ok(id) => held.push(id),
                Err(e) => refused.push(e),
            }
            submitted += 1;
        }
        let ids = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        for id in &held[..20.min(held.len())] {
            let _ = c.cmd("scontrol", &["update", &format!("JobId={id}"), "TimeLimit=20"]);
        }
        for id in &held[20.min(held.len())..30.min(held.len())] {
            let _ = c.cmd("scontrol", &["update", &format!("JobId={id}"), "Comment=fairway: ckpt=1m"]);
        }
        let (run, rest) = held.split_at(4.min(held.len()));
        c.cmd("scontrol", &["release", &ids(run)]).unwrap();
        if !rest.is_empty() {
            c.cmd("scancel", &[&ids(rest)]).unwrap();
        }
        if round % 10 == 9 {
            let out = c.cmd("scontrol", &["reconfigure"]).unwrap();
            assert!(out.ok(), "{out:?}");
            // Takes both CPUs: preempts the scavenger job (requeued, and back later).
            match c.sbatch("fw_bob", &["--qos=high", "-n", "2", "--wrap=true"]) {
                Ok(id) => wait_done(&c, &[id], patience),
                Err(e) => refused.push(e),
            }
            submitted += 1;
        }
        // The released jobs run before the next burst: the load keeps jobs starting
        // and ending, not only queueing.
        wait_done(&c, run, patience);
        assert!(c.is_running("slurmctld"), "slurmctld died in round {round}:\n{}", c.log_tails());
        samples.push((submitted, rss_kib(pid)));
    }
    let elapsed = started.elapsed();
    let restarts = c.cmd("scontrol", &["-o", "show", "job", &victim.to_string()]).unwrap().stdout;
    let restarts = restarts.split_whitespace().find_map(|f| f.strip_prefix("Restarts=")).unwrap_or("?").to_string();
    let log = c.log("slurmctld");
    let panics = log.matches(": internal error (panic").count();

    // RSS after the first fifth (caches, pools and the history warmed up) against the end.
    let warm = samples[samples.len() / 5];
    let last = *samples.last().unwrap();
    let slope = (last.1 as f64 - warm.1 as f64) / ((last.0 - warm.0).max(1) as f64 / 1000.0);
    let mut report = format!(
        "{total} jobs in {:.0} s ({}{}), slurmctld RSS {} MiB after {} jobs, {} MiB after {} ({:+.1} KiB per 1,000 jobs); \
         scavenger job preempted and requeued {restarts} times; {} submissions refused; {panics} panics caught\n",
        elapsed.as_secs_f64(),
        if valgrind { "slurmctld under valgrind memcheck" } else { "no valgrind" },
        if stock { ", stock Slurm: multifactor, preempt/qos, no job_submit plugin" } else { ", Fairway's plugins" },
        warm.1 / 1024,
        warm.0,
        last.1 / 1024,
        last.0,
        slope,
        refused.len(),
    );
    eprintln!("{report}");

    let mut fairway_findings = Vec::new();
    if valgrind {
        let _ = c.cmd("scancel", &["-u", "fw_alice"]);
        let _ = c.cmd("scancel", &["-u", "fw_bob"]);
        let status = c.stop_daemon("slurmctld", Duration::from_secs(1800)).unwrap();
        let mut all = Vec::new();
        for e in std::fs::read_dir(c.dir().join("log")).unwrap().flatten() {
            if e.file_name().to_string_lossy().starts_with("valgrind.") {
                all.extend(findings(&std::fs::read_to_string(e.path()).unwrap()));
            }
        }
        let mut kinds = std::collections::BTreeMap::new();
        for f in &all {
            let e = kinds.entry(f.kind.clone()).or_insert((0, 0));
            e.0 += 1;
            e.1 += usize::from(f.fairway);
        }
        report += &format!("slurmctld exited {status} after SIGTERM; valgrind records (all / with a Fairway frame):\n");
        for (k, (n, f)) in &kinds {
            report += &format!("- {k}: {n} / {f}\n");
        }
        if kinds.is_empty() {
            report += "- none\n";
        }
        fairway_findings = all.into_iter().filter(|f| f.fairway && !f.kind.starts_with("lost at unload")).collect();
        for f in &fairway_findings {
            report += &format!("\n```\n{}\n```\n", f.text);
        }
        eprintln!("{report}");
    }
    if let Ok(path) = std::env::var("FAIRWAY_MEMCHECK_REPORT") {
        // Every tenth round (every 1,000 jobs), and the first.
        let rows: Vec<String> = samples
            .iter()
            .enumerate()
            .filter(|(i, _)| *i == 0 || i % 10 == 9)
            .map(|(_, (j, r))| format!("| {j} | {} |", r / 1024))
            .collect();
        let text = format!(
            "# slurmctld under load (`make memcheck`)\n\nGenerated by `tests/tests/memcheck.rs`.\n\n{report}\n\
             | jobs submitted | slurmctld RSS (MiB) |\n|---|---|\n{}\n",
            rows.join("\n")
        );
        std::fs::write(&path, text).unwrap();
    }
    assert!(refused.is_empty(), "{} submissions refused: {:?}", refused.len(), &refused[..refused.len().min(3)]);
    assert_eq!(panics, 0, "a Fairway plugin panicked under load:\n{log}");
    assert!(fairway_findings.is_empty(), "valgrind found errors in Fairway's code:\n{report}");
    c.stop().unwrap();
}

#[test]
fn valgrind_records_are_read_and_attributed() {
    let log = "==7== Memcheck\n==7== \n==7== Invalid read of size 8\n==7==    at 0x1: fairway_ffi::job::x (job.rs:1)\n\
               ==7== \n==7== Conditional jump or move depends on uninitialised value(s)\n==7==    at 0x2: _slurm_rpc (proc_req.c:3)\n\
               ==7== \n==7== 16 bytes in 1 blocks are definitely lost in loss record 3 of 9\n==7==    at 0x3: malloc\n\
               ==7==    by 0x4: xmalloc (xmalloc.c:1)\n==7== \n==7== LEAK SUMMARY:\n";
    let f = findings(log);
    let got: Vec<(&str, bool)> = f.iter().map(|f| (f.kind.as_str(), f.fairway)).collect();
    assert_eq!(got, [("invalid read", true), ("uninitialised value", false), ("definitely lost", false)]);
}
