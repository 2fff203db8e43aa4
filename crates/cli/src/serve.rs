//! `fairway serve`: Fairway's page (the queue by partition, the fair-share tree, GPUs per
//! node by topology, running gangs, alerts and `explain` for any job), pushed to browsers
//! over a WebSocket, and `/metrics` for Prometheus.
//!
//! One refresh reads squeue, sinfo and sshare (as the user running `fairway serve`) and
//! the status priority/fairway publishes; `fairway_core::dashboard` turns that into the
//! board and decides the alerts. Refreshes run once a second while a browser is
//! connected and at each scrape, never more often, so a room full of open pages costs
//! slurmctld what one does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path as UrlPath, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use clap::{Args, ValueEnum as _};
use fairway_core::config::{self, Config};
use fairway_core::dashboard::{self, AlertRules, Board, Reading, Viewer, Watch};
use fairway_core::topology::Topology;
use tokio::sync::watch;

use crate::metrics::{self, MetricsArgs};

mod auth;
use crate::slurm_cmd;

/// How often the board is refreshed while a browser watches: changes reach the page
/// within this and one refresh's time.
const REFRESH: Duration = Duration::from_secs(1);

#[derive(Args)]
pub struct ServeArgs {
    /// Address to listen on. Loopback by default: the page and /metrics show what Slurm
    /// shows the user running `fairway serve` (SlurmUser sees every job), so expose it
    /// only behind a proxy that admits those allowed to see that.
    #[arg(long, default_value = "127.0.0.1:9814")]
    listen: String,
    /// Alert when GPUs idle while a job that would fit them pends this long
    /// (Slurm's time syntax: minutes, MM:SS, HH:MM:SS, D-HH:MM:SS).
    #[arg(long, default_value = "15", value_parser = slurm_time)]
    alert_gpus_idle: u64,
    /// Alert when an account's usage is a quarter of its siblings' away from its
    /// shares this long.
    #[arg(long, default_value = "6:00:00", value_parser = slurm_time)]
    alert_share_gap: u64,
    /// How viewers are told apart: `munge` signs each in with a munge credential and
    /// shows them what Slurm shows them (PrivateData); `none` shows everyone what the
    /// user running `fairway serve` sees. [default: none on a loopback address; any
    /// other address must say]
    #[arg(long, value_enum)]
    auth: Option<auth::Mode>,
    /// A file holding the bearer token Prometheus sends for /metrics under
    /// `--auth munge` (Prometheus' `authorization: credentials_file`).
    #[arg(long)]
    metrics_token_file: Option<PathBuf>,
    /// Further host names to answer on a loopback address, for a proxy on the same host
    /// that forwards its own name in `Host` (otherwise only loopback names are served,
    /// against DNS rebinding).
    #[arg(long, value_delimiter = ',')]
    allow_host: Vec<String>,
    #[command(flatten)]
    metrics: MetricsArgs,
}

fn slurm_time(s: &str) -> Result<u64, String> {
    fairway_core::time::parse_duration(s).map_err(|e| e.to_string())
}

/// What every request handler shares.
struct Server {
    slurm_conf: PathBuf,
    auth: auth::Auth,
    /// Listening on loopback: only loopback host names and these are served (see [`guard`]).
    loopback: bool,
    allow_host: Vec<String>,
    frames: watch::Sender<Arc<Frame>>,
    /// Serializes refreshes; holds the alert watch and topology files read so far.
    refresher: Mutex<Refresher>,
    /// The last `/metrics` text and when it was made.
    scraped: Mutex<Option<(Instant, String)>>,
}

/// One refresh, ready to send.
#[derive(Default)]
struct Frame {
    at: Option<Instant>,
    board: Board,
    /// The board as JSON, for the page.
    json: String,
}

struct Refresher {
    watch: Watch,
    state_dir: Option<PathBuf>,
    topology: BTreeMap<PathBuf, Option<Topology>>,
}

