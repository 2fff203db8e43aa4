//! `priority/multifactor`'s job priority, factor by factor.
//!
//! Slurm computes `Σ weight × factor` over age, association, fair share, job size,
//! partition, QOS and TRES, adds the site factor and subtracts nice, then clamps to
//! `[1, 2^32 − 1]` (`_get_priority_internal` and `set_priority_factors` in
//! `priority_multifactor.c`). This module reproduces that arithmetic in the same order,
//! so that `priority/fairway` with Fairway's own terms off gives the same numbers.

/// Slurm's `NICE_OFFSET`: site factor and nice are stored offset by it.
pub const NICE_OFFSET: u32 = 0x8000_0000;

/// `PriorityFlags` bits this module reads (values of `PRIORITY_FLAGS_*` in slurm.h).
pub mod flags {
    /// `SMALL_RELATIVE_TO_TIME`.
    pub const SIZE_RELATIVE: u16 = 1 << 2;
    /// Fair Tree (on unless `NO_FAIR_TREE`).
    pub const FAIR_TREE: u16 = 1 << 5;
    /// `INCR_ONLY`: a job's priority never decreases.
    pub const INCR_ONLY: u16 = 1 << 6;
    /// `NO_NORMAL_ASSOC`.
    pub const NO_NORMAL_ASSOC: u16 = 1 << 7;
    /// `NO_NORMAL_PART`.
    pub const NO_NORMAL_PART: u16 = 1 << 8;
    /// `NO_NORMAL_QOS`.
    pub const NO_NORMAL_QOS: u16 = 1 << 9;
    /// `NO_NORMAL_TRES`.
    pub const NO_NORMAL_TRES: u16 = 1 << 10;
}

/// The slurm.conf knobs behind the factors.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Weights {
    /// `PriorityWeightAge`.
    pub age: u32,
    /// `PriorityWeightAssoc`.
    pub assoc: u32,
    /// `PriorityWeightFairshare`.
    pub fairshare: u32,
    /// `PriorityWeightJobSize`.
    pub job_size: u32,
    /// `PriorityWeightPartition`.
    pub partition: u32,
    /// `PriorityWeightQOS`.
    pub qos: u32,
    /// `PriorityWeightTRES`, one weight per TRES of the cluster (empty = unset).
    pub tres: Vec<f64>,
    /// `PriorityMaxAge`, seconds.
    pub max_age: u32,
    /// `PriorityFavorSmall`.
    pub favor_small: bool,
    /// `PriorityFlags` bits.
    pub flags: u16,
}

/// What the factors are computed from, read from the job and its association, QOS and
/// partition at the time of the calculation.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct JobInput {
    /// Now, as Unix seconds.
    pub now: i64,
    /// When the job began accruing age (0 = not accruing).
    pub accrue_time: i64,
    /// The fair-share factor, in [0, 1], as the fair-share algorithm computed it.
    pub fairshare: f64,
    /// CPUs allocated (0 until known).
    pub total_cpus: u32,
    /// `--mincpus` / derived minimum CPUs.
    pub min_cpus: u32,
    /// Maximum CPUs (`None` if unset).
    pub max_cpus: Option<u32>,
    /// `--nodes` minimum.
    pub min_nodes: u32,
    /// Time limit in minutes (`None` if unset).
    pub time_limit: Option<u32>,
    /// The partition's `MaxTime`, minutes.
    pub part_max_time: u32,
    /// CPUs in the cluster (`cluster_cpus`).
    pub cluster_cpus: u32,
    /// Nodes in the cluster (`node_record_count`).
    pub node_count: u32,
    /// The partition's `PriorityJobFactor`.
    pub part_priority_job_factor: u16,
    /// `PriorityJobFactor` normalised by the largest of all partitions.
    pub part_norm_priority: f64,
    /// Whether the job has an association.
    pub has_assoc: bool,
    /// The association's raw priority.
    pub assoc_priority: u32,
    /// The association's priority normalised by the largest.
    pub assoc_priority_norm: f64,
    /// The QOS's raw priority (0 = no QOS factor).
    pub qos_priority: u32,
    /// The QOS's priority normalised by the largest.
    pub qos_norm_priority: f64,
    /// Per TRES: (job's count, partition's count).
    pub tres: Vec<(u64, u64)>,
    /// `job_ptr->site_factor`, `NICE_OFFSET`-based.
    pub site_factor: u32,
    /// `--nice`, `NICE_OFFSET`-based.
    pub nice: u32,
}

