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

use std::sync::RwLock;

use fairway_core::Config;

use crate::job::JobDesc;
#[cfg(feature = "internal")]
use crate::job::JobRecord;
use fairway_core::submit::JobRequest;

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
    if cfg!(feature = "fault-injection") && comment.is_some_and(|c| c.contains("fairway-test:panic")) {
        panic!("fault injected by job comment");
    }
}

/// A submission refused, with the code Slurm returns and the message the user sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// An `ESLURM_*` code: `sbatch` prints its text after the message.
    pub rc: i32,
    /// One or more lines for the user, e.g. what to ask for instead.
    pub message: String,
}

impl From<fairway_core::submit::Rejection> for Rejection {
    /// The rules' refusal with the Slurm error whose text `sbatch` prints after it: the
    /// one place a kind of refusal becomes a Slurm code.
    fn from(r: fairway_core::submit::Rejection) -> Self {
        use fairway_core::submit::RejectKind as Kind;
        use slurm_sys as sys;
        let rc = match r.kind {
            Kind::Directive => libc::EINVAL, // "Invalid argument"
            Kind::Gres => sys::ESLURM_INVALID_GRES as i32,
            Kind::Tasks => sys::ESLURM_BAD_TASK_COUNT as i32,
            Kind::Qos => sys::ESLURM_INVALID_QOS as i32,
            Kind::Unchecked => sys::ESLURM_ACCESS_DENIED as i32,
            // A kind this build does not know yet: refuse, with the rule's own words.
            _ => sys::ESLURM_ACCESS_DENIED as i32,
        };
        Self { rc, message: r.message }
    }
}

/// What a `job_submit` rule decided: accepted (with an optional note for the user) or
/// rejected.
pub type Verdict = Result<Option<String>, Rejection>;

/// The operations of a `job_submit` plugin.
pub trait JobSubmit: Sized + Send + Sync + 'static {
    /// Builds the plugin from `fairway.toml` when `slurmctld` loads it.
    fn init(config: Config) -> Result<Self, String>;

    /// Called for every new job (`sbatch`, `srun`, `salloc`) before Slurm's own
    /// checks; may change `job`. Runs concurrently from 23.02 on.
    fn submit(&self, job: &mut JobDesc<'_>, submit_uid: u32) -> Verdict;

    /// Called for `scontrol update job`; the same rules must hold. `current` is the job
    /// before the update, when this build can read it.
    fn modify(&self, job: &mut JobDesc<'_>, current: Option<JobRequest>, submit_uid: u32) -> Verdict;
}

/// Runs a `job_submit`/`job_modify` verdict through to Slurm's return code and message.
///
/// # Safety
/// `desc` must be NULL or valid for the call; `err_msg` NULL or a Slurm `char **`.
#[doc(hidden)]
pub unsafe fn run_job_submit<P: JobSubmit>(
    slot: &Slot<P>,
    desc: *mut slurm_sys::job_desc_msg_t,
    submit_uid: u32,
    err_msg: *mut *mut std::os::raw::c_char,
    modify: Option<*mut std::os::raw::c_void>,
) -> i32 {
    // SAFETY: per the contract.
    let Some(mut job) = (unsafe { JobDesc::from_ptr(desc) }) else {
        return crate::SLURM_ERROR;
    };
    inject_fault(job.comment().as_deref());
    let verdict = slot.with(|p| match modify {
        // SAFETY: per the contract, the job record Slurm passed with this update.
        Some(record) => p.modify(&mut job, unsafe { crate::job::current_request(record) }, submit_uid),
        None => p.submit(&mut job, submit_uid),
    });
    match verdict {
        None => crate::SLURM_SUCCESS, // not initialised: never block submissions on our account
        Some(Ok(note)) => {
            if let Some(note) = note {
                // SAFETY: per the contract.
                unsafe { crate::string::replace_slurm_str(err_msg, &note) };
            }
            crate::SLURM_SUCCESS
        }
        Some(Err(r)) => {
            // SAFETY: per the contract.
            unsafe { crate::string::replace_slurm_str(err_msg, &r.message) };
            r.rc
        }
    }
}

/// A job's priority at a given time, as [`Priority::priority`] gives it.
#[cfg(feature = "internal")]
pub type PriorityOf<'a> = dyn FnMut(&mut JobRecord<'_>, i64) -> u32 + 'a;

