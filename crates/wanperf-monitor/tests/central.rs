//! `wanperf central` in-process on loopback: signed batches are stored once however often they
//! are sent, strangers and forgers are refused, the grid and pair JSON follow the results, a
//! throughput drop becomes an event that reaches the webhook, and a restarted central
//! rebuilds its view from the archive.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;
use wanperf_mesh::summary::LatencySummary;
use wanperf_mesh::wire::{
    Ack, Batch, Clock, MeshResult, ResultKind, RunStatus, ThroughputResult, TraceHop, TraceResult,
};
use wanperf_monitor::central::{run, CentralConfig};
use wanperf_proto::auth::PrivateKey;

struct Dir(PathBuf);
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tmp(tag: &str) -> Dir {
    let d = std::env::temp_dir().join(format!("wanperf-central-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    Dir(d)
}

fn key(i: u8) -> PrivateKey {
    PrivateKey::from_seed([i; 32], &format!("h{i}"))
}

fn mesh_text(with_key_for_h3: bool) -> String {
    let mut m = String::from("[mesh]\nname = \"m\"\nsummary = \"60s\"\n[[site]]\nname = \"s\"\n");
    for i in 1..=3u8 {
        m.push_str(&format!("[[host]]\nname = \"h{i}\"\nsite = \"s\"\naddress = \"127.0.0.{i}\"\n"));
        if i < 3 || with_key_for_h3 {
            m.push_str(&format!("key = \"{}\"\n", key(i).public().to_line()));
        }
    }
    m.push_str("[[group]]\nname = \"all\"\ntype = \"mesh\"\nmembers = [\"h1\", \"h2\", \"h3\"]\n");
    m.push_str("[[test]]\nname = \"rtt\"\ntype = \"latency\"\ngroup = \"all\"\n");
    m.push_str("[[test]]\nname = \"bulk\"\ntype = \"throughput\"\ngroup = \"all\"\ninterval = \"10m\"\n");
    m.push_str("[[test]]\nname = \"route\"\ntype = \"trace\"\ngroup = \"all\"\ninterval = \"10m\"\n");
    m
}

struct Central {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    join: Option<std::thread::JoinHandle<()>>,
    log: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Central {
    fn start(dir: &Path, webhook: Option<String>) -> Central {
        let cfg = CentralConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            db: dir.join("archive.sqlite").display().to_string(),
            mesh_path: dir.join("mesh.toml"),
            insecure: false,
            webhook,
            reload_every: Duration::from_millis(200),
            extra_listeners: Vec::new(),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (s, l) = (stop.clone(), log.clone());
        let join = std::thread::spawn(move || {
            let logf: wanperf_monitor::Log = Arc::new(move |m: &str| l.lock().unwrap().push(m.to_string()));
            run(cfg, s, move |a| tx.send(a).unwrap(), logf).unwrap();
        });
        let addr = rx.recv_timeout(Duration::from_secs(20)).expect("central did not become ready");
        Central { addr, stop, join: Some(join), log }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn get(&self, path: &str) -> serde_json::Value {
        ureq::get(&self.url(path)).call().unwrap().into_json().unwrap()
    }

    /// Waits (at most 10 s) for a log line `pred` accepts. Alerts are logged by the alerter's
    /// own task, after the event is already visible through the API; the mesh is reloaded by a
    /// task of its own.
    fn logged(&self, pred: impl Fn(&str) -> bool) -> bool {
        let until = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            if self.log.lock().unwrap().iter().any(|l| pred(l)) {
                return true;
            }
            if std::time::Instant::now() > until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Central {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(j) = self.join.take() {
            j.join().unwrap();
        }
    }
}

fn now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64()
}

fn tput(seq: u64, src: &str, dst: &str, t: f64, bps: f64) -> MeshResult {
    MeshResult {
        seq,
        test: "bulk".into(),
        kind: ResultKind::Throughput,
        src: src.into(),
        dst: dst.into(),
        start: t,
        end: t + 10.0,
        status: RunStatus::Ok,
        reason: None,
        latency: None,
        throughput: Some(ThroughputResult {
            bps,
            streams: 1,
            window: Some(262_144),
            retransmits: Some(0),
            rtt_ms: None,
            verdict: None,
        }),
        trace: None,
        capacity: None,
    }
}

fn latency(seq: u64, src: &str, dst: &str, t: f64, median: f64) -> MeshResult {
    let probes: Vec<wanperf_mesh::summary::Probe> = (0..600)
        .map(|i| wanperf_mesh::summary::Probe {
            seq: i,
            sent: t + i as f64 * 0.1,
            rtt_ms: Some(median + (i % 7) as f64 * 0.01),
            owd_fwd_ms: None,
            owd_rev_ms: None,
        })
        .collect();
    let s: LatencySummary = wanperf_mesh::summary::summarize(t, t + 60.0, &probes, 0);
    MeshResult {
        seq,
        test: "rtt".into(),
        kind: ResultKind::Latency,
        src: src.into(),
        dst: dst.into(),
        start: t,
        end: t + 60.0,
        status: RunStatus::Ok,
        reason: None,
        latency: Some(s),
        throughput: None,
        trace: None,
        capacity: None,
    }
}

/// A trace result of src → dst through `hops` (addresses), reaching the destination.
fn trace(seq: u64, src: &str, dst: &str, t: f64, hops: &[&str]) -> MeshResult {
    let hops = hops
        .iter()
        .enumerate()
        .map(|(i, a)| TraceHop {
            ttl: i as u8 + 1,
            addrs: vec![a.to_string()],
            loss_pct: 0.0,
            path_loss_pct: 0.0,
            rtt_ms: Some(10.0 * (i + 1) as f64),
            note: None,
        })
        .collect();
    MeshResult {
        seq,
        test: "route".into(),
        kind: ResultKind::Trace,
        src: src.into(),
        dst: dst.into(),
        start: t,
        end: t + 3.0,
        status: RunStatus::Ok,
        reason: None,
        latency: None,
        throughput: None,
        trace: Some(TraceResult { hops, reached: true, path_mtu: None, rounds: 3, one_way: None }),
        capacity: None,
    }
}

/// Posts a batch as `agent` signed with `k` (None: unsigned); (HTTP status, body).
fn post(c: &Central, agent: &str, k: Option<&PrivateKey>, results: Vec<MeshResult>) -> (u16, serde_json::Value) {
    post_clock(c, agent, k, results, None)
}

/// [`post`] with the agent's clock.
fn post_clock(
    c: &Central,
    agent: &str,
    k: Option<&PrivateKey>,
    results: Vec<MeshResult>,
    clock: Option<Clock>,
) -> (u16, serde_json::Value) {
    let body = serde_json::to_vec(&Batch { agent: agent.into(), results, clock }).unwrap();
    let time = now() as i64;
    let mut req =
        ureq::post(&c.url("/api/v1/results")).set("x-wanperf-agent", agent).set("x-wanperf-time", &time.to_string());
    if let Some(k) = k {
        req = req.set("x-wanperf-signature", &k.sign_message(&wanperf_mesh::wire::signing_message(agent, time, &body)));
    }
    match req.send_bytes(&body) {
        Ok(r) => (r.status(), r.into_json().unwrap()),
        Err(ureq::Error::Status(code, r)) => (code, r.into_json().unwrap_or_default()),
        Err(e) => panic!("{e}"),
    }
}

/// A one-request HTTP server that hands over the body it receives.
fn webhook() -> (String, mpsc::Receiver<String>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", l.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for s in l.incoming().take(4) {
            let Ok(mut s) = s else { continue };
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut len = 0;
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; len];
            r.read_exact(&mut body).unwrap();
            let _ = s.write_all(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            let _ = tx.send(String::from_utf8_lossy(&body).into_owned());
        }
    });
    (url, rx)
}

#[test]
fn batches_are_stored_once_and_strangers_are_refused() {
    let d = tmp("auth");
    std::fs::write(d.0.join("mesh.toml"), mesh_text(false)).unwrap();
    let c = Central::start(&d.0, None);
    let t = now() - 3600.0;
    let batch = vec![latency(1, "h1", "h2", t, 20.0), tput(2, "h1", "h2", t, 90e6)];
    let (code, v) = post(&c, "h1", Some(&key(1)), batch.clone());
    assert_eq!(code, 200, "{v}");
    let ack: Ack = serde_json::from_value(v).unwrap();
    assert_eq!((ack.accepted, ack.duplicates, ack.upto), (2, 0, 2));
    // A retry (the answer was lost) stores nothing twice.
    let mut again = batch.clone();
    again.push(latency(3, "h1", "h2", t + 60.0, 20.0));
    let ack: Ack = serde_json::from_value(post(&c, "h1", Some(&key(1)), again).1).unwrap();
    assert_eq!((ack.accepted, ack.duplicates, ack.upto), (1, 2, 3));

    // Another host's key, an unknown host, an unsigned batch, a host without a key.
    let (code, v) = post(&c, "h1", Some(&key(2)), vec![latency(4, "h1", "h2", t, 1.0)]);
    assert_eq!(code, 401, "{v}");
    assert!(v["error"].as_str().unwrap().contains("signature does not verify"), "{v}");
    let (code, v) = post(&c, "mallory", Some(&key(9)), vec![]);
    assert_eq!(code, 403, "{v}");
    assert!(v["error"].as_str().unwrap().contains("not a host of this mesh"), "{v}");
    let (code, _) = post(&c, "h2", None, vec![]);
    assert_eq!(code, 401);
    let (code, v) = post(&c, "h3", Some(&key(3)), vec![]);
    assert_eq!(code, 403, "{v}");
    assert!(v["error"].as_str().unwrap().contains("no key in the mesh file"), "{v}");
    // A body altered after signing.
    let body = serde_json::to_vec(&Batch { agent: "h1".into(), results: vec![], clock: None }).unwrap();
    let time = now() as i64;
    let sig = key(1).sign_message(&wanperf_mesh::wire::signing_message("h1", time, &body));
    let forged =
        serde_json::to_vec(&Batch { agent: "h1".into(), results: vec![tput(9, "h1", "h2", t, 1.0)], clock: None })
            .unwrap();
    let r = ureq::post(&c.url("/api/v1/results"))
        .set("x-wanperf-agent", "h1")
        .set("x-wanperf-time", &time.to_string())
        .set("x-wanperf-signature", &sig)
        .send_bytes(&forged);
    assert!(matches!(r, Err(ureq::Error::Status(401, _))));

    // Exactly the three genuine results are in the archive.
    let mut store = wanperf_archive::open_read_only(d.0.join("archive.sqlite").to_str().unwrap()).unwrap();
    let rows = store
        .mesh_results(&wanperf_archive::MeshQuery { from_unix: 0.0, to_unix: 1e12, ..Default::default() })
        .unwrap();
    assert_eq!(rows.iter().map(|r| r.seq).collect::<Vec<_>>(), vec![1, 2, 3]);
    let metrics = ureq::get(&c.url("/metrics")).call().unwrap().into_string().unwrap();
    assert!(metrics.contains("wanperf_central_refused_batches_total 5"), "{metrics}");
    assert!(metrics.contains("wanperf_central_duplicates_total 2"), "{metrics}");
}

#[test]
fn a_throughput_drop_is_an_event_on_its_pair_and_reaches_the_webhook() {
    let d = tmp("event");
    std::fs::write(d.0.join("mesh.toml"), mesh_text(true)).unwrap();
    let (hook, hooked) = webhook();
    let c = Central::start(&d.0, Some(hook));
    let t0 = now() - 86_400.0;
    let mut seq = 0;
    let mut results = Vec::new();
    for k in 0..10 {
        let t = t0 + k as f64 * 600.0;
        let bps = if k < 7 { 74e6 + (k % 3) as f64 * 1e6 } else { 0.8e6 };
        seq += 1;
        results.push(tput(seq, "h1", "h2", t, bps));
        seq += 1;
        results.push(tput(seq, "h1", "h3", t + 20.0, 50e6 + (k % 2) as f64 * 1e6));
        seq += 1;
        results.push(latency(seq, "h1", "h2", t, 20.0 + (k % 2) as f64 * 0.1));
    }
    let (code, v) = post(&c, "h1", Some(&key(1)), results);
    assert_eq!(code, 200, "{v}");
    let body = hooked.recv_timeout(Duration::from_secs(10)).expect("no webhook call");
    let alert: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(alert["event"]["src"], "h1");
    assert_eq!(alert["event"]["dst"], "h2");
    assert_eq!(alert["event"]["kind"], "drop");
    let text = alert["event"]["text"].as_str().unwrap();
    assert!(text.contains("h1→h2 throughput"), "{text}");
    assert!(hooked.recv_timeout(Duration::from_millis(500)).is_err(), "more than one alert");

    let ev = c.get("/api/v1/events");
    assert_eq!(ev["events"].as_array().unwrap().len(), 1, "{ev}");
    let grid = c.get("/api/v1/grid");
    let cell = |s: &str, d: &str| {
        grid["cells"].as_array().unwrap().iter().find(|c| c["src"] == s && c["dst"] == d).unwrap().clone()
    };
    assert_eq!(cell("h1", "h2")["throughput"]["status"], "bad", "{grid}");
    assert_eq!(cell("h1", "h3")["throughput"]["status"], "ok", "{grid}");
    assert_eq!(cell("h1", "h2")["rtt"]["status"], "ok", "{grid}");
    assert_eq!(grid["cells"].as_array().unwrap().len(), 6);
    let pair = c.get(&format!("/api/v1/pair?src=h1&dst=h2&from={}&to={}", t0 - 1.0, now()));
    assert_eq!(pair["throughput"].as_array().unwrap().len(), 10, "{pair}");
    assert_eq!(pair["latency"].as_array().unwrap().len(), 10, "{pair}");
    assert_eq!(pair["events"].as_array().unwrap().len(), 1, "{pair}");

    // Restarted, central rebuilds the same view from the archive (and alerts nothing anew).
    drop(c);
    let c = Central::start(&d.0, None);
    let grid2 = c.get("/api/v1/grid");
    assert_eq!(grid2["cells"], grid["cells"]);
    assert_eq!(c.get("/api/v1/events")["events"].as_array().unwrap().len(), 1);
    assert!(c.log.lock().unwrap().iter().all(|l| !l.starts_with("ALERT")));
}

#[test]
fn a_changed_mesh_file_is_served_and_a_broken_one_is_not() {
    let d = tmp("reload");
    std::fs::write(d.0.join("mesh.toml"), mesh_text(true)).unwrap();
    let c = Central::start(&d.0, None);
    let first = c.get("/api/v1/mesh");
    std::thread::sleep(Duration::from_millis(1100)); // a different mtime
    std::fs::write(d.0.join("mesh.toml"), mesh_text(true).replace("interval = \"10m\"", "interval = \"20m\"")).unwrap();
    let t = std::time::Instant::now();
    let second = loop {
        let m = c.get("/api/v1/mesh");
        if m["digest"] != first["digest"] || t.elapsed() > Duration::from_secs(10) {
            break m;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_ne!(second["digest"], first["digest"]);
    assert!(second["text"].as_str().unwrap().contains("20m"));
    std::thread::sleep(Duration::from_millis(1100));
    std::fs::write(d.0.join("mesh.toml"), "[mesh]\nname = 3\n").unwrap();
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(c.get("/api/v1/mesh")["digest"], second["digest"], "a broken file replaced a good one");
    assert!(c.logged(|l| l.contains("keeping the previous mesh")));
    // Slots: none shares a host with another at the same time.
    let now = now();
    let slots = c.get(&format!("/api/v1/slots?from={}&to={}", now, now + 7200.0));
    let s = slots["slots"].as_array().unwrap();
    assert!(s.len() >= 6, "{slots}");
}

#[test]
fn a_changed_route_is_an_event_and_the_pair_page_shows_the_route_and_the_clock_error() {
    let d = tmp("route");
    std::fs::write(d.0.join("mesh.toml"), mesh_text(true)).unwrap();
    let c = Central::start(&d.0, None);
    let t0 = now() - 3600.0;
    let a = ["198.18.0.1", "198.18.1.2", "198.18.9.2"];
    let b = ["198.18.0.1", "198.18.3.2", "198.18.9.2"];
    let results = vec![
        trace(1, "h1", "h2", t0, &a),
        trace(2, "h1", "h2", t0 + 600.0, &a),
        // h1→h3 changes nothing; h1→h2 goes through another router at hop 2.
        trace(3, "h1", "h3", t0 + 700.0, &a),
        trace(4, "h1", "h2", t0 + 1200.0, &b),
        trace(5, "h1", "h3", t0 + 1300.0, &a),
    ];
    let synced = |ms: f64| Clock { synced: true, error_ms: Some(ms), source: "kernel".into() };
    let (code, v) = post_clock(&c, "h1", Some(&key(1)), results, Some(synced(0.4)));
    assert_eq!(code, 200, "{v}");
    let ev = c.get("/api/v1/events")["events"].clone();
    let ev = ev.as_array().unwrap();
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!((ev[0]["kind"].as_str(), ev[0]["metric"].as_str()), (Some("route_change"), Some("route")));
    assert_eq!(
        (ev[0]["src"].as_str(), ev[0]["dst"].as_str(), ev[0]["t"].as_f64()),
        (Some("h1"), Some("h2"), Some(t0 + 1200.0))
    );
    assert!(ev[0]["text"].as_str().unwrap().contains("hop 2 198.18.1.2 → 198.18.3.2"), "{ev:?}");
    assert!(c.logged(|l| l.starts_with("ALERT") && l.contains("route changed")), "{:?}", c.log.lock().unwrap());

    // The pair page: the latest route, and no clock error until both ends stated theirs.
    let page = |c: &Central| c.get(&format!("/api/v1/pair?src=h1&dst=h2&from={}&to={}", t0 - 1.0, now()));
    let p = page(&c);
    assert_eq!(p["route"]["t"], t0 + 1200.0, "{p}");
    let hops: Vec<&str> =
        p["route"]["trace"]["hops"].as_array().unwrap().iter().map(|h| h["addrs"][0].as_str().unwrap()).collect();
    assert_eq!(hops, b);
    assert!(p["clock_error_ms"].is_null(), "{p}");
    assert_eq!(p["clocks"]["src"]["error_ms"], 0.4);
    // h2's clock: synced, then not.
    assert_eq!(post_clock(&c, "h2", Some(&key(2)), vec![], Some(synced(0.35))).0, 200);
    assert!((page(&c)["clock_error_ms"].as_f64().unwrap() - 0.75).abs() < 1e-9);
    let unsynced = Clock { synced: false, ..synced(16.0) };
    assert_eq!(post_clock(&c, "h2", Some(&key(2)), vec![], Some(unsynced)).0, 200);
    assert!(page(&c)["clock_error_ms"].is_null());

    // Restarted, central finds the same route change in the archive (and announces nothing).
    drop(c);
    let c = Central::start(&d.0, None);
    let ev2 = c.get("/api/v1/events")["events"].clone();
    assert_eq!(ev2.as_array().unwrap().len(), 1, "{ev2}");
    assert_eq!(ev2[0]["text"], ev[0]["text"]);
    assert_eq!(page(&c)["route"]["trace"]["hops"].as_array().unwrap().len(), 3);
}

#[test]
fn time_ranges_not_from_before_to_are_refused_with_a_reason() {
    let d = tmp("ranges");
    std::fs::write(d.0.join("mesh.toml"), mesh_text(true)).unwrap();
    let c = Central::start(&d.0, None);
    let status = |path: &str| match ureq::get(&c.url(path)).call() {
        Ok(r) => (r.status(), r.into_json::<serde_json::Value>().unwrap()),
        Err(ureq::Error::Status(code, r)) => (code, r.into_json().unwrap()),
        Err(e) => panic!("{path}: {e}"),
    };
    for path in [
        "/api/v1/slots?from=100&to=50",
        "/api/v1/slots?from=nan&to=50",
        "/api/v1/slots?from=0&to=1000000",
        "/api/v1/pair?src=h1&dst=h2&from=100&to=100",
        "/api/v1/pair?src=h1&dst=h2&from=nan&to=100",
    ] {
        let (code, body) = status(path);
        assert_eq!(code, 400, "{path}: {body}");
        assert!(body["error"].as_str().is_some_and(|e| e.contains("from")), "{path}: {body}");
    }
    assert_eq!(status("/api/v1/slots?from=0&to=3600").0, 200);
    assert_eq!(status("/api/v1/pair?src=h1&dst=h2&from=0&to=3600").0, 200);
}
