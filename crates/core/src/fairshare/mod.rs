//! Fair share: the factor, the association tree, usage decay and accrual.

pub mod accrue;
mod decay;
mod reset;
mod tree;

pub use decay::{decay_factor, decayed_run, real_decay};
pub use reset::{next_reset, next_reset_local, ResetPeriod};
pub use tree::{Assoc, AssocTree, ClassicMode, NO_VAL};

/// Classic (non-Fair-Tree) fair-share factor: `2^(-(U_effective / S_norm) / damping)`.
///
/// This is `priority_p_calc_fs_factor` of `priority/multifactor`, which `sshare` calls
/// through the loaded priority plugin to print the FairShare column under
/// `PriorityFlags=NO_FAIR_TREE`. An association with no normalised shares gets 0; a
/// damping factor below 1 is treated as 1, as `FairShareDampeningFactor` must be >= 1.
/// Usage equal to Slurm's `NO_VAL` (not yet computed) also gives 0, as in multifactor.
pub fn classic_factor(usage_efctv: f64, shares_norm: f64, damping: u16) -> f64 {
    const NO_VAL: f64 = 0xffff_fffe_u32 as f64;
    let unset = (usage_efctv - NO_VAL).abs() < 1e-6;
    if unset || shares_norm.is_nan() || shares_norm <= 0.0 || !usage_efctv.is_finite() {
        return 0.0;
    }
    let damping = f64::from(damping.max(1));
    2f64.powf(-(usage_efctv.max(0.0) / shares_norm) / damping)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_points() {
        assert_eq!(classic_factor(0.0, 0.5, 1), 1.0);
        assert_eq!(classic_factor(0.5, 0.5, 1), 0.5);
        assert_eq!(classic_factor(1.0, 0.5, 2), 0.5);
        assert_eq!(classic_factor(0.3, 0.0, 1), 0.0);
        assert_eq!(classic_factor(4294967294.0, 0.5, 1), 0.0);
    }

    proptest! {
        #[test]
        fn factor_is_a_probability(u in -1.0f64..10.0, s in -1.0f64..1.0, d in 0u16..10) {
            let f = classic_factor(u, s, d);
            prop_assert!((0.0..=1.0).contains(&f));
        }

        #[test]
        fn more_usage_never_raises_the_factor(u in 0.0f64..5.0, du in 0.0f64..5.0, s in 0.001f64..1.0) {
            prop_assert!(classic_factor(u + du, s, 1) <= classic_factor(u, s, 1));
        }
    }
}
