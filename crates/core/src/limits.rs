//! Time limits from predicted run times (`time=auto`), and what happens when a job
//! outlives one.
//!
//! Slurm's backfill plans with time limits: a reservation's start is when the running
//! jobs' limits free its nodes, and a job may use the reserved GPUs only if its limit ends
//! first. Users' limits are days long, so a reservation for a large job drains its nodes:
//! nothing fits before it. A limit from the predicted run time lets backfill fill the
//! drain. But a prediction is sometimes short, and Slurm kills a job at its limit.
//!
//! So a predicted limit is extended before it expires, up to the limit the job would
//! have had without `time=auto` (its `--time`, else the partition's): planning uses the
//! prediction, and no job dies before its own limit (Tsafrir, Etsion and Feitelson,
//! "Backfilling using system-generated predictions rather than user runtime estimates",
//! IEEE TPDS 2007). A job that outlives its prediction moves a reservation later, as a
//! job ending late always did. The simulator measures both ways (`Overrun`).

/// How job_submit/fairway records, in a job's admin comment, the limit its predicted one
/// may grow to: followed by minutes, or `UNLIMITED`.
pub const RECORD: &str = "fairway:extend_to=";

/// Slurm's `INFINITE` time limit (no limit), in minutes.
pub const UNLIMITED: u32 = u32::MAX;

/// The record of `cap` minutes ([`UNLIMITED`] for none) for an admin comment.
pub fn record(cap: u32) -> String {
    if cap == UNLIMITED {
        format!("{RECORD}UNLIMITED")
    } else {
        format!("{RECORD}{cap}")
    }
}

/// The limit, in minutes, a job's admin comment says its predicted one may grow to
/// (the last record); `None` without one, or when it cannot be read.
pub fn recorded_cap(admin_comment: &str) -> Option<u32> {
    let at = admin_comment.rfind(RECORD)?;
    let rest = &admin_comment[at + RECORD.len()..];
    let value = rest.split(|c: char| c == ';' || c.is_whitespace()).next().unwrap_or("");
    if value == "UNLIMITED" {
        Some(UNLIMITED)
    } else {
        value.parse().ok().filter(|&m| m > 0 && m < UNLIMITED - 1)
    }
}

/// The `time=auto` limit in minutes: the predicted run time times (1 + `margin`),
/// rounded up to a minute (at least one), at most `cap` minutes when one is given.
pub fn auto_limit_minutes(predicted_secs: u64, margin: f64, cap: Option<u32>) -> u32 {
    let want = ((predicted_secs as f64 * (1.0 + margin.max(0.0))) / 60.0).ceil().max(1.0);
    let want = want.min(f64::from(u32::MAX - 1)) as u32;
    cap.map_or(want, |c| want.min(c))
}

/// A predicted limit that will be extended later, in minutes: [`auto_limit_minutes`], at
/// least `floor_secs` (rounded up to a minute); `None` when that is not below `cap`, the
/// limit it may grow to (then the job keeps `cap`: nothing to plan with or extend).
pub fn extendable_limit(predicted_secs: u64, margin: f64, floor_secs: u64, cap: u32) -> Option<u32> {
    let floor = u32::try_from(floor_secs.div_ceil(60)).unwrap_or(u32::MAX);
    let minutes = auto_limit_minutes(predicted_secs, margin, Some(cap)).max(floor);
    (minutes < cap).then_some(minutes)
}

/// What is done with a job about to outlive its predicted limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overrun {
    /// Its limit is extended ([`extended_limit`]) up to the limit it would have had
    /// without `time=auto`.
    #[default]
    Extend,
    /// Slurm kills it at the predicted limit (`TIMEOUT`); the user submits it again.
    Kill,
}

/// Until when a pass at `now` must extend limits (a pass runs every `period` seconds): the
/// next pass, and half a period more for its being late. No later: a limit extended
/// early pushes back the reservation backfill planned around it, and every job
/// backfilled into the gap that is still running at the next pass would be extended
/// too, pushing it back again; a job that ends before the next pass is never extended.
pub fn extension_horizon(now: i64, period: u64) -> i64 {
    let period = period.max(1);
    now.saturating_add((period + period / 2) as i64)
}

