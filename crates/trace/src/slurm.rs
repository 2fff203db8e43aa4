//! Slurm accounting: `sacct -P` (pipe-separated) and `sacct --json`.

use std::collections::HashMap;
use std::io::{Read, Write};

use serde_json::Value;

use jiff::tz::TimeZone;

use crate::{format_datetime_in, parse_datetime_in, Job, JobState, TraceError};

/// The `sacct -o` field list [`write_sacct`] writes and the recommended one to export with:
/// `sacct -P -X -a -S <start> -E <end> -o` followed by this.
pub const SACCT_FIELDS: &str =
    "JobID,User,Account,JobName,Partition,QOS,Submit,Start,End,Elapsed,Timelimit,AllocTRES,State";

/// Reads `sacct -P` (or `-p`) output with a header line. Columns are found by name; `JobID`
/// and `Submit` are required. Job steps (`123.batch`, `123.0`) are skipped.
pub fn load_sacct(input: impl Read) -> Result<Vec<Job>, TraceError> {
    load_sacct_in(input, &TimeZone::UTC)
}

/// [`load_sacct`] of times printed in `tz` (sacct prints its host's local time).
pub fn load_sacct_in(input: impl Read, tz: &TimeZone) -> Result<Vec<Job>, TraceError> {
    let mut reader = csv::ReaderBuilder::new().delimiter(b'|').quoting(false).flexible(true).from_reader(input);
    let headers = reader.headers().map_err(|e| csv_error(&e))?.clone();
    let col: HashMap<String, usize> =
        headers.iter().enumerate().map(|(i, h)| (h.trim().to_ascii_lowercase(), i)).collect();
    let find = |names: &[&str]| names.iter().find_map(|n| col.get(*n).copied());
    let (Some(id_col), Some(submit_col)) = (find(&["jobid"]), find(&["submit"])) else {
        return Err(TraceError::line(1, "sacct header needs at least JobID and Submit (run sacct with -P and -o)"));
    };
    let cols = [
        find(&["user"]),
        find(&["account"]),
        find(&["jobname"]),
        find(&["partition"]),
        find(&["qos"]),
        find(&["start"]),
        find(&["end"]),
        find(&["elapsed", "elapsedraw"]),
        find(&["timelimit"]),
        find(&["alloctres", "reqtres"]),
        find(&["state"]),
        find(&["nnodes", "allocnodes"]),
        find(&["ncpus", "alloccpus", "reqcpus"]),
    ];
    let [user, account, name, partition, qos, start, end, elapsed, limit, tres, state, nnodes, ncpus] = cols;

    let mut jobs = Vec::new();
    let mut record = csv::StringRecord::new();
    loop {
        match reader.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => return Err(csv_error(&e)),
        }
        let line = record.position().map_or(0, |p| p.line());
        let get = |c: Option<usize>| c.and_then(|c| record.get(c)).unwrap_or("").trim();
        let id = get(Some(id_col));
        if id.is_empty() || id.contains('.') {
            continue;
        }
        let bad = |msg: String| TraceError::line(line, format!("job {id}: {msg}"));
        let submit =
            parse_datetime_in(get(Some(submit_col)), tz).map_err(bad)?.ok_or_else(|| bad("no submit time".into()))?;
        let start_t = parse_datetime_in(get(start), tz).map_err(bad)?;
        let end_t = parse_datetime_in(get(end), tz).map_err(bad)?;
        let runtime = match get(elapsed) {
            _ if start_t.is_none() => None,
            "" => end_t.zip(start_t).map(|(e, s)| e.saturating_sub(s).max(0) as u64),
            e if e.bytes().all(|b| b.is_ascii_digit()) => e.parse().ok(),
            e => Some(fairway_core::time::parse_duration(e).map_err(|err| bad(err.to_string()))?),
        };
        let tres_map = parse_tres(get(tres));
        let count = |c: Option<usize>, key: &str| -> Result<Option<u32>, TraceError> {
            match get(c) {
                "" => Ok(tres_map.get(key).map(|v| *v as u32)),
                v => v.parse().map(Some).map_err(|_| bad(format!("`{v}` is not a count"))),
            }
        };
        jobs.push(Job {
            id: id.to_string(),
            user: get(user).to_string(),
            account: get(account).to_string(),
            name: get(name).to_string(),
            partition: get(partition).to_string(),
            qos: get(qos).to_string(),
            submit,
            start: start_t,
            end: end_t,
            runtime,
            time_limit: parse_limit(get(limit)).map_err(bad)?,
            gpus: gpus_of(&tres_map),
            nodes: count(nnodes, "node")?,
            cpus: count(ncpus, "cpu")?,
            state: JobState::parse(get(state)),
        });
    }
    Ok(jobs)
}

