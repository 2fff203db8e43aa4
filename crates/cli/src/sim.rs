//! `fairway sim`: replay a trace (or a synthetic workload) on a simulated GPU cluster under
//! several priority policies and compare them.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context as _};
use clap::Args;
use comfy_table::presets::{ASCII_MARKDOWN, UTF8_FULL_CONDENSED};
use comfy_table::{Cell, CellAlignment, Table};
use fairway_core::config::Seconds;
use fairway_core::predict::LearnedPredictor;
use fairway_core::preempt::PreemptConfig;
use fairway_core::topology::Topology;
use fairway_sim::{
    Cluster, Jitter, LimitStats, Metrics, Overrun, PlacementStats, Policy, PredictedLimits, PreemptStats, SimConfig,
    SimPreempt, Simulator, Workload,
};
use fairway_trace::synth::{self, SynthConfig};
use fairway_trace::Format;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

/// `fairway sim`.
#[derive(Args)]
pub struct SimArgs {
    /// The trace file (or use --synth).
    #[arg(long, requires = "format", conflicts_with = "synth")]
    trace: Option<PathBuf>,
    /// Its format: sacct, sacct-json, swf, eagle, openb, helios, philly, pai.
    #[arg(long, value_parser = |s: &str| s.parse::<Format>())]
    format: Option<Format>,
    /// Time zone of a `sacct -P` trace's times: `local`, `UTC` or an IANA name.
    #[arg(long, default_value = "local", value_parser = crate::predict::time_zone)]
    tz: jiff::tz::TimeZone,
    /// Simulate the synthetic AI workload of `fairway trace synth` instead of a trace.
    #[arg(long)]
    synth: bool,
    /// Synthetic jobs.
    #[arg(long, default_value_t = 5000)]
    jobs: usize,
    /// Synthetic workload seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Synthetic teams (accounts).
    #[arg(long, default_value_t = 5)]
    teams: usize,
    /// Synthetic users per team.
    #[arg(long, default_value_t = 4)]
    users_per_team: usize,
    /// Synthetic mean seconds between submissions outside working hours (a third of it in
    /// working hours): smaller means more load.
    #[arg(long, default_value_t = 600.0)]
    interarrival: f64,
    /// Policy to simulate: fifo, multifactor, fairway, sjf-oracle.
    #[arg(long, default_value = "fairway", value_parser = |s: &str| s.parse::<Policy>())]
    policy: Policy,
    /// Simulate several policies and compare them (comma-separated); overrides --policy.
    #[arg(long, value_delimiter = ',', value_parser = |s: &str| s.parse::<Policy>())]
    compare: Vec<Policy>,
    /// Nodes [default: 16, or the node list's].
    #[arg(long)]
    nodes: Option<u32>,
    /// GPUs per node [default: 8, or the topology's].
    #[arg(long)]
    gpus_per_node: Option<u32>,
    /// Give every node the GPUs of this topology file (config/topology/) and report which
    /// GPUs multi-GPU jobs get: Fairway's topology choice against the first free GPUs.
    #[arg(long)]
    topology: Option<PathBuf>,
    /// Take the nodes from Alibaba openb's node list CSV (`openb_node_list_gpu_node.csv`).
    #[arg(long, conflicts_with = "nodes")]
    node_list: Option<PathBuf>,
    /// Time limit of jobs whose trace has none (then also the longest a job runs): seconds,
    /// or Slurm time syntax (`3-00:00:00`).
    #[arg(long, default_value = "3-00:00:00", value_parser = duration)]
    default_limit: u64,
    /// Strict priority order instead of EASY backfill.
    #[arg(long)]
    no_backfill: bool,
    /// Seconds between priority recalculations and usage decay passes (PriorityCalcPeriod).
    #[arg(long, default_value_t = 60)]
    calc_period: i64,
    /// Fairway's weight_predicted_work [default: twice PriorityWeightFairshare].
    #[arg(long)]
    weight_predicted_work: Option<u32>,
    /// Take Fairway's terms from this fairway.toml's `[priority]` (weights, deadline_qos,
    /// max_wait), as the plugins read it: e.g. the shipped config/fairway.gpu-cluster.toml.
    #[arg(long, conflicts_with_all = ["weight_predicted_work", "max_wait", "max_wait_heavy_users"])]
    fairway_toml: Option<PathBuf>,
    /// A learned run-time model (`fairway predict train`): Fairway predicts with it, as the
    /// plugins do with fairway.toml's `[predictor] model`, instead of the last two runs.
    /// Train it on other jobs than those simulated, or the simulation sees the future.
    #[arg(long, conflicts_with = "perfect_prediction")]
    model: Option<PathBuf>,
    /// Let Fairway know each job's true run time, as the oracle does: how much better
    /// prediction could improve its schedule at most (an analysis aid, not a predictor).
    #[arg(long)]
    perfect_prediction: bool,
    /// Add 0..=N priority points of noise to every job's site factor, the same for every
    /// policy compared (an analysis aid: how much one job's wait moves when priorities
    /// change by next to nothing). Drawn per job from --jitter-seed.
    #[arg(long, default_value_t = 0)]
    jitter: u32,
    /// Which noise --jitter draws.
    #[arg(long, default_value_t = 1, requires = "jitter")]
    jitter_seed: u64,
    /// QoS priorities, as sacctmgr's `Priority=`: `NAME=PRIORITY` pairs, comma-separated
    /// (the synthetic workload has QoS `high` and `normal`); weighted by --weight-qos.
    #[arg(long, value_delimiter = ',', value_parser = parse_qos_priority, requires = "weight_qos")]
    qos_priority: Vec<(String, u32)>,
    /// PriorityWeightQOS.
    #[arg(long, default_value_t = 0)]
    weight_qos: u32,
    /// Fairway's max_wait (starvation bound): seconds or Slurm time syntax; 0 turns it off.
    #[arg(long, default_value = "2-00:00:00", value_parser = duration)]
    max_wait: u64,
    /// Lift the starving jobs of users below the upper quartile of fair share of those
    /// waiting too
    /// (`[priority] max_wait_heavy_users`).
    #[arg(long)]
    max_wait_heavy_users: bool,
    /// Give every job a `time=auto` limit, as job_submit/fairway does: its predicted run
    /// time plus --limit-margin, at most its own limit. `extend`: a limit about to expire is
    /// extended, up to the job's own (what priority/fairway does); `kill`: Slurm kills the
    /// job at it and the user submits it again.
    #[arg(long, value_parser = parse_overrun)]
    predicted_limits: Option<Overrun>,
    /// `[job_submit.time] auto_margin` for --predicted-limits.
    #[arg(long, default_value_t = 0.2, requires = "predicted_limits")]
    limit_margin: f64,
    /// `[job_submit.time] min_predicted_limit` for --predicted-limits: seconds or Slurm
    /// time syntax.
    #[arg(long, default_value = "10:00", value_parser = duration, requires = "predicted_limits")]
    min_predicted_limit: u64,
    /// PriorityDecayHalfLife: seconds or Slurm time syntax.
    #[arg(long, default_value = "7-00:00:00", value_parser = duration_u32)]
    half_life: u32,
    /// QoS preemption with requeue: `PREEMPTOR:VICTIM` pairs, comma-separated, as
    /// sacctmgr's `Preempt=` (the synthetic workload has QoS `high` and `normal`).
    #[arg(long, value_delimiter = ',', value_parser = parse_pair)]
    preempt: Vec<(String, String)>,
    /// How long a victim keeps its GPUs to checkpoint before it is requeued, resuming from
    /// that checkpoint (preempt/fairway's grace): seconds or Slurm time syntax; 0 requeues
    /// at once.
    #[arg(long, default_value = "0", value_parser = duration, requires = "preempt")]
    grace: u64,
    /// Victims' periodic checkpoints, this far apart (seconds or Slurm time syntax): what a
    /// victim requeued without grace resumes from [default: none, it starts over].
    #[arg(long, value_parser = duration, requires = "preempt")]
    checkpoint_every: Option<u64>,
    /// `[preempt] min_runtime`: a job this young is taken last (seconds or Slurm time syntax).
    #[arg(long, default_value = "10:00", value_parser = duration_u32, requires = "preempt")]
    min_runtime: u32,
    /// `[preempt] max_preemptions` (0 = no budget).
    #[arg(long, default_value_t = 3, requires = "preempt")]
    max_preemptions: u32,
    /// Print CSV instead of a table.
    #[arg(long, conflicts_with = "json")]
    csv: bool,
    /// Print JSON instead of a table.
    #[arg(long, conflicts_with = "markdown")]
    json: bool,
    /// Print the table as Markdown.
    #[arg(long, conflicts_with = "csv")]
    markdown: bool,
    /// Write CDFs of JCT and wait per policy to this SVG file.
    #[arg(long)]
    plot: Option<PathBuf>,
}

