//! `fairway explain`: why a job waits, in plain words, from what Slurm's own commands
//! show about it (`scontrol show job`, `sprio`, `squeue`, `sshare`).
//!
//! Everything here is pure: the CLI runs the commands as the user who asks (so Slurm's
//! `PrivateData` decides what they may see, as for squeue and sprio) and hands their
//! output over; this module parses it and decides what to say.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::dashboard::{PrivateData, Viewer};

use crate::config::Seconds;
use crate::status::{JobTerms, Status, StatusError};

/// `scontrol show job -o` as key → value (values may hold spaces, e.g. `Command=`). A
/// token is a new key when it looks like one of Slurm's (`Capitalized=`); anything else
/// continues the previous value. A value with a space and a `Capitalized=` word in it
/// (a job comment can be anything) is cut there: explain reads no such field.
pub fn parse_scontrol_job(line: &str) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    let mut last: Option<String> = None;
    for tok in line.split_whitespace() {
        let key = tok.split_once('=').map(|(k, _)| k).filter(|k| {
            k.starts_with(|c: char| c.is_ascii_uppercase())
                && k.chars().all(|c| c.is_ascii_alphanumeric() || c == ':' || c == '/' || c == '_')
        });
        match key {
            Some(k) => {
                let v = &tok[k.len() + 1..];
                out.insert(k.to_string(), v.to_string());
                last = Some(k.to_string());
            }
            None => {
                if let Some(v) = last.as_ref().and_then(|k| out.get_mut(k)) {
                    v.push(' ');
                    v.push_str(tok);
                }
            }
        }
    }
    out
}

/// One sprio row: the job's priority in one partition, factor by factor, weighted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PriorityRow {
    /// The partition (sprio shows a row per partition of a multi-partition job).
    pub partition: String,
    /// The priority.
    pub priority: u64,
    /// Weighted factors in sprio's order: AGE, ASSOC, FAIRSHARE, JOBSIZE, PARTITION, QOS,
    /// SITE (Fairway's terms, under priority/fairway or site_factor/fairway).
    pub factors: Vec<(String, f64)>,
    /// NICE (subtracted).
    pub nice: i64,
    /// TRES factors as sprio prints them (`cpu=12,gres/gpu=400`), empty when none.
    pub tres: String,
}

/// The sprio format `parse_sprio` reads.
pub const SPRIO_FORMAT: &str = "%i|%r|%Y|%A|%B|%F|%J|%P|%Q|%S|%N|%T";

const FACTOR_NAMES: [&str; 7] = ["age", "assoc", "fairshare", "jobsize", "partition", "qos", "site (Fairway)"];

/// Rows of `sprio -h -o SPRIO_FORMAT` for job `job`.
pub fn parse_sprio(text: &str, job: &str) -> Vec<PriorityRow> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('|').map(str::trim).collect();
            if f.len() < 12 || f[0] != job {
                return None;
            }
            let num = |s: &str| s.parse::<f64>().unwrap_or(0.0);
            Some(PriorityRow {
                partition: f[1].to_string(),
                priority: f[2].parse().unwrap_or(0),
                factors: FACTOR_NAMES.iter().zip(&f[3..10]).map(|(n, v)| (n.to_string(), num(v))).collect(),
                nice: f[10].parse().unwrap_or(0),
                tres: f[11].to_string(),
            })
        })
        .collect()
}

/// Where a pending job stands in one partition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueuePosition {
    /// The partition.
    pub partition: String,
    /// 1 = next.
    pub position: usize,
    /// Pending jobs ahead of it (higher priority, or equal and older).
    pub ahead: usize,
    /// GPUs those jobs ask for, as far as squeue shows (`gres/gpu` per node × nodes).
    pub gpus_ahead: u64,
}

/// The job's place among the pending jobs of `partition`, from `squeue -h -t PD -p P -o
/// "%i|%Q|%D|%b"` (id, priority, nodes, GRES per node).
pub fn queue_position(squeue: &str, job: &str, partition: &str) -> Option<QueuePosition> {
    let rows: Vec<(String, u64, u64, u64)> = squeue
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('|').map(str::trim).collect();
            let [id, prio, nodes, gres] = f.as_slice() else { return None };
            Some((id.to_string(), prio.parse().ok()?, nodes.parse().unwrap_or(1), crate::metrics::gpus_per_node(gres)))
        })
        .collect();
    let mine = rows.iter().find(|r| r.0 == job)?.1;
    // Slurm's queue order: priority, then the older job (lower id) on a tie.
    let id = |s: &str| s.parse::<u64>().ok();
    let before =
        |r: &&(String, u64, u64, u64)| r.1 > mine || (r.1 == mine && id(&r.0).zip(id(job)).is_some_and(|(a, b)| a < b));
    let ahead: Vec<_> = rows.iter().filter(|r| r.0 != job).filter(before).collect();
    Some(QueuePosition {
        partition: partition.to_string(),
        position: ahead.len() + 1,
        ahead: ahead.len(),
        gpus_ahead: ahead.iter().map(|r| r.2 * r.3).sum(),
    })
}

