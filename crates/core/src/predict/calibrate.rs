//! Choosing the learned model's conformal offsets.
//!
//! Held-out jobs are grouped by the trees' log prediction and each group gets its own
//! offset; the offsets are chosen together so that at most a share 1 − q of the held-out
//! jobs outlive their prediction (the split-conformal count) while the mean absolute error
//! in seconds is smallest. One offset for all must cover the long, irregular jobs as well as
//! the short, regular ones, and in log space it multiplies every prediction by the same
//! factor: the long jobs' over-predictions then dominate the error. Spending the allowed
//! misses where covering costs the most seconds keeps the rate and cuts the error.

/// Most groups.
const MAX_GROUPS: usize = 10;
/// Fewest held-out jobs per group: fewer would fit the offsets to noise.
const MIN_GROUP: usize = 100;
/// Offsets tried per group: evenly spaced ranks of its residuals.
const CANDIDATES: usize = 256;

/// A held-out job: the trees' log prediction and what really happened.
pub(super) struct Held {
    /// ln(1 + seconds) predicted by the trees.
    pub log_pred: f64,
    /// Actual run time, seconds.
    pub runtime: u64,
    /// Time limit, which caps every prediction.
    pub limit: Option<u64>,
}

/// The prediction in seconds for a log prediction plus offset, capped by the limit.
pub(super) fn seconds(log: f64, limit: Option<u64>) -> u64 {
    let secs = log.exp_m1().clamp(1.0, 1e12).ceil() as u64;
    limit.map_or(secs, |l| secs.min(l))
}

/// Which group a log prediction falls in, given the groups' upper edges (ascending).
pub(super) fn group(edges: &[f64], log_pred: f64) -> usize {
    edges.partition_point(|&e| e <= log_pred)
}

/// An offset tried for one group: how many of its jobs it misses and their total error.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    offset: f64,
    misses: usize,
    error_s: f64,
}

/// Group edges and one offset per group (`edges.len() + 1` of them) for `held` (non-empty),
/// so that at most `n − ⌈(n + 1)·quantile⌉ − (groups − 1)` of the `n` jobs outlive their
/// prediction (more only where the limits make that unavoidable) with the least total
/// absolute error.
pub(super) fn offsets(held: &[Held], quantile: f64) -> (Vec<f64>, Vec<f64>) {
    let n = held.len();
    let mut preds: Vec<f64> = held.iter().map(|h| h.log_pred).collect();
    preds.sort_by(f64::total_cmp);
    let groups = (n / MIN_GROUP).clamp(1, MAX_GROUPS);
    let mut edges: Vec<f64> = (1..groups).map(|k| preds[k * n / groups]).collect();
    edges.dedup();
    // An edge at the smallest prediction would leave the first group empty.
    edges.retain(|&e| e > preds[0]);
    let mut members: Vec<Vec<&Held>> = vec![Vec::new(); edges.len() + 1];
    for h in held {
        members[group(&edges, h.log_pred)].push(h);
    }
    let options: Vec<Vec<Candidate>> = members.iter().map(|m| candidates(m)).collect();

    // Split conformal allows n − ⌈(n + 1)·q⌉ misses with one group. Each group's misses
    // only bound its new jobs' rate as (k + 1)/(m + 1): one miss less per extra group.
    let covered = ((n + 1) as f64 * quantile).ceil() as usize;
    let unavoidable: usize = options.iter().map(|o| o.iter().map(|c| c.misses).min().unwrap_or(0)).sum();
    let allowed = n.saturating_sub(covered).saturating_sub(options.len() - 1).max(unavoidable);

    // Knapsack over groups: least[u] = least error of the groups so far with u misses.
    let mut least = vec![f64::INFINITY; allowed + 1];
    least[0] = 0.0;
    let mut chosen: Vec<Vec<usize>> = Vec::with_capacity(options.len());
    for opts in &options {
        let mut next = vec![f64::INFINITY; allowed + 1];
        let mut pick = vec![usize::MAX; allowed + 1];
        for (i, c) in opts.iter().enumerate() {
            for u in c.misses..=allowed {
                let e = least[u - c.misses] + c.error_s;
                if e < next[u] {
                    next[u] = e;
                    pick[u] = i;
                }
            }
        }
        least = next;
        chosen.push(pick);
    }
    // Fewest misses among equal errors: scan upwards, replace only when strictly better.
    let mut u = (0..=allowed).fold(0, |best, u| if least[u] < least[best] { u } else { best });
    let mut offsets = vec![0.0; options.len()];
    for g in (0..options.len()).rev() {
        let c = options[g][chosen[g][u]];
        offsets[g] = c.offset;
        u -= c.misses;
    }
    (edges, offsets)
}

