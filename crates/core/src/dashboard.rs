//! `fairway serve`'s page: the cluster in one view (the queue by partition, the fair-share
//! tree, GPUs per node drawn by their topology, running gangs) and the alerts an admin acts
//! on.
//!
//! Pure, as [`crate::explain`] and [`crate::metrics`] are: the CLI hands over what squeue,
//! sinfo and sshare print (so `PrivateData` is Slurm's to apply), the last pass's
//! [`Status`] and the predictor's calibration; [`Board::read`] parses them and [`Watch`]
//! decides which conditions have held long enough to be alerts. The page, the `/metrics`
//! alert series and the tests all read the same [`Board`].

mod alerts;
mod nodes;
mod viewer;

use std::collections::BTreeMap;

use serde::Serialize;

pub use alerts::{Alert, AlertKind, AlertRules, Watch};
pub use nodes::{nvlink_domains, usable as node_usable, GpuCell, NodeView};
pub use viewer::{PrivateData, Viewer};

use crate::metrics::gpus_per_node;
use crate::status::Status;
use crate::topology::Topology;

/// `squeue -h -a -t PENDING,RUNNING -o SQUEUE_FORMAT`, in Slurm's priority order
/// (`--sort=-p,i`): id, state, partition, QOS, account, user, nodes, GRES per node,
/// priority, submit time, node list, reason, name (last: a name may hold `|`).
pub const SQUEUE_FORMAT: &str = "%i|%T|%P|%q|%a|%u|%D|%b|%Q|%V|%N|%r|%j";

/// `sinfo -N -h -O SINFO_FORMAT`: one row per node and partition, `|` after each field.
pub const SINFO_FORMAT: &str = "NodeList:|,StateLong:|,Partition:|,Gres:|,GresUsed:|";

/// `sshare -a -h -P -o SSHARE_FORMAT`: the tree in order, accounts indented by depth
/// (explain's format: one reading serves both).
pub use crate::explain::SSHARE_FORMAT;

/// One pending or running job, as squeue shows it to the viewer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Job {
    /// Job id (`123`, or `123_[1-4]` for a pending array).
    pub id: String,
    /// `PENDING` or `RUNNING`.
    pub state: String,
    /// Partition (pending jobs list every partition they may use).
    pub partition: String,
    /// QOS.
    pub qos: String,
    /// Account.
    pub account: String,
    /// Owner.
    pub user: String,
    /// Nodes it asks for or holds.
    pub nodes: u32,
    /// GPUs per node.
    pub gpus_per_node: u64,
    /// Slurm's priority.
    pub priority: u64,
    /// Submit time, as squeue prints it.
    pub submitted: String,
    /// The nodes it runs on (empty while pending).
    pub node_list: String,
    /// Why it waits (`Priority`, `Resources`, `QOSGrpGRES`, ...), `None` when running.
    pub reason: String,
    /// Its name.
    pub name: String,
}

impl Job {
    /// GPUs in all.
    pub fn gpus(&self) -> u64 {
        self.gpus_per_node * u64::from(self.nodes)
    }

    /// Whether it waits for something the cluster decides (resources, priority, a
    /// limit) rather than for its owner (a hold, a dependency, a begin time).
    pub fn waits_on_cluster(&self) -> bool {
        const OWNERS: [&str; 6] =
            ["JobHeldUser", "JobHeldAdmin", "Dependency", "DependencyNeverSatisfied", "BeginTime", "Reservation"];
        self.state == "PENDING" && !OWNERS.contains(&self.reason.as_str())
    }
}

/// One partition's queue.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Partition {
    /// Its name.
    pub name: String,
    /// Pending jobs, first to start first (Slurm's priority order).
    pub pending: Vec<Job>,
    /// Running jobs.
    pub running: Vec<Job>,
    /// GPUs on its usable nodes (not down, drained or failing).
    pub gpus: u64,
    /// Of those, GPUs no job holds.
    pub idle_gpus: u64,
}

/// One row of the fair-share tree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Share {
    /// Depth below root (root is 0).
    pub depth: usize,
    /// The account.
    pub account: String,
    /// The user, for a user association; empty for an account.
    pub user: String,
    /// Shares among its siblings (NormShares).
    pub norm_shares: f64,
    /// Usage among its siblings (EffectvUsage).
    pub effective_usage: f64,
    /// Decayed usage (RawUsage).
    pub raw_usage: f64,
    /// A user's fair-share factor; `None` for accounts.
    pub fair_share: Option<f64>,
}

/// priority/fairway's last pass, as the page shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pass {
    /// When it started, Unix seconds.
    pub started: i64,
    /// Its wall time.
    pub seconds: f64,
    /// Pending jobs it set.
    pub jobs: u64,
    /// The starvation bound, when one is set.
    pub max_wait: Option<u64>,
}

