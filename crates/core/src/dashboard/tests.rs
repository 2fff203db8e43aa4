use std::collections::BTreeMap;

use super::*;
use crate::status::{JobTerms, FORMAT};

const SQUEUE: &str = "\
12|RUNNING|gpu|high|vision|fw_alice|1|gres:gpu:2|1500|2026-12-06T10:00:00|c1||train|a|b
13|PENDING|gpu|high|vision|fw_alice|1|gres:gpu:2|1400|2026-12-06T10:01:00||(QOSGrpGRES)|eval
14|PENDING|gpu,debug|normal|nlp|fw_bob|1|gres:gpu:1|900|2026-12-06T10:02:00||(JobHeldUser)|held
15|RUNNING|gpu|normal|nlp|fw_bob|2|gres:gpu:4|800|2026-12-06T09:00:00|c[3-4]||gang
";

const SINFO: &str = "\
c1                  |mixed               |gpu*                |gpu:a100:4(S:0-1)   |gpu:a100:2(IDX:0-1) |
c1                  |mixed               |debug               |gpu:a100:4(S:0-1)   |gpu:a100:2(IDX:0-1) |
c2                  |drained             |gpu*                |gpu:a100:4          |gpu:a100:0(IDX:N/A) |
c3                  |allocated           |gpu*                |gpu:a100:4          |gpu:a100:4(IDX:0-3) |
c4                  |allocated*          |gpu*                |gpu:a100:4          |gpu:a100:4(IDX:0-3) |
";

const SSHARE: &str = "\
root||||0.000000|||
 ml||100|1.000000|1000|1.000000||1.0
  nlp||40|0.400000|900|0.900000||0.44
  nlp|fw_bob|1|1.000000|900|1.000000|0.2|
  vision||60|0.600000|100|0.100000||6.0
  vision|fw_alice|1|1.000000|100|1.000000|0.8|
";

fn board(now: i64) -> Board {
    let topology = BTreeMap::new();
    Board::read(&Reading { squeue: SQUEUE, sinfo: SINFO, sshare: SSHARE, topology: &topology, now }, None)
}

#[test]
fn queue_nodes_gangs_and_shares_as_slurm_prints_them() {
    let b = board(100);
    let names: Vec<&str> = b.partitions.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["debug", "gpu"]);
    let gpu = &b.partitions[1];
    let pending: Vec<&str> = gpu.pending.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(pending, ["13", "14"], "Slurm's priority order kept");
    assert_eq!(gpu.running.len(), 2);
    assert_eq!(b.partitions[0].pending[0].id, "14", "a job queues in each partition it may use");
    assert_eq!(b.jobs().count(), 4);
    assert_eq!(gpu.pending[0].reason, "QOSGrpGRES");
    assert_eq!(gpu.running[0].name, "train|a|b", "a name may hold the separator");
    // c2 is drained and c4 not responding: neither counts as usable.
    assert_eq!((gpu.gpus, gpu.idle_gpus), (8, 2));
    let c1 = &b.nodes[0];
    assert_eq!(c1.partitions, ["gpu", "debug"]);
    assert_eq!(c1.gpu_type, "a100");
    assert_eq!(c1.gpus.iter().map(|g| g.used).collect::<Vec<_>>(), [true, true, false, false]);
    assert_eq!(b.gangs.len(), 1);
    assert_eq!(b.gangs[0].gpus(), 8);
    let vision = b.fair_share.iter().find(|s| s.account == "vision" && s.user.is_empty()).unwrap();
    assert_eq!((vision.depth, vision.norm_shares, vision.effective_usage), (2, 0.6, 0.1));
    assert_eq!(b.fair_share.iter().find(|s| s.user == "fw_bob").unwrap().fair_share, Some(0.2));
}

#[test]
fn gpus_idle_while_a_job_that_fits_pends_alerts_after_its_rule_time() {
    let rules = AlertRules { gpus_idle_for: 60, ..AlertRules::default() };
    let mut w = Watch::new(rules);
    let mut b = board(1000);
    w.observe(&mut b, None, None);
    let idle = |b: &Board| b.alerts.iter().any(|a| a.kind == AlertKind::GpusIdleWhileJobsPend);
    assert!(!idle(&b), "not yet held a minute: {:?}", b.alerts);
    let mut b = board(1059);
    w.observe(&mut b, None, None);
    assert!(!idle(&b));
    let mut b = board(1060);
    w.observe(&mut b, None, None);
    let a = b.alerts.iter().find(|a| a.kind == AlertKind::GpusIdleWhileJobsPend).unwrap();
    assert_eq!((a.subject.as_str(), a.since), ("gpu", 1000));
    assert!(a.message.contains("2 GPUs idle in gpu while 1 GPU job(s)"), "{}", a.message);
    assert!(a.message.contains("QOSGrpGRES: 1"), "the held job is its owner's doing: {}", a.message);

    // The limit lifted and the job started: the condition and its clock are gone.
    let mut b = board(1070);
    b.partitions[1].pending.remove(0);
    w.observe(&mut b, None, None);
    assert!(!idle(&b));
    let mut b = board(1080);
    w.observe(&mut b, None, None);
    assert!(!idle(&b), "held again, the clock starts again");
}

#[test]
fn a_job_that_cannot_fit_the_idle_gpus_is_no_alert() {
    let squeue = "13|PENDING|gpu|high|vision|fw_alice|1|gres:gpu:4|1400|t||(Resources)|big\n";
    let topology = BTreeMap::new();
    let mut b = Board::read(&Reading { squeue, sinfo: SINFO, sshare: "", topology: &topology, now: 0 }, None);
    let mut w = Watch::new(AlertRules { gpus_idle_for: 0, ..AlertRules::default() });
    w.observe(&mut b, None, None);
    assert!(b.alerts.is_empty(), "{:?}", b.alerts);
}

