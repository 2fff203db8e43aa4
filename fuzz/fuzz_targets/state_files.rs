//! The files the plugins read back inside slurmctld: the runtime history, online
//! calibration and preemption counts in StateSaveLocation, and the learned model an
//! admin names. Whatever the bytes (a truncated write, a disk error, a file from another
//! version), loading either fails with a message or gives a state the plugins then use
//! without panicking. The first byte picks the file.
#![no_main]

use fairway_core::predict::{self, JobKey, JobRequest, LearnedPredictor, OnlineCalibration, RuntimePredictor};
use fairway_core::preempt::Preemptions;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&which, bytes)) = data.split_first() else { return };
    let key = JobKey { user: 1000, account: "vision".into(), name: "train".into(), gpus: 8 };
    let req =
        JobRequest { key: key.clone(), time_limit: Some(3600), nodes: Some(1), cpus: Some(8), submit: 1_700_000_000 };
    match which % 4 {
        0 => {
            if let Ok(mut h) = RuntimePredictor::from_json(bytes) {
                let _ = predict::expected_runtime_from(&h, None, &req);
                let _ = predict::predict_runtime(&h, None, &req);
                predict::learn(&mut h, &key, 120, Some(3600));
                let _ = h.overrun_penalty(key.user);
                let _ = h.user_median_ratio(key.user);
                h.forget_oldest(1);
            }
        }
        1 => {
            if let Ok(mut c) = OnlineCalibration::from_json(bytes) {
                let _ = c.offset(0.5);
                let _ = c.miss_rate();
                c.update(600, 900);
            }
        }
        2 => {
            if let Ok(mut p) = Preemptions::from_json(bytes) {
                let _ = p.count(7);
                p.note(7, 1_700_000_000, 1_700_000_300);
            }
        }
        _ => {
            if let Ok(m) = LearnedPredictor::from_json(bytes) {
                let h = RuntimePredictor::default();
                let _ = m.predict(&h, &req);
                let _ = m.typical(&h, &req);
            }
        }
    }
});
