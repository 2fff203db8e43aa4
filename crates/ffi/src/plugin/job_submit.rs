//! `job_submit` plugins (`JobSubmitPlugins=`): `job_submit` for new jobs and
//! `job_modify` for `scontrol update`, called by slurmctld (serialised in 22.05,
//! concurrently from 23.02 on).

use fairway_core::submit::JobRequest;
use fairway_core::Config;

use super::{inject_fault, Slot};
use crate::job::JobDesc;

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
