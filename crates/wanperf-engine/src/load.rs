//! `wanperf load`'s measurement: seed 000's experiment — probes on one schedule across
//! alternating loaded and idle phases — for one (streams, window) cell, and its table.

use crate::client::{self, ClientConfig, Sink};
use crate::ping::{self, PingConfig, PingMode, PingSummary, ProbeRecord};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wanperf_proto::msg::{Direction, TestSpec, DEFAULT_PORT};
use wanperf_proto::record::{EndRecord, IntervalRecord, StartRecord};
use wanperf_proto::units::{fmt_bytes, fmt_rate, parse_size};

/// Why a cell could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The probes failed (e.g. the server went away before the first one).
    #[error(transparent)]
    Ping(#[from] ping::PingError),
    /// The probe thread panicked.
    #[error("the probe thread failed")]
    ProbeThread,
}

/// How to measure a cell.
pub struct LoadConfig {
    /// The server.
    pub host: String,
    /// Its port (none: wanperf's or iperf3's default).
    pub port: Option<u16>,
    /// The server is an iperf3 one (probes by ICMP).
    pub iperf3: bool,
    /// Probe with STAMP to this port of the server's host instead.
    pub stamp_port: Option<u16>,
    /// Congestion control of the load.
    pub cc: Option<String>,
    /// The load flows from the server.
    pub reverse: bool,
    /// Loaded and idle phases per cell.
    pub cycles: u32,
    /// Seconds of each phase.
    pub load_s: f64,
    /// Seconds of each idle phase.
    pub idle_s: f64,
    /// Seconds between probes.
    pub interval_s: f64,
    /// Probe timeout, seconds.
    pub timeout_s: f64,
    /// Probe size, bytes.
    pub size: u32,
    /// Probes' DSCP.
    pub dscp: Option<u8>,
    /// The server's clock minus this host's, ns, when known (one clock: 0); none: estimated
    /// from the fastest probe, as `ping` does.
    pub clock_offset_ns: Option<f64>,
    /// The client's key.
    pub key: Option<Arc<wanperf_proto::auth::PrivateKey>>,
    /// Software name, sent to the server.
    pub software: String,
    /// Set to stop (Ctrl-C).
    pub stop: &'static AtomicBool,
}

impl LoadConfig {
    /// How long a cell takes, seconds.
    pub fn cell_s(&self) -> f64 {
        f64::from(self.cycles) * (self.load_s + self.idle_s) + self.timeout_s
    }
}

/// One sweep cell.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// Always `cell`.
    pub event: String,
    /// Streams of the load.
    pub streams: u32,
    /// Window asked (bytes), none for autotuning.
    pub window: Option<u64>,
    /// Probes during the loaded phases.
    pub loaded: PingSummary,
    /// Probes during the idle phases.
    pub unloaded: PingSummary,
    /// Load goodput over the loaded phases, bit/s.
    pub throughput_bps: f64,
    /// Load retransmits.
    pub retransmits: u64,
    /// Loaded median minus unloaded median RTT, ms.
    pub added_rtt_ms: f64,
    /// Responsiveness under load, round trips per minute (see [`wanperf_stats::summary::rpm`]).
    pub rpm: Option<f64>,
    /// 95 % trimmed mean of the loaded probes' RTT (the draft's foreign-flow term), ms.
    pub rpm_foreign_ms: Option<f64>,
    /// 95 % trimmed mean of the load connections' own smoothed RTT (the self term), ms.
    pub rpm_self_ms: Option<f64>,
}

/// Keeps the load phases' interval records, with their start in seconds since the cell began.
#[derive(Default)]
struct LoadIntervals {
    offset_s: f64,
    /// The first load phase's start record (test, both hosts' captures).
    start: Option<StartRecord>,
    records: Vec<IntervalRecord>,
}
impl Sink for LoadIntervals {
    fn start(&mut self, r: &StartRecord) {
        if self.start.is_none() {
            self.start = Some(r.clone());
        }
    }
    fn interval(&mut self, r: &IntervalRecord) {
        let mut r = r.clone();
        r.start_s += self.offset_s;
        r.end_s += self.offset_s;
        self.records.push(r);
    }
    fn end(&mut self, _: &EndRecord) {}
}

