use fairway_trace::synth::{generate, SynthConfig};
use fairway_trace::{Job, JobState};

use super::*;
use crate::{Jitter, SimPreempt};
use fairway_core::multifactor;

#[allow(clippy::too_many_arguments)] // a table row of the hand-made traces
fn job(id: &str, submit: i64, runtime: u64, limit: u64, gpus: u32, nodes: u32, user: &str, account: &str) -> Job {
    Job {
        id: id.into(),
        user: user.into(),
        account: account.into(),
        name: format!("job-{user}"),
        partition: String::new(),
        qos: String::new(),
        submit,
        start: None,
        end: None,
        runtime: Some(runtime),
        time_limit: Some(limit),
        gpus: f64::from(gpus),
        nodes: Some(nodes),
        cpus: None,
        state: JobState::Completed,
    }
}

fn run(trace: &[Job], cluster: &Cluster, policy: Policy, backfill: bool) -> (Workload, SimResult) {
    let w = Workload::prepare(trace, cluster, 86_400);
    let cfg = SimConfig { policy, backfill, ..SimConfig::default() };
    let r = Simulator::new(&w, cluster, cfg).run(&mut |_| {});
    (w, r)
}

fn starts(w: &Workload, r: &SimResult) -> Vec<(String, i64)> {
    w.jobs.iter().zip(&r.outcomes).map(|(j, o)| (j.id.clone(), o.start)).collect()
}

/// Two nodes of 4 GPUs. A holds node 0 until 100; B wants both whole nodes.
/// - FIFO, no backfill: B at 100 (A's end); C, D, E queue behind B and start when B ends
///   at 150 (2 + 2 + 2 GPUs fit the 8 free).
/// - EASY: B's reservation is at 100 on both nodes. C (limit 60, ends by 62) and E (limit 40,
///   ends by 44) backfill onto node 1; D (limit 200) would hold node 1 past 100 and waits
///   until B ends at 150.
fn hand_trace() -> Vec<Job> {
    vec![
        job("A", 0, 100, 100, 4, 1, "u", "a"),
        job("B", 1, 50, 100, 8, 2, "u", "a"),
        job("C", 2, 50, 60, 2, 1, "u", "a"),
        job("D", 3, 200, 200, 2, 1, "u", "a"),
        job("E", 4, 30, 40, 2, 1, "u", "a"),
    ]
}

fn expect(v: &[(&str, i64)]) -> Vec<(String, i64)> {
    v.iter().map(|&(id, t)| (id.to_string(), t)).collect()
}

#[test]
fn hand_worked_fifo_without_backfill() {
    let cluster = Cluster::uniform(2, 4);
    let (w, r) = run(&hand_trace(), &cluster, Policy::Fifo, false);
    assert_eq!(starts(&w, &r), expect(&[("A", 0), ("B", 100), ("C", 150), ("D", 150), ("E", 150)]));
    assert_eq!(r.outcomes[1].alloc, vec![(0, 4), (1, 4)]);
}

#[test]
fn hand_worked_easy_backfill() {
    let cluster = Cluster::uniform(2, 4);
    let (w, r) = run(&hand_trace(), &cluster, Policy::Fifo, true);
    assert_eq!(starts(&w, &r), expect(&[("A", 0), ("B", 100), ("C", 2), ("D", 150), ("E", 4)]));
    // C and E on node 1, D after B.
    assert_eq!(r.outcomes[2].alloc, vec![(1, 2)]);
    assert_eq!(r.outcomes[4].alloc, vec![(1, 2)]);
    // JCTs: A 100, B 149, C 50, D 347, E 30.
    assert_eq!(r.metrics.mean_jct, (100.0 + 149.0 + 50.0 + 347.0 + 30.0) / 5.0);
    assert_eq!(r.metrics.max_wait, 147.0);
}

#[test]
fn sjf_oracle_runs_the_smallest_work_first() {
    // One 4-GPU node, busy until 100; then three 4-GPU jobs wait: X (100 s), Y (10 s), Z (30 s).
    let cluster = Cluster::uniform(1, 4);
    let trace = vec![
        job("busy", 0, 100, 100, 4, 1, "u", "a"),
        job("X", 1, 100, 100, 4, 1, "u", "a"),
        job("Y", 2, 10, 1000, 4, 1, "u", "a"),
        job("Z", 3, 30, 1000, 4, 1, "u", "a"),
    ];
    let (w, r) = run(&trace, &cluster, Policy::SjfOracle, true);
    assert_eq!(starts(&w, &r), expect(&[("busy", 0), ("X", 140), ("Y", 100), ("Z", 110)]));
    let (w, r) = run(&trace, &cluster, Policy::Fifo, true);
    assert_eq!(starts(&w, &r), expect(&[("busy", 0), ("X", 100), ("Y", 200), ("Z", 210)]));
}

