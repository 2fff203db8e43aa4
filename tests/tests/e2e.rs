//! End-to-end tests on the docker cluster (`docker/cluster.sh`): four compute nodes with
//! emulated GPUs (c1, c2: 8 × H100 on NVSwitch; c3, c4: 4 × A100 in NVLink pairs), for
//! what one host node cannot show: gangs over nodes, partial allocations refused, QoS
//! changes and node loss. Run by `make e2e [SLURM=22.05|24.11|26.05]`, which brings the
//! cluster up and sets FAIRWAY_E2E; ignored by a plain `cargo test`.

use std::collections::BTreeMap;
use std::time::Duration;

use fairway_core::hostlist::Hostlist;
use fairway_core::topology::select::{choose, score};
use fairway_core::topology::{CoreSet, GresStyle, Topology};
use fairway_tests::{DockerCluster, Slurm};

#[path = "common/browser.rs"]
mod browser;

fn cluster() -> DockerCluster {
    DockerCluster::from_env().expect("the docker cluster is up")
}

/// The cluster, when its slurmctld runs preempt/fairway (built where the Slurm version's
/// internal headers are at hand), with no job left from earlier tests; `None` (and why,
/// on stderr) otherwise.
fn preempt_cluster() -> Option<DockerCluster> {
    let c = cluster();
    if !c.logs("ctld").contains("preempt/fairway: Fairway") {
        eprintln!("preempt/fairway is not built for Slurm {} (internal headers): nothing to test", c.version);
        return None;
    }
    cancel_all(&c);
    Some(c)
}

fn show(c: &DockerCluster, job: u32) -> String {
    c.cmd("scontrol", &["-o", "show", "job", &job.to_string()]).unwrap().stdout
}

fn field(shown: &str, key: &str) -> String {
    let prefix = format!("{key}=");
    shown.split_whitespace().find_map(|f| f.strip_prefix(prefix.as_str())).unwrap_or("").to_string()
}

fn cancel_all(c: &DockerCluster) {
    for u in ["fw_alice", "fw_bob", "fw_carol", "fw_dave"] {
        let _ = c.cmd("scancel", &["-u", u]);
    }
    c.wait_for("the queue is empty", Duration::from_secs(60), || {
        Ok(c.cmd("squeue", &["-h"])?.stdout.trim().is_empty())
    })
    .unwrap();
}

#[test]
#[ignore = "needs the docker cluster: make e2e"]
fn fairway_plugins_load_in_slurmctld() {
    let c = cluster();
    let log = c.logs("ctld");
    assert!(log.contains("job_submit/fairway: Fairway"), "no job_submit/fairway load line in slurmctld's log:\n{log}");
    assert!(log.contains("job_submit/fairway: rules: 2 GPU types"), "{log}");
    // What builds for each version (README, "Slurm versions").
    let expected: &[&str] = match c.version.as_str() {
        "22.05" => &["priority/fairway", "preempt/fairway"],
        "24.11" => &["priority/fairway", "preempt/fairway"],
        _ => &[],
    };
    for plugin in expected {
        assert!(log.contains(&format!("{plugin}: Fairway")), "{plugin} did not load:\n{log}");
    }
    // The plugin is the one built for this version: a mismatch would not load at all.
    assert!(!log.contains("Incompatible Slurm plugin"), "{log}");
}

#[test]
#[ignore = "needs the docker cluster: make e2e"]
fn a_two_node_gang_starts_on_both_dgx_nodes_and_oversized_jobs_wait_whole() {
    let c = cluster();
    cancel_all(&c);
    let gang = c
        .sbatch(
            "fw_alice",
            &["-p", "gpu", "-N", "2", "--gres=gpu:h100:8", "--ntasks-per-node=8", "-t", "10", "--wrap=sleep 300"],
        )
        .expect("2 x 8 GPU job accepted");
    c.wait_job(gang, &["RUNNING"], Duration::from_secs(60)).unwrap();
    let j = show(&c, gang);
    assert_eq!(field(&j, "NodeList"), "c[1-2]", "{j}");
    assert_eq!(field(&j, "NumNodes"), "2", "{j}");
    assert!(j.contains("gres/gpu=16"), "{j}");

    // Another 2 x 8 H100 job: no free set exists, so it waits whole instead of starting
    // on whatever is free.
    let waiting =
        c.sbatch("fw_bob", &["-p", "gpu", "-N", "2", "--gres=gpu:h100:8", "-t", "10", "--wrap=true"]).unwrap();
    c.wait_for("the scheduler has looked at it", Duration::from_secs(60), || {
        Ok(field(&show(&c, waiting), "Reason") == "Resources")
    })
    .unwrap();
    let w = show(&c, waiting);
    // No nodes at all: not some of them.
    assert_eq!((field(&w, "JobState"), field(&w, "NodeList")), ("PENDING".into(), String::new()), "{w}");
    // The A100 nodes stay usable meanwhile.
    let small = c.sbatch("fw_carol", &["-p", "a100", "--gres=gpu:a100:2", "-t", "5", "--wrap=true"]).unwrap();
    c.wait_job(small, &["COMPLETED"], Duration::from_secs(60)).unwrap();
    c.cmd("scancel", &[&gang.to_string()]).unwrap();
    c.wait_job(waiting, &["RUNNING", "COMPLETED"], Duration::from_secs(60)).unwrap();
    cancel_all(&c);
}

/// The GPU indexes of one node line of `scontrol show job -d` (`…GRES=gpu:h100:2(IDX:4-5)`),
/// if it names any.
fn gpu_idx(line: &str) -> Option<Vec<u32>> {
    let idx = line.split("IDX:").nth(1).and_then(|s| s.split(')').next())?;
    Some(idx.parse::<CoreSet>().unwrap_or_else(|e| panic!("{e:?}: {line}")).iter().collect())
}

/// The GPUs each node of a running job holds, from `scontrol show job -d`, whose lines
/// group nodes that hold the same (`Nodes=c[1-2] CPU_IDs=0-15 Mem=0 GRES=gpu:h100:8(IDX:0-7)`).
fn gpus_per_node(c: &DockerCluster, job: u32) -> BTreeMap<String, Vec<u32>> {
    let d = c.cmd("scontrol", &["show", "job", "-d", &job.to_string()]).unwrap().stdout;
    let mut held = BTreeMap::new();
    for line in d.lines().filter(|l| l.trim_start().starts_with("Nodes=")) {
        let nodes: Hostlist = field(line, "Nodes").parse().unwrap_or_else(|e| panic!("{e}: {line}"));
        let gpus = gpu_idx(line).unwrap_or_default();
        for n in nodes.hosts() {
            held.insert(n.clone(), gpus.clone());
        }
    }
    held
}

/// What each rank of the job's `srun -l` step printed (`0: NODE=c1 STEP_GPUS=0,1`), as
/// node → the GPU lists its ranks saw.
fn ranks_saw(c: &DockerCluster, job: u32, ranks: usize) -> BTreeMap<String, Vec<String>> {
    let out = format!("/shared/jobs/slurm-{job}.out");
    c.wait_for("every rank reported", Duration::from_secs(60), || {
        Ok(lines(c, &out).iter().filter(|l| l.contains("NODE=")).count() >= ranks)
    })
    .unwrap_or_else(|e| panic!("{e:#}\n{:?}", lines(c, &out)));
    let mut saw: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for l in lines(c, &out).iter().filter(|l| l.contains("NODE=")) {
        saw.entry(field(l, "NODE")).or_default().push(field(l, "STEP_GPUS"));
    }
    saw
}

