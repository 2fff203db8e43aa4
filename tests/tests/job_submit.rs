//! `job_submit/fairway` on real Slurm: each rule accepted, modified (as `scontrol show
//! job` shows it) and rejected (the exact text `sbatch` prints), `scontrol update` held
//! to the same rules, and `fairway.toml` reloaded with the last good file kept.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use fairway_tests::{Cluster, ClusterSpec, Slurm};

/// One 8-GPU node that runs jobs and three like it that never come up, so that
/// multi-node shapes can be submitted and stay pending.
const FAIRWAY_TOML: &str = r#"
[job_submit]
record_changes = true

[job_submit.qos]
interactive = "interactive"
interactive_max_time = "1:00:00"
batch = "normal"
opportunistic = "scavenger"
preemptible = ["scavenger"]

[[job_submit.gpu]]
name = "h100"
memory_gb = 80
per_node = 8
nvlink_domain = 8
partitions = ["debug", "short"]

[job_submit.partition.debug]
allowed_qos = ["normal", "high", "scavenger"]
gang_switches = 1
# Slurm caps the wait at SchedulerParameters=max_switch_wait (300 s by default).
gang_switches_wait = "5:00"

[job_submit.partition.short]
allowed_qos = ["interactive", "normal"]

[job_submit.checkpoint]
signal = "B:USR1"
lead_factor = 2.0
min_lead = "0:10"

[job_submit.binding]
gpu_bind = "closest"
cpu_bind = "cores"

[job_submit.time]
auto_margin = 0.5
record_prediction = true
"#;

fn spec() -> ClusterSpec {
    let mut qos = ClusterSpec::default().qos;
    qos.push(("interactive".into(), 500));
    ClusterSpec {
        fairway_toml: Some(FAIRWAY_TOML.into()),
        gres: Some(("gpu:h100:8".into(), "Name=gpu Type=h100 File={dir}/dev/nvidia[0-7]\n".into())),
        partitions: vec!["short MaxTime=1:00:00".into()],
        phantom_nodes: 3,
        qos,
        ..ClusterSpec::default()
    }
}

/// `sbatch` as `user`: the job id (if accepted) and everything it printed on stderr.
fn sbatch(c: &Cluster, user: &str, args: &[&str]) -> (Option<u32>, String) {
    let mut all = vec!["--parsable"];
    all.extend_from_slice(args);
    let out = c.run_as(user, "sbatch", &all).unwrap();
    let id = out.ok().then(|| out.stdout.trim().split(';').next().and_then(|s| s.parse().ok())).flatten();
    (id, out.stderr)
}

/// `scontrol show job` as one line of `Key=Value` fields.
fn show(c: &Cluster, job: u32) -> String {
    c.cmd("scontrol", &["-o", "show", "job", &job.to_string()]).unwrap().stdout
}

fn field(shown: &str, key: &str) -> String {
    let prefix = format!("{key}=");
    shown.split_whitespace().find_map(|f| f.strip_prefix(prefix.as_str())).unwrap_or("").to_string()
}

