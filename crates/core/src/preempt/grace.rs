//! Grace time: how long a victim has between the checkpoint signal and being stopped
//! (`PREEMPT_DATA_GRACE_TIME`).
//!
//! ```text
//! grace = min(max(ckpt × (1 + grace_margin), min_grace), qos cap)
//! ```
//!
//! where `ckpt` is the checkpoint time the job declared in its directive (`ckpt=5m`, in
//! `--comment` or, on Slurm 24.11+, `--extra`), else a predicted checkpoint time, else the
//! grace is `default_grace` (floored and capped the same way). The cap
//! (`[preempt.qos.<name>] max_grace`, else `[preempt] max_grace`, 15 minutes by default)
//! wins over `min_grace`: it is what the site promised the preemptor.

use crate::submit::directive;

use super::config::PreemptConfig;

/// Where a grace time came from, for the plugin's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraceSource {
    /// The job's directive declared `ckpt=` this many seconds.
    Declared {
        /// Declared checkpoint time, seconds.
        ckpt: u32,
    },
    /// No declaration; a predicted checkpoint time of this many seconds.
    Predicted {
        /// Predicted checkpoint time, seconds.
        ckpt: u32,
    },
    /// Neither: `default_grace`.
    Default,
    /// Neither, and the QoS has its own `GraceTime` ([`victim_grace`]).
    Qos,
}

/// A victim's grace time and how it was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grace {
    /// Grace time in seconds.
    pub secs: u32,
    /// What it is based on.
    pub source: GraceSource,
    /// Whether the QoS cap shortened it.
    pub capped: bool,
}

/// The grace time of a victim in QoS `qos`.
///
/// `directive_text` is the text holding the job's Fairway directive (`--comment`, or
/// `--extra` on 23.02+); it is read with the same parser as `job_submit/fairway`
/// ([`directive::find`]). A text without a directive, or with one that no longer parses
/// (an admin edited the comment), declares nothing. `predicted_ckpt` is a predicted
/// checkpoint time in seconds, if the caller has one.
pub fn grace_time(cfg: &PreemptConfig, qos: &str, directive_texts: &[&str], predicted_ckpt: Option<u32>) -> Grace {
    let declared = directive_texts.iter().find_map(|t| directive::find(t).ok().flatten().and_then(|d| d.ckpt));
    let (wanted, source) = match (declared, predicted_ckpt) {
        (Some(ckpt), _) => (with_margin(ckpt, cfg.grace_margin), GraceSource::Declared { ckpt }),
        (None, Some(ckpt)) => (with_margin(ckpt, cfg.grace_margin), GraceSource::Predicted { ckpt }),
        (None, None) => (u64::from(cfg.default_grace), GraceSource::Default),
    };
    let floored = wanted.max(u64::from(cfg.min_grace));
    let cap = u64::from(cfg.max_grace(qos));
    Grace { secs: floored.min(cap) as u32, source, capped: floored > cap }
}

/// The grace time `preempt/fairway` gives a victim: [`grace_time`], except that a job
/// declaring nothing (and with no prediction) keeps its QoS's own `GraceTime`
/// (sacctmgr) when the site set one, as `preempt/qos` would, instead of `default_grace`.
pub fn victim_grace(
    cfg: &PreemptConfig,
    qos: &str,
    qos_grace_time: u32,
    directive_texts: &[&str],
    predicted_ckpt: Option<u32>,
) -> Grace {
    let g = grace_time(cfg, qos, directive_texts, predicted_ckpt);
    if g.source == GraceSource::Default && qos_grace_time > 0 {
        return Grace { secs: qos_grace_time, source: GraceSource::Qos, capped: false };
    }
    g
}

