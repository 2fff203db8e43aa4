//! Fair share under priority/fairway against priority/multifactor: the same account
//! tree (Fairshare=parent and zero shares among it), the same jobs, `sshare -l`
//! compared field by field after a decay pass, for Fair Tree and for classic.
//!
//! Four clusters run side by side so one wait for the decay pass serves all.
//! Usage depends on jobs' measured run times (whole seconds), so usage fields are
//! compared within a tolerance; shares and Fair Tree ranks exactly.

use std::collections::BTreeMap;
use std::time::Duration;

use fairway_tests::fairshare::{close, num};
use fairway_tests::{Cluster, ClusterSpec, Slurm};

fn spec(priority_type: &str, fair_tree: bool) -> ClusterSpec {
    let s = |v: &str| v.to_string();
    let mut extra = vec![s("PriorityCalcPeriod=1"), s("PriorityWeightFairshare=10000"), s("PriorityWeightAge=0")];
    if !fair_tree {
        extra.push(s("PriorityFlags=NO_FAIR_TREE"));
    }
    ClusterSpec {
        priority_type: priority_type.into(),
        slurm_conf_extra: extra,
        accounts: vec![
            (s("ml"), s("root"), s("100")),
            (s("vision"), s("ml"), s("60")),
            (s("nlp"), s("ml"), s("40")),
            (s("ops"), s("ml"), s("parent")),
        ],
        users: vec![
            (s("fw_alice"), s("vision")),
            (s("fw_bob"), s("nlp")),
            (s("fw_carol"), s("nlp")),
            (s("fw_dave"), s("ops")),
        ],
        user_fairshare: vec![(s("fw_carol"), s("0"))],
        ..ClusterSpec::default()
    }
}

/// Work whose usage differs clearly per user, so ranks do not hinge on a second.
const WORK: &[(&str, &[&str])] = &[
    ("fw_alice", &["-n", "2", "--wrap=sleep 12"]),
    ("fw_bob", &["-n", "1", "--wrap=sleep 6"]),
    ("fw_dave", &["-n", "1", "--wrap=sleep 8"]),
];

type Row = BTreeMap<&'static str, String>;

const FIELDS: [&str; 9] =
    ["Account", "User", "RawShares", "NormShares", "RawUsage", "NormUsage", "EffectvUsage", "FairShare", "LevelFS"];

fn sshare(c: &Cluster) -> Vec<Row> {
    let out = c.cmd("sshare", &["-a", "-l", "-P", "-n", "-o", &FIELDS.join(",")]).unwrap();
    assert!(out.ok(), "{out:?}");
    out.stdout.lines().map(|l| FIELDS.iter().copied().zip(l.split('|').map(str::to_string)).collect()).collect()
}

/// Starts a cluster, runs WORK to completion, waits for a decay pass after it, and
/// returns `sshare -l`.
fn run(spec: ClusterSpec) -> Vec<Row> {
    let c = Cluster::start(&spec).expect("cluster starts");
    let jobs: Vec<u32> = WORK
        .iter()
        .map(|(u, a)| c.sbatch(u, a).unwrap_or_else(|e| panic!("sbatch as {u}: {e}\n{}", c.log_tails())))
        .collect();
    for j in jobs {
        c.wait_job(j, &["COMPLETED"], Duration::from_secs(90)).unwrap();
    }
    // A decay pass (PriorityCalcPeriod=1 minute) after the last job ended.
    let done = std::time::Instant::now();
    while done.elapsed() < Duration::from_secs(65) {
        std::thread::sleep(Duration::from_secs(1));
    }
    let rows = sshare(&c);
    c.stop().unwrap();
    rows
}

fn compare(what: &str, mf: &[Row], fw: &[Row], fair_tree: bool) {
    eprintln!("{what}, multifactor:");
    mf.iter().for_each(|r| eprintln!("  {r:?}"));
    eprintln!("{what}, fairway:");
    fw.iter().for_each(|r| eprintln!("  {r:?}"));
    assert_eq!(mf.len(), fw.len(), "{what}: different association rows");
    assert!(mf.iter().any(|r| num(&r["RawUsage"]) > 0.0), "{what}: no usage recorded under multifactor");
    for (a, b) in mf.iter().zip(fw) {
        let who = format!("{what}: {}/{}", a["Account"].trim(), a["User"]);
        for f in ["Account", "User", "RawShares", "NormShares"] {
            assert_eq!(a[f], b[f], "{who}: {f}");
        }
        // One second of jitter on a 6-second job is 17%.
        assert!(
            close(&a["RawUsage"], &b["RawUsage"], 0.3, 3.0),
            "{who}: RawUsage {} vs {}",
            a["RawUsage"],
            b["RawUsage"]
        );
        for f in ["NormUsage", "EffectvUsage"] {
            assert!(close(&a[f], &b[f], 0.3, 0.03), "{who}: {f} {} vs {}", a[f], b[f]);
        }
        if fair_tree {
            assert_eq!(a["FairShare"], b["FairShare"], "{who}: FairShare (rank)");
        } else {
            assert!(close(&a["FairShare"], &b["FairShare"], 0.2, 0.03), "{who}: FairShare");
        }
        assert!(close(&a["LevelFS"], &b["LevelFS"], 0.3, 0.05), "{who}: LevelFS {} vs {}", a["LevelFS"], b["LevelFS"]);
    }
}

#[test]
fn sshare_matches_multifactor_for_fair_tree_and_classic() {
    let runs: Vec<_> = [
        ("priority/multifactor", true),
        ("priority/fairway", true),
        ("priority/multifactor", false),
        ("priority/fairway", false),
    ]
    .into_iter()
    .map(|(p, ft)| std::thread::spawn(move || run(spec(p, ft))))
    .collect();
    let mut r: Vec<Vec<Row>> = runs.into_iter().map(|h| h.join().expect("cluster thread")).collect();
    let (classic_fw, classic_mf) = (r.pop().unwrap(), r.pop().unwrap());
    let (tree_fw, tree_mf) = (r.pop().unwrap(), r.pop().unwrap());
    compare("Fair Tree", &tree_mf, &tree_fw, true);
    compare("classic", &classic_mf, &classic_fw, false);
}

fn norm_shares(c: &Cluster, user: &str) -> String {
    let out = c.cmd("sshare", &["-a", "-P", "-n", "-o", "User,NormShares"]).unwrap();
    out.stdout.lines().filter_map(|l| l.split_once('|')).find(|(u, _)| *u == user).map(|(_, s)| s.to_string()).unwrap()
}

/// Switching between Fair Tree and classic with `scontrol reconfigure` renormalises
/// shares for the new algorithm, as multifactor does.
#[test]
fn reconfigure_to_classic_renormalises_shares() {
    let spec = ClusterSpec { slurmd: false, ..ClusterSpec::default() };
    let c = Cluster::start(&spec).expect("cluster starts");
    // Fair Tree: shares within the level; fw_alice is alone in vision.
    assert_eq!(norm_shares(&c, "fw_alice"), "1.000000");
    let mut conf = std::fs::read_to_string(c.slurm_conf()).unwrap();
    conf.push_str("PriorityFlags=NO_FAIR_TREE\n");
    std::fs::write(c.slurm_conf(), conf).unwrap();
    assert!(c.cmd("scontrol", &["reconfigure"]).unwrap().ok());
    // Classic: the product down the tree, 100/101 × 60/100 × 1/1.
    c.wait_until("shares renormalised", || Ok(norm_shares(&c, "fw_alice") == "0.594059")).unwrap();
    c.stop().unwrap();
}
