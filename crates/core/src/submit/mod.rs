//! Submission rules: what `job_submit/fairway` checks and fills in for each job.
//!
//! The plugin translates Slurm's `job_desc_msg_t` into a [`JobRequest`], calls
//! [`evaluate`], and writes back the fields that changed. The rules run in this order:
//!
//! 1. the workload directive ([`directive`]) is parsed strictly;
//! 2. tiers → hardware: a job that asked for no GPUs but described its model gets a GPU
//!    type, count and partition from the catalog; an under-provisioned request is
//!    refused with the arithmetic ([`memory`]);
//! 3. gang rules for multi-node GPU jobs: the same GPUs on every node, counts aligned
//!    to NVLink domains, tasks consistent with GPUs, optional switch locality;
//! 4. QoS: a default by workload tier, and the partition's allowed QoS;
//! 5. preemption readiness: `--requeue` and a warning signal for checkpointing jobs in
//!    preemptible QoS;
//! 6. binding defaults for GPU jobs;
//! 7. `time=auto` limits from the runtime prediction, and a record of every prediction.
//!
//! What the user asked for explicitly and what fits is never overridden, and nothing
//! here replaces Slurm's own association and QoS checks, which run afterwards.

pub mod config;
pub mod counters;
pub mod directive;
pub mod gres;
pub mod memory;
pub mod partitions;

use std::fmt::Write as _;

use self::config::{CpuBind, GpuType, JobSubmitConfig, PredictedLimits, WarnSignal};
use self::directive::{Directive, Tier};
use self::gres::GpuSpec;
use self::partitions::Partitions;
use crate::predict::JobKey;

/// The parts of a job request the rules read and may change. `None` = not given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobRequest {
    /// The uid the job runs as.
    pub user_id: u32,
    /// `--account`.
    pub account: Option<String>,
    /// The account Slurm gives the job when it names none: its user's default account
    /// (read from slurmctld's association manager). Only the run-time history's key reads
    /// it: the history learns a job under the account it ran in.
    pub default_account: Option<String>,
    /// `--job-name`.
    pub name: Option<String>,
    /// `--comment`.
    pub comment: Option<String>,
    /// `--extra` (23.02+).
    pub extra: Option<String>,
    /// Whether it has a batch script (false for `salloc`/`srun` allocations).
    pub batch: bool,
    /// `--partition` (may be a comma list).
    pub partition: Option<String>,
    /// `--qos`.
    pub qos: Option<String>,
    /// `--time`, minutes.
    pub time_limit: Option<u32>,
    /// `--nodes` (minimum).
    pub min_nodes: Option<u32>,
    /// `--ntasks`.
    pub num_tasks: Option<u32>,
    /// `--ntasks-per-node`.
    pub ntasks_per_node: Option<u32>,
    /// `tres_per_node` (`--gres`, `--gpus-per-node`).
    pub tres_per_node: Option<String>,
    /// `tres_per_job` (`--gpus`).
    pub tres_per_job: Option<String>,
    /// `tres_per_task` (`--gpus-per-task`).
    pub tres_per_task: Option<String>,
    /// `tres_per_socket` (`--gpus-per-socket`).
    pub tres_per_socket: Option<String>,
    /// `--switches` count.
    pub req_switch: Option<u32>,
    /// `--switches=…@time`, seconds.
    pub wait4switch: Option<u32>,
    /// `--requeue` / `--no-requeue`.
    pub requeue: Option<bool>,
    /// `--signal`, if given.
    pub warn: Option<Warn>,
    /// `--gpu-bind` as `gpu:<how>`.
    pub tres_bind: Option<String>,
    /// `SLURM_GPU_BIND` in a batch job's environment: the `--gpu-bind` its `srun` steps
    /// start with (sbatch exports the user's `--gpu-bind` there; a `tres_bind` set in
    /// slurmctld never reaches the steps otherwise).
    pub step_gpu_bind: Option<String>,
    /// `--cpu-bind`, when the user chose one (or the rules did).
    pub cpu_bind: Option<CpuBind>,
    /// `--admin-comment` (operators), and Fairway's prediction record.
    pub admin_comment: Option<String>,
}

/// `--signal=[B:]<sig>@<secs>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warn {
    /// Signal number.
    pub signal: u16,
    /// Seconds before the end (or preemption) it is sent.
    pub lead: u16,
    /// Only the batch shell.
    pub batch_only: bool,
}

