//! The learned predictor: gradient-boosted trees on log run time, shifted by conformal
//! offsets so that an upper quantile of run times falls under the prediction.
//!
//! `forust-ml` has no quantile loss, so the trees fit ln(1 + run time) with squared loss on
//! the older part of the training jobs, and the newer part (kept out of fitting) calibrates:
//! offsets added in log space, one per range of the trees' prediction, chosen so that at most
//! a share 1 − q of calibration jobs outlive their prediction with the least error in
//! seconds ([`calibrate`](super::calibrate)). Predictions are capped by the time limit, like
//! every predictor here.

use std::fmt;
use std::path::Path;

use forust_ml::objective::ObjectiveType;
use forust_ml::{GradientBooster, Matrix};
use serde::{Deserialize, Serialize};

use super::calibrate::{self, Held};
use super::{JobRequest, OnlineCalibration, RuntimePredictor};

/// Model file format; bumped when features, their order or the calibration change
/// (2: one offset per range of predictions).
const FORMAT: u32 = 2;

/// Names of the model's features, in order.
pub const FEATURE_NAMES: [&str; 10] = [
    "log_time_limit",
    "gpus",
    "nodes",
    "cpus",
    "submit_hour_utc",
    "submit_weekday",
    "log_last_two_mean",
    "log_last_run",
    "runs_of_key",
    "user_median_runtime_to_limit",
];

/// Runs of a key beyond which more make no difference to the model. Uncapped, the count
/// only grows, and the trees read it as a clock: jobs of a busy key would get whatever the
/// newest training jobs did.
const RUNS_CAP: u64 = 16;

/// A job's features at submit time: its request plus what history says about its key and
/// user. Unknown values are NaN, which the trees route on their own.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Features(pub [f64; FEATURE_NAMES.len()]);

impl Features {
    /// Features of `req` given the history learned so far (jobs that ended before it).
    pub fn new(history: &RuntimePredictor, req: &JobRequest) -> Self {
        let opt = |v: Option<u64>| v.map_or(f64::NAN, |v| (v as f64).ln_1p());
        let secs_of_day = req.submit.rem_euclid(86_400);
        // 1970-01-01 was a Thursday: shift so that Monday is 0.
        let weekday = (req.submit.div_euclid(86_400) + 3).rem_euclid(7);
        Features([
            opt(req.time_limit),
            req.key.gpus as f64,
            req.nodes.map_or(f64::NAN, f64::from),
            req.cpus.map_or(f64::NAN, f64::from),
            (secs_of_day / 3600) as f64,
            weekday as f64,
            opt(history.last_two_mean(&req.key)),
            opt(history.last_run(&req.key)),
            history.runs(&req.key).min(RUNS_CAP) as f64,
            history.user_median_ratio(req.key.user).unwrap_or(f64::NAN),
        ])
    }
}

/// Training settings. The defaults are fixed, generic choices (not tuned on any test set).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainConfig {
    /// Share of jobs that should finish within their prediction (e.g. 0.85).
    pub quantile: f64,
    /// Newest share of the training jobs held out for conformal calibration.
    pub calibration_frac: f64,
    /// Boosting rounds.
    pub iterations: usize,
    /// Shrinkage per round.
    pub learning_rate: f32,
    /// Maximum tree depth.
    pub max_depth: usize,
    /// Seed for the booster.
    pub seed: u64,
    /// Fewest training jobs per leaf, as a share of the jobs the trees fit (at least
    /// 20 jobs). Squared loss gives each job one unit of hessian, so this is the booster's
    /// minimum leaf weight.
    pub min_leaf_share: f64,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            quantile: 0.85,
            calibration_frac: 0.25,
            iterations: 100,
            learning_rate: 0.1,
            max_depth: 4,
            seed: 0,
            min_leaf_share: 0.02,
        }
    }
}

/// Why a model could not be trained, loaded or saved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PredictError {
    /// Too few jobs to fit and calibrate.
    #[error("need at least {need} jobs with known run times to train, got {got}")]
    TooFewJobs {
        /// Minimum.
        need: usize,
        /// Given.
        got: usize,
    },
    /// A setting out of range.
    #[error("invalid training setting: {0}")]
    Config(String),
    /// The booster failed.
    #[error("training failed: {0}")]
    Train(String),
    /// Reading or writing the model file.
    #[error("{path}: {msg}")]
    File {
        /// The file.
        path: String,
        /// What went wrong.
        msg: String,
    },
}

