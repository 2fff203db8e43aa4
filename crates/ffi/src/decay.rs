//! The decay thread of `priority/fairway`: what multifactor's `_decay_thread` does.
//!
//! Every `PriorityCalcPeriod` it decays association and QOS usage by the half-life,
//! adds the usage of running jobs up the association tree (and removes their
//! `grp_used_tres_run_secs`, as limits expect), recomputes fair share (Fair Tree or
//! classic, in `fairway_core::fairshare`) and the priority of pending jobs, and records
//! when it ran in `StateSaveLocation/fairway_priority_last_decay` so a restart (kill -9
//! included) resumes from the last pass. Usage itself (`assoc_usage`, `qos_usage`) is
//! saved after every pass that added usage, so a crash loses at most one calc period of
//! it (slurmctld alone saves it every 5 minutes). `PriorityUsageResetPeriod` clears
//! usage at local midnights as multifactor does; the last reset is kept in the same file.

use std::collections::HashMap;
use std::ffi::CStr;
use std::os::raw::{c_int, c_void};
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use fairway_core::fairshare::{self, Assoc, AssocTree, ClassicMode};
use slurm_sys as sys;

use crate::job::JobRecord;

extern "C" {
    fn fairway_read_long_double(p: *const c_void) -> f64;
    fn fairway_write_long_double(p: *mut c_void, v: f64);
    fn fairway_scale_long_double(p: *mut c_void, factor: f64);
    fn fairway_add_long_double(p: *mut c_void, v: f64);
}

/// A job's priority at a given time, from the plugin (`None`: no plugin instance).
pub type Evaluate<'a> = dyn FnMut(&mut JobRecord<'_>, i64) -> Option<u32> + 'a;

