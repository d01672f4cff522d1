//! `wanperf util`: interface utilization (MRTG's question) from the counters devices keep —
//! local interfaces in any network namespace over rtnetlink, remote devices over SNMP IF-MIB,
//! and the sFlow counter samples `wanperf flows collect` stores — in bins, in and out, with
//! wraps and resets as gaps and saturation flagged.

use crate::store::{describe_db, open_store, open_store_read_only};
use crate::INTERRUPTED;
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use serde_json::json;
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use wanperf_collector::local::LocalReader;
use wanperf_collector::rows::{counter_row, if_counters};
use wanperf_collector::snmp::{Credentials, SnmpReader};
use wanperf_flows::util::util_pct;
use wanperf_flows::{IfCounters, UtilSeries};

/// `wanperf util …`.
#[derive(Subcommand, Debug)]
pub enum UtilCmd {
    /// Read interface counters every few seconds (local, another namespace, SNMP agents), store
    /// them in the archive and print the rates as they come.
    Poll(PollArgs),
    /// Utilization in and out per interface and bin from the readings in the archive (polled,
    /// or sFlow counter samples), with saturated runs flagged.
    Show(ShowArgs),
}

/// `wanperf util poll`.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  wanperf util poll --local --every 10                 # this host's interfaces
  wanperf util poll --netns /run/netns/r1 --iface wan0 # another network namespace
  wanperf util poll --snmp 192.0.2.1 --community public --every 30 --speed ge-0/0/0=10G
  wanperf util poll --snmp 192.0.2.1 --user mrtg --auth sha:SECRET1 --priv aes:SECRET2
  wanperf net exec lab r1 -- wanperf util poll --local --duration 60 --json

Local interfaces are read from the kernel's 64-bit link statistics (rtnetlink IFLA_STATS64: octets,
errors and drops in and out). SNMP reads IF-MIB: ifHCInOctets/ifHCOutOctets (64-bit) where the
device has them, else ifInOctets/ifOutOctets (32-bit, whose wraps are taken when the rate they
imply is possible), errors, discards, ifHighSpeed/ifSpeed. A counter that goes down otherwise (a
reboot, a 64-bit counter) is a reset: a gap, never a spike. Every reading is stored (unless
--no-store); `wanperf util show` bins them later over any range.")]
pub struct PollArgs {
    /// Read this host's (this network namespace's) interfaces.
    #[arg(long)]
    local: bool,
    /// Read the interfaces of the network namespace in this file (/proc/PID/ns/net,
    /// /run/netns/NAME); repeatable.
    #[arg(long, value_name = "PATH")]
    netns: Vec<String>,
    /// The device name of local/netns readings in the archive (default: the host name, or the
    /// namespace file).
    #[arg(long, value_name = "NAME")]
    device: Option<String>,
    /// An SNMP agent, HOST[:PORT] (port 161 by default); repeatable.
    #[arg(long, value_name = "HOST[:PORT]")]
    snmp: Vec<String>,
    /// SNMP v2c community.
    #[arg(long, default_value = "public", value_name = "COMMUNITY")]
    community: String,
    /// SNMP v3 user (switches to v3).
    #[arg(long, value_name = "USER")]
    user: Option<String>,
    /// SNMP v3 authentication, PROTO:PASSPHRASE (md5, sha, sha224, sha256, sha384, sha512).
    #[arg(long, value_name = "PROTO:PASS", requires = "user")]
    auth: Option<String>,
    /// SNMP v3 privacy, PROTO:PASSPHRASE (des, 3des, aes, aes192-blumenthal, aes256-blumenthal,
    /// aes192-reeder, aes256-reeder); needs --auth.
    #[arg(long = "priv", value_name = "PROTO:PASS", requires = "auth")]
    privacy: Option<String>,
    /// SNMP request timeout, seconds (two retries follow).
    #[arg(long, default_value_t = 2.0, value_name = "SECONDS")]
    timeout: f64,
    /// Only these interfaces (names; repeatable; default all).
    #[arg(long, value_name = "NAME")]
    iface: Vec<String>,
    /// The speed of an interface whose device does not say (IFACE=RATE, e.g. wan0=20M), for
    /// percentages and saturation; repeatable.
    #[arg(long, value_name = "IFACE=RATE")]
    speed: Vec<String>,
    /// Seconds between readings.
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    every: f64,
    /// Stop after this many seconds (default: run until Ctrl-C or SIGTERM).
    #[arg(long, value_name = "SECONDS")]
    duration: Option<f64>,
    /// Bin length of the summary at the end, seconds.
    #[arg(long, default_value_t = 300.0, value_name = "SECONDS")]
    bin: f64,
    /// Archive: a SQLite file or a postgres:// URL (default: $WANPERF_DB, or
    /// ~/.local/share/wanperf/archive.sqlite).
    #[arg(long, value_name = "DB")]
    db: Option<String>,
    /// Do not store the readings.
    #[arg(long)]
    no_store: bool,
    /// JSON lines: one per reading round, and a summary at the end.
    #[arg(long)]
    json: bool,
}