/// Why a job waits and what can be done, for one Slurm reason code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Blocker {
    /// Slurm's reason code, as squeue prints it.
    pub reason: String,
    /// What it means for this job.
    pub why: String,
    /// What the user (or their admin) can do.
    pub fix: String,
}

/// Turns Slurm's pending reason into plain words, with the job's own fields.
pub fn blocker(job: &BTreeMap<String, String>) -> Blocker {
    let get = |k: &str| job.get(k).map(String::as_str).unwrap_or("");
    let reason = get("Reason").to_string();
    let id = get("JobId");
    let qos = get("QOS");
    let account = get("Account");
    let (why, fix) = match reason.as_str() {
        "Priority" => (
            "jobs of higher priority wait ahead of it for the same resources".to_string(),
            "nothing is wrong: it starts when those have; the priority breakdown below shows what \
             raises it (usage decays, age grows)"
                .to_string(),
        ),
        "Resources" => (
            "it is next in line, waiting for enough free nodes, GPUs or memory".to_string(),
            match get("StartTime") {
                "" | "Unknown" | "None" => "nothing is wrong; Slurm has not estimated its start yet (backfill does, \
                                             each bf_interval)"
                    .to_string(),
                t => format!("nothing is wrong; Slurm's expected start: {t}"),
            },
        ),
        "None" | "" => {
            ("the scheduler has not considered it yet".into(), "wait for the next scheduling pass (seconds)".into())
        }
        "Dependency" => (
            format!("it waits for its dependency ({}) to be satisfied", get("Dependency")),
            "it starts once those jobs reach the state the dependency names".into(),
        ),
        "DependencyNeverSatisfied" => (
            format!("its dependency ({}) can no longer be satisfied (a job it needs failed)", get("Dependency")),
            format!("it will never start as it is: `scancel {id}`, or `scontrol update JobId={id} Dependency=`"),
        ),
        "BeginTime" => (
            format!("it was asked not to start before {}", get("EligibleTime")),
            format!("`scontrol update JobId={id} StartTime=now` to start it sooner"),
        ),
        "JobHeldUser" => ("you (or the job's owner) held it".into(), format!("`scontrol release {id}`")),
        "JobHeldAdmin" => ("an administrator held it".into(), "ask your Slurm administrators why".into()),
        "PartitionTimeLimit" => (
            format!("its time limit ({}) is above the partition's MaxTime", get("TimeLimit")),
            format!(
                "`scontrol update JobId={id} TimeLimit=...` within `scontrol show partition {}`'s MaxTime",
                get("Partition")
            ),
        ),
        "PartitionNodeLimit" => (
            "it asks for more nodes than the partition allows a job".into(),
            "ask for fewer nodes, or another partition (`sinfo -s`)".into(),
        ),
        "PartitionDown" | "PartitionInactive" => (
            format!("partition {} is not accepting jobs to run", get("Partition")),
            "it starts when the partition is up again; `sinfo -p` shows its state".into(),
        ),
        "Reservation" => (
            format!("it waits for its reservation ({}) to start", get("Reservation")),
            "`scontrol show reservation` shows when".into(),
        ),
        "BadConstraints" => (
            "no node can ever satisfy what it asks for (GPU type or count, features, memory)".into(),
            format!("compare `scontrol show job {id}` with `sinfo -o \"%N %G %f %m\"`, then `scancel` and resubmit"),
        ),
        "InvalidQOS" | "InvalidAccount" => (
            format!("its QoS ({qos}) or account ({account}) is not valid for this user or partition"),
            "`sacctmgr show assoc user=$USER format=Account,QOS` lists what you may use".into(),
        ),
        r if r.starts_with("ReqNodeNotAvail") => {
            ("nodes it needs are down, drained or reserved".into(), "`sinfo -R` lists why nodes are unavailable".into())
        }
        r if r.starts_with("QOS") => (
            format!("the QoS {qos} has reached a limit ({})", limit_words(&r[3..])),
            format!(
                "it starts when the QoS's running jobs free it; `sacctmgr show qos {qos} \
                 format=Name,GrpTRES,MaxTRESPU,MaxJobsPU,MaxSubmitJobsPU` shows the limits"
            ),
        ),
        r if r.starts_with("Assoc") => (
            format!("account {account} (or its parents) has reached a limit ({})", limit_words(&r[5..])),
            format!(
                "it starts when the account's running jobs free it; `sacctmgr show assoc account={account} \
                 format=Account,User,GrpTRES,MaxJobs,MaxTRES` shows the limits"
            ),
        ),
        r => (format!("Slurm says `{r}`"), "see `man squeue`, JOB REASON CODES".into()),
    };
    Blocker { reason, why, fix }
}

