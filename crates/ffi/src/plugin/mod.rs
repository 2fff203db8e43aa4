//! Plugin symbols and one macro per plugin type.
//!
//! A plugin crate is one macro call plus one trait impl:
//!
//! ```ignore
//! fairway_ffi::job_submit_plugin!(name: "Fairway job_submit plugin", type: "job_submit/fairway", impl: Rules);
//! ```
//!
//! The macros emit `plugin_name`, `plugin_type`, `plugin_version` (from the headers'
//! `SLURM_VERSION_NUMBER`, never typed in), `init`, `fini` and the `<type>_p_<op>`
//! functions of the installed Slurm's ABI, each body inside [`crate::guard`].
//!
//! This module holds what every type shares; each plugin type has its file, as Slurm's
//! `src/interfaces/<type>.c`: its trait, its macros and what they call. Everything is
//! re-exported here, where plugins and the macros name it (`fairway_ffi::plugin::Priority`).

use std::sync::RwLock;

use fairway_core::Config;

mod gpu;
mod job_submit;
#[cfg(feature = "internal")]
mod preempt;
#[cfg(feature = "internal")]
mod priority;
#[cfg(feature = "internal")]
mod site_factor;

#[doc(hidden)]
pub use crate::unix_now;
pub use gpu::Gpu;
#[doc(hidden)]
pub use job_submit::run_job_submit;
pub use job_submit::{JobSubmit, Rejection, Verdict};
#[cfg(feature = "internal")]
pub use preempt::Preempt;
#[cfg(feature = "internal")]
#[doc(hidden)]
pub use priority::{
    decay_running, fairway_calc_fs_factor_ld, priority_fini, priority_init, recompute_with, start_decay, DECAY,
};
#[cfg(feature = "internal")]
pub use priority::{Priority, PriorityOf};
#[cfg(feature = "internal")]
pub use site_factor::SiteFactor;

/// Copies `s` into a NUL-terminated byte array, at compile time. Slurm reads
/// `plugin_name` and `plugin_type` as `char[]`, so they must be arrays, not pointers.
pub const fn c_array<const N: usize>(s: &str) -> [u8; N] {
    let b = s.as_bytes();
    assert!(b.len() + 1 == N, "array must be the string plus its NUL");
    let mut out = [0u8; N];
    let mut i = 0;
    while i < b.len() {
        assert!(b[i] != 0, "plugin strings cannot contain NUL");
        out[i] = b[i];
        i += 1;
    }
    out
}

/// The plugin instance behind the exported functions, set by `init`, cleared by `fini`.
pub struct Slot<P>(RwLock<Option<P>>);

impl<P> Slot<P> {
    /// An empty slot.
    pub const fn new() -> Self {
        Self(RwLock::new(None))
    }

    /// Installs the instance made by `init`.
    pub fn set(&self, p: P) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Some(p);
    }

    /// Drops the instance (from `fini`).
    pub fn clear(&self) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Runs `f` on the instance, or returns `None` if `init` has not succeeded.
    pub fn with<R>(&self, f: impl FnOnce(&P) -> R) -> Option<R> {
        // A poisoned lock only means an earlier callback panicked (and was guarded);
        // the instance itself is still consistent, so keep serving.
        let g = self.0.read().unwrap_or_else(|e| e.into_inner());
        g.as_ref().map(f)
    }
}

impl<P> Default for Slot<P> {
    fn default() -> Self {
        Self::new()
    }
}

/// What `init` logs: Fairway and Slurm versions, and the host process. At info level
/// in daemons; at debug level in clients (`sshare`), whose stderr belongs to the user.
pub fn announce() {
    let process = std::fs::read_to_string("/proc/self/comm").unwrap_or_default();
    let line = format!(
        "Fairway {} loaded in {}, built for Slurm {}",
        fairway_core::VERSION,
        process.trim(),
        slurm_sys::SLURM_VERSION
    );
    if crate::sym::in_slurmctld() {
        tracing::info!("{line}");
    } else {
        tracing::debug!("{line}");
    }
}

/// Loads `fairway.toml` and builds the plugin, or logs why not.
pub fn init_with<P>(slot: &Slot<P>, make: impl FnOnce(Config) -> Result<P, String>) -> i32 {
    crate::conf::remember_paths();
    let config = match crate::conf::load() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("{e}");
            tracing::error!("fix fairway.toml (check it with `fairway check-config`) and restart");
            return crate::SLURM_ERROR;
        }
    };
    match make(config) {
        Ok(p) => {
            slot.set(p);
            crate::SLURM_SUCCESS
        }
        Err(e) => {
            tracing::error!("init failed: {e}");
            crate::SLURM_ERROR
        }
    }
}

/// Test-only fault injection: a job comment containing `fairway-test:panic` panics
/// inside the callback, to prove the guard holds in a real daemon.
#[doc(hidden)]
pub fn inject_fault(comment: Option<&str>) {
    inject_fault_marked(comment, "fairway-test:panic");
}

