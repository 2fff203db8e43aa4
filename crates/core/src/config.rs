//! `fairway.toml`: the site's Fairway settings, kept beside `slurm.conf`.
//!
//! Every key has a default, so an absent file means "Fairway's terms off": the
//! priority plugin then computes what `priority/multifactor` computes. Errors name the
//! file, line, column and dotted key, and say why, e.g.
//! `/etc/slurm/fairway.toml:4:8: priority.max_wait: invalid time "2 days": ...`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer};

use crate::hostlist::Hostlist;
pub use crate::toml_file::{FileError, Invalid};

/// The name Fairway looks for in `slurm.conf`'s directory.
pub const FILE_NAME: &str = "fairway.toml";

/// Where `fairway.toml` lives for a given `slurm.conf`: the same directory.
pub fn path_beside(slurm_conf: &Path) -> PathBuf {
    slurm_conf.parent().unwrap_or_else(|| Path::new("/")).join(FILE_NAME)
}

/// The environment variable that names `fairway.toml` itself, wherever `slurm.conf` is
/// (e.g. in a systemd drop-in for slurmd).
pub const ENV_PATH: &str = "FAIRWAY_CONF";

/// Where `fairway.toml` is looked for when `slurm.conf` came from slurmctld (configless
/// Slurm): the configuration directory of Debian's Slurm packages, where it would be
/// beside a local `slurm.conf`.
pub const CONFIGLESS_DIR: &str = "/etc/slurm";

/// Whether `slurm_conf` is a copy fetched from slurmctld (configless Slurm): slurmd's
/// `<SlurmdSpoolDir>/conf-cache/`, or `/run/slurm/conf/` (its link, and sackd's on
/// login nodes). slurmctld sends only Slurm's own files (`slurm.conf`, `gres.conf`,
/// `topology.conf`, ... and what they `Include`), so `fairway.toml` is never there.
pub fn in_configless_cache(slurm_conf: &Path) -> bool {
    slurm_conf.parent().and_then(Path::file_name).is_some_and(|d| d == "conf-cache")
        || slurm_conf.starts_with("/run/slurm/conf")
}

/// The `fairway.toml` of a process whose `slurm.conf` is `slurm_conf`: `explicit` (the
/// value of [`ENV_PATH`]) when set; else the file beside `slurm.conf`, unless that is a
/// configless cache without one: then the one in [`CONFIGLESS_DIR`].
pub fn locate(slurm_conf: &Path, explicit: Option<&std::ffi::OsStr>) -> PathBuf {
    if let Some(p) = explicit.filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let beside = path_beside(slurm_conf);
    if in_configless_cache(slurm_conf) && !beside.exists() {
        return Path::new(CONFIGLESS_DIR).join(FILE_NAME);
    }
    beside
}

/// [`locate`] with this process's environment.
pub fn locate_from_env(slurm_conf: &Path) -> PathBuf {
    locate(slurm_conf, std::env::var_os(ENV_PATH).as_deref())
}

/// The whole of `fairway.toml`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// `[priority]`: Fairway's own priority terms. All off by default.
    pub priority: PriorityConfig,
    /// `[predictor]`: the runtime predictor behind the predicted-work term.
    pub predictor: PredictorConfig,
    /// `[job_submit]`: the rules of `job_submit/fairway`. All off by default.
    pub job_submit: crate::submit::config::JobSubmitConfig,
    /// `[preempt]`: how `preempt/fairway` orders victims and sizes grace times.
    pub preempt: crate::preempt::config::PreemptConfig,
    /// `[gpu]`: where slurmd's gpu plugin reads a node's topology when NVML cannot.
    pub gpu: GpuConfig,
    /// `[status]`: what priority/fairway publishes after each pass.
    pub status: StatusConfig,
}

/// `[status]`: the status `priority/fairway` writes after each decay pass
/// ([`crate::status`]), which `fairway explain` and `fairway metrics` read.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StatusConfig {
    /// Write `StateSaveLocation/fairway-status.json` after each pass (default true). Read
    /// when slurmctld starts (on 22.05, `scontrol reconfigure` does not change it).
    pub publish: bool,
}

