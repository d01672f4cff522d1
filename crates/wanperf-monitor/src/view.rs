//! The central service's live view of the mesh, without I/O: results in (with the time they
//! came), the grid, the pair pages, events and alerts out. Central rebuilds it from the
//! archive at start ([`View::replay`]) and feeds it every acknowledged batch
//! ([`View::ingest`]); [`View::tick`] finds agents gone silent. Time is always passed in.

use serde::Serialize;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use wanperf_archive::MeshRow;
use wanperf_mesh::config::Mesh;
use wanperf_mesh::events::{route_change, Detector, Event};
use wanperf_mesh::plan::Slot;
use wanperf_mesh::status::{self, Cell, Metric, Status};
use wanperf_mesh::summary::LatencySummary;
use wanperf_mesh::wire::{CapacityResult, Clock, MeshResult, ResultKind, RunStatus, ThroughputResult, TraceResult};

/// Values kept per pair and metric for its baseline.
pub const HISTORY: usize = 500;
/// Events kept in memory (the dashboard's and `/api/v1/events`' window).
pub const MAX_EVENTS: usize = 10_000;
/// The most recent values left out of a baseline, so that a fresh problem is judged against
/// what came before it rather than absorbed into it.
pub const BASELINE_SKIP: usize = 3;
/// Latency slots at most on a pair page.
pub const MAX_SLOTS: usize = 1000;

/// An event to announce (log and webhook).
#[derive(Debug, Clone, Serialize)]
pub struct Alert {
    /// What happened.
    pub event: Event,
}

#[derive(Default)]
struct PairState {
    rtt: VecDeque<f64>,
    loss: VecDeque<f64>,
    tput: VecDeque<f64>,
    latency: Option<LatencySummary>,
    latency_t: f64,
    throughput: Option<ThroughputResult>,
    throughput_t: f64,
    /// The last trace that reached the destination: the route new traces are compared with.
    route: Option<TraceResult>,
    /// The last trace, and when it ran.
    trace: Option<TraceResult>,
    trace_t: f64,
    detectors: Option<[Detector; 4]>,
    /// The last capacity run, and when it ran.
    capacity: Option<CapacityResult>,
    capacity_t: f64,
    updated: f64,
}

fn push(h: &mut VecDeque<f64>, v: f64) {
    if h.len() == HISTORY {
        h.pop_front();
    }
    h.push_back(v);
}

/// The live view.
pub struct View {
    mesh: Arc<Mesh>,
    digest: String,
    started: f64,
    pairs: BTreeMap<(String, String), PairState>,
    last_seen: HashMap<String, f64>,
    high_seq: HashMap<String, u64>,
    silent: HashSet<String>,
    /// Each agent's clock as its last batch stated it.
    clocks: HashMap<String, Clock>,
    events: VecDeque<Event>,
    plan: Option<(String, f64, Vec<Slot>)>,
}

/// Start of the UTC day of `t`.
pub fn day_start(t: f64) -> f64 {
    (t / 86_400.0).floor() * 86_400.0
}

/// The planner's seed for a mesh: the first 64 bits of its digest (BLAKE3, hex), so every
/// agent and central agree.
pub fn seed_of(mesh: &Mesh) -> u64 {
    u64::from_str_radix(&mesh.digest()[..16], 16).unwrap_or(0)
}

/// The day's throughput plan that every agent follows (the UTC day of `t`, plus the first
/// hour of the next so that a run near midnight is planned once). Pure: agents and central
/// compute the same slots from the same mesh file, so no two runs ever need to negotiate.
pub fn day_plan(mesh: &Mesh, t: f64) -> Vec<Slot> {
    let d = day_start(t);
    wanperf_mesh::plan::plan(mesh, d, d + 86_400.0 + 3600.0, seed_of(mesh))
}

