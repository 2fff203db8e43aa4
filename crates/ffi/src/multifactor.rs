//! Reading what `priority/multifactor`'s arithmetic needs out of slurmctld.
//!
//! The arithmetic itself is `fairway_core::multifactor`; this module only translates
//! `slurm_conf`, `job_record_t` and the association/QOS records into its inputs.

use std::os::raw::c_void;
use std::sync::OnceLock;

use fairway_core::multifactor::{JobInput, Weights};
use fairway_core::priority;
use slurm_sys as sys;

use crate::job::JobRecord;
use crate::locks::AssocReadLock;

extern "C" {
    fn fairway_read_long_double(p: *const c_void) -> f64;
}

/// The multifactor knobs of the loaded `slurm.conf`. As multifactor, age and fair
/// share need slurmdbd accounting; without it their weights are 0 (logged by the
/// plugin at startup).
pub fn weights() -> Weights {
    // SAFETY: plain reads of integer fields of libslurmfull's initialised global config.
    let c = unsafe { &*std::ptr::addr_of!(sys::slurm_conf) };
    // SAFETY: libslurmfull function reading slurm_conf.
    let dbd = unsafe { sys::slurm_with_slurmdbd() };
    Weights {
        age: if dbd { c.priority_weight_age } else { 0 },
        assoc: c.priority_weight_assoc,
        fairshare: if dbd { c.priority_weight_fs } else { 0 },
        job_size: c.priority_weight_js,
        partition: c.priority_weight_part,
        qos: c.priority_weight_qos,
        tres: tres_weights(c.priority_weight_tres),
        max_age: c.priority_max_age,
        favor_small: c.priority_favor_small != 0,
        flags: c.priority_flags,
    }
}

/// What the priority route reads of slurm.conf: multifactor's weights and the
/// fair-share dampening. Read once and again on `scontrol reconfigure`, not per job
/// (`PriorityWeightTRES` is parsed by Slurm's own parser).
#[derive(Debug, Clone, Default)]
pub struct Knobs {
    /// Multifactor's weights and `PriorityFlags`.
    pub weights: Weights,
    /// `FairShareDampeningFactor`.
    pub damping: u16,
}

impl Knobs {
    /// The loaded slurm.conf's.
    pub fn read() -> Self {
        Self { weights: weights(), damping: crate::conf::fs_dampening_factor() }
    }

    /// Re-reads them (`scontrol reconfigure`). Switching between Fair Tree and classic
    /// fair share recomputes the shares, as multifactor does: Fair Tree normalises them
    /// per level, classic down the tree.
    pub fn reread(&mut self) {
        let new = Self::read();
        let switched = (self.weights.flags ^ new.weights.flags) & fairway_core::multifactor::flags::FAIR_TREE != 0;
        if switched && crate::sym::in_slurmctld() {
            crate::decay::renormalize_shares();
        }
        *self = new;
    }

    /// `PriorityFlags=INCR_ONLY`: priorities never fall.
    pub fn incr_only(&self) -> bool {
        self.weights.flags & fairway_core::multifactor::flags::INCR_ONLY != 0
    }
}

/// `PriorityWeightTRES` as one weight per configured TRES, parsed by Slurm's own
/// parser (in slurmctld, where the TRES list is known); empty when unset or invalid.
fn tres_weights(text: *mut std::os::raw::c_char) -> Vec<f64> {
    let Some(cnt) = crate::sym::lookup(c"slurmctld_tres_cnt") else { return Vec::new() };
    if text.is_null() {
        return Vec::new();
    }
    // SAFETY: slurmctld's `int slurmctld_tres_cnt`; the parser returns NULL or an
    // xmalloc'ed array of that many doubles, which we copy and xfree. fail=false: a bad
    // string is logged by Slurm and ignored here rather than killing slurmctld.
    unsafe {
        let n = (*cnt.cast::<std::os::raw::c_int>()).max(0) as usize;
        let mut arr = sys::slurm_get_tres_weight_array(text, n as std::os::raw::c_int, false);
        if arr.is_null() {
            tracing::error!("PriorityWeightTRES could not be parsed; TRES factors count as 0");
            return Vec::new();
        }
        let v = std::slice::from_raw_parts(arr, n).to_vec();
        sys::libslurmfull::slurm_xfree(std::ptr::addr_of_mut!(arr).cast());
        v
    }
}

