//! What `sprio` shows: each pending job's weighted factors.
//!
//! The priority computation stores the factors on the job (`job_ptr->prio_factors`,
//! allocated with Slurm's allocator because slurmctld frees it), and
//! `priority_p_get_priority_factors_list` returns copies for the jobs a request asks
//! for and its sender may see, exactly as multifactor filters them.

#[cfg(not(slurm_ge_23_02))]
use std::ffi::CStr;
use std::os::raw::c_void;

use fairway_core::multifactor::partition_factor;
use fairway_core::priority::Weighted;
use slurm_sys as sys;

use crate::list::SlurmList;

use crate::job::JobRecord;

/// What `job_ptr->prio_factors` points to: 23.02 split the factors out of the object
/// `sprio` receives.
#[cfg(not(slurm_ge_23_02))]
type PrioFactors = sys::priority_factors_object_t;
#[cfg(slurm_ge_23_02)]
type PrioFactors = sys::priority_factors_t;

/// One zeroed `T` from Slurm's allocator; freed by slurmctld (job purge, the factors
/// list's destructor).
fn xcalloc<T>(what: &std::ffi::CStr) -> *mut T {
    // SAFETY: freed only by Slurm, as above.
    unsafe { crate::string::xcalloc(1, what) }
}

/// Frees a factors object's owned arrays and zeroes it (multifactor does the same
/// before refilling it).
///
/// # Safety
/// `f` points to a live, Slurm-allocated factors object.
unsafe fn reset(f: *mut PrioFactors) {
    // SAFETY: per the contract. Called for every pending job on every pass, and the
    // arrays exist only with PriorityWeightTRES: skip the calls when there are none.
    unsafe {
        if !(*f).tres_weights.is_null() {
            sys::libslurmfull::slurm_xfree(std::ptr::addr_of_mut!((*f).tres_weights).cast());
        }
        if !(*f).priority_tres.is_null() {
            sys::libslurmfull::slurm_xfree(std::ptr::addr_of_mut!((*f).priority_tres).cast());
        }
        std::ptr::write_bytes(f, 0, 1);
    }
}

impl JobRecord<'_> {
    /// Stores the weighted factors on the job for `sprio` (job write lock held).
    pub(crate) fn store_priority_factors(&mut self, w: &Weighted) {
        let j = self.raw_mut();
        if j.prio_factors.is_null() {
            j.prio_factors = xcalloc::<PrioFactors>(c"prio_factors");
        } else {
            // SAFETY: slurmctld's own allocation for this job, job write lock held.
            unsafe { reset(j.prio_factors) };
        }
        // SAFETY: non-NULL and exclusively ours under the job write lock.
        let o = unsafe { &mut *j.prio_factors };
        o.priority_age = w.age;
        o.priority_assoc = w.assoc;
        o.priority_fs = w.fairshare;
        o.priority_js = w.job_size;
        o.priority_part = w.partition;
        o.priority_qos = w.qos;
        o.priority_site = w.site;
        o.nice = w.nice;
        let n = w.tres.len();
        if n > 0 && w.tres_weights.len() == n {
            // SAFETY: Slurm's allocator, freed with the factors object by slurmctld.
            unsafe {
                o.priority_tres = crate::string::xcalloc::<f64>(n, c"tres");
                o.tres_weights = crate::string::xcalloc::<f64>(n, c"tres");
                std::ptr::copy_nonoverlapping(w.tres.as_ptr(), o.priority_tres, n);
                std::ptr::copy_nonoverlapping(w.tres_weights.as_ptr(), o.tres_weights, n);
            }
            o.tres_cnt = n as u32;
        }
    }

    /// Clears the stored factors (an admin set the priority directly).
    pub(crate) fn clear_priority_factors(&mut self) {
        let j = self.raw_mut();
        if !j.prio_factors.is_null() {
            // SAFETY: as in `store_priority_factors`.
            unsafe { reset(j.prio_factors) };
        }
    }
}

/// Which jobs `sprio` shows to one sender: pending ones (running ones too with
/// CALCULATE_RUNNING) that are eligible and not held, within `PrivateData=jobs`.
struct Viewer<'c> {
    ctld: &'c crate::ctld::Ctld,
    uid: u32,
    private: bool,
    operator: bool,
    now: i64,
    accrue_always: bool,
    calculate_running: bool,
}

impl<'c> Viewer<'c> {
    fn new(ctld: &'c crate::ctld::Ctld, uid: u32) -> Self {
        // SAFETY: plain reads of the initialised global config; validate_operator is
        // slurmctld's own check.
        let (conf, operator) = unsafe { (&*std::ptr::addr_of!(sys::slurm_conf), (ctld.validate_operator)(uid)) };
        let flags = u32::from(conf.priority_flags);
        Self {
            ctld,
            uid,
            private: u32::from(conf.private_data) & sys::PRIVATE_DATA_JOBS != 0,
            operator,
            now: crate::unix_now(),
            accrue_always: flags & sys::PRIORITY_FLAGS_ACCRUE_ALWAYS != 0,
            calculate_running: flags & sys::PRIORITY_FLAGS_CALCULATE_RUNNING != 0,
        }
    }

