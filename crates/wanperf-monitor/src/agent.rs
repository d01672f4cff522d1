//! `wanperf agent`: one daemon per host of a mesh.
//!
//! * It answers tests: an embedded `wanperf serve` on the host's port, open only to the
//!   mesh's hosts, requiring their keys when the mesh lists keys, and running one test at a
//!   time (a second is refused "busy": the guard behind the plan).
//! * It runs its share of the mesh: continuous UDP latency probes to each peer of its latency
//!   tests, summarized per period (one minute by default), and the throughput tests of the
//!   day's plan ([`crate::view::day_plan`]) in which it is the source. The plan is a pure
//!   function of the mesh file, so every agent knows every slot and no two throughput tests
//!   touch one host at once; there is nothing to negotiate. Trace tests (light, not
//!   exclusive) run in-process with `wanperf trace`'s engine at each pair's times
//!   ([`wanperf_mesh::plan::next_run`]), one at a time. Capacity tests are in the plan like
//!   throughput tests (their trains would measure a bulk transfer on the same host, not the
//!   path) and run in-process with `wanperf capacity`'s engine.
//! * Every batch carries the state of the host's clock (the kernel's NTP error estimate from
//!   adjtimex(2), or the error the operator stated), so one-way delays are shown with the
//!   error they have.
//! * Every result, and every run that failed, was refused or was missed, goes first into the
//!   spool ([`crate::spool::Spool`]) and from there to the central service, signed with the
//!   agent's key, with retries and backoff; it leaves the spool only once acknowledged.
//! * The mesh file comes from a file or from central; a changed one is applied (probes
//!   started and stopped, the server's allow list and keys replaced) within the poll period.

use crate::spool::Spool;
use crate::view::day_plan;
use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr, TcpListener, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use wanperf_engine::ping::{self, PingConfig, PingMode};
use wanperf_engine::server::{Gate, ServerConfig};
use wanperf_mesh::config::{Mesh, Test, TestKind};
use wanperf_mesh::plan::Slot;
use wanperf_mesh::summary::{self, Probe};
use wanperf_mesh::wire::{
    Ack, Batch, CapacityResult, Clock, MeshResult, ResultKind, RunStatus, ThroughputResult, TraceHop, TraceResult,
};
use wanperf_proto::auth::{AuthorizedKeys, PrivateKey};
use wanperf_proto::server::Limits;

/// Results sent in one batch at most.
pub const BATCH: usize = 500;
/// Longest wait between two tries to reach central, s.
pub const MAX_BACKOFF_S: f64 = 60.0;
/// Stack of a probe thread.
const PROBE_STACK: usize = 256 * 1024;
/// A slot whose start passed more than this long ago without its run is reported missed, s.
pub const MISSED_AFTER_S: f64 = 30.0;

/// Where the mesh file comes from.
#[derive(Debug, Clone)]
pub enum MeshSource {
    /// A local file (checked for changes every poll).
    File(PathBuf),
    /// The central service's `/api/v1/mesh`.
    Central(String),
}

/// Settings of `wanperf agent`.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// This host's name in the mesh file.
    pub name: String,
    /// The mesh file.
    pub mesh: MeshSource,
    /// The central service's base URL (results go there); None keeps them in the spool.
    pub central: Option<String>,
    /// The agent's private key file (signs results, proves itself to peers' servers).
    pub key_path: Option<PathBuf>,
    /// The spool file.
    pub spool: PathBuf,
    /// Most results the spool holds.
    pub spool_max: u64,
    /// Where the embedded server listens (default: all addresses, the host's port).
    pub listen: Option<SocketAddr>,
    /// The wanperf binary (throughput tests run as `wanperf tput … --json` children).
    pub exe: PathBuf,
    /// How often the mesh file is checked.
    pub poll_every: Duration,
    /// The clock's error as the operator states it, ms (None: the kernel's NTP estimate).
    pub clock_error_ms: Option<f64>,
}

/// Why the agent could not start.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The mesh file, or this host's place in it.
    #[error("{0}")]
    Mesh(String),
    /// The key file.
    #[error("key {0}")]
    Key(String),
    /// The spool.
    #[error("{0}")]
    Spool(#[from] crate::spool::SpoolError),
    /// Sockets.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

fn now_unix() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// Sleeps up to `d`, waking early when `stop` is set. Returns whether it was.
fn nap(stop: &AtomicBool, d: Duration) -> bool {
    let until = Instant::now() + d;
    while !stop.load(Ordering::Acquire) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        std::thread::sleep(left.min(Duration::from_millis(100)));
    }
    true
}

/// The mesh as the agent currently has it.
struct Current {
    mesh: RwLock<(Arc<Mesh>, String)>,
    generation: AtomicU64,
}

impl Current {
    fn get(&self) -> Arc<Mesh> {
        self.mesh.read().unwrap().0.clone()
    }
}

