//! What the report reads out of a run: cells grouped by their swept values (repeats pooled),
//! each group's throughput, retransmits and probe phases, the axes that vary, and the path's
//! rate and base RTT.

use serde_json::Value;
use std::collections::BTreeMap;
use wanperf_archive::{RunData, StoredCell};
use wanperf_stats::analysis::{PhaseStats, RttStats};

/// One probe phase of a group: statistics, and the sorted RTTs when probes were stored.
#[derive(Debug, Clone)]
pub struct Phase {
    /// Seed-style statistics (from the probes, else from the cells' stored summaries).
    pub stats: PhaseStats,
    /// Sorted RTTs of the answered probes, ms (empty when only summaries are known).
    pub sorted: Vec<f64>,
}

/// Cells with the same swept values (their repeats), measured successfully.
#[derive(Debug)]
pub struct Group<'a> {
    /// The swept values.
    pub params: &'a BTreeMap<String, Value>,
    /// The cells (repeats), in stored order.
    pub cells: Vec<&'a StoredCell>,
    /// `load`, `tput`, `ping`, `iperf3`.
    pub kind: String,
    /// Parallel streams, when known.
    pub streams: Option<u32>,
    /// Window per stream, bytes; none when autotuned or unknown.
    pub window: Option<u64>,
    /// Mean goodput over the repeats, bit/s.
    pub tput_bps: Option<f64>,
    /// Mean retransmits over the repeats, segments.
    pub retransmits: Option<f64>,
    /// Mean bytes sent over the repeats, when known.
    pub sent_bytes: Option<f64>,
    /// Probes during the load.
    pub loaded: Option<Phase>,
    /// Probes while idle.
    pub unloaded: Option<Phase>,
    /// Probes of a measurement without phases (ping).
    pub plain: Option<Phase>,
    /// Segment size seen in TCP_INFO, bytes.
    pub mss: Option<f64>,
    /// Median TCP smoothed RTT over the intervals, ms.
    pub srtt_ms: Option<f64>,
}

/// Everything the report draws from.
pub struct View<'a> {
    /// The run.
    pub data: &'a RunData,
    /// Successful cells grouped by params, in order of first appearance.
    pub groups: Vec<Group<'a>>,
    /// Failed cells.
    pub failures: Vec<&'a StoredCell>,
    /// Names of the params that take more than one value, streams and window first.
    pub varying: Vec<String>,
    /// The path rate for queue and BDP arithmetic, bit/s, and where it came from.
    pub rate: Option<(f64, &'static str)>,
    /// The base round trip, ms, and where it came from.
    pub base_rtt: Option<(f64, &'static str)>,
    /// The cells (by index) whose time series the reader chose; none: the report picks.
    pub series: Option<Vec<u32>>,
}

/// A number from JSON (integers and floats).
pub fn num(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64).filter(|x| x.is_finite())
}

fn streams_of(cell: &StoredCell) -> Option<u32> {
    let p = cell.cell.params.get("streams").or_else(|| cell.cell.summary.get("streams"))?;
    match p {
        Value::Array(a) => {
            let n = a.len() as u32;
            Some(if cell.cell.summary.get("directions").is_some() { n / 2 } else { n })
        }
        v => v.as_u64().map(|n| n as u32),
    }
}

fn window_of(cell: &StoredCell) -> Option<u64> {
    cell.cell.params.get("window").or_else(|| cell.cell.summary.get("window")).and_then(Value::as_u64)
}

/// The cell's goodput: its summary's, else the mean of its all-streams intervals.
pub fn cell_tput(cell: &StoredCell) -> Option<f64> {
    num(cell.cell.summary.get("throughput_bps")).or_else(|| {
        let v: Vec<f64> = sum_rows(cell).map(|r| r.throughput_bps).collect();
        wanperf_stats::summary::mean(&v)
    })
}

/// The all-streams interval rows (stream −1); the only stream's rows when there is no sum.
pub fn sum_rows(cell: &StoredCell) -> impl Iterator<Item = &wanperf_archive::IntervalRow> {
    let has_sum = cell.cell.intervals.iter().any(|r| r.stream == -1);
    let first = cell.cell.intervals.first().map(|r| r.stream);
    cell.cell.intervals.iter().filter(move |r| if has_sum { r.stream == -1 } else { Some(r.stream) == first })
}

fn cell_retransmits(cell: &StoredCell) -> Option<f64> {
    num(cell.cell.summary.get("retransmits")).or_else(|| {
        let rows: Vec<u64> = sum_rows(cell).map(|r| r.retransmits).collect();
        (!rows.is_empty()).then(|| rows.iter().sum::<u64>() as f64)
    })
}

fn cell_sent_bytes(cell: &StoredCell) -> Option<f64> {
    num(cell.cell.summary.get("sent_bytes")).or_else(|| {
        let rows: Vec<u64> = sum_rows(cell).map(|r| r.bytes).collect();
        (!rows.is_empty()).then(|| rows.iter().sum::<u64>() as f64)
    })
}