/// job_submit/fairway's gang rules on nodes that run the jobs: the shapes it fills in or
/// suggests start with the same GPUs on every node (an NVLink pair where the domain is a
/// pair), and the shapes it refuses, at submission or by `scontrol update`, never run.
#[test]
#[ignore = "needs the docker cluster: make e2e"]
fn gang_shapes_from_the_rules_run_with_the_same_gpus_on_every_node() {
    let c = cluster();
    cancel_all(&c);
    let report = "srun -l bash -c 'echo NODE=$(hostname) STEP_GPUS=$SLURM_STEP_GPUS'; sleep 300";
    let submit = |user: &str, args: &[&str]| {
        let mut all = vec!["--parsable", "-t", "10"];
        all.extend_from_slice(args);
        let wrap = format!("--wrap={report}");
        all.push(&wrap);
        let out = c.run_as(user, "sbatch", &all).unwrap();
        let id = out.stdout.trim().parse::<u32>().ok();
        (id, out.stderr)
    };
    let every = |nodes: &[&str], gpus: &[u32]| -> BTreeMap<String, Vec<u32>> {
        nodes.iter().map(|n| (n.to_string(), gpus.to_vec())).collect()
    };
    let all_h100: Vec<u32> = (0..8).collect();

    // A model and no GPUs: the plugin sizes the job as two whole DGX nodes.
    let (id, err) = submit("fw_carol", &["--comment=fairway: model=70b method=full precision=bf16"]);
    let filled = id.unwrap_or_else(|| panic!("{err}"));
    assert!(err.contains("fairway: 70B full fine-tune in bf16 needs about 1.12 TB"), "{err}");
    assert!(err.contains("set --nodes=2 --gpus-per-node=h100:8"), "{err}");
    c.wait_job(filled, &["RUNNING"], Duration::from_secs(60)).unwrap();
    assert_eq!(gpus_per_node(&c, filled), every(&["c1", "c2"], &all_h100), "{}", show(&c, filled));
    let saw = ranks_saw(&c, filled, 2);
    assert_eq!(
        saw,
        [("c1", "0,1,2,3,4,5,6,7"), ("c2", "0,1,2,3,4,5,6,7")]
            .into_iter()
            .map(|(n, g)| (n.to_string(), vec![g.to_string()]))
            .collect(),
        "ranks of job {filled}"
    );
    c.cmd("scancel", &[&filled.to_string()]).unwrap();

    // --gpus over two nodes becomes the same GPUs per node: one NVLink-bridged pair on
    // each A100 node, one rank per GPU.
    let (id, err) = submit("fw_alice", &["-p", "a100", "-N", "2", "--gpus=a100:4", "--ntasks-per-node=2"]);
    let split = id.unwrap_or_else(|| panic!("{err}"));
    assert!(err.contains("--gpus=4 over 2 nodes set as --nodes=2 --gpus-per-node=a100:2"), "{err}");
    c.wait_job(split, &["RUNNING"], Duration::from_secs(60)).unwrap();
    let held = gpus_per_node(&c, split);
    assert_eq!(held.keys().collect::<Vec<_>>(), ["c3", "c4"], "{}", show(&c, split));
    let pairs = topology("pcie-a100-nvlink-pairs.toml");
    for (node, gpus) in &held {
        assert_eq!(gpus.len(), 2, "{node}: {gpus:?}");
        let (a, b) = (gpus[0] as usize, gpus[1] as usize);
        assert!(pairs.nvlink.direct_lanes(a, b) > 0, "{node}: GPUs {gpus:?} are not a bridged pair");
    }
    let saw = ranks_saw(&c, split, 4);
    eprintln!("job {split}: GPUs per node {held:?}; its ranks saw {saw:?}");
    for (node, gpus) in &held {
        let ids = gpus.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        assert_eq!(saw.get(node), Some(&vec![ids.clone(), ids]), "two ranks on {node}: {saw:?}");
    }
    c.cmd("scancel", &[&split.to_string()]).unwrap();
    c.wait_job(split, &["CANCELLED"], Duration::from_secs(60)).unwrap();

    // A shape that straddles the pairs is refused with the nearest valid ones, and the
    // one suggested first runs as written.
    let (id, err) = submit("fw_bob", &["-p", "a100", "-N", "2", "--gres=gpu:a100:3"]);
    assert_eq!(id, None, "{err}");
    assert!(
        err.contains(
            "sbatch: error: fairway: 3 GPUs per node straddle the NVLink domains of 2 GPUs on a100 nodes; \
             nearest valid shape: --nodes=2 --gpus-per-node=a100:4 (or --nodes=2 --gpus-per-node=a100:2)"
        ),
        "{err}"
    );
    let (id, err) = submit("fw_bob", &["-p", "a100", "--nodes=2", "--gpus-per-node=a100:4"]);
    let suggested = id.unwrap_or_else(|| panic!("{err}"));
    c.wait_job(suggested, &["RUNNING"], Duration::from_secs(60)).unwrap();
    assert_eq!(gpus_per_node(&c, suggested), every(&["c3", "c4"], &[0, 1, 2, 3]), "{}", show(&c, suggested));
    c.cmd("scancel", &[&suggested.to_string()]).unwrap();

    // scontrol update is held to the same rules: a pending gang cannot be reshaped into
    // one that straddles the pairs.
    let (id, err) = submit("fw_dave", &["-p", "a100", "-N", "2", "--gres=gpu:a100:2", "--hold"]);
    let held_job = id.unwrap_or_else(|| panic!("{err}"));
    let out = c.run_as("fw_dave", "scontrol", &["update", &format!("JobId={held_job}"), "Gres=gpu:a100:3"]).unwrap();
    assert!(!out.ok(), "{out:?}");
    assert!(field(&show(&c, held_job), "TresPerNode").ends_with("gpu:a100:2"), "{}", show(&c, held_job));
    // Built from public headers alone (26.05), job_submit/fairway cannot read the job being
    // updated: it refuses the change unchecked rather than let it through.
    let why = if c.version == "26.05" {
        "job_modify: rejected: fairway: this Slurm build cannot show job_submit/fairway the job being updated, \
         so a change of --gres/--gpus-per-node cannot be checked"
    } else {
        "job_modify: rejected: fairway: 3 GPUs per node straddle"
    };
    let log = c.logs("ctld");
    assert!(log.contains(why), "{log}");
    // A change no rule governs still passes.
    let out = c.run_as("fw_dave", "scontrol", &["update", &format!("JobId={held_job}"), "TimeLimit=5"]).unwrap();
    assert!(out.ok(), "{out:?}");
    assert_eq!(field(&show(&c, held_job), "TimeLimit"), "00:05:00", "{}", show(&c, held_job));
    cancel_all(&c);
}

#[test]
#[ignore = "needs the docker cluster: make e2e"]
fn jobs_run_under_their_qos_and_a_qos_change_applies_to_the_next_job() {
    let c = cluster();
    cancel_all(&c);
    let high = c.sbatch("fw_alice", &["--qos=high", "-t", "5", "--wrap=true"]).unwrap();
    let default = c.sbatch("fw_bob", &["-t", "5", "--wrap=true"]).unwrap();
    let sweep =
        c.sbatch("fw_dave", &["--comment=fairway: tier=opportunistic ckpt=30s", "-t", "5", "--wrap=true"]).unwrap();
    for (job, qos, account) in [(high, "high", "vision"), (default, "normal", "nlp"), (sweep, "scavenger", "product")] {
        c.wait_job(job, &["COMPLETED"], Duration::from_secs(60)).unwrap();
        let j = show(&c, job);
        assert_eq!((field(&j, "QOS"), field(&j, "Account")), (qos.into(), account.into()), "{j}");
    }
    // Tighten the normal QoS: the next job over the new limit is held by it...
    let set = |wall: &str| {
        let out = c.cmd("sacctmgr", &["-i", "modify", "qos", "normal", "set", &format!("MaxWall={wall}")]).unwrap();
        assert!(out.ok(), "{out:?}");
    };
    set("00:02:00");
    let over = c.sbatch("fw_bob", &["-t", "10", "--wrap=true"]).unwrap();
    c.wait_for("the QoS limit holds the job", Duration::from_secs(60), || {
        Ok(field(&show(&c, over), "Reason") == "QOSMaxWallDurationPerJobLimit")
    })
    .unwrap();
    // ...and lifting it lets the job run.
    set("-1");
    c.wait_job(over, &["COMPLETED"], Duration::from_secs(90)).unwrap();
    cancel_all(&c);
}

