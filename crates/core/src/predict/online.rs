//! Online calibration of the learned model's upper quantile.
//!
//! The split-conformal offsets of a [`LearnedPredictor`] are set once, at training, on
//! jobs of that time. When the workload drifts (longer runs, a new project, a slower
//! file system) they stop covering: more jobs than 1 − q outlive their prediction, and
//! `time=auto` limits cut them short. [`OnlineCalibration`] corrects the offsets from the
//! jobs that finish after the model was trained: one shift δ (log space, so a factor on
//! every prediction) is added to the model's offsets and moved after each finished job,
//!
//! δ ← δ + η · (1{the job outlived its prediction} − (1 − q)),
//!
//! adaptive conformal inference (Gibbs & Candès, 2021) in the quantile-tracking form of
//! Angelopoulos, Candès & Tibshirani (2023): up by η·q after a miss, down by η·(1 − q)
//! after a hit. Summing the steps gives an identity that needs no assumption about the
//! run times: over the T jobs learned from, the share that outlived their prediction is
//! exactly (1 − q) + (δ_T − δ_0) / (η·T); the shift stays bounded (it only rises while
//! jobs miss), so the share goes to 1 − q however the workload moves. A step change in
//! run times by a factor k is absorbed in about ln k / (η·q) jobs.
//!
//! One shift for all ranges of predicted run time keeps the model's own trade-off between
//! them (where misses cost least, [`calibrate`](super::calibrate)) and learns from every
//! finished job at once. The typical run time (the trees' estimate, which priority ranks
//! jobs by) is not shifted: only the upper quantile, which time limits are set from,
//! adapts.
//!
//! The state is small and serialisable: the plugins keep it in `StateSaveLocation`
//! ([`save`](OnlineCalibration::save) writes a temporary file, syncs it and renames it over
//! the old one) and job_submit/fairway re-reads it when it changes.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::LearnedPredictor;

/// Format of the saved state; bumped when its meaning changes.
pub const ONLINE_FORMAT: u32 = 1;

/// Default step η (log space): a miss raises every upper prediction by e^(η·q) − 1 ≈ 4%
/// at q = 0.85, a hit lowers it by about 0.75%.
pub const DEFAULT_STEP: f64 = 0.05;

/// The shift stays within ±this (a factor of e^8 ≈ 3000 either way): a guard against a
/// stream of jobs that no shift can cover (every one outliving its time limit).
pub const MAX_SHIFT: f64 = 8.0;

/// The online state of one model's upper-quantile calibration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OnlineCalibration {
    /// [`ONLINE_FORMAT`] when written.
    pub format: u32,
    /// The model it calibrates ([`LearnedPredictor::fingerprint`]): a new model starts
    /// again from its own offsets.
    pub model: String,
    /// Target share of jobs that finish within their prediction (the model's quantile).
    pub quantile: f64,
    /// Step η, log space.
    pub step: f64,
    /// Shift δ added to the model's offsets, log space.
    pub shift: f64,
    /// Finished jobs learned from.
    pub jobs: u64,
    /// Of those, jobs that outlived their prediction.
    pub misses: u64,
}

impl OnlineCalibration {
    /// The state for a model before any job has finished: its own offsets (δ = 0).
    pub fn new(model: &LearnedPredictor, step: f64) -> Self {
        Self::for_model(model.fingerprint(), model.calibration.quantile, step)
    }

    /// As [`new`](Self::new), from the model's fingerprint and quantile.
    pub fn for_model(model: String, quantile: f64, step: f64) -> Self {
        let step = if step.is_finite() { step.clamp(0.0, 1.0) } else { 0.0 };
        OnlineCalibration { format: ONLINE_FORMAT, model, quantile, step, shift: 0.0, jobs: 0, misses: 0 }
    }

    /// Whether this state belongs to `model`.
    pub fn fits(&self, model: &LearnedPredictor) -> bool {
        self.model == model.fingerprint() && self.quantile == model.calibration.quantile
    }