fn fetch_mesh(src: &MeshSource) -> Result<(Mesh, String), String> {
    let mesh = match src {
        MeshSource::File(p) => crate::read_mesh(p).map_err(|e| e.to_string())?.0,
        MeshSource::Central(url) => {
            let u = format!("{}/api/v1/mesh", url.trim_end_matches('/'));
            let v: serde_json::Value = ureq::get(&u)
                .timeout(Duration::from_secs(10))
                .call()
                .map_err(|e| format!("cannot fetch the mesh from {u}: {e}"))?
                .into_json()
                .map_err(|e| format!("{u}: not a mesh answer: {e}"))?;
            let text = v.get("text").and_then(|t| t.as_str()).ok_or_else(|| format!("{u}: not a mesh answer"))?;
            wanperf_mesh::config::parse(text).map_err(|e| format!("the mesh from {u}: {e}"))?
        }
    };
    let digest = mesh.digest();
    Ok((mesh, digest))
}

/// The server settings a mesh implies for `me`: its hosts allowed, their keys required when
/// any host has one (a host without a key then cannot test against this one: fail closed).
fn server_config(mesh: &Mesh) -> Result<ServerConfig, String> {
    let mut allow = Vec::new();
    for h in &mesh.hosts {
        for a in (h.address.as_str(), h.port).to_socket_addrs().map_err(|e| format!("host {}: {e}", h.name))? {
            allow.push(ipnet::IpNet::from(wanperf_engine::server::canonical(a.ip())));
        }
    }
    allow.push("127.0.0.0/8".parse().expect("net"));
    allow.push("::1/128".parse().expect("net"));
    let keys: Vec<&str> = mesh.hosts.iter().filter_map(|h| h.key.as_deref()).collect();
    let auth = if keys.is_empty() {
        None
    } else {
        Some(Arc::new(AuthorizedKeys::parse(&keys.join("\n")).map_err(|e| format!("mesh keys: {e}"))?))
    };
    Ok(ServerConfig {
        limits: Limits { max_concurrent: 1, max_duration_s: 600.0, ..Limits::default() },
        timeouts: Default::default(),
        allow,
        software: format!("wanperf {} (agent)", env!("CARGO_PKG_VERSION")),
        auth,
        gate: Gate::default(),
        copy_root: None,
        data_ports: Some(wanperf_proto::msg::DATA_PORTS),
    })
}

struct Server {
    stop: Arc<AtomicBool>,
    join: JoinHandle<()>,
    key: String,
}

impl Server {
    /// Stops it and waits for its tests to end (bounded by the engine's grace).
    fn stop(self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.join.join();
    }
}

