//! `wanperf central`: the mesh's central service (axum on tokio) over the archive.
//!
//! * `POST /api/v1/results` takes an agent's signed batch (headers `x-wanperf-agent`,
//!   `x-wanperf-time`, `x-wanperf-signature`), stores it (`Store::store_mesh`, idempotent per
//!   `(agent, seq)`) and only then acknowledges it; the agent deletes from its spool what was
//!   acknowledged, so a result is lost neither when central is down nor when an answer is.
//! * `GET /api/v1/mesh` serves the mesh file (agents poll it; a changed file is picked up
//!   here within [`CentralConfig::reload_every`]).
//! * `GET /api/v1/grid`, `/api/v1/pair`, `/api/v1/events`, `/api/v1/slots`: the dashboard's JSON.
//! * `GET /` and `/assets/dashboard.js`: the dashboard (built into the binary).
//! * `GET /metrics`: Prometheus text.
//!
//! The archive is owned by one thread ([`store_thread`]); handlers talk to it over a channel,
//! so a SQLite or PostgreSQL store (neither is `Sync`) serves async handlers without locks.
//! The live view (latest values, baselines, detectors, events, agents' last contact) is kept
//! in memory ([`crate::view::View`]) and rebuilt from the archive when central starts.

use crate::view::{Alert, View};
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use wanperf_archive::{MeshQuery, MeshRow, MeshSlot, Store};
use wanperf_mesh::config::Mesh;
use wanperf_mesh::wire::{Ack, Batch};

/// Largest batch body accepted (an agent sends at most a few hundred results at once).
pub const MAX_BODY: usize = 8 << 20;
/// Days of results replayed into the live view at start.
pub const REPLAY_DAYS: f64 = 14.0;

/// Settings of `wanperf central`.
#[derive(Debug, Clone)]
pub struct CentralConfig {
    /// Where to listen (port 0: any free port, announced through `ready`).
    pub listen: SocketAddr,
    /// The archive (`wanperf_archive::open` spec: a SQLite path or a postgres:// URL).
    pub db: String,
    /// The mesh file.
    pub mesh_path: PathBuf,
    /// Accept results from hosts that have no key in the mesh file (unsigned). Off by default:
    /// a host without a key is refused.
    pub insecure: bool,
    /// URL that alerts are POSTed to (JSON), besides the log.
    pub webhook: Option<String>,
    /// How often the mesh file is checked for changes.
    pub reload_every: Duration,
    /// Listening sockets bound elsewhere that serve the same API, e.g. one in another network
    /// namespace (`wanperf mesh demo` hands the dashboard on the machine's loopback to a
    /// central that runs inside an emulated host).
    pub extra_listeners: Vec<Arc<std::net::TcpListener>>,
}

