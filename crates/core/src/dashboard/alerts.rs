//! Alerts: conditions on the board that have held long enough to need an admin.
//!
//! The same conditions as `config/monitoring/prometheus-alerts.yml`, for sites without
//! Prometheus: `fairway serve` observes each refresh and shows what has held for its
//! rule's time, on the page and as `fairway_alert` in `/metrics`.

use std::collections::{BTreeMap, VecDeque};

use serde::Serialize;

use super::Board;
use crate::config::Seconds;
use crate::predict::OnlineCalibration;
use crate::status::Status;

/// What an alert is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AlertKind {
    /// priority/fairway has not finished a pass for several periods.
    PriorityPassStale,
    /// A pending job has waited most of `max_wait` (or past it).
    NearStarvationBound,
    /// GPUs idle in a partition where a pending job would fit them.
    GpusIdleWhileJobsPend,
    /// An account's usage is far from its shares.
    AccountFarFromShare,
    /// More jobs outlive their predicted limits than the model's quantile allows.
    PredictorCoverageDrift,
    /// A node of a running multi-node job is down, drained or not responding.
    NodeLostUnderGang,
}

impl AlertKind {
    /// The name used on the page and as the `alert` label.
    pub fn name(self) -> &'static str {
        match self {
            Self::PriorityPassStale => "priority_pass_stale",
            Self::NearStarvationBound => "near_starvation_bound",
            Self::GpusIdleWhileJobsPend => "gpus_idle_while_jobs_pend",
            Self::AccountFarFromShare => "account_far_from_share",
            Self::PredictorCoverageDrift => "predictor_coverage_drift",
            Self::NodeLostUnderGang => "node_lost_under_gang",
        }
    }
}

/// One alert that holds now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Alert {
    /// What it is about.
    pub kind: AlertKind,
    /// What it names: a partition, an account, a job.
    pub subject: String,
    /// What holds, in plain words, with what to look at.
    pub message: String,
    /// Since when the condition has held, Unix seconds.
    pub since: i64,
}

/// How long each condition must hold, and the thresholds (the Prometheus rules'
/// defaults).
#[derive(Debug, Clone, PartialEq)]
pub struct AlertRules {
    /// GPUs idle while a job that would fit them pends, seconds.
    pub gpus_idle_for: i64,
    /// Waited this share of `max_wait`: near the bound.
    pub near_bound: f64,
    /// |effective usage − shares| above this...
    pub share_gap: f64,
    /// ... for this long, seconds.
    pub share_gap_for: i64,
    /// Misses above the target's share by this much...
    pub coverage_slack: f64,
    /// ... over at least this many finished jobs in the last day.
    pub coverage_min_jobs: u64,
    /// Passes older than this many PriorityCalcPeriods are stale.
    pub stale_periods: i64,
}

impl Default for AlertRules {
    fn default() -> Self {
        Self {
            gpus_idle_for: 15 * 60,
            near_bound: 0.9,
            share_gap: 0.25,
            share_gap_for: 6 * 3600,
            coverage_slack: 0.05,
            coverage_min_jobs: 20,
            stale_periods: 3,
        }
    }
}

impl AlertRules {
    fn hold(&self, kind: AlertKind) -> i64 {
        match kind {
            AlertKind::GpusIdleWhileJobsPend => self.gpus_idle_for,
            AlertKind::AccountFarFromShare => self.share_gap_for,
            _ => 0,
        }
    }
}

/// A day of the predictor's counts, to judge coverage over the last day rather than
/// since the model was installed.
const COVERAGE_WINDOW: i64 = 24 * 3600;

/// Conditions seen so far and since when: what turns a refresh into alerts.
#[derive(Debug, Clone, Default)]
pub struct Watch {
    rules: AlertRules,
    since: BTreeMap<(AlertKind, String), i64>,
    predictor: VecDeque<(i64, u64, u64)>,
}

impl Watch {
    /// A watch with these rules and nothing seen.
    pub fn new(rules: AlertRules) -> Self {
        Self { rules, ..Self::default() }
    }

    /// Looks at one refresh: fills `board.alerts` with the conditions that have held
    /// for their rule's time, and forgets those that no longer hold.
    pub fn observe(&mut self, board: &mut Board, status: Option<&Status>, calibration: Option<&OnlineCalibration>) {
        let now = board.taken_at;
        let mut holding = Vec::new();
        if let Some(st) = status {
            self.pass(st, now, &mut holding);
        }
        gpus_idle(board, &mut holding);
        self.shares(board, &mut holding);
        if let Some(c) = calibration {
            self.coverage(c, now, &mut holding);
        }
        lost_nodes(board, &mut holding);

        let mut since = BTreeMap::new();
        board.alerts.clear();
        for (kind, subject, message) in holding {
            let key = (kind, subject);
            let at = *self.since.get(&key).unwrap_or(&now);
            since.insert(key.clone(), at);
            if now - at >= self.rules.hold(kind) {
                board.alerts.push(Alert { kind, subject: key.1, message, since: at });
            }
        }
        self.since = since;
        board.alerts.sort_by(|a, b| (a.kind, &a.subject).cmp(&(b.kind, &b.subject)));
    }

