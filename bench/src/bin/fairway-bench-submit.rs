//! Benchmark: submissions per second with no job_submit plugin, with job_submit/fairway
//! and with job_submit/lua enforcing the same rules (bench/lua/job_submit.lua), side
//! by side on three real clusters started at once.
//!
//!     fairway-bench-submit [JOBS_PER_ROUND] [ROUNDS] [SBATCH_PER_ROUND]   (default 1000 5 100)
//!
//! Each round submits the same mix of AI jobs (Fairway directives in --comment, GPU
//! requests) to each cluster in turn, in a rotating order, through libslurm's API
//! (`fairway-submit --ai`) and then with one `sbatch` process per job. Queues are
//! emptied between rounds. The rule set is config/fairway.gpu-cluster.toml. Beside the
//! rates it reports slurmctld's CPU time per API submission (/proc/PID/stat), and so what
//! each plugin itself costs over none.
#![forbid(unsafe_code)]

use std::time::Instant;

use anyhow::{bail, Context, Result};
use fairway_tests::{Cluster, ClusterSpec};

const CONFIGS: [&str; 3] = ["none", "fairway", "lua"];

fn spec(plugin: &str) -> ClusterSpec {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let toml = std::fs::read_to_string(root.join("config/fairway.gpu-cluster.toml")).expect("example config");
    let lua = std::fs::read_to_string(root.join("bench/lua/job_submit.lua")).expect("lua rules");
    let mut qos = ClusterSpec::default().qos;
    qos.push(("interactive".into(), 500));
    ClusterSpec {
        job_submit_plugins: if plugin == "none" { vec![] } else { vec![plugin.to_string()] },
        fairway_toml: Some(toml),
        config_files: vec![("job_submit.lua".into(), lua)],
        gres: Some(("gpu:h100:8".into(), "Name=gpu Type=h100 File={dir}/dev/nvidia[0-7]\n".into())),
        partitions: vec!["gpu".into(), "a100".into()],
        slurmd: false,
        // No priority recalculation competing for the CPU.
        priority_type: "priority/basic".into(),
        qos,
        ..ClusterSpec::default()
    }
}

/// slurmctld's CPU time so far, seconds: user + system of all its threads, the RPC
/// threads that have already exited included (/proc/PID/stat).
fn ctld_cpu_secs(c: &Cluster) -> Result<f64> {
    let pid = c.daemon_pid("slurmctld").context("slurmctld pid")?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let f: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, r)| r).split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>()? + f[12].parse::<f64>()?;
    Ok(ticks / rustix::param::clock_ticks_per_second() as f64)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<()> {
    let args: Vec<u32> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let jobs = args.first().copied().unwrap_or(1000);
    let rounds = args.get(1).copied().unwrap_or(5);
    let per_sbatch = args.get(2).copied().unwrap_or(100);
    let exe = std::env::current_exe()?.with_file_name("fairway-submit");

    eprintln!("starting three clusters ...");
    let clusters: Vec<Cluster> = CONFIGS.iter().map(|p| Cluster::start(&spec(p))).collect::<Result<_>>()?;
    let mut api: Vec<Vec<f64>> = vec![Vec::new(); 3];
    let mut sbatch: Vec<Vec<f64>> = vec![Vec::new(); 3];
    // Summed over rounds: the clock ticks (10 ms) are coarse for one round.
    let mut ctld_cpu = [0.0f64; 3];
    for round in 0..rounds {
        for k in 0..3 {
            let i = (round as usize + k) % 3;
            let c = &clusters[i];
            let t = Instant::now();
            let cpu = ctld_cpu_secs(c)?;
            let out = c.run_as("fw_alice", exe.to_str().unwrap(), &[&jobs.to_string(), "2", "--ai"])?;
            let secs = t.elapsed().as_secs_f64();
            ctld_cpu[i] += ctld_cpu_secs(c)? - cpu;
            if !out.ok() || out.stdout.trim() != jobs.to_string() {
                bail!("{}: fairway-submit accepted {} of {jobs}: {out:?}\n{}", CONFIGS[i], out.stdout, c.log_tails());
            }
            api[i].push(f64::from(jobs) / secs);

            let t = Instant::now();
            for j in 0..per_sbatch {
                let (comment, gres) = match j % 4 {
                    0 => ("fairway: model=7b method=lora precision=bf16 ckpt=120s", "--gres=gpu:h100:1"),
                    1 => ("fairway: tier=opportunistic ckpt=60s", "--gres=gpu:h100:2"),
                    2 => ("fairway: model=1.5b method=full", "--gres=gpu:0"),
                    _ => ("nightly eval", "--gres=gpu:0"),
                };
                let comment = format!("--comment={comment}");
                let out = c.run_as(
                    "fw_alice",
                    "sbatch",
                    &["-Q", "-p", "gpu", "-t", "10", &comment, gres, "-o", "/dev/null", "--wrap=true"],
                )?;
                if !out.ok() {
                    bail!("{}: sbatch refused: {out:?}", CONFIGS[i]);
                }
            }
            sbatch[i].push(f64::from(per_sbatch) / t.elapsed().as_secs_f64());
            let out = c.cmd("scancel", &["-u", "fw_alice"]).context("scancel")?;
            if !out.ok() {
                bail!("scancel: {out:?}");
            }
        }
        eprintln!("round {}/{rounds} done", round + 1);
    }
    let api: Vec<f64> = api.iter_mut().map(|v| median(v)).collect();
    let sb: Vec<f64> = sbatch.iter_mut().map(|v| median(v)).collect();
    println!("submissions per second (median of {rounds} rounds; {jobs} API / {per_sbatch} sbatch jobs per round)");
    println!("{:<10} {:>12} {:>12} {:>14} {:>14}", "plugin", "API jobs/s", "sbatch/s", "API vs none", "sbatch vs none");
    for (i, name) in CONFIGS.iter().enumerate() {
        println!("{name:<10} {:>12.0} {:>12.1} {:>13.2}x {:>13.2}x", api[i], sb[i], api[i] / api[0], sb[i] / sb[0]);
    }
    println!("fairway vs lua: {:.2}x (API), {:.2}x (sbatch)", api[1] / api[2], sb[1] / sb[2]);
    // Throughput is bound by the RPC round trip and munge; slurmctld's CPU per job shows
    // what each plugin itself adds.
    let us: Vec<f64> = ctld_cpu.iter().map(|s| s * 1e6 / f64::from(jobs * rounds)).collect();
    println!("\nslurmctld CPU per API submission ({} jobs each)", jobs * rounds);
    println!("{:<10} {:>10} {:>16}", "plugin", "CPU us/job", "plugin's own us");
    for (i, name) in CONFIGS.iter().enumerate() {
        println!("{name:<10} {:>10.0} {:>16.0}", us[i], us[i] - us[0]);
    }
    if us[1] > us[0] {
        println!("lua's own cost / fairway's own cost: {:.1}x", (us[2] - us[0]) / (us[1] - us[0]));
    }
    for c in clusters {
        c.stop()?;
    }
    Ok(())
}