impl Default for StatusConfig {
    fn default() -> Self {
        Self { publish: true }
    }
}

/// `[gpu]`, for the `gpu/nvml` plugin Fairway installs in slurmd.
///
/// ```toml
/// [gpu.topology]
/// "c[1-2]" = "topology/dgx-h100.toml"
/// "c[3-4]" = "topology/pcie-a100-nvlink-pairs.toml"
/// ```
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(try_from = "RawGpuConfig")]
pub struct GpuConfig {
    /// Topology files (the format of `config/topology/`) by Slurm hostlist, for nodes
    /// whose GPUs NVML cannot read (no driver, an emulated cluster). Relative paths are
    /// from `fairway.toml`'s directory. A node may appear in one hostlist only.
    pub topology: BTreeMap<Hostlist, PathBuf>,
}

/// `[gpu]` as written, before the check that no node is listed twice.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawGpuConfig {
    topology: BTreeMap<Hostlist, PathBuf>,
}

impl TryFrom<RawGpuConfig> for GpuConfig {
    type Error = String;

    fn try_from(raw: RawGpuConfig) -> Result<Self, String> {
        let mut seen: BTreeMap<&str, &Hostlist> = BTreeMap::new();
        for list in raw.topology.keys() {
            for host in list.hosts() {
                if let Some(other) = seen.insert(host, list) {
                    return Err(format!("node {host} is in both \"{other}\" and \"{list}\" under [gpu.topology]"));
                }
            }
        }
        Ok(Self { topology: raw.topology })
    }
}

impl GpuConfig {
    /// The topology file of `node`, relative paths taken from `dir` (fairway.toml's).
    pub fn topology_file(&self, node: &str, dir: &Path) -> Option<PathBuf> {
        self.topology.iter().find(|(list, _)| list.contains(node)).map(|(_, file)| dir.join(file))
    }
}

/// `[priority]`: Fairway's terms, added to multifactor's factors through the site
/// factor (see [`crate::terms`]).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PriorityConfig {
    /// Weight of "less predicted remaining GPU-time ranks higher" (0 = off).
    pub weight_predicted_work: u32,
    /// Weight of deadline / SLA urgency (0 = off).
    pub weight_deadline: u32,
    /// The QOS whose jobs may claim deadline urgency with `--deadline`. Any user can set
    /// `--deadline`, and a deadline just past a job's expected end collects the whole
    /// weight, so urgency is granted per QOS, as the QOS itself is (sacctmgr). Empty (the
    /// default): no job claims it.
    pub deadline_qos: Vec<String>,
    /// After this long eligible, a job rises above every job that is not starving; the
    /// longest-starving job of each partition goes first ([`crate::terms::FirstStarving`]).
    /// Slurm time syntax (`2-00:00:00`); absent = no starvation bound.
    #[serde(default, deserialize_with = "slurm_time_opt")]
    pub max_wait: Option<Seconds>,
    /// Lift the starving jobs of heavier users too: those whose fair-share factor is
    /// below the upper quartile of the users with jobs pending
    /// ([`crate::terms::LIFT_QUANTILE`]). Off
    /// (the default), such a job waits where fair share puts it: its wait is fair share's
    /// decision, and lifting it is what made the bound cost more than it saved under a
    /// backlog (`bench/results/sim-sweep.md`).
    pub max_wait_heavy_users: bool,
}

