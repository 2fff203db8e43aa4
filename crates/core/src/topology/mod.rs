//! A node's GPU topology: which GPUs it has, which cores and NUMA node each is close to,
//! and how many NVLink lanes join each pair; the gres.conf lines that describe it; and
//! the choice of the best-connected free GPUs for a job ([`select`]).
//!
//! A [`Topology`] comes from Fairway's topology file ([`Topology::load`], format below) or,
//! at run time, from NVML and sysfs (`fairway-topo-detect`, outside this crate because it
//! is I/O); both give the same type.
//!
//! # Numbering, as Slurm's `gpu/nvml` plugin numbers things
//! - GPU *index* is NVML's index, which is PCI bus id order; gres.conf `Links=` positions
//!   use it. It is not the `/dev/nvidia<minor>` number, which the driver assigns and which
//!   may differ, so the file records both.
//! - Cores are Slurm *abstract core ids* (hwloc logical core `L#`: core 0 is the first core
//!   of socket 0, core `cores_per_socket` the first of socket 1), what gres.conf `Cores=`
//!   takes and what autodetect writes after `xcpuinfo_mac_to_abs`; not OS CPU numbers,
//!   and one id per core whatever the threads per core.
//!
//! # The topology file
//! TOML, every key checked; errors name the file, line, column and key
//! (`dgx.toml:41:8: key `gpu[3].numa`: NUMA node 2 is not declared in [[numa]]`).
//!
//! ```toml
//! name = "DGX H100"                # free text
//! [cpu]
//! sockets = 2
//! cores_per_socket = 56
//! threads_per_core = 2
//!
//! [[numa]]                         # one per NUMA node
//! id = 0
//! socket = 0
//! cores = "0-55"                   # abstract core ids, inside its socket
//!
//! [nvlink]                         # absent: no NVLink
//! switch_lanes = 18                # NVSwitch: every GPU reaches every other over 18 lanes
//! # or, for direct links (bridges, hybrid cube-mesh), one row per GPU in Links= form:
//! # lanes = [[-1, 12, 0, 0], [12, -1, 0, 0], [0, 0, -1, 12], [0, 0, 12, -1]]
//!
//! [[gpu]]                          # one per GPU, in index (= PCI bus id) order
//! index = 0
//! name = "NVIDIA H100 80GB HBM3"   # as NVML reports it
//! type = "h100"                    # gres.conf Type for a hand-written gres.conf
//! memory_mib = 81559
//! pci_bus_id = "00000000:1B:00.0"  # NVML's form
//! uuid = "GPU-..."
//! minor = 0                        # /dev/nvidia0; default: the index
//! numa = 0
//! # cores = "0-27"                 # default: the cores of its NUMA node
//! # [[gpu.mig]]                  # MIG instances, when the GPU is in MIG mode
//! # profile = "1g.10gb"            # <slices>g.<GB>gb, as Slurm names it
//! # uuid = "MIG-..."
//! # gi_cap_minor = 21              # /dev/nvidia-caps/nvidia-cap21 (GPU instance)
//! # ci_cap_minor = 22              # /dev/nvidia-caps/nvidia-cap22 (compute instance)
//! ```
//!
//! The capability minors are those of `/proc/driver/nvidia-caps/mig-minors`
//! (`gpu0/gi1/access 21`, `gpu0/gi1/ci0/access 22`). A GPU with MIG instances is reported
//! as Slurm's `gpu/nvml` reports it: one GPU per instance, typed `<type>_<profile>`, with
//! the parent's device file and both capability files, and the instance's UUID as its
//! `UniqueId` (what `CUDA_VISIBLE_DEVICES` gets). [`select`] still chooses whole GPUs.
//!
//! `lanes` must be symmetric with -1 on the diagonal; a GPU has at most 18 lanes
//! (NVML's `NVML_NVLINK_MAX_LINKS`) and a node at most [`MAX_GPUS`] GPUs.

mod cores;
mod file;
pub mod select;

