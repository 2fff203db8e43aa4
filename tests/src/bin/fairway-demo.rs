//! `make demo`: a Fairway-enabled Slurm cluster running a mix of AI jobs.
//!
//! With `FAIRWAY_DEMO_DOCKER=<version>` (what `make demo` sets) it drives the docker
//! cluster of that Slurm version, already started by `docker/cluster.sh up`: four GPU
//! nodes, several teams, job_submit/fairway filling in and refusing requests, a 2-node
//! pre-training gang, sweeps in the scavenger QoS. Without it (`make demo-host`) it
//! starts the single-node host cluster the tests use with every plugin built here.
//! Either way it shows the queue draining with squeue, sprio and sshare.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use fairway_tests::{Cluster, ClusterSpec, DockerCluster, Slurm};

fn show(c: &impl Slurm, title: &str, prog: &str, args: &[&str]) -> Result<()> {
    let out = c.cmd(prog, args)?;
    println!("\n== {title}: {prog} {}\n{}{}", args.join(" "), out.stdout, out.stderr);
    Ok(())
}

fn main() -> Result<()> {
    match std::env::var("FAIRWAY_DEMO_DOCKER") {
        Ok(version) if !version.is_empty() => docker(&version),
        _ => host(),
    }
}

/// Submits `jobs`, printing each id or the plugin's refusal as the user sees it.
fn submit(c: &impl Slurm, jobs: &[(&str, &str, Vec<&str>)]) -> Vec<(String, u32)> {
    let mut ids = Vec::new();
    for (user, what, args) in jobs {
        match c.sbatch(user, args) {
            Ok(id) => {
                println!("  {user:<9} {what:<44} -> job {id}");
                ids.push((what.to_string(), id));
            }
            Err(e) => println!("  {user:<9} {what:<44} -> refused:\n      {}", e.trim().replace('\n', "\n      ")),
        }
    }
    ids
}

/// Shows the queue every few seconds until it is empty (or `limit` passes).
fn drain(c: &impl Slurm, limit: Duration) -> Result<()> {
    let start = Instant::now();
    loop {
        let q = c.cmd("squeue", &["-h"])?;
        if q.stdout.trim().is_empty() {
            println!("\nqueue drained in {} s", start.elapsed().as_secs());
            return Ok(());
        }
        show(
            c,
            &format!("queue at {:>3}s", start.elapsed().as_secs()),
            "squeue",
            &["-o", "%.8i %.18j %.9u %.8a %.10q %.8T %.10M %.6D %R"],
        )?;
        if start.elapsed() > limit {
            println!("queue did not drain in {} s; stopping anyway", limit.as_secs());
            return Ok(());
        }
        std::thread::sleep(Duration::from_secs(5));
    }
}

/// The docker cluster: 2 DGX-H100-like nodes, 2 nodes of 4 x A100 in NVLink pairs.
/// `fairway explain` of one pending job, as its owner would run it on the login node.
/// The demo goes on if there is none (the queue may already have drained).
fn explain_a_pending_job(c: &impl Slurm) {
    let pending = c.cmd("squeue", &["-h", "-t", "PD", "-o", "%i %u"]).map(|o| o.stdout).unwrap_or_default();
    // Not an array (`12_[0-5]`): one job, one explanation.
    let Some((id, user)) = pending.lines().filter_map(|l| l.split_once(' ')).find(|(id, _)| !id.contains('_')) else {
        return;
    };
    match c.run_as(user, "/usr/lib/fairway/bin/fairway", &["explain", id]) {
        Ok(out) if out.ok() => println!("\n== fairway explain {id} (as {user}):\n{}", out.stdout.trim_end()),
        Ok(out) => println!("\n== fairway explain {id}: {}", out.stderr.trim()),
        Err(e) => println!("\n== fairway explain {id}: {e:#}"),
    }
}

