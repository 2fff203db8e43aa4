//! `make demo`: a single-node Fairway-enabled Slurm cluster running a mix of AI jobs.
//!
//! Starts the same real cluster the tests use (munged, MariaDB, slurmdbd, slurmctld,
//! slurmd) with Fairway's plugins from `$FAIRWAY_PLUGIN_DIR`, submits jobs from several
//! teams, and shows the queue draining with squeue, sprio and sshare.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use fairway_tests::{Cluster, ClusterSpec, Slurm};

fn show(c: &Cluster, title: &str, prog: &str, args: &[&str]) -> Result<()> {
    let out = c.cmd(prog, args)?;
    println!("\n== {title}: {prog} {}\n{}{}", args.join(" "), out.stdout, out.stderr);
    Ok(())
}

fn main() -> Result<()> {
    let s = |v: &str| v.to_string();
    let spec = ClusterSpec {
        users: vec![
            (s("fw_alice"), s("vision")),
            (s("fw_dave"), s("vision")),
            (s("fw_bob"), s("nlp")),
            (s("fw_carol"), s("nlp")),
        ],
        // multifactor's knobs, which priority/fairway reads as multifactor would
        slurm_conf_extra: vec![
            s("PriorityWeightFairshare=10000"),
            s("PriorityWeightQOS=5000"),
            s("PriorityWeightAge=1000"),
            s("PriorityWeightJobSize=500"),
            s("PriorityCalcPeriod=1"),
            s("PriorityMaxAge=0-1"),
            s("DebugFlags=Priority"),
        ],
        // Fairway's own terms on top: deadline urgency and a starvation bound
        fairway_toml: Some(s("[priority]\nweight_deadline = 4000\nweight_predicted_work = 500\nmax_wait = \"2:00\"\n")),
        // four emulated A100s per node
        gres: Some((s("gpu:a100:4"), s("Name=gpu Type=a100 File={dir}/dev/nvidia[0-3]\n"))),
        ..ClusterSpec::default()
    };
    println!("Starting a Fairway-enabled Slurm cluster (munged, MariaDB, slurmdbd, slurmctld, slurmd)...");
    let c = Cluster::start(&spec).context("cluster did not start")?;
    println!("Cluster {} is up in {}", c.name, c.dir().display());
    for line in c.log("slurmctld").lines().filter(|l| l.contains("fairway")) {
        println!("  slurmctld.log: {line}");
    }

    let jobs: &[(&str, &[&str])] = &[
        ("fw_alice", &["-J", "debug-vit", "-t", "2", "--gpus=a100:1", "--wrap=sleep 2"]),
        ("fw_alice", &["-J", "debug-vit", "-t", "2", "--gpus=a100:1", "--wrap=sleep 2"]),
        ("fw_bob", &["-J", "finetune-llama-8b", "-n", "2", "-t", "10", "--gpus=a100:4", "--wrap=sleep 8"]),
        (
            "fw_carol",
            &["-J", "sweep-lr", "--array=0-3", "--qos=scavenger", "-t", "5", "--gpus=a100:1", "--wrap=sleep 3"],
        ),
        ("fw_dave", &["-J", "eval-deadline", "-t", "5", "--deadline=now+8minutes", "--gpus=a100:2", "--wrap=sleep 2"]),
        ("fw_dave", &["-J", "eval-urgent", "--qos=high", "-t", "5", "--gpus=a100:2", "--wrap=sleep 2"]),
        ("fw_bob", &["-J", "pretrain-shard", "-n", "2", "-t", "10", "--gpus=a100:4", "--wrap=sleep 6"]),
    ];
    for (user, args) in jobs {
        match c.sbatch(user, args) {
            Ok(id) => println!("  {user}: submitted job {id} ({})", args.join(" ")),
            Err(e) => println!("  {user}: rejected: {}", e.trim()),
        }
    }
    show(&c, "priorities (SITE = Fairway's terms)", "sprio", &["-l"])?;
    let start = Instant::now();
    loop {
        let q = c.cmd("squeue", &["-h"])?;
        if q.stdout.trim().is_empty() {
            break;
        }
        show(
            &c,
            &format!("queue at {:>3}s", start.elapsed().as_secs()),
            "squeue",
            &["-o", "%.8i %.18j %.9u %.10q %.8T %.10M %R"],
        )?;
        if start.elapsed() > Duration::from_secs(180) {
            println!("queue did not drain in 180 s; stopping anyway");
            break;
        }
        std::thread::sleep(Duration::from_secs(4));
    }
    // Fair Tree ranks users at each recalculation (PriorityCalcPeriod=1 minute here):
    // wait for the next one so the table reflects the usage just accrued.
    println!("\nWaiting for the next priority recalculation (at most a minute)...");
    let state = c.dir().join("state/fairway_priority_last_decay");
    let before = std::fs::metadata(&state).and_then(|m| m.modified()).ok();
    let waited = Instant::now();
    while std::fs::metadata(&state).and_then(|m| m.modified()).ok() == before
        && waited.elapsed() < Duration::from_secs(75)
    {
        std::thread::sleep(Duration::from_secs(1));
    }
    show(
        &c,
        "fair share after the recalculation",
        "sshare",
        &["-a", "-l", "-o", "Account,User,RawShares,NormShares,RawUsage,EffectvUsage,FairShare,LevelFS"],
    )?;
    show(&c, "accounting", "sacct", &["-a", "-X", "-o", "JobID,JobName,User,Account,QOS,State,Elapsed"])?;
    println!(
        "\nWhere to look next:\n  - Fairway's lines in slurmctld.log: grep fairway {}/log/slurmctld.log\n  \
         - Fairway's per-job terms: grep 'Fairway terms' {}/log/slurmctld.log\n  \
         - check a fairway.toml: cargo run -p fairway-cli -- check-config --file config/fairway.toml\n  \
         - what is built and what is not yet: README.md, \"Status\"",
        c.dir().display(),
        c.dir().display()
    );
    c.stop()?;
    println!("Cluster stopped; nothing left running.");
    Ok(())
}