impl JobRequest {
    /// The job as it will be after `update` (a `scontrol update` request, in which
    /// only the changed fields are set).
    pub fn updated_by(&self, update: &JobRequest) -> JobRequest {
        macro_rules! or {
            ($($f:ident),*) => { JobRequest { $($f: update.$f.clone().or_else(|| self.$f.clone()),)* ..self.clone() } };
        }
        or!(
            account,
            name,
            comment,
            extra,
            partition,
            qos,
            time_limit,
            min_nodes,
            num_tasks,
            ntasks_per_node,
            tres_per_node,
            tres_per_job,
            tres_per_task,
            tres_per_socket,
            req_switch,
            wait4switch,
            requeue,
            warn,
            tres_bind,
            cpu_bind,
            admin_comment
        )
    }

    /// The options set here that the rules govern, as sbatch spells them: in an update,
    /// what would need the job itself to check.
    pub fn ruled_options(&self) -> Vec<&'static str> {
        let mut set = Vec::new();
        macro_rules! ruled {
            ($($f:ident => $name:literal),*) => { $( if self.$f.is_some() { set.push($name); } )* };
        }
        ruled!(
            partition => "--partition",
            qos => "--qos",
            comment => "--comment",
            extra => "--extra",
            min_nodes => "--nodes",
            num_tasks => "--ntasks",
            ntasks_per_node => "--ntasks-per-node",
            tres_per_node => "--gres/--gpus-per-node",
            tres_per_job => "--gpus",
            tres_per_task => "--gpus-per-task",
            tres_per_socket => "--gpus-per-socket",
            req_switch => "--switches",
            wait4switch => "--switches",
            requeue => "--requeue",
            warn => "--signal",
            tres_bind => "--gpu-bind",
            cpu_bind => "--cpu-bind"
        );
        set.dedup();
        set
    }

    /// The GPUs requested per node (`--gres`, `--gpus-per-node`).
    fn per_node(&self) -> Result<Option<GpuSpec>, Rejection> {
        self.tres_per_node.as_deref().map_or(Ok(None), |t| gres::gpus(t).map_err(|e| Rejection::gres(e.to_string())))
    }

    /// The GPUs requested for the whole job (`--gpus`).
    fn per_job(&self) -> Result<Option<GpuSpec>, Rejection> {
        self.tres_per_job.as_deref().map_or(Ok(None), |t| gres::gpus(t).map_err(|e| Rejection::gres(e.to_string())))
    }

    fn asks_gpus_otherwise(&self) -> bool {
        [&self.tres_per_task, &self.tres_per_socket]
            .iter()
            .any(|t| t.as_deref().is_some_and(|t| gres::gpus(t).ok().flatten().is_some()))
    }

    fn nodes(&self) -> u32 {
        self.min_nodes.unwrap_or(1).max(1)
    }

    /// Total GPUs, when it can be told from the request.
    pub fn total_gpus(&self) -> u32 {
        match (self.per_node(), self.per_job()) {
            (Ok(Some(n)), _) => n.count.saturating_mul(self.nodes()),
            (_, Ok(Some(j))) => j.count,
            _ => 0,
        }
    }

    /// The predictor's key for this job.
    pub fn key(&self) -> JobKey {
        JobKey {
            user: self.user_id,
            account: self.account.clone().or_else(|| self.default_account.clone()).unwrap_or_default(),
            name: self.name.clone().unwrap_or_default(),
            gpus: self.total_gpus(),
        }
    }

    /// The partitions the job may run in: its own, or the default.
    fn partitions<'a>(&'a self, site: &'a Site<'_>) -> Vec<&'a str> {
        match self.partition.as_deref() {
            Some(p) => p.split(',').map(str::trim).filter(|p| !p.is_empty()).collect(),
            None => site.partitions.default_name().into_iter().collect(),
        }
    }
}

/// What the rules know about the site beyond `fairway.toml`.
pub struct Site<'a> {
    /// Partitions from `slurm.conf`.
    pub partitions: &'a Partitions,
    /// Runtime prediction (seconds) for a job, not capped here.
    pub predict: &'a dyn Fn(&crate::predict::JobRequest) -> Option<u64>,
    /// Now (Unix seconds): the submit time the predictor sees.
    pub now: i64,
}

/// Which Slurm error a refusal maps to (the second line `sbatch` prints).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RejectKind {
    /// The directive or another free-text field.
    Directive,
    /// GPU request: unreadable, too small or misshapen.
    Gres,
    /// Tasks inconsistent with GPUs.
    Tasks,
    /// QoS not allowed where asked.
    Qos,
    /// An update the rules cannot check (the job itself cannot be read).
    Unchecked,
}

