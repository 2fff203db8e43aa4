//! A trace-driven, event-driven simulator of a GPU cluster scheduled the way Slurm schedules
//! it, for comparing Fairway's priority with multifactor's, FIFO and an oracle.
//!
//! # What is simulated
//! - **Cluster**: a list of nodes, each with a number of GPUs ([`Cluster`]): `N × G`
//!   uniform nodes, or a heterogeneous list such as Alibaba openb's node list
//!   ([`Cluster::from_openb_nodes`]). Only GPUs are scheduled; CPUs and memory are not.
//! - **Jobs** come from [`fairway_trace::Job`] ([`Workload::prepare`]): submit time, true
//!   run time, time limit, GPUs, nodes, user, account, name. A job runs for its true run time,
//!   or is killed at its limit, as Slurm kills it.
//! - **Predicted limits** (optional, [`SimConfig::predicted_limits`]): job_submit/fairway's
//!   `time=auto` for every job with run history ([`fairway_core::limits`]): the limit is
//!   the predicted run time plus a margin, at most the job's own, and backfill plans with
//!   it. A job about to outlive it has it extended before the next pass, as
//!   priority/fairway extends it ([`Overrun::Extend`]), up to its own limit; or is killed
//!   at it and submitted again, starting over ([`Overrun::Kill`]: `time=auto` without
//!   extension).
//! - **Gang allocation**: a job on `n` nodes gets `g` GPUs on each of `n` distinct nodes,
//!   all at once, or nothing ([`Workload::prepare`] explains how shapes are normalised).
//!   Nodes are chosen best-fit (fewest free GPUs that suffice, then lowest index).
//! - **EASY backfill** (on by default): jobs start in priority order while they fit; the first
//!   that does not gets a reservation at the earliest time the running jobs' *time limits*
//!   free enough GPUs for it (the shadow time), and later jobs start only if they fit now and
//!   either end (by their limit) before the shadow time or use only GPUs the reservation
//!   does not need. With backfill off, scheduling stops at the first job that does not fit
//!   (strict priority order). Every policy uses the same scheduler; only the order differs.
//! - **Priority** ([`Policy`]), recalculated every [`SimConfig::calc_period`] simulated
//!   seconds (as `PriorityCalcPeriod`) and for each job at submission:
//!   - `fifo`: submit order;
//!   - `multifactor`: `priority/multifactor`'s age + fair share + job size, computed by
//!     [`fairway_core::multifactor::factors`] and [`fairway_core::multifactor::priority`];
//!     fair share is Fair Tree ([`fairway_core::fairshare::AssocTree::fair_tree`]) over a
//!     root → account → user association tree whose GPU-second usage decays with
//!     [`SimConfig::half_life`] ([`fairway_core::fairshare::real_decay`]) and accrues as
//!     the plugin charges it ([`fairway_core::fairshare::accrue::charge`]), updated every
//!     calc period as Slurm's decay thread does; priorities come from the plugin's own
//!     route ([`fairway_core::priority::Pass`]);
//!   - `fairway`: the same, plus Fairway's terms (predicted GPU-time from
//!     [`fairway_core::predict::RuntimePredictor`], which learns each job's run time when it
//!     ends; and the starvation bound, for jobs of the lightest quarter of the users
//!     waiting by fair-share factor);
//!   - `sjf-oracle`: true run time × GPUs, smallest first (not realisable: it knows the future).
//!
//!   Ties go to the earlier submission, then the earlier job in the trace.
//! - **GPU topology** (optional, [`Simulator::with_topology`]): every node has the GPUs of
//!   one topology file, and the GPUs a job gets on a node are followed under Fairway's
//!   topology choice and under first free side by side ([`placement`]). Run times do not
//!   depend on them.
//! - **Preemption** (optional, [`SimConfig::preempt`]): QoS preemption with requeue, victims
//!   in `preempt/fairway`'s order, with or without a grace to checkpoint ([`preemption`]).
//! - **Not simulated**: QOS priority and limits, partitions, node failures, job dependencies.
//!
//! The simulation has no randomness: the same workload and configuration always give the
//! same result (a synthetic workload is itself determined by its seed).
//!
//! # Metrics
//! [`Metrics`]: mean and median job completion time (end − submit), mean/p95/p99/max wait,
//! mean bounded slowdown (10 s floor), GPU utilisation, Jain's fairness index of per-user
//! mean bounded slowdown, share deviation (the time-averaged distance between each
//! account's GPUs and its share-weighted max-min fair allocation, while jobs wait) and the
//! p99 wait of the largest jobs (GPU count at or above the 90th percentile).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod engine;
mod metrics;
pub mod placement;
pub mod preemption;
mod workload;

use std::fmt;
use std::str::FromStr;

use fairway_core::config::{PriorityConfig, Seconds};
use fairway_core::multifactor::Weights;
use serde::Serialize;

pub use engine::{priority_pass, JobOutcome, LimitStats, SimResult, Simulator};
pub use fairway_core::limits::Overrun;
pub use metrics::{jain, percentile, water_fill, Metrics};
pub use placement::PlacementStats;
pub use preemption::{PreemptStats, SimPreempt};
pub use workload::{Cluster, Dropped, SimJob, Workload};

/// How pending jobs are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Policy {
    /// Submit order.
    Fifo,
    /// `priority/multifactor`: age, fair share (Fair Tree), job size.
    Multifactor,
    /// Multifactor plus Fairway's predicted-work term and starvation bound.
    Fairway,
    /// Shortest job first by true GPU-time (run time × GPUs): an oracle.
    SjfOracle,
}