/// The operations of a priority plugin (`PriorityType=priority/...`).
///
/// The FFI layer runs the decay thread (usage decay, fair share, periodic
/// recalculation) itself and calls [`Priority::priority`] for each pending job.
#[cfg(feature = "internal")]
pub trait Priority: Sized + Send + Sync + 'static {
    /// Builds the plugin. `in_slurmctld` is false in clients such as `sshare`, which
    /// load the plugin only to call [`Priority::calc_fs_factor`].
    fn init(config: Config, in_slurmctld: bool) -> Result<Self, String>;

    /// The job's priority at `now` (job write lock held). Never 0 for a runnable job.
    fn priority(&self, job: &mut JobRecord<'_>, now: i64) -> u32;

    /// Runs `walk` with an evaluator of [`Priority::priority`] for a whole pass over the
    /// job list (job write lock held): override to take per-pass state once, not per job.
    fn priority_pass(&self, walk: &mut dyn FnMut(&mut PriorityOf<'_>)) {
        walk(&mut |job, now| self.priority(job, now))
    }

    /// `scontrol reconfigure`; `assoc_clear` means association usage was reset.
    fn reconfig(&self, _assoc_clear: bool) {}

    /// Classic fair-share factor from effective usage and normalised shares.
    fn calc_fs_factor(&self, usage_efctv: f64, shares_norm: f64) -> f64;

    /// A job ended (job write lock held): learn from it; keep it quick.
    fn job_end(&self, _job: &mut JobRecord<'_>) {}

    /// After each decay pass, with no locks held: persist state.
    fn after_decay_pass(&self) {}

    /// Before the plugin is unloaded.
    fn fini(&self) {}
}

/// The operations of a site factor plugin (`PrioritySiteFactorPlugin=site_factor/...`),
/// which `priority/multifactor` consults for every job.
#[cfg(feature = "internal")]
pub trait SiteFactor: Sized + Send + Sync + 'static {
    /// Builds the plugin from `fairway.toml` (slurmctld only).
    fn init(config: Config) -> Result<Self, String>;

    /// Sets the job's site factor (job write lock held), before its priority is
    /// computed; budget: well under Slurm's 50 ms warning.
    fn set(&self, job: &mut JobRecord<'_>, now: i64);

    /// Every `PriorityCalcPeriod`, before priorities are recomputed (job write lock held).
    fn update(&self, now: i64);

    /// `scontrol reconfigure` (22.05 to 23.11).
    fn reconfig(&self) {}
}

/// The operations of a preempt plugin (`PreemptType=preempt/...`), called by slurmctld's
/// scheduler with the job (and QoS) locks held. `preemptable` runs for every pair of
/// jobs a scheduling pass considers: keep it cheap and side-effect free.
#[cfg(feature = "internal")]
pub trait Preempt: Sized + Send + Sync + 'static {
    /// Builds the plugin from `fairway.toml` (slurmctld only).
    fn init(config: Config) -> Result<Self, String>;

    /// Whether `preemptor` may preempt `preemptee`.
    fn preemptable(&self, preemptee: &JobRecord<'_>, preemptor: &JobRecord<'_>, now: i64) -> bool;

    /// Whether preemption is on at all (`PreemptMode` is not OFF).
    fn enabled(&self) -> bool;

    /// `PREEMPT_MODE_*` for this victim.
    fn mode(&self, job: &JobRecord<'_>) -> u16;

    /// Candidate order: the lowest value is preempted first.
    fn prio(&self, job: &JobRecord<'_>, now: i64) -> u32;

    /// Seconds between the checkpoint signal (or SIGTERM) and the stop, for this victim.
    /// Called once when the job is chosen.
    fn grace_time(&self, job: &JobRecord<'_>) -> u32;
}

/// The operations of a gpu plugin (slurmd and slurmstepd).
pub trait Gpu: Sized + Send + Sync + 'static {
    /// Builds the plugin from `fairway.toml`.
    fn init(config: Config) -> Result<Self, String>;

    /// This node's GPUs, in NVML (PCI bus id) order, or none to leave them to gres.conf.
    fn system_gpus(&self) -> Vec<fairway_core::topology::GresGpu>;
}

/// The decay thread of the loaded priority plugin, if running.
#[cfg(feature = "internal")]
#[doc(hidden)]
pub static DECAY: std::sync::Mutex<Option<crate::decay::DecayThread>> = std::sync::Mutex::new(None);

/// Current Unix time.
#[doc(hidden)]
pub fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
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
                $crate::SLURM_SUCCESS
            })
        }
    };
}

