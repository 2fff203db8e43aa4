//! The event loop: arrivals, ends, priority passes and EASY backfill.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use fairway_core::fairshare::accrue::{self, RunningJob};
use fairway_core::fairshare::{self, Assoc, AssocTree};
use fairway_core::limits::{self, Overrun};
use fairway_core::multifactor::{JobInput, NICE_OFFSET};
use fairway_core::predict::{expected_runtime, LearnedPredictor, RuntimePredictor};
use fairway_core::preempt::{preempt_prio, Candidate};
use fairway_core::priority::{self, JobPriority, Pass, TermsJob};
use fairway_core::terms::FirstStarving;
use serde::Serialize;

use crate::metrics::{water_fill, Metrics};
use crate::placement::{PlacementStats, Placer};
use crate::preemption::PreemptStats;
use crate::{Cluster, Policy, SimConfig, Workload};

/// What happened to one job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobOutcome {
    /// Start time (of its first run, if it was preempted).
    pub start: i64,
    /// End time.
    pub end: i64,
    /// (node, GPUs) it ran on (last).
    pub alloc: Vec<(u32, u32)>,
    /// Times it was preempted and requeued.
    pub preempted: u32,
}

/// A finished simulation.
#[derive(Debug, Clone, Serialize)]
pub struct SimResult {
    /// The policy simulated.
    pub policy: Policy,
    /// Per job, in [`Workload::jobs`] order.
    pub outcomes: Vec<JobOutcome>,
    /// The summary.
    pub metrics: Metrics,
    /// Scheduling passes run.
    pub passes: u64,
    /// GPU placement inside nodes, with [`Simulator::with_topology`].
    pub placement: Option<PlacementStats>,
    /// Preemption, with [`SimConfig::preempt`].
    pub preemption: Option<PreemptStats>,
    /// Predicted limits, with [`SimConfig::predicted_limits`].
    pub limits: Option<LimitStats>,
}

/// What predicted time limits did ([`SimConfig::predicted_limits`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LimitStats {
    /// Jobs given a predicted limit (the others had no history yet: the usual limit).
    pub predicted: u64,
    /// Extensions of a limit about to expire ([`Overrun::Extend`]).
    pub extensions: u64,
    /// Runs killed at their predicted limit ([`Overrun::Kill`]), each submitted again.
    pub timeouts: u64,
    /// GPU-seconds of the killed runs: work done twice.
    pub lost_gpu_seconds: f64,
}

/// A preemption whose victims are in their grace.
struct Round {
    preemptor: usize,
    target: Vec<(u32, u32)>,
    victims: Vec<usize>,
}

/// One priority pass over `jobs` as `priority/fairway` runs it in slurmctld
/// ([`priority::Pass`]): `out` gets each job's decision, then again the jobs that go first
/// with their lifted priority. The simulator's passes are this; tests replay a pass
/// recorded in a real slurmctld through it.
pub fn priority_pass(
    policy: priority::Policy<'_>,
    first: &mut FirstStarving<JobPriority>,
    jobs: impl IntoIterator<Item = priority::JobInput>,
    mut out: impl FnMut(u32, &JobPriority),
) {
    let mut pass = Pass::new(policy, first);
    for job in jobs {
        out(job.job_id, &pass.job(&job));
    }
    for (id, lifted) in pass.finish() {
        out(id, &lifted);
    }
}

/// The reservation of EASY backfill for the first job that does not fit.
struct Reservation {
    /// When the job will start at the latest (by the running jobs' limits).
    shadow: i64,
    /// Per node, GPUs a job ending after `shadow` may take now without delaying it.
    cap_long: Vec<u32>,
}

