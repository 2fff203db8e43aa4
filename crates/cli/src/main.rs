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
//! - `fairway explain JOBID` says why a job waits and what its priority is made of.
//! - `fairway metrics` prints Fairway's OpenMetrics; `fairway serve` serves them, and a live
//!   page of the cluster with alerts, over HTTP.
//! - `fairway generate` writes its man pages and shell completions.
//! - `fairway sim` replays a trace or a synthetic workload on a simulated GPU cluster under
//!   FIFO, multifactor, Fairway and an oracle SJF, and compares them (`fairway-sim`).
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod check_config;
mod ckpt;
mod explain;
mod generate;
mod metrics;
mod predict;
mod serve;
mod sim;
mod slurm_cmd;
mod topo;

/// Fairway: fair, GPU-aware scheduling for Slurm.
#[derive(Parser)]
#[command(
    name = "fairway",
    version = env!("FAIRWAY_BUILD_INFO"),
    about,
    after_help = "Exit status: 0 success; 1 the configuration is invalid (check-config found errors); \
                  2 usage error; 3 any other failure (a file that cannot be read, a command that failed)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate fairway.toml as the plugins will read it, against slurm.conf, and check that
    /// the Fairway plugins slurm.conf names will load in the Slurm installed here
    /// (exit 1 on errors).
    CheckConfig(check_config::CheckConfigArgs),
    /// Why a job waits: Slurm's reason in plain words with what to do, its priority factor
    /// by factor (as sprio), its place in the queue, its fair share and starvation bound.
    Explain(explain::ExplainArgs),
    /// Print Fairway's metrics (OpenMetrics: queue and GPUs by partition, QOS and account,
    /// fair share, the priority pass, starving jobs, predictor coverage) once.
    Metrics(metrics::MetricsArgs),
    /// Serve a live page (queue, fair share, GPUs by topology, gangs, alerts, explain)
    /// pushed over a WebSocket, and the metrics at /metrics for Prometheus.
    Serve(serve::ServeArgs),
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
    /// Write the man pages or a shell's completion script.
    #[command(subcommand)]
    Generate(generate::GenerateCommand),
}

/// An argument the command itself found wrong (clap finds the rest): exit 2, as clap's.
#[derive(Debug)]
pub struct Usage(pub String);

/// Context marking a configuration the command found invalid (fairway.toml, a topology
/// file, slurm.conf's settings): exit 1.
#[derive(Debug)]
pub struct Invalid(pub &'static str);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::CheckConfig(a) => check_config::check_config(a),
        Command::Explain(a) => explain::explain(a),
        Command::Metrics(a) => metrics::print(a),
        Command::Serve(a) => serve::serve(a),
        Command::Predict(c) => predict::predict(c),
        Command::Trace(c) => predict::trace(c),
        Command::Topo(a) => topo::topo(a),
        Command::CkptDone(a) => ckpt::ckpt_done(a),
        Command::Sim(a) => sim::sim(*a),
        Command::Generate(c) => generate::generate(c),
    }
}

fn main() -> ExitCode {
    // clap itself exits 2 on a usage error.
    let Err(e) = run(Cli::parse()) else { return ExitCode::SUCCESS };
    eprintln!("fairway: {e:#}");
    if e.downcast_ref::<Usage>().is_some() {
        ExitCode::from(2)
    } else if e.downcast_ref::<Invalid>().is_some() {
        ExitCode::from(1)
    } else {
        ExitCode::from(3)
    }
}
