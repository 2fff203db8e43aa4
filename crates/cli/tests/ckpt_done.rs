//! `fairway ckpt-done` as a job runs it, against fake `scontrol`/`scancel` on PATH.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

/// Writing an executable while another test thread forks can make exec fail with
/// ETXTBSY; one test at a time writes and runs fakes.
static SERIAL: Mutex<()> = Mutex::new(());

/// A directory with fake `scontrol` and `scancel` that record their arguments in
/// `calls`; `scontrol show job` prints `show`, `scontrol requeue` exits `requeue_rc`.
fn fakes(show: &str, requeue_rc: u8) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let calls = dir.path().join("calls");
    let scontrol = format!(
        "#!/bin/sh\necho \"scontrol $*\" >> '{}'\ncase \"$1\" in\n  show) echo '{show}' ;;\n  \
         requeue) [ {requeue_rc} = 0 ] || {{ echo 'slurm_requeue error: Access/permission denied' >&2; exit {requeue_rc}; }} ;;\nesac\n",
        calls.display()
    );
    let scancel = format!("#!/bin/sh\necho \"scancel $*\" >> '{}'\n", calls.display());
    for (name, text) in [("scontrol", scontrol), ("scancel", scancel)] {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    dir
}

fn ckpt_done(fakes: &Path, job: Option<&str>, args: &[&str]) -> (i32, String, String, String) {
    let path = format!("{}:{}", fakes.display(), std::env::var("PATH").unwrap_or_default());
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fairway"));
    cmd.arg("ckpt-done").args(args).env("PATH", path).env_remove("FAIRWAY_SCONTROL").env_remove("FAIRWAY_SCANCEL");
    match job {
        Some(j) => cmd.env("SLURM_JOB_ID", j),
        None => cmd.env_remove("SLURM_JOB_ID"),
    };
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        std::fs::read_to_string(fakes.join("calls")).unwrap_or_default(),
    )
}

#[test]
fn requeues_the_job_it_runs_in() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = fakes("JobId=77 JobName=train JobState=RUNNING Requeue=1 Restarts=1", 0);
    let (code, stdout, stderr, calls) = ckpt_done(dir.path(), Some("77"), &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(calls, "scontrol show job -o 77\nscontrol requeue 77\n");
    assert!(stdout.contains("fairway: job 77 saved its checkpoint; requeueing it now"), "{stdout}");
    assert!(stdout.contains("fairway: job 77 requeued"), "{stdout}");
}

#[test]
fn job_flag_wins_over_the_environment() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = fakes("JobId=78 Requeue=1", 0);
    let (code, _, stderr, calls) = ckpt_done(dir.path(), Some("77"), &["--job", "78"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(calls, "scontrol show job -o 78\nscontrol requeue 78\n");
}

#[test]
fn cancels_a_job_that_cannot_be_requeued() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = fakes("JobId=77 Requeue=0", 0);
    let (code, stdout, _, calls) = ckpt_done(dir.path(), Some("77"), &[]);
    assert_eq!(code, 0);
    assert_eq!(calls, "scontrol show job -o 77\nscancel 77\n");
    assert!(stdout.contains("cancelling it: it is not requeueable (Requeue=0"), "{stdout}");

    let dir = fakes("JobId=77 Requeue=1", 0);
    let (code, stdout, _, calls) = ckpt_done(dir.path(), Some("77"), &["--cancel"]);
    assert_eq!(code, 0);
    assert_eq!(calls, "scancel 77\n");
    assert!(stdout.contains("fairway: job 77 cancelled"), "{stdout}");
}

#[test]
fn outside_a_job_it_says_so_and_fails() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = fakes("", 0);
    let (code, _, stderr, calls) = ckpt_done(dir.path(), None, &[]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("SLURM_JOB_ID is not set (run `fairway ckpt-done` inside the job, or pass --job ID)"),
        "{stderr}"
    );
    assert_eq!(calls, "");

    let (code, _, stderr, _) = ckpt_done(dir.path(), Some("77; rm -rf /"), &[]);
    assert_ne!(code, 0);
    assert!(stderr.contains("is not a Slurm job id"), "{stderr}");
}

#[test]
fn a_refused_requeue_fails_with_slurms_reason() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = fakes("JobId=77 Requeue=1", 1);
    let (code, _, stderr, _) = ckpt_done(dir.path(), Some("77"), &[]);
    assert_eq!(code, 3);
    assert!(stderr.contains("cannot requeue job 77"), "{stderr}");
    assert!(stderr.contains("Access/permission denied"), "{stderr}");
}

#[test]
fn fairway_scontrol_overrides_path() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = fakes("JobId=77 Requeue=1", 0);
    let out = Command::new(env!("CARGO_BIN_EXE_fairway"))
        .args(["ckpt-done", "--job", "77"])
        .env("PATH", "/nonexistent")
        .env("FAIRWAY_SCONTROL", dir.path().join("scontrol"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("calls")).unwrap(),
        "scontrol show job -o 77\nscontrol requeue 77\n"
    );
}