/// One simulation run over a workload.
pub struct Simulator<'a> {
    w: &'a Workload,
    cfg: SimConfig,
    total_gpus: u64,
    free: Vec<u32>,
    total_free: u64,
    /// Running jobs by (start + limit, job).
    running: BTreeSet<(i64, usize)>,
    /// Each job's time limit, seconds: its own, or a predicted one
    /// ([`SimConfig::predicted_limits`]) while it is not extended to its own.
    limit: Vec<u64>,
    /// Predicted limits running out, by time ([`Overrun::Kill`]).
    expiries: BinaryHeap<Reverse<(i64, usize)>>,
    limit_stats: LimitStats,
    /// Running jobs by true end.
    ends: BinaryHeap<Reverse<(i64, usize)>>,
    alloc: Vec<Vec<(u32, u32)>>,
    start: Vec<Option<i64>>,
    end: Vec<Option<i64>>,
    /// Pending jobs sorted by (`key`, index).
    pending: Vec<usize>,
    key: Vec<i64>,
    tree: AssocTree,
    /// Tree index of each association (user within account).
    assoc_node: Vec<usize>,
    /// Fair-share factor of each association.
    fs: Vec<f64>,
    shares: Vec<u32>,
    last_pass: Option<i64>,
    /// Per running job, up to when its usage was charged.
    accounted: Vec<i64>,
    predictor: RuntimePredictor,
    /// A learned model, as the plugins load one (`[predictor] model`).
    model: Option<&'a LearnedPredictor>,
    /// Cached prediction per job, with the history version it was made at.
    pred: Vec<Option<(u64, u64)>>,
    /// Bumped when a job of the key ends: last-two predictions of the key change.
    key_version: Vec<u32>,
    /// Bumped when any job ends: a learned model also reads the user's history.
    history_version: u32,
    /// Bumped when a user's overrun penalty changes (`RuntimePredictor::overrun_penalty`):
    /// every key of theirs changes.
    penalty_epoch: u32,
    acct_running: Vec<u64>,
    acct_pending: Vec<u64>,
    share_dev_sum: f64,
    share_dev_samples: u64,
    passes: u64,
    finished: usize,
    placer: Option<Placer>,
    /// Seconds of each job's run time still to do (less than its run time once it
    /// resumed from a checkpoint).
    remaining: Vec<u64>,
    /// Start of each job's current run.
    run_start: Vec<i64>,
    /// Expected end of each job's current run; an end event for another time is stale.
    run_end: Vec<Option<i64>>,
    /// Victims in their grace: (when chosen, when requeued).
    grace: Vec<Option<(i64, i64)>>,
    /// Victims to requeue, by time.
    releases: BinaryHeap<Reverse<(i64, usize)>>,
    in_grace: usize,
    /// The round in progress: its preemptor, the nodes and GPUs it will take, its victims.
    round: Option<Round>,
    preempted: Vec<u32>,
    preempt_stats: PreemptStats,
    /// GPU-seconds held by all runs, for utilisation.
    held_gpu_seconds: f64,
    /// Per job: its QoS's priority and that over the highest QoS priority (Slurm's
    /// `norm_priority`).
    qos: Vec<(u32, f64)>,
    /// The longest-starving pending job, lifted at the end of each pass (one partition).
    first_starving: FirstStarving<JobPriority>,
}

impl<'a> Simulator<'a> {
    /// A simulator of `workload` on `cluster` under `cfg`, before time starts.
    pub fn new(workload: &'a Workload, cluster: &Cluster, cfg: SimConfig) -> Self {
        let n = workload.jobs.len();
        let shares: Vec<u32> = workload
            .accounts
            .iter()
            .map(|a| cfg.shares.iter().find(|(name, _)| name == a).map_or(cfg.default_shares, |(_, s)| *s))
            .collect();
        let (tree, assoc_node) = build_tree(workload, &shares);
        let qos = job_qos(workload, &cfg.qos_priority);
        Simulator {
            w: workload,
            total_gpus: cluster.total_gpus(),
            free: cluster.nodes.clone(),
            total_free: cluster.total_gpus(),
            running: BTreeSet::new(),
            limit: workload.jobs.iter().map(|j| j.limit).collect(),
            expiries: BinaryHeap::new(),
            limit_stats: LimitStats::default(),
            ends: BinaryHeap::new(),
            alloc: vec![Vec::new(); n],
            start: vec![None; n],
            end: vec![None; n],
            pending: Vec::new(),
            key: vec![0; n],
            fs: vec![1.0; workload.assocs.len()],
            tree,
            assoc_node,
            shares,
            last_pass: None,
            accounted: vec![0; n],
            predictor: RuntimePredictor::default(),
            model: None,
            pred: vec![None; n],
            history_version: 0,
            penalty_epoch: 0,
            key_version: vec![0; workload.keys],
            acct_running: vec![0; workload.accounts.len()],
            acct_pending: vec![0; workload.accounts.len()],
            share_dev_sum: 0.0,
            share_dev_samples: 0,
            passes: 0,
            finished: 0,
            placer: None,
            remaining: workload.jobs.iter().map(|j| j.runtime).collect(),
            run_start: vec![0; n],
            run_end: vec![None; n],
            grace: vec![None; n],
            releases: BinaryHeap::new(),
            in_grace: 0,
            round: None,
            preempted: vec![0; n],
            preempt_stats: PreemptStats::default(),
            held_gpu_seconds: 0.0,
            qos,
            first_starving: FirstStarving::default(),
            cfg,
        }
    }

    /// Gives every node the GPUs of `topo` and follows which of them each job gets, under
    /// Fairway's topology choice and under first free ([`crate::placement`]). Fails when a
    /// node's GPU count is not the topology's.
    pub fn with_topology(mut self, topo: &fairway_core::topology::Topology) -> Result<Self, String> {
        self.placer = Some(Placer::new(topo, &self.free, self.w.jobs.len())?);
        Ok(self)
    }

    /// Predicts run times with `model` (`fairway predict train`) where the plugins would,
    /// instead of the last two runs of each key.
    pub fn with_model(mut self, model: &'a LearnedPredictor) -> Self {
        self.model = Some(model);
        self
    }

    /// Multifactor's input for pending job `j` at `now`: the translation of a simulated job
    /// into what `priority/multifactor` reads. GPUs stand in for CPUs (the job-size factor
    /// is GPUs and nodes over the cluster's); one partition, the QOS priorities of
    /// [`SimConfig::qos_priority`], no association priority, no nice; the age counts from
    /// submission (jobs are eligible at once).
    pub fn job_input(&self, j: usize, now: i64) -> JobInput {
        let job = &self.w.jobs[j];
        let (qos_priority, qos_norm_priority) = self.qos[j];
        JobInput {
            now,
            accrue_time: job.submit,
            fairshare: self.fs[job.assoc],
            total_cpus: 0,
            min_cpus: job.gpus(),
            max_cpus: None,
            min_nodes: job.nodes,
            time_limit: Some(self.limit[j].div_ceil(60).min(u64::from(u32::MAX)) as u32),
            part_max_time: u32::MAX,
            cluster_cpus: self.total_gpus.min(u64::from(u32::MAX)) as u32,
            node_count: self.free.len() as u32,
            part_priority_job_factor: 1,
            part_norm_priority: 1.0,
            has_assoc: true,
            qos_priority,
            qos_norm_priority,
            site_factor: NICE_OFFSET + self.cfg.jitter.map_or(0, |n| n.points_for(j)),
            nice: NICE_OFFSET,
            ..JobInput::default()
        }
    }

