//! The decay thread of `priority/fairway`: what multifactor's `_decay_thread` does.
//!
//! Every `PriorityCalcPeriod` it decays association and QOS usage by the half-life
//! (`assoc.rs`), adds the usage of running jobs up the association tree (and
//! removes their `grp_used_tres_run_secs`, as limits expect; `usage.rs`),
//! recomputes fair share (Fair Tree or classic, in `fairway_core::fairshare`) and the
//! priority of pending jobs, and records when it ran (`state.rs`) so a restart
//! (kill -9 included) resumes from the last pass. Usage itself (`assoc_usage`,
//! `qos_usage`) is saved after every pass that added usage, so a crash loses at most one
//! calc period of it (slurmctld alone saves it every 5 minutes).
//! `PriorityUsageResetPeriod` is `reset.rs`'s.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use fairway_core::fairshare;
use slurm_sys as sys;

use crate::ctld::{ctld, Ctld};
use crate::job::JobRecord;
use crate::knobs::Knobs;
use crate::locks::{walk_prefetched, with_assoc_read, Prefetch};
use crate::reset::ResetClock;
use crate::state::{read_state, write_state, LAST_RAN, USAGE_ADDED};
use crate::unix_now as now;
use crate::usage::{apply_new_usage, decay_apply_new_usage, init_grp_used_tres_run_secs, is_pending};

// Kept here, where plugins have always found them.
pub use crate::assoc::{renormalize_shares, set_assoc_usage};

/// A job's priority at a given time, from the plugin (`None`: no plugin instance).
pub type Evaluate<'a> = dyn FnMut(&mut JobRecord<'_>, i64) -> Option<u32> + 'a;

