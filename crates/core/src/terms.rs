//! Fairway's own priority terms, added to multifactor's sum through the site factor.
//!
//! All are off by default (`[priority]` in fairway.toml):
//! - **predicted work**: less predicted GPU-time ranks higher. The factor is
//!   `1 / (1 + work / 1 GPU-hour)`, so it is 1 for tiny jobs, 0.5 at one GPU-hour and
//!   tends to 0; times `weight_predicted_work` it can never add more than that weight.
//! - **deadline urgency**: for a job with `--deadline` in one of `deadline_qos`,
//!   `expected / (expected + slack)` where slack is the time left after the expected run
//!   time: near 0 with plenty of slack, 1 once the job can only just (or no longer)
//!   finish in time. Other jobs' deadlines count for nothing: any user may set one.
//! - **starvation bound**: a job eligible for longer than `max_wait`, whose user is among
//!   the lightest quarter of the users with jobs pending by fair-share factor
//!   ([`LIFT_QUANTILE`]), is lifted above
//!   every job that is not, and in each partition the job starving longest goes first of
//!   all ([`FirstStarving`]); the other lifted jobs keep their usual order. Only each
//!   user's longest-starving job in a partition is lifted: a user's flood of jobs that
//!   all starve cannot jump everyone else's; the next is lifted once that one starts.
//!   Why both: ordering every starving job by starvation time turns a backlog into FIFO
//!   once most jobs have waited `max_wait` (in the simulator, openb's pods on 16 GPUs:
//!   mean JCT 1.90× multifactor's), while the usual order alone lets a large job be
//!   overtaken by smaller starving ones for ever (there: longest wait 380 h, more than
//!   without any bound). One job first per partition holds the backfill reservation until
//!   it starts: 1.40× and a longest wait of 145 h, against multifactor's 357 h.
//!   Why not heavier users' jobs: under a backlog the jobs that wait longest are those of
//!   users who used most, so lifting them undoes fair share; in `bench/sim-sweep.sh` it
//!   cost up to 1.96× multifactor's mean JCT and 2.07× its share deviation (with
//!   predicted limits). The bound is for jobs that wait for any other reason (their size,
//!   Fairway's own terms). A quantile of the users waiting, not "under their share":
//!   Fair Tree's shares count idle siblings (the root user's association, an idle
//!   account), so under the latter nearly every active user is "over". The threshold is
//!   the last pass's, as the lifts are. `max_wait_heavy_users = true` lifts them all.

use std::collections::{HashMap, HashSet};

use crate::config::PriorityConfig;

/// One GPU-hour, the work at which the predicted-work factor is 1/2.
pub const WORK_SCALE_GPU_SECONDS: f64 = 3600.0;

/// Priorities from here up are reserved for starving jobs.
pub const STARVING_BASE: u32 = 0xF000_0000;

/// The priority of the first starving job of a partition ([`FirstStarving`]): above every
/// other starving job, and clear of the values Slurm gives meaning (`NO_VAL`, `INFINITE`).
pub const FIRST_STARVING: u32 = 0xFFF0_0000;
const _: () = assert!(FIRST_STARVING < u32::MAX - 1, "NO_VAL and INFINITE mean something to Slurm");

/// Starving jobs are lifted only for users whose fair-share factor is at least this
/// quantile of the users waiting (the lightest quarter): the bound is for jobs that wait
/// for other reasons than their user's usage ([`FirstStarving::holds_back`]). In
/// `bench/sim-sweep.sh` the median (0.5) cost up to 1.22× multifactor's share deviation
/// under a backlog (synthetic seed 3, load 1.0), the upper quartile 0.96×, both about
/// 1.07× its mean JCT there for half its longest wait.
pub const LIFT_QUANTILE: f64 = 0.75;

/// Run time assumed when neither a prediction nor a time limit exists (one day).
pub const DEFAULT_RUNTIME_SECS: f64 = 86_400.0;

