//! Replaying a trace through the predictors, and scoring them on a chronological split.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::{Deserialize, Serialize};

use super::learned::{Calibration, Features, LearnedPredictor, PredictError, TrainConfig};
use super::{JobRequest, OnlineCalibration, RuntimePredictor};

/// A job from a trace with what a predictor is scored on.
#[derive(Debug, Clone, PartialEq)]
pub struct FinishedJob {
    /// What was known at submit time.
    pub request: JobRequest,
    /// Actual run time, seconds.
    pub runtime: u64,
    /// When it ended (Unix seconds): from then on its run time is history.
    pub end: i64,
}

/// Walks `jobs` (sorted by submit time) as the plugin lives them: before each submission,
/// every job that has ended by then is recorded, so a prediction only ever sees the past.
/// `at_submit(i, history)` is called for each job in turn.
pub fn replay(jobs: &[FinishedJob], mut at_submit: impl FnMut(usize, &RuntimePredictor)) {
    let mut history = RuntimePredictor::default();
    let mut running = BinaryHeap::new();
    for (i, job) in jobs.iter().enumerate() {
        while let Some(&Reverse((end, j))) = running.peek() {
            if end > job.request.submit {
                break;
            }
            running.pop();
            let done: &FinishedJob = &jobs[j];
            history.record_with_limit(&done.request.key, done.runtime, done.request.time_limit);
        }
        at_submit(i, &history);
        running.push(Reverse((job.end, i)));
    }
}

/// One predictor's accuracy on the test jobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Accuracy {
    /// Which predictor.
    pub predictor: String,
    /// Test jobs it predicted (a predictor may have nothing to say, e.g. no time limit).
    pub jobs: usize,
    /// Mean absolute error, seconds.
    pub mae_s: f64,
    /// Median absolute error, seconds.
    pub median_ae_s: f64,
    /// Share of predictions within ±50% of the actual run time.
    pub within_50: f64,
    /// Share within ±100%.
    pub within_100: f64,
    /// Share of jobs that outlived their prediction.
    pub under_rate: f64,
}

impl Accuracy {
    /// Scores `(prediction, actual)` pairs, in seconds. With no pairs, every figure is NaN.
    pub fn score(predictor: &str, pairs: &[(u64, u64)]) -> Self {
        let n = pairs.len() as f64;
        let mut errors: Vec<f64> = pairs.iter().map(|&(p, a)| p.abs_diff(a) as f64).collect();
        errors.sort_by(f64::total_cmp);
        let share = |f: &dyn Fn(u64, u64) -> bool| pairs.iter().filter(|&&(p, a)| f(p, a)).count() as f64 / n;
        let median = match errors.len() {
            0 => f64::NAN,
            m if m % 2 == 1 => errors[m / 2],
            m => (errors[m / 2 - 1] + errors[m / 2]) / 2.0,
        };
        Accuracy {
            predictor: predictor.to_string(),
            jobs: pairs.len(),
            mae_s: errors.iter().sum::<f64>() / n,
            median_ae_s: median,
            within_50: share(&|p, a| p.abs_diff(a) as f64 <= 0.5 * a as f64),
            within_100: share(&|p, a| p.abs_diff(a) <= a),
            under_rate: share(&|p, a| p < a),
        }
    }
}

/// The result of [`evaluate`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// Oldest jobs (by submit time) used to train the learned model.
    pub train_jobs: usize,
    /// Newest jobs, on which every predictor is scored.
    pub test_jobs: usize,
    /// The learned model's calibration on its held-out training jobs.
    pub calibration: Calibration,
    /// The online calibration after the test jobs.
    pub online: OnlineCalibration,
    /// Time limit, last two (Tsafrir), the learned model's typical run time, its upper
    /// quantile with the offsets fixed at training, and calibrated online: in that order.
    pub results: Vec<Accuracy>,
    /// Share of test jobs that outlived the upper quantile, fixed and online, over runs of
    /// [`WINDOW`] consecutive test jobs (by submit time), one starting every
    /// [`WINDOW_STRIDE`] jobs.
    pub windows: Vec<Window>,
}

/// Under-prediction of the upper quantile over one run of consecutive test jobs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Window {
    /// Index of the run's first job among the test jobs.
    pub first: usize,
    /// Share that outlived the prediction with the offsets fixed at training.
    pub fixed: f64,
    /// Share with the offsets calibrated online.
    pub online: f64,
}

/// Jobs per [`Window`].
pub const WINDOW: usize = 200;
/// Jobs between the starts of two [`Window`]s.
pub const WINDOW_STRIDE: usize = 20;

/// Name of the time-limit baseline in [`Evaluation::results`].
pub const TIME_LIMIT: &str = "time limit";
/// Name of Tsafrir's baseline.
pub const LAST_TWO: &str = "last two (Tsafrir)";
/// Name of the learned model's typical run time (the trees, without offsets).
pub const LEARNED_TYPICAL: &str = "learned: typical";
/// Name of the learned model's upper quantile with its offsets fixed at training.
pub const LEARNED: &str = "learned: upper q, fixed";
/// Name of the learned model's upper quantile calibrated online.
pub const LEARNED_ONLINE: &str = "learned: upper q, online";

