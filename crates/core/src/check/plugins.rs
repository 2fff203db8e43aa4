//! Whether the Fairway plugins `slurm.conf` names will load in the installed Slurm.
//!
//! Slurm loads a plugin only when its `plugin_version` equals the daemon's own
//! `SLURM_VERSION_NUMBER`, micro release included (`plugin.c`: "Incompatible Slurm
//! plugin ... version"); for `PriorityType` that means slurmctld does not start. A Slurm
//! upgrade by apt therefore strands plugins built for the old release, and the moment to
//! notice is before the daemon restarts. The caller reads the files and the daemons'
//! versions; this module decides what that means.

use std::fmt;
use std::path::{Path, PathBuf};

use super::{Finding, Severity, SlurmPriority};

/// A Slurm release as `SLURM_VERSION_NUMBER` encodes it: `0xMMmmuu` (22.05.8 = 0x160508).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SlurmVersion(pub u32);

impl SlurmVersion {
    /// From `22.05.8`, or from a daemon's `-V` line (`slurm 22.05.8`,
    /// `slurm-wlm 24.11.5`); a Debian revision or suffix after the micro is ignored.
    pub fn parse(text: &str) -> Option<Self> {
        let word = text.split_whitespace().find(|w| w.starts_with(|c: char| c.is_ascii_digit()))?;
        let mut parts = word.split(['.', '-', '+', '~']);
        let mut next = || parts.next()?.parse::<u32>().ok().filter(|n| *n < 256);
        let (major, minor, micro) = (next()?, next()?, next()?);
        Some(Self(major << 16 | minor << 8 | micro))
    }
}

impl fmt::Display for SlurmVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:02}.{}", self.0 >> 16 & 0xff, self.0 >> 8 & 0xff, self.0 & 0xff)
    }
}

/// Which daemon loads a plugin (and so whose version it must equal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Daemon {
    /// slurmctld: priority, site_factor, job_submit and preempt plugins.
    Slurmctld,
    /// slurmd: the gpu plugin.
    Slurmd,
}

impl fmt::Display for Daemon {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Daemon::Slurmctld => "slurmctld",
            Daemon::Slurmd => "slurmd",
        })
    }
}

/// One Fairway plugin `slurm.conf` asks a daemon to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WantedPlugin {
    /// The `slurm.conf` setting that names it, as written (`PriorityType=priority/fairway`).
    pub setting: String,
    /// The file Slurm looks for in each `PluginDir` directory (`priority_fairway.so`).
    pub file: &'static str,
    /// The daemon that loads it.
    pub daemon: Daemon,
}

/// The plugin settings of `slurm.conf`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmPlugins {
    /// `PluginDir`, split at `:`, in Slurm's search order.
    pub plugin_dir: Vec<PathBuf>,
    /// The Fairway plugins named, in the order of the checks.
    pub wanted: Vec<WantedPlugin>,
}

impl SlurmPlugins {
    /// The Fairway plugins `slurm` names, and where Slurm looks for them
    /// (`default_plugin_dir` when slurm.conf sets no PluginDir: the daemons' compiled-in one).
    pub fn from_conf(slurm: &SlurmPriority, default_plugin_dir: &Path) -> Self {
        let plugin_dir = match &slurm.plugin_dir {
            Some(dirs) => dirs.split(':').map(PathBuf::from).collect(),
            None => vec![default_plugin_dir.to_path_buf()],
        };
        let mut wanted = Vec::new();
        let mut want = |key: &str, value: &str, file: &'static str| {
            wanted.push(WantedPlugin { setting: format!("{key}={value}"), file, daemon: Daemon::Slurmctld })
        };
        if slurm.priority_type == "priority/fairway" {
            want("PriorityType", &slurm.priority_type, "priority_fairway.so");
        }
        if slurm.job_submit_plugins.iter().any(|p| matches!(p.as_str(), "fairway" | "job_submit/fairway")) {
            want("JobSubmitPlugins", &slurm.job_submit_plugins.join(","), "job_submit_fairway.so");
        }
        if slurm.site_factor_plugin == "site_factor/fairway" {
            want("PrioritySiteFactorPlugin", &slurm.site_factor_plugin, "site_factor_fairway.so");
        }
        if slurm.preempt_type == "preempt/fairway" {
            want("PreemptType", &slurm.preempt_type, "preempt_fairway.so");
        }
        Self { plugin_dir, wanted }
    }

    /// Adds slurmd's gpu plugin when `gres.conf` text asks for `AutoDetect=nvml`
    /// (Debian's Slurm ships no gpu/nvml; Fairway's is the one that loads).
    pub fn add_gres_conf(&mut self, text: &str) {
        let autodetect = crate::slurm_conf::settings(text).find(|(k, _)| k.eq_ignore_ascii_case("autodetect"));
        if let Some((k, v)) = autodetect.filter(|(_, v)| v.eq_ignore_ascii_case("nvml")) {
            let setting = format!("gres.conf {k}={v}");
            self.wanted.push(WantedPlugin { setting, file: "gpu_nvml.so", daemon: Daemon::Slurmd });
        }
    }
}

/// One file found under a `PluginDir` directory, as read by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundPlugin {
    /// Its path.
    pub path: PathBuf,
    /// Its `plugin_version`, or why it could not be read.
    pub version: Result<SlurmVersion, String>,
}

