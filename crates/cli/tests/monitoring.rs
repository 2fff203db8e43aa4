//! The shipped Grafana dashboard and Prometheus alert rules use only series `fairway
//! metrics` writes, and the dashboard is JSON Grafana's importer takes (panels with
//! Prometheus targets).

use std::collections::BTreeSet;
use std::path::PathBuf;

use fairway_core::dashboard::{Alert, AlertKind};
use fairway_core::metrics::{render, Scrape};
use fairway_core::predict::OnlineCalibration;
use fairway_core::preempt::Preemptions;
use fairway_core::status::{JobTerms, Status, FORMAT};
use fairway_core::submit::counters::Counters;
use fairway_core::submit::RejectKind;

fn monitoring(file: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../config/monitoring").join(file);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Every series name a full scrape writes (counters with their `_total`).
fn series() -> BTreeSet<String> {
    let status = Status {
        format: FORMAT,
        max_wait: Some(60),
        jobs: vec![JobTerms { id: 1, partition: "gpu".into(), eligible_since: 1, ..JobTerms::default() }],
        ..Status::default()
    };
    let calibration = OnlineCalibration::for_model("m".into(), 0.9, 0.01);
    let mut submit = Counters::new(1);
    submit.submitted(Err(RejectKind::Directive));
    let mut preemptions = Preemptions::default();
    preemptions.note(7, 1, 2);
    let alerts = [Alert { kind: AlertKind::NodeLostUnderGang, subject: "1".into(), message: String::new(), since: 0 }];
    let text = render(&Scrape {
        squeue: "PENDING|gpu|normal|a|1|gpu:1\n",
        sshare: "a||1|1|1||1\na|u|1|1|1|1|\n",
        sinfo: "gpu|1|gpu:8|idle\n",
        status: Some(&status),
        calibration: Some(&calibration),
        submit: Some(&submit),
        preemptions: Some(&preemptions),
        graces: Some(fairway_core::preempt::budget::Graces::default()),
        alerts: Some(&alerts),
        now: 2,
    });
    text.lines().filter(|l| !l.starts_with('#')).map(|l| l.split(['{', ' ']).next().unwrap().to_string()).collect()
}

/// The `fairway_*` names a file mentions.
fn mentioned(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("fairway_") {
        let tail = &rest[at..];
        let end = tail.find(|c: char| !(c.is_ascii_lowercase() || c == '_')).unwrap_or(tail.len());
        names.insert(tail[..end].to_string());
        rest = &tail[end..];
    }
    names
}

#[test]
fn the_dashboard_and_alerts_use_only_series_fairway_writes() {
    let written = series();
    assert!(written.contains("fairway_predictor_misses_total") && written.contains("fairway_jobs"), "{written:?}");
    assert!(written.contains("fairway_alert"), "{written:?}");
    for file in ["grafana-dashboard.json", "prometheus-alerts.yml"] {
        let unknown: Vec<_> = mentioned(&monitoring(file)).difference(&written).cloned().collect();
        assert!(unknown.is_empty(), "{file} uses series fairway does not write: {unknown:?}");
    }
}

#[test]
fn the_dashboard_is_a_grafana_dashboard_of_prometheus_panels() {
    let d: serde_json::Value = serde_json::from_str(&monitoring("grafana-dashboard.json")).expect("valid JSON");
    assert_eq!(d["uid"], "fairway");
    let panels = d["panels"].as_array().expect("panels");
    assert!(panels.len() >= 8, "{} panels", panels.len());
    let mut ids = BTreeSet::new();
    for p in panels {
        assert!(ids.insert(p["id"].as_u64().expect("a panel id")), "duplicate id {}", p["id"]);
        assert!(p["gridPos"]["w"].as_u64().is_some_and(|w| w <= 24), "{p}");
        let targets = p["targets"].as_array().expect("targets");
        assert!(
            !targets.is_empty() && targets.iter().all(|t| t["expr"].as_str().is_some_and(|e| e.contains("fairway_")))
        );
    }
}
