//! Sockets, cores and NUMA nodes from Linux sysfs, in Slurm's abstract core ids.
//!
//! Read: `devices/system/cpu/online`, `devices/system/cpu/cpuN/topology/{physical_package_id,core_id}`,
//! `devices/system/node/nodeN/cpulist`, and per GPU `bus/pci/devices/<bus id>/{numa_node,local_cpulist}`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use fairway_core::topology::{CoreSet, NumaNode};

/// sysfs could not be read, or described something Fairway cannot use.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SysfsError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file held something unexpected.
    #[error("{path}: unexpected contents `{text}`")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What it held.
        text: String,
    },
    /// Sockets with different core counts, which Slurm's abstract ids do not describe.
    #[error("sockets have different numbers of cores ({0:?})")]
    Uneven(Vec<usize>),
}

fn read(path: PathBuf) -> Result<String, SysfsError> {
    std::fs::read_to_string(&path).map(|s| s.trim().to_string()).map_err(|source| SysfsError::Read { path, source })
}

fn parse<T: std::str::FromStr>(path: PathBuf) -> Result<T, SysfsError> {
    let text = read(path.clone())?;
    text.parse().map_err(|_| SysfsError::Parse { path, text })
}

/// The node's processors, and how OS CPU numbers map to abstract cores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuLayout {
    /// Sockets.
    pub sockets: u32,
    /// Cores per socket.
    pub cores_per_socket: u32,
    /// Threads per core.
    pub threads_per_core: u32,
    /// OS CPU number → abstract core id.
    pub core_of_cpu: BTreeMap<u32, u32>,
    /// OS CPU number → socket (0-based, in package id order).
    pub socket_of_cpu: BTreeMap<u32, u32>,
    /// NUMA nodes with their abstract cores.
    pub numa: Vec<NumaNode>,
}

impl CpuLayout {
    /// Reads the layout under `sys` (normally `/sys`).
    pub fn read(sys: &Path) -> Result<Self, SysfsError> {
        let cpu_dir = sys.join("devices/system/cpu");
        let online: CoreSet = parse(cpu_dir.join("online"))?;
        // (package, core_id) per CPU; abstract ids number cores socket by socket.
        let mut place = BTreeMap::new();
        for cpu in online.iter() {
            let topo = cpu_dir.join(format!("cpu{cpu}/topology"));
            let package: u32 = parse(topo.join("physical_package_id"))?;
            let core: u32 = parse(topo.join("core_id"))?;
            place.insert(cpu, (package, core));
        }
        let cores: BTreeSet<(u32, u32)> = place.values().copied().collect();
        let packages: Vec<u32> = cores.iter().map(|&(p, _)| p).collect::<BTreeSet<_>>().into_iter().collect();
        let per_socket: Vec<usize> = packages.iter().map(|p| cores.iter().filter(|c| c.0 == *p).count()).collect();
        if per_socket.windows(2).any(|w| w[0] != w[1]) {
            return Err(SysfsError::Uneven(per_socket));
        }
        let index: BTreeMap<(u32, u32), u32> = cores.iter().enumerate().map(|(i, &c)| (c, i as u32)).collect();
        let core_of_cpu: BTreeMap<u32, u32> = place.iter().map(|(&cpu, c)| (cpu, index[c])).collect();
        let socket_of_cpu = place
            .iter()
            .map(|(&cpu, (p, _))| (cpu, packages.iter().position(|x| x == p).unwrap_or(0) as u32))
            .collect::<BTreeMap<_, _>>();
        let mut layout = Self {
            sockets: packages.len().max(1) as u32,
            cores_per_socket: per_socket.first().copied().unwrap_or(1).max(1) as u32,
            threads_per_core: (place.len() / cores.len().max(1)).max(1) as u32,
            core_of_cpu,
            socket_of_cpu,
            numa: Vec::new(),
        };
        let node_dir = sys.join("devices/system/node");
        let mut ids = Vec::new();
        if let Ok(entries) = std::fs::read_dir(&node_dir) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some(id) = name.strip_prefix("node").and_then(|s| s.parse::<u32>().ok()) {
                    ids.push(id);
                }
            }
        }
        ids.sort_unstable();
        for id in ids {
            let cpus: CoreSet = match read(node_dir.join(format!("node{id}/cpulist")))? {
                t if t.is_empty() => continue, // memory-only node (e.g. CXL, HBM)
                t => t
                    .parse()
                    .map_err(|_| SysfsError::Parse { path: node_dir.join(format!("node{id}/cpulist")), text: t })?,
            };
            let socket = cpus.iter().next().and_then(|c| layout.socket_of_cpu.get(&c)).copied().unwrap_or(0);
            layout.numa.push(NumaNode { id, socket, cores: layout.cores_of(&cpus) });
        }
        if layout.numa.is_empty() {
            // No NUMA in the kernel: one node per socket's worth is wrong, one node with
            // everything is what the hardware looks like to software.
            layout.numa.push(NumaNode { id: 0, socket: 0, cores: layout.core_of_cpu.values().copied().collect() });
        }
        Ok(layout)
    }

    /// The abstract cores of OS CPUs `cpus` (one id per core, whatever the threads).
    pub fn cores_of(&self, cpus: &CoreSet) -> CoreSet {
        cpus.iter().filter_map(|c| self.core_of_cpu.get(&c).copied()).collect()
    }

    /// The NUMA node of the PCI device `bus_id` (NVML's form); the first node when the
    /// kernel says -1 (no affinity, e.g. single-node machines and many VMs).
    pub fn numa_of_pci(&self, sys: &Path, bus_id: &str) -> Result<u32, SysfsError> {
        let n: i64 = parse(pci_dir(sys, bus_id).join("numa_node"))?;
        Ok(u32::try_from(n).unwrap_or_else(|_| self.numa.first().map_or(0, |x| x.id)))
    }

    /// The abstract cores local to PCI device `bus_id`.
    pub fn local_cores_of_pci(&self, sys: &Path, bus_id: &str) -> Result<CoreSet, SysfsError> {
        let path = pci_dir(sys, bus_id).join("local_cpulist");
        let text = read(path.clone())?;
        let cpus: CoreSet = text.parse().map_err(|_| SysfsError::Parse { path, text })?;
        Ok(self.cores_of(&cpus))
    }
}