#[derive(Serialize)]
struct WorkloadSummary {
    source: String,
    jobs: usize,
    dropped: fairway_sim::Dropped,
    nodes: usize,
    gpus: u64,
    offered_load: f64,
}

#[derive(Serialize)]
struct Row {
    policy: String,
    #[serde(flatten)]
    metrics: Metrics,
    sim_seconds: f64,
    /// With --topology: node allocations of 2+ GPUs, and the share of them connected worse
    /// (NVLink, sockets) than as many GPUs of an idle node, under Fairway's choice and under
    /// first free.
    multi_gpu_allocations: Option<u64>,
    topology_nvlink_split: Option<f64>,
    topology_socket_split: Option<f64>,
    first_free_nvlink_split: Option<f64>,
    first_free_socket_split: Option<f64>,
    /// With --preempt.
    preemptions: Option<u64>,
    jobs_preempted: Option<u64>,
    lost_gpu_hours: Option<f64>,
    grace_gpu_hours: Option<f64>,
    /// With --predicted-limits.
    predicted_limits: Option<u64>,
    limit_extensions: Option<u64>,
    timeouts: Option<u64>,
    timeout_lost_gpu_hours: Option<f64>,
}

impl Row {
    fn new(
        policy: Policy,
        metrics: Metrics,
        sim_seconds: f64,
        p: Option<PlacementStats>,
        q: Option<PreemptStats>,
        l: Option<LimitStats>,
    ) -> Self {
        let share = |n: u64| p.map(|p| if p.multi_gpu == 0 { 0.0 } else { n as f64 / p.multi_gpu as f64 });
        Row {
            policy: policy.to_string(),
            metrics,
            sim_seconds,
            multi_gpu_allocations: p.map(|p| p.multi_gpu),
            topology_nvlink_split: share(p.map_or(0, |p| p.topology.nvlink_split)),
            topology_socket_split: share(p.map_or(0, |p| p.topology.socket_split)),
            first_free_nvlink_split: share(p.map_or(0, |p| p.first_free.nvlink_split)),
            first_free_socket_split: share(p.map_or(0, |p| p.first_free.socket_split)),
            preemptions: q.map(|q| q.preemptions),
            jobs_preempted: q.map(|q| q.jobs_preempted),
            lost_gpu_hours: q.map(|q| q.lost_gpu_seconds / 3600.0),
            grace_gpu_hours: q.map(|q| q.grace_gpu_seconds / 3600.0),
            predicted_limits: l.map(|l| l.predicted),
            limit_extensions: l.map(|l| l.extensions),
            timeouts: l.map(|l| l.timeouts),
            timeout_lost_gpu_hours: l.map(|l| l.lost_gpu_seconds / 3600.0),
        }
    }
}

