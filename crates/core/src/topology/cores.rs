//! Sets of abstract core ids written as ranges (`0-55`, `0-15,64-79`), as in gres.conf's
//! `Cores=` and Slurm's `bit_fmt`.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Highest core id accepted: far above any node, low enough that a typo such as
/// `0-5555555` is refused instead of allocating millions of entries.
pub const MAX_CORE_ID: u32 = 65_535;

/// A set of Slurm abstract core ids (hwloc's logical core index `L#`: core 0 is the first
/// core of the first socket), not OS CPU (thread) numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct CoreSet(BTreeSet<u32>);

impl CoreSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `core` is in the set.
    pub fn contains(&self, core: u32) -> bool {
        self.0.contains(&core)
    }

    /// Number of cores.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the set has no core.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Cores in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().copied()
    }

    /// Highest core id, if any.
    pub fn max(&self) -> Option<u32> {
        self.0.last().copied()
    }

    /// Adds every core of `other`.
    pub fn extend(&mut self, other: &CoreSet) {
        self.0.extend(other.iter());
    }

    /// Whether the two sets share a core.
    pub fn intersects(&self, other: &CoreSet) -> bool {
        self.0.intersection(&other.0).next().is_some()
    }
}

impl FromIterator<u32> for CoreSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

impl fmt::Display for CoreSet {
    /// Runs of consecutive ids as `a-b`, others alone, comma-separated: `0-3,8,10-11`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut iter = self.iter().peekable();
        while let Some(start) = iter.next() {
            let mut end = start;
            while iter.peek() == Some(&(end + 1)) {
                end = iter.next().unwrap_or(end);
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
        }
        Ok(())
    }
}

/// Why a core list could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CoreSetError {
    /// Nothing between commas, or nothing at all.
    #[error("empty core list or empty item in `{0}`")]
    Empty(String),
    /// Not a number or range.
    #[error("`{0}` is not a core id or range (write e.g. `0-55` or `0-15,64-79`)")]
    Syntax(String),
    /// `b-a` with `b > a`.
    #[error("range `{0}` runs backwards")]
    Backwards(String),
    /// Above [`MAX_CORE_ID`].
    #[error("core id {0} is above {MAX_CORE_ID}")]
    TooLarge(u32),
}

impl FromStr for CoreSet {
    type Err = CoreSetError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim().is_empty() {
            return Err(CoreSetError::Empty(s.to_string()));
        }
        let mut set = BTreeSet::new();
        for item in s.split(',') {
            let item = item.trim();
            if item.is_empty() {
                return Err(CoreSetError::Empty(s.to_string()));
            }
            let num = |t: &str| t.trim().parse::<u32>().map_err(|_| CoreSetError::Syntax(item.to_string()));
            let (lo, hi) = match item.split_once('-') {
                Some((a, b)) => (num(a)?, num(b)?),
                None => (num(item)?, num(item)?),
            };
            if lo > hi {
                return Err(CoreSetError::Backwards(item.to_string()));
            }
            if hi > MAX_CORE_ID {
                return Err(CoreSetError::TooLarge(hi));
            }
            set.extend(lo..=hi);
        }
        Ok(Self(set))
    }
}

impl Serialize for CoreSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for CoreSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_round_trip_in_slurm_form() {
        for text in ["0-55", "0-15,64-79", "3", "0-3,8,10-11"] {
            assert_eq!(text.parse::<CoreSet>().unwrap().to_string(), text);
        }
        assert_eq!("4,0-3, 5".parse::<CoreSet>().unwrap().to_string(), "0-5");
    }

    #[test]
    fn bad_lists_are_refused() {
        assert!(matches!("".parse::<CoreSet>(), Err(CoreSetError::Empty(_))));
        assert!(matches!("0,,3".parse::<CoreSet>(), Err(CoreSetError::Empty(_))));
        assert!(matches!("a-3".parse::<CoreSet>(), Err(CoreSetError::Syntax(_))));
        assert!(matches!("7-3".parse::<CoreSet>(), Err(CoreSetError::Backwards(_))));
        assert!(matches!("0-99999".parse::<CoreSet>(), Err(CoreSetError::TooLarge(99999))));
    }
}
