//! slurmctld's and assoc_mgr's locks, and walking slurmctld's job list under them.
//!
//! Lock order, as slurmctld's `locks.h` and `assoc_mgr.h` require: slurmctld's locks
//! before assoc_mgr's, released in reverse. Every lock taken here is released by a
//! guard's `Drop`, so a panic (caught by [`crate::guard`] further out) never leaves
//! slurmctld with a lock held. See `crates/ffi/SAFETY.md` for what callers hold on entry.

use std::cell::Cell;

use slurm_sys as sys;

use crate::ctld::Ctld;
use crate::list::for_each;

/// slurmctld's locks, released when dropped.
struct CtldLock<'a>(&'a Ctld, sys::slurmctld_lock_t);

impl<'a> CtldLock<'a> {
    fn take(ctld: &'a Ctld, job: u32, node: u32, part: u32) -> Self {
        let l = sys::slurmctld_lock_t { conf: sys::NO_LOCK, job, node, part, fed: sys::NO_LOCK };
        // SAFETY: released in `drop`; callers take no assoc_mgr lock before this one.
        unsafe { (ctld.lock)(l) };
        Self(ctld, l)
    }
}

impl Drop for CtldLock<'_> {
    fn drop(&mut self) {
        // SAFETY: releases what `take` acquired.
        unsafe { (self.0.unlock)(self.1) };
    }
}

impl Ctld {
    /// Runs `f` under slurmctld's job write, node read and partition read locks (what
    /// multifactor's decay thread takes, and `site_factor_g_update` expects).
    pub(crate) fn with_job_write<R>(&self, f: impl FnOnce() -> R) -> R {
        let _held = CtldLock::take(self, sys::WRITE_LOCK, sys::READ_LOCK, sys::READ_LOCK);
        f()
    }

    /// Runs `f` under slurmctld's job, node and partition read locks (22.05's sprio RPC
    /// arrives without locks).
    pub(crate) fn with_job_read<R>(&self, f: impl FnOnce() -> R) -> R {
        let _held = CtldLock::take(self, sys::READ_LOCK, sys::READ_LOCK, sys::READ_LOCK);
        f()
    }

    /// slurmctld's job list (caller holds the job lock).
    pub(crate) fn job_list(&self) -> crate::list::SlurmList {
        // SAFETY: the address of slurmctld's `List job_list`, read under the job lock.
        unsafe { *self.job_list }
    }

    /// Marks the job list as updated (`last_job_update`) when a pass changed a priority,
    /// as multifactor does per job; once per pass is the same to its readers.
    pub(crate) fn touch_jobs(&self, changed: bool) {
        if changed {
            // SAFETY: slurmctld's `time_t last_job_update`; the caller holds the job write lock.
            unsafe { *self.last_job_update = crate::unix_now() };
        }
    }

    /// The jobs of slurmctld's job list (job lock held; valid while it stays held).
    pub(crate) fn jobs(&self) -> Vec<*mut sys::job_record_t> {
        let list = self.job_list();
        // SAFETY: slurmctld's job list under the caller's job lock (list_count takes the
        // list's own lock).
        let count = if list.is_null() { 0 } else { unsafe { sys::list_count(list) }.max(0) as usize };
        let mut v = Vec::with_capacity(count);
        for_each(list, |p| v.push(p.cast()));
        v
    }

    /// Runs `f` on each job of slurmctld's job list, [`PREFETCH_AHEAD`] jobs behind the
    /// walk of the list. The list is a pointer chase, one cache miss per node; a job's
    /// state, prefetched when its node is reached, arrives while the walk waits on later
    /// nodes, so `f` (usage accrual: mostly a look at the state) costs little on top.
    pub(crate) fn jobs_with(&self, mut f: impl FnMut(*mut sys::job_record_t)) {
        let mut behind = Behind::<_, PREFETCH_AHEAD>::new();
        for_each(self.job_list(), |p| {
            let j = p.cast();
            prefetch_job_usage(j);
            if let Some(j) = behind.push(j) {
                f(j);
            }
        });
        behind.rest().for_each(f);
    }

