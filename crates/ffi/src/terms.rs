//! Fairway's terms in slurmctld: `fairway_core::priority::State` loaded from and saved to
//! `StateSaveLocation`, and what the terms read of a job. Shared by `priority/fairway`
//! and `site_factor/fairway`; the policy itself is `fairway_core::priority`.

use std::path::PathBuf;

use fairway_core::predict::RuntimePredictor;
use fairway_core::priority::{State, TermsJob};
use fairway_core::Config;

use crate::job::JobRecord;

/// The plugins' [`State`] and where its run-time history is kept.
pub struct TermsState<P> {
    state: State<P>,
    path: PathBuf,
}

impl<P> TermsState<P> {
    /// Loads the run-time history and the learned model (slurmctld only; clients such
    /// as `sshare` get neither).
    pub fn load(config: &Config, in_slurmctld: bool) -> Self {
        let path = crate::conf::state_save_location().join(&config.predictor.state_file);
        let history = if in_slurmctld {
            RuntimePredictor::load(&path).unwrap_or_else(|e| {
                let line = fairway_core::state_file::set_aside(&path, &e.to_string());
                tracing::error!(
                    "{line}; starting with no run-time history (jobs ranked by their limits until theirs end)"
                );
                RuntimePredictor::default()
            })
        } else {
            RuntimePredictor::default()
        };
        let model = if in_slurmctld {
            crate::conf::learned_model(config).unwrap_or_else(|e| {
                tracing::error!("{e}; run-time predictions use the mean of the last two runs instead");
                None
            })
        } else {
            None
        };
        let state = State::new(config.priority.clone(), history, model);
        if in_slurmctld {
            log_terms(&state);
        }
        Self { state, path }
    }

    /// The state the policy reads.
    pub fn state(&self) -> &State<P> {
        &self.state
    }

    /// `scontrol reconfigure` (22.05; 24.05+ restarts slurmctld instead): re-reads
    /// fairway.toml's `[priority]` terms and `[predictor] model`, as multifactor re-reads
    /// its weights; the run-time history is kept. An unreadable file leaves both in use,
    /// an unreadable model the one loaded before, and says why.
    pub fn reconfigure(&self) {
        let config = match crate::conf::load() {
            Ok(c) => c,
            Err(e) => {
                tracing::error!("{e}; keeping the terms and run-time model in use");
                return;
            }
        };
        self.state.set_terms(config.priority.clone());
        log_terms(&self.state);
        match crate::conf::learned_model(&config) {
            Ok(m) => self.state.set_model(m),
            Err(e) => tracing::error!(
                "{e}; keeping the {}",
                if self.state.has_model() { "model loaded before" } else { "mean of the last two runs" }
            ),
        }
    }

    /// Learns a job's run time if it completed; returns whether it did.
    pub fn learn(&self, job: &JobRecord<'_>) -> bool {
        let Some(runtime) = job.completed_runtime() else { return false };
        self.state.learn(&job.prediction_request().key, runtime, job.time_limit_secs());
        true
    }

    /// Saves the history if it changed (call with no slurmctld locks held).
    pub fn save_if_dirty(&self) {
        if let Some(history) = self.state.history_to_save() {
            save(&history, &self.path);
        }
    }

    /// Saves the history on another thread: for callbacks that run under locks.
    pub fn save_in_background(&self) {
        if let Some(history) = self.state.history_to_save() {
            let path = self.path.clone();
            std::thread::spawn(move || save(&history, &path));
        }
    }
}

/// Says which terms are on, or that none is.
fn log_terms<P>(state: &State<P>) {
    if !state.enabled() {
        tracing::info!("Fairway terms off ([priority] sets none): priorities are multifactor's");
        return;
    }
    let p = state.terms();
    tracing::info!(
        "Fairway terms: weight_predicted_work={} weight_deadline={} (deadline_qos {:?}) max_wait={:?}s; runtime history for {} job keys",
        p.weight_predicted_work,
        p.weight_deadline,
        p.deadline_qos,
        p.max_wait.map(|s| s.0),
        state.history_len()
    );
}

fn save(history: &RuntimePredictor, path: &std::path::Path) {
    if let Err(e) = history.save(path) {
        tracing::error!("cannot save runtime history: {e}");
    }
}

impl JobRecord<'_> {
    /// What Fairway's terms read of the job.
    pub fn terms_job(&self) -> TermsJob {
        TermsJob {
            partition: self.partition().unwrap_or_default().into_owned(),
            user: self.user_id(),
            eligible_since: self.eligible_since(),
            deadline: self.deadline(),
            qos: self.qos().map(|q| q.name().into_owned()).unwrap_or_default(),
            gpus: self.gpus(),
            request: Some(self.prediction_request()),
            expected_runtime: None,
            fairshare: None, // priority/fairway has the factors
        }
    }

    /// [`terms_job`](Self::terms_job) for site_factor/fairway, with the job's fair-share
    /// factor, which the starvation bound's median needs and multifactor's factors would
    /// otherwise give.
    pub fn site_terms_job(&self) -> TermsJob {
        TermsJob { fairshare: Some(self.fairshare_factor(crate::conf::fs_dampening_factor())), ..self.terms_job() }
    }
}
