//! The man pages and completions `make install` ships, and `--version`.

use std::process::Command;

fn fairway(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_fairway")).args(args).output().unwrap()
}

#[test]
fn man_pages_cover_every_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let out = fairway(&["generate", "man", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    for page in ["fairway.1", "fairway-check-config.1", "fairway-ckpt-done.1", "fairway-sim.1"] {
        let text = std::fs::read_to_string(dir.path().join(page)).unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(text.starts_with(".ie") || text.contains(".TH"), "{page} is not a man page");
    }
    let top = std::fs::read_to_string(dir.path().join("fairway.1")).unwrap();
    assert!(top.contains("Exit status"), "the exit codes are documented");
}

#[test]
fn completions_know_the_subcommands() {
    for shell in ["bash", "zsh", "fish"] {
        let out = fairway(&["generate", "completion", shell]);
        assert!(out.status.success(), "{shell}: {out:?}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("check-config"), "{shell}");
    }
}

#[test]
fn version_names_the_commit_and_the_slurm_release() {
    let out = fairway(&["--version"]);
    let v = String::from_utf8_lossy(&out.stdout);
    assert!(v.starts_with(&format!("fairway {} (git ", env!("CARGO_PKG_VERSION"))), "{v}");
    assert!(v.contains("for Slurm "), "{v}");
}

#[test]
fn a_usage_error_exits_2() {
    assert_eq!(fairway(&["no-such-command"]).status.code(), Some(2));
}
