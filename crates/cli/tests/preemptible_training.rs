//! examples/preemptible-training/train.sh without Slurm: preempted through SIGUSR1
//! (it checkpoints and runs the real `fairway ckpt-done` against a fake `scontrol`),
//! killed hard, and resumed, until it finishes with every step done.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const STEPS: usize = 40;
const CKPT_EVERY: usize = 5;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/preemptible-training/train.sh")
}

struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        let calls = dir.path().join("calls");
        let scontrol = format!(
            "#!/bin/sh\necho \"scontrol $*\" >> '{}'\n[ \"$1\" = show ] && echo 'JobId=77 Requeue=1'\nexit 0\n",
            calls.display()
        );
        let p = dir.path().join("bin/scontrol");
        std::fs::write(&p, scontrol).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        Self { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(name)).unwrap_or_default()
    }

    fn steps(&self) -> Vec<usize> {
        self.read("ckpt/steps.log").lines().map(|l| l.parse().unwrap()).collect()
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new("bash");
        cmd.arg(script())
            .env("STEPS", STEPS.to_string())
            .env("STEP_SECS", "0.05")
            .env("CKPT_EVERY", CKPT_EVERY.to_string())
            .env("CKPT_DIR", self.path("ckpt"))
            .env("FAIRWAY_BIN", env!("CARGO_BIN_EXE_fairway"))
            .env("SLURM_JOB_ID", "77")
            .env("REQUEUE_WAIT", "60")
            .env("PATH", format!("{}:{}", self.path("bin").display(), std::env::var("PATH").unwrap_or_default()))
            .env_remove("FAIRWAY_SCONTROL")
            .env_remove("FAIRWAY_SCANCEL")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd
    }

    fn start(&self) -> Child {
        self.command().spawn().unwrap()
    }
}

/// Polls `cond` every 20 ms for up to 30 s.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < Duration::from_secs(30), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill").args([sig, &child.id().to_string()]).status().unwrap().success();
    assert!(ok, "kill {sig} failed");
}

fn checkpoint_step(s: &Sandbox) -> usize {
    let text = s.read("ckpt/checkpoint");
    text.lines().find_map(|l| l.strip_prefix("step=")).unwrap().parse().unwrap()
}

#[test]
fn preempted_killed_and_resumed_without_losing_a_step() {
    let s = Sandbox::new();

    // Run 1: preempted. SIGUSR1 → checkpoint now, `fairway ckpt-done` → scontrol requeue.
    let mut child = s.start();
    wait_for("a dozen steps", || s.steps().len() >= 12);
    signal(&child, "-USR1");
    wait_for("the requeue request", || s.read("calls").contains("scontrol requeue 77"));
    wait_for("the job to wait for its requeue", || s.read("ckpt/train.log").contains("waiting to be requeued"));
    assert!(child.try_wait().unwrap().is_none(), "the job must wait to be requeued, not exit");
    assert_eq!(s.read("calls"), "scontrol show job -o 77\nscontrol requeue 77\n");
    let at_preemption = s.steps();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(s.steps(), at_preemption, "no training after ckpt-done");
    // The checkpoint holds every completed step: nothing is lost or redone.
    assert_eq!(checkpoint_step(&s), at_preemption.len());
    assert_eq!(at_preemption, (1..=at_preemption.len()).collect::<Vec<_>>());
    child.kill().unwrap(); // Slurm's requeue
    child.wait().unwrap();

    // Run 2: resumes, then dies without warning (node failure) past another checkpoint.
    let mut child = s.start();
    let resumed_at = at_preemption.len();
    wait_for("steps after the resume", || s.steps().len() >= resumed_at + CKPT_EVERY + 2);
    child.kill().unwrap();
    child.wait().unwrap();

    // Run 3: resumes from the last periodic checkpoint and finishes.
    let out = s.command().output().unwrap();
    assert!(out.status.success(), "train.sh failed: {out:?}");
    let log = s.read("ckpt/train.log");
    assert!(log.contains(&format!("resumed at step {resumed_at} (restart 1)")), "{log}");
    assert_eq!(log.matches("resumed at step").count(), 2, "{log}");
    assert!(log.contains(&format!("done steps={STEPS} restarts=2")), "{log}");
    assert_eq!(checkpoint_step(&s), STEPS);

    // Every step done; only the hard kill repeats steps, fewer than a checkpoint interval.
    let steps = s.steps();
    let mut unique = steps.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique, (1..=STEPS).collect::<Vec<_>>());
    let repeated = steps.len() - STEPS;
    assert!(repeated < CKPT_EVERY, "{repeated} steps redone: {steps:?}");
}