    /// What Fairway's terms read of pending job `j`: the run time expected as the plugins
    /// compute it (`fairway_core::predict::expected_runtime`) from what has ended so far:
    /// the learned model's typical run time when there is one, else the last two runs of
    /// the same key; capped by the limit, the limit without history. With
    /// [`SimConfig::perfect_prediction`], the job's true run time. One partition.
    pub fn terms_job(&mut self, j: usize) -> TermsJob {
        let runtime = self.expected_runtime(j);
        self.terms_job_with(j, runtime)
    }

    fn terms_job_with(&self, j: usize, expected_runtime: u64) -> TermsJob {
        let job = &self.w.jobs[j];
        TermsJob {
            // The priority route reads the fair-share factor from multifactor's input.
            fairshare: None,
            partition: String::new(),
            user: u32::try_from(job.user).unwrap_or(u32::MAX),
            eligible_since: job.submit,
            deadline: None,
            qos: String::new(),
            gpus: job.gpus(),
            request: None,
            expected_runtime: Some(expected_runtime),
        }
    }

    /// Job `j`'s expected run time, predicted again only when its history changed.
    fn expected_runtime(&mut self, j: usize) -> u64 {
        let job = &self.w.jobs[j];
        let version = if self.model.is_some() { self.history_version } else { self.key_version[job.key_id] };
        let version = (u64::from(self.penalty_epoch) << 32) | u64::from(version);
        match self.pred[j] {
            _ if self.cfg.perfect_prediction => job.runtime.min(self.limit[j]),
            Some((v, p)) if v == version => p,
            _ => {
                let limit = self.limit[j];
                let p = expected_runtime(&self.predictor, self.model, &job.request).map_or(limit, |p| p.min(limit));
                self.pred[j] = Some((version, p));
                p
            }
        }
    }

    /// The input of `fairway_core::priority` for pending job `j` at `now`: multifactor's
    /// ([`Simulator::job_input`]), and under the Fairway policy the terms'.
    pub fn priority_input(&mut self, j: usize, now: i64) -> priority::JobInput {
        let runtime = self.expected_runtime(j);
        self.priority_input_with(j, now, runtime)
    }

    fn priority_input_with(&self, j: usize, now: i64, expected_runtime: u64) -> priority::JobInput {
        priority::JobInput {
            job_id: j as u32,
            factors: self.job_input(j, now),
            terms: (self.cfg.policy == Policy::Fairway).then(|| self.terms_job_with(j, expected_runtime)),
            ..priority::JobInput::default()
        }
    }

