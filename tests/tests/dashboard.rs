//! `fairway serve`'s page in a real browser (Debian's chromium, driven over the DevTools
//! protocol) against real Slurm: the queue, GPUs drawn by NVLink domain, a job submitted
//! during the test arriving over the WebSocket, the GPUs-idle alert on the page and in
//! /metrics, and explain for a clicked job.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fairway_tests::{fairway_bin, free_port, Cluster, ClusterSpec, Slurm};

#[path = "common/browser.rs"]
mod browser;
use browser::{chromium, js, screenshot, unix_ms, wait};

/// Kills `fairway serve` however the test ends.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn http_get(addr: &str, path: &str) -> std::io::Result<String> {
    http(addr, "GET", path, "", "")
}

/// One HTTP/1.0 request (`headers`: extra lines, each ending in CRLF); the whole answer.
fn http(addr: &str, method: &str, path: &str, headers: &str, body: &str) -> std::io::Result<String> {
    let mut s = TcpStream::connect(addr)?;
    write!(s, "{method} {path} HTTP/1.0\r\n{headers}Content-Length: {}\r\n\r\n{body}", body.len())?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    Ok(text)
}

/// The status line a WebSocket handshake from a page of `origin` gets.
fn ws_answer(addr: &str, origin: &str) -> String {
    use std::io::BufRead as _;
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET /ws HTTP/1.1\r\nHost: {addr}\r\nOrigin: {origin}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    )
    .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(s).read_line(&mut line).unwrap();
    line
}

fn start_serve(fairway: &str, c: &Cluster, args: &[&str]) -> Serve {
    Serve(
        Command::new(fairway)
            .arg("serve")
            .args(args)
            .env("SLURM_CONF", c.slurm_conf())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    )
}

