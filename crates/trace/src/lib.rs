//! Job traces for Fairway: one job record type, loaders for the traces the predictor and the
//! simulator are evaluated on, and a seeded synthetic AI workload.
//!
//! # Formats
//! | [`Format`] | Source | Notes |
//! |---|---|---|
//! | `sacct` | `sacct -P -X -o JobID,User,Account,JobName,Partition,QOS,Submit,Start,End,Elapsed,Timelimit,AllocTRES,State` | columns found by header name, any order; extra columns ignored; job steps skipped |
//! | `sacct-json` | `sacct --json` (Slurm 22.05 to 24.11 schemas) | numbers may be plain or `{set, infinite, number}` |
//! | `swf` | Standard Workload Format v2.2 (Parallel Workloads Archive) | 18 fields, `;` comments, `-1` unknown |
//! | `eagle` | NREL Eagle (`NREL/eagle-jobs`) CSV | |
//! | `openb` | Alibaba GPU v2023 `openb_pod_list_*.csv` | no user, no time limit |
//! | `helios` | SenseTime Helios `cluster_log.csv` | published schema; no data here |
//! | `philly` | Microsoft Philly `cluster_job_log` (JSON) | published schema; run time sums the attempts |
//! | `pai` | Alibaba PAI 2020 `pai_job_table.csv` (+ task table) | published schema |
//!
//! Timestamps become Unix seconds. `sacct -P` prints the local time of the host it ran on,
//! without a zone: [`load_path_in`] reads it in a given zone (the `fairway` commands take
//! `--tz`, the system's zone by default, so a trace exported on the cluster is read right,
//! daylight-saving changes included; an hour repeated at a change is read as the first),
//! and [`write_sacct_in`] writes that way. Other traces that record naive local times
//! (Eagle, Helios, Philly) are read as UTC.
//! Every loader returns an error naming the line (or JSON position / job index) of bad
//! input; none panics on any input (see the property tests).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::fmt;
use std::io::Read;
use std::path::Path;
use std::str::FromStr;

use fairway_core::predict::{FinishedJob, JobKey, JobRequest};
use serde::{Deserialize, Serialize};

mod csv_traces;
mod philly;
mod slurm;
mod swf;
pub mod synth;

pub use csv_traces::{load_eagle, load_helios, load_openb, load_pai, pai_add_tasks};
pub use philly::load_philly;
pub use slurm::{load_sacct, load_sacct_in, load_sacct_json, write_sacct, write_sacct_in, SACCT_FIELDS};
pub use swf::load_swf;

/// How a job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum JobState {
    /// Finished with exit code 0.
    Completed,
    /// Finished with a non-zero exit code (or the trace's equivalent).
    Failed,
    /// Cancelled by the user or an admin.
    Cancelled,
    /// Killed at its time limit.
    Timeout,
    /// Lost to a node failure.
    NodeFail,
    /// Killed for running out of memory.
    OutOfMemory,
    /// Preempted.
    Preempted,
    /// Still running when the trace was taken.
    Running,
    /// Never started.
    Pending,
    /// Anything else.
    Other,
}

impl JobState {
    /// Reads Slurm's state names (`COMPLETED`, `CANCELLED by 1000`, `OUT_OF_MEMORY`, ...) and
    /// the other traces' (`Pass`, `Killed`, `Succeeded`, `Terminated`, ...), case-insensitively.
    pub fn parse(text: &str) -> Self {
        let word = text.split_whitespace().next().unwrap_or("").to_ascii_uppercase();
        match word.as_str() {
            "COMPLETED" | "CD" | "PASS" | "SUCCEEDED" | "TERMINATED" | "1" => JobState::Completed,
            "FAILED" | "F" | "BOOT_FAIL" | "DEADLINE" | "0" => JobState::Failed,
            "CANCELLED" | "CA" | "KILLED" | "5" => JobState::Cancelled,
            "TIMEOUT" | "TO" => JobState::Timeout,
            "NODE_FAIL" | "NF" => JobState::NodeFail,
            "OUT_OF_MEMORY" | "OOM" => JobState::OutOfMemory,
            "PREEMPTED" | "PR" => JobState::Preempted,
            "RUNNING" | "R" => JobState::Running,
            "PENDING" | "PD" | "WAITING" => JobState::Pending,
            _ => JobState::Other,
        }
    }

    /// Slurm's name for the state.
    pub fn as_slurm(self) -> &'static str {
        match self {
            JobState::Completed => "COMPLETED",
            JobState::Failed => "FAILED",
            JobState::Cancelled => "CANCELLED",
            JobState::Timeout => "TIMEOUT",
            JobState::NodeFail => "NODE_FAIL",
            JobState::OutOfMemory => "OUT_OF_MEMORY",
            JobState::Preempted => "PREEMPTED",
            JobState::Running => "RUNNING",
            JobState::Pending => "PENDING",
            JobState::Other => "UNKNOWN",
        }
    }
}

