//! Safe views of Slurm's job structs, borrowed for one callback.

use std::borrow::Cow;
use std::ffi::CStr;
use std::os::raw::c_char;

use fairway_core::submit::JobRequest;
#[cfg(feature = "internal")]
use slurm_sys as sys;

mod desc;
pub use desc::JobDesc;

fn opt_str<'a>(p: *const c_char) -> Option<Cow<'a, str>> {
    // SAFETY: callers pass fields of a struct Slurm keeps alive for the callback; each is
    // NULL or NUL-terminated.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy())
}

/// Slurm 23.02 renamed TRES request strings from `gres:gpu:2` to `gres/gpu:2`, and
/// `tres_bind` from `gpu:closest` to `gres/gpu:closest`. The core speaks 22.05's form;
/// these translate at the boundary.
fn tres_to_core(s: String) -> String {
    s.split(',')
        .map(|e| e.strip_prefix("gres/").map_or_else(|| e.to_string(), |r| format!("gres:{r}")))
        .collect::<Vec<_>>()
        .join(",")
}

fn tres_to_slurm(s: &str) -> String {
    if cfg!(slurm_ge_23_02) {
        s.split(',')
            .map(|e| e.strip_prefix("gres:").map_or_else(|| e.to_string(), |r| format!("gres/{r}")))
            .collect::<Vec<_>>()
            .join(",")
    } else {
        s.to_string()
    }
}

fn bind_to_core(s: String) -> String {
    s.strip_prefix("gres/").map(str::to_string).unwrap_or(s)
}

fn bind_to_slurm(s: &str) -> String {
    if cfg!(slurm_ge_23_02) {
        format!("gres/{s}")
    } else {
        s.to_string()
    }
}