/// `GrpCpuLimit` → `Grp Cpu Limit`: Slurm's limit names, spaced.
fn limit_words(code: &str) -> String {
    let mut out = String::new();
    let mut prev_upper = true;
    for c in code.chars() {
        if c.is_ascii_uppercase() && !prev_upper {
            out.push(' ');
        }
        prev_upper = c.is_ascii_uppercase();
        out.push(c);
    }
    out
}

/// Job `job`'s terms from the status read at `path` at `now`, or what to tell the user
/// instead: not readable here (another host, or PrivateData=jobs), stale, every term off,
/// or not in a pass yet.
pub fn fairway_terms(
    path: &std::path::Path,
    read: Result<Status, StatusError>,
    job: u32,
    now: i64,
) -> Result<JobTerms, String> {
    let s = match read {
        Ok(s) => s,
        Err(e) if e.is_unreadable() => {
            return Err(format!(
                "not readable here ({}): priority/fairway writes them there on the controller after each pass, \
                 readable by every user unless PrivateData=jobs",
                path.display()
            ))
        }
        Err(e) => return Err(e.to_string()),
    };
    if s.is_stale(now) {
        let age = Seconds((now - s.pass_started).max(0) as u64);
        return Err(format!("the last pass written is {age} old: is priority/fairway running?"));
    }
    match s.job(job) {
        Some(t) => Ok(t.clone()),
        None if !s.any_term_on() => Err("every term is off in fairway.toml ([priority])".into()),
        None => Err("not in the last pass yet (it comes every PriorityCalcPeriod)".into()),
    }
}

/// The starvation bound, as seen from one job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Starvation {
    /// `[priority] max_wait`, seconds.
    pub max_wait: u64,
    /// Seconds the job has been eligible (since its AccrueTime).
    pub waited: u64,
}

/// `sshare -a -h -P -o SSHARE_FORMAT`: every association the caller may see, in tree
/// order, accounts indented by their depth.
pub const SSHARE_FORMAT: &str = "Account,User,RawShares,NormShares,RawUsage,EffectvUsage,FairShare,LevelFS";

/// One level of the path from the root account to the job's user, as sshare prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShareLevel {
    /// The account, or the user at the last level.
    pub name: String,
    /// Shares granted (sshare RawShares; empty for root).
    pub raw_shares: String,
    /// Shares among its siblings (NormShares).
    pub norm_shares: String,
    /// Decayed usage, in CPU-seconds (or billing), as sshare's RawUsage.
    pub raw_usage: String,
    /// Usage relative to the siblings' (EffectvUsage).
    pub effective_usage: String,
    /// Fair Tree's level fair share, shares over usage (LevelFS; empty under classic).
    pub level_fs: String,
}

/// Where the job's user stands in fair share.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FairShare {
    /// From the root account down to the user.
    pub path: Vec<ShareLevel>,
    /// The user's fair-share factor (sshare FairShare), what sprio's FAIRSHARE weighs.
    pub factor: String,
    /// The user's place by that factor among the user associations the caller can see
    /// (1 goes first on fair share), and how many there are.
    pub rank: Option<(usize, usize)>,
}

/// The path from the root to `user` in `account`, and the user's rank, from what sshare
/// printed in [`SSHARE_FORMAT`]; `None` when sshare does not show that association.
pub fn fair_share(sshare: &str, user: &str, account: &str) -> Option<FairShare> {
    let mut parents: Vec<(usize, ShareLevel)> = Vec::new();
    let mut found = None;
    let mut factors = Vec::new();
    for l in sshare.lines() {
        let f: Vec<&str> = l.split('|').collect();
        let [acct, name, raw_shares, norm_shares, raw_usage, effective, factor, level_fs] = f.as_slice() else {
            continue;
        };
        let depth = acct.len() - acct.trim_start().len();
        let (acct, name) = (acct.trim(), name.trim());
        // Pop to this row's parent: accounts deeper than or as deep as this row.
        while parents.last().is_some_and(|(d, _)| *d >= depth) {
            parents.pop();
        }
        let level = ShareLevel {
            name: if name.is_empty() { acct } else { name }.to_string(),
            raw_shares: raw_shares.trim().to_string(),
            norm_shares: norm_shares.trim().to_string(),
            raw_usage: raw_usage.trim().to_string(),
            effective_usage: effective.trim().to_string(),
            level_fs: level_fs.trim().to_string(),
        };
        if name.is_empty() {
            parents.push((depth, level));
            continue;
        }
        let value = factor.trim().parse::<f64>().ok();
        factors.extend(value);
        if name == user && acct == account && found.is_none() {
            let mut path: Vec<ShareLevel> = parents.iter().map(|(_, l)| l.clone()).collect();
            path.push(level);
            found = Some((path, factor.trim().to_string(), value));
        }
    }
    let (path, factor, value) = found?;
    let rank = value.map(|v| (1 + factors.iter().filter(|x| **x > v).count(), factors.len()));
    Some(FairShare { path, factor, rank })
}

