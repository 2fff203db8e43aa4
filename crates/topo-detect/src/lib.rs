//! The node's GPU topology read at run time, as a [`fairway_core::topology::Topology`]: the
//! same type a topology file gives, so the CLI, the simulator and slurmd's gpu plugin
//! (`plugins/gpu/nvml`) all work from one description.
//!
//! - GPUs and NVLink come from NVML through `nvml-wrapper`, which `dlopen`s
//!   `libnvidia-ml.so.1` at run time: nothing from CUDA is needed to build, and a node
//!   without the driver gets [`DetectError::Nvml`].
//! - Sockets, cores, NUMA nodes and each GPU's NUMA node and local CPUs come from hwloc 2
//!   (feature `hwloc`, the `hwloc` module), in the numbers slurmd itself takes from hwloc:
//!   `xcpuinfo_mac_to_abs` makes an OS CPU number the logical index of its core. Without
//!   the feature, or if hwloc fails, from sysfs ([`sysfs`]), which reproduces that order:
//!   cores numbered socket by socket, in the order of their `core_id`. [`Detected`] says
//!   which was used.
//!
//! A GPU in MIG mode is reported as its instances ([`mig`]), as Slurm's `gpu/nvml` does.
//!
//! NVLink lanes are counted as Slurm's `gpu/nvml` counts them (active lanes, grouped by
//! the PCI bus id at their far end). Lanes whose far end is not a GPU of this node are
//! taken to be NVSwitch lanes: if every GPU has some, the node is recorded as NVSwitch
//! all-to-all with the smallest such count per GPU, which is what `nvidia-smi topo -m`
//! shows (`NV18` on DGX H100). Other non-GPU ends (IBM NPU bridges on POWER9) would be
//! misread as a switch; Fairway does not support those.
// The NVML calls nvml-wrapper lacks are wrapped in fairway-nvml, so no unsafe is needed here
// and nothing here links Slurm.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

#[cfg(feature = "hwloc")]
pub mod hwloc;
pub mod mig;
pub mod sysfs;

use std::path::Path;

use fairway_core::topology::{CoreSet, Cpu, Gpu, NvLinks, Topology, MAX_GPUS, MAX_LANES_PER_GPU};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;

/// Why the topology could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DetectError {
    /// NVML could not be loaded or initialised (no NVIDIA driver, no GPU, no permission).
    #[error("NVML is not available (no NVIDIA driver or GPU here?)")]
    Nvml(#[source] NvmlError),
    /// An NVML query failed for one GPU.
    #[error("NVML: GPU {index}: {what}: {source}")]
    Query {
        /// NVML index.
        index: u32,
        /// What was asked.
        what: &'static str,
        /// NVML's error.
        #[source]
        source: NvmlError,
    },
    /// NVML found no GPU, or more than Fairway handles.
    #[error("NVML reports {0} GPUs; Fairway handles 1 to {MAX_GPUS}")]
    GpuCount(u32),
    /// A GPU in MIG mode has no instances, so none of it can be given to a job.
    #[error(
        "GPU {0} is in MIG mode but has no MIG instances: create instances (nvidia-smi mig -cgi ... -C) or \
         disable MIG mode"
    )]
    MigWithoutInstances(u32),
    /// The driver's list of MIG capability minors could not be read.
    #[error("cannot read {path} (MIG capability devices): {source}")]
    MigMinors {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The driver's list has no capability minor for an instance NVML reports.
    #[error("{path} has no `{key}`")]
    MigMinorMissing {
        /// The file.
        path: std::path::PathBuf,
        /// The entry looked for.
        key: String,
    },
    /// sysfs could not be read or made no sense.
    #[error(transparent)]
    Sysfs(#[from] sysfs::SysfsError),
}

/// Where the CPU side of a detected topology (sockets, cores, NUMA, GPUs' locality) came from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CpuSource {
    /// hwloc, at this API version.
    Hwloc(String),
    /// sysfs, and why not hwloc.
    Sysfs(String),
}

