//! What `priority/fairway` publishes after each decay pass, for `fairway explain`,
//! `fairway metrics` and whoever else reads it: the pass (when, how long, how many jobs)
//! and, for each pending job Fairway's terms touched, each term on its own (sprio shows
//! them only as one SITE number).
//!
//! The plugin writes it as [`FILE_NAME`] in `StateSaveLocation`, whole (temp, fsync,
//! rename) and off the decay thread's locks. Its mode follows slurm.conf's `PrivateData`:
//! readable by everyone unless `PrivateData=jobs`, when only slurmctld's user (and root)
//! may read it, as only they may see every job in sprio.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::config::PriorityConfig;
use crate::predict::RuntimeSource;
use crate::priority::{JobInput, JobPriority};
use crate::terms;

/// The file's name in `StateSaveLocation`.
pub const FILE_NAME: &str = "fairway-status.json";

/// The format written; a reader refuses another (see [`Status::read`]).
pub const FORMAT: u32 = 1;

/// One decay pass of `priority/fairway`, as published.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// [`FORMAT`].
    pub format: u32,
    /// When the pass started, Unix seconds.
    pub pass_started: i64,
    /// Wall time of the whole pass (decay, usage, fair share, priorities), seconds.
    pub pass_seconds: f64,
    /// Pending jobs whose priority the pass computed.
    pub pass_jobs: u64,
    /// `PriorityCalcPeriod`, seconds: a reader can tell a stale file.
    pub calc_period: u64,
    /// The terms' weights of the pass.
    pub weights: TermWeights,
    /// `[priority] max_wait`, seconds.
    pub max_wait: Option<u64>,
    /// The jobs whose priority holds any of Fairway's terms (none when every term is off).
    pub jobs: Vec<JobTerms>,
}

/// `[priority]`'s weights, as the pass used them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TermWeights {
    /// `weight_predicted_work`.
    pub predicted_work: u32,
    /// `weight_deadline`.
    pub deadline: u32,
}

/// One job's terms, weighted as they entered its site factor.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobTerms {
    /// The job id.
    pub id: u32,
    /// The partition(s) it competes in.
    pub partition: String,
    /// When it became eligible (its AccrueTime), Unix seconds; 0: not yet.
    pub eligible_since: i64,
    /// Predicted work's points (factor × weight).
    pub predicted_work: f64,
    /// Deadline urgency's points (factor × weight).
    pub deadline: f64,
    /// What Fairway added to the site factor (the two above, rounded).
    pub site_bonus: i64,
    /// The run time the terms assumed, seconds; `None`: unknown (one day assumed).
    pub expected_runtime: Option<u64>,
    /// Where that run time came from.
    pub runtime_source: Option<RuntimeSource>,
    /// Seconds past `max_wait`, if starving.
    pub starving_for: Option<u64>,
    /// Whether it is the job that goes first in its partition.
    pub first: bool,
    /// Eligible past `max_wait` but not lifted: a heavy user's
    /// ([`crate::terms::Terms::held_by_fair_share`]).
    #[serde(default)]
    pub held_by_fair_share: bool,
}

/// Collects a pass's jobs as the pass reaches them. This runs for every pending job
/// inside the pass, under slurmctld's locks, so it keeps a few numbers per job and no
/// allocation of its own (partitions are kept once each); [`status`](Self::status)
/// builds the file's records after the pass, on the status thread.
#[derive(Debug, Clone)]
pub struct PassJobs {
    weights: TermWeights,
    max_wait: Option<u64>,
    partitions: Vec<String>,
    jobs: Vec<Noted>,
}

/// One job as noted in the pass: [`JobTerms`] with the partition as an index.
#[derive(Debug, Clone, Copy)]
struct Noted {
    id: u32,
    partition: usize,
    eligible_since: i64,
    predicted_work: f64,
    deadline: f64,
    expected_runtime: Option<u64>,
    runtime_source: Option<RuntimeSource>,
    starving_for: Option<u64>,
    first: bool,
    held_by_fair_share: bool,
}

impl PassJobs {
    /// A pass under `config`'s terms.
    pub fn new(config: &PriorityConfig) -> Self {
        let weights = TermWeights { predicted_work: config.weight_predicted_work, deadline: config.weight_deadline };
        Self { weights, max_wait: config.max_wait.map(|w| w.0), partitions: Vec::new(), jobs: Vec::new() }
    }

    /// Notes one job and its priority (nothing for a job without terms).
    pub fn job(&mut self, input: &JobInput, out: &JobPriority) {
        let (Some(t), Some(j)) = (&out.terms, &input.terms) else { return };
        let partition = match self.partitions.iter().position(|p| *p == j.partition) {
            Some(i) => i,
            None => {
                self.partitions.push(j.partition.clone());
                self.partitions.len() - 1
            }
        };
        self.jobs.push(Noted {
            id: input.job_id,
            partition,
            eligible_since: j.eligible_since,
            predicted_work: t.predicted_work * f64::from(self.weights.predicted_work),
            deadline: t.deadline * f64::from(self.weights.deadline),
            expected_runtime: out.expected_runtime,
            runtime_source: out.runtime_source,
            starving_for: t.starving_for,
            first: false,
            held_by_fair_share: t.held_by_fair_share,
        });
    }