/// A refused request: the message the user sees, and the kind of error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// What Slurm reports after the message.
    pub kind: RejectKind,
    /// The message, starting `fairway: `.
    pub message: String,
}

impl Rejection {
    fn new(kind: RejectKind, message: impl Into<String>) -> Self {
        Self { kind, message: format!("fairway: {}", message.into()) }
    }

    fn gres(message: String) -> Self {
        Self::new(RejectKind::Gres, message)
    }
}

/// What the rules decided for an accepted job.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The request after the rules: the plugin writes back what differs.
    pub job: JobRequest,
    /// Lines for the user (`sbatch: fairway: …`), one per change.
    pub notes: Vec<String>,
    /// The runtime prediction recorded for the job, seconds.
    pub predicted: Option<u64>,
}

/// Whether the rules may fill in defaults (submission) or only check (update).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `job_submit`: check and fill in.
    Submit,
    /// `job_modify`: check the job as it would be after the update; change nothing.
    Modify,
}

/// Applies the rules to a request.
pub fn evaluate(cfg: &JobSubmitConfig, site: &Site<'_>, req: &JobRequest, mode: Mode) -> Result<Outcome, Rejection> {
    let mut job = req.clone();
    let mut notes = Vec::new();
    let fill = mode == Mode::Submit;

    let directive = read_directive(&job)?;
    gpus_exist(site, &job)?;
    if let Some(d) = &directive {
        provision(cfg, site, &mut job, d, fill, &mut notes)?;
    }
    gang(cfg, site, &mut job, fill, &mut notes)?;
    qos(cfg, site, &mut job, directive.as_ref(), fill, &mut notes)?;
    if fill {
        if let Some(d) = &directive {
            checkpoint(cfg, &mut job, d, &mut notes);
        }
        binding(cfg, &mut job, &mut notes)?;
    }
    let predicted = if fill { time_limit(cfg, site, &mut job, directive.as_ref(), &mut notes) } else { None };
    if fill && cfg.record_changes && !notes.is_empty() {
        append_admin_comment(&mut job, &format!("{CHANGED}{}", notes.join(CHANGE_SEPARATOR)));
    }
    Ok(Outcome { job, notes, predicted })
}

/// Appends `record` to the job's admin comment, after what is there.
fn append_admin_comment(job: &mut JobRequest, record: &str) {
    job.admin_comment = Some(match job.admin_comment.take() {
        Some(a) if !a.is_empty() => format!("{a} {record}"),
        _ => record.to_string(),
    });
}

/// `job_modify` where the job being updated cannot be read (a build against Slurm's
/// public headers only). A user's change to an option the rules govern cannot be checked
/// against the job, and letting it through would make `scontrol update` a way around the
/// rules, so it is refused; other changes pass. Operators are not asked here.
pub fn check_update_without_job(update: &JobRequest) -> Result<(), Rejection> {
    let ruled = update.ruled_options();
    if ruled.is_empty() {
        return Ok(());
    }
    Err(Rejection::new(
        RejectKind::Unchecked,
        format!(
            "this Slurm build cannot show job_submit/fairway the job being updated, so a change of {} cannot be \
             checked against the site's rules; ask an operator to make it, or cancel the job and submit it again \
             with the new options",
            ruled.join(", ")
        ),
    ))
}

/// The directive from `--comment`, else `--extra`.
fn read_directive(job: &JobRequest) -> Result<Option<Directive>, Rejection> {
    for text in [&job.comment, &job.extra].into_iter().flatten() {
        if let Some(d) = directive::find(text).map_err(|e| Rejection::new(RejectKind::Directive, e.0))? {
            return Ok(Some(d));
        }
    }
    Ok(None)
}

/// Catalog types usable in the job's partitions (all types if it names none we know).
fn eligible<'c>(cfg: &'c JobSubmitConfig, site: &Site<'_>, job: &JobRequest) -> Vec<&'c GpuType> {
    let parts = job.partitions(site);
    let matching: Vec<&GpuType> =
        cfg.gpu.iter().filter(|g| parts.iter().any(|p| g.partitions.iter().any(|q| q == p))).collect();
    if matching.is_empty() && job.partition.is_none() {
        cfg.gpu.iter().collect()
    } else {
        matching
    }
}

/// `--nodes=2 --gpus-per-node=h100:8`, how a user would write a shape.
fn shape(nodes: u32, spec: &GpuSpec) -> String {
    if nodes > 1 {
        format!("--nodes={nodes} --gpus-per-node={}", spec.shown())
    } else {
        format!("--gpus-per-node={}", spec.shown())
    }
}

