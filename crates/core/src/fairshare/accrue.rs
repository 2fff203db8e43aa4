//! Usage accrual: what a running job adds to its associations' and QOS's usage in one
//! decay pass (multifactor's `_apply_new_usage`), as numbers. The FFI layer adds them to
//! slurmctld's records; the simulator to its own tree.

/// What accrual reads of a running (or just ended) job.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunningJob {
    /// When it started, Unix seconds.
    pub start_time: i64,
    /// When it ended (0 while it runs).
    pub end_time: i64,
    /// When its time limit runs out (`end_time_exp`); `None` once its usage was charged
    /// to its end (Slurm's `NO_VAL`).
    pub end_time_exp: Option<i64>,
    /// Its time limit, minutes.
    pub time_limit: u32,
    /// Finished, completing or resizing: the rest of its limit leaves the running
    /// TRES-seconds now.
    pub done: bool,
    /// Its QOS's `UsageFactor`, when the QOS has one (>= 0).
    pub usage_factor: Option<f64>,
    /// Per TRES, the count allocated (0 where none or not consumed).
    pub tres_alloc: Vec<u64>,
}

/// What one job adds over one period.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Charge {
    /// Seconds run, decayed (`grp_used_wall` of decaying associations and QOS).
    pub run_decay: f64,
    /// Billable seconds run, decayed (`usage_raw`).
    pub real_decay: f64,
    /// Seconds run, not decayed (QOS with `NoDecay`).
    pub run_nodecay: f64,
    /// Billable seconds run, not decayed (QOS with `NoDecay`).
    pub real_nodecay: f64,
    /// Per TRES, running TRES-seconds now used up (`grp_used_tres_run_secs` falls by it).
    pub tres_run_delta: Vec<u64>,
    /// Per TRES, decayed TRES-seconds (`usage_tres_raw`).
    pub tres_run_decay: Vec<f64>,
    /// Per TRES, TRES-seconds not decayed (QOS with `NoDecay`).
    pub tres_run_nodecay: Vec<f64>,
    /// Whether the job ran at all in the period (so usage changed and is worth saving).
    pub ran: bool,
}

/// The charge for `job` over `[start_period, end_period]` (`at_end`: the job just ended,
/// charged up to its end), under a usage half-life of `half_life` seconds.
/// `billable` gives the job's billable TRES from the period's start, as Slurm's
/// `calc_job_billable_tres` does. `None` for a job whose usage was already charged to
/// its end.
pub fn charge(
    job: &RunningJob,
    half_life: u32,
    start_period: i64,
    end_period: i64,
    at_end: bool,
    billable: impl FnOnce(i64) -> f64,
) -> Option<Charge> {
    let end_time_exp = job.end_time_exp?;
    let start_period = start_period.max(job.start_time);
    let end_period = if job.end_time != 0 && at_end && end_period > job.end_time { job.end_time } else { end_period };
    let run_delta = ((end_period - start_period) as f64).max(0.0);
    let limit_ends = job.start_time as u64 + u64::from(job.time_limit) * 60;
    let mut tres_time_delta: u64 = if start_period as u64 >= limit_ends {
        0
    } else if job.done {
        limit_ends - start_period as u64
    } else if end_period > end_time_exp {
        (end_time_exp - start_period).max(0) as u64
    } else {
        run_delta as u64
    };
    let mut run_decay = super::decayed_run(super::decay_factor(half_life), run_delta);
    let billable = billable(start_period);
    let mut real_decay = run_decay * billable;
    let mut real_nodecay = run_delta * billable;
    let mut run_nodecay = run_delta;
    if let Some(f) = job.usage_factor {
        real_decay *= f;
        run_decay *= f;
        real_nodecay *= f;
        run_nodecay *= f;
        tres_time_delta = (tres_time_delta as f64 * f) as u64;
    }
    let n = job.tres_alloc.len();
    let mut c = Charge {
        run_decay,
        real_decay,
        run_nodecay,
        real_nodecay,
        tres_run_delta: vec![0; n],
        tres_run_decay: vec![0.0; n],
        tres_run_nodecay: vec![0.0; n],
        ran: run_delta > 0.0,
    };
    for (t, &count) in job.tres_alloc.iter().enumerate() {
        if count == 0 {
            continue;
        }
        c.tres_run_delta[t] = tres_time_delta.wrapping_mul(count);
        c.tres_run_decay[t] = run_decay * count as f64;
        c.tres_run_nodecay[t] = run_nodecay * count as f64;
    }
    Some(c)
}