/// The unweighted factors, as `sprio -l` shows them before weighting.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Factors {
    /// Age, [0, 1].
    pub age: f64,
    /// Association priority.
    pub assoc: f64,
    /// Fair share, [0, 1].
    pub fairshare: f64,
    /// Job size, [0, 1].
    pub job_size: f64,
    /// Partition.
    pub partition: f64,
    /// QOS.
    pub qos: f64,
    /// Per TRES.
    pub tres: Vec<f64>,
    /// Site factor, `NICE_OFFSET`-based.
    pub site: u32,
    /// Nice, `NICE_OFFSET`-based.
    pub nice: u32,
}

/// `set_priority_factors()`: each factor for a pending job.
pub fn factors(w: &Weights, j: &JobInput) -> Factors {
    let mut f = Factors { site: j.site_factor, nice: j.nice, ..Factors::default() };

    if w.age != 0 && j.accrue_time != 0 {
        let diff = if j.now > j.accrue_time { (j.now - j.accrue_time).min(i64::from(u32::MAX)) as u32 } else { 0 };
        f.age = if diff < w.max_age { f64::from(diff) / f64::from(w.max_age) } else { 1.0 };
    }
    if j.has_assoc && w.fairshare != 0 {
        f.fairshare = j.fairshare;
    }
    if w.job_size != 0 {
        f.job_size = job_size(w, j);
    }
    if j.part_priority_job_factor != 0 && w.partition != 0 {
        f.partition = partition_factor(w, j.part_priority_job_factor, j.part_norm_priority);
    }
    if j.has_assoc && w.assoc != 0 {
        f.assoc =
            if w.flags & flags::NO_NORMAL_ASSOC != 0 { f64::from(j.assoc_priority) } else { j.assoc_priority_norm };
    }
    if j.qos_priority != 0 && w.qos != 0 {
        f.qos = qos_factor(w, j.qos_priority, j.qos_norm_priority);
    }
    if !w.tres.is_empty() {
        f.tres = j.tres.iter().map(|&t| tres_factor(w, t).unwrap_or(0.0)).collect();
    }
    f
}

/// A partition's factor: its `PriorityJobFactor` as it is under `NO_NORMAL_PART`, else
/// normalised by the largest of all partitions (`norm_priority`).
pub fn partition_factor(w: &Weights, priority_job_factor: u16, norm_priority: f64) -> f64 {
    if w.flags & flags::NO_NORMAL_PART != 0 {
        f64::from(priority_job_factor)
    } else {
        norm_priority
    }
}

/// A QOS's factor: its `Priority` as it is under `NO_NORMAL_QOS`, else normalised by the
/// largest of all QOS (`norm_priority`).
pub fn qos_factor(w: &Weights, priority: u32, norm_priority: f64) -> f64 {
    if w.flags & flags::NO_NORMAL_QOS != 0 {
        f64::from(priority)
    } else {
        norm_priority
    }
}

/// One TRES factor from (the job's count, the partition's count): raw with
/// NO_NORMAL_TRES, else normalised; `None` where Slurm computes none (nothing used, or
/// none of it in the partition).
fn tres_factor(w: &Weights, (value, part_cnt): (u64, u64)) -> Option<f64> {
    if w.flags & flags::NO_NORMAL_TRES != 0 {
        Some(value as f64)
    } else if value != 0 && part_cnt != 0 {
        Some(value as f64 / part_cnt as f64)
    } else {
        None
    }
}

/// sprio's weighted TRES factors of a job in one of its partitions (22.05's
/// `_filter_job`, 24.11's `_create_prio_list_qos`): `tres` as in [`JobInput::tres`] for
/// that partition, `stored` the job's own weighted factors. Where Slurm computes no
/// factor it weights the stored value again; so does this, for identical output.
pub fn partition_tres_weighted(w: &Weights, tres: &[(u64, u64)], stored: &[f64]) -> Vec<f64> {
    tres.iter().zip(&w.tres).zip(stored).map(|((&t, wt), &old)| tres_factor(w, t).unwrap_or(old) * wt).collect()
}

