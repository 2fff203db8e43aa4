//! What job_submit/fairway decided since slurmctld started, counted for `fairway metrics`
//! (`StateSaveLocation/fairway-submit.json`, written by the plugin's own thread).
//!
//! Counts only, by outcome and by the kind of refusal: nothing about users or jobs, so
//! the file is readable by all. They restart from zero with slurmctld, as Prometheus
//! counters may ([`Counters::since`] says when).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::RejectKind;

/// The file's name in StateSaveLocation.
pub const FILE_NAME: &str = "fairway-submit.json";

/// Version of the file format.
pub const FORMAT: u32 = 1;

/// job_submit/fairway's decisions since `since`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counters {
    /// File format.
    pub format: u32,
    /// When counting started (Unix seconds): the plugin's load.
    pub since: i64,
    /// Submissions accepted as they were asked.
    pub accepted: u64,
    /// Submissions accepted with fields the rules set or changed.
    pub changed: u64,
    /// Submissions refused, by kind ([`RejectKind::name`]).
    pub refused: BTreeMap<String, u64>,
    /// Updates (`scontrol update` by users) refused, by kind.
    pub updates_refused: BTreeMap<String, u64>,
}

impl Counters {
    /// Counting from `since`.
    pub fn new(since: i64) -> Self {
        Self { format: FORMAT, since, ..Self::default() }
    }

    /// Notes a submission: accepted (`Ok(changed anything)`) or refused.
    pub fn submitted(&mut self, outcome: Result<bool, RejectKind>) {
        match outcome {
            Ok(false) => self.accepted += 1,
            Ok(true) => self.changed += 1,
            Err(kind) => *self.refused.entry(kind.name().into()).or_default() += 1,
        }
    }

    /// Notes a refused update.
    pub fn update_refused(&mut self, kind: RejectKind) {
        *self.updates_refused.entry(kind.name().into()).or_default() += 1;
    }

    /// The counters as the file holds them.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Reads the file; an error says why (missing: job_submit/fairway is not loaded or
    /// has decided nothing yet).
    pub fn read(path: &Path) -> Result<Self, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let c: Self = serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        if c.format != FORMAT {
            return Err(format!("{}: format {} (this Fairway reads {FORMAT})", path.display(), c.format));
        }
        Ok(c)
    }
}

impl RejectKind {
    /// A short name for counting (`directive`, `gres`, `tasks`, `qos`, `unchecked`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Directive => "directive",
            Self::Gres => "gres",
            Self::Tasks => "tasks",
            Self::Qos => "qos",
            Self::Unchecked => "unchecked",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_outcome_and_kind_and_reads_back() {
        let mut c = Counters::new(1_000);
        c.submitted(Ok(false));
        c.submitted(Ok(true));
        c.submitted(Ok(true));
        c.submitted(Err(RejectKind::Directive));
        c.update_refused(RejectKind::Qos);
        assert_eq!((c.accepted, c.changed), (1, 2));
        assert_eq!(c.refused["directive"], 1);
        assert_eq!(c.updates_refused["qos"], 1);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(FILE_NAME);
        std::fs::write(&p, c.to_json()).unwrap();
        assert_eq!(Counters::read(&p).unwrap(), c);
        std::fs::write(&p, br#"{"format":2,"since":0,"accepted":0,"changed":0,"refused":{},"updates_refused":{}}"#)
            .unwrap();
        assert!(Counters::read(&p).unwrap_err().contains("format 2"));
    }
}