/// Trains on the oldest `train_frac` of `jobs` by submit time and scores, on the rest, the
/// time limit, Tsafrir's last two and the learned model: its typical run time, and its
/// upper quantile with the offsets fixed at training and calibrated online with step
/// `online_step` ([`OnlineCalibration`]). History keeps growing through the test jobs (as
/// in the plugin) and the trees are fixed after training. Online, each test job is
/// predicted at its submission and learned from once it has ended: test jobs that ended by
/// a submission (in end order) update the calibration before that job is predicted.
/// Returns the model too.
pub fn evaluate(
    jobs: &[FinishedJob],
    train_frac: f64,
    cfg: &TrainConfig,
    online_step: f64,
) -> Result<(Evaluation, LearnedPredictor), PredictError> {
    if !(train_frac > 0.0 && train_frac < 1.0) {
        return Err(PredictError::Config(format!("train fraction {train_frac} is not in (0, 1)")));
    }
    if !(online_step.is_finite() && (0.0..=1.0).contains(&online_step)) {
        return Err(PredictError::Config(format!("online step {online_step} is not in [0, 1]")));
    }
    let mut jobs = jobs.to_vec();
    jobs.sort_by_key(|j| j.request.submit);
    let split = (jobs.len() as f64 * train_frac).floor() as usize;
    if split == jobs.len() {
        return Err(PredictError::TooFewJobs { need: split + 1, got: jobs.len() });
    }
    let mut features = Vec::with_capacity(jobs.len());
    let mut last_two = Vec::with_capacity(jobs.len());
    replay(&jobs, |i, h| {
        let r = &jobs[i].request;
        features.push(Features::new(h, r));
        last_two.push(h.predict(&r.key, r.time_limit));
    });
    let examples: Vec<_> =
        jobs[..split].iter().zip(&features).map(|(j, f)| (*f, j.runtime, j.request.time_limit)).collect();
    let model = LearnedPredictor::train(&examples, cfg)?;
    let evaluation = score(&jobs, split, &features, &last_two, &model, online_step);
    Ok((evaluation, model))
}

/// Scores a model trained elsewhere (another period, another cluster) on every job of
/// `jobs`, as [`evaluate`] scores its newest jobs: what happens when a site's workload is
/// not the one its model was trained on.
pub fn evaluate_model(
    jobs: &[FinishedJob],
    model: &LearnedPredictor,
    online_step: f64,
) -> Result<Evaluation, PredictError> {
    if !(online_step.is_finite() && (0.0..=1.0).contains(&online_step)) {
        return Err(PredictError::Config(format!("online step {online_step} is not in [0, 1]")));
    }
    if jobs.is_empty() {
        return Err(PredictError::TooFewJobs { need: 1, got: 0 });
    }
    let mut jobs = jobs.to_vec();
    jobs.sort_by_key(|j| j.request.submit);
    let mut features = Vec::with_capacity(jobs.len());
    let mut last_two = Vec::with_capacity(jobs.len());
    replay(&jobs, |i, h| {
        let r = &jobs[i].request;
        features.push(Features::new(h, r));
        last_two.push(h.predict(&r.key, r.time_limit));
    });
    Ok(score(&jobs, 0, &features, &last_two, model, online_step))
}

/// Scores every predictor on `jobs[split..]`.
fn score(
    jobs: &[FinishedJob],
    split: usize,
    features: &[Features],
    last_two: &[Option<u64>],
    model: &LearnedPredictor,
    online_step: f64,
) -> Evaluation {
    let test = split..jobs.len();
    let limit = |i: usize| jobs[i].request.time_limit;
    let typical: Vec<u64> = test.clone().map(|i| model.typical_features(&features[i], limit(i))).collect();
    let fixed: Vec<u64> = test.clone().map(|i| model.predict_features(&features[i], limit(i))).collect();
    let (online_pred, online) = replay_online(&jobs[split..], model, &features[split..], online_step);

    let pairs = |pred: &dyn Fn(usize) -> Option<u64>| -> Vec<(u64, u64)> {
        test.clone().filter_map(|i| pred(i).map(|p| (p, jobs[i].runtime))).collect()
    };
    let results = vec![
        Accuracy::score(TIME_LIMIT, &pairs(&|i| jobs[i].request.time_limit)),
        Accuracy::score(LAST_TWO, &pairs(&|i| last_two[i])),
        Accuracy::score(LEARNED_TYPICAL, &pairs(&|i| Some(typical[i - split]))),
        Accuracy::score(LEARNED, &pairs(&|i| Some(fixed[i - split]))),
        Accuracy::score(LEARNED_ONLINE, &pairs(&|i| Some(online_pred[i - split]))),
    ];
    let miss = |p: &[u64], k: usize| u8::from(p[k] < jobs[split + k].runtime) as f64;
    let windows = (0..)
        .map(|w| w * WINDOW_STRIDE)
        .take_while(|&first| first + WINDOW <= test.len())
        .map(|first| {
            let share = |p: &[u64]| (first..first + WINDOW).map(|k| miss(p, k)).sum::<f64>() / WINDOW as f64;
            Window { first, fixed: share(&fixed), online: share(&online_pred) }
        })
        .collect();
    Evaluation {
        train_jobs: split,
        test_jobs: jobs.len() - split,
        calibration: model.calibration.clone(),
        online,
        results,
        windows,
    }
}

