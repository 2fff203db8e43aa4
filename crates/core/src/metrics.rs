//! `fairway metrics` and `fairway serve`'s `/metrics`: what an admin graphs and alerts on,
//! in the OpenMetrics text format (which Prometheus scrapes).
//!
//! Pure, as [`crate::explain`] is: the CLI hands over what `squeue` and `sshare` print
//! (run as whoever scrapes, so `PrivateData` holds), the status `priority/fairway` wrote
//! after its last pass ([`crate::status`]) and the learned model's online calibration,
//! and this module renders them. Every series is named `fairway_*`; label values are
//! Slurm's own names (partition, QOS, account, user).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::dashboard::Alert;
use crate::predict::OnlineCalibration;
use crate::preempt::budget::Graces;
use crate::preempt::Preemptions;
use crate::status::Status;
use crate::submit::counters::Counters;

/// `squeue -h -a -t PENDING,RUNNING -o SQUEUE_FORMAT`: state, partition, QOS, account,
/// nodes, GRES per node.
pub const SQUEUE_FORMAT: &str = "%T|%P|%q|%a|%D|%b";

/// `sinfo -h -o SINFO_FORMAT`: partition, nodes, GRES per node, node state (one row per
/// group of alike nodes).
pub const SINFO_FORMAT: &str = "%P|%D|%G|%T";

/// `sshare -a -h -P -o SSHARE_FORMAT`.
pub const SSHARE_FORMAT: &str = "Account,User,NormShares,RawUsage,EffectvUsage,FairShare,LevelFS";

/// The content type of what [`render`] writes.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Everything one scrape is made from.
#[derive(Debug, Clone, Default)]
pub struct Scrape<'a> {
    /// What `squeue` printed in [`SQUEUE_FORMAT`].
    pub squeue: &'a str,
    /// What `sshare` printed in [`SSHARE_FORMAT`].
    pub sshare: &'a str,
    /// What `sinfo` printed in [`SINFO_FORMAT`].
    pub sinfo: &'a str,
    /// The last pass's status, when it could be read.
    pub status: Option<&'a Status>,
    /// The learned model's online calibration, when one is kept.
    pub calibration: Option<&'a OnlineCalibration>,
    /// job_submit/fairway's decisions, when it publishes them.
    pub submit: Option<&'a Counters>,
    /// preempt/fairway's preemption counts, when it keeps them.
    pub preemptions: Option<&'a Preemptions>,
    /// How those preemptions' victims used their grace (sacct), when it could be read.
    pub graces: Option<Graces>,
    /// Alerts `fairway serve` watched hold now (none from a one-off `fairway metrics`).
    pub alerts: Option<&'a [Alert]>,
    /// Now, Unix seconds.
    pub now: i64,
}