/// What the terms are computed from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TermsInput {
    /// Now, Unix seconds.
    pub now: i64,
    /// When the job became eligible (0 = not eligible yet).
    pub eligible_since: i64,
    /// `--deadline`, Unix seconds, of a job whose QOS may claim urgency
    /// ([`PriorityConfig::deadline_qos`]); `None` otherwise.
    pub deadline: Option<i64>,
    /// Expected run time in seconds: the prediction, else the time limit.
    pub expected_runtime: f64,
    /// GPUs requested (0 for CPU-only jobs, which count as one device).
    pub gpus: u32,
}

/// The unweighted terms of one job.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Terms {
    /// Predicted-work factor in (0, 1].
    pub predicted_work: f64,
    /// Deadline urgency in [0, 1].
    pub deadline: f64,
    /// Seconds past `max_wait`, if the job is starving.
    pub starving_for: Option<u64>,
    /// Eligible past `max_wait`, but not starving: its user's fair-share factor is below
    /// the upper quartile of the users with jobs pending ([`FirstStarving::holds_back`]), and
    /// `max_wait_heavy_users` is off.
    #[serde(default)]
    pub held_by_fair_share: bool,
}

/// Computes the terms that `config` turns on.
pub fn compute(config: &PriorityConfig, j: &TermsInput) -> Terms {
    // A job that ran in under a second predicts 0: count it as 1 s, not as unknown.
    let expected = if j.expected_runtime.is_finite() && j.expected_runtime >= 0.0 {
        j.expected_runtime.max(1.0)
    } else {
        DEFAULT_RUNTIME_SECS
    };
    let mut t = Terms::default();
    if config.weight_predicted_work > 0 {
        let work = expected * f64::from(j.gpus.max(1));
        t.predicted_work = 1.0 / (1.0 + work / WORK_SCALE_GPU_SECONDS);
    }
    if config.weight_deadline > 0 {
        if let Some(deadline) = j.deadline {
            let slack = (deadline - j.now) as f64 - expected;
            t.deadline = if slack <= 0.0 { 1.0 } else { expected / (expected + slack) };
        }
    }
    if let (Some(max_wait), true) = (config.max_wait, j.eligible_since > 0) {
        let waited = (j.now - j.eligible_since).max(0) as u64;
        if waited >= max_wait.0 {
            t.starving_for = Some(waited - max_wait.0);
        }
    }
    t
}

/// The weighted sum of the non-starvation terms, added to the site factor.
pub fn site_bonus(config: &PriorityConfig, t: &Terms) -> i64 {
    site_bonus_of(
        t.predicted_work * f64::from(config.weight_predicted_work),
        t.deadline * f64::from(config.weight_deadline),
    )
}

/// The site bonus of the terms' points (each factor already times its weight).
pub fn site_bonus_of(predicted_work: f64, deadline: f64) -> i64 {
    (predicted_work + deadline).round() as i64
}

/// The priority of a starving job whose priority would otherwise be `usual`: above every
/// non-starving one (multifactor sums stay below [`STARVING_BASE`] unless weights are set
/// absurdly high), in the usual order among starving jobs, and [`FIRST_STARVING`] for the
/// first starving job of its partition.
pub fn starving_priority(usual: u32, first: bool) -> u32 {
    if first {
        FIRST_STARVING
    } else {
        STARVING_BASE.saturating_add(usual).min(FIRST_STARVING - 1)
    }
}

/// How far a job that has starved past `max_wait` is lifted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Lift {
    /// Not lifted: it does not starve, or its user has a job in the partition that has
    /// starved longer (one lifted job per user and partition, so that a user's flood of
    /// starving jobs cannot jump everyone else's), or it began to starve after the
    /// last pass.
    #[default]
    None,
    /// Above every job that is not lifted, in the usual order among lifted jobs.
    Lifted,
    /// The first starving job of its partition: above every other.
    First,
}