/// `sinfo -N -h -O GPU_SINFO_FORMAT`: one row per node and partition, with why a node is
/// out.
pub const GPU_SINFO_FORMAT: &str = "NodeList:|,StateLong:|,Partition:|,Gres:|,Reason:|";

/// The nodes a GPU job could run on: those of its partitions with the GPUs it asks for
/// on each node, and whether each can start jobs now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuNodes {
    /// What it asks for on each node, as `--gpus-per-node` writes it (`h100:8`).
    pub per_node: String,
    /// How many nodes it needs.
    pub nodes: u32,
    /// The nodes of its partitions that have them.
    pub fitting: Vec<FittingNode>,
}

/// One node with the GPUs a job asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FittingNode {
    /// Its name.
    pub name: String,
    /// Slurm's state (`idle`, `drained`, `down*`, ...).
    pub state: String,
    /// Whether new jobs can start on it.
    pub usable: bool,
    /// Why it is out, as the admin who took it out wrote (sinfo's Reason).
    pub reason: String,
}

/// Which nodes of the job's partitions have the GPUs it asks for per node, from
/// `scontrol show job` and sinfo in [`GPU_SINFO_FORMAT`]. `None` for a job without GPUs,
/// or when sinfo shows no nodes (PrivateData=nodes).
pub fn gpu_nodes(job: &BTreeMap<String, String>, sinfo: &str) -> Option<GpuNodes> {
    let get = |k: &str| job.get(k).map(String::as_str).unwrap_or("");
    let nodes: u32 = get("NumNodes").split('-').next().and_then(|n| n.parse().ok()).unwrap_or(1).max(1);
    let spec = |k: &str| crate::submit::gres::gpus(get(k)).ok().flatten();
    let want = match (spec("TresPerNode"), spec("TresPerJob")) {
        (Some(s), _) => s,
        (None, Some(j)) => crate::submit::gres::GpuSpec { count: j.count.div_ceil(nodes), ..j },
        (None, None) => return None,
    };
    let partitions: Vec<&str> = get("Partition").split(',').collect();
    let mut fitting: Vec<FittingNode> = Vec::new();
    let mut seen = false;
    for l in sinfo.lines() {
        let f: Vec<&str> = l.split('|').map(str::trim).collect();
        let [name, state, partition, gres, reason, ..] = f.as_slice() else { continue };
        seen = true;
        if !partitions.contains(&partition.trim_end_matches('*')) || fitting.iter().any(|n| n.name == *name) {
            continue;
        }
        let Some(gpus) = crate::submit::partitions::node_gpus(gres) else { continue };
        if crate::submit::partitions::gpus_of_type(&gpus, want.gres_type.as_deref()) >= want.count {
            let usable = crate::dashboard::node_usable(state);
            let reason = if usable || *reason == "none" { String::new() } else { reason.to_string() };
            fitting.push(FittingNode { name: name.to_string(), state: state.to_string(), usable, reason });
        }
    }
    seen.then(|| GpuNodes { per_node: want.shown(), nodes, fitting })
}

impl GpuNodes {
    /// How many of the fitting nodes can start jobs now.
    pub fn usable(&self) -> usize {
        self.fitting.iter().filter(|n| n.usable).count()
    }

    fn render(&self, o: &mut String) {
        let _ = write!(o, "\nGPUs: it asks for {} on each of {} node(s)", self.per_node, self.nodes);
        if self.fitting.is_empty() {
            let _ = writeln!(
                o,
                "; no node of its partitions has that many: it cannot start as it is; `scancel` it and ask \
                 for a shape the nodes have (`sinfo -o \"%P %N %G\"` lists them)"
            );
            return;
        }
        let _ = writeln!(o, "; nodes of its partitions that have them:");
        for n in &self.fitting {
            let _ = match (n.usable, n.reason.as_str()) {
                (true, _) => writeln!(o, "  {:<12} {}", n.name, n.state),
                (false, "") => writeln!(o, "  {:<12} {}: cannot start jobs", n.name, n.state),
                (false, why) => writeln!(o, "  {:<12} {}: cannot start jobs ({why})", n.name, n.state),
            };
        }
        let usable = self.usable();
        if (usable as u64) < u64::from(self.nodes) {
            let _ = writeln!(
                o,
                "  only {usable} of them can start jobs now and it needs {}: it waits until nodes are back \
                 (`sinfo -R` says why they are out), or ask for fewer nodes",
                self.nodes
            );
        }
    }
}