/// The shape holding `n` GPUs of type `g`: one node rounded up to a power of two (the
/// usual tensor-parallel sizes), or whole nodes.
fn shape_for(g: &GpuType, n: u32) -> (u32, GpuSpec) {
    let spec = |count| GpuSpec { gres_type: Some(g.name.clone()), count };
    if n <= g.per_node {
        let k = n.next_power_of_two();
        (1, spec(if k <= g.per_node { k } else { n }))
    } else {
        (n.div_ceil(g.per_node), spec(g.per_node))
    }
}

fn provision(
    cfg: &JobSubmitConfig,
    site: &Site<'_>,
    job: &mut JobRequest,
    d: &Directive,
    fill: bool,
    notes: &mut Vec<String>,
) -> Result<(), Rejection> {
    let Some(need) = memory::need(d) else { return Ok(()) };
    let what = memory::describe(d);
    let types = eligible(cfg, site, job);
    let (per_node, per_job) = (job.per_node()?, job.per_job()?);
    let asked = per_node.as_ref().map(|s| (s.clone(), s.count.saturating_mul(job.nodes()))).or(per_job.map(|s| {
        let c = s.count;
        (s, c)
    }));
    let Some((spec, total)) = asked else {
        if job.asks_gpus_otherwise() || !fill {
            return Ok(()); // per-task/per-socket shapes: left to the user and Slurm
        }
        // No GPUs asked for: choose them.
        let choice = types.iter().find_map(|g| need.min_gpus(g.memory_gb).map(|n| (*g, n)));
        let Some((g, n)) = choice else {
            return Err(Rejection::gres(format!(
                "{what} needs about {} of GPU memory, and its activations alone exceed one GPU of every type \
                 here; lower seq= or batch=",
                memory::bytes(need.total(1))
            )));
        };
        let (nodes, spec) = shape_for(g, n);
        let nodes = nodes.max(job.min_nodes.unwrap_or(0));
        job.tres_per_node = gres::with_gpus(job.tres_per_node.as_deref(), Some(&spec));
        job.min_nodes = (nodes > 1).then_some(nodes).or(job.min_nodes);
        let mut note =
            format!("{what} needs about {} of GPU memory; set {}", memory::bytes(need.total(n)), shape(nodes, &spec));
        if job.partition.is_none() {
            if let Some(p) = g.partitions.first() {
                job.partition = Some(p.clone());
                let _ = write!(note, " --partition={p}");
            }
        }
        notes.push(note);
        return Ok(());
    };
    // GPUs asked for: refuse only what cannot fit on any type the request allows.
    let candidates: Vec<&GpuType> = match &spec.gres_type {
        Some(t) => cfg.gpu.iter().filter(|g| &g.name == t).collect(),
        None => types.clone(),
    };
    if candidates.is_empty() {
        return Ok(()); // a type the catalog doesn't know: nothing to check against
    }
    if candidates.iter().any(|g| need.min_gpus(g.memory_gb).is_some_and(|n| n <= total)) {
        return Ok(());
    }
    // The largest GPUs allowed (the first such in catalog order) give the smallest ask.
    let g = candidates.iter().copied().reduce(|a, b| if b.memory_gb > a.memory_gb { b } else { a }).expect("not empty");
    let have = f64::from(total) * g.memory_gb;
    let mut msg = format!(
        "{what} needs about {} of GPU memory for {}{}; you asked for {total} × {} ({})",
        memory::bytes(need.total(total.max(1))),
        memory::state_words(d),
        if need.per_gpu > 0.0 { " plus activations" } else { "" },
        g.name,
        memory::gb(have),
    );
    match need.min_gpus(g.memory_gb) {
        Some(n) => {
            let (nodes, s) = shape_for(g, n);
            let _ = write!(msg, "; ask for at least {n} × {} ({})", g.name, shape(nodes, &s));
        }
        None => msg.push_str("; its activations alone exceed one GPU: lower seq= or batch="),
    }
    Err(Rejection::gres(msg))
}