/// Exports a `job_submit` plugin backed by a [`JobSubmit`] impl.
#[macro_export]
macro_rules! job_submit_plugin {
    (name: $name:literal, type: $type:literal, impl: $ty:ty) => {
        $crate::plugin_symbols!(name: $name, type: $type);

        $crate::__plugin_lifecycle!($type, $ty, $crate::plugin::JobSubmit);

        /// `job_submit_g_submit()`.
        #[no_mangle]
        pub unsafe extern "C" fn job_submit(
            job_desc: *mut $crate::__private::slurm_sys::job_desc_msg_t,
            submit_uid: u32,
            err_msg: *mut *mut ::std::os::raw::c_char,
        ) -> ::std::os::raw::c_int {
            $crate::guard("job_submit", $crate::SLURM_ERROR, || {
                // SAFETY: Slurm passes a valid job_desc and err_msg for this call.
                unsafe { $crate::plugin::run_job_submit(&FAIRWAY_PLUGIN, job_desc, submit_uid, err_msg, None) }
            })
        }

        $crate::__job_modify!($ty);
    };
}

/// `job_modify` of Slurm 22.05 (no err_msg). Defined per version here because a cfg
/// inside an exported macro would be evaluated in the plugin crate.
#[cfg(not(slurm_ge_23_02))]
#[doc(hidden)]
#[macro_export]
macro_rules! __job_modify {
    ($ty:ty) => {
        /// `job_submit_g_modify()` (22.05: no err_msg).
        #[no_mangle]
        pub unsafe extern "C" fn job_modify(
            job_desc: *mut $crate::__private::slurm_sys::job_desc_msg_t,
            job_ptr: *mut ::std::os::raw::c_void,
            submit_uid: u32,
        ) -> ::std::os::raw::c_int {
            $crate::guard("job_modify", $crate::SLURM_ERROR, || {
                // SAFETY: Slurm passes a valid job_desc and job record for this call.
                unsafe {
                    $crate::plugin::run_job_submit(
                        &FAIRWAY_PLUGIN,
                        job_desc,
                        submit_uid,
                        ::std::ptr::null_mut(),
                        Some(job_ptr),
                    )
                }
            })
        }
    };
}

/// `job_modify` of Slurm 23.02 and later (with err_msg).
#[cfg(slurm_ge_23_02)]
#[doc(hidden)]
#[macro_export]
macro_rules! __job_modify {
    ($ty:ty) => {
        /// `job_submit_g_modify()` (23.02+: with err_msg).
        #[no_mangle]
        pub unsafe extern "C" fn job_modify(
            job_desc: *mut $crate::__private::slurm_sys::job_desc_msg_t,
            job_ptr: *mut ::std::os::raw::c_void,
            submit_uid: u32,
            err_msg: *mut *mut ::std::os::raw::c_char,
        ) -> ::std::os::raw::c_int {
            $crate::guard("job_modify", $crate::SLURM_ERROR, || {
                // SAFETY: Slurm passes a valid job_desc, job record and err_msg for this call.
                unsafe { $crate::plugin::run_job_submit(&FAIRWAY_PLUGIN, job_desc, submit_uid, err_msg, Some(job_ptr)) }
            })
        }
    };
}

#[cfg(feature = "internal")]
extern "C" {
    /// The C shim (csrc/long_double.c) that receives `long double`s.
    #[doc(hidden)]
    pub fn fairway_calc_fs_factor_ld();
}

