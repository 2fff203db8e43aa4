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
//! - [`plugin`]: the `plugin_name` / `plugin_type` / `plugin_version` symbols and one
//!   macro per plugin type ([`priority_plugin!`], [`job_submit_plugin!`]).
//!
//! The priority plugin's machinery (feature `internal`), lowest first: `ctld`
//! (slurmctld's symbols, resolved once), `locks` (slurmctld and assoc_mgr locks, the
//! job-list walk), `assoc` (the association tree: fair share, decay), `usage` (accrual
//! from running jobs), `reset` (`PriorityUsageResetPeriod`), `state` (the last-decay
//! file), and [`decay`] (the thread's loop over them).
//!
//! All hand-written `unsafe` in Fairway is in this crate and in `fairway-nvml` (the two NVML
//! calls `nvml-wrapper` lacks, kept apart so the `fairway` command builds without Slurm);
//! each block says why it holds. Which locks each exported entry point holds on entry, the lock order, the threads,
//! and who frees what: [`safety`] (`crates/ffi/SAFETY.md`).
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

#[cfg(feature = "internal")]
pub(crate) mod assoc;
#[cfg(feature = "internal")]
pub mod calibration;
#[cfg(feature = "client")]
pub mod client;
pub mod conf;
#[cfg(feature = "internal")]
pub(crate) mod ctld;
#[cfg(feature = "internal")]
pub mod decay;
#[cfg(feature = "internal")]
pub mod gpu;
pub mod guard;
pub mod job;
#[cfg(feature = "internal")]
pub(crate) mod knobs;
#[cfg(feature = "internal")]
pub mod limits;
#[cfg(feature = "internal")]
pub mod list;
#[cfg(feature = "internal")]
pub(crate) mod locks;
pub mod log;
#[cfg(feature = "internal")]
mod long_double;
#[cfg(feature = "internal")]
pub mod multifactor;
pub mod plugin;
pub mod publish;
#[cfg(feature = "internal")]
pub mod record;
#[cfg(feature = "internal")]
pub(crate) mod reset;
#[doc = include_str!("../SAFETY.md")]
pub mod safety {}
#[cfg(feature = "internal")]
pub mod sprio;
#[cfg(feature = "internal")]
pub(crate) mod state;
#[cfg(feature = "internal")]
pub mod status;
mod string;
pub mod sym;
#[cfg(feature = "internal")]
pub mod terms;
#[cfg(feature = "internal")]
pub(crate) mod usage;

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

/// Current Unix time in seconds (0 before 1970).
#[doc(hidden)]
pub fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// Stand-ins for the two libslurmfull logging functions, which unit tests (no Slurm
/// process to resolve them) would otherwise fail to link against; lines are kept for
/// the tests to read.
#[cfg(test)]
pub(crate) mod test_log {
    use std::ffi::CStr;
    use std::os::raw::{c_char, c_int};
    use std::sync::Mutex;

    /// Every line logged so far, with its Slurm level.
    pub(crate) static LINES: Mutex<Vec<(c_int, String)>> = Mutex::new(Vec::new());

    /// `slurm_log_var(level, "%s", line)`: the only form Fairway calls it with. Declared
    /// without the C varargs, which the x86_64 and aarch64 Linux ABIs pass as plain ones.
    #[no_mangle]
    extern "C" fn slurm_log_var(level: c_int, _fmt: *const c_char, line: *const c_char) {
        // SAFETY: `emit` passes a NUL-terminated line.
        let line = unsafe { CStr::from_ptr(line) }.to_string_lossy().into_owned();
        LINES.lock().unwrap_or_else(|e| e.into_inner()).push((level, line));
    }

    #[no_mangle]
    extern "C" fn slurm_get_log_level() -> c_int {
        slurm_sys::libslurmfull::log_level::DEBUG3
    }
}
