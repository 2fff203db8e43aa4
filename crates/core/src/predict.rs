//! Runtime prediction: baselines, a learned upper-quantile model, and their evaluation.
//!
//! Jobs are keyed by user, account, job name and GPU count (recurring training and
//! evaluation jobs repeat these). Three predictors share the history kept here:
//!
//! - the user's **time limit** (what Slurm assumes without prediction);
//! - **Tsafrir's** ([`RuntimePredictor::predict`]): the mean of the last two run times of the
//!   same key, capped by the time limit; with one run, that run; with none, the time limit.
//!   When a running job outlives its prediction, [`RuntimePredictor::corrected`] raises it
//!   (doubling, at least to the elapsed time, capped by the limit), as in EASY++;
//! - a **learned model** ([`LearnedPredictor`]): gradient-boosted trees (`forust-ml`) on
//!   request and history [`Features`], trained on log run time and shifted by a split-conformal
//!   offset so that an upper quantile (say 0.85) of run times falls under the prediction;
//!   [`OnlineCalibration`] moves that offset as jobs finish, so that the quantile holds
//!   when the workload drifts.
//!
//! The priority plugin learns at job end and keeps the history in `StateSaveLocation` so it
//! survives restarts; [`evaluate`] replays a trace in time order and scores all three, the
//! learned model with its offsets fixed at training and calibrated online.

mod calibrate;
mod eval;
mod learned;
mod online;

pub use eval::{
    evaluate, evaluate_model, replay, replay_online, Accuracy, Evaluation, FinishedJob, Window, LAST_TWO, LEARNED,
    LEARNED_ONLINE, LEARNED_TYPICAL, TIME_LIMIT, WINDOW, WINDOW_STRIDE,
};
pub use learned::{Calibration, Features, LearnedPredictor, PredictError, TrainConfig, FEATURE_NAMES};
pub use online::{outcome, Ending, OnlineCalibration, DEFAULT_STEP, MAX_SHIFT, ONLINE_FORMAT};

use std::collections::{HashMap, VecDeque};
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Run times kept per key.
const HISTORY: usize = 8;
/// Run-time-to-limit ratios kept per user.
const USER_RATIOS: usize = 32;
/// Job keys kept; past this the keys not run for longest are forgotten (a user who
/// names every job differently would otherwise grow slurmctld's memory for ever).
pub const MAX_KEYS: usize = 50_000;
/// How far past its prediction a job may run before it counts as an overrun: 25%, and
/// a minute (short jobs jitter by seconds).
pub const OVERRUN_ALLOWANCE: f64 = 0.25;
const OVERRUN_SLACK_SECS: f64 = 60.0;
/// An overrun past this many times the ranking is gross: one in a user's recent jobs is
/// enough to lose the ranking (a job that ran 1 s twice, then a week, is the decoy attack).
pub const GROSS_OVERRUN: f64 = 4.0;
/// Outcomes kept per user for [`RuntimePredictor::overrun_penalty`].
const USER_OUTCOMES: usize = 8;
/// Format of the run-time history file. Files written before it was recorded have no
/// `format` and are format 1; a newer format is refused rather than half read.
pub const HISTORY_FORMAT: u32 = 1;

/// What identifies "the same job again".
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct JobKey {
    /// Numeric uid.
    pub user: u32,
    /// Account.
    pub account: String,
    /// Job name.
    pub name: String,
    /// GPUs requested.
    pub gpus: u32,
}

impl JobKey {
    fn encode(&self) -> String {
        format!("{}|{}|{}|{}", self.user, self.account, self.name, self.gpus)
    }
}

/// Recent run times per job key.
///
/// Files written before `runs` and `user_ratios` existed still load (both default to empty).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RuntimePredictor {
    history: HashMap<String, VecDeque<u64>>,
    /// Runs ever recorded per key (the history itself is capped at [`HISTORY`]).
    #[serde(default)]
    runs: HashMap<String, u64>,
    /// Recent run time / time limit per user: how much of their limits users really use.
    #[serde(default)]
    user_ratios: HashMap<u32, VecDeque<f32>>,
    /// Per key, the time limit of each run in `history` (0: none known), oldest first.
    #[serde(default)]
    limits: HashMap<String, VecDeque<u64>>,
    /// Per user, how each of their recent jobs ranked from history ended against that
    /// ranking (0: within [`OVERRUN_ALLOWANCE`], 1: an overrun, 2: past
    /// [`GROSS_OVERRUN`] times it), oldest first.
    #[serde(default)]
    overruns: HashMap<u32, VecDeque<u8>>,
    /// Per user, run time over ranking of the same jobs as `overruns` (files from before
    /// it existed have none: such users are ranked by their limits, as then).
    #[serde(default)]
    overrun_ratios: HashMap<u32, VecDeque<f32>>,
    /// Per key, when it last ran (a count of recorded runs), for eviction.
    #[serde(default)]
    last_ran: HashMap<String, u64>,
    /// Runs recorded, ever (the clock of `last_ran`).
    #[serde(default)]
    ran: u64,
}

