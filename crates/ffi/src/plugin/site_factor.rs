//! Site factor plugins (`PrioritySiteFactorPlugin=`), which `priority/multifactor`
//! (and `priority/fairway`) consult for every job.

use fairway_core::Config;

use crate::job::JobRecord;

/// The operations of a site factor plugin (`PrioritySiteFactorPlugin=site_factor/...`),
/// which `priority/multifactor` consults for every job.
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

/// Exports a site factor plugin backed by a [`SiteFactor`] impl.
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
#[cfg(not(slurm_ge_24_05))]
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
#[cfg(slurm_ge_24_05)]
#[doc(hidden)]
#[macro_export]
macro_rules! __site_factor_reconfig {
    ($ty:ty) => {};
}