#[test]
#[ignore = "needs the docker cluster: make e2e"]
fn losing_a_node_requeues_or_fails_the_whole_gang() {
    let c = cluster();
    cancel_all(&c);
    let args = |requeue: &str| -> Vec<String> {
        vec![
            "-p".into(),
            "a100".into(),
            "-N".into(),
            "2".into(),
            "--gres=gpu:a100:2".into(),
            "-t".into(),
            "10".into(),
            requeue.into(),
            "--wrap=srun sleep 300".into(),
        ]
    };
    let requeue_args = args("--requeue");
    let refs: Vec<&str> = requeue_args.iter().map(String::as_str).collect();
    let requeued = c.sbatch("fw_alice", &refs).unwrap();
    let fail_args = args("--no-requeue");
    let refs: Vec<&str> = fail_args.iter().map(String::as_str).collect();
    let failed = c.sbatch("fw_bob", &refs).unwrap();
    c.wait_job(requeued, &["RUNNING"], Duration::from_secs(60)).unwrap();
    c.wait_job(failed, &["RUNNING"], Duration::from_secs(60)).unwrap();

    c.set_running("c4", false).unwrap();
    let result = (|| -> anyhow::Result<()> {
        c.wait_for("slurmctld notices c4 is gone", Duration::from_secs(120), || {
            let st = c.cmd("sinfo", &["-h", "-n", "c4", "-o", "%T"])?.stdout;
            Ok(st.starts_with("down"))
        })?;
        // The requeued job is pending again as a whole; the other ended with NODE_FAIL.
        let st = c.wait_job(requeued, &["PENDING", "REQUEUED", "REQUEUE_HOLD"], Duration::from_secs(60))?;
        let j = show(&c, requeued);
        assert!(field(&j, "Restarts") != "0" || st != "PENDING", "{j}");
        let st = c.wait_job(failed, &["NODE_FAIL", "FAILED", "CANCELLED"], Duration::from_secs(60))?;
        assert_eq!(st, "NODE_FAIL");
        // Nothing of either job is left running on the surviving node. (Zombies do not
        // count: slurmd is the container's PID 1 and does not reap orphans.)
        c.wait_for("c3 has no job processes left", Duration::from_secs(60), || {
            let ps = c.exec("c3", &["ps", "-u", "fw_alice,fw_bob", "-o", "stat=,comm="])?;
            Ok(!ps.stdout.lines().any(|l| l.contains("sleep") && !l.trim_start().starts_with('Z')))
        })?;
        Ok(())
    })();
    c.set_running("c4", true).unwrap();
    c.wait_for("c4 is back", Duration::from_secs(120), || {
        let st = c.cmd("sinfo", &["-h", "-n", "c4", "-o", "%T"])?.stdout;
        Ok(st.trim() == "idle" || st.trim() == "allocated" || st.trim() == "mixed")
    })
    .unwrap();
    cancel_all(&c);
    result.unwrap();
}

/// Copies the example training job where the test users can submit it from, without its
/// `--gpus=1` (each test asks for its own shape) and with its settings written in: on
/// 24.11+, `sbatch --export=VAR=...` makes slurmd load the user's environment in new
/// namespaces, which unprivileged containers refuse (slurmd dies: "clone: Operation
/// not permitted"). Clears `dir` of an earlier run.
fn training_script(c: &DockerCluster, dir: &str) -> String {
    let script = "/shared/jobs/train.sh";
    let settings =
        format!("export STEPS=40 STEP_SECS=1 CKPT_EVERY=10 CKPT_DIR={dir} FAIRWAY_BIN=/usr/lib/fairway/bin/fairway");
    let sh = format!(
        "sed -e '/^#SBATCH --gpus/d' -e 's|^set -euo pipefail$|&\\n{settings}|' \
         /fairway/examples/preemptible-training/train.sh > {script} && chmod 755 {script} && rm -rf {dir} \
         && grep -q '^export STEPS=40' {script}"
    );
    let out = c.cmd("bash", &["-c", &sh]).unwrap();
    assert!(out.ok(), "{out:?}");
    script.to_string()
}

fn lines(c: &DockerCluster, path: &str) -> Vec<String> {
    c.cmd("cat", &[path]).map(|o| o.stdout.lines().map(str::to_string).collect()).unwrap_or_default()
}

/// preempt/fairway's victims that ended `outcome` (`acknowledged`, `expired`), as
/// `fairway metrics` on the controller counts them from its budget and sacct.
fn victims_that(c: &DockerCluster, outcome: &str) -> u64 {
    let out = c.exec("ctld", &["/usr/lib/fairway/bin/fairway", "metrics"]).unwrap();
    let prefix = format!("fairway_preemption_victims{{outcome=\"{outcome}\"}} ");
    out.stdout.lines().find_map(|l| l.strip_prefix(prefix.as_str())).map_or(0, |v| v.parse().unwrap())
}

/// Submits the urgent 2 x 8 H100 job and returns its id and the seconds from its
/// submission until it was running.
fn urgent_gang(c: &DockerCluster) -> (u32, f64) {
    let t0 = std::time::Instant::now();
    let urgent = c
        .sbatch(
            "fw_alice",
            &["-J", "urgent", "-p", "gpu", "--qos=high", "-N", "2", "--ntasks-per-node=8", "--gres=gpu:h100:8"]
                .into_iter()
                .chain(["-t", "5", "--wrap=sleep 10"])
                .collect::<Vec<_>>(),
        )
        .expect("urgent job accepted");
    c.wait_job(urgent, &["RUNNING", "COMPLETED"], Duration::from_secs(180)).unwrap();
    (urgent, t0.elapsed().as_secs_f64())
}