/// sysfs names PCI devices `dddd:bb:dd.f` in lowercase; NVML writes an 8-digit domain
/// in uppercase (`00000000:1B:00.0`).
pub fn sysfs_bus_id(nvml_bus_id: &str) -> String {
    let lower = nvml_bus_id.to_ascii_lowercase();
    match lower.split_once(':') {
        Some((domain, rest)) if domain.len() > 4 => format!("{}:{rest}", &domain[domain.len() - 4..]),
        _ => lower,
    }
}

fn pci_dir(sys: &Path, bus_id: &str) -> PathBuf {
    sys.join("bus/pci/devices").join(sysfs_bus_id(bus_id))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn put(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, format!("{text}\n")).unwrap();
    }

    /// 2 sockets × 4 cores × 2 threads, Linux numbering (siblings offset by 8), one
    /// NUMA node per socket, a GPU on each node.
    pub(crate) fn fake_two_socket_node(root: &Path) {
        put(root, "devices/system/cpu/online", "0-15");
        for cpu in 0..16u32 {
            let (package, core) = ((cpu % 8) / 4, cpu % 4);
            put(root, &format!("devices/system/cpu/cpu{cpu}/topology/physical_package_id"), &package.to_string());
            put(root, &format!("devices/system/cpu/cpu{cpu}/topology/core_id"), &core.to_string());
        }
        put(root, "devices/system/node/node0/cpulist", "0-3,8-11");
        put(root, "devices/system/node/node1/cpulist", "4-7,12-15");
        put(root, "bus/pci/devices/0000:1b:00.0/numa_node", "0");
        put(root, "bus/pci/devices/0000:1b:00.0/local_cpulist", "0-3,8-11");
        put(root, "bus/pci/devices/0000:9d:00.0/numa_node", "1");
        put(root, "bus/pci/devices/0000:9d:00.0/local_cpulist", "4-7,12-15");
        put(root, "bus/pci/devices/0000:c3:00.0/numa_node", "-1");
        put(root, "bus/pci/devices/0000:c3:00.0/local_cpulist", "0-15");
    }

    #[test]
    fn layout_in_abstract_cores() {
        let dir = tempfile::tempdir().unwrap();
        fake_two_socket_node(dir.path());
        let l = CpuLayout::read(dir.path()).unwrap();
        assert_eq!((l.sockets, l.cores_per_socket, l.threads_per_core), (2, 4, 2));
        assert_eq!(l.core_of_cpu[&12], 4);
        assert_eq!(l.numa.len(), 2);
        assert_eq!((l.numa[1].socket, l.numa[1].cores.to_string()), (1, "4-7".to_string()));
        assert_eq!(l.numa_of_pci(dir.path(), "00000000:9D:00.0").unwrap(), 1);
        assert_eq!(l.local_cores_of_pci(dir.path(), "00000000:1B:00.0").unwrap().to_string(), "0-3");
        assert_eq!(l.numa_of_pci(dir.path(), "00000000:C3:00.0").unwrap(), 0);
        assert!(matches!(l.numa_of_pci(dir.path(), "00000000:01:00.0"), Err(SysfsError::Read { .. })));
    }

    #[test]
    fn bus_ids_in_sysfs_form() {
        assert_eq!(sysfs_bus_id("00000000:1B:00.0"), "0000:1b:00.0");
        assert_eq!(sysfs_bus_id("0000:1b:00.0"), "0000:1b:00.0");
    }
}
