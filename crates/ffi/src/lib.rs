//! The one crate where Fairway meets Slurm's C ABI.
//!
//! Plugins under `plugins/` are thin shells: one macro call plus one trait impl. This
//! crate supplies what every shell needs and nothing policy-related (that lives in
//! `fairway-core`):
//!
//! - [`guard`]: every exported function runs inside it; a panic becomes an error
//!   return and a log line, never an unwind into Slurm.
//! - [`log`]: `tracing` events go to Slurm's own log (`slurmctld.log`), levels mapped,
//!   prefixed with the plugin type.
//! - [`SlurmString`]: strings allocated by Slurm's `xmalloc`, for anything Slurm frees.
//! - [`sym`]: run-time lookup of symbols only `slurmctld` exports, so the same plugin
//!   also loads in `sshare` and test programs.
//! - [`conf`]: where `fairway.toml` is (beside `slurm.conf`) and loading it.
//! - [`calibration`]: the learned model's online calibration in slurmctld, learned at
//!   job end and kept in `StateSaveLocation`.
//! - `nvml` (feature `nvml`): the two NVML calls `nvml-wrapper` lacks (MIG instance ids),
//!   for `fairway-topo-detect`.
//! - [`plugin`]: the `plugin_name` / `plugin_type` / `plugin_version` symbols and one
//!   macro per plugin type ([`priority_plugin!`], [`job_submit_plugin!`]).
//!
//! All hand-written `unsafe` in Fairway is in this crate; each block says why it holds.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

#[cfg(feature = "internal")]
pub mod calibration;
#[cfg(feature = "client")]
pub mod client;
pub mod conf;
// The priority plugin's machinery (22.05 and 24.11 ABIs).
#[cfg(feature = "internal")]
pub mod decay;
#[cfg(feature = "internal")]
pub mod gpu;
pub mod guard;
pub mod job;
#[cfg(feature = "internal")]
pub mod list;
pub mod log;
#[cfg(feature = "internal")]
pub mod multifactor;
#[cfg(feature = "nvml")]
pub mod nvml;
pub mod plugin;
#[cfg(feature = "internal")]
pub mod sprio;
mod string;
pub mod sym;
#[cfg(feature = "internal")]
pub mod terms;

pub use guard::guard;
pub use string::SlurmString;

#[doc(hidden)]
pub mod __private {
    //! Re-exports the plugin macros expand to; not an API.
    pub use libc;
    pub use slurm_sys;
    pub use tracing;
}

/// `SLURM_SUCCESS`.
pub const SLURM_SUCCESS: i32 = slurm_sys::SLURM_SUCCESS as i32;
/// `SLURM_ERROR`.
pub const SLURM_ERROR: i32 = slurm_sys::SLURM_ERROR;