/// Refuses GPUs that no node of the job's partitions has, naming what they have and
/// where the type is. Slurm refuses such a job too, but only as "Requested node
/// configuration is not available". Partitions whose nodes slurm.conf does not describe
/// are not judged.
fn gpus_exist(site: &Site<'_>, job: &JobRequest) -> Result<(), Rejection> {
    let names = job.partitions(site);
    let Some(parts) = names.iter().map(|n| site.partitions.with_gpus(n)).collect::<Option<Vec<_>>>() else {
        return Ok(());
    };
    if parts.is_empty() {
        return Ok(());
    }
    let listed = names.join(",");
    let has = |ty: Option<&str>| parts.iter().map(|p| p.most_gpus_per_node(ty)).max().unwrap_or(0);
    let described = || -> String {
        if parts.len() == 1 {
            return parts[0].gpus_described();
        }
        names.iter().zip(&parts).map(|(n, p)| format!("{n}: {}", p.gpus_described())).collect::<Vec<_>>().join("; ")
    };
    let elsewhere = |ty: Option<&str>, count: u32| -> String {
        // The default partition first: the one to suggest.
        let mut other: Vec<(&String, &partitions::Partition)> = site
            .partitions
            .0
            .iter()
            .filter(|(n, p)| !names.contains(&n.as_str()) && p.most_gpus_per_node(ty) >= count)
            .collect();
        other.sort_by_key(|(_, p)| !p.default);
        let other: Vec<&str> = other.iter().map(|(n, _)| n.as_str()).collect();
        match other.as_slice() {
            [] => String::new(),
            [one] => format!("; partition {one} has them: --partition={one}"),
            many => format!("; partitions {} have them: --partition={}", many.join(", "), many[0]),
        }
    };
    let per_node = job.per_node()?;
    let others = [job.per_job().ok().flatten(), gpu_spec(&job.tres_per_task), gpu_spec(&job.tres_per_socket)];
    for spec in per_node.iter().chain(others.iter().flatten()) {
        if let Some(t) = spec.gres_type.as_deref() {
            if has(Some(t)) == 0 {
                return Err(Rejection::gres(format!(
                    "no node of partition {listed} has GPUs of type {t} (they have {}){}",
                    described(),
                    elsewhere(Some(t), 1)
                )));
            }
        }
    }
    let Some(spec) = per_node else { return Ok(()) };
    let most = has(spec.gres_type.as_deref());
    if most >= spec.count {
        return Ok(());
    }
    let what = spec.gres_type.as_deref().map_or("GPUs".to_string(), |t| format!("GPUs of type {t}"));
    if most == 0 {
        return Err(Rejection::gres(format!(
            "no node of partition {listed} has {what} (they have {}){}",
            described(),
            elsewhere(None, 1)
        )));
    }
    let total = u64::from(spec.count) * u64::from(job.nodes());
    let nodes = u32::try_from(total.div_ceil(u64::from(most))).unwrap_or(u32::MAX);
    let fit = GpuSpec { count: u32::try_from(total.div_ceil(u64::from(nodes))).unwrap_or(most), ..spec.clone() };
    Err(Rejection::gres(format!(
        "no node of partition {listed} has {} {what} (at most {most} per node); spread them over more nodes, \
         e.g. {}{}",
        spec.count,
        shape(nodes, &fit),
        elsewhere(spec.gres_type.as_deref(), spec.count)
    )))
}

/// The GPUs of a per-task or per-socket request, when readable.
fn gpu_spec(tres: &Option<String>) -> Option<GpuSpec> {
    tres.as_deref().and_then(|t| gres::gpus(t).ok().flatten())
}

/// Whether `k` GPUs per node sit in whole NVLink domains of size `d` (or within one).
fn aligned(k: u32, d: u32) -> bool {
    (k <= d && d.is_multiple_of(k)) || k.is_multiple_of(d)
}