/// Exports a priority plugin backed by a [`Priority`] impl: the entry points every
/// supported Slurm version shares, plus [`__priority_lifecycle!`] and
/// [`__priority_factors!`] for the ones that differ (reference notes, §2.5).
#[cfg(feature = "internal")]
#[macro_export]
macro_rules! priority_plugin {
    (name: $name:literal, type: $type:literal, impl: $ty:ty) => {
        $crate::plugin_symbols!(name: $name, type: $type);

        static FAIRWAY_PLUGIN: $crate::plugin::Slot<$ty> = $crate::plugin::Slot::new();

        $crate::__priority_lifecycle!($type, $ty);

        /// Called by Slurm before unloading the plugin.
        #[no_mangle]
        pub extern "C" fn fini() -> ::std::os::raw::c_int {
            $crate::guard("fini", $crate::SLURM_ERROR, || $crate::plugin::priority_fini::<$ty>(&FAIRWAY_PLUGIN))
        }

        $crate::__priority_factors!();

        fn fairway_recompute(walk: &mut dyn FnMut(&mut $crate::decay::Evaluate<'_>)) {
            $crate::plugin::recompute_with(&FAIRWAY_PLUGIN, walk)
        }

        fn fairway_after_pass() {
            FAIRWAY_PLUGIN.with(|p| <$ty as $crate::plugin::Priority>::after_decay_pass(p));
        }

        /// `priority_g_set()`: job write lock held.
        #[no_mangle]
        pub unsafe extern "C" fn priority_p_set(
            last_prio: u32,
            job_ptr: *mut $crate::__private::slurm_sys::job_record_t,
        ) -> u32 {
            // A panic leaves the job runnable at the lowest priority rather than held.
            $crate::guard("priority_p_set", 1, || {
                // SAFETY: Slurm holds the job write lock and passes a valid job.
                let Some(mut job) = (unsafe { $crate::job::JobRecord::from_ptr(job_ptr) }) else { return 1 };
                let _ = last_prio; // multifactor-style plugins ignore submit order
                if $crate::sym::in_slurmctld() {
                    $crate::multifactor::site_factor_set(&mut job);
                }
                FAIRWAY_PLUGIN
                    .with(|p| <$ty as $crate::plugin::Priority>::priority(p, &mut job, $crate::plugin::unix_now()))
                    .unwrap_or(1)
            })
        }

        /// `priority_g_reconfig()`.
        #[no_mangle]
        pub extern "C" fn priority_p_reconfig(assoc_clear: bool) {
            $crate::guard("priority_p_reconfig", (), || {
                FAIRWAY_PLUGIN.with(|p| <$ty as $crate::plugin::Priority>::reconfig(p, assoc_clear));
                if let Some(d) = $crate::plugin::DECAY.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
                    d.reconfig(assoc_clear);
                    $crate::multifactor::site_factor_reconfig();
                }
            })
        }

        /// `priority_g_set_assoc_usage()`: normalised and effective usage of one
        /// association (assoc lock held by the caller).
        #[no_mangle]
        pub unsafe extern "C" fn priority_p_set_assoc_usage(assoc: *mut $crate::__private::slurm_sys::slurmdb_assoc_rec_t) {
            // SAFETY: slurmctld calls this with a live association under its assoc lock.
            $crate::guard("priority_p_set_assoc_usage", (), || unsafe { $crate::decay::set_assoc_usage(assoc) })
        }

        /// Called from C (csrc/long_double.c) with the `long double`s converted.
        #[no_mangle]
        pub extern "C" fn fairway_calc_fs_factor(usage_efctv: f64, shares_norm: f64) -> f64 {
            $crate::guard("priority_p_calc_fs_factor", 0.0, || {
                FAIRWAY_PLUGIN
                    .with(|p| <$ty as $crate::plugin::Priority>::calc_fs_factor(p, usage_efctv, shares_norm))
                    .unwrap_or(0.0)
            })
        }

        /// `priority_g_calc_fs_factor(long double, long double)`: a jump to the C shim,
        /// which converts the x87 arguments; stable Rust cannot declare `long double`.
        #[cfg(target_arch = "x86_64")]
        #[unsafe(naked)]
        #[no_mangle]
        pub extern "C" fn priority_p_calc_fs_factor() {
            ::core::arch::naked_asm!("jmp {}", sym $crate::plugin::fairway_calc_fs_factor_ld)
        }

        /// `priority_g_job_end()`: job write lock held.
        #[no_mangle]
        pub unsafe extern "C" fn priority_p_job_end(job_ptr: *mut $crate::__private::slurm_sys::job_record_t) {
            $crate::guard("priority_p_job_end", (), || {
                // SAFETY: Slurm holds the job write lock and passes a valid job.
                if let Some(mut job) = unsafe { $crate::job::JobRecord::from_ptr(job_ptr) } {
                    if let Some(d) = $crate::plugin::DECAY.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
                        d.job_end(&mut job);
                    }
                    FAIRWAY_PLUGIN.with(|p| <$ty as $crate::plugin::Priority>::job_end(p, &mut job));
                }
            })
        }
    };
}

