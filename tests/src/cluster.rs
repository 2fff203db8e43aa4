//! Starting, using and stopping one test cluster.

use std::fs;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rustix::process::{geteuid, kill_process, kill_process_group, Pid, Signal};

use crate::conf::{self, Layout, Ports};
use crate::proc::{free_port, processes_mentioning, CmdOutput};

/// What a test needs of its cluster.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    /// `PriorityType=`.
    pub priority_type: String,
    /// `JobSubmitPlugins=` (names without `job_submit/`).
    pub job_submit_plugins: Vec<String>,
    /// Extra `slurm.conf` lines (`PriorityFlags=...`).
    pub slurm_conf_extra: Vec<String>,
    /// Contents of `fairway.toml` beside `slurm.conf`; `None` leaves it absent.
    pub fairway_toml: Option<String>,
    /// `SlurmctldDebug=`.
    pub ctld_debug: String,
    /// Accounts as (name, parent, `Fairshare=` value: a number or `parent`).
    pub accounts: Vec<(String, String, String)>,
    /// Users as (name, default account).
    pub users: Vec<(String, String)>,
    /// `Fairshare=` of user associations, as (user, value), where not the default 1.
    pub user_fairshare: Vec<(String, String)>,
    /// QOS as (name, priority); every user may use each.
    pub qos: Vec<(String, u32)>,
    /// Whether to start slurmd (a compute node).
    pub slurmd: bool,
    /// Generic resources of the node: its `Gres=` value (e.g. `gpu:a100:4`) and the
    /// `gres.conf` lines describing them (`{dir}` stands for the cluster directory,
    /// whose `dev/nvidia0..15` are stand-in device files); `GresTypes` follows.
    pub gres: Option<(String, String)>,
    /// Extra partitions over every node: the rest of each `PartitionName=` line
    /// (`gpu MaxTime=12:00:00`); `Nodes=` and `State=UP` are added.
    pub partitions: Vec<String>,
    /// Nodes like the real one that never register (no slurmd; an unroutable
    /// address): multi-node shapes can be submitted and stay pending.
    pub phantom_nodes: u32,
    /// Further files beside `slurm.conf`, as (name, contents): `job_submit.lua`, ….
    pub config_files: Vec<(String, String)>,
    /// Further environment of slurmd, as (name, value): `LD_LIBRARY_PATH` to a stand-in
    /// `libnvidia-ml.so`, so that Slurm selects `gpu/nvml`.
    pub slurmd_env: Vec<(String, String)>,
    /// `TaskPlugin=` (`task/none`: no binding; `task/affinity` binds tasks to their CPUs).
    pub task_plugin: String,
    /// The node's hardware on its `NodeName=` line (`Sockets=1 CoresPerSocket=2
    /// ThreadsPerCore=1`, as `slurmd -C` prints it); `None` gives `CPUs=` only.
    pub node_hardware: Option<String>,
    /// A command slurmctld runs under (e.g. `valgrind --leak-check=full`), at start and
    /// at every restart, `{dir}` standing for the cluster's directory; empty: none.
    /// Readiness waits are then ten times as patient.
    pub slurmctld_wrapper: Vec<String>,
}

impl Default for ClusterSpec {
    fn default() -> Self {
        let s = |v: &str| v.to_string();
        Self {
            priority_type: s("priority/fairway"),
            job_submit_plugins: vec![s("fairway")],
            slurm_conf_extra: Vec::new(),
            fairway_toml: None,
            ctld_debug: s("info"),
            accounts: vec![
                (s("ml"), s("root"), s("100")),
                (s("vision"), s("ml"), s("60")),
                (s("nlp"), s("ml"), s("40")),
            ],
            users: vec![(s("fw_alice"), s("vision")), (s("fw_bob"), s("nlp"))],
            user_fairshare: Vec::new(),
            gres: None,
            partitions: Vec::new(),
            phantom_nodes: 0,
            config_files: Vec::new(),
            slurmd_env: Vec::new(),
            task_plugin: s("task/none"),
            node_hardware: None,
            slurmctld_wrapper: Vec::new(),
            qos: vec![(s("high"), 1000), (s("scavenger"), 0)],
            slurmd: true,
        }
    }
}

