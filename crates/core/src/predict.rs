//! Online runtime prediction from a job's own history.
//!
//! Jobs are keyed by user, account, job name and GPU count (recurring training and
//! evaluation jobs repeat these). The prediction is Tsafrir's: the mean of the last two
//! run times of the same key, capped by the time limit; with one run, that run; with
//! none, the time limit. The priority plugin learns at job end and keeps the history
//! in `StateSaveLocation` so it survives restarts. (The learned model with quantiles and
//! its evaluation against this baseline belong to the predictor issue.)

use std::collections::{HashMap, VecDeque};
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Run times kept per key.
const HISTORY: usize = 8;

/// What identifies "the same job again".
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
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
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RuntimePredictor {
    history: HashMap<String, VecDeque<u64>>,
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

    /// Records a finished job's run time.
    pub fn record(&mut self, key: &JobKey, runtime_secs: u64) {
        let h = self.history.entry(key.encode()).or_default();
        h.push_back(runtime_secs);
        while h.len() > HISTORY {
            h.pop_front();
        }
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
    pub fn load(path: &Path) -> Result<Self, String> {
        match std::fs::read(path) {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| format!("{}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    /// Saves history atomically (write, then rename).
    pub fn save(&self, path: &Path) -> Result<(), String> {
        let tmp = path.with_extension("json.new");
        let json = serde_json::to_vec(self).map_err(|e| e.to_string())?;
        std::fs::write(&tmp, json)
            .and_then(|_| std::fs::rename(&tmp, path))
            .map_err(|e| format!("{}: {e}", path.display()))
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
        std::fs::remove_dir_all(dir).unwrap();
    }
}
