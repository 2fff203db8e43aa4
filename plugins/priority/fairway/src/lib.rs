//! `priority/fairway`: a drop-in for `PriorityType=priority/multifactor`.
//!
//! Current state (see README, "Status"): job priorities are multifactor's weighted sum
//! of age, association, fair share, job size, partition and QOS, plus site factor and
//! nice, computed by `fairway_core::multifactor`; the FFI layer's decay thread decays
//! and accrues usage and runs Fair Tree or classic fair share. Not yet: TRES weights,
//! per-partition priorities of multi-partition jobs, periodic usage resets, and
//! Fairway's own terms.

use std::sync::RwLock;

use fairway_core::{fairshare, multifactor, Config};
use fairway_ffi::job::JobRecord;
use fairway_ffi::plugin::Priority;

/// The plugin's state for the life of the host process.
pub struct FairwayPriority {
    /// slurm.conf's knobs, re-read on `scontrol reconfigure`.
    conf: RwLock<SlurmKnobs>,
}

struct SlurmKnobs {
    damping: u16,
    weights: multifactor::Weights,
}

impl SlurmKnobs {
    fn read() -> Self {
        Self { damping: fairway_ffi::conf::fs_dampening_factor(), weights: fairway_ffi::multifactor::weights() }
    }
}

impl FairwayPriority {
    fn knobs(&self) -> std::sync::RwLockReadGuard<'_, SlurmKnobs> {
        self.conf.read().unwrap_or_else(|e| e.into_inner())
    }
}

impl Priority for FairwayPriority {
    fn init(_config: Config, in_slurmctld: bool) -> Result<Self, String> {
        if in_slurmctld && fairway_ffi::multifactor::tres_weights_configured() {
            tracing::error!("PriorityWeightTRES is not applied by priority/fairway yet: TRES factors count as 0");
        }
        Ok(Self { conf: RwLock::new(SlurmKnobs::read()) })
    }

    fn reconfig(&self, _assoc_clear: bool) {
        *self.conf.write().unwrap_or_else(|e| e.into_inner()) = SlurmKnobs::read();
    }

    fn priority(&self, job: &mut JobRecord<'_>, now: i64) -> u32 {
        if job.direct_set_prio() && job.priority() > 0 {
            job.clear_priority_factors();
            return job.priority();
        }
        let knobs = self.knobs();
        let input = job.multifactor_input(now, |u, s| fairshare::classic_factor(u, s, knobs.damping));
        let factors = multifactor::factors(&knobs.weights, &input);
        let prio = multifactor::priority(&knobs.weights, &factors);
        job.store_priority_factors(&knobs.weights, &factors);
        tracing::debug!(job_id = job.job_id(), prio, ?factors, "priority set");
        prio
    }

    fn calc_fs_factor(&self, usage_efctv: f64, shares_norm: f64) -> f64 {
        fairshare::classic_factor(usage_efctv, shares_norm, self.knobs().damping)
    }
}

fairway_ffi::priority_plugin!(name: "Fairway priority plugin", type: "priority/fairway", impl: FairwayPriority);
