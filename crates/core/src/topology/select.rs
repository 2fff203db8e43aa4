//! Choosing k of a node's free GPUs for a job: the best-connected set, kept on one
//! socket and NUMA node when it can be, and the cores that go with it.
//!
//! # The score
//! Sets are compared on a [`Score`], field by field (lexicographically), lower first:
//! 1. `disconnected_pairs`: pairs of chosen GPUs with no NVLink between them. Their
//!    traffic crosses PCIe and, between sockets, the CPU interconnect, an order of
//!    magnitude slower than NVLink: the worst thing to give a training job.
//! 2. `sockets`, then 3. `numa_nodes` spanned: host-to-GPU copies and the job's cores
//!    stay local, and Slurm's cons_tres binds cores per socket.
//! 4. `lanes` among chosen pairs, more first: among sets equally connected and local,
//!    the one with the most bandwidth (differs on mixed meshes such as DGX-1's).
//! 5. `socket_leftover`, then 6. `numa_leftover`: free GPUs left on the sockets (NUMA
//!    nodes) the set uses, fewer first (best fit), so that whole sockets stay free for
//!    larger jobs instead of being nibbled at.
//! 7. Then the lowest GPU indexes (the first set in lexicographic order).
//!
//! Every k-subset of the free GPUs is scored ([`crate::topology::MAX_GPUS`] bounds the
//! work at C(16, 8) = 12,870 sets), so the answer is the exact optimum of this order.

use std::cmp::{Ordering, Reverse};
use std::collections::BTreeMap;

use itertools::Itertools as _;

use super::{CoreSet, Topology};

/// How good a set of GPUs is; see the module docs for the order. Smaller is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Score {
    /// Pairs of chosen GPUs with no NVLink lane between them.
    pub disconnected_pairs: u32,
    /// Sockets the chosen GPUs are attached to.
    pub sockets: u32,
    /// NUMA nodes the chosen GPUs are attached to.
    pub numa_nodes: u32,
    /// NVLink lanes summed over chosen pairs (more is better).
    pub lanes: u32,
    /// Free GPUs left unchosen on the sockets used.
    pub socket_leftover: u32,
    /// Free GPUs left unchosen on the NUMA nodes used.
    pub numa_leftover: u32,
}

impl Score {
    fn rank(&self) -> (u32, u32, u32, Reverse<u32>, u32, u32) {
        (
            self.disconnected_pairs,
            self.sockets,
            self.numa_nodes,
            Reverse(self.lanes),
            self.socket_leftover,
            self.numa_leftover,
        )
    }
}

impl Ord for Score {
    fn cmp(&self, other: &Self) -> Ordering {
        self.rank().cmp(&other.rank())
    }
}

impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The GPUs chosen for a job and the cores to bind it to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// GPU indexes, increasing.
    pub gpus: Vec<usize>,
    /// The cores local to those GPUs (the union of their local cores).
    pub cores: CoreSet,
    /// Why this set.
    pub score: Score,
}

/// Why no set could be chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChooseError {
    /// A request for no GPU.
    #[error("a request for 0 GPUs has nothing to choose")]
    Zero,
    /// Fewer GPUs free than asked for.
    #[error("{wanted} GPUs asked for but only {free} free")]
    NotEnoughFree {
        /// GPUs asked for.
        wanted: usize,
        /// GPUs free.
        free: usize,
    },
    /// A free GPU index the node does not have.
    #[error("GPU {gpu} does not exist: the node has {count} GPUs")]
    UnknownGpu {
        /// The index given.
        gpu: usize,
        /// GPUs on the node.
        count: usize,
    },
}

/// Free GPUs per socket and per NUMA node, for the leftover terms.
struct FreeCounts {
    socket: BTreeMap<u32, u32>,
    numa: BTreeMap<u32, u32>,
}

impl FreeCounts {
    fn new(topo: &Topology, free: &[usize]) -> Self {
        let (mut socket, mut numa) = (BTreeMap::new(), BTreeMap::new());
        for &g in free {
            *socket.entry(topo.socket_of_gpu(g)).or_insert(0) += 1;
            *numa.entry(topo.gpus[g].numa).or_insert(0) += 1;
        }
        Self { socket, numa }
    }
}

fn score_with(topo: &Topology, counts: &FreeCounts, chosen: &[usize]) -> Score {
    let mut s = Score::default();
    for (i, &a) in chosen.iter().enumerate() {
        for &b in &chosen[i + 1..] {
            match topo.nvlink.lanes(a, b) {
                0 => s.disconnected_pairs += 1,
                l => s.lanes += l,
            }
        }
    }
    let sockets: std::collections::BTreeSet<u32> = chosen.iter().map(|&g| topo.socket_of_gpu(g)).collect();
    let numas: std::collections::BTreeSet<u32> = chosen.iter().map(|&g| topo.gpus[g].numa).collect();
    let k = chosen.len() as u32;
    s.sockets = sockets.len() as u32;
    s.numa_nodes = numas.len() as u32;
    s.socket_leftover =
        sockets.iter().map(|x| counts.socket.get(x).copied().unwrap_or(0)).sum::<u32>().saturating_sub(k);
    s.numa_leftover = numas.iter().map(|x| counts.numa.get(x).copied().unwrap_or(0)).sum::<u32>().saturating_sub(k);
    s
}

/// The free GPUs that can be given whole: a GPU in MIG mode never is, since Slurm hands
/// out its instances as devices of their own.
fn sorted_free(topo: &Topology, free: &[usize]) -> Result<Vec<usize>, ChooseError> {
    let mut f: Vec<usize> = free.to_vec();
    f.sort_unstable();
    f.dedup();
    if let Some(&gpu) = f.iter().find(|&&g| g >= topo.gpus.len()) {
        return Err(ChooseError::UnknownGpu { gpu, count: topo.gpus.len() });
    }
    f.retain(|&g| topo.gpus[g].mig.is_empty());
    Ok(f)
}

/// The score of choosing `chosen` (a subset of `free`) on `topo`.
pub fn score(topo: &Topology, free: &[usize], chosen: &[usize]) -> Result<Score, ChooseError> {
    let free = sorted_free(topo, free)?;
    Ok(score_with(topo, &FreeCounts::new(topo, &free), chosen))
}

/// The best `k` of the `free` GPUs (indexes, any order, duplicates ignored; GPUs in MIG
/// mode left out).
pub fn choose(topo: &Topology, free: &[usize], k: usize) -> Result<Choice, ChooseError> {
    let free = sorted_free(topo, free)?;
    if k == 0 {
        return Err(ChooseError::Zero);
    }
    if k > free.len() {
        return Err(ChooseError::NotEnoughFree { wanted: k, free: free.len() });
    }
    let counts = FreeCounts::new(topo, &free);
    let mut best: Option<(Score, Vec<usize>)> = None;
    // Combinations come in lexicographic order, so keeping the first of equal scores
    // is the lowest-index tie-break.
    for set in free.iter().copied().combinations(k) {
        let s = score_with(topo, &counts, &set);
        if best.as_ref().is_none_or(|(b, _)| s < *b) {
            best = Some((s, set));
        }
    }
    let (score, gpus) = best.ok_or(ChooseError::NotEnoughFree { wanted: k, free: free.len() })?;
    let mut cores = CoreSet::new();
    for &g in &gpus {
        cores.extend(&topo.gpus[g].cores);
    }
    Ok(Choice { gpus, cores, score })
}