#[test]
#[ignore = "needs the docker cluster: make e2e"]
fn preemption_asks_a_gang_to_checkpoint_and_it_resumes_without_losing_steps() {
    let Some(c) = preempt_cluster() else { return };
    let dir = "/shared/jobs/ckpt-gang";
    let script = training_script(&c, dir);
    // A 2-node job in the preemptible QoS that declares a 3 s checkpoint: job_submit/fairway
    // gives it --requeue and the checkpoint signal.
    let victim = c
        .sbatch(
            "fw_carol",
            &["-J", "train", "-p", "gpu", "-N", "2", "--ntasks-per-node=8", "--gres=gpu:h100:8", "--qos=scavenger"]
                .into_iter()
                .chain(["-t", "10", "--comment=fairway: ckpt=3s", &script])
                .collect::<Vec<_>>(),
        )
        .expect("training job accepted");
    c.wait_job(victim, &["RUNNING"], Duration::from_secs(60)).unwrap();
    let v = show(&c, victim);
    assert_eq!((field(&v, "Requeue"), field(&v, "NodeList")), ("1".into(), "c[1-2]".into()), "{v}");
    c.wait_for("the job is past its first checkpoint", Duration::from_secs(60), || {
        Ok(lines(&c, &format!("{dir}/steps.log")).len() >= 12)
    })
    .unwrap();

    let (urgent, waited) = urgent_gang(&c);
    println!("urgent gang started {waited:.1} s after submission (victim acknowledged its checkpoint)");
    // Checkpoint time (3 s) + 10 s, as the preemption issue asks.
    assert!(waited <= 13.0, "urgent job waited {waited:.1} s\n{}", c.log_tails());
    assert_eq!(field(&show(&c, urgent), "NodeList"), "c[1-2]");
    // The victim went back to the queue whole: no part of it runs anywhere.
    let v = show(&c, victim);
    assert_eq!((field(&v, "JobState"), field(&v, "Restarts")), ("PENDING".into(), "1".into()), "{v}");
    let log = lines(&c, &format!("{dir}/train.log")).join("\n");
    assert!(log.contains("SIGUSR1: checkpoint saved"), "{log}");
    let ctld = c.logs("ctld");
    assert!(ctld.contains(&format!("JobId={victim} (QoS scavenger) chosen for preemption: grace 30 s")), "{ctld}");
    // Counted as acknowledged: it ended inside its grace (sacct's record reaches slurmdbd
    // a moment after the requeue).
    c.wait_for("the metrics count the acknowledgement", Duration::from_secs(60), || {
        Ok(victims_that(&c, "acknowledged") >= 1)
    })
    .unwrap();

    // Requeued batch jobs wait out the credential lifetime (30 s on the docker cluster) before they start again.
    c.wait_job(victim, &["COMPLETED", "FAILED"], Duration::from_secs(300)).unwrap();
    let log = lines(&c, &format!("{dir}/train.log")).join("\n");
    assert!(log.contains("resumed at step") && log.contains("done steps=40 restarts=1"), "{log}");
    // Every step done, none lost; any repeat is within one checkpoint interval.
    let steps: Vec<u32> = lines(&c, &format!("{dir}/steps.log")).iter().filter_map(|l| l.parse().ok()).collect();
    let mut unique = steps.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique, (1..=40).collect::<Vec<_>>(), "{steps:?}");
    assert!(steps.len() - unique.len() < 10, "{} steps repeated: {steps:?}", steps.len() - unique.len());
    cancel_all(&c);
}

/// The PyTorch example (`examples/torchrun-training`) as an ML engineer submits it (22.05):
/// torchrun over two nodes, two ranks each, preempted by an urgent gang. The signal
/// reaches all four ranks, rank 0 saves a real `torch.save` checkpoint and acknowledges
/// with `fairway ckpt-done`, and the requeued job resumes from it on every rank; the final
/// weights equal an uninterrupted run's, so no step was lost or done twice.
#[test]
#[ignore = "needs the docker cluster: make e2e"]
fn preemption_checkpoints_a_torchrun_job_on_every_rank_and_it_resumes_where_it_stopped() {
    let Some(c) = preempt_cluster() else { return };
    // Debian's PyTorch is in the 22.05 cluster's image only (docker/build-image.sh).
    let torch = c.exec("c1", &["python3", "-c", "import torch; print(torch.__version__)"]).unwrap();
    if !torch.ok() {
        assert_ne!(c.version, "22.05", "the 22.05 image has no PyTorch: {torch:?}");
        eprintln!("no PyTorch in Slurm {}'s image (only 22.05's has it): nothing to test", c.version);
        return;
    }
    let dir = "/shared/jobs/torchrun-ckpt";
    let example = "/fairway/examples/torchrun-training";
    assert!(c.cmd("rm", &["-rf", dir]).unwrap().ok());
    const STEPS: usize = 60;
    let settings = format!(
        "--export=ALL,TRAIN_PY={example}/train.py,CKPT_DIR={dir},STEPS={STEPS},STEP_SECS=0.5,\
         CKPT_EVERY=20,FAIRWAY_BIN=/usr/lib/fairway/bin/fairway"
    );
    // The example's own #SBATCH lines (2 nodes, scavenger, ckpt=10s), on the H100 nodes.
    let victim = c
        .sbatch("fw_carol", &["-p", "gpu", "--gres=gpu:h100:8", &settings, &format!("{example}/train.sbatch")])
        .expect("torchrun job accepted");
    c.wait_job(victim, &["RUNNING"], Duration::from_secs(60)).unwrap();
    let v = show(&c, victim);
    // job_submit/fairway made it requeueable (and gave it the site's `B:USR1`, which the
    // example's batch shell passes on to the ranks).
    assert_eq!((field(&v, "Requeue"), field(&v, "NodeList")), ("1".into(), "c[1-2]".into()), "{v}");
    c.wait_for("the job is past its first checkpoint", Duration::from_secs(120), || {
        Ok(lines(&c, &format!("{dir}/steps.log")).len() >= 25)
    })
    .unwrap();

    let (urgent, waited) = urgent_gang(&c);
    println!("urgent gang started {waited:.1} s after submission (the torchrun job acknowledged its checkpoint)");
    assert_eq!(field(&show(&c, urgent), "NodeList"), "c[1-2]");
    let v = show(&c, victim);
    assert_eq!((field(&v, "JobState"), field(&v, "Restarts")), ("PENDING".into(), "1".into()), "{v}");
    let log = lines(&c, &format!("{dir}/train.log")).join("\n");
    for rank in 0..4 {
        assert!(log.contains(&format!("rank={rank} SIGUSR1 received")), "rank {rank} got no signal:\n{log}");
    }
    let saved: usize = log
        .lines()
        .find_map(|l| l.split("SIGUSR1: checkpoint saved at step ").nth(1))
        .and_then(|rest| rest.split(';').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("rank 0 saved no checkpoint on the signal:\n{log}"));
    assert!((25..STEPS).contains(&saved), "checkpoint at step {saved}:\n{log}");
    c.wait_for("the metrics count the acknowledgement", Duration::from_secs(60), || {
        Ok(victims_that(&c, "acknowledged") >= 1)
    })
    .unwrap();

    // Requeued, it starts again after the credential lifetime and the urgent job.
    c.wait_job(victim, &["COMPLETED", "FAILED"], Duration::from_secs(300)).unwrap();
    let log = lines(&c, &format!("{dir}/train.log")).join("\n");
    for rank in 0..4 {
        let resumed = format!("rank={rank} resumed at step {saved} (restart 1)");
        assert!(log.contains(&resumed), "no '{resumed}':\n{log}");
    }
    assert!(log.contains(&format!("done steps={STEPS} restarts=1")), "{log}");
    assert_eq!(c.job_state(victim).unwrap(), "COMPLETED", "{log}");
    // Every step done exactly once: the checkpoint was taken at the step the ranks agreed on.
    let steps: Vec<usize> = lines(&c, &format!("{dir}/steps.log")).iter().filter_map(|l| l.parse().ok()).collect();
    assert_eq!(steps, (1..=STEPS).collect::<Vec<_>>());
    // And the weights are an uninterrupted run's (same data per step, one process).
    let reference = c
        .exec(
            "c1",
            &[
                "env",
                &format!("CKPT_DIR={dir}"),
                &format!("STEPS={STEPS}"),
                "python3",
                &format!("{example}/train.py"),
                "--reference",
                "4",
            ],
        )
        .unwrap();
    assert!(reference.ok(), "the resumed run's weights differ from an uninterrupted run's: {reference:?}");
    println!("{}", reference.stdout.trim());
    cancel_all(&c);
}

