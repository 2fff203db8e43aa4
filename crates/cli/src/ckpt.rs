//! `fairway ckpt-done`: a job chosen for preemption says it has saved its checkpoint.
//!
//! Run inside the job (it reads `SLURM_JOB_ID`) once the checkpoint is on disk. It asks
//! Slurm to requeue the job at once, so the preemptor gets the GPUs now instead of at
//! the end of the grace time: `scontrol requeue <id>`, or `scancel <id>` with
//! `--cancel` or when the job is not requeueable (`Requeue=0` in
//! `scontrol show job -o <id>`). Slurm's own authentication decides who may: the job's
//! owner or an operator.
//!
//! `scontrol` and `scancel` are found on `PATH`, or at `$FAIRWAY_SCONTROL` and
//! `$FAIRWAY_SCANCEL` when set.

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::Context as _;

/// `fairway ckpt-done`'s arguments.
#[derive(clap::Args)]
pub struct CkptDoneArgs {
    /// The job whose checkpoint is saved [default: $SLURM_JOB_ID, set inside every job].
    #[arg(long = "job", value_name = "ID", env = "SLURM_JOB_ID")]
    job: Option<String>,
    /// Cancel the job instead of requeueing it (nothing left to run).
    #[arg(long)]
    cancel: bool,
}

/// The Slurm commands `ckpt-done` runs.
#[derive(Debug, Clone)]
pub struct Slurm {
    /// `scontrol`.
    pub scontrol: PathBuf,
    /// `scancel`.
    pub scancel: PathBuf,
}

impl Slurm {
    /// `$FAIRWAY_SCONTROL` / `$FAIRWAY_SCANCEL`, else `scontrol` / `scancel` on `PATH`.
    pub fn from_env() -> Self {
        let var = |k: &str, d: &str| PathBuf::from(std::env::var_os(k).unwrap_or_else(|| OsString::from(d)));
        Self { scontrol: var("FAIRWAY_SCONTROL", "scontrol"), scancel: var("FAIRWAY_SCANCEL", "scancel") }
    }

    /// Runs `program args…`; its stdout, or an error with its exit status and stderr.
    fn run(&self, program: &std::path::Path, args: &[&str]) -> anyhow::Result<String> {
        crate::slurm_cmd::run(program, args)
    }
}

/// What `ckpt-done` will do with the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// `scontrol requeue`.
    Requeue,
    /// `scancel`, and why.
    Cancel(&'static str),
}

/// A job id as Slurm prints it: `123`, or `123_4` for an array task.
fn valid_job_id(id: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.len() <= 10 && s.bytes().all(|b| b.is_ascii_digit());
    match id.split_once('_') {
        Some((job, task)) => digits(job) && digits(task),
        None => digits(id),
    }
}

/// Decides between requeue and cancel: `--cancel`, or `Requeue=0` in
/// `scontrol show job -o`, means cancel.
pub fn plan(slurm: &Slurm, job: &str, cancel: bool) -> anyhow::Result<Plan> {
    if cancel {
        return Ok(Plan::Cancel("--cancel was given"));
    }
    let shown =
        slurm.run(&slurm.scontrol, &["show", "job", "-o", job]).with_context(|| format!("cannot look up job {job}"))?;
    let requeue = shown.split_whitespace().find_map(|w| w.strip_prefix("Requeue="));
    Ok(match requeue {
        Some("0") => Plan::Cancel("it is not requeueable (Requeue=0; submit with --requeue to be requeued)"),
        _ => Plan::Requeue,
    })
}

/// Carries out `plan` for `job`.
pub fn execute(slurm: &Slurm, job: &str, plan: &Plan) -> anyhow::Result<()> {
    match plan {
        Plan::Requeue => {
            slurm.run(&slurm.scontrol, &["requeue", job]).with_context(|| format!("cannot requeue job {job}"))
        }
        Plan::Cancel(_) => slurm.run(&slurm.scancel, &[job]).with_context(|| format!("cannot cancel job {job}")),
    }
    .map(drop)
}

