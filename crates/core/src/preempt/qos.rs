//! `preempt/qos` semantics (Slurm 22.05, `src/plugins/preempt/qos/preempt_qos.c`) as
//! pure functions, so that `preempt/fairway` keeps what sites configured with
//! `sacctmgr modify qos ... set Preempt=... PreemptMode=...` and adds its own order.

use std::fmt;

/// What happens to a preempted job (`PreemptMode`'s action).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Action {
    /// `OFF`: no preemption. On a QoS it means "not set": the global mode applies.
    #[default]
    Off,
    /// `CANCEL`: the job is cancelled.
    Cancel,
    /// `REQUEUE`: the job is requeued (cancelled if it cannot be).
    Requeue,
    /// `SUSPEND`: the job is suspended (needs `GANG` in the global mode).
    Suspend,
}

/// A `PreemptMode` as `slurm.conf` (global) or `sacctmgr` (per QoS) spell it:
/// one action plus the `WITHIN` and `GANG` flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PreemptMode {
    /// The action.
    pub action: Action,
    /// `WITHIN`: jobs of one QoS may preempt each other by job priority.
    pub within: bool,
    /// `GANG`: gang scheduling (global mode only).
    pub gang: bool,
}

/// `PREEMPT_MODE_*` from `slurm/slurm.h`.
pub mod bits {
    /// `PREEMPT_MODE_OFF`.
    pub const OFF: u16 = 0x0000;
    /// `PREEMPT_MODE_SUSPEND`.
    pub const SUSPEND: u16 = 0x0001;
    /// `PREEMPT_MODE_REQUEUE`.
    pub const REQUEUE: u16 = 0x0002;
    /// `PREEMPT_MODE_CANCEL`.
    pub const CANCEL: u16 = 0x0008;
    /// `PREEMPT_MODE_WITHIN`.
    pub const WITHIN: u16 = 0x4000;
    /// `PREEMPT_MODE_GANG`.
    pub const GANG: u16 = 0x8000;
}

/// A `PreemptMode` string that is not one Slurm accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModeError(String);

impl fmt::Display for ModeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid PreemptMode `{}`: expected OFF, CANCEL, REQUEUE or SUSPEND, optionally with ,GANG and/or ,WITHIN",
            self.0
        )
    }
}

impl std::error::Error for ModeError {}

impl PreemptMode {
    /// Parses `REQUEUE`, `SUSPEND,GANG`, `CANCEL,WITHIN`, ... (case-insensitive).
    /// At most one action; `GANG` or `WITHIN` alone, or an empty string, mean `OFF`.
    pub fn parse(text: &str) -> Result<Self, ModeError> {
        let err = || ModeError(text.to_string());
        let mut m = PreemptMode::default();
        let mut action = None;
        for word in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            let a = match word.to_ascii_uppercase().as_str() {
                "GANG" => {
                    m.gang = true;
                    continue;
                }
                "WITHIN" => {
                    m.within = true;
                    continue;
                }
                "OFF" => Action::Off,
                "CANCEL" => Action::Cancel,
                "REQUEUE" => Action::Requeue,
                "SUSPEND" => Action::Suspend,
                _ => return Err(err()),
            };
            if action.replace(a).is_some() {
                return Err(err());
            }
        }
        m.action = action.unwrap_or(Action::Off);
        Ok(m)
    }

    /// From Slurm's `uint16_t` bits (unknown bits ignored; CANCEL wins over REQUEUE
    /// over SUSPEND if several are set).
    pub fn from_bits(b: u16) -> Self {
        let action = if b & bits::CANCEL != 0 {
            Action::Cancel
        } else if b & bits::REQUEUE != 0 {
            Action::Requeue
        } else if b & bits::SUSPEND != 0 {
            Action::Suspend
        } else {
            Action::Off
        };
        Self { action, within: b & bits::WITHIN != 0, gang: b & bits::GANG != 0 }
    }

    /// To Slurm's `uint16_t` bits (`PREEMPT_DATA_MODE`).
    pub fn to_bits(self) -> u16 {
        let action = match self.action {
            Action::Off => bits::OFF,
            Action::Cancel => bits::CANCEL,
            Action::Requeue => bits::REQUEUE,
            Action::Suspend => bits::SUSPEND,
        };
        action | if self.within { bits::WITHIN } else { 0 } | if self.gang { bits::GANG } else { 0 }
    }
}

/// The parts of a Slurm QoS that preemption reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Qos {
    /// Its name.
    pub name: String,
    /// `Preempt=`: the QoS whose jobs this QoS's jobs may preempt.
    pub preempt: Vec<String>,
    /// `PreemptMode=` (action `OFF` = not set: the global mode applies).
    pub preempt_mode: PreemptMode,
    /// `GraceTime=`, seconds.
    pub grace_time: u32,
    /// `Priority=`.
    pub priority: u32,
}