#[test]
#[ignore = "needs the docker cluster: make e2e"]
fn preemption_stops_a_job_that_never_acknowledges_at_the_end_of_its_grace() {
    let Some(c) = preempt_cluster() else { return };
    // The same declaration (3 s checkpoint, so 30 s grace) but a job that ignores the
    // signal: what plain GraceTime gives a preemptor.
    let victim = c
        .sbatch(
            "fw_carol",
            &["-J", "deaf", "-p", "gpu", "-N", "2", "--ntasks-per-node=8", "--gres=gpu:h100:8", "--qos=scavenger"]
                .into_iter()
                .chain(["-t", "10", "--comment=fairway: ckpt=3s", "--wrap=trap '' USR1; sleep 600"])
                .collect::<Vec<_>>(),
        )
        .unwrap();
    c.wait_job(victim, &["RUNNING"], Duration::from_secs(60)).unwrap();
    let (_, waited) = urgent_gang(&c);
    println!("urgent gang started {waited:.1} s after submission (victim ignored the signal; grace 30 s)");
    // Not before the grace ends; then Slurm stops the job at its next time-limit check
    // (every 30 s) or preemption pass (KillWait + MessageTimeout after the first), plus
    // room for a loaded CI machine.
    assert!((29.0..=90.0).contains(&waited), "urgent job waited {waited:.1} s\n{}", c.log_tails());
    let v = show(&c, victim);
    assert_eq!(field(&v, "JobState"), "PENDING", "{v}");
    c.wait_for("the metrics count a grace that ran out", Duration::from_secs(60), || {
        Ok(victims_that(&c, "expired") >= 1)
    })
    .unwrap();
    cancel_all(&c);
}

#[test]
#[ignore = "needs the docker cluster: make e2e"]
fn preemption_spares_a_job_in_its_minimum_runtime_while_another_victim_exists() {
    let Some(c) = preempt_cluster() else { return };
    let sweep = |node: &str| {
        c.sbatch(
            "fw_carol",
            &["-p", "a100", "-w", node, "--gres=gpu:a100:4", "--qos=scavenger", "-t", "10"]
                .into_iter()
                .chain(["--comment=fairway: ckpt=3s", "--wrap=trap '' USR1; sleep 600"])
                .collect::<Vec<_>>(),
        )
        .unwrap()
    };
    // `min_runtime = 30` on the docker cluster: `old` is past it, `young` is not.
    let old = sweep("c3");
    c.wait_job(old, &["RUNNING"], Duration::from_secs(60)).unwrap();
    c.wait_for("the first job is past its minimum runtime", Duration::from_secs(60), || {
        let j = show(&c, old);
        let secs: Vec<u64> = field(&j, "RunTime").split(':').filter_map(|p| p.parse().ok()).collect();
        Ok(secs.iter().fold(0, |a, p| a * 60 + p) > 32)
    })
    .unwrap();
    let young = sweep("c4");
    c.wait_job(young, &["RUNNING"], Duration::from_secs(60)).unwrap();
    let urgent =
        c.sbatch("fw_alice", &["-p", "a100", "--qos=high", "--gres=gpu:a100:4", "-t", "5", "--wrap=sleep 5"]).unwrap();
    c.wait_job(urgent, &["RUNNING", "COMPLETED"], Duration::from_secs(120)).unwrap();
    let (o, y) = (show(&c, old), show(&c, young));
    assert!(["PREEMPTED", "PENDING"].contains(&field(&o, "JobState").as_str()), "the old job was the victim:\n{o}");
    assert_eq!((field(&y, "JobState"), field(&y, "Restarts")), ("RUNNING".into(), "0".into()), "{y}");
    // Nor was it chosen in a later pass while the old job's grace ran.
    let ctld = c.logs("ctld");
    assert!(!ctld.contains(&format!("JobId={young} (QoS scavenger) chosen for preemption")), "{ctld}");
    cancel_all(&c);
}

/// The budget (`max_preemptions = 1` on the docker cluster) counts preempt/fairway's own
/// preemptions, not requeues: a job its owner requeued stays preemptable.
#[test]
#[ignore = "needs the docker cluster: make e2e"]
fn the_preemption_budget_is_not_spent_by_the_owners_own_requeues() {
    let Some(c) = preempt_cluster() else { return };
    // c4 busy with a job nobody may preempt, so the urgent job below needs c3.
    let busy = c.sbatch("fw_alice", &["-p", "a100", "-w", "c4", "--gres=gpu:a100:4", "-t", "10", "--wrap=sleep 600"]);
    c.wait_job(busy.unwrap(), &["RUNNING"], Duration::from_secs(60)).unwrap();
    let sweep = c
        .sbatch(
            "fw_carol",
            &["-p", "a100", "-w", "c3", "--gres=gpu:a100:4", "--qos=scavenger", "-t", "10"]
                .into_iter()
                .chain(["--comment=fairway: ckpt=3s", "--wrap=trap '' USR1; sleep 600"])
                .collect::<Vec<_>>(),
        )
        .unwrap();
    c.wait_job(sweep, &["RUNNING"], Duration::from_secs(60)).unwrap();
    // The owner requeues it: Slurm's restart count is now 1, the budget.
    let out = c.run_as("fw_carol", "scontrol", &["requeue", &sweep.to_string()]).unwrap();
    assert!(out.ok(), "{out:?}");
    c.wait_for("the requeued job runs again", Duration::from_secs(180), || {
        let j = show(&c, sweep);
        Ok(field(&j, "JobState") == "RUNNING" && field(&j, "Restarts") == "1")
    })
    .unwrap();
    let urgent =
        c.sbatch("fw_alice", &["-p", "a100", "--qos=high", "--gres=gpu:a100:4", "-t", "5", "--wrap=sleep 5"]).unwrap();
    c.wait_job(urgent, &["RUNNING", "COMPLETED"], Duration::from_secs(180))
        .unwrap_or_else(|e| panic!("the requeued job was not preempted: {e}\n{}", c.log_tails()));
    let ctld = c.logs("ctld");
    assert!(ctld.contains(&format!("JobId={sweep} (QoS scavenger) chosen for preemption")), "{ctld}");
    assert!(ctld.contains(&format!("JobId={sweep} preempted 1 time(s) (max_preemptions=1)")), "{ctld}");
    cancel_all(&c);
}

/// The GPU indexes and CPU ids a running job holds on its one node, from
/// `scontrol show job -d` (`Nodes=c1 CPU_IDs=56-57 Mem=0 GRES=gpu:h100:2(IDX:4-5)`).
fn placement(c: &DockerCluster, job: u32) -> (Vec<usize>, CoreSet) {
    let d = c.cmd("scontrol", &["show", "job", "-d", &job.to_string()]).unwrap().stdout;
    let line = d.lines().find(|l| l.contains("CPU_IDs=")).unwrap_or_else(|| panic!("no CPU_IDs in\n{d}"));
    let cpus: CoreSet = field(line, "CPU_IDs").parse().unwrap_or_else(|e| panic!("{e:?}: {line}"));
    let gpus =
        gpu_idx(line).unwrap_or_else(|| panic!("no GPU IDX in {line}")).into_iter().map(|g| g as usize).collect();
    (gpus, cpus)
}

