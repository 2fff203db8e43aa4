//! A job's priority under `priority/fairway`: one input in, one decision out.
//!
//! Every caller goes the same way: `priority/fairway`'s decay pass and its
//! `priority_p_set`, `sprio`'s stored factors, and the simulator. The caller reads a job
//! into one [`JobInput`] (the FFI layer from slurmctld's records, the simulator from its
//! trace), asks [`Pass::job`] inside a pass over the queue (or [`Policy::evaluate`] for a
//! single job), and writes the [`JobPriority`] back as it stands. Between the two, all of
//! the policy is here: multifactor's factors and weighted sums ([`crate::multifactor`]),
//! the run time the terms assume ([`crate::predict`]), Fairway's terms and the
//! starvation lift ([`crate::terms`]), one priority per partition and QOS, and the choice
//! of the job that goes first in each partition ([`FirstStarving`]).
//!
//! A new term is added here and in [`crate::terms`] alone: readers and writers copy
//! fields, they decide nothing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use serde::{Deserialize, Serialize};

use crate::config::PriorityConfig;
use crate::multifactor::{self, Factors, PartitionInput, QosInput, Weights};
use crate::predict::{self, JobKey, JobRequest, LearnedPredictor, RuntimePredictor, RuntimeSource};
use crate::terms::{self, FirstStarving, Lift, Terms, TermsInput, FIRST_STARVING};

/// Everything a job's priority is computed from, read once per evaluation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobInput {
    /// The job id.
    pub job_id: u32,
    /// The priority an administrator set directly (`scontrol update Priority=`), which
    /// stands as it is; `None` for a priority the plugin computes.
    pub admin_priority: Option<u32>,
    /// Multifactor's inputs.
    pub factors: multifactor::JobInput,
    /// Fairway's terms' inputs; `None` when every term is off (nothing to read).
    pub terms: Option<TermsJob>,
    /// One entry per partition of a job with several partitions (or, with several QOS,
    /// its one partition), in `priority_array` order; empty otherwise.
    pub partitions: Vec<PartitionInput>,
    /// The QOS of a job that asked for several (Slurm 24.11's `--qos=a,b`), in
    /// `priority_array` order; empty for the job's one QOS.
    pub qos: Vec<QosInput>,
}

/// What Fairway's terms read of a job.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TermsJob {
    /// The partition, or comma-separated partitions, the job competes in: the group
    /// within which one starving job goes first.
    pub partition: String,
    /// The job's user (uid): one starving job per user and partition is lifted.
    #[serde(default)]
    pub user: u32,
    /// When the job became eligible (0: not yet).
    pub eligible_since: i64,
    /// `--deadline`, Unix seconds.
    pub deadline: Option<i64>,
    /// The job's QOS (deadline urgency is granted per QOS: `[priority] deadline_qos`).
    #[serde(default)]
    pub qos: String,
    /// GPUs requested.
    pub gpus: u32,
    /// What a run-time predictor may know of the job.
    pub request: Option<JobRequest>,
    /// The run time to assume when the caller already knows it (the simulator's cached
    /// or perfect predictions); `None` predicts it from `request`.
    pub expected_runtime: Option<u64>,
    /// Its user's fair-share factor, for the starvation bound's threshold
    /// ([`FirstStarving::holds_back`]) where the factors are not at hand
    /// (`site_factor/fairway`); the priority route takes it from the factors.
    #[serde(default)]
    pub fairshare: Option<f64>,
}

/// `sprio`'s factors, weighted: what the plugin stores on the job for `sprio` to show.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Weighted {
    /// Age × `PriorityWeightAge`.
    pub age: f64,
    /// Association × `PriorityWeightAssoc`.
    pub assoc: f64,
    /// Fair share × `PriorityWeightFairshare`.
    pub fairshare: f64,
    /// Job size × `PriorityWeightJobSize`.
    pub job_size: f64,
    /// Partition × `PriorityWeightPartition`.
    pub partition: f64,
    /// QOS × `PriorityWeightQOS`.
    pub qos: f64,
    /// Per TRES: factor × weight (empty without `PriorityWeightTRES`).
    pub tres: Vec<f64>,
    /// `PriorityWeightTRES`, per TRES (empty without it).
    pub tres_weights: Vec<f64>,
    /// The site factor, Fairway's terms included, `NICE_OFFSET`-based.
    pub site: u32,
    /// Nice, `NICE_OFFSET`-based.
    pub nice: u32,
}

