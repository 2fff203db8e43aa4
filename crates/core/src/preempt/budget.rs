//! The per-job preemption budget, counted by `preempt/fairway` itself.
//!
//! Slurm's `restart_cnt` counts every requeue, and a job's owner may requeue it at will
//! (`scontrol requeue`, or a job script that treats every USR1 as a preemption): three
//! self-requeues would spend a budget of three and make the job immune to preemption.
//! So the budget counts only the preemptions this plugin started: one per victim round,
//! noted when Slurm asks for the victim's grace time, and kept in StateSaveLocation so
//! a restart of slurmctld does not refill it.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The file's name in StateSaveLocation.
pub const FILE_NAME: &str = "fairway-preemptions.json";

/// Version of the file format.
pub const FORMAT: u32 = 1;

/// How long a job's count is kept after its last preemption: 30 days, longer than any
/// job a site lets wait or run.
pub const KEEP_SECS: i64 = 30 * 86_400;

/// Preemptions per job id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Preemptions {
    format: u32,
    jobs: BTreeMap<u32, Preempted>,
}

/// One job's preemptions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
struct Preempted {
    /// Times preempted.
    count: u32,
    /// When the grace of the last preemption ends: a job asked about again before then
    /// is still in that preemption.
    until: i64,
    /// When the last preemption chose it (its grace began); 0 in files written before
    /// this was kept.
    #[serde(default)]
    chosen: i64,
}

/// How the victims of the kept preemptions (their last one each) ended, from sacct.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Graces {
    /// Victims that ended before their grace ran out: they saved and acknowledged
    /// (`fairway ckpt-done`) or finished.
    pub acknowledged: u64,
    /// Victims Slurm stopped when the grace ran out.
    pub expired: u64,
    /// Seconds of grace those victims used (chosen to end), in all.
    pub used: u64,
    /// Seconds of grace they were given, in all.
    pub given: u64,
}

/// `SLURM_TIME_FORMAT=%s sacct -X -D -n -P -o SACCT_FORMAT -j <jobs>`: each run of each job
/// (requeued runs included) with its end as Unix seconds.
pub const SACCT_FORMAT: &str = "JobIDRaw,End";

impl Preemptions {
    /// Times `job_id` has been preempted.
    pub fn count(&self, job_id: u32) -> u32 {
        self.jobs.get(&job_id).map_or(0, |p| p.count)
    }

    /// Notes that `job_id` was chosen as a victim at `chosen` with a grace ending at
    /// `until`; returns whether this is a new preemption (not the one in progress). A new
    /// one also forgets jobs last preempted more than [`KEEP_SECS`] before it.
    pub fn note(&mut self, job_id: u32, chosen: i64, until: i64) -> bool {
        let p = self.jobs.entry(job_id).or_default();
        if p.count > 0 && chosen <= p.until {
            return false;
        }
        p.count += 1;
        p.until = until;
        p.chosen = chosen;
        self.jobs.retain(|_, p| p.until + KEEP_SECS > chosen);
        true
    }

    /// Jobs with a preemption kept (the last [`KEEP_SECS`]), and their preemptions in all.
    pub fn summary(&self) -> (usize, u64) {
        (self.jobs.len(), self.jobs.values().map(|p| u64::from(p.count)).sum())
    }

    /// Jobs whose last preemption's start is kept, for sacct's `-j`: the newest `max`.
    pub fn victims(&self, max: usize) -> Vec<u32> {
        let mut v: Vec<(i64, u32)> =
            self.jobs.iter().filter(|(_, p)| p.chosen > 0).map(|(j, p)| (p.chosen, *j)).collect();
        v.sort_unstable_by(|a, b| b.cmp(a));
        v.into_iter().take(max).map(|(_, j)| j).collect()
    }