/// The UDP ports the mesh's STAMP latency tests probe (each agent reflects on them).
fn stamp_ports(mesh: &Mesh) -> Vec<u16> {
    let mut v: Vec<u16> = mesh
        .tests
        .iter()
        .filter_map(|t| match t.kind {
            TestKind::Latency { stamp_port, .. } => stamp_port,
            _ => None,
        })
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// What a running server was started for: a change means a new one.
fn server_key(cfg: &ServerConfig, mesh: &Mesh) -> String {
    format!("{:?}|{:?}|{:?}", cfg.allow, cfg.auth, stamp_ports(mesh))
}

fn start_server(listen: SocketAddr, mesh: &Mesh, log: &crate::Log) -> Result<(Server, SocketAddr), AgentError> {
    let cfg = server_config(mesh).map_err(AgentError::Mesh)?;
    let key = server_key(&cfg, mesh);
    let listener = TcpListener::bind(listen)?;
    let addr = listener.local_addr()?;
    let udp = wanperf_engine::server::bind_udp_like(&listener)?;
    let stop = Arc::new(AtomicBool::new(false));
    // STAMP reflectors for the mesh's STAMP latency tests, on the listener's address.
    let mut reflectors = Vec::new();
    for port in stamp_ports(mesh) {
        let sock = wanperf_engine::stamp::bind(addr.ip(), port)?;
        let (c, s) = (cfg.clone(), stop.clone());
        let rc = wanperf_engine::stamp::reflector_config(wanperf_stamp::packet::Auth::Open, true);
        reflectors.push(std::thread::spawn(move || {
            wanperf_engine::stamp::run_reflector(sock, |ip| c.allowed(ip), rc, s);
        }));
        log(&format!("serve: STAMP reflector on {}", SocketAddr::new(addr.ip(), port)));
    }
    let (s, l) = (stop.clone(), log.clone());
    let join = std::thread::Builder::new().name("wanperf-serve".into()).spawn(move || {
        let log2 = l.clone();
        let log: wanperf_engine::server::Log = Arc::new(move |m: &str| log2(&format!("serve: {m}")));
        if let Err(e) = wanperf_engine::server::serve_with(listener, Some(udp), cfg, s, log) {
            l(&format!("serve stopped: {e}"));
        }
        for r in reflectors {
            let _ = r.join();
        }
    })?;
    Ok((Server { stop, join, key }, addr))
}

/// Runs the agent until `shutdown` is set; `ready` gets the embedded server's address once it
/// answers tests and probes.
pub fn run(
    cfg: AgentConfig,
    shutdown: Arc<AtomicBool>,
    ready: impl FnOnce(SocketAddr),
    log: crate::Log,
) -> Result<(), AgentError> {
    let key = match &cfg.key_path {
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| AgentError::Key(format!("{}: {e}", p.display())))?;
            Some(Arc::new(PrivateKey::parse(&text).map_err(|e| AgentError::Key(format!("{}: {e}", p.display())))?))
        }
        None => None,
    };
    // The first mesh: a central that is not up yet is waited for.
    let (mesh, digest) = loop {
        match fetch_mesh(&cfg.mesh) {
            Ok(m) => break m,
            Err(e) if matches!(cfg.mesh, MeshSource::Central(_)) => {
                log(&format!("agent: {e}; trying again in 2 s"));
                if nap(&shutdown, Duration::from_secs(2)) {
                    return Ok(());
                }
            }
            Err(e) => return Err(AgentError::Mesh(e)),
        }
    };
    let me = mesh
        .host(&cfg.name)
        .ok_or_else(|| AgentError::Mesh(format!("`{}` is not a host of mesh `{}`", cfg.name, mesh.name)))?
        .clone();
    if let (Some(k), Some(listed)) = (&key, &me.key) {
        if k.public().to_line().split_whitespace().nth(1) != listed.split_whitespace().nth(1) {
            return Err(AgentError::Key(format!("does not match the key the mesh file lists for `{}`", cfg.name)));
        }
    }
    let spool = Arc::new(Mutex::new(Spool::open(&cfg.spool, cfg.spool_max)?));
    let listen = cfg.listen.unwrap_or_else(|| SocketAddr::new(IpAddr::from([0u8; 4]), me.port));
    let (server, addr) = start_server(listen, &mesh, &log)?;
    let mut server = Some(server);
    let current = Arc::new(Current { mesh: RwLock::new((Arc::new(mesh), digest)), generation: AtomicU64::new(0) });
    let started = now_unix();
    let mut threads = Vec::new();
    {
        let (c, s, l, src, every) = (current.clone(), shutdown.clone(), log.clone(), cfg.mesh.clone(), cfg.poll_every);
        threads.push(std::thread::spawn(move || watch_mesh(&src, every, &c, &s, &l)));
    }
    {
        let (c, s, l, sp, me, exe) =
            (current.clone(), shutdown.clone(), log.clone(), spool.clone(), cfg.name.clone(), cfg.exe.clone());
        let key_path = cfg.key_path.clone();
        threads.push(std::thread::spawn(move || schedule(&me, &exe, key_path.as_deref(), started, &c, &sp, &s, &l)));
    }
    {
        let (c, s, l, sp, me) = (current.clone(), shutdown.clone(), log.clone(), spool.clone(), cfg.name.clone());
        threads.push(std::thread::spawn(move || traces(&me, &c, &sp, &s, &l)));
    }
    if let Some(url) = cfg.central.clone() {
        let (s, l, sp, me, k) = (shutdown.clone(), log.clone(), spool.clone(), cfg.name.clone(), key.clone());
        let (stated, c) = (cfg.clock_error_ms, current.clone());
        threads.push(std::thread::spawn(move || forward(&url, &me, k.as_deref(), stated, &c, &sp, &s, &l)));
    }
    ready(addr);
    log(&format!("agent {}: serving tests on {addr}", cfg.name));

    // Supervise: the probes follow the mesh, and so does the server's allow list.
    let mut probers: HashMap<(String, String), (Arc<AtomicBool>, JoinHandle<()>)> = HashMap::new();
    let mut seen_generation = u64::MAX;
    while !shutdown.load(Ordering::Acquire) {
        let g = current.generation.load(Ordering::Acquire);
        if g != seen_generation {
            seen_generation = g;
            let mesh = current.get();
            let want: HashMap<(String, String), (Test, wanperf_mesh::config::Host)> = mesh
                .tests_from(&cfg.name)
                .into_iter()
                .filter(|(t, _)| matches!(t.kind, TestKind::Latency { .. }))
                .filter_map(|(t, dst)| Some(((t.name.clone(), dst.clone()), (t.clone(), mesh.host(&dst)?.clone()))))
                .collect();
            probers.retain(|k, (stop, _)| {
                let keep = want.contains_key(k);
                if !keep {
                    stop.store(true, Ordering::Release);
                }
                keep
            });
            for (k, (test, dst)) in want {
                if let Some((stop, _)) = probers.get(&k) {
                    // Restarted so a changed rate or size takes effect.
                    stop.store(true, Ordering::Release);
                }
                let stop = Arc::new(AtomicBool::new(false));
                let (s, sp, l, me, period) =
                    (stop.clone(), spool.clone(), log.clone(), cfg.name.clone(), mesh.summary_s);
                // A small stack: a mesh agent may probe hundreds of peers, one thread each.
                let h = std::thread::Builder::new()
                    .name("wanperf-probe".into())
                    .stack_size(PROBE_STACK)
                    .spawn(move || probe_peer(&me, &test, &dst, period, &sp, &s, &l));
                match h {
                    Ok(h) => {
                        probers.insert(k, (stop, h));
                    }
                    Err(e) => log(&format!("agent: cannot start a probe thread: {e}")),
                }
            }
            // A changed allow list or key set: a new server on the same address.
            if let Ok(sc) = server_config(&mesh) {
                let key = server_key(&sc, &mesh);
                if server.as_ref().is_some_and(|s| s.key != key) {
                    if let Some(s) = server.take() {
                        s.stop();
                    }
                    match start_server(addr, &mesh, &log) {
                        Ok((s, _)) => server = Some(s),
                        Err(e) => {
                            log(&format!("agent: cannot restart the server on {addr}: {e}"));
                            shutdown.store(true, Ordering::Release);
                        }
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    for (stop, _) in probers.values() {
        stop.store(true, Ordering::Release);
    }
    if let Some(s) = &server {
        s.stop.store(true, Ordering::Release);
    }
    for (_, (_, h)) in probers {
        let _ = h.join();
    }
    for h in threads {
        let _ = h.join();
    }
    if let Some(s) = server {
        s.stop();
    }
    Ok(())
}

fn watch_mesh(src: &MeshSource, every: Duration, current: &Current, stop: &AtomicBool, log: &crate::Log) {
    let mut last_error = String::new();
    while !nap(stop, every) {
        match fetch_mesh(src) {
            Ok((mesh, digest)) => {
                last_error.clear();
                let mut cur = current.mesh.write().unwrap();
                if cur.1 != digest {
                    log(&format!("agent: mesh `{}` changed (digest {digest})", mesh.name));
                    *cur = (Arc::new(mesh), digest);
                    current.generation.fetch_add(1, Ordering::AcqRel);
                }
            }
            Err(e) if e != last_error => {
                log(&format!("agent: keeping the mesh it has: {e}"));
                last_error = e;
            }
            Err(_) => {}
        }
    }
}

fn spool_push(spool: &Mutex<Spool>, r: MeshResult, log: &crate::Log) {
    let mut s = spool.lock().unwrap();
    match s.push(r) {
        Ok(Some(_)) => {}
        Ok(None) => {
            if s.dropped == 1 || s.dropped.is_multiple_of(1000) {
                log(&format!(
                    "agent: spool full ({} results): {} new results dropped until central takes some",
                    s.max, s.dropped
                ));
            }
        }
        Err(e) => log(&format!("agent: {e}")),
    }
}

/// Continuous probes to one peer, one summary per period, until `stop`.
fn probe_peer(
    me: &str,
    test: &Test,
    dst: &wanperf_mesh::config::Host,
    period: f64,
    spool: &Mutex<Spool>,
    stop: &Arc<AtomicBool>,
    log: &crate::Log,
) {
    let TestKind::Latency { rate, size, dscp, stamp_port } = test.kind else { return };
    let interval = Duration::from_secs_f64(1.0 / rate);
    let timeout = Duration::from_secs(1).min(Duration::from_secs_f64(period / 4.0));
    let mut failures = 0u32;
    while !stop.load(Ordering::Acquire) {
        // Periods end on multiples of the period in Unix time, so every pair's summaries line up.
        let start = now_unix();
        let end = ((start / period).floor() + 1.0) * period;
        let count = (((end - start) * rate).floor() as u64).max(1);
        let cfg = PingConfig {
            clock_offset_ns: None,
            host: dst.address.clone(),
            port: stamp_port.unwrap_or(dst.port),
            count,
            interval,
            size: size as usize,
            timeout,
            dscp,
            stamp_key: None,
            mode: if stamp_port.is_some() { PingMode::Stamp } else { PingMode::Udp },
            // One thread per peer: wake for sends, answers and timeouts only (a mesh change or
            // shutdown is noticed within a second).
            wake: Duration::from_secs(1),
        };
        let result = ping::run(&cfg, &mut ping::Quiet, stop);
        let finished = now_unix();
        let base = MeshResult {
            seq: 0,
            test: test.name.clone(),
            kind: ResultKind::Latency,
            src: me.to_string(),
            dst: dst.name.clone(),
            start,
            end: finished.min(end + timeout.as_secs_f64()),
            status: RunStatus::Ok,
            reason: None,
            latency: None,
            throughput: None,
            trace: None,
            capacity: None,
        };
        match result {
            Ok((records, s)) => {
                failures = 0;
                if stop.load(Ordering::Acquire) && (records.len() as u64) < count {
                    break; // cut short by a mesh change or shutdown: not a whole period
                }
                let probes: Vec<Probe> = records
                    .iter()
                    .map(|r| Probe {
                        seq: r.seq,
                        sent: start + r.sent_s,
                        rtt_ms: if r.status == "ok" { r.rtt_ms } else { None },
                        owd_fwd_ms: r.owd_fwd_ms,
                        owd_rev_ms: r.owd_rev_ms,
                    })
                    .collect();
                let mut sum = summary::summarize(start, end, &probes, s.duplicates);
                sum.reordered = s.reordered;
                spool_push(spool, MeshResult { latency: Some(sum), ..base }, log);
            }
            Err(e) => {
                failures += 1;
                if failures == 1 {
                    log(&format!("agent: probes {me}→{}: {e}", dst.name));
                }
                let r = MeshResult { status: RunStatus::Failed, reason: Some(e.to_string()), ..base };
                spool_push(spool, r, log);
                let wait = (end - now_unix()).max(1.0);
                if nap(stop, Duration::from_secs_f64(wait)) {
                    break;
                }
            }
        }
    }
}

/// Runs this host's slots of the day's plan; reports the ones it could not run as missed.
#[allow(clippy::too_many_arguments)]
fn schedule(
    me: &str,
    exe: &std::path::Path,
    key_path: Option<&std::path::Path>,
    started: f64,
    current: &Current,
    spool: &Mutex<Spool>,
    stop: &Arc<AtomicBool>,
    log: &crate::Log,
) {
    let mut done: HashSet<(String, String, u64)> = HashSet::new();
    let mut plan: Option<(String, f64, Vec<Slot>)> = None;
    while !nap(stop, Duration::from_millis(250)) {
        let (mesh, digest) = current.mesh.read().unwrap().clone();
        let now = now_unix();
        let day = crate::view::day_start(now);
        if !matches!(&plan, Some((d, t, _)) if *d == digest && *t == day) {
            plan = Some((digest, day, day_plan(&mesh, now)));
        }
        let Some((_, _, slots)) = &plan else { continue };
        let due: Vec<Slot> = slots
            .iter()
            .filter(|s| s.src == me && s.start <= now && s.start >= started - 1.0)
            .filter(|s| !done.contains(&(s.test.clone(), s.dst.clone(), s.start.to_bits())))
            .cloned()
            .collect();
        for slot in due {
            done.insert((slot.test.clone(), slot.dst.clone(), slot.start.to_bits()));
            let Some(test) = mesh.tests.iter().find(|t| t.name == slot.test) else { continue };
            let Some(dst) = mesh.host(&slot.dst) else { continue };
            let late = now_unix() - slot.start;
            let r = if late > MISSED_AFTER_S {
                MeshResult {
                    seq: 0,
                    test: slot.test.clone(),
                    kind: match test.kind {
                        TestKind::Capacity { .. } => ResultKind::Capacity,
                        _ => ResultKind::Throughput,
                    },
                    src: me.to_string(),
                    dst: slot.dst.clone(),
                    start: slot.start,
                    end: slot.end,
                    status: RunStatus::Missed,
                    reason: Some(format!("the agent was busy or down at the slot's start ({late:.0} s ago)")),
                    latency: None,
                    throughput: None,
                    trace: None,
                    capacity: None,
                }
            } else if matches!(test.kind, TestKind::Capacity { .. }) {
                run_capacity(me, test, dst, stop)
            } else {
                run_tput(me, exe, key_path, test, dst, stop)
            };
            if r.status != RunStatus::Ok {
                log(&format!(
                    "agent: {} {me}→{}: {:?}: {}",
                    slot.test,
                    slot.dst,
                    r.status,
                    r.reason.as_deref().unwrap_or("")
                ));
            }
            spool_push(spool, r, log);
        }
        // Forget slots of days gone.
        done.retain(|(_, _, t)| f64::from_bits(*t) > now - 2.0 * 86_400.0);
    }
}

/// The clock's state: the error the operator stated, or the kernel's NTP estimate.
pub fn clock(stated_ms: Option<f64>) -> Clock {
    if let Some(ms) = stated_ms {
        return Clock { synced: true, error_ms: Some(ms), source: "stated".into() };
    }
    let (state, unsync, esterror_us) = wanperf_sys::clock_state();
    let synced = state >= 0 && state != libc::TIME_ERROR && !unsync;
    // esterror is the estimated error in µs; maxerror bounds it.
    let error_ms = (state >= 0).then(|| esterror_us.max(0) as f64 / 1000.0);
    Clock { synced, error_ms, source: "kernel".into() }
}

/// Runs this host's trace tests at each pair's times, one at a time, until `stop`.
fn traces(me: &str, current: &Current, spool: &Mutex<Spool>, stop: &AtomicBool, log: &crate::Log) {
    // (test, destination) → when it runs next; recomputed when the mesh changes, as are the
    // pairs (a mesh of hundreds of hosts has tens of thousands of pairs: not every 250 ms).
    let mut next: HashMap<(String, String), f64> = HashMap::new();
    let mut digest = String::new();
    let mut pairs: Vec<(Test, wanperf_mesh::config::Host)> = Vec::new();
    let mut seed = 0;
    while !nap(stop, Duration::from_millis(250)) {
        let (mesh, d) = current.mesh.read().unwrap().clone();
        if d != digest {
            next.clear();
            digest = d;
            seed = crate::view::seed_of(&mesh);
            pairs = mesh
                .tests_from(me)
                .into_iter()
                .filter(|(t, _)| matches!(t.kind, TestKind::Trace { .. }))
                .filter_map(|(t, dst)| Some((t.clone(), mesh.host(&dst)?.clone())))
                .collect();
        }
        let now = now_unix();
        for (test, dst) in &pairs {
            let Some(schedule) = &test.schedule else { continue };
            let key = (test.name.clone(), dst.name.clone());
            let when = |after: f64| {
                wanperf_mesh::plan::next_run(schedule, seed, &test.name, me, &dst.name, after).unwrap_or(f64::INFINITY)
            };
            let at = *next.entry(key.clone()).or_insert_with(|| when(now));
            if at > now_unix() {
                continue;
            }
            let r = run_trace(me, test, dst, stop);
            if stop.load(Ordering::Acquire) {
                return; // cut short: not a whole trace
            }
            if r.status != RunStatus::Ok {
                log(&format!("agent: {} {me}→{}: {}", test.name, dst.name, r.reason.as_deref().unwrap_or("")));
            }
            spool_push(spool, r, log);
            next.insert(key, when(now_unix().max(at + 1e-3)));
        }
    }
}

/// A run of `test` from `me` to `dst` starting now, failed until it is measured.
fn failed_run(me: &str, test: &Test, dst: &wanperf_mesh::config::Host, kind: ResultKind) -> MeshResult {
    let start = now_unix();
    MeshResult {
        seq: 0,
        test: test.name.clone(),
        kind,
        src: me.to_string(),
        dst: dst.name.clone(),
        start,
        end: start,
        status: RunStatus::Failed,
        reason: None,
        latency: None,
        throughput: None,
        trace: None,
        capacity: None,
    }
}

/// The address of `dst`'s agent (its host and port), or why there is none.
fn resolve(dst: &wanperf_mesh::config::Host) -> Result<SocketAddr, String> {
    match (dst.address.as_str(), dst.port).to_socket_addrs().map(|mut a| a.next()) {
        Ok(Some(a)) => Ok(a),
        Ok(None) => Err(format!("{} has no address", dst.address)),
        Err(e) => Err(format!("cannot resolve {}: {e}", dst.address)),
    }
}

/// One capacity run with `wanperf capacity`'s engine against the destination agent's
/// embedded server (its UDP echo).
fn run_capacity(me: &str, test: &Test, dst: &wanperf_mesh::config::Host, stop: &AtomicBool) -> MeshResult {
    let mut r = failed_run(me, test, dst, ResultKind::Capacity);
    let TestKind::Capacity { budget, time_s } = test.kind else { return r };
    let addr = match resolve(dst) {
        Ok(a) => a,
        Err(e) => return MeshResult { reason: Some(e), ..r },
    };
    let o = wanperf_diag::measure::Options {
        budget_bytes: budget,
        time: Duration::from_secs_f64(time_s),
        // The peer's agent measures the way back.
        reverse: false,
        ..Default::default()
    };
    let m = wanperf_diag::measure::measure(addr, &o, |_, _| !stop.load(Ordering::Acquire));
    r.end = now_unix();
    match m {
        Ok(rep) => match &rep.capacity {
            Some(c) => {
                r.status = RunStatus::Ok;
                r.capacity = Some(CapacityResult {
                    bps: c.bps,
                    low_bps: c.low_bps,
                    high_bps: c.high_bps,
                    available_bps: rep.available.as_ref().map(|a| a.bps),
                    bottleneck_ttl: rep.bottleneck.as_ref().map(|b| b.ttl),
                    bottleneck_address: rep.bottleneck.as_ref().and_then(|b| b.address).map(|a| a.to_string()),
                    bytes: rep.bytes_sent,
                    seconds: rep.seconds,
                });
            }
            None => r.reason = Some(format!("no capacity estimate: {} of the trains' packets unanswered", rep.lost)),
        },
        Err(e) => r.reason = Some(e.to_string()),
    }
    r
}

/// One trace with `wanperf trace`'s engine (Paris-style UDP or ICMP probes, unprivileged).
/// UDP probes go to the destination agent's echo and ask for its counts, as `wanperf trace
/// --server` does: the destination's loss is split by direction, and its kernel's ICMP rate
/// limit is not read as loss.
fn run_trace(me: &str, test: &Test, dst: &wanperf_mesh::config::Host, stop: &AtomicBool) -> MeshResult {
    use wanperf_diag::probe::{overhead, Method};
    let mut r = failed_run(me, test, dst, ResultKind::Trace);
    let TestKind::Trace { rounds, icmp, max_ttl } = test.kind else { return r };
    let ip = match resolve(dst) {
        Ok(a) => a.ip(),
        Err(e) => return MeshResult { reason: Some(e), ..r },
    };
    let o = wanperf_diag::run::Options {
        method: if icmp { Method::Icmp } else { Method::Udp },
        port: if icmp { 33434 } else { dst.port },
        rounds,
        interval: Duration::from_secs(1),
        wait: Duration::from_secs(2),
        first_ttl: 1,
        max_ttl,
        size: overhead(ip.is_ipv6()) + 32,
        mtu: false,
        gap: Duration::from_millis(5),
        flows: 1,
        server: !icmp,
    };
    let report = wanperf_diag::run::trace(ip, &o, |_, _| !stop.load(Ordering::Acquire));
    r.end = now_unix();
    match report {
        Ok(rep) => {
            r.status = RunStatus::Ok;
            r.trace = Some(TraceResult {
                hops: rep
                    .hops
                    .iter()
                    .map(|h| TraceHop {
                        ttl: h.ttl,
                        addrs: h.addrs.iter().map(|a| a.0.to_string()).collect(),
                        loss_pct: h.loss_pct,
                        path_loss_pct: h.path_loss_pct,
                        rtt_ms: h.rtt_ms.as_ref().map(|x| x.median),
                        note: h.note.clone(),
                    })
                    .collect(),
                reached: rep.reached,
                path_mtu: rep.path_mtu,
                rounds: rep.rounds,
                one_way: rep.one_way,
            });
        }
        Err(e) => r.reason = Some(format!("trace to {ip}: {e}")),
    }
    r
}

/// One throughput test as a `wanperf tput … --json` child; its end record becomes the result.
fn run_tput(
    me: &str,
    exe: &std::path::Path,
    key_path: Option<&std::path::Path>,
    test: &Test,
    dst: &wanperf_mesh::config::Host,
    stop: &Arc<AtomicBool>,
) -> MeshResult {
    let mut r = failed_run(me, test, dst, ResultKind::Throughput);
    let TestKind::Throughput { duration_s, streams, window, reverse, udp_rate } = test.kind else { return r };
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("tput")
        .arg(&dst.address)
        .args(["-p", &dst.port.to_string(), "-t", &format!("{duration_s}s"), "-P", &streams.to_string()])
        .arg("--json");
    if let Some(w) = window {
        cmd.args(["-w", &w.to_string()]);
    }
    if reverse {
        cmd.arg("-R");
    }
    if let Some(b) = udp_rate {
        cmd.args(["-u", "-b", &b.to_string()]);
    }
    if let Some(k) = key_path {
        cmd.arg("--key").arg(k);
    }
    cmd.env_remove("WANPERF_KEY")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            r.reason = Some(format!("cannot start {}: {e}", exe.display()));
            return r;
        }
    };
    // Bounded: the test's length and a margin, then the child is killed.
    let pid = child.id();
    let limit = Duration::from_secs_f64(duration_s + 30.0);
    let done = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let (done, stop) = (done.clone(), stop.clone());
        std::thread::spawn(move || {
            let until = Instant::now() + limit;
            while !done.load(Ordering::Acquire) && Instant::now() < until && !stop.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(100));
            }
            if !done.load(Ordering::Acquire) {
                // The child is not reaped before `done` is set: its pid is still ours.
                let _ = wanperf_sys::kill(pid);
            }
        })
    };
    let out = child.wait_with_output();
    done.store(true, Ordering::Release);
    let _ = watchdog.join();
    r.end = now_unix();
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            r.reason = Some(e.to_string());
            return r;
        }
    };
    let end = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v.get("event").and_then(|e| e.as_str()) == Some("end"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let why = stderr.lines().rev().find(|l| !l.trim().is_empty()).map(|l| l.trim().to_string());
    match end {
        Some(e) if out.status.success() && e.get("complete").and_then(|c| c.as_bool()) != Some(false) => {
            let s = &e["summary"];
            r.status = RunStatus::Ok;
            r.throughput = Some(ThroughputResult {
                bps: s["throughput_bps"].as_f64().unwrap_or(0.0),
                streams,
                window,
                retransmits: s["retransmits"].as_u64(),
                rtt_ms: None,
                verdict: s
                    .get("verdict")
                    .and_then(|v| v.get("text").or(v.get("summary")))
                    .and_then(|t| t.as_str())
                    .map(str::to_string),
            });
        }
        _ => {
            let why = why.unwrap_or_else(|| format!("tput ended with {}", out.status));
            if why.contains("busy") || why.contains("refused the test") {
                r.status = RunStatus::Refused;
            }
            r.reason = Some(why);
        }
    }
    r
}

