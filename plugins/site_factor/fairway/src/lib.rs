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
//! times are learned from jobs that completed since the last update.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Mutex;

use fairway_core::terms::FirstStarving;
use fairway_core::{terms, Config};
use fairway_ffi::job::{for_each_job, with_job, JobRecord};
use fairway_ffi::plugin::SiteFactor;
use fairway_ffi::terms::TermsState;

/// The plugin's state for the life of slurmctld.
pub struct FairwaySiteFactor {
    terms: TermsState,
    /// Per job: the site factor Fairway last wrote and its own part of it. If the job's
    /// site factor still equals what was written, only Fairway's part is replaced;
    /// otherwise someone else set it and it becomes the new base.
    added: Mutex<HashMap<u32, (u32, i64)>>,
    /// When `update` last ran (jobs ending after it are learned from).
    last_update: AtomicI64,
    /// The longest-starving job of each partition, chosen by the last `update`.
    first: Mutex<FirstStarving<String>>,
}

impl FairwaySiteFactor {
    /// Sets the job's site factor; in `update` (`noting`), a starving job is noted as a
    /// candidate to go first.
    fn set_with(&self, job: &mut JobRecord<'_>, now: i64, first: &mut FirstStarving<String>, noting: bool) {
        let Some(e) = self.terms.evaluate(job, now) else { return };
        if let (true, Some(s)) = (noting, e.terms.starving_for) {
            first.note(job.partition().unwrap_or_default().into_owned(), job.job_id(), s);
        }
        let mine = terms::site_contribution(&e.config, &e.terms, first.is_first(job.job_id()));
        let mut added = self.added.lock().unwrap_or_else(|p| p.into_inner());
        let site = terms::replace_site_part(job.site_factor(), added.get(&job.job_id()).copied(), mine);
        job.set_site_factor(site);
        added.insert(job.job_id(), (site, mine));
    }

    fn first(&self) -> std::sync::MutexGuard<'_, FirstStarving<String>> {
        self.first.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl SiteFactor for FairwaySiteFactor {
    fn init(config: Config) -> Result<Self, String> {
        fairway_ffi::conf::log_findings(&config);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        Ok(Self {
            terms: TermsState::load(&config, true),
            added: Mutex::new(HashMap::new()),
            last_update: AtomicI64::new(now),
            first: Mutex::new(FirstStarving::default()),
        })
    }

    fn reconfig(&self) {
        self.terms.reconfigure();
    }

    fn set(&self, job: &mut JobRecord<'_>, now: i64) {
        self.set_with(job, now, &mut self.first(), false);
    }

    fn update(&self, now: i64) {
        let since = self.last_update.swap(now, Ordering::Relaxed);
        let mut live = HashSet::new();
        let mut first = self.first();
        for_each_job(|job| {
            if job.end_time() > since && job.end_time() <= now {
                self.terms.learn(job);
            }
            if job.is_pending() {
                self.set_with(job, now, &mut first, true);
                live.insert(job.job_id());
            }
        });
        for id in first.end_pass() {
            with_job(id, |job| self.set_with(job, now, &mut first, false));
        }
        drop(first);
        // Forget jobs that are no longer pending.
        self.added.lock().unwrap_or_else(|p| p.into_inner()).retain(|id, _| live.contains(id));
        // Called under the job write lock: write the history elsewhere.
        self.terms.save_in_background();
    }
}

fairway_ffi::site_factor_plugin!(name: "Fairway site factor plugin", type: "site_factor/fairway", impl: FairwaySiteFactor);
