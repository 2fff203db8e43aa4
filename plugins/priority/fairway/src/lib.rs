//! `priority/fairway`: a drop-in for `PriorityType=priority/multifactor`, plus
//! Fairway's own terms.
//!
//! Each priority goes one way, as job_submit/fairway's rules do: the job is read once
//! (`JobRecord::priority_input`), `fairway_core::priority` decides (multifactor's factors
//! and sums, Fairway's terms from `fairway.toml`, the starvation lift, one priority per
//! partition and QOS), and the decision is written back once
//! (`JobRecord::write_priority`). With every term off the priorities are multifactor's.
//! The decay thread (usage decay and accrual, fair share) is `fairway_ffi`'s; run times
//! are learned at job end and saved after each decay pass in `StateSaveLocation`, and so
//! is the learned model's online calibration, which job_submit/fairway's `time=auto`
//! limits read (`fairway_ffi::calibration`). After each pass the plugin publishes it
//! (`fairway_core::status`: each job's terms, the pass's time) for `fairway explain` and
//! `fairway metrics`.
//!
//! Built for Slurm 22.05's priority ABI and for 24.05+'s (tested on 24.11): the
//! differences live in `fairway_ffi`'s `priority_plugin!`.

use std::sync::{Mutex, RwLock, RwLockReadGuard};

use fairway_core::priority::{JobPriority, Pass};
use fairway_core::status::PassJobs;
use fairway_core::Config;
use fairway_ffi::calibration::Calibrator;
use fairway_ffi::decay::DecayPass;
use fairway_ffi::job::{self, JobRecord};
use fairway_ffi::multifactor::Knobs;
use fairway_ffi::plugin::{Priority, PriorityOf};
use fairway_ffi::publish::Publisher;
use fairway_ffi::record::PassRecord;
use fairway_ffi::terms::TermsState;

/// The plugin's state for the life of the host process.
pub struct FairwayPriority {
    /// slurm.conf's knobs, re-read on `scontrol reconfigure`.
    knobs: RwLock<Knobs>,
    /// fairway.toml's terms, the run times behind them, the jobs that go first.
    terms: TermsState<JobPriority>,
    /// The learned model's upper quantile, calibrated from the jobs that end.
    calibration: Calibrator,
    /// The last pass's jobs and how many priorities it set, until published.
    last_pass: Mutex<Option<(PassJobs, u64)>>,
    /// Writes the status after each pass.
    publisher: Publisher,
}

impl FairwayPriority {
    fn knobs(&self) -> RwLockReadGuard<'_, Knobs> {
        self.knobs.read().unwrap_or_else(|e| e.into_inner())
    }
}

impl Priority for FairwayPriority {
    fn init(config: Config, in_slurmctld: bool) -> Result<Self, String> {
        if in_slurmctld {
            fairway_ffi::conf::log_findings(&config);
        }
        Ok(Self {
            knobs: RwLock::new(Knobs::read()),
            terms: TermsState::load(&config, in_slurmctld),
            calibration: Calibrator::load(&config, in_slurmctld),
            last_pass: Mutex::new(None),
            publisher: if config.status.publish { fairway_ffi::status::publisher() } else { Publisher::default() },
        })
    }

    fn reconfig(&self, _assoc_clear: bool) {
        self.knobs.write().unwrap_or_else(|e| e.into_inner()).reread();
        if fairway_ffi::sym::in_slurmctld() {
            self.terms.reconfigure();
            self.calibration.reconfigure();
        }
    }

    fn priority(&self, job: &mut JobRecord<'_>, now: i64) -> u32 {
        let (knobs, state) = (self.knobs(), self.terms.state());
        let out = state.evaluate(&knobs.weights, &job.priority_input(&knobs, now, state.enabled()));
        job.write_priority(&out, knobs.incr_only());
        out.priority
    }

    fn priority_pass(&self, walk: &mut dyn FnMut(&mut PriorityOf<'_>)) {
        let (knobs, state) = (self.knobs(), self.terms.state());
        state.with(&knobs.weights, |policy, first| {
            let mut record = PassRecord::new(&knobs.weights, first);
            let mut pass = Pass::new(policy, first);
            let (mut published, mut count) = (PassJobs::new(policy.terms), 0);
            let with_terms = fairway_core::terms::any_enabled(policy.terms);
            walk(&mut |job, now| {
                let input = job.pass_input(&knobs, now, with_terms);
                let out = pass.job(&input);
                job.write_priority(&out, knobs.incr_only());
                record.job(&input, &out);
                published.job(&input, &out);
                count += 1;
                out.priority
            });
            // The jobs that now go first get their lifted priority in this pass.
            let first = pass.finish();
            for (id, out) in &first {
                job::with_job(*id, |job| {
                    job.write_priority(out, knobs.incr_only());
                    job.set_priority(out.priority);
                });
            }
            record.finish(&first);
            *self.last_pass.lock().unwrap_or_else(|e| e.into_inner()) = Some((published.finish(&first), count));
        });
    }

    fn calc_fs_factor(&self, usage_efctv: f64, shares_norm: f64) -> f64 {
        fairway_core::fairshare::classic_factor(usage_efctv, shares_norm, self.knobs().damping)
    }

    fn job_end(&self, job: &mut JobRecord<'_>) {
        self.terms.learn(job);
        self.calibration.job_ended(job);
    }

    fn after_decay_pass(&self, pass: &DecayPass) {
        // Predicted limits grow before they run out: every job job_submit/fairway gave a
        // record is owed it, even after a site turned the setting off.
        fairway_ffi::limits::extend_running(fairway_ffi::plugin::unix_now(), pass.calc_period, pass.running.as_deref());
        self.terms.save_if_dirty();
        self.calibration.save_if_dirty();
        // A pass that set no priority (the first after a start) publishes no jobs.
        let (jobs, count) = self
            .last_pass
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .unwrap_or_else(|| (PassJobs::new(&self.terms.state().terms()), 0));
        let (started, seconds, period) = (pass.started, pass.seconds, pass.calc_period);
        fairway_ffi::status::publish(&self.publisher, Box::new(move || jobs.status(started, seconds, count, period)));
    }

    fn fini(&self) {
        self.terms.save_if_dirty();
        self.calibration.save_if_dirty();
        self.publisher.stop();
    }
}

fairway_ffi::priority_plugin!(name: "Fairway priority plugin", type: "priority/fairway", impl: FairwayPriority);
