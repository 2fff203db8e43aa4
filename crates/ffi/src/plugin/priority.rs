//! Priority plugins (`PriorityType=`): the job's priority and sprio's factors, with
//! the decay thread ([`crate::decay`]) run on the plugin's behalf. Slurm 22.05 and
//! 24.05+ differ in `init`, `priority_p_thread_start`, `priority_p_recover` and the
//! factors list; the macros emit the set of the Slurm built against.

use fairway_core::Config;

use super::{announce, init_with, Slot};
use crate::job::JobRecord;

/// A job's priority at a given time, as [`Priority::priority`] gives it.
pub type PriorityOf<'a> = dyn FnMut(&mut JobRecord<'_>, i64) -> u32 + 'a;

/// The operations of a priority plugin (`PriorityType=priority/...`).
///
/// The FFI layer runs the decay thread (usage decay, fair share, periodic
/// recalculation) itself and calls [`Priority::priority`] for each pending job.
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

    /// After each decay pass, with no locks held: persist state, publish the pass.
    fn after_decay_pass(&self, _pass: &crate::decay::DecayPass) {}

    /// Before the plugin is unloaded.
    fn fini(&self) {}
}

/// The decay thread of the loaded priority plugin, if running.
#[doc(hidden)]
pub static DECAY: std::sync::Mutex<Option<crate::decay::DecayThread>> = std::sync::Mutex::new(None);

extern "C" {
    /// The C shim (csrc/long_double.c) that receives `long double`s.
    #[doc(hidden)]
    pub fn fairway_calc_fs_factor_ld();
}

/// Exports a priority plugin backed by a [`Priority`] impl: the entry points every
/// supported Slurm version shares, plus [`__priority_lifecycle!`] and
/// [`__priority_factors!`] for the ones that differ (reference notes, §2.5).
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

        fn fairway_after_pass(pass: &$crate::decay::DecayPass) {
            FAIRWAY_PLUGIN.with(|p| <$ty as $crate::plugin::Priority>::after_decay_pass(p, pass));
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
                $crate::conf::remember_paths();
                FAIRWAY_PLUGIN.with(|p| <$ty as $crate::plugin::Priority>::reconfig(p, assoc_clear));
                if let Some(d) = $crate::plugin::decay_running() {
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
                    if let Some(d) = $crate::plugin::decay_running() {
                        d.job_end(&mut job);
                    }
                    FAIRWAY_PLUGIN.with(|p| <$ty as $crate::plugin::Priority>::job_end(p, &mut job));
                }
            })
        }
    };
}

/// `init` of Slurm 22.05: the decay thread starts in `init`.
#[cfg(not(slurm_ge_23_02))]
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
#[cfg(slurm_ge_23_02)]
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
#[cfg(not(slurm_ge_23_02))]
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
#[cfg(all(slurm_ge_23_02, not(slurm_ge_24_05)))]
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
#[cfg(slurm_ge_24_05)]
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

/// The running decay thread's handle, with [`DECAY`] already released: callers go on to
/// take slurmctld's locks, and the mutex must never be held across those.
#[doc(hidden)]
pub fn decay_running() -> Option<crate::decay::Running> {
    DECAY.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(|d| d.running())
}

/// Starts the decay thread (slurmctld with slurmdbd only; see [`crate::decay::start`]).
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
#[doc(hidden)]
pub fn priority_fini<P: Priority>(slot: &Slot<P>) -> i32 {
    // Taken out under the mutex, joined after it is released: the thread may be waiting
    // for the job lock held by a `job_end` that waits for the mutex.
    let thread = DECAY.lock().unwrap_or_else(|e| e.into_inner()).take();
    drop(thread);
    if crate::sym::in_slurmctld() {
        crate::multifactor::site_factor_fini();
    }
    slot.with(|p| p.fini());
    slot.clear();
    crate::conf::forget_paths();
    crate::SLURM_SUCCESS
}
