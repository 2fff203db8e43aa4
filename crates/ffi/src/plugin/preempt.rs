//! Preempt plugins (`PreemptType=`): who may preempt whom, in which mode, in which
//! order, with how much grace.

use fairway_core::Config;

use crate::job::JobRecord;

/// The operations of a preempt plugin (`PreemptType=preempt/...`), called by slurmctld's
/// scheduler with the job (and QoS) locks held. `preemptable` runs for every pair of
/// jobs a scheduling pass considers: keep it cheap and side-effect free.
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

/// Exports a preempt plugin backed by a [`Preempt`] impl (Slurm 22.05 to 24.11: one
/// `preempt_p_get_data` for mode, order and grace time).
#[cfg(not(slurm_ge_25_05))]
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