/// Everything `fairway explain` says about one job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explanation {
    /// Job id.
    pub job: String,
    /// Its owner.
    pub user: String,
    /// Its account.
    pub account: String,
    /// Its QoS.
    pub qos: String,
    /// Slurm's state (PENDING, RUNNING, ...).
    pub state: String,
    /// Why it waits (pending jobs only).
    pub blocker: Option<Blocker>,
    /// The nodes that have the GPUs it asks for (pending GPU jobs, when sinfo shows nodes).
    pub gpu_nodes: Option<GpuNodes>,
    /// Its priority per partition, factor by factor (from sprio).
    pub priority: Vec<PriorityRow>,
    /// Its place in each partition's queue.
    pub queue: Vec<QueuePosition>,
    /// Slurm's expected start (`squeue --start`), when it has one.
    pub expected_start: Option<String>,
    /// Where the job's user stands in fair share (sshare), when sshare shows it.
    pub fair_share: Option<FairShare>,
    /// Fairway's starvation bound, when one is configured.
    pub starvation: Option<Starvation>,
    /// Fairway's terms of the job at priority/fairway's last pass (its status file).
    pub fairway_terms: Option<JobTerms>,
    /// Why they are not shown, when a pending job's are not.
    pub fairway_terms_note: Option<String>,
    /// What job_submit/fairway changed at submission, as recorded in the job's
    /// AdminComment (`[job_submit] record_changes`).
    pub submit_changes: Vec<String>,
}

impl Explanation {
    /// What `viewer` may see of it, as Slurm's commands run by them would show it:
    /// `None` for another user's job under `PrivateData=jobs`. Under `jobs` the queue
    /// position (which counts other users' jobs) is left out; under `usage` the fair-share
    /// path keeps only the viewer's own association and loses the rank among users.
    pub fn as_seen_by(mut self, viewer: &Viewer, private: PrivateData) -> Option<Self> {
        if viewer.sees_all {
            return Some(self);
        }
        if private.jobs {
            if self.user != viewer.user {
                return None;
            }
            self.queue.clear();
        }
        if private.nodes {
            self.gpu_nodes = None;
        }
        if private.usage {
            if let Some(fs) = &mut self.fair_share {
                fs.path.retain(|l| l.name == viewer.user);
                fs.rank = None;
            }
        }
        Some(self)
    }