/// Calls `f` on every job in slurmctld's job list. The caller must hold the job lock
/// (callbacks such as `site_factor_p_update` are called with it held); outside
/// slurmctld there is no job list and nothing happens.
#[cfg(feature = "internal")]
pub fn for_each_job(mut f: impl FnMut(&mut JobRecord<'_>)) {
    let Some(ctld) = crate::ctld::ctld() else { return };
    ctld.for_each_job(|p| {
        // SAFETY: elements of job_list are live job records under the caller's job lock.
        if let Some(mut job) = unsafe { JobRecord::from_ptr(p) } {
            f(&mut job);
        }
    });
}

/// Calls `f` on the job with id `job_id`, if slurmctld knows it (`find_job_record`).
/// The caller must hold the job write lock; outside slurmctld nothing happens.
#[cfg(feature = "internal")]
pub fn with_job(job_id: u32, f: impl FnOnce(&mut JobRecord<'_>)) {
    let Some(ctld) = crate::ctld::ctld() else { return };
    // SAFETY: slurmctld's `find_job_record`: a job of job_list (or NULL), read and
    // written under the caller's job lock.
    if let Some(mut job) = unsafe { JobRecord::from_ptr((ctld.find_job)(job_id)) } {
        f(&mut job);
    }
}

/// The current state of the job a `job_modify` call updates, as a request; `None`
/// when this build cannot read `job_record_t` (public headers only).
///
/// # Safety
/// `p` must be NULL or the `job_record_t` Slurm passed to `job_modify`.
pub unsafe fn current_request(p: *mut std::os::raw::c_void) -> Option<JobRequest> {
    #[cfg(feature = "internal")]
    {
        // SAFETY: per the contract; job_modify runs under the job write lock.
        unsafe { JobRecord::from_ptr(p.cast()) }.map(|j| j.request())
    }
    #[cfg(not(feature = "internal"))]
    {
        let _ = p;
        None
    }
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

    /// The job as a request, for checking an update against the submission rules.
    pub fn request(&self) -> JobRequest {
        let j = &*self.0;
        let s = |p: *const c_char| opt_str(p).map(Cow::into_owned);
        // SAFETY: `details` and `qos_ptr` are NULL or valid under the job lock.
        let (details, qos) = unsafe { (j.details.as_ref(), j.qos_ptr.as_ref()) };
        let v32 = |v: u32| (v != sys::NO_VAL && v != 0).then_some(v);
        JobRequest {
            user_id: j.user_id,
            account: s(j.account),
            default_account: None,
            name: s(j.name),
            comment: s(j.comment),
            extra: None,
            batch: j.batch_flag != 0,
            partition: s(j.partition),
            qos: qos.and_then(|q| s(q.name)),
            time_limit: (j.time_limit != sys::NO_VAL).then_some(j.time_limit),
            min_nodes: details.and_then(|d| v32(d.min_nodes)),
            num_tasks: details.and_then(|d| v32(d.num_tasks)),
            ntasks_per_node: details
                .and_then(|d| (u32::from(d.ntasks_per_node) != sys::NO_VAL16).then_some(u32::from(d.ntasks_per_node)))
                .filter(|&n| n != 0),
            tres_per_node: s(j.tres_per_node).map(tres_to_core),
            tres_per_job: s(j.tres_per_job).map(tres_to_core),
            tres_per_task: s(j.tres_per_task).map(tres_to_core),
            tres_per_socket: s(j.tres_per_socket).map(tres_to_core),
            req_switch: v32(j.req_switch),
            wait4switch: v32(j.wait4switch),
            requeue: details.map(|d| d.requeue != 0),
            warn: None,
            tres_bind: s(j.tres_bind).map(bind_to_core),
            step_gpu_bind: None,
            cpu_bind: None,
            admin_comment: s(j.admin_comment),
        }
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

    /// Sets the priority, as the decay pass does with what the plugin computed.
    pub fn set_priority(&mut self, v: u32) {
        self.0.priority = v;
    }

    /// The partition (or comma-separated partitions) the job may run in.
    pub fn partition(&self) -> Option<Cow<'_, str>> {
        opt_str(self.0.partition)
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

    /// What a run-time predictor may know of the job: its history key (user, account,
    /// name, GPUs) and request, as at submission.
    pub fn prediction_request(&self) -> fairway_core::predict::JobRequest {
        // SAFETY: `details` is NULL or valid for the job's lifetime.
        let d = unsafe { self.0.details.as_ref() };
        let known = |v: u32| (v != 0 && v != slurm_sys::NO_VAL).then_some(v);
        fairway_core::predict::JobRequest {
            key: fairway_core::predict::JobKey {
                user: self.user_id(),
                account: self.account().unwrap_or_default().into_owned(),
                name: self.name().unwrap_or_default().into_owned(),
                gpus: self.gpus(),
            },
            time_limit: self.time_limit_secs(),
            nodes: d.and_then(|d| known(d.min_nodes)),
            cpus: d.and_then(|d| known(d.min_cpus)),
            submit: d.map_or(0, |d| d.submit_time),
        }
    }

    /// Since when the job has accrued age (`accrue_time`, as multifactor's age factor;
    /// 0 while it accrues none). Not `begin_time`: a job held back by `MaxJobsAccrue` or a
    /// dependency accrues no age, and must not starve its way past those limits either.
    pub fn eligible_since(&self) -> i64 {
        // SAFETY: `details` is NULL or valid for the job's lifetime.
        unsafe { self.0.details.as_ref() }.map_or(0, |d| d.accrue_time)
    }

    /// How the job ended, as the run-time model's online calibration sees it.
    pub fn ending(&self) -> fairway_core::predict::Ending {
        use fairway_core::predict::Ending;
        match self.0.job_state & slurm_sys::JOB_STATE_BASE {
            slurm_sys::JOB_COMPLETE => Ending::Completed,
            slurm_sys::JOB_FAILED | slurm_sys::JOB_OOM => Ending::Failed,
            slurm_sys::JOB_TIMEOUT => Ending::TimedOut,
            _ => Ending::Other,
        }
    }

    /// Seconds from start to end of a job that started and ended, whatever its state.
    pub fn ran_secs(&self) -> Option<u64> {
        (self.0.start_time > 0 && self.0.end_time >= self.0.start_time)
            .then(|| (self.0.end_time - self.0.start_time) as u64)
    }

    /// The job's admin comment (job_submit/fairway's prediction record among it).
    pub fn admin_comment(&self) -> Option<Cow<'_, str>> {
        opt_str(self.0.admin_comment)
    }

    /// Run time in seconds of a job that completed successfully.
    pub fn completed_runtime(&self) -> Option<u64> {
        let ok = self.0.job_state & slurm_sys::JOB_STATE_BASE == slurm_sys::JOB_COMPLETE;
        (ok && self.0.start_time > 0 && self.0.end_time >= self.0.start_time)
            .then(|| (self.0.end_time - self.0.start_time) as u64)
    }

    /// GPUs requested (allocated, once running): the `gres/gpu` TRES count.
    pub fn gpus(&self) -> u32 {
        let pos = crate::conf::gpu_tres_pos();
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

    /// Whether the job is running (or suspended: it still holds its nodes).
    pub fn is_running(&self) -> bool {
        let base = self.0.job_state & slurm_sys::JOB_STATE_BASE;
        base == slurm_sys::JOB_RUNNING || base == slurm_sys::JOB_SUSPENDED
    }

    /// When the job (last) started; 0 if it has not.
    pub fn start_time(&self) -> i64 {
        self.0.start_time
    }

    /// Nodes allocated (or requested, while pending).
    pub fn node_cnt(&self) -> u32 {
        self.0.node_cnt
    }

    /// When the job was chosen for preemption (its grace started); 0 if it was not.
    pub fn preempt_time(&self) -> i64 {
        self.0.preempt_time
    }

    /// When this (pending) job's latest round of preempting others started; 0 if never.
    pub fn preempt_start_time(&self) -> i64 {
        // SAFETY: `details` is NULL or valid for the job's lifetime.
        unsafe { self.0.details.as_ref() }.map_or(0, |d| d.preempt_start_time)
    }

    /// `--comment`, where `fairway:` directives live on 22.05.
    pub fn comment(&self) -> Option<Cow<'_, str>> {
        opt_str(self.0.comment)
    }

    /// `--extra`, where `fairway:` directives may also live (the job record has it from
    /// Slurm 24.11 on; `None` before).
    pub fn extra(&self) -> Option<Cow<'_, str>> {
        #[cfg(slurm_ge_24_11)]
        return opt_str(self.0.extra);
        #[cfg(not(slurm_ge_24_11))]
        None
    }

    /// The job's QoS as preemption sees it, if it has one.
    pub fn qos(&self) -> Option<QosView<'_>> {
        // SAFETY: `qos_ptr` is NULL or points into assoc_mgr's QoS list, which the
        // callers of preemption and priority hooks keep alive (as preempt/qos assumes).
        unsafe { self.0.qos_ptr.as_ref() }.map(QosView)
    }
}