/// Offsets worth trying for one group (non-empty): its residuals at evenly spaced ranks,
/// the largest (cover every job) included.
fn candidates(members: &[&Held]) -> Vec<Candidate> {
    let mut residuals: Vec<f64> = members.iter().map(|h| (h.runtime as f64).ln_1p() - h.log_pred).collect();
    residuals.sort_by(f64::total_cmp);
    let m = residuals.len();
    let ranks: Vec<usize> = if m <= CANDIDATES {
        (0..m).collect()
    } else {
        (0..CANDIDATES).map(|j| j * (m - 1) / (CANDIDATES - 1)).collect()
    };
    ranks
        .into_iter()
        .map(|r| {
            let offset = residuals[r];
            let (mut misses, mut error_s) = (0, 0.0);
            for h in members {
                let p = seconds(h.log_pred + offset, h.limit);
                misses += usize::from(p < h.runtime);
                error_s += p.abs_diff(h.runtime) as f64;
            }
            Candidate { offset, misses, error_s }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(log_pred: f64, runtime: u64) -> Held {
        Held { log_pred, runtime, limit: None }
    }

    #[test]
    fn one_group_is_plain_split_conformal() {
        // 50 jobs (one group): the offset is the ⌈51·0.8⌉ = 41st smallest residual.
        let jobs: Vec<Held> = (0..50).map(|i| held(5.0, (5.0 + i as f64 * 0.02).exp_m1().round() as u64)).collect();
        let (edges, offsets) = offsets(&jobs, 0.8);
        assert!(edges.is_empty());
        let misses = jobs.iter().filter(|h| seconds(h.log_pred + offsets[0], None) < h.runtime).count();
        assert!(misses <= 50 - 41, "{misses}");
        // And no smaller offset would do: the error grows with the offset here.
        assert!((offsets[0] - 0.8).abs() < 0.021, "{offsets:?}");
    }

    #[test]
    fn misses_go_where_covering_costs_least() {
        // 400 irregular short jobs (10 s – 10 000 s, predicted 300 s) and 400 regular long
        // ones (29 000 – 31 000 s, predicted 30 000 s). One offset covering 85% must stretch
        // to the short jobs' spread and multiplies the long jobs' predictions with it.
        let mut jobs = Vec::new();
        for i in 0..400u64 {
            jobs.push(held(300f64.ln_1p(), (10.0 * 1000f64.powf(i as f64 / 399.0)) as u64));
            jobs.push(held(30_000f64.ln_1p(), 29_000 + 5 * i));
        }
        let (edges, offsets) = offsets(&jobs, 0.85);
        assert_eq!(offsets.len(), 2, "{edges:?}");
        let predict = |h: &Held| seconds(h.log_pred + offsets[group(&edges, h.log_pred)], h.limit);
        let misses = jobs.iter().filter(|h| predict(h) < h.runtime).count();
        let allowed = 800 - (801.0f64 * 0.85).ceil() as usize - 1;
        assert!(misses <= allowed, "{misses} > {allowed}");
        // Every long job is covered, tightly; the misses are all spent on short ones.
        assert!(jobs.iter().skip(1).step_by(2).all(|h| predict(h) >= h.runtime && predict(h) <= 32_000));
        // Far less error than one offset covering the same share.
        let mut r: Vec<f64> = jobs.iter().map(|h| (h.runtime as f64).ln_1p() - h.log_pred).collect();
        r.sort_by(f64::total_cmp);
        let one = r[(801.0f64 * 0.85).ceil() as usize - 1];
        let err = |f: &dyn Fn(&Held) -> u64| jobs.iter().map(|h| f(h).abs_diff(h.runtime)).sum::<u64>();
        assert!(err(&predict) * 10 < err(&|h| seconds(h.log_pred + one, None)));
    }

    #[test]
    fn limits_that_force_misses_are_tolerated() {
        // Every job outlived its limit (traces record a little overrun): no offset helps.
        let jobs: Vec<Held> = (0..30).map(|i| Held { log_pred: 4.0, runtime: 130 + i, limit: Some(120) }).collect();
        let (edges, offsets) = offsets(&jobs, 0.9);
        assert_eq!((edges.len(), offsets.len()), (0, 1));
        assert!(offsets[0].is_finite());
    }
}