    /// # Safety
    /// `job` is a live job under the caller's job read lock.
    unsafe fn shows(&self, job: &sys::job_record_t) -> bool {
        let pending = job.job_state & sys::JOB_STATE_BASE == sys::JOB_PENDING;
        if (!self.calculate_running && !pending) || job.job_state & sys::JOB_REVOKED != 0 {
            return false;
        }
        // SAFETY: per the contract.
        let Some(d) = (unsafe { job.details.as_ref() }) else { return false };
        let use_time = if self.accrue_always { d.submit_time } else { d.begin_time };
        if use_time == 0 || use_time > self.now || job.priority == 0 {
            return false;
        }
        if self.private && job.user_id != self.uid && !self.operator {
            // MCS-label privacy is not evaluated: hide unless the sender coordinates
            // the job's account (without MCS), which errs on the private side.
            // SAFETY: libslurmfull functions; acct_db_conn is slurmctld's connection.
            return unsafe {
                sys::slurm_mcs_get_privatedata() == 0 && coordinates(*self.ctld.acct_db_conn, self.uid, job.account)
            };
        }
        true
    }
}

/// `assoc_mgr_is_user_acct_coord`, which takes assoc_mgr's locks itself.
///
/// # Safety
/// `acct` is NULL or a NUL-terminated account name.
unsafe fn coordinates(db: *mut c_void, uid: u32, acct: *mut std::os::raw::c_char) -> bool {
    // SAFETY: per the contract.
    #[cfg(not(slurm_ge_23_02))]
    return unsafe { sys::assoc_mgr_is_user_acct_coord(db, uid, acct) };
    // SAFETY: as above; 23.02 added `is_locked`.
    #[cfg(slurm_ge_23_02)]
    return unsafe { sys::assoc_mgr_is_user_acct_coord(db, uid, acct, false) };
}

/// `priority_p_get_priority_factors_list` for Slurm 22.05: a `List` of factor objects
/// (or NULL when none), filtered by the request's jobs, users and partitions and by
/// `PrivateData=jobs`.
///
/// # Safety
/// `req` is NULL or a valid request; called by slurmctld's RPC handler without locks.
#[cfg(not(slurm_ge_23_02))]
pub unsafe fn factors_list(req: *mut sys::priority_factors_request_msg_t, uid: u32) -> SlurmList {
    let Some(ctld) = crate::ctld::ctld() else { return std::ptr::null_mut() };
    // SAFETY: per the contract.
    let req = unsafe { req.as_ref() };
    // SAFETY: job/node/partition read locks, held for the whole closure; lists and
    // records stay valid while they are held. Factor objects are allocated with Slurm's
    // allocator and the list carries Slurm's destructor for them.
    ctld.with_job_read(|| unsafe {
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
        let ids = |l: SlurmList| -> Option<Vec<u32>> {
            (!l.is_null()).then(|| {
                let mut v = Vec::new();
                crate::list::for_each(l, |p| v.push(*p.cast::<u32>()));
                v
            })
        };
        let (job_ids, uids) = match req {
            Some(r) => (ids(r.job_id_list), ids(r.uid_list)),
            None => (None, None),
        };
        let viewer = Viewer::new(ctld, uid);
        // Partition weights for jobs in several partitions, read once per request.
        let weights = crate::multifactor::weights();
        let out = sys::list_create(Some(sys::slurm_destroy_priority_factors_object));
        crate::list::for_each(ctld.job_list(), |p| {
            let job = &*p.cast::<sys::job_record_t>();
            if !viewer.shows(job) {
                return;
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
                crate::list::for_each(job.part_ptr_list, |pp| parts.push(pp.cast()));
            }
            let multi = !job.part_ptr_list.is_null();
            for part in parts {
                if part_filter.as_ref().is_some_and(|f| !f.contains(&part)) {
                    continue;
                }
                let obj = xcalloc::<sys::priority_factors_object_t>(c"sprio");
                if job.direct_set_prio != 0 && !multi {
                    (*obj).direct_prio = f64::from(job.priority);
                } else if !job.prio_factors.is_null() {
                    sys::slurm_copy_priority_factors_object(obj, job.prio_factors);
                    if multi {
                        let pr = &*part;
                        (*obj).priority_part = partition_factor(&weights, pr.priority_job_factor, pr.norm_priority)
                            * f64::from(weights.partition);
                        // TRES factors are normalised by this partition's TRES too.
                        let n = ((*obj).tres_cnt as usize).min(weights.tres.len());
                        if !(*obj).priority_tres.is_null() && n > 0 {
                            let tres = std::slice::from_raw_parts_mut((*obj).priority_tres, n);
                            let w = crate::multifactor::part_tres_weighted(job, pr, &weights, tres);
                            tres.copy_from_slice(&w[..n]);
                        }
                    }
                }
                (*obj).job_id = job.job_id;
                (*obj).partition = (*part).name;
                (*obj).user_id = job.user_id;
                sys::list_append(out, obj.cast::<c_void>());
            }
        });
        if sys::list_count(out) == 0 {
            sys::list_destroy(out);
            return std::ptr::null_mut();
        }
        out
    })
}

