//! `site_factor/fairway`: Fairway's own priority terms for sites that keep
//! `PriorityType=priority/multifactor` (`PrioritySiteFactorPlugin=site_factor/fairway`).
//!
//! The same terms as `priority/fairway` (`fairway_core::terms`, configured in
//! `fairway.toml`): predicted work and deadline urgency add to the job's site factor;
//! a starving job gets `terms::STARVING_SITE` on top, which lifts it above every job
//! whose other factors sum below that (the other factors still order starving jobs),
//! and the longest-starving job of each partition `terms::FIRST_STARVING_SITE` more.
//! Fairway only ever replaces its own part (`terms::replace_site_part`): a site factor
//! set by an admin (`scontrol update SiteFactor=`) or a job_submit plugin is kept. Run
//! times are learned from jobs that completed since the last update, and the learned
//! model's online calibration from jobs that ended (`fairway_ffi::calibration`).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Mutex;

use fairway_core::priority::SiteFactor;
use fairway_core::Config;
use fairway_ffi::calibration::Calibrator;
use fairway_ffi::job::{for_each_job, with_job, JobRecord};
use fairway_ffi::plugin::SiteFactor as SiteFactorPlugin;
use fairway_ffi::terms::TermsState;

/// The plugin's state for the life of slurmctld.
pub struct FairwaySiteFactor {
    terms: TermsState<SiteFactor>,
    /// The learned model's upper quantile, calibrated from the jobs that end.
    calibration: Calibrator,
    /// Per job: the site factor Fairway last wrote and its own part of it. If the job's
    /// site factor still equals what was written, only Fairway's part is replaced;
    /// otherwise someone else set it and it becomes the new base.
    added: Mutex<HashMap<u32, (u32, i64)>>,
    /// When `update` last ran (jobs ending after it are learned from).
    last_update: AtomicI64,
}

impl FairwaySiteFactor {
    fn added(&self) -> std::sync::MutexGuard<'_, HashMap<u32, (u32, i64)>> {
        self.added.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes a decided site factor and remembers Fairway's part of it.
    fn write(&self, job: &mut JobRecord<'_>, out: &SiteFactor) {
        job.set_site_factor(out.site);
        self.added().insert(job.job_id(), (out.site, out.part));
    }
}

impl SiteFactorPlugin for FairwaySiteFactor {
    fn init(config: Config) -> Result<Self, String> {
        fairway_ffi::conf::log_findings(&config);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        Ok(Self {
            terms: TermsState::load(&config, true),
            calibration: Calibrator::load(&config, true),
            added: Mutex::new(HashMap::new()),
            last_update: AtomicI64::new(now),
        })
    }

    fn reconfig(&self) {
        self.terms.reconfigure();
        self.calibration.reconfigure();
    }

    fn set(&self, job: &mut JobRecord<'_>, now: i64) {
        let state = self.terms.state();
        if !state.enabled() {
            return;
        }
        let last = self.added().get(&job.job_id()).copied();
        if let Some(out) = state.site_factor(job.job_id(), &job.site_terms_job(), now, job.site_factor(), last) {
            self.write(job, &out);
        }
    }

    fn update(&self, now: i64) {
        let since = self.last_update.swap(now, Ordering::Relaxed);
        let state = self.terms.state();
        let enabled = state.enabled();
        let mut live = HashSet::new();
        let mut ended = Vec::new();
        state.site_pass(|mut pass| {
            for_each_job(|job| {
                if job.end_time() > since && job.end_time() <= now {
                    ended.push(job.job_id());
                }
                if job.is_pending() && enabled {
                    let last = self.added().get(&job.job_id()).copied();
                    if let Some(out) = pass.job(job.job_id(), &job.site_terms_job(), now, job.site_factor(), last) {
                        self.write(job, &out);
                    }
                    live.insert(job.job_id());
                }
            });
            for (id, out) in pass.finish() {
                with_job(id, |job| self.write(job, &out));
            }
        });
        // Learned after the pass, which holds the run-time history.
        for id in ended {
            with_job(id, |job| {
                self.terms.learn(job);
                self.calibration.job_ended(job);
            });
        }
        // Forget jobs that are no longer pending.
        self.added().retain(|id, _| live.contains(id));
        // Called under the job write lock: write the history elsewhere.
        self.terms.save_in_background();
    }
}

fairway_ffi::site_factor_plugin!(name: "Fairway site factor plugin", type: "site_factor/fairway", impl: FairwaySiteFactor);