/// [`inject_fault`] for another `marker` (`fairway-test:decay-panic` panics inside the
/// decay thread's pass, to prove the thread outlives it).
#[doc(hidden)]
pub fn inject_fault_marked(comment: Option<&str>, marker: &str) {
    if cfg!(feature = "fault-injection") && comment.is_some_and(|c| c.contains(marker)) {
        panic!("fault injected by job comment");
    }
}

/// Emits `plugin_name`, `plugin_type` and `plugin_version`.
#[macro_export]
macro_rules! plugin_symbols {
    (name: $name:literal, type: $type:literal) => {
        /// Required by Slurm's plugin loader.
        #[no_mangle]
        #[used]
        #[allow(non_upper_case_globals)]
        pub static plugin_name: [u8; $name.len() + 1] = $crate::plugin::c_array($name);
        /// Required by Slurm's plugin loader; also names the file (`type_name.so`).
        #[no_mangle]
        #[used]
        #[allow(non_upper_case_globals)]
        pub static plugin_type: [u8; $type.len() + 1] = $crate::plugin::c_array($type);
        /// Must equal the loading Slurm's version on major.minor.micro.
        #[no_mangle]
        #[used]
        #[allow(non_upper_case_globals)]
        pub static plugin_version: u32 = $crate::__private::slurm_sys::SLURM_VERSION_NUMBER;
    };
}

/// `init` and `fini` of plugins whose trait has `fn init(Config) -> Result<Self, String>`,
/// plus the static holding the instance.
#[doc(hidden)]
#[macro_export]
macro_rules! __plugin_lifecycle {
    ($type:literal, $ty:ty, $tr:path) => {
        static FAIRWAY_PLUGIN: $crate::plugin::Slot<$ty> = $crate::plugin::Slot::new();

        /// Called by Slurm after loading the plugin.
        #[no_mangle]
        pub extern "C" fn init() -> ::std::os::raw::c_int {
            $crate::guard("init", $crate::SLURM_ERROR, || {
                $crate::log::init($type);
                $crate::plugin::announce();
                $crate::plugin::init_with(&FAIRWAY_PLUGIN, <$ty as $tr>::init)
            })
        }

        /// Called by Slurm before unloading the plugin.
        #[no_mangle]
        pub extern "C" fn fini() -> ::std::os::raw::c_int {
            $crate::guard("fini", $crate::SLURM_ERROR, || {
                FAIRWAY_PLUGIN.clear();
                $crate::conf::forget_paths();
                $crate::SLURM_SUCCESS
            })
        }
    };
}

#[cfg(test)]
mod tests {
    use super::{c_array, inject_fault, Slot};

    #[test]
    fn c_array_appends_one_nul() {
        // Usable in a const, as plugin_symbols! needs.
        const T: [u8; 4] = c_array("abc");
        assert_eq!(T, *b"abc\0");
        assert_eq!(c_array::<4>("abc"), *b"abc\0");
        assert_eq!(c_array::<1>(""), [0]);
        let t: [u8; 17] = c_array("priority/fairway");
        assert_eq!(std::ffi::CStr::from_bytes_with_nul(&t).unwrap().to_str().unwrap(), "priority/fairway");
    }

    #[test]
    #[should_panic(expected = "array must be the string plus its NUL")]
    fn c_array_refuses_a_wrong_length() {
        let _ = c_array::<3>("abc");
    }

    #[test]
    #[should_panic(expected = "plugin strings cannot contain NUL")]
    fn c_array_refuses_an_inner_nul() {
        let _ = c_array::<4>("a\0c");
    }

    #[test]
    fn slot_set_with_clear() {
        let slot: Slot<String> = Slot::new();
        assert_eq!(slot.with(|s| s.len()), None, "empty before init");
        slot.set("one".into());
        assert_eq!(slot.with(|s| s.clone()).as_deref(), Some("one"));
        slot.set("two".into());
        assert_eq!(slot.with(|s| s.clone()).as_deref(), Some("two"), "set replaces");
        slot.clear();
        assert_eq!(slot.with(|s| s.len()), None, "empty after fini");
        assert_eq!(Slot::<u8>::default().with(|&b| b), None);
    }

    #[test]
    fn slot_keeps_serving_after_a_panic_poisoned_it() {
        let slot: Slot<u32> = Slot::new();
        slot.set(5);
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _held = slot.0.write().unwrap();
            panic!("poison");
        }));
        assert!(slot.0.is_poisoned());
        assert_eq!(slot.with(|&v| v), Some(5));
        slot.set(6);
        assert_eq!(slot.with(|&v| v), Some(6));
        slot.clear();
        assert_eq!(slot.with(|&v| v), None);
    }

    #[test]
    fn slot_is_shared_across_threads() {
        static SLOT: Slot<u64> = Slot::new();
        SLOT.set(40);
        let sum: u64 = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4).map(|_| s.spawn(|| SLOT.with(|&v| v + 1).unwrap())).collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(sum, 4 * 41);
    }

    #[test]
    fn fault_injection_only_in_test_builds_of_plugins() {
        inject_fault(None);
        inject_fault(Some("an ordinary comment"));
        let r = std::panic::catch_unwind(|| inject_fault(Some("x fairway-test:panic y")));
        assert_eq!(r.is_err(), cfg!(feature = "fault-injection"));
    }
}