/// Runs its argument with the plugin's evaluator of priorities, set up once for a whole
/// walk of the job list rather than per job (the plugin's `priority_pass`).
pub type Recompute = fn(&mut dyn FnMut(&mut Evaluate<'_>));

/// Called after each pass with no locks held (the plugin's periodic work).
pub type AfterPass = fn();

/// slurmctld-only symbols, resolved at run time (see [`crate::sym`]).
pub(crate) struct Ctld {
    pub(crate) lock: unsafe extern "C" fn(sys::slurmctld_lock_t),
    pub(crate) unlock: unsafe extern "C" fn(sys::slurmctld_lock_t),
    billable: unsafe extern "C" fn(*mut sys::job_record_t, libc::time_t, bool) -> f64,
    #[cfg(not(slurm_ge_24_05))]
    pub(crate) find_part: unsafe extern "C" fn(*mut std::os::raw::c_char) -> *mut sys::part_record_t,
    pub(crate) validate_operator: unsafe extern "C" fn(u32) -> bool,
    pub(crate) job_list: *const crate::list::SlurmList,
    pub(crate) acct_db_conn: *const *mut c_void,
    tres_cnt: *const c_int,
    accounting_enforce: *const u16,
    last_job_update: *mut libc::time_t,
    /// `acct_policy_get_acct_used_limits` and `acct_policy_get_user_used_limits`: a
    /// QOS's per-account and per-user running TRES-seconds, which 24.11's limits read.
    #[cfg(slurm_ge_23_02)]
    used_limits: (UsedLimitsAcct, UsedLimitsUser),
}

#[cfg(slurm_ge_23_02)]
type UsedLimitsAcct =
    unsafe extern "C" fn(*mut crate::list::SlurmList, *mut std::os::raw::c_char) -> *mut sys::slurmdb_used_limits_t;
#[cfg(slurm_ge_23_02)]
type UsedLimitsUser = unsafe extern "C" fn(*mut crate::list::SlurmList, u32) -> *mut sys::slurmdb_used_limits_t;

// SAFETY: the pointers are addresses of slurmctld's process-wide globals and functions.
unsafe impl Send for Ctld {}
unsafe impl Sync for Ctld {}

impl Ctld {
    pub(crate) fn resolve() -> Option<Self> {
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
                    unsafe extern "C" fn(*mut std::os::raw::c_char) -> *mut sys::part_record_t,
                >(f(c"find_part_record")?),
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

    fn tres_cnt(&self) -> usize {
        // SAFETY: plain read of slurmctld's `int slurmctld_tres_cnt`.
        unsafe { (*self.tres_cnt).max(0) as usize }
    }

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

    fn enforce_limits(&self) -> bool {
        // SAFETY: plain read of slurmctld's `uint16_t accounting_enforce`.
        u32::from(unsafe { *self.accounting_enforce }) & sys::ACCOUNTING_ENFORCE_LIMITS != 0
    }

    /// Runs `f` under slurmctld's job write, node read and partition read locks.
    fn with_job_write<R>(&self, f: impl FnOnce() -> R) -> R {
        let l = sys::slurmctld_lock_t {
            conf: sys::NO_LOCK,
            job: sys::WRITE_LOCK,
            node: sys::READ_LOCK,
            part: sys::READ_LOCK,
            fed: sys::NO_LOCK,
        };
        /// Releases the locks on every way out, a panic of `f` included (the thread's
        /// guard logs it; slurmctld must not be left with its job lock held).
        struct Unlock<'a>(&'a Ctld, sys::slurmctld_lock_t);
        impl Drop for Unlock<'_> {
            fn drop(&mut self) {
                // SAFETY: releases what `with_job_write` took.
                unsafe { (self.0.unlock)(self.1) };
            }
        }
        // SAFETY: taken and released in order; slurmctld locks before assoc_mgr's.
        unsafe { (self.lock)(l) };
        let _unlock = Unlock(self, l);
        f()
    }

    /// Marks the job list as updated (`last_job_update`) when a pass changed a priority,
    /// as multifactor does per job; once per pass is the same to its readers.
    fn touch_jobs(&self, changed: bool) {
        if changed {
            // SAFETY: slurmctld's `time_t last_job_update`; the caller holds the job write lock.
            unsafe { *self.last_job_update = now() };
        }
    }

    /// The jobs of slurmctld's job list (job lock held; valid while it stays held).
    fn jobs(&self) -> Vec<*mut sys::job_record_t> {
        self.jobs_with(|_| {})
    }

    /// [`Ctld::jobs`], running `f` on each job [`PREFETCH_AHEAD`] jobs behind the walk
    /// of the list. The list is a pointer chase, one cache miss per node; a job's state,
    /// prefetched when its node is reached, arrives while the walk waits on later nodes,
    /// so `f` (usage accrual: mostly a look at the state) costs little on top.
    fn jobs_with(&self, mut f: impl FnMut(*mut sys::job_record_t)) -> Vec<*mut sys::job_record_t> {
        // SAFETY: job_list is slurmctld's job list; the caller holds the job lock.
        let list = unsafe { *self.job_list };
        // SAFETY: as above (list_count takes the list's own lock).
        let count = if list.is_null() { 0 } else { unsafe { sys::list_count(list) }.max(0) as usize };
        let mut v = Vec::with_capacity(count);
        for_each(list, |p| {
            let j = p.cast();
            prefetch_job_usage(j);
            v.push(j);
            if let Some(behind) = v.len().checked_sub(PREFETCH_AHEAD + 1) {
                f(v[behind]);
            }
        });
        for &j in &v[v.len().saturating_sub(PREFETCH_AHEAD)..] {
            f(j);
        }
        v
    }

    fn for_each_job(&self, mut f: impl FnMut(*mut sys::job_record_t)) {
        // SAFETY: job_list is slurmctld's job list; the caller holds the job lock.
        let list = unsafe { *self.job_list };
        for_each(list, |p| f(p.cast()));
    }
}

pub(crate) use crate::list::for_each;

fn assoc_lock(assoc: u32, qos: u32, tres: u32) -> sys::assoc_mgr_lock_t {
    sys::assoc_mgr_lock_t { assoc, qos, tres, ..Default::default() }
}

/// Runs `f` under the given assoc_mgr locks, released however `f` ends.
fn with_assoc_mgr<R>(l: sys::assoc_mgr_lock_t, f: impl FnOnce() -> R) -> R {
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

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// When the decay thread last ran (Slurm's `g_last_ran`), shared with `job_end`.
static LAST_RAN: AtomicI64 = AtomicI64::new(0);

/// Whether a job added usage since the last save of assoc_mgr's state.
static USAGE_ADDED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The running decay thread; dropping it stops and joins the thread.
pub struct DecayThread {
    stop: Arc<(Mutex<bool>, Condvar)>,
    handle: Option<JoinHandle<()>>,
    ctld: Arc<Ctld>,
}

impl Drop for DecayThread {
    fn drop(&mut self) {
        let (m, cv) = &*self.stop;
        *m.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Knobs the thread reads from `slurm.conf` (re-read on reconfigure via a new thread).
#[derive(Debug, Clone, Copy)]
struct Knobs {
    half_life: u32,
    calc_period: u32,
    reset_period: u16,
    flags: u16,
}

impl Knobs {
    fn read() -> Self {
        // SAFETY: plain reads of the initialised global config.
        let c = unsafe { &*std::ptr::addr_of!(sys::slurm_conf) };
        Self {
            half_life: c.priority_decay_hl,
            calc_period: c.priority_calc_period.max(1),
            reset_period: c.priority_reset_period,
            flags: c.priority_flags,
        }
    }

    fn fair_tree(self) -> bool {
        u32::from(self.flags) & sys::PRIORITY_FLAGS_FAIR_TREE != 0
    }

    fn classic_mode(self) -> ClassicMode {
        if u32::from(self.flags) & sys::PRIORITY_FLAGS_DEPTH_OBLIVIOUS != 0 {
            ClassicMode::DepthOblivious
        } else {
            ClassicMode::Classic
        }
    }

    fn calculate_running(self) -> bool {
        u32::from(self.flags) & sys::PRIORITY_FLAGS_CALCULATE_RUNNING != 0
    }

    fn incr_only(self) -> bool {
        u32::from(self.flags) & sys::PRIORITY_FLAGS_INCR_ONLY != 0
    }
}

/// Starts the decay thread if this is slurmctld with slurmdbd accounting (as
/// multifactor does); `None` otherwise.
pub fn start(recompute: Recompute, after_pass: AfterPass) -> Option<DecayThread> {
    // SAFETY: libslurmfull function without arguments; reads slurm_conf.
    if !crate::sym::in_slurmctld() || !unsafe { sys::slurm_with_slurmdbd() } {
        return None;
    }
    // SAFETY: plain read of assoc_mgr's root pointer.
    if unsafe { std::ptr::addr_of!(sys::assoc_mgr_root_assoc).read() }.is_null() {
        tracing::error!("no association tree (assoc_mgr root missing): fair share and usage decay are off");
        return None;
    }
    let Some(ctld) = Ctld::resolve() else {
        tracing::error!("slurmctld symbols not found: fair share and usage decay are off");
        return None;
    };
    // As multifactor: root's effective usage is 1, and g_last_ran is known before init
    // returns, so a job ending right away is charged from the right time.
    with_assoc_mgr(assoc_lock(sys::WRITE_LOCK, sys::NO_LOCK, sys::NO_LOCK), || {
        // SAFETY: assoc write lock held; root checked non-NULL above.
        unsafe {
            if let Some(u) = (*std::ptr::addr_of!(sys::assoc_mgr_root_assoc).read()).usage.as_mut() {
                fairway_write_long_double(std::ptr::addr_of_mut!(u.usage_efctv).cast(), 1.0);
            }
        }
    });
    LAST_RAN.store(read_state().0, Ordering::Relaxed);
    let ctld = Arc::new(ctld);
    let stop = Arc::new((Mutex::new(false), Condvar::new()));
    let (c2, s2) = (ctld.clone(), stop.clone());
    let handle = std::thread::Builder::new()
        .name("fairway_decay".into())
        .spawn(move || crate::guard("decay thread", (), || run(&c2, &s2, recompute, after_pass)))
        .ok()?;
    Some(DecayThread { stop, handle: Some(handle), ctld })
}

/// `priority_p_recover` (23.02+): without slurmdbd no decay thread runs, so the
/// priorities (and sprio's factors) of recovered jobs are computed once here, under
/// the job write lock, as multifactor does. With slurmdbd the decay thread does it.
pub fn recover(recompute: Recompute) {
    // SAFETY: libslurmfull function reading slurm_conf.
    if !crate::sym::in_slurmctld() || unsafe { sys::slurm_with_slurmdbd() } {
        return;
    }
    let Some(ctld) = Ctld::resolve() else { return };
    let knobs = Knobs::read();
    let start = now();
    ctld.with_job_write(|| {
        let mut changed = false;
        recompute(&mut |eval| {
            ctld.for_each_job(|j| {
                if decay_apply_new_usage(&ctld, knobs, j, LAST_RAN.load(Ordering::Relaxed), start) {
                    changed |= apply_weighted(knobs, j, start, eval);
                }
            })
        });
        ctld.touch_jobs(changed);
    });
}

impl DecayThread {
    /// `priority_p_reconfig`: slurmctld reset `grp_used_tres_run_secs` when
    /// `assoc_clear`; remove what running jobs used up to the last pass again.
    pub fn reconfig(&self, assoc_clear: bool) {
        if assoc_clear {
            init_grp_used_tres_run_secs(&self.ctld, LAST_RAN.load(Ordering::Relaxed));
        }
    }

    /// `priority_p_job_end`: adds the job's usage since the last pass (job lock held).
    pub fn job_end(&self, job: &mut JobRecord<'_>) {
        let knobs = Knobs::read();
        apply_new_usage(&self.ctld, knobs, job.raw_mut(), LAST_RAN.load(Ordering::Relaxed), now(), true);
    }
}

fn state_file() -> PathBuf {
    // SAFETY: reads a NUL-terminated path from the initialised config.
    let dir = unsafe {
        let p = (*std::ptr::addr_of!(sys::slurm_conf)).state_save_location;
        if p.is_null() {
            return PathBuf::from("/dev/null");
        }
        CStr::from_ptr(p).to_string_lossy().into_owned()
    };
    PathBuf::from(dir).join("fairway_priority_last_decay")
}

/// (last pass, last usage reset) from the state file; zeros if there is none.
fn read_state() -> (i64, i64) {
    let path = state_file();
    match std::fs::read_to_string(&path) {
        Ok(s) => {
            let mut f = s.split_whitespace().map(|t| t.parse::<i64>());
            match (f.next(), f.next()) {
                (Some(Ok(ran)), Some(Ok(reset))) => (ran, reset),
                (Some(Ok(ran)), None) => (ran, 0),
                _ => {
                    tracing::error!("{}: unreadable, starting decay afresh", path.display());
                    (0, 0)
                }
            }
        }
        Err(_) => {
            tracing::info!("no last decay ({}) to recover", path.display());
            (0, 0)
        }
    }
}

fn write_state(last_ran: i64, last_reset: i64) {
    let path = state_file();
    let tmp = path.with_extension("new");
    let r = std::fs::write(&tmp, format!("{last_ran} {last_reset}\n")).and_then(|_| std::fs::rename(&tmp, &path));
    if let Err(e) = r {
        tracing::error!("cannot save {}: {e}", path.display());
    }
}

fn run(ctld: &Ctld, stop: &(Mutex<bool>, Condvar), recompute: Recompute, after_pass: AfterPass) {
    let mut last_ran = LAST_RAN.load(Ordering::Relaxed);
    let (_, saved_reset) = read_state();
    let mut last_reset = if saved_reset == 0 { now() } else { saved_reset };
    let mut next_reset: Option<i64> = None;
    let mut reset_now_done = false;
    let mut knobs = Knobs::read();
    init_grp_used_tres_run_secs(ctld, last_ran);
    let decay_factor = |k: Knobs| fairshare::decay_factor(k.half_life);
    let mut next = std::time::Instant::now();
    loop {
        let start = now();
        let prev = knobs;
        knobs = Knobs::read();
        if prev.reset_period != knobs.reset_period {
            next_reset = None; // reconfigured: recompute from the last reset
            reset_now_done = false;
        }
        // PriorityUsageResetPeriod, as multifactor's decay loop applies it.
        match fairshare::ResetPeriod::from_slurm(knobs.reset_period) {
            fairshare::ResetPeriod::None => {}
            fairshare::ResetPeriod::Now => {
                if !reset_now_done {
                    reset_usage(ctld);
                    last_reset = start;
                    reset_now_done = true;
                }
            }
            period => {
                if next_reset.is_none() {
                    next_reset = fairshare::next_reset_local(period, last_reset, start);
                }
                if let Some(at) = next_reset.filter(|&at| start >= at) {
                    tracing::info!("PriorityUsageResetPeriod: clearing association and QOS usage");
                    reset_usage(ctld);
                    last_reset = at;
                    next_reset = fairshare::next_reset_local(period, last_reset, start);
                }
            }
        }
        if !knobs.fair_tree() {
            with_assoc_mgr(assoc_lock(sys::WRITE_LOCK, sys::NO_LOCK, sys::NO_LOCK), || {
                let (mut tree, ptrs) = snapshot();
                tree.classic(knobs.classic_mode());
                write_back(&tree, &ptrs, false);
            });
        }
        let delta = (start - last_ran) as f64;
        if last_ran != 0 && delta > 0.0 {
            let real = fairshare::real_decay(decay_factor(knobs), delta);
            apply_decay(ctld, real);
            ctld.with_job_write(|| {
                // SAFETY: the job write lock is held, as site_factor_g_update requires.
                unsafe { sys::site_factor_g_update() };
            });
            if !knobs.fair_tree() {
                ctld.with_job_write(|| {
                    let mut changed = false;
                    let jobs = ctld.jobs();
                    // No assoc_mgr lock across this walk: usage accrual takes the write lock.
                    recompute(&mut |eval| {
                        walk_prefetched(&jobs, |j| {
                            if decay_apply_new_usage(ctld, knobs, j, last_ran, start) {
                                changed |= apply_weighted(knobs, j, start, eval);
                            }
                        })
                    });
                    ctld.touch_jobs(changed);
                });
            }
        }
        if knobs.fair_tree() {
            // One job write lock over usage, Fair Tree and priorities (multifactor takes it
            // twice): no job can come or go in between, so both passes go over the job
            // pointers collected once.
            ctld.with_job_write(|| {
                let jobs = ctld.jobs_with(|j| {
                    decay_apply_new_usage(ctld, knobs, j, last_ran, start);
                });
                with_assoc_mgr(assoc_lock(sys::WRITE_LOCK, sys::NO_LOCK, sys::NO_LOCK), || {
                    let (mut tree, ptrs) = snapshot();
                    // SAFETY: plain read of assoc_mgr's user association count (lock held).
                    let users = unsafe { std::ptr::addr_of!(sys::g_user_assoc_count).read() };
                    tree.fair_tree(users);
                    write_back(&tree, &ptrs, true);
                });
                // assoc_mgr's association and QOS read locks once over the walk rather
                // than per job (multifactor's way): about a tenth of a pass.
                let mut changed = false;
                recompute(&mut |eval| {
                    crate::multifactor::with_assoc_read(|| {
                        walk_prefetched(&jobs, |j| changed |= apply_weighted(knobs, j, start, eval))
                    })
                });
                ctld.touch_jobs(changed);
            });
        }
        last_ran = start;
        LAST_RAN.store(last_ran, Ordering::Relaxed);
        // Save usage with the pass, not only at slurmctld's 5-minute checkpoint, so a
        // crash (kill -9) loses at most one PriorityCalcPeriod of usage. Passes that only
        // decayed usage skip it: after a restart the saved last pass time re-applies
        // the decay, off by at most one period's decay (under 0.01% at a 7-day half-life).
        if USAGE_ADDED.swap(false, Ordering::Relaxed) {
            // SAFETY: libslurmfull function; takes assoc_mgr's file write lock itself.
            unsafe { sys::dump_assoc_mgr_state() };
        }
        write_state(last_ran, last_reset);
        crate::guard("decay pass hook", (), after_pass);

        next += Duration::from_secs(u64::from(knobs.calc_period));
        let (m, cv) = stop;
        let mut stopped = m.lock().unwrap_or_else(|e| e.into_inner());
        while !*stopped {
            let left = next.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            stopped = cv.wait_timeout(stopped, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        if *stopped {
            return;
        }
    }
}

/// Snapshots the association tree (assoc_mgr lock held) into core form.
///
/// Children come from each association's `children_list`, which assoc_mgr fills by
/// *fair-share* parent: a user under a `Fairshare=parent` account is listed under the
/// first ancestor with shares of its own, as both fair-share algorithms expect.
fn snapshot() -> (AssocTree, Vec<*mut sys::slurmdb_assoc_rec_t>) {
    let mut tree = AssocTree::default();
    let mut ptrs: Vec<*mut sys::slurmdb_assoc_rec_t> = Vec::new();
    let mut kids: Vec<Vec<*mut sys::slurmdb_assoc_rec_t>> = Vec::new();
    let mut index: HashMap<usize, usize> = HashMap::new();
    // SAFETY: the caller holds the assoc lock; every association and its usage struct
    // stay valid until it is released.
    unsafe {
        let root = std::ptr::addr_of!(sys::assoc_mgr_root_assoc).read();
        let mut stack = vec![root];
        while let Some(a) = stack.pop() {
            if a.is_null() || index.contains_key(&(a as usize)) {
                continue;
            }
            index.insert(a as usize, ptrs.len());
            ptrs.push(a);
            let r = &*a;
            let mut children = Vec::new();
            let node = match r.usage.as_ref() {
                Some(u) => {
                    for_each(u.children_list, |c| children.push(c.cast::<sys::slurmdb_assoc_rec_t>()));
                    Assoc {
                        is_user: !r.user.is_null(),
                        use_parent: r.shares_raw == sys::SLURMDB_FS_USE_PARENT,
                        shares_raw: r.shares_raw,
                        level_shares: u.level_shares,
                        shares_norm: u.shares_norm,
                        usage_raw: fairway_read_long_double(std::ptr::addr_of!(u.usage_raw).cast()),
                        ..Assoc::default()
                    }
                }
                None => Assoc::default(),
            };
            tree.nodes.push(node);
            stack.extend(children.iter().rev().copied());
            kids.push(children);
        }
        let lookup = |p: *mut sys::slurmdb_assoc_rec_t| index.get(&(p as usize)).copied();
        for (i, &a) in ptrs.iter().enumerate() {
            tree.nodes[i].children = kids[i].iter().filter_map(|&c| lookup(c)).collect();
            if let Some(u) = (*a).usage.as_ref() {
                tree.nodes[i].parent = lookup(u.parent_assoc_ptr);
                tree.nodes[i].fs_parent = lookup(u.fs_assoc_ptr);
            }
        }
    }
    (tree, ptrs)
}

/// Writes computed fair-share fields back (assoc_mgr write lock held).
fn write_back(tree: &AssocTree, ptrs: &[*mut sys::slurmdb_assoc_rec_t], fair_tree: bool) {
    if fair_tree {
        // SAFETY: root is ptrs[0]; lock held as below.
        unsafe {
            if let Some(u) = ptrs.first().and_then(|&r| (*r).usage.as_mut()) {
                fairway_write_long_double(std::ptr::addr_of_mut!(u.level_fs).cast(), tree.nodes[0].level_fs);
            }
        }
    }
    // Root's own usage fields are assoc_mgr's (multifactor never computes them).
    for (n, &a) in tree.nodes.iter().zip(ptrs).skip(1) {
        // SAFETY: as in `snapshot`; the lock is still held.
        unsafe {
            let Some(u) = (*a).usage.as_mut() else { continue };
            if fair_tree {
                fairway_write_long_double(std::ptr::addr_of_mut!(u.usage_efctv).cast(), n.usage_efctv);
                fairway_write_long_double(std::ptr::addr_of_mut!(u.usage_norm).cast(), n.usage_norm);
                fairway_write_long_double(std::ptr::addr_of_mut!(u.level_fs).cast(), n.level_fs);
                if n.is_user {
                    u.fs_factor = n.fs_factor;
                }
            } else {
                fairway_write_long_double(std::ptr::addr_of_mut!(u.usage_efctv).cast(), n.usage_efctv);
                if !n.is_user {
                    fairway_write_long_double(std::ptr::addr_of_mut!(u.usage_norm).cast(), n.usage_norm);
                }
            }
        }
    }
}

/// `priority_p_set_assoc_usage` (classic): slurmctld calls it, assoc lock held, for an
/// association whose effective usage is not computed yet (e.g. for `sshare`).
///
/// # Safety
/// `assoc` is NULL or a live association, and the caller holds assoc_mgr's assoc lock.
pub unsafe fn set_assoc_usage(assoc: *mut sys::slurmdb_assoc_rec_t) {
    if assoc.is_null() {
        return;
    }
    let knobs = Knobs::read();
    let (mut tree, ptrs) = snapshot();
    // Root has no fair-share parent; multifactor never computes its usage either.
    let Some(i) = ptrs.iter().position(|&p| p == assoc).filter(|&i| i != AssocTree::ROOT) else { return };
    // Effective usage depends on the fs parent's, computed top down.
    let mut chain = vec![i];
    while let Some(p) = tree.nodes[*chain.last().unwrap()].fs_parent {
        if p == AssocTree::ROOT {
            break;
        }
        chain.push(p);
    }
    for &n in chain.iter().rev() {
        tree.set_assoc_usage(n, knobs.classic_mode());
    }
    // SAFETY: caller holds the assoc lock; `assoc` is a live association.
    unsafe {
        if let Some(u) = (*assoc).usage.as_mut() {
            fairway_write_long_double(std::ptr::addr_of_mut!(u.usage_norm).cast(), tree.nodes[i].usage_norm);
            fairway_write_long_double(std::ptr::addr_of_mut!(u.usage_efctv).cast(), tree.nodes[i].usage_efctv);
        }
    }
}

/// `_set_norm_shares`: after `scontrol reconfigure` switched Fair Tree on or off,
/// renormalises every association's shares the way the new algorithm expects.
pub fn renormalize_shares() {
    with_assoc_mgr(assoc_lock(sys::WRITE_LOCK, sys::NO_LOCK, sys::NO_LOCK), || {
        // SAFETY: assoc write lock held; associations stay valid while it is.
        unsafe {
            let root = std::ptr::addr_of!(sys::assoc_mgr_root_assoc).read();
            let mut stack: Vec<*mut sys::slurmdb_assoc_rec_t> = Vec::new();
            if let Some(u) = root.as_ref().and_then(|r| r.usage.as_ref()) {
                for_each(u.children_list, |c| stack.push(c.cast()));
            }
            while let Some(a) = stack.pop() {
                sys::assoc_mgr_normalize_assoc_shares(a);
                if (*a).user.is_null() {
                    if let Some(u) = (*a).usage.as_ref() {
                        for_each(u.children_list, |c| stack.push(c.cast()));
                    }
                }
            }
        }
    });
}

/// `_apply_decay`: decays usage of every association and of QOS without NoDecay.
fn apply_decay(ctld: &Ctld, real_decay: f64) {
    if real_decay == 1.0 {
        return;
    }
    let tres = ctld.tres_cnt();
    with_assoc_mgr(assoc_lock(sys::WRITE_LOCK, sys::WRITE_LOCK, sys::NO_LOCK), || {
        // SAFETY: assoc and QOS write locks held; lists and records stay valid.
        unsafe {
            let decay_usage = |u: *mut sys::slurmdb_assoc_usage| {
                let Some(u) = u.as_mut() else { return };
                fairway_scale_long_double(std::ptr::addr_of_mut!(u.usage_raw).cast(), real_decay);
                if !u.usage_tres_raw.is_null() {
                    for t in 0..tres {
                        fairway_scale_long_double(u.usage_tres_raw.cast::<[u8; 16]>().add(t).cast(), real_decay);
                    }
                }
                u.grp_used_wall *= real_decay;
            };
            for_each(std::ptr::addr_of!(sys::assoc_mgr_assoc_list).read(), |p| {
                let a = &*p.cast::<sys::slurmdb_assoc_rec_t>();
                decay_usage(a.usage);
                if !a.leaf_usage.is_null() && a.leaf_usage != a.usage {
                    decay_usage(a.leaf_usage);
                }
            });
            for_each(std::ptr::addr_of!(sys::assoc_mgr_qos_list).read(), |p| {
                let q = &*p.cast::<sys::slurmdb_qos_rec_t>();
                if q.flags & sys::QOS_FLAG_NO_DECAY != 0 {
                    return;
                }
                let Some(u) = q.usage.as_mut() else { return };
                fairway_scale_long_double(std::ptr::addr_of_mut!(u.usage_raw).cast(), real_decay);
                if !u.usage_tres_raw.is_null() {
                    for t in 0..tres {
                        fairway_scale_long_double(u.usage_tres_raw.cast::<[u8; 16]>().add(t).cast(), real_decay);
                    }
                }
                u.grp_used_wall *= real_decay;
            });
        }
    });
}

/// `_reset_usage`: clears usage of every association and QOS (NoDecay ones too).
fn reset_usage(ctld: &Ctld) {
    let tres = ctld.tres_cnt();
    with_assoc_mgr(assoc_lock(sys::WRITE_LOCK, sys::WRITE_LOCK, sys::NO_LOCK), || {
        // SAFETY: assoc and QOS write locks held; lists and records stay valid.
        unsafe {
            let clear = |raw: *mut u128, tres_raw: *mut u128, wall: &mut f64| {
                fairway_write_long_double(raw.cast(), 0.0);
                if !tres_raw.is_null() {
                    for t in 0..tres {
                        fairway_write_long_double(tres_raw.add(t).cast(), 0.0);
                    }
                }
                *wall = 0.0;
            };
            for_each(std::ptr::addr_of!(sys::assoc_mgr_assoc_list).read(), |p| {
                let a = &mut *p.cast::<sys::slurmdb_assoc_rec_t>();
                if let Some(u) = a.usage.as_mut() {
                    clear(std::ptr::addr_of_mut!(u.usage_raw).cast(), u.usage_tres_raw.cast(), &mut u.grp_used_wall);
                }
                // An account's separate leaf usage goes entirely, as in multifactor.
                if !a.leaf_usage.is_null() && a.leaf_usage != a.usage {
                    sys::slurmdb_destroy_assoc_usage(a.leaf_usage.cast());
                    a.leaf_usage = std::ptr::null_mut();
                }
            });
            for_each(std::ptr::addr_of!(sys::assoc_mgr_qos_list).read(), |p| {
                if let Some(u) = (*p.cast::<sys::slurmdb_qos_rec_t>()).usage.as_mut() {
                    clear(std::ptr::addr_of_mut!(u.usage_raw).cast(), u.usage_tres_raw.cast(), &mut u.grp_used_wall);
                }
            });
        }
    });
    USAGE_ADDED.store(true, Ordering::Relaxed); // save the cleared state with this pass
}

fn job_state_flags(j: &sys::job_record_t) -> (u32, u32) {
    (j.job_state & sys::JOB_STATE_BASE, j.job_state)
}

fn is_finished(j: &sys::job_record_t) -> bool {
    job_state_flags(j).0 > sys::JOB_SUSPENDED
}

fn is_pending(j: &sys::job_record_t) -> bool {
    job_state_flags(j).0 == sys::JOB_PENDING
}

/// `decay_apply_new_usage` (job write lock held): false when the job needs nothing more.
fn decay_apply_new_usage(ctld: &Ctld, k: Knobs, j: *mut sys::job_record_t, last_ran: i64, start: i64) -> bool {
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

/// How many jobs ahead the priority walk prefetches. Each job's priority reads a few
/// scattered cache lines of its record, details and factors; 50,000 records do not fit in
/// cache, so without prefetching the walk mostly waits on memory.
const PREFETCH_AHEAD: usize = 8;

/// Calls `f` on each job (job write lock held), prefetching what a priority reads of the
/// jobs [`PREFETCH_AHEAD`] (and twice that) further on.
fn walk_prefetched(jobs: &[*mut sys::job_record_t], mut f: impl FnMut(*mut sys::job_record_t)) {
    for (i, &j) in jobs.iter().enumerate() {
        if let Some(&ahead) = jobs.get(i + 2 * PREFETCH_AHEAD) {
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
        prefetch(std::ptr::addr_of!((*j).job_state));
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

/// `decay_apply_weighted_factors` (job write lock held): whether the priority changed.
fn apply_weighted(k: Knobs, j: *mut sys::job_record_t, start: i64, eval: &mut Evaluate<'_>) -> bool {
    // SAFETY: a job of job_list under the job write lock.
    let Some(mut job) = (unsafe { JobRecord::from_ptr(j) }) else { return false };
    let raw = job.raw();
    if raw.priority == 0 || raw.job_state & sys::JOB_POWER_UP_NODE != 0 || (!is_pending(raw) && !k.calculate_running())
    {
        return false;
    }
    let old = raw.priority;
    match eval(&mut job, start) {
        Some(new) if !k.incr_only() || old < new => {
            job.raw_mut().priority = new;
            true
        }
        _ => false,
    }
}

/// `_apply_new_usage`: adds a running job's usage over [start_period, end_period] to
/// its QOS, partition QOS and every association up to root.
fn apply_new_usage(
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
fn init_grp_used_tres_run_secs(ctld: &Ctld, last_ran: i64) {
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
