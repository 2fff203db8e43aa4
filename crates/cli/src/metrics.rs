//! `fairway metrics` (print once, e.g. for node_exporter's textfile collector) and
//! `fairway serve`'s `/metrics` (which Prometheus scrapes): Fairway's OpenMetrics, rendered
//! by `fairway_core::metrics` from squeue, sshare, the status priority/fairway writes after
//! each pass and the learned model's calibration. Slurm's commands run as the user who
//! runs this, so run it as SlurmUser (or root) for the whole cluster: under `PrivateData`
//! anyone else sees only what Slurm shows them.

use std::path::{Path, PathBuf};

use clap::Args;
use fairway_core::config::{self, Config};
use fairway_core::dashboard::Alert;
use fairway_core::metrics::{self, Scrape};
use fairway_core::predict::OnlineCalibration;
use fairway_core::preempt::budget::{self, Graces};
use fairway_core::preempt::Preemptions;
use fairway_core::status::{self, Status};
use fairway_core::submit::counters::{self, Counters};

use crate::slurm_cmd;

#[derive(Args)]
pub struct MetricsArgs {
    /// slurm.conf beside which fairway.toml is read (for the calibration file;
    /// $FAIRWAY_CONF names it instead) [default: $SLURM_CONF or /etc/slurm/slurm.conf].
    #[arg(long, env = "SLURM_CONF", default_value = "/etc/slurm/slurm.conf")]
    pub slurm_conf: PathBuf,
}

fn slurm(program: &str, args: &[&str]) -> anyhow::Result<String> {
    slurm_cmd::run(Path::new(program), args)
}

/// One scrape, rendered, with the alerts `fairway serve` watched (none from `fairway
/// metrics`, which sees one moment).
pub fn scrape(slurm_conf: &Path, alerts: Option<&[Alert]>) -> anyhow::Result<String> {
    let squeue = slurm("squeue", &["-h", "-a", "-t", "PENDING,RUNNING", "-o", metrics::SQUEUE_FORMAT])?;
    let sshare = slurm("sshare", &["-a", "-h", "-P", "-o", metrics::SSHARE_FORMAT])?;
    let sinfo = slurm("sinfo", &["-h", "-o", metrics::SINFO_FORMAT])?;
    let state = slurm_cmd::state_save_location()?;
    let config = Config::load(&config::locate_from_env(slurm_conf)).ok().flatten();
    let (status, calibration) = published(&state, config.as_ref());
    // Written only where job_submit/fairway and preempt/fairway run.
    let submit = Counters::read(&state.join(counters::FILE_NAME)).ok();
    let kept = state.join(budget::FILE_NAME);
    let preemptions = kept.exists().then(|| Preemptions::load(&kept).ok()).flatten();
    let graces = preemptions.as_ref().and_then(graces);
    let now = jiff::Timestamp::now().as_second();
    Ok(metrics::render(&Scrape {
        squeue: &squeue,
        sshare: &sshare,
        sinfo: &sinfo,
        status: status.as_ref(),
        calibration: calibration.as_ref(),
        submit: submit.as_ref(),
        preemptions: preemptions.as_ref(),
        graces,
        alerts,
        now,
    }))
}

/// priority/fairway's last pass and the learned model's online calibration, from
/// StateSaveLocation. Both are optional: no status before priority/fairway's first pass
/// (or under another priority plugin), no calibration without a learned model.
pub fn published(state: &Path, config: Option<&Config>) -> (Option<Status>, Option<OnlineCalibration>) {
    let status = Status::read(&state.join(status::FILE_NAME)).ok();
    let calibration =
        config.and_then(|c| OnlineCalibration::load(&state.join(&c.predictor.calibration_file)).ok().flatten());
    (status, calibration)
}

/// How the kept preemptions' victims used their grace, from sacct (the newest 500
/// victims: one command line); `None` when sacct cannot answer (no slurmdbd).
fn graces(p: &Preemptions) -> Option<Graces> {
    let jobs: Vec<String> = p.victims(500).iter().map(u32::to_string).collect();
    if jobs.is_empty() {
        return Some(Graces::default());
    }
    let list = jobs.join(",");
    let args = ["-X", "-D", "-n", "-P", "-o", budget::SACCT_FORMAT, "-j", &list];
    slurm_cmd::run_with(Path::new("sacct"), &args, &[("SLURM_TIME_FORMAT", "%s")]).ok().map(|t| p.graces(&t))
}

pub fn print(a: MetricsArgs) -> anyhow::Result<()> {
    print!("{}", scrape(&a.slurm_conf, None)?);
    Ok(())
}
