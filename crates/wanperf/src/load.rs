//! `wanperf load`: seed 000's experiment in one command — probes on one schedule across
//! alternating loaded and idle phases, swept over streams × windows.

use crate::INTERRUPTED;
use anyhow::{anyhow, bail, Result};
use clap::Args;
use serde::Serialize;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wanperf_engine::client::{self, ClientConfig, Sink};
use wanperf_engine::ping::{self, PingConfig, PingMode, PingSummary, ProbeRecord};
use wanperf_proto::msg::{Direction, TestSpec, DEFAULT_PORT};
use wanperf_proto::record::{EndRecord, IntervalRecord, StartRecord};
use wanperf_proto::units::{fmt_bytes, fmt_rate, parse_duration, parse_size};

/// Flags of `wanperf load`.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  wanperf load HOST                                  # 1 stream, 10 s loaded / 10 s idle
  wanperf load HOST --streams 1,2,5,10,15 --window 8k,16k,32k,64k,128k,256k,500k
  wanperf load HOST --seed000                        # seed 000: 60 s / 60 s, 100 B probe per s, 20 s timeout
  wanperf load HOST --dscp 46 --streams 40           # EF probes under a 40-stream load

For every (streams, window) cell: K cycles of a loaded phase (bulk TCP through the tput engine)
then an idle phase; UDP probes run on one schedule throughout and are tagged with their phase.
Reported per cell: the loaded and unloaded RTT tables (avg, stdev, median, IQR, min, max, loss),
the load's goodput and retransmits, and responsiveness in round trips per minute (RPM, as the
IETF responsiveness draft computes it: 60 s over the mean of the probes' and the load
connections' own 95 % trimmed-mean RTT).")]
pub struct LoadArgs {
    /// Server running `wanperf serve`.
    host: String,
    /// Server port (default 5301, or 5201 with --iperf3).
    #[arg(short, long)]
    port: Option<u16>,
    /// The far end is an iperf3 server (`iperf3 -s`): the load runs over iperf3's protocol
    /// and the probes go by ICMP echo (as seed 000's pings did), since iperf3 has no UDP echo.
    /// Phase lengths must be whole seconds.
    #[arg(long)]
    iperf3: bool,
    /// Private key to prove to servers started with --authorized-keys (default:
    /// ~/.config/wanperf/key when it exists).
    #[arg(long, value_name = "FILE", env = "WANPERF_KEY")]
    key: Option<std::path::PathBuf>,
    /// Stream counts to sweep (comma-separated).
    #[arg(long, default_value = "1", value_parser = check_streams)]
    streams: String,
    /// Windows to sweep (comma-separated sizes; `auto` for autotuning).
    #[arg(long, default_value = "auto", value_parser = check_windows)]
    window: String,
    /// Loaded phase length.
    #[arg(long, default_value = "10s", value_parser = check_duration)]
    load_time: String,
    /// Idle phase length.
    #[arg(long, default_value = "10s", value_parser = check_duration)]
    idle_time: String,
    /// Loaded + idle cycles per cell.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    cycles: u32,
    /// Probe interval.
    #[arg(short, long, default_value = "100ms", value_parser = check_duration)]
    interval: String,
    /// Probe size in bytes.
    #[arg(short, long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(40..=65_000))]
    size: u32,
    /// Probe timeout.
    #[arg(short = 'W', long, default_value = "2s", value_parser = check_duration)]
    timeout: String,
    /// Load flows from the server to the client.
    #[arg(short = 'R', long)]
    reverse: bool,
    /// Congestion control of the load (both ends).
    #[arg(long, value_name = "NAME")]
    cc: Option<String>,
    /// DSCP of the probes.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=63))]
    dscp: Option<u8>,
    /// Seed 000's settings: 60 s loaded, 60 s idle, one 100-byte probe per second, 20 s timeout.
    #[arg(long)]
    seed000: bool,
    /// Newline-delimited JSON: one `cell` record per cell, then `end`.
    #[arg(long)]
    json: bool,
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
    /// The NDJSON records `--json` prints before the cell record.
    fn print(&self, cell: usize) -> Result<()> {
        if let Some(st) = &self.start {
            let mut v = serde_json::to_value(st)?;
            v["cell"] = cell.into();
            outln!("{v}");
        }
        for (p, phase) in &self.probes {
            let mut v = serde_json::to_value(p)?;
            v["cell"] = cell.into();
            v["phase"] = (*phase).into();
            outln!("{v}");
        }
        for r in &self.intervals {
            let mut v = serde_json::to_value(r)?;
            v["cell"] = cell.into();
            outln!("{v}");
        }
        Ok(())
    }
}

