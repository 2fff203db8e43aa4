//! Benchmark: CPU time of one full priority recalculation (usage decay, fair share and
//! every pending job's priority) in slurmctld, priority/fairway against
//! priority/multifactor, with the same association tree and pending jobs.
//!
//!     fairway-bench-priority [JOBS] [ASSOCIATIONS] [--only fairway|multifactor] [--fairway-toml FILE]
//!
//! (default 50000 2000, both plugins, every Fairway term off).
//!
//! Each plugin gets its own real cluster (the test harness). The CPU time is that of
//! the plugin's decay thread ("decay" / "fairway_decay") between two consecutive passes,
//! read from /proc/PID/task/TID/schedstat (nanoseconds); the median of five passes
//! is reported. Both run with PriorityCalcPeriod=1 (minute) and Fair Tree.
#![forbid(unsafe_code)]

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};
use fairway_tests::{Cluster, ClusterSpec};

/// Passes timed per plugin; the median is reported.
const PASSES: usize = 5;

const USERS: [&str; 4] = ["fw_alice", "fw_bob", "fw_carol", "fw_dave"];

/// CPU time of slurmctld's thread `name`, in seconds: schedstat's nanoseconds on CPU, since
/// stat's utime/stime count whole 10 ms clock ticks and one pass takes a few of them.
fn thread_cpu_secs(pid: u32, name: &str) -> Result<f64> {
    for e in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let dir = e?.path();
        if std::fs::read_to_string(dir.join("comm")).unwrap_or_default().trim() == name {
            let stat = std::fs::read_to_string(dir.join("schedstat"))?;
            let ns: u64 = stat.split_whitespace().next().unwrap_or("").parse().context("schedstat")?;
            return Ok(ns as f64 * 1e-9);
        }
    }
    bail!("no thread {name} in slurmctld {pid}")
}

fn mtime(p: &Path) -> Option<SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

