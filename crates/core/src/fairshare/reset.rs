//! `PriorityUsageResetPeriod`: when usage is next cleared (multifactor's `_next_reset`).

use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::Timestamp;

/// The reset periods Slurm accepts (`PRIORITY_RESET_*` in slurm.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetPeriod {
    /// Never.
    None,
    /// Once, when slurmctld starts.
    Now,
    /// Every day at 00:00.
    Daily,
    /// Every Sunday at 00:00.
    Weekly,
    /// The first of every month at 00:00.
    Monthly,
    /// The first of January, April, July and October at 00:00.
    Quarterly,
    /// The first of January at 00:00.
    Yearly,
}

impl ResetPeriod {
    /// From Slurm's numeric value; unknown values mean "never".
    pub fn from_slurm(v: u16) -> Self {
        match v {
            1 => Self::Now,
            2 => Self::Daily,
            3 => Self::Weekly,
            4 => Self::Monthly,
            5 => Self::Quarterly,
            6 => Self::Yearly,
            _ => Self::None,
        }
    }
}

const DAY: i64 = 86_400;

/// The next reset after `last_reset`, in local time as Slurm computes it; `None` for
/// [`ResetPeriod::None`] and [`ResetPeriod::Now`]. Daily and weekly resets that were
/// missed (slurmctld down) collapse to the most recent one, as in Slurm.
pub fn next_reset(period: ResetPeriod, last_reset: i64, now: i64, tz: &TimeZone) -> Option<i64> {
    let last = Timestamp::from_second(last_reset).ok()?.to_zoned(tz.clone());
    let day: Date = last.date();
    let midnight = |d: Date| d.to_zoned(tz.clone()).ok().map(|z| z.timestamp().as_second());
    match period {
        ResetPeriod::None | ResetPeriod::Now => None,
        ResetPeriod::Daily => {
            let mut t = midnight(day)? + DAY;
            while t + DAY < now {
                t += DAY;
            }
            Some(t)
        }
        ResetPeriod::Weekly => {
            let days_to_sunday = 7 - i64::from(last.weekday().to_sunday_zero_offset());
            let mut t = midnight(day)? + DAY * days_to_sunday;
            while t + 7 * DAY < now {
                t += 7 * DAY;
            }
            Some(t)
        }
        ResetPeriod::Monthly => {
            let (y, m) = if day.month() < 12 { (day.year(), day.month() + 1) } else { (day.year() + 1, 1) };
            midnight(Date::new(y, m, 1).ok()?)
        }
        ResetPeriod::Quarterly => {
            // Slurm's months are 0-based: < 3 → April, < 6 → July, < 9 → October.
            let (y, m) = match day.month() {
                1..=3 => (day.year(), 4),
                4..=6 => (day.year(), 7),
                7..=9 => (day.year(), 10),
                _ => (day.year() + 1, 1),
            };
            midnight(Date::new(y, m, 1).ok()?)
        }
        ResetPeriod::Yearly => midnight(Date::new(day.year() + 1, 1, 1).ok()?),
    }
}

/// [`next_reset`] in the system's local time zone (`TZ`, else `/etc/localtime`), as
/// slurmctld's `localtime_r` sees it.
pub fn next_reset_local(period: ResetPeriod, last_reset: i64, now: i64) -> Option<i64> {
    next_reset(period, last_reset, now, &TimeZone::system())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> i64 {
        s.parse::<Timestamp>().unwrap().as_second()
    }

    #[test]
    fn resets_land_on_local_midnights() {
        let utc = TimeZone::UTC;
        let last = ts("2026-12-02T15:00:00Z"); // a Wednesday
        let now = last + 60;
        assert_eq!(next_reset(ResetPeriod::Daily, last, now, &utc), Some(ts("2026-12-03T00:00:00Z")));
        assert_eq!(next_reset(ResetPeriod::Weekly, last, now, &utc), Some(ts("2026-12-06T00:00:00Z")));
        assert_eq!(next_reset(ResetPeriod::Monthly, last, now, &utc), Some(ts("2027-01-01T00:00:00Z")));
        assert_eq!(next_reset(ResetPeriod::Quarterly, last, now, &utc), Some(ts("2027-01-01T00:00:00Z")));
        assert_eq!(next_reset(ResetPeriod::Yearly, last, now, &utc), Some(ts("2027-01-01T00:00:00Z")));
        assert_eq!(
            next_reset(ResetPeriod::Quarterly, ts("2026-02-10T00:00:00Z"), now, &utc),
            Some(ts("2026-04-01T00:00:00Z"))
        );
        assert_eq!(next_reset(ResetPeriod::None, last, now, &utc), None);
    }

    #[test]
    fn missed_daily_resets_collapse_to_the_latest() {
        let utc = TimeZone::UTC;
        let last = ts("2026-12-01T12:00:00Z");
        let now = ts("2026-12-05T08:00:00Z");
        assert_eq!(next_reset(ResetPeriod::Daily, last, now, &utc), Some(ts("2026-12-05T00:00:00Z")));
    }

    #[test]
    fn follows_the_time_zone() {
        let tz = TimeZone::get("Europe/Berlin").unwrap_or(TimeZone::fixed(jiff::tz::offset(1)));
        let last = ts("2026-12-02T15:00:00Z");
        assert_eq!(next_reset(ResetPeriod::Daily, last, last, &tz), Some(ts("2026-12-02T23:00:00Z")));
    }
}