fn list<T>(s: &str, what: &str, parse: impl Fn(&str) -> Result<T>) -> Result<Vec<T>> {
    let v: Vec<T> = s.split(',').map(str::trim).filter(|x| !x.is_empty()).map(&parse).collect::<Result<_>>()?;
    if v.is_empty() {
        bail!("--{what} needs at least one value");
    }
    Ok(v)
}

fn secs(flag: &str, s: &str) -> Result<f64> {
    let v = parse_duration(s).map_err(|e| anyhow!("{flag}: {e}"))?;
    if v <= 0.0 {
        bail!("{flag} must be more than 0 s");
    }
    Ok(v)
}

fn parse_streams(x: &str) -> Result<u32> {
    let n: u32 = x.parse().map_err(|_| anyhow!("--streams: `{x}` is not a number"))?;
    if !(1..=128).contains(&n) {
        bail!("--streams: {n} is not between 1 and 128");
    }
    Ok(n)
}

fn parse_window(x: &str) -> Result<Option<u64>> {
    if x == "auto" {
        Ok(None)
    } else {
        parse_size(x).map(Some).map_err(|e| anyhow!("--window: {e}"))
    }
}

/// Checks a comma-separated list when the command line is parsed (and a study file checked),
/// with the same parser `run` uses.
fn check_list<T>(s: &str, what: &str, f: fn(&str) -> Result<T>) -> std::result::Result<String, String> {
    list(s, what, f).map(|_| s.to_string()).map_err(|e| e.to_string())
}

fn check_streams(s: &str) -> std::result::Result<String, String> {
    check_list(s, "streams", parse_streams)
}

fn check_windows(s: &str) -> std::result::Result<String, String> {
    check_list(s, "window", parse_window)
}

fn check_duration(s: &str) -> std::result::Result<String, String> {
    wanperf_proto::units::parse_duration(s).map(|_| s.to_string()).map_err(|e| e.to_string())
}