/// The upper-quantile predictions for `jobs` (sorted by submit time, `features` theirs)
/// with the model's offsets calibrated online as the plugins do: each job is predicted at
/// its submission with what the jobs that ended by then taught (in end order). Returns
/// the predictions and the final calibration.
pub fn replay_online(
    jobs: &[FinishedJob],
    model: &LearnedPredictor,
    features: &[Features],
    step: f64,
) -> (Vec<u64>, OnlineCalibration) {
    let mut online = OnlineCalibration::new(model, step);
    let mut predictions = Vec::with_capacity(jobs.len());
    let mut running = BinaryHeap::new();
    for (i, job) in jobs.iter().enumerate() {
        while let Some(&Reverse((end, j))) = running.peek() {
            if end > job.request.submit {
                break;
            }
            running.pop();
            let done: &FinishedJob = &jobs[j];
            online.update(predictions[j], done.runtime);
        }
        predictions.push(model.predict_features_online(&features[i], job.request.time_limit, Some(&online)));
        running.push(Reverse((job.end, i)));
    }
    (predictions, online)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predict::JobKey;

    fn job(user: u32, submit: i64, runtime: u64, limit: u64) -> FinishedJob {
        FinishedJob {
            request: JobRequest {
                key: JobKey { user, account: "a".into(), name: "n".into(), gpus: 1 },
                time_limit: Some(limit),
                nodes: Some(1),
                cpus: Some(4),
                submit,
            },
            runtime,
            end: submit + runtime as i64,
        }
    }

    #[test]
    fn replay_only_sees_jobs_that_ended() {
        // Job 0 runs 0..100; job 1 is submitted at 50 (0 still running), job 2 at 100.
        let jobs = [job(1, 0, 100, 1000), job(1, 50, 10, 1000), job(1, 100, 10, 1000)];
        let mut seen = vec![];
        replay(&jobs, |i, h| seen.push((i, h.predict(&jobs[i].request.key, Some(1000)))));
        assert_eq!(seen, vec![(0, Some(1000)), (1, Some(1000)), (2, Some(55))]);
    }

    #[test]
    fn online_replay_learns_only_from_jobs_that_ended() {
        // Five jobs of one key; the model is trained on others. Job 1 is submitted while
        // job 0 runs (0..1000), job 2 after it ended, job 3 while 2 runs; 4 after both.
        let train: Vec<FinishedJob> = (0..60).map(|i| job(2 + i % 3, i as i64 * 10, 100 + i as u64, 1000)).collect();
        let model = LearnedPredictor::train(
            &train
                .iter()
                .map(|j| (Features::new(&RuntimePredictor::default(), &j.request), j.runtime, None))
                .collect::<Vec<_>>(),
            &TrainConfig::default(),
        )
        .unwrap();
        let jobs = [
            job(1, 0, 1000, 5000),
            job(1, 500, 1, 5000),
            job(1, 1000, 2000, 5000),
            job(1, 1500, 1, 5000),
            job(1, 4000, 1, 5000),
        ];
        let features: Vec<Features> =
            jobs.iter().map(|j| Features::new(&RuntimePredictor::default(), &j.request)).collect();
        let (pred, online) = replay_online(&jobs, &model, &features, 0.1);
        // Same features: the first two predictions are equal (nothing ended yet); job 0
        // outlived its prediction, so job 2's is higher; by job 4 jobs 0, 1, 2 and 3 taught.
        assert_eq!(pred[0], pred[1]);
        assert!(pred[0] < 1000 && pred[2] > pred[1], "{pred:?}");
        assert_eq!((online.jobs, online.misses), (4, 2), "job 4 never ended before a submission");
        assert_eq!(pred[3], pred[2], "job 2 was still running at job 3's submission");
    }

    #[test]
    fn accuracy_figures() {
        let a = Accuracy::score("x", &[(100, 100), (50, 100), (300, 100), (100, 40)]);
        assert_eq!(a.jobs, 4);
        assert_eq!(a.mae_s, (0.0 + 50.0 + 200.0 + 60.0) / 4.0);
        assert_eq!(a.median_ae_s, 55.0);
        assert_eq!(a.within_50, 0.5);
        assert_eq!(a.within_100, 0.5);
        assert_eq!(a.under_rate, 0.25);
        assert!(Accuracy::score("none", &[]).mae_s.is_nan());
    }
}
