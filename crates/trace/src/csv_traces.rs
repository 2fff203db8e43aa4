//! CSV traces: NREL Eagle, Alibaba openb (GPU v2023) and PAI (GPU v2020), SenseTime Helios.

use std::collections::HashMap;
use std::io::Read;

use crate::{parse_datetime, parse_secs, Job, JobState, TraceError};

/// A CSV file with a header, read record by record with columns looked up by name.
struct Table<R> {
    reader: csv::Reader<R>,
    cols: HashMap<String, usize>,
}

impl<R: Read> Table<R> {
    fn new(input: R, required: &[&str]) -> Result<Self, TraceError> {
        let mut reader = csv::ReaderBuilder::new().flexible(false).from_reader(input);
        let headers = reader.headers().map_err(|e| csv_error(&e))?;
        let cols: HashMap<String, usize> =
            headers.iter().enumerate().map(|(i, h)| (h.trim().to_ascii_lowercase(), i)).collect();
        let missing: Vec<&str> = required.iter().copied().filter(|c| !cols.contains_key(*c)).collect();
        if !missing.is_empty() {
            return Err(TraceError::line(1, format!("missing column(s): {}", missing.join(", "))));
        }
        Ok(Table { reader, cols })
    }

    /// Calls `f(row)` for each record, adding the line number to its errors.
    fn each(mut self, mut f: impl FnMut(&Row) -> Result<Option<Job>, String>) -> Result<Vec<Job>, TraceError> {
        let mut jobs = Vec::new();
        let mut record = csv::StringRecord::new();
        while self.reader.read_record(&mut record).map_err(|e| csv_error(&e))? {
            let line = record.position().map_or(0, |p| p.line());
            if let Some(job) = f(&Row { cols: &self.cols, record: &record }).map_err(|e| TraceError::line(line, e))? {
                jobs.push(job);
            }
        }
        Ok(jobs)
    }
}

/// One record, by column name.
struct Row<'a> {
    cols: &'a HashMap<String, usize>,
    record: &'a csv::StringRecord,
}

impl<'a> Row<'a> {
    /// The trimmed field; "" for absent columns.
    fn get(&self, column: &str) -> &'a str {
        self.cols.get(column).and_then(|&i| self.record.get(i)).unwrap_or("").trim()
    }
}

fn csv_error(e: &csv::Error) -> TraceError {
    TraceError::line(e.position().map_or(0, |p| p.line()), e)
}

fn count(text: &str, what: &str) -> Result<Option<u32>, String> {
    Ok(parse_secs(text, what)?.map(|v| v.min(u32::MAX as u64) as u32))
}

fn float(text: &str, what: &str) -> Result<f64, String> {
    match text {
        "" => Ok(0.0),
        t => t
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| format!("{what}: bad number `{t}`")),
    }
}

/// A time as a date-time string, or as (possibly fractional) Unix seconds.
fn time(text: &str, what: &str) -> Result<Option<i64>, String> {
    if text.bytes().all(|b| b.is_ascii_digit() || b == b'.') && !text.is_empty() {
        return Ok(parse_secs(text, what)?.map(|v| v as i64));
    }
    parse_datetime(text).map_err(|e| format!("{what}: {e}"))
}

/// Reads NREL Eagle's CSV (`NREL/eagle-jobs`): `wallclock_req` is the time limit and
/// `run_time` the run time, both in seconds.
pub fn load_eagle(input: impl Read) -> Result<Vec<Job>, TraceError> {
    let table = Table::new(input, &["job_id", "submit_time", "run_time", "wallclock_req"])?;
    table.each(|row| {
        let get = |c: &str| row.get(c);
        let submit = time(get("submit_time"), "submit_time")?.ok_or("no submit_time")?;
        Ok(Some(Job {
            id: get("job_id").to_string(),
            user: get("user").to_string(),
            account: get("account").to_string(),
            name: get("name").to_string(),
            partition: get("partition").to_string(),
            qos: get("qos").to_string(),
            submit,
            start: time(get("start_time"), "start_time")?,
            end: time(get("end_time"), "end_time")?,
            runtime: parse_secs(get("run_time"), "run_time")?,
            time_limit: parse_secs(get("wallclock_req"), "wallclock_req")?.filter(|&l| l > 0),
            gpus: float(get("gpus_req"), "gpus_req")?,
            nodes: count(get("nodes_req"), "nodes_req")?,
            cpus: count(get("processors_req"), "processors_req")?,
            state: JobState::parse(get("state")),
        }))
    })
}