/// Phase statistics from a stored ping summary (`sent`, `received`, `loss_pct`, `rtt_ms`).
fn phase_from_summary(s: &Value) -> Option<PhaseStats> {
    let sent = s.get("sent")?.as_u64()?;
    let received = s.get("received").and_then(Value::as_u64).unwrap_or(0);
    let r = s.get("rtt_ms");
    let f = |k: &str| num(r.and_then(|r| r.get(k)));
    let rtt = if received > 0 {
        Some(RttStats {
            avg: f("avg")?,
            stdev: f("stdev").unwrap_or(0.0),
            median: f("median")?,
            iqr: f("iqr").unwrap_or(0.0),
            min: f("min")?,
            max: f("max")?,
            p90: f("p90"),
            p5: f("p5"),
            p95: f("p95"),
        })
    } else {
        None
    };
    let loss_pct = num(s.get("loss_pct")).unwrap_or(0.0);
    Some(PhaseStats { sent, received, loss_pct, rtt })
}

/// Mean of the repeats' stored summaries (a single cell's own when there is one).
fn mean_phase(v: &[PhaseStats]) -> Option<PhaseStats> {
    let n = v.len() as f64;
    let first = v.first()?;
    if v.len() == 1 {
        return Some(*first);
    }
    let with: Vec<RttStats> = v.iter().filter_map(|p| p.rtt).collect();
    let m = |f: &dyn Fn(&RttStats) -> f64| with.iter().map(f).sum::<f64>() / with.len() as f64;
    let rtt = (!with.is_empty()).then(|| RttStats {
        avg: m(&|r| r.avg),
        stdev: m(&|r| r.stdev),
        median: m(&|r| r.median),
        iqr: m(&|r| r.iqr),
        min: with.iter().map(|r| r.min).fold(f64::INFINITY, f64::min),
        max: with.iter().map(|r| r.max).fold(f64::NEG_INFINITY, f64::max),
        p90: None,
        p5: None,
        p95: None,
    });
    Some(PhaseStats {
        sent: v.iter().map(|p| p.sent).sum(),
        received: v.iter().map(|p| p.received).sum(),
        loss_pct: v.iter().map(|p| p.loss_pct).sum::<f64>() / n,
        rtt,
    })
}

/// A phase pooled over cells: from their probes when any are stored, else from the cells'
/// summaries under `summary_key` (`loaded`, `unloaded`, or the whole summary for ping).
fn phase(cells: &[&StoredCell], tag: &str, summary_key: Option<&str>) -> Option<Phase> {
    let mut sent = 0u64;
    let mut rtts = Vec::new();
    for c in cells {
        for p in c.cell.probes.iter().filter(|p| p.phase == tag) {
            sent += 1;
            if let Some(r) = p.rtt_ms.filter(|r| r.is_finite() && !p.late) {
                rtts.push(r);
            }
        }
    }
    if sent > 0 {
        rtts.sort_by(f64::total_cmp);
        return Some(Phase { stats: PhaseStats::of(&rtts, sent), sorted: rtts });
    }
    let from: Vec<PhaseStats> = cells
        .iter()
        .filter_map(|c| match summary_key {
            Some(k) => c.cell.summary.get(k),
            None => Some(&c.cell.summary),
        })
        .filter_map(phase_from_summary)
        .collect();
    mean_phase(&from).map(|stats| Phase { stats, sorted: Vec::new() })
}

fn mean(v: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let v: Vec<f64> = v.flatten().collect();
    wanperf_stats::summary::mean(&v)
}

fn build_group<'a>(cells: Vec<&'a StoredCell>) -> Group<'a> {
    let c0 = cells[0];
    let kind = c0.cell.kind.clone();
    let plain = match kind.as_str() {
        "load" => None,
        "ping" => phase(&cells, "", None),
        _ => phase(&cells, "", Some("")),
    };
    let mss = cells
        .iter()
        .flat_map(|c| c.cell.intervals.iter())
        .filter_map(|r| num(r.tcp.as_ref().and_then(|t| t.get("snd_mss"))))
        .find(|m| *m > 0.0);
    let mut srtt: Vec<f64> = cells
        .iter()
        .flat_map(|c| c.cell.intervals.iter())
        .filter(|r| r.stream >= 0)
        .filter_map(|r| r.srtt_us)
        .map(|us| f64::from(us) / 1000.0)
        .collect();
    srtt.sort_by(f64::total_cmp);
    Group {
        params: &c0.cell.params,
        kind,
        streams: streams_of(c0),
        window: window_of(c0),
        tput_bps: mean(cells.iter().map(|c| cell_tput(c))),
        retransmits: mean(cells.iter().map(|c| cell_retransmits(c))),
        sent_bytes: mean(cells.iter().map(|c| cell_sent_bytes(c))),
        loaded: phase(&cells, "loaded", Some("loaded")),
        unloaded: phase(&cells, "unloaded", Some("unloaded")),
        plain,
        mss,
        srtt_ms: wanperf_stats::summary::quantile_sorted(&srtt, 0.5),
        cells,
    }
}