/// The starving jobs that are lifted: per partition and user, the job starving longest
/// (the lowest job id on a tie); and of those, per partition, the one that goes first.
///
/// They are chosen during a priority pass ([`note`](Self::note) for every starving
/// pending job, with what to write for it should it go first); at the end of the pass
/// ([`end_pass`](Self::end_pass)) the jobs that go first, one per partition, are returned
/// with that payload, so the jobs are walked only once. The choice holds until the next
/// pass makes another.
#[derive(Debug, Clone)]
pub struct FirstStarving<P = ()> {
    first: HashSet<u32>,
    lifted: HashSet<u32>,
    /// Per partition, the longest-starving job noted in this pass: (seconds starving, id,
    /// payload).
    next: HashMap<String, (u64, u32, P)>,
    /// Per partition and user, the longest-starving job noted in this pass.
    next_lifted: HashMap<(String, u32), (u64, u32)>,
    /// Each user with a job pending in this pass, and their (highest) fair-share factor.
    seen: HashMap<u32, f64>,
    /// The upper quartile of the last pass's `seen` ([`LIFT_QUANTILE`]): users below it
    /// are not lifted.
    threshold: Option<f64>,
}

impl<P> Default for FirstStarving<P> {
    fn default() -> Self {
        Self {
            first: HashSet::new(),
            lifted: HashSet::new(),
            next: HashMap::new(),
            next_lifted: HashMap::new(),
            seen: HashMap::new(),
            threshold: None,
        }
    }
}

/// Whether (`starving_for`, `job_id`) starved longer than the entry `e` (the lower id
/// on a tie).
fn longer(starving_for: u64, job_id: u32, e: (u64, u32)) -> bool {
    (starving_for, std::cmp::Reverse(job_id)) > (e.0, std::cmp::Reverse(e.1))
}

impl<P> FirstStarving<P> {
    /// The choice a pass left: the jobs that go first and the jobs lifted, by job id
    /// (what a record of the next pass starts from).
    pub fn chosen(&self) -> (Vec<u32>, Vec<u32>) {
        let sorted = |s: &HashSet<u32>| {
            let mut v: Vec<u32> = s.iter().copied().collect();
            v.sort_unstable();
            v
        };
        (sorted(&self.first), sorted(&self.lifted))
    }

    /// Resumes from a choice [`chosen`](Self::chosen) returned.
    pub fn resume(first: &[u32], lifted: &[u32]) -> Self {
        Self { first: first.iter().copied().collect(), lifted: lifted.iter().copied().collect(), ..Self::default() }
    }

    /// How far `job_id` is lifted, as the last pass chose.
    pub fn lift(&self, job_id: u32) -> Lift {
        if self.first.contains(&job_id) {
            Lift::First
        } else if self.lifted.contains(&job_id) {
            Lift::Lifted
        } else {
            Lift::None
        }
    }

    /// Notes a pending job of `user` in `partition` that has starved for `starving_for`
    /// seconds; `payload` is made only if it is the partition's longest-starving so far.
    pub fn note(&mut self, partition: &str, user: u32, job_id: u32, starving_for: u64, payload: impl FnOnce() -> P) {
        match self.next_lifted.get_mut(&(partition.to_owned(), user)) {
            Some(e) if longer(starving_for, job_id, *e) => *e = (starving_for, job_id),
            Some(_) => {}
            None => {
                self.next_lifted.insert((partition.to_owned(), user), (starving_for, job_id));
            }
        }
        match self.next.get_mut(partition) {
            Some(e) if longer(starving_for, job_id, (e.0, e.1)) => *e = (starving_for, job_id, payload()),
            Some(_) => {}
            None => {
                self.next.insert(partition.to_owned(), (starving_for, job_id, payload()));
            }
        }
    }

    /// Notes a pending job of `user`, whose fair-share factor is `fairshare`, for the
    /// threshold [`holds_back`](Self::holds_back) compares with from the next pass on.
    pub fn see(&mut self, user: u32, fairshare: f64) {
        if fairshare.is_finite() {
            let e = self.seen.entry(user).or_insert(fairshare);
            *e = e.max(fairshare);
        }
    }