/// Checks the GPUs Slurm gave `job` against Fairway's own choice over the same free GPUs
/// (`fairway_core::topology::choose`): as well connected, on as few sockets, and the
/// job's cores local to its GPUs. Returns the GPUs.
fn assert_placed_well(c: &DockerCluster, topo: &Topology, job: u32, free: &[usize]) -> Vec<usize> {
    let (gpus, cpus) = placement(c, job);
    let best = choose(topo, free, gpus.len()).unwrap();
    let got = score(topo, free, &gpus).unwrap();
    let what = format!(
        "job {job}: GPUs {gpus:?} CPUs {cpus} of free {free:?}; Fairway's choice {:?} on cores {} ({:?})",
        best.gpus, best.cores, best.score
    );
    assert_eq!(got.disconnected_pairs, best.score.disconnected_pairs, "not NVLink-connected: {what}");
    assert_eq!((got.sockets, got.lanes), (best.score.sockets, best.score.lanes), "{what}");
    let local: CoreSet = gpus.iter().flat_map(|&g| topo.gpus[g].cores.iter()).collect();
    assert!(cpus.iter().all(|cpu| local.contains(cpu)), "cores not local to the GPUs: {what}");
    // What the job itself sees. No task plugin binds in these containers (their nodes
    // have more cores than this machine): tests/tests/gpu_binding.rs checks the tasks'
    // own affinity on the host. Here: job_submit/fairway's `--gpu-bind=closest` reaches
    // the job's srun steps through SLURM_GPU_BIND, since Slurm does not pass it on.
    c.wait_for("the job printed its GPUs", Duration::from_secs(30), || {
        Ok(lines(c, &format!("/shared/jobs/slurm-{job}.out")).iter().any(|l| l.starts_with("GPU_BIND=")))
    })
    .unwrap();
    let ids = gpus.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
    let seen = lines(c, &format!("/shared/jobs/slurm-{job}.out"));
    assert!(seen.iter().any(|l| *l == format!("GPUS={ids}")), "{what}: the job saw {seen:?}");
    assert!(seen.iter().any(|l| l == "GPU_BIND=closest"), "{what}: the job saw {seen:?}");
    eprintln!("{what}");
    gpus
}

fn topology(file: &str) -> Topology {
    Topology::load(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/topology").join(file)).unwrap()
}

fn free_after(all: usize, busy: &[usize]) -> Vec<usize> {
    (0..all).filter(|g| !busy.contains(g)).collect()
}

#[test]
#[ignore = "needs the docker cluster: make e2e"]
fn gpus_are_placed_by_topology_with_some_busy() {
    let c = cluster();
    cancel_all(&c);
    let job = |user: &str, node: &str, gpus: &str| {
        let p = if node == "c1" { "gpu" } else { "a100" };
        let script = "echo GPUS=$SLURM_JOB_GPUS; echo GPU_BIND=$SLURM_GPU_BIND; sleep 300";
        let id = c
            .sbatch(
                user,
                &["-p", p, "-w", node, &format!("--gres=gpu:{gpus}"), "-t", "10", &format!("--wrap={script}")],
            )
            .unwrap();
        c.wait_job(id, &["RUNNING"], Duration::from_secs(60)).unwrap();
        id
    };

    // DGX H100 (NVSwitch: every set is connected): three GPUs busy, then a 4-GPU job
    // and a 2-GPU job each kept on one socket, their cores on it.
    let dgx = topology("dgx-h100.toml");
    let busy = job("fw_alice", "c1", "h100:3");
    let (taken, _) = placement(&c, busy);
    let free = free_after(8, &taken);
    let four = job("fw_bob", "c1", "h100:4");
    assert_placed_well(&c, &dgx, four, &free);
    c.cmd("scancel", &[&four.to_string()]).unwrap();
    c.wait_job(four, &["CANCELLED"], Duration::from_secs(60)).unwrap();
    let two = job("fw_carol", "c1", "h100:2");
    assert_placed_well(&c, &dgx, two, &free);

    // 4 x A100 in NVLink-bridged pairs: with one GPU busy, a 2-GPU job gets the other
    // pair, not one GPU of each.
    let pairs = topology("pcie-a100-nvlink-pairs.toml");
    let one = job("fw_alice", "c3", "a100:1");
    let (taken, _) = placement(&c, one);
    let free = free_after(4, &taken);
    let pair = job("fw_dave", "c3", "a100:2");
    let got = assert_placed_well(&c, &pairs, pair, &free);
    assert!(pairs.nvlink.direct_lanes(got[0], got[1]) > 0, "not a bridged pair: {got:?}");
    cancel_all(&c);
}

#[test]
#[ignore = "needs the docker cluster: make e2e"]
fn slurmd_takes_gpu_topology_from_fairways_gpu_plugin() {
    let c = cluster();
    // Built where it can be (README, "Slurm versions"): by version, not by what the log
    // shows, so a plugin that failed to load fails here instead of skipping.
    if !matches!(c.version.as_str(), "22.05" | "24.11") {
        eprintln!(
            "Fairway's gpu/nvml is not built for Slurm {} (sid's Slurm has no NVML support): nothing to test",
            c.version
        );
        return;
    }
    // gres.conf says AutoDetect=nvml and the types only; the stand-in NVML has no GPUs, so
    // the plugin reads each node's topology file from fairway.toml. c1 reads slurm.conf
    // from /etc/slurm; c3 runs configless (its slurm.conf is slurmctld's, in slurmd's
    // conf-cache, where no fairway.toml comes), so the plugin takes /etc/slurm/fairway.toml.
    let cache = "/var/spool/slurmd/conf-cache";
    let configless = c.exec("c3", &["ls", cache]).unwrap();
    assert!(
        configless.ok()
            && configless.stdout.lines().any(|f| f == "slurm.conf")
            && !configless.stdout.contains("fairway"),
        "c3's slurmd is not configless: {configless:?}"
    );
    for (node, file, gpus, ty) in [("c1", "dgx-h100.toml", 8, "h100"), ("c3", "pcie-a100-nvlink-pairs.toml", 4, "a100")]
    {
        let log = c.logs(node);
        let want = format!("{gpus} GPU(s) from /etc/slurm/topology/{file}");
        assert!(log.contains(&format!("gpu/nvml: {node}: NVML cannot read the GPUs")) && log.contains(&want), "{log}");
        // What slurmd itself made of it: Cores and Links per GPU, as the plugin reported.
        let out = c
            .exec(node, &["bash", "-c", "LD_LIBRARY_PATH=/usr/lib/fairway/nvml-stand-in slurmd -G 2>&1"])
            .unwrap()
            .stdout;
        let expected = topology(file).gres_gpus(GresStyle::Fairway);
        for (i, g) in expected.iter().enumerate() {
            let line = out
                .lines()
                .find(|l| l.contains(&format!(" Index={i} ")))
                .unwrap_or_else(|| panic!("{node}: no GPU {i} in slurmd -G:\n{out}"));
            for want in [
                // gres.conf's short type replaces NVML's name, which contains it.
                format!("Type={ty}"),
                format!("File={}", g.file),
                format!("Cores={}", g.cores),
                format!("Links={}", g.links),
            ] {
                assert!(line.split_whitespace().any(|f| f == want), "{node} GPU {i}: no {want} in {line}");
            }
        }
    }
}

/// `fairway explain` where users meet it: as the owner on the login node, for a pending
/// job job_submit/fairway rewrote; and on the controller, where priority/fairway's status
/// lives, with Fairway's terms one by one (equal to sprio's SITE) and the metrics against
/// squeue.
#[test]
#[ignore = "needs the docker cluster: make e2e"]
fn explain_and_metrics_on_the_docker_cluster() {
    const FAIRWAY: &str = "/usr/lib/fairway/bin/fairway";
    let c = cluster();
    cancel_all(&c);
    // Pending for resources (every node, one of them busy), so eligible and in sprio; a
    // plain batch job gets the batch tier's QoS.
    let busy = c.sbatch("fw_bob", &["-p", "debug", "-w", "c1", "-n", "1", "--wrap=sleep 600"]).unwrap();
    c.wait_job(busy, &["RUNNING"], Duration::from_secs(60)).unwrap();
    let job = c.sbatch("fw_alice", &["-p", "debug", "-N", "4", "--exclusive", "--wrap=true"]).unwrap();
    let id = job.to_string();
    let out = c.run_as("fw_alice", FAIRWAY, &["explain", &id]).unwrap();
    assert!(out.ok(), "{out:?}");
    let text = out.stdout;
    eprintln!("{text}");
    assert!(text.contains(&format!("job {id}: pending (user fw_alice")), "{text}");
    assert!(text.contains("\nwaiting: "), "{text}");
    assert!(text.contains("job_submit/fairway changed it at submission:"), "{text}");
    assert!(text.contains("\n  - QoS normal (batch tier)"), "{text}");
    // The login node has no StateSaveLocation: explain says where the terms are.
    assert!(text.contains("Fairway's terms: not readable here"), "{text}");

    // A second job for the same nodes, of another user: one of the two waits behind the
    // other on priority (which one is fair share's choice); explain puts it second in the
    // queue and shows its owner's fair share as sshare does.
    let other = c.sbatch("fw_bob", &["-p", "debug", "-N", "4", "--exclusive", "--wrap=true"]).unwrap();
    let reason =
        |j: u32| c.cmd("squeue", &["-h", "-j", &j.to_string(), "-o", "%r"]).map(|o| o.stdout.trim().to_string());
    let mut behind = None;
    c.wait_for("one job waits on priority", Duration::from_secs(60), || {
        behind = [(job, "fw_alice", "vision"), (other, "fw_bob", "nlp")]
            .into_iter()
            .find(|(j, _, _)| reason(*j).is_ok_and(|r| r == "Priority"));
        Ok(behind.is_some())
    })
    .unwrap();
    let (behind, user, account) = behind.unwrap();
    let behind_id = behind.to_string();
    let out = c.run_as(user, FAIRWAY, &["explain", &behind_id, "--json"]).unwrap();
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(json["blocker"]["reason"], "Priority", "{json}");
    let place = &json["queue"][0];
    assert_eq!((place["position"].as_u64(), place["ahead"].as_u64()), (Some(2), Some(1)), "{json}");
    let sshare = c.run_as(user, "sshare", &["-h", "-P", "-u", user, "-A", account, "-o", "User,FairShare"]).unwrap();
    let factor = sshare
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{user}|")).map(|f| f.trim().to_string()))
        .unwrap_or_default();
    assert_eq!(json["fair_share"]["factor"].as_str(), Some(factor.as_str()), "{json}\n{sshare:?}");
    let path: Vec<&str> =
        json["fair_share"]["path"].as_array().unwrap().iter().filter_map(|l| l["name"].as_str()).collect();
    assert_eq!(path, ["root", "ml", "research", account, user], "{json}");
    let sprio = c.exec("ctld", &["sprio", "-h", "-j", &behind_id, "-o", "%Y"]).unwrap().stdout;
    assert_eq!(
        json["priority"][0]["priority"].as_f64(),
        sprio.trim().parse::<f64>().ok(),
        "{json} against sprio {sprio}"
    );
    c.cmd("scancel", &[&other.to_string()]).unwrap();

    // Held by a QoS GrpTRES limit: explain names the QoS, the limit and where to read it.
    struct Limit<'a>(&'a DockerCluster);
    impl Drop for Limit<'_> {
        fn drop(&mut self) {
            let _ = self.0.cmd("sacctmgr", &["-i", "modify", "qos", "high", "set", "GrpTRES=cpu=-1"]);
        }
    }
    let set = c.cmd("sacctmgr", &["-i", "modify", "qos", "high", "set", "GrpTRES=cpu=1"]).unwrap();
    assert!(set.ok(), "{set:?}");
    let _limit = Limit(&c);
    let first = c.sbatch("fw_alice", &["-p", "gpu", "--qos=high", "-n", "1", "--wrap=sleep 300"]).unwrap();
    c.wait_job(first, &["RUNNING"], Duration::from_secs(60)).unwrap();
    let limited = c.sbatch("fw_alice", &["-p", "gpu", "--qos=high", "-n", "1", "--wrap=true"]).unwrap().to_string();
    c.wait_for("the QoS limit as the reason", Duration::from_secs(60), || {
        Ok(c.cmd("squeue", &["-h", "-j", &limited, "-o", "%r"])?.stdout.trim() == "QOSGrpCpuLimit")
    })
    .unwrap();
    let text = c.run_as("fw_alice", FAIRWAY, &["explain", &limited]).unwrap().stdout;
    assert!(text.contains("waiting: the QoS high has reached a limit (Grp Cpu Limit) [QOSGrpCpuLimit]"), "{text}");
    assert!(text.contains("`sacctmgr show qos high format=Name,GrpTRES"), "{text}");
    let qos = c.cmd("sacctmgr", &["-n", "-P", "show", "qos", "high", "format=GrpTRES"]).unwrap().stdout;
    assert_eq!(qos.trim(), "cpu=1", "the limit explain points at");
    c.cmd("scancel", &[&limited, &first.to_string()]).unwrap();

    if !c.logs("ctld").contains("priority/fairway: Fairway") {
        eprintln!("priority/fairway is not built for Slurm {}: no status to read", c.version);
        cancel_all(&c);
        return;
    }
    let on_ctld = |args: &[&str]| {
        let mut all = vec![FAIRWAY];
        all.extend_from_slice(args);
        c.exec("ctld", &all).unwrap()
    };
    let mut terms = serde_json::Value::Null;
    c.wait_for("a pass publishes the job's terms", Duration::from_secs(150), || {
        let out = on_ctld(&["explain", &id, "--json"]);
        terms = serde_json::from_str::<serde_json::Value>(&out.stdout)?["fairway_terms"].clone();
        Ok(!terms.is_null())
    })
    .unwrap();
    let sprio = c.exec("ctld", &["sprio", "-h", "-j", &id, "-o", "%S"]).unwrap().stdout;
    assert_eq!(terms["site_bonus"].as_f64(), sprio.trim().parse::<f64>().ok(), "{terms} against sprio's SITE {sprio}");
    assert!(terms["predicted_work"].as_f64().is_some_and(|p| p > 0.0), "{terms}");

    let metrics = on_ctld(&["metrics"]);
    assert!(metrics.ok(), "{metrics:?}");
    let pending =
        c.exec("ctld", &["squeue", "-h", "-t", "PD", "-A", "vision", "-q", "normal", "-o", "%P"]).unwrap().stdout;
    let partition = pending.lines().next().unwrap_or_default().trim().to_string();
    let count = pending.lines().count();
    let line = format!(
        "fairway_jobs{{state=\"pending\",partition=\"{partition}\",qos=\"normal\",account=\"vision\"}} {count}\n"
    );
    assert!(metrics.stdout.contains(&line), "{line} not in\n{}", metrics.stdout);
    assert!(metrics.stdout.contains("\nfairway_priority_pass_seconds "), "{}", metrics.stdout);
    cancel_all(&c);
}