#[test]
fn the_page_shows_the_queue_live_and_alerts_on_idle_gpus() {
    let fairway = fairway_bin();
    let topology = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/topology/pcie-a100-nvlink-pairs.toml");
    let spec = ClusterSpec {
        slurm_conf_extra: vec!["PriorityCalcPeriod=1".into(), "PriorityWeightQOS=500".into()],
        gres: Some(("gpu:a100:4".into(), "Name=gpu Type=a100 File={dir}/dev/nvidia[0-3]\n".into())),
        fairway_toml: Some(format!("[gpu.topology]\n\"fwn1\" = \"{}\"\n", topology.canonicalize().unwrap().display())),
        ..ClusterSpec::default()
    };
    let c = Cluster::start(&spec).expect("cluster starts");
    let out = c.cmd("sacctmgr", &["-i", "modify", "qos", "high", "set", "GrpTRES=gres/gpu=2"]).unwrap();
    assert!(out.ok(), "{out:?}");
    let running = c.sbatch("fw_alice", &["--qos=high", "--gres=gpu:2", "--wrap=sleep 300"]).unwrap();
    c.wait_job(running, &["RUNNING"], Duration::from_secs(60)).unwrap();
    let limited = c.sbatch("fw_alice", &["--qos=high", "--gres=gpu:2", "-J", "eval<b>", "--wrap=true"]).unwrap();
    let reason = || c.cmd("squeue", &["-h", "-j", &limited.to_string(), "-o", "%r"]).unwrap().stdout;
    c.wait_until("the QoS GPU limit as the reason", || Ok(reason().trim().starts_with("QOSGrp"))).unwrap();

    let addr = format!("127.0.0.1:{}", free_port());
    let _serve = start_serve(&fairway, &c, &["--listen", &addr, "--alert-gpus-idle", "0:03"]);
    c.wait_until("fairway serve answers", || Ok(http_get(&addr, "/").is_ok())).unwrap();
    // Another site's page cannot open the feed (browsers let any page open a WebSocket
    // anywhere), and a name pointed at 127.0.0.1 (DNS rebinding) is not served.
    let foreign = ws_answer(&addr, "http://evil.example");
    assert!(foreign.starts_with("HTTP/1.1 403"), "{foreign}");
    let own = ws_answer(&addr, &format!("http://{addr}"));
    assert!(own.starts_with("HTTP/1.1 101"), "the page's own origin is let in: {own}");
    let rebound = http(&addr, "GET", "/api/board", "Host: evil.example:80\r\n", "").unwrap();
    assert!(rebound.starts_with("HTTP/1.0 403"), "{rebound}");

    let browser = chromium();
    let tab = browser.new_tab().unwrap();
    tab.navigate_to(&format!("http://{addr}/")).unwrap().wait_until_navigated().unwrap();
    let loaded_at = js(&tab, "window.fairway.loadedAt");

    // The queue as squeue has it, the job name as text (not markup).
    wait(&tab, &format!("tr[data-job=\"{running}\"]"), 20);
    let row = wait(&tab, &format!("tr[data-job=\"{limited}\"]"), 20);
    let text = row.get_inner_text().unwrap();
    assert!(text.contains("fw_alice") && text.contains("eval<b>") && text.contains("QOSGrp"), "{text}");
    // GPUs by NVLink domain: the node's two pairs, two GPUs in use.
    wait(&tab, "[data-node=\"fwn1\"] .gpu", 10);
    assert_eq!(js(&tab, "document.querySelectorAll('[data-node=\"fwn1\"] .domain').length"), 2);
    assert_eq!(js(&tab, "document.querySelectorAll('[data-node=\"fwn1\"] .gpu.used').length"), 2);
    assert_eq!(js(&tab, "document.querySelectorAll('[data-node=\"fwn1\"] .gpu').length"), 4);
    // The fair-share tree, accounts and users.
    wait(&tab, "[data-account=\"vision\"][data-user=\"fw_alice\"]", 10);

    // A job submitted now reaches the open page through the WebSocket.
    let before = unix_ms();
    let started = Instant::now();
    let new = c.sbatch("fw_bob", &["--hold", "--wrap=true"]).unwrap();
    let submitted = unix_ms();
    let row = wait(&tab, &format!("tr[data-job=\"{new}\"]"), 15);
    let seen: u128 = row.get_attribute_value("data-seen").unwrap().unwrap().parse().unwrap();
    eprintln!(
        "job {new}: sbatch took {} ms; on the page {} ms after sbatch returned ({} ms after it started; test saw it at {} ms)",
        submitted - before,
        seen.saturating_sub(submitted),
        seen.saturating_sub(before),
        started.elapsed().as_millis()
    );
    assert_eq!(js(&tab, "window.fairway.loadedAt"), loaded_at, "the page was not reloaded");
    assert!(js(&tab, "window.fairway.messages").as_u64().unwrap() >= 2, "boards came over the socket");

    // GPUs idle while a job that would fit them pends (on a QoS limit) past the
    // alert's 3 s: on the page and in /metrics.
    let alert = wait(&tab, ".alert[data-kind=\"gpus_idle_while_jobs_pend\"]", 30);
    let text = alert.get_inner_text().unwrap();
    assert!(text.contains("2 GPUs idle in debug while 1 GPU job(s)") && text.contains("QOSGrp"), "{text}");
    let metrics = http_get(&addr, "/metrics").unwrap();
    assert!(metrics.contains("fairway_alert{alert=\"gpus_idle_while_jobs_pend\",subject=\"debug\"} 1\n"), "{metrics}");

    // Explain for a clicked job.
    tab.find_element(&format!("tr[data-job=\"{limited}\"]")).unwrap().click().unwrap();
    c.wait_until("explain shown", || {
        Ok(js(&tab, "document.getElementById('explain-text').textContent").as_str().unwrap_or("").contains("limit"))
    })
    .unwrap();
    let explained = js(&tab, "document.getElementById('explain-text').textContent");
    assert!(explained.as_str().unwrap().contains("the QoS high has reached a limit"), "{explained}");

    screenshot(&tab, "dashboard.png", Some(c.dir()));
    drop(tab);
    drop(browser);
    c.stop().unwrap();
}

