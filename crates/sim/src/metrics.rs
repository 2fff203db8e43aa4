//! What a run is judged by.

use serde::Serialize;

use crate::engine::JobOutcome;
use crate::Workload;

/// Floor of bounded slowdown, seconds.
pub const SLOWDOWN_FLOOR_S: f64 = 10.0;

/// Summary of one run. Times in seconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Metrics {
    /// Jobs simulated.
    pub jobs: usize,
    /// Mean job completion time (end − submit).
    pub mean_jct: f64,
    /// Median job completion time.
    pub median_jct: f64,
    /// Mean wait (start − submit).
    pub mean_wait: f64,
    /// 95th percentile of wait.
    pub p95_wait: f64,
    /// 99th percentile of wait.
    pub p99_wait: f64,
    /// Longest wait.
    pub max_wait: f64,
    /// Mean bounded slowdown: `max(1, (wait + run) / max(run, 10 s))`.
    pub mean_bsld: f64,
    /// GPU-seconds used over GPU-seconds available from the first submission to the last end.
    pub utilisation: f64,
    /// Jain's index of per-user mean bounded slowdown: 1 when all users see the same.
    pub jain_users: f64,
    /// Time average, over calc periods with jobs waiting, of the GPUs held away from the
    /// share-weighted max-min fair allocation of the accounts' demand, as a fraction of the
    /// cluster (half the L1 distance; 0 = exactly the shares).
    pub share_deviation: f64,
    /// GPU count from which a job counts as one of the largest (90th percentile).
    pub large_gpus: u32,
    /// 99th percentile of wait of the largest jobs.
    pub p99_wait_large: f64,
}

/// Nearest-rank percentile (`q` in [0, 1]) of sorted values; 0 for none.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

/// Jain's fairness index `(Σx)² / (n Σx²)`; 1 for no values or all zero.
pub fn jain(x: &[f64]) -> f64 {
    let sq: f64 = x.iter().map(|v| v * v).sum();
    if x.is_empty() || sq == 0.0 {
        return 1.0;
    }
    let s: f64 = x.iter().sum();
    s * s / (x.len() as f64 * sq)
}

/// Weighted max-min fair ("water-filling") division of `capacity` among claimants with
/// `weights` and `demand`s: nobody gets more than they ask for, and what is left is shared in
/// proportion to the weights among those who still want more.
pub fn water_fill(capacity: f64, weights: &[f64], demand: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0; demand.len()];
    let mut open: Vec<usize> = (0..demand.len()).filter(|&i| demand[i] > 0.0 && weights[i] > 0.0).collect();
    let mut left = capacity;
    while !open.is_empty() && left > 1e-9 {
        let w: f64 = open.iter().map(|&i| weights[i]).sum();
        let level = left / w;
        let (sated, rest): (Vec<usize>, Vec<usize>) =
            open.iter().partition(|&&i| demand[i] - out[i] <= level * weights[i] + 1e-12);
        if sated.is_empty() {
            for &i in &rest {
                out[i] += level * weights[i];
            }
            break;
        }
        for &i in &sated {
            left -= demand[i] - out[i];
            out[i] = demand[i];
        }
        open = rest;
    }
    out
}

impl Metrics {
    /// Metrics of `outcomes` (in workload order) on a cluster of `total_gpus`.
    /// `held_gpu_seconds` is what all runs held (preempted runs included), for utilisation.
    pub fn compute(
        w: &Workload,
        outcomes: &[JobOutcome],
        total_gpus: u64,
        held_gpu_seconds: f64,
        share_deviation: f64,
    ) -> Metrics {
        let n = outcomes.len();
        let mut jct = Vec::with_capacity(n);
        let mut wait = Vec::with_capacity(n);
        let mut bsld = Vec::with_capacity(n);
        let mut per_user = vec![(0.0, 0usize); w.users.len()];
        for (job, o) in w.jobs.iter().zip(outcomes) {
            let wt = (o.start - job.submit) as f64;
            let c = (o.end - job.submit) as f64;
            jct.push(c);
            wait.push(wt);
            // JCT over the job's own run time: a preempted job's lost work and requeue
            // count as waiting.
            let b = (c / (job.runtime as f64).max(SLOWDOWN_FLOOR_S)).max(1.0);
            bsld.push(b);
            per_user[job.user].0 += b;
            per_user[job.user].1 += 1;
        }
        let used = held_gpu_seconds;
        let mean = |v: &[f64]| if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 };
        let (mean_jct, mean_wait, mean_bsld) = (mean(&jct), mean(&wait), mean(&bsld));
        let user_bsld: Vec<f64> = per_user.iter().filter(|(_, c)| *c > 0).map(|&(s, c)| s / c as f64).collect();

        let mut gpus: Vec<f64> = w.jobs.iter().map(|j| f64::from(j.gpus())).collect();
        gpus.sort_by(f64::total_cmp);
        let large_gpus = percentile(&gpus, 0.9) as u32;
        let mut large_wait: Vec<f64> =
            w.jobs.iter().zip(&wait).filter(|(j, _)| j.gpus() >= large_gpus).map(|(_, &x)| x).collect();
        large_wait.sort_by(f64::total_cmp);

        jct.sort_by(f64::total_cmp);
        wait.sort_by(f64::total_cmp);
        let first = w.jobs.iter().map(|j| j.submit).min().unwrap_or(0);
        let last = outcomes.iter().map(|o| o.end).max().unwrap_or(first);
        let span = (last - first).max(1) as f64;
        Metrics {
            jobs: n,
            mean_jct,
            median_jct: percentile(&jct, 0.5),
            mean_wait,
            p95_wait: percentile(&wait, 0.95),
            p99_wait: percentile(&wait, 0.99),
            max_wait: wait.last().copied().unwrap_or(0.0),
            mean_bsld,
            utilisation: used / (total_gpus as f64 * span),
            jain_users: jain(&user_bsld),
            share_deviation,
            large_gpus,
            p99_wait_large: percentile(&large_wait, 0.99),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_jain_and_water_fill() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!((percentile(&v, 0.5), percentile(&v, 0.99), percentile(&v, 1.0)), (50.0, 99.0, 100.0));
        assert_eq!(jain(&[2.0, 2.0, 2.0]), 1.0);
        assert_eq!(jain(&[1.0, 0.0]), 0.5);
        // 10 GPUs, equal weights: a wants 2 (gets 2), b and c split the other 8.
        assert_eq!(water_fill(10.0, &[1.0, 1.0, 1.0], &[2.0, 20.0, 6.0]), vec![2.0, 4.0, 4.0]);
        // weights 3:1, both want everything
        assert_eq!(water_fill(8.0, &[3.0, 1.0], &[100.0, 100.0]), vec![6.0, 2.0]);
        assert_eq!(water_fill(8.0, &[1.0, 1.0], &[1.0, 2.0]), vec![1.0, 2.0]);
    }
}