/// `[predictor]`: how runtime predictions are made and kept.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PredictorConfig {
    /// Accepted so that older files still load, and otherwise ignored: the upper
    /// quantile is the one a model was trained for (`fairway predict train --quantile`),
    /// kept there by the online calibration. `check-config` says so.
    pub quantile: Option<Quantile>,
    /// Predictor history; relative paths are relative to `StateSaveLocation`.
    pub state_file: PathBuf,
    /// A learned run-time model written by `fairway predict train`; relative paths are
    /// relative to fairway.toml's directory. Unset: the mean of the last two runs.
    pub model: Option<PathBuf>,
    /// Step of the model's online calibration (log space, 0 to 1): how far each finished
    /// job moves its upper quantile ([`crate::predict::OnlineCalibration`]). 0: the
    /// offsets stay as trained.
    #[serde(deserialize_with = "calibration_step")]
    pub calibration_step: f64,
    /// The online calibration's state; relative paths are relative to `StateSaveLocation`.
    pub calibration_file: PathBuf,
}

impl Default for PredictorConfig {
    fn default() -> Self {
        Self {
            quantile: None,
            state_file: PathBuf::from("fairway-predictor.json"),
            model: None,
            calibration_step: crate::predict::DEFAULT_STEP,
            calibration_file: PathBuf::from("fairway-calibration.json"),
        }
    }
}

fn calibration_step<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    if !(0.0..=1.0).contains(&v) {
        return Err(serde::de::Error::custom(format!(
            "{v} is out of range: the step is in log space, between 0 (offsets as trained) and 1"
        )));
    }
    Ok(v)
}

impl PredictorConfig {
    /// The learned model's file, relative paths taken from `dir` (fairway.toml's).
    pub fn model_file(&self, dir: &Path) -> Option<PathBuf> {
        self.model.as_ref().map(|m| dir.join(m))
    }
}

/// A duration in whole seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Seconds(pub u64);

/// As Slurm writes a time limit: `MM:SS`, `HH:MM:SS` or `D-HH:MM:SS`.
impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (d, h, m, s) = (self.0 / 86_400, self.0 / 3600 % 24, self.0 / 60 % 60, self.0 % 60);
        match (d, h) {
            (0, 0) => write!(f, "{m:02}:{s:02}"),
            (0, _) => write!(f, "{h:02}:{m:02}:{s:02}"),
            _ => write!(f, "{d}-{h:02}:{m:02}:{s:02}"),
        }
    }
}

/// A quantile in [0.5, 0.999].
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Quantile(f64);

impl Quantile {
    /// The accepted range, both ends included.
    pub const RANGE: (f64, f64) = (0.5, 0.999);

    /// The quantile as a probability.
    pub fn get(self) -> f64 {
        self.0
    }
}

impl<'de> Deserialize<'de> for Quantile {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let q = f64::deserialize(d)?;
        let (lo, hi) = Self::RANGE;
        if !(lo..=hi).contains(&q) {
            return Err(serde::de::Error::custom(format!(
                "{q} is out of range: a quantile must be between {lo} and {hi}"
            )));
        }
        Ok(Self(q))
    }
}

/// Longest `max_wait` accepted: a year. Anything longer is a typo, not a policy.
const MAX_WAIT_LIMIT: u64 = 365 * 24 * 3600;

pub(crate) fn slurm_time_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Seconds>, D::Error> {
    let text = String::deserialize(d)?;
    let secs = crate::time::parse_duration(&text).map_err(serde::de::Error::custom)?;
    if secs == 0 || secs > MAX_WAIT_LIMIT {
        return Err(serde::de::Error::custom(format!(
            "`{text}` is out of range: use between 1 second and 365-00:00:00"
        )));
    }
    Ok(Some(Seconds(secs)))
}

/// A `fairway.toml` that could not be used.
pub type ConfigError = FileError;

