//! `[preempt]` in `fairway.toml`: how `preempt/fairway` orders victims and how long it
//! lets them checkpoint.
//!
//! ```toml
//! [preempt]
//! min_runtime = 600        # a job is chosen last for its first 10 minutes
//! max_preemptions = 3      # then it is not preempted again (0 = no budget)
//! default_grace = 60       # grace for jobs that declare no checkpoint time
//! grace_margin = 0.2       # grace = checkpoint time x (1 + margin) ...
//! min_grace = 30           # ... but at least this
//! max_grace = 900          # ... and at most this (a victim's ckpt= is its own claim)
//!
//! [preempt.qos.scavenger]
//! max_grace = 300          # and at most this for jobs in QoS scavenger
//! ```
//!
//! Durations are whole seconds (`600`) or Slurm time syntax in a string (`"10:00"`,
//! where, as in Slurm, a bare number such as `"10"` means minutes). Every key has a
//! default, so an absent section is a usable policy.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer};

/// Longest duration any `[preempt]` key accepts: one day. Longer is a typo, not a policy.
pub const MAX_SECS: u32 = 24 * 3600;

/// Most preemptions a per-job budget may allow; 0 means no budget.
pub const MAX_PREEMPTIONS: u32 = 1000;

/// `[preempt]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "RawPreemptConfig")]
pub struct PreemptConfig {
    /// Seconds after its start during which a job is *protected*: it is chosen as a
    /// victim only when no set of unprotected jobs frees enough GPUs. Default 600.
    pub min_runtime: u32,
    /// Times a job may be preempted; a job preempted this often is no longer
    /// preemptable. 0 = unlimited. Default 3.
    pub max_preemptions: u32,
    /// Grace time, in seconds, for a victim that declares no checkpoint time
    /// (`ckpt=` in its directive) and has no predicted one. Default 60.
    pub default_grace: u32,
    /// Fraction added to a declared or predicted checkpoint time to give the grace
    /// time: `ckpt × (1 + grace_margin)`, 0 to 10. Default 0.2.
    pub grace_margin: f64,
    /// Shortest grace time in seconds. Default 30.
    pub min_grace: u32,
    /// Longest grace time in seconds for a victim whose QoS sets no cap of its own.
    /// Default 900: `ckpt=` is the victim's own claim (and editable with `scontrol
    /// update Comment=`), so without a cap a victim could hold its GPUs for hours while
    /// the preemptor waits.
    pub max_grace: u32,
    /// `[preempt.qos.<name>]`: per-QoS limits; a QoS not listed is capped by `max_grace`.
    pub qos: BTreeMap<String, QosPreempt>,
}

impl Default for PreemptConfig {
    fn default() -> Self {
        Self {
            min_runtime: 600,
            max_preemptions: 3,
            default_grace: 60,
            grace_margin: 0.2,
            min_grace: 30,
            max_grace: 900,
            qos: BTreeMap::new(),
        }
    }
}

impl PreemptConfig {
    /// The grace cap of jobs in QoS `qos`: `[preempt.qos.<qos>] max_grace` when set,
    /// else `[preempt] max_grace`.
    pub fn max_grace(&self, qos: &str) -> u32 {
        self.qos.get(qos).map_or(self.max_grace, |q| q.max_grace)
    }
}

/// `[preempt.qos.<name>]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QosPreempt {
    /// Longest grace time, in seconds, a victim in this QoS gets, whatever its
    /// checkpoint takes: the preemptor never waits longer. Required, 1 s to 1 day.
    #[serde(deserialize_with = "positive_secs")]
    pub max_grace: u32,
}

/// `[preempt]` as written, before the checks that span several keys.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawPreemptConfig {
    #[serde(deserialize_with = "secs")]
    min_runtime: u32,
    #[serde(deserialize_with = "preemptions")]
    max_preemptions: u32,
    #[serde(deserialize_with = "positive_secs")]
    default_grace: u32,
    #[serde(deserialize_with = "margin")]
    grace_margin: f64,
    #[serde(deserialize_with = "secs")]
    min_grace: u32,
    #[serde(deserialize_with = "positive_secs")]
    max_grace: u32,
    qos: BTreeMap<String, QosPreempt>,
}

impl Default for RawPreemptConfig {
    fn default() -> Self {
        let d = PreemptConfig::default();
        Self {
            min_runtime: d.min_runtime,
            max_preemptions: d.max_preemptions,
            default_grace: d.default_grace,
            grace_margin: d.grace_margin,
            min_grace: d.min_grace,
            max_grace: d.max_grace,
            qos: d.qos,
        }
    }
}

impl TryFrom<RawPreemptConfig> for PreemptConfig {
    type Error = String;

    fn try_from(r: RawPreemptConfig) -> Result<Self, String> {
        if r.min_grace > r.default_grace {
            return Err(format!(
                "min_grace ({} s) is above default_grace ({} s): jobs that declare no checkpoint time \
                 would get min_grace anyway; lower min_grace or raise default_grace",
                r.min_grace, r.default_grace
            ));
        }
        if r.max_grace < r.default_grace.max(r.min_grace) {
            return Err(format!(
                "max_grace ({} s) is below default_grace ({} s) or min_grace ({} s): raise max_grace or lower them",
                r.max_grace, r.default_grace, r.min_grace
            ));
        }
        if let Some((name, q)) = r.qos.iter().find(|(_, q)| q.max_grace < r.min_grace) {
            return Err(format!(
                "qos.{name}.max_grace ({} s) is below min_grace ({} s): the cap would override the floor \
                 for every job in QoS {name}; raise qos.{name}.max_grace or lower min_grace",
                q.max_grace, r.min_grace
            ));
        }
        Ok(Self {
            min_runtime: r.min_runtime,
            max_preemptions: r.max_preemptions,
            default_grace: r.default_grace,
            grace_margin: r.grace_margin,
            min_grace: r.min_grace,
            max_grace: r.max_grace,
            qos: r.qos,
        })
    }
}

