//! `job_submit/fairway`: workload tiers, QoS and gang rules at submission.
//!
//! Current state (see README, "Status"): the plugin loads in `slurmctld`, reads
//! `fairway.toml` and accepts every job unchanged; the rules are the job_submit
//! issue's work.

use fairway_core::Config;
use fairway_ffi::job::JobDesc;
use fairway_ffi::plugin::{JobSubmit, Verdict};

/// The plugin's state for the life of `slurmctld`.
pub struct FairwayJobSubmit {
    _config: Config,
}

impl JobSubmit for FairwayJobSubmit {
    fn init(config: Config) -> Result<Self, String> {
        Ok(Self { _config: config })
    }

    fn submit(&self, job: &mut JobDesc<'_>, submit_uid: u32) -> Verdict {
        tracing::debug!(submit_uid, name = ?job.name(), "job_submit: accepted unchanged");
        Ok(None)
    }

    fn modify(&self, job: &mut JobDesc<'_>, submit_uid: u32) -> Verdict {
        tracing::debug!(submit_uid, name = ?job.name(), "job_modify: accepted unchanged");
        Ok(None)
    }
}

fairway_ffi::job_submit_plugin!(name: "Fairway job_submit plugin", type: "job_submit/fairway", impl: FairwayJobSubmit);
