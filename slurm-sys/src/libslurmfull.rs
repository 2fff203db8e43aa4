//! Functions of Slurm's private `libslurmfull`, present in every Slurm daemon and client.
//!
//! Their declarations live in headers Slurm does not install (`src/common/log.h`,
//! `xmalloc.h`, `xstring.h`); `slurm_xlator.h` maps the in-tree names (`log_var`,
//! `xstrdup`) to these exported `slurm_*` names. The signatures have been stable since
//! well before 22.05. Functions that only `slurmctld` exports (`lock_slurmctld`,
//! `job_signal`...) are deliberately absent: referencing them would make a plugin
//! unloadable in `sshare` (see `fairway_ffi::sym`).

use std::os::raw::{c_char, c_int, c_void};

/// `log_level_t` values from `src/common/log.h`.
pub mod log_level {
    use std::os::raw::c_int;
    /// Fatal messages only.
    pub const FATAL: c_int = 1;
    /// `error()`.
    pub const ERROR: c_int = 2;
    /// `info()`.
    pub const INFO: c_int = 3;
    /// `verbose()`.
    pub const VERBOSE: c_int = 4;
    /// `debug()`.
    pub const DEBUG: c_int = 5;
    /// `debug2()`.
    pub const DEBUG2: c_int = 6;
    /// `debug3()`.
    pub const DEBUG3: c_int = 7;
}

extern "C" {
    /// `log_var(level, fmt, ...)`: what `info()`, `debug()`... expand to.
    pub fn slurm_log_var(level: c_int, fmt: *const c_char, ...);
    /// The highest level any log destination of this process wants.
    pub fn slurm_get_log_level() -> c_int;
    /// `xstrdup()`: a copy Slurm may `xfree`.
    pub fn slurm_xstrdup(s: *const c_char) -> *mut c_char;
    /// `xfree()`: takes the address of the pointer and nulls it.
    pub fn slurm_xfree(p: *mut *mut c_void);
    /// `xcalloc(count, size)` (`clear`: zeroed; `try_`: NULL instead of aborting), with
    /// the caller's file, line and function for Slurm's allocation errors.
    pub fn slurm_xcalloc(
        count: usize,
        size: usize,
        clear: bool,
        try_: bool,
        file: *const c_char,
        line: c_int,
        func: *const c_char,
    ) -> *mut c_void;
}

#[cfg(not(feature = "internal"))]
extern "C" {
    /// libslurmfull's parsed `slurm.conf` (declared in the internal `read_config.h`;
    /// its type is public). With the `internal` feature bindgen declares it instead.
    pub static mut slurm_conf: crate::slurm_conf_t;
}