struct Daemon {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

/// A running cluster; dropping it stops everything it started.
pub struct Cluster {
    dir: Option<tempfile::TempDir>,
    root: PathBuf,
    daemons: Vec<Daemon>,
    /// `ClusterName=`.
    pub name: String,
    /// The compute node's `NodeName=`.
    pub node: String,
    ports: Ports,
    ctld_wrapper: Vec<String>,
}

const START_TIMEOUT: Duration = Duration::from_secs(90);

impl Cluster {
    /// Starts a cluster as `spec` describes, waiting until every daemon is ready.
    /// On failure everything started so far is stopped and the error carries the
    /// failing daemon's log.
    pub fn start(spec: &ClusterSpec) -> Result<Cluster> {
        check_prerequisites()?;
        let dir = tempfile::Builder::new().prefix("fairway-cluster-").tempdir()?;
        let root = dir.path().to_path_buf();
        // Test users must reach the munge socket and write job output.
        fs::set_permissions(&root, fs::Permissions::from_mode(0o755))?;
        for sub in ["munge", "db", "state", "spool", "run", "log", "jobs"] {
            fs::create_dir_all(root.join(sub))?;
        }
        fs::set_permissions(root.join("jobs"), fs::Permissions::from_mode(0o1777))?;

        let name = format!("fw{}", root.file_name().unwrap().to_string_lossy().rsplit('-').next().unwrap())
            .to_lowercase()
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect::<String>();
        let ports = Ports { ctld: free_port(), slurmd: free_port(), dbd: free_port(), mysql: free_port() };
        let mut cluster = Cluster {
            dir: Some(dir),
            root: root.clone(),
            daemons: Vec::new(),
            name,
            node: "fwn1".into(),
            ports,
            ctld_wrapper: spec.slurmctld_wrapper.clone(),
        };
        let hostname = short_hostname()?;
        let cluster_name = cluster.name.clone();
        // Copy the plugins in: every Slurm client (run as a test user) reads PluginDir,
        // and the build tree may sit under a directory they cannot traverse (/root).
        let plugin_dir = root.join("plugins");
        fs::create_dir_all(&plugin_dir)?;
        for e in fs::read_dir(crate::plugin_dir())? {
            let e = e?;
            if e.path().extension().is_some_and(|x| x == "so") {
                fs::copy(e.path(), plugin_dir.join(e.file_name()))?;
            }
        }
        let layout = Layout {
            dir: &root,
            cluster_name: &cluster_name,
            hostname: &hostname,
            node_name: "fwn1",
            cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            ports,
            plugin_dir: &plugin_dir,
        };
        fs::write(root.join("slurm.conf"), conf::slurm_conf(&layout, spec))?;
        let dbd_conf = root.join("slurmdbd.conf");
        fs::write(&dbd_conf, conf::slurmdbd_conf(&layout))?;
        fs::set_permissions(&dbd_conf, fs::Permissions::from_mode(0o600))?;
        if let Some(t) = &spec.fairway_toml {
            fs::write(root.join("fairway.toml"), t)?;
        }
        for (name, text) in &spec.config_files {
            fs::write(root.join(name), text)?;
        }
        if let Some((_, gres_conf)) = &spec.gres {
            // Stand-in devices for GPUs this machine lacks, `{dir}/dev/nvidiaN`: links to
            // /dev/null, since slurmd hands a job (CUDA_VISIBLE_DEVICES) only character or
            // block devices.
            fs::create_dir_all(root.join("dev"))?;
            for i in 0..16 {
                std::os::unix::fs::symlink("/dev/null", root.join(format!("dev/nvidia{i}")))?;
            }
            fs::write(root.join("gres.conf"), gres_conf.replace("{dir}", &root.display().to_string()))?;
        }

        cluster.start_munge(&layout)?;
        cluster.start_mariadb()?;
        cluster.start_slurmdbd()?;
        cluster.bootstrap_accounting(spec)?;
        cluster.spawn("slurmctld", &mut cluster.slurmctld_command(), "slurmctld.log")?;
        cluster.wait("slurmctld", "scontrol ping says UP", |c| {
            Ok(c.cmd("scontrol", &["ping"])?.stdout.contains("is UP"))
        })?;
        if spec.slurmd {
            let node = cluster.node.clone();
            let mut slurmd = Command::new("slurmd");
            slurmd.args(["-D", "-N", &node]).envs(spec.slurmd_env.iter().map(|(k, v)| (k, v)));
            cluster.spawn("slurmd", &mut slurmd, &format!("slurmd.{node}.log"))?;
            cluster.wait("slurmd", "node idle", |c| {
                Ok(c.cmd("sinfo", &["-h", "-n", &node, "-o", "%T"])?.stdout.trim() == "idle")
            })?;
        }
        Ok(cluster)
    }