    /// What priorities are computed with: the configured weights and terms. Run times
    /// come with each job's input, so no history is needed here.
    fn policy(&self) -> priority::Policy<'_> {
        priority::Policy { weights: &self.cfg.weights, terms: &self.cfg.fairway, history: None, model: None }
    }

    /// The priority of pending job `j` at `now` under the multifactor or Fairway policy,
    /// computed by `fairway_core::priority` as the plugin computes it; `None` for the
    /// policies without a Slurm priority.
    pub fn priority(&mut self, j: usize, now: i64) -> Option<u32> {
        if !matches!(self.cfg.policy, Policy::Multifactor | Policy::Fairway) {
            return None;
        }
        let input = self.priority_input(j, now);
        Some(self.policy().evaluate(&input, self.first_starving.lift(j as u32)).priority)
    }

    /// The fair-share factor of each association (user within account) as last computed.
    pub fn fairshare_factors(&self) -> &[f64] {
        &self.fs
    }

    fn sort_key(&mut self, j: usize, now: i64) -> i64 {
        match self.cfg.policy {
            Policy::Fifo => 0,
            Policy::SjfOracle => {
                let job = &self.w.jobs[j];
                (job.runtime.saturating_mul(u64::from(job.gpus()))).min(i64::MAX as u64) as i64
            }
            Policy::Multifactor | Policy::Fairway => -i64::from(self.priority(j, now).unwrap_or(0)),
        }
    }

    /// Runs to the end; `progress` is called with the number of finished jobs now and then.
    pub fn run(mut self, progress: &mut dyn FnMut(usize)) -> SimResult {
        let jobs = &self.w.jobs;
        let n = jobs.len();
        let period = self.cfg.calc_period.max(1);
        let mut next_arrival = 0;
        let mut next_tick = i64::MIN;
        let mut reported = 0;
        loop {
            let busy = !self.pending.is_empty() || !self.running.is_empty();
            let mut now = i64::MAX;
            if let Some(j) = jobs.get(next_arrival) {
                now = now.min(j.submit);
            }
            if let Some(Reverse((t, _))) = self.ends.peek() {
                now = now.min(*t);
            }
            if let Some(Reverse((t, _))) = self.releases.peek() {
                now = now.min(*t);
            }
            if let Some(Reverse((t, _))) = self.expiries.peek() {
                now = now.min(*t);
            }
            if busy {
                now = now.min(next_tick);
            }
            if now == i64::MAX {
                break;
            }
            while let Some(&Reverse((t, j))) = self.ends.peek() {
                if t != now {
                    break;
                }
                self.ends.pop();
                if self.run_end[j] == Some(t) {
                    self.finish(j, now);
                }
            }
            while let Some(&Reverse((t, j))) = self.expiries.peek() {
                if t != now {
                    break;
                }
                self.expiries.pop();
                if self.run_end[j].is_some() && self.run_start[j] + self.limit[j] as i64 == t {
                    self.time_out(j, now);
                }
            }
            while let Some(&Reverse((t, j))) = self.releases.peek() {
                if t != now {
                    break;
                }
                self.releases.pop();
                if self.grace[j].is_some_and(|(_, until)| until == t) {
                    self.requeue(j, now);
                }
            }
            if self.in_grace == 0 {
                if let Some(r) = self.round.take() {
                    self.start_preemptor(r.preemptor, now);
                }
            }
            while next_arrival < n && jobs[next_arrival].submit == now {
                self.predict_limit(next_arrival);
                self.arrive(next_arrival, now);
                next_arrival += 1;
            }
            if now >= next_tick {
                self.tick(now);
                next_tick = now + period;
            }
            self.schedule(now);
            if self.finished >= reported + 1000 || self.finished == n {
                reported = self.finished;
                progress(reported);
            }
        }
        let outcomes: Vec<JobOutcome> = (0..n)
            .map(|j| JobOutcome {
                start: self.start[j].expect("every job starts"),
                end: self.end[j].expect("every job ends"),
                alloc: std::mem::take(&mut self.alloc[j]),
                preempted: self.preempted[j],
            })
            .collect();
        let share_dev =
            if self.share_dev_samples == 0 { 0.0 } else { self.share_dev_sum / self.share_dev_samples as f64 };
        let metrics = Metrics::compute(self.w, &outcomes, self.total_gpus, self.held_gpu_seconds, share_dev);
        SimResult {
            policy: self.cfg.policy,
            outcomes,
            metrics,
            passes: self.passes,
            placement: self.placer.map(|p| p.stats),
            preemption: self.cfg.preempt.is_some().then_some(self.preempt_stats),
            limits: self.cfg.predicted_limits.is_some().then_some(self.limit_stats),
        }
    }

    /// The preemptor of a finished round starts at once if it fits (its QoS would put it
    /// first in Slurm's queue).
    fn start_preemptor(&mut self, j: usize, now: i64) {
        let Some(pos) = self.pending.iter().position(|&p| p == j) else { return };
        let job = &self.w.jobs[j];
        if let Some(a) = choose(&self.free, None, job.nodes, job.per_node) {
            self.pending.remove(pos);
            self.begin(j, now, a);
        }
    }

    /// job_submit/fairway's `time=auto` at submission ([`SimConfig::predicted_limits`]):
    /// the predicted run time plus the margin, capped by the job's own limit; the job's own
    /// limit without a prediction.
    fn predict_limit(&mut self, j: usize) {
        let Some(cfg) = self.cfg.predicted_limits else { return };
        let job = &self.w.jobs[j];
        // As job_submit/fairway predicts: the model's upper quantile, else the last two runs.
        let predicted = match self.model {
            Some(m) => Some(m.predict(&self.predictor, &job.request)),
            None => self.predictor.predict(&job.request.key, None),
        };
        if let Some(m) =
            predicted.and_then(|p| limits::extendable_limit(p, cfg.margin, cfg.min_limit, limit_cap(job.limit)))
        {
            self.limit[j] = u64::from(m) * 60;
            self.limit_stats.predicted += 1;
        }
    }

    /// A run reached its predicted limit ([`Overrun::Kill`]): Slurm ends it (`TIMEOUT`), and
    /// its user submits it again with the limit it would have had (no checkpoint: it starts
    /// over). Its wait still counts from the first submission.
    fn time_out(&mut self, j: usize, now: i64) {
        let job = &self.w.jobs[j];
        self.limit_stats.timeouts += 1;
        self.limit_stats.lost_gpu_seconds += (now - self.run_start[j]) as f64 * f64::from(job.gpus());
        self.stop_run(j, now);
        self.remaining[j] = job.runtime;
        self.limit[j] = job.limit;
        self.pred[j] = None;
        self.arrive(j, now);
    }

    /// Before each pass's priorities, as priority/fairway's decay thread does
    /// ([`Overrun::Extend`]): limits that would expire before the next pass (and a half)
    /// grow ([`limits::extended_limit`]), up to the job's own.
    fn extend_limits(&mut self, now: i64) {
        if self.cfg.predicted_limits.is_none_or(|c| c.overrun != Overrun::Extend) {
            return;
        }
        let period = self.cfg.calc_period.max(1) as u64;
        let horizon = limits::extension_horizon(now, period);
        let due: Vec<(i64, usize)> = self.running.range(..=(horizon, usize::MAX)).copied().collect();
        for (end, j) in due {
            let minutes = u32::try_from(self.limit[j] / 60).unwrap_or(u32::MAX);
            if let Some(m) =
                limits::extended_limit(minutes, limit_cap(self.w.jobs[j].limit), self.run_start[j], now, period)
            {
                let new = (u64::from(m) * 60).min(self.w.jobs[j].limit);
                self.running.remove(&(end, j));
                self.limit[j] = new;
                self.running.insert((self.run_start[j] + new as i64, j));
                self.limit_stats.extensions += 1;
            }
        }
    }

    fn arrive(&mut self, j: usize, now: i64) {
        let k = self.sort_key(j, now);
        self.key[j] = k;
        let pos = self.pending.partition_point(|&p| (self.key[p], p) < (k, j));
        self.pending.insert(pos, j);
        let job = &self.w.jobs[j];
        self.acct_pending[job.account] += u64::from(job.gpus());
    }

    /// Job `j`'s current run stops at `now`: its GPUs are free and its usage is due.
    fn stop_run(&mut self, j: usize, now: i64) {
        let job = &self.w.jobs[j];
        for &(node, g) in &self.alloc[j] {
            self.free[node as usize] += g;
        }
        if let Some(p) = &mut self.placer {
            p.release(j);
        }
        self.total_free += u64::from(job.gpus());
        self.running.remove(&(self.run_start[j] + self.limit[j] as i64, j));
        self.run_end[j] = None;
        if self.grace[j].take().is_some() {
            self.in_grace -= 1;
        }
        self.held_gpu_seconds += (now - self.run_start[j]) as f64 * f64::from(job.gpus());
        self.charge(j, now, true);
        self.acct_running[job.account] -= u64::from(job.gpus());
    }

    fn finish(&mut self, j: usize, now: i64) {
        self.stop_run(j, now);
        let job = &self.w.jobs[j];
        self.end[j] = Some(now);
        let user = job.request.key.user;
        let penalty = self.predictor.overrun_penalty(user);
        fairway_core::predict::learn(&mut self.predictor, &job.request.key, job.runtime, job.request.time_limit);
        if self.predictor.overrun_penalty(user) != penalty {
            self.penalty_epoch = self.penalty_epoch.wrapping_add(1);
        }
        self.key_version[job.key_id] = self.key_version[job.key_id].wrapping_add(1);
        self.history_version = self.history_version.wrapping_add(1);
        self.finished += 1;
    }

    /// Victim `j`'s grace is over (or it had none): it is requeued with what it saved.
    fn requeue(&mut self, j: usize, now: i64) {
        let (chosen, _) = self.grace[j].unwrap_or((now, now));
        let cfg = self.cfg.preempt.as_ref().expect("preemption is configured");
        let ran = (chosen - self.run_start[j]).max(0) as u64;
        let saved = cfg.saved(ran).min(self.remaining[j].saturating_sub(1));
        let gpus = f64::from(self.w.jobs[j].gpus());
        self.preempt_stats.lost_gpu_seconds += (ran - saved) as f64 * gpus;
        self.preempt_stats.grace_gpu_seconds += (now - chosen) as f64 * gpus;
        self.remaining[j] -= saved;
        self.stop_run(j, now);
        self.preempt_stats.preemptions += 1;
        self.preempt_stats.jobs_preempted += u64::from(self.preempted[j] == 0);
        self.preempted[j] += 1;
        self.arrive(j, now);
    }

    /// Tries to make room for pending job `j` by preempting; returns whether victims were
    /// chosen (requeued now without grace, else when their grace ends).
    fn preempt_for(&mut self, j: usize, now: i64) -> bool {
        if self.cfg.preempt.is_none() || self.in_grace > 0 {
            return false;
        }
        let w = self.w;
        let job = &w.jobs[j];
        let running: Vec<usize> = self.running.iter().map(|&(_, r)| r).collect();
        let mut candidates: Vec<(u32, Candidate)> = Vec::new();
        for r in running {
            let victim = &w.jobs[r];
            let Some(cfg) = &self.cfg.preempt else { return false };
            if !cfg.may_preempt(&job.qos, &victim.qos) {
                continue;
            }
            let start = self.run_start[r];
            let every = cfg.checkpoint_every.filter(|&c| c > 0).map(|c| c as i64);
            let last_checkpoint = every.map(|c| start + (now - start).max(0) / c * c);
            let priority = self.priority(r, now).unwrap_or(0);
            let c = Candidate {
                job_id: r as u32,
                gpus: victim.gpus(),
                nodes: victim.nodes,
                priority,
                qos: victim.qos.clone(),
                start_time: start,
                last_checkpoint,
                preempt_count: self.preempted[r],
            };
            let Some(cfg) = &self.cfg.preempt else { return false };
            let prio = preempt_prio(&c, now, &cfg.rules);
            if prio != u32::MAX {
                candidates.push((prio, c));
            }
        }
        candidates.sort_by_key(|(prio, c)| (*prio, c.job_id));
        let mut avail = self.free.clone();
        let mut victims = Vec::new();
        for (_, c) in &candidates {
            let r = c.job_id as usize;
            for &(node, g) in &self.alloc[r] {
                avail[node as usize] += g;
            }
            victims.push(r);
            if choose(&avail, None, job.nodes, job.per_node).is_some() {
                break;
            }
        }
        let Some(target) = choose(&avail, None, job.nodes, job.per_node) else { return false };
        // As Slurm's select plugin: only the jobs on the nodes the preemptor gets.
        victims.retain(|&v| self.alloc[v].iter().any(|&(n, _)| target.iter().any(|&(t, _)| t == n)));
        if victims.is_empty() {
            return false;
        }
        let grace = self.cfg.preempt.as_ref().map_or(0, |p| p.grace);
        for &v in &victims {
            if grace == 0 {
                self.requeue(v, now);
            } else {
                let until = now + grace as i64;
                self.grace[v] = Some((now, until));
                self.in_grace += 1;
                self.releases.push(Reverse((until, v)));
            }
        }
        if grace > 0 {
            self.round = Some(Round { preemptor: j, target, victims });
        }
        true
    }

    /// While a round's victims checkpoint, the GPUs its preemptor counted on beyond theirs
    /// are kept from other jobs: per node, what job `j` may take (`None`: no limit).
    fn round_cap(&self, j: usize) -> Option<Vec<u32>> {
        let r = self.round.as_ref()?;
        if r.preemptor == j || self.run_end[r.preemptor].is_some() {
            return None;
        }
        let mut cap = self.free.clone();
        for &(node, need) in &r.target {
            let coming: u32 = r
                .victims
                .iter()
                .filter(|&&v| self.grace[v].is_some())
                .flat_map(|&v| self.alloc[v].iter())
                .filter(|&&(n, _)| n == node)
                .map(|&(_, g)| g)
                .sum();
            let i = node as usize;
            cap[i] = cap[i].saturating_sub(need.saturating_sub(coming));
        }
        Some(cap)
    }

    fn begin(&mut self, j: usize, now: i64, alloc: Vec<(u32, u32)>) {
        let job = &self.w.jobs[j];
        debug_assert_eq!(alloc.len(), job.nodes as usize);
        for &(node, g) in &alloc {
            debug_assert_eq!(g, job.per_node);
            self.free[node as usize] = self.free[node as usize].checked_sub(g).expect("GPUs over-allocated");
        }
        self.total_free -= u64::from(job.gpus());
        if let Some(p) = &mut self.placer {
            p.place(j, &alloc);
        }
        self.alloc[j] = alloc;
        self.start[j].get_or_insert(now);
        self.run_start[j] = now;
        self.accounted[j] = now;
        self.running.insert((now + self.limit[j] as i64, j));
        if self.limit[j] < self.remaining[j] && self.cfg.predicted_limits.is_some_and(|c| c.overrun == Overrun::Kill) {
            self.expiries.push(Reverse((now + self.limit[j] as i64, j)));
        }
        let end = now + self.remaining[j] as i64;
        self.run_end[j] = Some(end);
        self.ends.push(Reverse((end, j)));
        self.acct_pending[job.account] -= u64::from(job.gpus());
        self.acct_running[job.account] += u64::from(job.gpus());
    }

    /// A `PriorityCalcPeriod` pass: usage decay and accrual, Fair Tree, priorities; and a
    /// share-deviation sample while jobs wait.
    fn tick(&mut self, now: i64) {
        self.extend_limits(now);
        if matches!(self.cfg.policy, Policy::Multifactor | Policy::Fairway) {
            self.decay_pass(now);
            // The plugin's pass: each job's priority, then the jobs that go first.
            // Predictions first (cached per job), so that reading the jobs needs no `&mut`.
            let runtimes: Vec<u64> = (0..self.pending.len()).map(|i| self.expected_runtime(self.pending[i])).collect();
            let mut first = std::mem::take(&mut self.first_starving);
            let inputs = self.pending.iter().zip(&runtimes).map(|(&j, &rt)| self.priority_input_with(j, now, rt));
            let policy =
                priority::Policy { weights: &self.cfg.weights, terms: &self.cfg.fairway, history: None, model: None };
            let mut prios = Vec::with_capacity(self.pending.len());
            priority_pass(policy, &mut first, inputs, |j, out| prios.push((j, out.priority)));
            self.first_starving = first;
            for (j, p) in prios {
                self.key[j as usize] = -i64::from(p);
            }
            let key = &self.key;
            self.pending.sort_unstable_by_key(|&j| (key[j], j));
        }
        if !self.pending.is_empty() {
            let demand: Vec<f64> =
                self.acct_running.iter().zip(&self.acct_pending).map(|(r, p)| (r + p) as f64).collect();
            let weights: Vec<f64> = self.shares.iter().map(|&s| f64::from(s)).collect();
            let target = water_fill(self.total_gpus as f64, &weights, &demand);
            let dist: f64 = self.acct_running.iter().zip(&target).map(|(&a, t)| (a as f64 - t).abs()).sum();
            self.share_dev_sum += dist / (2.0 * self.total_gpus as f64);
            self.share_dev_samples += 1;
        }
    }

    /// What `slurmctld`'s decay thread does each period: decay all usage by the time since the
    /// last pass, charge the running jobs' GPU-seconds since (as the plugin charges them),
    /// rerun Fair Tree.
    fn decay_pass(&mut self, now: i64) {
        let factor = fairshare::decay_factor(self.cfg.half_life);
        if let Some(last) = self.last_pass {
            let real = fairshare::real_decay(factor, (now - last) as f64);
            if real != 1.0 {
                for a in &mut self.tree.nodes {
                    a.usage_raw *= real;
                }
            }
        }
        self.last_pass = Some(now);
        let running: Vec<usize> = self.running.iter().map(|&(_, j)| j).collect();
        for j in running {
            self.charge(j, now, false);
        }
        self.tree.fair_tree(self.assoc_node.len() as u32);
        for (a, &i) in self.assoc_node.iter().enumerate() {
            self.fs[a] = self.tree.nodes[i].fs_factor;
        }
    }

    /// Charges job `j`'s current run up to `now` to its association and every one above,
    /// with the plugin's accrual arithmetic (`fairshare::accrue`; GPUs are the billable
    /// TRES). `at_end`: the run stops now, as at Slurm's job end.
    fn charge(&mut self, j: usize, now: i64, at_end: bool) {
        let job = &self.w.jobs[j];
        let run = RunningJob {
            start_time: self.run_start[j],
            end_time: if at_end { now } else { 0 },
            end_time_exp: Some(self.run_start[j].saturating_add(self.limit[j] as i64)),
            time_limit: self.limit[j].div_ceil(60).min(u64::from(u32::MAX)) as u32,
            done: at_end,
            ..RunningJob::default()
        };
        let gpus = f64::from(job.gpus());
        let Some(c) = accrue::charge(&run, self.cfg.half_life, self.accounted[j], now, at_end, |_| gpus) else {
            return;
        };
        self.accounted[j] = now;
        let mut node = Some(self.assoc_node[job.assoc]);
        while let Some(i) = node {
            self.tree.nodes[i].usage_raw += c.real_decay;
            node = self.tree.nodes[i].parent;
        }
    }

    /// One scheduling pass at `now`.
    fn schedule(&mut self, now: i64) {
        self.passes += 1;
        let preempt = self.cfg.preempt.is_some();
        if self.pending.is_empty() || (self.total_free == 0 && !preempt) {
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        let mut keep = Vec::with_capacity(pending.len());
        let mut resv: Option<Reservation> = None;
        // Shapes (nodes, GPUs per node, ends after the shadow) that did not fit in this pass:
        // GPUs only get fewer within a pass, so they will not fit later in it either.
        let mut failed: Vec<(u32, u32, bool)> = Vec::new();
        let mut stop = false;
        for &j in &pending {
            // A full cluster may still preempt for the first job that does not fit.
            if stop || (self.total_free == 0 && (resv.is_some() || !preempt)) {
                keep.push(j);
                continue;
            }
            let job = &self.w.jobs[j];
            let (nodes, per_node, gpus) = (job.nodes, job.per_node, u64::from(job.gpus()));
            match &mut resv {
                None => {
                    if gpus <= self.total_free {
                        let rc = self.round_cap(j);
                        if let Some(a) = choose(&self.free, rc.as_deref(), nodes, per_node) {
                            self.begin(j, now, a);
                            continue;
                        }
                    }
                    if self.preempt_for(j, now) {
                        // Requeued at once (no grace): the job fits now.
                        if let Some(a) = choose(&self.free, None, nodes, per_node) {
                            self.begin(j, now, a);
                            continue;
                        }
                    }
                    keep.push(j);
                    if self.cfg.backfill {
                        resv = Some(self.reserve(j, now));
                    } else {
                        stop = true;
                    }
                }
                Some(r) => {
                    let long = now + self.limit[j] as i64 > r.shadow;
                    if gpus > self.total_free
                        || failed.iter().any(|&(n, g, l)| n <= nodes && g <= per_node && (!l || long))
                    {
                        keep.push(j);
                        continue;
                    }
                    let rc = self.round_cap(j);
                    let both: Option<Vec<u32>> = match (&rc, long) {
                        (Some(c), true) => Some(c.iter().zip(&r.cap_long).map(|(a, b)| *a.min(b)).collect()),
                        _ => None,
                    };
                    let cap = match (&both, &rc, long) {
                        (Some(b), _, _) => Some(&b[..]),
                        (None, _, true) => Some(&r.cap_long[..]),
                        (None, Some(c), false) => Some(&c[..]),
                        (None, None, false) => None,
                    };
                    match choose(&self.free, cap, nodes, per_node) {
                        Some(a) => {
                            for &(node, g) in &a {
                                let i = node as usize;
                                if long {
                                    r.cap_long[i] -= g;
                                }
                                r.cap_long[i] = r.cap_long[i].min(self.free[i] - g);
                            }
                            self.begin(j, now, a);
                        }
                        None => {
                            failed.push((nodes, per_node, long));
                            keep.push(j);
                        }
                    }
                }
            }
        }
        // Victims requeued during the pass went to the (emptied) queue.
        let requeued = std::mem::replace(&mut self.pending, keep);
        if !requeued.is_empty() {
            self.pending.extend(requeued);
            let key = &self.key;
            self.pending.sort_unstable_by_key(|&j| (key[j], j));
        }
    }

    /// EASY's reservation for job `j`: release running jobs in order of their limits until
    /// `j` fits; the GPUs it would get then are kept from jobs that outlast that moment.
    fn reserve(&self, j: usize, now: i64) -> Reservation {
        let job = &self.w.jobs[j];
        let (nodes, per_node) = (job.nodes, job.per_node);
        let mut avail = self.free.clone();
        let mut fitting = avail.iter().filter(|&&g| g >= per_node).count() as u32;
        let mut shadow = None;
        for &(limit_end, r) in &self.running {
            if let Some(s) = shadow {
                if limit_end > s {
                    break;
                }
            }
            for &(node, g) in &self.alloc[r] {
                let i = node as usize;
                let before = avail[i] >= per_node;
                avail[i] += g;
                if !before && avail[i] >= per_node {
                    fitting += 1;
                }
            }
            if shadow.is_none() && fitting >= nodes {
                shadow = Some(limit_end.max(now));
            }
        }
        let Some(shadow) = shadow else {
            // Cannot happen for a job that fits the empty cluster; block nothing.
            return Reservation { shadow: i64::MAX, cap_long: self.free.clone() };
        };
        let mut cap_long: Vec<u32> = avail.iter().zip(&self.free).map(|(&a, &f)| a.min(f)).collect();
        for (node, g) in choose(&avail, None, nodes, per_node).expect("fits at the shadow time") {
            let i = node as usize;
            cap_long[i] = self.free[i].min(avail[i] - g);
        }
        Reservation { shadow, cap_long }
    }
}