fn csv_error(e: &csv::Error) -> TraceError {
    TraceError::line(e.position().map_or(0, |p| p.line()), e)
}

/// `Timelimit`: a Slurm duration, or no limit.
fn parse_limit(text: &str) -> Result<Option<u64>, String> {
    match text {
        "" | "UNLIMITED" | "Partition_Limit" | "INVALID" | "NONE" => Ok(None),
        t => fairway_core::time::parse_duration(t).map(Some).map_err(|e| e.to_string()),
    }
}

/// `cpu=8,mem=64G,node=1,gres/gpu=4` into counts (memory and other suffixed values are
/// skipped; they are not counts).
fn parse_tres(text: &str) -> HashMap<String, f64> {
    text.split(',')
        .filter_map(|kv| kv.split_once('='))
        .filter_map(|(k, v)| Some((k.trim().to_string(), v.trim().parse().ok()?)))
        .collect()
}

/// GPUs from TRES: `gres/gpu`, else the sum of typed `gres/gpu:<type>` entries.
fn gpus_of(tres: &HashMap<String, f64>) -> f64 {
    tres.get("gres/gpu")
        .copied()
        .unwrap_or_else(|| tres.iter().filter(|(k, _)| k.starts_with("gres/gpu:")).map(|(_, v)| v).sum())
}

/// Reads `sacct --json` output (`{"jobs": [...]}`), Slurm 22.05 to 24.11. Time limits there
/// are minutes; numbers may be plain or `{"set", "infinite", "number"}` objects.
pub fn load_sacct_json(mut input: impl Read) -> Result<Vec<Job>, TraceError> {
    let mut text = String::new();
    input.read_to_string(&mut text)?;
    let doc: Value = serde_json::from_str(&text).map_err(|e| TraceError::line(e.line() as u64, e))?;
    let jobs = doc.get("jobs").and_then(Value::as_array).ok_or_else(|| TraceError::Other("no `jobs` array".into()))?;
    jobs.iter()
        .enumerate()
        .map(|(i, j)| json_job(j).map_err(|e| TraceError::Other(format!("jobs[{i}]: {e}"))))
        .collect()
}

/// A number, or Slurm's `{set, infinite, number}`: `Ok(None)` when unset or infinite.
fn number(v: Option<&Value>) -> Result<Option<f64>, String> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(Value::Object(o)) => {
            let flag = |k: &str| o.get(k).and_then(Value::as_bool).unwrap_or(false);
            if flag("infinite") || (o.contains_key("set") && !flag("set")) {
                Ok(None)
            } else {
                number(o.get("number"))
            }
        }
        Some(other) => Err(format!("expected a number, got {other}")),
    }
}

