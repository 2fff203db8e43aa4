//! A real single-node Slurm cluster in a temporary directory, for Fairway's tests.
//!
//! [`Cluster::start`] brings up munged (own key and socket), MariaDB (own datadir and
//! port), slurmdbd, slurmctld and slurmd on free loopback ports, with `slurm.conf`,
//! `slurmdbd.conf` and `fairway.toml` generated from a [`ClusterSpec`]. Accounts, users
//! and QOS are created with `sacctmgr`. Commands run as unprivileged test users
//! ([`Cluster::run_as`]). Every step waits on readiness with a timeout and, on failure,
//! reports the failing daemon's log. Dropping the cluster stops everything it started,
//! strays included, even when a test panics.
//!
//! Needs root (daemons, `setpriv`) and `scripts/setup.sh` (packages, test users).

#![forbid(unsafe_code)]

mod cluster;
mod conf;
mod docker;
pub mod fairshare;
mod proc;
mod slurm;

pub use cluster::{Cluster, ClusterSpec};
pub use docker::DockerCluster;
pub use proc::{free_port, processes_mentioning, CmdOutput};
pub use slurm::Slurm;

/// Unprivileged users `scripts/setup.sh` creates for tests.
pub const TEST_USERS: [&str; 4] = ["fw_alice", "fw_bob", "fw_carol", "fw_dave"];

/// Directory holding the freshly built Fairway plugins under their Slurm names
/// (`priority_fairway.so`): `$FAIRWAY_PLUGIN_DIR`, else `target/plugins/test`.
pub fn plugin_dir() -> std::path::PathBuf {
    match std::env::var_os("FAIRWAY_PLUGIN_DIR") {
        Some(d) => d.into(),
        None => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/plugins/test"),
    }
}

/// The `fairway` command built beside these tests (`make test-slurm` builds it first).
pub fn fairway_bin() -> String {
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let bin = target.join("debug/fairway");
    assert!(bin.exists(), "{} is missing: cargo build -p fairway-cli", bin.display());
    bin.display().to_string()
}