pub fn serve(a: ServeArgs) -> anyhow::Result<()> {
    let rules = AlertRules {
        gpus_idle_for: a.alert_gpus_idle as i64,
        share_gap_for: a.alert_share_gap as i64,
        ..AlertRules::default()
    };
    let listener = std::net::TcpListener::bind(&a.listen).with_context(|| format!("cannot listen on {}", a.listen))?;
    let local = listener.local_addr()?;
    let mode = match a.auth {
        Some(m) => m,
        None if local.ip().is_loopback() => auth::Mode::None,
        None => anyhow::bail!(
            "{local} is reachable from other hosts: pass --auth munge (viewers sign in and see what Slurm shows \
             them) or --auth none (everyone who connects sees every job, e.g. behind a proxy that admits admins)"
        ),
    };
    let server = Arc::new(Server {
        slurm_conf: a.metrics.slurm_conf.clone(),
        auth: auth::Auth::new(mode, a.metrics_token_file.as_deref())?,
        loopback: local.ip().is_loopback(),
        allow_host: a.allow_host.clone(),
        frames: watch::channel(Arc::new(Frame::default())).0,
        refresher: Mutex::new(Refresher { watch: Watch::new(rules), state_dir: None, topology: BTreeMap::new() }),
        scraped: Mutex::new(None),
    });
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async move {
        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        eprintln!("fairway serve: http://{local}/ (the page), http://{local}/metrics; sign-in: {mode:?}");
        tokio::spawn(refresh_while_watched(server.clone()));
        let app = Router::new()
            .route("/", get(page))
            .route("/ws", get(socket))
            .route("/api/board", get(board))
            .route("/api/whoami", get(whoami))
            .route("/api/login", post(login))
            .route("/api/explain/{job}", get(explain))
            .route("/metrics", get(scrape))
            .layer(axum::middleware::from_fn_with_state(server.clone(), guard))
            .with_state(server);
        axum::serve(listener, app).await.context("fairway serve stopped")
    })
}

/// Refuses what a browser may be tricked into sending. Another site's page may open a
/// WebSocket to any address (browsers apply no same-origin rule to them) or post a
/// sign-in: an `Origin` other than this server's is refused. And a site whose name an
/// attacker points at 127.0.0.1 (DNS rebinding) would be same-origin with itself: on
/// loopback, only loopback host names (and `--allow-host`) are served. Clients that send neither header
/// (curl, Prometheus over HTTP/1.0) pass.
async fn guard(
    State(server): State<Arc<Server>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let headers = request.headers();
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let origin = headers.get(header::ORIGIN).and_then(|h| h.to_str().ok());
    if let Some(origin) = origin {
        let authority = origin.split_once("://").map_or(origin, |(_, a)| a);
        if Some(authority) != host {
            return (StatusCode::FORBIDDEN, format!("requests from {origin}'s pages are refused\n")).into_response();
        }
    }
    if server.loopback {
        if let Some(host) = host {
            let name =
                host.rsplit_once(':').map_or(host, |(n, port)| if port.parse::<u16>().is_ok() { n } else { host });
            let name = name.trim_start_matches('[').trim_end_matches(']');
            let local = name == "localhost"
                || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
                || server.allow_host.iter().any(|h| h.eq_ignore_ascii_case(name));
            if !local {
                return (StatusCode::FORBIDDEN, format!("{host} is not this host's loopback address\n"))
                    .into_response();
            }
        }
    }
    next.run(request).await
}

/// Refreshes once a [`REFRESH`] while any page is connected.
async fn refresh_while_watched(server: Arc<Server>) {
    let mut tick = tokio::time::interval(REFRESH);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if server.frames.receiver_count() > 0 {
            if let Err(e) = refresh(&server).await {
                eprintln!("fairway serve: {e:#}");
            }
        }
    }
}

/// The latest frame, refreshed first unless one was made within [`REFRESH`]; pages
/// hear of it when the board changed.
async fn refresh(server: &Arc<Server>) -> anyhow::Result<Arc<Frame>> {
    let server = server.clone();
    // Slurm's commands block: off the runtime's thread.
    tokio::task::spawn_blocking(move || server.refresh()).await?
}

