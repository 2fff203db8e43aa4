//! The cluster and the jobs as the simulator sees them.

use std::collections::HashMap;
use std::io::Read;

use fairway_core::predict::{JobKey, JobRequest};
use fairway_trace::Job;

/// GPUs per node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    /// GPUs of each node.
    pub nodes: Vec<u32>,
}

impl Cluster {
    /// `nodes` nodes of `gpus_per_node` GPUs each.
    pub fn uniform(nodes: u32, gpus_per_node: u32) -> Self {
        Cluster { nodes: vec![gpus_per_node; nodes as usize] }
    }

    /// The GPU nodes of Alibaba's openb node list (`openb_node_list_gpu_node.csv`: columns
    /// `sn, cpu_milli, memory_mib, gpu, model`); nodes without GPUs are left out.
    pub fn from_openb_nodes(input: impl Read) -> Result<Self, String> {
        let mut reader = csv::Reader::from_reader(input);
        let headers = reader.headers().map_err(|e| e.to_string())?.clone();
        let col = headers.iter().position(|h| h.trim() == "gpu").ok_or("no `gpu` column")?;
        let mut nodes = Vec::new();
        for (i, rec) in reader.records().enumerate() {
            let rec = rec.map_err(|e| format!("line {}: {e}", i + 2))?;
            let g: u32 = rec
                .get(col)
                .unwrap_or("")
                .trim()
                .parse()
                .map_err(|_| format!("line {}: bad gpu count `{}`", i + 2, rec.get(col).unwrap_or("")))?;
            if g > 0 {
                nodes.push(g);
            }
        }
        if nodes.is_empty() {
            return Err("no GPU nodes".into());
        }
        Ok(Cluster { nodes })
    }

    /// All GPUs.
    pub fn total_gpus(&self) -> u64 {
        self.nodes.iter().map(|&g| u64::from(g)).sum()
    }

    /// GPUs of the largest node.
    pub fn max_node(&self) -> u32 {
        self.nodes.iter().copied().max().unwrap_or(0)
    }
}

/// One job, ready to simulate.
#[derive(Debug, Clone, PartialEq)]
pub struct SimJob {
    /// The trace's job id.
    pub id: String,
    /// Index into [`Workload::users`].
    pub user: usize,
    /// Index into [`Workload::accounts`].
    pub account: usize,
    /// Index into [`Workload::assocs`] (the user's association in this account).
    pub assoc: usize,
    /// What the predictor knows of it at submission, as the trace has it: its key (user,
    /// account, name, GPUs), and the trace's limit, nodes and CPUs (before any default
    /// limit or reshaping here), as a model trained on the trace saw them.
    pub request: JobRequest,
    /// Index of `key` among the workload's distinct keys.
    pub key_id: usize,
    /// Submit time, seconds.
    pub submit: i64,
    /// How long it runs, seconds (at least 1, at most `limit`).
    pub runtime: u64,
    /// Time limit, seconds.
    pub limit: u64,
    /// Nodes.
    pub nodes: u32,
    /// GPUs on each node.
    pub per_node: u32,
    /// QoS, for preemption.
    pub qos: String,
}

impl SimJob {
    /// GPUs in all.
    pub fn gpus(&self) -> u32 {
        self.nodes * self.per_node
    }
}

/// Jobs of the trace that are not simulated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Dropped {
    /// No run time in the trace (never started).
    pub no_runtime: usize,
    /// No GPUs (CPU-only jobs).
    pub no_gpus: usize,
    /// Larger than the cluster can ever hold.
    pub too_big: usize,
    /// Run time cut to the (default) time limit.
    pub truncated: usize,
    /// Shape changed to fit the nodes (GPUs spread over more nodes, or rounded up).
    pub reshaped: usize,
}

/// The jobs, in submit order, with their users, accounts and associations.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Workload {
    /// Jobs sorted by submit time (then trace order).
    pub jobs: Vec<SimJob>,
    /// User names.
    pub users: Vec<String>,
    /// Account names.
    pub accounts: Vec<String>,
    /// Associations: (account index, user index).
    pub assocs: Vec<(usize, usize)>,
    /// Distinct predictor keys.
    pub keys: usize,
    /// What was left out or changed.
    pub dropped: Dropped,
}