#[test]
fn gangs_start_whole_or_not_at_all() {
    // A takes 1 GPU of node 0; B needs 4 GPUs on each of both nodes and must wait for A, even
    // though 7 GPUs are free at once; C (4 GPUs, ends before A) backfills onto node 1.
    let cluster = Cluster::uniform(2, 4);
    let trace = vec![
        job("A", 0, 100, 100, 1, 1, "u", "a"),
        job("B", 1, 10, 20, 8, 2, "u", "a"),
        job("C", 2, 50, 50, 4, 1, "u", "a"),
    ];
    let (w, r) = run(&trace, &cluster, Policy::Fifo, true);
    assert_eq!(starts(&w, &r), expect(&[("A", 0), ("B", 100), ("C", 2)]));
    assert_eq!(r.outcomes[1].alloc, vec![(0, 4), (1, 4)]);
}

/// Per node, GPUs in use never exceed the node's; every job gets exactly its nodes × GPUs at
/// its start and runs for its run time; utilisation ≤ 1.
fn check_invariants(w: &Workload, cluster: &Cluster, r: &SimResult) {
    let mut events: Vec<(i64, i64, usize)> = Vec::new();
    for (job, o) in w.jobs.iter().zip(&r.outcomes) {
        assert!(o.start >= job.submit, "{} starts before submission", job.id);
        assert_eq!((o.end - o.start) as u64, job.runtime, "{}", job.id);
        assert_eq!(o.alloc.len(), job.nodes as usize, "{}: partial gang {:?}", job.id, o.alloc);
        let mut nodes: Vec<u32> = o.alloc.iter().map(|&(n, _)| n).collect();
        nodes.dedup();
        assert_eq!(nodes.len(), job.nodes as usize, "{}: nodes repeat", job.id);
        for &(n, g) in &o.alloc {
            assert_eq!(g, job.per_node);
            events.push((o.start, i64::from(g), n as usize));
            events.push((o.end, -i64::from(g), n as usize));
        }
    }
    // Ends before starts at the same instant.
    events.sort_by_key(|&(t, d, n)| (t, d, n));
    let mut used = vec![0i64; cluster.nodes.len()];
    for (t, d, n) in events {
        used[n] += d;
        assert!(used[n] <= i64::from(cluster.nodes[n]), "node {n} over-allocated at {t}");
        assert!(used[n] >= 0);
    }
    assert!(r.metrics.utilisation <= 1.0 + 1e-12 && r.metrics.utilisation > 0.0, "{}", r.metrics.utilisation);
}

fn synth(jobs: usize, seed: u64, interarrival: f64) -> Vec<Job> {
    generate(&SynthConfig { jobs, seed, mean_interarrival_s: interarrival, ..SynthConfig::default() })
}

#[test]
fn invariants_hold_on_a_congested_synthetic_workload() {
    // 3 nodes × 8 and one 4-GPU node: 32-GPU jobs get reshaped, 16-GPU gangs contend.
    let cluster = Cluster { nodes: vec![8, 8, 8, 4] };
    for (seed, policy) in [(1, Policy::Fifo), (2, Policy::Multifactor), (3, Policy::Fairway), (4, Policy::SjfOracle)] {
        let trace = synth(400, seed, 300.0);
        let w = Workload::prepare(&trace, &cluster, 86_400);
        assert!(w.offered_load(&cluster) > 1.0, "not congested: {}", w.offered_load(&cluster));
        for backfill in [true, false] {
            let cfg = SimConfig { policy, backfill, ..SimConfig::default() };
            let r = Simulator::new(&w, &cluster, cfg).run(&mut |_| {});
            check_invariants(&w, &cluster, &r);
        }
    }
}

#[test]
fn backfill_never_hurts_utilisation_here_and_shortens_waits() {
    let cluster = Cluster::uniform(4, 8);
    let trace = synth(500, 11, 400.0);
    let (_, easy) = run(&trace, &cluster, Policy::Fifo, true);
    let (_, strict) = run(&trace, &cluster, Policy::Fifo, false);
    assert!(easy.metrics.mean_wait < strict.metrics.mean_wait, "{:?} vs {:?}", easy.metrics, strict.metrics);
}