/// Everything the page shows at one moment.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Board {
    /// When Slurm was asked, Unix seconds.
    pub taken_at: i64,
    /// Queues, by partition name.
    pub partitions: Vec<Partition>,
    /// The fair-share tree, root first, in sshare's order.
    pub fair_share: Vec<Share>,
    /// Nodes and their GPUs.
    pub nodes: Vec<NodeView>,
    /// Running jobs on more than one node.
    pub gangs: Vec<Job>,
    /// The last pass, when priority/fairway publishes one.
    pub pass: Option<Pass>,
    /// What needs an admin's eye (filled by [`Watch::observe`]).
    pub alerts: Vec<Alert>,
}

/// What one refresh is made of.
#[derive(Debug, Clone)]
pub struct Reading<'a> {
    /// squeue in [`SQUEUE_FORMAT`].
    pub squeue: &'a str,
    /// sinfo in [`SINFO_FORMAT`].
    pub sinfo: &'a str,
    /// sshare in [`SSHARE_FORMAT`].
    pub sshare: &'a str,
    /// Topology of nodes that have one (fairway.toml's `[gpu.topology]`).
    pub topology: &'a BTreeMap<String, Topology>,
    /// Now, Unix seconds.
    pub now: i64,
}

impl Board {
    /// The board of one reading (no alerts yet).
    pub fn read(r: &Reading<'_>, status: Option<&Status>) -> Self {
        let jobs: Vec<Job> = r.squeue.lines().filter_map(parse_job).collect();
        let nodes = nodes::parse(r.sinfo, r.topology);
        let mut partitions: BTreeMap<String, Partition> = BTreeMap::new();
        for n in &nodes {
            for p in &n.partitions {
                let e =
                    partitions.entry(p.clone()).or_insert_with(|| Partition { name: p.clone(), ..Default::default() });
                if n.usable {
                    e.gpus += n.gpus.len() as u64;
                    e.idle_gpus += n.idle_gpus() as u64;
                }
            }
        }
        for j in &jobs {
            // A pending job queues in each partition it may use.
            for p in j.partition.split(',') {
                let e = partitions
                    .entry(p.to_string())
                    .or_insert_with(|| Partition { name: p.into(), ..Default::default() });
                if j.state == "RUNNING" { &mut e.running } else { &mut e.pending }.push(j.clone());
            }
        }
        let gangs = jobs.iter().filter(|j| j.state == "RUNNING" && j.nodes > 1).cloned().collect();
        Board {
            taken_at: r.now,
            partitions: partitions.into_values().collect(),
            fair_share: r.sshare.lines().filter_map(parse_share).collect(),
            nodes,
            gangs,
            pass: status.map(|s| Pass {
                started: s.pass_started,
                seconds: s.pass_seconds,
                jobs: s.pass_jobs,
                max_wait: s.max_wait,
            }),
            alerts: Vec::new(),
        }
    }

    /// Every job on the board once (a pending job may queue in several partitions).
    pub fn jobs(&self) -> impl Iterator<Item = &Job> {
        let mut seen = std::collections::BTreeSet::new();
        self.partitions.iter().flat_map(|p| p.pending.iter().chain(&p.running)).filter(move |j| seen.insert(&j.id))
    }
}

fn parse_job(line: &str) -> Option<Job> {
    let f: Vec<&str> = line.splitn(13, '|').collect();
    let [id, state, partition, qos, account, user, nodes, gres, priority, submitted, node_list, reason, name] =
        f.as_slice()
    else {
        return None;
    };
    let state = state.trim();
    Some(Job {
        id: id.trim().to_string(),
        state: state.to_string(),
        partition: partition.trim().to_string(),
        qos: qos.trim().to_string(),
        account: account.trim().to_string(),
        user: user.trim().to_string(),
        nodes: nodes.trim().parse().unwrap_or(1),
        gpus_per_node: gpus_per_node(gres),
        priority: priority.trim().parse().unwrap_or(0),
        submitted: submitted.trim().to_string(),
        node_list: node_list.trim().to_string(),
        reason: if state == "PENDING" { reason.trim().trim_matches(['(', ')']).to_string() } else { String::new() },
        name: name.to_string(),
    })
}

fn parse_share(line: &str) -> Option<Share> {
    let f: Vec<&str> = line.split('|').collect();
    let [account, user, _raw_shares, norm_shares, raw_usage, effective, fair_share, _level_fs] = f.as_slice() else {
        return None;
    };
    let num = |s: &str| s.trim().parse::<f64>().ok();
    Some(Share {
        depth: account.len() - account.trim_start().len(),
        account: account.trim().to_string(),
        user: user.trim().to_string(),
        norm_shares: num(norm_shares).unwrap_or(0.0),
        effective_usage: num(effective).unwrap_or(0.0),
        raw_usage: num(raw_usage).unwrap_or(0.0),
        fair_share: if user.trim().is_empty() { None } else { num(fair_share) },
    })
}

#[cfg(test)]
mod tests;
