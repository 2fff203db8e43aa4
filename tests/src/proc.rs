//! Processes and ports.

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::path::Path;
use std::process::Output;
use std::sync::Mutex;

/// A finished command, with its output as text.
#[derive(Debug, Clone)]
pub struct CmdOutput {
    /// Exit status code (-1 if killed by a signal).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl CmdOutput {
    /// Whether the command exited 0.
    pub fn ok(&self) -> bool {
        self.code == 0
    }

    /// `Ok(true)` on exit 0, else an error carrying the output (for readiness probes).
    pub fn ok_or_err(&self) -> anyhow::Result<bool> {
        if self.ok() {
            Ok(true)
        } else {
            anyhow::bail!("exit {}: {}{}", self.code, self.stdout, self.stderr)
        }
    }
}

impl From<Output> for CmdOutput {
    fn from(o: Output) -> Self {
        Self {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

/// A loopback TCP port nothing listens on right now, and never handed out before by this
/// process: the kernel may give a just-released port to the next bind, so two daemons of
/// one cluster (or of two clusters started side by side) could otherwise get the same one
/// before either listens. With `FAIRWAY_TEST_PORT_BASE` set (scripts/test-slurm.sh gives
/// each of its lanes its own), ports come from the 4,000 above it, so suites running at
/// once in two processes never pick the same one.
pub fn free_port() -> u16 {
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    let base = std::env::var("FAIRWAY_TEST_PORT_BASE").ok().and_then(|b| b.parse::<u16>().ok());
    if let Some(base) = base {
        let free = (base..base.saturating_add(4000))
            .find(|p| !given.contains(p) && TcpListener::bind(("127.0.0.1", *p)).is_ok())
            .expect("no free port in FAIRWAY_TEST_PORT_BASE's range");
        given.insert(free);
        return free;
    }
    loop {
        let port =
            TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("no free port");
        if given.insert(port) {
            return port;
        }
    }
}

/// Pids of processes whose command line, working directory or environment mention
/// `dir`: daemons of a cluster living there and anything they forked (slurmstepd).
pub fn processes_mentioning(dir: &Path) -> Vec<i32> {
    let needle = dir.as_os_str().as_encoded_bytes();
    let me = std::process::id() as i32;
    let mut pids = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return pids };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        if pid == me {
            continue;
        }
        let p = e.path();
        let hit = ["cmdline", "environ"]
            .iter()
            .any(|f| std::fs::read(p.join(f)).map(|b| b.windows(needle.len()).any(|w| w == needle)).unwrap_or(false))
            || std::fs::read_link(p.join("cwd")).map(|c| c.starts_with(dir)).unwrap_or(false);
        if hit {
            pids.push(pid);
        }
    }
    pids
}