#[test]
fn same_seed_same_metrics_different_seed_different() {
    let cluster = Cluster::uniform(4, 8);
    for policy in [Policy::Multifactor, Policy::Fairway] {
        let a = run(&synth(300, 5, 500.0), &cluster, policy, true).1;
        let b = run(&synth(300, 5, 500.0), &cluster, policy, true).1;
        let c = run(&synth(300, 6, 500.0), &cluster, policy, true).1;
        assert_eq!(a.metrics, b.metrics);
        assert_eq!(a.outcomes, b.outcomes);
        assert_ne!(a.metrics, c.metrics);
    }
}

/// Accounts a (u1, u2) and b (u3) with equal shares; u1 has run 4 GPUs for 1000 s by the
/// time the pending jobs' priorities are computed.
fn fairshare_setup() -> (Workload, Cluster) {
    let cluster = Cluster::uniform(2, 4);
    let trace = vec![
        job("run", 0, 1000, 2000, 4, 1, "u1", "a"),
        job("p1", 10, 500, 3600, 2, 1, "u1", "a"),
        job("p2", 20, 500, 7200, 8, 2, "u2", "a"),
        job("p3", 30, 500, 600, 1, 1, "u3", "b"),
    ];
    (Workload::prepare(&trace, &cluster, 86_400), cluster)
}

#[test]
fn multifactor_priorities_are_fairway_cores() {
    let (w, cluster) = fairshare_setup();
    let cfg = SimConfig { policy: Policy::Multifactor, ..SimConfig::default() };
    let weights = cfg.weights.clone();
    let mut sim = Simulator::new(&w, &cluster, cfg);
    sim.arrive(0, 0);
    sim.tick(0);
    sim.schedule(0);
    assert_eq!(sim.start[0], Some(0));
    // Fill the rest of the cluster so the others stay pending, then pass time.
    for j in 1..4 {
        sim.arrive(j, w.jobs[j].submit);
    }
    let now = 1000;
    sim.tick(now);
    // Fair Tree: b has no usage and ranks first (u3 = 3/3); in a, u2 (no usage) 2/3, u1 1/3.
    let fs = |user: &str| {
        let u = w.users.iter().position(|x| x == user).unwrap();
        let a = w.assocs.iter().position(|&(_, x)| x == u).unwrap();
        sim.fairshare_factors()[a]
    };
    assert_eq!((fs("u1"), fs("u2"), fs("u3")), (1.0 / 3.0, 2.0 / 3.0, 1.0));

    // The same inputs written out by hand: the job as priority/multifactor sees it.
    let by_hand = |j: usize, fairshare: f64, gpus: u32, nodes: u32, limit_min: u32| JobInput {
        now,
        accrue_time: w.jobs[j].submit,
        fairshare,
        total_cpus: 0,
        min_cpus: gpus,
        max_cpus: None,
        min_nodes: nodes,
        time_limit: Some(limit_min),
        part_max_time: u32::MAX,
        cluster_cpus: 8,
        node_count: 2,
        part_priority_job_factor: 1,
        part_norm_priority: 1.0,
        has_assoc: true,
        site_factor: NICE_OFFSET,
        nice: NICE_OFFSET,
        ..JobInput::default()
    };
    for (j, input) in
        [(1, by_hand(1, 1.0 / 3.0, 2, 1, 60)), (2, by_hand(2, 2.0 / 3.0, 8, 2, 120)), (3, by_hand(3, 1.0, 1, 1, 10))]
    {
        assert_eq!(sim.job_input(j, now), input, "job {}", w.jobs[j].id);
        let expected = multifactor::priority(&weights, &multifactor::factors(&weights, &input));
        assert_eq!(sim.priority(j, now), Some(expected), "job {}", w.jobs[j].id);
    }
    // And the queue is in that order: p3 (fs 1), p2, p1.
    let order: Vec<&str> = sim.pending.iter().map(|&j| w.jobs[j].id.as_str()).collect();
    assert_eq!(order, vec!["p3", "p2", "p1"]);
}