/// Per TRES, the running TRES-seconds a job had used by `last_ran` (multifactor's
/// `_init_grp_used_tres_run_secs`): after a restart slurmctld counts each running job's
/// whole `tres × limit` again, and this much of it is already spent.
pub fn used_run_secs(job: &RunningJob, last_ran: i64) -> Vec<u64> {
    let factor = job.usage_factor.unwrap_or(1.0) * (last_ran - job.start_time) as f64;
    job.tres_alloc.iter().map(|&c| (c as f64 * factor) as u64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> RunningJob {
        RunningJob {
            start_time: 1000,
            end_time: 0,
            end_time_exp: Some(1000 + 3600),
            time_limit: 60,
            tres_alloc: vec![8, 0, 2],
            ..RunningJob::default()
        }
    }

    #[test]
    fn a_period_of_running_is_charged_decayed_and_billed() {
        let c = charge(&job(), 0, 1000, 1600, false, |_| 4.0).unwrap();
        // No half-life: nothing decays.
        assert_eq!((c.run_decay, c.real_decay, c.run_nodecay, c.real_nodecay), (600.0, 2400.0, 600.0, 2400.0));
        assert_eq!(c.tres_run_delta, vec![4800, 0, 1200]);
        assert_eq!(c.tres_run_decay, vec![4800.0, 0.0, 1200.0]);
        assert!(c.ran);
        let hl = charge(&job(), 3600, 1000, 1600, false, |_| 1.0).unwrap();
        assert_eq!(hl.run_decay, crate::fairshare::decayed_run(crate::fairshare::decay_factor(3600), 600.0));
    }

    #[test]
    fn the_period_starts_no_earlier_than_the_job_and_billing_sees_that_start() {
        let mut seen = 0;
        let c = charge(&job(), 0, 0, 1600, false, |s| {
            seen = s;
            1.0
        })
        .unwrap();
        assert_eq!((seen, c.run_decay), (1000, 600.0));
    }

    #[test]
    fn a_job_ending_is_charged_to_its_end_and_frees_the_rest_of_its_limit() {
        let j = RunningJob { end_time: 1300, done: true, ..job() };
        let c = charge(&j, 0, 1000, 2000, true, |_| 1.0).unwrap();
        assert_eq!(c.run_decay, 300.0);
        assert_eq!(c.tres_run_delta[0], 8 * 3600, "the whole unused limit leaves the running TRES-seconds");
        assert!(charge(&RunningJob { end_time_exp: None, ..job() }, 0, 0, 1, true, |_| 1.0).is_none());
    }

    #[test]
    fn past_its_limit_only_the_limit_counts_against_running_tres() {
        let c = charge(&job(), 0, 4000, 5000, false, |_| 1.0).unwrap();
        assert_eq!(c.run_decay, 1000.0);
        assert_eq!(c.tres_run_delta[0], 8 * 600);
        assert_eq!(charge(&job(), 0, 4600, 5000, false, |_| 1.0).unwrap().tres_run_delta[0], 0);
    }

    #[test]
    fn the_qos_usage_factor_scales_everything() {
        let j = RunningJob { usage_factor: Some(0.5), ..job() };
        let c = charge(&j, 0, 1000, 1600, false, |_| 2.0).unwrap();
        assert_eq!((c.run_decay, c.real_decay, c.run_nodecay), (300.0, 600.0, 300.0));
        assert_eq!(c.tres_run_delta[0], 300 * 8);
        assert_eq!(used_run_secs(&j, 1600), vec![2400, 0, 600]);
    }
}
