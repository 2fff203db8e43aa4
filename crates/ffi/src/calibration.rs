//! The learned model's online calibration in slurmctld
//! (`fairway_core::predict::OnlineCalibration`): learned from each job that ends, kept in
//! `StateSaveLocation` (`[predictor] calibration_file`), read by job_submit/fairway for
//! its `time=auto` limits.
//!
//! priority/fairway learns in `job_end`, site_factor/fairway from the jobs that ended since
//! its last update. A job teaches the calibration when job_submit/fairway recorded its
//! upper-quantile prediction in its admin comment (`[job_submit.time] record_prediction`)
//! and it completed, failed or reached its limit. Each change is saved on a thread of its
//! own (the callbacks run under slurmctld's job lock), one save at a time; job_submit/fairway
//! re-reads the file when it changes. A state file that does not load, or belongs to
//! another model, is logged and replaced by the model's own offsets.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use fairway_core::predict::{self, LearnedPredictor, OnlineCalibration};
use fairway_core::Config;

use crate::job::JobRecord;

/// The calibration of the model in use, if one is configured.
pub struct Calibrator {
    shared: Arc<Shared>,
}

struct Shared {
    path: Mutex<PathBuf>,
    /// `None`: nothing to calibrate (no model, step 0, or not slurmctld).
    state: Mutex<Option<OnlineCalibration>>,
    /// Changed since last saved.
    dirty: AtomicBool,
    /// A background save is under way.
    saving: AtomicBool,
    /// One writer at a time (the temporary file is shared).
    writing: Mutex<()>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The model `[predictor] model` names, loaded without the log line
/// `conf::learned_model` writes (the terms already wrote it).
fn model(config: &Config) -> Result<Option<LearnedPredictor>, String> {
    let dir = crate::conf::fairway_toml_path().parent().map(std::path::Path::to_path_buf).unwrap_or_default();
    config.predictor.model_file(&dir).map(|f| LearnedPredictor::load(&f).map_err(|e| e.to_string())).transpose()
}

/// The state to go on from for `model`: `saved` when it belongs to it, else the model's
/// own offsets; `None` without a model or with the calibration off. Logs which.
fn resume(
    saved: Result<Option<OnlineCalibration>, String>,
    model: Option<&LearnedPredictor>,
    step: f64,
) -> Option<OnlineCalibration> {
    let model = model?;
    if step == 0.0 {
        tracing::info!("online calibration off ([predictor] calibration_step = 0): time=auto uses the model's offsets");
        return None;
    }
    let failed = saved.is_err();
    let (state, line) = OnlineCalibration::resume(saved, model, step);
    if failed {
        tracing::error!("{line}");
    } else {
        tracing::info!("{line}");
    }
    Some(state)
}

impl Calibrator {
    /// Loads the state for the configured model (slurmctld only: clients such as `sprio`
    /// get an inert calibrator).
    pub fn load(config: &Config, in_slurmctld: bool) -> Self {
        let path = crate::conf::calibration_path(config);
        let state = if in_slurmctld {
            match model(config) {
                Ok(m) => {
                    // This plugin writes the file: one it cannot read is set aside, not overwritten.
                    let saved =
                        OnlineCalibration::load(&path).map_err(|e| fairway_core::state_file::set_aside(&path, &e));
                    resume(saved, m.as_ref(), config.predictor.calibration_step)
                }
                // The terms say why the model does not load.
                Err(_) => None,
            }
        } else {
            None
        };
        Self {
            shared: Arc::new(Shared {
                path: Mutex::new(path),
                state: Mutex::new(state),
                dirty: AtomicBool::new(false),
                saving: AtomicBool::new(false),
                writing: Mutex::new(()),
            }),
        }
    }

    /// `scontrol reconfigure`: re-reads fairway.toml and its model. The same model keeps
    /// its calibration; a new one starts from its own offsets; a model that does not load
    /// keeps the calibration in use, as the terms keep the model.
    pub fn reconfigure(&self) {
        let Ok(config) = crate::conf::load() else { return };
        let Ok(m) = model(&config) else { return };
        let current = lock(&self.shared.state).clone();
        let next = resume(Ok(current), m.as_ref(), config.predictor.calibration_step);
        *lock(&self.shared.path) = crate::conf::calibration_path(&config);
        *lock(&self.shared.state) = next;
        self.shared.dirty.store(true, Ordering::Relaxed);
    }

    /// Learns from a job that ended, if it teaches anything; then saves in the background.
    pub fn job_ended(&self, job: &JobRecord<'_>) {
        let Some((predicted, ran)) = predict::outcome(job.ending(), job.admin_comment().as_deref(), job.ran_secs())
        else {
            return;
        };
        {
            let mut state = lock(&self.shared.state);
            let Some(s) = state.as_mut() else { return };
            let miss = s.update(predicted, ran);
            tracing::debug!(
                job_id = job.job_id(),
                predicted,
                ran,
                miss,
                shift = s.shift,
                "online calibration: learned from a finished job"
            );
        }
        self.shared.dirty.store(true, Ordering::Relaxed);
        self.save_in_background();
    }

    /// Saves the state if it changed, on this thread (no slurmctld locks held).
    pub fn save_if_dirty(&self) {
        self.shared.save_if_dirty();
    }

    /// Saves the state if it changed, on another thread; at most one such thread at once.
    pub fn save_in_background(&self) {
        if !self.shared.dirty.load(Ordering::Relaxed) || self.shared.saving.swap(true, Ordering::AcqRel) {
            return;
        }
        let shared = self.shared.clone();
        let spawned = std::thread::Builder::new().name("fairway-calib".into()).spawn(move || loop {
            // Changes that arrive while saving are saved by the next round.
            while shared.dirty.load(Ordering::Relaxed) {
                shared.save_if_dirty();
            }
            shared.saving.store(false, Ordering::Release);
            // A change between the last round and now found `saving` still set: take it.
            if !shared.dirty.load(Ordering::Relaxed) || shared.saving.swap(true, Ordering::AcqRel) {
                break;
            }
        });
        if let Err(e) = spawned {
            self.shared.saving.store(false, Ordering::Release);
            tracing::error!("online calibration: cannot start a thread to save it ({e}); saved at the next pass");
        }
    }

    /// The current state (for tests and logs).
    pub fn state(&self) -> Option<OnlineCalibration> {
        lock(&self.shared.state).clone()
    }
}

impl Shared {
    fn save_if_dirty(&self) {
        let _writer = lock(&self.writing);
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return;
        }
        let Some(state) = lock(&self.state).clone() else { return };
        let path = lock(&self.path).clone();
        if let Err(e) = state.save(&path) {
            tracing::error!("online calibration: cannot save it: {e}");
        }
    }
}