/// Reads Alibaba's GPU v2023 pod list (`openb_pod_list_*.csv`). Times are seconds from the
/// trace start; run time is deletion minus scheduling (unknown for never-scheduled pods).
/// GPUs are `num_gpu × gpu_milli / 1000` (fractional for shared GPUs); CPUs are
/// `cpu_milli / 1000` rounded up. The trace has no user, account, job name or time limit:
/// the pod name becomes the id, QoS the qos, and history keys reduce to the GPU count.
pub fn load_openb(input: impl Read) -> Result<Vec<Job>, TraceError> {
    let table = Table::new(input, &["name", "num_gpu", "creation_time", "scheduled_time", "deletion_time"])?;
    table.each(|row| {
        let get = |c: &str| row.get(c);
        let submit = time(get("creation_time"), "creation_time")?.ok_or("no creation_time")?;
        let start = time(get("scheduled_time"), "scheduled_time")?;
        let end = time(get("deletion_time"), "deletion_time")?;
        let milli = match get("gpu_milli") {
            "" => 1000.0,
            m => float(m, "gpu_milli")?,
        };
        Ok(Some(Job {
            id: get("name").to_string(),
            user: String::new(),
            account: String::new(),
            name: String::new(),
            partition: get("gpu_spec").to_string(),
            qos: get("qos").to_string(),
            submit,
            start,
            end,
            runtime: start.zip(end).and_then(|(s, e)| u64::try_from(e - s).ok()),
            time_limit: None,
            gpus: float(get("num_gpu"), "num_gpu")? * milli / 1000.0,
            nodes: Some(1),
            cpus: Some((float(get("cpu_milli"), "cpu_milli")? / 1000.0).ceil().min(u32::MAX as f64) as u32),
            state: JobState::parse(get("pod_phase")),
        }))
    })
}

/// Reads SenseTime Helios's `cluster_log.csv` (published schema: `job_id, user, vc,
/// [jobname,] gpu_num, cpu_num, node_num, state, submit_time, start_time, end_time,
/// duration, queue`). The VC becomes the account; Helios records no time limits.
/// Tested on a hand-made sample of those columns: the real data is not available here.
pub fn load_helios(input: impl Read) -> Result<Vec<Job>, TraceError> {
    let table = Table::new(input, &["job_id", "user", "submit_time"])?;
    table.each(|row| {
        let get = |c: &str| row.get(c);
        let submit = time(get("submit_time"), "submit_time")?.ok_or("no submit_time")?;
        let (start, end) = (time(get("start_time"), "start_time")?, time(get("end_time"), "end_time")?);
        let runtime = match parse_secs(get("duration"), "duration")? {
            Some(d) => Some(d),
            None => start.zip(end).and_then(|(s, e)| u64::try_from(e - s).ok()),
        };
        Ok(Some(Job {
            id: get("job_id").to_string(),
            user: get("user").to_string(),
            account: get("vc").to_string(),
            name: get("jobname").to_string(),
            partition: String::new(),
            qos: String::new(),
            submit,
            start,
            end,
            runtime,
            time_limit: None,
            gpus: float(get("gpu_num"), "gpu_num")?,
            nodes: count(get("node_num"), "node_num")?,
            cpus: count(get("cpu_num"), "cpu_num")?,
            state: JobState::parse(get("state")),
        }))
    })
}