/// What is known about a job when it is submitted: all a predictor may use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRequest {
    /// History key.
    pub key: JobKey,
    /// Time limit in seconds; `None` when unlimited or unknown.
    pub time_limit: Option<u64>,
    /// Nodes requested, when known.
    pub nodes: Option<u32>,
    /// CPUs requested, when known.
    pub cpus: Option<u32>,
    /// Submit time, Unix seconds. Hour and weekday features are taken in UTC, in the
    /// plugins as in training: `sacct -P` traces' local times are converted (`--tz`).
    pub submit: i64,
}

/// The run time a job's limit can be based on: the learned model's upper quantile when a
/// model is loaded, else the mean of the last two runs of its key (capped by its limit,
/// or the limit itself with no history); `None` with neither history nor limit.
pub fn predict_runtime(history: &RuntimePredictor, model: Option<&LearnedPredictor>, req: &JobRequest) -> Option<u64> {
    match model {
        Some(m) => Some(m.predict(history, req)),
        None => history.predict(&req.key, req.time_limit),
    }
}

/// The run time jobs are ranked by (priority's predicted-work term): the learned model's
/// typical run time when a model is loaded, else the mean of the last two runs of its key
/// that had a comparable limit ([`RuntimePredictor::predict_comparable`]). A user whose
/// jobs keep outliving their ranking ([`RuntimePredictor::overrun_penalty`]) is ranked
/// up by as much as their recent jobs outlived it, up to the time limit ([`Penalty`]).
///
/// Why: the term rewards a short prediction, and history is the user's to write. Tiny
/// decoy jobs of the same name and GPU count would otherwise make a week-long job look
/// like a second: decoys with a short limit do not count for a long one, and decoys
/// with the long limit cost the user the term once the long job overruns. Users whose run
/// times merely vary keep an order among their jobs: dropping all of them to the limit
/// cost up to a fifth of mean JCT on a trace without limits (openb in `bench/sim-sweep.sh`).
pub fn expected_runtime(history: &RuntimePredictor, model: Option<&LearnedPredictor>, req: &JobRequest) -> Option<u64> {
    expected_runtime_from(history, model, req).map(|(secs, _)| secs)
}

/// [`expected_runtime`], and where it came from (what `fairway explain` tells the user).
pub fn expected_runtime_from(
    history: &RuntimePredictor,
    model: Option<&LearnedPredictor>,
    req: &JobRequest,
) -> Option<(u64, RuntimeSource)> {
    let ranked = || match model {
        Some(m) => Some((m.typical(history, req), RuntimeSource::Model)),
        None => history.predict_comparable_from(&req.key, req.time_limit),
    };
    match history.overrun_penalty(req.key.user) {
        Penalty::None => ranked(),
        Penalty::Limit => req.time_limit.map(|l| (l, RuntimeSource::LimitAfterOverruns)),
        Penalty::Scale(f) => {
            let (p, source) = ranked()?;
            let scaled = (p as f64 * f64::from(f)).ceil().min(u64::MAX as f64) as u64;
            match req.time_limit {
                Some(l) if scaled >= l => Some((l, RuntimeSource::LimitAfterOverruns)),
                _ if source == RuntimeSource::TimeLimit => Some((p, source)),
                _ => Some((scaled, RuntimeSource::ScaledAfterOverruns)),
            }
        }
    }
}

/// What a user's recent overruns cost their ranking ([`RuntimePredictor::overrun_penalty`]).
///
/// A decoy attack ends in a job that outlives its rank by its whole length over the
/// decoys' (a week over a second): scaled by that, every ranking of the user reaches their
/// limit. A user whose run times merely vary keeps the order among their own jobs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Penalty {
    /// Their jobs run as ranked.
    None,
    /// More than a quarter of their recent jobs outlived their ranking, or one by more
    /// than [`GROSS_OVERRUN`] times: rankings are multiplied by the most one of them
    /// outlived it (and capped by the limit).
    Scale(f32),
    /// As `Scale`, for history saved before the ratios were kept: ranked by the limit.
    Limit,
}