use std::fmt::Write as _;

pub use cores::{CoreSet, CoreSetError, MAX_CORE_ID};
pub use file::TopologyError;

/// Most GPUs per node: [`select::choose`] compares every k-subset of the free GPUs,
/// at most C(16, 8) = 12,870 of them.
pub const MAX_GPUS: usize = 16;

/// Most NVLink lanes one GPU has (NVML's `NVML_NVLINK_MAX_LINKS`; H100 SXM has 18).
pub const MAX_LANES_PER_GPU: u32 = 18;

/// One node's GPUs, cores and links.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// Free text, e.g. the system model.
    pub name: Option<String>,
    /// Sockets and cores.
    pub cpu: Cpu,
    /// NUMA nodes, as declared.
    pub numa: Vec<NumaNode>,
    /// GPUs in index order: `gpus[i].index == i`.
    pub gpus: Vec<Gpu>,
    /// NVLink lanes between GPUs.
    pub nvlink: NvLinks,
}

/// The node's processors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cpu {
    /// Sockets (packages).
    pub sockets: u32,
    /// Cores in each socket.
    pub cores_per_socket: u32,
    /// Hardware threads per core.
    pub threads_per_core: u32,
}

impl Cpu {
    /// Cores on the node.
    pub fn cores(&self) -> u32 {
        self.sockets * self.cores_per_socket
    }

    /// The socket that holds abstract core `core`.
    pub fn socket_of(&self, core: u32) -> u32 {
        core / self.cores_per_socket
    }
}

/// A NUMA node and its cores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumaNode {
    /// The kernel's NUMA node id.
    pub id: u32,
    /// The socket it is part of.
    pub socket: u32,
    /// Its cores.
    pub cores: CoreSet,
}

/// One GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gpu {
    /// NVML index (PCI bus id order).
    pub index: usize,
    /// Name as NVML reports it (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// Short gres type for hand-written gres.conf files (`h100`).
    pub type_name: String,
    /// Memory in MiB, as NVML's total memory.
    pub memory_mib: u64,
    /// PCI bus id in NVML's form, `00000000:1B:00.0`.
    pub pci_bus_id: String,
    /// `GPU-…` UUID.
    pub uuid: String,
    /// Device minor number: the GPU is `/dev/nvidia<minor>`.
    pub minor: u32,
    /// The NUMA node it is attached to.
    pub numa: u32,
    /// Cores close to it (its NUMA node's unless the file says otherwise).
    pub cores: CoreSet,
    /// MIG instances, when MIG is on: each is a GPU of its own to Slurm.
    pub mig: Vec<MigInstance>,
}

impl Gpu {
    /// Its device file.
    pub fn device_file(&self) -> String {
        format!("/dev/nvidia{}", self.minor)
    }

    /// The gres type Slurm's `gpu/nvml` autodetect gives it: NVML's name with spaces made
    /// underscores and letters lowercased (`gpu_common_underscorify_tolower`).
    pub fn autodetect_type(&self) -> String {
        self.name.chars().map(|c| if c == ' ' { '_' } else { c.to_ascii_lowercase() }).collect()
    }
}

/// A MIG instance of a GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigInstance {
    /// Profile, e.g. `1g.10gb`.
    pub profile: String,
    /// `MIG-…` UUID.
    pub uuid: String,
    /// Minor of the GPU instance's capability device, `/dev/nvidia-caps/nvidia-cap<N>`.
    pub gi_cap_minor: u32,
    /// Minor of the compute instance's capability device.
    pub ci_cap_minor: u32,
}

/// NVLink lanes between every pair of GPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvLinks {
    /// `lanes[i][j]`: lanes usable between GPU i and GPU j (0 on the diagonal).
    lanes: Vec<Vec<u32>>,
    /// Lanes from each GPU into the NVSwitch fabric, when the lanes go through NVSwitch
    /// rather than straight to the peer GPU.
    switch_lanes: Option<u32>,
}