#[test]
fn a_lost_node_under_a_gang_and_shares_far_off() {
    let mut w = Watch::new(AlertRules { share_gap_for: 0, ..AlertRules::default() });
    let mut b = board(5);
    w.observe(&mut b, None, None);
    let kinds: Vec<(AlertKind, &str)> = b.alerts.iter().map(|a| (a.kind, a.subject.as_str())).collect();
    assert!(kinds.contains(&(AlertKind::NodeLostUnderGang, "15")), "{kinds:?}");
    assert!(kinds.contains(&(AlertKind::AccountFarFromShare, "nlp")), "{kinds:?}");
    assert!(kinds.contains(&(AlertKind::AccountFarFromShare, "vision")), "{kinds:?}");
    assert!(!kinds.iter().any(|(_, s)| *s == "ml"), "ml has all of root's shares and usage: {kinds:?}");
    let lost = b.alerts.iter().find(|a| a.kind == AlertKind::NodeLostUnderGang).unwrap();
    assert!(lost.message.contains("c4 is not responding or down"), "{}", lost.message);
}

#[test]
fn starvation_stale_passes_and_predictor_drift() {
    let job = |id, eligible_since| JobTerms { id, partition: "gpu".into(), eligible_since, ..JobTerms::default() };
    let st = Status {
        format: FORMAT,
        pass_started: 10_000,
        calc_period: 60,
        max_wait: Some(1000),
        jobs: vec![job(1, 9_050), job(2, 9_500), job(3, 8_000)],
        ..Status::default()
    };
    let mut w = Watch::new(AlertRules::default());
    let mut b = Board { taken_at: 10_000, ..Board::default() };
    w.observe(&mut b, Some(&st), None);
    let near: Vec<&str> =
        b.alerts.iter().filter(|a| a.kind == AlertKind::NearStarvationBound).map(|a| a.subject.as_str()).collect();
    assert_eq!(near, ["1", "3"], "950 s and 2000 s of 1000; 500 s is not near");
    assert!(b.alerts[1].message.contains("past the bound"), "{:?}", b.alerts);
    let mut b = Board { taken_at: 10_300, ..Board::default() };
    w.observe(&mut b, Some(&st), None);
    assert!(b.alerts.iter().any(|a| a.kind == AlertKind::PriorityPassStale), "{:?}", b.alerts);

    let mut cal = crate::predict::OnlineCalibration::for_model("m".into(), 0.9, 0.01);
    cal.jobs = 100;
    cal.misses = 50;
    let mut w = Watch::new(AlertRules::default());
    let drift = |w: &mut Watch, cal: &crate::predict::OnlineCalibration, t| {
        let mut b = Board { taken_at: t, ..Board::default() };
        w.observe(&mut b, None, Some(cal));
        b.alerts.iter().any(|a| a.kind == AlertKind::PredictorCoverageDrift)
    };
    assert!(!drift(&mut w, &cal, 0), "counts before the watch began do not count");
    cal.jobs = 130;
    cal.misses = 53;
    assert!(!drift(&mut w, &cal, 60), "3 of 30: 10%, within 90% + 5");
    cal.jobs = 160;
    cal.misses = 60;
    assert!(drift(&mut w, &cal, 120), "10 of 60: 17%");
}

#[test]
fn nvlink_domains_from_topology_files() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/topology");
    let pairs = Topology::load(&root.join("pcie-a100-nvlink-pairs.toml")).unwrap();
    assert_eq!(nvlink_domains(&pairs), [0, 0, 1, 1]);
    let dgx = Topology::load(&root.join("dgx-h100.toml")).unwrap();
    assert_eq!(nvlink_domains(&dgx), [0; 8]);
}

#[test]
fn a_viewer_sees_what_private_data_lets_them() {
    let mut b = board(0);
    let mut w = Watch::new(AlertRules { gpus_idle_for: 0, share_gap_for: 0, ..AlertRules::default() });
    w.observe(&mut b, None, None);
    let bob = Viewer { user: "fw_bob".into(), sees_all: false };
    assert_eq!(b.as_seen_by(&bob, PrivateData::parse("none")), b);
    let admin = Viewer { user: "slurm".into(), sees_all: true };
    assert_eq!(b.as_seen_by(&admin, PrivateData::parse("jobs,usage,nodes")), b);

    let p = PrivateData::parse("accounts,jobs,usage");
    assert_eq!(p, PrivateData { jobs: true, usage: true, nodes: false });
    let seen = b.as_seen_by(&bob, p);
    let ids: Vec<&str> = seen.jobs().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["14", "15"], "only fw_bob's jobs");
    assert_eq!(seen.gangs.len(), 1);
    let rows: Vec<(&str, &str)> = seen.fair_share.iter().map(|s| (s.account.as_str(), s.user.as_str())).collect();
    assert_eq!(rows, [("nlp", "fw_bob")], "sshare shows a user only their own association");
    assert!(
        seen.alerts.is_empty(),
        "the idle-GPU and lost-node alerts name others' jobs, the share alerts others' usage: {:?}",
        seen.alerts
    );
    assert!(!b.alerts.is_empty());
    let seen = b.as_seen_by(&bob, PrivateData::parse("nodes"));
    assert!(seen.nodes.is_empty() && seen.partitions.iter().all(|p| p.gpus == 0));
    assert_eq!(seen.jobs().count(), 4);
}
