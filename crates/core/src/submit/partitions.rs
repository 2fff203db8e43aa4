//! The partition facts the submission rules need from `slurm.conf`: which partition
//! is the default, each one's `MaxTime`, and the GPUs its nodes have (`NodeName=… Gres=`).

use std::collections::BTreeMap;

/// One `PartitionName=` line's relevant keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Partition {
    /// `MaxTime` in minutes; `None` = `UNLIMITED` or not set.
    pub max_time: Option<u32>,
    /// `Default=YES`.
    pub default: bool,
    /// The GPUs of its nodes, one entry per distinct node shape; `None` when slurm.conf
    /// does not say (a node set, a node without a readable `Gres=`, dynamic nodes).
    pub gpus: Option<Vec<NodeGpus>>,
}

impl Partition {
    /// The most GPUs of type `ty` (of any type when `None`) one of its nodes has
    /// ([`gpus_of_type`]).
    pub fn most_gpus_per_node(&self, ty: Option<&str>) -> u32 {
        self.gpus.iter().flatten().map(|n| gpus_of_type(n, ty)).max().unwrap_or(0)
    }

    /// `h100 ×8, a100 ×4 per node` (the most of each type one node has), or `no GPUs`.
    pub fn gpus_described(&self) -> String {
        let mut most: BTreeMap<&str, u32> = BTreeMap::new();
        for (t, c) in self.gpus.iter().flatten().flatten() {
            let m = most.entry(t.as_str()).or_insert(0);
            *m = (*m).max(*c);
        }
        most.retain(|_, c| *c > 0);
        if most.is_empty() {
            return "no GPUs".into();
        }
        let each: Vec<String> =
            most.iter().map(|(t, c)| if t.is_empty() { format!("gpu ×{c}") } else { format!("{t} ×{c}") }).collect();
        format!("{} per node", each.join(", "))
    }
}

/// The GPUs of type `ty` (of any type when `None`) one node has. Untyped GPUs count for
/// every type: slurmd may report their type later (`AutoDetect`).
pub fn gpus_of_type(node: &NodeGpus, ty: Option<&str>) -> u32 {
    match ty {
        Some(t) => node.get(t).copied().unwrap_or(0).max(node.get("").copied().unwrap_or(0)),
        None => node.values().fold(0u32, |a, c| a.saturating_add(*c)),
    }
}

/// One node's GPUs as `Gres=` states them: count by type (`""` for untyped GPUs, whose
/// type `AutoDetect` may learn only when slurmd registers).
pub type NodeGpus = BTreeMap<String, u32>;

/// Reads a node's `Gres=` value (also sinfo's `Gres`): `gpu:h100:8`, `gpu:8`,
/// `gpu:a100:4(S:0-1),shard:8`.
/// `None` when a GPU entry cannot be read (a count with a suffix, a file range).
pub fn node_gpus(gres: &str) -> Option<NodeGpus> {
    let mut out = NodeGpus::new();
    let mut depth = 0;
    let mut entries = vec![String::new()];
    for c in gres.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => entries.push(String::new()),
            c if depth == 0 => entries.last_mut().expect("one entry").push(c),
            _ => {}
        }
    }
    for entry in entries.iter().map(|e| e.trim()).filter(|e| !e.is_empty()) {
        let mut fields: Vec<&str> = entry.split(':').filter(|f| *f != "no_consume").collect();
        if fields.first() != Some(&"gpu") {
            continue;
        }
        fields.remove(0);
        let (ty, count) = match fields.as_slice() {
            [] => ("", "1"),
            [c] if c.bytes().all(|b| b.is_ascii_digit()) => ("", *c),
            [t] => (*t, "1"),
            [t, c] => (*t, *c),
            _ => return None,
        };
        let count: u32 = count.parse().ok()?;
        let slot = out.entry(ty.to_string()).or_insert(0);
        *slot = slot.saturating_add(count);
    }
    Some(out)
}

/// Partitions by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Partitions(pub BTreeMap<String, Partition>);