#[test]
fn rules_at_submission() {
    let c = Cluster::start(&spec()).expect("cluster starts");
    let log = c.log("slurmctld");
    assert!(log.contains("job_submit/fairway: rules: 1 GPU types, 2 partitions with rules"), "{log}");

    // Accepted unchanged: an explicit, valid request.
    let (id, err) = sbatch(&c, "fw_alice", &["--qos=high", "-t", "10", "--hold", "--wrap=true"]);
    let j = show(&c, id.expect(&err));
    assert_eq!((field(&j, "QOS"), field(&j, "TimeLimit")), ("high".into(), "00:10:00".into()), "{j}");
    assert!(!err.contains("fairway:"), "{err}");

    // Modified: the tier's QoS for a plain batch job; the user is told.
    let (id, err) = sbatch(&c, "fw_alice", &["--hold", "--wrap=true"]);
    assert_eq!(field(&show(&c, id.expect(&err)), "QOS"), "normal");
    assert!(err.contains("sbatch: fairway: QoS normal (batch tier)"), "{err}");

    // Modified: GPUs chosen from the directive, and binding defaults for a GPU job.
    let (id, err) = sbatch(&c, "fw_alice", &["--comment=fairway: model=70b method=full precision=bf16", "--wrap=true"]);
    let j = show(&c, id.expect(&err));
    assert_eq!(field(&j, "TresPerNode"), "gres:gpu:h100:8", "{j}");
    assert_eq!(field(&j, "NumNodes"), "2", "{j}");
    assert_eq!(field(&j, "TresBind"), "gpu:closest", "{j}");
    assert_eq!(field(&j, "Switches"), "1@00:05:00", "{j}");
    // The user's text is kept as written, for accounting.
    assert!(j.contains("Comment=fairway: model=70b method=full precision=bf16"), "{j}");
    // What the rules changed stays with the job (record_changes), for fairway explain.
    let explained =
        c.run_as("fw_alice", &fairway_tests::fairway_bin(), &["explain", &id.unwrap().to_string()]).unwrap();
    assert!(
        explained.stdout.contains("job_submit/fairway changed it at submission:\n  - 70B full fine-tune"),
        "{explained:?}"
    );
    assert!(explained.stdout.contains("set --nodes=2 --gpus-per-node=h100:8"), "{explained:?}");
    assert!(
        err.contains(
            "sbatch: fairway: 70B full fine-tune in bf16 needs about 1.12 TB (1.02 TiB) of GPU memory; \
             set --nodes=2 --gpus-per-node=h100:8"
        ),
        "{err}"
    );

    // Rejected: under-provisioned, with the arithmetic.
    let (id, err) =
        sbatch(&c, "fw_bob", &["--comment=fairway: model=70b method=full", "--gres=gpu:h100:4", "--wrap=true"]);
    assert_eq!(id, None);
    assert!(
        err.contains(
            "sbatch: error: fairway: 70B full fine-tune in bf16 needs about 1.12 TB (1.02 TiB) of GPU memory for \
             weights, gradients and Adam state; you asked for 4 × h100 (320 GB); ask for at least 16 × h100 \
             (--nodes=2 --gpus-per-node=h100:8)"
        ),
        "{err}"
    );
    assert!(err.contains("Invalid generic resource (gres) specification"), "Slurm's own error line follows: {err}");

    // Rejected: a typo in the directive, and no directive key can raise priority.
    let (id, err) = sbatch(&c, "fw_bob", &["--comment=fairway: modle=7b", "--wrap=true"]);
    assert_eq!(id, None);
    assert!(err.contains("sbatch: error: fairway: unknown key `modle`: did you mean `model`?"), "{err}");
    let (id, err) = sbatch(&c, "fw_bob", &["--comment=fairway: priority=100000", "--wrap=true"]);
    assert_eq!(id, None);
    assert!(err.contains("unknown key `priority`"), "{err}");

    // QoS rules: interactive allocations get the interactive QoS where allowed...
    let out = c.run_as("fw_bob", "salloc", &["-p", "short", "-t", "5", "--no-shell"]).unwrap();
    assert!(out.ok(), "{out:?}");
    assert!(out.stderr.contains("salloc: fairway: QoS interactive (interactive tier)"), "{out:?}");
    // ...and forbidden combinations are refused with the allowed ones named.
    let (id, err) = sbatch(&c, "fw_bob", &["--qos=interactive", "--wrap=true"]);
    assert_eq!(id, None);
    assert!(
        err.contains(
            "sbatch: error: fairway: QoS interactive is not allowed in partition debug; allowed there: normal, high, \
             scavenger"
        ),
        "{err}"
    );
    assert!(err.contains("Invalid qos specification"), "{err}");
    // Allowed in one listed partition is not enough: Slurm may run the job in the other.
    let (id, err) = sbatch(&c, "fw_bob", &["-p", "short,debug", "--qos=interactive", "--wrap=true"]);
    assert_eq!(id, None, "-p short,debug --qos=interactive let Slurm run an interactive-QoS job in debug");
    assert!(
        err.contains(
            "QoS interactive is not allowed in partition debug (Slurm may run the job in any partition it lists)"
        ),
        "{err}"
    );

    // Gang rules: --gpus over nodes becomes the same GPUs per node...
    let (id, err) = sbatch(&c, "fw_alice", &["-N", "2", "--gpus=h100:16", "--ntasks-per-node=8", "--wrap=true"]);
    let j = show(&c, id.expect(&err));
    assert_eq!((field(&j, "TresPerNode"), field(&j, "TresPerJob")), ("gres:gpu:h100:8".into(), String::new()), "{j}");
    // ...uneven or misaligned shapes are refused with the nearest valid one...
    let (id, err) = sbatch(&c, "fw_alice", &["-N", "3", "--gpus=h100:16", "--wrap=true"]);
    assert_eq!(id, None);
    assert!(err.contains("nearest valid shape: --nodes=3 --gpus-per-node=h100:6"), "{err}");
    let (id, err) = sbatch(&c, "fw_alice", &["-N", "2", "--gres=gpu:h100:3", "--wrap=true"]);
    assert_eq!(id, None);
    assert!(err.contains("nearest valid shape: --nodes=2 --gpus-per-node=h100:4"), "{err}");
    // ...and tasks must match GPUs.
    let (id, err) = sbatch(&c, "fw_alice", &["-N", "2", "--gres=gpu:h100:8", "--ntasks-per-node=3", "--wrap=true"]);
    assert_eq!(id, None);
    assert!(err.contains("use --ntasks-per-node=8 (one rank per GPU) or --ntasks-per-node=1"), "{err}");

    // Preemption readiness: a checkpointing job in a preemptible QoS gets --requeue.
    let (id, err) = sbatch(&c, "fw_bob", &["--comment=fairway: tier=opportunistic ckpt=30s", "--hold", "--wrap=true"]);
    let j = show(&c, id.expect(&err));
    assert_eq!((field(&j, "QOS"), field(&j, "Requeue")), ("scavenger".into(), "1".into()), "{j}");
    assert!(err.contains("--signal=B:USR1@60"), "{err}");
    // Every job's prediction is recorded for later accuracy checks.
    assert_eq!(field(&j, "AdminComment"), "fairway:predicted_runtime=unknown", "{j}");

    // Nothing a user sent crashed or stalled slurmctld.
    let ping = c.cmd("scontrol", &["ping"]).unwrap();
    assert!(ping.stdout.contains("UP"), "{ping:?}");
    c.stop().unwrap();
}