impl Weighted {
    /// Each factor times its weight, as multifactor stores them for `sprio`.
    pub fn new(w: &Weights, f: &Factors) -> Self {
        let with_tres = !w.tres.is_empty() && f.tres.len() == w.tres.len();
        Self {
            age: f.age * f64::from(w.age),
            assoc: f.assoc * f64::from(w.assoc),
            fairshare: f.fairshare * f64::from(w.fairshare),
            job_size: f.job_size * f64::from(w.job_size),
            partition: f.partition * f64::from(w.partition),
            qos: f.qos * f64::from(w.qos),
            tres: if with_tres { f.tres.iter().zip(&w.tres).map(|(x, wt)| x * wt).collect() } else { Vec::new() },
            tres_weights: if with_tres { w.tres.clone() } else { Vec::new() },
            site: f.site,
            nice: f.nice,
        }
    }
}

/// A job's priority and everything written back with it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobPriority {
    /// The job's priority.
    pub priority: u32,
    /// The factors for `sprio`; `None` for a priority an administrator set, whose stored
    /// factors are cleared.
    pub weighted: Option<Weighted>,
    /// One priority per partition × QOS pair ([`JobInput::partitions`] ×
    /// [`JobInput::qos`]); empty for a job with one partition and one QOS.
    pub per_partition: Vec<u32>,
    /// Fairway's terms, when any is on.
    pub terms: Option<Terms>,
    /// The run time the terms assumed, seconds (prediction, else the time limit).
    pub expected_runtime: Option<u64>,
    /// Where that run time came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_source: Option<RuntimeSource>,
}

impl JobPriority {
    /// How long the job has starved past `max_wait`, if it has.
    pub fn starving_for(&self) -> Option<u64> {
        self.terms.as_ref().and_then(|t| t.starving_for)
    }

    /// This priority for the job that goes first in its partition.
    fn first(mut self) -> Self {
        self.priority = FIRST_STARVING;
        self.per_partition.fill(FIRST_STARVING);
        self
    }
}

/// What priorities are computed with: slurm.conf's weights, fairway.toml's terms, and
/// the run-time knowledge behind the predicted-work term.
#[derive(Debug, Clone, Copy)]
pub struct Policy<'a> {
    /// Multifactor's weights and flags.
    pub weights: &'a Weights,
    /// `[priority]` of fairway.toml.
    pub terms: &'a PriorityConfig,
    /// Run times learned at job end.
    pub history: Option<&'a RuntimePredictor>,
    /// The learned model (`[predictor] model`), when one is loaded.
    pub model: Option<&'a LearnedPredictor>,
}

impl Policy<'_> {
    /// The job's priority, `lift`ed as [`FirstStarving`] chose should it starve. With
    /// every term off it is multifactor's.
    pub fn evaluate(&self, job: &JobInput, lift: Lift) -> JobPriority {
        if let Some(p) = job.admin_priority {
            return JobPriority { priority: p, ..JobPriority::default() };
        }
        let w = self.weights;
        let mut factors = multifactor::factors(w, &job.factors);
        let (terms, expected) = match &job.terms {
            Some(t) if terms::any_enabled(self.terms) => {
                let (terms, expected) = self.terms_of(t, job.factors.now);
                let bonus = terms::site_bonus(self.terms, &terms);
                factors.site = (i64::from(factors.site) + bonus).clamp(0, i64::from(u32::MAX)) as u32;
                (Some(terms), expected)
            }
            _ => (None, None),
        };
        let (expected_runtime, runtime_source) = (expected.map(|e| e.0), expected.map(|e| e.1));
        let starving = terms.as_ref().is_some_and(|t| t.starving_for.is_some());
        let lift = |usual| match lift {
            Lift::Lifted | Lift::First if starving => terms::starving_priority(usual, lift == Lift::First),
            _ => usual,
        };
        let priority = lift(multifactor::priority(w, &factors));
        let per_partition = if job.partitions.is_empty() {
            Vec::new() // most jobs: one partition, one QOS
        } else {
            // The job's own QOS is the one `None`.
            let qos: Vec<Option<QosInput>> =
                if job.qos.is_empty() { vec![None] } else { job.qos.iter().copied().map(Some).collect() };
            job.partitions
                .iter()
                .flat_map(|p| qos.iter().map(move |&q| (p, q)))
                .map(|(p, q)| lift(multifactor::priority_in_partition_qos(w, &factors, p, q)))
                .collect()
        };
        JobPriority {
            priority,
            weighted: Some(Weighted::new(w, &factors)),
            per_partition,
            terms,
            expected_runtime,
            runtime_source,
        }
    }

    /// The job's terms at `now` and the run time they assumed.
    fn terms_of(&self, t: &TermsJob, now: i64) -> (Terms, Option<(u64, RuntimeSource)>) {
        let expected = self.expected_runtime(t);
        let input = TermsInput {
            now,
            eligible_since: t.eligible_since,
            deadline: t.deadline.filter(|_| terms::may_claim_deadline(self.terms, &t.qos)),
            expected_runtime: expected.map_or(f64::NAN, |(s, _)| s as f64),
            gpus: t.gpus,
        };
        (terms::compute(self.terms, &input), expected)
    }

    /// The run time the terms assume: the caller's, else the prediction from the job's
    /// history or the learned model (`predict::expected_runtime`).
    fn expected_runtime(&self, t: &TermsJob) -> Option<(u64, RuntimeSource)> {
        if let Some(given) = t.expected_runtime {
            return Some((given, RuntimeSource::Given));
        }
        let req = t.request.as_ref()?;
        match (self.history, self.model) {
            (Some(h), model) => predict::expected_runtime_from(h, model, req),
            (None, Some(m)) => predict::expected_runtime_from(&RuntimePredictor::default(), Some(m), req),
            (None, None) => req.time_limit.map(|l| (l, RuntimeSource::TimeLimit)),
        }
    }

    /// `site_factor/fairway`'s route: the job's new site factor from its current one,
    /// Fairway's part of it last time (`last`: what was written and Fairway's part of
    /// it), and its terms; `None` when every term is off.
    pub fn site_factor(
        &self,
        job: &TermsJob,
        now: i64,
        current: u32,
        last: Option<(u32, i64)>,
        lift: Lift,
    ) -> Option<SiteFactor> {
        if !terms::any_enabled(self.terms) {
            return None;
        }
        let (t, expected) = self.terms_of(job, now);
        let part = terms::site_contribution(self.terms, &t, lift);
        Some(SiteFactor {
            site: terms::replace_site_part(current, last, part),
            part,
            terms: t,
            expected_runtime: expected.map(|(s, _)| s),
        })
    }
}

