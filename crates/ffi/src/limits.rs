//! Extending predicted time limits before they expire (`fairway_core::limits`): the
//! mechanism only; what to extend, and to what, is core's.
//!
//! A job whose admin comment records the limit it may grow to
//! (`fairway_core::limits::RECORD`, written by job_submit/fairway) gets its time limit
//! changed as `scontrol update TimeLimit=` changes a running job's: `acct_policy_alter_job`
//! first (the association and QOS run-time limits count the new limit), then the limit,
//! the end time moved by the difference (which keeps suspended time), and the new limit
//! sent to the accounting database.

use std::os::raw::c_void;
use std::sync::OnceLock;

use fairway_core::limits::{extended_limit, recorded_cap};
use slurm_sys as sys;

use crate::ctld::ctld;
use crate::job::JobRecord;

type AlterJob = unsafe extern "C" fn(*mut sys::job_record_t, u32);
type JobStartDirect = unsafe extern "C" fn(*mut c_void, *mut sys::job_record_t) -> i32;

/// slurmctld's `acct_policy_alter_job` and `jobacct_storage_job_start_direct`.
struct Symbols {
    alter: AlterJob,
    to_db: Option<JobStartDirect>,
}

fn symbols() -> Option<&'static Symbols> {
    static SYMS: OnceLock<Option<Symbols>> = OnceLock::new();
    SYMS.get_or_init(|| {
        let alter = crate::sym::lookup(c"acct_policy_alter_job");
        if alter.is_none() {
            tracing::error!("acct_policy_alter_job not found: predicted time limits are not extended");
        }
        // SAFETY: the symbols, when present, are slurmctld's functions of these types
        // (acct_policy.h, slurm_accounting_storage.h of this Slurm version).
        alter.map(|a| unsafe {
            Symbols {
                alter: std::mem::transmute::<*mut c_void, AlterJob>(a),
                to_db: crate::sym::lookup(c"jobacct_storage_job_start_direct")
                    .map(|p| std::mem::transmute::<*mut c_void, JobStartDirect>(p)),
            }
        })
    })
    .as_ref()
}

/// A running job's id and the new limit in minutes, when core's rule says its recorded
/// predicted limit is due for an extension.
fn due(job: &JobRecord<'_>, now: i64, period: u64) -> Option<(u32, u32)> {
    let raw = job.raw();
    if !job.is_running() || raw.preempt_time != 0 {
        return None;
    }
    let limit = raw.time_limit;
    if limit == sys::NO_VAL || limit == sys::INFINITE || limit == 0 {
        return None;
    }
    let cap = recorded_cap(&job.admin_comment()?)?;
    // The end time already counts suspended time: the limit runs from end − limit.
    let from = raw.end_time - i64::from(limit) * 60;
    extended_limit(limit, cap, from, now, period).map(|m| (job.job_id(), m))
}

/// Extends the limits of running jobs that would expire before the next pass, and half a
/// period more (`fairway_core::limits::extension_horizon`; a pass runs every `period`
/// seconds). `running` are the ids of the jobs the pass found running (its accrual walk
/// notes them), looked up by id; `None` (a pass that did not walk the jobs) reads every
/// job instead, a cache miss each on a long queue. Takes the job read lock to find them
/// and the write lock only when one is due; call with no slurmctld lock held. Returns
/// how many changed.
pub fn extend_running(now: i64, period: u64, running: Option<&[u32]>) -> usize {
    let Some(ctld) = ctld() else { return 0 };
    let mut found = Vec::new();
    ctld.with_job_read(|| {
        let mut note = |p: *mut sys::job_record_t| {
            // SAFETY: a record of job_list (or NULL) under the job lock.
            if let Some(job) = unsafe { JobRecord::from_ptr(p) } {
                found.extend(due(&job, now, period));
            }
        };
        match running {
            // SAFETY: slurmctld's `find_job_record` under the job lock: a live record or
            // NULL (a job purged since the pass).
            Some(ids) => ids.iter().for_each(|&id| note(unsafe { (ctld.find_job)(id) })),
            None => ctld.for_each_job(note),
        }
    });
    if found.is_empty() {
        return 0;
    }
    let Some(syms) = symbols() else { return 0 };
    let mut changed = 0;
    ctld.with_job_write(|| {
        for (id, _) in found {
            crate::job::with_job(id, |job| {
                // Decided again under the write lock: the job may have ended meanwhile.
                let Some((_, minutes)) = due(job, now, period) else { return };
                let old = job.raw().time_limit;
                let p = std::ptr::from_mut(job.raw_mut());
                // SAFETY: `p` is a live running job under the job write lock, as
                // `_update_job` calls it; the new limit is a finite number of minutes.
                unsafe { (syms.alter)(p, minutes) };
                let raw = job.raw_mut();
                raw.time_limit = minutes;
                raw.end_time += (i64::from(minutes) - i64::from(old)) * 60;
                raw.end_time_exp = raw.end_time;
                if let Some(to_db) = syms.to_db {
                    // SAFETY: slurmctld's accounting connection and a live job, as
                    // `_update_job` sends an updated limit.
                    unsafe { to_db(*ctld.acct_db_conn, p) };
                }
                tracing::info!("JobId={id}: predicted time limit {old} min extended to {minutes} min");
                changed += 1;
            });
        }
        ctld.touch_jobs(changed > 0);
    });
    changed
}