/// Where the run time a job is ranked by came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeSource {
    /// The mean of the user's last two comparable runs (same name and GPU count, a limit
    /// at least half this one's).
    LastRuns,
    /// The learned model (`[predictor] model`).
    Model,
    /// The job's time limit: no comparable run yet.
    TimeLimit,
    /// The job's time limit, because the user's jobs keep outliving their predictions.
    LimitAfterOverruns,
    /// The prediction, raised because the user's jobs keep outliving their predictions
    /// ([`Penalty::Scale`]).
    ScaledAfterOverruns,
    /// Given by the caller (the simulator's cached or perfect predictions).
    Given,
}

impl std::fmt::Display for RuntimeSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::LastRuns => "the mean of your last two comparable runs",
            Self::Model => "the learned model",
            Self::TimeLimit => "the time limit (no comparable run yet)",
            Self::LimitAfterOverruns => "the time limit (your recent jobs outlived their predictions)",
            Self::ScaledAfterOverruns => "the prediction, raised as far as your recent jobs outlived theirs",
            Self::Given => "given",
        })
    }
}

/// Learns a finished job as the plugins and the simulator do: whether it outlived the
/// run time it was ranked by (before this run is known), then its run time and limit;
/// forgets the oldest keys past [`MAX_KEYS`].
pub fn learn(history: &mut RuntimePredictor, key: &JobKey, runtime: u64, time_limit: Option<u64>) {
    history.note_outcome(key, runtime, time_limit);
    history.record_with_limit(key, runtime, time_limit);
    history.forget_oldest(MAX_KEYS);
}

impl RuntimePredictor {
    /// Predicted run time in seconds, capped by `time_limit` (seconds) when given.
    pub fn predict(&self, key: &JobKey, time_limit: Option<u64>) -> Option<u64> {
        let h = self.history.get(&key.encode());
        let p = match h.map(|h| h.len()) {
            Some(n) if n >= 2 => {
                let h = h.unwrap();
                Some((h[n - 1] + h[n - 2]).div_ceil(2))
            }
            Some(1) => h.unwrap().back().copied(),
            _ => time_limit,
        };
        match (p, time_limit) {
            (Some(p), Some(l)) => Some(p.min(l)),
            (p, _) => p,
        }
    }

    /// The prediction a job is ranked by without a model: the mean of the last two runs
    /// of `key` whose limit was at least half of `time_limit` (runs of unknown limit
    /// count), the one such run when there is one, else the limit; capped by the limit.
    pub fn predict_comparable(&self, key: &JobKey, time_limit: Option<u64>) -> Option<u64> {
        self.predict_comparable_from(key, time_limit).map(|(p, _)| p)
    }

    /// [`predict_comparable`](Self::predict_comparable), and whether it came from runs or the limit.
    pub fn predict_comparable_from(&self, key: &JobKey, time_limit: Option<u64>) -> Option<(u64, RuntimeSource)> {
        match self.comparable_runs(key, time_limit) {
            Some(p) => Some((time_limit.map_or(p, |l| p.min(l)), RuntimeSource::LastRuns)),
            None => time_limit.map(|l| (l, RuntimeSource::TimeLimit)),
        }
    }

    /// The mean of the last two comparable runs ([`predict_comparable`](Self::predict_comparable)), if any.
    fn comparable_runs(&self, key: &JobKey, time_limit: Option<u64>) -> Option<u64> {
        let k = key.encode();
        let h = self.history.get(&k)?;
        let limits = self.limits.get(&k);
        // `limits` may be shorter than `history` (files from before it existed): align on the newest.
        let limit_of =
            |i: usize| limits.and_then(|l| (l.len() + i).checked_sub(h.len()).and_then(|j| l.get(j).copied()));
        let comparable = |i: &usize| match (limit_of(*i), time_limit) {
            (Some(run), Some(l)) if run > 0 => run.saturating_mul(2) >= l,
            _ => true,
        };
        let mut last = (0..h.len()).rev().filter(comparable).map(|i| h[i]);
        match (last.next(), last.next()) {
            (Some(a), Some(b)) => Some((a + b).div_ceil(2)),
            (Some(a), None) => Some(a),
            _ => None,
        }
    }