/// A job's site factor under `site_factor/fairway`.
#[derive(Debug, Clone, PartialEq)]
pub struct SiteFactor {
    /// The new site factor, `NICE_OFFSET`-based.
    pub site: u32,
    /// Fairway's part of it.
    pub part: i64,
    /// The terms behind it.
    pub terms: Terms,
    /// The run time the terms assumed, seconds.
    pub expected_runtime: Option<u64>,
}

/// One pass over the pending jobs (a decay pass of the plugin, a `PriorityCalcPeriod`
/// tick of the simulator): each job's priority as it is reached, and at the end the jobs
/// that go first in their partitions.
///
/// During the pass no job is lifted as first: every starving job is a candidate, and
/// [`Pass::finish`] returns the one chosen per partition with its priority to write. So
/// after each pass exactly one job per partition holds [`FIRST_STARVING`], and the job
/// list is walked once.
pub struct Pass<'p, 'a> {
    policy: Policy<'a>,
    first: &'p mut FirstStarving<JobPriority>,
}

impl<'p, 'a> Pass<'p, 'a> {
    /// Starts a pass; `first` keeps the jobs that go first between passes.
    pub fn new(policy: Policy<'a>, first: &'p mut FirstStarving<JobPriority>) -> Self {
        Self { policy, first }
    }

    /// The job's priority now (lifted if the last pass chose it); a starving job
    /// becomes a candidate to be lifted and to go first.
    pub fn job(&mut self, job: &JobInput) -> JobPriority {
        let held =
            job.terms.as_ref().is_some_and(|t| held_back(self.policy.terms, self.first, t.user, job.factors.fairshare));
        let lift = if held { Lift::None } else { self.first.lift(job.job_id).min(Lift::Lifted) };
        let mut out = self.policy.evaluate(job, lift);
        if held {
            out.terms.as_mut().map(hold);
        }
        if let (Some(t), Some(s)) = (&job.terms, out.starving_for()) {
            self.first.note(&t.partition, t.user, job.job_id, s, || out.clone().first());
        }
        out
    }

    /// Ends the pass: the jobs that now go first in their partitions, each with the
    /// priority to write, by job id.
    pub fn finish(self) -> Vec<(u32, JobPriority)> {
        self.first.end_pass()
    }
}

