//! The simulator computes priorities exactly as slurmctld does with priority/fairway.
//!
//! A real slurmctld (test build) records each decay pass: every pending job's input as
//! the plugin read it and the decision it wrote. The pass is replayed through the
//! simulator's own pass (`fairway_sim::priority_pass`) and must give the same priorities,
//! per-partition priorities, sprio factors, lifted and first-starving choices; and the recorded
//! priorities must be what squeue shows, so the record is what Slurm really used.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use fairway_core::multifactor::Weights;
use fairway_core::priority::{JobInput, JobPriority, Policy};
use fairway_core::terms::{FirstStarving, FIRST_STARVING, STARVING_BASE};
use fairway_core::Config;
use fairway_tests::{Cluster, ClusterSpec, Slurm};
use serde_json::Value;

// max_wait_heavy_users: fw_alice is the heaviest user once the learned job ran, and the
// replay wants every job starving (the default, which holds her back, is fairway_terms'; the
// threshold is carried from pass to pass in the plugin, not in the record).
const TOML: &str =
    "[priority]\nweight_predicted_work = 1000\nweight_deadline = 2000\ndeadline_qos = [\"normal\"]\nmax_wait = \"0:20\"\n\
     max_wait_heavy_users = true\n";

/// A recorded pass: slurm.conf's weights, each job's input and decision, the jobs lifted
/// first.
struct Recorded {
    weights: Weights,
    /// The starving jobs the pass before chose (first, lifted), which the pass starts from.
    chosen: (Vec<u32>, Vec<u32>),
    jobs: Vec<(JobInput, JobPriority)>,
    first: Vec<(u32, JobPriority)>,
}

fn read_record(path: &Path) -> Option<Recorded> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut lines = text.lines().map(|l| serde_json::from_str::<Value>(l).expect("a JSON line"));
    let head = lines.next()?;
    let weights = serde_json::from_value(head.get("weights")?.clone()).ok()?;
    let ids = |k: &str| serde_json::from_value::<Vec<u32>>(head["chosen"][k].clone()).ok();
    let chosen = (ids("first")?, ids("lifted")?);
    let (mut jobs, mut first) = (Vec::new(), None);
    for v in lines {
        if let Some(f) = v.get("first") {
            first = Some(serde_json::from_value(f.clone()).expect("first-starving jobs"));
        } else {
            jobs.push((
                serde_json::from_value(v["input"].clone()).expect("an input"),
                serde_json::from_value(v["output"].clone()).expect("an output"),
            ));
        }
    }
    Some(Recorded { weights, chosen, jobs, first: first? })
}

fn squeue(c: &Cluster) -> BTreeMap<u32, u32> {
    let q = c.cmd("squeue", &["-h", "-t", "PD", "-o", "%i %Q"]).unwrap();
    q.stdout
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(id, p)| (id.trim().parse().unwrap(), p.trim().parse().unwrap()))
        .collect()
}