/// A node put back in service however the test ends.
struct Drained<'a>(&'a DockerCluster, &'a str);

impl Drop for Drained<'_> {
    fn drop(&mut self) {
        let node = format!("NodeName={}", self.1);
        let _ = self.0.cmd("scontrol", &["update", &node, "State=RESUME"]);
    }
}

/// GPUs no node has are refused at submission with what the partition has (Slurm's own
/// refusal says only "Requested node configuration is not available"), and explain
/// names the nodes a pending GPU job could use and which of them are out, as sinfo and
/// scontrol show them.
#[test]
#[ignore = "needs the docker cluster: make e2e"]
fn gpus_no_node_has_are_refused_and_explain_names_the_nodes_that_are_out() {
    const FAIRWAY: &str = "/usr/lib/fairway/bin/fairway";
    let c = cluster();
    cancel_all(&c);
    let refused = |args: &[&str]| {
        let mut all = args.to_vec();
        all.push("--wrap=true");
        let out = c.run_as("fw_alice", "sbatch", &all).unwrap();
        assert!(!out.ok(), "{out:?}");
        out.stderr
    };
    let err = refused(&["-p", "gpu", "--gres=gpu:v100:1"]);
    assert!(
        err.contains("fairway: no node of partition gpu has GPUs of type v100 (they have a100 ×4, h100 ×8 per node)"),
        "{err}"
    );
    let err = refused(&["-p", "a100", "--gres=gpu:h100:2"]);
    assert!(err.contains("partitions gpu, debug have them: --partition=gpu"), "{err}");
    let err = refused(&["-p", "a100", "--gres=gpu:a100:8"]);
    assert!(err.contains("(at most 4 per node); spread them over more nodes, e.g. --nodes=2"), "{err}");

    // One of the two H100 nodes drained: a two-node gang waits, and explain says why.
    let ok = c.cmd("scontrol", &["update", "NodeName=c2", "State=DRAIN", "Reason=fairway-e2e-maint"]).unwrap();
    assert!(ok.ok(), "{ok:?}");
    let _resume = Drained(&c, "c2");
    let gang = c
        .sbatch(
            "fw_alice",
            &["-p", "gpu", "-N", "2", "--gres=gpu:h100:8", "--ntasks-per-node=8", "-t", "10", "--wrap=true"],
        )
        .unwrap();
    let id = gang.to_string();
    c.wait_for("the gang waits with a reason", Duration::from_secs(60), || {
        let r = c.cmd("squeue", &["-h", "-j", &id, "-o", "%T|%r"])?.stdout;
        Ok(r.starts_with("PENDING|") && !r.trim().ends_with("|None"))
    })
    .unwrap();
    let out = c.run_as("fw_alice", FAIRWAY, &["explain", &id]).unwrap();
    assert!(out.ok(), "{out:?}");
    let text = out.stdout;
    eprintln!("{text}");
    assert!(
        text.contains("GPUs: it asks for h100:8 on each of 2 node(s); nodes of its partitions that have"),
        "{text}"
    );
    let state = |node: &str| {
        c.cmd("sinfo", &["-h", "-n", node, "-o", "%T"]).unwrap().stdout.lines().next().unwrap_or("").trim().to_string()
    };
    let (c1, c2) = (state("c1"), state("c2"));
    assert!(text.contains(&format!("\n  c1           {c1}\n")), "sinfo says c1 is {c1}:\n{text}");
    assert!(
        text.contains(&format!("\n  c2           {c2}: cannot start jobs (fairway-e2e-maint)\n")),
        "sinfo: {c2}\n{text}"
    );
    assert!(text.contains("only 1 of them can start jobs now and it needs 2"), "{text}");
    let shown = c.cmd("scontrol", &["show", "node", "c2"]).unwrap().stdout;
    assert!(shown.contains("Reason=fairway-e2e-maint"), "{shown}");
    let json: serde_json::Value =
        serde_json::from_str(&c.run_as("fw_alice", FAIRWAY, &["explain", &id, "--json"]).unwrap().stdout).unwrap();
    assert_eq!(json["gpu_nodes"]["fitting"].as_array().map(Vec::len), Some(2), "{json}");
    cancel_all(&c);
}

