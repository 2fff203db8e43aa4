//! `priority/fairway`: a drop-in for `PriorityType=priority/multifactor`, plus
//! Fairway's own terms.
//!
//! With `fairway.toml`'s `[priority]` weights at 0 (the default), job priorities are
//! multifactor's weighted sum of age, association, fair share, job size, partition and
//! QOS, plus site factor and nice (`fairway_core::multifactor`); the FFI layer's decay
//! thread decays and accrues usage and runs Fair Tree or classic fair share.
//! Fairway's terms (`fairway_core::terms`: predicted work, deadline urgency) are added
//! through the site factor, so `sprio` shows them in its SITE column; a job starving past
//! `max_wait` is lifted above the rest, the longest-starving job of each partition first
//! (chosen in each decay pass, `terms::FirstStarving`; a job submitted to several
//! partitions competes under its partition list). Run times are learned at job end
//! (`fairway_core::predict`) and saved after each decay pass in `StateSaveLocation`.
//!
//! Built for Slurm 22.05's priority ABI and for 24.05+'s (tested on 24.11): the
//! differences (`priority_p_thread_start`, `priority_p_recover`, sprio's factors list,
//! one priority per partition and QOS) live in `fairway_ffi`'s `priority_plugin!`.

use std::sync::{Mutex, RwLock};

use fairway_core::terms::FirstStarving;
use fairway_core::{fairshare, multifactor, terms, Config};
use fairway_ffi::job::{self, JobRecord};
use fairway_ffi::plugin::{Priority, PriorityOf};
use fairway_ffi::terms::TermsState;

use multifactor::flags::{FAIR_TREE, INCR_ONLY};

/// The plugin's state for the life of the host process.
pub struct FairwayPriority {
    /// slurm.conf's knobs, re-read on `scontrol reconfigure`.
    conf: RwLock<SlurmKnobs>,
    /// fairway.toml's terms and the runtime history behind them.
    terms: TermsState,
    /// The longest-starving job of each partition, chosen by the last decay pass.
    first: Mutex<FirstStarving<String>>,
}

struct SlurmKnobs {
    damping: u16,
    weights: multifactor::Weights,
}

impl SlurmKnobs {
    fn read() -> Self {
        Self { damping: fairway_ffi::conf::fs_dampening_factor(), weights: fairway_ffi::multifactor::weights() }
    }
}

impl FairwayPriority {
    fn knobs(&self) -> std::sync::RwLockReadGuard<'_, SlurmKnobs> {
        self.conf.read().unwrap_or_else(|e| e.into_inner())
    }

    fn first(&self) -> std::sync::MutexGuard<'_, FirstStarving<String>> {
        self.first.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The job's priority with slurm.conf's knobs as read (job write lock held). In a
    /// decay pass (`noting`), a starving job is noted as a candidate to go first.
    fn priority_with(
        &self,
        knobs: &SlurmKnobs,
        job: &mut JobRecord<'_>,
        now: i64,
        first: &mut FirstStarving<String>,
        noting: bool,
    ) -> u32 {
        if job.direct_set_prio() && job.priority() > 0 {
            job.clear_priority_factors();
            return job.priority();
        }
        let tres_cnt = knobs.weights.tres.len();
        let input = job.multifactor_input(now, tres_cnt, |u, s| fairshare::classic_factor(u, s, knobs.damping));
        let mut factors = multifactor::factors(&knobs.weights, &input);
        let mut starving = None;
        if let Some(e) = self.terms.evaluate(job, now) {
            factors.site = (i64::from(factors.site) + e.bonus).clamp(0, i64::from(u32::MAX)) as u32;
            starving = e.terms.starving_for;
        }
        job.store_priority_factors(&knobs.weights, &factors);
        if let (true, Some(s)) = (noting, starving) {
            first.note(job.partition().unwrap_or_default().into_owned(), job.job_id(), s);
        }
        let is_first = first.is_first(job.job_id());
        let lift = |usual| if starving.is_some() { terms::starving_priority(usual, is_first) } else { usual };
        let prio = lift(multifactor::priority(&knobs.weights, &factors));
        // One priority per partition and QOS of a job that named several (none else).
        let parts = job.partition_inputs(tres_cnt);
        let qos = if parts.is_empty() { Vec::new() } else { job.qos_inputs() };
        let per_pair: Vec<u32> = parts
            .iter()
            .flat_map(|p| qos.iter().map(move |&q| (p, q)))
            .map(|(p, q)| lift(multifactor::priority_in_partition_qos(&knobs.weights, &factors, p, q)))
            .collect();
        job.set_priority_array(&per_pair, knobs.weights.flags & INCR_ONLY != 0);
        tracing::debug!(job_id = job.job_id(), prio, "priority set");
        prio
    }
}

impl Priority for FairwayPriority {
    fn init(config: Config, in_slurmctld: bool) -> Result<Self, String> {
        if in_slurmctld {
            fairway_ffi::conf::log_findings(&config);
        }
        Ok(Self {
            conf: RwLock::new(SlurmKnobs::read()),
            terms: TermsState::load(&config, in_slurmctld),
            first: Mutex::new(FirstStarving::default()),
        })
    }

    fn reconfig(&self, _assoc_clear: bool) {
        let new = SlurmKnobs::read();
        let mut conf = self.conf.write().unwrap_or_else(|e| e.into_inner());
        // Fair Tree normalises shares per level, classic down the tree: switching
        // algorithms needs the shares recomputed, as multifactor does.
        if (conf.weights.flags ^ new.weights.flags) & FAIR_TREE != 0 && fairway_ffi::sym::in_slurmctld() {
            fairway_ffi::decay::renormalize_shares();
        }
        *conf = new;
        drop(conf);
        if fairway_ffi::sym::in_slurmctld() {
            self.terms.reconfigure();
        }
    }

    fn priority(&self, job: &mut JobRecord<'_>, now: i64) -> u32 {
        self.priority_with(&self.knobs(), job, now, &mut self.first(), false)
    }

    fn priority_pass(&self, walk: &mut dyn FnMut(&mut PriorityOf<'_>)) {
        let knobs = self.knobs();
        let mut first = self.first();
        let mut now = 0;
        walk(&mut |job, t| {
            now = t;
            self.priority_with(&knobs, job, t, &mut first, true)
        });
        // The jobs chosen to go first get their lifted priority now, not a pass later.
        for id in first.end_pass() {
            job::with_job(id, |job| {
                let prio = self.priority_with(&knobs, job, now, &mut first, false);
                job.set_priority(prio);
            });
        }
    }

    fn calc_fs_factor(&self, usage_efctv: f64, shares_norm: f64) -> f64 {
        fairshare::classic_factor(usage_efctv, shares_norm, self.knobs().damping)
    }

    fn job_end(&self, job: &mut JobRecord<'_>) {
        self.terms.learn(job);
    }

    fn after_decay_pass(&self) {
        self.terms.save_if_dirty();
    }

    fn fini(&self) {
        self.terms.save_if_dirty();
    }
}

fairway_ffi::priority_plugin!(name: "Fairway priority plugin", type: "priority/fairway", impl: FairwayPriority);