fn docker(version: &str) -> Result<()> {
    std::env::set_var("FAIRWAY_E2E", version);
    let c = DockerCluster::from_env()?;
    println!("Slurm {version} docker cluster (login, ctld, dbd, db, c1-c4); Fairway's lines in slurmctld's log:");
    for line in c.logs("ctld").lines().filter(|l| l.contains("fairway")).take(12) {
        println!("  {line}");
    }
    show(&c, "nodes", "sinfo", &["-N", "-o", "%.6N %.10P %.6t %.16G"])?;
    for u in fairway_tests::TEST_USERS {
        let _ = c.cmd("scancel", &["-u", u]);
    }
    println!("\nSubmitting a mix of AI jobs from three teams (vision, nlp, product):");
    let jobs: Vec<(&str, &str, Vec<&str>)> = vec![
        (
            "fw_alice",
            "debug run, 1 GPU, 2 min",
            vec!["-J", "debug-vit", "-p", "debug", "-t", "2", "--gres=gpu:h100:1", "--wrap=sleep 5"],
        ),
        (
            "fw_alice",
            "LoRA fine-tune, GPUs left to Fairway",
            vec![
                "-J",
                "lora-llama-8b",
                "-p",
                "a100",
                "-t",
                "30",
                "--comment=fairway: model=8b method=lora precision=bf16",
                "--wrap=sleep 20",
            ],
        ),
        (
            "fw_bob",
            "full fine-tune 8B on 4 x A100, checkpoints",
            vec![
                "-J",
                "ft-llama-8b",
                "-p",
                "a100",
                "-t",
                "30",
                "--gres=gpu:a100:4",
                "--comment=fairway: model=8b method=full precision=bf16 ckpt=120s",
                "--wrap=sleep 25",
            ],
        ),
        (
            "fw_bob",
            "full fine-tune 70B on 4 x A100 (too small)",
            vec![
                "-J",
                "ft-llama-70b",
                "-p",
                "a100",
                "-t",
                "60",
                "--gres=gpu:a100:4",
                "--comment=fairway: model=70b method=full precision=bf16",
                "--wrap=sleep 25",
            ],
        ),
        (
            "fw_dave",
            "pre-training gang, 2 nodes x 8 H100",
            vec![
                "-J",
                "pretrain-1b",
                "-p",
                "gpu",
                "-N",
                "2",
                "--ntasks-per-node=8",
                "--gres=gpu:h100:8",
                "-t",
                "30",
                "--wrap=sleep 30",
            ],
        ),
        (
            "fw_dave",
            "gang with 6 GPUs per node (not NVLink-aligned)",
            vec!["-J", "pretrain-bad", "-p", "gpu", "-N", "2", "--gres=gpu:h100:6", "-t", "30", "--wrap=sleep 30"],
        ),
        (
            "fw_carol",
            "sweep, 6 x 1 A100, opportunistic",
            vec![
                "-J",
                "sweep-lr",
                "-p",
                "a100",
                "--array=0-5",
                "-t",
                "10",
                "--gres=gpu:a100:1",
                "--comment=fairway: tier=opportunistic ckpt=30s",
                "--wrap=sleep 10",
            ],
        ),
        (
            "fw_carol",
            "urgent eval, high QoS",
            vec!["-J", "eval-release", "-p", "gpu", "--qos=high", "-t", "10", "--gres=gpu:h100:2", "--wrap=sleep 5"],
        ),
    ];
    let ids = submit(&c, &jobs);
    for (what, id) in &ids {
        if what.starts_with("LoRA") || what.starts_with("sweep") {
            let shown = c.cmd("scontrol", &["-o", "show", "job", &id.to_string()])?.stdout;
            let keep: Vec<&str> = shown
                .split_whitespace()
                .filter(|f| {
                    ["JobId=", "QOS=", "Partition=", "TresPerNode=", "TresPerJob=", "Requeue=", "AdminComment="]
                        .iter()
                        .any(|k| f.starts_with(k))
                })
                .collect();
            println!("\n== what job_submit/fairway set on \"{what}\":\n  {}", keep.join(" "));
        }
    }
    show(&c, "priorities", "sprio", &["-l"])?;
    explain_a_pending_job(&c);
    drain(&c, Duration::from_secs(240))?;
    // Usage reaches sshare at the next priority recalculation (PriorityCalcPeriod=1).
    c.wait_until("usage reaches sshare", || {
        let out = c.cmd("sshare", &["-a", "-h", "-P", "-o", "RawUsage"])?.stdout;
        Ok(out.lines().any(|l| l.trim().parse::<u64>().unwrap_or(0) > 0))
    })?;
    show(
        &c,
        "fair share",
        "sshare",
        &["-a", "-l", "-o", "Account,User,RawShares,NormShares,RawUsage,EffectvUsage,FairShare"],
    )?;
    metrics(&c);
    // slurmctld hands finished jobs to slurmdbd asynchronously.
    c.wait_until("slurmdbd has the jobs", || {
        Ok(c.cmd("sacct", &["-a", "-X", "-n", "-P", "-o", "JobID"])?.stdout.lines().count() >= ids.len())
    })?;
    show(
        &c,
        "accounting",
        "sacct",
        &["-a", "-X", "-o", "JobID,JobName%16,User,Account,QOS,State,Elapsed,AllocTRES%40"],
    )?;
    let p = format!("fairway-{}", version.replace('.', ""));
    println!(
        "\nThe cluster is still up. Where to look next:\n  \
         - a shell on the login node: docker exec -it -u fw_alice -w /shared/jobs {p}_login_1 bash\n  \
         - Fairway in slurmctld's log: docker logs {p}_ctld_1 2>&1 | grep fairway\n  \
         - the rules in force: .cache/docker/{version}/etc/fairway.toml (edit, then scontrol reconfigure)\n  \
         - the other Slurm versions: make demo SLURM=22.05 (every plugin) or SLURM=26.05\n  \
         - stop it: make cluster-down SLURM={version}"
    );
    Ok(())
}

