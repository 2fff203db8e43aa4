//! Usage accrual: what running jobs add to their QOS and associations, and the
//! `grp_used_tres_run_secs` they give back, as multifactor's `_apply_new_usage` and
//! `_init_grp_used_tres_run_secs`.

use std::sync::atomic::Ordering;

use fairway_core::fairshare::accrue::{self, Charge, RunningJob};
use slurm_sys as sys;

use crate::ctld::Ctld;
use crate::knobs::Knobs;
use crate::locks::{assoc_lock, with_assoc_mgr};
use crate::long_double::fairway_add_long_double;
use crate::state::USAGE_ADDED;

fn job_state_flags(j: &sys::job_record_t) -> (u32, u32) {
    (j.job_state & sys::JOB_STATE_BASE, j.job_state)
}

pub(crate) fn is_finished(j: &sys::job_record_t) -> bool {
    job_state_flags(j).0 > sys::JOB_SUSPENDED
}

pub(crate) fn is_pending(j: &sys::job_record_t) -> bool {
    job_state_flags(j).0 == sys::JOB_PENDING
}

/// `decay_apply_new_usage` (job write lock held): false when the job needs nothing more.
pub(crate) fn decay_apply_new_usage(
    ctld: &Ctld,
    k: Knobs,
    j: *mut sys::job_record_t,
    last_ran: i64,
    start: i64,
) -> bool {
    // SAFETY: a job of job_list under the job write lock.
    let job = unsafe { &mut *j };
    if is_finished(job) || job.job_state & sys::JOB_COMPLETING != 0 {
        return false;
    }
    if (k.calculate_running() || !is_pending(job))
        && job.job_state & sys::JOB_POWER_UP_NODE == 0
        && job.start_time != 0
        && !job.assoc_ptr.is_null()
    {
        apply_new_usage(ctld, k, job, last_ran, start, false);
    }
    true
}

impl Ctld {
    /// Removes `delta` from a QOS's running TRES-seconds for the job's account and
    /// user (24.11's `_handle_qos_tres_run_secs`; earlier versions keep no such counts).
    ///
    /// # Safety
    /// `u` is the usage of a live QOS and `job` a live job with an association, under
    /// the assoc_mgr QOS write lock.
    #[allow(unused_variables)]
    unsafe fn qos_used_limits(&self, u: &mut sys::slurmdb_qos_usage_t, job: &sys::job_record_t, delta: &[u64]) {
        #[cfg(slurm_ge_23_02)]
        // SAFETY: per the contract; the getters create missing entries with arrays of
        // slurmctld_tres_cnt (= delta.len()) elements.
        unsafe {
            let Some(assoc) = job.assoc_ptr.as_ref() else { return };
            let a = (self.used_limits.0)(&mut u.acct_limit_list, assoc.acct);
            let b = (self.used_limits.1)(&mut u.user_limit_list, job.user_id);
            for l in [a, b] {
                if let Some(l) = l.as_ref() {
                    run_secs(std::ptr::null_mut(), l.tres_run_secs, &vec![0.0; delta.len()], delta);
                }
            }
        }
    }
}

/// `_apply_new_usage`: adds a running job's usage over [start_period, end_period] to
/// its QOS, partition QOS and every association up to root.
pub(crate) fn apply_new_usage(
    ctld: &Ctld,
    k: Knobs,
    job: &mut sys::job_record_t,
    start_period: i64,
    end_period: i64,
    at_end: bool,
) {
    if job.end_time_exp == sys::NO_VAL as i64 {
        return;
    }
    // What the arithmetic reads of the job, before `at_end` marks it charged.
    let mut run = RunningJob {
        start_time: job.start_time,
        end_time: job.end_time,
        end_time_exp: Some(job.end_time_exp),
        time_limit: job.time_limit,
        done: is_finished(job) || job.job_state & (sys::JOB_COMPLETING | sys::JOB_RESIZING) != 0,
        ..RunningJob::default()
    };
    if at_end {
        job.end_time_exp = sys::NO_VAL as i64;
    }
    let tres = ctld.tres_cnt();
    let enforce = ctld.enforce_limits();
    with_assoc_mgr(assoc_lock(sys::WRITE_LOCK, sys::WRITE_LOCK, sys::READ_LOCK), || {
        // SAFETY: job write lock (caller) and assoc/QOS write locks held; the job's
        // association chain, QOS and partition are live records.
        unsafe {
            let qos = job.qos_ptr;
            run.usage_factor = usage_factor(job);
            run.tres_alloc = tres_alloc(job, tres);
            // The numbers are fairway-core's (the simulator charges with the same function).
            let job_ptr: *mut sys::job_record_t = job;
            let billable = |from: i64| (ctld.billable)(job_ptr, from, true);
            let Some(c) = accrue::charge(&run, k.half_life, start_period, end_period, at_end, billable) else { return };
            if c.ran {
                USAGE_ADDED.store(true, Ordering::Relaxed);
            }
            let Charge {
                run_decay,
                real_decay,
                run_nodecay,
                real_nodecay,
                tres_run_delta,
                tres_run_decay,
                tres_run_nodecay,
                ..
            } = c;
            let job_ref = &*job;
            let charge_qos = |q: *mut sys::slurmdb_qos_rec_t| {
                let Some(q) = q.as_mut() else { return };
                let Some(u) = q.usage.as_mut() else { return };
                let nodecay = q.flags & sys::QOS_FLAG_NO_DECAY != 0;
                u.grp_used_wall += if nodecay { run_nodecay } else { run_decay };
                fairway_add_long_double(
                    std::ptr::addr_of_mut!(u.usage_raw).cast(),
                    if nodecay { real_nodecay } else { real_decay },
                );
                // 24.11 charges a QOS's TRES only for jobs with an association.
                if enforce && (cfg!(not(slurm_ge_23_02)) || !job_ref.assoc_ptr.is_null()) {
                    let add = if nodecay { &tres_run_nodecay } else { &tres_run_decay };
                    run_secs(u.usage_tres_raw, u.grp_used_tres_run_secs, add, &tres_run_delta);
                    ctld.qos_used_limits(u, job_ref, &tres_run_delta);
                }
            };
            charge_qos(qos);
            if let Some(p) = job.part_ptr.as_ref() {
                if p.qos_ptr != qos {
                    charge_qos(p.qos_ptr);
                }
            }
            let mut a = job.assoc_ptr;
            while let Some(assoc) = a.as_mut() {
                let Some(u) = assoc.usage.as_mut() else { break };
                u.grp_used_wall += run_decay;
                fairway_add_long_double(std::ptr::addr_of_mut!(u.usage_raw).cast(), real_decay);
                if enforce {
                    run_secs(u.usage_tres_raw, u.grp_used_tres_run_secs, &tres_run_decay, &tres_run_delta);
                }
                a = u.parent_assoc_ptr;
            }
        }
    });
}