    /// What `user`'s recent overruns cost their ranking ([`expected_runtime`]): nothing
    /// while at most a quarter of their recent jobs ranked from history outlived it by
    /// more than [`OVERRUN_ALLOWANCE`] and none by more than [`GROSS_OVERRUN`] times; else
    /// the ranking times the most one of them outlived it (the time limit when the ratios
    /// are unknown, in files from before they were kept), until their jobs run as ranked
    /// again.
    pub fn overrun_penalty(&self, user: u32) -> Penalty {
        let Some(o) = self.overruns.get(&user) else { return Penalty::None };
        if !o.contains(&2) && o.iter().filter(|&&x| x > 0).count() * 4 <= o.len() {
            return Penalty::None;
        }
        match self.overrun_ratios.get(&user).filter(|r| r.len() == o.len()) {
            Some(r) => Penalty::Scale(r.iter().copied().fold(1.0, f32::max)),
            None => Penalty::Limit,
        }
    }

    /// Notes, before `runtime` is recorded, whether a job ranked from history outlived
    /// that ranking. Jobs without comparable history (ranked by their limit) are not noted.
    fn note_outcome(&mut self, key: &JobKey, runtime: u64, time_limit: Option<u64>) {
        let Some(ranked) = self.comparable_runs(key, time_limit) else { return };
        let ranked = time_limit.map_or(ranked, |l| ranked.min(l));
        let (r, ranked) = (runtime as f64, ranked as f64);
        let outcome = if r > ranked * GROSS_OVERRUN + OVERRUN_SLACK_SECS {
            2
        } else {
            u8::from(r > ranked * (1.0 + OVERRUN_ALLOWANCE) + OVERRUN_SLACK_SECS)
        };
        let o = self.overruns.entry(key.user).or_default();
        o.push_back(outcome);
        while o.len() > USER_OUTCOMES {
            o.pop_front();
        }
        let n = o.len();
        let ratios = self.overrun_ratios.entry(key.user).or_default();
        ratios.push_back((r / ranked.max(1.0)) as f32);
        while ratios.len() > n {
            ratios.pop_front();
        }
    }

    /// Forgets the keys that ran longest ago until at most `max` remain (down to 90% of
    /// it, so the scan is not repeated for every run once full).
    pub fn forget_oldest(&mut self, max: usize) {
        if self.history.len() <= max {
            return;
        }
        let mut by_age: Vec<(u64, String)> =
            self.history.keys().map(|k| (self.last_ran.get(k).copied().unwrap_or(0), k.clone())).collect();
        by_age.sort_unstable();
        let drop = self.history.len() - max * 9 / 10;
        for (_, k) in by_age.into_iter().take(drop) {
            self.history.remove(&k);
            self.runs.remove(&k);
            self.limits.remove(&k);
            self.last_ran.remove(&k);
        }
    }

    /// Records a finished job's run time.
    pub fn record(&mut self, key: &JobKey, runtime_secs: u64) {
        self.record_run(key, runtime_secs, 0);
    }

    fn record_run(&mut self, key: &JobKey, runtime_secs: u64, limit: u64) {
        let k = key.encode();
        *self.runs.entry(k.clone()).or_default() += 1;
        self.ran += 1;
        self.last_ran.insert(k.clone(), self.ran);
        let h = self.history.entry(k.clone()).or_default();
        h.push_back(runtime_secs);
        while h.len() > HISTORY {
            h.pop_front();
        }
        let n = h.len();
        let l = self.limits.entry(k).or_default();
        l.push_back(limit);
        while l.len() > n {
            l.pop_front();
        }
    }

    /// Records a finished job's run time and, when it had a limit, how much of it was used
    /// (a feature of the learned model). Prefer [`learn`] (which calls this).
    pub fn record_with_limit(&mut self, key: &JobKey, runtime_secs: u64, time_limit: Option<u64>) {
        self.record_run(key, runtime_secs, time_limit.unwrap_or(0));
        if let Some(limit) = time_limit.filter(|&l| l > 0) {
            let r = self.user_ratios.entry(key.user).or_default();
            r.push_back((runtime_secs as f64 / limit as f64).min(10.0) as f32);
            while r.len() > USER_RATIOS {
                r.pop_front();
            }
        }
    }