impl Partitions {
    /// Reads `PartitionName=` lines (keys case-insensitive, `#` comments; `Include`
    /// lines already expanded by [`crate::slurm_conf::read`]). `PartitionName=DEFAULT`
    /// sets defaults for later lines, as in Slurm.
    pub fn parse(text: &str) -> Self {
        let lines: Vec<Vec<(&str, &str)>> = text
            .lines()
            .map(|l| l.split('#').next().unwrap_or("").split_whitespace().filter_map(|p| p.split_once('=')).collect())
            .collect();
        let key = |k: &str, name: &str| k.eq_ignore_ascii_case(name);
        // Dynamic nodes (MaxNodeCount) may join `Nodes=ALL` partitions unseen here.
        let dynamic = lines.iter().flatten().any(|(k, _)| key(k, "maxnodecount"));
        let nodes = Self::nodes(&lines);
        let mut out = BTreeMap::new();
        let mut defaults = Partition::default();
        for pairs in &lines {
            let Some(&(k, name)) = pairs.first() else { continue };
            if !key(k, "partitionname") {
                continue;
            }
            let mut p = defaults.clone();
            for &(k, v) in &pairs[1..] {
                match k.to_ascii_lowercase().as_str() {
                    "maxtime" => {
                        p.max_time = if v.eq_ignore_ascii_case("unlimited") || v.eq_ignore_ascii_case("infinite") {
                            None
                        } else {
                            crate::time::parse_duration(v).ok().map(|s| u32::try_from(s / 60).unwrap_or(u32::MAX))
                        }
                    }
                    "default" => p.default = v.eq_ignore_ascii_case("yes"),
                    "nodes" => p.gpus = Self::gpus_of(v, &nodes, dynamic),
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

    /// Each `NodeName=` line's nodes and their GPUs (`None`: not readable), with
    /// `NodeName=DEFAULT`'s `Gres=` for lines that give none.
    fn nodes(lines: &[Vec<(&str, &str)>]) -> BTreeMap<String, Option<NodeGpus>> {
        let mut out = BTreeMap::new();
        let mut default_gres: Option<&str> = None;
        for pairs in lines {
            let Some(&(k, names)) = pairs.first() else { continue };
            if !k.eq_ignore_ascii_case("nodename") {
                continue;
            }
            let gres = pairs[1..].iter().find(|(k, _)| k.eq_ignore_ascii_case("gres")).map(|&(_, v)| v);
            if names.eq_ignore_ascii_case("default") {
                default_gres = gres.or(default_gres);
                continue;
            }
            let gpus = gres.or(default_gres).map_or(Some(NodeGpus::new()), node_gpus);
            match names.parse::<crate::hostlist::Hostlist>() {
                Ok(h) => out.extend(h.hosts().iter().map(|n| (n.clone(), gpus.clone()))),
                // A name we cannot expand: every partition naming it stays unknown.
                Err(_) => {
                    out.insert(names.to_string(), None);
                }
            }
        }
        out
    }

    /// The distinct GPU shapes of the nodes a `Nodes=` value names.
    fn gpus_of(value: &str, nodes: &BTreeMap<String, Option<NodeGpus>>, dynamic: bool) -> Option<Vec<NodeGpus>> {
        let mut shapes: Vec<NodeGpus> = if value.eq_ignore_ascii_case("all") {
            if dynamic {
                return None;
            }
            nodes.values().cloned().collect::<Option<_>>()?
        } else {
            let names = value.parse::<crate::hostlist::Hostlist>().ok()?;
            names.hosts().iter().map(|n| nodes.get(n).cloned().flatten()).collect::<Option<_>>()?
        };
        shapes.sort();
        shapes.dedup();
        Some(shapes)
    }

    /// The partition named `name`, when slurm.conf says which GPUs its nodes have.
    pub fn with_gpus(&self, name: &str) -> Option<&Partition> {
        self.0.get(name).filter(|p| p.gpus.is_some())
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

    #[test]
    fn reads_the_gpus_of_each_partitions_nodes() {
        let p = Partitions::parse(
            "NodeName=DEFAULT Gres=gpu:a100:4\nNodeName=a[1-2]\nNodeName=h1 Gres=gpu:h100:4(S:0),gpu:h100:4(S:1),shard:8\n\
             NodeName=m1 Gres=gpu:h100:2,gpu:l4:no_consume:1\nNodeName=odd Gres=gpu:h100:1K\n\
             PartitionName=a Nodes=a[1-2]\nPartitionName=h Nodes=h1,m1\nPartitionName=x Nodes=a1,odd\n",
        );
        let shapes = |n: &str| p.0[n].gpus.clone();
        assert_eq!(shapes("a"), Some(vec![NodeGpus::from([("a100".into(), 4)])]));
        assert_eq!(p.0["h"].most_gpus_per_node(Some("h100")), 8);
        assert_eq!(p.0["h"].most_gpus_per_node(Some("l4")), 1);
        assert_eq!(p.0["h"].most_gpus_per_node(None), 8);
        assert_eq!(p.0["h"].gpus_described(), "h100 ×8, l4 ×1 per node");
        assert_eq!(shapes("x"), None, "a count Fairway cannot read leaves the partition unjudged");
        assert!(p.with_gpus("x").is_none() && p.with_gpus("a").is_some());
    }
}