#[test]
fn fairway_priority_uses_the_predictor_learning_at_job_end() {
    let cluster = Cluster::uniform(1, 8);
    // Two runs of the same job (same user, account, name, GPUs): the second is priced at the
    // limit before the first ends, and at the first's run time after.
    let trace = vec![job("r1", 0, 600, 7200, 8, 1, "u", "a"), job("r2", 10, 600, 7200, 8, 1, "u", "a")];
    let w = Workload::prepare(&trace, &cluster, 86_400);
    let cfg = SimConfig { policy: Policy::Fairway, ..SimConfig::default() };
    let (weights, terms_cfg) = (cfg.weights.clone(), cfg.fairway.clone());
    let mut sim = Simulator::new(&w, &cluster, cfg);
    sim.arrive(0, 0);
    sim.schedule(0);
    sim.arrive(1, 10);
    assert_eq!(sim.terms_job(1).expected_runtime, Some(7200));
    let before = sim.priority(1, 10).unwrap();
    sim.finish(0, 600);
    assert_eq!(sim.terms_job(1).expected_runtime, Some(600));
    let after = sim.priority(1, 600).unwrap();
    // What the plugin computes from the same input.
    let input = sim.priority_input(1, 600);
    let policy = priority::Policy { weights: &weights, terms: &terms_cfg, history: None, model: None };
    assert_eq!(after, policy.evaluate(&input, fairway_core::terms::Lift::None).priority);
    assert!(after > before, "{after} <= {before}");
}

#[test]
fn perfect_prediction_prices_each_job_at_its_true_run_time() {
    let cluster = Cluster::uniform(1, 8);
    let trace = vec![job("r1", 0, 600, 7200, 8, 1, "u", "a"), job("r2", 10, 900, 7200, 8, 1, "u", "a")];
    let w = Workload::prepare(&trace, &cluster, 86_400);
    let cfg = SimConfig { policy: Policy::Fairway, perfect_prediction: true, ..SimConfig::default() };
    let mut sim = Simulator::new(&w, &cluster, cfg);
    sim.arrive(0, 0);
    sim.schedule(0);
    sim.arrive(1, 10);
    // Not the limit, though nothing has ended; and not r1's 600 s after it ends.
    assert_eq!(sim.terms_job(1).expected_runtime, Some(900));
    sim.finish(0, 600);
    assert_eq!(sim.terms_job(1).expected_runtime, Some(900));
}

#[test]
fn fairway_priority_predicts_with_a_learned_model_as_the_plugins_do() {
    use fairway_core::predict::{Features, LearnedPredictor, RuntimePredictor, TrainConfig};
    // A model of a site where this user's 8-GPU jobs run about an hour against 2-hour limits.
    let past: Vec<Job> =
        (0..200).map(|i| job(&format!("h{i}"), i * 100, 3000 + (i as u64 % 7) * 200, 7200, 8, 1, "u", "a")).collect();
    let mut history = RuntimePredictor::default();
    let examples: Vec<_> = past
        .iter()
        .map(|j| {
            let f = Features::new(&history, &j.request());
            history.record_with_limit(&j.key(), j.runtime.unwrap(), j.time_limit);
            (f, j.runtime.unwrap(), j.time_limit)
        })
        .collect();
    let model = LearnedPredictor::train(&examples, &TrainConfig::default()).unwrap();

    let cluster = Cluster::uniform(1, 8);
    let trace = vec![job("r1", 0, 600, 7200, 8, 1, "u", "a"), job("r2", 10, 600, 7200, 8, 1, "u", "a")];
    let w = Workload::prepare(&trace, &cluster, 86_400);
    let cfg = SimConfig { policy: Policy::Fairway, ..SimConfig::default() };
    let mut sim = Simulator::new(&w, &cluster, cfg).with_model(&model);
    sim.arrive(0, 0);
    sim.schedule(0);
    sim.arrive(1, 10);
    // Nothing has ended: the model's typical run time, not the limit (last two's answer).
    let cold = model.typical(&RuntimePredictor::default(), &w.jobs[1].request);
    assert!(cold < 7200, "{cold}");
    assert_eq!(sim.terms_job(1).expected_runtime, Some(cold));
    // r1 ends after 600 s: the prediction follows the history the model now sees.
    sim.finish(0, 600);
    let mut seen = RuntimePredictor::default();
    seen.record_with_limit(&w.jobs[0].request.key, 600, Some(7200));
    let warm = model.typical(&seen, &w.jobs[1].request);
    assert_ne!(warm, cold, "the model should read the job's history");
    assert_eq!(sim.terms_job(1).expected_runtime, Some(warm));
}

fn shipped_topology(name: &str) -> fairway_core::topology::Topology {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/topology").join(name);
    fairway_core::topology::Topology::load(&path).unwrap()
}

