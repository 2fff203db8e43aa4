//! QoS preemption with requeue, as `preempt/fairway` (or `preempt/qos` with
//! `PreemptMode=REQUEUE`) does it.
//!
//! - **Who**: in each scheduling pass, the first job in priority order that does not fit
//!   may preempt, if its QoS's `Preempt=` list names another QoS ([`SimPreempt::pairs`]);
//!   one round at a time: while victims are in their grace, no new ones are taken. QoS
//!   priority is not simulated, so a preemptor must reach the head of the queue first.
//! - **Which**: candidates in `PREEMPT_DATA_PRIO` order
//!   ([`fairway_core::preempt::preempt_prio`]: unprotected first, then lower priority, then
//!   less work lost) are added from the front until the preemptor's shape fits; then, as
//!   Slurm's select plugin does, only those on the nodes it gets are preempted. A job
//!   preempted `max_preemptions` times is not a candidate; one within `min_runtime` of its
//!   start is taken last. While the victims checkpoint, the free GPUs the preemptor counted
//!   on are kept from other jobs.
//! - **Grace** ([`SimPreempt::grace`]): with preempt/fairway a victim is signalled, keeps its
//!   GPUs that long to write a checkpoint, and resumes from it when it runs again. Without
//!   grace it is requeued at once and resumes from its last periodic checkpoint
//!   ([`SimPreempt::checkpoint_every`]), or from scratch.
//! - When a round's last victim is requeued, its preemptor starts first if it fits (in Slurm
//!   its QoS priority would put it there); it waits in the queue otherwise.
//!
//! A requeued job keeps its submit time; its wait is to its first start and its JCT to its
//! final end. QoS priority itself is not simulated (see [`crate::SimConfig`]).

use fairway_core::preempt::config::PreemptConfig;
use serde::Serialize;

/// Preemption settings of a simulation.
#[derive(Debug, Clone, PartialEq)]
pub struct SimPreempt {
    /// (preemptor QoS, QoS it may preempt), as sacctmgr's `Preempt=` lists.
    pub pairs: Vec<(String, String)>,
    /// Victim order and protection: `min_runtime`, `max_preemptions` of `[preempt]`.
    pub rules: PreemptConfig,
    /// Seconds a victim keeps its GPUs to checkpoint before it is requeued; it then
    /// resumes from that checkpoint. 0: requeued at once.
    pub grace: u64,
    /// Victims' periodic checkpoints, seconds apart: what a victim without grace
    /// resumes from. `None`: it starts over.
    pub checkpoint_every: Option<u64>,
}

impl SimPreempt {
    /// Refuses pairs under which jobs could preempt each other round and round: a QoS
    /// preempting itself, or a cycle (`a:b` with `b:a`, or longer).
    pub fn validate(&self) -> Result<(), String> {
        for (p, v) in &self.pairs {
            if p == v {
                return Err(format!("QoS {p} cannot preempt itself"));
            }
        }
        // Depth-first from each QoS: a cycle returns to where it started.
        for (start, _) in &self.pairs {
            let mut stack = vec![start.as_str()];
            let mut seen = std::collections::BTreeSet::new();
            while let Some(q) = stack.pop() {
                for (p, v) in &self.pairs {
                    if p == q {
                        if v == start {
                            return Err(format!("QoS {start} can be preempted by a QoS it preempts (a cycle)"));
                        }
                        if seen.insert(v.as_str()) {
                            stack.push(v);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether a job of QoS `preemptor` may preempt one of QoS `victim`.
    pub fn may_preempt(&self, preemptor: &str, victim: &str) -> bool {
        self.pairs.iter().any(|(p, v)| p == preemptor && v == victim)
    }

    /// Seconds of a run of `ran` seconds that survive a preemption: all of it with grace
    /// (the victim checkpoints then), else up to the last periodic checkpoint.
    pub fn saved(&self, ran: u64) -> u64 {
        if self.grace > 0 {
            ran
        } else {
            self.checkpoint_every.filter(|&c| c > 0).map_or(0, |c| ran / c * c)
        }
    }
}

/// What preemption cost over a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct PreemptStats {
    /// Preemptions (a job preempted twice counts twice).
    pub preemptions: u64,
    /// Distinct jobs preempted at least once.
    pub jobs_preempted: u64,
    /// GPU-seconds of work redone: run since the last checkpoint when preempted.
    pub lost_gpu_seconds: f64,
    /// GPU-seconds victims held their GPUs during grace, writing checkpoints.
    pub grace_gpu_seconds: f64,
}