impl NvLinks {
    /// No NVLink between `n` GPUs.
    pub fn none(n: usize) -> Self {
        Self { lanes: vec![vec![0; n]; n], switch_lanes: None }
    }

    /// NVSwitch: each of `n` GPUs reaches every other over its `lanes` lanes.
    pub fn switch(n: usize, lanes: u32) -> Self {
        let matrix = (0..n).map(|i| (0..n).map(|j| if i == j { 0 } else { lanes }).collect()).collect();
        Self { lanes: matrix, switch_lanes: Some(lanes) }
    }

    /// Direct GPU-to-GPU links, from a square matrix (the diagonal is ignored).
    /// [`Topology::validate`] checks symmetry and lane counts.
    pub fn direct(lanes: Vec<Vec<u32>>) -> Self {
        let mut lanes = lanes;
        for (i, row) in lanes.iter_mut().enumerate() {
            if let Some(d) = row.get_mut(i) {
                *d = 0;
            }
        }
        Self { lanes, switch_lanes: None }
    }

    /// Lanes usable between GPUs `i` and `j` (0 for `i == j`).
    pub fn lanes(&self, i: usize, j: usize) -> u32 {
        self.lanes[i][j]
    }

    /// Lanes that end on the peer GPU itself, which is all NVML can attribute to a
    /// peer: through NVSwitch the far end of every lane is the switch, so none.
    pub fn direct_lanes(&self, i: usize, j: usize) -> u32 {
        if self.via_switch() {
            0
        } else {
            self.lanes(i, j)
        }
    }

    /// Whether the lanes go through NVSwitch.
    pub fn via_switch(&self) -> bool {
        self.switch_lanes.is_some()
    }

    /// Lanes from each GPU into the NVSwitch fabric, for NVSwitch systems.
    pub fn switch_lanes(&self) -> Option<u32> {
        self.switch_lanes
    }

    /// Number of GPUs.
    pub fn len(&self) -> usize {
        self.lanes.len()
    }

    /// Whether there are no GPUs.
    pub fn is_empty(&self) -> bool {
        self.lanes.is_empty()
    }

    /// The matrix in gres.conf `Links=` form, -1 on the diagonal.
    pub fn rows(&self) -> Vec<Vec<i32>> {
        (0..self.len())
            .map(|i| (0..self.len()).map(|j| if i == j { -1 } else { self.lanes(i, j) as i32 }).collect())
            .collect()
    }
}

/// Which gres.conf a site writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GresStyle {
    /// Exactly what `AutoDetect=nvml` detects (`slurmd -G` shows it): Type from NVML's
    /// name, `Links=` counting only lanes whose far end is a GPU, so 0 through NVSwitch.
    /// Cores and Links given beside `AutoDetect=nvml` must equal these, or slurmd drops
    /// the GPU (`_validate_cpus_links`).
    Autodetect,
    /// A gres.conf for `AutoDetect=off`: the short type and every usable lane, NVSwitch
    /// lanes included, so that cons_tres's "best linked" choice sees them.
    Static,
    /// What Fairway's `gpu/nvml` plugin reports to slurmd: NVML's type names, as
    /// `Autodetect`, and every usable lane, as `Static` (`Links` then reach cons_tres on
    /// NVSwitch systems too).
    Fairway,
}

/// One GPU as a gres.conf line or a gpu plugin record describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GresGpu {
    /// `Type=`.
    pub type_name: String,
    /// `File=`.
    pub file: String,
    /// `Cores=`: Slurm abstract core ids.
    pub cores: String,
    /// `Links=`: lanes to each GPU in index order, -1 for itself.
    pub links: String,
    /// A MIG instance's UUID, which Slurm puts in `CUDA_VISIBLE_DEVICES` (no gres.conf key:
    /// only a gpu plugin can report it).
    pub unique_id: Option<String>,
}

impl Topology {
    /// The NUMA node `id`.
    pub fn numa_node(&self, id: u32) -> Option<&NumaNode> {
        self.numa.iter().find(|n| n.id == id)
    }