/// (device, interface, source) of a series of readings.
pub(crate) type SeriesKey = (String, String, String);

/// Which stored readings to bin.
pub(crate) struct Selection<'a> {
    pub device: Option<&'a str>,
    pub iface: &'a [String],
    pub from: Option<f64>,
    pub to: Option<f64>,
    pub bin_ms: u64,
    pub speeds: &'a BTreeMap<String, u64>,
}

/// The archive's readings, per (device, interface, source), binned.
pub(crate) fn select(store: &mut dyn wanperf_archive::Store, sel: &Selection) -> Result<Vec<(SeriesKey, UtilSeries)>> {
    let rows = store.counters(sel.from.unwrap_or(0.0), sel.to.unwrap_or(f64::MAX))?;
    let mut all: BTreeMap<(String, String, String), Vec<IfCounters>> = BTreeMap::new();
    for r in &rows {
        if sel.device.is_some_and(|d| d != r.device) || (!sel.iface.is_empty() && !sel.iface.contains(&r.interface)) {
            continue;
        }
        let c = with_speed(if_counters(r), sel.speeds);
        all.entry((r.device.clone(), r.interface.clone(), r.source.clone())).or_default().push(c);
    }
    Ok(all
        .into_iter()
        .map(|(k, v)| {
            let s = UtilSeries::from_readings(&v, sel.bin_ms);
            (k, s)
        })
        .collect())
}

/// `wanperf util show`.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  wanperf util show                                   # every interface, 5-minute bins
  wanperf util show --device r1 --iface wan0 --bin 60 --json
  wanperf util show --speed wan0=20M --pct 90 --bins 2

Bins hold the average rate over the time readings cover and the highest rate between two
readings, in and out, with errors and drops counted in the bin; % is of the interface speed (the
device's, or --speed). A saturated run is at least --bins consecutive bins at or above --pct % in
one direction (seed 000: the link \"saturated for days at a time\").")]
pub struct ShowArgs {
    /// Archive (as for `poll`).
    #[arg(long, value_name = "DB")]
    db: Option<String>,
    /// Only this device.
    #[arg(long, value_name = "NAME")]
    device: Option<String>,
    /// Only these interfaces (repeatable).
    #[arg(long, value_name = "NAME")]
    iface: Vec<String>,
    /// From this time, Unix seconds (default: the beginning).
    #[arg(long, value_name = "UNIX")]
    from: Option<f64>,
    /// Until this time, Unix seconds (default: now and later).
    #[arg(long, value_name = "UNIX")]
    to: Option<f64>,
    /// Bin length, seconds.
    #[arg(long, default_value_t = 300.0, value_name = "SECONDS")]
    bin: f64,
    /// Interface speeds the devices do not give (IFACE=RATE; repeatable).
    #[arg(long, value_name = "IFACE=RATE")]
    speed: Vec<String>,
    /// Saturation threshold, percent of the speed.
    #[arg(long, default_value_t = 95.0, value_name = "PERCENT")]
    pct: f64,
    /// Consecutive bins at or above --pct that make a saturated run.
    #[arg(long, default_value_t = 3, value_name = "N")]
    bins: usize,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

pub(crate) fn speeds(specs: &[String]) -> Result<BTreeMap<String, u64>> {
    let mut out = BTreeMap::new();
    for s in specs {
        let Some((name, rate)) = s.split_once('=') else {
            bail!("--speed {s:?}: expected IFACE=RATE, e.g. wan0=20M");
        };
        let r = wanperf_proto::units::parse_rate(rate).map_err(|e| anyhow::anyhow!("--speed {s:?}: {e}"))?;
        if r == 0 {
            bail!("--speed {s:?}: the speed must be above 0");
        }
        out.insert(name.to_string(), r);
    }
    Ok(out)
}

pub(crate) fn check_bin(bin: f64) -> Result<u64> {
    if !(1.0..=86_400.0).contains(&bin) {
        bail!("--bin must be 1 to 86400 seconds");
    }
    Ok((bin * 1000.0) as u64)
}

enum Reader {
    Local(LocalReader, Vec<String>),
    Snmp(SnmpReader),
}

impl Reader {
    fn read(&mut self) -> Result<Vec<IfCounters>> {
        Ok(match self {
            Reader::Local(r, wanted) => {
                let all = r.read()?;
                let names: Vec<String> = all.iter().map(|c| c.interface.clone()).collect();
                wanperf_collector::select("this namespace", &names, wanted)?;
                if wanted.is_empty() {
                    all
                } else {
                    all.into_iter().filter(|c| wanted.contains(&c.interface)).collect()
                }
            }
            Reader::Snmp(r) => r.read()?,
        })
    }
    fn source(&self) -> &'static str {
        match self {
            Reader::Local(..) => "netlink",
            Reader::Snmp(_) => "snmp",
        }
    }
}