    /// The text `fairway explain` prints.
    pub fn render(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "job {}: {} (user {}, account {}, QoS {})",
            self.job,
            self.state.to_lowercase(),
            self.user,
            self.account,
            self.qos
        );
        if !self.submit_changes.is_empty() {
            let _ = writeln!(o, "\njob_submit/fairway changed it at submission:");
            for c in &self.submit_changes {
                let _ = writeln!(o, "  - {c}");
            }
        }
        if let Some(b) = &self.blocker {
            let _ = writeln!(o, "\nwaiting: {} [{}]\n  what to do: {}", b.why, b.reason, b.fix);
        }
        if let Some(g) = &self.gpu_nodes {
            g.render(&mut o);
        }
        for row in &self.priority {
            let _ = writeln!(o, "\npriority {} in partition {} =", row.priority, row.partition);
            for (name, v) in &row.factors {
                if *v != 0.0 {
                    let _ = writeln!(o, "  {v:>12.0}  {name}");
                }
            }
            if row.nice != 0 {
                let _ = writeln!(o, "  {:>12}  nice", -row.nice);
            }
            if !row.tres.is_empty() {
                let _ = writeln!(o, "  (TRES factors: {})", row.tres);
            }
        }
        if let Some(t) = &self.fairway_terms {
            let _ = writeln!(o, "\nFairway's part of site: {:+} =", t.site_bonus);
            let expected = match (t.expected_runtime, t.runtime_source) {
                (Some(e), Some(src)) => format!("{} expected, from {src}", Seconds(e)),
                (Some(e), None) => format!("{} expected", Seconds(e)),
                (None, _) => "run time unknown: one day assumed".into(),
            };
            let _ = writeln!(o, "  {:>12.0}  predicted work ({expected})", t.predicted_work);
            if t.deadline != 0.0 {
                let _ = writeln!(o, "  {:>12.0}  deadline urgency", t.deadline);
            }
            if t.first {
                let _ = writeln!(o, "  it is the longest-starving job of its partition: it goes first");
            }
        } else if let Some(note) = &self.fairway_terms_note {
            let _ = writeln!(o, "\nFairway's terms: {note}");
        }
        for q in &self.queue {
            let _ = writeln!(
                o,
                "\nqueue {}: position {} ({} pending job(s) ahead, asking for {} GPU(s))",
                q.partition, q.position, q.ahead, q.gpus_ahead
            );
        }
        if let Some(s) = &self.expected_start {
            let _ = writeln!(o, "Slurm's expected start: {s}");
        }
        if let Some(fs) = &self.fair_share {
            let rank = match fs.rank {
                Some((r, n)) => format!(", {r} of {n} users you can see by that factor (1 goes first)"),
                None => String::new(),
            };
            let _ = writeln!(
                o,
                "\nfair share of {} in {}: factor {}{rank}\n  {:<16} {:>10} {:>10} {:>14} {:>10} {:>9}",
                self.user, self.account, fs.factor, "level", "shares", "of parent", "usage", "effective", "LevelFS"
            );
            let or = |s: &str, d: &'static str| if s.is_empty() { d.to_string() } else { s.to_string() };
            for (depth, l) in fs.path.iter().enumerate() {
                let _ = writeln!(
                    o,
                    "  {:<16} {:>10} {:>10} {:>14} {:>10} {:>9}",
                    format!("{}{}", " ".repeat(depth), l.name),
                    or(&l.raw_shares, "-"),
                    or(&l.norm_shares, "-"),
                    or(&l.raw_usage, "0"),
                    or(&l.effective_usage, "0"),
                    or(&l.level_fs, "-"),
                );
            }
        }
        if let Some(s) = &self.starvation {
            let (waited, max) = (Seconds(s.waited), Seconds(s.max_wait));
            let _ = match s.max_wait.checked_sub(s.waited).filter(|left| *left > 0) {
                Some(left) => writeln!(
                    o,
                    "\nstarvation bound: eligible for {waited} of max_wait's {max} ({} to go)",
                    Seconds(left)
                ),
                None if self.fairway_terms.as_ref().is_some_and(|t| t.held_by_fair_share) => writeln!(
                    o,
                    "\nstarvation bound: eligible for {waited}, past max_wait ({max}), but not lifted: its user's \
                     fair-share factor is not among the lightest quarter of the users with jobs pending, and \
                     max_wait lifts only theirs (fair share decides this wait)"
                ),
                None => writeln!(
                    o,
                    "\nstarving: eligible for {waited}, past max_wait ({max}): the longest-starving job of \
                     its partition goes first"
                ),
            };
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scontrol_fields_keep_values_with_spaces() {
        let j = parse_scontrol_job(
            "JobId=12 JobName=train UserId=fw_alice(2001) Reason=QOSGrpCpuLimit Dependency=(null) \
             Comment=fairway: model=7b ckpt=5m Partition=gpu",
        );
        assert_eq!(j["JobId"], "12");
        assert_eq!(j["Comment"], "fairway: model=7b ckpt=5m");
        assert_eq!(j["Partition"], "gpu");
    }

    #[test]
    fn fair_share_path_from_the_root_and_rank_among_users() {
        let sshare = "root|||1.000000|300|1.000000||\n\
                      \x20ml||100|1.000000|300|1.000000||1.0\n\
                      \x20 vision||60|0.600000|200|0.666667||0.9\n\
                      \x20  vision|fw_alice|1|0.500000|200|1.000000|0.400000|0.5\n\
                      \x20  vision|fw_carol|1|0.500000|0|0.000000|0.800000|inf\n\
                      \x20 nlp||40|0.400000|100|0.333333||1.2\n\
                      \x20  nlp|fw_alice|1|1.000000|100|1.000000|0.600000|1.0\n\
                      \x20  nlp|fw_bob|1|1.000000|0|0.000000|1.000000|inf\n";
        let fs = fair_share(sshare, "fw_alice", "nlp").unwrap();
        let names: Vec<&str> = fs.path.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["root", "ml", "nlp", "fw_alice"]);
        assert_eq!((fs.path[2].raw_shares.as_str(), fs.path[2].level_fs.as_str()), ("40", "1.2"));
        assert_eq!(fs.factor, "0.600000");
        assert_eq!(fs.rank, Some((3, 4)), "fw_bob 1.0 and fw_carol 0.8 go first");
        let vision = fair_share(sshare, "fw_alice", "vision").unwrap();
        assert_eq!(
            vision.path.iter().map(|l| l.name.as_str()).collect::<Vec<_>>(),
            ["root", "ml", "vision", "fw_alice"]
        );
        assert_eq!(vision.rank, Some((4, 4)));
        assert!(fair_share(sshare, "fw_bob", "vision").is_none());
        let e = Explanation { fair_share: Some(fs), ..sample() };
        let text = e.render();
        assert!(text.contains("factor 0.600000, 3 of 4 users you can see by that factor"), "{text}");
        let nlp = text.lines().find(|l| l.starts_with("    nlp ")).unwrap_or_default();
        let cols: Vec<&str> = nlp.split_whitespace().collect();
        assert_eq!(cols, ["nlp", "40", "0.400000", "100", "0.333333", "1.2"], "{text}");
    }

