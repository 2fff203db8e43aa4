//! One preemption round at a time per preemptor.
//!
//! Slurm's scheduler only holds back from preempting more jobs for a pending
//! preemptor for `KillWait + MessageTimeout` after the round started; with grace
//! times longer than that (a checkpoint of a few minutes), later passes would pick
//! further victims for the same job while the first ones are still checkpointing.
//! Fairway does not: while the victims of a preemptor's round are inside their grace,
//! that preemptor may only take jobs already chosen as victims. When the round's
//! graces have ended and the job still does not fit, a new round may start.

/// Victims chosen, with when they were chosen (`preempt_time`) and when their grace ends.
#[derive(Debug, Default, Clone)]
pub struct Rounds {
    victims: Vec<(i64, i64)>,
}

/// Victims chosen within this many seconds of a preemptor's `preempt_start_time`
/// belong to its round (both are stamped in the same scheduling pass).
const SAME_PASS: i64 = 2;

/// Seconds after a victim's grace ends that Slurm may take to stop it (its time-limit
/// check runs every 30 s, then KillWait and the epilog): the round lasts until then,
/// or a pass in that gap would pick a further victim.
pub const ENFORCEMENT_SLACK: i64 = 60;

impl Rounds {
    /// Records a victim chosen at `chosen` whose grace ends at `until`.
    pub fn chosen(&mut self, chosen: i64, until: i64) {
        self.victims.push((chosen, until));
    }

    /// Whether a preemptor whose round started at `started` (Slurm's
    /// `preempt_start_time`; 0 = never) still has victims inside their grace at `now`.
    /// Forgets rounds that are over.
    pub fn in_progress(&mut self, started: i64, now: i64) -> bool {
        self.victims.retain(|&(_, until)| until + ENFORCEMENT_SLACK > now);
        started != 0 && self.victims.iter().any(|&(chosen, _)| (chosen - started).abs() <= SAME_PASS)
    }
}

/// Whether `preemptee` may be taken by a preemptor whose round started at `started`:
/// always if it is already a victim (`preempt_time` set), otherwise only when no round
/// of that preemptor is in progress.
pub fn may_take(rounds: &mut Rounds, preemptee_preempt_time: i64, started: i64, now: i64) -> bool {
    preemptee_preempt_time != 0 || !rounds.in_progress(started, now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_new_victims_while_a_round_is_in_grace() {
        let mut r = Rounds::default();
        // Never preempted anything: anything goes.
        assert!(may_take(&mut r, 0, 0, 100));
        // Round at t=100: two victims with 300 s of grace.
        r.chosen(100, 400);
        r.chosen(101, 400);
        // At t=140 (past KillWait + MessageTimeout) a fresh victim is refused, one of
        // the round's victims is not.
        assert!(!may_take(&mut r, 0, 100, 140));
        assert!(may_take(&mut r, 100, 100, 140));
        // Another preemptor, whose round started elsewhen, is not held back.
        assert!(may_take(&mut r, 0, 250, 260));
        assert!(may_take(&mut r, 0, 0, 260));
        // Nor when the grace has just ended but Slurm may not have stopped the victims.
        assert!(!may_take(&mut r, 0, 100, 430));
        // After that a new round may start.
        assert!(may_take(&mut r, 0, 100, 400 + ENFORCEMENT_SLACK));
        assert!(r.victims.is_empty());
    }
}