impl View {
    /// An empty view of `mesh` at `now`.
    pub fn new(mesh: Arc<Mesh>, now: f64) -> View {
        View {
            digest: mesh.digest(),
            mesh,
            started: now,
            pairs: BTreeMap::new(),
            last_seen: HashMap::new(),
            high_seq: HashMap::new(),
            silent: HashSet::new(),
            clocks: HashMap::new(),
            events: VecDeque::new(),
            plan: None,
        }
    }

    /// The state of `agent`'s clock, as its latest batch states it.
    pub fn set_clock(&mut self, agent: &str, clock: Clock) {
        self.clocks.insert(agent.to_string(), clock);
    }

    /// The mesh it shows.
    pub fn mesh(&self) -> &Mesh {
        &self.mesh
    }

    /// A changed mesh file.
    pub fn set_mesh(&mut self, mesh: Arc<Mesh>) {
        self.digest = mesh.digest();
        self.mesh = mesh;
        self.plan = None;
    }

    /// When each agent was last heard from.
    pub fn last_seen(&self) -> &HashMap<String, f64> {
        &self.last_seen
    }

    /// Results stored before central (re)started, in start order.
    pub fn replay(&mut self, rows: &[MeshRow]) {
        let mut rows: Vec<&MeshRow> = rows.iter().collect();
        rows.sort_by(|a, b| a.agent.cmp(&b.agent).then(a.seq.cmp(&b.seq)));
        for row in rows {
            let seen = self.last_seen.entry(row.agent.clone()).or_insert(row.received_unix);
            *seen = seen.max(row.received_unix);
            if let Ok(r) = serde_json::from_value::<MeshResult>(row.detail.clone()) {
                let high = self.high_seq.entry(row.agent.clone()).or_insert(0);
                *high = (*high).max(r.seq);
                self.apply(&r);
            }
        }
    }

    /// A batch acknowledged at `now`; returns the alerts it raised.
    pub fn ingest(&mut self, agent: &str, results: &[MeshResult], now: f64) -> Vec<Alert> {
        self.last_seen.insert(agent.to_string(), now);
        let mut alerts = Vec::new();
        if self.silent.remove(agent) {
            let e = wanperf_mesh::events::back_event(agent, now);
            alerts.push(self.record(e));
        }
        let mut sorted: Vec<&MeshResult> = results.iter().collect();
        sorted.sort_by_key(|r| r.seq);
        for r in sorted {
            let high = self.high_seq.entry(agent.to_string()).or_insert(0);
            if r.seq <= *high {
                continue; // a retried result already in the view
            }
            *high = r.seq;
            for e in self.apply(r) {
                alerts.push(Alert { event: e });
            }
        }
        alerts
    }

    /// Keeps an event among the newest [`MAX_EVENTS`].
    fn keep(&mut self, e: Event) {
        if self.events.len() == MAX_EVENTS {
            self.events.pop_front();
        }
        self.events.push_back(e);
    }

    /// Keeps an event and announces it.
    fn record(&mut self, e: Event) -> Alert {
        self.keep(e.clone());
        Alert { event: e }
    }