/// `wanperf load`.
pub fn run(mut a: LoadArgs) -> Result<ExitCode> {
    if a.seed000 {
        a.load_time = "60s".into();
        a.idle_time = "60s".into();
        a.interval = "1s".into();
        a.size = 100;
        a.timeout = "20s".into();
    }
    let streams = list(&a.streams, "streams", parse_streams)?;
    let windows = list(&a.window, "window", parse_window)?;
    // Read once, before anything runs (a bad key file fails at once).
    let key = if a.iperf3 { None } else { crate::keys::client_key(a.key.as_deref())? };
    let load_s = secs("--load-time", &a.load_time)?;
    if a.iperf3 && (load_s.fract() != 0.0 || load_s < 1.0) {
        bail!("--load-time must be whole seconds with --iperf3 (iperf3 servers take integers), got {load_s} s");
    }
    let idle_s = secs("--idle-time", &a.idle_time)?;
    let interval = secs("--interval", &a.interval)?;
    if interval < 0.001 {
        bail!("--interval must be at least 1 ms");
    }
    let timeout = secs("--timeout", &a.timeout)?;
    let cells_total = streams.len() * windows.len();
    let cell_secs = f64::from(a.cycles) * (load_s + idle_s) + timeout;
    let bar = (!a.json || std::io::IsTerminal::is_terminal(&std::io::stderr())).then(|| {
        let b =
            indicatif::ProgressBar::with_draw_target(Some(cells_total as u64), indicatif::ProgressDrawTarget::stderr());
        if let Ok(st) = indicatif::ProgressStyle::with_template("{bar:30} cell {pos}/{len} {msg} (ETA {eta})") {
            b.set_style(st);
        }
        b
    });
    let mut cells = Vec::new();
    let mut error: Option<String> = None;
    'sweep: for &n in &streams {
        for &w in &windows {
            if INTERRUPTED.load(Ordering::Acquire) {
                break 'sweep;
            }
            if let Some(b) = &bar {
                b.set_message(format!("{n} stream(s), window {}", w.map_or("auto".into(), fmt_bytes)));
            }
            let (cell, detail, failed) =
                match run_cell(&a, key.as_ref(), n, w, load_s, idle_s, interval, timeout, cell_secs) {
                    Ok(r) => r,
                    Err(e) => {
                        // E.g. the server went away before this cell's first probe: the cells
                        // measured so far still come out, marked incomplete.
                        error = Some(format!("{e:#}"));
                        break 'sweep;
                    }
                };
            if a.json {
                detail.print(cells.len())?;
                outln!("{}", serde_json::to_string(&cell)?);
            }
            cells.push(cell);
            if let Some(b) = &bar {
                b.inc(1);
            }
            if failed.is_some() {
                error = failed;
                break 'sweep;
            }
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let complete = cells.len() == cells_total && error.is_none();
    if a.json {
        outln!("{}", serde_json::json!({"event": "end", "complete": complete, "error": error, "cells": cells}));
    } else {
        print_table(&cells);
    }
    if let Some(e) = &error {
        eprintln!("error: {e} (the table holds what was measured)");
        return Ok(ExitCode::FAILURE);
    }
    Ok(if complete { ExitCode::SUCCESS } else { ExitCode::from(130) })
}

#[allow(clippy::too_many_arguments)]
fn run_cell(
    a: &LoadArgs,
    key: Option<&std::sync::Arc<wanperf_proto::auth::PrivateKey>>,
    streams: u32,
    window: Option<u64>,
    load_s: f64,
    idle_s: f64,
    interval: f64,
    timeout: f64,
    cell_secs: f64,
) -> Result<(Cell, CellDetail, Option<String>)> {
    let probes = (cell_secs / interval).ceil() as u64;
    let pcfg = PingConfig {
        host: a.host.clone(),
        port: a.port.unwrap_or(DEFAULT_PORT),
        count: probes,
        interval: Duration::from_secs_f64(interval),
        size: a.size as usize,
        timeout: Duration::from_secs_f64(timeout),
        dscp: a.dscp,
        mode: if a.iperf3 { PingMode::Icmp } else { PingMode::Udp },
        wake: wanperf_engine::ping::WAKE,
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
        if INTERRUPTED.load(Ordering::Acquire) {
            break;
        }
        let start = t0.elapsed().as_secs_f64();
        let mut spec = TestSpec::tcp(streams, load_s);
        spec.window = window;
        spec.cc = a.cc.clone();
        spec.accept_capped_window = true;
        spec.direction = if a.reverse { Direction::Down } else { Direction::Up };
        let cfg = ClientConfig {
            host: a.host.clone(),
            port: a.port.unwrap_or(if a.iperf3 { wanperf_iperf3::wire::DEFAULT_PORT } else { DEFAULT_PORT }),
            spec,
            bind: None,
            bind_dev: None,
            timeout: Duration::from_secs(5),
            drop_every: None,
            software: crate::software(),
            key: key.cloned(),
        };
        load_iv.offset_s = start;
        let end = if a.iperf3 {
            wanperf_engine::iperf3_client::run(&cfg, None, &mut load_iv, &INTERRUPTED)
        } else {
            client::run(&cfg, &mut load_iv, &INTERRUPTED)
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
        crate::sleep_unless_interrupted(idle_s);
        idle_windows.push((idle_start, t0.elapsed().as_secs_f64()));
    }
    // The last idle phase's probes get their full timeout to come back (the probes sent
    // meanwhile belong to neither phase), so none is counted lost just because the cell ended.
    crate::sleep_unless_interrupted(timeout);
    stop_probes.store(true, Ordering::Release);
    let (records, _) = prober.join().map_err(|_| anyhow!("probe thread failed"))??;
    let within = |w: &[(f64, f64)], r: &ProbeRecord| w.iter().any(|(s, e)| r.sent_s >= *s && r.sent_s < *e);
    let loaded: Vec<ProbeRecord> = records.iter().filter(|r| within(&loaded_windows, r)).cloned().collect();
    let idle: Vec<ProbeRecord> = records.iter().filter(|r| within(&idle_windows, r)).cloned().collect();
    let ls = ping::summarize(&loaded, 0, 0);
    let us = ping::summarize(&idle, 0, 0);
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

fn print_table(cells: &[Cell]) {
    outln!(
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
    );
    for c in cells {
        let l = &c.loaded.rtt_ms;
        let u = &c.unloaded.rtt_ms;
        outln!(
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
        );
    }
    outln!("RTTs in ms: loaded columns first, then idle; `added` is loaded minus idle median.");
}