impl Config {
    /// Reads and validates `path`. A missing file is not an error: it yields the
    /// defaults, and `Ok(None)` tells the caller so it can say so in its log.
    pub fn load(path: &Path) -> Result<Option<Self>, ConfigError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(&text, path).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(FileError::Read { path: path.to_path_buf(), source }),
        }
    }

    /// Parses `text`; `path` is only used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        crate::toml_file::parse(text, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid(text: &str) -> Invalid {
        match Config::parse(text, Path::new("/etc/slurm/fairway.toml")) {
            Err(ConfigError::Invalid(i)) => *i,
            other => panic!("expected an invalid config, got {other:?}"),
        }
    }

    #[test]
    fn empty_file_is_all_defaults() {
        let c = Config::parse("", Path::new("x")).unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(c.predictor.quantile, None);
        assert_eq!(c.priority.max_wait, None);
    }

    #[test]
    fn full_file_parses() {
        let c = Config::parse(
            "[priority]\nweight_predicted_work = 1000\nweight_deadline = 50\nmax_wait = \"2-00:00:00\"\n\
             [predictor]\nquantile = 0.95\nstate_file = \"/var/lib/fairway/p.json\"\n",
            Path::new("x"),
        )
        .unwrap();
        assert_eq!(c.priority.weight_predicted_work, 1000);
        assert_eq!(c.priority.max_wait, Some(Seconds(2 * 86400)));
        assert_eq!(c.predictor.quantile.map(Quantile::get), Some(0.95));
    }

    #[test]
    fn online_calibration_settings() {
        let c = Config::parse("", Path::new("x")).unwrap();
        assert_eq!(c.predictor.calibration_step, crate::predict::DEFAULT_STEP);
        assert_eq!(c.predictor.calibration_file, PathBuf::from("fairway-calibration.json"));
        let c = Config::parse("[predictor]\ncalibration_step = 0\ncalibration_file = \"c.json\"\n", Path::new("x"))
            .unwrap();
        assert_eq!((c.predictor.calibration_step, c.predictor.calibration_file), (0.0, PathBuf::from("c.json")));
        let i = invalid("[predictor]\ncalibration_step = 2.5\n");
        assert_eq!((i.line, i.key.as_deref()), (2, Some("predictor.calibration_step")));
        assert!(i.message.contains("out of range"), "{}", i.message);
    }

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let i = invalid("# site policy\n[priority]\nweight_deadline = 5\nweight_bogus = 1\n");
        assert_eq!((i.line, i.key.as_deref()), (4, Some("priority.weight_bogus")));
        assert!(i.message.contains("unknown field `weight_bogus`"), "{}", i.message);
        let shown = ConfigError::Invalid(Box::new(i)).to_string();
        assert!(shown.starts_with("/etc/slurm/fairway.toml:4:1: key `priority.weight_bogus`: "), "{shown}");
    }

    #[test]
    fn unknown_section_is_reported() {
        let i = invalid("[prioritee]\nweight_deadline = 5\n");
        assert_eq!((i.line, i.key.as_deref()), (1, Some("prioritee")));
    }

    #[test]
    fn wrong_type_names_the_key() {
        let i = invalid("[priority]\n\nweight_deadline = \"high\"\n");
        assert_eq!((i.line, i.key.as_deref()), (3, Some("priority.weight_deadline")));
        assert!(i.message.contains("u32"), "{}", i.message);
    }

    #[test]
    fn negative_weight_is_rejected() {
        let i = invalid("[priority]\nweight_predicted_work = -3\n");
        assert_eq!((i.line, i.key.as_deref()), (2, Some("priority.weight_predicted_work")));
    }

    #[test]
    fn out_of_range_values_say_the_range() {
        let i = invalid("[predictor]\nquantile = 1.5\n");
        assert_eq!((i.line, i.key.as_deref()), (2, Some("predictor.quantile")));
        assert!(i.message.contains("between 0.5 and 0.999"), "{}", i.message);

        let i = invalid("[priority]\nmax_wait = \"400-00:00:00\"\n");
        assert_eq!(i.key.as_deref(), Some("priority.max_wait"));
        assert!(i.message.contains("out of range"), "{}", i.message);
    }

    #[test]
    fn bad_time_syntax_is_explained() {
        let i = invalid("[priority]\nmax_wait = \"2 days\"\n");
        assert_eq!((i.line, i.column), (2, 12));
        assert!(i.message.contains("days-hours:minutes:seconds"), "{}", i.message);
    }

    #[test]
    fn syntax_error_has_a_position() {
        let i = invalid("[priority\nweight_deadline = 5\n");
        assert_eq!(i.line, 1);
    }

    #[test]
    fn a_configless_slurmd_finds_fairway_toml_in_etc_slurm() {
        use std::ffi::OsStr;
        let cache = Path::new("/var/spool/slurmd/conf-cache/slurm.conf");
        assert!(in_configless_cache(cache));
        assert!(in_configless_cache(Path::new("/run/slurm/conf/slurm.conf")));
        assert!(!in_configless_cache(Path::new("/etc/slurm/slurm.conf")));
        assert_eq!(locate(cache, None), Path::new("/etc/slurm/fairway.toml"));
        assert_eq!(locate(Path::new("/srv/slurm/slurm.conf"), None), Path::new("/srv/slurm/fairway.toml"));
        // FAIRWAY_CONF wins everywhere; an empty value counts as unset.
        let mine = OsStr::new("/opt/site/fairway.toml");
        assert_eq!(locate(cache, Some(mine)), Path::new("/opt/site/fairway.toml"));
        assert_eq!(locate(Path::new("/etc/slurm/slurm.conf"), Some(mine)), Path::new("/opt/site/fairway.toml"));
        assert_eq!(locate(cache, Some(OsStr::new(""))), Path::new("/etc/slurm/fairway.toml"));
        // A cache that holds one after all: that one.
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("conf-cache");
        std::fs::create_dir(&cache).unwrap();
        std::fs::write(cache.join(FILE_NAME), "").unwrap();
        assert_eq!(locate(&cache.join("slurm.conf"), None), cache.join(FILE_NAME));
    }

    #[test]
    fn missing_file_means_defaults() {
        assert!(Config::load(Path::new("/nonexistent/fairway.toml")).unwrap().is_none());
        assert_eq!(path_beside(Path::new("/etc/slurm/slurm.conf")), Path::new("/etc/slurm/fairway.toml"));
    }
}