    /// The directory holding this cluster's configuration, state and logs.
    pub fn dir(&self) -> &Path {
        &self.root
    }

    /// The PluginDir holding this cluster's copy of Fairway's plugins.
    pub fn plugin_dir(&self) -> PathBuf {
        self.root.join("plugins")
    }

    /// The loopback ports this cluster's daemons listen on.
    pub fn ports(&self) -> [u16; 4] {
        [self.ports.ctld, self.ports.slurmd, self.ports.dbd, self.ports.mysql]
    }

    /// `slurm.conf`'s path, as `SLURM_CONF` for commands.
    pub fn slurm_conf(&self) -> PathBuf {
        self.root.join("slurm.conf")
    }

    /// A daemon's log so far (`slurmctld`, `slurmdbd`, `slurmd`, `munged`, `mariadb`).
    pub fn log(&self, daemon: &str) -> String {
        let file = match daemon {
            "slurmd" => format!("slurmd.{}.log", self.node),
            d => format!("{d}.log"),
        };
        fs::read_to_string(self.root.join("log").join(file)).unwrap_or_default()
    }

    /// Whether `daemon` is still running.
    pub fn is_running(&mut self, daemon: &str) -> bool {
        self.daemons.iter_mut().any(|d| d.name == daemon && matches!(d.child.try_wait(), Ok(None)))
    }

    /// The pid of a running daemon (`slurmctld`, `slurmd`, ...).
    pub fn daemon_pid(&self, daemon: &str) -> Option<u32> {
        self.daemons.iter().find(|d| d.name == daemon).map(|d| d.child.id())
    }

    /// Kills slurmctld with SIGKILL (no state save) and waits until it is gone.
    pub fn kill_slurmctld(&mut self) -> Result<()> {
        self.kill("slurmctld")
    }

    /// Kills a daemon (`slurmctld`, `slurmdbd`, `mariadb`, ...) with SIGKILL, as a crash or
    /// a lost host would, and waits until it is gone.
    pub fn kill(&mut self, daemon: &str) -> Result<()> {
        let i =
            self.daemons.iter().position(|d| d.name == daemon).with_context(|| format!("{daemon} is not running"))?;
        let mut d = self.daemons.remove(i);
        signal_pid(d.child.id() as i32, Signal::KILL);
        d.child.wait()?;
        Ok(())
    }

    /// `slurmctld -D`, under [`ClusterSpec::slurmctld_wrapper`] if any.
    fn slurmctld_command(&self) -> Command {
        let dir = self.root.display().to_string();
        let mut argv: Vec<String> = self.ctld_wrapper.iter().map(|a| a.replace("{dir}", &dir)).collect();
        argv.extend(["slurmctld".into(), "-D".into()]);
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        cmd
    }

