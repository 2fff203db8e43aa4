//! `fairway check-config` as an admin runs it.

use std::process::Command;

fn check(toml: Option<&str>) -> (i32, String, String) {
    check_with(toml, "ClusterName=x\n")
}

fn check_with(toml: Option<&str>, slurm_conf: &str) -> (i32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("slurm.conf");
    std::fs::write(&conf, slurm_conf).unwrap();
    if let Some(t) = toml {
        std::fs::write(dir.path().join("fairway.toml"), t).unwrap();
    }
    let out =
        Command::new(env!("CARGO_BIN_EXE_fairway")).args(["check-config", "--slurm-conf"]).arg(&conf).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn valid_file_passes() {
    let (code, stdout, _) = check(Some("[priority]\nmax_wait = \"3-00:00:00\"\n"));
    assert_eq!(code, 0);
    assert!(stdout.contains("fairway.toml: ok"), "{stdout}");
}

#[test]
fn missing_file_means_defaults() {
    let (code, stdout, _) = check(None);
    assert_eq!(code, 0);
    assert!(stdout.contains("not found; the plugins use the defaults"), "{stdout}");
}

#[test]
fn invalid_file_exits_2_with_file_line_and_key() {
    let (code, _, stderr) = check(Some("[priority]\nmax_wait = \"soon\"\n"));
    assert_eq!(code, 2);
    assert!(stderr.contains("fairway.toml is invalid; slurmctld would refuse to start with it"), "{stderr}");
    assert!(stderr.contains("fairway.toml:2:12: key `priority.max_wait`: invalid time `soon`"), "{stderr}");
}

#[test]
fn both_fairway_priority_plugins_exit_1_with_an_explanation() {
    let (code, stdout, _) =
        check_with(None, "PriorityType=priority/fairway\nPrioritySiteFactorPlugin=site_factor/fairway\n");
    assert_eq!(code, 1);
    assert!(
        stdout.contains("error: PriorityType=priority/fairway and PrioritySiteFactorPlugin=site_factor/fairway"),
        "{stdout}"
    );
}

#[test]
fn terms_that_nothing_applies_are_a_warning() {
    let (code, stdout, _) =
        check_with(Some("[priority]\nweight_predicted_work = 5\n"), "PriorityType=priority/multifactor\n");
    assert_eq!(code, 0);
    assert!(stdout.contains("warning: fairway.toml turns on Fairway's priority terms"), "{stdout}");
}

#[test]
fn a_deadline_weight_no_qos_may_claim_is_a_warning() {
    let (code, stdout, _) = check_with(Some("[priority]\nweight_deadline = 5\n"), "PriorityType=priority/fairway\n");
    assert_eq!(code, 0);
    assert!(stdout.contains("weight_deadline = 5 applies to no job: deadline_qos is empty"), "{stdout}");
}

#[test]
fn preempt_section_is_checked() {
    let (code, stdout, _) =
        check(Some("[preempt]\nmin_runtime = \"15:00\"\n[preempt.qos.scavenger]\nmax_grace = 300\n"));
    assert_eq!(code, 0);
    assert!(stdout.contains("min_runtime: 900"), "{stdout}");

    let (code, _, stderr) = check(Some("[preempt]\nmin_grace = 30\n[preempt.qos.scavenger]\nmax_grace = 20\n"));
    assert_eq!(code, 2);
    assert!(stderr.contains("qos.scavenger.max_grace (20 s) is below min_grace (30 s)"), "{stderr}");
}
