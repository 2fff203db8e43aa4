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
    assert!(stdout.contains("fairway.toml: valid"), "{stdout}");
    assert!(
        stdout.contains("[priority]   predicted work: off; deadline: off; starvation bound: 3-00:00:00"),
        "{stdout}"
    );
}

#[test]
fn missing_file_means_defaults() {
    let (code, stdout, _) = check(None);
    assert_eq!(code, 0);
    assert!(stdout.contains("not found; the plugins use the defaults"), "{stdout}");
}

#[test]
fn invalid_file_exits_1_with_file_line_and_key() {
    let (code, _, stderr) = check(Some("[priority]\nmax_wait = \"soon\"\n"));
    assert_eq!(code, 1);
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
    let (code, stdout, _) =
        check_with(Some("[priority]\nweight_deadline = 5\n"), "PriorityType=priority/multifactor\n");
    assert_eq!(code, 0);
    assert!(stdout.contains("weight_deadline = 5 applies to no job: deadline_qos is empty"), "{stdout}");
}

#[test]
fn preempt_section_is_checked() {
    let (code, stdout, _) =
        check(Some("[preempt]\nmin_runtime = \"15:00\"\n[preempt.qos.scavenger]\nmax_grace = 300\n"));
    assert_eq!(code, 0);
    assert!(stdout.contains("young jobs spared 15:00"), "{stdout}");
    assert!(stdout.contains("1 QoS override(s)"), "{stdout}");

    let (code, _, stderr) = check(Some("[preempt]\nmin_grace = 30\n[preempt.qos.scavenger]\nmax_grace = 20\n"));
    assert_eq!(code, 1);
    assert!(stderr.contains("qos.scavenger.max_grace (20 s) is below min_grace (30 s)"), "{stderr}");
}

#[test]
fn an_unreadable_slurm_conf_is_a_failure_not_a_pass() {
    let out = Command::new(env!("CARGO_BIN_EXE_fairway"))
        .args(["check-config", "--slurm-conf", "/nonexistent/slurm.conf"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read /nonexistent/slurm.conf"), "{out:?}");
}

/// A plugin built for one Slurm release, a slurmctld of another: what an apt upgrade of
/// Slurm alone leaves behind. The plugin is a real shared object with Slurm's three
/// symbols (compiled here with cc); slurmctld is a stand-in on PATH printing `-V` as
/// Slurm does. (scripts/test-packages.sh does the same with Debian's real Slurm.)
#[test]
fn a_plugin_of_another_slurm_release_is_caught_before_the_restart() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    let src = dir.path().join("p.c");
    // The plugin is built for 22.05.8: its plugin_version encoded as Slurm encodes it.
    let built = fairway_core::check::plugins::SlurmVersion::parse("22.05.8").unwrap();
    std::fs::write(
        &src,
        format!(
            "const char plugin_name[] = \"x\"; const char plugin_type[] = \"priority/fairway\";\n\
             const unsigned int plugin_version = {:#x};\n",
            built.0
        ),
    )
    .unwrap();
    let cc = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(plugins.join("priority_fairway.so"))
        .arg(&src)
        .status()
        .expect("cc runs");
    assert!(cc.success());
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let fake = bin.join("slurmctld");
    let conf = format!("PluginDir={}\nPriorityType=priority/fairway\n", plugins.display());
    let run = |slurm: &str| {
        std::fs::write(&fake, format!("#!/bin/sh\necho 'slurm {slurm}'\n")).unwrap();
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        std::fs::write(dir.path().join("slurm.conf"), &conf).unwrap();
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
        let out = Command::new(env!("CARGO_BIN_EXE_fairway"))
            .args(["check-config", "--slurm-conf"])
            .arg(dir.path().join("slurm.conf"))
            .env("PATH", path)
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (code, stdout) = run("22.05.8");
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("priority_fairway.so: loads in slurmctld 22.05.8"), "{stdout}");
    let (code, stdout) = run("22.05.9");
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("priority_fairway.so is built for Slurm 22.05.8, but slurmctld here is Slurm 22.05.9"),
        "{stdout}"
    );
    assert!(stdout.contains("not start"), "{stdout}");
}

#[test]
fn settings_in_an_included_file_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("priority.conf"), "PrioritySiteFactorPlugin=site_factor/fairway\n").unwrap();
    std::fs::write(dir.path().join("slurm.conf"), "PriorityType=priority/fairway\nInclude priority.conf\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_fairway"))
        .args(["check-config", "--slurm-conf"])
        .arg(dir.path().join("slurm.conf"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("error: PriorityType=priority/fairway and PrioritySiteFactorPlugin=site_factor/fairway"),
        "{stdout}"
    );
}