/// `fairway serve` on the controller, stopped however the test ends.
struct ServeInCtld<'a>(&'a DockerCluster);

impl Drop for ServeInCtld<'_> {
    fn drop(&mut self) {
        let _ = self.0.exec("ctld", &["pkill", "-f", "fairway serve --listen 0.0.0.0:9815"]);
    }
}

#[test]
#[ignore = "needs the docker cluster: make e2e"]
fn the_live_page_draws_the_cluster_and_its_gangs_in_a_browser() {
    use browser::{chromium, js, screenshot, unix_ms, wait};
    let c = cluster();
    cancel_all(&c);
    let gang =
        c.sbatch("fw_alice", &["-p", "gpu", "-N", "2", "--gres=gpu:h100:8", "-t", "10", "--wrap=sleep 300"]).unwrap();
    let lora = c.sbatch("fw_carol", &["-p", "a100", "--gres=gpu:a100:2", "-t", "10", "--wrap=sleep 300"]).unwrap();
    c.wait_job(gang, &["RUNNING"], Duration::from_secs(60)).unwrap();
    c.wait_job(lora, &["RUNNING"], Duration::from_secs(60)).unwrap();

    let id = c.container("ctld").unwrap();
    let started = std::process::Command::new("docker")
        .args([
            "exec",
            "-d",
            &id,
            "/usr/lib/fairway/bin/fairway",
            "serve",
            "--listen",
            "0.0.0.0:9815",
            "--auth",
            "none",
        ])
        .status()
        .unwrap();
    assert!(started.success());
    let _serve = ServeInCtld(&c);
    let url = format!("http://{}:9815/", c.address("ctld").unwrap());
    c.wait_for("fairway serve answers", Duration::from_secs(30), || {
        Ok(std::net::TcpStream::connect(url.trim_start_matches("http://").trim_end_matches('/')).is_ok())
    })
    .unwrap();

    let browser = chromium();
    let tab = browser.new_tab().unwrap();
    tab.navigate_to(&url).unwrap().wait_until_navigated().unwrap();
    wait(&tab, &format!("tr[data-job=\"{gang}\"]"), 20);
    let count = |sel: &str| js(&tab, &format!("document.querySelectorAll('{sel}').length")).as_u64().unwrap();
    // Every node with its GPUs; the gang holds all 16 H100s, the LoRA job two A100s.
    for (node, gpus) in [("c1", 8), ("c2", 8), ("c3", 4), ("c4", 4)] {
        assert_eq!(count(&format!("[data-node=\"{node}\"] .gpu")), gpus, "{node}");
    }
    assert_eq!(count("[data-node=\"c1\"] .gpu.used") + count("[data-node=\"c2\"] .gpu.used"), 16);
    assert_eq!(count("[data-node=\"c3\"] .gpu.used") + count("[data-node=\"c4\"] .gpu.used"), 2);
    // Where slurmctld's fairway.toml names the nodes' topology files (every version
    // with Fairway's gpu/nvml), GPUs are drawn by NVLink domain: one NVSwitch domain of
    // 8 on the DGX nodes, two pairs on the A100 nodes.
    if c.read_file("ctld", "/etc/slurm/fairway.toml").unwrap().contains("[gpu.topology]") {
        assert_eq!(count("[data-node=\"c1\"] .domain"), 1);
        assert_eq!(count("[data-node=\"c3\"] .domain"), 2);
    }
    // The gang among the running gangs.
    let gangs = js(&tab, "document.getElementById('gang-list').textContent");
    assert!(gangs.as_str().unwrap().contains(&format!("job {gang} (fw_alice): 2 nodes × 8 GPUs on c[1-2]")), "{gangs}");

    // A job submitted now reaches the open page without a reload.
    let before = unix_ms();
    let new = c.sbatch("fw_bob", &["-p", "gpu", "--gres=gpu:h100:4", "-t", "5", "--wrap=true"]).unwrap();
    let submitted = unix_ms();
    let row = wait(&tab, &format!("tr[data-job=\"{new}\"]"), 15);
    let seen: u128 = row.get_attribute_value("data-seen").unwrap().unwrap().parse().unwrap();
    eprintln!(
        "Slurm {}: job {new} on the page {} ms after sbatch returned (sbatch took {} ms)",
        c.version,
        seen.saturating_sub(submitted),
        submitted - before
    );
    wait(&tab, "[data-account=\"vision\"]", 10);
    // explain of the clicked job, from the controller.
    row.click().unwrap();
    c.wait_for("explain shown", Duration::from_secs(20), || {
        Ok(js(&tab, "document.getElementById('explain-text').textContent")
            .as_str()
            .is_some_and(|t| t.contains(&format!("job {new}: pending (user fw_bob"))))
    })
    .unwrap();
    screenshot(&tab, &format!("dashboard-docker-{}.png", c.version), None);
    drop(tab);
    drop(browser);
    cancel_all(&c);
}