/// A job's own limit (seconds) as the whole minutes its predicted limit may grow to.
fn limit_cap(limit: u64) -> u32 {
    u32::try_from(limit / 60).unwrap_or(u32::MAX).max(1)
}

/// Best fit: `nodes` distinct nodes with at least `per_node` GPUs available (in `free`,
/// and within `cap` when given), fewest available first, then lowest index.
fn choose(free: &[u32], cap: Option<&[u32]>, nodes: u32, per_node: u32) -> Option<Vec<(u32, u32)>> {
    let avail = |i: usize| cap.map_or(free[i], |c| c[i].min(free[i]));
    if nodes == 1 {
        let mut best: Option<(u32, usize)> = None;
        for i in 0..free.len() {
            let a = avail(i);
            if a >= per_node && best.is_none_or(|(b, _)| a < b) {
                best = Some((a, i));
                if a == per_node {
                    break;
                }
            }
        }
        return best.map(|(_, i)| vec![(i as u32, per_node)]);
    }
    let mut c: Vec<(u32, usize)> = (0..free.len()).map(|i| (avail(i), i)).filter(|&(a, _)| a >= per_node).collect();
    if c.len() < nodes as usize {
        return None;
    }
    c.sort_unstable();
    let mut a: Vec<(u32, u32)> = c[..nodes as usize].iter().map(|&(_, i)| (i as u32, per_node)).collect();
    a.sort_unstable();
    Some(a)
}

