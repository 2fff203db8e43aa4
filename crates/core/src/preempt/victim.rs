//! Victims: which running jobs to preempt for a pending one, and in what order.
//!
//! Two answers to the same question, for two callers:
//!
//! - [`preempt_prio`] is `PREEMPT_DATA_PRIO` for one job: Slurm sorts its candidates by
//!   it, lowest first, and preempts from the front until the preemptor fits.
//! - [`choose_victims`] picks the cheapest *set* of whole jobs that frees enough GPUs,
//!   for the simulator (and for checking what Slurm's greedy walk over
//!   [`preempt_prio`] gives up).
//!
//! Both follow the same rules:
//!
//! - a job preempted `max_preemptions` times is not preemptable ([`is_preemptable`]);
//! - a job *protected* by `min_runtime` (started less than that long ago) is taken last:
//!   never while a set of unprotected jobs would do;
//! - otherwise lower priority goes first, then less work lost since the last checkpoint.
//!
//! A job is indivisible: a gang of N nodes is preempted whole or not at all.

use super::config::PreemptConfig;

/// A running job that could be preempted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Slurm job id (unique among the candidates).
    pub job_id: u32,
    /// GPUs the job holds, over all its nodes.
    pub gpus: u32,
    /// Nodes the job holds: the gang, freed together.
    pub nodes: u32,
    /// The job's Slurm priority.
    pub priority: u32,
    /// The job's QoS.
    pub qos: String,
    /// When the job (this run of it) started, Unix seconds.
    pub start_time: i64,
    /// When it last saved a checkpoint, Unix seconds; `None` = not since it started.
    pub last_checkpoint: Option<i64>,
    /// How often preempt/fairway has preempted it so far ([`super::budget`]; not
    /// Slurm's `restart_cnt`, which the owner's own requeues raise).
    pub preempt_count: u32,
}

impl Candidate {
    /// Work lost if the job stopped at `now`: GPUs × seconds since its last checkpoint
    /// (or since it started, whichever is later), in GPU-seconds.
    pub fn lost_gpu_seconds(&self, now: i64) -> u64 {
        let since = self.last_checkpoint.map_or(self.start_time, |c| c.max(self.start_time));
        let secs = now.saturating_sub(since).clamp(0, i64::from(u32::MAX)) as u64;
        secs * u64::from(self.gpus)
    }
}

/// Whether the job may be preempted at all: it has not used up its budget of
/// `max_preemptions` (0 = no budget).
pub fn is_preemptable(c: &Candidate, cfg: &PreemptConfig) -> bool {
    cfg.max_preemptions == 0 || c.preempt_count < cfg.max_preemptions
}

/// Whether the job is within `min_runtime` of its start at `now`.
pub fn is_protected(c: &Candidate, now: i64, cfg: &PreemptConfig) -> bool {
    now.saturating_sub(c.start_time) < i64::from(cfg.min_runtime)
}

/// `PREEMPT_DATA_PRIO` for a candidate: Slurm preempts the lowest first.
///
/// The 32 bits, most significant first:
///
/// | bits | value |
/// |---|---|
/// | 31 | 1 if the job is protected ([`is_protected`]), so it sorts after every unprotected job |
/// | 30..16 | the job's priority, compressed to 15 bits by [`log_code`] |
/// | 15..0 | [`Candidate::lost_gpu_seconds`], compressed to 16 bits by [`log_code`] |
///
/// So jobs are taken unprotected first, then by priority, then by lost work. The
/// compression is monotone, exact below 2048 and within 0.1 % above, so the order
/// is that of the full values except between values that close. A job that is not
/// [`is_preemptable`] gets `u32::MAX` (the plugin should not offer it at all).
pub fn preempt_prio(c: &Candidate, now: i64, cfg: &PreemptConfig) -> u32 {
    if !is_preemptable(c, cfg) {
        return u32::MAX;
    }
    let protected = u32::from(is_protected(c, now, cfg)) << 31;
    let prio = log_code(u64::from(c.priority)) << 16;
    let lost = log_code(c.lost_gpu_seconds(now));
    protected | prio | lost
}

