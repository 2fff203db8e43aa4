//! `fairway`: the command-line side of Fairway.
//!
//! - `fairway check-config` validates `fairway.toml` exactly as the plugins will when
//!   `slurmctld` loads them.
//! - `fairway predict train|eval` trains the run-time model on a job trace, or scores it
//!   against the time-limit and last-two baselines on a chronological split.
//! - `fairway trace synth` writes a synthetic AI workload in `sacct -P` format.
//! - `fairway topo` shows a node's GPU topology (from a topology file or NVML) and
//!   writes its gres.conf lines.
//! - `fairway ckpt-done`, run inside a job chosen for preemption once its checkpoint is
//!   saved, requeues the job at once (`scontrol requeue`).
//! - `fairway sim` replays a trace or a synthetic workload on a simulated GPU cluster under
//!   FIFO, multifactor, Fairway and an oracle SJF, and compares them (`fairway-sim`).
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use fairway_core::check;
use fairway_core::config::{self, Config};

mod ckpt;
mod predict;
mod sim;
mod topo;

/// Fairway: fair, GPU-aware scheduling for Slurm.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate fairway.toml as the plugins will read it, and against slurm.conf's
    /// priority settings (exit 1 on configuration errors, 2 if fairway.toml is invalid).
    CheckConfig {
        /// The fairway.toml to check [default: beside slurm.conf].
        #[arg(long)]
        file: Option<PathBuf>,
        /// slurm.conf whose directory holds fairway.toml [default: $SLURM_CONF or /etc/slurm/slurm.conf].
        #[arg(long, env = "SLURM_CONF", default_value = "/etc/slurm/slurm.conf")]
        slurm_conf: PathBuf,
    },
    /// Train or evaluate the run-time predictor on a job trace.
    #[command(subcommand)]
    Predict(predict::PredictCommand),
    /// Job trace utilities.
    #[command(subcommand)]
    Trace(predict::TraceCommand),
    /// Show a node's GPU topology (GPU-GPU links, GPU-NUMA/cores) or its gres.conf lines.
    Topo(topo::TopoArgs),
    /// Inside a job chosen for preemption, once its checkpoint is saved: requeue the
    /// job now (scontrol requeue $SLURM_JOB_ID), or cancel it if it is not requeueable.
    CkptDone(ckpt::CkptDoneArgs),
    /// Simulate a GPU cluster on a job trace (or a synthetic workload) under FIFO,
    /// multifactor, Fairway and oracle SJF priorities, with EASY backfill, and compare them.
    Sim(Box<sim::SimArgs>),
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Predict(c) => predict::predict(c).map(|()| ExitCode::SUCCESS),
        Command::Trace(c) => predict::trace(c).map(|()| ExitCode::SUCCESS),
        Command::Topo(a) => topo::topo(a).map(|()| ExitCode::SUCCESS),
        Command::CkptDone(a) => ckpt::ckpt_done(a).map(|()| ExitCode::SUCCESS),
        Command::Sim(a) => sim::sim(*a).map(|()| ExitCode::SUCCESS),
        Command::CheckConfig { file, slurm_conf } => {
            let path = file.unwrap_or_else(|| config::path_beside(&slurm_conf));
            let config = match Config::load(&path) {
                Ok(Some(c)) => {
                    println!("{}: ok", path.display());
                    println!("{c:#?}");
                    c
                }
                Ok(None) => {
                    println!("{}: not found; the plugins use the defaults (Fairway's terms off)", path.display());
                    Config::default()
                }
                Err(e) => return Err(e).context("fairway.toml is invalid; slurmctld would refuse to start with it"),
            };
            // The topology files it names for slurmd's gpu/nvml, and the learned model.
            let dir = path.parent().unwrap_or(std::path::Path::new("."));
            let mut errors = 0;
            for f in
                check::check_gpu_topology(&config, dir).into_iter().chain(check::check_predictor_model(&config, dir))
            {
                println!("{}: {f}", path.display());
                errors += 1;
            }
            // Then against slurm.conf's priority settings, when it can be read.
            let Ok(text) = std::fs::read_to_string(&slurm_conf) else {
                println!("{}: not readable; priority settings not checked", slurm_conf.display());
                return Ok(if errors > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS });
            };
            let findings = check::check(&config, &check::SlurmPriority::parse(&text));
            for f in &findings {
                println!("{}: {f}", slurm_conf.display());
            }
            errors += findings.iter().filter(|f| f.severity == check::Severity::Error).count();
            Ok(if errors > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS })
        }
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("fairway: {e:#}");
            ExitCode::from(2)
        }
    }
}
