//! `gpu/nvml` for slurmd, from Fairway (installed as `gpu_nvml.so`).
//!
//! Slurm loads a gpu plugin only by fixed names: `AutoDetect=nvml` in gres.conf selects
//! `gpu/nvml` once `libnvidia-ml.so` opens. Debian builds no such plugin, so with
//! Debian's Slurm `AutoDetect=nvml` otherwise does nothing. This one reports each GPU's
//! type (NVML's name, as Slurm's plugin does), device file, local cores and NVLink
//! lanes. Unlike Slurm's plugin it counts lanes through NVSwitch, so cons_tres's "best
//! linked" choice sees DGX/HGX links too.
//!
//! Where NVML cannot answer (no driver or no GPU behind the library, an emulated test
//! cluster) it reads the node's topology file from `fairway.toml`'s `[gpu.topology]`,
//! and with neither it reports nothing and gres.conf alone describes the GPUs.

use std::path::Path;
use std::sync::OnceLock;

use fairway_core::topology::{GresGpu, GresStyle, Topology};
use fairway_core::Config;

/// The plugin: what `fairway.toml` says, and the GPUs once read.
struct NodeGpus {
    config: Config,
    found: OnceLock<Vec<GresGpu>>,
}

impl NodeGpus {
    fn read(&self) -> Vec<GresGpu> {
        let node = fairway_ffi::gpu::node_name();
        let topo = match fairway_topo_detect::detect() {
            Ok(d) => {
                tracing::info!(
                    "{node}: {} GPU(s) from NVML, CPU locality from {}",
                    d.topology.gpus.len(),
                    d.cpu_source
                );
                Some(d.topology)
            }
            Err(e) => {
                let toml = fairway_ffi::conf::fairway_toml_path();
                let dir = toml.parent().unwrap_or(Path::new("/"));
                match self.config.gpu.topology_file(&node, dir) {
                    Some(file) => match Topology::load(&file) {
                        Ok(t) => {
                            tracing::info!(
                                "{node}: NVML cannot read the GPUs ({e}); {} GPU(s) from {}",
                                t.gpus.len(),
                                file.display()
                            );
                            Some(t)
                        }
                        Err(e) => {
                            tracing::error!("{node}: {e}; reporting no GPUs, gres.conf alone describes them");
                            None
                        }
                    },
                    None => {
                        tracing::warn!(
                            "{node}: NVML cannot read the GPUs ({e}) and {} gives this node no [gpu.topology] file; \
                             reporting no GPUs, gres.conf alone describes them",
                            toml.display()
                        );
                        None
                    }
                }
            }
        };
        let gpus = topo.map(|t| t.gres_gpus(GresStyle::Fairway)).unwrap_or_default();
        for g in &gpus {
            tracing::debug!("{node}: Type={} File={} Cores={} Links={}", g.type_name, g.file, g.cores, g.links);
        }
        gpus
    }
}

impl fairway_ffi::plugin::Gpu for NodeGpus {
    fn init(config: Config) -> Result<Self, String> {
        Ok(Self { config, found: OnceLock::new() })
    }

    fn system_gpus(&self) -> Vec<GresGpu> {
        self.found.get_or_init(|| self.read()).clone()
    }
}

fairway_ffi::gpu_plugin!(name: "Fairway GPU topology plugin", type: "gpu/nvml", impl: NodeGpus);