/// One job, whatever trace it came from. Empty strings mean "not in this trace".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// Job id as the trace writes it.
    pub id: String,
    /// User name or anonymised id.
    pub user: String,
    /// Account (Slurm), group (SWF), virtual cluster (Philly, Helios).
    pub account: String,
    /// Job name.
    pub name: String,
    /// Partition (queue).
    pub partition: String,
    /// QOS.
    pub qos: String,
    /// Submit time, Unix seconds.
    pub submit: i64,
    /// Start time, when it started.
    pub start: Option<i64>,
    /// End time, when it ended.
    pub end: Option<i64>,
    /// Run time in seconds, when known.
    pub runtime: Option<u64>,
    /// Time limit in seconds; `None` when unlimited or not recorded.
    pub time_limit: Option<u64>,
    /// GPUs (fractional where the trace shares GPUs).
    pub gpus: f64,
    /// Nodes, when known.
    pub nodes: Option<u32>,
    /// CPUs, when known.
    pub cpus: Option<u32>,
    /// Final state.
    pub state: JobState,
}

impl Job {
    /// The predictor's history key. User names become a stable 32-bit id (the number itself
    /// when the name is numeric, else an FNV-1a hash); fractional GPUs round up.
    pub fn key(&self) -> JobKey {
        let user = self.user.parse::<u32>().unwrap_or_else(|_| fnv1a(&self.user));
        JobKey { user, account: self.account.clone(), name: self.name.clone(), gpus: self.gpus.ceil() as u32 }
    }

    /// What a predictor may know of the job when it is submitted.
    pub fn request(&self) -> JobRequest {
        JobRequest {
            key: self.key(),
            time_limit: self.time_limit,
            nodes: self.nodes,
            cpus: self.cpus,
            submit: self.submit,
        }
    }

    /// The job as a predictor sees it, when its run time is known. Without an end or start
    /// time (SWF logs with unknown waits), it is taken to have started at submission.
    pub fn finished(&self) -> Option<FinishedJob> {
        let runtime = self.runtime?;
        let end = self.end.unwrap_or_else(|| self.start.unwrap_or(self.submit).saturating_add(runtime as i64));
        Some(FinishedJob { request: self.request(), runtime, end })
    }
}

fn fnv1a(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5u32, |h, b| (h ^ b as u32).wrapping_mul(0x0100_0193))
}

/// A trace that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// Reading the input failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Bad content at a line (1-based; 0 when no line applies).
    #[error("line {line}: {msg}")]
    Line {
        /// Line number.
        line: u64,
        /// What is wrong.
        msg: String,
    },
    /// Bad content elsewhere (a JSON job index, a missing column).
    #[error("{0}")]
    Other(String),
}

impl TraceError {
    pub(crate) fn line(line: u64, msg: impl fmt::Display) -> Self {
        TraceError::Line { line, msg: msg.to_string() }
    }
}

/// The trace formats [`load`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// `sacct -P` output.
    Sacct,
    /// `sacct --json` output.
    SacctJson,
    /// Standard Workload Format.
    Swf,
    /// NREL Eagle CSV.
    Eagle,
    /// Alibaba GPU v2023 openb pod list.
    Openb,
    /// SenseTime Helios `cluster_log.csv`.
    Helios,
    /// Microsoft Philly `cluster_job_log`.
    Philly,
    /// Alibaba PAI 2020 `pai_job_table.csv`.
    Pai,
}

impl Format {
    /// Every format, with its command-line name.
    pub const ALL: [(&'static str, Format); 8] = [
        ("sacct", Format::Sacct),
        ("sacct-json", Format::SacctJson),
        ("swf", Format::Swf),
        ("eagle", Format::Eagle),
        ("openb", Format::Openb),
        ("helios", Format::Helios),
        ("philly", Format::Philly),
        ("pai", Format::Pai),
    ];
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Format::ALL.iter().find(|(n, _)| n.eq_ignore_ascii_case(s)).map(|(_, f)| *f).ok_or_else(|| {
            let names: Vec<_> = Format::ALL.iter().map(|(n, _)| *n).collect();
            format!("unknown trace format `{s}` (expected one of: {})", names.join(", "))
        })
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = Format::ALL.iter().find(|(_, x)| x == self).map_or("?", |(n, _)| n);
        f.write_str(name)
    }
}

/// Reads a trace of the given format.
pub fn load(format: Format, input: impl Read) -> Result<Vec<Job>, TraceError> {
    match format {
        Format::Sacct => load_sacct(input),
        Format::SacctJson => load_sacct_json(input),
        Format::Swf => load_swf(input),
        Format::Eagle => load_eagle(input),
        Format::Openb => load_openb(input),
        Format::Helios => load_helios(input),
        Format::Philly => load_philly(input),
        Format::Pai => load_pai(input),
    }
}