/// A duration: whole seconds as an integer, or Slurm time syntax as a string.
fn secs<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    struct V;
    impl Visitor<'_> for V {
        type Value = u64;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("whole seconds (600) or a Slurm time string (\"10:00\")")
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
            u64::try_from(v).map_err(|_| E::custom(format!("{v} is negative: expected whole seconds")))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
            Ok(v)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
            crate::time::parse_duration(v).map_err(E::custom)
        }
    }
    let s = d.deserialize_any(V)?;
    if s > u64::from(MAX_SECS) {
        return Err(de::Error::custom(format!("{s} s is out of range: use at most {MAX_SECS} s (1-00:00:00)")));
    }
    Ok(s as u32)
}

fn positive_secs<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let s = secs(d)?;
    if s == 0 {
        return Err(de::Error::custom(format!("0 s is out of range: use 1 to {MAX_SECS} s")));
    }
    Ok(s)
}

fn preemptions<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let n = u32::deserialize(d)?;
    if n > MAX_PREEMPTIONS {
        return Err(de::Error::custom(format!(
            "{n} is out of range: use 1 to {MAX_PREEMPTIONS}, or 0 for no per-job budget"
        )));
    }
    Ok(n)
}

fn margin<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    if !(0.0..=10.0).contains(&v) {
        return Err(de::Error::custom(format!(
            "{v} is out of range: expected 0 to 10 (0.2 = 20% more than the checkpoint takes)"
        )));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::{Config, ConfigError, Invalid};

    use super::*;

    fn parse(text: &str) -> PreemptConfig {
        Config::parse(text, Path::new("fairway.toml")).unwrap().preempt
    }

    fn invalid(text: &str) -> Invalid {
        match Config::parse(text, Path::new("fairway.toml")) {
            Err(ConfigError::Invalid(i)) => *i,
            other => panic!("expected an invalid config, got {other:?}"),
        }
    }

    #[test]
    fn absent_section_is_the_documented_defaults() {
        let c = parse("");
        assert_eq!(c, PreemptConfig::default());
        assert_eq!((c.min_runtime, c.max_preemptions, c.default_grace, c.min_grace), (600, 3, 60, 30));
        assert_eq!(c.grace_margin, 0.2);
        assert_eq!(c.max_grace("scavenger"), 900, "a cap even where no QoS sets one");
        assert_eq!(parse("[preempt]\n"), PreemptConfig::default());
    }

    #[test]
    fn full_section_parses_seconds_and_slurm_times() {
        let c = parse(
            "[preempt]\nmin_runtime = \"15:00\"\nmax_preemptions = 0\ndefault_grace = 120\n\
             grace_margin = 0.5\nmin_grace = 10\n[preempt.qos.scavenger]\nmax_grace = \"5:00\"\n\
             [preempt.qos.normal]\nmax_grace = 900\n",
        );
        assert_eq!((c.min_runtime, c.max_preemptions, c.default_grace, c.min_grace), (900, 0, 120, 10));
        assert_eq!(c.grace_margin, 0.5);
        assert_eq!((c.max_grace("scavenger"), c.max_grace("normal")), (300, 900));
    }

    #[test]
    fn errors_name_the_key_and_the_range() {
        let i = invalid("[preempt]\nmin_grace = 5\ngrace_margin = -0.1\n");
        assert_eq!((i.line, i.key.as_deref()), (3, Some("preempt.grace_margin")));
        assert!(i.message.contains("expected 0 to 10"), "{}", i.message);

        let i = invalid("[preempt]\nmin_runtime = -5\n");
        assert_eq!(i.key.as_deref(), Some("preempt.min_runtime"));
        assert!(i.message.contains("negative"), "{}", i.message);

        let i = invalid("[preempt]\nmin_runtime = \"2-00:00:00\"\n");
        assert!(i.message.contains("at most 86400 s"), "{}", i.message);

        let i = invalid("[preempt]\ndefault_grace = \"soon\"\n");
        assert!(i.message.contains("invalid time `soon`"), "{}", i.message);

        let i = invalid("[preempt]\ndefault_grace = 0\n");
        assert!(i.message.contains("use 1 to 86400 s"), "{}", i.message);

        let i = invalid("[preempt]\nmax_preemptions = 5000\n");
        assert!(i.message.contains("0 for no per-job budget"), "{}", i.message);

        let i = invalid("[preempt]\nmax_preemption = 2\n");
        assert_eq!((i.line, i.key.as_deref()), (2, Some("preempt.max_preemption")));
        assert!(i.message.contains("unknown field `max_preemption`"), "{}", i.message);

        let i = invalid("[preempt.qos.scavenger]\nmax_grace = 60\ngrace = 5\n");
        assert_eq!(i.key.as_deref(), Some("preempt.qos.scavenger.grace"));

        let i = invalid("[preempt.qos.scavenger]\n");
        assert!(i.message.contains("missing field `max_grace`"), "{}", i.message);
    }

    #[test]
    fn inconsistent_keys_are_explained() {
        let i = invalid("[preempt]\nmin_grace = 90\n");
        assert_eq!(i.key.as_deref(), Some("preempt"));
        assert!(i.message.contains("min_grace (90 s) is above default_grace (60 s)"), "{}", i.message);

        let i = invalid("[preempt]\nmin_grace = 30\n[preempt.qos.scavenger]\nmax_grace = 20\n");
        assert!(i.message.contains("qos.scavenger.max_grace (20 s) is below min_grace (30 s)"), "{}", i.message);
    }
}
