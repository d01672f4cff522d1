//! `wanperf load`: seed 000's experiment in one command — probes on one schedule across
//! alternating loaded and idle phases, swept over streams × windows.

use crate::INTERRUPTED;
use anyhow::{bail, Result};
use clap::Args;
use std::process::ExitCode;
use wanperf_engine::load::{list, parse_streams, parse_window, sweep, table, LoadConfig};
use wanperf_proto::units::fmt_bytes;

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
    /// Probe with STAMP (RFC 8762) to the reflector on this UDP port of the server's host
    /// (`wanperf serve --stamp-port`, a router's or a perfSONAR node's) instead of
    /// wanperf's echo: the same statistics, and the losses split by direction.
    #[arg(long, value_name = "PORT")]
    stamp_port: Option<u16>,
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
    /// The server's clock minus this host's, when known (`0` for one clock, as emulated hosts
    /// share): the probes' one-way delays use it instead of the fastest probe's estimate, which
    /// takes both ways as equal
    #[arg(long, allow_hyphen_values = true, value_parser = |s: &str| wanperf_proto::units::parse_signed_duration(s).map_err(|e| e.to_string()))]
    clock_offset: Option<f64>,
    /// Seed 000's settings: 60 s loaded, 60 s idle, one 100-byte probe per second, 20 s timeout.
    #[arg(long)]
    seed000: bool,
    /// Newline-delimited JSON: one `cell` record per cell, then `end`.
    #[arg(long)]
    json: bool,
}

/// Checks `--streams` when the command line is parsed (and a study file checked), with the
/// parser `run` uses.
fn check_streams(s: &str) -> std::result::Result<String, String> {
    list(s, "streams", parse_streams).map(|_| s.to_string())
}

/// Checks `--window` as [`check_streams`] does `--streams`.
fn check_windows(s: &str) -> std::result::Result<String, String> {
    list(s, "window", parse_window).map(|_| s.to_string())
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
    let streams = list(&a.streams, "streams", parse_streams).map_err(anyhow::Error::msg)?;
    let windows = list(&a.window, "window", parse_window).map_err(anyhow::Error::msg)?;
    // Read once, before anything runs (a bad key file fails at once).
    let key = if a.iperf3 { None } else { wanperf_engine::keys::client_key(a.key.as_deref())? };
    let load_s = crate::args::positive_secs("--load-time", &a.load_time)?;
    if a.iperf3 && (load_s.fract() != 0.0 || load_s < 1.0) {
        bail!("--load-time must be whole seconds with --iperf3 (iperf3 servers take integers), got {load_s} s");
    }
    let idle_s = crate::args::positive_secs("--idle-time", &a.idle_time)?;
    let interval = crate::args::positive_secs("--interval", &a.interval)?;
    if interval < 0.001 {
        bail!("--interval must be at least 1 ms");
    }
    let timeout = crate::args::positive_secs("--timeout", &a.timeout)?;
    let cells_total = streams.len() * windows.len();
    let cfg = LoadConfig {
        host: a.host.clone(),
        port: a.port,
        iperf3: a.iperf3,
        stamp_port: a.stamp_port,
        cc: a.cc.clone(),
        reverse: a.reverse,
        cycles: a.cycles,
        load_s,
        idle_s,
        interval_s: interval,
        timeout_s: timeout,
        size: a.size,
        dscp: a.dscp,
        clock_offset_ns: a.clock_offset.map(|s| s * 1e9),
        key,
        software: crate::software(),
        stop: &INTERRUPTED,
    };
    let show = !a.json || std::io::IsTerminal::is_terminal(&std::io::stderr());
    let bar = crate::output::bar(show, cells_total as u64, "{bar:30} cell {pos}/{len} {msg} (ETA {eta})");
    let json = a.json;
    let (cells, error) = sweep(
        &cfg,
        &streams,
        &windows,
        |n, w| {
            if let Some(b) = &bar {
                b.set_message(format!("{n} stream(s), window {}", w.map_or("auto".into(), fmt_bytes)));
            }
        },
        |i, cell, detail| {
            if json {
                for r in detail.records(i) {
                    outln!("{r}");
                }
                outln!("{}", serde_json::to_string(cell).unwrap_or_default());
            }
            if let Some(b) = &bar {
                b.inc(1);
            }
        },
    );
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let complete = cells.len() == cells_total && error.is_none();
    if a.json {
        outln!("{}", serde_json::json!({"event": "end", "complete": complete, "error": error, "cells": cells}));
    } else {
        for l in table(&cells) {
            outln!("{l}");
        }
    }
    if let Some(e) = &error {
        eprintln!("error: {e} (the table holds what was measured)");
        return Ok(ExitCode::FAILURE);
    }
    Ok(if complete { ExitCode::SUCCESS } else { ExitCode::from(130) })
}