/// One node of 4 A100s bridged in pairs (0-1 on socket 0, 2-3 on socket 1). A (1 GPU) and
/// B (1 GPU) start at once, A ends, then C wants 2 GPUs: first free gives C GPUs 0 and 2,
/// across the sockets and without NVLink; Fairway's choice put B beside A, so C gets the
/// bridged pair 2-3.
#[test]
fn topology_placement_keeps_a_bridged_pair_free_where_first_free_splits_it() {
    let trace = vec![
        job("A", 0, 100, 200, 1, 1, "u", "a"),
        job("B", 0, 1000, 2000, 1, 1, "u", "a"),
        job("C", 200, 100, 200, 2, 1, "u", "a"),
    ];
    let cluster = Cluster::uniform(1, 4);
    let w = Workload::prepare(&trace, &cluster, 86_400);
    let topo = shipped_topology("pcie-a100-nvlink-pairs.toml");
    let r = Simulator::new(&w, &cluster, SimConfig::default()).with_topology(&topo).unwrap().run(&mut |_| {});
    let p = r.placement.unwrap();
    assert_eq!(p.multi_gpu, 1);
    assert_eq!((p.topology.nvlink_split, p.topology.socket_split), (0, 0));
    assert_eq!((p.first_free.nvlink_split, p.first_free.socket_split), (1, 1));
    // The times are those of the run without a topology.
    assert_eq!(r.outcomes, Simulator::new(&w, &cluster, SimConfig::default()).run(&mut |_| {}).outcomes);
}

#[test]
fn a_topology_must_match_every_node() {
    let cluster = Cluster::uniform(2, 8);
    let w = Workload::prepare(&[job("A", 0, 10, 20, 1, 1, "u", "a")], &cluster, 86_400);
    let err = Simulator::new(&w, &cluster, SimConfig::default())
        .with_topology(&shipped_topology("a100-pcie-mig.toml"))
        .err()
        .unwrap();
    assert!(err.contains("node 0 has 8 GPUs but the topology has 3"), "{err}");
}

/// A synthetic day on DGX H100 nodes: every allocation is placed under both rules without
/// running out of GPUs (the scheduler's counts and the placements' masks agree).
#[test]
fn placements_follow_a_synthetic_workload() {
    let trace = generate(&SynthConfig { jobs: 400, seed: 3, ..SynthConfig::default() });
    let cluster = Cluster::uniform(4, 8);
    let w = Workload::prepare(&trace, &cluster, 86_400);
    let topo = shipped_topology("dgx-h100.toml");
    let r = Simulator::new(&w, &cluster, SimConfig::default()).with_topology(&topo).unwrap().run(&mut |_| {});
    let p = r.placement.unwrap();
    assert!(p.multi_gpu > 0);
    // NVSwitch: every set is connected; only sockets can differ.
    assert_eq!((p.topology.nvlink_split, p.first_free.nvlink_split), (0, 0));
    assert!(p.topology.socket_split <= p.multi_gpu && p.first_free.socket_split <= p.multi_gpu);
}

fn qos_job(id: &str, submit: i64, runtime: u64, gpus: u32, qos: &str) -> Job {
    Job { qos: qos.into(), ..job(id, submit, runtime, 2 * runtime, gpus, 1, "u", "a") }
}

/// One node of 4 GPUs: N (normal, 1000 s) runs from 0; H (high, 100 s) arrives at 700,
/// past N's minimum runtime, and takes the node by preemption.
fn preempt_run(grace: u64, checkpoint_every: Option<u64>, pairs: &[(&str, &str)]) -> (SimResult, Vec<(i64, i64, u32)>) {
    let trace = vec![qos_job("N", 0, 1000, 4, "normal"), qos_job("H", 700, 100, 4, "high")];
    let cluster = Cluster::uniform(1, 4);
    let w = Workload::prepare(&trace, &cluster, 86_400);
    let preempt = SimPreempt {
        pairs: pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect(),
        rules: fairway_core::preempt::PreemptConfig::default(),
        grace,
        checkpoint_every,
    };
    let cfg = SimConfig { preempt: Some(preempt), ..SimConfig::default() };
    let r = Simulator::new(&w, &cluster, cfg).run(&mut |_| {});
    let times = r.outcomes.iter().map(|o| (o.start, o.end, o.preempted)).collect();
    (r, times)
}