/// How the conformal offsets were set, and what they achieved on the calibration jobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Target share of jobs finishing within their prediction.
    pub quantile: f64,
    /// Jobs used to fit the trees.
    pub fit_jobs: usize,
    /// Jobs used to calibrate.
    pub calibration_jobs: usize,
    /// Upper edges (ascending, log space) of the ranges of the trees' prediction that get
    /// their own offset.
    #[serde(default)]
    pub edges: Vec<f64>,
    /// Offset added to the log prediction in each range (one more than `edges`).
    #[serde(default)]
    pub offsets: Vec<f64>,
    /// Share of calibration jobs that outlived their (capped) prediction.
    pub under_rate: f64,
    /// Fewest training jobs per leaf of the trees.
    #[serde(default)]
    pub min_leaf_jobs: f32,
}

impl Calibration {
    /// Offset for a log prediction of the trees.
    pub fn offset(&self, log_pred: f64) -> f64 {
        self.offsets[calibrate::group(&self.edges, log_pred)]
    }

    /// The offsets in words, e.g. "offsets +0.950 … +3.200 (log space) over 10 ranges of
    /// predicted run time".
    pub fn describe_offsets(&self) -> String {
        let (lo, hi) =
            self.offsets.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &o| (lo.min(o), hi.max(o)));
        match self.offsets.len() {
            1 => format!("offset {lo:+.3} (log space)"),
            n => format!("offsets {lo:+.3} … {hi:+.3} (log space) over {n} ranges of predicted run time"),
        }
    }

    /// Whether a loaded file's calibration is usable.
    fn is_valid(&self) -> bool {
        self.offsets.len() == self.edges.len() + 1
            && self.offsets.iter().chain(&self.edges).all(|v| v.is_finite())
            && self.edges.windows(2).all(|w| w[0] < w[1])
    }
}

/// A trained upper-quantile run-time model, saved as JSON.
#[derive(Serialize, Deserialize)]
pub struct LearnedPredictor {
    format: u32,
    features: Vec<String>,
    /// How it was calibrated.
    pub calibration: Calibration,
    booster: GradientBooster,
    /// [`fingerprint`](Self::fingerprint), once computed.
    #[serde(skip)]
    fingerprint: std::sync::OnceLock<String>,
}

impl fmt::Debug for LearnedPredictor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LearnedPredictor")
            .field("format", &self.format)
            .field("trees", &self.booster.trees.len())
            .field("calibration", &self.calibration)
            .finish()
    }
}

/// Fewest training jobs in a leaf, whatever the share.
const MIN_LEAF_JOBS: f64 = 20.0;

/// Smallest number of jobs worth training on: a handful per calibration slot.
const MIN_JOBS: usize = 20;

