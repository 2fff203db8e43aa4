//! Running Slurm's client commands (scontrol, sprio, squeue, sshare) as the user who
//! runs `fairway`: Slurm itself decides what they may see.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context as _};

/// Runs `program args…`; its stdout, or an error with its exit status and stderr.
pub fn run(program: &Path, args: &[&str]) -> anyhow::Result<String> {
    run_with(program, args, &[])
}

/// [`run`] with further environment (`SLURM_TIME_FORMAT=%s`: times as Unix seconds).
pub fn run_with(program: &Path, args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<String> {
    let shown = format!("{} {}", program.display(), args.join(" "));
    let out = Command::new(program).args(args).envs(env.iter().copied()).output().with_context(|| {
        format!(
            "cannot run `{shown}` (is Slurm's client installed and on PATH? FAIRWAY_SCONTROL/FAIRWAY_SCANCEL override)"
        )
    })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let why = stderr.trim();
        bail!("`{shown}` failed ({}){}", out.status, if why.is_empty() { String::new() } else { format!(": {why}") });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `StateSaveLocation` as the running slurmctld has it (`scontrol show config`: right in
/// a configless cluster too, where this host has no slurm.conf).
pub fn state_save_location() -> anyhow::Result<std::path::PathBuf> {
    show_config()?
        .remove("StateSaveLocation")
        .map(std::path::PathBuf::from)
        .context("scontrol show config names no StateSaveLocation")
}

/// `scontrol show config` as key and value (`SlurmUser` → `slurm(64030)`).
pub fn show_config() -> anyhow::Result<std::collections::BTreeMap<String, String>> {
    let conf = run(Path::new("scontrol"), &["show", "config"])?;
    Ok(conf
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once('=')?;
            Some((k.trim().to_string(), v.trim().to_string()))
        })
        .collect())
}