/// The first number under any of `keys`, searching `v` depth-first.
fn find_num(v: &Value, keys: &[&str]) -> Option<f64> {
    match v {
        Value::Object(m) => {
            keys.iter().find_map(|k| num(m.get(*k))).or_else(|| m.values().find_map(|x| find_num(x, keys)))
        }
        Value::Array(a) => a.iter().find_map(|x| find_num(x, keys)),
        _ => None,
    }
}

impl<'a> View<'a> {
    /// Groups the run's cells and finds its axes, rate and base RTT.
    pub fn new(data: &'a RunData) -> View<'a> {
        let mut order: Vec<String> = Vec::new();
        let mut by_key: BTreeMap<String, Vec<&StoredCell>> = BTreeMap::new();
        let mut failures = Vec::new();
        for c in &data.cells {
            if !c.cell.ok {
                failures.push(c);
                continue;
            }
            let key = format!("{}|{}", c.cell.kind, serde_json::to_string(&c.cell.params).unwrap_or_default());
            if !by_key.contains_key(&key) {
                order.push(key.clone());
            }
            by_key.entry(key).or_default().push(c);
        }
        let groups: Vec<Group> = order.iter().filter_map(|k| by_key.remove(k)).map(build_group).collect();

        // Params whose values differ between cells (streams and window first).
        let mut values: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for g in &groups {
            for (k, v) in g.params {
                let s = v.to_string();
                let e = values.entry(k.as_str()).or_default();
                if !e.contains(&s) {
                    e.push(s);
                }
            }
        }
        let mut varying: Vec<String> = values.iter().filter(|(_, v)| v.len() > 1).map(|(k, _)| k.to_string()).collect();
        varying.sort_by_key(|k| match k.as_str() {
            "streams" => 0,
            "window" => 1,
            _ => 2,
        });

        let rate = groups
            .iter()
            .find_map(|g| num(g.params.get("rate")))
            .map(|r| (r, "the study's path rate"))
            .or_else(|| {
                // The emulated path each cell ran on (a preset's rate is only there).
                data.cells
                    .iter()
                    .find_map(|c| c.cell.emulator.as_ref().and_then(|e| e["config"]["up"]["rate"]["Constant"].as_f64()))
                    .map(|r| (r, "the emulated path's bottleneck"))
            })
            .or_else(|| {
                find_num(&data.run.spec, &["rate_bps", "rate", "bottleneck_bps"]).map(|r| (r, "the study's path rate"))
            })
            .or_else(|| {
                groups
                    .iter()
                    .filter_map(|g| g.tput_bps)
                    .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))))
                    .map(|r| (r, "the best measured goodput (no path rate in the study)"))
            });
        let min_of = |f: &dyn Fn(&Group) -> Option<f64>| {
            groups.iter().filter_map(f).fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.min(x))))
        };
        let base_rtt = min_of(&|g| g.unloaded.as_ref().or(g.plain.as_ref()).and_then(|p| p.stats.rtt).map(|r| r.min))
            .map(|r| (r, "the minimum unloaded probe RTT"))
            .or_else(|| {
                groups
                    .iter()
                    .find_map(|g| num(g.params.get("rtt")))
                    .or_else(|| find_num(&data.run.spec, &["rtt_s", "rtt"]))
                    .map(|s| (s * 1000.0, "the study's path RTT"))
            })
            .or_else(|| min_of(&|g| g.srtt_ms).map(|r| (r, "the smallest median TCP smoothed RTT")));
        View { data, groups, failures, varying, rate, base_rtt, series: None }
    }

    /// The rate to convert a group's added delay into queued bytes: its own path rate, else
    /// the run's.
    pub fn rate_for(&self, g: &Group) -> Option<f64> {
        num(g.params.get("rate")).or(self.rate.map(|r| r.0))
    }

    /// Groups with both a loaded and an unloaded phase.
    pub fn load_groups(&self) -> impl Iterator<Item = &Group<'a>> {
        self.groups.iter().filter(|g| g.loaded.is_some() && g.unloaded.is_some())
    }
}

/// The varying params other than `except`, as a label ("rate 25 Mbit/s, cc bbr").
pub fn facet_label(params: &BTreeMap<String, Value>, varying: &[String], except: &[&str]) -> String {
    varying
        .iter()
        .filter(|k| !except.contains(&k.as_str()))
        .filter_map(|k| params.get(k).map(|v| crate::fmt::param(k, v)))
        .collect::<Vec<_>>()
        .join(", ")
}