#[cfg(test)]
mod shipped {
    use super::*;

    #[test]
    fn the_shipped_example_is_valid_and_all_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/fairway.toml");
        let c = Config::load(&path).unwrap().expect("config/fairway.toml exists");
        assert_eq!(c, Config::default());
    }

    #[test]
    fn the_gpu_cluster_example_is_valid() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/fairway.gpu-cluster.toml");
        let c = Config::load(&path).unwrap().expect("config/fairway.gpu-cluster.toml exists");
        assert_eq!(c.job_submit.gpu.len(), 2);
        assert_eq!(c.job_submit.checkpoint.signal.number, 10);
        assert!(c.job_submit.checkpoint.signal.batch_only);
        assert_eq!((c.preempt.min_runtime, c.preempt.max_grace("scavenger")), (600, 600));
    }
}

#[cfg(test)]
mod gpu_tests {
    use super::*;

    #[test]
    fn topology_files_by_hostlist() {
        let c = Config::parse(
            "[gpu.topology]\n\"c[1-2]\" = \"topology/dgx-h100.toml\"\n\"c3\" = \"/opt/t.toml\"\n",
            Path::new("/etc/slurm/fairway.toml"),
        )
        .unwrap();
        let dir = Path::new("/etc/slurm");
        assert_eq!(c.gpu.topology_file("c2", dir), Some(PathBuf::from("/etc/slurm/topology/dgx-h100.toml")));
        assert_eq!(c.gpu.topology_file("c3", dir), Some(PathBuf::from("/opt/t.toml")));
        assert_eq!(c.gpu.topology_file("c4", dir), None);
    }

    #[test]
    fn a_bad_hostlist_or_a_node_twice_is_refused() {
        let e = Config::parse("[gpu.topology]\n\"c[1-\" = \"a.toml\"\n", Path::new("f.toml")).unwrap_err().to_string();
        assert!(e.contains("invalid hostlist \"c[1-\""), "{e}");
        let e = Config::parse("[gpu.topology]\n\"c[1-2]\" = \"a.toml\"\n\"c2\" = \"b.toml\"\n", Path::new("f.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("node c2 is in both"), "{e}");
    }
}