fn parse_overrun(s: &str) -> Result<Overrun, String> {
    match s.trim() {
        "extend" => Ok(Overrun::Extend),
        "kill" => Ok(Overrun::Kill),
        _ => Err(format!("`{s}` is not extend or kill")),
    }
}

fn parse_pair(s: &str) -> Result<(String, String), String> {
    match s.split_once(':') {
        Some((a, b)) if !a.trim().is_empty() && !b.trim().is_empty() => Ok((a.trim().into(), b.trim().into())),
        _ => Err(format!("`{s}` is not PREEMPTOR:VICTIM (e.g. high:normal)")),
    }
}

fn parse_qos_priority(s: &str) -> Result<(String, u32), String> {
    let bad = || format!("`{s}` is not NAME=PRIORITY with PRIORITY from 0 to 4294967295 (e.g. high=1000)");
    match s.split_once('=') {
        Some((q, p)) if !q.trim().is_empty() => Ok((q.trim().into(), p.trim().parse().map_err(|_| bad())?)),
        _ => Err(bad()),
    }
}

/// Runs `fairway sim`.
pub fn sim(a: SimArgs) -> anyhow::Result<()> {
    let (trace, source) = match (&a.trace, a.format, a.synth) {
        (Some(path), Some(format), _) => {
            (fairway_trace::load_path_in(format, path, &a.tz)?, format!("{} ({format})", path.display()))
        }
        (None, _, true) => {
            let cfg = SynthConfig {
                jobs: a.jobs,
                seed: a.seed,
                teams: a.teams,
                users_per_team: a.users_per_team,
                mean_interarrival_s: a.interarrival,
                ..SynthConfig::default()
            };
            (
                synth::generate(&cfg),
                format!("synthetic ({} jobs, seed {}, interarrival {} s)", a.jobs, a.seed, a.interarrival),
            )
        }
        _ => return Err(crate::Usage("give --trace PATH --format FORMAT, or --synth".into()).into()),
    };
    let topology = match &a.topology {
        Some(path) => Some(Topology::load(path).context("topology file is invalid")?),
        None => None,
    };
    let cluster = match (&a.node_list, a.nodes) {
        (Some(path), _) => {
            let file = std::fs::File::open(path).with_context(|| path.display().to_string())?;
            Cluster::from_openb_nodes(std::io::BufReader::new(file))
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
        }
        (None, n) => {
            let whole = topology.as_ref().map(|t| t.gpus.iter().filter(|g| g.mig.is_empty()).count() as u32);
            Cluster::uniform(n.unwrap_or(16), a.gpus_per_node.or(whole).unwrap_or(8))
        }
    };
    if cluster.total_gpus() == 0 {
        bail!("the cluster has no GPUs");
    }
    let workload = Workload::prepare(&trace, &cluster, a.default_limit);
    if workload.jobs.is_empty() {
        bail!("no job of the trace can be simulated (none has a run time and GPUs)");
    }
    let summary = WorkloadSummary {
        source,
        jobs: workload.jobs.len(),
        dropped: workload.dropped,
        nodes: cluster.nodes.len(),
        gpus: cluster.total_gpus(),
        offered_load: workload.offered_load(&cluster),
    };
    let policies = if a.compare.is_empty() { vec![a.policy] } else { a.compare.clone() };
    let mut base = SimConfig {
        backfill: !a.no_backfill,
        calc_period: a.calc_period,
        half_life: a.half_life,
        ..SimConfig::default()
    };
    base.weights.qos = a.weight_qos;
    base.qos_priority = a.qos_priority.clone();
    if let Some(w) = a.weight_predicted_work {
        base.fairway.weight_predicted_work = w;
    }
    base.fairway.max_wait = (a.max_wait > 0).then_some(Seconds(a.max_wait));
    base.fairway.max_wait_heavy_users = a.max_wait_heavy_users;
    if let Some(path) = &a.fairway_toml {
        let config = fairway_core::Config::load(path)
            .context(crate::Invalid("fairway.toml"))?
            .with_context(|| format!("{} does not exist", path.display()))?;
        base.fairway = config.priority;
        // As job_submit/fairway sets limits: only `all_jobs` reaches jobs without a
        // `time=auto` directive, which no trace has.
        let t = &config.job_submit.time;
        if t.predicted_limits == fairway_core::submit::config::PredictedLimits::AllJobs && a.predicted_limits.is_none()
        {
            base.predicted_limits = Some(PredictedLimits {
                margin: t.auto_margin,
                overrun: Overrun::Extend,
                min_limit: t.min_predicted_limit.map_or(60, |s| s.0),
            });
        }
    }
    base.perfect_prediction = a.perfect_prediction;
    if let Some(overrun) = a.predicted_limits {
        base.predicted_limits =
            Some(PredictedLimits { margin: a.limit_margin, overrun, min_limit: a.min_predicted_limit });
    }
    base.jitter = (a.jitter > 0).then_some(Jitter { seed: a.jitter_seed, points: a.jitter });
    if !a.preempt.is_empty() {
        base.preempt = Some(SimPreempt {
            pairs: a.preempt.clone(),
            rules: PreemptConfig {
                min_runtime: a.min_runtime,
                max_preemptions: a.max_preemptions,
                ..Default::default()
            },
            grace: a.grace,
            checkpoint_every: a.checkpoint_every,
        });
        if let Some(p) = &base.preempt {
            p.validate().map_err(|e| anyhow::anyhow!("--preempt: {e}"))?;
        }
    }

    let model = match &a.model {
        Some(path) => {
            let m = LearnedPredictor::load(path)?;
            eprintln!(
                "fairway sim: Fairway predicts run times with {} (quantile {}, fit on {} jobs)",
                path.display(),
                m.calibration.quantile,
                m.calibration.fit_jobs
            );
            Some(m)
        }
        None => None,
    };

    let mut rows = Vec::new();
    let mut cdfs = Vec::new();
    for &policy in &policies {
        let bar = ProgressBar::new(workload.jobs.len() as u64);
        bar.set_style(
            ProgressStyle::with_template("{msg:>12} [{bar:40}] {pos}/{len} jobs [{elapsed}]")
                .expect("valid template")
                .progress_chars("=> "),
        );
        bar.set_message(policy.to_string());
        let started = Instant::now();
        let mut simulator = Simulator::new(&workload, &cluster, SimConfig { policy, ..base.clone() });
        if let Some(m) = &model {
            simulator = simulator.with_model(m);
        }
        if let Some(t) = &topology {
            simulator = simulator.with_topology(t).map_err(|e| anyhow::anyhow!("--topology: {e}"))?;
        }
        let result = simulator.run(&mut |done| bar.set_position(done as u64));
        let secs = started.elapsed().as_secs_f64();
        bar.finish_and_clear();
        eprintln!(
            "fairway sim: {policy}: {} jobs on {} GPUs simulated in {secs:.2} s ({} scheduling passes)",
            workload.jobs.len(),
            cluster.total_gpus(),
            result.passes
        );
        if a.plot.is_some() {
            let mut jct: Vec<f64> =
                workload.jobs.iter().zip(&result.outcomes).map(|(j, o)| (o.end - j.submit) as f64).collect();
            let mut wait: Vec<f64> =
                workload.jobs.iter().zip(&result.outcomes).map(|(j, o)| (o.start - j.submit) as f64).collect();
            jct.sort_by(f64::total_cmp);
            wait.sort_by(f64::total_cmp);
            cdfs.push((policy, jct, wait));
        }
        rows.push(Row::new(policy, result.metrics, secs, result.placement, result.preemption, result.limits));
    }

    if let Some(path) = &a.plot {
        plot(path, &summary, &cdfs).with_context(|| format!("writing {}", path.display()))?;
    }
    if a.json {
        #[derive(Serialize)]
        struct Out<'a> {
            workload: &'a WorkloadSummary,
            results: &'a [Row],
        }
        println!("{}", serde_json::to_string_pretty(&Out { workload: &summary, results: &rows })?);
    } else if a.csv {
        // csv cannot serialize the flattened metrics: one JSON object per row, its
        // fields as columns (policy first, the rest by name).
        let objects: Vec<serde_json::Map<String, serde_json::Value>> = rows
            .iter()
            .map(|r| match serde_json::to_value(r) {
                Ok(serde_json::Value::Object(m)) => Ok(m),
                Ok(_) => anyhow::bail!("a result row is not an object"),
                Err(e) => Err(e.into()),
            })
            .collect::<anyhow::Result<_>>()?;
        let mut columns: Vec<String> = objects.first().map(|o| o.keys().cloned().collect()).unwrap_or_default();
        columns.sort_by_key(|c| (c != "policy", c.clone()));
        let mut w = csv::Writer::from_writer(std::io::stdout());
        w.write_record(&columns)?;
        for o in &objects {
            w.write_record(columns.iter().map(|c| match o.get(c) {
                None | Some(serde_json::Value::Null) => String::new(),
                Some(serde_json::Value::String(s)) => s.clone(),
                Some(v) => v.to_string(),
            }))?;
        }
        w.flush()?;
    } else {
        print_table(&summary, &rows, a.markdown);
    }
    Ok(())
}