impl LearnedPredictor {
    /// Trains on `examples` (features, run time, time limit) in submit order: the older
    /// `1 - calibration_frac` fit the trees, the newer rest sets the offset.
    pub fn train(examples: &[(Features, u64, Option<u64>)], cfg: &TrainConfig) -> Result<Self, PredictError> {
        if !(cfg.quantile > 0.0 && cfg.quantile < 1.0) {
            return Err(PredictError::Config(format!("quantile {} is not in (0, 1)", cfg.quantile)));
        }
        if !(cfg.calibration_frac > 0.0 && cfg.calibration_frac < 1.0) {
            return Err(PredictError::Config(format!("calibration_frac {} is not in (0, 1)", cfg.calibration_frac)));
        }
        if !(0.0..1.0).contains(&cfg.min_leaf_share) {
            return Err(PredictError::Config(format!("min_leaf_share {} is not in [0, 1)", cfg.min_leaf_share)));
        }
        if examples.len() < MIN_JOBS {
            return Err(PredictError::TooFewJobs { need: MIN_JOBS, got: examples.len() });
        }
        let n_cal = ((examples.len() as f64 * cfg.calibration_frac).round() as usize).clamp(1, examples.len() - 1);
        let (fit, cal) = examples.split_at(examples.len() - n_cal);

        let y: Vec<f64> = fit.iter().map(|(_, r, _)| (*r as f64).ln_1p()).collect();
        let cols = columns(fit.iter().map(|(f, _, _)| f));
        let data = Matrix::new(&cols, fit.len(), FEATURE_NAMES.len());
        // Leaves must stand for a population of jobs, not a handful: on heavy-tailed traces
        // small leaves let a few months-long jobs set the prediction of everything that
        // shares their hour or shape.
        let min_leaf = (fit.len() as f64 * cfg.min_leaf_share).max(MIN_LEAF_JOBS) as f32;
        let mut booster = GradientBooster::default()
            .set_objective_type(ObjectiveType::SquaredLoss)
            .set_iterations(cfg.iterations)
            .set_learning_rate(cfg.learning_rate)
            .set_max_depth(cfg.max_depth)
            .set_min_leaf_weight(min_leaf)
            .set_initialize_base_score(true)
            .set_seed(cfg.seed)
            // Small data; and a plugin-side model must not start thread pools.
            .set_parallel(false);
        booster.fit_unweighted(&data, &y, None).map_err(|e| PredictError::Train(e.to_string()))?;

        let mut model = LearnedPredictor {
            format: FORMAT,
            features: FEATURE_NAMES.iter().map(|s| s.to_string()).collect(),
            calibration: Calibration {
                quantile: cfg.quantile,
                fit_jobs: fit.len(),
                calibration_jobs: cal.len(),
                min_leaf_jobs: min_leaf,
                edges: Vec::new(),
                offsets: vec![0.0],
                under_rate: 0.0,
            },
            booster,
            fingerprint: std::sync::OnceLock::new(),
        };
        // Split conformal: residuals on jobs the trees never saw.
        let raw = model.raw(cal.iter().map(|(f, _, _)| f));
        let held: Vec<Held> =
            cal.iter().zip(&raw).map(|(&(_, runtime, limit), &log_pred)| Held { log_pred, runtime, limit }).collect();
        (model.calibration.edges, model.calibration.offsets) = calibrate::offsets(&held, cfg.quantile);
        let c = &model.calibration;
        let under = held.iter().filter(|h| calibrate::seconds(h.log_pred + c.offset(h.log_pred), h.limit) < h.runtime);
        model.calibration.under_rate = under.count() as f64 / cal.len() as f64;
        Ok(model)
    }