/// Reads a trace file, `sacct -P` times in `tz`; errors name the file.
pub fn load_path_in(format: Format, path: &Path, tz: &jiff::tz::TimeZone) -> Result<Vec<Job>, TraceError> {
    if format != Format::Sacct {
        return load_path(format, path);
    }
    let file = std::fs::File::open(path).map_err(|e| TraceError::Other(format!("{}: {e}", path.display())))?;
    load_sacct_in(std::io::BufReader::new(file), tz).map_err(|e| TraceError::Other(format!("{}: {e}", path.display())))
}

/// Reads a trace file (naive times as UTC); errors name the file.
pub fn load_path(format: Format, path: &Path) -> Result<Vec<Job>, TraceError> {
    let file = std::fs::File::open(path).map_err(|e| TraceError::Other(format!("{}: {e}", path.display())))?;
    load(format, std::io::BufReader::new(file)).map_err(|e| TraceError::Other(format!("{}: {e}", path.display())))
}

/// Parses `YYYY-MM-DD HH:MM:SS` or `YYYY-MM-DDTHH:MM:SS` (naive, read as UTC) into Unix
/// seconds; `Unknown`, `None` and empty are `Ok(None)`.
pub(crate) fn parse_datetime(text: &str) -> Result<Option<i64>, String> {
    parse_datetime_in(text, &jiff::tz::TimeZone::UTC)
}

/// [`parse_datetime`] of a local time in `tz` (jiff's compatible rule: a time skipped at a
/// daylight-saving change is read as after it, a repeated one as the first).
pub(crate) fn parse_datetime_in(text: &str, tz: &jiff::tz::TimeZone) -> Result<Option<i64>, String> {
    let t = text.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("unknown") || t.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    let dt: jiff::civil::DateTime = t.replacen(' ', "T", 1).parse().map_err(|e| format!("bad time `{t}`: {e}"))?;
    let ts = dt.to_zoned(tz.clone()).map_err(|e| format!("bad time `{t}`: {e}"))?.timestamp();
    Ok(Some(ts.as_second()))
}

/// Formats Unix seconds as sacct does (`YYYY-MM-DDTHH:MM:SS`), in `tz`.
pub(crate) fn format_datetime_in(secs: i64, tz: &jiff::tz::TimeZone) -> String {
    match jiff::Timestamp::from_second(secs) {
        Ok(ts) => ts.to_zoned(tz.clone()).datetime().strftime("%Y-%m-%dT%H:%M:%S").to_string(),
        Err(_) => "Unknown".into(),
    }
}

/// A non-negative number of seconds given as a float (`42000.0`), rounded.
pub(crate) fn parse_secs(text: &str, what: &str) -> Result<Option<u64>, String> {
    let t = text.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("nan") {
        return Ok(None);
    }
    let v: f64 = t.parse().map_err(|_| format!("{what}: `{t}` is not a number"))?;
    if !v.is_finite() || !(0.0..1e12).contains(&v) {
        return Err(format!("{what}: `{t}` is out of range"));
    }
    Ok(Some(v.round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states() {
        assert_eq!(JobState::parse("CANCELLED by 1000"), JobState::Cancelled);
        assert_eq!(JobState::parse("Pass"), JobState::Completed);
        assert_eq!(JobState::parse("out_of_memory"), JobState::OutOfMemory);
        assert_eq!(JobState::parse(""), JobState::Other);
    }

    #[test]
    fn formats_by_name() {
        for (name, f) in Format::ALL {
            assert_eq!(name.parse::<Format>().unwrap(), f);
            assert_eq!(f.to_string(), name);
        }
        assert!("csv".parse::<Format>().unwrap_err().contains("sacct-json"));
    }

    #[test]
    fn datetimes() {
        assert_eq!(parse_datetime("2019-01-01 08:55:55").unwrap(), Some(1_546_332_955));
        assert_eq!(parse_datetime("2019-01-01T08:55:55").unwrap(), Some(1_546_332_955));
        assert_eq!(parse_datetime("Unknown").unwrap(), None);
        assert!(parse_datetime("2019-13-01 00:00:00").is_err());
        assert_eq!(format_datetime_in(1_546_332_955, &jiff::tz::TimeZone::UTC), "2019-01-01T08:55:55");
    }

    #[test]
    fn keys_from_names() {
        let mut j = synth::generate(&synth::SynthConfig { jobs: 1, ..Default::default() }).remove(0);
        j.user = "1234".into();
        assert_eq!(j.key().user, 1234);
        j.user = "alice".into();
        assert_eq!(j.key().user, fnv1a("alice"));
        j.gpus = 0.5;
        assert_eq!(j.key().gpus, 1);
    }
}
