//! Reading and comparing what `sshare` prints, for the fair-share tests.

use std::time::{Duration, Instant};

use crate::{Cluster, Slurm};

/// Waits for the next decay pass of priority/fairway (a minute at `PriorityCalcPeriod=1`),
/// after which usage has been saved: its last-decay file is written anew.
pub fn wait_for_decay_pass(c: &Cluster) {
    let file = c.dir().join("state/fairway_priority_last_decay");
    let pass = std::fs::metadata(&file).and_then(|m| m.modified()).ok();
    let start = Instant::now();
    c.wait_until("a decay pass", || {
        let now = std::fs::metadata(&file).and_then(|m| m.modified()).ok();
        Ok(now.is_some() && now != pass && start.elapsed() > Duration::from_secs(1))
    })
    .unwrap_or_else(|_| panic!("no decay pass recorded"));
}

/// A number as sshare prints it (`inf`, empty for "not applicable").
pub fn num(v: &str) -> f64 {
    match v.trim() {
        "inf" => f64::INFINITY,
        "" => f64::NAN,
        v => v.parse().unwrap_or(f64::NAN),
    }
}

/// Whether two printed numbers agree within a relative or absolute tolerance (two
/// empty fields agree).
pub fn close(a: &str, b: &str, rel: f64, abs: f64) -> bool {
    let (x, y) = (num(a), num(b));
    (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= abs.max(rel * x.abs().max(y.abs()))
}

/// A user's RawUsage, summed over its associations.
pub fn raw_usage(c: &impl Slurm, user: &str) -> f64 {
    let out = c.cmd("sshare", &["-h", "-P", "-u", user, "-o", "User,RawUsage"]).expect("sshare runs");
    let rows: Vec<f64> = out
        .stdout
        .lines()
        .filter_map(|l| l.split_once('|'))
        .filter(|(u, _)| *u == user)
        .filter_map(|(_, r)| r.parse().ok())
        .collect();
    assert!(!rows.is_empty(), "no RawUsage for {user}: {out:?}");
    rows.iter().sum()
}