/// Seconds as s, min or h.
fn dur(s: f64) -> String {
    if s < 120.0 {
        format!("{s:.0} s")
    } else if s < 7200.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{:.2} h", s / 3600.0)
    }
}

fn print_table(s: &WorkloadSummary, rows: &[Row], markdown: bool) {
    let d = &s.dropped;
    println!(
        "{}: {} jobs on {} nodes / {} GPUs, offered load {:.2} (left out: {} without run time, {} without GPUs, {} too big; {} cut to their limit, {} reshaped)",
        s.source, s.jobs, s.nodes, s.gpus, s.offered_load, d.no_runtime, d.no_gpus, d.too_big, d.truncated, d.reshaped
    );
    let base = rows.iter().find(|r| r.policy == "multifactor").map(|r| &r.metrics);
    let ratio = |x: f64, b: Option<f64>| match b {
        Some(b) if b > 0.0 => format!("{:.2}", x / b),
        Some(_) if x == 0.0 => "1.00".into(),
        _ => "–".into(),
    };
    if markdown {
        println!();
    }
    let mut t = Table::new();
    t.load_preset(if markdown { ASCII_MARKDOWN } else { UTF8_FULL_CONDENSED });
    let large = rows.first().map_or(0, |r| r.metrics.large_gpus);
    t.set_header(vec![
        "policy".to_string(),
        "mean JCT".into(),
        "median JCT".into(),
        "mean wait".into(),
        "p95 wait".into(),
        "p99 wait".into(),
        "max wait".into(),
        "mean bsld".into(),
        "util".into(),
        "Jain (users)".into(),
        "share dev".into(),
        format!("p99 wait ≥{large} GPUs"),
        "JCT ÷ mf".into(),
        "p99 large ÷ mf".into(),
        "share dev ÷ mf".into(),
    ]);
    for r in rows {
        let m = &r.metrics;
        let mut cells = vec![Cell::new(&r.policy)];
        for text in [
            dur(m.mean_jct),
            dur(m.median_jct),
            dur(m.mean_wait),
            dur(m.p95_wait),
            dur(m.p99_wait),
            dur(m.max_wait),
            format!("{:.2}", m.mean_bsld),
            format!("{:.1}%", m.utilisation * 100.0),
            format!("{:.3}", m.jain_users),
            format!("{:.1}%", m.share_deviation * 100.0),
            dur(m.p99_wait_large),
            ratio(m.mean_jct, base.map(|b| b.mean_jct)),
            ratio(m.p99_wait_large, base.map(|b| b.p99_wait_large)),
            ratio(m.share_deviation, base.map(|b| b.share_deviation)),
        ] {
            cells.push(Cell::new(text).set_alignment(CellAlignment::Right));
        }
        t.add_row(cells);
    }
    println!("{t}");
    if rows.iter().any(|r| r.multi_gpu_allocations.is_some()) {
        print_placement(rows, markdown);
    }
    if rows.iter().any(|r| r.preemptions.is_some()) {
        print_preemption(rows, markdown);
    }
}