#[test]
fn a_high_qos_job_preempts_and_the_victim_resumes_from_what_it_saved() {
    // Requeued at once, no checkpoint: N starts over at 800 and redoes 700 s on 4 GPUs.
    let (r, t) = preempt_run(0, None, &[("high", "normal")]);
    assert_eq!(t, [(0, 1800, 1), (700, 800, 0)]);
    let p = r.preemption.unwrap();
    assert_eq!((p.preemptions, p.jobs_preempted, p.lost_gpu_seconds, p.grace_gpu_seconds), (1, 1, 2800.0, 0.0));
    // Periodic checkpoints every 300 s: it resumes from 600 and redoes 100 s.
    let (r, t) = preempt_run(0, Some(300), &[("high", "normal")]);
    assert_eq!(t, [(0, 1200, 1), (700, 800, 0)]);
    assert_eq!(r.preemption.unwrap().lost_gpu_seconds, 400.0);
    // preempt/fairway's grace: N checkpoints for 60 s, H starts at 760, N resumes at 860
    // with its 300 s left; nothing lost, 240 GPU-seconds spent checkpointing.
    let (r, t) = preempt_run(60, None, &[("high", "normal")]);
    assert_eq!(t, [(0, 1160, 1), (760, 860, 0)]);
    let p = r.preemption.unwrap();
    assert_eq!((p.lost_gpu_seconds, p.grace_gpu_seconds), (0.0, 240.0));
    // Utilisation counts what the runs held: 700 + 60 + 100 + 300 s on 4 GPUs over 1160 s.
    assert!((r.metrics.utilisation - 1160.0 / 1160.0).abs() < 1e-9, "{}", r.metrics.utilisation);
}

#[test]
fn only_the_qos_pairs_given_preempt() {
    let (r, t) = preempt_run(0, None, &[("normal", "high")]);
    assert_eq!(t, [(0, 1000, 0), (1000, 1100, 0)]);
    assert_eq!(r.preemption.unwrap().preemptions, 0);
}

/// A synthetic workload with high QoS preempting normal: every job still ends once with
/// its whole run time done, and the GPU-seconds held add up.
#[test]
fn preemption_over_a_synthetic_workload_keeps_every_job_whole() {
    let trace = generate(&SynthConfig { jobs: 600, seed: 5, ..SynthConfig::default() });
    let cluster = Cluster::uniform(3, 8);
    let w = Workload::prepare(&trace, &cluster, 86_400);
    for grace in [0, 120] {
        let preempt = SimPreempt {
            pairs: vec![("high".into(), "normal".into())],
            rules: fairway_core::preempt::PreemptConfig { min_runtime: 0, ..Default::default() },
            grace,
            checkpoint_every: Some(1800),
        };
        let cfg = SimConfig { preempt: Some(preempt), ..SimConfig::default() };
        let r = Simulator::new(&w, &cluster, cfg).run(&mut |_| {});
        let p = r.preemption.unwrap();
        assert!(p.preemptions > 0, "grace {grace}: no preemption on a loaded cluster");
        for (j, o) in w.jobs.iter().zip(&r.outcomes) {
            assert!(o.end - o.start >= j.runtime as i64, "{}: {o:?}", j.id);
            assert!(o.preempted <= 3, "{}: preempted {} times, over max_preemptions", j.id, o.preempted);
        }
        let work: f64 = w.jobs.iter().map(|j| j.runtime as f64 * f64::from(j.gpus())).sum();
        let span =
            (r.outcomes.iter().map(|o| o.end).max().unwrap() - w.jobs.iter().map(|j| j.submit).min().unwrap()) as f64;
        let held = r.metrics.utilisation * span * cluster.total_gpus() as f64;
        assert!(
            (held - (work + p.lost_gpu_seconds + p.grace_gpu_seconds)).abs() < 1.0,
            "grace {grace}: {held} vs {work} + {p:?}"
        );
    }
}

/// Two nodes of 4 GPUs. Node 0: A (normal, 1 GPU, cheap to preempt) and C (QoS `other`,
/// 3 GPUs, not preemptable); node 1: B (normal, 4 GPUs). H (high, 4 GPUs) at 700 walks A
/// then B and fits on node 1: only B, on the node it gets, is preempted, as in Slurm.
#[test]
fn only_victims_on_the_preemptors_nodes_are_preempted() {
    let trace = vec![
        qos_job("A", 0, 1000, 1, "normal"),
        qos_job("C", 0, 1000, 3, "other"),
        qos_job("B", 0, 1000, 4, "normal"),
        qos_job("H", 700, 100, 4, "high"),
    ];
    let cluster = Cluster::uniform(2, 4);
    let w = Workload::prepare(&trace, &cluster, 86_400);
    let preempt = SimPreempt {
        pairs: vec![("high".into(), "normal".into())],
        rules: fairway_core::preempt::PreemptConfig::default(),
        grace: 0,
        checkpoint_every: None,
    };
    let r = Simulator::new(&w, &cluster, SimConfig { preempt: Some(preempt), ..SimConfig::default() }).run(&mut |_| {});
    let preempted: Vec<(&str, u32)> =
        w.jobs.iter().zip(&r.outcomes).map(|(j, o)| (j.id.as_str(), o.preempted)).collect();
    assert_eq!(preempted, [("A", 0), ("C", 0), ("B", 1), ("H", 0)]);
    assert_eq!(r.preemption.unwrap().preemptions, 1);
}