fn split_pass(what: &str, v: &Option<String>) -> Result<Option<(String, String)>> {
    match v {
        None => Ok(None),
        Some(s) => match s.split_once(':') {
            Some((p, pass)) if !p.is_empty() && pass.len() >= 8 => Ok(Some((p.to_string(), pass.to_string()))),
            Some((p, _)) if !p.is_empty() => bail!("--{what}: the passphrase must be at least 8 characters (RFC 3414)"),
            _ => bail!("--{what} {s:?}: expected PROTO:PASSPHRASE, e.g. sha:secret123"),
        },
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "local".into())
}

fn key(c: &IfCounters, source: &str) -> (String, String, String) {
    (c.device.clone(), c.interface.clone(), source.to_string())
}

fn with_speed(mut c: IfCounters, sp: &BTreeMap<String, u64>) -> IfCounters {
    if c.speed_bps.is_none() {
        c.speed_bps = sp.get(&c.interface).copied();
    }
    c
}

/// `wanperf util poll`.
pub fn poll(a: PollArgs) -> Result<ExitCode> {
    if !a.local && a.netns.is_empty() && a.snmp.is_empty() {
        bail!("nothing to read: give --local, --netns PATH or --snmp HOST");
    }
    if !(a.every >= 0.1 && a.every <= 3600.0) {
        bail!("--every must be 0.1 to 3600 seconds");
    }
    if let Some(d) = a.duration {
        if !(d > 0.0 && d.is_finite()) {
            bail!("--duration must be a positive number of seconds");
        }
    }
    if !(a.timeout > 0.0 && a.timeout <= 60.0) {
        bail!("--timeout must be above 0 and at most 60 seconds");
    }
    let bin_ms = check_bin(a.bin)?;
    let sp = speeds(&a.speed)?;
    let creds = match &a.user {
        None => Credentials::V2c(a.community.clone()),
        Some(u) => Credentials::V3 {
            user: u.clone(),
            auth: split_pass("auth", &a.auth)?,
            privacy: split_pass("priv", &a.privacy)?,
        },
    };
    let mut store = if a.no_store { None } else { Some(open_store(a.db.as_deref())?) };
    let mut readers = Vec::new();
    if a.local {
        let dev = a.device.clone().unwrap_or_else(host_name);
        let r = LocalReader::open(None, &dev)?;
        readers.push(Reader::Local(r, a.iface.clone()));
    }
    for ns in &a.netns {
        let dev = a.device.clone().unwrap_or_else(|| ns.clone());
        let r = LocalReader::open(Some(ns), &dev)?;
        readers.push(Reader::Local(r, a.iface.clone()));
    }
    for agent in &a.snmp {
        let r = SnmpReader::open(agent, &creds, &a.iface, Duration::from_secs_f64(a.timeout))?;
        readers.push(Reader::Snmp(r));
    }
    // The first reading checks that every wanted interface exists.
    let mut all: BTreeMap<(String, String, String), Vec<IfCounters>> = BTreeMap::new();
    let started = Instant::now();
    let every = Duration::from_secs_f64(a.every);
    let mut round = 0u64;
    let mut last = false;
    loop {
        let mut rows = Vec::new();
        let mut now_read = Vec::new();
        for r in readers.iter_mut() {
            let src = r.source();
            let got = match r.read() {
                Ok(g) => g,
                // A device that stops answering later leaves a gap, not the end of the poll.
                Err(e) if round > 0 => {
                    if a.json {
                        outln!("{}", json!({"event": "util_error", "source": src, "error": e.to_string()}));
                    } else {
                        eprintln!("wanperf util poll: {e:#} (a gap until it answers again)");
                    }
                    continue;
                }
                Err(e) => return Err(e),
            };
            for c in got {
                let c = with_speed(c, &sp);
                rows.push(counter_row(&c, src));
                now_read.push((key(&c, src), c));
            }
        }
        if let Some(s) = store.as_mut() {
            s.store_counters(&rows).context("cannot store the readings")?;
        }
        let mut lines = Vec::new();
        for (k, c) in now_read {
            let prev = all.get(&k).and_then(|v| v.last()).cloned();
            if let Some(p) = prev {
                let s = UtilSeries::from_readings(&[p, c.clone()], u64::MAX / 4);
                if let Some(b) = s.bins.first() {
                    lines.push((k.clone(), b.clone()));
                } else {
                    lines.push((k.clone(), wanperf_flows::UtilBin { covered_ms: 0, ..Default::default() }));
                }
            }
            all.entry(k).or_default().push(c);
        }
        if round == 0 {
            eprintln!(
                "wanperf util poll: {} source(s) every {:.1} s{}",
                readers.len(),
                a.every,
                if a.no_store { String::new() } else { format!(", archive {}", describe_db(a.db.as_deref())) }
            );
        }
        print_round(&lines, a.json);
        if last {
            return finish(&all, bin_ms, a.json);
        }
        round += 1;
        // The next reading on the schedule; at the end (Ctrl-C, SIGTERM, --duration) one last
        // reading, so the summary covers everything up to the stop.
        let next = every * round as u32;
        let end = a.duration.map(Duration::from_secs_f64);
        loop {
            if INTERRUPTED.load(Ordering::Acquire) || end.is_some_and(|e| started.elapsed() >= e) {
                last = true;
                break;
            }
            let el = started.elapsed();
            if el >= next {
                break;
            }
            std::thread::sleep((next - el).min(Duration::from_millis(50)));
        }
    }
}

