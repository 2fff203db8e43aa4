//! Standard Workload Format (Parallel Workloads Archive), version 2.2.

use std::io::{BufRead, BufReader, Read};

use crate::{Job, JobState, TraceError};

/// Reads an SWF log: 18 whitespace-separated fields per job, `;` header comments, `-1` for
/// unknown. Submit times are relative to the header's `UnixStartTime` (0 when absent).
/// Mapping: user (12) → user, group (13) → account, executable (14) → name `app<N>`,
/// queue (15) → qos, partition (16) → partition, requested time (9) → time limit, allocated
/// (5, else requested 8) processors → cpus. SWF has no GPUs and no nodes.
pub fn load_swf(input: impl Read) -> Result<Vec<Job>, TraceError> {
    let mut jobs = Vec::new();
    let mut epoch = 0i64;
    for (i, line) in BufReader::new(input).lines().enumerate() {
        let line_no = i as u64 + 1;
        let line = line?;
        let text = line.trim();
        if let Some(comment) = text.strip_prefix(';') {
            if let Some((k, v)) = comment.split_once(':') {
                if k.trim() == "UnixStartTime" {
                    epoch = v.trim().parse().map_err(|_| TraceError::line(line_no, "UnixStartTime is not a number"))?;
                }
            }
            continue;
        }
        if text.is_empty() {
            continue;
        }
        let fields: Vec<&str> = text.split_whitespace().collect();
        if fields.len() != 18 {
            return Err(TraceError::line(line_no, format!("expected 18 SWF fields, found {}", fields.len())));
        }
        let mut f = [0i64; 18];
        for (slot, s) in f.iter_mut().zip(&fields) {
            // Some logs write fractional CPU times; the integer part is enough here.
            let v: f64 = s.parse().map_err(|_| TraceError::line(line_no, format!("`{s}` is not a number")))?;
            if !v.is_finite() || v.abs() > 1e15 {
                return Err(TraceError::line(line_no, format!("`{s}` is out of range")));
            }
            *slot = v as i64;
        }
        let known = |v: i64| (v >= 0).then_some(v);
        let submit = epoch.saturating_add(known(f[1]).ok_or_else(|| TraceError::line(line_no, "unknown submit time"))?);
        let start = known(f[2]).map(|w| submit.saturating_add(w));
        let runtime = known(f[3]).map(|r| r as u64);
        let id_of = |v: i64| known(v).map_or(String::new(), |v| v.to_string());
        jobs.push(Job {
            id: f[0].to_string(),
            user: id_of(f[11]),
            account: id_of(f[12]),
            name: known(f[13]).map_or(String::new(), |v| format!("app{v}")),
            partition: id_of(f[15]),
            qos: id_of(f[14]),
            submit,
            start,
            end: start.zip(runtime).map(|(s, r)| s.saturating_add(r as i64)),
            runtime,
            time_limit: known(f[8]).filter(|&v| v > 0).map(|v| v as u64),
            gpus: 0.0,
            nodes: None,
            cpus: known(f[4]).or(known(f[7])).map(|v| v.min(u32::MAX as i64) as u32),
            state: match f[10] {
                1 => JobState::Completed,
                0 => JobState::Failed,
                5 => JobState::Cancelled,
                _ => JobState::Other,
            },
        });
    }
    Ok(jobs)
}