    /// Feeds one result into its pair's state; returns the events it caused (recorded).
    fn apply(&mut self, r: &MeshResult) -> Vec<Event> {
        if r.status != RunStatus::Ok {
            return Vec::new();
        }
        let p = self.pairs.entry((r.src.clone(), r.dst.clone())).or_default();
        let dets = p.detectors.get_or_insert_with(|| {
            [
                Detector::new(&r.src, &r.dst, Metric::Throughput),
                Detector::new(&r.src, &r.dst, Metric::Loss),
                Detector::new(&r.src, &r.dst, Metric::Rtt),
                Detector::new(&r.src, &r.dst, Metric::Capacity),
            ]
        });
        let mut out = Vec::new();
        match r.kind {
            ResultKind::Latency => {
                if let Some(s) = &r.latency {
                    if let Some(m) = s.median_ms {
                        push(&mut p.rtt, m);
                        out.extend(dets[2].push(r.end, m));
                    }
                    push(&mut p.loss, s.loss);
                    out.extend(dets[1].push(r.end, s.loss));
                    p.latency = Some(s.clone());
                    p.latency_t = r.end;
                }
            }
            ResultKind::Throughput => {
                if let Some(t) = &r.throughput {
                    push(&mut p.tput, t.bps);
                    out.extend(dets[0].push(r.start, t.bps));
                    p.throughput = Some(t.clone());
                    p.throughput_t = r.start;
                }
            }
            ResultKind::Capacity => {
                if let Some(c) = &r.capacity {
                    out.extend(dets[3].push(r.start, c.bps));
                    p.capacity = Some(c.clone());
                    p.capacity_t = r.start;
                }
            }
            ResultKind::Trace => {
                if let Some(t) = &r.trace {
                    if let Some(e) = p.route.as_ref().and_then(|prev| route_change(&r.src, &r.dst, r.start, prev, t)) {
                        out.push(e);
                    }
                    // A trace that did not reach the destination is compared, but the route
                    // to compare with stays the last whole one.
                    if t.reached {
                        p.route = Some(t.clone());
                    }
                    p.trace = Some(t.clone());
                    p.trace_t = r.start;
                }
            }
        }
        p.updated = p.updated.max(r.end);
        for e in &out {
            self.keep(e.clone());
        }
        out
    }

    /// How often `host` must be heard from, s: its most frequent duty (a latency summary
    /// period, a throughput interval), at least the agents' heartbeat and at most twice it.
    fn contact_interval(&self, host: &str) -> f64 {
        let beat = self.mesh.heartbeat_s;
        self.mesh.report_interval(host).unwrap_or(f64::INFINITY).clamp(beat, 2.0 * beat)
    }

    /// Agents gone silent since the last tick (each announced once).
    pub fn tick(&mut self, now: f64) -> Vec<Alert> {
        let mut alerts = Vec::new();
        let hosts: Vec<String> = self.mesh.hosts.iter().map(|h| h.name.clone()).collect();
        for h in hosts {
            let last = self.last_seen.get(&h).copied();
            let every = self.contact_interval(&h);
            let since = last.unwrap_or(self.started);
            if !self.silent.contains(&h)
                && wanperf_mesh::events::silent(&h, Some(since), every, self.mesh.silent_after, now)
            {
                self.silent.insert(h.clone());
                let e = wanperf_mesh::events::silent_event(&h, last, now);
                alerts.push(self.record(e));
            }
        }
        alerts
    }

    /// The newest `limit` events, newest first.
    pub fn events(&self, limit: usize) -> Vec<Event> {
        self.events.iter().rev().take(limit).cloned().collect()
    }

    /// The throughput slots in `[from, to)`, of one host (as source or destination) or all.
    pub fn slots(&mut self, from: f64, to: f64, host: Option<&str>) -> Vec<Slot> {
        let mut out = Vec::new();
        let mut day = day_start(from);
        while day < to {
            let fresh = matches!(&self.plan, Some((d, t, _)) if *d == self.digest && *t == day);
            if !fresh {
                self.plan = Some((self.digest.clone(), day, day_plan(&self.mesh, day)));
            }
            if let Some((_, _, slots)) = &self.plan {
                out.extend(
                    slots
                        .iter()
                        .filter(|s| s.start >= from.max(day) && s.start < to.min(day + 86_400.0))
                        .filter(|s| host.is_none_or(|h| s.src == h || s.dst == h))
                        .cloned(),
                );
            }
            day += 86_400.0;
        }
        out
    }

    /// One metric of a cell (measured at `t`): its newest value against the pair's baseline,
    /// as the grid's JSON, and its status (Unknown without a value).
    fn judge(&self, metric: Metric, hist: &VecDeque<f64>, (src, dst): (&str, &str), t: f64) -> (Value, Status) {
        let Some(&value) = hist.back() else { return (Value::Null, Status::Unknown) };
        let earlier: Vec<f64> = hist.iter().take(hist.len().saturating_sub(BASELINE_SKIP)).copied().collect();
        let base = status::baseline(&earlier);
        let st = status::classify(metric, value, base.as_ref(), &self.mesh.expect_for(src, dst));
        (json!({ "value": value, "baseline": base.map(|b| b.median), "status": st, "t": t }), st)
    }