/// `_handle_*_tres_run_secs`: adds decayed TRES usage and removes the run seconds the
/// job has now used from `grp_used_tres_run_secs` (never below 0). Energy is skipped.
///
/// # Safety
/// Both arrays are NULL or hold `add.len()` elements; assoc_mgr locks are held.
unsafe fn run_secs(usage_tres_raw: *mut u128, run_secs: *mut u64, add: &[f64], delta: &[u64]) {
    for t in 0..add.len() {
        if t == sys::TRES_ARRAY_ENERGY as usize {
            continue;
        }
        // SAFETY: per the contract.
        unsafe {
            if !usage_tres_raw.is_null() {
                fairway_add_long_double(usage_tres_raw.add(t).cast(), add[t]);
            }
            if !run_secs.is_null() {
                let s = &mut *run_secs.add(t);
                *s = s.saturating_sub(delta[t]);
            }
        }
    }
}

/// The job QOS's `UsageFactor`, when it sets one (a negative value means unset).
///
/// # Safety
/// `job.qos_ptr` is NULL or a live QOS record (assoc_mgr's QOS lock held).
unsafe fn usage_factor(job: &sys::job_record_t) -> Option<f64> {
    // SAFETY: per the function's contract.
    unsafe { job.qos_ptr.as_ref() }.map(|q| q.usage_factor).filter(|&f| f >= 0.0)
}

/// The job's allocated TRES counts, `tres` of them (NO_CONSUME as 0).
///
/// # Safety
/// `job.tres_alloc_cnt` is NULL or holds `tres` counts (the job lock held).
unsafe fn tres_alloc(job: &sys::job_record_t, tres: usize) -> Vec<u64> {
    if job.tres_alloc_cnt.is_null() {
        return vec![0; tres];
    }
    // SAFETY: per the function's contract.
    (0..tres)
        .map(|t| Some(unsafe { *job.tres_alloc_cnt.add(t) }).filter(|&c| c != sys::NO_CONSUME_VAL64).unwrap_or(0))
        .collect()
}

/// `_init_grp_used_tres_run_secs`: after a restart slurmctld re-adds each running job's
/// whole `tres × time_limit` to `grp_used_tres_run_secs`; remove what it had already
/// used up to the last decay pass.
pub(crate) fn init_grp_used_tres_run_secs(ctld: &Ctld, last_ran: i64) {
    if !ctld.enforce_limits() {
        return;
    }
    let tres = ctld.tres_cnt();
    ctld.with_job_write(|| {
        with_assoc_mgr(assoc_lock(sys::WRITE_LOCK, sys::WRITE_LOCK, sys::READ_LOCK), || {
            ctld.for_each_job(|j| {
                // SAFETY: job lock and assoc/QOS write locks held.
                unsafe {
                    let job = &*j;
                    if job.end_time_exp == sys::NO_VAL as i64
                        || job.job_state & sys::JOB_STATE_BASE != sys::JOB_RUNNING
                        || job.start_time > last_ran
                        || job.tres_alloc_cnt.is_null()
                    {
                        return;
                    }
                    // The numbers are fairway-core's, as for every charge.
                    let run = RunningJob {
                        start_time: job.start_time,
                        usage_factor: usage_factor(job),
                        tres_alloc: tres_alloc(job, tres),
                        ..RunningJob::default()
                    };
                    let delta = accrue::used_run_secs(&run, last_ran);
                    let zero = vec![0.0; tres];
                    let qos_secs = |q: *mut sys::slurmdb_qos_rec_t| {
                        if let Some(u) = q.as_ref().and_then(|q| q.usage.as_mut()) {
                            if cfg!(slurm_ge_23_02) && job.assoc_ptr.is_null() {
                                return;
                            }
                            run_secs(std::ptr::null_mut(), u.grp_used_tres_run_secs, &zero, &delta);
                            ctld.qos_used_limits(u, job, &delta);
                        }
                    };
                    qos_secs(job.qos_ptr);
                    if let Some(p) = job.part_ptr.as_ref() {
                        if p.qos_ptr != job.qos_ptr {
                            qos_secs(p.qos_ptr);
                        }
                    }
                    let mut a = job.assoc_ptr;
                    while let Some(u) = a.as_ref().and_then(|a| a.usage.as_mut()) {
                        run_secs(std::ptr::null_mut(), u.grp_used_tres_run_secs, &zero, &delta);
                        a = u.parent_assoc_ptr;
                    }
                }
            })
        })
    });
}
