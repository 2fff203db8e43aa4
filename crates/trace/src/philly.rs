//! Microsoft Philly's `cluster_job_log` (ATC'19 trace).

use std::io::Read;

use serde::Deserialize;

use crate::{parse_datetime, Job, JobState, TraceError};

#[derive(Deserialize)]
struct PhillyJob {
    jobid: String,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    vc: Option<String>,
    #[serde(default)]
    status: Option<String>,
    submitted_time: Option<String>,
    #[serde(default)]
    attempts: Vec<Attempt>,
}

#[derive(Deserialize)]
struct Attempt {
    start_time: Option<String>,
    end_time: Option<String>,
    #[serde(default)]
    detail: Vec<Detail>,
}

#[derive(Deserialize)]
struct Detail {
    #[serde(default)]
    gpus: Vec<serde_json::Value>,
}

/// Reads Philly's `cluster_job_log`: a JSON array of jobs with `jobid`, `user`, `vc`,
/// `status` (`Pass`, `Killed`, `Failed`), `submitted_time` and `attempts` (each with
/// `start_time`, `end_time` and `detail[].gpus`). Times are naive local strings; `None`
/// values are allowed. Run time is the sum of the attempts (as Gavel's and Blox's
/// `sum_attempts`); start is the first attempt's, end the last's; GPUs are the first
/// attempt's. The VC becomes the account. Philly has no job names or time limits.
/// Tested on a hand-made sample of that schema (the data is not available here).
pub fn load_philly(mut input: impl Read) -> Result<Vec<Job>, TraceError> {
    let mut text = String::new();
    input.read_to_string(&mut text)?;
    let raw: Vec<PhillyJob> = serde_json::from_str(&text).map_err(|e| TraceError::line(e.line() as u64, e))?;
    raw.into_iter()
        .enumerate()
        .map(|(i, j)| {
            let ctx = |e: String| TraceError::Other(format!("job {i} ({}): {e}", j.jobid));
            let t = |s: &Option<String>| parse_datetime(s.as_deref().unwrap_or("")).map_err(ctx);
            let submit = t(&j.submitted_time)?.ok_or_else(|| ctx("no submitted_time".into()))?;
            let mut runtime = None;
            let (mut start, mut end) = (None, None);
            for a in &j.attempts {
                let (s, e) = (t(&a.start_time)?, t(&a.end_time)?);
                start = start.or(s);
                end = e.or(end);
                if let (Some(s), Some(e)) = (s, e) {
                    *runtime.get_or_insert(0u64) += u64::try_from(e - s).unwrap_or(0);
                }
            }
            let gpus = j.attempts.first().map_or(0, |a| a.detail.iter().map(|d| d.gpus.len()).sum::<usize>());
            let nodes = j.attempts.first().map(|a| a.detail.len() as u32).filter(|&n| n > 0);
            Ok(Job {
                id: j.jobid.clone(),
                user: j.user.clone().unwrap_or_default(),
                account: j.vc.clone().unwrap_or_default(),
                name: String::new(),
                partition: String::new(),
                qos: String::new(),
                submit,
                start,
                end,
                runtime,
                time_limit: None,
                gpus: gpus as f64,
                nodes,
                cpus: None,
                state: JobState::parse(j.status.as_deref().unwrap_or("")),
            })
        })
        .collect()
}
