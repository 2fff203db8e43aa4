//! Signing in to `fairway serve` with munge, the credential every Slurm node already
//! trusts: the viewer runs `munge -s fairway-serve` where they are logged in and pastes
//! the credential; `unmunge` (through slurmctld's munge socket) says who made it; a
//! session cookie follows. Each viewer then sees what Slurm shows them under
//! `PrivateData` ([`fairway_core::dashboard::Viewer`]).

use std::collections::HashMap;
use std::io::{Read as _, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use axum::http::HeaderMap;
use fairway_core::dashboard::{PrivateData, Viewer};

use crate::slurm_cmd;

/// What a credential must carry, so one made for anything else (or captured from
/// Slurm's own traffic) does not sign anyone in.
pub const PAYLOAD: &str = "fairway-serve";

/// The session cookie's name.
const COOKIE: &str = "fairway_session";

/// How long a session lasts.
const SESSION: Duration = Duration::from_secs(12 * 3600);

/// How viewers are told apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Everyone who can connect sees what the user running `fairway serve` sees.
    None,
    /// Viewers sign in with a munge credential and see what Slurm shows them.
    Munge,
}

/// The cluster's settings that decide who sees what, read from `scontrol show config`.
pub struct Auth {
    pub mode: Mode,
    pub private: PrivateData,
    slurm_user: String,
    munge_socket: Option<String>,
    metrics_token: Option<String>,
    sessions: Mutex<HashMap<String, (Viewer, Instant)>>,
}

impl Auth {
    pub fn new(mode: Mode, metrics_token_file: Option<&Path>) -> anyhow::Result<Self> {
        let config = slurm_cmd::show_config()?;
        let get = |k: &str| config.get(k).cloned().unwrap_or_default();
        let metrics_token = metrics_token_file
            .map(|p| {
                let t = std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?;
                let t = t.trim().to_string();
                if t.len() < 16 {
                    bail!("{}: a metrics token needs at least 16 characters", p.display());
                }
                Ok(t)
            })
            .transpose()?;
        Ok(Self {
            mode,
            private: PrivateData::parse(&get("PrivateData")),
            slurm_user: get("SlurmUser").split('(').next().unwrap_or_default().to_string(),
            // `AuthInfo=socket=/path,...`: the socket slurmctld's munge listens on.
            munge_socket: get("AuthInfo")
                .split(',')
                .find_map(|kv| kv.trim().strip_prefix("socket=").map(str::to_string)),
            metrics_token,
            sessions: Mutex::new(HashMap::new()),
        })
    }

    /// The viewer a request comes from: `None` means "sign in first".
    pub fn viewer(&self, headers: &HeaderMap) -> Option<Viewer> {
        if self.mode == Mode::None {
            return Some(Viewer { user: String::new(), sees_all: true });
        }
        let token = cookie(headers)?;
        let mut sessions = self.sessions.lock().expect("not poisoned");
        sessions.retain(|_, (_, until)| *until > Instant::now());
        sessions.get(token).map(|(v, _)| v.clone())
    }

    /// Whether `/metrics` may be read: without sign-in, by any signed-in viewer who
    /// sees everything, or with the bearer token Prometheus is given.
    pub fn may_scrape(&self, headers: &HeaderMap) -> bool {
        if self.mode == Mode::None || self.viewer(headers).is_some_and(|v| v.sees_all) {
            return true;
        }
        let bearer = headers.get("authorization").and_then(|h| h.to_str().ok()).and_then(|h| h.strip_prefix("Bearer "));
        matches!((bearer, &self.metrics_token), (Some(b), Some(t)) if constant_time_eq(b.as_bytes(), t.as_bytes()))
    }

    /// Signs in the maker of a munge credential; the `Set-Cookie` value to answer with.
    pub fn sign_in(&self, credential: &str) -> anyhow::Result<(Viewer, String)> {
        let user = self.unmunge(credential.trim())?;
        let sees_all = user == "root" || user == self.slurm_user || is_operator(&user);
        let viewer = Viewer { user, sees_all };
        let token = random_token()?;
        let cookie = format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}", SESSION.as_secs());
        self.sessions.lock().expect("not poisoned").insert(token, (viewer.clone(), Instant::now() + SESSION));
        Ok((viewer, cookie))
    }

    /// Who made `credential`, when munge vouches for it and it carries [`PAYLOAD`].
    fn unmunge(&self, credential: &str) -> anyhow::Result<String> {
        if !credential.starts_with("MUNGE:") || credential.len() > 4096 {
            bail!("not a munge credential: run `munge -s {PAYLOAD}` and paste what it prints");
        }
        let mut cmd = Command::new("unmunge");
        if let Some(s) = &self.munge_socket {
            cmd.args(["-S", s]);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("cannot run unmunge (is munge installed?)")?;
        child.stdin.take().expect("piped").write_all(credential.as_bytes())?;
        let mut out = String::new();
        child.stdout.take().expect("piped").read_to_string(&mut out)?;
        let mut err = String::new();
        child.stderr.take().expect("piped").read_to_string(&mut err)?;
        if !child.wait()?.success() {
            // munge says why: expired, replayed (STATUS on stdout), not a credential (stderr).
            let status = out.lines().find_map(|l| l.strip_prefix("STATUS:")).map(str::trim);
            let why = status.unwrap_or_else(|| err.trim().trim_start_matches("unmunge: Error: "));
            bail!("munge refused the credential: {why}");
        }
        let (meta, payload) = out.split_once("\n\n").unwrap_or((&out, ""));
        if payload.trim_end_matches('\n') != PAYLOAD {
            bail!("the credential was not made for fairway serve: run `munge -s {PAYLOAD}`");
        }
        meta.lines()
            .find_map(|l| l.strip_prefix("UID:"))
            .and_then(|v| v.split_whitespace().next())
            .map(str::to_string)
            .context("unmunge named no user")
    }
}

/// Operators and administrators see every job in Slurm whatever `PrivateData` says.
fn is_operator(user: &str) -> bool {
    let args = ["-n", "-P", "show", "user", user, "format=AdminLevel"];
    slurm_cmd::run(Path::new("sacctmgr"), &args).is_ok_and(|l| matches!(l.trim(), "Operator" | "Administrator"))
}

fn cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all("cookie")
        .iter()
        .filter_map(|h| h.to_str().ok())
        .flat_map(|h| h.split(';'))
        .find_map(|kv| kv.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

fn random_token() -> anyhow::Result<String> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