/// `init` of Slurm 22.05: the decay thread starts in `init`.
#[cfg(all(feature = "internal", not(slurm_ge_23_02)))]
#[doc(hidden)]
#[macro_export]
macro_rules! __priority_lifecycle {
    ($type:literal, $ty:ty) => {
        /// Called by Slurm after loading the plugin (slurmctld, and sshare).
        #[no_mangle]
        pub extern "C" fn init() -> ::std::os::raw::c_int {
            $crate::guard("init", $crate::SLURM_ERROR, || {
                let rc = $crate::plugin::priority_init::<$ty>(&FAIRWAY_PLUGIN, $type);
                if rc == $crate::SLURM_SUCCESS && $crate::sym::in_slurmctld() {
                    $crate::plugin::start_decay(fairway_recompute, fairway_after_pass);
                }
                rc
            })
        }
    };
}

/// `init`, `priority_p_thread_start` and `priority_p_recover` of Slurm 23.02+
/// (24.05 moved the decay thread's start from `init` to `priority_p_thread_start`,
/// once slurmctld has recovered its state).
#[cfg(all(feature = "internal", slurm_ge_23_02))]
#[doc(hidden)]
#[macro_export]
macro_rules! __priority_lifecycle {
    ($type:literal, $ty:ty) => {
        /// Called by Slurm after loading the plugin (slurmctld, and sshare).
        #[no_mangle]
        pub extern "C" fn init() -> ::std::os::raw::c_int {
            $crate::guard("init", $crate::SLURM_ERROR, || $crate::plugin::priority_init::<$ty>(&FAIRWAY_PLUGIN, $type))
        }

        /// `priority_g_thread_start()`: slurmctld has recovered its jobs.
        #[no_mangle]
        pub extern "C" fn priority_p_thread_start() {
            $crate::guard("priority_p_thread_start", (), || {
                if $crate::sym::in_slurmctld() {
                    $crate::plugin::start_decay(fairway_recompute, fairway_after_pass);
                }
            })
        }

        /// `priority_g_recover()`: without slurmdbd there is no decay thread, so every
        /// recovered job's priority (and sprio's factors) is computed here, as
        /// multifactor does. The boost is not used (multifactor ignores it too).
        #[no_mangle]
        pub extern "C" fn priority_p_recover(_prio_boost: u32) -> u32 {
            $crate::guard("priority_p_recover", 0, || {
                $crate::decay::recover(fairway_recompute);
                0
            })
        }
    };
}

/// `priority_p_get_priority_factors_list` of Slurm 22.05 (request filters, no locks held).
#[cfg(all(feature = "internal", not(slurm_ge_23_02)))]
#[doc(hidden)]
#[macro_export]
macro_rules! __priority_factors {
    () => {
        /// `priority_g_get_priority_factors_list()`: what `sprio` shows.
        #[no_mangle]
        pub unsafe extern "C" fn priority_p_get_priority_factors_list(
            req_msg: *mut $crate::__private::slurm_sys::priority_factors_request_msg_t,
            uid: u32,
        ) -> $crate::list::SlurmList {
            $crate::guard("priority_p_get_priority_factors_list", ::std::ptr::null_mut(), || {
                // SAFETY: slurmctld's RPC handler passes a valid request, holding no locks.
                unsafe { $crate::sprio::factors_list(req_msg, uid) }
            })
        }
    };
}

/// 23.02 and 23.11 pass a request but fill 23.02's split factors: not built, as no
/// Slurm of those versions is at hand to verify it against.
#[cfg(all(feature = "internal", slurm_ge_23_02, not(slurm_ge_24_05)))]
#[doc(hidden)]
#[macro_export]
macro_rules! __priority_factors {
    () => {
        compile_error!(
            "priority/fairway supports the priority ABIs of Slurm 22.05 and 24.05+ (verified on 22.05 and 24.11)"
        );
    };
}

/// `priority_p_get_priority_factors_list` of Slurm 24.05+ (uid only; locks held).
#[cfg(all(feature = "internal", slurm_ge_24_05))]
#[doc(hidden)]
#[macro_export]
macro_rules! __priority_factors {
    () => {
        /// `priority_g_get_priority_factors_list()`: what `sprio` shows.
        #[no_mangle]
        pub unsafe extern "C" fn priority_p_get_priority_factors_list(uid: u32) -> $crate::list::SlurmList {
            $crate::guard("priority_p_get_priority_factors_list", ::std::ptr::null_mut(), || {
                // SAFETY: slurmctld's RPC handler holds the job, node, partition and QOS
                // read locks.
                unsafe { $crate::sprio::factors_list(uid) }
            })
        }
    };
}