/// Whether age and fair share are unavailable (no slurmdbd) but weighted in slurm.conf.
pub fn weights_without_slurmdbd() -> Vec<&'static str> {
    // SAFETY: as in `weights`.
    let (c, dbd) = unsafe { (&*std::ptr::addr_of!(sys::slurm_conf), sys::slurm_with_slurmdbd()) };
    let mut v = Vec::new();
    if !dbd && c.priority_weight_age != 0 {
        v.push("PriorityWeightAge");
    }
    if !dbd && c.priority_weight_fs != 0 {
        v.push("PriorityWeightFairshare");
    }
    v
}

/// Gives the `PrioritySiteFactorPlugin` (if any) its say on the job, as multifactor
/// does before computing a priority (job write lock held by the caller).
pub fn site_factor_set(job: &mut JobRecord<'_>) {
    // SAFETY: the job is live under the caller's job write lock.
    unsafe { sys::site_factor_g_set(job.raw_mut()) };
}

/// Loads `PrioritySiteFactorPlugin` (slurmctld only), as multifactor's init does.
pub fn site_factor_init() {
    // SAFETY: libslurmfull plugin loader; called once from init in slurmctld.
    #[cfg(not(slurm_ge_23_02))]
    let rc = unsafe { sys::site_factor_plugin_init() };
    // SAFETY: as above (23.02 renamed it).
    #[cfg(slurm_ge_23_02)]
    let rc = unsafe { sys::site_factor_g_init() };
    if rc != crate::SLURM_SUCCESS {
        tracing::error!("PrioritySiteFactorPlugin failed to load; site factors stay as jobs carry them");
    }
}

/// Unloads `PrioritySiteFactorPlugin`.
pub fn site_factor_fini() {
    // SAFETY: pairs with `site_factor_init`.
    #[cfg(not(slurm_ge_23_02))]
    unsafe {
        sys::site_factor_plugin_fini()
    };
    // SAFETY: as above.
    #[cfg(slurm_ge_23_02)]
    unsafe {
        sys::site_factor_g_fini()
    };
}

/// Forwards `scontrol reconfigure` to the site factor plugin (24.05 dropped the call:
/// site factor plugins re-read their configuration themselves).
pub fn site_factor_reconfig() {
    // SAFETY: libslurmfull function; plugin context is internally locked.
    #[cfg(not(slurm_ge_24_05))]
    unsafe {
        sys::site_factor_g_reconfig()
    };
}

pub use crate::conf::{debug_priority, gpu_tres_pos, state_save_location};

/// Whether `PriorityFlags` selects Fair Tree.
pub fn fair_tree() -> bool {
    // SAFETY: as in `weights`.
    let flags = unsafe { (*std::ptr::addr_of!(sys::slurm_conf)).priority_flags };
    u32::from(flags) & sys::PRIORITY_FLAGS_FAIR_TREE != 0
}

/// slurmctld's `cluster_cpus` and `node_record_count`, looked up once (they exist only
/// in slurmctld; see [`crate::sym`]).
fn cluster_size() -> (u32, u32) {
    static ADDRS: OnceLock<(usize, usize)> = OnceLock::new();
    let &(cpus, nodes) = ADDRS.get_or_init(|| {
        let a = |n| crate::sym::lookup(n).map_or(0, |p| p as usize);
        // 23.02+ sizes jobs against the nodes that exist (dynamic and cloud nodes).
        let nodes = if cfg!(slurm_ge_23_02) { c"active_node_record_count" } else { c"node_record_count" };
        (a(c"cluster_cpus"), a(nodes))
    });
    if cpus == 0 || nodes == 0 {
        return (0, 0);
    }
    // SAFETY: addresses of slurmctld's `uint32_t cluster_cpus` and `int
    // node_record_count`, read under the job write lock the caller holds (they only
    // change during reconfiguration, which takes all locks).
    unsafe { (*(cpus as *const u32), (*(nodes as *const i32)).max(0) as u32) }
}