/// With --preempt: what preemption did and cost.
fn print_preemption(rows: &[Row], markdown: bool) {
    println!();
    let mut t = Table::new();
    t.load_preset(if markdown { ASCII_MARKDOWN } else { UTF8_FULL_CONDENSED });
    t.set_header(vec!["policy", "preemptions", "jobs preempted", "GPU-h redone", "GPU-h checkpointing in grace"]);
    for r in rows {
        let mut cells = vec![Cell::new(&r.policy)];
        for text in [
            r.preemptions.unwrap_or(0).to_string(),
            r.jobs_preempted.unwrap_or(0).to_string(),
            format!("{:.1}", r.lost_gpu_hours.unwrap_or(0.0)),
            format!("{:.1}", r.grace_gpu_hours.unwrap_or(0.0)),
        ] {
            cells.push(Cell::new(text).set_alignment(CellAlignment::Right));
        }
        t.add_row(cells);
    }
    println!("{t}");
}

/// With --topology: how the multi-GPU allocations inside nodes came out.
fn print_placement(rows: &[Row], markdown: bool) {
    println!();
    let mut t = Table::new();
    t.load_preset(if markdown { ASCII_MARKDOWN } else { UTF8_FULL_CONDENSED });
    t.set_header(vec![
        "policy",
        "node allocations of 2+ GPUs",
        "NVLink split: Fairway",
        "first free",
        "socket split: Fairway",
        "first free",
    ]);
    let pct = |x: Option<f64>| format!("{:.1}%", x.unwrap_or(0.0) * 100.0);
    for r in rows {
        let mut cells = vec![Cell::new(&r.policy)];
        for text in [
            r.multi_gpu_allocations.unwrap_or(0).to_string(),
            pct(r.topology_nvlink_split),
            pct(r.first_free_nvlink_split),
            pct(r.topology_socket_split),
            pct(r.first_free_socket_split),
        ] {
            cells.push(Cell::new(text).set_alignment(CellAlignment::Right));
        }
        t.add_row(cells);
    }
    println!("{t}");
}