fn job_size(w: &Weights, j: &JobInput) -> f64 {
    let cpu_cnt = if j.total_cpus != 0 {
        j.total_cpus
    } else if let Some(max) = j.max_cpus {
        max
    } else {
        j.min_cpus
    };
    let (nodes, cpus, min_nodes) = (f64::from(j.node_count), f64::from(j.cluster_cpus), f64::from(j.min_nodes));
    let js = if w.flags & flags::SIZE_RELATIVE != 0 {
        let mut js = min_nodes * cpus / nodes;
        if f64::from(cpu_cnt) > js {
            js = f64::from(cpu_cnt);
        }
        let time_limit = j.time_limit.unwrap_or(j.part_max_time);
        js /= f64::from(time_limit);
        js /= cpus;
        if w.favor_small {
            1.0 - js
        } else {
            js
        }
    } else if w.favor_small {
        let mut js = f64::from(j.node_count.wrapping_sub(j.min_nodes)) / nodes;
        if cpu_cnt != 0 {
            js += f64::from(j.cluster_cpus.wrapping_sub(cpu_cnt)) / cpus;
            js /= 2.0;
        }
        js
    } else {
        let mut js = min_nodes / nodes;
        if cpu_cnt != 0 {
            js += f64::from(cpu_cnt) / cpus;
            js /= 2.0;
        }
        js
    };
    // As in C, NaN (an empty cluster) passes through the clamp unchanged.
    js.clamp(0.0, 1.0)
}

/// `_get_priority_internal()`: the weighted sum, site factor and nice, clamped.
///
/// The additions are done in Slurm's order so the truncated result is bit-identical.
pub fn priority(w: &Weights, f: &Factors) -> u32 {
    let tres: f64 = f.tres.iter().zip(&w.tres).map(|(x, wt)| x * wt).fold(0.0, |acc, x| acc + x);
    let p = f.age * f64::from(w.age)
        + f.assoc * f64::from(w.assoc)
        + f.fairshare * f64::from(w.fairshare)
        + f.job_size * f64::from(w.job_size)
        + f.partition * f64::from(w.partition)
        + f.qos * f64::from(w.qos)
        + tres
        + (i64::from(f.site) - i64::from(NICE_OFFSET)) as f64
        - (i64::from(f.nice) - i64::from(NICE_OFFSET)) as f64;
    clamp_priority(p)
}

/// One partition of a multi-partition job.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PartitionInput {
    /// The partition's `PriorityJobFactor`.
    pub priority_job_factor: u16,
    /// `PriorityJobFactor` normalised by the largest of all partitions.
    pub norm_priority: f64,
    /// Per TRES: (job's count, this partition's count).
    pub tres: Vec<(u64, u64)>,
}

/// One QOS of a job that asked for several (`--qos=a,b`, Slurm 24.11+).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct QosInput {
    /// The QOS's `Priority`.
    pub priority: u32,
    /// `Priority` normalised by the largest of all QOS.
    pub norm_priority: f64,
}

/// The job's priority in one of its partitions (`priority_array[i]`): the job's other
/// factors with this partition's factor and TRES normalisation, in Slurm's order.
pub fn priority_in_partition(w: &Weights, f: &Factors, part: &PartitionInput) -> u32 {
    priority_in_partition_qos(w, f, part, None)
}

/// The job's priority in one (partition, QOS) pair of a job with several partitions
/// or QOS (24.11's `_priority_each_qos`): as [`priority_in_partition`], with the QOS
/// factor of `qos` when that QOS has a priority (else the job's own QOS factor).
pub fn priority_in_partition_qos(w: &Weights, f: &Factors, part: &PartitionInput, qos: Option<QosInput>) -> u32 {
    let part_factor = partition_factor(w, part.priority_job_factor, part.norm_priority);
    let part_tres: f64 = if w.tres.is_empty() {
        0.0
    } else {
        let job = JobInput { tres: part.tres.clone(), ..JobInput::default() };
        let tf = factors(w, &job).tres;
        tf.iter().zip(&w.tres).map(|(x, wt)| x * wt).fold(0.0, |acc, x| acc + x)
    };
    let qos_weighted = match qos {
        Some(q) if q.priority != 0 && w.qos != 0 => qos_factor(w, q.priority, q.norm_priority) * f64::from(w.qos),
        _ => f.qos * f64::from(w.qos),
    };
    // Not shared with `priority`: Slurm groups these additions differently here, and
    // floating-point sums must follow its grouping to truncate to the same integer.
    let mut p = part_factor * f64::from(w.partition);
    p += f.age * f64::from(w.age)
        + f.assoc * f64::from(w.assoc)
        + f.fairshare * f64::from(w.fairshare)
        + f.job_size * f64::from(w.job_size)
        + qos_weighted
        + part_tres
        + (i64::from(f.site) - i64::from(NICE_OFFSET)) as f64
        - (i64::from(f.nice) - i64::from(NICE_OFFSET)) as f64;
    clamp_priority(p)
}