fn pct(b: &wanperf_flows::UtilBin, dir: &str) -> String {
    util_pct(b, dir).map(|p| format!("{p:5.1}%")).unwrap_or_else(|| "     -".into())
}

fn print_round(lines: &[((String, String, String), wanperf_flows::UtilBin)], json_out: bool) {
    for ((dev, iface, src), b) in lines {
        if json_out {
            outln!(
                "{}",
                json!({"event": "util_reading", "device": dev, "interface": iface, "source": src,
                       "seconds": b.covered_ms as f64 / 1000.0, "in_bps": b.in_bps, "out_bps": b.out_bps,
                       "in_errors": b.in_errors, "out_errors": b.out_errors, "in_drops": b.in_drops,
                       "out_drops": b.out_drops, "speed_bps": b.speed_bps, "gap": b.covered_ms == 0})
            );
        } else if b.covered_ms == 0 {
            outln!("{dev} {iface}: counters went back (reset): a gap");
        } else {
            outln!(
                "{dev} {iface}: in {} {} out {} {}  errors {}/{} drops {}/{}",
                wanperf_proto::units::fmt_rate(b.in_bps),
                pct(b, "in"),
                wanperf_proto::units::fmt_rate(b.out_bps),
                pct(b, "out"),
                b.in_errors,
                b.out_errors,
                b.in_drops,
                b.out_drops
            );
        }
    }
}

