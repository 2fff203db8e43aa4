//! `fairway topo`: a node's GPU topology, from a topology file or from NVML.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use fairway_core::topology::{GresStyle, Topology};

/// Show a node's GPU topology (GPU↔GPU links, GPU↔NUMA/cores) or its gres.conf lines.
#[derive(Args)]
pub struct TopoArgs {
    /// A Fairway topology file (see config/topology/) [default: this node, read through NVML].
    #[arg(long)]
    file: Option<PathBuf>,
    /// Print gres.conf lines instead of the matrix.
    #[arg(long, conflicts_with = "toml")]
    gres_conf: bool,
    /// Print the topology as a Fairway topology file, e.g. to describe a real node to an
    /// emulated cluster or to slurmd where NVML cannot answer.
    #[arg(long)]
    toml: bool,
    /// Which gres.conf: `autodetect` = exactly what AutoDetect=nvml detects (safe beside
    /// it); `static` = short Type and every NVLink lane, NVSwitch included, for AutoDetect=off;
    /// `fairway` = what Fairway's gpu/nvml plugin reports (NVML's Type, every lane).
    #[arg(long, value_enum, default_value_t = Style::Autodetect, requires = "gres_conf")]
    style: Style,
}

#[derive(Clone, Copy, ValueEnum)]
enum Style {
    Autodetect,
    Static,
    Fairway,
}

pub fn topo(args: TopoArgs) -> anyhow::Result<()> {
    let topo = match &args.file {
        Some(path) => Topology::load(path).context(crate::Invalid("topology file is invalid"))?,
        None => {
            fairway_topo_detect::detect()
                .context(
                    "cannot read this node's GPUs; describe the node in a topology file and pass it with --file \
                     (examples in config/topology/)",
                )?
                .topology
        }
    };
    if args.toml {
        print!("{}", topo.to_toml());
    } else if args.gres_conf {
        let style = match args.style {
            Style::Autodetect => GresStyle::Autodetect,
            Style::Static => GresStyle::Static,
            Style::Fairway => GresStyle::Fairway,
        };
        for line in topo.gres_conf(style) {
            println!("{line}");
        }
    } else {
        print!("{}", render(&topo));
    }
    Ok(())
}

/// The link matrix in `nvidia-smi topo -m`'s layout, then one line per GPU.
pub fn render(t: &Topology) -> String {
    let n = t.gpus.len();
    let mut out = String::new();
    if let Some(name) = &t.name {
        let _ = writeln!(out, "{name}");
    }
    let cores_w = t.gpus.iter().map(|g| g.cores.to_string().len()).max().unwrap_or(0).max("Cores".len());
    let _ = write!(out, "{:<6}", "");
    for j in 0..n {
        let _ = write!(out, "{:<6}", format!("GPU{j}"));
    }
    let _ = writeln!(out, "{:<cores_w$}  NUMA  Socket", "Cores");
    for i in 0..n {
        let _ = write!(out, "{:<6}", format!("GPU{i}"));
        for j in 0..n {
            let _ = write!(out, "{:<6}", t.link_label(i, j));
        }
        let _ =
            writeln!(out, "{:<cores_w$}  {:<4}  {}", t.gpus[i].cores.to_string(), t.gpus[i].numa, t.socket_of_gpu(i));
    }
    let _ = writeln!(out);
    for g in &t.gpus {
        let _ = writeln!(
            out,
            "GPU{}: {} ({}), {} MiB, {}, {}, {}",
            g.index,
            g.name,
            g.type_name,
            g.memory_mib,
            g.pci_bus_id,
            g.device_file(),
            g.uuid
        );
        for m in &g.mig {
            let _ = writeln!(
                out,
                "  MIG {}: {}, /dev/nvidia-caps/nvidia-cap{} (GPU instance), nvidia-cap{} (compute instance)",
                m.profile, m.uuid, m.gi_cap_minor, m.ci_cap_minor
            );
        }
    }
    let via = if t.nvlink.via_switch() { " (through NVSwitch on this node)" } else { "" };
    let _ = writeln!(out);
    let _ = writeln!(out, "Legend:");
    let _ = writeln!(out, "  X    = Self");
    let _ = writeln!(out, "  NV#  = Connection traversing a bonded set of # NVLinks{via}");
    let _ = writeln!(out, "  NODE = PCIe within a NUMA node (PCIe switches are not modelled)");
    let _ = writeln!(out, "  SYS  = PCIe and the interconnect between NUMA nodes (e.g. UPI, xGMI)");
    let _ = writeln!(out, "  Cores are Slurm abstract core ids, as gres.conf Cores=");
    out
}