/// Priority 0 means held, so a runnable job gets at least 1; at most 2^32 − 1.
fn clamp_priority(p: f64) -> u32 {
    let p = if p < 1.0 || p.is_nan() { 1.0 } else { p };
    if p >= 4_294_967_295.0 {
        u32::MAX
    } else {
        p as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn weights() -> Weights {
        Weights {
            age: 1000,
            assoc: 100,
            fairshare: 10000,
            job_size: 500,
            partition: 2000,
            qos: 3000,
            tres: vec![],
            max_age: 7 * 86400,
            favor_small: false,
            flags: 0,
        }
    }

    fn job() -> JobInput {
        JobInput {
            now: 1_000_000,
            accrue_time: 1_000_000 - 3600,
            fairshare: 0.5,
            min_cpus: 4,
            max_cpus: None,
            min_nodes: 1,
            cluster_cpus: 64,
            node_count: 8,
            part_priority_job_factor: 1,
            part_norm_priority: 0.5,
            has_assoc: true,
            assoc_priority_norm: 0.0,
            qos_priority: 10,
            qos_norm_priority: 0.25,
            site_factor: NICE_OFFSET,
            nice: NICE_OFFSET,
            ..JobInput::default()
        }
    }

    #[test]
    fn hand_computed_example() {
        let w = weights();
        let f = factors(&w, &job());
        assert!((f.age - 3600.0 / 604800.0).abs() < 1e-12);
        assert_eq!(f.job_size, (1.0 / 8.0 + 4.0 / 64.0) / 2.0);
        // 5.95 + 0 + 5000 + 46.875 + 1000 + 750 = 6802.8...
        assert_eq!(priority(&w, &f), 6802);
    }

    #[test]
    fn nice_and_site_shift_priority() {
        let w = weights();
        let mut j = job();
        j.nice = NICE_OFFSET + 100;
        j.site_factor = NICE_OFFSET + 40;
        assert_eq!(priority(&w, &factors(&w, &j)), 6802 - 100 + 40);
    }

    #[test]
    fn clamps_at_both_ends() {
        let w = weights();
        let mut j = job();
        j.nice = NICE_OFFSET + 1_000_000;
        assert_eq!(priority(&w, &factors(&w, &j)), 1);
        j.nice = 0; // nice -2^31
        j.site_factor = u32::MAX;
        assert_eq!(priority(&w, &factors(&w, &j)), u32::MAX);
    }

    #[test]
    fn partition_priority_swaps_in_that_partitions_factor() {
        let w = weights();
        let f = factors(&w, &job());
        let same = PartitionInput { priority_job_factor: 1, norm_priority: 0.5, tres: vec![] };
        assert_eq!(priority_in_partition(&w, &f, &same), priority(&w, &f));
        let top = PartitionInput { priority_job_factor: 2, norm_priority: 1.0, tres: vec![] };
        assert_eq!(priority_in_partition(&w, &f, &top), priority(&w, &f) + 1000);
    }

    #[test]
    fn sprio_rows_weight_each_partitions_tres_and_keep_slurms_stale_values() {
        let w = Weights { tres: vec![700.0, 300.0], ..weights() };
        // CPUs normalised by this partition's 8; no memory counted there: the job's
        // stored (already weighted) value is weighted again, as Slurm does.
        assert_eq!(partition_tres_weighted(&w, &[(4, 8), (100, 0)], &[1.0, 2.0]), vec![350.0, 600.0]);
        let raw = Weights { flags: flags::NO_NORMAL_TRES, ..w };
        assert_eq!(partition_tres_weighted(&raw, &[(4, 8), (0, 0)], &[1.0, 2.0]), vec![2800.0, 0.0]);
    }

    #[test]
    fn each_qos_of_a_multi_qos_job_gets_its_own_priority() {
        let w = weights();
        let f = factors(&w, &job());
        let part = PartitionInput { priority_job_factor: 1, norm_priority: 0.5, tres: vec![] };
        let own = priority(&w, &f);
        // The job's own QOS (norm 0.25), another at 1.0, and one with no priority,
        // which falls back to the job's own QOS factor as 24.11's multifactor does.
        let same = QosInput { priority: 10, norm_priority: 0.25 };
        assert_eq!(priority_in_partition_qos(&w, &f, &part, Some(same)), own);
        let top = QosInput { priority: 40, norm_priority: 1.0 };
        assert_eq!(priority_in_partition_qos(&w, &f, &part, Some(top)), own + 2250);
        let none = QosInput { priority: 0, norm_priority: 0.0 };
        assert_eq!(priority_in_partition_qos(&w, &f, &part, Some(none)), own);
        assert_eq!(priority_in_partition_qos(&w, &f, &part, None), own);
    }

    #[test]
    fn unweighted_factors_are_not_computed() {
        let w = Weights { max_age: 10, ..Weights::default() };
        let f = factors(&w, &job());
        assert_eq!((f.age, f.fairshare, f.job_size, f.partition, f.qos), (0.0, 0.0, 0.0, 0.0, 0.0));
        assert_eq!(priority(&w, &f), 1);
    }

    #[test]
    fn no_normal_flags_use_raw_values() {
        let mut w = weights();
        w.flags = flags::NO_NORMAL_QOS | flags::NO_NORMAL_PART;
        let f = factors(&w, &job());
        assert_eq!((f.qos, f.partition), (10.0, 1.0));
    }

    #[test]
    fn favor_small_and_relative_to_time() {
        let mut w = weights();
        w.favor_small = true;
        let f = factors(&w, &job());
        assert_eq!(f.job_size, (7.0 / 8.0 + 60.0 / 64.0) / 2.0);
        w.flags = flags::SIZE_RELATIVE;
        w.favor_small = false;
        let mut j = job();
        j.time_limit = Some(60);
        // max(1 node × 8 CPUs/node, 4 CPUs) / 60 min / 64 CPUs
        assert_eq!(factors(&w, &j).job_size, 8.0 / 60.0 / 64.0);
    }

    proptest! {
        #[test]
        fn age_is_monotonic_and_capped(max_age in 1u32..2_000_000, a in 0i64..5_000_000, b in 0i64..5_000_000) {
            let w = Weights { age: 1, max_age, ..Weights::default() };
            let at = |wait: i64| factors(&w, &JobInput { now: 10_000_000, accrue_time: 10_000_000 - wait, ..JobInput::default() }).age;
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            prop_assert!(at(lo) <= at(hi));
            prop_assert!((0.0..=1.0).contains(&at(hi)));
            if hi >= i64::from(max_age) { prop_assert_eq!(at(hi), 1.0); }
        }

        #[test]
        fn normalised_factors_stay_in_unit_range(
            min_nodes in 0u32..100, nodes in 1u32..100, cpus in 1u32..10_000, cpu_cnt in 0u32..20_000,
            favor_small in any::<bool>(), relative in any::<bool>(), limit in 1u32..100_000,
        ) {
            let w = Weights { job_size: 1, favor_small, flags: if relative { flags::SIZE_RELATIVE } else { 0 }, ..Weights::default() };
            let j = JobInput { min_nodes, node_count: nodes, cluster_cpus: cpus, min_cpus: cpu_cnt, time_limit: Some(limit), ..JobInput::default() };
            let js = factors(&w, &j).job_size;
            prop_assert!((0.0..=1.0).contains(&js), "{}", js);
        }

        #[test]
        fn priority_is_never_zero(site in any::<u32>(), nice in any::<u32>(), fs in 0.0f64..=1.0) {
            let w = weights();
            let j = JobInput { site_factor: site, nice, fairshare: fs, ..job() };
            prop_assert!(priority(&w, &factors(&w, &j)) >= 1);
        }
    }
}
