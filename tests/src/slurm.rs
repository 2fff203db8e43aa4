//! What every Slurm cluster of the tests offers, wherever it runs: commands as root
//! and as test users, and the waits built on them.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::CmdOutput;

/// A Slurm cluster the tests can drive: the host cluster ([`crate::Cluster`]) or the
/// docker cluster ([`crate::DockerCluster`]).
pub trait Slurm {
    /// Runs a Slurm command as root (`scontrol`, `sacctmgr`, …).
    fn cmd(&self, prog: &str, args: &[&str]) -> Result<CmdOutput>;

    /// Runs a command as the unprivileged test `user`, in a directory it may write.
    fn run_as(&self, user: &str, prog: &str, args: &[&str]) -> Result<CmdOutput>;

    /// The last lines of every daemon's log, for failure messages.
    fn log_tails(&self) -> String;

    /// `sbatch --parsable` as `user`; the job id, or sbatch's error text.
    fn sbatch(&self, user: &str, args: &[&str]) -> Result<u32, String> {
        let mut all = vec!["--parsable"];
        all.extend_from_slice(args);
        let out = self.run_as(user, "sbatch", &all).map_err(|e| format!("{e:#}"))?;
        if !out.ok() {
            return Err(out.stderr);
        }
        out.stdout.trim().split(';').next().and_then(|s| s.parse().ok()).ok_or(out.stderr)
    }

    /// `JobState` of a job, from `scontrol show job`.
    fn job_state(&self, job_id: u32) -> Result<String> {
        let out = self.cmd("scontrol", &["-o", "show", "job", &job_id.to_string()])?;
        out.stdout
            .split_whitespace()
            .find_map(|f| f.strip_prefix("JobState="))
            .map(str::to_string)
            .with_context(|| format!("no JobState for job {job_id}: {}", out.stderr))
    }

    /// Waits until the job is in one of `states`.
    fn wait_job(&self, job_id: u32, states: &[&str], timeout: Duration) -> Result<String> {
        let start = Instant::now();
        loop {
            let st = self.job_state(job_id)?;
            if states.contains(&st.as_str()) {
                return Ok(st);
            }
            if start.elapsed() > timeout {
                bail!("job {job_id} is {st}, not {states:?}, after {timeout:?}\n{}", self.log_tails());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Polls `cond` (every 200 ms, up to two minutes: two `PriorityCalcPeriod`s of the
    /// tests) until it holds.
    fn wait_until(&self, what: &str, cond: impl FnMut() -> Result<bool>) -> Result<()> {
        self.wait_until_within(what, Duration::from_secs(120), cond)
    }

    /// Polls `cond` every 200 ms until it holds, for up to `timeout`.
    fn wait_until_within(&self, what: &str, timeout: Duration, mut cond: impl FnMut() -> Result<bool>) -> Result<()> {
        let start = Instant::now();
        loop {
            if cond()? {
                return Ok(());
            }
            if start.elapsed() > timeout {
                bail!("timed out waiting until {what}\n{}", self.log_tails());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}