/// `ckpt × (1 + margin)`, rounded up to whole seconds.
fn with_margin(ckpt: u32, margin: f64) -> u64 {
    // margin ≤ 10 and ckpt ≤ u32::MAX: the product fits in u64 exactly enough.
    (f64::from(ckpt) * (1.0 + margin.max(0.0))).ceil() as u64
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::config::QosPreempt;
    use super::*;

    fn cfg() -> PreemptConfig {
        let mut c = PreemptConfig::default();
        c.qos.insert("scavenger".into(), QosPreempt { max_grace: 300 });
        c
    }

    #[test]
    fn declared_checkpoint_time_plus_margin() {
        let g = grace_time(&cfg(), "normal", &["fairway: model=7b ckpt=100s"], Some(999));
        assert_eq!(g, Grace { secs: 120, source: GraceSource::Declared { ckpt: 100 }, capped: false });
        // Rounded up.
        assert_eq!(grace_time(&cfg(), "normal", &["fairway: ckpt=101"], None).secs, 122);
    }

    #[test]
    fn prediction_then_default() {
        let g = grace_time(&cfg(), "normal", &["nightly eval"], Some(200));
        assert_eq!(g, Grace { secs: 240, source: GraceSource::Predicted { ckpt: 200 }, capped: false });
        let g = grace_time(&cfg(), "normal", &[], None);
        assert_eq!(g, Grace { secs: 60, source: GraceSource::Default, capped: false });
    }

    #[test]
    fn an_undeclared_job_keeps_its_qos_grace_time() {
        let g = victim_grace(&cfg(), "scavenger", 45, &[], None);
        assert_eq!(g, Grace { secs: 45, source: GraceSource::Qos, capped: false });
        // A declaration wins over the QoS's GraceTime; no GraceTime means the default.
        assert_eq!(victim_grace(&cfg(), "scavenger", 45, &["fairway: ckpt=100s"], None).secs, 120);
        assert_eq!(victim_grace(&cfg(), "scavenger", 0, &[], None).source, GraceSource::Default);
    }

    #[test]
    fn an_invalid_directive_declares_nothing() {
        let g = grace_time(&cfg(), "normal", &["fairway: ckpt=forever"], None);
        assert_eq!(g.source, GraceSource::Default);
    }

    #[test]
    fn floor_and_qos_cap() {
        let g = grace_time(&cfg(), "normal", &["fairway: ckpt=5s"], None);
        assert_eq!(g.secs, 30);
        let g = grace_time(&cfg(), "scavenger", &["fairway: ckpt=1h"], None);
        assert_eq!(g, Grace { secs: 300, source: GraceSource::Declared { ckpt: 3600 }, capped: true });
        // A QoS with no cap of its own gets [preempt] max_grace (15 minutes by default):
        // ckpt=6h would otherwise hold the GPUs for 7.2 hours.
        let g = grace_time(&cfg(), "normal", &["fairway: ckpt=1h"], None);
        assert_eq!((g.secs, g.capped), (900, true));
        let g = grace_time(&cfg(), "normal", &["fairway: ckpt=10m"], None);
        assert_eq!((g.secs, g.capped), (720, false));
    }

    #[test]
    fn the_directive_may_be_in_comment_or_extra() {
        let g = grace_time(&cfg(), "normal", &["nightly eval", "fairway: ckpt=100s"], None);
        assert_eq!(g.source, GraceSource::Declared { ckpt: 100 });
        let g = grace_time(&cfg(), "normal", &["fairway: ckpt=50s", "fairway: ckpt=100s"], None);
        assert_eq!(g.source, GraceSource::Declared { ckpt: 50 }, "the comment first, as job_submit reads it");
    }

    #[test]
    fn the_cap_wins_over_the_floor() {
        let mut c = cfg();
        c.qos.insert("tiny".into(), QosPreempt { max_grace: 10 });
        assert_eq!(grace_time(&c, "tiny", &[], None).secs, 10);
    }

    proptest! {
        #[test]
        fn grace_is_within_floor_and_cap(
            ckpt in proptest::option::of(1u32..=21_600),
            predicted in proptest::option::of(0u32..1_000_000),
            margin in 0.0f64..=10.0,
            min_grace in 0u32..=120,
            cap in proptest::option::of(120u32..=3600),
        ) {
            let mut c = PreemptConfig { grace_margin: margin, min_grace, ..PreemptConfig::default() };
            if let Some(m) = cap {
                c.qos.insert("q".into(), QosPreempt { max_grace: m });
            }
            let text = ckpt.map(|s| format!("fairway: ckpt={s}s"));
            let texts: Vec<&str> = text.as_deref().into_iter().collect();
            let g = grace_time(&c, "q", &texts, predicted);
            prop_assert!(g.secs >= min_grace);
            prop_assert!(g.secs <= cap.unwrap_or(c.max_grace));
            if let (Some(s), false) = (ckpt, g.capped) {
                prop_assert!(f64::from(g.secs) >= f64::from(s) * (1.0 + margin) - 1e-6);
            }
        }
    }
}
