//! Fairway's topology file: TOML read into spanned raw structs, then checked as a whole
//! so that every error can name the line and key it is about (format in the module docs
//! of [`crate::topology`]).

use std::collections::HashSet;
use std::ops::Range;
use std::path::Path;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::{CoreSet, Cpu, Gpu, MigInstance, NumaNode, NvLinks, Topology, MAX_GPUS, MAX_LANES_PER_GPU};
use crate::toml_file::FileError;

/// A topology file that could not be used.
pub type TopologyError = FileError;

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    cpu: Spanned<RawCpu>,
    numa: Vec<Spanned<RawNuma>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    nvlink: Option<Spanned<RawNvLink>>,
    gpu: Vec<Spanned<RawGpu>>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RawCpu {
    sockets: Spanned<u32>,
    cores_per_socket: Spanned<u32>,
    threads_per_core: Spanned<u32>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RawNuma {
    id: Spanned<u32>,
    socket: Spanned<u32>,
    cores: Spanned<CoreSet>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RawNvLink {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    switch_lanes: Option<Spanned<u32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lanes: Option<Spanned<Vec<Spanned<Vec<i32>>>>>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RawGpu {
    index: Spanned<usize>,
    name: Spanned<String>,
    #[serde(rename = "type")]
    type_name: Spanned<String>,
    memory_mib: Spanned<u64>,
    pci_bus_id: Spanned<String>,
    uuid: Spanned<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    minor: Option<Spanned<u32>>,
    numa: Spanned<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cores: Option<Spanned<CoreSet>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    mig: Vec<RawMig>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RawMig {
    profile: Spanned<String>,
    uuid: Spanned<String>,
    gi_cap_minor: u32,
    ci_cap_minor: u32,
}

/// Whether `p` reads `<slices>g.<GB>gb`, the profile suffix Slurm's `gpu/nvml` writes.
fn is_mig_profile(p: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    p.strip_suffix("gb").and_then(|p| p.split_once("g.")).is_some_and(|(a, b)| digits(a) && digits(b))
}

/// Builds errors that point into one file's text.
struct Ctx<'a> {
    text: &'a str,
    path: &'a Path,
}

impl Ctx<'_> {
    fn err(&self, span: Range<usize>, key: impl Into<String>, message: impl Into<String>) -> TopologyError {
        FileError::at(self.text, self.path, span.start, Some(key.into()), message.into())
    }
}

fn sp<T>(s: &Spanned<T>) -> Range<usize> {
    s.span()
}

/// A value with no place in any text, for writing files out.
fn s<T>(v: T) -> Spanned<T> {
    Spanned::new(0..0, v)
}

/// NVML's bus id form: 8 hex digits of domain, then `BB:DD.F` in hex.
fn valid_bus_id(id: &str) -> bool {
    let b = id.as_bytes();
    let hex = |r: Range<usize>| b[r].iter().all(u8::is_ascii_hexdigit);
    b.len() == 16
        && hex(0..8)
        && b[8] == b':'
        && hex(9..11)
        && b[11] == b':'
        && hex(12..14)
        && b[14] == b'.'
        && hex(15..16)
}

impl Topology {
    /// Reads and checks a topology file.
    pub fn load(path: &Path) -> Result<Self, TopologyError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| FileError::Read { path: path.to_path_buf(), source })?;
        Self::parse(&text, path)
    }

    /// Parses and checks `text`; `path` is only used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Self, TopologyError> {
        let raw: RawFile = crate::toml_file::parse(text, path)?;
        Ctx { text, path }.build(raw)
    }

    /// The topology in the file format; [`Topology::parse`] reads it back equal.
    pub fn to_toml(&self) -> String {
        let raw = RawFile {
            name: self.name.clone(),
            cpu: s(RawCpu {
                sockets: s(self.cpu.sockets),
                cores_per_socket: s(self.cpu.cores_per_socket),
                threads_per_core: s(self.cpu.threads_per_core),
            }),
            numa: self
                .numa
                .iter()
                .map(|n| s(RawNuma { id: s(n.id), socket: s(n.socket), cores: s(n.cores.clone()) }))
                .collect(),
            nvlink: if let Some(lanes) = self.nvlink.switch_lanes() {
                Some(s(RawNvLink { switch_lanes: Some(s(lanes)), lanes: None }))
            } else if (0..self.gpus.len()).any(|i| (0..self.gpus.len()).any(|j| self.nvlink.lanes(i, j) > 0)) {
                let rows = self.nvlink.rows().into_iter().map(s).collect();
                Some(s(RawNvLink { switch_lanes: None, lanes: Some(s(rows)) }))
            } else {
                None
            },
            gpu: self
                .gpus
                .iter()
                .map(|g| {
                    let numa_cores = self.numa_node(g.numa).map(|n| &n.cores);
                    Spanned::new(
                        0..0,
                        RawGpu {
                            index: s(g.index),
                            name: s(g.name.clone()),
                            type_name: s(g.type_name.clone()),
                            memory_mib: s(g.memory_mib),
                            pci_bus_id: s(g.pci_bus_id.clone()),
                            uuid: s(g.uuid.clone()),
                            minor: (g.minor as usize != g.index).then(|| s(g.minor)),
                            numa: s(g.numa),
                            cores: (Some(&g.cores) != numa_cores).then(|| s(g.cores.clone())),
                            mig: g
                                .mig
                                .iter()
                                .map(|m| RawMig {
                                    profile: s(m.profile.clone()),
                                    uuid: s(m.uuid.clone()),
                                    gi_cap_minor: m.gi_cap_minor,
                                    ci_cap_minor: m.ci_cap_minor,
                                })
                                .collect(),
                        },
                    )
                })
                .collect(),
        };
        // Only our own plain types go in, all representable in TOML.
        toml::to_string(&raw).unwrap_or_default()
    }
}

