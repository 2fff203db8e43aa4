//! `PriorityUsageResetPeriod`: clearing association and QOS usage at local midnights
//! (or once, for NOW), as multifactor's decay loop does.

use std::sync::atomic::Ordering;

use fairway_core::fairshare;
use slurm_sys as sys;

use crate::ctld::Ctld;
use crate::list::for_each;
use crate::locks::{assoc_lock, with_assoc_mgr};
use crate::long_double::fairway_write_long_double;
use crate::state::USAGE_ADDED;

/// When usage was last cleared and is next due to be, across decay passes.
pub(crate) struct ResetClock {
    last_reset: i64,
    next_reset: Option<i64>,
    reset_now_done: bool,
}

impl ResetClock {
    /// From the last reset saved in the state file (0: none yet, counted from `now`).
    pub(crate) fn new(saved_reset: i64, now: i64) -> Self {
        Self { last_reset: if saved_reset == 0 { now } else { saved_reset }, next_reset: None, reset_now_done: false }
    }

    /// The last reset, for the state file.
    pub(crate) fn last_reset(&self) -> i64 {
        self.last_reset
    }

    /// Runs at the start of a pass at `start`: clears usage if a reset is due.
    /// `reconfigured`: `PriorityUsageResetPeriod` changed since the last pass.
    pub(crate) fn pass(&mut self, ctld: &Ctld, reset_period: u16, reconfigured: bool, start: i64) {
        if reconfigured {
            self.next_reset = None; // reconfigured: recompute from the last reset
            self.reset_now_done = false;
        }
        match self.due(fairshare::ResetPeriod::from_slurm(reset_period), start) {
            Due::No => {}
            Due::Now => reset_usage(ctld),
            Due::Period => {
                tracing::info!("PriorityUsageResetPeriod: clearing association and QOS usage");
                reset_usage(ctld);
            }
        }
    }

    /// The clock's side of a pass: whether to clear usage now, with the clock advanced
    /// as if it were cleared.
    fn due(&mut self, period: fairshare::ResetPeriod, start: i64) -> Due {
        match period {
            fairshare::ResetPeriod::None => Due::No,
            fairshare::ResetPeriod::Now => {
                if self.reset_now_done {
                    return Due::No;
                }
                self.last_reset = start;
                self.reset_now_done = true;
                Due::Now
            }
            period => {
                if self.next_reset.is_none() {
                    self.next_reset = fairshare::next_reset_local(period, self.last_reset, start);
                }
                let Some(at) = self.next_reset.filter(|&at| start >= at) else { return Due::No };
                self.last_reset = at;
                self.next_reset = fairshare::next_reset_local(period, self.last_reset, start);
                Due::Period
            }
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Due {
    No,
    Now,
    Period,
}

/// `_reset_usage`: clears usage of every association and QOS (NoDecay ones too).
fn reset_usage(ctld: &Ctld) {
    let tres = ctld.tres_cnt();
    with_assoc_mgr(assoc_lock(sys::WRITE_LOCK, sys::WRITE_LOCK, sys::NO_LOCK), || {
        // SAFETY: assoc and QOS write locks held; lists and records stay valid.
        unsafe {
            let clear = |raw: *mut u128, tres_raw: *mut u128, wall: &mut f64| {
                fairway_write_long_double(raw.cast(), 0.0);
                if !tres_raw.is_null() {
                    for t in 0..tres {
                        fairway_write_long_double(tres_raw.add(t).cast(), 0.0);
                    }
                }
                *wall = 0.0;
            };
            for_each(std::ptr::addr_of!(sys::assoc_mgr_assoc_list).read(), |p| {
                let a = &mut *p.cast::<sys::slurmdb_assoc_rec_t>();
                if let Some(u) = a.usage.as_mut() {
                    clear(std::ptr::addr_of_mut!(u.usage_raw).cast(), u.usage_tres_raw.cast(), &mut u.grp_used_wall);
                }
                // An account's separate leaf usage goes entirely, as in multifactor.
                if !a.leaf_usage.is_null() && a.leaf_usage != a.usage {
                    sys::slurmdb_destroy_assoc_usage(a.leaf_usage.cast());
                    a.leaf_usage = std::ptr::null_mut();
                }
            });
            for_each(std::ptr::addr_of!(sys::assoc_mgr_qos_list).read(), |p| {
                if let Some(u) = (*p.cast::<sys::slurmdb_qos_rec_t>()).usage.as_mut() {
                    clear(std::ptr::addr_of_mut!(u.usage_raw).cast(), u.usage_tres_raw.cast(), &mut u.grp_used_wall);
                }
            });
        }
    });
    USAGE_ADDED.store(true, Ordering::Relaxed); // save the cleared state with this pass
}

#[cfg(test)]
mod tests {
    use super::{Due, ResetClock};
    use fairway_core::fairshare::ResetPeriod;

    #[test]
    fn now_clears_once_until_reconfigured() {
        let mut c = ResetClock::new(0, 100);
        assert_eq!(c.due(ResetPeriod::Now, 200), Due::Now);
        assert_eq!(c.last_reset(), 200);
        assert_eq!(c.due(ResetPeriod::Now, 300), Due::No);
        assert_eq!(c.due(ResetPeriod::None, 400), Due::No);
        assert_eq!(c.last_reset(), 200);
    }

    #[test]
    fn a_period_clears_when_its_boundary_passes() {
        let day = 86_400;
        let mut c = ResetClock::new(0, 1_000);
        let next = fairway_core::fairshare::next_reset_local(ResetPeriod::Daily, 1_000, 1_000).unwrap();
        assert_eq!(c.due(ResetPeriod::Daily, next - 1), Due::No);
        assert_eq!(c.due(ResetPeriod::Daily, next), Due::Period);
        assert_eq!(c.last_reset(), next);
        assert_eq!(c.due(ResetPeriod::Daily, next + 1), Due::No);
        assert!(c.next_reset.is_some_and(|n| n > next && n <= next + day + 3_600));
    }
}