    /// Ends the pass with the jobs that go first in their partitions.
    pub fn finish(mut self, first: &[(u32, JobPriority)]) -> Self {
        if !first.is_empty() {
            for j in &mut self.jobs {
                j.first = first.iter().any(|(id, _)| *id == j.id);
            }
        }
        self
    }

    /// The status of the pass that started at `started`, took `seconds` and computed
    /// `jobs` priorities, every `calc_period` seconds.
    pub fn status(self, started: i64, seconds: f64, jobs: u64, calc_period: u64) -> Status {
        let partitions = self.partitions;
        let jobs_terms = self
            .jobs
            .into_iter()
            .map(|n| JobTerms {
                id: n.id,
                partition: partitions[n.partition].clone(),
                eligible_since: n.eligible_since,
                predicted_work: n.predicted_work,
                deadline: n.deadline,
                site_bonus: terms::site_bonus_of(n.predicted_work, n.deadline),
                expected_runtime: n.expected_runtime,
                runtime_source: n.runtime_source,
                starving_for: n.starving_for,
                first: n.first,
                held_by_fair_share: n.held_by_fair_share,
            })
            .collect();
        Status {
            format: FORMAT,
            pass_started: started,
            pass_seconds: seconds,
            pass_jobs: jobs,
            calc_period,
            weights: self.weights,
            max_wait: self.max_wait,
            jobs: jobs_terms,
        }
    }
}

/// Why a status file could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StatusError {
    /// It could not be read (absent, or not readable by this user).
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// It is not a status file this version understands.
    #[error("{path} is not a Fairway status file of format {FORMAT}: {why}")]
    Format {
        /// The file.
        path: String,
        /// Why.
        why: String,
    },
}

impl StatusError {
    /// Whether the file is absent or unreadable (rather than malformed).
    pub fn is_unreadable(&self) -> bool {
        matches!(self, Self::Read { .. })
    }
}

impl Status {
    /// Reads a status file.
    pub fn read(path: &Path) -> Result<Self, StatusError> {
        let shown = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| StatusError::Read { path: shown.clone(), source })?;
        let s: Status = serde_json::from_slice(&bytes)
            .map_err(|e| StatusError::Format { path: shown.clone(), why: e.to_string() })?;
        if s.format != FORMAT {
            return Err(StatusError::Format { path: shown, why: format!("format {}", s.format) });
        }
        Ok(s)
    }

    /// The file's contents.
    pub fn to_json(&self) -> Vec<u8> {
        // A struct of numbers and strings: serializing it cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Whether any of Fairway's terms was on in the pass.
    pub fn any_term_on(&self) -> bool {
        self.weights.predicted_work > 0 || self.weights.deadline > 0 || self.max_wait.is_some()
    }

    /// One job's terms, if the pass computed any for it.
    pub fn job(&self, id: u32) -> Option<&JobTerms> {
        self.jobs.iter().find(|j| j.id == id)
    }

    /// Whether the file is older than two passes at `now`: the plugin is not running
    /// (or not this plugin), and what it says is history.
    pub fn is_stale(&self, now: i64) -> bool {
        now - self.pass_started > 2 * self.calc_period.max(60) as i64 + 60
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::priority::TermsJob;
    use crate::terms::Terms;

    fn job(id: u32, pw: f64, starving: Option<u64>) -> (JobInput, JobPriority) {
        let input = JobInput {
            job_id: id,
            terms: Some(TermsJob { partition: "gpu".into(), eligible_since: 100, ..TermsJob::default() }),
            ..JobInput::default()
        };
        let out = JobPriority {
            terms: Some(Terms { predicted_work: pw, deadline: 0.0, starving_for: starving, held_by_fair_share: false }),
            expected_runtime: Some(3600),
            runtime_source: Some(RuntimeSource::LastRuns),
            ..JobPriority::default()
        };
        (input, out)
    }

    #[test]
    fn a_pass_publishes_each_term_weighted_and_the_jobs_that_go_first() {
        let config = PriorityConfig { weight_predicted_work: 1000, ..PriorityConfig::default() };
        let mut pass = PassJobs::new(&config);
        let (a, ao) = job(1, 0.5, None);
        let (b, bo) = job(2, 0.25, Some(30));
        pass.job(&a, &ao);
        pass.job(&b, &bo);
        // A job without terms (every term off when it was read) is not published.
        pass.job(&JobInput { job_id: 3, ..JobInput::default() }, &JobPriority::default());
        let s = pass.finish(&[(2, bo.clone())]).status(1_000, 0.25, 3, 60);
        assert_eq!(s.jobs.len(), 2);
        assert_eq!((s.job(1).unwrap().predicted_work, s.job(1).unwrap().site_bonus), (500.0, 500));
        assert_eq!((s.job(2).unwrap().first, s.job(2).unwrap().starving_for), (true, Some(30)));
        assert!(!s.job(1).unwrap().first);
        assert!(!s.is_stale(1_100) && s.is_stale(1_000 + 181));

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        std::fs::write(&path, serde_json::to_vec(&s).unwrap()).unwrap();
        assert_eq!(Status::read(&path).unwrap(), s);
        std::fs::write(&path, br#"{"format": 99}"#).unwrap();
        assert!(matches!(Status::read(&path), Err(StatusError::Format { .. })));
        assert!(Status::read(&dir.path().join("absent")).unwrap_err().is_unreadable());
    }
}