/// `init` of a priority plugin: logging, `fairway.toml`, and in slurmctld the site
/// factor plugin, as multifactor's `init` does.
#[cfg(feature = "internal")]
#[doc(hidden)]
pub fn priority_init<P: Priority>(slot: &Slot<P>, plugin_type: &'static str) -> i32 {
    crate::log::init(plugin_type);
    announce();
    let in_ctld = crate::sym::in_slurmctld();
    let rc = init_with(slot, |c| P::init(c, in_ctld));
    if rc == crate::SLURM_SUCCESS && in_ctld {
        for knob in crate::multifactor::weights_without_slurmdbd() {
            tracing::error!("{knob} can only be used with SlurmDBD, ignoring");
        }
        crate::multifactor::site_factor_init();
    }
    rc
}

/// Starts the decay thread (slurmctld with slurmdbd only; see [`crate::decay::start`]).
#[cfg(feature = "internal")]
#[doc(hidden)]
pub fn start_decay(recompute: crate::decay::Recompute, after_pass: crate::decay::AfterPass) {
    let mut d = DECAY.lock().unwrap_or_else(|e| e.into_inner());
    if d.is_none() {
        *d = crate::decay::start(recompute, after_pass);
    }
}

/// The decay thread's [`crate::decay::Recompute`] for plugin `P`: one evaluator over the
/// whole walk ([`Priority::priority_pass`]), holding the instance once; without an
/// instance the walk still runs (usage accrues) and leaves priorities alone.
#[cfg(feature = "internal")]
#[doc(hidden)]
pub fn recompute_with<P: Priority>(slot: &Slot<P>, walk: &mut dyn FnMut(&mut crate::decay::Evaluate<'_>)) {
    let mut walk = Some(walk);
    slot.with(|p| {
        if let Some(w) = walk.take() {
            p.priority_pass(&mut |eval| w(&mut |job, now| Some(eval(job, now))));
        }
    });
    if let Some(w) = walk {
        w(&mut |_, _| None);
    }
}

/// `fini` of a priority plugin: stops and joins the decay thread before the plugin
/// goes away, unloads the site factor plugin, and lets the plugin save its state.
#[cfg(feature = "internal")]
#[doc(hidden)]
pub fn priority_fini<P: Priority>(slot: &Slot<P>) -> i32 {
    drop(DECAY.lock().unwrap_or_else(|e| e.into_inner()).take());
    if crate::sym::in_slurmctld() {
        crate::multifactor::site_factor_fini();
    }
    slot.with(|p| p.fini());
    slot.clear();
    crate::SLURM_SUCCESS
}

/// Exports a site factor plugin backed by a [`SiteFactor`] impl.
#[cfg(feature = "internal")]
#[macro_export]
macro_rules! site_factor_plugin {
    (name: $name:literal, type: $type:literal, impl: $ty:ty) => {
        $crate::plugin_symbols!(name: $name, type: $type);

        $crate::__plugin_lifecycle!($type, $ty, $crate::plugin::SiteFactor);

        /// `site_factor_g_set()`: job write lock held.
        #[no_mangle]
        pub unsafe extern "C" fn site_factor_p_set(job_ptr: *mut $crate::__private::slurm_sys::job_record_t) {
            $crate::guard("site_factor_p_set", (), || {
                // SAFETY: slurmctld passes a live job under its job write lock.
                if let Some(mut job) = unsafe { $crate::job::JobRecord::from_ptr(job_ptr) } {
                    let now = $crate::plugin::unix_now();
                    FAIRWAY_PLUGIN.with(|p| <$ty as $crate::plugin::SiteFactor>::set(p, &mut job, now));
                }
            })
        }

        /// `site_factor_g_update()`: job write lock held.
        #[no_mangle]
        pub extern "C" fn site_factor_p_update() {
            $crate::guard("site_factor_p_update", (), || {
                let now = $crate::plugin::unix_now();
                FAIRWAY_PLUGIN.with(|p| <$ty as $crate::plugin::SiteFactor>::update(p, now));
            })
        }

        $crate::__site_factor_reconfig!($ty);
    };
}

/// `site_factor_p_reconfig`, which Slurm 24.05 removed.
#[cfg(all(feature = "internal", not(slurm_ge_24_05)))]
#[doc(hidden)]
#[macro_export]
macro_rules! __site_factor_reconfig {
    ($ty:ty) => {
        /// `site_factor_g_reconfig()`.
        #[no_mangle]
        pub extern "C" fn site_factor_p_reconfig() {
            $crate::guard("site_factor_p_reconfig", (), || {
                FAIRWAY_PLUGIN.with(|p| <$ty as $crate::plugin::SiteFactor>::reconfig(p));
            })
        }
    };
}

/// Slurm 24.05+ has no `site_factor_p_reconfig`.
#[cfg(all(feature = "internal", slurm_ge_24_05))]
#[doc(hidden)]
#[macro_export]
macro_rules! __site_factor_reconfig {
    ($ty:ty) => {};
}

/// Exports a preempt plugin backed by a [`Preempt`] impl (Slurm 22.05 to 24.11: one
/// `preempt_p_get_data` for mode, order and grace time).
#[cfg(all(feature = "internal", not(slurm_ge_25_05)))]
#[macro_export]
macro_rules! preempt_plugin {
    (name: $name:literal, type: $type:literal, impl: $ty:ty) => {
        $crate::plugin_symbols!(name: $name, type: $type);

        $crate::__plugin_lifecycle!($type, $ty, $crate::plugin::Preempt);

        /// Sorts preemptors ahead of their preemptees in the job queue.
        #[no_mangle]
        pub unsafe extern "C" fn preempt_p_job_preempt_check(
            preemptor: *mut $crate::__private::slurm_sys::job_queue_rec_t,
            preemptee: *mut $crate::__private::slurm_sys::job_queue_rec_t,
        ) -> bool {
            $crate::guard("preempt_p_job_preempt_check", false, || {
                // SAFETY: slurmctld passes live queue records of live jobs.
                let (or, ee) = unsafe {
                    match (preemptor.as_ref(), preemptee.as_ref()) {
                        (Some(or), Some(ee)) => (or.job_ptr, ee.job_ptr),
                        _ => return false,
                    }
                };
                unsafe { preempt_p_preemptable(ee, or) }
            })
        }

        /// Note the order: (preemptee, preemptor), as slurmctld calls it (reference notes §6.1).
        #[no_mangle]
        pub unsafe extern "C" fn preempt_p_preemptable(
            preemptee: *mut $crate::__private::slurm_sys::job_record_t,
            preemptor: *mut $crate::__private::slurm_sys::job_record_t,
        ) -> bool {
            $crate::guard("preempt_p_preemptable", false, || {
                if preemptee == preemptor {
                    return false;
                }
                // SAFETY: two distinct live jobs under slurmctld's job lock.
                let (Some(ee), Some(or)) =
                    (unsafe { $crate::job::JobRecord::from_ptr(preemptee) }, unsafe { $crate::job::JobRecord::from_ptr(preemptor) })
                else {
                    return false;
                };
                let now = $crate::plugin::unix_now();
                FAIRWAY_PLUGIN.with(|p| <$ty as $crate::plugin::Preempt>::preemptable(p, &ee, &or, now)).unwrap_or(false)
            })
        }

        /// Mode, candidate order and grace time, by `data_type`.
        #[no_mangle]
        pub unsafe extern "C" fn preempt_p_get_data(
            job_ptr: *mut $crate::__private::slurm_sys::job_record_t,
            data_type: $crate::__private::slurm_sys::slurm_preempt_data_type_t,
            data: *mut ::std::ffi::c_void,
        ) -> ::std::os::raw::c_int {
            use $crate::__private::slurm_sys as sys;
            $crate::guard("preempt_p_get_data", $crate::SLURM_ERROR, || {
                if data.is_null() {
                    return $crate::SLURM_ERROR;
                }
                // SAFETY: NULL (for ENABLED) or a live job under the job lock.
                let job = unsafe { $crate::job::JobRecord::from_ptr(job_ptr) };
                let now = $crate::plugin::unix_now();
                // SAFETY (each write): `data` points at the type Slurm documents for
                // `data_type` (reference notes §6.1).
                let done = FAIRWAY_PLUGIN.with(|p| match (data_type, job.as_ref()) {
                    (sys::PREEMPT_DATA_ENABLED, _) => { unsafe { *(data as *mut bool) = <$ty as $crate::plugin::Preempt>::enabled(p) }; true }
                    (sys::PREEMPT_DATA_MODE, Some(j)) => { unsafe { *(data as *mut u16) = <$ty as $crate::plugin::Preempt>::mode(p, j) }; true }
                    (sys::PREEMPT_DATA_PRIO, Some(j)) => { unsafe { *(data as *mut u32) = <$ty as $crate::plugin::Preempt>::prio(p, j, now) }; true }
                    (sys::PREEMPT_DATA_GRACE_TIME, Some(j)) => {
                        unsafe { *(data as *mut u32) = <$ty as $crate::plugin::Preempt>::grace_time(p, j) };
                        true
                    }
                    (t, j) => {
                        $crate::__private::tracing::error!("preempt_p_get_data: unknown data type {t} (job given: {})", j.is_some());
                        false
                    }
                });
                if done == Some(true) { $crate::SLURM_SUCCESS } else { $crate::SLURM_ERROR }
            })
        }
    };
}

/// Exports a gpu plugin backed by a [`Gpu`] impl: 22.05's seven `gpu_p_*` symbols, plus
/// 23.02's `gpu_p_usage_read` (24.05 dropped `gpu_p_reconfig`; exporting it is harmless).
/// Slurm loads only `gpu/nvml` for `AutoDetect=nvml`, so that is the type to give.
#[cfg(feature = "internal")]
#[macro_export]
macro_rules! gpu_plugin {
    (name: $name:literal, type: $type:literal, impl: $ty:ty) => {
        $crate::plugin_symbols!(name: $name, type: $type);

        $crate::__plugin_lifecycle!($type, $ty, $crate::plugin::Gpu);

        /// Nothing to redo: the GPUs are read once per slurmd, and a new topology (file or
        /// hardware) takes a slurmd restart, as with Slurm's own gpu/nvml.
        #[no_mangle]
        pub extern "C" fn gpu_p_reconfig() -> ::std::os::raw::c_int {
            $crate::SLURM_SUCCESS
        }

        /// The node's GPUs for gres/gpu to merge with gres.conf.
        #[no_mangle]
        pub unsafe extern "C" fn gpu_p_get_system_gpu_list(
            node_config: *mut $crate::__private::slurm_sys::node_config_load_t,
        ) -> $crate::list::SlurmList {
            $crate::guard("gpu_p_get_system_gpu_list", ::std::ptr::null_mut(), || {
                let gpus = FAIRWAY_PLUGIN.with(<$ty as $crate::plugin::Gpu>::system_gpus).unwrap_or_default();
                // SAFETY: slurmd's node_config, passed straight through.
                unsafe { $crate::gpu::system_gpu_list(node_config, &gpus) }
            })
        }

        /// GPU frequency control is not offered (as gpu/generic).
        #[no_mangle]
        pub extern "C" fn gpu_p_step_hardware_init(_usable_gpus: *mut ::std::ffi::c_void, _tres_freq: *mut ::std::os::raw::c_char) {}

        /// See `gpu_p_step_hardware_init`.
        #[no_mangle]
        pub extern "C" fn gpu_p_step_hardware_fini() {}

        /// Only gpu/nvml's own test hook uses this.
        #[no_mangle]
        pub extern "C" fn gpu_p_test_cpu_conv(_cpu_range: *mut ::std::os::raw::c_char) -> *mut ::std::os::raw::c_char {
            ::std::ptr::null_mut()
        }

        /// GPU energy is not read (as gpu/generic).
        #[no_mangle]
        pub extern "C" fn gpu_p_energy_read(_dv_ind: u32, _gpu: *mut $crate::__private::slurm_sys::gpu_status_t) -> ::std::os::raw::c_int {
            $crate::SLURM_SUCCESS
        }

        /// Per-process GPU usage for accounting is not gathered (as gpu/generic).
        #[no_mangle]
        pub extern "C" fn gpu_p_usage_read(_pid: ::std::os::raw::c_int, _data: *mut ::std::ffi::c_void) -> ::std::os::raw::c_int {
            $crate::SLURM_SUCCESS
        }

        /// How many GPUs this node has.
        #[no_mangle]
        pub unsafe extern "C" fn gpu_p_get_device_count(device_count: *mut ::std::os::raw::c_uint) {
            $crate::guard("gpu_p_get_device_count", (), || {
                let n = FAIRWAY_PLUGIN.with(|p| <$ty as $crate::plugin::Gpu>::system_gpus(p).len()).unwrap_or(0);
                // SAFETY: a pointer to the caller's counter, or NULL.
                if let Some(c) = unsafe { device_count.as_mut() } {
                    *c = n as ::std::os::raw::c_uint;
                }
            })
        }
    };
}
