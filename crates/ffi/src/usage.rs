//! Usage accrual: what running jobs add to their QOS and associations, and the
//! `grp_used_tres_run_secs` they give back, as multifactor's `_apply_new_usage` and
//! `_init_grp_used_tres_run_secs`.

use std::sync::atomic::Ordering;

use fairway_core::fairshare;
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
    let start_period = start_period.max(job.start_time);
    let end_period = if job.end_time != 0 && at_end && end_period > job.end_time { job.end_time } else { end_period };
    let run_delta = ((end_period - start_period) as f64).max(0.0);
    let limit_ends = job.start_time as u64 + u64::from(job.time_limit) * 60;
    let mut tres_time_delta: u64 = if start_period as u64 >= limit_ends {
        0
    } else if is_finished(job) || job.job_state & (sys::JOB_COMPLETING | sys::JOB_RESIZING) != 0 {
        limit_ends - start_period as u64
    } else if end_period > job.end_time_exp {
        (job.end_time_exp - start_period).max(0) as u64
    } else {
        run_delta as u64
    };
    if at_end {
        job.end_time_exp = sys::NO_VAL as i64;
    }
    let decay_factor = fairshare::decay_factor(k.half_life);
    let mut run_decay = fairshare::decayed_run(decay_factor, run_delta);
    let tres = ctld.tres_cnt();
    let enforce = ctld.enforce_limits();
    with_assoc_mgr(assoc_lock(sys::WRITE_LOCK, sys::WRITE_LOCK, sys::READ_LOCK), || {
        // SAFETY: job write lock (caller) and assoc/QOS write locks held; the job's
        // association chain, QOS and partition are live records.
        unsafe {
            let billable = (ctld.billable)(job, start_period, true);
            if run_delta > 0.0 {
                USAGE_ADDED.store(true, Ordering::Relaxed);
            }
            let mut real_decay = run_decay * billable;
            let mut real_nodecay = run_delta * billable;
            let mut run_nodecay = run_delta;
            let qos = job.qos_ptr;
            if let Some(q) = qos.as_ref() {
                if q.usage_factor >= 0.0 {
                    real_decay *= q.usage_factor;
                    run_decay *= q.usage_factor;
                    real_nodecay *= q.usage_factor;
                    run_nodecay *= q.usage_factor;
                    tres_time_delta = (tres_time_delta as f64 * q.usage_factor) as u64;
                }
            }
            let mut tres_run_delta = vec![0u64; tres];
            let mut tres_run_decay = vec![0f64; tres];
            let mut tres_run_nodecay = vec![0f64; tres];
            if !job.tres_alloc_cnt.is_null() {
                for t in 0..tres {
                    let c = *job.tres_alloc_cnt.add(t);
                    if c == 0 || c == sys::NO_CONSUME_VAL64 {
                        continue;
                    }
                    tres_run_delta[t] = tres_time_delta.wrapping_mul(c);
                    tres_run_decay[t] = run_decay * c as f64;
                    tres_run_nodecay[t] = run_nodecay * c as f64;
                }
            }
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
                    let mut factor =
                        job.qos_ptr.as_ref().map_or(1.0, |q| if q.usage_factor >= 0.0 { q.usage_factor } else { 1.0 });
                    factor *= (last_ran - job.start_time) as f64;
                    let delta: Vec<u64> = (0..tres)
                        .map(|t| {
                            let c = *job.tres_alloc_cnt.add(t);
                            if c == sys::NO_CONSUME_VAL64 {
                                0
                            } else {
                                (c as f64 * factor) as u64
                            }
                        })
                        .collect();
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