#[test]
fn updates_follow_the_rules_and_fairway_toml_reloads() {
    let c = Cluster::start(&spec()).expect("cluster starts");
    let (id, err) = sbatch(&c, "fw_alice", &["-p", "short", "-t", "30", "--hold", "--wrap=true"]);
    let id = id.expect(&err).to_string();
    // Moving the job to a partition where its QoS is forbidden is refused for the user...
    let out =
        c.run_as("fw_alice", "scontrol", &["update", &format!("JobId={id}"), "Partition=debug", "QOS=interactive"]);
    let out = out.unwrap();
    assert!(!out.ok(), "{out:?}");
    assert!(out.stderr.contains("Invalid qos specification"), "{out:?}");
    assert!(c
        .log("slurmctld")
        .contains("job_modify: rejected: fairway: QoS interactive is not allowed in partition debug"));
    // ...a directive added by update is checked too...
    let out =
        c.run_as("fw_alice", "scontrol", &["update", &format!("JobId={id}"), "Comment=fairway: tier=urgent"]).unwrap();
    assert!(!out.ok(), "{out:?}");
    // ...while valid updates pass, and operators may override.
    let out = c.run_as("fw_alice", "scontrol", &["update", &format!("JobId={id}"), "QOS=normal"]).unwrap();
    assert!(out.ok(), "{out:?}");
    let out = c.cmd("scontrol", &["update", &format!("JobId={id}"), "Partition=debug", "QOS=interactive"]).unwrap();
    assert!(out.ok(), "{out:?}");
    let j = show(&c, id.parse().unwrap());
    assert_eq!((field(&j, "Partition"), field(&j, "QOS")), ("debug".into(), "interactive".into()), "{j}");
    // Slurm operators (sacctmgr AdminLevel=Operator) too, not only root and SlurmUser.
    let out = c.cmd("sacctmgr", &["-i", "modify", "user", "fw_bob", "set", "AdminLevel=Operator"]).unwrap();
    assert!(out.ok(), "{out:?}");
    let out = c.cmd("scontrol", &["update", &format!("JobId={id}"), "Partition=short", "QOS=normal"]).unwrap();
    assert!(out.ok(), "{out:?}");
    let to_debug = |who: &str| {
        c.run_as(who, "scontrol", &["update", &format!("JobId={id}"), "Partition=debug", "QOS=interactive"])
    };
    // slurmctld learns the new admin level from slurmdbd asynchronously: poll for it.
    c.wait_until("an operator's update passes", || Ok(to_debug("fw_bob")?.ok())).unwrap();
    let j = show(&c, id.parse().unwrap());
    assert_eq!((field(&j, "Partition"), field(&j, "QOS")), ("debug".into(), "interactive".into()), "{j}");

    // A broken fairway.toml is logged and the last good rules stay in force.
    let toml = c.dir().join("fairway.toml");
    std::fs::write(&toml, format!("{FAIRWAY_TOML}\n[job_submit.qos]\nbatch = 7\n")).unwrap();
    wait_at_rest(&c, &toml);
    let reconf = c.cmd("scontrol", &["reconfigure"]).unwrap();
    assert!(reconf.ok(), "{reconf:?}");
    let (id, err) = sbatch(&c, "fw_bob", &["--hold", "--wrap=true"]);
    assert_eq!(field(&show(&c, id.expect(&err)), "QOS"), "normal");
    assert!(c.log("slurmctld").contains("keeping the last good"), "{}", c.log("slurmctld"));
    // A good new file takes effect at the next submission.
    std::fs::write(&toml, FAIRWAY_TOML.replace("batch = \"normal\"", "batch = \"high\"")).unwrap();
    wait_at_rest(&c, &toml);
    let (id, err) = sbatch(&c, "fw_bob", &["--hold", "--wrap=true"]);
    assert_eq!(field(&show(&c, id.expect(&err)), "QOS"), "high");
    // An emptied or deleted file does not silently turn every rule off.
    std::fs::write(&toml, "").unwrap();
    wait_at_rest(&c, &toml);
    let (id, err) = sbatch(&c, "fw_bob", &["--hold", "--wrap=true"]);
    assert_eq!(field(&show(&c, id.expect(&err)), "QOS"), "high");
    assert!(c.log("slurmctld").contains("fairway.toml is empty; keeping the last good"), "{}", c.log("slurmctld"));
    std::fs::remove_file(&toml).unwrap();
    let (id, err) = sbatch(&c, "fw_bob", &["--hold", "--wrap=true"]);
    assert_eq!(field(&show(&c, id.expect(&err)), "QOS"), "high");
    assert!(c.log("slurmctld").contains("fairway.toml is gone; keeping the last good"), "{}", c.log("slurmctld"));
    c.stop().unwrap();
}