impl Server {
    fn refresh(&self) -> anyhow::Result<Arc<Frame>> {
        let mut refresher = self.refresher.lock().expect("not poisoned");
        let last = self.frames.borrow().clone();
        if last.at.is_some_and(|at| at.elapsed() < REFRESH) {
            return Ok(last);
        }
        let board = read_board(&mut refresher, &self.slurm_conf)?;
        let changed = last.board != Board { taken_at: last.board.taken_at, ..board.clone() };
        let json = serde_json::to_string(&board)?;
        let frame = Arc::new(Frame { at: Some(Instant::now()), board, json });
        // Same board: keep the new time, wake no page.
        self.frames.send_if_modified(|f| {
            *f = frame.clone();
            changed
        });
        Ok(frame)
    }
}

fn read_board(r: &mut Refresher, slurm_conf: &Path) -> anyhow::Result<Board> {
    let run = |p: &str, args: &[&str]| slurm_cmd::run(Path::new(p), args);
    let squeue = run("squeue", &["-h", "-a", "-t", "PENDING,RUNNING", "-S", "-p,i", "-o", dashboard::SQUEUE_FORMAT])?;
    let sinfo = run("sinfo", &["-N", "-h", "-O", dashboard::SINFO_FORMAT])?;
    let sshare = run("sshare", &["-a", "-h", "-P", "-o", dashboard::SSHARE_FORMAT])?;
    if r.state_dir.is_none() {
        r.state_dir = slurm_cmd::state_save_location().ok();
    }
    let toml = config::locate_from_env(slurm_conf);
    let config = Config::load(&toml).ok().flatten();
    let (status, calibration) = r.state_dir.as_deref().map_or((None, None), |d| metrics::published(d, config.as_ref()));
    // Topology files named in fairway.toml's [gpu.topology], each read once.
    let mut topology = BTreeMap::new();
    if let Some(c) = &config {
        let dir = toml.parent().map(Path::to_path_buf).unwrap_or_default();
        for node in sinfo.lines().filter_map(|l| l.split('|').next()).map(str::trim) {
            let Some(file) = c.gpu.topology_file(node, &dir) else { continue };
            let t = r.topology.entry(file.clone()).or_insert_with(|| Topology::load(&file).ok());
            if let Some(t) = t {
                topology.insert(node.to_string(), t.clone());
            }
        }
    }
    let now = jiff::Timestamp::now().as_second();
    let mut board = Board::read(
        &Reading { squeue: &squeue, sinfo: &sinfo, sshare: &sshare, topology: &topology, now },
        status.as_ref(),
    );
    r.watch.observe(&mut board, status.as_ref(), calibration.as_ref());
    Ok(board)
}

async fn page() -> Html<&'static str> {
    Html(include_str!("serve/page.html"))
}

impl Server {
    /// The frame's board as `viewer` may see it, as JSON.
    fn json_for(&self, frame: &Frame, viewer: &Viewer) -> String {
        if viewer.sees_all {
            return frame.json.clone();
        }
        serde_json::to_string(&frame.board.as_seen_by(viewer, self.auth.private)).unwrap_or_default()
    }
}

fn sign_in_first() -> Response {
    (StatusCode::UNAUTHORIZED, format!("sign in first: run `munge -s {}` and paste what it prints\n", auth::PAYLOAD))
        .into_response()
}

async fn board(State(server): State<Arc<Server>>, headers: HeaderMap) -> Response {
    let Some(viewer) = server.auth.viewer(&headers) else { return sign_in_first() };
    match refresh(&server).await {
        Ok(f) => ([(header::CONTENT_TYPE, "application/json")], server.json_for(&f, &viewer)).into_response(),
        Err(e) => error(e),
    }
}

/// Who the page is signed in as (401 until signed in, under `--auth munge`).
async fn whoami(State(server): State<Arc<Server>>, headers: HeaderMap) -> Response {
    match server.auth.viewer(&headers) {
        Some(v) => axum::Json(serde_json::json!({ "user": v.user, "sees_all": v.sees_all, "auth": server.auth.mode.to_possible_value().map(|v| v.get_name().to_string()) })).into_response(),
        None => sign_in_first(),
    }
}

/// Signs in with the munge credential in the body.
async fn login(State(server): State<Arc<Server>>, credential: String) -> Response {
    let s = server.clone();
    match tokio::task::spawn_blocking(move || s.auth.sign_in(&credential)).await {
        Ok(Ok((viewer, cookie))) => (
            [(header::SET_COOKIE, cookie)],
            axum::Json(serde_json::json!({ "user": viewer.user, "sees_all": viewer.sees_all })),
        )
            .into_response(),
        Ok(Err(e)) => (StatusCode::UNAUTHORIZED, format!("{e:#}\n")).into_response(),
        Err(e) => error(e.into()),
    }
}

