//! What `sprio` shows: each pending job's weighted factors.
//!
//! The priority computation stores the factors on the job (`job_ptr->prio_factors`,
//! allocated with Slurm's allocator because slurmctld frees it), and
//! `priority_p_get_priority_factors_list` returns copies for the jobs a request asks
//! for and its sender may see, exactly as multifactor filters them.

use std::ffi::CStr;
use std::os::raw::c_void;

use fairway_core::multifactor::{Factors, Weights};
use slurm_sys as sys;

use crate::job::JobRecord;

const SIZE: usize = std::mem::size_of::<sys::priority_factors_object_t>();

fn xcalloc_factors() -> *mut sys::priority_factors_object_t {
    // SAFETY: Slurm's allocator (aborts on failure, zero-fills); freed by slurmctld's
    // slurm_destroy_priority_factors_object / job purge.
    unsafe { sys::slurm_xcalloc(1, SIZE, true, false, c"fairway".as_ptr(), 0, c"sprio".as_ptr()).cast() }
}

/// Frees a factors object's owned arrays and zeroes it (multifactor does the same
/// before refilling it).
///
/// # Safety
/// `f` points to a live, Slurm-allocated factors object.
unsafe fn reset(f: *mut sys::priority_factors_object_t) {
    // SAFETY: per the contract; xfree takes NULL too and nulls the pointer.
    unsafe {
        sys::libslurmfull::slurm_xfree(std::ptr::addr_of_mut!((*f).tres_weights).cast());
        sys::libslurmfull::slurm_xfree(std::ptr::addr_of_mut!((*f).priority_tres).cast());
        std::ptr::write_bytes(f, 0, 1);
    }
}

impl JobRecord<'_> {
    /// Stores the weighted factors on the job for `sprio` (job write lock held).
    pub fn store_priority_factors(&mut self, w: &Weights, f: &Factors) {
        let j = self.raw_mut();
        if j.prio_factors.is_null() {
            j.prio_factors = xcalloc_factors();
        } else {
            // SAFETY: slurmctld's own allocation for this job, job write lock held.
            unsafe { reset(j.prio_factors) };
        }
        // SAFETY: non-NULL and exclusively ours under the job write lock.
        let o = unsafe { &mut *j.prio_factors };
        o.priority_age = f.age * f64::from(w.age);
        o.priority_assoc = f.assoc * f64::from(w.assoc);
        o.priority_fs = f.fairshare * f64::from(w.fairshare);
        o.priority_js = f.job_size * f64::from(w.job_size);
        o.priority_part = f.partition * f64::from(w.partition);
        o.priority_qos = f.qos * f64::from(w.qos);
        o.priority_site = f.site;
        o.nice = f.nice;
        if !w.tres.is_empty() && f.tres.len() == w.tres.len() {
            let n = w.tres.len();
            // SAFETY: Slurm's allocator, freed with the factors object by slurmctld.
            unsafe {
                let alloc = || -> *mut f64 {
                    sys::slurm_xcalloc(
                        n,
                        std::mem::size_of::<f64>(),
                        true,
                        false,
                        c"fairway".as_ptr(),
                        0,
                        c"tres".as_ptr(),
                    )
                    .cast()
                };
                o.priority_tres = alloc();
                o.tres_weights = alloc();
                for t in 0..n {
                    *o.priority_tres.add(t) = f.tres[t] * w.tres[t];
                    *o.tres_weights.add(t) = w.tres[t];
                }
            }
            o.tres_cnt = n as u32;
        }
    }

    /// Clears the stored factors (an admin set the priority directly).
    pub fn clear_priority_factors(&mut self) {
        let j = self.raw_mut();
        if !j.prio_factors.is_null() {
            // SAFETY: as in `store_priority_factors`.
            unsafe { reset(j.prio_factors) };
        }
    }
}

