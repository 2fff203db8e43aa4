//! `fairway check-config`: what the plugins will do with this `fairway.toml`, and
//! whether they will load at all in the Slurm installed here.
//!
//! The checks are `fairway_core::check`'s, the ones slurmctld logs at startup; this
//! module reads the files, asks the daemons their version, reads each plugin's
//! `plugin_version` from its ELF symbol table (the CLI links no Slurm library, and a
//! plugin cannot be dlopen'd outside slurmctld), and prints a summary an admin can read.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;
use fairway_core::check::plugins::{self, Daemon, FoundPlugin, SlurmPlugins, SlurmVersion};
use fairway_core::check::{self, Finding, Severity};
use fairway_core::config::{self, Config};

use crate::Invalid;

#[derive(Args)]
pub struct CheckConfigArgs {
    /// The fairway.toml to check [default: $FAIRWAY_CONF, else beside slurm.conf, else
    /// /etc/slurm/fairway.toml where slurm.conf is a configless cache].
    #[arg(long)]
    file: Option<PathBuf>,
    /// slurm.conf whose directory holds fairway.toml [default: $SLURM_CONF or /etc/slurm/slurm.conf].
    #[arg(long, env = "SLURM_CONF", default_value = "/etc/slurm/slurm.conf")]
    slurm_conf: PathBuf,
    /// Print the whole parsed configuration (every key, defaults included) after the summary.
    #[arg(long)]
    verbose: bool,
}

/// Runs the checks; `Ok` when nothing is wrong, warnings included.
pub fn check_config(a: CheckConfigArgs) -> anyhow::Result<()> {
    let path = a.file.unwrap_or_else(|| config::locate_from_env(&a.slurm_conf));
    let config = match Config::load(&path) {
        Ok(Some(c)) => {
            println!("{}: valid", path.display());
            for line in summary(&c) {
                println!("  {line}");
            }
            if a.verbose {
                println!("{c:#?}");
            }
            c
        }
        Ok(None) => {
            println!("{}: not found; the plugins use the defaults (Fairway's terms and rules off)", path.display());
            Config::default()
        }
        Err(e) => {
            return Err(anyhow::Error::new(e)
                .context(Invalid("fairway.toml is invalid; slurmctld would refuse to start with it")))
        }
    };
    let mut findings: Vec<(PathBuf, Finding)> = Vec::new();
    let dir = path.parent().unwrap_or(Path::new("."));
    for f in check::check_gpu_topology(&config, dir).into_iter().chain(check::check_predictor_model(&config, dir)) {
        findings.push((path.clone(), f));
    }
    // Everything else is measured against slurm.conf: without it nothing can be vouched for.
    let text = fairway_core::slurm_conf::read(&a.slurm_conf)
        .with_context(|| format!("cannot read {} (set --slurm-conf or SLURM_CONF)", a.slurm_conf.display()))?;
    let slurm = check::SlurmPriority::parse(&text);
    for f in check::check(&config, &slurm) {
        findings.push((a.slurm_conf.clone(), f));
    }
    let gres_conf = std::fs::read_to_string(a.slurm_conf.with_file_name("gres.conf")).ok();
    for f in check_plugin_versions(&slurm, gres_conf.as_deref()) {
        findings.push((a.slurm_conf.clone(), f));
    }
    for (file, f) in &findings {
        println!("{}: {f}", file.display());
    }
    let errors = findings.iter().filter(|(_, f)| f.severity == Severity::Error).count();
    let warnings = findings.len() - errors;
    if errors > 0 {
        return Err(anyhow::anyhow!("{errors} error(s), {warnings} warning(s)").context(Invalid("check-config")));
    }
    println!("check-config: no errors, {warnings} warning(s)");
    Ok(())
}

