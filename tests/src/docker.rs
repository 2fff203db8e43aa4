//! The docker cluster of `docker/cluster.sh` (one Slurm version at a time), driven from
//! the host through `docker exec` on its login node.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::{CmdOutput, Slurm};

/// A running docker cluster, started by `make cluster-up` / `make e2e`.
pub struct DockerCluster {
    /// `22.05`, `24.11` or `26.05`.
    pub version: String,
    project: String,
}

impl DockerCluster {
    /// The cluster named by `$FAIRWAY_E2E` (its Slurm version), which must be up.
    pub fn from_env() -> Result<Self> {
        let version = std::env::var("FAIRWAY_E2E")
            .context("FAIRWAY_E2E is not set: run the end-to-end tests with `make e2e [SLURM=24.11]`")?;
        let c = Self { project: format!("fairway-{}", version.replace('.', "")), version };
        let ping = c.cmd("scontrol", &["ping"])?;
        if !ping.stdout.contains("UP") {
            bail!("the {} docker cluster is not up (make cluster-up SLURM={}): {ping:?}", c.version, c.version);
        }
        Ok(c)
    }

    /// The container of a compose service (docker-compose v1 and v2 name them differently),
    /// running or stopped (v2's `ps` lists only running ones unless `-a`).
    pub fn container(&self, service: &str) -> Result<String> {
        let out = compose()
            .args(["-p", &self.project, "-f", &compose_file(), "ps", "-a", "-q", service])
            .envs(compose_env())
            .output()
            .context("docker compose")?;
        let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if id.is_empty() {
            bail!("no container for {service} in {}", self.project);
        }
        Ok(id)
    }

    /// A container's address on the cluster's docker network (reachable from this host).
    pub fn address(&self, service: &str) -> Result<String> {
        let out = Command::new("docker")
            .args(["inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}"])
            .arg(self.container(service)?)
            .output()
            .context("docker inspect")?;
        let ip = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if ip.is_empty() {
            bail!("{service} has no address on a docker network");
        }
        Ok(ip)
    }

    /// Runs a command in a container, as root.
    pub fn exec(&self, service: &str, args: &[&str]) -> Result<CmdOutput> {
        let out = Command::new("docker")
            .arg("exec")
            .arg(self.container(service)?)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .context("docker exec")?;
        Ok(out.into())
    }

    /// A container's log (its daemon's stderr).
    pub fn logs(&self, service: &str) -> String {
        let Ok(id) = self.container(service) else { return String::new() };
        Command::new("docker")
            .args(["logs", &id])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr))
            .unwrap_or_default()
    }

    /// Stops (`docker stop`, like a node losing power after SIGTERM) or starts a container.
    pub fn set_running(&self, service: &str, running: bool) -> Result<()> {
        let id = self.container(service)?;
        let args: &[&str] = if running { &["start", &id] } else { &["stop", "-t", "1", &id] };
        let out = Command::new("docker").args(args).output()?;
        if !out.status.success() {
            bail!("docker stop/start {service}: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(())
    }

    /// Restarts a container gracefully (SIGTERM, up to a minute to save state), as an
    /// admin restarts a daemon.
    pub fn restart(&self, service: &str) -> Result<()> {
        let out = Command::new("docker").args(["restart", "-t", "60", &self.container(service)?]).output()?;
        if !out.status.success() {
            bail!("docker restart {service}: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(())
    }

    /// Kills a container's daemon with SIGKILL (a crash: nothing is saved) and starts
    /// the container again.
    pub fn kill_9_and_start(&self, service: &str) -> Result<()> {
        let id = self.container(service)?;
        let out = Command::new("docker").args(["kill", "--signal", "KILL", &id]).output()?;
        if !out.status.success() {
            bail!("docker kill {service}: {}", String::from_utf8_lossy(&out.stderr));
        }
        self.set_running(service, true)
    }

    /// Reads a file inside a container.
    pub fn read_file(&self, service: &str, path: &str) -> Result<String> {
        let out = self.exec(service, &["cat", path])?;
        if !out.ok() {
            bail!("cat {path} on {service}: {out:?}");
        }
        Ok(out.stdout)
    }

    /// Replaces a file inside a container (as root).
    pub fn write_file(&self, service: &str, path: &str, content: &str) -> Result<()> {
        use std::io::Write;
        let mut child = Command::new("docker")
            .args(["exec", "-i", &self.container(service)?, "sh", "-c", &format!("cat > '{path}'")])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("docker exec")?;
        child.stdin.take().context("stdin")?.write_all(content.as_bytes())?;
        let out = child.wait_with_output()?;
        if !out.status.success() {
            bail!("writing {path} on {service}: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(())
    }

    /// Polls `cond` every 500 ms until it holds or `timeout` passes.
    pub fn wait_for(&self, what: &str, timeout: Duration, mut cond: impl FnMut() -> Result<bool>) -> Result<()> {
        let start = Instant::now();
        loop {
            if cond()? {
                return Ok(());
            }
            if start.elapsed() > timeout {
                bail!("timed out after {timeout:?} waiting until {what}\n{}", self.log_tails());
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

impl Slurm for DockerCluster {
    fn cmd(&self, prog: &str, args: &[&str]) -> Result<CmdOutput> {
        let mut all = vec![prog];
        all.extend_from_slice(args);
        self.exec("login", &all)
    }

    fn run_as(&self, user: &str, prog: &str, args: &[&str]) -> Result<CmdOutput> {
        let out = Command::new("docker")
            .args(["exec", "-u", user, "-w", "/shared/jobs", &self.container("login")?, prog])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .context("docker exec")?;
        Ok(out.into())
    }

    fn log_tails(&self) -> String {
        let mut s = String::new();
        for svc in ["ctld", "dbd", "c1", "c2", "c3", "c4"] {
            let text = self.logs(svc);
            let lines: Vec<&str> = text.lines().collect();
            s += &format!("--- {svc} ---\n{}\n", lines[lines.len().saturating_sub(20)..].join("\n"));
        }
        s
    }
}

fn repo_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn compose_file() -> String {
    repo_root().join("docker/compose.yml").display().to_string()
}

/// The variables compose.yml interpolates; only the project name matters for `ps`.
fn compose_env() -> Vec<(&'static str, String)> {
    let root = repo_root().display().to_string();
    vec![("SUITE", "unused".into()), ("ETC", "/nonexistent".into()), ("PLUGINS", "/nonexistent".into()), ("ROOT", root)]
}

/// Compose v2 (`docker compose`) where installed, else v1's `docker-compose`, as
/// docker/cluster.sh chooses.
fn compose() -> Command {
    static V2: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let v2 = *V2
        .get_or_init(|| Command::new("docker").args(["compose", "version"]).output().is_ok_and(|o| o.status.success()));
    if v2 {
        let mut c = Command::new("docker");
        c.arg("compose");
        c
    } else {
        Command::new("docker-compose")
    }
}