/// Why central could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum CentralError {
    /// The mesh file.
    #[error("{0}")]
    Mesh(String),
    /// The archive.
    #[error("archive: {0}")]
    Archive(#[from] wanperf_archive::ArchiveError),
    /// Sockets and the runtime.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

type Reply<T> = oneshot::Sender<wanperf_archive::Result<T>>;

enum StoreCmd {
    Store(Vec<MeshRow>, Reply<u64>),
    Query(MeshQuery, Reply<Vec<MeshRow>>),
    /// src, dst, from, to, slot length.
    Slots((String, String, f64, f64, f64), Reply<Vec<wanperf_archive::MeshSlot>>),
}

/// The archive's owner: one thread, commands in order.
fn store_thread(mut store: Box<dyn Store>, mut rx: mpsc::Receiver<StoreCmd>) {
    while let Some(cmd) = rx.blocking_recv() {
        match cmd {
            StoreCmd::Store(rows, reply) => {
                let _ = reply.send(store.store_mesh(&rows));
            }
            StoreCmd::Query(q, reply) => {
                let _ = reply.send(store.mesh_results(&q));
            }
            StoreCmd::Slots((src, dst, from, to, slot), reply) => {
                let _ = reply.send(store.mesh_slots(&src, &dst, from, to, slot));
            }
        }
    }
}

struct App {
    store: mpsc::Sender<StoreCmd>,
    view: Mutex<View>,
    mesh_text: Mutex<(String, String)>,
    insecure: bool,
    alerts: mpsc::UnboundedSender<Alert>,
    metrics: crate::metrics::Metrics,
}

impl App {
    async fn ask<T>(&self, cmd: impl FnOnce(Reply<T>) -> StoreCmd) -> Result<T, String> {
        let (tx, rx) = oneshot::channel();
        self.store.send(cmd(tx)).await.map_err(|_| "the archive thread has stopped".to_string())?;
        rx.await.map_err(|_| "the archive thread has stopped".to_string())?.map_err(|e| e.to_string())
    }

    async fn query(&self, q: MeshQuery) -> Result<Vec<MeshRow>, String> {
        self.ask(|tx| StoreCmd::Query(q, tx)).await
    }

    async fn slots(&self, src: &str, dst: &str, from: f64, to: f64, slot: f64) -> Result<Vec<MeshSlot>, String> {
        self.ask(|tx| StoreCmd::Slots((src.to_string(), dst.to_string(), from, to, slot), tx)).await
    }
}

fn now_unix() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

fn read_mesh(path: &std::path::Path) -> Result<(Mesh, String), CentralError> {
    crate::read_mesh(path).map_err(|e| CentralError::Mesh(e.to_string()))
}

/// Runs central until `shutdown` is set. `ready` is called with the bound address once the
/// service answers requests.
pub fn run(
    cfg: CentralConfig,
    shutdown: Arc<AtomicBool>,
    ready: impl FnOnce(SocketAddr) + Send,
    log: crate::Log,
) -> Result<(), CentralError> {
    let (mesh, text) = read_mesh(&cfg.mesh_path)?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(async move {
        let (store_tx, store_rx) = mpsc::channel(64);
        // The store is opened in its own thread (neither store is Send); the first answer
        // says whether it opened.
        let (opened_tx, opened_rx) = std::sync::mpsc::channel();
        let db = cfg.db.clone();
        let store_join = std::thread::Builder::new().name("wanperf-archive".into()).spawn(move || {
            match wanperf_archive::open(&db) {
                Ok(store) => {
                    let _ = opened_tx.send(Ok(()));
                    store_thread(store, store_rx);
                }
                Err(e) => {
                    let _ = opened_tx.send(Err(e));
                }
            }
        })?;
        opened_rx.recv().map_err(|_| CentralError::Mesh("the archive thread died".into()))??;
        let (alert_tx, alert_rx) = mpsc::unbounded_channel();
        let digest = mesh.digest();
        let app = Arc::new(App {
            store: store_tx,
            view: Mutex::new(View::new(Arc::new(mesh), now_unix())),
            mesh_text: Mutex::new((text, digest)),
            insecure: cfg.insecure,
            alerts: alert_tx,
            metrics: crate::metrics::Metrics::new(),
        });
        // The live view starts from what the archive holds.
        let now = now_unix();
        let replay = app
            .query(MeshQuery { from_unix: now - REPLAY_DAYS * 86_400.0, to_unix: now + 86_400.0, ..Default::default() })
            .await
            .map_err(|e| CentralError::Mesh(format!("cannot read the archive's mesh results: {e}")))?;
        let replayed = replay.len();
        app.view.lock().unwrap().replay(&replay);
        log(&format!("central: {replayed} stored results replayed into the live view"));

        let listener = tokio::net::TcpListener::bind(cfg.listen).await?;
        let addr = listener.local_addr()?;
        let router = Router::new()
            .route("/", get(dashboard))
            .route("/assets/dashboard.js", get(dashboard_js))
            .route("/api/v1/results", post(results))
            .route("/api/v1/mesh", get(mesh_file))
            .route("/api/v1/grid", get(grid))
            .route("/api/v1/pair", get(pair))
            .route("/api/v1/events", get(events))
            .route("/api/v1/slots", get(slots))
            .route("/metrics", get(metrics))
            .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
            .with_state(app.clone());

        let mut extra = Vec::new();
        for l in &cfg.extra_listeners {
            let l = l.try_clone()?;
            l.set_nonblocking(true)?;
            let l = tokio::net::TcpListener::from_std(l)?;
            let (r, stop) = (router.clone(), shutdown.clone());
            extra.push(tokio::spawn(async move {
                let _ = axum::serve(l, r)
                    .with_graceful_shutdown(async move {
                        while !stop.load(Ordering::Acquire) {
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                    })
                    .await;
            }));
        }
        let tick = tokio::spawn(ticker(app.clone(), cfg.clone(), shutdown.clone(), log.clone()));
        let alerts = tokio::spawn(alerter(alert_rx, cfg.webhook.clone(), log.clone()));
        ready(addr);
        let stop = shutdown.clone();
        axum::serve(listener, router)
            .with_graceful_shutdown(async move {
                while !stop.load(Ordering::Acquire) {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
            .await?;
        for e in extra {
            let _ = e.await;
        }
        tick.abort();
        drop(app);
        alerts.abort();
        // The router and the ticker held the last senders: the archive thread ends.
        tokio::task::spawn_blocking(move || store_join.join()).await.ok();
        Ok(())
    })
}

/// Every second: silent agents, the mesh file's changes.
async fn ticker(app: Arc<App>, cfg: CentralConfig, shutdown: Arc<AtomicBool>, log: crate::Log) {
    let mut last_check = std::time::Instant::now();
    let mut mtime = std::fs::metadata(&cfg.mesh_path).and_then(|m| m.modified()).ok();
    while !shutdown.load(Ordering::Acquire) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let alerts = app.view.lock().unwrap().tick(now_unix());
        for a in alerts {
            let _ = app.alerts.send(a);
        }
        if last_check.elapsed() >= cfg.reload_every {
            last_check = std::time::Instant::now();
            let m = std::fs::metadata(&cfg.mesh_path).and_then(|m| m.modified()).ok();
            if m != mtime {
                mtime = m;
                match read_mesh(&cfg.mesh_path) {
                    Ok((mesh, text)) => {
                        let digest = mesh.digest();
                        let mut cur = app.mesh_text.lock().unwrap();
                        if cur.1 != digest {
                            log(&format!("central: mesh file changed (digest {digest}); agents will follow"));
                            *cur = (text, digest);
                            app.view.lock().unwrap().set_mesh(Arc::new(mesh));
                        }
                    }
                    Err(e) => log(&format!("central: keeping the previous mesh: {e}")),
                }
            }
        }
    }
}

/// Alerts go to the log and, when set, to the webhook (a failed POST is logged, not retried:
/// the event stays on the dashboard and in `/api/v1/events`).
async fn alerter(mut rx: mpsc::UnboundedReceiver<Alert>, webhook: Option<String>, log: crate::Log) {
    while let Some(a) = rx.recv().await {
        log(&format!("ALERT {}", a.event.text));
        if let Some(url) = webhook.clone() {
            let body = serde_json::to_value(&a).unwrap_or_default();
            let log = log.clone();
            let _ = tokio::task::spawn_blocking(move || {
                let r = ureq::post(&url).timeout(Duration::from_secs(5)).send_json(body);
                if let Err(e) = r {
                    log(&format!("webhook {url}: {e}"));
                }
            })
            .await;
        }
    }
}

fn error(status: StatusCode, msg: impl Into<String>) -> Response {
    (status, Json(serde_json::json!({ "error": msg.into() }))).into_response()
}

/// Checks a batch's agent, time and signature against the mesh file.
// The refusal is the HTTP response itself, built once where the reason is known.
#[allow(clippy::result_large_err)]
fn authenticate(app: &App, headers: &HeaderMap, body: &[u8]) -> Result<String, Response> {
    let h = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
    let agent = h("x-wanperf-agent").ok_or_else(|| error(StatusCode::BAD_REQUEST, "no x-wanperf-agent header"))?;
    let key = {
        let view = app.view.lock().unwrap();
        let host = view
            .mesh()
            .host(&agent)
            .ok_or_else(|| error(StatusCode::FORBIDDEN, format!("`{agent}` is not a host of this mesh")))?;
        host.key.clone()
    };
    let Some(key) = key else {
        if app.insecure {
            return Ok(agent);
        }
        return Err(error(
            StatusCode::FORBIDDEN,
            format!("`{agent}` has no key in the mesh file; central accepts only signed results (or run it with --insecure)"),
        ));
    };
    let time: i64 = h("x-wanperf-time")
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| error(StatusCode::UNAUTHORIZED, "no valid x-wanperf-time header"))?;
    let sig =
        h("x-wanperf-signature").ok_or_else(|| error(StatusCode::UNAUTHORIZED, "no x-wanperf-signature header"))?;
    let public = wanperf_proto::auth::PublicKey::parse(&key)
        .map_err(|e| error(StatusCode::INTERNAL_SERVER_ERROR, format!("the mesh file's key of `{agent}`: {e}")))?;
    wanperf_mesh::wire::verify_batch(&public, &agent, time, body, &sig, now_unix())
        .map_err(|e| error(StatusCode::UNAUTHORIZED, format!("`{agent}`: {e}")))?;
    Ok(agent)
}

async fn results(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    let agent = match authenticate(&app, &headers, &body) {
        Ok(a) => a,
        Err(r) => {
            app.metrics.refused.inc();
            return r;
        }
    };
    let batch: Batch = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("not a batch of results: {e}")),
    };
    if batch.agent != agent {
        return error(StatusCode::BAD_REQUEST, "the batch names another agent than its header");
    }
    let received = now_unix();
    let mut rows = Vec::with_capacity(batch.results.len());
    for r in &batch.results {
        // Only its source must be the agent: a result of a test the mesh has since dropped is
        // still the agent's measurement (so `MeshResult::validate` is not the rule here).
        if r.src != agent {
            return error(StatusCode::BAD_REQUEST, format!("result {} is from {}, not from {agent}", r.seq, r.src));
        }
        match crate::view::to_row(&agent, r, received) {
            Ok(row) => rows.push(row),
            Err(e) => return error(StatusCode::BAD_REQUEST, format!("result {}: {e}", r.seq)),
        }
    }
    let upto = batch.results.iter().map(|r| r.seq).max().unwrap_or(0);
    let n = rows.len() as u64;
    let (tx, rx) = oneshot::channel();
    if app.store.send(StoreCmd::Store(rows, tx)).await.is_err() {
        return error(StatusCode::SERVICE_UNAVAILABLE, "the archive thread has stopped");
    }
    let accepted = match rx.await {
        Ok(Ok(n)) => n,
        Ok(Err(e)) => return error(StatusCode::SERVICE_UNAVAILABLE, format!("archive: {e}")),
        Err(_) => return error(StatusCode::SERVICE_UNAVAILABLE, "the archive thread has stopped"),
    };
    app.metrics.batch(&batch, accepted, received);
    let alerts = {
        let mut view = app.view.lock().unwrap();
        if let Some(c) = batch.clock.clone() {
            view.set_clock(&agent, c);
        }
        view.ingest(&agent, &batch.results, received)
    };
    for a in alerts {
        let _ = app.alerts.send(a);
    }
    Json(Ack { accepted, duplicates: n - accepted, upto }).into_response()
}

async fn mesh_file(State(app): State<Arc<App>>) -> Response {
    let (text, digest) = app.mesh_text.lock().unwrap().clone();
    Json(serde_json::json!({ "digest": digest, "text": text })).into_response()
}

async fn grid(State(app): State<Arc<App>>) -> Response {
    let g = app.view.lock().unwrap().grid(now_unix());
    Json(g).into_response()
}

async fn events(State(app): State<Arc<App>>, Query(q): Query<HashMap<String, String>>) -> Response {
    let limit = q.get("limit").and_then(|l| l.parse().ok()).unwrap_or(200usize).min(10_000);
    let (ev, mesh) = {
        let v = app.view.lock().unwrap();
        (v.events(limit), v.mesh().name.clone())
    };
    Json(serde_json::json!({ "mesh": mesh, "events": ev })).into_response()
}

async fn slots(State(app): State<Arc<App>>, Query(q): Query<HashMap<String, String>>) -> Response {
    let now = now_unix();
    let from = q.get("from").and_then(|v| v.parse().ok()).unwrap_or(now - 3600.0);
    let to = q.get("to").and_then(|v| v.parse().ok()).unwrap_or(now + 3600.0);
    // NaN (`from=nan`) is refused with the rest: no ordering at all is not "from before to".
    if to.partial_cmp(&from) != Some(std::cmp::Ordering::Greater) || to - from > 7.0 * 86_400.0 {
        return error(StatusCode::BAD_REQUEST, "from and to: at most 7 days, from before to");
    }
    let s = app.view.lock().unwrap().slots(from, to, q.get("host").map(String::as_str));
    Json(serde_json::json!({ "slots": s })).into_response()
}

async fn pair(State(app): State<Arc<App>>, Query(q): Query<HashMap<String, String>>) -> Response {
    let (Some(src), Some(dst)) = (q.get("src"), q.get("dst")) else {
        return error(StatusCode::BAD_REQUEST, "src and dst are required");
    };
    let now = now_unix();
    let to = q.get("to").and_then(|v| v.parse().ok()).unwrap_or(now);
    let from = q.get("from").and_then(|v| v.parse().ok()).unwrap_or(to - 86_400.0);
    if to.partial_cmp(&from) != Some(std::cmp::Ordering::Greater) {
        return error(StatusCode::BAD_REQUEST, "from must be before to");
    }
    // Without an asked-for range, the last day shrinks to the pair's data (a mesh started an
    // hour ago shows its hour, not 23 empty hours): the first day-long slot with data, then
    // the first summary period within it.
    let period = app.view.lock().unwrap().mesh().summary_s.max(1.0);
    let from = if q.contains_key("from") {
        from
    } else {
        match app.slots(src, dst, from, to, 86_400.0).await {
            Ok(days) => match days.first().map(|d| from + d.index as f64 * 86_400.0) {
                Some(day) => match app.slots(src, dst, day, to.min(day + 86_400.0), period).await {
                    Ok(s) => s.first().map_or(from, |s| from.max(day + (s.index - 1) as f64 * period)),
                    Err(e) => return error(StatusCode::SERVICE_UNAVAILABLE, e),
                },
                None => from,
            },
            Err(e) => return error(StatusCode::SERVICE_UNAVAILABLE, e),
        }
    };
    let mut slot_s = crate::view::slot_length(&app.view.lock().unwrap(), from, to);
    let mut from = from;
    if slot_s > 3600.0 {
        // Whole hours from an hour boundary: the archive reads its hourly sums.
        slot_s = (slot_s / 3600.0).ceil() * 3600.0;
        from = (from / 3600.0).floor() * 3600.0;
    }
    let base = MeshQuery {
        from_unix: from,
        to_unix: to,
        src: Some(src.clone()),
        dst: Some(dst.clone()),
        ..Default::default()
    };
    let slots = app.slots(src, dst, from, to, slot_s).await;
    let tests = app.query(MeshQuery { kind: Some("throughput".into()), ..base.clone() }).await;
    let caps = app.query(MeshQuery { kind: Some("capacity".into()), ..base.clone() }).await;
    let failed = app.query(MeshQuery { kind: Some("latency".into()), failed_only: true, ..base }).await;
    let (slots, tests, failed, caps) = match (slots, tests, failed, caps) {
        (Ok(s), Ok(t), Ok(f), Ok(c)) => (s, t, f, c),
        (Err(e), ..) | (_, Err(e), ..) | (_, _, Err(e), _) | (.., Err(e)) => {
            return error(StatusCode::SERVICE_UNAVAILABLE, e)
        }
    };
    let view = app.view.lock().unwrap();
    Json(crate::view::pair_page(&view, src, dst, (from, to, slot_s), &slots, &tests, &failed, &caps)).into_response()
}

async fn metrics(State(app): State<Arc<App>>) -> Response {
    let now = now_unix();
    let text = {
        let view = app.view.lock().unwrap();
        app.metrics.render(&view, now)
    };
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], text).into_response()
}

async fn dashboard() -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], include_str!("../assets/dashboard.html")).into_response()
}

async fn dashboard_js() -> Response {
    ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], include_str!("../assets/dashboard.js")).into_response()
}