    /// Tsafrir's correction for a job still running at `elapsed` seconds: its prediction
    /// stays while the job is within it, and once outlived is doubled (and at least the
    /// elapsed time plus one second), capped by the limit. Applying it again each time the
    /// job outlives the result walks up to the limit in a few steps.
    pub fn corrected(prediction: u64, elapsed: u64, time_limit: Option<u64>) -> u64 {
        let p = if elapsed < prediction { prediction } else { prediction.saturating_mul(2).max(elapsed + 1) };
        time_limit.map_or(p, |l| p.min(l.max(prediction)))
    }

    /// Mean of the last two run times of `key` (the one run when there is one), uncapped.
    pub fn last_two_mean(&self, key: &JobKey) -> Option<u64> {
        let h = self.history.get(&key.encode())?;
        match h.len() {
            0 => None,
            1 => h.back().copied(),
            n => Some((h[n - 1] + h[n - 2]).div_ceil(2)),
        }
    }

    /// Last run time of `key`.
    pub fn last_run(&self, key: &JobKey) -> Option<u64> {
        self.history.get(&key.encode()).and_then(|h| h.back().copied())
    }

    /// Runs of `key` recorded so far.
    pub fn runs(&self, key: &JobKey) -> u64 {
        self.runs.get(&key.encode()).copied().unwrap_or(0)
    }

    /// Median of the user's recent run time / time limit ratios.
    pub fn user_median_ratio(&self, user: u32) -> Option<f64> {
        let r = self.user_ratios.get(&user).filter(|r| !r.is_empty())?;
        let mut v: Vec<f32> = r.iter().copied().collect();
        v.sort_by(f32::total_cmp);
        let n = v.len();
        Some(if n % 2 == 1 { v[n / 2] as f64 } else { (v[n / 2 - 1] as f64 + v[n / 2] as f64) / 2.0 })
    }

    /// Number of keys with history.
    pub fn len(&self) -> usize {
        self.history.len()
    }

    /// Whether nothing has been learned yet.
    pub fn is_empty(&self) -> bool {
        self.history.is_empty()
    }

    /// Loads saved history; a missing file is an empty predictor.
    pub fn load(path: &Path) -> Result<Self, PredictError> {
        let err = |msg: String| PredictError::File { path: path.display().to_string(), msg };
        match std::fs::read(path) {
            Ok(b) => Self::from_json(&b).map_err(err),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(err(e.to_string())),
        }
    }

    /// History from the bytes of a saved file ([`load`](Self::load) without the file).
    pub fn from_json(bytes: &[u8]) -> Result<Self, String> {
        // The format first, on its own: a newer file's fields may not even parse as ours.
        #[derive(Deserialize)]
        struct Format {
            format: Option<u32>,
        }
        let not_history = |e: serde_json::Error| format!("not a run-time history: {e}");
        match serde_json::from_slice::<Format>(bytes).map_err(not_history)?.format {
            None | Some(HISTORY_FORMAT) => {}
            Some(f) => {
                return Err(format!("run-time history of format {f}; this Fairway reads format {HISTORY_FORMAT}"))
            }
        }
        serde_json::from_slice(bytes).map_err(not_history)
    }

    /// Saves history whole and private ([`crate::state_file::write_atomic`]), with its format.
    pub fn save(&self, path: &Path) -> Result<(), PredictError> {
        #[derive(Serialize)]
        struct Versioned<'a> {
            format: u32,
            #[serde(flatten)]
            history: &'a RuntimePredictor,
        }
        crate::state_file::write_json(path, &Versioned { format: HISTORY_FORMAT, history: self })
            .map_err(|msg| PredictError::File { path: path.display().to_string(), msg })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> JobKey {
        JobKey { user: 1000, account: "vision".into(), name: "finetune".into(), gpus: 8 }
    }

    #[test]
    fn cold_start_falls_back_to_the_time_limit() {
        assert_eq!(RuntimePredictor::default().predict(&key(), Some(3600)), Some(3600));
        assert_eq!(RuntimePredictor::default().predict(&key(), None), None);
    }

    #[test]
    fn mean_of_the_last_two_capped_by_the_limit() {
        let mut p = RuntimePredictor::default();
        p.record(&key(), 100);
        assert_eq!(p.predict(&key(), Some(3600)), Some(100));
        p.record(&key(), 1000);
        p.record(&key(), 2000);
        assert_eq!(p.predict(&key(), Some(3600)), Some(1500));
        assert_eq!(p.predict(&key(), Some(1200)), Some(1200));
        let other = JobKey { gpus: 4, ..key() };
        assert_eq!(p.predict(&other, Some(60)), Some(60));
    }

