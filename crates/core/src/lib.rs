//! Fairway's policy, shared by the Slurm plugins, the simulator and the CLI.
//!
//! Nothing here knows about Slurm's C types: the plugins in `plugins/*` translate
//! Slurm structs into these types and back, so that every rule is written once and
//! the simulator runs exactly what `slurmctld` runs.
//!
//! # Brief overview
//! - [`check`]: `fairway.toml` against `slurm.conf`'s priority settings.
//! - [`config`]: `fairway.toml`, parsed into typed structs and validated with
//!   messages that name the file, line and key.
//! - [`toml_file`]: errors in Fairway's TOML files, with file, line, column and key.
//! - [`time`]: Slurm's time-limit syntax (`days-hours:minutes:seconds`).
//! - [`fairshare`]: fair-share arithmetic shared by the priority plugin and `sshare`.
//! - [`multifactor`]: `priority/multifactor`'s factors and weighted sum.
//! - [`status`]: what `priority/fairway` publishes after each pass (each job's terms).
//! - [`dashboard`]: `fairway serve`'s page (queue, fair-share tree, GPUs by topology,
//!   gangs) and its alerts.
//! - [`metrics`]: OpenMetrics for Prometheus, from squeue, sshare and that status.
//! - [`terms`]: Fairway's own priority terms (predicted work, deadline, starvation).
//! - [`priority`]: a job's priority under `priority/fairway` (and `site_factor/fairway`),
//!   one input in, one decision out: what the plugins and the simulator call.
//! - [`predict`]: run-time prediction: time limit, Tsafrir's last two with correction, and a
//!   learned upper-quantile model, with a trace replay that scores them.
//! - [`limits`]: `time=auto` limits from predicted run times, extended before they expire.
//! - [`preempt`]: `preempt/fairway`'s policy: `preempt/qos` semantics, victim order and
//!   choice, and grace times long enough for a declared checkpoint.
//! - [`state_file`]: state files written whole (temp, fsync, rename) and private (0600).
//! - [`submit`]: `job_submit/fairway`'s rules: directive, tiers, QoS, gangs, defaults.
//! - [`topology`]: a node's GPUs, NUMA nodes and NVLink lanes (Fairway's topology file),
//!   the gres.conf lines that describe them, and the choice of the best-connected GPUs.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod check;
pub mod config;
pub mod dashboard;
pub mod explain;
pub mod fairshare;
pub mod hostlist;
pub mod limits;
pub mod metrics;
pub mod multifactor;
pub mod predict;
pub mod preempt;
pub mod priority;
pub mod slurm_conf;
pub mod state_file;
pub mod status;
pub mod submit;
pub mod terms;
pub mod time;
pub mod toml_file;
pub mod topology;

pub use config::{Config, ConfigError};

/// Fairway's own version, logged by every plugin at load time.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