type Cdf = (Policy, Vec<f64>, Vec<f64>);

/// CDFs of JCT (left) and wait (right), log x axis from 1 s.
fn plot(path: &std::path::Path, s: &WorkloadSummary, cdfs: &[Cdf]) -> anyhow::Result<()> {
    use plotters::prelude::*;
    let root = SVGBackend::new(path, (1200, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    let root = root
        .titled(&format!("{} jobs, {} GPUs, offered load {:.2}", s.jobs, s.gpus, s.offered_load), ("sans-serif", 18))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let (left, right) = root.split_horizontally(600);
    for (area, name, which) in [(left, "JCT", 0usize), (right, "wait", 1)] {
        let max = cdfs
            .iter()
            .flat_map(|(_, j, w)| if which == 0 { j.last() } else { w.last() })
            .fold(10.0f64, |a, &b| a.max(b * 1.2));
        let mut chart = ChartBuilder::on(&area)
            .caption(format!("CDF of {name}"), ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d((1f64..max).log_scale(), 0f64..1f64)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        chart
            .configure_mesh()
            .x_desc(format!("{name}, seconds (log; 0 drawn at 1)"))
            .y_desc("fraction of jobs")
            .draw()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        for (k, (policy, jct, wait)) in cdfs.iter().enumerate() {
            let values = if which == 0 { jct } else { wait };
            let n = values.len();
            let step = (n / 2000).max(1);
            let mut points: Vec<(f64, f64)> =
                values.iter().enumerate().step_by(step).map(|(i, v)| (v.max(1.0), (i + 1) as f64 / n as f64)).collect();
            if let Some(&v) = values.last() {
                points.push((v.max(1.0), 1.0));
            }
            let color = Palette99::pick(k).to_rgba();
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))
                .map_err(|e| anyhow::anyhow!("{e}"))?
                .label(policy.to_string())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}

/// A duration argument: whole seconds (`600`), or Slurm time syntax (`10:00`,
/// `2-00:00:00`) as fairway.toml and slurm.conf write it. A bare number is seconds here,
/// not Slurm's minutes, as every duration of `fairway sim` always was.
fn duration(s: &str) -> Result<u64, String> {
    if s.bytes().all(|b| b.is_ascii_digit()) && !s.is_empty() {
        return s.parse().map_err(|e| format!("`{s}`: {e}"));
    }
    fairway_core::time::parse_duration(s).map_err(|e| e.to_string())
}

fn duration_u32(s: &str) -> Result<u32, String> {
    duration(s).and_then(|v| u32::try_from(v).map_err(|_| format!("`{s}` is too long")))
}
