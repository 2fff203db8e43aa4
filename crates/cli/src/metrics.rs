//! `fairway metrics` (print once, e.g. for node_exporter's textfile collector) and
//! `fairway serve` (an HTTP endpoint Prometheus scrapes): Fairway's OpenMetrics, rendered
//! by `fairway_core::metrics` from squeue, sshare, the status priority/fairway writes after
//! each pass and the learned model's calibration. Slurm's commands run as the user who
//! runs this, so run it as SlurmUser (or root) for the whole cluster: under `PrivateData`
//! anyone else sees only what Slurm shows them.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use fairway_core::config::{self, Config};
use fairway_core::metrics::{self, Scrape};
use fairway_core::predict::OnlineCalibration;
use fairway_core::preempt::{budget, Preemptions};
use fairway_core::status::{self, Status};
use fairway_core::submit::counters::{self, Counters};

use crate::slurm_cmd;

#[derive(Args)]
pub struct MetricsArgs {
    /// slurm.conf beside which fairway.toml is read (for the calibration file;
    /// $FAIRWAY_CONF names it instead) [default: $SLURM_CONF or /etc/slurm/slurm.conf].
    #[arg(long, env = "SLURM_CONF", default_value = "/etc/slurm/slurm.conf")]
    slurm_conf: PathBuf,
}

#[derive(Args)]
pub struct ServeArgs {
    /// Address to listen on. Loopback by default: what it serves is what Slurm shows the
    /// user running it (SlurmUser sees every job), so expose it only behind a scraper.
    #[arg(long, default_value = "127.0.0.1:9814")]
    listen: String,
    #[command(flatten)]
    metrics: MetricsArgs,
}

fn slurm(program: &str, args: &[&str]) -> anyhow::Result<String> {
    slurm_cmd::run(Path::new(program), args)
}

/// One scrape, rendered.
fn scrape(a: &MetricsArgs) -> anyhow::Result<String> {
    let squeue = slurm("squeue", &["-h", "-a", "-t", "PENDING,RUNNING", "-o", metrics::SQUEUE_FORMAT])?;
    let sshare = slurm("sshare", &["-a", "-h", "-P", "-o", metrics::SSHARE_FORMAT])?;
    let sinfo = slurm("sinfo", &["-h", "-o", metrics::SINFO_FORMAT])?;
    let state = slurm_cmd::state_save_location()?;
    // Both files are optional: no status before priority/fairway's first pass (or under
    // another priority plugin), no calibration without a learned model.
    let status = Status::read(&state.join(status::FILE_NAME)).ok();
    let calibration = Config::load(&config::locate_from_env(&a.slurm_conf))
        .ok()
        .flatten()
        .and_then(|c| OnlineCalibration::load(&state.join(&c.predictor.calibration_file)).ok().flatten());
    // Written only where job_submit/fairway and preempt/fairway run.
    let submit = Counters::read(&state.join(counters::FILE_NAME)).ok();
    let kept = state.join(budget::FILE_NAME);
    let preemptions = kept.exists().then(|| Preemptions::load(&kept).ok()).flatten();
    let now = jiff::Timestamp::now().as_second();
    Ok(metrics::render(&Scrape {
        squeue: &squeue,
        sshare: &sshare,
        sinfo: &sinfo,
        status: status.as_ref(),
        calibration: calibration.as_ref(),
        submit: submit.as_ref(),
        preemptions: preemptions.as_ref(),
        now,
    }))
}

pub fn print(a: MetricsArgs) -> anyhow::Result<()> {
    print!("{}", scrape(&a)?);
    Ok(())
}

/// Serves `/metrics` until killed. Scrapes closer together than a second share one
/// reading of squeue and sshare, so a busy scraper cannot load slurmctld.
pub fn serve(a: ServeArgs) -> anyhow::Result<()> {
    let server =
        tiny_http::Server::http(&a.listen).map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", a.listen))?;
    eprintln!("fairway serve: http://{}/metrics", a.listen);
    let mut cached: Option<(Instant, String)> = None;
    for request in server.incoming_requests() {
        let response = match request.url() {
            "/metrics" => {
                let fresh =
                    cached.as_ref().filter(|(at, _)| at.elapsed() < Duration::from_secs(1)).map(|(_, t)| t.clone());
                match fresh.map(Ok).unwrap_or_else(|| scrape(&a.metrics)) {
                    Ok(text) => {
                        cached = Some((Instant::now(), text.clone()));
                        response(200, metrics::CONTENT_TYPE, text)
                    }
                    Err(e) => response(500, "text/plain; charset=utf-8", format!("{e:#}\n")),
                }
            }
            "/" => response(200, "text/plain; charset=utf-8", "Fairway: /metrics\n".into()),
            _ => response(404, "text/plain; charset=utf-8", "not found\n".into()),
        };
        let _ = request.respond(response);
    }
    Ok(())
}

fn response(code: u16, content_type: &str, body: String) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
    let header = tiny_http::Header::from_bytes("Content-Type", content_type).expect("a valid header");
    tiny_http::Response::from_string(body).with_status_code(code).with_header(header)
}