/// root → accounts → users (one association per user within each account). Shares are
/// normalised within each level, as `assoc_mgr` normalises them for Fair Tree; users have 1
/// share each.
fn build_tree(w: &Workload, shares: &[u32]) -> (AssocTree, Vec<usize>) {
    let mut t = AssocTree::default();
    t.nodes.push(Assoc { name: "root".into(), shares_raw: 1, level_shares: 1, shares_norm: 1.0, ..Assoc::default() });
    let level: u32 = shares.iter().sum::<u32>().max(1);
    let mut account_node = Vec::new();
    for (a, name) in w.accounts.iter().enumerate() {
        let i = t.nodes.len();
        t.nodes.push(Assoc {
            name: name.clone(),
            parent: Some(AssocTree::ROOT),
            fs_parent: Some(AssocTree::ROOT),
            shares_raw: shares[a],
            level_shares: level,
            shares_norm: f64::from(shares[a]) / f64::from(level),
            ..Assoc::default()
        });
        t.nodes[AssocTree::ROOT].children.push(i);
        account_node.push(i);
    }
    let mut users_in = vec![0u32; w.accounts.len()];
    for &(a, _) in &w.assocs {
        users_in[a] += 1;
    }
    let mut assoc_node = Vec::new();
    for &(a, u) in &w.assocs {
        let i = t.nodes.len();
        let p = account_node[a];
        t.nodes.push(Assoc {
            name: format!("{}/{}", w.accounts[a], w.users[u]),
            parent: Some(p),
            fs_parent: Some(p),
            is_user: true,
            shares_raw: 1,
            level_shares: users_in[a],
            shares_norm: 1.0 / f64::from(users_in[a]),
            ..Assoc::default()
        });
        t.nodes[p].children.push(i);
        assoc_node.push(i);
    }
    (t, assoc_node)
}

#[cfg(test)]
mod tests;

/// Each job's QoS priority and its normalised value (priority over the highest of all
/// QoS, as assoc_mgr sets `norm_priority`).
fn job_qos(w: &Workload, priorities: &[(String, u32)]) -> Vec<(u32, f64)> {
    let max = priorities.iter().map(|&(_, p)| p).max().unwrap_or(0);
    w.jobs
        .iter()
        .map(|j| {
            let p = priorities.iter().find(|(q, _)| *q == j.qos).map_or(0, |&(_, p)| p);
            (p, if max == 0 { 0.0 } else { f64::from(p) / f64::from(max) })
        })
        .collect()
}