/// Per TRES: the job's allocated count (else requested) and the partition's total, as
/// multifactor's `_get_tres_factors` reads them.
///
/// # Safety
/// The job's TRES arrays and `part_tres` are NULL or hold `tres_cnt` entries, and stay
/// valid under the caller's locks.
unsafe fn job_tres(j: &sys::job_record_t, part_tres: *const u64, tres_cnt: usize) -> Vec<(u64, u64)> {
    (0..tres_cnt)
        .map(|t| {
            // SAFETY: per the contract.
            unsafe {
                let alloc = (!j.tres_alloc_cnt.is_null()).then(|| *j.tres_alloc_cnt.add(t));
                let value = match alloc {
                    Some(a) if a != sys::NO_CONSUME_VAL64 => a,
                    _ if !j.tres_req_cnt.is_null() => *j.tres_req_cnt.add(t),
                    _ => 0,
                };
                (value, if part_tres.is_null() { 0 } else { *part_tres.add(t) })
            }
        })
        .collect()
}

/// sprio's weighted TRES factors of a job in one of its partitions
/// (`fairway_core::multifactor::partition_tres_weighted`).
pub(crate) fn part_tres_weighted(
    j: &sys::job_record_t,
    part: &sys::part_record_t,
    w: &Weights,
    old: &[f64],
) -> Vec<f64> {
    // SAFETY: TRES arrays hold slurmctld_tres_cnt entries or are NULL (caller's locks).
    let tres = unsafe { job_tres(j, part.tres_cnt, w.tres.len()) };
    fairway_core::multifactor::partition_tres_weighted(w, &tres, old)
}

/// Whether the job asked for several QOS (24.11+; never before).
fn multi_qos(j: &sys::job_record_t) -> bool {
    #[cfg(slurm_ge_23_02)]
    return !j.qos_list.is_null();
    #[cfg(not(slurm_ge_23_02))]
    {
        let _ = j;
        false
    }
}

/// Whether a Slurm-allocated array is missing or holds fewer than `n` entries (a job
/// updated to more partitions or QOS keeps its old array).
///
/// # Safety
/// `arr` is NULL or from Slurm's allocator.
unsafe fn too_small(arr: *mut u32, n: usize) -> bool {
    // SAFETY: per the contract; xsize reads the allocation's own header.
    arr.is_null() || unsafe { sys::xsize(arr.cast()) } < n * std::mem::size_of::<u32>()
}

/// Frees what `*p` points to with Slurm's allocator and nulls it.
///
/// # Safety
/// `*p` is NULL or Slurm-allocated.
unsafe fn xfree(p: *mut *mut c_void) {
    // SAFETY: per the contract.
    unsafe { sys::libslurmfull::slurm_xfree(p) };
}

/// Writes `prios` into an array of at least that many entries; with `incr_only` an
/// entry only rises.
///
/// # Safety
/// `arr` holds at least `prios.len()` entries.
unsafe fn store(arr: *mut u32, prios: &[u32], incr_only: bool) {
    for (i, &p) in prios.iter().enumerate() {
        // SAFETY: per the contract.
        let slot = unsafe { &mut *arr.add(i) };
        if !incr_only || *slot < p {
            *slot = p;
        }
    }
}