impl LoadIntervals {
    /// The load connections' smoothed RTT samples, ms.
    fn srtt_ms(&self) -> Vec<f64> {
        let tcp =
            self.records.iter().filter(|r| !r.omitted).flat_map(|r| r.streams.iter().filter_map(|s| s.tcp.as_ref()));
        tcp.map(|t| t.srtt_us as f64 / 1000.0).collect()
    }
}

/// What a cell measured beside its summary: every probe tagged with its phase, and the load's
/// intervals (times in seconds since the cell's first probe).
#[derive(Default)]
pub struct CellDetail {
    start: Option<StartRecord>,
    probes: Vec<(ProbeRecord, &'static str)>,
    intervals: Vec<IntervalRecord>,
}

impl CellDetail {
    /// The NDJSON records `--json` prints before the cell record: the load's start, every
    /// probe with its phase, the load's intervals, each with the cell's number.
    pub fn records(&self, cell: usize) -> Vec<serde_json::Value> {
        let mut out = Vec::new();
        let mut push = |v: Result<serde_json::Value, serde_json::Error>, phase: Option<&str>| {
            if let Ok(mut v) = v {
                v["cell"] = cell.into();
                if let Some(p) = phase {
                    v["phase"] = p.into();
                }
                out.push(v);
            }
        };
        if let Some(st) = &self.start {
            push(serde_json::to_value(st), None);
        }
        for (p, phase) in &self.probes {
            push(serde_json::to_value(p), Some(phase));
        }
        for r in &self.intervals {
            push(serde_json::to_value(r), None);
        }
        out
    }
}

/// Measures one cell: `cfg.cycles` loaded and idle phases of `streams` streams with `window`,
/// under one probe schedule; what was measured, with the failure that cut it short if any.
pub fn run_cell(
    cfg: &LoadConfig,
    streams: u32,
    window: Option<u64>,
) -> Result<(Cell, CellDetail, Option<String>), LoadError> {
    let a = cfg;
    let (load_s, idle_s, interval, timeout) = (cfg.load_s, cfg.idle_s, cfg.interval_s, cfg.timeout_s);
    // The probes run until the cell stops them; the count only bounds them. A loaded phase
    // lasts longer than `load_s` (connecting and ending the streams: seconds with 40 streams
    // at 70 ms), so a count of exactly the nominal cell time ran out before the idle phase.
    let cell_secs = 2.0 * cfg.cell_s() + 30.0 * f64::from(cfg.cycles);
    let probes = (cell_secs / interval).ceil() as u64;
    let pcfg = PingConfig {
        clock_offset_ns: a.clock_offset_ns,
        host: a.host.clone(),
        port: a.stamp_port.or(a.port).unwrap_or(DEFAULT_PORT),
        count: probes,
        interval: Duration::from_secs_f64(interval),
        size: a.size as usize,
        timeout: Duration::from_secs_f64(timeout),
        dscp: a.dscp,
        mode: match (a.stamp_port, a.iperf3) {
            (Some(_), _) => PingMode::Stamp,
            (None, true) => PingMode::Icmp,
            (None, false) => PingMode::Udp,
        },
        stamp_key: None,
        wake: ping::WAKE,
    };
    let stop_probes = Arc::new(AtomicBool::new(false));
    let sp = stop_probes.clone();
    let t0 = Instant::now();
    let prober = std::thread::spawn(move || ping::run(&pcfg, &mut ping::Quiet, &sp));
    let mut loaded_windows = Vec::new();
    let mut idle_windows = Vec::new();
    let (mut bytes, mut secs_loaded, mut retrans) = (0u64, 0.0f64, 0u64);
    let mut failure = None;
    let mut load_iv = LoadIntervals::default();
    for _ in 0..a.cycles {
        if cfg.stop.load(Ordering::Acquire) {
            break;
        }
        let start = t0.elapsed().as_secs_f64();
        let mut spec = TestSpec::tcp(streams, load_s);
        spec.window = window;
        spec.cc = a.cc.clone();
        spec.accept_capped_window = true;
        spec.direction = if a.reverse { Direction::Down } else { Direction::Up };
        let ccfg = ClientConfig {
            host: a.host.clone(),
            port: a.port.unwrap_or(if a.iperf3 { wanperf_iperf3::wire::DEFAULT_PORT } else { DEFAULT_PORT }),
            spec,
            bind: None,
            bind_dev: None,
            timeout: Duration::from_secs(5),
            drop_every: None,
            software: cfg.software.clone(),
            key: cfg.key.clone(),
        };
        load_iv.offset_s = start;
        let end = if a.iperf3 {
            crate::iperf3_client::run(&ccfg, None, &mut load_iv, cfg.stop)
        } else {
            client::run(&ccfg, &mut load_iv, cfg.stop)
        };
        let stop = t0.elapsed().as_secs_f64();
        loaded_windows.push((start, stop));
        match end {
            Ok(e) => {
                bytes += e.summary.received_bytes;
                secs_loaded += e.summary.duration_s;
                retrans += e.summary.retransmits;
            }
            Err(e) => {
                // Keep what was measured; the caller marks the run incomplete.
                failure = Some(format!("load phase failed: {e}"));
                break;
            }
        }
        let idle_start = t0.elapsed().as_secs_f64();
        wanperf_sys::sleep_unless_interrupted(idle_s);
        idle_windows.push((idle_start, t0.elapsed().as_secs_f64()));
    }
    // The last idle phase's probes get their full timeout to come back (the probes sent
    // meanwhile belong to neither phase), so none is counted lost just because the cell ended.
    wanperf_sys::sleep_unless_interrupted(timeout);
    stop_probes.store(true, Ordering::Release);
    let (records, all) = prober.join().map_err(|_| LoadError::ProbeThread)??;
    let within = |w: &[(f64, f64)], r: &ProbeRecord| w.iter().any(|(s, e)| r.sent_s >= *s && r.sent_s < *e);
    let loaded: Vec<ProbeRecord> = records.iter().filter(|r| within(&loaded_windows, r)).cloned().collect();
    let idle: Vec<ProbeRecord> = records.iter().filter(|r| within(&idle_windows, r)).cloned().collect();
    let (mut ls, mut us) = (ping::summarize(&loaded, 0, 0), ping::summarize(&idle, 0, 0));
    // Both phases' one-way delays rest on the one clock offset of the whole cell: say which.
    for s in [&mut ls, &mut us] {
        (s.clock_offset_ms, s.clock_offset_uncertainty_ms) = (all.clock_offset_ms, all.clock_offset_uncertainty_ms);
    }
    let lrtts: Vec<f64> = loaded.iter().filter_map(|r| r.rtt_ms).collect();
    let (rpm, rpm_foreign_ms, rpm_self_ms) = wanperf_stats::summary::rpm(&lrtts, &load_iv.srtt_ms());
    let cell = Cell {
        event: "cell".into(),
        streams,
        window,
        added_rtt_ms: ls.rtt_ms.median - us.rtt_ms.median,
        loaded: ls,
        unloaded: us,
        throughput_bps: if secs_loaded > 0.0 { bytes as f64 * 8.0 / secs_loaded } else { 0.0 },
        retransmits: retrans,
        rpm,
        rpm_foreign_ms,
        rpm_self_ms,
    };
    let phase = |r: &ProbeRecord| {
        if within(&loaded_windows, r) {
            "loaded"
        } else if within(&idle_windows, r) {
            "unloaded"
        } else {
            "between"
        }
    };
    let detail = CellDetail {
        start: load_iv.start,
        probes: records.iter().map(|r| (r.clone(), phase(r))).collect(),
        intervals: load_iv.records,
    };
    Ok((cell, detail, failure))
}

/// A comma-separated list of `--what` values (`--streams 1,2,5`), each read by `parse`; at
/// least one. The command line checks it when it is parsed (and a study file when it is
/// checked) with the same parsers the run uses.
pub fn list<T>(s: &str, what: &str, parse: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    let v: Vec<T> = s.split(',').map(str::trim).filter(|x| !x.is_empty()).map(&parse).collect::<Result<_, _>>()?;
    if v.is_empty() {
        return Err(format!("--{what} needs at least one value"));
    }
    Ok(v)
}

/// One of `--streams`: a stream count, 1 to 128.
pub fn parse_streams(x: &str) -> Result<u32, String> {
    let n: u32 = x.parse().map_err(|_| format!("--streams: `{x}` is not a number"))?;
    if !(1..=128).contains(&n) {
        return Err(format!("--streams: {n} is not between 1 and 128"));
    }
    Ok(n)
}

/// One of `--window`: a size, or `auto` (none: the kernel's autotuning).
pub fn parse_window(x: &str) -> Result<Option<u64>, String> {
    if x == "auto" {
        Ok(None)
    } else {
        parse_size(x).map(Some).map_err(|e| format!("--window: {e}"))
    }
}

/// Measures every (streams, window) cell, streams outermost, until `cfg.stop` or the first
/// failure: `starting` is told each cell before it runs, `measured` each cell (with its number)
/// after. Returns the cells measured and the failure that ended the sweep early, if one did
/// (e.g. the server went away before a cell's first probe: the cells measured so far still
/// count).
pub fn sweep(
    cfg: &LoadConfig,
    streams: &[u32],
    windows: &[Option<u64>],
    mut starting: impl FnMut(u32, Option<u64>),
    mut measured: impl FnMut(usize, &Cell, &CellDetail),
) -> (Vec<Cell>, Option<String>) {
    let mut cells = Vec::new();
    for &n in streams {
        for &w in windows {
            if cfg.stop.load(Ordering::Acquire) {
                return (cells, None);
            }
            starting(n, w);
            let (cell, detail, failed) = match run_cell(cfg, n, w) {
                Ok(r) => r,
                Err(e) => return (cells, Some(e.to_string())),
            };
            measured(cells.len(), &cell, &detail);
            cells.push(cell);
            if failed.is_some() {
                return (cells, failed);
            }
        }
    }
    (cells, None)
}

/// The readable table of the cells.
pub fn table(cells: &[Cell]) -> Vec<String> {
    let mut out = vec![format!(
        "{:>7} {:>9} {:>13} {:>6} | {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>6} | {:>8} {:>8} {:>8} {:>6} | {:>7}",
        "streams",
        "window",
        "goodput",
        "retr",
        "avg",
        "stdev",
        "median",
        "iqr",
        "min",
        "max",
        "loss%",
        "idle med",
        "idle iqr",
        "added",
        "loss%",
        "RPM"
    )];
    for c in cells {
        let l = &c.loaded.rtt_ms;
        let u = &c.unloaded.rtt_ms;
        out.push(format!(
            "{:>7} {:>9} {:>13} {:>6} | {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>6.1} | {:>8.2} {:>8.2} {:>8.2} {:>6.1} | {:>7.0}",
            c.streams,
            c.window.map_or("auto".into(), fmt_bytes),
            fmt_rate(c.throughput_bps),
            c.retransmits,
            l.avg,
            l.stdev,
            l.median,
            l.iqr,
            l.min,
            l.max,
            c.loaded.loss_pct,
            u.median,
            u.iqr,
            c.added_rtt_ms,
            c.unloaded.loss_pct,
            c.rpm.unwrap_or(0.0)
        ));
    }
    out.push("RTTs in ms: loaded columns first, then idle; `added` is loaded minus idle median.".into());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_lists_are_read_and_checked() {
        assert_eq!(list("1, 2,,5", "streams", parse_streams), Ok(vec![1, 2, 5]));
        assert_eq!(list(" , ", "streams", parse_streams), Err("--streams needs at least one value".into()));
        assert_eq!(list("1,x", "streams", parse_streams), Err("--streams: `x` is not a number".into()));
        assert_eq!(parse_streams("129"), Err("--streams: 129 is not between 1 and 128".into()));
        assert_eq!(list("auto,64k", "window", parse_window), Ok(vec![None, Some(65_536)]));
        assert!(parse_window("big").unwrap_err().starts_with("--window: "));
    }
}
