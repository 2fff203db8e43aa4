//! A seeded synthetic AI-training workload, for demos, tests and the simulator.
//!
//! Teams (accounts) of users each run a few recurring jobs (`train-*`, `finetune-*`,
//! `eval-*`, ...). Each recurring job has its own GPU count (1/2/4/8/16/32), a typical
//! run time drawn heavy-tailed across jobs (log-normal), per-run log-normal noise with an
//! occasional Pareto straggler, and a time limit its user over-requests by a personal
//! factor rounded up to the usual round values (some users always ask for the maximum).
//! Runs fail early or are cancelled at realistic rates and hit their limit when they
//! outlast it. Arrivals are Poisson, three times busier in working hours. The same seed
//! always gives the same trace. Optionally the workload drifts: from some job on, every run
//! takes a fixed factor longer (a slower file system, bigger models) with the same limits,
//! and the rest of the trace is unchanged.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Exp, LogNormal, Pareto};

use crate::{Job, JobState};

/// Settings of [`generate`].
#[derive(Debug, Clone, PartialEq)]
pub struct SynthConfig {
    /// Jobs to generate.
    pub jobs: usize,
    /// Random seed.
    pub seed: u64,
    /// Teams (accounts).
    pub teams: usize,
    /// Users per team.
    pub users_per_team: usize,
    /// First submit time, Unix seconds.
    pub start: i64,
    /// Mean time between submissions outside working hours, seconds.
    pub mean_interarrival_s: f64,
    /// Run times of jobs from this share of the trace on (0..1) are multiplied by
    /// `drift_factor` (before their limits cut them short); 1 or more: no drift.
    pub drift_from: f64,
    /// The factor (1: none).
    pub drift_factor: f64,
}

impl Default for SynthConfig {
    fn default() -> Self {
        SynthConfig {
            jobs: 1000,
            seed: 1,
            teams: 5,
            users_per_team: 4,
            // Monday 2025-01-06 00:00 UTC.
            start: 1_736_121_600,
            mean_interarrival_s: 600.0,
            drift_from: 1.0,
            drift_factor: 1.0,
        }
    }
}

/// Time limits users pick from (seconds): 30 min up to the 3-day maximum.
const ROUND_LIMITS: [u64; 9] = [1800, 3600, 7200, 14_400, 28_800, 43_200, 86_400, 172_800, 259_200];
/// GPU counts and their weights.
const GPU_MIX: [(u32, u32); 6] = [(1, 35), (2, 15), (4, 15), (8, 22), (16, 8), (32, 5)];
/// Kinds of recurring jobs, with their median typical run time in seconds.
const KINDS: [(&str, f64); 5] =
    [("train", 8.0 * 3600.0), ("finetune", 2.5 * 3600.0), ("eval", 1200.0), ("preprocess", 2400.0), ("sweep", 3600.0)];
const MODELS: [&str; 8] = ["llama", "vit", "bert", "resnet", "diffusion", "gpt", "t5", "whisper"];

struct Recurring {
    user: usize,
    name: String,
    gpus: u32,
    typical_s: f64,
    limit_s: u64,
}

/// Generates `cfg.jobs` jobs in submit order.
pub fn generate(cfg: &SynthConfig) -> Vec<Job> {
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    let users = (cfg.teams * cfg.users_per_team).max(1);
    let spread = LogNormal::new(0.0, 0.9).expect("valid log-normal");
    let noise = LogNormal::new(0.0, 0.35).expect("valid log-normal");
    let straggler = Pareto::new(1.0, 1.5).expect("valid Pareto");
    let gpu_total: u32 = GPU_MIX.iter().map(|(_, w)| w).sum();

    // Users: a personal over-request habit; a few always ask for the maximum.
    let habits: Vec<Option<f64>> = (0..users)
        .map(|_| if rng.random_bool(0.15) { None } else { Some([1.5, 2.0, 3.0, 5.0, 10.0][rng.random_range(0..5)]) })
        .collect();
    let mut recurring = Vec::new();
    for (user, habit) in habits.iter().enumerate() {
        for _ in 0..rng.random_range(3..=7) {
            let (kind, median) = KINDS[rng.random_range(0..KINDS.len())];
            let mut pick = rng.random_range(0..gpu_total);
            let gpus = GPU_MIX
                .iter()
                .find(|(_, w)| {
                    pick < *w || {
                        pick -= w;
                        false
                    }
                })
                .map_or(1, |(g, _)| *g);
            let typical_s = (median * spread.sample(&mut rng)).clamp(60.0, 200_000.0);
            let wanted = habit.map_or(f64::INFINITY, |f| typical_s * f);
            let limit_s = ROUND_LIMITS.iter().copied().find(|&l| l as f64 >= wanted).unwrap_or(ROUND_LIMITS[8]);
            let name = format!("{kind}-{}-{}", MODELS[rng.random_range(0..MODELS.len())], rng.random_range(1..100));
            recurring.push(Recurring { user, name, gpus, typical_s, limit_s });
        }
    }
    // Heavier users submit more: weight 1/(rank+1).
    let weights: Vec<f64> = (0..recurring.len()).map(|i| 1.0 / (recurring[i].user as f64 + 1.0).sqrt()).collect();
    let total: f64 = weights.iter().sum();

    let mut t = cfg.start as f64;
    let mut jobs = Vec::with_capacity(cfg.jobs);
    for id in 1..=cfg.jobs {
        let hour = (t as i64).rem_euclid(86_400) / 3600;
        let rate = if (8..20).contains(&hour) { 3.0 } else { 1.0 } / cfg.mean_interarrival_s.max(1.0);
        t += Exp::new(rate).expect("positive rate").sample(&mut rng);
        let mut x = rng.random::<f64>() * total;
        let r = recurring
            .iter()
            .zip(&weights)
            .find(|(_, w)| {
                x < **w || {
                    x -= **w;
                    false
                }
            })
            .map_or(&recurring[0], |(r, _)| r);

        let mut run = r.typical_s * noise.sample(&mut rng);
        if rng.random_bool(0.05) {
            run *= f64::min(straggler.sample(&mut rng), 20.0);
        }
        if (id - 1) as f64 >= cfg.drift_from * cfg.jobs as f64 {
            run *= cfg.drift_factor;
        }
        let roll = rng.random::<f64>();
        let mut state = JobState::Completed;
        if roll < 0.10 {
            state = JobState::Failed;
            run *= rng.random_range(0.01..0.5);
        } else if roll < 0.17 {
            state = JobState::Cancelled;
            run *= rng.random_range(0.05..1.0);
        }
        let mut runtime = run.max(1.0).round() as u64;
        if runtime > r.limit_s {
            runtime = r.limit_s;
            state = JobState::Timeout;
        }
        let submit = t as i64;
        let wait = Exp::new(1.0 / (300.0 * (1.0 + f64::from(r.gpus).log2()))).expect("positive rate").sample(&mut rng);
        let start = submit + wait as i64;
        let team = r.user / cfg.users_per_team.max(1);
        jobs.push(Job {
            id: id.to_string(),
            user: format!("user{:03}", r.user),
            account: format!("team{team}"),
            name: r.name.clone(),
            partition: "gpu".into(),
            qos: if rng.random_bool(0.1) { "high" } else { "normal" }.into(),
            submit,
            start: Some(start),
            end: Some(start + runtime as i64),
            runtime: Some(runtime),
            time_limit: Some(r.limit_s),
            gpus: f64::from(r.gpus),
            nodes: Some(r.gpus.div_ceil(8)),
            cpus: Some(8 * r.gpus),
            state,
        });
    }
    jobs
}