/// Reads Alibaba PAI 2020's `pai_job_table.csv`: no header (one is accepted), columns
/// `job_name, inst_id, user, status, start_time, end_time` with `start_time` the submission,
/// in seconds. Run time is end minus start; GPUs and CPUs come from the task table via
/// [`pai_add_tasks`]. Tested on hand-made rows of that schema (the data is not here).
pub fn load_pai(input: impl Read) -> Result<Vec<Job>, TraceError> {
    let mut reader = csv::ReaderBuilder::new().has_headers(false).flexible(false).from_reader(input);
    let mut jobs = Vec::new();
    let mut record = csv::StringRecord::new();
    while reader.read_record(&mut record).map_err(|e| csv_error(&e))? {
        let line = record.position().map_or(0, |p| p.line());
        let get = |i: usize| record.get(i).unwrap_or("").trim();
        if record.len() != 6 {
            return Err(TraceError::line(line, format!("expected 6 columns, found {}", record.len())));
        }
        if get(0) == "job_name" {
            continue;
        }
        let job = (|| -> Result<Job, String> {
            let submit = time(get(4), "start_time")?.ok_or("no start_time")?;
            let end = time(get(5), "end_time")?;
            Ok(Job {
                id: get(1).to_string(),
                user: get(2).to_string(),
                account: String::new(),
                name: get(0).to_string(),
                partition: String::new(),
                qos: String::new(),
                submit,
                start: None,
                end,
                runtime: end.and_then(|e| u64::try_from(e - submit).ok()),
                time_limit: None,
                gpus: 0.0,
                nodes: None,
                cpus: None,
                state: JobState::parse(get(3)),
            })
        })()
        .map_err(|e| TraceError::line(line, e))?;
        jobs.push(job);
    }
    Ok(jobs)
}

/// Adds PAI's `pai_task_table.csv` (no header: `job_name, task_name, inst_num, status,
/// start_time, end_time, plan_cpu, plan_mem, plan_gpu, gpu_type`; `plan_*` in percent of
/// one unit per instance) to jobs from [`load_pai`]: GPUs and CPUs summed over tasks, start
/// the earliest task start, run time from then on.
pub fn pai_add_tasks(jobs: &mut [Job], tasks: impl Read) -> Result<(), TraceError> {
    let mut reader = csv::ReaderBuilder::new().has_headers(false).flexible(false).from_reader(tasks);
    let mut per_job: HashMap<String, (f64, f64, Option<i64>)> = HashMap::new();
    let mut record = csv::StringRecord::new();
    while reader.read_record(&mut record).map_err(|e| csv_error(&e))? {
        let line = record.position().map_or(0, |p| p.line());
        let get = |i: usize| record.get(i).unwrap_or("").trim();
        if record.len() != 10 {
            return Err(TraceError::line(line, format!("expected 10 columns, found {}", record.len())));
        }
        if get(0) == "job_name" {
            continue;
        }
        let bad = |e: String| TraceError::line(line, e);
        let inst = float(get(2), "inst_num").map_err(bad)?;
        let e = per_job.entry(get(0).to_string()).or_default();
        e.0 += inst * float(get(8), "plan_gpu").map_err(bad)? / 100.0;
        e.1 += inst * float(get(6), "plan_cpu").map_err(bad)? / 100.0;
        if let Some(s) = time(get(4), "start_time").map_err(bad)? {
            e.2 = Some(e.2.map_or(s, |t: i64| t.min(s)));
        }
    }
    for job in jobs.iter_mut() {
        if let Some(&(gpus, cpus, start)) = per_job.get(&job.name) {
            job.gpus = gpus;
            job.cpus = Some(cpus.ceil().min(u32::MAX as f64) as u32);
            job.start = start;
            if let (Some(s), Some(e)) = (start, job.end) {
                job.runtime = u64::try_from(e - s).ok();
            }
        }
    }
    Ok(())
}
