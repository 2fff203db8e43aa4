//! Sockets, cores, NUMA nodes and PCI locality from hwloc 2, numbered as slurmd numbers
//! them: slurmd builds its view of a node with hwloc and turns OS CPU numbers into
//! abstract core ids with `xcpuinfo_mac_to_abs`, which is the logical index (`L#`) of
//! the core a CPU belongs to, and sockets by the package's logical index. Reading hwloc
//! here gives the gpu plugin those same numbers by construction, where sysfs
//! ([`crate::sysfs`]) can only reproduce hwloc's ordering.

use std::collections::BTreeMap;

use fairway_core::topology::{CoreSet, NumaNode};
use hwlocality::object::attributes::ObjectAttributes;
use hwlocality::object::types::ObjectType;
use hwlocality::object::TopologyObject;
use hwlocality::topology::builder::TypeFilter;
use hwlocality::Topology;

use crate::sysfs::CpuLayout;

/// hwloc could not describe this node.
#[derive(Debug, thiserror::Error)]
#[error("hwloc: {0}")]
pub struct HwlocError(String);

fn err(e: impl std::fmt::Display) -> HwlocError {
    HwlocError(e.to_string())
}

/// What hwloc says about the CPUs and PCI devices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HwlocLayout {
    /// Sockets, cores and NUMA nodes, in Slurm's abstract core ids.
    pub cpus: CpuLayout,
    /// Per PCI device (sysfs form, `0000:1b:00.0`): its NUMA node and its local abstract cores.
    pub pci: BTreeMap<String, (u32, CoreSet)>,
    /// The hwloc library's API version, `X.Y.Z`.
    pub version: String,
}

impl HwlocLayout {
    /// Reads this node through hwloc, every PCI device included.
    pub fn read() -> Result<Self, HwlocError> {
        let builder = Topology::builder().with_io_type_filter(TypeFilter::KeepAll).map_err(err)?;
        Self::from_topology(&builder.build().map_err(err)?)
    }

    /// Reads a synthetic topology (`"pack:2 core:4 pu:2"`).
    #[cfg(test)]
    fn from_synthetic(description: &str) -> Result<Self, HwlocError> {
        Self::from_topology(&Topology::builder().from_synthetic(description).map_err(err)?.build().map_err(err)?)
    }

    fn from_topology(t: &Topology) -> Result<Self, HwlocError> {
        let os_cpus = |o: &TopologyObject| -> Vec<u32> {
            o.cpuset().map(|s| s.iter_set().map(|i| usize::from(i) as u32).collect()).unwrap_or_default()
        };
        let packages: Vec<&TopologyObject> = t.objects_with_type(ObjectType::Package).collect();
        let cores: Vec<&TopologyObject> = t.objects_with_type(ObjectType::Core).collect();
        if cores.is_empty() {
            return Err(HwlocError("no cores in the topology".into()));
        }
        let package_of = |o: &TopologyObject| -> u32 {
            o.ancestors().find(|a| a.object_type() == ObjectType::Package).map_or(0, |p| p.logical_index() as u32)
        };
        let mut core_of_cpu = BTreeMap::new();
        let mut socket_of_cpu = BTreeMap::new();
        let mut per_socket = vec![0usize; packages.len().max(1)];
        for core in &cores {
            let socket = package_of(core);
            if let Some(n) = per_socket.get_mut(socket as usize) {
                *n += 1;
            }
            for cpu in os_cpus(core) {
                core_of_cpu.insert(cpu, core.logical_index() as u32);
                socket_of_cpu.insert(cpu, socket);
            }
        }
        if per_socket.windows(2).any(|w| w[0] != w[1]) {
            return Err(HwlocError(format!("sockets have different numbers of cores ({per_socket:?})")));
        }
        let mut cpus = CpuLayout {
            sockets: per_socket.len() as u32,
            cores_per_socket: per_socket[0].max(1) as u32,
            threads_per_core: (core_of_cpu.len() / cores.len()).max(1) as u32,
            core_of_cpu,
            socket_of_cpu,
            numa: Vec::new(),
        };
        for node in t.objects_with_type(ObjectType::NUMANode) {
            let os = os_cpus(node);
            if os.is_empty() {
                continue; // memory-only node (CXL, HBM), as in sysfs
            }
            let id = node.os_index().unwrap_or(0) as u32;
            let socket = os.first().and_then(|c| cpus.socket_of_cpu.get(c)).copied().unwrap_or(0);
            cpus.numa.push(NumaNode { id, socket, cores: cpus.cores_of(&os.into_iter().collect()) });
        }
        cpus.numa.sort_by_key(|n| n.id);
        if cpus.numa.is_empty() {
            cpus.numa.push(NumaNode { id: 0, socket: 0, cores: cpus.core_of_cpu.values().copied().collect() });
        }
        let first_numa = cpus.numa[0].id;
        let mut pci = BTreeMap::new();
        for dev in t.pci_devices() {
            let Some(ObjectAttributes::PCIDevice(a)) = dev.attributes() else { continue };
            let bus = format!("{:04x}:{:02x}:{:02x}.{:x}", a.domain(), a.bus_id(), a.bus_device(), a.function());
            let Some(near) = dev.first_non_io_ancestor() else { continue };
            let cores = cpus.cores_of(&os_cpus(near).into_iter().collect());
            // The device's NUMA node: the one whose cores are exactly its local cores (the
            // kernel's numa_node), else, for a device local to the whole machine (the
            // kernel's -1), the first node, as the sysfs reader decides.
            let numa = cpus.numa.iter().find(|n| n.cores == cores).map_or(first_numa, |n| n.id);
            pci.insert(bus, (numa, cores));
        }
        let v = hwlocality::hwloc_api_version();
        let version = format!("{}.{}.{}", v >> 16, (v >> 8) & 0xff, v & 0xff);
        Ok(Self { cpus, pci, version })
    }

