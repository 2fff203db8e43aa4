//! Submits many small batch jobs through libslurm's API, far faster than running
//! `sbatch` once per job. Run it as the submitting user (the job's user is whoever
//! the munge credential says).
//!
//!     fairway-submit COUNT [CPUS_MAX] [--ai]
//!
//! `--ai` submits a mix of AI jobs: Fairway directives in `--comment` (LoRA
//! fine-tunes, checkpointing sweeps, plain batch) and GPU requests.
#![forbid(unsafe_code)]

use fairway_ffi::client::{submit_batch, BatchJob};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let count: u32 = args
        .get(1)
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("usage: fairway-submit COUNT [CPUS_MAX]"))?;
    let cpus_max: u32 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(2).max(1);
    let ai = args.iter().any(|a| a == "--ai");
    let jobs = (0..count).map(|i| {
        let (comment, tres) = match (ai, i % 4) {
            (false, _) => (None, None),
            (true, 0) => (Some("fairway: model=7b method=lora precision=bf16 ckpt=120s"), Some("gres:gpu:h100:1")),
            (true, 1) => (Some("fairway: tier=opportunistic ckpt=60s"), Some("gres:gpu:h100:2")),
            (true, 2) => (Some("fairway: model=1.5b method=full"), None),
            (true, _) => (Some("nightly eval"), None),
        };
        BatchJob {
            name: format!("bench-{}", i % 97),
            script: "#!/bin/sh\ntrue\n".into(),
            min_cpus: 1 + i % cpus_max,
            time_limit_min: 10 + i % 50,
            comment: comment.map(str::to_string),
            tres_per_node: tres.map(str::to_string),
            partition: ai.then(|| "gpu".to_string()),
        }
    });
    let ok = submit_batch(jobs).map_err(|e| anyhow::anyhow!("submission failed: {e}"))?;
    println!("{ok}");
    Ok(())
}