    /// The grid: every pair of every test, judged against its own baseline and the mesh's
    /// expectations; rows and columns that fail together; silent hosts; recent events.
    pub fn grid(&self, now: f64) -> Value {
        let mut pairs: Vec<(String, String)> = Vec::new();
        for t in &self.mesh.tests {
            pairs.extend(self.mesh.pairs(t));
        }
        pairs.sort();
        pairs.dedup();
        let empty = PairState::default();
        let mut cells = Vec::new();
        let mut judged = Vec::new();
        for (src, dst) in &pairs {
            let p = self.pairs.get(&(src.clone(), dst.clone())).unwrap_or(&empty);
            let pair = (src.as_str(), dst.as_str());
            let (mut tput, t_st) = self.judge(Metric::Throughput, &p.tput, pair, p.throughput_t);
            if let (Some(t), Some(o)) = (&p.throughput, tput.as_object_mut()) {
                o.insert("streams".into(), json!(t.streams));
                o.insert("window".into(), json!(t.window));
            }
            let (loss, l_st) = self.judge(Metric::Loss, &p.loss, pair, p.latency_t);
            let (rtt, r_st) = self.judge(Metric::Rtt, &p.rtt, pair, p.latency_t);
            // The cell's worst metric (Status orders Ok < Warn < Bad; Unknown only if all are).
            let worst =
                [t_st, l_st, r_st].into_iter().filter(|s| *s != Status::Unknown).max().unwrap_or(Status::Unknown);
            judged.push(Cell { src: src.clone(), dst: dst.clone(), status: worst });
            cells.push(json!({
                "src": src, "dst": dst, "updated": (p.updated > 0.0).then_some(p.updated),
                "throughput": tput, "loss": loss, "rtt": rtt,
            }));
        }
        let mesh = &self.mesh;
        let site = |h: &str| mesh.site_of(h).map(str::to_string);
        let callouts = status::callouts(&judged, &site);
        let hosts: Vec<Value> = mesh
            .hosts
            .iter()
            .map(|h| {
                json!({ "name": h.name, "site": h.site, "last_seen": self.last_seen.get(&h.name),
                        "silent": self.silent.contains(&h.name) })
            })
            .collect();
        json!({
            "mesh": mesh.name, "generated": now, "hosts": hosts, "cells": cells,
            "callouts": callouts, "events": self.events(10),
        })
    }
}

/// A result as the archive's row.
pub fn to_row(agent: &str, r: &MeshResult, received: f64) -> Result<MeshRow, String> {
    if !(r.start.is_finite() && r.end.is_finite() && r.end >= r.start) {
        return Err("start and end must be times, end not before start".into());
    }
    let (value, loss) = match (&r.latency, &r.throughput, &r.trace) {
        (Some(l), _, _) => (l.median_ms, Some(l.loss)),
        (None, Some(t), _) => (Some(t.bps), None),
        // A trace's headline: the destination's median RTT.
        (None, None, Some(t)) => (t.hops.last().filter(|_| t.reached).and_then(|h| h.rtt_ms), None),
        (None, None, None) => (r.capacity.as_ref().map(|c| c.bps), None),
    };
    let stats = r.latency.as_ref().map(|l| wanperf_archive::MeshStats {
        sent: l.sent as i64,
        lost: l.lost as i64,
        min_ms: l.min_ms,
        p25_ms: l.p25_ms,
        p75_ms: l.p75_ms,
        p90_ms: l.p90_ms,
        max_ms: l.max_ms,
        owd_fwd_ms: l.owd_fwd_median_ms,
        owd_rev_ms: l.owd_rev_median_ms,
    });
    Ok(MeshRow {
        agent: agent.to_string(),
        seq: i64::try_from(r.seq).map_err(|_| "seq out of range")?,
        test: r.test.clone(),
        kind: crate::serde_name(&r.kind),
        src: r.src.clone(),
        dst: r.dst.clone(),
        start_unix: r.start,
        end_unix: r.end,
        status: crate::serde_name(&r.status),
        reason: r.reason.clone(),
        value,
        loss,
        stats,
        detail: serde_json::to_value(r).map_err(|e| e.to_string())?,
        received_unix: received,
    })
}