fn series_json(k: &(String, String, String), s: &UtilSeries, pct_t: f64, min_bins: usize) -> serde_json::Value {
    json!({
        "device": k.0, "interface": k.1, "source": k.2,
        "bin_s": s.bin_len_ms as f64 / 1000.0,
        "in_octets": s.in_octets, "out_octets": s.out_octets,
        "wraps": s.wraps, "resets": s.resets,
        "bins": s.bins.iter().map(|b| json!({
            "bin_unix": b.bin_ms as f64 / 1000.0, "covered_s": b.covered_ms as f64 / 1000.0,
            "in_bps": b.in_bps, "out_bps": b.out_bps, "in_max_bps": b.in_max_bps, "out_max_bps": b.out_max_bps,
            "in_pct": util_pct(b, "in"), "out_pct": util_pct(b, "out"),
            "in_errors": b.in_errors, "out_errors": b.out_errors, "in_drops": b.in_drops, "out_drops": b.out_drops,
            "speed_bps": b.speed_bps,
        })).collect::<Vec<_>>(),
        "saturated": s.saturation(pct_t, min_bins),
    })
}

fn print_series(k: &(String, String, String), s: &UtilSeries, pct_t: f64, min_bins: usize) {
    outln!(
        "{} {} ({}): {} in, {} out over the readings; {} wrap(s), {} reset(s)",
        k.0,
        k.1,
        k.2,
        wanperf_proto::units::fmt_bytes(s.in_octets),
        wanperf_proto::units::fmt_bytes(s.out_octets),
        s.wraps,
        s.resets
    );
    outln!(
        "  {:<23} {:>8} {:>14} {:>7} {:>14} {:>14} {:>7} {:>14} {:>11} {:>11}",
        "bin (UTC)",
        "covered",
        "in avg",
        "",
        "in max",
        "out avg",
        "",
        "out max",
        "err in/out",
        "drop in/out"
    );
    for b in &s.bins {
        outln!(
            "  {:<23} {:>7.0}s {:>14} {} {:>14} {:>14} {} {:>14} {:>11} {:>11}",
            wanperf_report::utc(b.bin_ms as f64 / 1000.0),
            b.covered_ms as f64 / 1000.0,
            wanperf_proto::units::fmt_rate(b.in_bps),
            pct(b, "in"),
            wanperf_proto::units::fmt_rate(b.in_max_bps),
            wanperf_proto::units::fmt_rate(b.out_bps),
            pct(b, "out"),
            wanperf_proto::units::fmt_rate(b.out_max_bps),
            format!("{}/{}", b.in_errors, b.out_errors),
            format!("{}/{}", b.in_drops, b.out_drops)
        );
    }
    for sat in s.saturation(pct_t, min_bins) {
        outln!(
            "  SATURATED {}: {} to {}, peak {:.1}% (≥ {pct_t}% for ≥ {min_bins} bins)",
            sat.dir,
            wanperf_report::utc(sat.from_ms as f64 / 1000.0),
            wanperf_report::utc(sat.to_ms as f64 / 1000.0),
            sat.peak_pct
        );
    }
}

fn finish(all: &BTreeMap<(String, String, String), Vec<IfCounters>>, bin_ms: u64, json_out: bool) -> Result<ExitCode> {
    let series: Vec<_> = all.iter().map(|(k, v)| (k, UtilSeries::from_readings(v, bin_ms))).collect();
    if json_out {
        let v: Vec<_> = series.iter().map(|(k, s)| series_json(k, s, 95.0, 3)).collect();
        outln!("{}", json!({"event": "util_end", "interfaces": v}));
    } else {
        for (k, s) in &series {
            print_series(k, s, 95.0, 3);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `wanperf util show`.
pub fn show(a: ShowArgs) -> Result<ExitCode> {
    let bin_ms = check_bin(a.bin)?;
    let sp = speeds(&a.speed)?;
    if !(a.pct > 0.0 && a.pct <= 100.0) {
        bail!("--pct must be above 0 and at most 100");
    }
    let mut store = open_store_read_only(a.db.as_deref())?;
    let sel = Selection { device: a.device.as_deref(), iface: &a.iface, from: a.from, to: a.to, bin_ms, speeds: &sp };
    let series = select(store.as_mut(), &sel)?;
    if a.json {
        let v: Vec<_> = series.iter().map(|(k, s)| series_json(k, s, a.pct, a.bins)).collect();
        outln!("{}", serde_json::to_string_pretty(&v)?);
    } else if series.is_empty() {
        outln!("no interface readings in the archive for that selection");
    } else {
        for (k, s) in &series {
            print_series(k, s, a.pct, a.bins);
        }
    }
    Ok(ExitCode::SUCCESS)
}