    /// The state to go on from for `model`: `saved` (what [`load`](Self::load) returned)
    /// when it belongs to this model, else the model's own offsets; the step is `step`
    /// either way. Also returns a line for the log that says which, and why.
    pub fn resume(saved: Result<Option<Self>, String>, model: &LearnedPredictor, step: f64) -> (Self, String) {
        let fresh = Self::new(model, step);
        match saved {
            Ok(Some(s)) if s.fits(model) => {
                let line = format!(
                    "online calibration of model {}: shift {:+.3} (log space) after {} finished jobs, {:.1}% of them \
                     outlived their prediction",
                    s.model,
                    s.shift,
                    s.jobs,
                    100.0 * s.misses as f64 / s.jobs.max(1) as f64
                );
                (Self { step: fresh.step, ..s }, line)
            }
            Ok(Some(s)) => {
                let line = format!(
                    "online calibration: the saved state is for model {} (quantile {}), not {} (quantile {}): \
                     starting from the model's own offsets",
                    s.model, s.quantile, fresh.model, fresh.quantile
                );
                (fresh, line)
            }
            Ok(None) => {
                let line =
                    format!("online calibration of model {}: starting from the model's own offsets", fresh.model);
                (fresh, line)
            }
            Err(e) => (fresh, format!("{e}; online calibration starts again from the model's own offsets")),
        }
    }

    /// Learns from a finished job: `prediction` is the upper-quantile run time it was given
    /// (seconds, after any cap), `actual` how long it ran. Returns whether it outlived its
    /// prediction.
    pub fn update(&mut self, prediction: u64, actual: u64) -> bool {
        let miss = actual > prediction;
        let err = if miss { 1.0 } else { 0.0 };
        let shift = self.shift + self.step * (err - (1.0 - self.quantile));
        self.shift = shift.clamp(-MAX_SHIFT, MAX_SHIFT);
        self.jobs += 1;
        self.misses += u64::from(miss);
        miss
    }

    /// The offset to add to the trees' log prediction, given the model's own offset for it.
    pub fn offset(&self, model_offset: f64) -> f64 {
        model_offset + self.shift
    }

    /// Share of the jobs learned from that outlived their prediction (NaN before any).
    pub fn miss_rate(&self) -> f64 {
        self.misses as f64 / self.jobs as f64
    }

    /// Reads a saved state. `Ok(None)`: no file. An unreadable file, one that does not
    /// parse, or one of a newer format is an error saying so; callers then start from the
    /// model's own offsets.
    pub fn load(path: &Path) -> Result<Option<Self>, String> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        Self::from_json(&bytes).map(Some).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// A state from the bytes of a saved file ([`load`](Self::load) without the file).
    pub fn from_json(bytes: &[u8]) -> Result<Self, String> {
        let value: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| format!("not a calibration state: {e}"))?;
        match value.get("format").and_then(serde_json::Value::as_u64) {
            Some(f) if f == u64::from(ONLINE_FORMAT) => {}
            Some(f) => {
                return Err(format!("calibration state of format {f}; this Fairway reads format {ONLINE_FORMAT}"))
            }
            None => return Err("not a calibration state: no format".into()),
        }
        let state: Self = serde_json::from_value(value).map_err(|e| format!("not a calibration state: {e}"))?;
        let sane = state.shift.is_finite()
            && state.shift.abs() <= MAX_SHIFT
            && state.step.is_finite()
            && (0.0..=1.0).contains(&state.step)
            && state.quantile > 0.0
            && state.quantile < 1.0
            && state.misses <= state.jobs;
        if !sane {
            return Err("calibration state out of range".into());
        }
        Ok(state)
    }

    /// Saves the state so that a crash leaves either the old file or the new one
    /// ([`crate::state_file::write_atomic`]).
    pub fn save(&self, path: &Path) -> Result<(), String> {
        crate::state_file::write_json(path, self)
    }
}