/// The slot length of a pair page over `[from, to)`: whole summary periods, at most
/// [`MAX_SLOTS`] slots.
pub fn slot_length(view: &View, from: f64, to: f64) -> f64 {
    let period = view.mesh.summary_s.max(1.0);
    ((to - from) / MAX_SLOTS as f64 / period).ceil().max(1.0) * period
}

/// The pair page's data: latency summaries already merged per slot by the archive
/// (`Store::mesh_slots`), every throughput test, the failed runs, and the pair's events.
#[allow(clippy::too_many_arguments)] // the page's query, as the handler received it
pub fn pair_page(
    view: &View,
    src: &str,
    dst: &str,
    (from, to, slot_s): (f64, f64, f64),
    slots: &[wanperf_archive::MeshSlot],
    tests: &[MeshRow],
    failed: &[MeshRow],
    capacity_rows: &[MeshRow],
) -> Value {
    let latency: Vec<Value> = slots
        .iter()
        .map(|s| {
            json!({
                "t": from + s.index as f64 * slot_s, "sent": s.sent,
                "loss": if s.sent > 0 { s.lost as f64 / s.sent as f64 } else { 0.0 },
                "min": s.min_ms, "p25": s.p25_ms, "median": s.median_ms, "p75": s.p75_ms, "p90": s.p90_ms,
                "max": s.max_ms, "owd_fwd": s.owd_fwd_ms, "owd_rev": s.owd_rev_ms,
            })
        })
        .collect();
    let mut tput = Vec::new();
    for row in tests.iter().filter(|r| r.status == "ok") {
        let Ok(r) = serde_json::from_value::<MeshResult>(row.detail.clone()) else { continue };
        if let Some(t) = &r.throughput {
            tput.push(json!({
                "t": r.start, "bps": t.bps, "streams": t.streams, "window": t.window, "status": "ok",
                "retransmits": t.retransmits, "rtt_ms": t.rtt_ms, "verdict": t.verdict, "reason": Value::Null,
            }));
        }
    }
    let failures: Vec<Value> = tests
        .iter()
        .filter(|r| r.status != "ok")
        .chain(failed)
        .map(|r| json!({ "t": r.start_unix, "kind": r.kind, "status": r.status, "reason": r.reason }))
        .collect();
    let events: Vec<&Event> =
        view.events.iter().filter(|e| e.src == src && e.dst == dst && e.t >= from && e.t < to).collect();
    let capacity: Vec<Value> = capacity_rows
        .iter()
        .filter(|r| r.status == "ok")
        .filter_map(|row| serde_json::from_value::<MeshResult>(row.detail.clone()).ok())
        .filter_map(|r| {
            let c = r.capacity?;
            Some(json!({
                "t": r.start, "bps": c.bps, "low_bps": c.low_bps, "high_bps": c.high_bps,
                "available_bps": c.available_bps, "bottleneck_ttl": c.bottleneck_ttl,
                "bottleneck_address": c.bottleneck_address,
            }))
        })
        .collect();
    let pair = view.pairs.get(&(src.to_string(), dst.to_string()));
    let route = pair.and_then(|p| Some(json!({ "t": p.trace_t, "trace": p.trace.as_ref()? })));
    let (cs, cd) = (view.clocks.get(src), view.clocks.get(dst));
    json!({
        "mesh": view.mesh.name, "src": src, "dst": dst, "from": from, "to": to, "slot_s": slot_s,
        "latency": latency, "throughput": tput, "failures": failures,
        "clock_error_ms": Clock::pair_error_ms(cs, cd), "clocks": { "src": cs, "dst": cd },
        "route": route, "capacity": capacity, "events": events,
    })
}