    /// How the last preemption of each victim sacct shows ended: the first run of the
    /// job that ended after it was chosen. Victims still in their grace (no such run
    /// yet) are not counted.
    pub fn graces(&self, sacct: &str) -> Graces {
        let mut ends: BTreeMap<u32, Vec<i64>> = BTreeMap::new();
        for l in sacct.lines() {
            let mut f = l.split('|');
            let (Some(id), Some(end)) = (f.next(), f.next()) else { continue };
            if let (Ok(id), Ok(end)) = (id.trim().parse::<u32>(), end.trim().parse::<i64>()) {
                ends.entry(id).or_default().push(end);
            }
        }
        let mut g = Graces::default();
        for (job, p) in self.jobs.iter().filter(|(_, p)| p.chosen > 0) {
            let Some(end) = ends.get(job).and_then(|e| e.iter().copied().filter(|&e| e >= p.chosen).min()) else {
                continue;
            };
            if end < p.until {
                g.acknowledged += 1;
            } else {
                g.expired += 1;
            }
            g.used += (end.min(p.until) - p.chosen).max(0) as u64;
            g.given += (p.until - p.chosen).max(0) as u64;
        }
        g
    }

    /// Loads the counts; a missing file is none. An unreadable file is an error for the
    /// caller to log (it then starts afresh: at worst a job is preempted again).
    pub fn load(path: &Path) -> Result<Self, String> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        Self::from_json(&bytes).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The counts from the bytes of a saved file ([`load`](Self::load) without the file).
    pub fn from_json(bytes: &[u8]) -> Result<Self, String> {
        let p: Self = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        if p.format != FORMAT {
            return Err(format!("format {} (this Fairway reads {FORMAT})", p.format));
        }
        Ok(p)
    }

    /// Saves the counts whole and private ([`crate::state_file::write_atomic`]).
    pub fn save(&self, path: &Path) -> Result<(), String> {
        crate::state_file::write_json(path, &Self { format: FORMAT, jobs: self.jobs.clone() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_count_per_preemption_and_none_for_requeues_by_the_owner() {
        let mut p = Preemptions::default();
        assert_eq!(p.count(7), 0, "requeues by the owner never reach this count");
        assert!(p.note(7, 100, 400));
        // Asked again within the same grace: the same preemption.
        assert!(!p.note(7, 101, 401));
        assert_eq!(p.count(7), 1);
        assert!(p.note(7, 1000, 1300));
        assert_eq!((p.count(7), p.count(8)), (2, 0));
    }

    #[test]
    fn graces_from_sacct_acknowledged_expired_and_in_progress() {
        let mut p = Preemptions::default();
        p.note(7, 100, 130); // acknowledged at 106
        p.note(8, 200, 230); // stopped at 250, after its grace
        p.note(9, 300, 330); // still in its grace: no run ended since
                             // Job 7 ran before (ended at 50), then the preempted run, then its resumed run.
        let sacct = "7|50\n7|106\n7|400\n8|250\n9|120\nnot|a row\n";
        let g = p.graces(sacct);
        assert_eq!(g, Graces { acknowledged: 1, expired: 1, used: 6 + 30, given: 60 });
        assert_eq!(p.victims(2), [9, 8], "the newest first");
        // A file from before `chosen` was kept counts nothing.
        let old: Preemptions =
            serde_json::from_str("{\"format\":1,\"jobs\":{\"7\":{\"count\":1,\"until\":130}}}").unwrap();
        assert_eq!((old.count(7), old.graces(sacct)), (1, Graces::default()));
    }

    #[test]
    fn survives_a_file_and_forgets_old_jobs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fairway-preemptions.json");
        let mut p = Preemptions::default();
        p.note(7, 100, 400);
        p.note(9, 86_400, 86_700);
        p.save(&path).unwrap();
        let mut q = Preemptions::load(&path).unwrap();
        assert_eq!((q.count(7), q.count(9)), (1, 1));
        // A preemption 30 days after job 7's forgets it; job 9's, 29 days before, stays.
        q.note(11, 400 + KEEP_SECS, 700 + KEEP_SECS);
        assert_eq!((q.count(7), q.count(9), q.count(11)), (0, 1, 1));
        assert_eq!(Preemptions::load(&dir.path().join("none")).unwrap(), Preemptions::default());
        std::fs::write(&path, b"{\"format\": 99, \"jobs\": {}}").unwrap();
        assert!(Preemptions::load(&path).unwrap_err().contains("format 99"));
    }
}