impl Policy {
    /// Every policy with its command-line name.
    pub const ALL: [(&'static str, Policy); 4] = [
        ("fifo", Policy::Fifo),
        ("multifactor", Policy::Multifactor),
        ("fairway", Policy::Fairway),
        ("sjf-oracle", Policy::SjfOracle),
    ];
}

impl FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Policy::ALL.iter().find(|(n, _)| n.eq_ignore_ascii_case(s.trim())).map(|(_, p)| *p).ok_or_else(|| {
            let names: Vec<_> = Policy::ALL.iter().map(|(n, _)| *n).collect();
            format!("unknown policy `{s}` (expected one of: {})", names.join(", "))
        })
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(Policy::ALL.iter().find(|(_, p)| p == self).map_or("?", |(n, _)| n))
    }
}

/// Simulation settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// How pending jobs are ordered.
    pub policy: Policy,
    /// EASY backfill (true) or strict priority order (false).
    pub backfill: bool,
    /// Seconds between priority recalculations and fair-share decay passes
    /// (`PriorityCalcPeriod`).
    pub calc_period: i64,
    /// Multifactor weights (`PriorityWeight*`, `PriorityMaxAge`, `PriorityFlags`).
    pub weights: Weights,
    /// Fairway's terms (`[priority]` in fairway.toml), used by [`Policy::Fairway`] only.
    pub fairway: PriorityConfig,
    /// `PriorityDecayHalfLife`, seconds.
    pub half_life: u32,
    /// Raw fair-share shares per account; accounts not listed get
    /// [`SimConfig::default_shares`].
    pub shares: Vec<(String, u32)>,
    /// Shares of accounts not in [`SimConfig::shares`].
    pub default_shares: u32,
    /// QoS preemption with requeue ([`preemption`]); `None`: no preemption.
    pub preempt: Option<SimPreempt>,
    /// Each QoS's `Priority=` (sacctmgr), weighted by `weights.qos`; a QoS not listed has
    /// priority 0. As Slurm, a job's QOS factor is its QoS's priority over the highest.
    pub qos_priority: Vec<(String, u32)>,
    /// Fairway "predicts" each job's true run time: what better prediction could buy at
    /// most. An analysis aid; the plugins have no such oracle.
    pub perfect_prediction: bool,
    /// Noise for measuring how chaotic a schedule is: each job's site factor gets
    /// 0..=`points` more, drawn from (`seed`, job) alone, so two policies run with the same
    /// jitter see the same noise. An analysis aid, as [`SimConfig::perfect_prediction`]:
    /// it tells a policy's effect from the butterfly effects any tiny change has on one
    /// job's wait (`bench/sim-sweep.sh`).
    pub jitter: Option<Jitter>,
    /// `time=auto` for every job, as job_submit/fairway sets it: the limit is the predicted
    /// run time plus a margin, at most the job's own; `None`: every job has its own limit.
    pub predicted_limits: Option<PredictedLimits>,
}

/// Predicted time limits ([`SimConfig::predicted_limits`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PredictedLimits {
    /// `[job_submit.time] auto_margin`: the limit is the prediction × (1 + margin).
    pub margin: f64,
    /// What happens to a job about to outlive its predicted limit.
    pub overrun: Overrun,
    /// `[job_submit.time] min_predicted_limit`, seconds: the shortest predicted limit.
    pub min_limit: u64,
}

/// See [`SimConfig::jitter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Jitter {
    /// Which noise: the same seed gives every job the same points.
    pub seed: u64,
    /// At most this many priority points per job.
    pub points: u32,
}

impl Jitter {
    /// Job `j`'s points: a splitmix64 draw of (seed, j), so reproducible and uncorrelated
    /// with anything about the job.
    pub fn points_for(&self, j: usize) -> u32 {
        let mut z = self.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (j as u64);
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z % (u64::from(self.points) + 1)) as u32
    }
}

/// Fair share weight of [`SimConfig::default`]; Fairway's predicted-work weight is twice it.
pub const WEIGHT_FAIRSHARE: u32 = 10_000;

impl Default for SimConfig {
    /// A typical GPU site: `PriorityWeightAge=1000` (`PriorityMaxAge=7-0`),
    /// `PriorityWeightFairshare=10000` (Fair Tree), `PriorityWeightJobSize=1000`,
    /// `PriorityDecayHalfLife=7-0`, `PriorityCalcPeriod=1` (minute), equal shares; for
    /// Fairway, `weight_predicted_work = 20000` and `max_wait = 2-00:00:00`.
    fn default() -> Self {
        SimConfig {
            policy: Policy::Multifactor,
            backfill: true,
            calc_period: 60,
            weights: Weights {
                age: 1000,
                fairshare: WEIGHT_FAIRSHARE,
                job_size: 1000,
                max_age: 7 * 86_400,
                flags: fairway_core::multifactor::flags::FAIR_TREE,
                ..Weights::default()
            },
            fairway: PriorityConfig {
                weight_predicted_work: 2 * WEIGHT_FAIRSHARE,
                max_wait: Some(Seconds(2 * 86_400)),
                ..PriorityConfig::default()
            },
            half_life: 7 * 86_400,
            shares: Vec::new(),
            default_shares: 100,
            preempt: None,
            qos_priority: Vec::new(),
            perfect_prediction: false,
            jitter: None,
            predicted_limits: None,
        }
    }
}