    /// Calls `f` on every job of slurmctld's job list (caller holds the job lock).
    pub(crate) fn for_each_job(&self, mut f: impl FnMut(*mut sys::job_record_t)) {
        for_each(self.job_list(), |p| f(p.cast()));
    }
}

/// A walk `N` steps behind another, without a copy of the whole: [`push`](Self::push)
/// gives back what was pushed `N` pushes before, [`rest`](Self::rest) the last `N`.
struct Behind<T, const N: usize> {
    ring: [Option<T>; N],
    pushed: usize,
}

impl<T: Copy, const N: usize> Behind<T, N> {
    fn new() -> Self {
        Self { ring: [None; N], pushed: 0 }
    }

    fn push(&mut self, x: T) -> Option<T> {
        let old = self.ring[self.pushed % N].replace(x);
        self.pushed += 1;
        old
    }

    /// What `push` has not given back yet, oldest first.
    fn rest(self) -> impl Iterator<Item = T> {
        let (ring, pushed) = (self.ring, self.pushed);
        (pushed.saturating_sub(N)..pushed).filter_map(move |i| ring[i % N])
    }
}

/// assoc_mgr lock levels for associations, QOS and TRES.
pub(crate) fn assoc_lock(assoc: u32, qos: u32, tres: u32) -> sys::assoc_mgr_lock_t {
    sys::assoc_mgr_lock_t { assoc, qos, tres, ..Default::default() }
}

/// Runs `f` under the given assoc_mgr locks, released however `f` ends.
pub(crate) fn with_assoc_mgr<R>(l: sys::assoc_mgr_lock_t, f: impl FnOnce() -> R) -> R {
    struct Unlock(sys::assoc_mgr_lock_t);
    impl Drop for Unlock {
        fn drop(&mut self) {
            // SAFETY: releases what `with_assoc_mgr` took.
            unsafe { sys::assoc_mgr_unlock(&mut self.0) };
        }
    }
    let mut held = Unlock(l);
    // SAFETY: paired with the unlock in `Unlock::drop`.
    unsafe { sys::assoc_mgr_lock(&mut held.0) };
    f()
}

thread_local! {
    /// Whether this thread holds the locks of [`AssocReadLock`] over a whole walk
    /// ([`with_assoc_read`]), so the reads inside need not take them per job.
    static ASSOC_READ_HELD: Cell<bool> = const { Cell::new(false) };
}

/// Holds assoc_mgr's association and QOS read locks, as multifactor does while it reads
/// them (unless [`with_assoc_read`] already holds them); released on drop.
pub(crate) struct AssocReadLock(Option<sys::assoc_mgr_lock_t>);

impl AssocReadLock {
    pub(crate) fn take() -> Self {
        if ASSOC_READ_HELD.get() {
            return Self(None);
        }
        let mut l = sys::assoc_mgr_lock_t { assoc: sys::READ_LOCK, qos: sys::READ_LOCK, ..Default::default() };
        // SAFETY: lock order is slurmctld locks (held by our caller) then assoc_mgr.
        unsafe { sys::assoc_mgr_lock(&mut l) };
        Self(Some(l))
    }
}

impl Drop for AssocReadLock {
    fn drop(&mut self) {
        if let Some(l) = self.0.as_mut() {
            // SAFETY: releases exactly what `take` acquired.
            unsafe { sys::assoc_mgr_unlock(l) };
        }
    }
}

/// Runs `f` holding assoc_mgr's association and QOS read locks (slurmctld's job lock
/// held by the caller, as lock order wants), for a walk that reads them for every job.
/// `f` must not take assoc_mgr locks for writing.
pub(crate) fn with_assoc_read<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            ASSOC_READ_HELD.set(self.0);
        }
    }
    // Dropped in reverse: the flag is restored before the locks are released.
    let _locks = AssocReadLock::take();
    let _restore = Restore(ASSOC_READ_HELD.replace(true));
    f()
}

/// How many jobs ahead the priority walk prefetches. Each job's priority reads a few
/// scattered cache lines of its record, details and factors; 50,000 records do not fit in
/// cache, so without prefetching the walk mostly waits on memory.
const PREFETCH_AHEAD: usize = 8;

