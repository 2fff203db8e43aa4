//! A test hook (feature `fault-injection`, never in releases): every priority pass's
//! inputs and decisions, one JSON line per job, written to
//! `StateSaveLocation/fairway-last-pass.jsonl` at the end of the pass. Tests replay a pass
//! slurmctld really ran through the simulator's path and compare. Without the feature
//! every method is empty.

use fairway_core::multifactor::Weights;
use fairway_core::priority::{JobInput, JobPriority};
use fairway_core::terms::FirstStarving;

/// The record of the pass in progress.
pub struct PassRecord {
    #[cfg(feature = "fault-injection")]
    lines: Vec<String>,
}

impl PassRecord {
    /// Starts the record of a pass under `weights` (slurm.conf's, as the plugin read them)
    /// from the starving jobs the last pass chose (`chosen`), which decide how this pass
    /// lifts them.
    #[allow(unused_variables)]
    pub fn new<P>(weights: &Weights, chosen: &FirstStarving<P>) -> Self {
        Self {
            #[cfg(feature = "fault-injection")]
            lines: {
                let (first, lifted) = chosen.chosen();
                let head = serde_json::json!({ "weights": weights, "chosen": { "first": first, "lifted": lifted } });
                serde_json::to_string(&head).into_iter().collect()
            },
        }
    }

    /// Records one job's input and the decision for it.
    #[allow(unused_variables)]
    pub fn job(&mut self, input: &JobInput, out: &JobPriority) {
        #[cfg(feature = "fault-injection")]
        if let Ok(line) = serde_json::to_string(&serde_json::json!({ "input": input, "output": out })) {
            self.lines.push(line);
        }
    }

    /// Ends the pass with the jobs that go first, and writes the record (temp file, then
    /// rename, so a reader never sees half a pass).
    #[allow(unused_variables)]
    pub fn finish(self, first: &[(u32, JobPriority)]) {
        #[cfg(feature = "fault-injection")]
        {
            let mut lines = self.lines;
            if let Ok(line) = serde_json::to_string(&serde_json::json!({ "first": first })) {
                lines.push(line);
            }
            let Some(dir) = crate::conf::state_dir() else { return };
            let path = dir.join("fairway-last-pass.jsonl");
            if let Err(e) = fairway_core::state_file::write_atomic(&path, (lines.join("\n") + "\n").as_bytes()) {
                tracing::error!("cannot write {}: {e}", path.display());
            }
        }
    }
}