    #[test]
    fn correction_raises_an_outlived_prediction_up_to_the_limit() {
        assert_eq!(RuntimePredictor::corrected(600, 300, Some(3600)), 600);
        assert_eq!(RuntimePredictor::corrected(600, 600, Some(3600)), 1200);
        assert_eq!(RuntimePredictor::corrected(600, 1500, Some(3600)), 1501);
        assert_eq!(RuntimePredictor::corrected(2400, 2400, Some(3600)), 3600);
        assert_eq!(RuntimePredictor::corrected(600, 600, None), 1200);
        // A prediction already at the limit stays there.
        assert_eq!(RuntimePredictor::corrected(3600, 3600, Some(3600)), 3600);
    }

    #[test]
    fn decoys_with_a_short_limit_do_not_move_a_long_jobs_rank() {
        let mut p = RuntimePredictor::default();
        let week = 7 * 86_400;
        learn(&mut p, &key(), 1, Some(60));
        learn(&mut p, &key(), 1, Some(60));
        let req = JobRequest { key: key(), time_limit: Some(week), nodes: None, cpus: None, submit: 0 };
        assert_eq!(p.predict(&key(), Some(week)), Some(1), "the plain last-two is fooled");
        assert_eq!(expected_runtime(&p, None, &req), Some(week), "the ranking is not");
        // Runs under limits at least half as long count.
        learn(&mut p, &key(), 3 * 86_400, Some(4 * 86_400));
        assert_eq!(expected_runtime(&p, None, &req), Some(3 * 86_400));
    }

    #[test]
    fn a_user_whose_jobs_outlive_their_ranking_loses_it() {
        let mut p = RuntimePredictor::default();
        let day = 86_400;
        let req = JobRequest { key: key(), time_limit: Some(7 * day), nodes: None, cpus: None, submit: 0 };
        // Decoys under the long limit itself, then the long job: it ran ranked as 1 s.
        learn(&mut p, &key(), 1, Some(7 * day));
        learn(&mut p, &key(), 1, Some(7 * day));
        assert_eq!(expected_runtime(&p, None, &req), Some(1));
        learn(&mut p, &key(), 6 * day, Some(7 * day));
        assert_ne!(p.overrun_penalty(key().user), Penalty::None);
        let other = JobRequest { key: JobKey { name: "other".into(), ..key() }, ..req.clone() };
        assert_eq!(expected_runtime(&p, None, &other), Some(7 * day), "every job of the user, not just that key");
        // Jobs that run as ranked earn it back once the gross overrun is out of the window.
        for i in 0..USER_OUTCOMES {
            assert_ne!(p.overrun_penalty(key().user), Penalty::None, "after {i}");
            learn(&mut p, &key(), 3 * day, Some(7 * day));
        }
        assert_eq!(p.overrun_penalty(key().user), Penalty::None);
        // Plain overruns are allowed up to a quarter.
        learn(&mut p, &key(), 4 * day, Some(7 * day));
        assert_eq!(p.overrun_penalty(key().user), Penalty::None);
        // Jitter within the allowance is not an overrun.
        let mut q = RuntimePredictor::default();
        learn(&mut q, &key(), 1000, None);
        learn(&mut q, &key(), 1249 + 60, None);
        assert_eq!(q.overrun_penalty(key().user), Penalty::None);
    }

    #[test]
    fn a_user_whose_run_times_vary_is_ranked_up_by_their_overruns_not_to_the_limit() {
        let mut p = RuntimePredictor::default();
        let week = Some(7 * 86_400);
        let long = JobKey { name: "long".into(), ..key() };
        // Runs of about an hour that now and then take three.
        for rt in [3600, 3600, 3 * 3600, 3600, 3 * 3600, 3600, 3600] {
            learn(&mut p, &key(), rt, week);
        }
        learn(&mut p, &long, 10 * 3600, week);
        learn(&mut p, &long, 10 * 3600, week);
        let f = match p.overrun_penalty(key().user) {
            Penalty::Scale(f) => f,
            other => panic!("{other:?}"),
        };
        // The most one of them outlived its ranking: 3 h against the 2 h mean of the last two.
        assert!((1.4..=3.0).contains(&f), "{f}");
        let rank = |k: &JobKey| {
            let req = JobRequest { key: k.clone(), time_limit: week, nodes: None, cpus: None, submit: 0 };
            expected_runtime_from(&p, None, &req).unwrap()
        };
        let (short, source) = rank(&key());
        assert_eq!(source, RuntimeSource::ScaledAfterOverruns);
        assert!(short > 3600 && short < 7 * 86_400, "{short}");
        assert!(rank(&long).0 > short, "their own jobs keep their order");
    }