/// A QoS record (`slurmdb_qos_rec_t`) reached from a job.
#[cfg(feature = "internal")]
pub struct QosView<'a>(&'a slurm_sys::slurmdb_qos_rec_t);

#[cfg(feature = "internal")]
impl QosView<'_> {
    /// Its id (the bit in other QoS's `Preempt=` lists).
    pub fn id(&self) -> u32 {
        self.0.id
    }

    /// Its name.
    pub fn name(&self) -> Cow<'_, str> {
        opt_str(self.0.name).unwrap_or(Cow::Borrowed(""))
    }

    /// `Priority=`.
    pub fn priority(&self) -> u32 {
        self.0.priority
    }

    /// `PreemptMode=` bits (`PREEMPT_MODE_*`; 0 = not set).
    pub fn preempt_mode(&self) -> u16 {
        self.0.preempt_mode
    }

    /// `GraceTime=` seconds.
    pub fn grace_time(&self) -> u32 {
        self.0.grace_time
    }

    /// Whether this QoS's `Preempt=` list names `other`.
    pub fn preempts(&self, other: &QosView<'_>) -> bool {
        let bits = self.0.preempt_bitstr;
        if bits.is_null() {
            return false;
        }
        // SAFETY: a non-NULL `preempt_bitstr` is a bitstring sized for every QoS id
        // (assoc_mgr sizes it by the QoS count), as preempt/qos relies on too.
        #[cfg(slurm_ge_24_11)]
        let set = unsafe { slurm_sys::slurm_bit_test(bits, i64::from(other.id())) };
        // SAFETY: as above (22.05's header declares the function under its short name).
        #[cfg(not(slurm_ge_24_11))]
        let set = unsafe { slurm_sys::bit_test(bits, i64::from(other.id())) };
        set != 0
    }
}

#[cfg(feature = "internal")]
impl JobRecord<'_> {
    /// `--nice`, without Slurm's `NICE_OFFSET` (positive = lower priority).
    pub fn nice(&self) -> i64 {
        // SAFETY: `details` is NULL or valid for the job's lifetime.
        match unsafe { self.0.details.as_ref() } {
            Some(d) => i64::from(d.nice) - i64::from(slurm_sys::NICE_OFFSET),
            None => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{bind_to_core, bind_to_slurm, tres_to_core, tres_to_slurm};

    #[test]
    fn tres_strings_round_trip_between_slurm_versions() {
        // 23.02+ writes `gres/`, 22.05 `gres:`; the core always reads `gres:`.
        assert_eq!(tres_to_core("gres/gpu:a100:2,gres/shard:1".into()), "gres:gpu:a100:2,gres:shard:1");
        assert_eq!(tres_to_core("gres:gpu:2,cpu:4".into()), "gres:gpu:2,cpu:4");
        let back = tres_to_slurm("gres:gpu:a100:2,cpu:4");
        assert_eq!(back, if cfg!(slurm_ge_23_02) { "gres/gpu:a100:2,cpu:4" } else { "gres:gpu:a100:2,cpu:4" });
        assert_eq!(tres_to_core(back), "gres:gpu:a100:2,cpu:4");
        assert_eq!(bind_to_core("gres/gpu:closest".into()), "gpu:closest");
        assert_eq!(bind_to_core(bind_to_slurm("gpu:single:1")), "gpu:single:1");
    }
}