#[test]
fn a_pass_recorded_in_slurmctld_replays_identically_through_the_simulator() {
    let spec = ClusterSpec {
        slurm_conf_extra: vec![
            "PriorityCalcPeriod=1".into(),
            "PriorityWeightAge=1000".into(),
            "PriorityMaxAge=1-0".into(),
            "PriorityWeightFairshare=2000".into(),
            "PriorityWeightAssoc=300".into(),
            "PriorityWeightJobSize=500".into(),
            "PriorityWeightPartition=1000".into(),
            "PriorityWeightQOS=5000".into(),
            "PriorityWeightTRES=CPU=700,Mem=300".into(),
            "PartitionName=gpu Nodes=ALL PriorityJobFactor=4 State=UP".into(),
        ],
        fairway_toml: Some(TOML.into()),
        ..ClusterSpec::default()
    };
    let c = Cluster::start(&spec).expect("cluster starts");
    // A run time to learn, so that one prediction below comes from history.
    let learn = c.sbatch("fw_alice", &["-J", "eval", "-t", "10", "--wrap=sleep 2"]).unwrap();
    c.wait_job(learn, &["COMPLETED"], Duration::from_secs(60)).unwrap();
    let out = c.cmd("scontrol", &["update", &format!("NodeName={}", c.node), "State=DRAIN", "Reason=parity"]).unwrap();
    assert!(out.ok(), "{out:?}");
    let jobs: &[(&str, &[&str])] = &[
        ("fw_alice", &["-J", "eval", "-t", "10"]),
        ("fw_alice", &["-n", "2", "--qos=high", "-t", "30"]),
        ("fw_bob", &["-n", "1", "--qos=scavenger", "-p", "gpu", "-t", "60"]),
        ("fw_bob", &["-n", "2", "-p", "gpu", "--nice=50", "-t", "20"]),
        ("fw_alice", &["-n", "1", "-p", "debug,gpu", "--qos=high", "-t", "15"]),
        ("fw_bob", &["-n", "1", "-t", "30", "--mem=700", "--deadline=now+2hours"]),
    ];
    let ids: Vec<u32> = jobs
        .iter()
        .map(|(user, args)| {
            let mut all = args.to_vec();
            all.push("--wrap=true");
            c.sbatch(user, &all).unwrap_or_else(|e| panic!("sbatch {args:?} as {user}: {e}"))
        })
        .collect();

    // Wait for a pass in which every job is starving (max_wait 20 s), then take a record
    // and squeue's priorities from between two passes (the record unchanged around them).
    let path = c.dir().join("state/fairway-last-pass.jsonl");
    let mut taken = None;
    // Up to 20 s and three PriorityCalcPeriods (a minute each) from here.
    c.wait_until_within(
        "a recorded pass with every job starving, stable around squeue",
        Duration::from_secs(240),
        || {
            let before = std::fs::read(&path).unwrap_or_default();
            let Some(rec) = read_record(&path) else { return Ok(false) };
            let all_starving =
                ids.iter().all(|id| rec.jobs.iter().any(|(i, o)| i.job_id == *id && o.starving_for().is_some()));
            // ... and the pass before saw them all starve too: its choice lifts some of them.
            if !all_starving || rec.chosen.1.len() < 4 {
                return Ok(false);
            }
            let shown = squeue(&c);
            if std::fs::read(&path).unwrap_or_default() != before {
                return Ok(false); // a pass ran meanwhile: take both again
            }
            taken = Some((rec, shown));
            Ok(true)
        },
    )
    .unwrap();
    let (rec, shown) = taken.unwrap();
    let log = c.log("slurmctld");
    c.stop().unwrap();

    // What slurmctld used is what squeue shows: the lifted job at FIRST_STARVING, the
    // others at what the pass decided for them.
    let lifted: BTreeMap<u32, u32> = rec.first.iter().map(|(id, o)| (*id, o.priority)).collect();
    // One job first per partition list (debug, gpu, debug,gpu): the lowest id of the
    // longest-starving.
    let mut groups: BTreeMap<String, (std::cmp::Reverse<u64>, u32)> = BTreeMap::new();
    for (i, o) in &rec.jobs {
        let key = (std::cmp::Reverse(o.starving_for().unwrap()), i.job_id);
        let g = groups.entry(i.terms.as_ref().unwrap().partition.clone()).or_insert(key);
        *g = (*g).min(key);
    }
    let want: Vec<u32> = groups.values().map(|g| g.1).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
    assert_eq!(lifted.keys().copied().collect::<Vec<_>>(), want, "{groups:?}");
    assert_eq!(want.len(), 3);
    for (input, out) in &rec.jobs {
        let want = lifted.get(&input.job_id).copied().unwrap_or(out.priority);
        assert_eq!(shown.get(&input.job_id), Some(&want), "job {}: squeue {shown:?}\n{log}", input.job_id);
    }
    assert!(lifted.values().all(|&p| p == FIRST_STARVING));
    // One lifted job per user and partition list: fw_alice's two debug jobs and fw_bob's
    // two gpu jobs each have one lifted, the other at its usual priority.
    assert_eq!(rec.chosen.1.len(), 4, "{:?}", rec.chosen);
    for (input, out) in &rec.jobs {
        let is_lifted = rec.chosen.1.contains(&input.job_id);
        assert_eq!(out.priority >= STARVING_BASE, is_lifted, "job {}: {}", input.job_id, out.priority);
    }
    // The record covers what the route must carry: several partitions, history, deadline.
    let of = |id: u32| rec.jobs.iter().find(|(i, _)| i.job_id == id).unwrap();
    assert_eq!(of(ids[4]).0.partitions.len(), 2, "the debug,gpu job has one priority per partition");
    assert_eq!(of(ids[4]).1.per_partition.len(), 2);
    let learned = of(ids[0]).1.expected_runtime.unwrap();
    assert!(learned < 600, "the eval job's run time comes from history, not its 10-minute limit: {learned}");
    assert!(of(ids[5]).0.terms.as_ref().unwrap().deadline.is_some());
    assert!(of(ids[5]).1.terms.as_ref().unwrap().deadline > 0.0);

    // Replayed through the simulator's pass, with the run times the plugin predicted (the
    // simulator brings its own), every decision is the same, the first-starving one too.
    let config = Config::parse(TOML, Path::new("fairway.toml")).unwrap();
    let policy = Policy { weights: &rec.weights, terms: &config.priority, history: None, model: None };
    let inputs = rec.jobs.iter().map(|(input, out)| {
        let mut input = input.clone();
        if let Some(t) = input.terms.as_mut() {
            (t.request, t.expected_runtime) = (None, out.expected_runtime);
        }
        input
    });
    let mut replayed = Vec::new();
    let mut chosen = FirstStarving::resume(&rec.chosen.0, &rec.chosen.1);
    fairway_sim::priority_pass(policy, &mut chosen, inputs, |id, out| replayed.push((id, out.clone())));
    // Where the run time came from is what explain tells a user, not part of the decision:
    // the replay is handed the plugin's run times, so it says "given".
    let decision = |(id, mut out): (u32, JobPriority)| {
        out.runtime_source = None;
        (id, out)
    };
    let replayed: Vec<(u32, JobPriority)> = replayed.into_iter().map(decision).collect();
    let recorded: Vec<(u32, JobPriority)> =
        rec.jobs.iter().map(|(i, o)| (i.job_id, o.clone())).chain(rec.first.iter().cloned()).map(decision).collect();
    assert_eq!(replayed.len(), recorded.len());
    for (r, s) in recorded.iter().zip(&replayed) {
        assert_eq!(r, s, "job {}: slurmctld decided {:?}, the simulator {:?}", r.0, r.1, s.1);
    }
}