impl std::fmt::Display for CpuSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Hwloc(v) => write!(f, "hwloc (API {v})"),
            Self::Sysfs(why) => write!(f, "sysfs ({why})"),
        }
    }
}

/// A node's topology as detected, and where its CPU side came from.
#[derive(Debug, Clone)]
pub struct Detected {
    /// The topology.
    pub topology: Topology,
    /// Where sockets, cores, NUMA nodes and GPU locality came from.
    pub cpu_source: CpuSource,
}

/// The CPU side of a node, from hwloc or sysfs.
enum Locality {
    #[cfg(feature = "hwloc")]
    Hwloc(hwloc::HwlocLayout),
    Sysfs(sysfs::CpuLayout),
}

impl Locality {
    /// hwloc when built with it and `sys` is the real `/sys` (hwloc reads the live
    /// system); sysfs otherwise, or when hwloc fails.
    fn read(sys: &Path) -> Result<(Self, CpuSource), DetectError> {
        #[cfg(feature = "hwloc")]
        let why = if sys == Path::new("/sys") {
            match hwloc::HwlocLayout::read() {
                Ok(h) => {
                    let v = h.version.clone();
                    return Ok((Self::Hwloc(h), CpuSource::Hwloc(v)));
                }
                Err(e) => e.to_string(),
            }
        } else {
            format!("reading a copy of sysfs at {}", sys.display())
        };
        #[cfg(not(feature = "hwloc"))]
        let why = "built without hwloc".to_string();
        Ok((Self::Sysfs(sysfs::CpuLayout::read(sys)?), CpuSource::Sysfs(why)))
    }

    fn layout(&self) -> &sysfs::CpuLayout {
        match self {
            #[cfg(feature = "hwloc")]
            Self::Hwloc(h) => &h.cpus,
            Self::Sysfs(l) => l,
        }
    }

    /// A PCI device's NUMA node and local abstract cores. A device hwloc left out of its
    /// I/O tree is read from sysfs, in hwloc's core numbers.
    fn of_pci(&self, sys: &Path, bus_id: &str) -> Result<(u32, CoreSet), DetectError> {
        #[cfg(feature = "hwloc")]
        if let Self::Hwloc(h) = self {
            if let Some(found) = h.pci_locality(bus_id) {
                return Ok(found.clone());
            }
        }
        let l = self.layout();
        Ok((l.numa_of_pci(sys, bus_id)?, l.local_cores_of_pci(sys, bus_id)?))
    }
}

/// Reads the topology of this node from NVML, and hwloc or `/sys`.
pub fn detect() -> Result<Detected, DetectError> {
    detect_with(Path::new("/sys"))
}