/// What the priority plugins keep between calls: fairway.toml's `[priority]`, the run
/// times learned at job end, the learned model, and the jobs that go first in their
/// partitions (`P`: what is written for such a job, [`JobPriority`] or [`SiteFactor`]).
///
/// Safe to share between slurmctld's threads. Lock order: a caller holding slurmctld's
/// job lock may call any method (they take only these locks, never slurmctld's).
pub struct State<P> {
    /// Replaced whole on `scontrol reconfigure`; a pass keeps the one it started with.
    terms: RwLock<Arc<PriorityConfig>>,
    history: Mutex<RuntimePredictor>,
    model: RwLock<Option<Arc<LearnedPredictor>>>,
    /// Whether the history changed since [`State::history_to_save`] last took it.
    learned: AtomicBool,
    first: Mutex<FirstStarving<P>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock only means a panic elsewhere (caught by the plugins' guard); the
    // data is whole, so keep serving.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<P> State<P> {
    /// The state at start: `terms` from fairway.toml, the saved run-time history, the
    /// learned model if one is configured.
    pub fn new(terms: PriorityConfig, history: RuntimePredictor, model: Option<LearnedPredictor>) -> Self {
        Self {
            terms: RwLock::new(Arc::new(terms)),
            history: Mutex::new(history),
            model: RwLock::new(model.map(Arc::new)),
            learned: AtomicBool::new(false),
            first: Mutex::new(FirstStarving::default()),
        }
    }

    /// fairway.toml's `[priority]`, as last loaded.
    pub fn terms(&self) -> Arc<PriorityConfig> {
        self.terms.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Replaces the terms (`scontrol reconfigure`): the next evaluation uses them; the
    /// run-time history, the model and the jobs that go first are kept.
    pub fn set_terms(&self, terms: PriorityConfig) {
        *self.terms.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(terms);
    }

    /// Whether any of Fairway's terms is on (else a job's terms need not be read).
    pub fn enabled(&self) -> bool {
        terms::any_enabled(&self.terms())
    }

    /// Runs `f` with the policy under `weights` and the jobs that go first: a whole pass
    /// or one job. The history is locked meanwhile, so no job end learns halfway through.
    pub fn with<R>(&self, weights: &Weights, f: impl FnOnce(Policy<'_>, &mut FirstStarving<P>) -> R) -> R {
        let model = self.model.read().unwrap_or_else(|e| e.into_inner()).clone();
        let terms = self.terms();
        let history = lock(&self.history);
        let mut first = lock(&self.first);
        let policy = Policy { weights, terms: &terms, history: Some(&history), model: model.as_deref() };
        f(policy, &mut first)
    }

    /// Learns a finished job's run time.
    pub fn learn(&self, key: &JobKey, runtime: u64, time_limit: Option<u64>) {
        predict::learn(&mut lock(&self.history), key, runtime, time_limit);
        self.learned.store(true, Ordering::Relaxed);
    }

    /// The history to save, if it changed since it was last taken.
    pub fn history_to_save(&self) -> Option<RuntimePredictor> {
        self.learned.swap(false, Ordering::Relaxed).then(|| lock(&self.history).clone())
    }

    /// Job keys with learned run times.
    pub fn history_len(&self) -> usize {
        lock(&self.history).len()
    }

    /// Replaces the learned model (`None`: predict from the history alone).
    pub fn set_model(&self, model: Option<LearnedPredictor>) {
        *self.model.write().unwrap_or_else(|e| e.into_inner()) = model.map(Arc::new);
    }

    /// Whether a learned model is in use.
    pub fn has_model(&self) -> bool {
        self.model.read().unwrap_or_else(|e| e.into_inner()).is_some()
    }
}

impl State<JobPriority> {
    /// One job's priority outside a pass (at submission, on an update): lifted if it is
    /// the job that goes first in its partition.
    pub fn evaluate(&self, weights: &Weights, job: &JobInput) -> JobPriority {
        self.with(weights, |policy, first| policy.evaluate(job, first.lift(job.job_id)))
    }
}

impl State<SiteFactor> {
    /// One job's site factor outside a pass (see [`Policy::site_factor`]).
    pub fn site_factor(
        &self,
        id: u32,
        job: &TermsJob,
        now: i64,
        current: u32,
        last: Option<(u32, i64)>,
    ) -> Option<SiteFactor> {
        // The terms alone: multifactor sums the other factors itself.
        self.with(&Weights::default(), |policy, first| policy.site_factor(job, now, current, last, first.lift(id)))
    }

    /// Runs `f` over one pass of `site_factor/fairway` (see [`SitePass`]).
    pub fn site_pass<R>(&self, f: impl FnOnce(SitePass<'_, '_>) -> R) -> R {
        self.with(&Weights::default(), |policy, first| f(SitePass::new(policy, first)))
    }
}

/// Notes a pending job's user for the starvation bound's threshold, and says whether the job
/// is held back from being lifted: a heavy user's, with `max_wait_heavy_users` off.
fn held_back<P>(config: &PriorityConfig, first: &mut FirstStarving<P>, user: u32, fairshare: f64) -> bool {
    if config.max_wait.is_none() || config.max_wait_heavy_users {
        return false;
    }
    first.see(user, fairshare);
    first.holds_back(fairshare)
}

/// A held-back job past `max_wait` is not starving, and says why.
fn hold(t: &mut Terms) {
    if t.starving_for.take().is_some() {
        t.held_by_fair_share = true;
    }
}

/// One pass of `site_factor/fairway` over the pending jobs: as [`Pass`], for the terms
/// alone (added to the site factor that `priority/multifactor` sums).
pub struct SitePass<'p, 'a> {
    policy: Policy<'a>,
    first: &'p mut FirstStarving<SiteFactor>,
}

impl<'p, 'a> SitePass<'p, 'a> {
    /// Starts a pass; `first` keeps the jobs that go first between passes.
    pub fn new(policy: Policy<'a>, first: &'p mut FirstStarving<SiteFactor>) -> Self {
        Self { policy, first }
    }

    /// The job's new site factor (see [`Policy::site_factor`]); a starving job becomes a
    /// candidate to go first.
    pub fn job(
        &mut self,
        id: u32,
        job: &TermsJob,
        now: i64,
        current: u32,
        last: Option<(u32, i64)>,
    ) -> Option<SiteFactor> {
        let held = job.fairshare.is_some_and(|fs| held_back(self.policy.terms, self.first, job.user, fs));
        let lift = if held { Lift::None } else { self.first.lift(id).min(Lift::Lifted) };
        let mut out = self.policy.site_factor(job, now, current, last, lift)?;
        if held {
            hold(&mut out.terms);
        }
        if let Some(s) = out.terms.starving_for {
            let policy = self.policy;
            self.first.note(&job.partition, job.user, id, s, || {
                policy.site_factor(job, now, current, last, Lift::First).expect("terms are on")
            });
        }
        Some(out)
    }

    /// Ends the pass: the jobs that now go first, each with the site factor to write.
    pub fn finish(self) -> Vec<(u32, SiteFactor)> {
        self.first.end_pass()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Seconds;
    use crate::multifactor::NICE_OFFSET;
    use crate::terms::STARVING_BASE;

    fn weights() -> Weights {
        Weights {
            age: 1000,
            fairshare: 10_000,
            job_size: 1000,
            partition: 1000,
            max_age: 7 * 86_400,
            ..Weights::default()
        }
    }

    fn job(id: u32, waited: i64, fairshare: f64) -> JobInput {
        JobInput {
            job_id: id,
            factors: multifactor::JobInput {
                now: 100_000,
                accrue_time: 100_000 - waited,
                fairshare,
                min_cpus: 4,
                min_nodes: 1,
                cluster_cpus: 64,
                node_count: 8,
                has_assoc: true,
                part_priority_job_factor: 1,
                part_norm_priority: 1.0,
                site_factor: NICE_OFFSET,
                nice: NICE_OFFSET,
                ..multifactor::JobInput::default()
            },
            terms: Some(TermsJob {
                partition: "gpu".into(),
                user: 1000 + id, // a user of its own
                eligible_since: 100_000 - waited,
                gpus: 4,
                expected_runtime: Some(900),
                ..TermsJob::default()
            }),
            ..JobInput::default()
        }
    }

    /// A job of 4 CPUs on one of 8 nodes (64 CPUs), waiting an hour, fair share 0.5.
    fn mf() -> (Weights, JobInput) {
        let w = Weights { age: 1000, fairshare: 10_000, job_size: 1000, max_age: 7 * 86_400, ..Weights::default() };
        let mut j = job(1, 3600, 0.5);
        j.factors.now = 10_000;
        j.factors.accrue_time = 10_000 - 3600;
        j.factors.part_priority_job_factor = 0;
        let t = j.terms.as_mut().unwrap();
        t.eligible_since = 10_000 - 3600;
        (w, j)
    }

    fn starving_since(mut j: JobInput, since: i64) -> JobInput {
        j.terms.as_mut().unwrap().eligible_since = since;
        j
    }

    #[test]
    fn with_terms_off_it_is_multifactors_sum() {
        let (w, j) = mf();
        let out = Policy { weights: &w, terms: &PriorityConfig::default(), history: None, model: None }
            .evaluate(&j, Lift::None);
        assert_eq!(out.terms, None);
        // 5.95 (age) + 5000 (fair share) + 1000 × (1/8 + 4/64)/2 = 5099.7
        assert_eq!(out.priority, 5099);
    }

    #[test]
    fn deadline_urgency_only_for_the_qos_allowed_to_claim_it() {
        let (w, mut j) = mf();
        let t = j.terms.as_mut().unwrap();
        t.deadline = Some(10_000 + 1000); // 900 s expected: 100 s of slack
        let c =
            PriorityConfig { weight_deadline: 5000, deadline_qos: vec!["high".into()], ..PriorityConfig::default() };
        let p = Policy { weights: &w, terms: &c, history: None, model: None };
        let urgency = |qos: &str| {
            let mut j = j.clone();
            j.terms.as_mut().unwrap().qos = qos.into();
            p.evaluate(&j, Lift::None).terms.unwrap().deadline
        };
        assert_eq!(urgency("normal"), 0.0, "any user can set --deadline: it buys nothing outside deadline_qos");
        assert_eq!(urgency("high"), 0.9);
        let none = PriorityConfig { weight_deadline: 5000, ..PriorityConfig::default() };
        assert!(!terms::any_enabled(&none), "a deadline weight with no deadline_qos turns nothing on");
    }

    #[test]
    fn terms_add_the_bonus_or_lift_a_starving_job() {
        let (w, j) = mf();
        let c =
            PriorityConfig { weight_predicted_work: 1000, max_wait: Some(Seconds(7200)), ..PriorityConfig::default() };
        let p = Policy { weights: &w, terms: &c, history: None, model: None };
        // 900 s × 4 GPUs = one GPU-hour: factor 1/2, bonus 500.
        let out = p.evaluate(&j, Lift::None);
        assert_eq!(out.terms.as_ref().unwrap().predicted_work, 0.5);
        assert_eq!(out.weighted.as_ref().unwrap().site, NICE_OFFSET + 500);
        assert_eq!(out.priority, 5099 + 500);
        let starving = starving_since(j.clone(), 10_000 - 7300);
        let out = p.evaluate(&starving, Lift::Lifted);
        assert_eq!(out.starving_for(), Some(100));
        assert_eq!(out.priority, terms::starving_priority(5099 + 500, false));
        // Starving but not lifted (its user has a longer-starving job): the usual priority.
        let unlifted = p.evaluate(&starving, Lift::None);
        assert_eq!((unlifted.priority, unlifted.starving_for()), (5099 + 500, Some(100)));
        // Starving longer does not reorder lifted jobs; their usual priority does.
        assert_eq!(p.evaluate(&starving_since(j.clone(), 10_000 - 9000), Lift::Lifted).priority, out.priority);
        let mut fairer = starving.clone();
        fairer.factors.fairshare = 0.6;
        let fairer = p.evaluate(&fairer, Lift::Lifted).priority;
        assert!(fairer > out.priority);
        // Except the first starving job of the partition, whatever its usual priority.
        assert!(p.evaluate(&starving, Lift::First).priority > fairer);
        // A lift means nothing to a job that is not starving.
        assert_eq!(p.evaluate(&j, Lift::First).priority, 5099 + 500);
    }

    #[test]
    fn terms_off_is_multifactor() {
        let w = weights();
        let off = PriorityConfig::default();
        let p = Policy { weights: &w, terms: &off, history: None, model: None };
        let j = job(1, 3600, 0.5);
        let out = p.evaluate(&j, Lift::None);
        let f = multifactor::factors(&w, &j.factors);
        assert_eq!(out.priority, multifactor::priority(&w, &f));
        assert_eq!(out.weighted, Some(Weighted::new(&w, &f)));
        assert_eq!(out.terms, None);
        assert!(out.per_partition.is_empty());
    }

    #[test]
    fn an_admin_priority_stands() {
        let w = weights();
        let c = PriorityConfig { max_wait: Some(Seconds(1)), ..PriorityConfig::default() };
        let p = Policy { weights: &w, terms: &c, history: None, model: None };
        let out = p.evaluate(&JobInput { admin_priority: Some(7), ..job(1, 3600, 0.5) }, Lift::First);
        assert_eq!((out.priority, out.weighted, out.per_partition.len()), (7, None, 0));
    }

    #[test]
    fn terms_add_to_the_site_factor_and_every_partition() {
        let w = weights();
        let c = PriorityConfig { weight_predicted_work: 1000, ..PriorityConfig::default() };
        let off = PriorityConfig::default();
        let mut j = job(1, 3600, 0.5);
        j.partitions = vec![
            PartitionInput { priority_job_factor: 1, norm_priority: 1.0, tres: vec![] },
            PartitionInput { priority_job_factor: 1, norm_priority: 0.5, tres: vec![] },
        ];
        j.qos = vec![QosInput { priority: 10, norm_priority: 1.0 }];
        let on = Policy { weights: &w, terms: &c, history: None, model: None }.evaluate(&j, Lift::None);
        let base = Policy { weights: &w, terms: &off, history: None, model: None }.evaluate(&j, Lift::None);
        // 900 s × 4 GPUs is one GPU-hour: half the weight.
        assert_eq!(on.priority, base.priority + 500);
        assert_eq!(on.weighted.as_ref().unwrap().site, NICE_OFFSET + 500);
        assert_eq!(on.per_partition.len(), 2);
        assert_eq!(on.per_partition[0], base.per_partition[0] + 500);
        assert_eq!(base.per_partition[0] - base.per_partition[1], 500, "the second partition's factor is half");
        assert_eq!(on.expected_runtime, Some(900));
    }

    #[test]
    fn the_prediction_comes_from_history_when_not_given() {
        let w = weights();
        let c = PriorityConfig { weight_predicted_work: 1000, ..PriorityConfig::default() };
        let key = predict::JobKey { user: 1, account: "a".into(), name: "n".into(), gpus: 4 };
        let mut h = RuntimePredictor::default();
        h.record(&key, 800);
        h.record(&key, 1000);
        let mut j = job(1, 60, 0.5);
        let t = j.terms.as_mut().unwrap();
        t.expected_runtime = None;
        t.request = Some(JobRequest { key, time_limit: Some(7200), nodes: None, cpus: None, submit: 0 });
        let out = Policy { weights: &w, terms: &c, history: Some(&h), model: None }.evaluate(&j, Lift::None);
        assert_eq!(out.expected_runtime, Some(900));
        let no_history = Policy { weights: &w, terms: &c, history: None, model: None }.evaluate(&j, Lift::None);
        assert_eq!(no_history.expected_runtime, Some(7200), "the limit without history");
    }

    #[test]
    fn a_pass_lifts_one_job_per_partition_at_its_end() {
        let w = weights();
        // Every user's jobs, the heavier ones' too (the threshold is the next test's).
        let c =
            PriorityConfig { max_wait: Some(Seconds(3600)), max_wait_heavy_users: true, ..PriorityConfig::default() };
        let p = Policy { weights: &w, terms: &c, history: None, model: None };
        let mut first = FirstStarving::default();
        let jobs = [job(1, 7200, 0.1), job(2, 9000, 0.1), job(3, 8000, 0.9), job(4, 60, 0.9)];
        let mut pass = Pass::new(p, &mut first);
        let out: Vec<JobPriority> = jobs.iter().map(|j| pass.job(j)).collect();
        // The first pass that sees them starve chooses; nothing is lifted yet.
        assert!(out[3].priority > out[0].priority, "fair share orders them");
        assert!(out.iter().all(|o| o.priority < STARVING_BASE));
        let lifted = pass.finish();
        assert_eq!(lifted.len(), 1);
        assert_eq!(lifted[0].0, 2, "job 2 has starved longest");
        assert_eq!(lifted[0].1.priority, FIRST_STARVING);
        assert_eq!(first.lift(2), Lift::First);
        // Outside a pass the chosen job keeps its place.
        assert_eq!(p.evaluate(&jobs[1], first.lift(2)).priority, FIRST_STARVING);
        // The next pass lifts the starving jobs (each its user's only one) above the rest,
        // in their usual order (fair share).
        let mut pass = Pass::new(p, &mut first);
        let out: Vec<JobPriority> = jobs.iter().map(|j| pass.job(j)).collect();
        assert!(out[2].priority > out[0].priority && out[0].priority > out[3].priority);
        assert!(out.iter().all(|o| o.priority < FIRST_STARVING));
        assert_eq!(pass.finish()[0].0, 2);
    }

    #[test]
    fn a_users_flood_of_starving_jobs_is_lifted_one_at_a_time() {
        let w = weights();
        // Job 4's user is the heaviest: lifted here only because heavy users are too.
        let c =
            PriorityConfig { max_wait: Some(Seconds(3600)), max_wait_heavy_users: true, ..PriorityConfig::default() };
        let p = Policy { weights: &w, terms: &c, history: None, model: None };
        let mut first = FirstStarving::default();
        let flood = |id: u32, waited: i64| {
            let mut j = job(id, waited, 0.9);
            j.terms.as_mut().unwrap().user = 7;
            j
        };
        let jobs = [flood(1, 9000), flood(2, 8000), flood(3, 7500), job(4, 5000, 0.1), job(5, 60, 0.5)];
        for _ in 0..2 {
            let mut pass = Pass::new(p, &mut first);
            jobs.iter().for_each(|j| drop(pass.job(j)));
            pass.finish();
        }
        let prio: Vec<u32> = jobs.iter().map(|j| p.evaluate(j, first.lift(j.job_id)).priority).collect();
        assert_eq!(prio[0], FIRST_STARVING, "the flood's longest-starving job goes first");
        assert!(prio[3] >= STARVING_BASE && prio[3] < FIRST_STARVING, "the other user's starving job is lifted");
        for flooded in &prio[1..3] {
            assert!(*flooded < STARVING_BASE && *flooded > prio[4], "only fair share and age order the rest");
        }
    }

    #[test]
    fn heavy_users_starving_jobs_wait_where_fair_share_puts_them() {
        let w = weights();
        let c = PriorityConfig { max_wait: Some(Seconds(3600)), ..PriorityConfig::default() };
        let p = Policy { weights: &w, terms: &c, history: None, model: None };
        let mut first = FirstStarving::default();
        let user = |mut j: JobInput, u: u32| {
            j.terms.as_mut().unwrap().user = u;
            j
        };
        // Three users; the heaviest (fair share 0.1) has starved longest.
        let jobs = [user(job(1, 9000, 0.1), 1), user(job(2, 8000, 0.5), 2), user(job(3, 60, 0.9), 3)];
        let pass = |first: &mut FirstStarving<JobPriority>| {
            let mut pass = Pass::new(p, first);
            let out: Vec<JobPriority> = jobs.iter().map(|j| pass.job(j)).collect();
            (out, pass.finish())
        };
        let (out, chosen) = pass(&mut first);
        assert_eq!(chosen[0].0, 1, "the first pass knows no threshold yet");
        assert!(out[0].starving_for().is_some());
        let (out, chosen) = pass(&mut first);
        let t = out[0].terms.as_ref().unwrap();
        assert!(t.starving_for.is_none() && t.held_by_fair_share, "below the threshold 0.5: held back");
        assert!(out[0].priority < STARVING_BASE, "no longer lifted");
        assert_eq!(chosen[0].0, 2, "the next user's starving job goes first instead");
        assert_eq!((first.lift(1), first.lift(2)), (Lift::None, Lift::First));
        let (out, _) = pass(&mut first);
        assert!(out[1].priority >= STARVING_BASE && out[0].priority < STARVING_BASE);
        assert!(!out[2].terms.as_ref().unwrap().held_by_fair_share, "not past max_wait: nothing to say");
    }

    #[test]
    fn the_state_predicts_from_what_it_learned_and_saves_it_once() {
        let w = weights();
        let c = PriorityConfig { weight_predicted_work: 1000, ..PriorityConfig::default() };
        let state: State<JobPriority> = State::new(c, RuntimePredictor::default(), None);
        let key = predict::JobKey { user: 1, account: "a".into(), name: "n".into(), gpus: 4 };
        let mut j = job(1, 60, 0.5);
        let t = j.terms.as_mut().unwrap();
        t.expected_runtime = None;
        t.request = Some(JobRequest { key: key.clone(), time_limit: Some(7200), nodes: None, cpus: None, submit: 0 });
        assert_eq!(state.evaluate(&w, &j).expected_runtime, Some(7200));
        assert!(state.history_to_save().is_none(), "nothing learned yet");
        state.learn(&key, 600, Some(7200));
        state.learn(&key, 800, Some(7200));
        assert_eq!(state.evaluate(&w, &j).expected_runtime, Some(700));
        assert_eq!(state.history_to_save().map(|h| h.len()), Some(1));
        assert!(state.history_to_save().is_none(), "taken once");
    }

    #[test]
    fn new_terms_apply_from_the_next_evaluation_and_keep_what_was_learned() {
        let w = weights();
        let state: State<JobPriority> = State::new(PriorityConfig::default(), RuntimePredictor::default(), None);
        let key = predict::JobKey { user: 1, account: "a".into(), name: "n".into(), gpus: 4 };
        let mut j = job(1, 60, 0.5);
        let t = j.terms.as_mut().unwrap();
        t.expected_runtime = None;
        t.request = Some(JobRequest { key: key.clone(), time_limit: Some(7200), nodes: None, cpus: None, submit: 0 });
        state.learn(&key, 600, Some(7200));
        let before = state.evaluate(&w, &j);
        assert!(!state.enabled() && before.terms.is_none(), "terms off: multifactor's sum");

        state.set_terms(PriorityConfig { weight_predicted_work: 1000, ..PriorityConfig::default() });
        let after = state.evaluate(&w, &j);
        assert!(state.enabled());
        assert_eq!(after.expected_runtime, Some(600), "the history learned before is kept");
        assert!(after.priority > before.priority, "the bonus applies: {} -> {}", before.priority, after.priority);
        assert_eq!(state.terms().weight_predicted_work, 1000);
    }

    #[test]
    fn a_site_pass_lifts_the_longest_starving_job_by_the_first_starving_site_factor() {
        let w = weights();
        let c =
            PriorityConfig { weight_predicted_work: 1000, max_wait: Some(Seconds(3600)), ..PriorityConfig::default() };
        let state: State<SiteFactor> = State::new(c, RuntimePredictor::default(), None);
        let jobs = [job(1, 7200, 0.5), job(2, 9000, 0.5), job(3, 60, 0.5)];
        let pass = || {
            state.with(&w, |policy, first| {
                let mut pass = SitePass::new(policy, first);
                let out: Vec<SiteFactor> = jobs
                    .iter()
                    .map(|j| pass.job(j.job_id, j.terms.as_ref().unwrap(), 100_000, NICE_OFFSET, None).unwrap())
                    .collect();
                (out, pass.finish())
            })
        };
        // The first pass chooses; the second lifts.
        let (out, _) = pass();
        assert_eq!(out[0].part, 500);
        let (out, lifted) = pass();
        // 900 s × 4 GPUs: 500 for everyone, and the starving lift for jobs 1 and 2.
        assert_eq!(out[2].part, 500);
        assert_eq!(out[0].part, 500 + terms::STARVING_SITE);
        assert_eq!(out[1].site, NICE_OFFSET + (500 + terms::STARVING_SITE) as u32);
        assert_eq!(lifted.len(), 1);
        assert_eq!(lifted[0].0, 2);
        assert_eq!(lifted[0].1.part, 500 + terms::STARVING_SITE + terms::FIRST_STARVING_SITE);
    }
}