/// A monotone compression of a `u64` to at most 16 bits, like a tiny float: values
/// below 2048 are kept as they are; above, an exponent and the top 11 significant bits.
/// `log_code(u32::MAX) = 23551` (fits 15 bits) and `log_code(u64::MAX) = 56319`.
pub fn log_code(v: u64) -> u32 {
    const MANTISSA: u32 = 10;
    if v < 1 << (MANTISSA + 1) {
        return v as u32;
    }
    let top = 63 - v.leading_zeros();
    let exp = top - MANTISSA;
    (exp << MANTISSA) + (v >> exp) as u32
}

/// What preempting a job, or a set of jobs, costs. Ordered lexicographically:
/// fewer protected jobs first, then less weighted lost work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cost {
    /// Protected jobs in the set.
    pub protected: u32,
    /// Σ (lost GPU-seconds + GPUs) × (priority + 1). The `+ GPUs` makes a job that
    /// has just checkpointed cost something still, so that among such jobs the lower
    /// priority and smaller ones go first and no job is preempted for nothing.
    pub weighted: u128,
}

impl std::ops::Add for Cost {
    type Output = Cost;

    fn add(self, o: Cost) -> Cost {
        Cost { protected: self.protected + o.protected, weighted: self.weighted.saturating_add(o.weighted) }
    }
}

/// The cost of preempting one job at `now`.
pub fn cost(c: &Candidate, now: i64, cfg: &PreemptConfig) -> Cost {
    let lost = u128::from(c.lost_gpu_seconds(now)) + u128::from(c.gpus);
    Cost { protected: u32::from(is_protected(c, now, cfg)), weighted: lost * (u128::from(c.priority) + 1) }
}

/// The cost of preempting the jobs `ids` (ids not among the candidates count nothing).
pub fn set_cost(candidates: &[Candidate], ids: &[u32], now: i64, cfg: &PreemptConfig) -> Cost {
    candidates.iter().filter(|c| ids.contains(&c.job_id)).map(|c| cost(c, now, cfg)).fold(Cost::default(), |a, b| a + b)
}

/// Largest `candidates × (gpus_needed + 1)` for which [`choose_victims`] solves exactly;
/// beyond it, it is greedy.
pub const EXACT_CELLS: usize = 1 << 21;

/// The cheapest set of whole jobs ([`Cost`]) whose GPUs add up to at least
/// `gpus_needed`, among the preemptable candidates; `None` when even all of them free
/// too few. A protected job is chosen only when no set without one suffices.
///
/// Exact (a dynamic programme over freed GPUs) while `candidates × (gpus_needed + 1)`
/// is at most [`EXACT_CELLS`] (e.g. 2,000 candidates for 1,000 GPUs), greedy beyond.
/// The ids come back in [`preempt_prio`] order.
pub fn choose_victims(candidates: &[Candidate], gpus_needed: u32, now: i64, cfg: &PreemptConfig) -> Option<Vec<u32>> {
    let cells = candidates.len().saturating_mul(gpus_needed as usize + 1);
    if cells <= EXACT_CELLS {
        choose_victims_exact(candidates, gpus_needed, now, cfg)
    } else {
        choose_victims_greedy(candidates, gpus_needed, now, cfg)
    }
}

/// The preemptable candidates that hold GPUs, with their costs.
fn usable<'a>(candidates: &'a [Candidate], now: i64, cfg: &PreemptConfig) -> Vec<(&'a Candidate, Cost)> {
    candidates.iter().filter(|c| c.gpus > 0 && is_preemptable(c, cfg)).map(|c| (c, cost(c, now, cfg))).collect()
}

fn in_prio_order(mut chosen: Vec<&Candidate>, now: i64, cfg: &PreemptConfig) -> Vec<u32> {
    chosen.sort_by_key(|c| (preempt_prio(c, now, cfg), c.job_id));
    chosen.into_iter().map(|c| c.job_id).collect()
}