    /// Whether a starving job whose user's fair-share factor is `fairshare` is held back
    /// from being lifted: below the upper quartile of the users the last pass saw (none
    /// held before a pass has seen any).
    pub fn holds_back(&self, fairshare: f64) -> bool {
        self.threshold.is_some_and(|t| fairshare < t)
    }

    /// Ends a pass: the jobs noted longest-starving of their user become the ones lifted,
    /// and those of their partition the ones that go first. Returns the latter with their
    /// payloads, by job id.
    pub fn end_pass(&mut self) -> Vec<(u32, P)> {
        let mut seen: Vec<f64> = self.seen.drain().map(|(_, f)| f).collect();
        seen.sort_by(f64::total_cmp);
        // Rounded down: with two users neither is held back, with three the heaviest.
        self.threshold = (!seen.is_empty()).then(|| seen[((seen.len() - 1) as f64 * LIFT_QUANTILE).floor() as usize]);
        self.lifted = self.next_lifted.drain().map(|(_, (_, id))| id).collect();
        let mut chosen: Vec<(u32, P)> = self.next.drain().map(|(_, (_, id, p))| (id, p)).collect();
        chosen.sort_unstable_by_key(|c| c.0);
        self.first = chosen.iter().map(|c| c.0).collect();
        chosen
    }
}

/// Site factor added for a starving job when the terms go through the site factor
/// alone (`site_factor/fairway` under multifactor): above any sum of multifactor's
/// other factors with sane weights, below the 2^31 a site factor allows.
pub const STARVING_SITE: i64 = 0x7000_0000;

/// Added on top of [`STARVING_SITE`] for the first starving job of a partition.
pub const FIRST_STARVING_SITE: i64 = 0x0800_0000;

/// Fairway's contribution to a site factor: the weighted terms, plus [`STARVING_SITE`]
/// for a starving job (the other factors order starving jobs) and [`FIRST_STARVING_SITE`]
/// more for the first starving job of its partition.
pub fn site_contribution(config: &PriorityConfig, t: &Terms, lift: Lift) -> i64 {
    let lift = match (t.starving_for, lift) {
        (None, _) | (Some(_), Lift::None) => 0,
        (Some(_), Lift::Lifted) => STARVING_SITE,
        (Some(_), Lift::First) => STARVING_SITE + FIRST_STARVING_SITE,
    };
    site_bonus(config, t) + lift
}

/// Replaces only Fairway's part of a site factor (`NICE_OFFSET`-based values).
///
/// `last` is what Fairway last wrote and its own part of it. If the current value
/// still equals what was written, the old part is swapped for `mine`; otherwise
/// someone else (an admin's `scontrol update SiteFactor=`, a job_submit plugin) set it,
/// and their value becomes the base. Clamped to the `u32` Slurm stores.
pub fn replace_site_part(current: u32, last: Option<(u32, i64)>, mine: i64) -> u32 {
    let base = match last {
        Some((written, part)) if written == current => i64::from(current) - part,
        _ => i64::from(current),
    };
    (base + mine).clamp(0, i64::from(u32::MAX)) as u32
}

/// Whether any of Fairway's terms is on.
pub fn any_enabled(config: &PriorityConfig) -> bool {
    config.weight_predicted_work > 0 || deadline_enabled(config) || config.max_wait.is_some()
}

/// Whether the deadline term can apply to any job (a weight and a QOS allowed to claim it).
pub fn deadline_enabled(config: &PriorityConfig) -> bool {
    config.weight_deadline > 0 && !config.deadline_qos.is_empty()
}