/// Checks one wanted plugin: `found` are the regular files named `wanted.file` in
/// `PluginDir` order; `daemon` is the installed version of the daemon that loads it
/// (`None`: not installed on this host, so nothing to compare with).
pub fn check_plugin(wanted: &WantedPlugin, found: &[FoundPlugin], daemon: Option<SlurmVersion>) -> Vec<Finding> {
    let error = |message| Finding { severity: Severity::Error, message };
    if found.is_empty() {
        return vec![error(format!(
            "{} needs {} but no PluginDir directory holds it: install Fairway's {} plugins \
             (package fairway-{}, or `make install`) and list their directory in PluginDir",
            wanted.setting, wanted.file, wanted.daemon, wanted.daemon
        ))];
    }
    let Some(slurm) = daemon else {
        return vec![Finding {
            severity: Severity::Warning,
            message: format!(
                "{} is not installed on this host: {}'s version not compared with it",
                wanted.daemon, wanted.file
            ),
        }];
    };
    // Slurm tries each directory in turn and keeps the first file that loads.
    let Some(ok) = found.iter().position(|f| f.version == Ok(slurm)) else {
        let what = found
            .iter()
            .map(|f| match &f.version {
                Ok(v) => format!("{} is built for Slurm {v}", f.path.display()),
                Err(e) => format!("{}: {e}", f.path.display()),
            })
            .collect::<Vec<_>>()
            .join("; ");
        return vec![error(format!(
            "{what}, but {} here is Slurm {slurm}: it will refuse the plugin (\"Incompatible Slurm \
             plugin version\"){}. Install Fairway built for Slurm {slurm} before restarting {}, \
             or keep Slurm at the plugin's version",
            wanted.daemon,
            if wanted.file == "priority_fairway.so" { " and, as PriorityType, not start" } else { "" },
            wanted.daemon,
        ))];
    };
    found[..ok]
        .iter()
        .map(|f| Finding {
            severity: Severity::Warning,
            message: format!(
                "{} comes before {} in PluginDir and will not load here ({}): {} logs it at every start",
                f.path.display(),
                found[ok].path.display(),
                match &f.version {
                    Ok(v) => format!("built for Slurm {v}"),
                    Err(e) => e.clone(),
                },
                wanted.daemon
            ),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plugins(conf: &str) -> SlurmPlugins {
        SlurmPlugins::from_conf(&SlurmPriority::parse(conf), Path::new("/default"))
    }

    fn v(s: &str) -> SlurmVersion {
        SlurmVersion::parse(s).unwrap()
    }

    #[test]
    fn versions_read_as_slurm_prints_and_encodes_them() {
        assert_eq!(v("slurm 22.05.8").0, 0x160508);
        assert_eq!(v("slurm-wlm 24.11.5").0, 0x180b05);
        assert_eq!(v("22.05.8-4+deb12u3"), v("22.05.8"));
        assert_eq!(v("24.11.5").to_string(), "24.11.5");
        assert_eq!(SlurmVersion::parse("slurm"), None);
        assert_eq!(SlurmVersion::parse("22.05"), None);
    }

    #[test]
    fn the_plugins_slurm_conf_names_are_found_along_plugin_dir() {
        let conf = "PluginDir=/usr/lib/fairway/slurm-22.05.8:/usr/lib/x86_64-linux-gnu/slurm-wlm\n\
                    PriorityType=priority/fairway # comment\n\
                    JobSubmitPlugins=lua,fairway\nPreemptType=preempt/qos\n";
        let p = plugins(conf);
        assert_eq!(p.plugin_dir.len(), 2);
        let files: Vec<_> = p.wanted.iter().map(|w| w.file).collect();
        assert_eq!(files, ["priority_fairway.so", "job_submit_fairway.so"]);
        assert_eq!(p.wanted[0].setting, "PriorityType=priority/fairway");
        let mut none = plugins("PriorityType=priority/multifactor\n");
        none.add_gres_conf("AutoDetect=off\nName=gpu File=/dev/nvidia0\n");
        assert_eq!(none.plugin_dir, [PathBuf::from("/default")]);
        assert!(none.wanted.is_empty());
        none.add_gres_conf("# AutoDetect=off\nAutoDetect=nvml\n");
        assert_eq!((none.wanted[0].file, none.wanted[0].daemon), ("gpu_nvml.so", Daemon::Slurmd));
    }

    #[test]
    fn a_plugin_of_another_micro_release_is_an_error_before_the_restart() {
        let wanted = plugins("PriorityType=priority/fairway").wanted.remove(0);
        let found = |ver: &str| FoundPlugin { path: "/d/priority_fairway.so".into(), version: Ok(v(ver)) };
        assert!(check_plugin(&wanted, &[found("22.05.8")], Some(v("22.05.8"))).is_empty());
        let f = check_plugin(&wanted, &[found("22.05.8")], Some(v("22.05.9")));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Error);
        assert!(f[0].message.contains("built for Slurm 22.05.8"), "{}", f[0].message);
        assert!(f[0].message.contains("Slurm 22.05.9") && f[0].message.contains("not start"), "{}", f[0].message);
        // missing, unreadable, and a stale copy ahead of a good one
        assert_eq!(check_plugin(&wanted, &[], Some(v("22.05.8")))[0].severity, Severity::Error);
        let bad = FoundPlugin { path: "/x/priority_fairway.so".into(), version: Err("no plugin_version".into()) };
        assert_eq!(check_plugin(&wanted, std::slice::from_ref(&bad), Some(v("22.05.8")))[0].severity, Severity::Error);
        let f = check_plugin(&wanted, &[bad, found("22.05.8")], Some(v("22.05.8")));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Warning);
        // no slurmctld on this host: said, not an error
        assert_eq!(check_plugin(&wanted, &[found("22.05.8")], None)[0].severity, Severity::Warning);
    }
}