#[test]
fn qos_pairs_that_could_preempt_round_and_round_are_refused() {
    let p = |pairs: &[(&str, &str)]| SimPreempt {
        pairs: pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect(),
        rules: fairway_core::preempt::PreemptConfig::default(),
        grace: 0,
        checkpoint_every: None,
    };
    assert!(p(&[("high", "normal"), ("normal", "scavenger")]).validate().is_ok());
    assert!(p(&[("high", "high")]).validate().unwrap_err().contains("cannot preempt itself"));
    assert!(p(&[("a", "b"), ("b", "c"), ("c", "a")]).validate().unwrap_err().contains("a cycle"));
}

#[test]
fn qos_priority_weighs_in_as_multifactor_weighs_it() {
    // One node of 8 GPUs, held by `busy`; then, in submit order, a normal, a high and an
    // unlisted QoS job. With QoS priorities high=1000, normal=250 the queue is high, normal,
    // other; without them, submit order (the older job ages first).
    let cluster = Cluster::uniform(1, 8);
    let mut trace = vec![
        job("busy", 0, 3600, 3600, 8, 1, "u", "a"),
        job("n", 10, 60, 600, 8, 1, "u", "a"),
        job("h", 20, 60, 600, 8, 1, "u", "a"),
        job("o", 30, 60, 600, 8, 1, "u", "a"),
    ];
    for (j, q) in trace.iter_mut().zip(["normal", "normal", "high", "scavenger"]) {
        j.qos = q.into();
    }
    let w = Workload::prepare(&trace, &cluster, 86_400);
    let order = |qos_priority: Vec<(String, u32)>| {
        let mut cfg = SimConfig { policy: Policy::Multifactor, qos_priority, ..SimConfig::default() };
        cfg.weights.qos = 10_000;
        let weights = cfg.weights.clone();
        let mut sim = Simulator::new(&w, &cluster, cfg);
        sim.arrive(0, 0);
        sim.tick(0);
        sim.schedule(0);
        assert_eq!(sim.start[0], Some(0));
        for j in 1..4 {
            sim.arrive(j, w.jobs[j].submit);
        }
        sim.tick(100);
        sim.schedule(100);
        let inputs: Vec<JobInput> = (1..4).map(|j| sim.job_input(j, 100)).collect();
        for (j, input) in (1..4).zip(&inputs) {
            let expected = multifactor::priority(&weights, &multifactor::factors(&weights, input));
            assert_eq!(sim.priority(j, 100), Some(expected));
        }
        let ids: Vec<&str> = sim.pending.iter().map(|&j| w.jobs[j].id.as_str()).collect();
        (ids.join(","), inputs.iter().map(|i| (i.qos_priority, i.qos_norm_priority)).collect::<Vec<_>>())
    };
    let (ids, qos) = order(vec![("high".into(), 1000), ("normal".into(), 250)]);
    assert_eq!(ids, "h,n,o");
    assert_eq!(qos, vec![(250, 0.25), (1000, 1.0), (0, 0.0)]);
    let (ids, qos) = order(Vec::new());
    assert_eq!(ids, "n,h,o");
    assert_eq!(qos, vec![(0, 0.0); 3]);
}

/// One node of 8 GPUs, held by X until 1000. Big (8 GPUs, 600 s limit) and two small jobs
/// (4 GPUs, 200 s) wait past `max_wait` (60 s). The small jobs have less predicted work, so
/// in the usual order they go first; but Big has starved longest, so it goes first of all.
#[test]
fn the_longest_starving_job_goes_first_and_the_rest_keep_their_usual_order() {
    let trace = vec![
        job("X", 0, 1000, 1000, 8, 1, "x", "a"),
        job("Big", 1, 500, 600, 8, 1, "b", "a"),
        job("S1", 2, 100, 200, 4, 1, "s", "a"),
        job("S2", 3, 100, 200, 4, 1, "s", "a"),
    ];
    let cluster = Cluster::uniform(1, 8);
    let w = Workload::prepare(&trace, &cluster, 86_400);
    let sim = |max_wait| {
        let mut cfg = SimConfig { policy: Policy::Fairway, ..SimConfig::default() };
        cfg.fairway.max_wait = max_wait;
        starts(&w, &Simulator::new(&w, &cluster, cfg).run(&mut |_| {}))
    };
    let bounded = sim(Some(fairway_core::config::Seconds(60)));
    assert_eq!(bounded[1], ("Big".into(), 1000), "{bounded:?}");
    assert_eq!((bounded[2].1, bounded[3].1), (1500, 1500), "{bounded:?}");
    // Without the bound, less predicted work first.
    let unbounded = sim(None);
    assert_eq!((unbounded[2].1, unbounded[3].1), (1000, 1000), "{unbounded:?}");
    assert_eq!(unbounded[1].1, 1100, "{unbounded:?}");
}