impl Workload {
    /// Prepares trace jobs for `cluster`.
    ///
    /// - Jobs without a run time or without GPUs are left out; fractional GPUs (shared GPUs in
    ///   openb) round up to whole GPUs.
    /// - The time limit is the job's, else `default_limit`; a run time over the limit is cut to
    ///   it (Slurm kills the job there).
    /// - Shape: `nodes` from the trace (1 if unknown). When the GPUs do not divide evenly over
    ///   the nodes or a node would need more GPUs than the largest node has, the job is spread
    ///   over the fewest nodes of the largest size that hold it, with the same GPUs on each
    ///   (rounded up). Jobs that no set of nodes can hold are left out.
    /// - An empty user becomes `-`, an empty account the job's QOS, else `-`.
    pub fn prepare(trace: &[Job], cluster: &Cluster, default_limit: u64) -> Workload {
        let mut w = Workload::default();
        let max_node = cluster.max_node();
        let mut users: HashMap<String, usize> = HashMap::new();
        let mut accounts: HashMap<String, usize> = HashMap::new();
        let mut assocs: HashMap<(usize, usize), usize> = HashMap::new();
        let mut keys: HashMap<JobKey, usize> = HashMap::new();
        let mut order: Vec<usize> = (0..trace.len()).collect();
        order.sort_by_key(|&i| (trace[i].submit, i));
        for i in order {
            let j = &trace[i];
            let Some(runtime) = j.runtime else {
                w.dropped.no_runtime += 1;
                continue;
            };
            if j.gpus.is_nan() || j.gpus <= 0.0 {
                w.dropped.no_gpus += 1;
                continue;
            }
            let gpus = j.gpus.ceil().min(f64::from(u32::MAX)) as u32;
            let mut nodes = j.nodes.unwrap_or(1).max(1);
            let mut per_node = gpus / nodes;
            if !gpus.is_multiple_of(nodes) || per_node > max_node || per_node == 0 {
                nodes = gpus.div_ceil(max_node.max(1));
                per_node = gpus.div_ceil(nodes);
                w.dropped.reshaped += 1;
            }
            let fitting = cluster.nodes.iter().filter(|&&g| g >= per_node).count();
            if per_node > max_node || fitting < nodes as usize {
                w.dropped.too_big += 1;
                continue;
            }
            let limit = j.time_limit.filter(|&l| l > 0).unwrap_or(default_limit).max(1);
            if runtime > limit {
                w.dropped.truncated += 1;
            }
            let user_name = if j.user.is_empty() { "-".to_string() } else { j.user.clone() };
            let account_name = match (j.account.as_str(), j.qos.as_str()) {
                ("", "") => "-".to_string(),
                ("", q) => q.to_string(),
                (a, _) => a.to_string(),
            };
            let n = users.len();
            let user = *users.entry(user_name.clone()).or_insert_with(|| {
                w.users.push(user_name);
                n
            });
            let n = accounts.len();
            let account = *accounts.entry(account_name.clone()).or_insert_with(|| {
                w.accounts.push(account_name);
                n
            });
            let n = assocs.len();
            let assoc = *assocs.entry((account, user)).or_insert_with(|| {
                w.assocs.push((account, user));
                n
            });
            let request = j.request();
            let n = keys.len();
            let key_id = *keys.entry(request.key.clone()).or_insert(n);
            w.jobs.push(SimJob {
                id: j.id.clone(),
                user,
                account,
                assoc,
                request,
                key_id,
                submit: j.submit,
                runtime: runtime.clamp(1, limit),
                limit,
                nodes,
                per_node,
                qos: j.qos.clone(),
            });
        }
        w.keys = keys.len();
        w
    }

    /// GPU-seconds the jobs ask for in all (their true run times).
    pub fn gpu_seconds(&self) -> f64 {
        self.jobs.iter().map(|j| f64::from(j.gpus()) * j.runtime as f64).sum()
    }

    /// Offered load on `cluster`: GPU-seconds asked for over GPU-seconds available between
    /// the first and the last submission.
    pub fn offered_load(&self, cluster: &Cluster) -> f64 {
        let (Some(first), Some(last)) = (self.jobs.first(), self.jobs.last()) else { return 0.0 };
        let span = (last.submit - first.submit).max(1) as f64;
        self.gpu_seconds() / (cluster.total_gpus() as f64 * span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairway_trace::JobState;

    pub(crate) fn job(id: &str, submit: i64, runtime: u64, limit: u64, gpus: f64, nodes: u32) -> Job {
        Job {
            id: id.into(),
            user: "u".into(),
            account: "a".into(),
            name: "n".into(),
            partition: String::new(),
            qos: String::new(),
            submit,
            start: None,
            end: None,
            runtime: Some(runtime),
            time_limit: Some(limit),
            gpus,
            nodes: Some(nodes),
            cpus: None,
            state: JobState::Completed,
        }
    }

    #[test]
    fn shapes_limits_and_drops() {
        let cluster = Cluster::uniform(4, 8);
        let mut none = job("x", 0, 5, 10, 1.0, 1);
        none.runtime = None;
        let trace = vec![
            job("a", 5, 100, 50, 0.4, 1),  // fractional → 1 GPU; cut to its limit
            job("b", 1, 10, 100, 16.0, 1), // 16 GPUs on one 8-GPU node → 2 × 8
            job("c", 2, 10, 100, 6.0, 4),  // 6 over 4 nodes does not divide → 1 × 6
            job("d", 3, 10, 100, 40.0, 5), // 5 × 8 > 4 nodes
            job("e", 4, 10, 100, 0.0, 1),
            none,
        ];
        let w = Workload::prepare(&trace, &cluster, 3600);
        let shapes: Vec<_> = w.jobs.iter().map(|j| (j.id.as_str(), j.nodes, j.per_node, j.runtime)).collect();
        assert_eq!(shapes, vec![("b", 2, 8, 10), ("c", 1, 6, 10), ("a", 1, 1, 50)]);
        assert_eq!(w.dropped, Dropped { no_runtime: 1, no_gpus: 1, too_big: 1, truncated: 1, reshaped: 2 });
    }

    #[test]
    fn openb_node_list() {
        let csv = "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,1,2,P100\nn1,1,1,0,\nn2,1,1,8,G2\n";
        assert_eq!(Cluster::from_openb_nodes(csv.as_bytes()).unwrap().nodes, vec![2, 8]);
        assert!(Cluster::from_openb_nodes("sn,gpu\nx,y\n".as_bytes()).unwrap_err().contains("line 2"));
    }
}