/// `priority_p_get_priority_factors_list` for Slurm 22.05: a `List` of factor objects
/// (or NULL when none), filtered by the request's jobs, users and partitions and by
/// `PrivateData=jobs`.
///
/// # Safety
/// `req` is NULL or a valid request; called by slurmctld's RPC handler without locks.
pub unsafe fn factors_list(req: *mut sys::priority_factors_request_msg_t, uid: u32) -> sys::List {
    let Some(ctld) = crate::decay::Ctld::resolve() else { return std::ptr::null_mut() };
    // SAFETY: per the contract.
    let req = unsafe { req.as_ref() };
    let lock = sys::slurmctld_lock_t {
        conf: sys::NO_LOCK,
        job: sys::READ_LOCK,
        node: sys::READ_LOCK,
        part: sys::READ_LOCK,
        fed: sys::NO_LOCK,
    };
    // SAFETY: job/node/partition read locks, released below; lists and records stay
    // valid while they are held. Factor objects are allocated with Slurm's allocator and
    // the list carries Slurm's destructor for them.
    unsafe {
        (ctld.lock)(lock);
        let part_filter: Option<Vec<*mut sys::part_record_t>> = req.and_then(|r| {
            (!r.partitions.is_null()).then(|| {
                CStr::from_ptr(r.partitions)
                    .to_string_lossy()
                    .split(',')
                    .filter_map(|name| {
                        let c = std::ffi::CString::new(name).ok()?;
                        let p = (ctld.find_part)(c.as_ptr().cast_mut());
                        (!p.is_null()).then_some(p)
                    })
                    .collect()
            })
        });
        let ids = |l: sys::List| -> Option<Vec<u32>> {
            (!l.is_null()).then(|| {
                let mut v = Vec::new();
                crate::decay::for_each(l, |p| v.push(*p.cast::<u32>()));
                v
            })
        };
        let (job_ids, uids) = match req {
            Some(r) => (ids(r.job_id_list), ids(r.uid_list)),
            None => (None, None),
        };
        let conf = &*std::ptr::addr_of!(sys::slurm_conf);
        let private = u32::from(conf.private_data) & sys::PRIVATE_DATA_JOBS != 0;
        let operator = (ctld.validate_operator)(uid);
        let now = crate::plugin::unix_now();
        let accrue_always = u32::from(conf.priority_flags) & sys::PRIORITY_FLAGS_ACCRUE_ALWAYS != 0;
        let calculate_running = u32::from(conf.priority_flags) & sys::PRIORITY_FLAGS_CALCULATE_RUNNING != 0;
        // Partition weights for jobs in several partitions, read once per request.
        let weights = crate::multifactor::weights();
        let raw_part = u32::from(weights.flags) & sys::PRIORITY_FLAGS_NO_NORMAL_PART != 0;
        let out = sys::list_create(Some(sys::slurm_destroy_priority_factors_object));
        crate::decay::for_each(*ctld.job_list, |p| {
            let job = &*p.cast::<sys::job_record_t>();
            let pending = job.job_state & sys::JOB_STATE_BASE == sys::JOB_PENDING;
            if (!calculate_running && !pending) || job.job_state & sys::JOB_REVOKED != 0 {
                return;
            }
            let Some(d) = job.details.as_ref() else { return };
            let use_time = if accrue_always { d.submit_time } else { d.begin_time };
            if use_time == 0 || use_time > now || job.priority == 0 {
                return;
            }
            if private && job.user_id != uid && !operator {
                // MCS-label privacy is not evaluated: hide unless the sender coordinates
                // the job's account (without MCS), which errs on the private side.
                let coord = sys::slurm_mcs_get_privatedata() == 0
                    && sys::assoc_mgr_is_user_acct_coord(*ctld.acct_db_conn, uid, job.account);
                if !coord {
                    return;
                }
            }
            if job_ids.as_ref().is_some_and(|v| !v.contains(&job.job_id))
                || uids.as_ref().is_some_and(|v| !v.contains(&job.user_id))
            {
                return;
            }
            // Multi-partition jobs: one row per partition (partition factor per row).
            let mut parts = Vec::new();
            if job.part_ptr_list.is_null() {
                if job.part_ptr.is_null() {
                    return;
                }
                parts.push(job.part_ptr);
            } else {
                crate::decay::for_each(job.part_ptr_list, |pp| parts.push(pp.cast()));
            }
            let multi = !job.part_ptr_list.is_null();
            for part in parts {
                if part_filter.as_ref().is_some_and(|f| !f.contains(&part)) {
                    continue;
                }
                let obj = xcalloc_factors();
                if job.direct_set_prio != 0 && !multi {
                    (*obj).direct_prio = f64::from(job.priority);
                } else if !job.prio_factors.is_null() {
                    sys::slurm_copy_priority_factors_object(obj, job.prio_factors);
                    if multi {
                        let pr = &*part;
                        (*obj).priority_part =
                            if raw_part { f64::from(pr.priority_job_factor) } else { pr.norm_priority }
                                * f64::from(weights.partition);
                    }
                }
                (*obj).job_id = job.job_id;
                (*obj).partition = (*part).name;
                (*obj).user_id = job.user_id;
                sys::list_append(out, obj.cast::<c_void>());
            }
        });
        (ctld.unlock)(lock);
        if sys::list_count(out) == 0 {
            sys::list_destroy(out);
            return std::ptr::null_mut();
        }
        out
    }
}