#[test]
fn signed_in_viewers_see_what_slurm_shows_them() {
    let fairway = fairway_bin();
    let spec = ClusterSpec {
        slurm_conf_extra: vec!["PriorityCalcPeriod=1".into(), "PrivateData=jobs,usage".into()],
        ..ClusterSpec::default()
    };
    let c = Cluster::start(&spec).expect("cluster starts");
    let alices = c.sbatch("fw_alice", &["--wrap=sleep 300"]).unwrap();
    c.wait_job(alices, &["RUNNING"], Duration::from_secs(60)).unwrap();
    let bobs = c.sbatch("fw_bob", &["--hold", "--wrap=true"]).unwrap();
    let socket = c.dir().join("munge/munge.socket.2").display().to_string();
    let credential = |user: &str, payload: &str| {
        let out = c.run_as(user, "munge", &["-s", payload, "-S", &socket]).unwrap();
        assert!(out.ok(), "{out:?}");
        out.stdout.trim().to_string()
    };

    // Any address but loopback must say how viewers are told apart.
    let open = Command::new(&fairway)
        .args(["serve", "--listen", &format!("0.0.0.0:{}", free_port())])
        .env("SLURM_CONF", c.slurm_conf())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&open.stderr);
    assert!(!open.status.success() && said.contains("pass --auth munge"), "{said}");

    let token = c.dir().join("metrics-token");
    std::fs::write(&token, "a-token-prometheus-is-given\n").unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    let token_arg = token.display().to_string();
    let _serve = start_serve(&fairway, &c, &["--listen", &addr, "--auth", "munge", "--metrics-token-file", &token_arg]);
    c.wait_until("fairway serve answers", || Ok(http_get(&addr, "/").is_ok())).unwrap();
    assert!(http_get(&addr, "/api/board").unwrap().starts_with("HTTP/1.0 401"));
    assert!(http_get(&addr, "/metrics").unwrap().starts_with("HTTP/1.0 401"));
    let scraped = http(&addr, "GET", "/metrics", "Authorization: Bearer a-token-prometheus-is-given\r\n", "").unwrap();
    assert!(scraped.starts_with("HTTP/1.0 200") && scraped.contains("fairway_jobs{"), "{scraped}");

    // Credentials munge will not vouch for, or made for something else, sign no one in.
    let wrong = http(&addr, "POST", "/api/login", "", &credential("fw_bob", "something else")).unwrap();
    assert!(wrong.starts_with("HTTP/1.0 401") && wrong.contains("not made for fairway serve"), "{wrong}");
    let forged = http(&addr, "POST", "/api/login", "", "MUNGE:AAAAnot-a-credential:").unwrap();
    assert!(forged.starts_with("HTTP/1.0 401") && forged.contains("munge refused"), "{forged}");
    let once = credential("fw_bob", "fairway-serve");
    let signed = http(&addr, "POST", "/api/login", "", &once).unwrap();
    assert!(signed.starts_with("HTTP/1.0 200"), "{signed}");
    let replayed = http(&addr, "POST", "/api/login", "", &once).unwrap();
    assert!(replayed.starts_with("HTTP/1.0 401") && replayed.contains("eplayed"), "{replayed}");
    let cookie = signed.lines().find_map(|l| l.strip_prefix("set-cookie: ")).unwrap().split(';').next().unwrap();
    let as_bob = |path: &str| http(&addr, "GET", path, &format!("Cookie: {cookie}\r\n"), "").unwrap();
    let peek = as_bob(&format!("/api/explain/{alices}"));
    assert!(peek.starts_with("HTTP/1.0 404") && peek.contains("not a job of yours"), "{peek}");
    assert!(!peek.contains("fw_alice"), "{peek}");
    let own = as_bob(&format!("/api/explain/{bobs}"));
    assert!(own.starts_with("HTTP/1.0 200") && own.contains("[JobHeldUser]"), "{own}");
    assert!(as_bob("/metrics").starts_with("HTTP/1.0 401"), "a user is no operator");

    // In the browser: sign in, then exactly the jobs and fair-share rows squeue and
    // sshare show fw_bob.
    let browser = chromium();
    let tab = browser.new_tab().unwrap();
    tab.navigate_to(&format!("http://{addr}/")).unwrap().wait_until_navigated().unwrap();
    wait(&tab, "#login:not([hidden])", 10);
    let pasted = serde_json::to_string(&credential("fw_bob", "fairway-serve")).unwrap();
    js(&tab, &format!("document.getElementById('credential').value = {pasted}"));
    tab.find_element("#sign-in").unwrap().click().unwrap();
    wait(&tab, &format!("tr[data-job=\"{bobs}\"]"), 20);
    let who = js(&tab, "document.getElementById('who').textContent");
    assert_eq!(who, "signed in as fw_bob", "{who}");
    let on_page = js(
        &tab,
        "[...new Set([...document.querySelectorAll('tr[data-job]')].map(r => r.dataset.job))].sort().join(',')",
    );
    let squeue = c.run_as("fw_bob", "squeue", &["-h", "-o", "%i"]).unwrap().stdout;
    let mut shown: Vec<&str> = squeue.lines().map(str::trim).collect();
    shown.sort();
    assert_eq!(on_page, shown.join(","), "the page shows fw_bob the jobs squeue shows him");
    assert!(!on_page.as_str().unwrap().contains(&alices.to_string()));
    let rows = js(
        &tab,
        "[...document.querySelectorAll('.share')].map(r => r.dataset.account + '/' + r.dataset.user).join(',')",
    );
    let sshare = c.run_as("fw_bob", "sshare", &["-a", "-h", "-P", "-o", "Account,User"]).unwrap().stdout;
    eprintln!("sshare as fw_bob under PrivateData=usage:\n{sshare}");
    let expected: Vec<String> = sshare
        .lines()
        .map(|l| l.split('|').map(str::trim).collect::<Vec<_>>().join("/"))
        .filter(|r| r != "root/")
        .collect();
    assert_eq!(rows, expected.join(","), "the page shows fw_bob the associations sshare shows him");
    drop(tab);
    drop(browser);
    c.stop().unwrap();
}
