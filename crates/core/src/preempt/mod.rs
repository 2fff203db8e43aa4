//! `preempt/fairway`'s policy: `preempt/qos` semantics plus checkpoint-before-preempt.
//!
//! The plugin answers Slurm's three questions (22.05: `preempt_p_preemptable`,
//! `preempt_p_get_data`) from these pure functions:
//!
//! | Slurm asks | answer |
//! |---|---|
//! | may job B preempt job A? | [`qos::preemptable`] (the QoS `Preempt=` lists, `WITHIN`) and [`victim::is_preemptable`] (A's per-job budget) |
//! | `PREEMPT_DATA_MODE` | [`qos::mode`] |
//! | `PREEMPT_DATA_PRIO` (lowest preempted first) | [`victim::preempt_prio`]: unprotected before protected, low priority and little lost work first |
//! | `PREEMPT_DATA_GRACE_TIME` | [`grace::victim_grace`]: the job's declared checkpoint time plus a margin, capped per QoS |
//! | (within "may B preempt A?") | [`round::may_take`]: no new victims for B while its last round is in grace |
//!
//! The checkpoint itself is the job's: Slurm sends its `--signal` (set by
//! `job_submit/fairway` for checkpointing jobs) at the start of the grace time when
//! `preempt_send_user_signal` is on; the job saves its state and runs
//! `fairway ckpt-done`, which requeues it at once instead of at the end of the grace
//! time. [`victim::choose_victims`] gives the cheapest set of victims for the
//! simulator.
//!
//! - [`budget`]: the preemptions the per-job budget counts (Fairway's own, not requeues).
//! - [`config`]: `[preempt]` in `fairway.toml`.
//! - [`grace`]: a victim's grace time.
//! - [`victim`]: candidate order, budget, protection and the choice of a victim set.
//! - [`qos`]: `preempt/qos` semantics over a minimal QoS model.
//! - [`round`]: one preemption round at a time per preemptor.

pub mod budget;
pub mod config;
pub mod grace;
pub mod qos;
pub mod round;
pub mod victim;

pub use budget::Preemptions;
pub use config::PreemptConfig;
pub use grace::{grace_time, victim_grace, Grace, GraceSource};
pub use round::{may_take, Rounds};
pub use victim::{choose_victims, is_preemptable, preempt_prio, Candidate};