/// The page's live feed: the board now, then each board that differs.
async fn socket(State(server): State<Arc<Server>>, headers: HeaderMap, upgrade: WebSocketUpgrade) -> Response {
    let Some(viewer) = server.auth.viewer(&headers) else { return sign_in_first() };
    let frames = server.frames.subscribe();
    upgrade.on_upgrade(move |ws| feed(ws, frames, server, viewer))
}

async fn feed(mut ws: WebSocket, mut frames: watch::Receiver<Arc<Frame>>, server: Arc<Server>, viewer: Viewer) {
    // The first board without waiting for the next tick.
    let first = match refresh(&server).await {
        Ok(f) => f,
        Err(e) => {
            let _ =
                ws.send(Message::Text(format!("{{\"error\":{}}}", serde_json::json!(format!("{e:#}"))).into())).await;
            return;
        }
    };
    frames.mark_unchanged();
    if ws.send(Message::Text(server.json_for(&first, &viewer).into())).await.is_err() {
        return;
    }
    loop {
        tokio::select! {
            changed = frames.changed() => {
                if changed.is_err() {
                    return;
                }
                let frame = frames.borrow_and_update().clone();
                if ws.send(Message::Text(server.json_for(&frame, &viewer).into())).await.is_err() {
                    return;
                }
            }
            // The page sends nothing; a close or an error ends the feed.
            msg = ws.recv() => {
                if !matches!(msg, Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Text(_) | Message::Binary(_)))) {
                    return;
                }
            }
        }
    }
}

async fn explain(State(server): State<Arc<Server>>, headers: HeaderMap, UrlPath(job): UrlPath<String>) -> Response {
    let Some(viewer) = server.auth.viewer(&headers) else { return sign_in_first() };
    if !crate::explain::is_job_id(&job) {
        return (StatusCode::BAD_REQUEST, format!("`{job}` is not a job id (digits)\n")).into_response();
    }
    let conf = server.slurm_conf.clone();
    let private = server.auth.private;
    let shown = tokio::task::spawn_blocking(move || {
        let e = crate::explain::explanation(&job, &conf)?;
        e.as_seen_by(&viewer, private).with_context(|| format!("job {job}: not a job of yours (PrivateData=jobs)"))
    });
    match shown.await {
        Ok(Ok(e)) => ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], e.render()).into_response(),
        Ok(Err(e)) => (StatusCode::NOT_FOUND, format!("{e:#}\n")).into_response(),
        Err(e) => error(e.into()),
    }
}

/// `/metrics`: the scrape `fairway metrics` prints, and the alerts the watch holds.
/// Scrapes within a second of each other share one reading.
async fn scrape(State(server): State<Arc<Server>>, headers: HeaderMap) -> Response {
    if !server.auth.may_scrape(&headers) {
        return (StatusCode::UNAUTHORIZED, "/metrics: sign in as an operator, or send --metrics-token-file's token\n")
            .into_response();
    }
    let cached = server.scraped.lock().expect("not poisoned").clone();
    if let Some((_, text)) = cached.filter(|(at, _)| at.elapsed() < REFRESH) {
        return ([(header::CONTENT_TYPE, fairway_core::metrics::CONTENT_TYPE)], text).into_response();
    }
    let frame = match refresh(&server).await {
        Ok(f) => f,
        Err(e) => return error(e),
    };
    let conf = server.slurm_conf.clone();
    let alerts = frame.board.alerts.clone();
    match tokio::task::spawn_blocking(move || metrics::scrape(&conf, Some(&alerts))).await {
        Ok(Ok(text)) => {
            *server.scraped.lock().expect("not poisoned") = Some((Instant::now(), text.clone()));
            ([(header::CONTENT_TYPE, fairway_core::metrics::CONTENT_TYPE)], text).into_response()
        }
        Ok(Err(e)) => error(e),
        Err(e) => error(e.into()),
    }
}

fn error(e: anyhow::Error) -> Response {
    (StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}\n")).into_response()
}
