//! Raw bindings to the Slurm installed on this machine.
//!
//! Everything in [`bindings`] is generated at build time by bindgen: from the public
//! headers (`slurm.h`, `slurmdb.h`, `slurm_errno.h`) and, with the `internal` feature,
//! from a configured source tree of the same Slurm version (`job_record_t`, locks,
//! `assoc_mgr`). No struct layout is written by hand. [`libslurmfull`] declares the few
//! function signatures of Slurm's private library that every daemon and client exports
//! (logging, `xmalloc`) but no installed header declares.
//!
//! Version differences are visible as cfgs (`slurm_ge_23_02`, `slurm_ge_24_05`, ...), and
//! [`SLURM_VERSION_NUMBER`] is the version the headers describe: Slurm loads a plugin
//! only when its `plugin_version` equals this number on major.minor.micro.
#![allow(non_upper_case_globals, non_camel_case_types, non_snake_case, missing_docs)]
#![allow(clippy::all, rustdoc::all)]

mod bindings {
    include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
}
pub use bindings::*;

pub mod libslurmfull;
#[cfg(not(feature = "internal"))]
pub use libslurmfull::slurm_conf;

/// The installed Slurm's version as text, e.g. `22.05.8`.
pub const SLURM_VERSION: &str = env!("SLURM_SYS_VERSION");