    #[test]
    fn sprio_rows_by_partition() {
        let rows = parse_sprio("12|gpu|1500|10|0|1000|5|0|0|485|0|\n13|gpu|1|0|0|0|0|0|0|0|0|\n", "12");
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].priority, 1500);
        assert_eq!(rows[0].factors[2], ("fairshare".to_string(), 1000.0));
        assert_eq!(rows[0].factors[6], ("site (Fairway)".to_string(), 485.0));
    }

    #[test]
    fn queue_position_counts_jobs_and_gpus_ahead() {
        let q = queue_position("10|900|2|gpu:4\n11|800|1|gres/gpu=2\n12|500|1|N/A\n13|100|1|gpu:h100:8\n", "12", "gpu")
            .unwrap();
        assert_eq!((q.position, q.ahead, q.gpus_ahead), (3, 2, 10));
        assert_eq!(queue_position("", "12", "gpu"), None);
        // Equal priority: the older job goes first, as in Slurm's queue.
        let tie = "9|500|1|N/A\n12|500|1|N/A\n14|500|1|N/A\n";
        assert_eq!(queue_position(tie, "12", "gpu").map(|q| q.position), Some(2));
    }

    /// A pending job of user `u` in account `a` with nothing known about it yet.
    fn sample() -> Explanation {
        Explanation {
            job: "7".into(),
            user: "u".into(),
            account: "a".into(),
            qos: "normal".into(),
            state: "PENDING".into(),
            blocker: None,
            gpu_nodes: None,
            priority: Vec::new(),
            queue: Vec::new(),
            expected_start: None,
            fair_share: None,
            starvation: None,
            fairway_terms: None,
            fairway_terms_note: None,
            submit_changes: Vec::new(),
        }
    }

    #[test]
    fn fairway_terms_one_by_one_or_why_not() {
        let e = Explanation {
            fairway_terms: Some(JobTerms {
                id: 7,
                predicted_work: 500.0,
                deadline: 250.4,
                site_bonus: 750,
                expected_runtime: Some(3600),
                runtime_source: Some(crate::predict::RuntimeSource::LastRuns),
                first: true,
                ..JobTerms::default()
            }),
            submit_changes: vec!["--time=75 (minutes) from the predicted run time of 3600 s plus 25%".into()],
            ..sample()
        };
        let text = e.render();
        assert!(text.contains("job_submit/fairway changed it at submission:\n  - --time=75 (minutes)"), "{text}");
        assert!(text.contains("Fairway's part of site: +750 ="), "{text}");
        assert!(text.contains("500  predicted work (01:00:00 expected, from the mean of your last two"), "{text}");
        assert!(text.contains("250  deadline urgency"), "{text}");
        assert!(text.contains("it goes first"), "{text}");
        let hidden = Explanation { fairway_terms: None, fairway_terms_note: Some("not readable here".into()), ..e };
        assert!(hidden.render().contains("Fairway's terms: not readable here"));
    }

    #[test]
    fn the_starvation_bound_to_go_past_it_or_held_back_by_fair_share() {
        let at = |waited, held_by_fair_share| {
            Explanation {
                starvation: Some(Starvation { max_wait: 3600, waited }),
                fairway_terms: Some(JobTerms { id: 7, held_by_fair_share, ..JobTerms::default() }),
                ..sample()
            }
            .render()
        };
        assert!(
            at(600, false).contains("eligible for 10:00 of max_wait's 01:00:00 (50:00 to go)"),
            "{}",
            at(600, false)
        );
        assert!(at(7200, false).contains("starving: eligible for 02:00:00, past max_wait"));
        let over = at(7200, true);
        assert!(
            over.contains("but not lifted: its user's fair-share factor is not among the lightest quarter"),
            "{over}"
        );
        assert!(!over.contains("goes first"), "{over}");
    }

    #[test]
    fn fairway_terms_from_the_status_or_why_not() {
        let path = std::path::Path::new("/var/spool/slurmctld/fairway-status.json");
        let status = Status {
            format: crate::status::FORMAT,
            pass_started: 1_000,
            calc_period: 60,
            weights: crate::status::TermWeights { predicted_work: 1000, deadline: 0 },
            jobs: vec![JobTerms { id: 7, site_bonus: 40, ..JobTerms::default() }],
            ..Status::default()
        };
        assert_eq!(fairway_terms(path, Ok(status.clone()), 7, 1_030).unwrap().site_bonus, 40);
        assert!(fairway_terms(path, Ok(status.clone()), 8, 1_030).unwrap_err().contains("not in the last pass yet"));
        assert!(fairway_terms(path, Ok(status.clone()), 7, 5_000)
            .unwrap_err()
            .contains("is priority/fairway running?"));
        let off = Status { weights: Default::default(), jobs: Vec::new(), ..status };
        assert!(fairway_terms(path, Ok(off), 7, 1_030).unwrap_err().contains("every term is off"));
        let unreadable = Status::read(std::path::Path::new("/nonexistent/fairway-status.json"));
        assert!(fairway_terms(path, unreadable, 7, 1_030).unwrap_err().starts_with("not readable here"));
    }

    #[test]
    fn reasons_in_plain_words_with_the_fix() {
        let job = |reason: &str| {
            parse_scontrol_job(&format!("JobId=7 Reason={reason} QOS=high Account=nlp Dependency=afterok:5"))
        };
        let b = blocker(&job("QOSGrpCpuLimit"));
        assert!(b.why.contains("QoS high has reached a limit (Grp Cpu Limit)"), "{b:?}");
        assert!(b.fix.contains("sacctmgr show qos high"), "{b:?}");
        assert!(blocker(&job("AssocGrpGRES")).why.contains("account nlp"));
        assert!(blocker(&job("Dependency")).why.contains("afterok:5"));
        assert!(blocker(&job("JobHeldUser")).fix.contains("scontrol release 7"));
        assert!(blocker(&job("BadConstraints")).why.contains("no node can ever"));
        assert!(blocker(&job("SomethingNew")).why.contains("SomethingNew"));
        assert!(blocker(&job("Resources")).fix.contains("not estimated its start yet"));
    }

    #[test]
    fn the_nodes_with_a_jobs_gpus_and_which_are_out() {
        let sinfo = "c1|idle|gpu*|gpu:h100:8(S:0-1)|none|\nc1|idle|debug|gpu:h100:8(S:0-1)|none|\n\
                     c2|drained|gpu*|gpu:h100:8(S:0-1)|maint window|\nc3|mixed|gpu*|gpu:a100:4|none|\n\
                     c5|down*|other|gpu:h100:8|Not responding|\n";
        let job = |extra: &str| parse_scontrol_job(&format!("JobId=9 Partition=gpu NumNodes=2-2 {extra}"));
        let g = gpu_nodes(&job("TresPerNode=gres:gpu:h100:8"), sinfo).unwrap();
        assert_eq!((g.per_node.as_str(), g.nodes, g.usable()), ("h100:8", 2, 1));
        let names: Vec<&str> = g.fitting.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["c1", "c2"], "the other partition's c5 is not the job's");
        assert_eq!(g.fitting[1].reason, "maint window");
        let text = Explanation { gpu_nodes: Some(g), ..sample() }.render();
        assert!(
            text.contains("GPUs: it asks for h100:8 on each of 2 node(s); nodes of its partitions that have"),
            "{text}"
        );
        assert!(text.contains("  c2           drained: cannot start jobs (maint window)\n"), "{text}");
        assert!(text.contains("only 1 of them can start jobs now and it needs 2"), "{text}");

        // Per job, spread over its nodes; untyped asks count every GPU.
        let g = gpu_nodes(&job("TresPerJob=gres:gpu:8"), sinfo).unwrap();
        assert_eq!((g.per_node.as_str(), g.fitting.len()), ("4", 3));
        let g = gpu_nodes(&job("TresPerNode=gres:gpu:a100:8"), sinfo).unwrap();
        assert!(g.fitting.is_empty());
        let text = Explanation { gpu_nodes: Some(g), ..sample() }.render();
        assert!(text.contains("no node of its partitions has that many: it cannot start as it is"), "{text}");
        // No GPUs asked, or no nodes shown (PrivateData=nodes): nothing to say.
        assert_eq!(gpu_nodes(&job(""), sinfo), None);
        assert_eq!(gpu_nodes(&job("TresPerNode=gres:gpu:1"), ""), None);
        let private = PrivateData { nodes: true, ..PrivateData::default() };
        let viewer = Viewer { user: "u".into(), sees_all: false };
        let e = Explanation { gpu_nodes: gpu_nodes(&job("TresPerNode=gres:gpu:1"), sinfo), ..sample() };
        assert!(e.gpu_nodes.is_some());
        assert_eq!(e.as_seen_by(&viewer, private).unwrap().gpu_nodes, None);
    }
}