/// [`choose_victims`], always exact: O(candidates × gpus_needed) time and memory.
pub fn choose_victims_exact(
    candidates: &[Candidate],
    gpus_needed: u32,
    now: i64,
    cfg: &PreemptConfig,
) -> Option<Vec<u32>> {
    let items = usable(candidates, now, cfg);
    let need = gpus_needed as usize;
    if items.iter().map(|(c, _)| u64::from(c.gpus)).sum::<u64>() < u64::from(gpus_needed) {
        return None;
    }
    // best[j]: cheapest set of the items seen so far freeing min(GPUs, need) == j.
    // from[i][j]: for item i, the state it was added to (u32::MAX = not taken).
    let mut best: Vec<Option<Cost>> = vec![None; need + 1];
    best[0] = Some(Cost::default());
    let mut from = vec![vec![u32::MAX; need + 1]; items.len()];
    for (i, (c, cost)) in items.iter().enumerate() {
        let mut next = best.clone();
        for (j, b) in best.iter().enumerate() {
            let Some(b) = b else { continue };
            let k = (j + c.gpus as usize).min(need);
            let with = *b + *cost;
            if next[k].is_none_or(|n| with < n) {
                next[k] = Some(with);
                from[i][k] = j as u32;
            }
        }
        best = next;
    }
    // Walk back from the full state.
    let mut chosen = Vec::new();
    let mut j = need;
    for i in (0..items.len()).rev() {
        let f = from[i][j];
        if f != u32::MAX {
            chosen.push(items[i].0);
            j = f as usize;
        }
    }
    debug_assert_eq!(j, 0);
    Some(in_prio_order(chosen, now, cfg))
}

