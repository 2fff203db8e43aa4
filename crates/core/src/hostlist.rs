//! Slurm hostlist expressions (`c[1-4,7]`, `gpu[001-016]`, `login,c[1-2]`,
//! `rack[1-2]-gpu[01-08]`), as slurm.conf writes node names: a comma-separated list of
//! names, each with any number of bracketed sets of numeric ranges (every combination,
//! the first bracket varying slowest, as Slurm lists two); leading zeros fix the width
//! (`[001-016]`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer};

/// Most names one expression may expand to: far beyond any cluster, small enough that
/// a typo such as `c[1-100000000]` is refused rather than filling memory.
pub const MAX_HOSTS: usize = 1 << 20;

/// A parsed hostlist expression.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Hostlist {
    text: String,
    hosts: Vec<String>,
}

/// Why an expression is not a hostlist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid hostlist \"{text}\": {why}")]
pub struct HostlistError {
    text: String,
    why: String,
}

impl Hostlist {
    /// Every name, in the order written.
    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }

    /// Whether `name` is one of the names.
    pub fn contains(&self, name: &str) -> bool {
        self.hosts.iter().any(|h| h == name)
    }
}

impl fmt::Display for Hostlist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Splits on commas outside brackets.
fn items(text: &str) -> Result<Vec<&str>, String> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in text.char_indices() {
        match c {
            '[' if depth == 0 => depth = 1,
            '[' => return Err("nested '['".into()),
            ']' if depth == 1 => depth = 0,
            ']' => return Err("']' without '['".into()),
            ',' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("'[' without ']'".into());
    }
    out.push(&text[start..]);
    Ok(out)
}

fn expand_item(item: &str, hosts: &mut Vec<String>) -> Result<(), String> {
    if item.is_empty() {
        return Err("an empty name".into());
    }
    let names = expand_name(item, item, hosts.len())?;
    hosts.extend(names);
    Ok(())
}

/// Every name `text` (a part of `item` from some bracket on) stands for; `already` names
/// exist, for the size limit.
fn expand_name(item: &str, text: &str, already: usize) -> Result<Vec<String>, String> {
    let Some((prefix, rest)) = text.split_once('[') else {
        if !text.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
            return Err(format!("\"{item}\" is not a node name"));
        }
        return Ok(vec![text.to_string()]);
    };
    if !prefix.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
        return Err(format!("\"{item}\" is not a node name"));
    }
    let (ranges, rest) = rest.split_once(']').ok_or("'[' without ']'")?;
    let suffixes = expand_name(item, rest, already)?;
    let mut out = Vec::new();
    for range in ranges.split(',') {
        let (lo, hi) = range.split_once('-').unwrap_or((range, range));
        let num = |s: &str| -> Result<u64, String> {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) || s.len() > 18 {
                return Err(format!("\"{range}\" in \"{item}\" is not a number or a range of numbers"));
            }
            s.parse().map_err(|_| format!("\"{s}\" is not a number"))
        };
        let (a, b) = (num(lo)?, num(hi)?);
        if a > b {
            return Err(format!("range \"{range}\" in \"{item}\" runs backwards"));
        }
        let total = (already + out.len()) as u64 + (b - a + 1).saturating_mul(suffixes.len() as u64);
        if total > MAX_HOSTS as u64 {
            return Err(format!("more than {MAX_HOSTS} names"));
        }
        let width = if lo.len() > 1 && lo.starts_with('0') { lo.len() } else { 0 };
        for n in a..=b {
            out.extend(suffixes.iter().map(|suffix| format!("{prefix}{n:0width$}{suffix}")));
        }
    }
    Ok(out)
}

impl FromStr for Hostlist {
    type Err = HostlistError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let err = |why: String| HostlistError { text: text.to_string(), why };
        let mut hosts = Vec::new();
        for item in items(text.trim()).map_err(err)? {
            expand_item(item.trim(), &mut hosts).map_err(err)?;
        }
        Ok(Self { text: text.to_string(), hosts })
    }
}

impl<'de> Deserialize<'de> for Hostlist {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(s: &str) -> Vec<String> {
        s.parse::<Hostlist>().unwrap().hosts().to_vec()
    }

    #[test]
    fn expands_as_slurm_does() {
        assert_eq!(hosts("c[1-2]"), ["c1", "c2"]);
        assert_eq!(hosts("login,c[3,5-6]"), ["login", "c3", "c5", "c6"]);
        assert_eq!(hosts("gpu[008-010]-ib"), ["gpu008-ib", "gpu009-ib", "gpu010-ib"]);
        assert_eq!(hosts("node0"), ["node0"]);
        assert_eq!(hosts("rack[1-2]-gpu[01-02]"), ["rack1-gpu01", "rack1-gpu02", "rack2-gpu01", "rack2-gpu02"]);
        assert_eq!(hosts("r[1-2]n[3,5]-ib"), ["r1n3-ib", "r1n5-ib", "r2n3-ib", "r2n5-ib"]);
        assert_eq!(hosts("rack[1-2]-gpu[01-08]").len(), 16);
        assert!("c[1-2]".parse::<Hostlist>().unwrap().contains("c2"));
        assert!(!"c[1-2]".parse::<Hostlist>().unwrap().contains("c3"));
    }

    #[test]
    fn refuses_what_is_not_a_hostlist() {
        for bad in [
            "",
            "c[1-2",
            "c1-2]",
            "c[2-1]",
            "c[a-b]",
            "c[1-2][3-",
            "c[[1]]",
            "c[1-1000][1-10000]",
            "c[1]d e",
            "c,,d",
            "c d",
            "c[1-99999999]",
        ] {
            let e = bad.parse::<Hostlist>().unwrap_err().to_string();
            assert!(e.starts_with("invalid hostlist"), "{bad}: {e}");
        }
    }
}