/// Runs its argument with the plugin's evaluator of priorities, set up once for a whole
/// walk of the job list rather than per job (the plugin's `priority_pass`).
pub type Recompute = fn(&mut dyn FnMut(&mut Evaluate<'_>));

/// Called after each pass with no locks held (the plugin's periodic work).
pub type AfterPass = fn(&DecayPass);

/// One decay pass, as the after-pass hook sees it.
#[derive(Debug, Clone)]
pub struct DecayPass {
    /// When it started, Unix seconds.
    pub started: i64,
    /// Its wall time, seconds: decay, usage, fair share and priorities, locks waited for
    /// included (what delays slurmctld's other threads).
    pub seconds: f64,
    /// `PriorityCalcPeriod`, seconds.
    pub calc_period: u64,
    /// The ids of the jobs running (or suspended) when usage was accrued; `None` when the
    /// pass walked no jobs (the first, or a panic midway).
    pub running: Option<Vec<u32>>,
}

/// The running decay thread; dropping it stops and joins the thread.
pub struct DecayThread {
    stop: Arc<(Mutex<bool>, Condvar)>,
    handle: Option<JoinHandle<()>>,
    ctld: &'static Ctld,
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

/// Starts the decay thread if this is slurmctld with slurmdbd accounting (as
/// multifactor does); `None` otherwise.
pub fn start(recompute: Recompute, after_pass: AfterPass) -> Option<DecayThread> {
    // SAFETY: libslurmfull function without arguments; reads slurm_conf.
    if !crate::sym::in_slurmctld() || !unsafe { sys::slurm_with_slurmdbd() } {
        return None;
    }
    if !crate::assoc::has_root() {
        tracing::error!("no association tree (assoc_mgr root missing): fair share and usage decay are off");
        return None;
    }
    let Some(ctld) = ctld() else {
        tracing::error!("slurmctld symbols not found: fair share and usage decay are off");
        return None;
    };
    // As multifactor: root's effective usage is 1, and g_last_ran is known before init
    // returns, so a job ending right away is charged from the right time.
    crate::assoc::init_root_usage();
    LAST_RAN.store(read_state().0, Ordering::Relaxed);
    let stop = Arc::new((Mutex::new(false), Condvar::new()));
    let s2 = stop.clone();
    let handle = std::thread::Builder::new()
        .name("fairway_decay".into())
        .spawn(move || crate::guard("decay thread", (), || run(ctld, &s2, recompute, after_pass)))
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
    let Some(ctld) = ctld() else { return };
    let knobs = Knobs::read();
    let start = now();
    ctld.with_job_write(|| {
        let mut changed = false;
        recompute(&mut |eval| {
            ctld.for_each_job(|j| {
                // As multifactor's decay_apply_weighted_factors: only the jobs whose state
                // gets a priority.
                if decay_apply_new_usage(ctld, knobs, j, LAST_RAN.load(Ordering::Relaxed), start)
                    && wants_priority(knobs, j)
                {
                    changed |= apply_weighted(knobs, j, start, eval);
                }
            })
        });
        ctld.touch_jobs(changed);
    });
}

impl DecayThread {
    /// What `priority_p_reconfig` and `priority_p_job_end` need of the running thread,
    /// copied out so that neither holds [`crate::plugin::DECAY`] while it takes
    /// slurmctld's locks (`job_end` arrives holding the job write lock, `reconfig` takes
    /// it: holding the mutex across both deadlocked 22.05).
    pub fn running(&self) -> Running {
        Running { ctld: self.ctld }
    }
}

/// A handle on the running decay thread's accounting, free of any lock.
#[derive(Clone, Copy)]
pub struct Running {
    ctld: &'static Ctld,
}

impl Running {
    /// `priority_p_reconfig`: slurmctld reset `grp_used_tres_run_secs` when
    /// `assoc_clear`; remove what running jobs used up to the last pass again.
    pub fn reconfig(self, assoc_clear: bool) {
        if assoc_clear {
            init_grp_used_tres_run_secs(self.ctld, LAST_RAN.load(Ordering::Relaxed));
        }
    }

    /// `priority_p_job_end`: adds the job's usage since the last pass (job lock held).
    pub fn job_end(self, job: &mut JobRecord<'_>) {
        let knobs = Knobs::read();
        apply_new_usage(self.ctld, knobs, job.raw_mut(), LAST_RAN.load(Ordering::Relaxed), now(), true);
    }
}

fn run(ctld: &Ctld, stop: &(Mutex<bool>, Condvar), recompute: Recompute, after_pass: AfterPass) {
    let mut last_ran = LAST_RAN.load(Ordering::Relaxed);
    let (_, saved_reset) = read_state();
    let mut reset = ResetClock::new(saved_reset, now());
    let mut knobs = Knobs::read();
    init_grp_used_tres_run_secs(ctld, last_ran);
    let decay_factor = |k: Knobs| fairshare::decay_factor(k.half_life);
    let mut next = std::time::Instant::now();
    loop {
        let start = now();
        let wall = std::time::Instant::now();
        // A panic costs this pass, not the thread: the next pass runs as usual (a pass
        // that panicked midway may have charged part of its usage; it is not charged twice).
        let running = crate::guard("decay pass", None, || {
            let mut running = None;
            let prev = knobs;
            knobs = Knobs::read();
            reset.pass(ctld, knobs.reset_period, prev.reset_period != knobs.reset_period, start);
            if !knobs.fair_tree() {
                crate::assoc::classic_pass(knobs.classic_mode());
            }
            let delta = (start - last_ran) as f64;
            if last_ran != 0 && delta > 0.0 {
                let real = fairshare::real_decay(decay_factor(knobs), delta);
                crate::assoc::apply_decay(ctld, real);
                ctld.with_job_write(|| {
                    // SAFETY: the job write lock is held, as site_factor_g_update requires.
                    unsafe { sys::site_factor_g_update() };
                });
                if !knobs.fair_tree() {
                    ctld.with_job_write(|| {
                        let mut changed = false;
                        let jobs = ctld.jobs();
                        let seen = running.insert(Vec::new());
                        // No assoc_mgr lock across this walk: usage accrual takes the write lock.
                        recompute(&mut |eval| {
                            walk_prefetched(&jobs, Prefetch::WithState, |j| {
                                if accrue(ctld, knobs, j, last_ran, start, seen) && wants_priority(knobs, j) {
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
                // twice): no job can come or go in between, so the priority walk goes over
                // the job pointers the accrual walk collected.
                ctld.with_job_write(|| {
                    let seen = running.insert(Vec::new());
                    // The accrual walk reads each job's state anyway: it picks the jobs that
                    // get a priority, so the priority walk never fetches the state's cache
                    // line again (one of the dozen or so it reads per pending job). Unlike the
                    // classic walk, finished jobs are priced too with CALCULATE_RUNNING, as
                    // multifactor's Fair Tree pass does.
                    let mut priced = Vec::new();
                    ctld.jobs_with(|j| {
                        accrue(ctld, knobs, j, last_ran, start, seen);
                        if wants_priority(knobs, j) {
                            priced.push(j);
                        }
                    });
                    crate::assoc::fair_tree_pass();
                    // assoc_mgr's association and QOS read locks once over the walk rather
                    // than per job (multifactor's way): about a tenth of a pass.
                    let mut changed = false;
                    recompute(&mut |eval| {
                        with_assoc_read(|| {
                            walk_prefetched(&priced, Prefetch::WithoutState, |j| {
                                changed |= apply_weighted(knobs, j, start, eval)
                            })
                        })
                    });
                    ctld.touch_jobs(changed);
                });
            }
            running
        });
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
        write_state(last_ran, reset.last_reset());
        let pass = DecayPass {
            started: start,
            seconds: wall.elapsed().as_secs_f64(),
            calc_period: knobs.calc_period.into(),
            running,
        };
        crate::guard("decay pass hook", (), || after_pass(&pass));

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

/// [`decay_apply_new_usage`], noting the ids of running jobs for the after-pass hook
/// (which would otherwise read every job's state again to find them).
fn accrue(ctld: &Ctld, k: Knobs, j: *mut sys::job_record_t, last_ran: i64, start: i64, running: &mut Vec<u32>) -> bool {
    let more = decay_apply_new_usage(ctld, k, j, last_ran, start);
    // SAFETY: a job of job_list under the job write lock.
    if let Some(job) = unsafe { JobRecord::from_ptr(j) }.filter(|job| more && job.is_running()) {
        running.push(job.job_id());
    }
    more
}

/// Whether the pass computes the job's priority, by its state: pending (running too with
/// CALCULATE_RUNNING), not waiting for nodes to power up; as multifactor's
/// `decay_apply_weighted_factors` (job write lock held).
fn wants_priority(k: Knobs, j: *mut sys::job_record_t) -> bool {
    // SAFETY: a job of job_list under the job write lock.
    let raw = unsafe { &*j };
    raw.job_state & sys::JOB_POWER_UP_NODE == 0 && (is_pending(raw) || k.calculate_running())
}

/// `decay_apply_weighted_factors` for a job [`wants_priority`] picked (job write lock
/// held): whether the priority changed.
fn apply_weighted(k: Knobs, j: *mut sys::job_record_t, start: i64, eval: &mut Evaluate<'_>) -> bool {
    // SAFETY: a job of job_list under the job write lock.
    let Some(mut job) = (unsafe { JobRecord::from_ptr(j) }) else { return false };
    // The comment is a cache miss per job: read only where the hook is built in.
    if cfg!(feature = "fault-injection") {
        crate::plugin::inject_fault_marked(job.comment().as_deref(), "fairway-test:decay-panic");
    }
    let old = job.raw().priority;
    if old == 0 {
        return false;
    }
    match eval(&mut job, start) {
        Some(new) if !k.incr_only() || old < new => {
            job.raw_mut().priority = new;
            true
        }
        _ => false,
    }
}