/// What the configuration switches on, one line per section.
fn summary(c: &Config) -> Vec<String> {
    let p = &c.priority;
    let weight = |w: u32| if w == 0 { "off".to_string() } else { format!("weight {w}") };
    let deadline = match (p.weight_deadline, p.deadline_qos.is_empty()) {
        (0, _) => "off".to_string(),
        (w, true) => format!("weight {w}, but no QoS in deadline_qos may claim it"),
        (w, false) => format!("weight {w} for QoS {}", p.deadline_qos.join(", ")),
    };
    let bound = p.max_wait.map_or("off".to_string(), |w| format!("{w}"));
    let pr = &c.predictor;
    let model = pr.model.as_ref().map_or("none (mean of the last two runs)".to_string(), |m| m.display().to_string());
    let js = &c.job_submit;
    let on = |b: bool| if b { "on" } else { "off" };
    let tiers = [&js.qos.interactive, &js.qos.batch, &js.qos.opportunistic].iter().filter(|q| q.is_some()).count();
    let pe = &c.preempt;
    vec![
        format!(
            "[priority]   predicted work: {}; deadline: {deadline}; starvation bound: {bound}",
            weight(p.weight_predicted_work)
        ),
        format!(
            "[predictor]  model: {model}; history: {}; calibration step {}",
            pr.state_file.display(),
            pr.calibration_step
        ),
        format!(
            "[job_submit] {} GPU type(s); default QoS for {tiers} of 3 tiers; {} partition(s) with rules; \
             checkpoint signal {}; gpu-bind default {}; time=auto margin {}; changes recorded in AdminComment: {}",
            js.gpu.len(),
            js.partition.len(),
            js.checkpoint.signal.name,
            if js.binding.gpu_bind.is_empty() { "none" } else { &js.binding.gpu_bind },
            js.time.auto_margin,
            on(js.record_changes),
        ),
        format!(
            "[preempt]    grace {}..{} (default {}, margin {}); young jobs spared {}; at most {} preemption(s) per job; \
             {} QoS override(s)",
            config::Seconds(pe.min_grace.into()),
            config::Seconds(pe.max_grace.into()),
            config::Seconds(pe.default_grace.into()),
            pe.grace_margin,
            config::Seconds(pe.min_runtime.into()),
            pe.max_preemptions,
            pe.qos.len(),
        ),
        format!(
            "[gpu]        topology files for {} hostlist(s); predictions recorded in AdminComment: {}",
            c.gpu.topology.len(),
            on(js.time.record_prediction)
        ),
        format!(
            "[status]     each pass published in StateSaveLocation/{} (for explain and metrics): {}",
            fairway_core::status::FILE_NAME,
            on(c.status.publish)
        ),
    ]
}

/// Debian's compiled-in PluginDir, used when slurm.conf sets none.
fn default_plugin_dir() -> PathBuf {
    PathBuf::from(format!("/usr/lib/{}-linux-gnu/slurm-wlm", std::env::consts::ARCH))
}

/// Each Fairway plugin slurm.conf (and gres.conf) names, against the version of the
/// daemon installed here that will load it.
fn check_plugin_versions(slurm: &check::SlurmPriority, gres_conf: Option<&str>) -> Vec<Finding> {
    let mut wanted = SlurmPlugins::from_conf(slurm, &default_plugin_dir());
    if let Some(g) = gres_conf {
        wanted.add_gres_conf(g);
    }
    let mut out = Vec::new();
    for w in &wanted.wanted {
        let found: Vec<FoundPlugin> = wanted
            .plugin_dir
            .iter()
            .map(|d| d.join(w.file))
            .filter(|p| p.metadata().is_ok_and(|m| m.is_file()))
            .map(|path| FoundPlugin { version: plugin_version(&path), path })
            .collect();
        let daemon = daemon_version(w.daemon);
        let findings = plugins::check_plugin(w, &found, daemon);
        if let Some(v) = daemon {
            if let Some(f) = found.iter().find(|f| f.version == Ok(v)) {
                println!("{}: loads in {} {v}", f.path.display(), w.daemon);
            }
        }
        out.extend(findings);
    }
    out
}

/// The version a daemon installed here prints with `-V` (`slurm 22.05.8`).
fn daemon_version(d: Daemon) -> Option<SlurmVersion> {
    SlurmVersion::parse(&crate::slurm_cmd::run(Path::new(&d.to_string()), &["-V"]).ok()?)
}

/// A plugin's `plugin_version`: the `u32` its dynamic symbol points at.
fn plugin_version(path: &Path) -> Result<SlurmVersion, String> {
    use object::{Object as _, ObjectSection as _, ObjectSymbol as _};
    let data = std::fs::read(path).map_err(|e| format!("cannot read it: {e}"))?;
    let file = object::File::parse(&*data).map_err(|e| format!("not a shared object: {e}"))?;
    let sym = file
        .dynamic_symbols()
        .find(|s| s.name() == Ok("plugin_version"))
        .ok_or("no plugin_version symbol: not a Slurm plugin")?;
    let section =
        sym.section_index().and_then(|i| file.section_by_index(i).ok()).ok_or("plugin_version is in no section")?;
    let bytes = section.data_range(sym.address(), 4).ok().flatten().ok_or("plugin_version is unreadable")?;
    let raw: [u8; 4] = bytes.try_into().map_err(|_| "plugin_version is not 4 bytes")?;
    Ok(SlurmVersion(if file.is_little_endian() { u32::from_le_bytes(raw) } else { u32::from_be_bytes(raw) }))
}