    /// The socket GPU `gpu` is attached to.
    pub fn socket_of_gpu(&self, gpu: usize) -> u32 {
        self.numa_node(self.gpus[gpu].numa).map_or(0, |n| n.socket)
    }

    /// One record per GPU, in index order, in the given style; a GPU in MIG mode gives one
    /// record per instance instead, as Slurm's `gpu/nvml` does: type `<type>_<profile>`,
    /// files of the GPU and of the instance's capabilities, and `Links` that only place
    /// the instance among its GPU's (MIG has no NVLink).
    pub fn gres_gpus(&self, style: GresStyle) -> Vec<GresGpu> {
        let mut out = Vec::new();
        for g in &self.gpus {
            let (ty, lanes): (String, &dyn Fn(usize) -> u32) = match style {
                GresStyle::Autodetect => (g.autodetect_type(), &|j| self.nvlink.direct_lanes(g.index, j)),
                GresStyle::Static => (g.type_name.clone(), &|j| self.nvlink.lanes(g.index, j)),
                GresStyle::Fairway => (g.autodetect_type(), &|j| self.nvlink.lanes(g.index, j)),
            };
            if !g.mig.is_empty() {
                for (j, m) in g.mig.iter().enumerate() {
                    out.push(GresGpu {
                        type_name: format!("{ty}_{}", m.profile),
                        file: format!(
                            "{},/dev/nvidia-caps/nvidia-cap{},/dev/nvidia-caps/nvidia-cap{}",
                            g.device_file(),
                            m.gi_cap_minor,
                            m.ci_cap_minor
                        ),
                        cores: g.cores.to_string(),
                        links: links_row(g.mig.len(), j, |_| 0),
                        unique_id: Some(m.uuid.clone()),
                    });
                }
                continue;
            }
            out.push(GresGpu {
                type_name: ty,
                file: g.device_file(),
                cores: g.cores.to_string(),
                links: links_row(self.gpus.len(), g.index, lanes),
                unique_id: None,
            });
        }
        out
    }

    /// One gres.conf line per GPU (per MIG instance), in index order, e.g.
    /// `Name=gpu Type=h100 File=/dev/nvidia0 Cores=0-55 Links=-1,18,18,18,18,18,18,18`;
    /// a MIG instance's files go in `MultipleFiles=`.
    pub fn gres_conf(&self, style: GresStyle) -> Vec<String> {
        self.gres_gpus(style)
            .into_iter()
            .map(|g| {
                let files = if g.file.contains(',') { "MultipleFiles" } else { "File" };
                format!("Name=gpu Type={} {files}={} Cores={} Links={}", g.type_name, g.file, g.cores, g.links)
            })
            .collect()
    }

    /// How GPUs `i` and `j` are joined, in `nvidia-smi topo -m` terms: `X` (itself),
    /// `NV<lanes>`, else `NODE` (same NUMA node) or `SYS` (across NUMA nodes). Fairway
    /// does not model PCIe switches, so `PIX`/`PXB`/`PHB` are reported as `NODE`.
    pub fn link_label(&self, i: usize, j: usize) -> String {
        if i == j {
            "X".into()
        } else if self.nvlink.lanes(i, j) > 0 {
            format!("NV{}", self.nvlink.lanes(i, j))
        } else if self.gpus[i].numa == self.gpus[j].numa {
            "NODE".into()
        } else {
            "SYS".into()
        }
    }
}

/// A `Links=` value of `n` entries: -1 at `me`, `lanes(j)` elsewhere.
fn links_row(n: usize, me: usize, lanes: impl Fn(usize) -> u32) -> String {
    let mut links = String::new();
    for j in 0..n {
        let sep = if j == 0 { "" } else { "," };
        if j == me {
            let _ = write!(links, "{sep}-1");
        } else {
            let _ = write!(links, "{sep}{}", lanes(j));
        }
    }
    links
}

#[cfg(test)]
mod tests;