fn gang(
    cfg: &JobSubmitConfig,
    site: &Site<'_>,
    job: &mut JobRequest,
    fill: bool,
    notes: &mut Vec<String>,
) -> Result<(), Rejection> {
    let nodes = job.nodes();
    if nodes < 2 {
        return Ok(());
    }
    let mut per_node = job.per_node()?;
    if per_node.is_none() {
        let Some(j) = job.per_job()? else { return Ok(()) };
        let k = j.count.div_ceil(nodes);
        let even = GpuSpec { count: k, ..j.clone() };
        if !j.count.is_multiple_of(nodes) {
            return Err(Rejection::gres(format!(
                "a {nodes}-node job must have the same GPUs on every node, and {} GPUs do not split evenly \
                 over {nodes} nodes; nearest valid shape: {}",
                j.count,
                shape(nodes, &even)
            )));
        }
        if fill {
            job.tres_per_job = gres::with_gpus(job.tres_per_job.as_deref(), None);
            job.tres_per_node = gres::with_gpus(job.tres_per_node.as_deref(), Some(&even));
            notes.push(format!("--gpus={} over {nodes} nodes set as {}", j.count, shape(nodes, &even)));
        }
        per_node = Some(even);
    }
    let Some(spec) = per_node else { return Ok(()) };
    let k = spec.count;
    let types = eligible(cfg, site, job);
    let g = match &spec.gres_type {
        Some(t) => cfg.gpu.iter().find(|g| &g.name == t),
        None => {
            let mut names: Vec<&str> = types.iter().map(|g| g.name.as_str()).collect();
            names.dedup();
            if names.len() > 1 {
                let example = GpuSpec { gres_type: Some(types[0].name.clone()), count: k };
                return Err(Rejection::gres(format!(
                    "a {nodes}-node job must name one GPU type so that every node gets the same GPUs \
                     (here: {}); for example {}",
                    names.join(", "),
                    shape(nodes, &example)
                )));
            }
            types.first().copied()
        }
    };
    if let Some(g) = g {
        let d = g.domain();
        if k > g.per_node || !aligned(k, d) {
            let valid: Vec<u32> = (1..=g.per_node).filter(|&c| aligned(c, d)).collect();
            let up = valid.iter().copied().find(|&c| c >= k);
            let down = valid.iter().copied().rev().find(|&c| c < k);
            let best = up.or(down).unwrap_or(g.per_node);
            let alt = GpuSpec { count: best, ..spec.clone() };
            let why = if k > g.per_node {
                format!("a {} node has only {} GPUs", g.name, g.per_node)
            } else {
                format!("{k} GPUs per node straddle the NVLink domains of {d} GPUs on {} nodes", g.name)
            };
            let mut msg = format!("{why}; nearest valid shape: {}", shape(nodes, &alt));
            if let (Some(u), Some(dn)) = (up, down) {
                if u != best || dn != best {
                    let _ = write!(msg, " (or {})", shape(nodes, &GpuSpec { count: dn, ..spec.clone() }));
                }
            }
            return Err(Rejection::gres(msg));
        }
    }
    if let Some(t) = job.ntasks_per_node {
        if t != k && t != 1 {
            return Err(Rejection::new(
                RejectKind::Tasks,
                format!(
                    "--ntasks-per-node={t} does not match {k} GPUs per node; use --ntasks-per-node={k} \
                     (one rank per GPU) or --ntasks-per-node=1 (one launcher per node, e.g. torchrun)"
                ),
            ));
        }
    } else if let Some(n) = job.num_tasks {
        // u64: node and GPU counts come from the user and may be huge.
        let ranks = u64::from(nodes) * u64::from(k);
        if u64::from(n) != ranks && n != nodes {
            return Err(Rejection::new(
                RejectKind::Tasks,
                format!(
                    "--ntasks={n} does not match {nodes} nodes × {k} GPUs; use --ntasks={ranks} (one rank per GPU) \
                     or --ntasks={nodes} (one launcher per node)"
                ),
            ));
        }
    }
    if fill && job.req_switch.is_none() {
        let rules = job.partitions(site).iter().find_map(|p| cfg.partition.get(*p)).cloned();
        if let Some(sw) = rules.as_ref().and_then(|r| r.gang_switches) {
            let wait = rules.and_then(|r| r.gang_switches_wait).map(|s| u32::try_from(s.0).unwrap_or(u32::MAX));
            job.req_switch = Some(sw);
            job.wait4switch = wait;
            notes.push(match wait {
                Some(w) => format!("multi-node job kept within {sw} switch(es) for up to {w} s (--switches={sw}@{w})"),
                None => format!("multi-node job kept within {sw} switch(es) (--switches={sw})"),
            });
        }
    }
    Ok(())
}

