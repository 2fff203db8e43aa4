//! Submits many small batch jobs through libslurm's API, far faster than running
//! `sbatch` once per job. Run it as the submitting user (the job's user is whoever
//! the munge credential says).
//!
//!     fairway-submit COUNT [CPUS_MAX]
#![forbid(unsafe_code)]

use fairway_ffi::client::{submit_batch, BatchJob};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let count: u32 = args
        .get(1)
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("usage: fairway-submit COUNT [CPUS_MAX]"))?;
    let cpus_max: u32 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(2).max(1);
    let jobs = (0..count).map(|i| BatchJob {
        name: format!("bench-{}", i % 97),
        script: "#!/bin/sh\ntrue\n".into(),
        min_cpus: 1 + i % cpus_max,
        time_limit_min: 10 + i % 50,
    });
    let ok = submit_batch(jobs).map_err(|e| anyhow::anyhow!("submission failed: {e}"))?;
    println!("{ok}");
    Ok(())
}