/// `fairway ckpt-done`.
pub fn ckpt_done(args: CkptDoneArgs) -> anyhow::Result<()> {
    let Some(job) = args.job.filter(|j| !j.trim().is_empty()) else {
        return Err(crate::Usage(
            "no job to requeue: SLURM_JOB_ID is not set (run `fairway ckpt-done` inside the job, or pass --job ID)"
                .into(),
        )
        .into());
    };
    let job = job.trim();
    if !valid_job_id(job) {
        return Err(crate::Usage(format!(
            "`{job}` is not a Slurm job id (expected digits, or JOB_TASK for an array task)"
        ))
        .into());
    }
    let slurm = Slurm::from_env();
    let plan = plan(&slurm, job, args.cancel)?;
    // Say what happens first: a requeue ends this very process when it runs in the job.
    match &plan {
        Plan::Requeue => println!("fairway: job {job} saved its checkpoint; requeueing it now"),
        Plan::Cancel(why) => println!("fairway: job {job} saved its checkpoint; cancelling it: {why}"),
    }
    execute(&slurm, job, &plan)?;
    match plan {
        Plan::Requeue => println!("fairway: job {job} requeued; it resumes from its checkpoint when it starts again"),
        Plan::Cancel(_) => println!("fairway: job {job} cancelled"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;
    use std::path::Path;
    use std::sync::Mutex;

    use super::*;

    /// Writing an executable while another test thread forks can make exec fail with
    /// ETXTBSY; one test at a time writes and runs fakes.
    static SERIAL: Mutex<()> = Mutex::new(());

    /// A fake Slurm command that records its arguments in `calls` and runs `body`.
    fn fake(dir: &Path, name: &str, body: &str) -> PathBuf {
        let path = dir.join(name);
        let calls = dir.join("calls");
        std::fs::write(&path, format!("#!/bin/sh\necho \"{name} $*\" >> '{}'\n{body}\n", calls.display())).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn calls(dir: &Path) -> String {
        std::fs::read_to_string(dir.join("calls")).unwrap_or_default()
    }

    fn slurm(dir: &Path, show: &str) -> Slurm {
        Slurm {
            scontrol: fake(
                dir,
                "scontrol",
                &format!("if [ \"$1\" = show ]; then echo '{show}'; fi\nif [ \"$1\" = requeue ] && [ \"$2\" = 13 ]; then echo 'Job is not in a requeueable state' >&2; exit 1; fi"),
            ),
            scancel: fake(dir, "scancel", ""),
        }
    }

    #[test]
    fn requeues_a_requeueable_job() {
        let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let s = slurm(dir.path(), "JobId=42 JobName=train Requeue=1 Restarts=0");
        let p = plan(&s, "42", false).unwrap();
        assert_eq!(p, Plan::Requeue);
        execute(&s, "42", &p).unwrap();
        assert_eq!(calls(dir.path()), "scontrol show job -o 42\nscontrol requeue 42\n");
    }

    #[test]
    fn cancels_when_not_requeueable_or_asked() {
        let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let s = slurm(dir.path(), "JobId=42 Requeue=0 Restarts=0");
        let p = plan(&s, "42", false).unwrap();
        assert!(matches!(p, Plan::Cancel(why) if why.contains("Requeue=0")));
        execute(&s, "42", &p).unwrap();
        assert_eq!(calls(dir.path()), "scontrol show job -o 42\nscancel 42\n");

        let dir = tempfile::tempdir().unwrap();
        let s = slurm(dir.path(), "JobId=42 Requeue=1");
        assert_eq!(plan(&s, "42", true).unwrap(), Plan::Cancel("--cancel was given"));
        assert_eq!(calls(dir.path()), "", "--cancel needs no lookup");
    }

    #[test]
    fn failures_carry_slurms_reason() {
        let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let s = slurm(dir.path(), "JobId=13 Requeue=1");
        let e = execute(&s, "13", &Plan::Requeue).unwrap_err();
        let shown = format!("{e:#}");
        assert!(shown.starts_with("cannot requeue job 13: `"), "{shown}");
        assert!(shown.ends_with("requeue 13` failed (exit status: 1): Job is not in a requeueable state"), "{shown}");

        let missing = Slurm { scontrol: dir.path().join("nope"), scancel: dir.path().join("nope") };
        let shown = format!("{:#}", plan(&missing, "42", false).unwrap_err());
        assert!(shown.contains("cannot look up job 42: cannot run `"), "{shown}");
        assert!(shown.contains("FAIRWAY_SCONTROL"), "{shown}");
    }

    #[test]
    fn job_ids() {
        assert!(valid_job_id("42") && valid_job_id("42_7"));
        for bad in ["", "42_", "_7", "4x", "-1", "42 43", "12345678901"] {
            assert!(!valid_job_id(bad), "{bad}");
        }
    }
}