/// The new limit, in minutes, of a running job whose limit of `limit` minutes ends
/// before the [`extension_horizon`] of a pass at `now`, when it may still grow (`cap`
/// minutes); `None` to leave it.
///
/// The limit doubles (and covers the horizon at least): a job that outlives its
/// prediction by a factor k is extended about log2(k) times, and the plan is never wrong
/// by more than the doubling.
pub fn extended_limit(limit: u32, cap: u32, start: i64, now: i64, period: u64) -> Option<u32> {
    if limit >= cap {
        return None;
    }
    let horizon = extension_horizon(now, period);
    let ends = start.saturating_add(i64::from(limit) * 60);
    if ends > horizon {
        return None;
    }
    let cover = ((horizon - start).max(0) as u64).div_ceil(60) + 1;
    let grown = u64::from(limit).saturating_mul(2).max(cover);
    // Below Slurm's NO_VAL and INFINITE unless the cap is INFINITE itself.
    Some(if grown >= u64::from(cap) { cap } else { grown.min(u64::from(UNLIMITED - 2)) as u32 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_margin_rounds_up_to_a_minute_and_the_cap_holds() {
        assert_eq!(auto_limit_minutes(3000, 0.2, None), 60);
        assert_eq!(auto_limit_minutes(3001, 0.2, None), 61);
        assert_eq!(auto_limit_minutes(0, 0.2, None), 1);
        assert_eq!(auto_limit_minutes(36_000, 0.2, Some(90)), 90);
        assert_eq!(auto_limit_minutes(100, -1.0, None), 2, "a negative margin counts as none");
    }

    #[test]
    fn a_limit_is_extended_only_when_it_ends_before_the_next_pass_and_a_half() {
        // 10-minute limit, started at 0, passes every 60 s.
        assert_eq!(extended_limit(10, 100, 0, 500, 60), None, "ends at 600, after 500 + 90");
        assert_eq!(extended_limit(10, 100, 0, 510, 60), Some(20));
        assert_eq!(extended_limit(60, 100, 0, 3520, 60), Some(100), "doubling stops at the cap");
        assert_eq!(extended_limit(100, 100, 0, 5990, 60), None, "at the cap: Slurm's own limit");
        // A limit already passed (a pass was late) is extended past the horizon.
        assert_eq!(extended_limit(1, 1000, 0, 600, 60), Some(13));
    }

    #[test]
    fn an_extendable_limit_has_its_floor_and_stays_below_its_cap() {
        assert_eq!(extendable_limit(3000, 0.2, 600, 720), Some(60));
        assert_eq!(extendable_limit(60, 0.2, 600, 720), Some(10), "the floor");
        assert_eq!(extendable_limit(60, 0.2, 0, 720), Some(2));
        assert_eq!(extendable_limit(36_000, 0.2, 600, 720), None, "at the cap: keep the cap");
        assert_eq!(extendable_limit(60, 0.2, 600, 10), None, "a floor at the cap");
    }

    #[test]
    fn the_record_reads_back_from_among_others() {
        assert_eq!(record(90), "fairway:extend_to=90");
        let comment = format!("fairway:predicted_runtime=300; {}; fairway:changed=--time=6", record(90));
        assert_eq!(recorded_cap(&comment), Some(90));
        assert_eq!(recorded_cap(&record(UNLIMITED)), Some(UNLIMITED));
        assert_eq!(recorded_cap("fairway:extend_to=soon"), None);
        assert_eq!(recorded_cap("fairway:extend_to=0"), None);
        assert_eq!(recorded_cap("set by hand"), None);
        assert_eq!(extended_limit(10, UNLIMITED, 0, 510, 60), Some(20));
    }

    proptest! {
        #[test]
        fn an_extension_never_passes_the_cap_and_outlives_the_next_pass(
            limit in 1u32..10_000, extra in 0u32..10_000, start in 0i64..1_000_000,
            ran in 0i64..2_000_000, period in 1u64..600,
        ) {
            let cap = limit + extra;
            if let Some(l) = extended_limit(limit, cap, start, start + ran, period) {
                prop_assert!(l > limit && l <= cap);
                prop_assert!(l == cap || start + i64::from(l) * 60 > extension_horizon(start + ran, period));
                let next_pass = start + ran + period as i64;
                prop_assert!(extension_horizon(start + ran, period) >= next_pass);
            }
        }
    }
}