    /// The NUMA node and local cores of PCI device `bus_id` (NVML's or sysfs's form).
    pub fn pci_locality(&self, bus_id: &str) -> Option<&(u32, CoreSet)> {
        self.pci.get(&crate::sysfs::sysfs_bus_id(bus_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slurm's numbering on a 2-socket node whose OS numbers hyperthreads as Linux does
    /// (siblings 8 apart): the same abstract ids the sysfs reader gives the same machine.
    #[test]
    fn abstract_ids_are_hwloc_logical_core_indexes() {
        let pus: Vec<String> = (0..8).flat_map(|c| [c, c + 8]).map(|i| i.to_string()).collect();
        let h = HwlocLayout::from_synthetic(&format!("pack:2 [numa] core:4 pu:2(indexes={})", pus.join(","))).unwrap();
        let dir = tempfile::tempdir().unwrap();
        crate::sysfs::tests::fake_two_socket_node(dir.path());
        let s = CpuLayout::read(dir.path()).unwrap();
        assert_eq!((h.cpus.sockets, h.cpus.cores_per_socket, h.cpus.threads_per_core), (2, 4, 2));
        assert_eq!(h.cpus.core_of_cpu, s.core_of_cpu);
        assert_eq!(h.cpus.socket_of_cpu, s.socket_of_cpu);
        assert_eq!(h.cpus.numa, s.numa);
    }

    /// The must-show of hwloc support: on the machine running the tests, hwloc and sysfs
    /// give the same sockets, cores, threads, abstract core of every CPU, NUMA nodes and,
    /// for every PCI device, the same NUMA node and local cores.
    #[test]
    fn hwloc_and_sysfs_agree_on_this_machine() {
        let sys = std::path::Path::new("/sys");
        let h = HwlocLayout::read().unwrap();
        let s = CpuLayout::read(sys).unwrap();
        assert_eq!(h.cpus, s, "hwloc {} and sysfs disagree", h.version);
        for (bus, (numa, cores)) in &h.pci {
            let from_sysfs = (s.numa_of_pci(sys, bus).unwrap(), s.local_cores_of_pci(sys, bus).unwrap());
            assert_eq!((*numa, cores.clone()), from_sysfs, "PCI device {bus}");
        }
        eprintln!(
            "hwloc {}: {} socket(s) × {} cores × {} threads, {} NUMA node(s), {} PCI devices: same as sysfs",
            h.version,
            s.sockets,
            s.cores_per_socket,
            s.threads_per_core,
            s.numa.len(),
            h.pci.len()
        );
    }
}