fn qos(
    cfg: &JobSubmitConfig,
    site: &Site<'_>,
    job: &mut JobRequest,
    d: Option<&Directive>,
    fill: bool,
    notes: &mut Vec<String>,
) -> Result<(), Rejection> {
    let rules = &cfg.qos;
    if fill && job.qos.is_none() {
        let short = |max: Option<crate::config::Seconds>| matches!((job.time_limit, max), (Some(t), Some(m)) if u64::from(t) * 60 <= m.0);
        let tier = d.and_then(|d| d.tier).unwrap_or(if !job.batch && short(rules.interactive_max_time) {
            Tier::Interactive
        } else {
            Tier::Batch
        });
        let (name, qos) = match tier {
            Tier::Interactive => ("interactive", &rules.interactive),
            Tier::Batch => ("batch", &rules.batch),
            Tier::Opportunistic => ("opportunistic", &rules.opportunistic),
        };
        if let Some(q) = qos {
            job.qos = Some(q.clone());
            notes.push(format!("QoS {q} ({name} tier)"));
        }
    }
    let Some(list) = job.qos.as_deref() else { return Ok(()) };
    let parts = job.partitions(site);
    // Slurm 24.11 takes a list (`--qos=high,normal`) and may run the job under any of
    // them, in any of its partitions: each QoS must be allowed in every partition listed
    // (allowed in one only, `-p debug,gpu --qos=high` would let Slurm run it in debug).
    for q in qos_list(list) {
        let refused = parts
            .iter()
            .filter_map(|p| cfg.partition.get(*p).map(|r| (*p, &r.allowed_qos)))
            .find(|(_, allowed)| !allowed.is_empty() && !allowed.iter().any(|a| a == q));
        if let Some((p, allowed)) = refused {
            let among = if parts.len() > 1 { " (Slurm may run the job in any partition it lists)" } else { "" };
            return Err(Rejection::new(
                RejectKind::Qos,
                format!("QoS {q} is not allowed in partition {p}{among}; allowed there: {}", allowed.join(", ")),
            ));
        }
    }
    Ok(())
}

/// The QoS names of a request's `--qos` (one, or a comma-separated list on 24.11+).
fn qos_list(qos: &str) -> impl Iterator<Item = &str> {
    qos.split(',').map(str::trim).filter(|q| !q.is_empty())
}

fn checkpoint(cfg: &JobSubmitConfig, job: &mut JobRequest, d: &Directive, notes: &mut Vec<String>) {
    let (Some(ckpt), Some(list)) = (d.ckpt, job.qos.as_deref()) else { return };
    // With several QoS, one preemptible QoS is enough for the job to be preempted.
    let Some(q) = qos_list(list).find(|q| cfg.qos.preemptible.iter().any(|p| p == q)) else { return };
    let rules = &cfg.checkpoint;
    if job.requeue.is_none() {
        job.requeue = Some(true);
        notes.push(format!("--requeue: QoS {q} is preemptible and the job checkpoints"));
    }
    if job.warn.is_none() {
        let min = rules.min_lead.map_or(0, |s| s.0);
        let lead = ((f64::from(ckpt) * rules.lead_factor).ceil() as u64).max(min).min(u64::from(u16::MAX)) as u16;
        let WarnSignal { number, name, batch_only } = &rules.signal;
        job.warn = Some(Warn { signal: *number, lead, batch_only: *batch_only });
        notes.push(format!(
            "--signal={}{name}@{lead}: time to write a {ckpt} s checkpoint before preemption or the time limit",
            if *batch_only { "B:" } else { "" }
        ));
    }
}

fn binding(cfg: &JobSubmitConfig, job: &mut JobRequest, notes: &mut Vec<String>) -> Result<(), Rejection> {
    let gpus = job.per_node()?.is_some() || job.per_job()?.is_some() || job.asks_gpus_otherwise();
    if !gpus {
        return Ok(());
    }
    let rules = &cfg.binding;
    // SLURM_GPU_BIND already in the environment is the user's choice for the steps.
    if job.tres_bind.is_none() && job.step_gpu_bind.is_none() && !rules.gpu_bind.is_empty() {
        job.tres_bind = Some(format!("gpu:{}", rules.gpu_bind));
        if job.batch {
            job.step_gpu_bind = Some(rules.gpu_bind.clone());
        }
        notes.push(format!("--gpu-bind={}", rules.gpu_bind));
    }
    if job.cpu_bind.is_none() && rules.cpu_bind != CpuBind::None {
        job.cpu_bind = Some(rules.cpu_bind);
        notes.push(format!("--cpu-bind={}", format!("{:?}", rules.cpu_bind).to_ascii_lowercase()));
    }
    Ok(())
}