/// Whether a job of `qos` may claim deadline urgency.
pub fn may_claim_deadline(config: &PriorityConfig, qos: &str) -> bool {
    config.deadline_qos.iter().any(|q| q == qos)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Seconds;
    use proptest::prelude::*;

    fn config() -> PriorityConfig {
        PriorityConfig {
            weight_predicted_work: 1000,
            weight_deadline: 5000,
            deadline_qos: vec!["high".into()],
            max_wait: Some(Seconds(3600)),
            max_wait_heavy_users: false,
        }
    }

    #[test]
    fn off_by_default() {
        let t = compute(
            &PriorityConfig::default(),
            &TermsInput { now: 100, eligible_since: 1, deadline: Some(200), expected_runtime: 50.0, gpus: 8 },
        );
        assert_eq!(t, Terms::default());
        assert_eq!(site_bonus(&PriorityConfig::default(), &t), 0);
    }

    #[test]
    fn a_zero_prediction_is_a_short_job_not_an_unknown_one() {
        let t = |rt| compute(&config(), &TermsInput { expected_runtime: rt, gpus: 1, ..TermsInput::default() });
        assert_eq!(t(0.0).predicted_work, t(1.0).predicted_work);
        assert!(t(0.0).predicted_work > 0.99);
        assert!(t(f64::NAN).predicted_work < 0.05, "no prediction at all: one day");
    }

    #[test]
    fn one_gpu_hour_is_half() {
        let t = compute(&config(), &TermsInput { expected_runtime: 900.0, gpus: 4, ..TermsInput::default() });
        assert_eq!(t.predicted_work, 0.5);
    }

    #[test]
    fn deadline_urgency_grows_as_slack_shrinks() {
        let at = |now| {
            compute(
                &config(),
                &TermsInput { now, deadline: Some(10_000), expected_runtime: 1000.0, ..TermsInput::default() },
            )
            .deadline
        };
        assert!(at(0) < at(5000) && at(5000) < at(8000));
        assert_eq!(at(9000), 1.0);
        assert_eq!(at(20_000), 1.0);
    }

    #[test]
    fn starvation_after_max_wait_only() {
        let at =
            |now| compute(&config(), &TermsInput { now, eligible_since: 1000, ..TermsInput::default() }).starving_for;
        assert_eq!(at(4599), None);
        assert_eq!(at(4600), Some(0));
        assert_eq!(at(5600), Some(1000));
        assert!(starving_priority(0, false) >= STARVING_BASE);
        assert!(starving_priority(1000, false) > starving_priority(999, false));
        assert!(starving_priority(u32::MAX, false) < starving_priority(0, true));
    }

    #[test]
    fn only_fairways_part_of_the_site_factor_is_replaced() {
        const O: u32 = 0x8000_0000;
        assert_eq!(replace_site_part(O, None, 300), O + 300);
        // our own earlier write: swap 300 for 500
        assert_eq!(replace_site_part(O + 300, Some((O + 300, 300)), 500), O + 500);
        // an admin set 100 since: keep it, add ours
        assert_eq!(replace_site_part(O + 100, Some((O + 300, 300)), 500), O + 600);
        assert_eq!(replace_site_part(0, None, -5), 0);
    }

    #[test]
    fn the_longest_starving_job_of_each_partition_goes_first() {
        let mut f = FirstStarving::default();
        f.note("gpu", 1, 7, 100, || 'a');
        f.note("gpu", 2, 3, 500, || 'b');
        f.note("gpu", 3, 9, 500, || 'c'); // a tie: the lower id, 3, stays first
        f.note("cpu", 1, 4, 10, || 'd');
        assert!(f.lift(3) != Lift::First, "applied only once the pass is over");
        assert_eq!(f.end_pass(), vec![(3, 'b'), (4, 'd')]);
        assert!(f.lift(3) == Lift::First && f.lift(4) == Lift::First);
        assert!(f.lift(7) != Lift::First && f.lift(9) != Lift::First);
        assert_eq!([7, 3, 9, 4].map(|j| f.lift(j)), [Lift::Lifted, Lift::First, Lift::Lifted, Lift::First]);
        // Job 3 started: the next pass notes the others.
        f.note("gpu", 1, 7, 160, || 'e');
        f.note("gpu", 3, 9, 560, || 'f');
        f.end_pass();
        assert!(
            f.lift(9) == Lift::First
                && f.lift(3) != Lift::First
                && f.lift(4) != Lift::First
                && f.lift(7) != Lift::First
        );
        assert!(f.end_pass().is_empty());
        assert!(f.lift(9) != Lift::First, "nothing starving, nothing lifted");
        assert_eq!(f.lift(9), Lift::None);
    }

    #[test]
    fn one_lifted_job_per_user_and_partition() {
        let mut f = FirstStarving::default();
        // User 1 floods the partition with starving jobs; user 2 has one.
        for (id, starving) in [(10, 900), (11, 800), (12, 800), (13, 50)] {
            f.note("gpu", 1, id, starving, || ());
        }
        f.note("gpu", 2, 20, 100, || ());
        f.note("cpu", 1, 30, 5, || ());
        f.end_pass();
        let lifts: Vec<Lift> = [10, 11, 12, 13, 20, 30].iter().map(|&j| f.lift(j)).collect();
        assert_eq!(lifts, [Lift::First, Lift::None, Lift::None, Lift::None, Lift::Lifted, Lift::First]);
        // Job 10 started: user 1's next-longest (11, the lower id of a tie) is lifted.
        for (id, starving) in [(11, 860), (12, 860), (13, 110)] {
            f.note("gpu", 1, id, starving, || ());
        }
        f.note("gpu", 2, 20, 160, || ());
        f.end_pass();
        let lifts: Vec<Lift> = [11, 12, 13, 20].iter().map(|&j| f.lift(j)).collect();
        assert_eq!(lifts, [Lift::First, Lift::None, Lift::None, Lift::Lifted]);
    }

    #[test]
    fn users_below_the_upper_quartile_of_fair_share_are_held_back_from_the_next_pass() {
        let mut f: FirstStarving = FirstStarving::default();
        assert!(!f.holds_back(0.0), "nothing seen yet: nobody held back");
        for (user, fs) in [(1, 0.9), (2, 0.5), (3, 0.1), (3, 0.2), (4, f64::NAN)] {
            f.see(user, fs);
        }
        assert!(!f.holds_back(0.1), "applied from the next pass");
        f.end_pass();
        // Users 0.9, 0.5, 0.2 (user 3's highest): the threshold is 0.5 (index 2 × 0.75,
        // rounded down).
        assert!(f.holds_back(0.2) && !f.holds_back(0.5) && !f.holds_back(0.9));
        f.see(7, 0.3);
        f.see(8, 0.8);
        f.end_pass();
        assert!(!f.holds_back(0.3) && f.holds_back(0.29), "two users: the lower one is the threshold");
        for (user, fs) in [(1, 0.1), (2, 0.2), (3, 0.3), (4, 0.4), (5, 0.5)] {
            f.see(user, fs);
        }
        f.end_pass();
        assert!(f.holds_back(0.39) && !f.holds_back(0.4), "five users: the fourth lightest");
        f.end_pass();
        assert!(!f.holds_back(0.0), "a pass with no users holds nobody back");
    }

    proptest! {
        #[test]
        fn bonus_is_bounded_by_the_weights(rt in 0.0f64..1e7, gpus in 0u32..1024, now in 0i64..1_000_000, dl in 0i64..2_000_000) {
            let c = config();
            let t = compute(&c, &TermsInput { now, eligible_since: 0, deadline: Some(dl), expected_runtime: rt, gpus });
            prop_assert!((0.0..=1.0).contains(&t.predicted_work));
            prop_assert!((0.0..=1.0).contains(&t.deadline));
            let b = site_bonus(&c, &t);
            prop_assert!(b >= 0 && b <= i64::from(c.weight_predicted_work + c.weight_deadline));
        }

        #[test]
        fn less_work_never_ranks_lower(a in 1.0f64..1e6, b in 1.0f64..1e6, gpus in 1u32..64) {
            let c = config();
            let f = |rt| compute(&c, &TermsInput { expected_runtime: rt, gpus, ..TermsInput::default() }).predicted_work;
            if a <= b { prop_assert!(f(a) >= f(b)); }
        }
    }
}
