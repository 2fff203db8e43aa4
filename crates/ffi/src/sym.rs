//! Symbols only `slurmctld` exports, looked up at run time.
//!
//! Rust cdylibs bind every referenced function at `dlopen` time (BIND_NOW and GOT
//! calls), so a plugin that names `lock_slurmctld` directly fails to load in `sshare`,
//! which also loads the priority plugin. Looking such symbols up with
//! `dlsym(RTLD_DEFAULT, ...)` keeps the plugin loadable everywhere.

use std::ffi::CStr;
use std::os::raw::c_void;

/// The address of `name` in the running process, if any loaded object exports it.
pub fn lookup(name: &CStr) -> Option<*mut c_void> {
    // SAFETY: dlsym with RTLD_DEFAULT and a valid C string has no preconditions.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    (!p.is_null()).then_some(p)
}

/// Whether this process is `slurmctld` (it alone exports `slurmctld_config`).
pub fn in_slurmctld() -> bool {
    lookup(c"slurmctld_config").is_some()
}