/// Sends the spool to central, oldest first, until `stop`; an empty batch every heartbeat
/// (the current mesh's).
#[allow(clippy::too_many_arguments)]
fn forward(
    url: &str,
    me: &str,
    key: Option<&PrivateKey>,
    stated_clock_ms: Option<f64>,
    current: &Current,
    spool: &Mutex<Spool>,
    stop: &AtomicBool,
    log: &crate::Log,
) {
    let endpoint = format!("{}/api/v1/results", url.trim_end_matches('/'));
    let mut backoff = 1.0f64;
    let mut failing = false;
    let mut last_sent = Instant::now() - Duration::from_secs(3600);
    while !stop.load(Ordering::Acquire) {
        let dropped = spool.lock().unwrap().take_dropped().unwrap_or(0);
        if dropped > 0 {
            let t = now_unix();
            let r = MeshResult {
                seq: 0,
                test: "spool".into(),
                kind: ResultKind::Latency,
                src: me.to_string(),
                dst: String::new(),
                start: t,
                end: t,
                status: RunStatus::Failed,
                reason: Some(format!("the agent's spool was full: {dropped} results were dropped")),
                latency: None,
                throughput: None,
                trace: None,
                capacity: None,
            };
            spool_push(spool, r, log);
        }
        let batch = match spool.lock().unwrap().peek(BATCH) {
            Ok(b) => b,
            Err(e) => {
                log(&format!("agent: {e}"));
                Vec::new()
            }
        };
        let heartbeat_due = last_sent.elapsed() >= Duration::from_secs_f64(current.get().heartbeat_s);
        if batch.is_empty() && !heartbeat_due {
            if nap(stop, Duration::from_millis(500)) {
                break;
            }
            continue;
        }
        let n = batch.len();
        match send(
            &endpoint,
            me,
            key,
            Batch { agent: me.to_string(), results: batch, clock: Some(clock(stated_clock_ms)) },
        ) {
            Ok(ack) => {
                last_sent = Instant::now();
                if ack.upto > 0 {
                    if let Err(e) = spool.lock().unwrap().remove_upto(ack.upto) {
                        log(&format!("agent: {e}"));
                    }
                }
                if failing {
                    let left = spool.lock().unwrap().len();
                    log(&format!("agent: central {url} reachable again; {left} results still spooled"));
                    failing = false;
                }
                backoff = 1.0;
                if n < BATCH && nap(stop, Duration::from_millis(500)) {
                    break;
                }
            }
            Err(e) => {
                if !failing {
                    let held = spool.lock().unwrap().len();
                    log(&format!("agent: {e}; {held} results kept in the spool, retrying with backoff"));
                    failing = true;
                }
                if nap(stop, Duration::from_secs_f64(backoff)) {
                    break;
                }
                // Never longer than a heartbeat: central must not take a retrying agent for a
                // silent one.
                backoff = (backoff * 2.0).min(MAX_BACKOFF_S.min(current.get().heartbeat_s));
            }
        }
    }
}