    fn pass(&self, st: &Status, now: i64, out: &mut Vec<(AlertKind, String, String)>) {
        let age = now - st.pass_started;
        let limit = self.rules.stale_periods * (st.calc_period.max(1) as i64) + 60;
        if age > limit {
            out.push((
                AlertKind::PriorityPassStale,
                String::new(),
                format!("priority/fairway's last pass started {age} s ago (PriorityCalcPeriod {} s): is slurmctld's decay thread running?", st.calc_period),
            ));
        }
        let Some(max_wait) = st.max_wait.filter(|w| *w > 0) else { return };
        for j in &st.jobs {
            if j.eligible_since <= 0 {
                continue;
            }
            let waited = (now - j.eligible_since).max(0);
            if waited as f64 >= self.rules.near_bound * max_wait as f64 {
                let past = if waited as u64 >= max_wait { "past" } else { "near" };
                out.push((
                    AlertKind::NearStarvationBound,
                    j.id.to_string(),
                    format!(
                        "job {} in {} has been eligible {} of max_wait's {} ({past} the bound)",
                        j.id,
                        j.partition,
                        Seconds(waited as u64),
                        Seconds(max_wait)
                    ),
                ));
            }
        }
    }

    fn shares(&self, board: &Board, out: &mut Vec<(AlertKind, String, String)>) {
        for s in board.fair_share.iter().filter(|s| s.user.is_empty() && s.depth > 0) {
            let gap = s.effective_usage - s.norm_shares;
            if gap.abs() > self.rules.share_gap {
                let (more, by) = if gap > 0.0 { ("more", gap) } else { ("less", -gap) };
                out.push((
                    AlertKind::AccountFarFromShare,
                    s.account.clone(),
                    format!(
                        "account {} used {:.0}% of its siblings' usage against {:.0}% of their shares ({:.0} points {more}): sshare -A {}",
                        s.account,
                        100.0 * s.effective_usage,
                        100.0 * s.norm_shares,
                        100.0 * by,
                        s.account
                    ),
                ));
            }
        }
    }

    fn coverage(&mut self, c: &OnlineCalibration, now: i64, out: &mut Vec<(AlertKind, String, String)>) {
        // A new model starts its counts again.
        if self.predictor.back().is_some_and(|&(_, jobs, _)| jobs > c.jobs) {
            self.predictor.clear();
        }
        self.predictor.push_back((now, c.jobs, c.misses));
        while self.predictor.front().is_some_and(|&(t, _, _)| now - t > COVERAGE_WINDOW) {
            self.predictor.pop_front();
        }
        let &(_, jobs0, misses0) = self.predictor.front().expect("just pushed");
        let (jobs, misses) = (c.jobs - jobs0, c.misses.saturating_sub(misses0));
        let allowed = 1.0 - c.quantile + self.rules.coverage_slack;
        if jobs >= self.rules.coverage_min_jobs && misses as f64 / jobs as f64 > allowed {
            out.push((
                AlertKind::PredictorCoverageDrift,
                String::new(),
                format!(
                    "{misses} of the last {jobs} finished jobs outlived their predicted limits ({:.0}%, the model allows {:.0}%): retrain with `fairway predict train`",
                    100.0 * misses as f64 / jobs as f64,
                    100.0 * (1.0 - c.quantile)
                ),
            ));
        }
    }
}

/// A partition with idle GPUs on usable nodes where a pending job that waits on the
/// cluster (not on a hold, a dependency or a begin time) would fit them.
fn gpus_idle(board: &Board, out: &mut Vec<(AlertKind, String, String)>) {
    for p in &board.partitions {
        let free: Vec<usize> =
            board.nodes.iter().filter(|n| n.usable && n.partitions.contains(&p.name)).map(|n| n.idle_gpus()).collect();
        let fits = |g: u64, n: u32| g > 0 && free.iter().filter(|f| **f as u64 >= g).count() >= n as usize;
        let waiting: Vec<&super::Job> =
            p.pending.iter().filter(|j| j.waits_on_cluster() && fits(j.gpus_per_node, j.nodes)).collect();
        if waiting.is_empty() {
            continue;
        }
        let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
        for j in &waiting {
            *reasons.entry(j.reason.as_str()).or_default() += 1;
        }
        let reasons: Vec<String> = reasons.iter().map(|(r, n)| format!("{r}: {n}")).collect();
        out.push((
            AlertKind::GpusIdleWhileJobsPend,
            p.name.clone(),
            format!(
                "{} GPUs idle in {} while {} GPU job(s) that would fit them pend ({}); `fairway explain {}` says why",
                free.iter().sum::<usize>(),
                p.name,
                waiting.len(),
                reasons.join(", "),
                waiting[0].id
            ),
        ));
    }
}

/// A running multi-node job with a node that is down, drained or not responding.
fn lost_nodes(board: &Board, out: &mut Vec<(AlertKind, String, String)>) {
    for g in &board.gangs {
        let Ok(list) = g.node_list.parse::<crate::hostlist::Hostlist>() else { continue };
        let lost: Vec<&str> = board
            .nodes
            .iter()
            .filter(|n| n.state.contains("down") || n.state.contains("fail") || n.state.ends_with('*'))
            .filter(|n| list.contains(&n.name))
            .map(|n| n.name.as_str())
            .collect();
        if !lost.is_empty() {
            out.push((
                AlertKind::NodeLostUnderGang,
                g.id.clone(),
                format!(
                    "job {} runs on {} nodes and {} {} not responding or down: Slurm will requeue or end it",
                    g.id,
                    g.nodes,
                    lost.join(","),
                    if lost.len() == 1 { "is" } else { "are" }
                ),
            ));
        }
    }
}
