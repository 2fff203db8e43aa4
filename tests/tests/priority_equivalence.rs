//! priority/fairway against priority/multifactor on the same configuration and jobs.
//!
//! Covers association, job size, partition, QOS and TRES factors plus nice, in
//! squeue's priorities and sprio's weighted factors. Fair share and age are left at weight 0 here (the
//! decay thread is not implemented yet; age differs between two clusters started
//! seconds apart); their arithmetic has unit and property tests in fairway-core.

use fairway_tests::{Cluster, ClusterSpec, Slurm};

const JOBS: &[(&str, &[&str])] = &[
    ("fw_alice", &["-n", "1"]),
    ("fw_alice", &["-n", "2", "--qos=high"]),
    ("fw_bob", &["-n", "1", "--qos=scavenger", "-p", "gpu"]),
    ("fw_bob", &["-n", "2", "-p", "gpu", "--nice=50"]),
    ("fw_alice", &["-N", "1", "--exclusive", "--qos=high", "-p", "gpu"]),
    ("fw_bob", &["-n", "1", "-t", "30", "--mem=700"]),
    ("fw_alice", &["-n", "1", "-p", "debug,gpu", "--qos=high"]),
];

/// Submits JOBS to a cluster running `priority_type` and returns (job id, priority)
/// from squeue and the weighted factors from sprio.
fn priorities(priority_type: &str) -> (Vec<(u32, u32)>, String) {
    let spec = ClusterSpec {
        priority_type: priority_type.into(),
        slurm_conf_extra: vec![
            "PriorityWeightAge=0".into(),
            "PriorityWeightFairshare=0".into(),
            "PriorityWeightAssoc=300".into(),
            "PriorityWeightJobSize=1000".into(),
            "PriorityWeightPartition=2000".into(),
            "PriorityWeightQOS=5000".into(),
            "PriorityWeightTRES=CPU=700,Mem=300".into(),
            "PartitionName=gpu Nodes=ALL PriorityJobFactor=4 State=UP".into(),
        ],
        ..ClusterSpec::default()
    };
    let c = Cluster::start(&spec).expect("cluster starts");
    let out = c.cmd("sacctmgr", &["-i", "modify", "account", "vision", "set", "priority=10"]).unwrap();
    assert!(out.ok(), "{out:?}");
    c.wait_until("slurmctld sees the association priority", || {
        let a = c.cmd("scontrol", &["show", "assoc_mgr", "flags=assoc", "accounts=vision", "users=fw_alice"])?;
        Ok(a.stdout.contains("Priority=10"))
    })
    .unwrap();
    // Keep every job pending so priorities are compared, not scheduling.
    let out =
        c.cmd("scontrol", &["update", &format!("NodeName={}", c.node), "State=DRAIN", "Reason=equivalence"]).unwrap();
    assert!(out.ok(), "{out:?}");
    for (user, args) in JOBS {
        let mut all = args.to_vec();
        all.push("--wrap=true");
        c.sbatch(user, &all).unwrap_or_else(|e| panic!("sbatch {args:?} as {user}: {e}"));
    }
    let q = c.cmd("squeue", &["-h", "-o", "%i %Q"]).unwrap();
    let mut v: Vec<(u32, u32)> = q
        .stdout
        .lines()
        .map(|l| {
            let (id, p) = l.split_once(' ').unwrap();
            (id.trim().parse().unwrap(), p.trim().parse().unwrap())
        })
        .collect();
    v.sort();
    // job, partition, user, priority, site, age, assoc, fair share, job size,
    // partition, QOS, nice, TRES (weighted values)
    let sprio = c.cmd("sprio", &["-h", "-o", "%i %r %u %Y %S %A %B %F %J %P %Q %N %T"]).unwrap();
    assert!(sprio.ok(), "{sprio:?}");
    c.stop().unwrap();
    (v, sprio.stdout)
}

#[test]
fn priorities_equal_multifactor_for_the_same_jobs() {
    let (multifactor, mf_sprio) = priorities("priority/multifactor");
    let (fairway, fw_sprio) = priorities("priority/fairway");
    eprintln!("multifactor: {multifactor:?}\nfairway:     {fairway:?}");
    assert_eq!(multifactor.len(), JOBS.len(), "{multifactor:?}");
    // Not trivially equal: the factors spread the jobs out.
    let distinct: std::collections::BTreeSet<u32> = multifactor.iter().map(|p| p.1).collect();
    assert!(distinct.len() >= 4, "too few distinct priorities to compare: {multifactor:?}");
    assert_eq!(fairway, multifactor, "priority/fairway (left) vs priority/multifactor (right)");
    eprintln!("sprio under multifactor:\n{mf_sprio}sprio under fairway:\n{fw_sprio}");
    // one row per job, two for the job submitted to two partitions
    assert_eq!(mf_sprio.lines().count(), JOBS.len() + 1, "sprio rows");
    assert_eq!(fw_sprio, mf_sprio, "sprio factors");
}
