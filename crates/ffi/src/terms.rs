//! Fairway's terms for a job in slurmctld: reads the job, asks `fairway_core::terms`
//! and the runtime predictor, and keeps the predictor's history on disk. Shared by
//! `priority/fairway` and `site_factor/fairway`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use fairway_core::config::PriorityConfig;
use fairway_core::predict::{self, LearnedPredictor, RuntimePredictor};
use fairway_core::{terms, Config};

use crate::job::JobRecord;

/// The terms of one job, as evaluated now.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluated {
    /// The unweighted terms.
    pub terms: terms::Terms,
    /// Their weighted sum, for the site factor.
    pub bonus: i64,
    /// The run time the terms assumed (prediction, else time limit), seconds.
    pub expected: Option<u64>,
    /// The `[priority]` settings they were computed with.
    pub config: PriorityConfig,
}

/// `[priority]` of fairway.toml plus the runtime history behind it, and the learned
/// model (`[predictor] model`) when one is configured.
pub struct TermsState {
    config: PriorityConfig,
    predictor: Arc<Mutex<RuntimePredictor>>,
    model: RwLock<Option<Arc<LearnedPredictor>>>,
    path: PathBuf,
    dirty: AtomicBool,
}

impl TermsState {
    /// Loads the history (slurmctld only; clients get an empty one).
    pub fn load(config: &Config, in_slurmctld: bool) -> Self {
        let path = crate::conf::state_save_location().join(&config.predictor.state_file);
        let predictor = if in_slurmctld {
            RuntimePredictor::load(&path).unwrap_or_else(|e| {
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
        let model = if in_slurmctld {
            crate::conf::learned_model(config).map(|m| m.map(Arc::new)).unwrap_or_else(|e| {
                tracing::error!("{e}; run-time predictions use the mean of the last two runs instead");
                None
            })
        } else {
            None
        };
        Self {
            config: config.priority.clone(),
            predictor: Arc::new(Mutex::new(predictor)),
            model: RwLock::new(model),
            path,
            dirty: AtomicBool::new(false),
        }
    }

    /// `scontrol reconfigure` (22.05; 24.05+ restarts slurmctld instead): re-reads
    /// fairway.toml's `[predictor] model`. An unreadable file or model leaves the one in
    /// use, and says why.
    pub fn reconfigure(&self) {
        match crate::conf::load() {
            Ok(config) => self.reload_model(&config),
            Err(e) => tracing::error!("{e}; keeping the run-time model in use"),
        }
    }

    fn reload_model(&self, config: &Config) {
        let mut slot = self.model.write().unwrap_or_else(|e| e.into_inner());
        match crate::conf::learned_model(config) {
            Ok(m) => *slot = m.map(Arc::new),
            Err(e) => tracing::error!(
                "{e}; keeping the {}",
                if slot.is_some() { "model loaded before" } else { "mean of the last two runs" }
            ),
        }
    }

    /// Whether any term is on.
    pub fn enabled(&self) -> bool {
        terms::any_enabled(&self.config)
    }

    fn predictor(&self) -> std::sync::MutexGuard<'_, RuntimePredictor> {
        self.predictor.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The job's terms at `now`; `None` when all terms are off. Logs them per job under
    /// `DebugFlags=Priority`.
    pub fn evaluate(&self, job: &JobRecord<'_>, now: i64) -> Option<Evaluated> {
        if !self.enabled() {
            return None;
        }
        let model = self.model.read().unwrap_or_else(|e| e.into_inner()).clone();
        let expected = predict::expected_runtime(&self.predictor(), model.as_deref(), &job.prediction_request());
        let t = terms::compute(
            &self.config,
            &terms::TermsInput {
                now,
                eligible_since: job.eligible_since(),
                deadline: job.deadline(),
                expected_runtime: expected.map_or(f64::NAN, |s| s as f64),
                gpus: job.gpus(),
            },
        );
        let bonus = terms::site_bonus(&self.config, &t);
        if crate::conf::debug_priority() {
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
        Some(Evaluated { terms: t, bonus, expected, config: self.config.clone() })
    }

    /// Learns a completed job's run time; returns whether it did.
    pub fn learn(&self, job: &JobRecord<'_>) -> bool {
        match job.completed_runtime() {
            Some(runtime) => {
                self.predictor().record_with_limit(&job.prediction_request().key, runtime, job.time_limit_secs());
                self.dirty.store(true, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    /// Saves the history if it changed (call with no slurmctld locks held).
    pub fn save_if_dirty(&self) {
        if self.dirty.swap(false, Ordering::Relaxed) {
            let snapshot = self.predictor().clone();
            if let Err(e) = snapshot.save(&self.path) {
                tracing::error!("cannot save runtime history: {e}");
            }
        }
    }

    /// Saves the history on another thread: for callbacks that run under locks.
    pub fn save_in_background(&self) {
        if self.dirty.swap(false, Ordering::Relaxed) {
            let (predictor, path) = (self.predictor.clone(), self.path.clone());
            std::thread::spawn(move || {
                let snapshot = predictor.lock().unwrap_or_else(|e| e.into_inner()).clone();
                if let Err(e) = snapshot.save(&path) {
                    tracing::error!("cannot save runtime history: {e}");
                }
            });
        }
    }
}
