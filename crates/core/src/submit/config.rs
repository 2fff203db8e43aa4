//! `[job_submit]` in `fairway.toml`: the hardware catalog and the rules
//! `job_submit/fairway` enforces. Every rule is off until its keys are set, so an
//! empty section changes nothing.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};

use crate::config::Seconds;

/// `[job_submit]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct JobSubmitConfig {
    /// `[[job_submit.gpu]]`: the site's GPU types, in order of preference when the
    /// plugin chooses GPUs for a job that asked for none.
    pub gpu: Vec<GpuType>,
    /// `[job_submit.qos]`: default QoS by workload tier, and which QoS are preemptible.
    pub qos: QosRules,
    /// `[job_submit.partition.<name>]`: per-partition rules.
    pub partition: BTreeMap<String, PartitionRules>,
    /// `[job_submit.checkpoint]`: preemption readiness for checkpointing jobs.
    pub checkpoint: CheckpointRules,
    /// `[job_submit.binding]`: binding defaults for GPU jobs.
    pub binding: BindingRules,
    /// `[job_submit.time]`: `time=auto` limits and prediction records.
    pub time: TimeRules,
    /// Append what the rules changed to the job's AdminComment (`fairway:changed=…`), so
    /// that `fairway explain` can say it after submission. Off by default: AdminComment is
    /// the site's, and whoever may see the job sees it.
    pub record_changes: bool,
}

/// One GPU type of the hardware catalog.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuType {
    /// The GRES type, as in `gres.conf` (`Type=`) and `--gres=gpu:<type>:N`.
    pub name: String,
    /// Memory per GPU in GB (10^9 bytes), as vendors state it (80 for an H100 80GB).
    #[serde(deserialize_with = "positive_f64")]
    pub memory_gb: f64,
    /// GPUs per node.
    #[serde(deserialize_with = "gpus_per_node")]
    pub per_node: u32,
    /// GPUs per NVLink domain: `per_node` for NVSwitch (all-to-all), 2 for bridged
    /// pairs, 1 for PCIe only. Multi-node gangs use whole domains, or a divisor of one.
    #[serde(default, deserialize_with = "gpus_per_node_opt")]
    pub nvlink_domain: Option<u32>,
    /// Partitions with this type; the first is used when the plugin picks the partition.
    pub partitions: Vec<String>,
}

impl GpuType {
    /// GPUs per NVLink domain (1 when not given: no NVLink).
    pub fn domain(&self) -> u32 {
        self.nvlink_domain.unwrap_or(1).clamp(1, self.per_node)
    }
}

/// `[job_submit.qos]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QosRules {
    /// QoS for interactive jobs (`salloc`/`srun` allocations, no batch script) whose
    /// `--time` is at most `interactive_max_time`.
    pub interactive: Option<String>,
    /// Longest `--time` still treated as interactive.
    #[serde(deserialize_with = "crate::config::slurm_time_opt")]
    pub interactive_max_time: Option<Seconds>,
    /// QoS for everything else.
    pub batch: Option<String>,
    /// QoS for jobs that say `tier=opportunistic` (sweeps that may be preempted).
    pub opportunistic: Option<String>,
    /// QoS whose jobs may be preempted: checkpointing jobs in them get `--requeue` and
    /// a warning signal.
    pub preemptible: Vec<String>,
}

/// `[job_submit.partition.<name>]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PartitionRules {
    /// QoS allowed in this partition (empty: any).
    pub allowed_qos: Vec<String>,
    /// For multi-node GPU jobs without `--switches`: at most this many leaf switches.
    pub gang_switches: Option<u32>,
    /// How long such a job may wait for that locality (`--switches=N@time`).
    #[serde(deserialize_with = "crate::config::slurm_time_opt")]
    pub gang_switches_wait: Option<Seconds>,
}

/// `[job_submit.checkpoint]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CheckpointRules {
    /// Signal sent before preemption, in `--signal` syntax without the time:
    /// `USR1` (every step) or `B:USR1` (the batch shell only).
    #[serde(deserialize_with = "warn_signal")]
    pub signal: WarnSignal,
    /// Lead time = declared checkpoint time × this factor (1 to 100)...
    #[serde(deserialize_with = "lead_factor")]
    pub lead_factor: f64,
    /// ...but at least this long.
    #[serde(deserialize_with = "crate::config::slurm_time_opt")]
    pub min_lead: Option<Seconds>,
}

impl Default for CheckpointRules {
    fn default() -> Self {
        Self {
            signal: WarnSignal { number: 10, name: "USR1".into(), batch_only: false },
            lead_factor: 2.0,
            min_lead: Some(Seconds(60)),
        }
    }
}

/// A warning signal: `--signal=[B:]<sig>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarnSignal {
    /// The signal number (Linux).
    pub number: u16,
    /// Its name without `SIG`.
    pub name: String,
    /// `B:`: only the batch shell is signalled.
    pub batch_only: bool,
}

