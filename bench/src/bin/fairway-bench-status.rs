//! Benchmark: what publishing priority/fairway's status costs a pass, apart from the pass.
//!
//!     fairway-bench-status [JOBS]
//!
//! (default 50000). Inside the pass the plugin notes each pending job's terms
//! (`fairway_core::status::PassJobs::job`); after it, a thread of its own serializes
//! the status and writes it. This times both over JOBS jobs shaped as the plugin sees
//! them (a partition name, terms, a run time), the median of 21 rounds, and prints them
//! beside a pass without the noting, so the ratio is measured side by side in one run.
//! `make bench-priority` measures whole passes in slurmctld, where run-to-run noise
//! (50-115 ms a pass on this machine) hides a cost this small.
#![forbid(unsafe_code)]

use std::hint::black_box;
use std::time::Instant;

use fairway_core::config::PriorityConfig;
use fairway_core::predict::RuntimeSource;
use fairway_core::priority::{JobInput, JobPriority, TermsJob};
use fairway_core::status::PassJobs;
use fairway_core::terms::Terms;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let jobs: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(50_000);
    let config = PriorityConfig { weight_predicted_work: 1000, ..PriorityConfig::default() };
    let make = |id: u32| {
        let input = JobInput {
            job_id: id,
            terms: Some(TermsJob { partition: format!("gpu{}", id % 4), eligible_since: 1_000, ..TermsJob::default() }),
            ..JobInput::default()
        };
        let out = JobPriority {
            priority: id,
            terms: Some(Terms { predicted_work: 0.5, ..Terms::default() }),
            expected_runtime: Some(3_600),
            runtime_source: Some(RuntimeSource::LastRuns),
            ..JobPriority::default()
        };
        (input, out)
    };
    let (mut with, mut without, mut json) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..21 {
        // The pass builds each job's input and drops it; with publishing it hands the
        // input to PassJobs instead. Both loops build the same inputs.
        let t = Instant::now();
        for id in 0..jobs {
            let (input, out) = make(id);
            black_box((&input, &out));
        }
        without.push(t.elapsed().as_secs_f64());

        let t = Instant::now();
        let mut pass = PassJobs::new(&config);
        for id in 0..jobs {
            let (input, out) = make(id);
            black_box((&input, &out));
            pass.job(&input, &out);
        }
        let pass = pass.finish(&[]);
        with.push(t.elapsed().as_secs_f64());

        let t = Instant::now();
        black_box(pass.status(1_000, 0.1, u64::from(jobs), 60).to_json());
        json.push(t.elapsed().as_secs_f64());
    }
    let (with, without, json) = (median(with), median(without), median(json));
    println!("{jobs} pending jobs with terms, median of 21:");
    println!("  building the inputs alone (the pass without publishing):  {:>7.2} ms", without * 1e3);
    println!("  the same, noting each job for the status (in the pass):    {:>7.2} ms", with * 1e3);
    println!("  added to the pass by publishing:                          {:>7.2} ms", (with - without) * 1e3);
    println!("  building and serializing the status (status thread):      {:>7.2} ms", json * 1e3);
}