    #[test]
    fn history_saved_before_the_ratios_were_kept_ranks_an_overrunning_user_by_the_limit() {
        let mut p = RuntimePredictor::default();
        let week = Some(7 * 86_400);
        for rt in [1, 1, 86_400] {
            learn(&mut p, &key(), rt, week);
        }
        let mut json = serde_json::to_value(&p).unwrap();
        json.as_object_mut().unwrap().remove("overrun_ratios");
        let old: RuntimePredictor = serde_json::from_value(json).unwrap();
        assert_eq!(old.overrun_penalty(key().user), Penalty::Limit);
        let req = JobRequest { key: key(), time_limit: week, nodes: None, cpus: None, submit: 0 };
        assert_eq!(expected_runtime_from(&old, None, &req), Some((7 * 86_400, RuntimeSource::LimitAfterOverruns)));
    }

    #[test]
    fn the_oldest_keys_are_forgotten_past_the_cap() {
        let mut p = RuntimePredictor::default();
        for i in 0..30u32 {
            let k = JobKey { name: format!("j{i}"), ..key() };
            p.record_with_limit(&k, 10, None);
            p.forget_oldest(20);
        }
        assert!(p.len() <= 20, "{}", p.len());
        let newest = JobKey { name: "j29".into(), ..key() };
        let oldest = JobKey { name: "j0".into(), ..key() };
        assert_eq!(p.last_run(&newest), Some(10));
        assert_eq!(p.last_run(&oldest), None);
    }

    #[test]
    fn history_features() {
        let mut p = RuntimePredictor::default();
        assert_eq!((p.last_two_mean(&key()), p.last_run(&key()), p.runs(&key())), (None, None, 0));
        p.record_with_limit(&key(), 100, Some(1000));
        p.record_with_limit(&key(), 301, Some(1000));
        p.record_with_limit(&key(), 500, None);
        assert_eq!(p.last_two_mean(&key()), Some(401));
        assert_eq!(p.last_run(&key()), Some(500));
        assert_eq!(p.runs(&key()), 3);
        let m = p.user_median_ratio(1000).unwrap();
        assert!((m - 0.2005).abs() < 1e-6, "{m}");
        assert_eq!(p.user_median_ratio(7), None);
    }

    #[test]
    fn files_without_the_newer_fields_still_load() {
        let p = RuntimePredictor::from_json(br#"{"history":{"1000|a|n|1":[5,7]}}"#).unwrap();
        let k = JobKey { user: 1000, account: "a".into(), name: "n".into(), gpus: 1 };
        assert_eq!(p.predict(&k, None), Some(6));
        assert_eq!(p.runs(&k), 0);
    }

    #[test]
    fn history_round_trips_through_a_file() {
        let dir = std::env::temp_dir().join(format!("fairway-predict-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p.json");
        let mut p = RuntimePredictor::default();
        for r in 0..20 {
            p.record(&key(), r);
        }
        p.save(&path).unwrap();
        let q = RuntimePredictor::load(&path).unwrap();
        assert_eq!(p, q);
        assert_eq!(q.history[&key().encode()].len(), HISTORY);
        let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(saved["format"], HISTORY_FORMAT, "the file says its format");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn newer_truncated_or_foreign_history_is_refused_not_half_read() {
        let newer = RuntimePredictor::from_json(br#"{"format":2,"history":{"1000|a|n|1":"elsewhere"}}"#).unwrap_err();
        assert_eq!(newer, "run-time history of format 2; this Fairway reads format 1");
        let good = br#"{"format":1,"history":{"1000|a|n|1":[5,7]}}"#;
        assert!(RuntimePredictor::from_json(good).is_ok());
        let truncated = RuntimePredictor::from_json(&good[..good.len() / 2]).unwrap_err();
        assert!(truncated.starts_with("not a run-time history: EOF"), "{truncated}");
        let foreign = RuntimePredictor::from_json(br#"{"format":1,"history":[1,2]}"#).unwrap_err();
        assert!(foreign.starts_with("not a run-time history"), "{foreign}");
    }
}
