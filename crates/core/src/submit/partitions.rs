//! The partition facts the submission rules need from `slurm.conf`: which partition
//! is the default and each one's `MaxTime`.

use std::collections::BTreeMap;

/// One `PartitionName=` line's relevant keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Partition {
    /// `MaxTime` in minutes; `None` = `UNLIMITED` or not set.
    pub max_time: Option<u32>,
    /// `Default=YES`.
    pub default: bool,
}

/// Partitions by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Partitions(pub BTreeMap<String, Partition>);

impl Partitions {
    /// Reads `PartitionName=` lines (keys case-insensitive, `#` comments; `Include`
    /// lines already expanded by [`crate::slurm_conf::read`]). `PartitionName=DEFAULT`
    /// sets defaults for later lines, as in Slurm.
    pub fn parse(text: &str) -> Self {
        let mut out = BTreeMap::new();
        let mut defaults = Partition::default();
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            let mut pairs = line.split_whitespace().filter_map(|p| p.split_once('='));
            let Some((k, name)) = pairs.next() else { continue };
            if !k.eq_ignore_ascii_case("partitionname") {
                continue;
            }
            let mut p = defaults.clone();
            for (k, v) in pairs {
                match k.to_ascii_lowercase().as_str() {
                    "maxtime" => {
                        p.max_time = if v.eq_ignore_ascii_case("unlimited") || v.eq_ignore_ascii_case("infinite") {
                            None
                        } else {
                            crate::time::parse_duration(v).ok().map(|s| u32::try_from(s / 60).unwrap_or(u32::MAX))
                        }
                    }
                    "default" => p.default = v.eq_ignore_ascii_case("yes"),
                    _ => {}
                }
            }
            if name.eq_ignore_ascii_case("default") {
                defaults = Partition { default: false, ..p };
            } else {
                out.insert(name.to_string(), p);
            }
        }
        Self(out)
    }

    /// The partition jobs get when they name none.
    pub fn default_name(&self) -> Option<&str> {
        self.0.iter().find(|(_, p)| p.default).map(|(n, _)| n.as_str())
    }

    /// `MaxTime` of a partition, minutes.
    pub fn max_time(&self, name: &str) -> Option<u32> {
        self.0.get(name).and_then(|p| p.max_time)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_default_and_max_time() {
        let p = Partitions::parse(
            "NodeName=n[1-4] Gres=gpu:8\nPartitionName=DEFAULT MaxTime=1-00:00:00\n\
             partitionname=debug Nodes=n1 MaxTime=30 Default=YES # short\n\
             PartitionName=gpu Nodes=n[1-4]\nPartitionName=long Nodes=n[1-4] MaxTime=UNLIMITED\n",
        );
        assert_eq!(p.default_name(), Some("debug"));
        assert_eq!(p.max_time("debug"), Some(30));
        assert_eq!(p.max_time("gpu"), Some(1440));
        assert_eq!(p.max_time("long"), None);
        assert_eq!(p.max_time("nope"), None);
    }
}