/// How a job ended, as far as calibration is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It finished on its own, successfully.
    Completed,
    /// It finished on its own, with an error (failed, out of memory).
    Failed,
    /// Its time limit ended it.
    TimedOut,
    /// Anything else: cancelled, preempted, requeued, a node failure. How long it would
    /// have run is unknown, so it teaches nothing.
    Other,
}

/// What a finished job teaches the online calibration: the upper-quantile run time it was
/// given at submission (job_submit/fairway's record in its admin comment, see
/// [`crate::submit::recorded_prediction`]) and how long it ran, when it ended on its own or
/// at its limit and a prediction was recorded.
pub fn outcome(ending: Ending, admin_comment: Option<&str>, runtime: Option<u64>) -> Option<(u64, u64)> {
    if ending == Ending::Other {
        return None;
    }
    Some((crate::submit::recorded_prediction(admin_comment?)?, runtime?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(step: f64) -> OnlineCalibration {
        OnlineCalibration::for_model("m".into(), 0.85, step)
    }

    /// SplitMix64 uniform in [0, 1) and a standard normal from it.
    struct Rng(u64);
    impl Rng {
        fn uniform(&mut self) -> f64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
        }
        fn normal(&mut self) -> f64 {
            (-2.0 * (1.0 - self.uniform()).ln()).sqrt() * (std::f64::consts::TAU * self.uniform()).cos()
        }
    }

    /// The upper prediction for a job whose trees say `log_pred`, model offset `base`.
    fn predict(s: &OnlineCalibration, log_pred: f64, base: f64) -> u64 {
        (log_pred + s.offset(base)).exp_m1().ceil() as u64
    }

    #[test]
    fn steps_up_on_a_miss_and_down_on_a_hit() {
        let mut s = state(0.1);
        assert!(s.update(100, 101));
        assert!((s.shift - 0.085).abs() < 1e-12, "{}", s.shift);
        assert!(!s.update(100, 100));
        assert!((s.shift - 0.07).abs() < 1e-12, "{}", s.shift);
        assert_eq!((s.jobs, s.misses), (2, 1));
        assert_eq!(s.offset(1.0), 1.0 + s.shift);
        // Never beyond the guard, whatever comes.
        for _ in 0..10_000 {
            s.update(1, 1_000_000);
        }
        assert_eq!(s.shift, MAX_SHIFT);
        let mut off = state(0.0);
        off.update(1, 2);
        assert_eq!(off.shift, 0.0, "step 0: the model's own offsets");
    }

    #[test]
    fn the_miss_rate_is_the_target_plus_the_shift_moved_over_steps() {
        // The identity behind the long-run guarantee, on an arbitrary stream.
        let mut s = state(0.05);
        let mut rng = Rng(3);
        for t in 0..5000 {
            let actual = (1000.0 * (rng.normal() + (t / 700) as f64 * 0.3).exp()) as u64;
            s.update(predict(&s, 1000f64.ln_1p(), 1.0), actual);
        }
        let expected = (1.0 - s.quantile) + s.shift / (s.step * s.jobs as f64);
        assert!((s.miss_rate() - expected).abs() < 1e-9, "{} vs {expected}", s.miss_rate());
    }

    #[test]
    fn a_step_change_in_run_times_is_recovered_within_a_hundred_jobs() {
        // Log-normal run times around what the trees predict; the model's offset covers 85%
        // of them. After 2000 jobs every run takes three times as long.
        let base = 1.0364 * 0.5; // z(0.85) · σ
        let mut s = state(DEFAULT_STEP);
        let mut rng = Rng(11);
        let mut misses = Vec::new();
        for t in 0..4000 {
            let slow = if t >= 2000 { 3f64.ln() } else { 0.0 };
            let log_pred = 2000f64.ln_1p();
            let actual = (log_pred + slow + 0.5 * rng.normal()).exp_m1() as u64;
            misses.push(s.update(predict(&s, log_pred, base), actual));
        }
        let rate = |r: std::ops::Range<usize>| misses[r.clone()].iter().filter(|&&m| m).count() as f64 / r.len() as f64;
        // Before the change: on target. Fixed offsets would now miss most jobs.
        assert!((rate(1000..2000) - 0.15).abs() < 0.03, "{}", rate(1000..2000));
        // Within 100 jobs the shift has absorbed the factor of 3 (ln 3 ≈ 1.1)…
        let fixed_misses = (0..1000).filter(|_| (3f64.ln() + 0.5 * rng.normal()) > base).count();
        assert!(fixed_misses > 700, "{fixed_misses}");
        assert!(rate(2100..3000) < 0.18, "{}", rate(2100..3000));
        // …and the jobs after it are on target again.
        assert!((rate(2100..4000) - 0.15).abs() < 0.03, "{}", rate(2100..4000));
        assert!((s.shift - 3f64.ln()).abs() < 0.3, "{}", s.shift);
    }

    #[test]
    fn a_drop_in_run_times_tightens_the_prediction_again() {
        let mut s = state(DEFAULT_STEP);
        s.shift = 2.0; // after a period of long runs
        let mut rng = Rng(5);
        let mut last = Vec::new();
        for t in 0..1500 {
            let log_pred = 600f64.ln_1p();
            let actual = (log_pred + 0.4 * rng.normal()).exp_m1() as u64;
            let m = s.update(predict(&s, log_pred, 0.4 * 1.0364), actual);
            if t >= 1000 {
                last.push(m);
            }
        }
        let rate = last.iter().filter(|&&m| m).count() as f64 / last.len() as f64;
        assert!(s.shift.abs() < 0.3 && (rate - 0.15).abs() < 0.04, "shift {} rate {rate}", s.shift);
    }

    #[test]
    fn learns_from_jobs_that_ended_on_their_own_or_at_their_limit() {
        let record = Some("fairway:predicted_runtime=600");
        assert_eq!(outcome(Ending::Completed, record, Some(500)), Some((600, 500)));
        assert_eq!(outcome(Ending::Failed, record, Some(30)), Some((600, 30)));
        assert_eq!(
            outcome(Ending::TimedOut, Some("ops note fairway:predicted_runtime=600"), Some(900)),
            Some((600, 900))
        );
        assert_eq!(outcome(Ending::Other, record, Some(700)), None, "cancelled: unknown how long it needed");
        assert_eq!(outcome(Ending::Completed, None, Some(700)), None, "no record");
        assert_eq!(outcome(Ending::Completed, Some("fairway:predicted_runtime=unknown"), Some(7)), None);
        assert_eq!(outcome(Ending::Completed, record, None), None, "never started");
    }

    #[test]
    fn saves_atomically_and_refuses_what_it_cannot_read() {
        let dir = std::env::temp_dir().join(format!("fairway-online-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("calibration.json");
        assert_eq!(OnlineCalibration::load(&path), Ok(None));
        let mut s = state(0.05);
        s.update(10, 20);
        s.save(&path).unwrap();
        assert_eq!(OnlineCalibration::load(&path), Ok(Some(s.clone())));
        assert!(!dir.join("calibration.json.new").exists());
        // Corrupt, truncated, future or out-of-range files are errors, never panics.
        for (text, what) in [
            ("{ not json", "not a calibration state"),
            ("", "not a calibration state"),
            (r#"{"format": 2, "model": "m", "shift": 0.1, "new_field": []}"#, "format 2"),
            (r#"{"model": "m"}"#, "no format"),
            (r#"{"format": 1, "model": "m"}"#, "missing field"),
        ] {
            std::fs::write(&path, text).unwrap();
            let e = OnlineCalibration::load(&path).unwrap_err();
            assert!(e.contains(what), "{text}: {e}");
        }
        let mut wild = serde_json::to_value(&s).unwrap();
        wild["shift"] = 1e9.into();
        std::fs::write(&path, wild.to_string()).unwrap();
        assert!(OnlineCalibration::load(&path).unwrap_err().contains("out of range"));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