impl Ctx<'_> {
    fn build(&self, raw: RawFile) -> Result<Topology, TopologyError> {
        let rc = raw.cpu.get_ref();
        for (v, key) in [
            (&rc.sockets, "sockets"),
            (&rc.cores_per_socket, "cores_per_socket"),
            (&rc.threads_per_core, "threads_per_core"),
        ] {
            if *v.get_ref() == 0 {
                return Err(self.err(sp(v), format!("cpu.{key}"), "must be at least 1"));
            }
        }
        let cpu = Cpu {
            sockets: *rc.sockets.get_ref(),
            cores_per_socket: *rc.cores_per_socket.get_ref(),
            threads_per_core: *rc.threads_per_core.get_ref(),
        };
        let numa = self.numa(&raw, cpu)?;
        let n = raw.gpu.len();
        if n == 0 {
            return Err(self.err(0..0, "gpu", "no [[gpu]]: a topology needs at least one GPU"));
        }
        if n > MAX_GPUS {
            return Err(self.err(
                sp(&raw.gpu[MAX_GPUS]),
                "gpu",
                format!("{n} GPUs; Fairway handles at most {MAX_GPUS} per node"),
            ));
        }
        let gpus = self.gpus(&raw, cpu, &numa)?;
        let nvlink = self.nvlink(&raw, n)?;
        Ok(Topology { name: raw.name, cpu, numa, gpus, nvlink })
    }

    fn numa(&self, raw: &RawFile, cpu: Cpu) -> Result<Vec<NumaNode>, TopologyError> {
        if raw.numa.is_empty() {
            return Err(self.err(0..0, "numa", "no [[numa]]: declare each NUMA node with its socket and cores"));
        }
        let mut seen = HashSet::new();
        let mut out: Vec<NumaNode> = Vec::new();
        for (i, n) in raw.numa.iter().enumerate() {
            let n = n.get_ref();
            let key = |k: &str| format!("numa[{i}].{k}");
            if !seen.insert(*n.id.get_ref()) {
                return Err(self.err(sp(&n.id), key("id"), format!("NUMA node {} is declared twice", n.id.get_ref())));
            }
            let socket = *n.socket.get_ref();
            if socket >= cpu.sockets {
                return Err(self.err(
                    sp(&n.socket),
                    key("socket"),
                    format!("socket {socket} does not exist: cpu.sockets = {} (sockets count from 0)", cpu.sockets),
                ));
            }
            let cores = n.cores.get_ref();
            let (lo, hi) = (socket * cpu.cores_per_socket, (socket + 1) * cpu.cores_per_socket);
            if let Some(c) = cores.iter().find(|c| !(lo..hi).contains(c)) {
                return Err(self.err(
                    sp(&n.cores),
                    key("cores"),
                    format!("core {c} is not in socket {socket}, whose abstract core ids are {lo}-{}", hi - 1),
                ));
            }
            if let Some(other) = out.iter().find(|o| o.cores.intersects(cores)) {
                return Err(self.err(
                    sp(&n.cores),
                    key("cores"),
                    format!("cores overlap NUMA node {}'s ({})", other.id, other.cores),
                ));
            }
            out.push(NumaNode { id: *n.id.get_ref(), socket, cores: cores.clone() });
        }
        Ok(out)
    }

    fn gpus(&self, raw: &RawFile, cpu: Cpu, numa: &[NumaNode]) -> Result<Vec<Gpu>, TopologyError> {
        let mut out: Vec<Gpu> = Vec::new();
        let (mut uuids, mut minors) = (HashSet::new(), HashSet::new());
        for (i, g) in raw.gpu.iter().enumerate() {
            let g = g.get_ref();
            let key = |k: &str| format!("gpu[{i}].{k}");
            if *g.index.get_ref() != i {
                return Err(self.err(
                    sp(&g.index),
                    key("index"),
                    format!(
                        "index {} out of order: [[gpu]] entries are listed by index from 0, this is entry {i}",
                        g.index.get_ref()
                    ),
                ));
            }
            for (v, k) in [(&g.name, "name"), (&g.type_name, "type")] {
                let t = v.get_ref();
                if t.trim().is_empty() {
                    return Err(self.err(sp(v), key(k), "must not be empty"));
                }
            }
            let ty = g.type_name.get_ref();
            if !ty.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c)) {
                return Err(self.err(
                    sp(&g.type_name),
                    key("type"),
                    format!("`{ty}` is not a gres type: use letters, digits, `_`, `-`, `.`"),
                ));
            }
            if *g.memory_mib.get_ref() == 0 {
                return Err(self.err(sp(&g.memory_mib), key("memory_mib"), "must be above 0"));
            }
            let bus = g.pci_bus_id.get_ref();
            if !valid_bus_id(bus) {
                return Err(self.err(
                    sp(&g.pci_bus_id),
                    key("pci_bus_id"),
                    format!("`{bus}` is not a PCI bus id in NVML's form, e.g. `00000000:1B:00.0`"),
                ));
            }
            if let Some(prev) = out.last() {
                // NVML numbers GPUs in PCI bus id order; Links= positions depend on it.
                if prev.pci_bus_id.to_ascii_uppercase() >= bus.to_ascii_uppercase() {
                    return Err(self.err(
                        sp(&g.pci_bus_id),
                        key("pci_bus_id"),
                        format!(
                            "{bus} does not come after GPU {}'s {}: NVML numbers GPUs in PCI bus id order",
                            i - 1,
                            prev.pci_bus_id
                        ),
                    ));
                }
            }
            let uuid = g.uuid.get_ref();
            if !uuid.starts_with("GPU-") || !uuids.insert(uuid.clone()) {
                return Err(self.err(
                    sp(&g.uuid),
                    key("uuid"),
                    format!("`{uuid}` must start with `GPU-` and be unique"),
                ));
            }
            let minor = g.minor.as_ref().map_or(i as u32, |m| *m.get_ref());
            if !minors.insert(minor) {
                let span = g.minor.as_ref().map_or(sp(&g.index), sp);
                return Err(self.err(span, key("minor"), format!("/dev/nvidia{minor} belongs to another GPU already")));
            }
            let Some(node) = numa.iter().find(|n| n.id == *g.numa.get_ref()) else {
                return Err(self.err(
                    sp(&g.numa),
                    key("numa"),
                    format!("NUMA node {} is not declared in [[numa]]", g.numa.get_ref()),
                ));
            };
            let cores = match &g.cores {
                None => node.cores.clone(),
                Some(c) => {
                    if let Some(bad) = c.get_ref().iter().find(|&x| x >= cpu.cores()) {
                        return Err(self.err(
                            sp(c),
                            key("cores"),
                            format!(
                                "core {bad} does not exist: the node has {} cores (0-{})",
                                cpu.cores(),
                                cpu.cores() - 1
                            ),
                        ));
                    }
                    c.get_ref().clone()
                }
            };
            let mut mig = Vec::with_capacity(g.mig.len());
            for (j, m) in g.mig.iter().enumerate() {
                let mkey = |k: &str| format!("gpu[{i}].mig[{j}].{k}");
                if !is_mig_profile(m.profile.get_ref()) {
                    return Err(self.err(
                        sp(&m.profile),
                        mkey("profile"),
                        format!(
                            "\"{}\" is not a MIG profile as Slurm names them: <slices>g.<GB>gb, e.g. \"1g.10gb\"",
                            m.profile.get_ref()
                        ),
                    ));
                }
                if !m.uuid.get_ref().starts_with("MIG-") {
                    return Err(self.err(sp(&m.uuid), mkey("uuid"), "a MIG instance's UUID starts with \"MIG-\""));
                }
                mig.push(MigInstance {
                    profile: m.profile.get_ref().clone(),
                    uuid: m.uuid.get_ref().clone(),
                    gi_cap_minor: m.gi_cap_minor,
                    ci_cap_minor: m.ci_cap_minor,
                });
            }
            out.push(Gpu {
                index: i,
                name: g.name.get_ref().clone(),
                type_name: ty.clone(),
                memory_mib: *g.memory_mib.get_ref(),
                pci_bus_id: bus.clone(),
                uuid: uuid.clone(),
                minor,
                numa: node.id,
                cores,
                mig,
            });
        }
        Ok(out)
    }

    fn nvlink(&self, raw: &RawFile, n: usize) -> Result<NvLinks, TopologyError> {
        let Some(nv) = &raw.nvlink else { return Ok(NvLinks::none(n)) };
        let nvr = nv.get_ref();
        match (&nvr.switch_lanes, &nvr.lanes) {
            (Some(_), Some(l)) => Err(self.err(
                sp(l),
                "nvlink.lanes",
                "give either switch_lanes (NVSwitch) or lanes (direct links), not both",
            )),
            (None, None) => Err(self.err(
                sp(nv),
                "nvlink",
                "give switch_lanes (NVSwitch) or lanes (direct links), or leave [nvlink] out",
            )),
            (Some(s), None) => {
                let lanes = *s.get_ref();
                if lanes == 0 || lanes > MAX_LANES_PER_GPU {
                    return Err(self.err(
                        sp(s),
                        "nvlink.switch_lanes",
                        format!("{lanes} lanes: a GPU has 1 to {MAX_LANES_PER_GPU} NVLink lanes"),
                    ));
                }
                Ok(NvLinks::switch(n, lanes))
            }
            (None, Some(rows)) => {
                if rows.get_ref().len() != n {
                    return Err(self.err(
                        sp(rows),
                        "nvlink.lanes",
                        format!("{} rows for {n} GPUs: one row per GPU", rows.get_ref().len()),
                    ));
                }
                let m: Vec<&Vec<i32>> = rows.get_ref().iter().map(|r| r.get_ref()).collect();
                for (i, row) in rows.get_ref().iter().enumerate() {
                    let key = format!("nvlink.lanes[{i}]");
                    let r = row.get_ref();
                    if r.len() != n {
                        return Err(self.err(sp(row), key, format!("{} entries for {n} GPUs", r.len())));
                    }
                    let mut total = 0u32;
                    for (j, &v) in r.iter().enumerate() {
                        if i == j && v != -1 {
                            return Err(self.err(
                                sp(row),
                                key,
                                format!("entry {j} is GPU {i} itself and must be -1, as in gres.conf Links="),
                            ));
                        }
                        if i != j && !(0..=MAX_LANES_PER_GPU as i32).contains(&v) {
                            return Err(self.err(
                                sp(row),
                                key,
                                format!("entry {j} is {v}: lanes to another GPU are 0 to {MAX_LANES_PER_GPU}"),
                            ));
                        }
                        if i != j && m[j][i] != v {
                            return Err(self.err(
                                sp(row),
                                key,
                                format!(
                                    "not symmetric: GPU {i} has {v} lanes to GPU {j} but GPU {j} has {} to GPU {i}",
                                    m[j][i]
                                ),
                            ));
                        }
                        total += v.max(0) as u32;
                    }
                    if total > MAX_LANES_PER_GPU {
                        return Err(self.err(
                            sp(row),
                            key,
                            format!("GPU {i} has {total} lanes in all; a GPU has at most {MAX_LANES_PER_GPU}"),
                        ));
                    }
                }
                let lanes = m.iter().map(|r| r.iter().map(|&v| v.max(0) as u32).collect()).collect();
                Ok(NvLinks::direct(lanes))
            }
        }
    }
}
