//! Nodes and their GPUs, from `sinfo -N -O` and the nodes' topology files.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::metrics::gpus_per_node;
use crate::topology::Topology;

/// One GPU of a node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuCell {
    /// Its index on the node (Slurm's GRES index).
    pub index: usize,
    /// Whether a job holds it.
    pub used: bool,
    /// Its NVLink domain on the node (GPUs linked directly or through a switch share
    /// one); `None` without a topology.
    pub domain: Option<usize>,
    /// The socket it hangs off; `None` without a topology.
    pub socket: Option<u32>,
}

/// One node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeView {
    /// Its name.
    pub name: String,
    /// Slurm's state (`idle`, `mixed`, `allocated`, `down*`, `drained`, ...).
    pub state: String,
    /// Partitions it is in.
    pub partitions: Vec<String>,
    /// The GPU model where the topology or GRES names it.
    pub gpu_type: String,
    /// Its GPUs in index order.
    pub gpus: Vec<GpuCell>,
    /// Sockets, when the topology is known.
    pub sockets: Option<u32>,
    /// Whether new jobs can start on it (not down, drained, failing or not responding).
    pub usable: bool,
}

/// Whether a node in sinfo's `state` can start new jobs.
pub fn usable(state: &str) -> bool {
    const UNUSABLE: [&str; 7] = ["down", "drain", "fail", "unknown", "future", "maint", "reboot"];
    // `*`: not responding.
    !state.ends_with('*') && !UNUSABLE.iter().any(|u| state.contains(u))
}

impl NodeView {
    /// GPUs no job holds.
    pub fn idle_gpus(&self) -> usize {
        self.gpus.iter().filter(|g| !g.used).count()
    }
}

/// NVLink domains of a topology: each GPU's domain number, GPUs joined by direct lanes
/// (or all of them, behind an NVSwitch) sharing one.
pub fn nvlink_domains(t: &Topology) -> Vec<usize> {
    let n = t.gpus.len();
    if t.nvlink.via_switch() {
        return vec![0; n];
    }
    let mut domain: Vec<usize> = (0..n).collect();
    fn root(d: &mut [usize], mut i: usize) -> usize {
        while d[i] != i {
            d[i] = d[d[i]];
            i = d[i];
        }
        i
    }
    for i in 0..n {
        for j in i + 1..n {
            if t.nvlink.direct_lanes(i, j) > 0 {
                let (a, b) = (root(&mut domain, i), root(&mut domain, j));
                domain[a.max(b)] = a.min(b);
            }
        }
    }
    // Number domains 0, 1, ... in order of their first GPU.
    let mut names = BTreeMap::new();
    (0..n)
        .map(|i| {
            let r = root(&mut domain, i);
            let next = names.len();
            *names.entry(r).or_insert(next)
        })
        .collect()
}

/// GRES indices in use from a GresUsed value (`gpu:a100:2(IDX:0-1),gpu:h100:0(IDX:N/A)`);
/// without indices, the first `count` GPUs.
fn used_indices(gres_used: &str) -> Vec<usize> {
    let mut used = Vec::new();
    for g in gres_used.split("),").filter(|g| g.contains("gpu")) {
        match g.split_once("(IDX:") {
            Some((_, idx)) => {
                for range in idx.trim_end_matches(')').split(',') {
                    let (a, b) = range.split_once('-').unwrap_or((range, range));
                    if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                        used.extend(a..=b.min(a + 1024));
                    }
                }
            }
            None => used.extend(used.len()..used.len() + gpus_per_node(g) as usize),
        }
    }
    used
}

/// Nodes from `sinfo -N -h -O` in [`super::SINFO_FORMAT`] (one row per node and
/// partition), drawn by the topology where one is known.
pub(super) fn parse(sinfo: &str, topology: &BTreeMap<String, Topology>) -> Vec<NodeView> {
    let mut nodes: BTreeMap<String, NodeView> = BTreeMap::new();
    for l in sinfo.lines() {
        let f: Vec<&str> = l.split('|').map(str::trim).collect();
        let [name, state, partition, gres, gres_used, ..] = f.as_slice() else { continue };
        if name.is_empty() {
            continue;
        }
        let partition = partition.trim_end_matches('*').to_string();
        if let Some(n) = nodes.get_mut(*name) {
            if !n.partitions.contains(&partition) {
                n.partitions.push(partition);
            }
            continue;
        }
        let count = gpus_per_node(gres) as usize;
        let used = used_indices(gres_used);
        let topo = topology.get(*name).filter(|t| t.gpus.len() == count);
        let domains = topo.map(nvlink_domains);
        let gpus = (0..count)
            .map(|i| GpuCell {
                index: i,
                used: used.contains(&i),
                domain: domains.as_ref().map(|d| d[i]),
                socket: topo.map(|t| t.socket_of_gpu(i)),
            })
            .collect();
        let gpu_type = topo
            .and_then(|t| t.gpus.first().map(|g| g.type_name.clone()))
            .or_else(|| {
                gres.split(',').find(|g| g.starts_with("gpu:")).and_then(|g| {
                    let parts: Vec<&str> = g.split('(').next()?.split(':').collect();
                    (parts.len() == 3).then(|| parts[1].to_string())
                })
            })
            .unwrap_or_default();
        nodes.insert(
            name.to_string(),
            NodeView {
                name: name.to_string(),
                state: state.to_string(),
                partitions: vec![partition],
                gpu_type,
                gpus,
                sockets: topo.map(|t| t.cpu.sockets),
                usable: usable(state),
            },
        );
    }
    nodes.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gres_used_indices() {
        assert_eq!(used_indices("gpu:a100:2(IDX:0-1)"), vec![0, 1]);
        assert_eq!(used_indices("gpu:a100:3(IDX:0,2-3),gpu:h100:0(IDX:N/A)"), vec![0, 2, 3]);
        assert_eq!(used_indices("gpu:2"), vec![0, 1]);
        assert_eq!(used_indices("gpu:0"), Vec::<usize>::new());
        assert_eq!(used_indices("(null)"), Vec::<usize>::new());
    }
}