/// The factors list's destructor: the factors are the object's own, its strings are
/// the job's (24.11's multifactor frees it the same way).
#[cfg(slurm_ge_24_05)]
extern "C" fn destroy_light(obj: *mut c_void) {
    let obj = obj.cast::<sys::priority_factors_object_t>();
    if obj.is_null() {
        return;
    }
    // SAFETY: objects of this list are allocated by `factors_list` below.
    unsafe {
        sys::slurm_destroy_priority_factors((*obj).prio_factors.cast());
        let mut p = obj.cast::<c_void>();
        sys::libslurmfull::slurm_xfree(&mut p);
    }
}

/// `priority_p_get_priority_factors_list` for Slurm 24.05+: every job `uid` may see
/// (sprio filters by job, user and partition itself), one object per partition and
/// QOS of the job. slurmctld holds the job, node and partition read locks and the QOS
/// read lock, and sends the list before it frees it, so objects borrow the jobs'
/// strings.
///
/// # Safety
/// Called by slurmctld's RPC handler with those locks held.
#[cfg(slurm_ge_24_05)]
pub unsafe fn factors_list(uid: u32) -> SlurmList {
    let Some(ctld) = crate::ctld::ctld() else { return std::ptr::null_mut() };
    let viewer = Viewer::new(ctld, uid);
    let weights = crate::multifactor::weights();
    let tres_cnt = weights.tres.len();
    // SAFETY: the locks above keep jobs, partitions and QOS alive; objects and their
    // factors come from Slurm's allocator and the list carries `destroy_light`.
    unsafe {
        let out = sys::list_create(Some(destroy_light));
        crate::list::for_each(ctld.job_list(), |p| {
            let job = &*p.cast::<sys::job_record_t>();
            if !viewer.shows(job) || (job.part_ptr.is_null() && job.part_ptr_list.is_null()) {
                return;
            }
            let mut parts: Vec<*mut sys::part_record_t> = Vec::new();
            crate::list::for_each(job.part_ptr_list, |pp| parts.push(pp.cast()));
            let multi_part = !parts.is_empty();
            if !multi_part {
                parts.push(std::ptr::null_mut());
            }
            let mut qos: Vec<*mut sys::slurmdb_qos_rec_t> = Vec::new();
            crate::list::for_each(job.qos_list, |q| qos.push(q.cast()));
            if qos.is_empty() {
                qos.push(std::ptr::null_mut());
            }
            for &part in &parts {
                for &q in &qos {
                    let obj = &mut *xcalloc::<sys::priority_factors_object_t>(c"sprio");
                    sys::list_append(out, std::ptr::from_mut(obj).cast());
                    obj.account = job.account;
                    obj.job_id = job.job_id;
                    obj.partition = if part.is_null() { (*job.part_ptr).name } else { (*part).name };
                    obj.qos = match (q.as_ref(), job.qos_ptr.as_ref()) {
                        (Some(q), _) | (None, Some(q)) => q.name,
                        (None, None) => std::ptr::null_mut(),
                    };
                    obj.user_id = job.user_id;
                    if job.direct_set_prio != 0 {
                        obj.direct_prio = f64::from(job.priority);
                        continue;
                    }
                    obj.prio_factors = xcalloc::<sys::priority_factors_t>(c"sprio");
                    sys::slurm_copy_priority_factors(obj.prio_factors, job.prio_factors);
                    let f = &mut *obj.prio_factors;
                    if let Some(pr) = part.as_ref() {
                        f.priority_part = partition_factor(&weights, pr.priority_job_factor, pr.norm_priority)
                            * f64::from(weights.partition);
                        let n = (f.tres_cnt as usize).min(tres_cnt);
                        if !f.priority_tres.is_null() && n > 0 {
                            let tres = std::slice::from_raw_parts_mut(f.priority_tres, n);
                            let w = crate::multifactor::part_tres_weighted(job, pr, &weights, tres);
                            tres.copy_from_slice(&w[..n]);
                        }
                    }
                    if let Some(q) = q.as_ref().filter(|q| q.priority != 0 && weights.qos != 0) {
                        let norm = q.usage.as_ref().map_or(0.0, |u| u.norm_priority);
                        f.priority_qos =
                            fairway_core::multifactor::qos_factor(&weights, q.priority, norm) * f64::from(weights.qos);
                    }
                }
            }
        });
        if sys::list_count(out) == 0 {
            sys::list_destroy(out);
            return std::ptr::null_mut();
        }
        out
    }
}