type Labels = Vec<(&'static str, String)>;

/// One metric family: its samples by label set.
struct Family {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    samples: BTreeMap<Vec<(&'static str, String)>, f64>,
}

impl Family {
    fn new(name: &'static str, kind: &'static str, help: &'static str) -> Self {
        Self { name, kind, help, samples: BTreeMap::new() }
    }

    fn add(&mut self, labels: Labels, v: f64) {
        *self.samples.entry(labels).or_insert(0.0) += v;
    }

    fn set(&mut self, labels: Labels, v: f64) {
        self.samples.insert(labels, v);
    }

    fn write(&self, out: &mut String) {
        let _ = writeln!(out, "# TYPE {} {}\n# HELP {} {}", self.name, self.kind, self.name, self.help);
        let suffix = if self.kind == "counter" { "_total" } else { "" };
        for (labels, v) in &self.samples {
            let _ = write!(out, "{}{suffix}", self.name);
            if !labels.is_empty() {
                let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
                let _ = write!(out, "{{{}}}", l.join(","));
            }
            let _ = writeln!(out, " {}", number(*v));
        }
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', r"\\").replace('"', "\\\"").replace('\n', r"\n")
}

fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        // sshare prints `inf` for the LevelFS of an account with no usage.
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

/// GPUs per node in a GRES request as squeue prints it (`gpu:2`, `gres:gpu:h100:4`,
/// `gres/gpu=8`, `gpu:a100:2(IDX:0-1)`, `N/A`).
pub fn gpus_per_node(gres: &str) -> u64 {
    gres.split(',')
        .filter(|g| g.contains("gpu"))
        .filter_map(|g| g.split('(').next()?.rsplit([':', '=']).next()?.parse::<u64>().ok())
        .sum()
}

/// The scrape, rendered (ends with `# EOF`).
pub fn render(s: &Scrape<'_>) -> String {
    let mut families = Vec::new();
    queue(s.squeue, &mut families);
    capacity(s.sinfo, &mut families);
    fair_share(s.sshare, &mut families);
    if let Some(st) = s.status {
        pass(st, s.now, &mut families);
    }
    if let Some(c) = s.calibration {
        calibration(c, &mut families);
    }
    if let Some(c) = s.submit {
        submissions(c, &mut families);
    }
    if let Some(p) = s.preemptions {
        let (jobs, total) = p.summary();
        let mut f = Family::new(
            "fairway_preempted_jobs",
            "gauge",
            "Jobs preempt/fairway preempted in the last 30 days (its budget's memory).",
        );
        f.set(vec![], jobs as f64);
        let mut n = Family::new(
            "fairway_preemptions",
            "gauge",
            "Preemptions of those jobs, in all (each counts once per round).",
        );
        n.set(vec![], total as f64);
        families.extend([f, n]);
    }
    if let Some(g) = s.graces {
        let mut v = Family::new(
            "fairway_preemption_victims",
            "gauge",
            "Victims of those preemptions (the last of each) by how they ended: acknowledged (ended inside \
             their grace: checkpoint saved and fairway ckpt-done, or finished) or expired (stopped when the grace ran out).",
        );
        v.set(vec![("outcome", "acknowledged".into())], g.acknowledged as f64);
        v.set(vec![("outcome", "expired".into())], g.expired as f64);
        let mut secs = Family::new(
            "fairway_preemption_grace_seconds",
            "gauge",
            "Grace those victims were given and used, in all (used/given: how much of it checkpoints take).",
        );
        secs.set(vec![("grace", "given".into())], g.given as f64);
        secs.set(vec![("grace", "used".into())], g.used as f64);
        families.extend([v, secs]);
    }
    if let Some(alerts) = s.alerts {
        let mut f = Family::new(
            "fairway_alert",
            "gauge",
            "1 for each alert fairway serve sees holding for its rule's time (see the page for why).",
        );
        for a in alerts {
            f.set(vec![("alert", a.kind.name().into()), ("subject", a.subject.clone())], 1.0);
        }
        families.push(f);
    }
    let mut out = String::new();
    for f in &families {
        f.write(&mut out);
    }
    out.push_str("# EOF\n");
    out
}

fn queue(squeue: &str, out: &mut Vec<Family>) {
    let mut jobs = Family::new("fairway_jobs", "gauge", "Jobs by state, partition, QOS and account (squeue).");
    let mut gpus =
        Family::new("fairway_gpus", "gauge", "GPUs the jobs ask for (pending) or hold (running), by the same labels.");
    for l in squeue.lines() {
        let f: Vec<&str> = l.split('|').map(str::trim).collect();
        let [state, partition, qos, account, nodes, gres] = f.as_slice() else { continue };
        let labels: Labels = vec![
            ("state", state.to_ascii_lowercase()),
            ("partition", partition.to_string()),
            ("qos", qos.to_string()),
            ("account", account.to_string()),
        ];
        jobs.add(labels.clone(), 1.0);
        gpus.add(labels, (nodes.parse::<u64>().unwrap_or(1) * gpus_per_node(gres)) as f64);
    }
    out.extend([jobs, gpus]);
}

fn capacity(sinfo: &str, out: &mut Vec<Family>) {
    let mut gpus = Family::new(
        "fairway_partition_gpus",
        "gauge",
        "GPUs of the partition's nodes, by node state (sinfo); idle GPUs are these less the running jobs'.",
    );
    for l in sinfo.lines() {
        let f: Vec<&str> = l.split('|').map(str::trim).collect();
        let [partition, nodes, gres, state] = f.as_slice() else { continue };
        // sinfo marks the default partition with `*`, and non-responding nodes with `*` too.
        let labels = vec![
            ("partition", partition.trim_end_matches('*').to_string()),
            ("state", state.trim_end_matches(['*', '~', '#', '!', '%', '$', '@', '^', '-']).to_string()),
        ];
        gpus.add(labels, (nodes.parse::<u64>().unwrap_or(0) * gpus_per_node(gres)) as f64);
    }
    out.push(gpus);
}

fn fair_share(sshare: &str, out: &mut Vec<Family>) {
    let mut shares = Family::new("fairway_account_norm_shares", "gauge", "The account's shares, normalized (sshare).");
    let mut usage = Family::new(
        "fairway_account_effective_usage",
        "gauge",
        "The account's usage, decayed and normalized (sshare).",
    );
    let mut raw = Family::new("fairway_account_raw_usage", "gauge", "The account's usage, decayed, in CPU-seconds.");
    let mut level = Family::new("fairway_account_level_fairshare", "gauge", "Fair Tree's LevelFS of the account.");
    let mut user = Family::new("fairway_user_fairshare", "gauge", "A user's fair-share factor in an account (sshare).");
    for l in sshare.lines() {
        let f: Vec<&str> = l.split('|').map(str::trim).collect();
        let [account, name, norm_shares, raw_usage, effective, fairshare, level_fs] = f.as_slice() else { continue };
        let num = |s: &str| s.parse::<f64>().ok();
        if name.is_empty() {
            let labels = || vec![("account", account.to_string())];
            for (fam, v) in
                [(&mut shares, norm_shares), (&mut usage, effective), (&mut raw, raw_usage), (&mut level, level_fs)]
            {
                if let Some(v) = num(v) {
                    fam.set(labels(), v);
                }
            }
        } else if let Some(v) = num(fairshare) {
            user.set(vec![("account", account.to_string()), ("user", name.to_string())], v);
        }
    }
    out.extend([shares, usage, raw, level, user]);
}

fn submissions(c: &Counters, out: &mut Vec<Family>) {
    let mut decided = Family::new(
        "fairway_job_submit_requests",
        "counter",
        "Requests job_submit/fairway decided since slurmctld started, by request and outcome.",
    );
    decided.set(vec![("request", "submit".into()), ("outcome", "accepted".into())], c.accepted as f64);
    decided.set(vec![("request", "submit".into()), ("outcome", "changed".into())], c.changed as f64);
    for (request, refused) in [("submit", &c.refused), ("update", &c.updates_refused)] {
        for (kind, n) in refused {
            decided.set(
                vec![("request", request.into()), ("outcome", "refused".into()), ("rule", kind.clone())],
                *n as f64,
            );
        }
    }
    let mut since =
        Family::new("fairway_job_submit_counting_since_seconds", "gauge", "When job_submit/fairway's counts began.");
    since.set(vec![], c.since as f64);
    out.extend([decided, since]);
}

fn pass(st: &Status, now: i64, out: &mut Vec<Family>) {
    let mut seconds =
        Family::new("fairway_priority_pass_seconds", "gauge", "Wall time of priority/fairway's last decay pass.");
    seconds.set(vec![], st.pass_seconds);
    let mut jobs = Family::new("fairway_priority_pass_jobs", "gauge", "Pending jobs whose priority the last pass set.");
    jobs.set(vec![], st.pass_jobs as f64);
    let mut age = Family::new(
        "fairway_priority_pass_age_seconds",
        "gauge",
        "Seconds since the last pass started (stale: > 2 periods).",
    );
    age.set(vec![], (now - st.pass_started).max(0) as f64);
    out.extend([seconds, jobs, age]);
    if let Some(w) = st.max_wait {
        let mut max_wait =
            Family::new("fairway_max_wait_seconds", "gauge", "The starvation bound ([priority] max_wait).");
        max_wait.set(vec![], w as f64);
        out.push(max_wait);
    }
    if st.jobs.is_empty() {
        return;
    }
    let mut starving =
        Family::new("fairway_starving_jobs", "gauge", "Pending jobs eligible for longer than max_wait, by partition.");
    let mut oldest = Family::new(
        "fairway_oldest_wait_seconds",
        "gauge",
        "How long the longest-eligible pending job has waited, by partition (at the last pass).",
    );
    for j in &st.jobs {
        let labels = || vec![("partition", j.partition.clone())];
        starving.add(labels(), if j.starving_for.is_some() { 1.0 } else { 0.0 });
        if j.eligible_since > 0 {
            let waited = (st.pass_started - j.eligible_since).max(0) as f64;
            let e = oldest.samples.entry(labels()).or_insert(0.0);
            *e = e.max(waited);
        }
    }
    out.extend([starving, oldest]);
}

fn calibration(c: &OnlineCalibration, out: &mut Vec<Family>) {
    let mut jobs =
        Family::new("fairway_predictor_jobs", "counter", "Finished jobs the learned model's calibration learned from.");
    jobs.set(vec![], c.jobs as f64);
    let mut misses = Family::new(
        "fairway_predictor_misses",
        "counter",
        "Of those, jobs that outlived their upper-quantile prediction.",
    );
    misses.set(vec![], c.misses as f64);
    let mut target = Family::new(
        "fairway_predictor_target_coverage",
        "gauge",
        "The share of jobs meant to end within the prediction.",
    );
    target.set(vec![], c.quantile);
    out.extend([jobs, misses, target]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::{JobTerms, FORMAT};

    #[test]
    fn queue_and_fair_share_are_counted_as_squeue_and_sshare_show_them() {
        let squeue = "PENDING|gpu|normal|vision|2|gres:gpu:4\nPENDING|gpu|normal|vision|1|gpu:a100:2\n\
                      RUNNING|gpu|high|nlp|1|gres/gpu=8\nRUNNING|cpu|normal|nlp|1|N/A\nnot a row\n";
        let sshare =
            "root||1.000000|100|1.000000||\n ml||1.000000|100|1.000000||1.0\n  vision||0.600000|80|0.800000||0.75\n  nlp||0.4|0|0||inf\n\
                      \x20 vision|fw_alice|1.000000|80|1.000000|0.250000|\n";
        let text = render(&Scrape { squeue, sshare, now: 0, ..Scrape::default() });
        assert!(
            text.contains("fairway_jobs{state=\"pending\",partition=\"gpu\",qos=\"normal\",account=\"vision\"} 2\n")
        );
        assert!(
            text.contains("fairway_gpus{state=\"pending\",partition=\"gpu\",qos=\"normal\",account=\"vision\"} 10\n")
        );
        assert!(text.contains("fairway_gpus{state=\"running\",partition=\"gpu\",qos=\"high\",account=\"nlp\"} 8\n"));
        assert!(text.contains("fairway_gpus{state=\"running\",partition=\"cpu\",qos=\"normal\",account=\"nlp\"} 0\n"));
        assert!(text.contains("fairway_account_norm_shares{account=\"vision\"} 0.6\n"));
        assert!(text.contains("fairway_account_level_fairshare{account=\"vision\"} 0.75\n"));
        assert!(text.contains("fairway_account_level_fairshare{account=\"nlp\"} +Inf\n"), "{text}");
        assert!(text.contains("fairway_user_fairshare{account=\"vision\",user=\"fw_alice\"} 0.25\n"));
        assert!(!text.contains("fairway_priority_pass"), "no status, no pass metrics");
        assert!(!text.contains("fairway_job_submit"), "no counters, no submission metrics");
        let mut c = Counters::new(5);
        c.submitted(Ok(true));
        c.submitted(Err(crate::submit::RejectKind::Gres));
        c.update_refused(crate::submit::RejectKind::Qos);
        let text = render(&Scrape { submit: Some(&c), ..Scrape::default() });
        for line in [
            "# TYPE fairway_job_submit_requests counter\n",
            "fairway_job_submit_requests_total{request=\"submit\",outcome=\"changed\"} 1\n",
            "fairway_job_submit_requests_total{request=\"submit\",outcome=\"accepted\"} 0\n",
            "fairway_job_submit_requests_total{request=\"submit\",outcome=\"refused\",rule=\"gres\"} 1\n",
            "fairway_job_submit_requests_total{request=\"update\",outcome=\"refused\",rule=\"qos\"} 1\n",
            "fairway_job_submit_counting_since_seconds 5\n",
        ] {
            assert!(text.contains(line), "{line}{text}");
        }
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn partition_gpus_by_node_state() {
        let sinfo =
            "gpu*|2|gpu:a100:8|mixed\ngpu*|1|gpu:a100:8(S:0-1)|idle\ngpu*|1|gpu:a100:8|drained*\ncpu|4|(null)|idle\n";
        let text = render(&Scrape { sinfo, ..Scrape::default() });
        assert!(text.contains("fairway_partition_gpus{partition=\"gpu\",state=\"mixed\"} 16\n"), "{text}");
        assert!(text.contains("fairway_partition_gpus{partition=\"gpu\",state=\"idle\"} 8\n"), "{text}");
        assert!(text.contains("fairway_partition_gpus{partition=\"gpu\",state=\"drained\"} 8\n"), "{text}");
        assert!(text.contains("fairway_partition_gpus{partition=\"cpu\",state=\"idle\"} 0\n"), "{text}");
    }

    #[test]
    fn the_pass_shows_starving_jobs_the_oldest_wait_and_the_calibration() {
        let job = |id, eligible_since, starving_for| JobTerms {
            id,
            partition: "gpu".into(),
            eligible_since,
            starving_for,
            ..JobTerms::default()
        };
        let st = Status {
            format: FORMAT,
            pass_started: 10_000,
            pass_seconds: 0.02,
            pass_jobs: 3,
            calc_period: 60,
            max_wait: Some(3600),
            jobs: vec![job(1, 5_000, Some(1400)), job(2, 9_000, None), job(3, 0, None)],
            ..Status::default()
        };
        let cal = OnlineCalibration { jobs: 40, misses: 3, ..OnlineCalibration::for_model("m".into(), 0.9, 0.01) };
        let text = render(&Scrape { status: Some(&st), calibration: Some(&cal), now: 10_030, ..Scrape::default() });
        for line in [
            "fairway_priority_pass_seconds 0.02\n",
            "fairway_priority_pass_jobs 3\n",
            "fairway_priority_pass_age_seconds 30\n",
            "fairway_max_wait_seconds 3600\n",
            "fairway_starving_jobs{partition=\"gpu\"} 1\n",
            "fairway_oldest_wait_seconds{partition=\"gpu\"} 5000\n",
            "# TYPE fairway_predictor_misses counter\n",
            "fairway_predictor_misses_total 3\n",
            "fairway_predictor_target_coverage 0.9\n",
        ] {
            assert!(text.contains(line), "{line:?} missing from\n{text}");
        }
    }

    #[test]
    fn label_values_are_escaped() {
        let text = render(&Scrape { squeue: "PENDING|a\"b|n\\q|acct|1|N/A\n", ..Scrape::default() });
        assert!(text.contains(r#"partition="a\"b",qos="n\\q""#), "{text}");
    }
}