/// Whether a job in `preemptee` may be preempted by one in `preemptor`, as
/// `preempt/qos` decides: the preemptor's QoS lists the preemptee's in `Preempt=`; or
/// both are the same QoS, `WITHIN` is set on it or globally, and the preemptor's job
/// priority is strictly higher. A job without a QoS is never preemptable (pass `None`).
pub fn preemptable(
    preemptor: Option<&Qos>,
    preemptee: Option<&Qos>,
    preemptor_prio: u32,
    preemptee_prio: u32,
    global: PreemptMode,
) -> bool {
    let (Some(or), Some(ee)) = (preemptor, preemptee) else { return false };
    if or.name == ee.name {
        (or.preempt_mode.within || global.within) && preemptor_prio > preemptee_prio
    } else {
        or.preempt.contains(&ee.name)
    }
}

/// The mode applied to a preempted job in `qos`: the QoS's own when it sets an action,
/// else the global `PreemptMode`; `WITHIN` and `GANG` removed, as `preempt/qos` does.
pub fn mode(qos: Option<&Qos>, global: PreemptMode) -> Action {
    match qos {
        Some(q) if q.preempt_mode.action != Action::Off => q.preempt_mode.action,
        _ => global.action,
    }
}

/// `preempt/qos`'s `PREEMPT_DATA_PRIO`: QoS priority (capped at 0xffff) in the high
/// 16 bits, node count (capped) in the low 16, so smaller jobs of a QoS go first.
pub fn qos_prio(qos: Option<&Qos>, node_cnt: u32) -> u32 {
    let high = qos.map_or(0, |q| q.priority.min(0xffff)) << 16;
    high + node_cnt.min(0xffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qos(name: &str, preempt: &[&str], mode: &str, priority: u32) -> Qos {
        Qos {
            name: name.into(),
            preempt: preempt.iter().map(|s| s.to_string()).collect(),
            preempt_mode: PreemptMode::parse(mode).unwrap(),
            grace_time: 0,
            priority,
        }
    }

    #[test]
    fn modes_parse_and_round_trip() {
        let m = PreemptMode::parse("suspend,GANG").unwrap();
        assert_eq!(m, PreemptMode { action: Action::Suspend, within: false, gang: true });
        assert_eq!(m.to_bits(), 0x8001);
        let m = PreemptMode::parse("REQUEUE,WITHIN").unwrap();
        assert_eq!(PreemptMode::from_bits(m.to_bits()), m);
        assert_eq!(PreemptMode::parse("WITHIN").unwrap().action, Action::Off);
        assert_eq!(PreemptMode::from_bits(0), PreemptMode::default());
        assert!(PreemptMode::parse("requeue,cancel").is_err());
        let e = PreemptMode::parse("kill").unwrap_err().to_string();
        assert!(e.contains("invalid PreemptMode `kill`: expected OFF, CANCEL"), "{e}");
    }

    #[test]
    fn preempt_lists_decide_between_qos() {
        let normal = qos("normal", &["scavenger"], "", 100);
        let scavenger = qos("scavenger", &[], "", 0);
        let off = PreemptMode::default();
        assert!(preemptable(Some(&normal), Some(&scavenger), 1, 1_000_000, off));
        assert!(!preemptable(Some(&scavenger), Some(&normal), 1_000_000, 1, off));
        assert!(!preemptable(None, Some(&scavenger), 10, 1, off));
        assert!(!preemptable(Some(&normal), None, 10, 1, off));
    }

    #[test]
    fn within_needs_strictly_higher_priority() {
        let within = qos("scavenger", &[], "REQUEUE,WITHIN", 0);
        let plain = qos("scavenger", &[], "REQUEUE", 0);
        let off = PreemptMode::default();
        assert!(preemptable(Some(&within), Some(&within), 11, 10, off));
        assert!(!preemptable(Some(&within), Some(&within), 10, 10, off));
        assert!(!preemptable(Some(&plain), Some(&plain), 11, 10, off));
        let global_within = PreemptMode::parse("REQUEUE,WITHIN").unwrap();
        assert!(preemptable(Some(&plain), Some(&plain), 11, 10, global_within));
        // A QoS listing itself does not bypass the priority rule.
        let selfish = qos("scavenger", &["scavenger"], "REQUEUE", 0);
        assert!(!preemptable(Some(&selfish), Some(&selfish), 1, 10, off));
    }

    #[test]
    fn mode_falls_back_to_global_and_drops_flags() {
        let global = PreemptMode::parse("REQUEUE,GANG").unwrap();
        assert_eq!(mode(Some(&qos("q", &[], "CANCEL,WITHIN", 0)), global), Action::Cancel);
        assert_eq!(mode(Some(&qos("q", &[], "OFF", 0)), global), Action::Requeue);
        assert_eq!(mode(None, global), Action::Requeue);
    }

    #[test]
    fn prio_is_qos_priority_then_nodes() {
        assert_eq!(qos_prio(Some(&qos("q", &[], "", 3)), 2), (3 << 16) + 2);
        assert_eq!(qos_prio(Some(&qos("q", &[], "", 1 << 20)), 1 << 20), u32::MAX);
        assert_eq!(qos_prio(None, 4), 4);
    }
}