    /// Raw log-space predictions of the trees.
    fn raw<'a>(&self, features: impl ExactSizeIterator<Item = &'a Features>) -> Vec<f64> {
        let n = features.len();
        let cols = columns(features);
        self.booster.predict(&Matrix::new(&cols, n, FEATURE_NAMES.len()), false)
    }

    /// The trees' log prediction for one job.
    fn log_pred(&self, features: &Features) -> f64 {
        self.raw(std::iter::once(features))[0]
    }

    /// Predicted run time (seconds) for a job with these features, capped by its limit.
    pub fn predict_features(&self, features: &Features, time_limit: Option<u64>) -> u64 {
        let log = self.log_pred(features);
        calibrate::seconds(log + self.calibration.offset(log), time_limit)
    }

    /// Predicted run time (seconds) for `req` given the history so far, capped by its limit.
    pub fn predict(&self, history: &RuntimePredictor, req: &JobRequest) -> u64 {
        self.predict_features(&Features::new(history, req), req.time_limit)
    }

    /// As [`predict_features`](Self::predict_features), with the offsets moved by an online
    /// calibration of this model (see [`OnlineCalibration::fits`]); `None`: the model's own.
    pub fn predict_features_online(
        &self,
        features: &Features,
        time_limit: Option<u64>,
        online: Option<&OnlineCalibration>,
    ) -> u64 {
        let log = self.log_pred(features);
        let offset = self.calibration.offset(log);
        calibrate::seconds(log + online.map_or(offset, |o| o.offset(offset)), time_limit)
    }

    /// The upper-quantile run time for `req` given the history so far and the online
    /// calibration of this model, capped by its limit: what `time=auto` limits are set from.
    pub fn predict_online(
        &self,
        history: &RuntimePredictor,
        req: &JobRequest,
        online: Option<&OnlineCalibration>,
    ) -> u64 {
        self.predict_features_online(&Features::new(history, req), req.time_limit, online)
    }

    /// A short name for this model (16 hex digits) that changes when it is retrained: a
    /// hash of its calibration, its tree count and its predictions for a few fixed jobs.
    pub fn fingerprint(&self) -> String {
        self.fingerprint.get_or_init(|| self.compute_fingerprint()).clone()
    }

    fn compute_fingerprint(&self) -> String {
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        let mut eat = |bytes: &[u8]| {
            for &b in bytes {
                h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
            }
        };
        eat(&serde_json::to_vec(&self.calibration).unwrap_or_default());
        eat(&(self.booster.trees.len() as u64).to_le_bytes());
        let probes = [
            Features([f64::NAN; FEATURE_NAMES.len()]),
            Features([8.0, 1.0, 1.0, 8.0, 12.0, 2.0, 7.0, 7.0, 4.0, 0.5]),
            Features([11.0, 8.0, 2.0, 64.0, 3.0, 5.0, 10.0, 9.0, 16.0, 0.9]),
        ];
        for p in self.raw(probes.iter()) {
            eat(&p.to_bits().to_le_bytes());
        }
        format!("{h:016x}")
    }

    /// The trees' own estimate for `req`, without the conformal offset: a typical run time
    /// (exp of the mean log run time of similar jobs), for ranking jobs by their work,
    /// where an upper quantile would inflate the uncertain ones. Capped by the limit.
    pub fn typical(&self, history: &RuntimePredictor, req: &JobRequest) -> u64 {
        self.typical_features(&Features::new(history, req), req.time_limit)
    }

    /// [`typical`](Self::typical) for a job with these features.
    pub fn typical_features(&self, features: &Features, time_limit: Option<u64>) -> u64 {
        calibrate::seconds(self.log_pred(features), time_limit)
    }

    /// Loads a model saved by [`save`](Self::save).
    pub fn load(path: &Path) -> Result<Self, PredictError> {
        let err = |msg: String| PredictError::File { path: path.display().to_string(), msg };
        let bytes = std::fs::read(path).map_err(|e| err(e.to_string()))?;
        Self::from_json(&bytes).map_err(err)
    }

    /// A model from the bytes of a saved file ([`load`](Self::load) without the file).
    pub fn from_json(bytes: &[u8]) -> Result<Self, String> {
        let model: Self = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        if model.format != FORMAT || model.features != FEATURE_NAMES {
            return Err(format!(
                "model format {} with features {:?}; this build reads format {FORMAT} with {:?}: \
                 retrain it with `fairway predict train`",
                model.format, model.features, FEATURE_NAMES
            ));
        }
        if !model.calibration.is_valid() {
            return Err("calibration offsets do not match their ranges: retrain the model".into());
        }
        Ok(model)
    }

    /// Saves the model as JSON, whole ([`crate::state_file::write_atomic`]).
    pub fn save(&self, path: &Path) -> Result<(), PredictError> {
        crate::state_file::write_json(path, self)
            .map_err(|msg| PredictError::File { path: path.display().to_string(), msg })
    }
}

