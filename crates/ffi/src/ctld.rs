//! slurmctld's own symbols, resolved once per process.
//!
//! They exist only in `slurmctld` (linked `-export-dynamic`), so they are looked up at
//! run time (see [`crate::sym`]) rather than linked: the priority plugin must also load
//! in `sshare`. Walking the job list and taking slurmctld's locks are in
//! [`crate::locks`]; the QOS run-seconds getters are applied in [`crate::usage`].

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::OnceLock;

use slurm_sys as sys;

use crate::list::SlurmList;

/// slurmctld-only functions and globals of this Slurm version.
pub(crate) struct Ctld {
    pub(crate) lock: unsafe extern "C" fn(sys::slurmctld_lock_t),
    pub(crate) unlock: unsafe extern "C" fn(sys::slurmctld_lock_t),
    pub(crate) billable: unsafe extern "C" fn(*mut sys::job_record_t, libc::time_t, bool) -> f64,
    #[cfg(not(slurm_ge_24_05))]
    pub(crate) find_part: unsafe extern "C" fn(*mut c_char) -> *mut sys::part_record_t,
    pub(crate) find_job: unsafe extern "C" fn(u32) -> *mut sys::job_record_t,
    pub(crate) validate_operator: unsafe extern "C" fn(u32) -> bool,
    pub(crate) job_list: *const SlurmList,
    pub(crate) acct_db_conn: *const *mut c_void,
    tres_cnt: *const c_int,
    accounting_enforce: *const u16,
    pub(crate) last_job_update: *mut libc::time_t,
    /// `acct_policy_get_acct_used_limits` and `acct_policy_get_user_used_limits`: a
    /// QOS's per-account and per-user running TRES-seconds, which 24.11's limits read.
    #[cfg(slurm_ge_23_02)]
    pub(crate) used_limits: (UsedLimitsAcct, UsedLimitsUser),
}

#[cfg(slurm_ge_23_02)]
pub(crate) type UsedLimitsAcct = unsafe extern "C" fn(*mut SlurmList, *mut c_char) -> *mut sys::slurmdb_used_limits_t;
#[cfg(slurm_ge_23_02)]
pub(crate) type UsedLimitsUser = unsafe extern "C" fn(*mut SlurmList, u32) -> *mut sys::slurmdb_used_limits_t;

// SAFETY: the pointers are addresses of slurmctld's process-wide globals and functions.
unsafe impl Send for Ctld {}
unsafe impl Sync for Ctld {}

/// slurmctld's symbols, or `None` outside slurmctld (looked up on the first call only:
/// a process's exported symbols do not change).
pub(crate) fn ctld() -> Option<&'static Ctld> {
    static CTLD: OnceLock<Option<Ctld>> = OnceLock::new();
    CTLD.get_or_init(Ctld::resolve).as_ref()
}

impl Ctld {
    fn resolve() -> Option<Self> {
        let f = |n: &CStr| crate::sym::lookup(n);
        // SAFETY: each symbol, when present, is the slurmctld function or variable of the
        // declared type (slurmctld.h / locks.h of this Slurm version).
        unsafe {
            Some(Self {
                lock: std::mem::transmute::<*mut c_void, unsafe extern "C" fn(sys::slurmctld_lock_t)>(f(
                    c"lock_slurmctld",
                )?),
                unlock: std::mem::transmute::<*mut c_void, unsafe extern "C" fn(sys::slurmctld_lock_t)>(f(
                    c"unlock_slurmctld",
                )?),
                billable: std::mem::transmute::<
                    *mut c_void,
                    unsafe extern "C" fn(*mut sys::job_record_t, libc::time_t, bool) -> f64,
                >(f(c"calc_job_billable_tres")?),
                #[cfg(not(slurm_ge_24_05))]
                find_part: std::mem::transmute::<
                    *mut c_void,
                    unsafe extern "C" fn(*mut c_char) -> *mut sys::part_record_t,
                >(f(c"find_part_record")?),
                find_job: std::mem::transmute::<*mut c_void, unsafe extern "C" fn(u32) -> *mut sys::job_record_t>(f(
                    c"find_job_record",
                )?),
                validate_operator: std::mem::transmute::<*mut c_void, unsafe extern "C" fn(u32) -> bool>(f(
                    c"validate_operator",
                )?),
                job_list: f(c"job_list")?.cast(),
                acct_db_conn: f(c"acct_db_conn")?.cast(),
                tres_cnt: f(c"slurmctld_tres_cnt")?.cast(),
                accounting_enforce: f(c"accounting_enforce")?.cast(),
                last_job_update: f(c"last_job_update")?.cast(),
                #[cfg(slurm_ge_23_02)]
                used_limits: (
                    std::mem::transmute::<*mut c_void, UsedLimitsAcct>(f(c"acct_policy_get_acct_used_limits")?),
                    std::mem::transmute::<*mut c_void, UsedLimitsUser>(f(c"acct_policy_get_user_used_limits")?),
                ),
            })
        }
    }

    /// `slurmctld_tres_cnt`: the length of every TRES array.
    pub(crate) fn tres_cnt(&self) -> usize {
        // SAFETY: plain read of slurmctld's `int slurmctld_tres_cnt`.
        unsafe { (*self.tres_cnt).max(0) as usize }
    }

    /// Whether `AccountingStorageEnforce` includes limits.
    pub(crate) fn enforce_limits(&self) -> bool {
        // SAFETY: plain read of slurmctld's `uint16_t accounting_enforce`.
        u32::from(unsafe { *self.accounting_enforce }) & sys::ACCOUNTING_ENFORCE_LIMITS != 0
    }
}