/// [`choose_victims`], always greedy: jobs by protection then cost per GPU until enough
/// GPUs are freed, then the dearest jobs that are not needed are dropped, and the
/// single cheapest job that frees enough alone is taken instead if it costs less.
/// O(n log n); never picks a protected job when the unprotected ones suffice.
pub fn choose_victims_greedy(
    candidates: &[Candidate],
    gpus_needed: u32,
    now: i64,
    cfg: &PreemptConfig,
) -> Option<Vec<u32>> {
    let mut items = usable(candidates, now, cfg);
    let need = u64::from(gpus_needed);
    let per_gpu = |(c, cost): &(&Candidate, Cost)| cost.weighted as f64 / f64::from(c.gpus);
    items.sort_by(|a, b| {
        (a.1.protected.cmp(&b.1.protected)).then(per_gpu(a).total_cmp(&per_gpu(b))).then(a.0.job_id.cmp(&b.0.job_id))
    });
    let mut taken = Vec::new();
    let mut freed = 0u64;
    for item in &items {
        if freed >= need {
            break;
        }
        freed += u64::from(item.0.gpus);
        taken.push(*item);
    }
    if freed < need {
        return None;
    }
    // Drop the dearest jobs that are not needed.
    taken.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.job_id.cmp(&b.0.job_id)));
    let mut kept = Vec::new();
    for (i, item) in taken.iter().enumerate() {
        let rest: u64 = kept.iter().chain(&taken[i + 1..]).map(|(c, _): &(&Candidate, Cost)| u64::from(c.gpus)).sum();
        if rest < need {
            kept.push(*item);
        }
    }
    let total = kept.iter().fold(Cost::default(), |a, (_, c)| a + *c);
    let single = items.iter().filter(|(c, _)| u64::from(c.gpus) >= need).min_by(|a, b| a.1.cmp(&b.1));
    let chosen = match single {
        Some(&(c, cost)) if cost < total => vec![c],
        _ => kept.into_iter().map(|(c, _)| c).collect(),
    };
    Some(in_prio_order(chosen, now, cfg))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const NOW: i64 = 1_000_000;

    fn job(job_id: u32, gpus: u32, priority: u32, ran: i64, since_ckpt: Option<i64>) -> Candidate {
        Candidate {
            job_id,
            gpus,
            nodes: gpus.div_ceil(8),
            priority,
            qos: "scavenger".into(),
            start_time: NOW - ran,
            last_checkpoint: since_ckpt.map(|s| NOW - s),
            preempt_count: 0,
        }
    }

    #[test]
    fn lost_work_counts_from_the_later_of_start_and_checkpoint() {
        assert_eq!(job(1, 8, 0, 3600, Some(100)).lost_gpu_seconds(NOW), 800);
        assert_eq!(job(1, 8, 0, 3600, None).lost_gpu_seconds(NOW), 8 * 3600);
        // A checkpoint from the previous run does not count for this one.
        assert_eq!(job(1, 8, 0, 50, Some(500)).lost_gpu_seconds(NOW), 400);
        // A clock that went backwards loses nothing.
        assert_eq!(job(1, 8, 0, -10, None).lost_gpu_seconds(NOW), 0);
    }

    #[test]
    fn budget_and_protection() {
        let cfg = PreemptConfig::default();
        let mut j = job(1, 8, 0, 3600, None);
        assert!(is_preemptable(&j, &cfg));
        j.preempt_count = 3;
        assert!(!is_preemptable(&j, &cfg));
        assert_eq!(preempt_prio(&j, NOW, &cfg), u32::MAX);
        assert!(is_preemptable(&j, &PreemptConfig { max_preemptions: 0, ..cfg.clone() }));
        assert!(is_protected(&job(1, 8, 0, 599, None), NOW, &cfg));
        assert!(!is_protected(&job(1, 8, 0, 600, None), NOW, &cfg));
    }

    #[test]
    fn prio_orders_protection_then_priority_then_lost_work() {
        let cfg = PreemptConfig::default();
        let p = |c: &Candidate| preempt_prio(c, NOW, &cfg);
        let low_fresh = job(1, 8, 100, 3600, Some(10));
        let low_stale = job(2, 8, 100, 3600, Some(3000));
        let high = job(3, 1, 5000, 3600, Some(1));
        let protected = job(4, 1, 0, 30, None);
        assert!(p(&low_fresh) < p(&low_stale));
        assert!(p(&low_stale) < p(&high));
        assert!(p(&high) < p(&protected));
        assert_eq!(p(&low_fresh), (100 << 16) | 80);
        assert_eq!(p(&protected) >> 31, 1);
    }

    #[test]
    fn log_code_is_exact_low_and_bounded_high() {
        assert_eq!((0..2048).map(log_code).collect::<Vec<_>>(), (0..2048).collect::<Vec<_>>());
        assert_eq!(log_code(2048), 2048);
        assert_eq!(log_code(u64::from(u32::MAX)), 23551);
        assert_eq!(log_code(u64::MAX), 56319);
    }

    #[test]
    fn one_big_stale_job_or_two_small_fresh_ones() {
        let cfg = PreemptConfig::default();
        let c = vec![job(1, 8, 10, 7200, Some(3600)), job(2, 4, 10, 7200, Some(60)), job(3, 4, 10, 7200, Some(60))];
        assert_eq!(choose_victims(&c, 8, NOW, &cfg), Some(vec![2, 3]));
        assert_eq!(choose_victims(&c, 0, NOW, &cfg), Some(vec![]));
        assert_eq!(choose_victims(&c, 17, NOW, &cfg), None);
    }

    #[test]
    fn protected_jobs_only_when_nothing_else_suffices() {
        let cfg = PreemptConfig::default();
        let c = vec![job(1, 8, 0, 60, None), job(2, 8, 1000, 7200, None), job(3, 8, 1000, 7200, Some(5000))];
        // The protected job is by far the cheapest, but two unprotected ones suffice.
        assert_eq!(choose_victims(&c, 16, NOW, &cfg), Some(vec![3, 2]));
        assert_eq!(choose_victims(&c, 24, NOW, &cfg), Some(vec![3, 2, 1]));
        assert_eq!(choose_victims_greedy(&c, 16, NOW, &cfg), Some(vec![3, 2]));
    }

    #[test]
    fn budget_exhausted_jobs_are_never_chosen() {
        let cfg = PreemptConfig::default();
        let mut spent = job(1, 8, 0, 7200, Some(1));
        spent.preempt_count = 3;
        let c = vec![spent, job(2, 8, 1000, 7200, None)];
        assert_eq!(choose_victims(&c, 8, NOW, &cfg), Some(vec![2]));
        assert_eq!(choose_victims(&c, 9, NOW, &cfg), None);
    }

    #[test]
    fn large_inputs_fall_back_to_greedy() {
        let cfg = PreemptConfig::default();
        let c: Vec<_> = (0..3000).map(|i| job(i, 8, i % 7, 7200, Some(i64::from(i % 100)))).collect();
        let v = choose_victims(&c, 1000, NOW, &cfg).unwrap();
        let freed: u32 = c.iter().filter(|j| v.contains(&j.job_id)).map(|j| j.gpus).sum();
        assert!(freed >= 1000);
    }

    fn arb_candidates(max: usize) -> impl Strategy<Value = Vec<Candidate>> {
        prop::collection::vec((0u32..=16, 0u32..=50, 0i64..=3_000, prop::option::of(0i64..=3_000), 0u32..=4), 0..=max)
            .prop_map(|v| {
                v.into_iter()
                    .enumerate()
                    .map(|(i, (gpus, priority, ran, since, count))| Candidate {
                        preempt_count: count,
                        ..job(i as u32 + 1, gpus, priority, ran, since)
                    })
                    .collect()
            })
    }

    fn freed(c: &[Candidate], ids: &[u32]) -> u64 {
        c.iter().filter(|j| ids.contains(&j.job_id)).map(|j| u64::from(j.gpus)).sum()
    }

    fn brute_force(c: &[Candidate], need: u32, cfg: &PreemptConfig) -> Option<Cost> {
        let usable: Vec<_> = c.iter().filter(|j| is_preemptable(j, cfg)).collect();
        (0u32..1 << usable.len())
            .filter_map(|mask| {
                let set: Vec<_> = (0..usable.len()).filter(|i| mask & (1 << i) != 0).map(|i| usable[i]).collect();
                let gpus: u64 = set.iter().map(|j| u64::from(j.gpus)).sum();
                (gpus >= u64::from(need)).then(|| set.iter().fold(Cost::default(), |a, j| a + cost(j, NOW, cfg)))
            })
            .min()
    }

    proptest! {
        #[test]
        fn chosen_sets_obey_the_rules(c in arb_candidates(20), need in 0u32..=80, budget in 0u32..=3) {
            let cfg = PreemptConfig { max_preemptions: budget, ..PreemptConfig::default() };
            let usable: Vec<_> = c.iter().filter(|j| is_preemptable(j, &cfg)).collect();
            let all: u64 = usable.iter().map(|j| u64::from(j.gpus)).sum();
            let unprotected: u64 =
                usable.iter().filter(|j| !is_protected(j, NOW, &cfg)).map(|j| u64::from(j.gpus)).sum();
            let exact = choose_victims_exact(&c, need, NOW, &cfg);
            let greedy = choose_victims_greedy(&c, need, NOW, &cfg);
            prop_assert_eq!(exact.is_some(), all >= u64::from(need));
            prop_assert_eq!(greedy.is_some(), all >= u64::from(need));
            if let (Some(e), Some(g)) = (exact, greedy) {
                for set in [&e, &g] {
                    prop_assert!(freed(&c, set) >= u64::from(need));
                    for id in set.iter() {
                        let j = c.iter().find(|j| j.job_id == *id).unwrap();
                        prop_assert!(is_preemptable(j, &cfg), "job {} is over its budget", id);
                        if unprotected >= u64::from(need) {
                            prop_assert!(!is_protected(j, NOW, &cfg), "job {} is protected", id);
                        }
                    }
                    let mut sorted = set.clone();
                    sorted.sort_unstable();
                    sorted.dedup();
                    prop_assert_eq!(sorted.len(), set.len());
                }
                prop_assert!(set_cost(&c, &e, NOW, &cfg) <= set_cost(&c, &g, NOW, &cfg));
            }
        }

        #[test]
        fn exact_matches_brute_force(c in arb_candidates(10), need in 0u32..=60) {
            let cfg = PreemptConfig::default();
            let exact = choose_victims_exact(&c, need, NOW, &cfg).map(|e| set_cost(&c, &e, NOW, &cfg));
            prop_assert_eq!(exact, brute_force(&c, need, &cfg));
        }

        #[test]
        fn log_code_is_monotone(a in any::<u64>(), b in any::<u64>()) {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            prop_assert!(log_code(lo) <= log_code(hi));
            prop_assert!(log_code(hi) <= 56319);
        }

        #[test]
        fn prio_never_ranks_a_protected_job_first(a in arb_candidates(2)) {
            let cfg = PreemptConfig::default();
            if let [x, y] = &a[..] {
                if is_preemptable(x, &cfg) && is_preemptable(y, &cfg)
                    && is_protected(x, NOW, &cfg) && !is_protected(y, NOW, &cfg) {
                    prop_assert!(preempt_prio(y, NOW, &cfg) < preempt_prio(x, NOW, &cfg));
                }
            }
        }
    }
}
