//! The `slurm.conf` priority settings the decay pass reads, once per pass (so
//! `scontrol reconfigure` takes effect at the next one).

use fairway_core::fairshare::ClassicMode;
use slurm_sys as sys;

/// `PriorityDecayHalfLife`, `PriorityCalcPeriod`, `PriorityUsageResetPeriod` and
/// `PriorityFlags`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Knobs {
    pub(crate) half_life: u32,
    pub(crate) calc_period: u32,
    pub(crate) reset_period: u16,
    pub(crate) flags: u16,
}

impl Knobs {
    pub(crate) fn read() -> Self {
        // SAFETY: plain reads of the initialised global config.
        let c = unsafe { &*std::ptr::addr_of!(sys::slurm_conf) };
        Self {
            half_life: c.priority_decay_hl,
            calc_period: c.priority_calc_period.max(1),
            reset_period: c.priority_reset_period,
            flags: c.priority_flags,
        }
    }

    pub(crate) fn fair_tree(self) -> bool {
        u32::from(self.flags) & sys::PRIORITY_FLAGS_FAIR_TREE != 0
    }

    pub(crate) fn classic_mode(self) -> ClassicMode {
        if u32::from(self.flags) & sys::PRIORITY_FLAGS_DEPTH_OBLIVIOUS != 0 {
            ClassicMode::DepthOblivious
        } else {
            ClassicMode::Classic
        }
    }

    pub(crate) fn calculate_running(self) -> bool {
        u32::from(self.flags) & sys::PRIORITY_FLAGS_CALCULATE_RUNNING != 0
    }

    pub(crate) fn incr_only(self) -> bool {
        u32::from(self.flags) & sys::PRIORITY_FLAGS_INCR_ONLY != 0
    }
}

#[cfg(test)]
mod tests {
    use super::{ClassicMode, Knobs};
    use slurm_sys as sys;

    fn with_flags(flags: u32) -> Knobs {
        Knobs { half_life: 0, calc_period: 1, reset_period: 0, flags: flags as u16 }
    }

    #[test]
    fn flags_select_the_algorithms() {
        let k = with_flags(sys::PRIORITY_FLAGS_FAIR_TREE | sys::PRIORITY_FLAGS_INCR_ONLY);
        assert!(k.fair_tree() && k.incr_only() && !k.calculate_running());
        let k = with_flags(sys::PRIORITY_FLAGS_DEPTH_OBLIVIOUS | sys::PRIORITY_FLAGS_CALCULATE_RUNNING);
        assert!(!k.fair_tree() && !k.incr_only() && k.calculate_running());
        assert!(matches!(k.classic_mode(), ClassicMode::DepthOblivious));
        assert!(matches!(with_flags(0).classic_mode(), ClassicMode::Classic));
    }
}