    /// Stops a daemon the orderly way (SIGTERM to it alone, as `systemctl stop` does) and
    /// waits up to `timeout` for it to exit; its exit status.
    pub fn stop_daemon(&mut self, daemon: &str, timeout: Duration) -> Result<std::process::ExitStatus> {
        let i =
            self.daemons.iter().position(|d| d.name == daemon).with_context(|| format!("{daemon} is not running"))?;
        let mut d = self.daemons.remove(i);
        signal_pid(d.child.id() as i32, Signal::TERM);
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = d.child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() > deadline {
                signal_pid(d.child.id() as i32, Signal::KILL);
                d.child.wait()?;
                bail!("{daemon} did not stop within {timeout:?} of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Starts MariaDB and then slurmdbd again on their data after [`kill`](Self::kill),
    /// waiting until slurmdbd answers `sacctmgr`.
    pub fn restart_accounting(&mut self) -> Result<()> {
        if !self.is_running("mariadb") {
            self.spawn_mariadb()?;
        }
        self.spawn("slurmdbd", Command::new("slurmdbd").arg("-D"), "slurmdbd.log")?;
        self.wait("slurmdbd", "sacctmgr answers", |c| c.cmd("sacctmgr", &["-n", "-P", "list", "cluster"])?.ok_or_err())
    }

    /// Starts slurmctld again on the same configuration and state, waiting until it
    /// answers and the node is back.
    pub fn restart_slurmctld(&mut self) -> Result<()> {
        self.spawn("slurmctld", &mut self.slurmctld_command(), "slurmctld.log")?;
        self.wait("slurmctld", "scontrol ping says UP", |c| {
            Ok(c.cmd("scontrol", &["ping"])?.stdout.contains("is UP"))
        })?;
        // The node must answer again; a job may still be completing on it.
        let node = self.node.clone();
        self.wait("slurmctld", "node responding again", |c| {
            let state = c.cmd("sinfo", &["-h", "-n", &node, "-o", "%T"])?.stdout.trim().to_string();
            if ["idle", "mixed", "allocated", "completing"].contains(&state.as_str()) {
                Ok(true)
            } else {
                anyhow::bail!("node state {state}")
            }
        })
    }

    /// Runs a Slurm command as root against this cluster.
    pub fn cmd(&self, prog: &str, args: &[&str]) -> Result<CmdOutput> {
        let out = Command::new(prog)
            .args(args)
            .env("SLURM_CONF", self.slurm_conf())
            .current_dir(&self.root)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("cannot run {prog}"))?;
        Ok(out.into())
    }

    /// Runs a command as the unprivileged `user` (no root left), with `SLURM_CONF` set
    /// and the cluster's world-writable `jobs/` as working directory.
    pub fn run_as(&self, user: &str, prog: &str, args: &[&str]) -> Result<CmdOutput> {
        let (uid, gid) = user_ids(user)?;
        let out = Command::new("setpriv")
            .args([&format!("--reuid={uid}"), &format!("--regid={gid}"), "--init-groups", "--", prog])
            .args(args)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
            .env("SLURM_CONF", self.slurm_conf())
            .env("USER", user)
            .env("HOME", format!("/home/{user}"))
            .current_dir(self.root.join("jobs"))
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("cannot run {prog} as {user}"))?;
        Ok(out.into())
    }

    /// The last lines of every daemon's log, for failure messages.
    pub fn log_tails(&self) -> String {
        let mut s = String::new();
        for d in &self.daemons {
            let text = fs::read_to_string(&d.log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(25)..];
            s += &format!("--- {} ({}) ---\n{}\n", d.name, d.log.display(), tail.join("\n"));
        }
        s
    }

    /// Stops every daemon and anything they forked; waits until they are gone.
    pub fn stop(mut self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<()> {
        if self.daemons.iter().any(|d| d.name == "slurmctld") {
            // Cancel jobs first so slurmstepd processes end the normal way.
            if let Ok(q) = self.cmd("squeue", &["-h", "-o", "%i"]) {
                let ids: Vec<&str> = q.stdout.split_whitespace().collect();
                if !ids.is_empty() {
                    let mut args = vec!["--full"];
                    args.extend(ids);
                    let _ = self.cmd("scancel", &args);
                    let deadline = Instant::now() + Duration::from_secs(15);
                    while Instant::now() < deadline
                        && self
                            .cmd("squeue", &["-h", "-t", "R,CG"])
                            .map(|o| !o.stdout.trim().is_empty())
                            .unwrap_or(false)
                    {
                        std::thread::sleep(Duration::from_millis(200));
                    }
                }
            }
        }
        while let Some(mut d) = self.daemons.pop() {
            terminate(&mut d.child, Duration::from_secs(20));
        }
        // Anything left that lives in our directory (a slurmstepd, say) goes too.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let strays = processes_mentioning(&self.root);
            if strays.is_empty() {
                break;
            }
            if Instant::now() > deadline {
                bail!("processes {strays:?} of cluster {} survived SIGKILL", self.name);
            }
            for pid in strays {
                signal_pid(pid, Signal::KILL);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if let Some(dir) = self.dir.take() {
            if std::env::var_os("FAIRWAY_KEEP_CLUSTER").is_some() {
                let kept = dir.keep();
                eprintln!("fairway-tests: kept {}", kept.display());
            } else {
                dir.close()?;
            }
        }
        Ok(())
    }

    /// Starts slurmdbd on a new database and waits until it answers `sacctmgr`. Its first
    /// start creates the tables, and now and then one of those queries comes back empty
    /// from the MariaDB that has just started ("We should have gotten a result", then
    /// "Unable to initialize accounting_storage/mysql": slurmdbd exits; seen in CI with
    /// four clusters starting at once); started again, it finishes the tables. So a
    /// slurmdbd that exits that way is started again, twice at most, saying so.
    fn start_slurmdbd(&mut self) -> Result<()> {
        const TRIES: u32 = 3;
        for attempt in 1..=TRIES {
            self.spawn("slurmdbd", Command::new("slurmdbd").arg("-D"), "slurmdbd.log")?;
            let up = self.wait("slurmdbd", "sacctmgr answers", |c| {
                c.cmd("sacctmgr", &["-n", "-P", "list", "cluster"])?.ok_or_err()
            });
            let Err(e) = up else { return Ok(()) };
            let init_failed = !self.is_running("slurmdbd")
                && fs::read_to_string(self.root.join("log/slurmdbd.stdio"))
                    .is_ok_and(|l| l.contains("Unable to initialize accounting_storage"));
            if !init_failed || attempt == TRIES {
                return Err(e);
            }
            eprintln!("fairway-tests: slurmdbd failed creating its tables (start {attempt} of {TRIES}); again:\n{e:#}");
            self.daemons.retain(|d| d.name != "slurmdbd");
        }
        unreachable!("the last try returns")
    }

    fn spawn(&mut self, name: &'static str, cmd: &mut Command, log: &str) -> Result<()> {
        let log = self.root.join("log").join(log);
        let stdio = fs::File::create(self.root.join("log").join(format!("{name}.stdio")))?;
        let child = cmd
            .env("SLURM_CONF", self.slurm_conf())
            .current_dir(&self.root)
            .stdin(Stdio::null())
            .stdout(stdio.try_clone()?)
            .stderr(stdio)
            .process_group(0)
            .spawn()
            .with_context(|| format!("cannot start {name}"))?;
        self.daemons.push(Daemon { name, child, log });
        Ok(())
    }

    /// Polls `ready` until it holds; fails early if `daemon` exits.
    fn wait(&mut self, daemon: &str, what: &str, mut ready: impl FnMut(&Cluster) -> Result<bool>) -> Result<()> {
        let start = Instant::now();
        let mut last = String::new();
        loop {
            match ready(self) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(e) => last = format!("{e:#}"),
            }
            if let Some(d) = self.daemons.iter_mut().find(|d| d.name == daemon) {
                if let Ok(Some(status)) = d.child.try_wait() {
                    let stdio =
                        fs::read_to_string(self.root.join("log").join(format!("{daemon}.stdio"))).unwrap_or_default();
                    bail!("{daemon} exited ({status}) before {what}\n{stdio}\n{}", self.log_tails());
                }
            }
            let timeout = if self.ctld_wrapper.is_empty() { START_TIMEOUT } else { 10 * START_TIMEOUT };
            if start.elapsed() > timeout {
                bail!("{daemon}: not ready ({what}) after {timeout:?}; last probe: {last}\n{}", self.log_tails());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn start_munge(&mut self, l: &Layout<'_>) -> Result<()> {
        let m = self.root.join("munge");
        let key = m.join("munge.key");
        let mut bytes = [0u8; 1024];
        std::io::Read::read_exact(&mut fs::File::open("/dev/urandom")?, &mut bytes)?;
        fs::write(&key, bytes)?;
        fs::set_permissions(&key, fs::Permissions::from_mode(0o400))?;
        let sock = l.munge_socket();
        let log = self.root.join("log/munged.log");
        self.spawn(
            "munged",
            Command::new("munged").args([
                "-F",
                "--force",
                &format!("--socket={sock}"),
                &format!("--key-file={}", key.display()),
                &format!("--pid-file={}/munged.pid", m.display()),
                &format!("--log-file={}", log.display()),
                &format!("--seed-file={}/munged.seed", m.display()),
            ]),
            "munged.log",
        )?;
        self.wait("munged", "a credential round-trips", |_| {
            let enc = Command::new("munge").args(["-n", "-S", &sock]).output()?;
            if !enc.status.success() {
                return Ok(false);
            }
            let mut dec = Command::new("unmunge")
                .args(["-S", &sock])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?;
            dec.stdin.take().unwrap().write_all(&enc.stdout)?;
            Ok(dec.wait()?.success())
        })
    }

    fn start_mariadb(&mut self) -> Result<()> {
        let template = mariadb_template()?;
        let db = self.root.join("db");
        let st = Command::new("cp").args(["-a", &format!("{}/.", template.display())]).arg(&db).status()?;
        if !st.success() {
            bail!("cannot copy the MariaDB template {}", template.display());
        }
        self.spawn_mariadb()
    }

    fn spawn_mariadb(&mut self) -> Result<()> {
        let port = self.ports.mysql.to_string();
        let r = self.root.display().to_string();
        // Loopback only, and no grant tables: slurmdbd's user needs no password in a
        // throwaway test database.
        self.spawn(
            "mariadb",
            Command::new("mariadbd").args([
                "--no-defaults",
                &format!("--datadir={r}/db"),
                &format!("--socket={r}/run/mysql.sock"),
                &format!("--pid-file={r}/run/mysql.pid"),
                &format!("--log-error={r}/log/mariadb.log"),
                &format!("--port={port}"),
                "--bind-address=127.0.0.1",
                "--user=root",
                "--skip-grant-tables",
                "--skip-log-bin",
                "--innodb-buffer-pool-size=64M",
                "--innodb-flush-log-at-trx-commit=0",
            ]),
            "mariadb.log",
        )?;
        self.wait("mariadb", "mariadb-admin ping", |_| {
            Ok(Command::new("mariadb-admin")
                .args(["--no-defaults", "--protocol=tcp", "-h", "127.0.0.1", "-P", &port, "-u", "slurm", "ping"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()?
                .success())
        })
    }

    fn bootstrap_accounting(&mut self, spec: &ClusterSpec) -> Result<()> {
        let name = self.name.clone();
        let run = |args: Vec<String>| -> Result<()> {
            let mut all = vec!["-i".to_string()];
            all.extend(args);
            let refs: Vec<&str> = all.iter().map(String::as_str).collect();
            let out = self.cmd("sacctmgr", &refs)?;
            if !out.ok() {
                bail!("sacctmgr {}: {}{}", all.join(" "), out.stdout, out.stderr);
            }
            Ok(())
        };
        run(vec!["add".into(), "cluster".into(), name.clone()])?;
        for (q, prio) in &spec.qos {
            run(vec!["add".into(), "qos".into(), q.clone(), format!("Priority={prio}")])?;
        }
        for (a, parent, share) in &spec.accounts {
            run(vec![
                "add".into(),
                "account".into(),
                a.clone(),
                format!("Parent={parent}"),
                format!("Fairshare={share}"),
                format!("Cluster={name}"),
            ])?;
        }
        let qos_list =
            std::iter::once("normal".to_string()).chain(spec.qos.iter().map(|q| q.0.clone())).collect::<Vec<_>>();
        for (u, account) in &spec.users {
            let mut args = vec![
                "add".into(),
                "user".into(),
                u.clone(),
                format!("Account={account}"),
                format!("Cluster={name}"),
                format!("QOS={}", qos_list.join(",")),
            ];
            if let Some((_, share)) = spec.user_fairshare.iter().find(|(name, _)| name == u) {
                args.push(format!("Fairshare={share}"));
            }
            run(args)?;
        }
        Ok(())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() && !self.daemons.is_empty() {
            eprintln!("fairway-tests: cluster {} at {}\n{}", self.name, self.root.display(), self.log_tails());
        }
        if let Err(e) = self.shutdown() {
            eprintln!("fairway-tests: teardown of {}: {e:#}", self.name);
        }
    }
}

/// Sends `sig` to a process; one that is already gone is fine.
fn signal_pid(pid: i32, sig: Signal) {
    if let Some(p) = Pid::from_raw(pid) {
        let _ = kill_process(p, sig);
    }
}

/// Sends `sig` to a process group; one that is already gone is fine.
fn signal_group(pgid: i32, sig: Signal) {
    if let Some(p) = Pid::from_raw(pgid) {
        let _ = kill_process_group(p, sig);
    }
}

/// SIGTERM to the daemon's process group, then SIGKILL after `grace`.
fn terminate(child: &mut Child, grace: Duration) {
    let pgid = child.id() as i32;
    signal_group(pgid, Signal::TERM);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            // The daemon is gone; children in its group go too.
            signal_group(pgid, Signal::KILL);
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    signal_group(pgid, Signal::KILL);
    let _ = child.wait();
}

fn check_prerequisites() -> Result<()> {
    if !geteuid().is_root() {
        bail!("the test cluster runs Slurm's daemons and needs root");
    }
    for prog in ["munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd", "sacctmgr", "setpriv"] {
        if !["/usr/sbin", "/usr/bin", "/sbin", "/bin"].iter().any(|d| Path::new(d).join(prog).exists()) {
            bail!("{prog} is not installed: run scripts/setup.sh");
        }
    }
    for u in crate::TEST_USERS {
        user_ids(u).with_context(|| format!("test user {u} is missing: run scripts/setup.sh"))?;
    }
    let plugins = crate::plugin_dir();
    if !plugins.join("priority_fairway.so").exists() {
        bail!("no Fairway plugins in {}: run `make plugins`", plugins.display());
    }
    Ok(())
}

fn short_hostname() -> Result<String> {
    let h = fs::read_to_string("/proc/sys/kernel/hostname")?;
    Ok(h.trim().split('.').next().unwrap_or("localhost").to_string())
}

fn user_ids(user: &str) -> Result<(u32, u32)> {
    let passwd = fs::read_to_string("/etc/passwd")?;
    for line in passwd.lines() {
        let f: Vec<&str> = line.split(':').collect();
        if f.len() > 3 && f[0] == user {
            return Ok((f[2].parse()?, f[3].parse()?));
        }
    }
    bail!("no user {user} in /etc/passwd")
}

/// An initialised MariaDB data directory, made once per machine and copied per cluster
/// (`mariadb-install-db` takes seconds; a copy takes milliseconds).
fn mariadb_template() -> Result<PathBuf> {
    let base = std::env::temp_dir().join("fairway-mariadb-template");
    if base.join("mysql").is_dir() {
        return Ok(base);
    }
    // One maker at a time across processes (make test-slurm runs two suites at once):
    // two mariadb-install-db side by side collide on their temporary tables in /tmp.
    let lock = fs::File::create(std::env::temp_dir().join("fairway-mariadb-template.lock"))?;
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)?;
    if base.join("mysql").is_dir() {
        return Ok(base); // made by the process that held the lock
    }
    let tmp = std::env::temp_dir().join(format!("fairway-mariadb-template.{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(&tmp)?;
    let out = Command::new("mariadb-install-db")
        .args(["--no-defaults", &format!("--datadir={}", tmp.display()), "--user=root", "--skip-test-db"])
        .args(["--auth-root-authentication-method=normal"])
        .output()?;
    if !out.status.success() {
        bail!(
            "mariadb-install-db failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    if fs::rename(&tmp, &base).is_err() {
        // Another test process made it first.
        let _ = fs::remove_dir_all(&tmp);
    }
    Ok(base)
}

impl crate::Slurm for Cluster {
    fn cmd(&self, prog: &str, args: &[&str]) -> Result<CmdOutput> {
        Cluster::cmd(self, prog, args)
    }

    fn run_as(&self, user: &str, prog: &str, args: &[&str]) -> Result<CmdOutput> {
        Cluster::run_as(self, user, prog, args)
    }

    fn log_tails(&self) -> String {
        Cluster::log_tails(self)
    }
}