/// Fairway's metrics on the controller, where priority/fairway's status is: a few series
/// now, and `fairway serve` (the live page and /metrics) left running.
fn metrics(c: &DockerCluster) {
    const FAIRWAY: &str = "/usr/lib/fairway/bin/fairway";
    match c.exec("ctld", &[FAIRWAY, "metrics"]) {
        Ok(out) if out.ok() => {
            let keep = ["fairway_jobs", "fairway_gpus", "fairway_account_effective_usage", "fairway_priority_pass"];
            let lines: Vec<&str> = out.stdout.lines().filter(|l| keep.iter().any(|k| l.starts_with(k))).collect();
            println!("\n== fairway metrics (on the controller, as root), some series:\n{}", lines.join("\n"));
        }
        Ok(out) => println!("\n== fairway metrics: {}", out.stderr.trim()),
        Err(e) => println!("\n== fairway metrics: {e:#}"),
    }
    let Ok(id) = c.container("ctld") else { return };
    let serve = std::process::Command::new("docker")
        // The demo's network is the host's docker bridge, reachable from this host only:
        // everyone who can reach it may see every job. A site signs viewers in instead
        // (`--auth munge`, README "The live page").
        .args(["exec", "-d", &id, FAIRWAY, "serve", "--listen", "0.0.0.0:9814", "--auth", "none"])
        .status();
    if let (true, Ok(ip)) = (serve.is_ok_and(|s| s.success()), c.address("ctld")) {
        println!("\nFairway's live page: http://{ip}:9814/ (fairway serve on the controller; open it in a browser)");
        println!("Fairway's metrics for Prometheus: curl http://{ip}:9814/metrics");
    }
}

/// The single-node host cluster with every plugin built for the host's Slurm.
fn host() -> Result<()> {
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
        // Fairway's own terms on top: deadline urgency (for QoS high's jobs: any user can
        // set --deadline) and a starvation bound
        fairway_toml: Some(s(
            "[priority]\nweight_deadline = 4000\ndeadline_qos = [\"high\"]\nweight_predicted_work = 500\n\
             max_wait = \"2:00\"\n",
        )),
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
        (
            "fw_dave",
            &[
                "-J",
                "eval-deadline",
                "--qos=high",
                "-t",
                "5",
                "--deadline=now+8minutes",
                "--gpus=a100:2",
                "--wrap=sleep 2",
            ],
        ),
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
    drain(&c, Duration::from_secs(180))?;
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
