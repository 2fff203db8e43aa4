//! Slurm's time syntax, as `sbatch --time` and slurm.conf accept it.

use std::fmt;

/// Seconds in a minute, hour and day.
const MIN: u64 = 60;
const HOUR: u64 = 60 * MIN;
const DAY: u64 = 24 * HOUR;

/// A time string that is not in any of Slurm's accepted forms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeError(String);

impl fmt::Display for TimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid time `{}`: expected minutes, minutes:seconds, hours:minutes:seconds, \
             days-hours, days-hours:minutes or days-hours:minutes:seconds",
            self.0
        )
    }
}

impl std::error::Error for TimeError {}

/// Parses a Slurm time into seconds.
///
/// Accepts exactly the forms `sbatch(1)` documents: `M`, `M:S`, `H:M:S`, `D-H`, `D-H:M`,
/// `D-H:M:S`. Unlike Slurm, which reads garbage as 0, anything else is an error.
pub fn parse_duration(text: &str) -> Result<u64, TimeError> {
    let err = || TimeError(text.to_string());
    let s = text.trim();
    let num = |p: &str| -> Result<u64, TimeError> {
        if p.is_empty() || p.len() > 9 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err());
        }
        p.parse().map_err(|_| err())
    };
    let (days, rest) = match s.split_once('-') {
        Some((d, r)) => (Some(num(d)?), r),
        None => (None, s),
    };
    let parts: Vec<&str> = rest.split(':').collect();
    let secs = match (days, parts.as_slice()) {
        (None, [m]) => num(m)? * MIN,
        (None, [m, s]) => num(m)? * MIN + num(s)?,
        (None, [h, m, s]) => num(h)? * HOUR + num(m)? * MIN + num(s)?,
        (Some(d), [h]) => d * DAY + num(h)? * HOUR,
        (Some(d), [h, m]) => d * DAY + num(h)? * HOUR + num(m)? * MIN,
        (Some(d), [h, m, s]) => d * DAY + num(h)? * HOUR + num(m)? * MIN + num(s)?,
        _ => return Err(err()),
    };
    Ok(secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_every_documented_form() {
        assert_eq!(parse_duration("90"), Ok(90 * 60));
        assert_eq!(parse_duration("5:30"), Ok(330));
        assert_eq!(parse_duration("1:00:01"), Ok(3601));
        assert_eq!(parse_duration("2-3"), Ok(2 * DAY + 3 * HOUR));
        assert_eq!(parse_duration("2-3:04"), Ok(2 * DAY + 3 * HOUR + 4 * MIN));
        assert_eq!(parse_duration("7-00:00:00"), Ok(7 * DAY));
    }

    #[test]
    fn rejects_what_slurm_would_silently_misread() {
        for bad in ["", "-", "1h", "1:2:3:4", "1-2-3", "a-1", "-5", "1-", "1:", "99999999999"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
    }
}