impl JobRecord<'_> {
    /// The partitions a job has one priority per (several partitions, or on 24.11 several
    /// QOS: then its one partition), in `priority_array` order, with each one's inputs;
    /// empty for a job with one partition and one QOS. 22.05 sorts the partitions by
    /// `PriorityTier` here (in place), as its multifactor does; 24.11 keeps them sorted.
    fn partition_inputs(&mut self, tres_cnt: usize) -> Vec<fairway_core::multifactor::PartitionInput> {
        let j = self.raw_mut();
        if j.part_ptr_list.is_null() && !multi_qos(j) {
            return Vec::new(); // most jobs: one partition, one QOS
        }
        let mut parts: Vec<*mut sys::part_record_t> = Vec::new();
        if !j.part_ptr_list.is_null() {
            // SAFETY: the job's partition list is live under the caller's job write
            // lock; list_sort reorders it in place.
            #[cfg(not(slurm_ge_23_02))]
            unsafe {
                sys::list_sort(j.part_ptr_list, Some(sys::priority_sort_part_tier))
            };
            crate::list::for_each(j.part_ptr_list, |p| parts.push(p.cast()));
        } else if multi_qos(j) && !j.part_ptr.is_null() {
            parts.push(j.part_ptr);
        }
        parts
            .into_iter()
            .map(|p| {
                // SAFETY: partitions are live under the caller's partition read lock.
                let part = unsafe { &*p };
                fairway_core::multifactor::PartitionInput {
                    priority_job_factor: part.priority_job_factor,
                    norm_priority: part.norm_priority,
                    // SAFETY: TRES arrays hold slurmctld_tres_cnt entries or are NULL.
                    tres: unsafe { job_tres(j, part.tres_cnt, tres_cnt) },
                }
            })
            .collect()
    }

    /// The QOS of a job that asked for several (24.11's `--qos=a,b`), in
    /// `priority_array` order; empty for a job with one QOS.
    fn qos_inputs(&self) -> Vec<fairway_core::multifactor::QosInput> {
        let j = self.raw();
        if !multi_qos(j) {
            return Vec::new();
        }
        let _locks = AssocReadLock::take();
        #[cfg(slurm_ge_23_02)]
        {
            let mut out = Vec::new();
            crate::list::for_each(j.qos_list, |q| {
                // SAFETY: QOS records of assoc_mgr, under its QOS read lock.
                let q = unsafe { &*q.cast::<sys::slurmdb_qos_rec_t>() };
                out.push(fairway_core::multifactor::QosInput {
                    priority: q.priority,
                    // SAFETY: as above.
                    norm_priority: unsafe { q.usage.as_ref() }.map_or(0.0, |u| u.norm_priority),
                });
            });
            out
        }
        #[cfg(not(slurm_ge_23_02))]
        Vec::new()
    }

    /// Stores per-partition (and per-QOS) priorities, in `partition_inputs` ×
    /// `qos_inputs` order; with `incr_only`, an entry only ever rises. An empty slice
    /// (one partition, one QOS) frees 24.11's per-partition record, as multifactor does.
    fn set_priority_array(&mut self, prios: &[u32], incr_only: bool) {
        let j = self.raw_mut();
        #[cfg(not(slurm_ge_23_02))]
        {
            if prios.is_empty() {
                return;
            }
            // SAFETY: Slurm-allocated (xcalloc, one spare slot as Slurm sizes it) and
            // freed by slurmctld with the job; job write lock held.
            unsafe {
                if too_small(j.priority_array, prios.len()) {
                    xfree(std::ptr::addr_of_mut!(j.priority_array).cast());
                    j.priority_array = crate::string::xcalloc::<u32>(prios.len() + 1, c"priority_array");
                }
                store(j.priority_array, prios, incr_only);
            }
        }
        #[cfg(slurm_ge_23_02)]
        // SAFETY: `part_prio` and its arrays are Slurm-allocated and freed by slurmctld
        // with the job (or here, as multifactor does); job write lock held.
        unsafe {
            if prios.is_empty() {
                if let Some(pp) = j.part_prio.as_mut() {
                    xfree(std::ptr::addr_of_mut!(pp.priority_array).cast());
                    xfree(std::ptr::addr_of_mut!(pp.priority_array_names).cast());
                    xfree(std::ptr::addr_of_mut!(j.part_prio).cast());
                }
                return;
            }
            if j.part_prio.is_null() {
                j.part_prio = crate::string::xcalloc::<sys::priority_mult_t>(1, c"part_prio");
            }
            let pp = &mut *j.part_prio;
            // Reallocated when partitions changed since (their count or order may have).
            let last_part_update = crate::sym::lookup(c"last_part_update").map_or(0, |p| *p.cast::<libc::time_t>());
            if too_small(pp.priority_array, prios.len()) || pp.last_update < last_part_update {
                xfree(std::ptr::addr_of_mut!(pp.priority_array).cast());
                pp.priority_array = crate::string::xcalloc::<u32>(prios.len(), c"priority_array");
                if !j.part_ptr_list.is_null() {
                    let mut names = Vec::new();
                    crate::list::for_each(j.part_ptr_list, |p| {
                        names.push(std::ffi::CStr::from_ptr((*p.cast::<sys::part_record_t>()).name).to_string_lossy())
                    });
                    crate::string::replace_slurm_str(&mut pp.priority_array_names, &names.join(","));
                }
                pp.last_update = crate::unix_now();
            }
            store(pp.priority_array, prios, incr_only);
        }
    }
    /// The job as `fairway_core::priority` reads it, at `now`: one read per evaluation.
    /// `with_terms`: Fairway's terms are on, so their inputs are read too.
    pub fn priority_input(&mut self, knobs: &Knobs, now: i64, with_terms: bool) -> priority::JobInput {
        let job_id = self.job_id();
        priority::JobInput { job_id, ..self.pass_input(knobs, now, with_terms) }
    }

    /// [`priority_input`](Self::priority_input) in a pass over every pending job: the job
    /// id, a cache line no factor reads, only where something keys on it (the terms'
    /// starvation lift, the test builds' pass record); else 0.
    pub fn pass_input(&mut self, knobs: &Knobs, now: i64, with_terms: bool) -> priority::JobInput {
        let job_id = if with_terms || cfg!(feature = "fault-injection") { self.job_id() } else { 0 };
        if self.direct_set_prio() && self.priority() > 0 {
            return priority::JobInput { job_id, admin_priority: Some(self.priority()), ..Default::default() };
        }
        let tres_cnt = knobs.weights.tres.len();
        let partitions = self.partition_inputs(tres_cnt);
        priority::JobInput {
            job_id,
            admin_priority: None,
            factors: self.multifactor_input(now, tres_cnt, knobs.damping),
            terms: with_terms.then(|| self.terms_job()),
            qos: if partitions.is_empty() { Vec::new() } else { self.qos_inputs() },
            partitions,
        }
    }

    /// Writes what `fairway_core::priority` decided beside the priority itself: `sprio`'s
    /// factors and one priority per partition and QOS (with `incr_only` none falls). The
    /// priority is the caller's to set: slurmctld sets what `priority_p_set` returns,
    /// and the decay pass applies `INCR_ONLY` to it as multifactor does.
    pub fn write_priority(&mut self, out: &priority::JobPriority, incr_only: bool) {
        match &out.weighted {
            None => self.clear_priority_factors(),
            Some(w) => {
                self.store_priority_factors(w);
                self.set_priority_array(&out.per_partition, incr_only);
            }
        }
        if let (Some(t), true) = (&out.terms, crate::conf::debug_priority()) {
            tracing::info!(
                job_id = self.job_id(),
                expected_runtime = ?out.expected_runtime,
                predicted_work = t.predicted_work,
                deadline = t.deadline,
                starving_for = ?t.starving_for,
                priority = out.priority,
                "Fairway terms"
            );
        }
    }

    /// The fair-share factor of the job's association, as multifactor reads it: Fair
    /// Tree's `fs_factor`, else the classic factor from its (or, with Fairshare=parent, its
    /// parent's) effective usage and shares. 0 without an association.
    pub(crate) fn fairshare_factor(&self, damping: u16) -> f64 {
        let _locks = AssocReadLock::take();
        // SAFETY: the lock is held just above.
        unsafe { self.fairshare_factor_locked(damping) }
    }

    /// [`fairshare_factor`](Self::fairshare_factor) under assoc_mgr's read lock.
    ///
    /// # Safety
    /// The caller holds assoc_mgr's association read lock (and the job lock).
    unsafe fn fairshare_factor_locked(&self, damping: u16) -> f64 {
        let j = self.raw();
        // SAFETY: the association records are assoc_mgr's, kept alive and unchanged by the
        // caller's read lock; the caller's job lock keeps `assoc_ptr` valid.
        unsafe {
            let Some(a) = j.assoc_ptr.as_ref() else { return 0.0 };
            let Some(u) = a.usage.as_ref() else { return 0.0 };
            if fair_tree() {
                return u.fs_factor;
            }
            // Fairshare=parent takes the parent's values.
            let fs = if a.shares_raw == sys::SLURMDB_FS_USE_PARENT && !u.fs_assoc_ptr.is_null() {
                (*u.fs_assoc_ptr).usage.as_ref().unwrap_or(u)
            } else {
                u
            };
            let fs_ptr = if std::ptr::eq(fs, u) { j.assoc_ptr } else { u.fs_assoc_ptr };
            let mut efctv = fairway_read_long_double(std::ptr::addr_of!(fs.usage_efctv).cast());
            if (efctv - fairway_core::fairshare::NO_VAL).abs() < 1e-6 {
                // As multifactor: compute a user's effective usage on demand.
                crate::decay::set_assoc_usage(fs_ptr);
                efctv = fairway_read_long_double(std::ptr::addr_of!(fs.usage_efctv).cast());
            }
            fairway_core::fairshare::classic_factor(efctv, fs.shares_norm, damping)
        }
    }

    /// The inputs of multifactor's factors for this job, read now.
    fn multifactor_input(&self, now: i64, tres_cnt: usize, damping: u16) -> JobInput {
        let j = self.raw();
        let (cluster_cpus, node_count) = cluster_size();
        let mut input = JobInput {
            now,
            total_cpus: j.total_cpus,
            time_limit: (j.time_limit != sys::NO_VAL).then_some(j.time_limit),
            cluster_cpus,
            node_count,
            site_factor: j.site_factor,
            nice: sys::NICE_OFFSET,
            ..JobInput::default()
        };
        // SAFETY: every pointer below is NULL or points into slurmctld's job, partition,
        // association and QOS records, which the caller's job lock and our assoc_mgr read
        // lock keep alive and unchanged for the duration of this function.
        unsafe {
            if let Some(d) = j.details.as_ref() {
                input.accrue_time = d.accrue_time;
                input.min_cpus = d.min_cpus;
                input.max_cpus = (d.max_cpus != sys::NO_VAL).then_some(d.max_cpus);
                input.min_nodes = d.min_nodes;
                input.nice = d.nice;
            } else {
                input.min_nodes = 1;
            }
            if let Some(p) = j.part_ptr.as_ref() {
                input.part_max_time = p.max_time;
                input.part_priority_job_factor = p.priority_job_factor;
                input.part_norm_priority = p.norm_priority;
            }
            // Per TRES: allocated count (else requested), and the partition's total.
            if tres_cnt > 0 {
                let part_tres = j.part_ptr.as_ref().map_or(std::ptr::null_mut(), |p| p.tres_cnt);
                input.tres = job_tres(j, part_tres, tres_cnt);
            }
            let _locks = AssocReadLock::take();
            if let Some(a) = j.assoc_ptr.as_ref() {
                input.has_assoc = true;
                input.assoc_priority = a.priority;
                if let Some(u) = a.usage.as_ref() {
                    input.assoc_priority_norm = u.priority_norm;
                    input.fairshare = self.fairshare_factor_locked(damping);
                }
            }
            if let Some(q) = j.qos_ptr.as_ref() {
                input.qos_priority = q.priority;
                if let Some(u) = q.usage.as_ref() {
                    input.qos_norm_priority = u.norm_priority;
                }
            }
        }
        input
    }
}

// The core crate cannot see Slurm's headers; check its copies of their constants here.
const _: () = {
    use fairway_core::multifactor::{flags as f, NICE_OFFSET};
    assert!(f::SIZE_RELATIVE as u32 == sys::PRIORITY_FLAGS_SIZE_RELATIVE);
    assert!(f::FAIR_TREE as u32 == sys::PRIORITY_FLAGS_FAIR_TREE);
    assert!(f::INCR_ONLY as u32 == sys::PRIORITY_FLAGS_INCR_ONLY);
    assert!(f::NO_NORMAL_ASSOC as u32 == sys::PRIORITY_FLAGS_NO_NORMAL_ASSOC);
    assert!(f::NO_NORMAL_PART as u32 == sys::PRIORITY_FLAGS_NO_NORMAL_PART);
    assert!(f::NO_NORMAL_QOS as u32 == sys::PRIORITY_FLAGS_NO_NORMAL_QOS);
    assert!(f::NO_NORMAL_TRES as u32 == sys::PRIORITY_FLAGS_NO_NORMAL_TRES);
    assert!(NICE_OFFSET as u64 == sys::NICE_OFFSET as u64);
};
