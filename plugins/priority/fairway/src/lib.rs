//! `priority/fairway`: a drop-in for `PriorityType=priority/multifactor`.
//!
//! Current state (see README, "Status"): the plugin loads in `slurmctld` and in
//! `sshare`, reads `fairway.toml`, computes the classic fair-share factor `sshare`
//! asks for, and orders jobs by submission like `priority/basic`. The multifactor
//! factors, decay and Fairway's own terms are the priority issue's work.

use fairway_core::{fairshare, priority, Config};
use fairway_ffi::job::JobRecord;
use fairway_ffi::plugin::Priority;

/// The plugin's state for the life of the host process.
pub struct FairwayPriority {
    damping: u16,
}

impl Priority for FairwayPriority {
    fn init(_config: Config, in_slurmctld: bool) -> Result<Self, String> {
        tracing::debug!(in_slurmctld, "priority/fairway initialised");
        Ok(Self { damping: fairway_ffi::conf::fs_dampening_factor() })
    }

    fn set(&self, last_prio: u32, job: &mut JobRecord<'_>) -> u32 {
        let prio = priority::basic(priority::BasicInput {
            last_prio,
            current: job.priority(),
            direct_set_prio: job.direct_set_prio(),
            nice: job.nice(),
        });
        tracing::debug!(job_id = job.job_id(), prio, "priority set");
        prio
    }

    fn calc_fs_factor(&self, usage_efctv: f64, shares_norm: f64) -> f64 {
        fairshare::classic_factor(usage_efctv, shares_norm, self.damping)
    }
}

fairway_ffi::priority_plugin!(name: "Fairway priority plugin", type: "priority/fairway", impl: FairwayPriority);