/// As [`detect`], reading sysfs under `sys` (tests point it at a copy; hwloc reads only
/// the live system, so a copy is read from sysfs alone).
pub fn detect_with(sys: &Path) -> Result<Detected, DetectError> {
    let nvml = Nvml::init().map_err(DetectError::Nvml)?;
    let (locality, cpu_source) = Locality::read(sys)?;
    let layout = locality.layout();
    let count = nvml.device_count().map_err(DetectError::Nvml)?;
    if count == 0 || count as usize > MAX_GPUS {
        return Err(DetectError::GpuCount(count));
    }
    let q = |index: u32, what: &'static str| move |source| DetectError::Query { index, what, source };

    // NVML's indexes follow PCI bus id order, as Slurm's Links= positions do.
    let mut bus_ids = Vec::new();
    for i in 0..count {
        let d = nvml.device_by_index(i).map_err(q(i, "handle"))?;
        bus_ids.push(d.pci_info().map_err(q(i, "PCI info"))?.bus_id);
    }
    let n = count as usize;
    let mut direct = vec![vec![0u32; n]; n];
    let mut switch = vec![0u32; n];
    let mut gpus = Vec::new();
    for i in 0..count {
        let d = nvml.device_by_index(i).map_err(q(i, "handle"))?;
        let name = d.name().map_err(q(i, "name"))?;
        let bus = bus_ids[i as usize].clone();
        for lane in 0..MAX_LANES_PER_GPU {
            let link = d.link_wrapper_for(lane);
            match link.is_active() {
                Ok(true) => {}
                Ok(false) | Err(NvmlError::InvalidArg) => continue,
                // No NVLink on this GPU at all (PCIe cards), as gpu/nvml stops too.
                Err(NvmlError::NotSupported) => break,
                Err(e) => return Err(q(i, "NVLink state")(e)),
            }
            let remote = link.remote_pci_info().map_err(q(i, "NVLink remote PCI info"))?.bus_id;
            match bus_ids.iter().position(|b| b.eq_ignore_ascii_case(&remote)) {
                Some(j) if j != i as usize => direct[i as usize][j] += 1,
                Some(_) => {}
                None => switch[i as usize] += 1,
            }
        }
        let (numa, cores) = locality.of_pci(sys, &bus)?;
        let minor = d.minor_number().map_err(q(i, "minor number"))?;
        let mig = if mig::is_mig(&d).map_err(q(i, "MIG mode"))? {
            mig::instances(&d, i, minor, Path::new(mig::MIG_MINORS))?
        } else {
            Vec::new()
        };
        gpus.push(Gpu {
            index: i as usize,
            type_name: short_type(&name),
            name,
            memory_mib: d.memory_info().map_err(q(i, "memory"))?.total / (1024 * 1024),
            pci_bus_id: bus.clone(),
            uuid: d.uuid().map_err(q(i, "UUID"))?,
            minor,
            numa,
            cores,
            mig,
        });
    }
    let nvlink = if switch.iter().all(|&s| s > 0) {
        NvLinks::switch(n, switch.iter().copied().min().unwrap_or(0))
    } else {
        NvLinks::direct(direct)
    };
    let cpu = Cpu {
        sockets: layout.sockets,
        cores_per_socket: layout.cores_per_socket,
        threads_per_core: layout.threads_per_core,
    };
    Ok(Detected { topology: Topology { name: None, cpu, numa: layout.numa.clone(), gpus, nvlink }, cpu_source })
}

/// A short gres type from NVML's name: the model after `NVIDIA `, up to the first `-`,
/// lowercased (`NVIDIA H100 80GB HBM3` → `h100`, `NVIDIA A100-SXM4-80GB` → `a100`).
pub fn short_type(nvml_name: &str) -> String {
    let rest = nvml_name.strip_prefix("NVIDIA ").unwrap_or(nvml_name);
    let word = rest.split([' ', '-']).next().unwrap_or(rest);
    word.to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_types() {
        assert_eq!(short_type("NVIDIA H100 80GB HBM3"), "h100");
        assert_eq!(short_type("NVIDIA A100-SXM4-80GB"), "a100");
        assert_eq!(short_type("NVIDIA L40S"), "l40s");
        assert_eq!(short_type("Tesla V100-SXM2-16GB"), "tesla");
    }

    #[test]
    fn no_nvml_is_a_clear_error() {
        // This machine has no NVIDIA driver; on one that has, the call must succeed.
        match Nvml::init() {
            Err(_) => {
                let dir = tempfile::tempdir().unwrap();
                sysfs::tests::fake_two_socket_node(dir.path());
                let e = detect_with(dir.path()).unwrap_err();
                assert!(matches!(e, DetectError::Nvml(_)), "{e}");
                assert!(e.to_string().starts_with("NVML is not available"), "{e}");
            }
            Ok(_) => {
                let d = detect().unwrap();
                assert!(!d.topology.gpus.is_empty());
                #[cfg(feature = "hwloc")]
                assert!(matches!(d.cpu_source, CpuSource::Hwloc(_)), "{}", d.cpu_source);
            }
        }
    }
}