fn json_job(j: &Value) -> Result<Job, String> {
    let text = |k: &str| j.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let time = j.get("time").ok_or("no `time`")?;
    let t = |k: &str| -> Result<Option<i64>, String> {
        Ok(number(time.get(k)).map_err(|e| format!("time.{k}: {e}"))?.filter(|&v| v > 0.0).map(|v| v as i64))
    };
    let submit = t("submission")?.ok_or("no time.submission")?;
    let (start, end) = (t("start")?, t("end")?);
    let elapsed = number(time.get("elapsed")).map_err(|e| format!("time.elapsed: {e}"))?;
    let runtime =
        start.and(elapsed.map(|e| e.max(0.0) as u64).or_else(|| end.zip(start).map(|(e, s)| (e - s).max(0) as u64)));
    let limit = number(time.get("limit")).map_err(|e| format!("time.limit: {e}"))?;
    let id = match j.get("job_id") {
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::String(s)) => s.clone(),
        _ => return Err("no job_id".into()),
    };
    // 22.05: state.current is a string; 23.02+: a list of flags, the first being the state.
    let state = match j.get("state").and_then(|s| s.get("current")).or_else(|| j.get("state")) {
        Some(Value::String(s)) => JobState::parse(s),
        Some(Value::Array(a)) => a.first().and_then(Value::as_str).map_or(JobState::Other, JobState::parse),
        _ => JobState::Other,
    };
    let (mut gpus, mut cpus, mut nodes) = (0.0, None, None);
    let tres = j.get("tres").and_then(|t| t.get("allocated")).and_then(Value::as_array);
    for t in tres.into_iter().flatten() {
        let count = number(t.get("count")).ok().flatten().unwrap_or(0.0);
        match (t.get("type").and_then(Value::as_str), t.get("name").and_then(Value::as_str)) {
            (Some("gres"), Some("gpu")) => gpus = count,
            (Some("cpu"), _) => cpus = Some(count as u32),
            (Some("node"), _) => nodes = Some(count as u32),
            _ => {}
        }
    }
    let nodes = nodes.or_else(|| number(j.get("allocation_nodes")).ok().flatten().map(|n| n as u32));
    let cpus = cpus.or_else(|| number(j.get("required").and_then(|r| r.get("CPUs"))).ok().flatten().map(|n| n as u32));
    Ok(Job {
        id,
        user: text("user"),
        account: text("account"),
        name: text("name"),
        partition: text("partition"),
        qos: text("qos"),
        submit,
        start,
        end,
        runtime,
        time_limit: limit.map(|m| (m.max(0.0) as u64) * 60),
        gpus,
        nodes,
        cpus,
        state,
    })
}

/// Writes jobs as `sacct -P -o` [`SACCT_FIELDS`] would, times in UTC, so [`load_sacct`]
/// reads them back.
pub fn write_sacct(jobs: &[Job], out: impl Write) -> Result<(), TraceError> {
    write_sacct_in(jobs, out, &TimeZone::UTC)
}

/// [`write_sacct`] with times in `tz`, as sacct on a host in that zone prints them.
pub fn write_sacct_in(jobs: &[Job], out: impl Write, tz: &TimeZone) -> Result<(), TraceError> {
    let format_datetime = |secs: i64| format_datetime_in(secs, tz);
    let mut w = csv::WriterBuilder::new().delimiter(b'|').quote_style(csv::QuoteStyle::Never).from_writer(out);
    let io = |e: csv::Error| TraceError::Other(e.to_string());
    w.write_record(SACCT_FIELDS.split(',')).map_err(io)?;
    for j in jobs {
        let time = |t: Option<i64>| t.map_or("Unknown".to_string(), &format_datetime);
        let mut tres = vec![];
        if let Some(c) = j.cpus {
            tres.push(format!("cpu={c}"));
        }
        if let Some(n) = j.nodes {
            tres.push(format!("node={n}"));
        }
        if j.gpus > 0.0 {
            tres.push(format!("gres/gpu={}", j.gpus.ceil() as u64));
        }
        w.write_record([
            j.id.as_str(),
            &j.user,
            &j.account,
            &j.name,
            &j.partition,
            &j.qos,
            &format_datetime(j.submit),
            &time(j.start),
            &time(j.end),
            &duration(j.runtime.unwrap_or(0)),
            &j.time_limit.map_or("UNLIMITED".to_string(), duration),
            &tres.join(","),
            j.state.as_slurm(),
        ])
        .map_err(io)?;
    }
    w.flush()?;
    Ok(())
}

/// Seconds as Slurm prints durations: `HH:MM:SS` or `D-HH:MM:SS`.
fn duration(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{s:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}