#[test]
fn jitter_is_the_same_noise_for_every_policy_and_stays_within_its_points() {
    let n = Jitter { seed: 7, points: 10 };
    let draws: Vec<u32> = (0..1000).map(|j| n.points_for(j)).collect();
    assert!(draws.iter().all(|&p| p <= 10));
    assert!((0..=10).all(|p| draws.contains(&p)), "every value drawn");
    assert_eq!(draws, (0..1000).map(|j| n.points_for(j)).collect::<Vec<_>>(), "reproducible");
    let other: Vec<u32> = (0..1000).map(|j| Jitter { seed: 8, ..n }.points_for(j)).collect();
    assert_ne!(draws, other, "another seed, another noise");

    // It adds to the site factor, so to multifactor's sum, by exactly the job's points.
    let cluster = Cluster::uniform(1, 8);
    let trace = vec![job("a", 0, 600, 7200, 8, 1, "u", "a"), job("b", 0, 600, 7200, 8, 1, "v", "a")];
    let w = Workload::prepare(&trace, &cluster, 86_400);
    let plain = Simulator::new(&w, &cluster, SimConfig::default());
    let noisy = Simulator::new(&w, &cluster, SimConfig { jitter: Some(n), ..SimConfig::default() });
    for j in 0..2 {
        let (a, b) = (plain.job_input(j, 100), noisy.job_input(j, 100));
        assert_eq!(b.site_factor - a.site_factor, n.points_for(j));
        assert_eq!(JobInput { site_factor: a.site_factor, ..b }, a);
    }
}

/// One node of 4 GPUs. `a` runs 300 s and teaches the predictor; `b`, the same job, runs
/// 3,000 s under a 1-day limit, and its predicted limit is 360 s (300 s + 20%). `wide`
/// wants the whole node and comes last.
fn predicted_limits_run(overrun: Overrun) -> (Workload, SimResult) {
    let trace = vec![
        job("a", 0, 300, 86_400, 1, 1, "u", "acct"),
        job("b", 400, 3000, 86_400, 1, 1, "u", "acct"),
        job("wide", 500, 100, 86_400, 4, 1, "v", "acct"),
    ];
    let cluster = Cluster::uniform(1, 4);
    let w = Workload::prepare(&trace, &cluster, 86_400);
    let limits = crate::PredictedLimits { margin: 0.2, overrun, min_limit: 60 };
    let cfg = SimConfig { policy: Policy::Multifactor, predicted_limits: Some(limits), ..SimConfig::default() };
    let r = Simulator::new(&w, &cluster, cfg).run(&mut |_| {});
    (w, r)
}

#[test]
fn predicted_limits_are_extended_or_kill_the_job_that_outlives_them() {
    let (_, r) = predicted_limits_run(Overrun::Extend);
    let stats = r.limits.unwrap();
    assert_eq!((stats.predicted, stats.timeouts), (1, 0), "only b had history; nothing killed");
    assert!(stats.extensions >= 3, "360 s doubled up to past 3,000 s: {stats:?}");
    assert_eq!((r.outcomes[1].start, r.outcomes[1].end), (400, 3400), "b runs once, to its end");

    let (_, r) = predicted_limits_run(Overrun::Kill);
    let stats = r.limits.unwrap();
    assert_eq!((stats.timeouts, stats.extensions), (1, 0));
    assert_eq!(stats.lost_gpu_seconds, 360.0, "killed at 400 + 360 s, one GPU");
    // Submitted again at 760 with its own limit, after `wide` (which waited for b's GPU).
    assert!(r.outcomes[1].end >= 760 + 3000, "{:?}", r.outcomes[1]);
    assert_eq!(r.outcomes[1].start, 400, "its wait counts from the first run");
}