/// Column-major feature matrix, as `forust-ml` wants it.
fn columns<'a>(rows: impl ExactSizeIterator<Item = &'a Features>) -> Vec<f64> {
    let rows: Vec<&Features> = rows.collect();
    let mut cols = vec![0.0; rows.len() * FEATURE_NAMES.len()];
    for (i, f) in rows.iter().enumerate() {
        for (j, v) in f.0.iter().enumerate() {
            cols[j * rows.len() + i] = *v;
        }
    }
    cols
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predict::{
        evaluate, Evaluation, FinishedJob, JobKey, OnlineCalibration, LAST_TWO, LEARNED, LEARNED_ONLINE,
        LEARNED_TYPICAL,
    };

    /// A stationary synthetic workload: 30 recurring (user, name) pairs, each with its own
    /// typical run time, log-normal noise, and limits users over-request 2–8 times.
    fn workload(n: usize, seed: u64) -> Vec<FinishedJob> {
        let mut s = seed;
        let mut uniform = move || {
            // SplitMix64: enough randomness for a test, no dependency.
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
        };
        (0..n)
            .map(|i| {
                let pair = (uniform() * 30.0) as u32;
                let typical = 300.0 * 1.25f64.powi(pair as i32);
                let normal = (-2.0 * (1.0 - uniform()).ln()).sqrt() * (std::f64::consts::TAU * uniform()).cos();
                let limit = (typical * (2.0 + (pair % 7) as f64)).ceil() as u64;
                let runtime = ((typical * (0.4 * normal).exp()) as u64).min(limit);
                let submit = i as i64 * 600;
                FinishedJob {
                    request: JobRequest {
                        key: JobKey {
                            user: pair % 10,
                            account: "a".into(),
                            name: format!("n{pair}"),
                            gpus: 1 << (pair % 4),
                        },
                        time_limit: Some(limit),
                        nodes: Some(1),
                        cpus: Some(8),
                        submit,
                    },
                    runtime,
                    end: submit + runtime as i64,
                }
            })
            .collect()
    }

    #[test]
    fn calibration_meets_the_quantile_target() {
        let cfg = TrainConfig { quantile: 0.85, ..TrainConfig::default() };
        let (eval, _) = evaluate(&workload(3000, 7), 0.6, &cfg, 0.0).unwrap();
        assert!(eval.calibration.under_rate <= 0.15 + 1e-9, "{:?}", eval.calibration);
        let learned = eval.results.iter().find(|r| r.predictor == LEARNED).unwrap();
        let last_two = eval.results.iter().find(|r| r.predictor == LAST_TWO).unwrap();
        // Held-out jobs come from the same process: the target holds up to sampling noise.
        assert!(learned.under_rate <= 0.20, "{learned:?}");
        assert!(last_two.under_rate > 0.3, "{last_two:?}");
        assert_eq!(learned.jobs, 1200);
    }

    #[test]
    fn online_calibration_holds_the_quantile_when_run_times_drift() {
        // The newest 40% of jobs run 2.5 times as long (limits unchanged: some hit them).
        // One submission an hour: the longest jobs report back some 50 submissions later.
        let mut jobs = workload(3000, 7);
        for (i, j) in jobs.iter_mut().enumerate() {
            if i >= 1800 {
                j.runtime = ((j.runtime as f64 * 2.5) as u64).min(j.request.time_limit.unwrap());
            }
            j.request.submit *= 6;
            j.end = j.request.submit + j.runtime as i64;
        }
        let cfg = TrainConfig::default();
        let (eval, _) = evaluate(&jobs, 0.6, &cfg, crate::predict::DEFAULT_STEP).unwrap();
        let rate = |name: &str| eval.results.iter().find(|r| r.predictor == name).unwrap().under_rate;
        assert!(rate(LEARNED) > 0.35, "fixed offsets should stop covering: {}", rate(LEARNED));
        assert!((rate(LEARNED_ONLINE) - 0.15).abs() <= 0.03, "online: {}", rate(LEARNED_ONLINE));
        assert!(eval.online.shift > 0.5 && eval.online.jobs > 1100, "{:?}", eval.online);
        // The typical run time is not the calibration's business; step 0 is the fixed model.
        let (off, _) = evaluate(&jobs, 0.6, &cfg, 0.0).unwrap();
        let mae = |e: &Evaluation, name: &str| e.results.iter().find(|r| r.predictor == name).unwrap().mae_s;
        assert_eq!(mae(&off, LEARNED_TYPICAL), mae(&eval, LEARNED_TYPICAL));
        assert_eq!(mae(&off, LEARNED_ONLINE), mae(&off, LEARNED));
        // The worst stretch is the one right after the change, and online it is shorter-lived.
        let last = eval.windows.last().unwrap();
        assert!(last.fixed > 0.3 && last.online < 0.25, "{last:?}");
    }

    #[test]
    fn fingerprints_tell_models_apart() {
        let (_, a) = evaluate(&workload(400, 3), 0.7, &TrainConfig::default(), 0.05).unwrap();
        let (_, b) = evaluate(&workload(400, 4), 0.7, &TrainConfig::default(), 0.05).unwrap();
        assert_eq!(a.fingerprint(), a.fingerprint());
        assert_eq!(a.fingerprint().len(), 16);
        assert_ne!(a.fingerprint(), b.fingerprint());
        // The online state applies to its own model only, and moves the upper quantile alone.
        let mut online = OnlineCalibration::new(&a, 0.05);
        assert!(online.fits(&a) && !online.fits(&b));
        let history = RuntimePredictor::default();
        let req = workload(1, 9).remove(0).request;
        let req = JobRequest { time_limit: None, ..req };
        assert_eq!(a.predict_online(&history, &req, Some(&online)), a.predict(&history, &req));
        online.shift = 0.5;
        let (base, moved) = (a.predict(&history, &req) as f64, a.predict_online(&history, &req, Some(&online)) as f64);
        assert!((moved / base - 0.5f64.exp()).abs() < 0.01, "{base} → {moved}");
        assert_eq!(a.typical(&history, &req), a.typical_features(&Features::new(&history, &req), None));
    }

    #[test]
    fn model_round_trips_through_its_file() {
        let jobs = workload(400, 3);
        let (_, model) = evaluate(&jobs, 0.7, &TrainConfig::default(), 0.05).unwrap();
        let dir = std::env::temp_dir().join(format!("fairway-learned-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("model.json");
        model.save(&path).unwrap();
        let back = LearnedPredictor::load(&path).unwrap();
        assert_eq!(back.calibration, model.calibration);
        assert_eq!(back.fingerprint(), model.fingerprint());
        let mut history = RuntimePredictor::default();
        for j in &jobs {
            let (a, b) = (model.predict(&history, &j.request), back.predict(&history, &j.request));
            assert_eq!(a, b);
            assert!(a <= j.request.time_limit.unwrap());
            history.record_with_limit(&j.request.key, j.runtime, j.request.time_limit);
        }
        // What the plugins assume: the model when there is one, else the last two runs.
        let cold = &jobs[0].request;
        let empty = RuntimePredictor::default();
        assert_eq!(crate::predict::predict_runtime(&empty, Some(&back), cold), Some(back.predict(&empty, cold)));
        assert_eq!(crate::predict::predict_runtime(&empty, None, cold), cold.time_limit);
        // Ranking uses the trees' typical run time, limits the upper quantile.
        assert_eq!(crate::predict::expected_runtime(&empty, Some(&back), cold), Some(back.typical(&empty, cold)));
        assert_eq!(crate::predict::expected_runtime(&empty, None, cold), cold.time_limit);
        // And `fairway check-config` accepts the file.
        let toml = format!("[predictor]\nmodel = \"{}\"\n", path.display());
        let config = crate::Config::parse(&toml, &dir).unwrap();
        assert!(crate::check::check_predictor_model(&config, &dir).is_empty());
        // A model of the previous format (one offset) is refused with what to do about it.
        let mut old: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        old["format"] = 1.into();
        let cal = old["calibration"].as_object_mut().unwrap();
        cal.remove("edges");
        cal.remove("offsets");
        cal.insert("offset".into(), 1.5.into());
        std::fs::write(&path, serde_json::to_vec(&old).unwrap()).unwrap();
        let e = LearnedPredictor::load(&path).unwrap_err().to_string();
        assert!(e.contains("model format 1") && e.contains("retrain it with `fairway predict train`"), "{e}");
        // Offsets that do not match their ranges are refused too.
        old["format"] = FORMAT.into();
        old["calibration"]["edges"] = serde_json::json!([1.0, 2.0]);
        old["calibration"]["offsets"] = serde_json::json!([0.5]);
        std::fs::write(&path, serde_json::to_vec(&old).unwrap()).unwrap();
        assert!(LearnedPredictor::load(&path).unwrap_err().to_string().contains("retrain"));
        std::fs::write(&path, b"{\"format\": 99}").unwrap();
        assert!(LearnedPredictor::load(&path).is_err());
        let found = crate::check::check_predictor_model(&config, &dir);
        assert!(found.len() == 1 && found[0].message.starts_with("[predictor] model: "), "{found:?}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn refuses_bad_settings_and_tiny_traces() {
        let jobs = workload(10, 1);
        assert!(matches!(evaluate(&jobs, 0.5, &TrainConfig::default(), 0.05), Err(PredictError::TooFewJobs { .. })));
        let bad = TrainConfig { quantile: 1.5, ..TrainConfig::default() };
        assert!(matches!(evaluate(&workload(100, 1), 0.5, &bad, 0.05), Err(PredictError::Config(_))));
        assert!(matches!(evaluate(&jobs, 1.0, &TrainConfig::default(), 0.05), Err(PredictError::Config(_))));
    }

    #[test]
    fn features_of_a_cold_job() {
        let req = JobRequest {
            key: JobKey { user: 1, account: "a".into(), name: "n".into(), gpus: 8 },
            time_limit: Some(3600),
            nodes: None,
            cpus: Some(16),
            // Monday 2024-01-01 13:00 UTC.
            submit: 1_704_114_000,
        };
        let f = Features::new(&RuntimePredictor::default(), &req).0;
        assert_eq!(f[0], 3601f64.ln());
        assert_eq!((f[1], f[3], f[4], f[5], f[8]), (8.0, 16.0, 13.0, 0.0, 0.0));
        assert!(f[2].is_nan() && f[6].is_nan() && f[7].is_nan() && f[9].is_nan());
    }
}