/// Whether a walk's `f` reads the job's state (a cache line of its own) or the walk's
/// caller already read it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Prefetch {
    /// `f` reads the state too.
    WithState,
    /// The state was read before the walk.
    WithoutState,
}

/// Calls `f` on each job (job write lock held), prefetching what a priority reads of the
/// jobs [`PREFETCH_AHEAD`] (and twice that) further on.
pub(crate) fn walk_prefetched(
    jobs: &[*mut sys::job_record_t],
    what: Prefetch,
    mut f: impl FnMut(*mut sys::job_record_t),
) {
    for (i, &j) in jobs.iter().enumerate() {
        if let Some(&ahead) = jobs.get(i + 2 * PREFETCH_AHEAD) {
            if what == Prefetch::WithState {
                prefetch_job_usage(ahead);
            }
            prefetch_job(ahead);
        }
        if let Some(&ahead) = jobs.get(i + PREFETCH_AHEAD) {
            prefetch_job_parts(ahead);
        }
        f(j);
    }
}

/// Prefetches what usage accrual reads of every job: its state (and, for the few running
/// jobs, the rest follows on demand).
fn prefetch_job_usage(j: *mut sys::job_record_t) {
    // SAFETY: a field address of a live job record (no read happens).
    unsafe { prefetch(std::ptr::addr_of!((*j).job_state)) };
}

/// Asks the CPU to bring `p`'s cache line in; a hint, with no effect on results.
#[inline(always)]
fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and reads nothing the program sees.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Prefetches the fields of a job record that its priority reads (job write lock held).
fn prefetch_job(j: *mut sys::job_record_t) {
    // SAFETY: field addresses of a live job record (no read happens).
    unsafe {
        prefetch(std::ptr::addr_of!((*j).priority));
        prefetch(std::ptr::addr_of!((*j).details));
        prefetch(std::ptr::addr_of!((*j).prio_factors));
        prefetch(std::ptr::addr_of!((*j).assoc_ptr));
        prefetch(std::ptr::addr_of!((*j).part_ptr));
        prefetch(std::ptr::addr_of!((*j).qos_ptr));
        prefetch(std::ptr::addr_of!((*j).time_limit));
        prefetch(std::ptr::addr_of!((*j).total_cpus));
        prefetch(std::ptr::addr_of!((*j).site_factor));
        // Read for every job, to learn it has a single partition (and QOS).
        prefetch(std::ptr::addr_of!((*j).part_ptr_list));
        #[cfg(slurm_ge_23_02)]
        prefetch(std::ptr::addr_of!((*j).qos_list));
    }
}

/// Prefetches what a job record points to that its priority reads: details and the
/// factors object (the record itself was prefetched earlier).
fn prefetch_job_parts(j: *mut sys::job_record_t) {
    // SAFETY: a live job record under the job write lock; its pointers are NULL or live.
    unsafe {
        let d = (*j).details;
        if !d.is_null() {
            prefetch(std::ptr::addr_of!((*d).accrue_time));
            prefetch(std::ptr::addr_of!((*d).max_cpus));
            prefetch(std::ptr::addr_of!((*d).min_cpus));
            prefetch(std::ptr::addr_of!((*d).min_nodes));
            prefetch(std::ptr::addr_of!((*d).nice));
        }
        // The factors object spans three cache lines (136 bytes), all rewritten.
        let f = (*j).prio_factors;
        if !f.is_null() {
            let bytes = f.cast::<u8>();
            for off in (0..std::mem::size_of::<sys::priority_factors_object_t>()).step_by(64) {
                prefetch(bytes.add(off));
            }
            prefetch(bytes.add(std::mem::size_of::<sys::priority_factors_object_t>() - 1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Behind;

    #[test]
    fn a_walk_behind_sees_every_item_once_in_order() {
        for n in [0, 1, 3, 4, 5, 17] {
            let mut b = Behind::<u32, 4>::new();
            let mut seen: Vec<u32> = (0..n).filter_map(|x| b.push(x)).collect();
            assert_eq!(seen, (0..n.saturating_sub(4)).collect::<Vec<_>>(), "{n} pushed: 4 behind");
            seen.extend(b.rest());
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "{n} pushed");
        }
    }
}
