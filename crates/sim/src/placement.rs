//! Which GPUs of a node a job gets, when the nodes' GPU topology is known.
//!
//! Slurm counts a node's free GPUs to decide whether a job fits and which nodes it gets; the
//! topology only decides *which* of the node's GPUs it gets. In this simulator a job runs
//! equally fast on any of them, so the choice inside a node changes no start or end time,
//! and two placements can be followed side by side over the same run:
//! - **topology**: Fairway's choice ([`fairway_core::topology::select::choose`]), what Slurm does
//!   given the `Cores=` and `Links=` Fairway reports;
//! - **first free**: the lowest free GPU indexes, what a node without topology gets.
//!
//! Each multi-GPU allocation on a node is scored ([`fairway_core::topology::select::score`])
//! under both against the best set of as many GPUs on an idle node: a split is what the
//! busy GPUs forced on the job (an 8-GPU job on an 8-GPU node spans both sockets whatever
//! the placement, and is no split). GPUs in MIG mode are never given out.

use fairway_core::topology::select::{choose, score, Score};
use fairway_core::topology::Topology;
use serde::Serialize;

/// How often multi-GPU allocations came out worse connected than they could be on an
/// idle node, under one placement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PlacementQuality {
    /// Allocations with more GPU pairs lacking NVLink than the idle node's best set.
    pub nvlink_split: u64,
    /// Allocations on more sockets than the idle node's best set.
    pub socket_split: u64,
}

/// Placement of a run's multi-GPU node allocations, Fairway's choice against first free.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PlacementStats {
    /// Node allocations of two GPUs or more.
    pub multi_gpu: u64,
    /// With Fairway's topology choice.
    pub topology: PlacementQuality,
    /// With the lowest free GPU indexes.
    pub first_free: PlacementQuality,
}

/// The two placements' busy GPUs, per node, followed through one run.
pub(crate) struct Placer {
    topo: Topology,
    /// Busy GPUs of each node as bit masks: `[topology, first free]`.
    busy: Vec<[u32; 2]>,
    /// The masks each running job holds, in its allocation's node order.
    held: Vec<Vec<(u32, [u32; 2])>>,
    /// The best score of k GPUs on an idle node, by k.
    idle_best: Vec<Score>,
    pub(crate) stats: PlacementStats,
}

impl Placer {
    /// Every node of `node_gpus` has the GPUs of `topo`; `jobs` jobs will run.
    pub(crate) fn new(topo: &Topology, node_gpus: &[u32], jobs: usize) -> Result<Self, String> {
        let whole = topo.gpus.iter().filter(|g| g.mig.is_empty()).count() as u32;
        if let Some((i, &g)) = node_gpus.iter().enumerate().find(|&(_, &g)| g != whole) {
            return Err(format!(
                "node {i} has {g} GPUs but the topology has {whole} that can be given whole: every node must match it"
            ));
        }
        let all: Vec<usize> = (0..topo.gpus.len()).collect();
        let idle_best = (0..=whole as usize)
            .map(|k| if k == 0 { Score::default() } else { choose(topo, &all, k).map(|c| c.score).unwrap_or_default() })
            .collect();
        Ok(Placer {
            topo: topo.clone(),
            busy: vec![[0; 2]; node_gpus.len()],
            held: vec![Vec::new(); jobs],
            idle_best,
            stats: PlacementStats::default(),
        })
    }

    /// Job `j` starts on `alloc` ((node, GPUs) pairs): picks its GPUs under both placements.
    pub(crate) fn place(&mut self, j: usize, alloc: &[(u32, u32)]) {
        let t = &self.topo;
        for &(node, k) in alloc {
            let mut masks = [0u32; 2];
            let multi = k >= 2;
            if multi {
                self.stats.multi_gpu += 1;
            }
            for (which, mask) in masks.iter_mut().enumerate() {
                let busy = self.busy[node as usize][which];
                let free: Vec<usize> =
                    (0..t.gpus.len()).filter(|&g| busy & (1 << g) == 0 && t.gpus[g].mig.is_empty()).collect();
                let chosen: Vec<usize> = if which == 0 {
                    choose(t, &free, k as usize).expect("the scheduler counted the node's free GPUs").gpus
                } else {
                    free.iter().copied().take(k as usize).collect()
                };
                debug_assert_eq!(chosen.len(), k as usize);
                if multi {
                    let s = score(t, &free, &chosen).expect("GPUs of the node");
                    let q = if which == 0 { &mut self.stats.topology } else { &mut self.stats.first_free };
                    let best = self.idle_best[k as usize];
                    q.nvlink_split += u64::from(s.disconnected_pairs > best.disconnected_pairs);
                    q.socket_split += u64::from(s.sockets > best.sockets);
                }
                *mask = chosen.iter().fold(0, |m, &g| m | 1 << g);
                self.busy[node as usize][which] |= *mask;
            }
            self.held[j].push((node, masks));
        }
    }

    /// Job `j` ended: its GPUs are free again.
    pub(crate) fn release(&mut self, j: usize) {
        for (node, masks) in std::mem::take(&mut self.held[j]) {
            for (which, mask) in masks.iter().enumerate() {
                self.busy[node as usize][which] &= !mask;
            }
        }
    }
}