fn send(endpoint: &str, me: &str, key: Option<&PrivateKey>, batch: Batch) -> Result<Ack, String> {
    let body = serde_json::to_vec(&batch).map_err(|e| e.to_string())?;
    let time = now_unix() as i64;
    let mut req = ureq::post(endpoint)
        .timeout(Duration::from_secs(30))
        .set("content-type", "application/json")
        .set("x-wanperf-agent", me)
        .set("x-wanperf-time", &time.to_string());
    if let Some(k) = key {
        req = req.set("x-wanperf-signature", &k.sign_message(&wanperf_mesh::wire::signing_message(me, time, &body)));
    }
    match req.send_bytes(&body) {
        Ok(resp) => resp.into_json::<Ack>().map_err(|e| format!("central {endpoint}: not an acknowledgement: {e}")),
        Err(ureq::Error::Status(code, resp)) => {
            let msg = resp
                .into_json::<serde_json::Value>()
                .ok()
                .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
                .unwrap_or_default();
            Err(format!("central {endpoint} refused the results ({code}): {msg}"))
        }
        Err(e) => Err(format!("central {endpoint} unreachable: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_is_the_stated_one_or_the_kernels() {
        let stated = clock(Some(0.25));
        assert_eq!(stated, Clock { synced: true, error_ms: Some(0.25), source: "stated".into() });
        // adjtimex(2) with modes 0 needs no privilege: the kernel always has an answer.
        let k = clock(None);
        assert_eq!(k.source, "kernel");
        let e = k.error_ms.expect("adjtimex answered");
        assert!(e >= 0.0 && e.is_finite(), "{k:?}");
    }
}