/// `[job_submit.binding]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BindingRules {
    /// `--gpu-bind` for GPU jobs that chose none (`closest`), also put in a batch job's
    /// environment as `SLURM_GPU_BIND` for its steps; empty = leave alone.
    pub gpu_bind: String,
    /// `--cpu-bind` for GPU jobs that chose none.
    pub cpu_bind: CpuBind,
}

impl Default for BindingRules {
    fn default() -> Self {
        Self { gpu_bind: String::new(), cpu_bind: CpuBind::None }
    }
}

/// CPU binding a GPU job gets by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CpuBind {
    /// Leave CPU binding to Slurm's defaults.
    None,
    /// `--cpu-bind=cores`.
    Cores,
    /// `--cpu-bind=sockets`.
    Sockets,
    /// `--cpu-bind=ldoms` (NUMA domains).
    Ldoms,
}

/// `[job_submit.time]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimeRules {
    /// `time=auto` jobs get the prediction × (1 + margin), capped by the partition
    /// (0 to 10).
    #[serde(deserialize_with = "auto_margin")]
    pub auto_margin: f64,
    /// Record each job's runtime prediction in its admin comment.
    pub record_prediction: bool,
    /// Which jobs get predicted limits, and whether they are extended before they expire.
    pub predicted_limits: PredictedLimits,
    /// The shortest limit that is extended later: priority/fairway extends limits once
    /// per `PriorityCalcPeriod`, so a shorter one could run out before the first pass
    /// after the job starts. At least twice PriorityCalcPeriod (check-config says so).
    #[serde(deserialize_with = "crate::config::slurm_time_opt")]
    pub min_predicted_limit: Option<Seconds>,
}

impl Default for TimeRules {
    fn default() -> Self {
        Self {
            auto_margin: 0.2,
            record_prediction: false,
            predicted_limits: PredictedLimits::OnRequest,
            min_predicted_limit: Some(Seconds(600)),
        }
    }
}

/// `[job_submit.time] predicted_limits`: which jobs get a limit from their predicted run
/// time, and what happens when one runs longer (`fairway_core::limits`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PredictedLimits {
    /// `time=auto` jobs without `--time`; Slurm kills a job at its predicted limit.
    OnRequest,
    /// `time=auto` jobs (with `--time` too, which becomes the most it may grow to); a
    /// limit about to expire is extended by priority/fairway, up to the limit the job would
    /// have had without `time=auto`: no job is killed earlier than without it.
    Extended,
    /// As `extended`, for every job with run history: backfill plans every such job with its
    /// predicted run time, and each job keeps its own limit as the most it may run.
    AllJobs,
}

fn positive_f64<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    if !(v.is_finite() && v > 0.0 && v <= 1e6) {
        return Err(serde::de::Error::custom(format!("{v} is out of range: expected a positive number of GB")));
    }
    Ok(v)
}

fn in_range<'de, D: Deserializer<'de>>(d: D, lo: f64, hi: f64) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    if !(lo..=hi).contains(&v) {
        return Err(serde::de::Error::custom(format!("{v} is out of range: expected {lo} to {hi}")));
    }
    Ok(v)
}

fn lead_factor<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    in_range(d, 1.0, 100.0)
}

fn auto_margin<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    in_range(d, 0.0, 10.0)
}

fn gpus_per_node<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let v = u32::deserialize(d)?;
    if !(1..=64).contains(&v) {
        return Err(serde::de::Error::custom(format!("{v} is out of range: expected 1 to 64 GPUs")));
    }
    Ok(v)
}

fn gpus_per_node_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    gpus_per_node(d).map(Some)
}

/// Linux signal numbers `--signal` accepts by name.
const SIGNALS: &[(&str, u16)] = &[
    ("HUP", 1),
    ("INT", 2),
    ("QUIT", 3),
    ("KILL", 9),
    ("USR1", 10),
    ("USR2", 12),
    ("ALRM", 14),
    ("TERM", 15),
    ("CONT", 18),
    ("STOP", 19),
    ("TSTP", 20),
    ("URG", 23),
];

fn warn_signal<'de, D: Deserializer<'de>>(d: D) -> Result<WarnSignal, D::Error> {
    let text = String::deserialize(d)?;
    let (batch_only, sig) = match text.strip_prefix("B:") {
        Some(s) => (true, s),
        None => (false, text.as_str()),
    };
    let bare = sig.strip_prefix("SIG").unwrap_or(sig);
    let number = match bare.parse::<u16>() {
        Ok(n) if (1..=64).contains(&n) => Some(n),
        Ok(_) => None,
        Err(_) => SIGNALS.iter().find(|(n, _)| n.eq_ignore_ascii_case(bare)).map(|&(_, v)| v),
    };
    match number {
        Some(number) if number != 9 && number != 19 => Ok(WarnSignal { number, name: bare.to_string(), batch_only }),
        _ => Err(serde::de::Error::custom(format!(
            "`{text}` is not a usable warning signal: use a name such as USR1 or TERM, \
             optionally prefixed by `B:` to signal only the batch shell (KILL and STOP cannot be caught)"
        ))),
    }
}
