//! Benchmark: what Fairway's terms cost a priority pass, per job, apart from slurmctld.
//!
//!     fairway-bench-terms [JOBS]
//!
//! (default 50000). Runs `fairway_core::priority::Pass` over JOBS pending jobs (four
//! users, 200 job names, a learned run-time history for each key, as the plugin's decay
//! pass does after `JobRecord::priority_input`) with every term off and with predicted
//! work and a starvation bound on, median of 11 passes each, side by side in one run.
//! `make bench-priority` measures whole passes in slurmctld, where passes vary by tens of
//! milliseconds; this isolates the policy's own share.
#![forbid(unsafe_code)]

use std::time::Instant;

use fairway_core::config::{PriorityConfig, Seconds};
use fairway_core::multifactor::{self, Weights};
use fairway_core::predict::{self, JobKey, JobRequest, RuntimePredictor};
use fairway_core::priority::{JobInput, Pass, Policy, TermsJob};
use fairway_core::terms::FirstStarving;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let jobs: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(50_000);
    let key = |id: u32| JobKey {
        user: 1000 + id % 4,
        account: "vision".into(),
        name: format!("train-{}", id % 200),
        gpus: 8,
    };
    let mut history = RuntimePredictor::default();
    for id in 0..800 {
        predict::learn(&mut history, &key(id), 3_000 + u64::from(id % 7) * 60, Some(86_400));
    }
    let inputs: Vec<JobInput> = (0..jobs)
        .map(|id| JobInput {
            job_id: id,
            factors: multifactor::JobInput { now: 100_000, ..multifactor::JobInput::default() },
            terms: Some(TermsJob {
                partition: "gpu".into(),
                eligible_since: 90_000,
                gpus: 8,
                request: Some(JobRequest {
                    key: key(id),
                    time_limit: Some(86_400),
                    nodes: Some(1),
                    cpus: None,
                    submit: 90_000,
                }),
                ..TermsJob::default()
            }),
            ..JobInput::default()
        })
        .collect();
    let weights = Weights::default();
    let off = PriorityConfig::default();
    let on = PriorityConfig {
        weight_predicted_work: 1000,
        max_wait: Some(Seconds(2 * 86_400)),
        ..PriorityConfig::default()
    };
    let pass = |terms: &PriorityConfig| {
        let mut times = Vec::new();
        for _ in 0..11 {
            let policy = Policy { weights: &weights, terms, history: Some(&history), model: None };
            let mut first = FirstStarving::default();
            let t = Instant::now();
            let mut pass = Pass::new(policy, &mut first);
            let sum: u64 = inputs.iter().map(|j| u64::from(pass.job(j).priority)).sum();
            std::hint::black_box((sum, pass.finish()));
            times.push(t.elapsed().as_secs_f64());
        }
        median(times)
    };
    let (t_off, t_on) = (pass(&off), pass(&on));
    println!("{jobs} pending jobs, Fairway's policy alone (no slurmctld), median of 11 passes:");
    println!("  every term off:                      {:>7.2} ms", t_off * 1e3);
    println!(
        "  predicted work + starvation bound:   {:>7.2} ms ({:.0} ns a job more)",
        t_on * 1e3,
        (t_on - t_off) * 1e9 / f64::from(jobs)
    );
}
