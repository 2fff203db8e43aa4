//! Usage decay with `PriorityDecayHalfLife`, as multifactor's decay thread applies it.

/// The per-second decay factor: `1 − 0.693 / half_life` (Slurm's first-order
/// approximation of `2^(−1/half_life)`); 1 (no decay) when the half-life is 0.
pub fn decay_factor(half_life_secs: u32) -> f64 {
    if half_life_secs == 0 {
        1.0
    } else {
        1.0 - 0.693 / f64::from(half_life_secs)
    }
}

/// Decay over `delta_secs` since the last pass, floored at `f64::MIN_POSITIVE` as
/// Slurm floors it at `DBL_MIN`.
pub fn real_decay(decay_factor: f64, delta_secs: f64) -> f64 {
    decay_factor.powf(delta_secs).max(f64::MIN_POSITIVE)
}

/// Run time accrued in one pass, already decayed: `run · factor^run`.
pub fn decayed_run(decay_factor: f64, run_secs: f64) -> f64 {
    run_secs * decay_factor.powf(run_secs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn half_life_halves_usage() {
        let hl = 7 * 86400;
        let f = decay_factor(hl);
        // (1 − 0.693/h)^h → e^−0.693 = 0.50007: Slurm's approximation, kept.
        assert!((real_decay(f, f64::from(hl)) - 0.5).abs() < 1e-4);
        assert_eq!(decay_factor(0), 1.0);
    }

    proptest! {
        #[test]
        fn usage_after_n_half_lives(hl in 60u32..10_000_000, n in 0u32..8, usage in 0.0f64..1e12) {
            let f = decay_factor(hl);
            let mut u = usage;
            for _ in 0..n { u *= real_decay(f, f64::from(hl)); }
            let expect = usage / 2f64.powi(n as i32);
            prop_assert!((u - expect).abs() <= expect * 1e-3 * f64::from(n.max(1)) + 1e-9);
        }

        #[test]
        fn decay_is_multiplicative_over_split_periods(hl in 60u32..10_000_000, a in 0.0f64..1e6, b in 0.0f64..1e6) {
            let f = decay_factor(hl);
            let whole = real_decay(f, a + b);
            let split = real_decay(f, a) * real_decay(f, b);
            prop_assert!((whole - split).abs() <= whole * 1e-9 + f64::MIN_POSITIVE * 2.0);
        }
    }
}
