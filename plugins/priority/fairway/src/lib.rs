//! `priority/fairway`: a drop-in for `PriorityType=priority/multifactor`, plus
//! Fairway's own terms.
//!
//! With `fairway.toml`'s `[priority]` weights at 0 (the default), job priorities are
//! multifactor's weighted sum of age, association, fair share, job size, partition and
//! QOS, plus site factor and nice (`fairway_core::multifactor`); the FFI layer's decay
//! thread decays and accrues usage and runs Fair Tree or classic fair share.
//! Fairway's terms (`fairway_core::terms`: predicted work, deadline urgency, the
//! starvation bound) are added through the site factor, so `sprio` shows them in its
//! SITE column. Run times are learned at job end (`fairway_core::predict`) and saved
//! after each decay pass in `StateSaveLocation`.
//!
//! Not yet: periodic usage resets.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, RwLock};

use fairway_core::config::PriorityConfig;
use fairway_core::predict::{JobKey, RuntimePredictor};
use fairway_core::{fairshare, multifactor, terms, Config};
use fairway_ffi::job::JobRecord;
use fairway_ffi::plugin::Priority;

/// `PriorityFlags=INCR_ONLY` (slurm.h `PRIORITY_FLAGS_INCR_ONLY`).
const INCR_ONLY: u32 = 1 << 6;

/// The plugin's state for the life of the host process.
pub struct FairwayPriority {
    /// slurm.conf's knobs, re-read on `scontrol reconfigure`.
    conf: RwLock<SlurmKnobs>,
    /// fairway.toml's `[priority]`.
    terms: PriorityConfig,
    predictor: Mutex<RuntimePredictor>,
    predictor_path: PathBuf,
    /// Whether the predictor learned something not yet saved.
    dirty: AtomicBool,
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

    fn key(job: &JobRecord<'_>) -> JobKey {
        JobKey {
            user: job.user_id(),
            account: job.account().unwrap_or_default().into_owned(),
            name: job.name().unwrap_or_default().into_owned(),
            gpus: job.gpus(),
        }
    }

    fn predictor(&self) -> std::sync::MutexGuard<'_, RuntimePredictor> {
        self.predictor.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn save_predictor(&self) {
        if self.dirty.swap(false, Ordering::Relaxed) {
            let snapshot = self.predictor().clone();
            if let Err(e) = snapshot.save(&self.predictor_path) {
                tracing::error!("cannot save runtime history: {e}");
            }
        }
    }
}

impl Priority for FairwayPriority {
    fn init(config: Config, in_slurmctld: bool) -> Result<Self, String> {
        let predictor_path = fairway_ffi::multifactor::state_save_location().join(&config.predictor.state_file);
        let predictor = if in_slurmctld {
            RuntimePredictor::load(&predictor_path).unwrap_or_else(|e| {
                tracing::error!("runtime history unreadable, starting empty: {e}");
                RuntimePredictor::default()
            })
        } else {
            RuntimePredictor::default()
        };
        if in_slurmctld && terms::any_enabled(&config.priority) {
            tracing::info!(
                "Fairway terms: weight_predicted_work={} weight_deadline={} max_wait={:?}s; runtime history for {} job keys",
                config.priority.weight_predicted_work,
                config.priority.weight_deadline,
                config.priority.max_wait.map(|s| s.0),
                predictor.len()
            );
        }
        Ok(Self {
            conf: RwLock::new(SlurmKnobs::read()),
            terms: config.priority,
            predictor: Mutex::new(predictor),
            predictor_path,
            dirty: AtomicBool::new(false),
        })
    }

    fn reconfig(&self, _assoc_clear: bool) {
        *self.conf.write().unwrap_or_else(|e| e.into_inner()) = SlurmKnobs::read();
    }

    fn priority(&self, job: &mut JobRecord<'_>, now: i64) -> u32 {
        if job.direct_set_prio() && job.priority() > 0 {
            job.clear_priority_factors();
            return job.priority();
        }
        let knobs = self.knobs();
        let tres_cnt = knobs.weights.tres.len();
        let input = job.multifactor_input(now, tres_cnt, |u, s| fairshare::classic_factor(u, s, knobs.damping));
        let mut factors = multifactor::factors(&knobs.weights, &input);
        let mut starving = None;
        if terms::any_enabled(&self.terms) {
            let limit = job.time_limit_secs();
            let expected = self.predictor().predict(&Self::key(job), limit);
            let t = terms::compute(
                &self.terms,
                &terms::TermsInput {
                    now,
                    eligible_since: job.eligible_since(),
                    deadline: job.deadline(),
                    expected_runtime: expected.map_or(f64::NAN, |s| s as f64),
                    gpus: job.gpus(),
                },
            );
            let bonus = terms::site_bonus(&self.terms, &t);
            factors.site = (i64::from(factors.site) + bonus).clamp(0, i64::from(u32::MAX)) as u32;
            starving = t.starving_for;
            if fairway_ffi::multifactor::debug_priority() {
                tracing::info!(
                    job_id = job.job_id(),
                    expected_runtime = ?expected,
                    predicted_work = t.predicted_work,
                    deadline = t.deadline,
                    starving_for = ?t.starving_for,
                    site_bonus = bonus,
                    "Fairway terms"
                );
            }
        }
        job.store_priority_factors(&knobs.weights, &factors);
        let prio = match starving {
            Some(s) => terms::starving_priority(s),
            None => multifactor::priority(&knobs.weights, &factors),
        };
        let parts = job.partition_inputs(tres_cnt);
        if !parts.is_empty() {
            let per_part: Vec<u32> = match starving {
                Some(s) => vec![terms::starving_priority(s); parts.len()],
                None => parts.iter().map(|p| multifactor::priority_in_partition(&knobs.weights, &factors, p)).collect(),
            };
            let incr_only = u32::from(knobs.weights.flags) & INCR_ONLY != 0;
            job.set_priority_array(&per_part, incr_only);
        }
        tracing::debug!(job_id = job.job_id(), prio, "priority set");
        prio
    }

    fn calc_fs_factor(&self, usage_efctv: f64, shares_norm: f64) -> f64 {
        fairshare::classic_factor(usage_efctv, shares_norm, self.knobs().damping)
    }

    fn job_end(&self, job: &mut JobRecord<'_>) {
        if let Some(runtime) = job.completed_runtime() {
            self.predictor().record(&Self::key(job), runtime);
            self.dirty.store(true, Ordering::Relaxed);
        }
    }

    fn after_decay_pass(&self) {
        self.save_predictor();
    }

    fn fini(&self) {
        self.save_predictor();
    }
}

fairway_ffi::priority_plugin!(name: "Fairway priority plugin", type: "priority/fairway", impl: FairwayPriority);