/// Sets `time=auto` limits; returns the prediction recorded for the job.
fn time_limit(
    cfg: &JobSubmitConfig,
    site: &Site<'_>,
    job: &mut JobRequest,
    d: Option<&Directive>,
    notes: &mut Vec<String>,
) -> Option<u64> {
    let raw = (site.predict)(&crate::predict::JobRequest {
        key: job.key(),
        time_limit: job.time_limit.map(|m| u64::from(m) * 60),
        nodes: job.min_nodes,
        cpus: job.num_tasks,
        submit: site.now,
    });
    let limit_secs = job.time_limit.map(|m| u64::from(m) * 60);
    let predicted = match (raw, limit_secs) {
        (Some(p), Some(l)) => Some(p.min(l)),
        (p, _) => p,
    };
    let asked = d.is_some_and(|d| d.time_auto);
    let mode = cfg.time.predicted_limits;
    if mode != PredictedLimits::OnRequest && (asked || mode == PredictedLimits::AllJobs) {
        extended_limit(cfg, site, job, raw, asked, notes);
    } else if asked {
        match (job.time_limit, raw) {
            (Some(_), _) => notes.push("time=auto ignored: --time was given".into()),
            (None, Some(p)) => {
                let want = crate::limits::auto_limit_minutes(p, cfg.time.auto_margin, None);
                let cap = job.partitions(site).iter().filter_map(|p| site.partitions.max_time(p)).max();
                let minutes = crate::limits::auto_limit_minutes(p, cfg.time.auto_margin, cap);
                job.time_limit = Some(minutes);
                notes.push(format!(
                    "--time={minutes} (minutes) from the predicted run time of {p} s plus {:.0}%{}",
                    cfg.time.auto_margin * 100.0,
                    if cap.is_some_and(|c| c < want) { ", capped by the partition's MaxTime" } else { "" }
                ));
            }
            (None, None) => notes
                .push("time=auto: no run history for this job yet; the partition's default time limit applies".into()),
        }
    }
    if cfg.time.record_prediction {
        append_admin_comment(job, &format!("{RECORD}{}", predicted.map_or("unknown".into(), |p| p.to_string())));
    }
    predicted
}

/// A predicted limit that priority/fairway extends before it expires, up to the limit the
/// job would have had without it (its `--time`, else the partition's MaxTime), which is
/// recorded in its admin comment (`fairway_core::limits::record`).
fn extended_limit(
    cfg: &JobSubmitConfig,
    site: &Site<'_>,
    job: &mut JobRequest,
    raw: Option<u64>,
    asked: bool,
    notes: &mut Vec<String>,
) {
    let Some(p) = raw else {
        if asked {
            notes.push("time=auto: no run history for this job yet; its own time limit applies".into());
        }
        return;
    };
    // Slurm's NO_VAL is "not set", never a limit to grow to: leave such a request alone.
    if job.time_limit == Some(crate::limits::UNLIMITED - 1) {
        return;
    }
    let cap = job
        .time_limit
        .or_else(|| job.partitions(site).iter().filter_map(|p| site.partitions.max_time(p)).max())
        .unwrap_or(crate::limits::UNLIMITED);
    let floor = cfg.time.min_predicted_limit.map_or(0, |s| s.0);
    let Some(minutes) = crate::limits::extendable_limit(p, cfg.time.auto_margin, floor, cap) else { return };
    job.time_limit = Some(minutes);
    append_admin_comment(job, &crate::limits::record(cap));
    let most = if cap == crate::limits::UNLIMITED { "no limit".to_string() } else { format!("{cap} minutes") };
    notes.push(format!(
        "--time={minutes} (minutes) from the predicted run time of {p} s plus {:.0}%, extended before it \
         runs out up to {most}",
        cfg.time.auto_margin * 100.0
    ));
}

/// How a job's predicted run time is recorded in its admin comment
/// (`[job_submit.time] record_prediction`), followed by the seconds or `unknown`.
pub const RECORD: &str = "fairway:predicted_runtime=";

/// How the rules' changes to a job are recorded in its admin comment
/// (`[job_submit] record_changes`), followed by the notes the user saw, separated by
/// [`CHANGE_SEPARATOR`].
pub const CHANGED: &str = "fairway:changed=";

/// Between two recorded changes (a note may itself hold `; `).
pub const CHANGE_SEPARATOR: &str = " | ";

/// The changes recorded in an admin comment (the last record), when there are any: the
/// text after [`CHANGED`] up to the next `fairway:` record or the end.
pub fn recorded_changes(admin_comment: &str) -> Option<Vec<String>> {
    let at = admin_comment.rfind(CHANGED)?;
    let rest = &admin_comment[at + CHANGED.len()..];
    let text = rest.find(" fairway:").map_or(rest, |end| &rest[..end]);
    let notes: Vec<String> =
        text.split(CHANGE_SEPARATOR).map(str::trim).filter(|n| !n.is_empty()).map(String::from).collect();
    (!notes.is_empty()).then_some(notes)
}

/// The predicted run time recorded in an admin comment (the last record, if an
/// administrator appended text or a job was resubmitted), when there is one.
pub fn recorded_prediction(admin_comment: &str) -> Option<u64> {
    admin_comment.split_whitespace().rev().find_map(|w| w.strip_prefix(RECORD)).and_then(|v| v.parse().ok())
}

#[cfg(test)]
mod tests;