/// Waits until `path` has been left alone long enough (a second) for job_submit/fairway
/// to re-read it at the next submission.
fn wait_at_rest(c: &Cluster, path: &Path) {
    let age = || std::fs::metadata(path)?.modified()?.elapsed().map_err(std::io::Error::other);
    c.wait_until("fairway.toml at rest", || Ok(age()? > Duration::from_millis(1100))).unwrap();
}

/// fairway.toml rewritten in place 1,000 times, line by line as a script appending with
/// `echo >>` writes it, while jobs are submitted: no submission fails, and every job gets
/// the rules of a whole file. Each version ends with the section that sets the batch QoS
/// (`high` in one, `scavenger` in the other), so a job that saw a half-written file gets
/// neither (`normal`, the association's default).
#[test]
fn fairway_toml_rewritten_during_submissions() {
    let version = |qos: &str| {
        format!(
            "[job_submit]\nrecord_changes = true\n\n[job_submit.binding]\ngpu_bind = \"closest\"\n\
             cpu_bind = \"cores\"\n\n[job_submit.qos]\ninteractive_max_time = \"1:00:00\"\nbatch = \"{qos}\"\n"
        )
    };
    let spec = ClusterSpec { fairway_toml: Some(version("high")), ..ClusterSpec::default() };
    let mut c = Cluster::start(&spec).expect("cluster starts");
    let toml = c.dir().join("fairway.toml");
    let done = std::sync::atomic::AtomicBool::new(false);
    let (jobs, failed) = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            for i in 0..1000 {
                let text = version(if i % 2 == 0 { "scavenger" } else { "high" });
                let mut f = std::fs::File::create(&toml).unwrap();
                for line in text.split_inclusive('\n') {
                    f.write_all(line.as_bytes()).unwrap();
                    // The pace of a shell script's `echo >>` per line.
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
            done.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        let (mut jobs, mut failed) = (0, Vec::new());
        while !done.load(std::sync::atomic::Ordering::Relaxed) {
            match sbatch(&c, "fw_bob", &["--hold", "--wrap=true"]) {
                (Some(_), _) => jobs += 1,
                (None, err) => failed.push(err),
            }
        }
        writer.join().unwrap();
        (jobs, failed)
    });
    assert!(failed.is_empty(), "{} submissions failed: {:?}", failed.len(), &failed[..failed.len().min(3)]);
    let out = c.cmd("squeue", &["-h", "-u", "fw_bob", "-o", "%q"]).unwrap();
    let mut seen = std::collections::BTreeMap::new();
    for q in out.stdout.lines() {
        *seen.entry(q.trim().to_string()).or_insert(0) += 1;
    }
    eprintln!("{jobs} jobs submitted during 1,000 rewrites; batch QoS given: {seen:?}");
    assert!(jobs >= 50, "only {jobs} submissions overlapped the rewrites");
    assert_eq!(seen.values().sum::<i32>(), jobs);
    assert!(seen.keys().all(|q| q == "high" || q == "scavenger"), "a job saw a half-written fairway.toml: {seen:?}");
    assert!(c.is_running("slurmctld"));
    // Reloading still works: the last version (scavenger... then high) once at rest.
    wait_at_rest(&c, &toml);
    let (id, err) = sbatch(&c, "fw_bob", &["--hold", "--wrap=true"]);
    assert_eq!(field(&show(&c, id.expect(&err)), "QOS"), "high");
    c.stop().unwrap();
}

