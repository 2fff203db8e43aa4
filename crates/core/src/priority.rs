//! Job priority.
//!
//! For now this holds the submit-order priority that `priority/basic` computes, which
//! `priority/fairway` returns until the multifactor-compatible factors land (priority
//! issue). It is kept here, not in the plugin, so the simulator can use the same rule.

/// The inputs `priority/basic` looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BasicInput {
    /// The lowest priority handed out so far (Slurm's `last_prio`).
    pub last_prio: u32,
    /// The job's current priority.
    pub current: u32,
    /// Whether an admin set the priority (`scontrol update Priority=`).
    pub direct_set_prio: bool,
    /// `--nice` without Slurm's offset; positive lowers priority.
    pub nice: i64,
}

/// Submit order: each job one below the last, shifted by nice, never below 1.
///
/// Matches `priority_p_set` of Slurm's `priority/basic`, including its rule that a
/// positive nice only applies while it leaves the priority above 1.
pub fn basic(input: BasicInput) -> u32 {
    if input.direct_set_prio && input.current > 1 {
        return input.current;
    }
    let mut prio: i64 = if input.last_prio >= 2 { i64::from(input.last_prio) - 1 } else { 1 };
    if input.nice <= 0 || prio > input.nice + 1 {
        prio -= input.nice;
    }
    prio.clamp(1, i64::from(u32::MAX)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn input(last_prio: u32, nice: i64) -> BasicInput {
        BasicInput { last_prio, current: 0, direct_set_prio: false, nice }
    }

    #[test]
    fn submit_order() {
        assert_eq!(basic(input(100, 0)), 99);
        assert_eq!(basic(input(0, 0)), 1);
        assert_eq!(basic(input(100, 10)), 89);
        assert_eq!(basic(input(100, -10)), 109);
        // a nice that would push the job to 1 or below is ignored
        assert_eq!(basic(input(5, 10)), 4);
    }

    #[test]
    fn admin_priority_is_kept() {
        assert_eq!(basic(BasicInput { last_prio: 9, current: 5000, direct_set_prio: true, nice: 0 }), 5000);
    }

    proptest! {
        #[test]
        fn never_held_never_overflows(last in any::<u32>(), nice in -2_147_483_648i64..2_147_483_647) {
            let p = basic(input(last, nice));
            prop_assert!(p >= 1);
        }
    }
}
