//! `fairway`: the command-line side of Fairway.
//!
//! Today: `fairway check-config`, which validates `fairway.toml` exactly as the plugins
//! will when `slurmctld` loads them. Predictor, simulator and topology subcommands
//! arrive with their issues.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use fairway_core::config::{self, Config};

/// Fairway: fair, GPU-aware scheduling for Slurm.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate fairway.toml as the plugins will read it.
    CheckConfig {
        /// The fairway.toml to check [default: beside slurm.conf].
        #[arg(long)]
        file: Option<PathBuf>,
        /// slurm.conf whose directory holds fairway.toml [default: $SLURM_CONF or /etc/slurm/slurm.conf].
        #[arg(long, env = "SLURM_CONF", default_value = "/etc/slurm/slurm.conf")]
        slurm_conf: PathBuf,
    },
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::CheckConfig { file, slurm_conf } => {
            let path = file.unwrap_or_else(|| config::path_beside(&slurm_conf));
            match Config::load(&path) {
                Ok(Some(c)) => {
                    println!("{}: ok", path.display());
                    println!("{c:#?}");
                    Ok(ExitCode::SUCCESS)
                }
                Ok(None) => {
                    println!("{}: not found; the plugins use the defaults (Fairway's terms off)", path.display());
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => Err(e).context("fairway.toml is invalid; slurmctld would refuse to start with it"),
            }
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
