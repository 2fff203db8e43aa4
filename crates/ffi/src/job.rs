//! Safe views of Slurm's job structs, borrowed for one callback.

use std::borrow::Cow;
use std::ffi::CStr;
use std::os::raw::c_char;

fn opt_str<'a>(p: *const c_char) -> Option<Cow<'a, str>> {
    // SAFETY: callers pass fields of a struct Slurm keeps alive for the callback; each is
    // NULL or NUL-terminated.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy())
}

/// A job submission or update request (`job_desc_msg_t`), as `sbatch` sent it.
pub struct JobDesc<'a>(&'a mut slurm_sys::job_desc_msg_t);

impl<'a> JobDesc<'a> {
    /// Wraps the pointer Slurm passed to `job_submit` / `job_modify`.
    ///
    /// # Safety
    /// `p` must be NULL or a valid `job_desc_msg_t` not used elsewhere during `'a`.
    pub unsafe fn from_ptr(p: *mut slurm_sys::job_desc_msg_t) -> Option<Self> {
        // SAFETY: per the contract.
        unsafe { p.as_mut() }.map(Self)
    }

    /// `--comment`.
    pub fn comment(&self) -> Option<Cow<'_, str>> {
        opt_str(self.0.comment)
    }

    /// `--job-name`.
    pub fn name(&self) -> Option<Cow<'_, str>> {
        opt_str(self.0.name)
    }

    /// `--partition`, if the user gave one.
    pub fn partition(&self) -> Option<Cow<'_, str>> {
        opt_str(self.0.partition)
    }

    /// `--qos`, if the user gave one.
    pub fn qos(&self) -> Option<Cow<'_, str>> {
        opt_str(self.0.qos)
    }

    /// The uid the job will run as.
    pub fn user_id(&self) -> u32 {
        self.0.user_id
    }
}

/// Calls `f` on every job in slurmctld's job list. The caller must hold the job lock
/// (callbacks such as `site_factor_p_update` are called with it held); outside
/// slurmctld there is no job list and nothing happens.
#[cfg(feature = "internal")]
pub fn for_each_job(mut f: impl FnMut(&mut JobRecord<'_>)) {
    let Some(list) = crate::sym::lookup(c"job_list") else { return };
    // SAFETY: slurmctld's `List job_list`, read under the caller's job lock.
    let list = unsafe { *list.cast::<slurm_sys::List>() };
    crate::decay::for_each(list, |p| {
        // SAFETY: elements of job_list are live job records under the job lock.
        if let Some(mut job) = unsafe { JobRecord::from_ptr(p.cast()) } {
            f(&mut job);
        }
    });
}

/// A job known to `slurmctld` (`job_record_t`). Only with the `internal` feature.
#[cfg(feature = "internal")]
pub struct JobRecord<'a>(&'a mut slurm_sys::job_record_t);

#[cfg(feature = "internal")]
impl<'a> JobRecord<'a> {
    /// Wraps the pointer Slurm passed to a callback.
    ///
    /// # Safety
    /// `p` must be NULL or a valid `job_record_t` that the caller's slurmctld locks
    /// protect for `'a`.
    pub unsafe fn from_ptr(p: *mut slurm_sys::job_record_t) -> Option<Self> {
        // SAFETY: per the contract.
        unsafe { p.as_mut() }.map(Self)
    }

    /// The record itself, for this crate's translators.
    pub(crate) fn raw(&self) -> &slurm_sys::job_record_t {
        self.0
    }

    /// The record itself, mutable, for this crate's translators.
    pub(crate) fn raw_mut(&mut self) -> &mut slurm_sys::job_record_t {
        self.0
    }

    /// The job id.
    pub fn job_id(&self) -> u32 {
        self.0.job_id
    }

    /// Whether the job is pending.
    pub fn is_pending(&self) -> bool {
        self.0.job_state & slurm_sys::JOB_STATE_BASE == slurm_sys::JOB_PENDING
    }

    /// When the job ended (0 if it has not).
    pub fn end_time(&self) -> i64 {
        self.0.end_time
    }

    /// `site_factor`, `NICE_OFFSET`-based.
    pub fn site_factor(&self) -> u32 {
        self.0.site_factor
    }

    /// Sets `site_factor` (`NICE_OFFSET`-based).
    pub fn set_site_factor(&mut self, v: u32) {
        self.0.site_factor = v;
    }

    /// The current priority (0 = held).
    pub fn priority(&self) -> u32 {
        self.0.priority
    }

    /// Whether an admin (or a plugin) set the priority directly (`scontrol update
    /// Priority=`), which priority plugins must leave alone.
    pub fn direct_set_prio(&self) -> bool {
        self.0.direct_set_prio != 0
    }

    /// The job's user id.
    pub fn user_id(&self) -> u32 {
        self.0.user_id
    }

    /// The job's account.
    pub fn account(&self) -> Option<Cow<'_, str>> {
        opt_str(self.0.account)
    }

    /// The job's name.
    pub fn name(&self) -> Option<Cow<'_, str>> {
        opt_str(self.0.name)
    }

    /// `--deadline`, Unix seconds.
    pub fn deadline(&self) -> Option<i64> {
        (self.0.deadline > 0).then_some(self.0.deadline)
    }

    /// The time limit in seconds, if set.
    pub fn time_limit_secs(&self) -> Option<u64> {
        (self.0.time_limit != slurm_sys::NO_VAL && self.0.time_limit != slurm_sys::INFINITE)
            .then(|| u64::from(self.0.time_limit) * 60)
    }

    /// When the job became eligible to run (accrue time, else begin time; 0 if not).
    pub fn eligible_since(&self) -> i64 {
        // SAFETY: `details` is NULL or valid for the job's lifetime.
        match unsafe { self.0.details.as_ref() } {
            Some(d) if d.accrue_time != 0 => d.accrue_time,
            Some(d) => d.begin_time,
            None => 0,
        }
    }

    /// Run time in seconds of a job that completed successfully.
    pub fn completed_runtime(&self) -> Option<u64> {
        let ok = self.0.job_state & slurm_sys::JOB_STATE_BASE == slurm_sys::JOB_COMPLETE;
        (ok && self.0.start_time > 0 && self.0.end_time >= self.0.start_time)
            .then(|| (self.0.end_time - self.0.start_time) as u64)
    }

    /// GPUs requested (allocated, once running): the `gres/gpu` TRES count.
    pub fn gpus(&self) -> u32 {
        let pos = crate::multifactor::gpu_tres_pos();
        let Ok(pos) = usize::try_from(pos) else { return 0 };
        let arr = if !self.0.tres_alloc_cnt.is_null() { self.0.tres_alloc_cnt } else { self.0.tres_req_cnt };
        if arr.is_null() {
            return 0;
        }
        // SAFETY: TRES count arrays have one slot per configured TRES and `pos` is a
        // position assoc_mgr returned for this configuration.
        let v = unsafe { *arr.add(pos) };
        if v == slurm_sys::NO_CONSUME_VAL64 {
            0
        } else {
            v.min(u64::from(u32::MAX)) as u32
        }
    }

    /// `--nice`, without Slurm's `NICE_OFFSET` (positive = lower priority).
    pub fn nice(&self) -> i64 {
        // SAFETY: `details` is NULL or valid for the job's lifetime.
        match unsafe { self.0.details.as_ref() } {
            Some(d) => i64::from(d.nice) - i64::from(slurm_sys::NICE_OFFSET),
            None => 0,
        }
    }
}