/// Behaviour inside jobs: the checkpoint signal arrives before the time limit, and
/// `time=auto` uses what the priority plugin learned from earlier runs.
#[test]
fn checkpoint_signal_and_learned_time_limits() {
    let mut s = spec();
    s.slurm_conf_extra.push("PriorityCalcPeriod=1".into());
    let c = Cluster::start(&s).expect("cluster starts");

    // A 1-minute job whose 30 s checkpoint needs a 60 s lead: warned at once.
    let script =
        "#!/bin/bash\ntrap 'echo checkpoint requested; exit 0' USR1\nfor i in $(seq 600); do sleep 0.1; done\n";
    let path = c.dir().join("jobs/ckpt.sh");
    std::fs::write(&path, script).unwrap();
    let (id, err) = sbatch(
        &c,
        "fw_bob",
        &["--comment=fairway: tier=opportunistic ckpt=30s", "-t", "1", "-o", "ckpt.out", path.to_str().unwrap()],
    );
    let id = id.expect(&err);
    c.wait_job(id, &["COMPLETED", "FAILED", "TIMEOUT"], Duration::from_secs(120)).unwrap();
    let out = std::fs::read_to_string(c.dir().join("jobs/ckpt.out")).unwrap_or_default();
    assert_eq!(out.trim(), "checkpoint requested", "the batch shell got no USR1");

    // Learn a run time for (user, account, name, GPUs), then ask for time=auto.
    let learn = c.sbatch("fw_alice", &["-A", "vision", "-J", "nightly-eval", "-t", "10", "--wrap=sleep 2"]).unwrap();
    c.wait_job(learn, &["COMPLETED"], Duration::from_secs(60)).unwrap();
    c.wait_until("the priority plugin saves the run time", || {
        let saved = std::fs::read_to_string(c.dir().join("state/fairway-predictor.json")).unwrap_or_default();
        Ok(saved.contains("nightly-eval"))
    })
    .unwrap();
    // Without -A: Slurm gives it fw_alice's default account (vision) after job_submit
    // ran, and job_submit/fairway looks the same account up to find the run history.
    let (id, err) =
        sbatch(&c, "fw_alice", &["-J", "nightly-eval", "--comment=fairway: time=auto", "--hold", "--wrap=true"]);
    let j = show(&c, id.expect(&err));
    // About 2–3 s learned, plus 50%: the 1-minute floor.
    assert_eq!(field(&j, "TimeLimit"), "00:01:00", "{j}\n{err}");
    assert!(err.contains("sbatch: fairway: --time=1 (minutes) from the predicted run time of"), "{err}");
    assert!(field(&j, "AdminComment").starts_with("fairway:predicted_runtime="), "{j}");
    assert_ne!(field(&j, "AdminComment"), "fairway:predicted_runtime=unknown", "{j}");
    c.stop().unwrap();
}