fn wait_for_pass(state: &Path, after: Option<SystemTime>) -> Result<SystemTime> {
    let start = Instant::now();
    loop {
        if let Some(t) = mtime(state) {
            if Some(t) != after {
                return Ok(t);
            }
        }
        if start.elapsed() > Duration::from_secs(300) {
            bail!("no decay pass recorded in {}", state.display());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

struct Result1 {
    passes: Vec<f64>,
    submit_secs: f64,
}

fn run(priority_type: &str, jobs: u32, assocs: u32) -> Result<Result1> {
    // `--fairway-toml FILE`: Fairway's terms (and `[status]`) for the run, e.g. to
    // measure what publishing the status costs a pass with the terms on.
    let fairway_toml = match std::env::args().skip_while(|a| a != "--fairway-toml").nth(1) {
        Some(f) => Some(std::fs::read_to_string(&f).with_context(|| f.clone())?),
        None => None,
    };
    let s = |v: &str| v.to_string();
    let spec = ClusterSpec {
        priority_type: s(priority_type),
        slurm_conf_extra: vec![
            format!("MaxJobCount={}", jobs + 1000),
            s("PriorityCalcPeriod=1"),
            s("PriorityWeightAge=1000"),
            s("PriorityWeightFairshare=10000"),
            s("PriorityWeightJobSize=1000"),
            s("PriorityWeightPartition=1000"),
            s("PriorityWeightQOS=1000"),
            s("PriorityWeightAssoc=100"),
            s("PriorityMaxAge=1-0"),
            // Keep the scheduler from competing for the job lock.
            s("SchedulerParameters=sched_interval=3600,bf_interval=3600"),
        ],
        users: USERS.iter().enumerate().map(|(i, u)| (s(u), s(if i % 2 == 0 { "vision" } else { "nlp" }))).collect(),
        slurmd: false,
        fairway_toml,
        ..ClusterSpec::default()
    };
    let c = Cluster::start(&spec).context("cluster")?;
    // Associations: accounts of 50 users each under ml (users need no Unix account).
    let per = 50;
    for a in 0..assocs.div_ceil(per) {
        let acct = format!("ba{a:03}");
        let out = c.cmd("sacctmgr", &["-i", "add", "account", &acct, "Parent=ml", "Fairshare=10"])?;
        if !out.ok() {
            bail!("sacctmgr: {out:?}");
        }
        let users: Vec<String> = (0..per).map(|u| format!("bu{a:03}{u:02}")).collect();
        let out = c.cmd("sacctmgr", &["-i", "add", "user", &users.join(","), &format!("Account={acct}")])?;
        if !out.ok() {
            bail!("sacctmgr: {out:?}");
        }
    }
    let submit = Instant::now();
    let exe = std::env::current_exe()?.with_file_name("fairway-submit");
    let each = jobs / USERS.len() as u32;
    for u in USERS {
        let out = c.run_as(u, exe.to_str().unwrap(), &[&each.to_string(), "4"])?;
        if !out.ok() {
            bail!("fairway-submit as {u}: {out:?}");
        }
    }
    let submit_secs = submit.elapsed().as_secs_f64();
    let pending = c.cmd("squeue", &["-h", "-t", "PD", "-o", "%i"])?.stdout.lines().count();
    eprintln!("{priority_type}: {pending} pending jobs submitted in {submit_secs:.0} s");

    let pid = c.daemon_pid("slurmctld").context("slurmctld pid")?;
    let (state, thread) = if priority_type.ends_with("multifactor") {
        (c.dir().join("state/priority_last_decay_ran"), "decay")
    } else {
        (c.dir().join("state/fairway_priority_last_decay"), "fairway_decay")
    };
    let mut t = wait_for_pass(&state, mtime(&state))?;
    let mut cpu = thread_cpu_secs(pid, thread)?;
    let mut passes = Vec::new();
    for _ in 0..PASSES {
        t = wait_for_pass(&state, Some(t))?;
        let now = thread_cpu_secs(pid, thread)?;
        passes.push(now - cpu);
        eprintln!("{priority_type}: one pass took {:.1} ms of CPU", (now - cpu) * 1e3);
        cpu = now;
    }
    // priority/fairway publishes each pass's status from a thread of its own, off the
    // pass's locks: its CPU time is reported apart.
    if let Ok(secs) = thread_cpu_secs(pid, "fairway_status") {
        eprintln!("{priority_type}: the status thread took {:.1} ms of CPU in all", secs * 1e3);
    }
    c.stop()?;
    Ok(Result1 { passes, submit_secs })
}

fn main() -> Result<()> {
    let args: Vec<u32> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let jobs = args.first().copied().unwrap_or(50_000);
    let assocs = args.get(1).copied().unwrap_or(2_000);
    // `--only fairway` (or multifactor): one plugin's passes, e.g. to profile it.
    if let Some(only) = std::env::args().skip_while(|a| a != "--only").nth(1) {
        run(&format!("priority/{only}"), jobs, assocs)?;
        return Ok(());
    }
    let mf = run("priority/multifactor", jobs, assocs)?;
    let fw = run("priority/fairway", jobs, assocs)?;
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let range = |v: &[f64]| {
        let (lo, hi) = v.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        format!("{:.1}-{:.1}", lo * 1e3, hi * 1e3)
    };
    println!("\nOne full recalculation (decay + fair share + every pending job), {jobs} pending jobs, ~{assocs} user associations:");
    println!("{:<22} {:>16} {:>16} {:>16}", "plugin", "CPU ms / pass", format!("range ({PASSES})"), "submit wall s");
    for (name, r) in [("priority/multifactor", &mf), ("priority/fairway", &fw)] {
        println!("{:<22} {:>16.1} {:>16} {:>16.0}", name, median(&r.passes) * 1e3, range(&r.passes), r.submit_secs);
    }
    println!("ratio fairway / multifactor (medians): {:.2}x", median(&fw.passes) / median(&mf.passes));
    Ok(())
}
