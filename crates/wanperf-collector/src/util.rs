//! `wanperf util`'s shell: reads interface counters from every source on a schedule, stores
//! them, and says each round's rates; and the archive's readings as binned series (MRTG's
//! question). The binning, wraps, resets and saturation are the pure core's
//! ([`wanperf_flows::UtilSeries`]).

use crate::local::LocalReader;
use crate::rows::{counter_row, if_counters};
use crate::snmp::{Credentials, SnmpReader};
use anyhow::{bail, Context, Result};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use wanperf_flows::util::util_pct;
use wanperf_flows::{IfCounters, UtilSeries};

/// (device, interface, source) of a series of readings.
pub type SeriesKey = (String, String, String);

/// Which stored readings to bin.
pub struct Selection {
    /// Only this device.
    pub device: Option<String>,
    /// Only these interfaces (none: all).
    pub iface: Vec<String>,
    /// From this Unix time.
    pub from: Option<f64>,
    /// Until this Unix time.
    pub to: Option<f64>,
    /// Bin length.
    pub bin_ms: u64,
    /// Speeds the devices do not give, by interface.
    pub speeds: BTreeMap<String, u64>,
    /// Saturation threshold, percent of the speed.
    pub pct: f64,
    /// Consecutive bins at or above `pct` that make a saturated run.
    pub bins: usize,
}

/// The archive's readings, per (device, interface, source), binned.
pub fn select(store: &mut dyn wanperf_archive::Store, sel: &Selection) -> Result<Vec<(SeriesKey, UtilSeries)>> {
    let rows = store.counters(sel.from.unwrap_or(0.0), sel.to.unwrap_or(f64::MAX))?;
    let mut all: BTreeMap<(String, String, String), Vec<IfCounters>> = BTreeMap::new();
    for r in &rows {
        if sel.device.as_ref().is_some_and(|d| *d != r.device)
            || (!sel.iface.is_empty() && !sel.iface.contains(&r.interface))
        {
            continue;
        }
        let c = with_speed(if_counters(r), &sel.speeds);
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

/// `IFACE=RATE` speeds (`--speed`).
pub fn speeds(specs: &[String]) -> Result<BTreeMap<String, u64>> {
    let mut out = BTreeMap::new();
    for s in specs {
        let Some((name, rate)) = s.split_once('=') else {
            bail!("--speed {s:?}: expected IFACE=RATE, e.g. wan0=20M");
        };
        let r = wanperf_units::parse_rate(rate).map_err(|e| anyhow::anyhow!("--speed {s:?}: {e}"))?;
        if r == 0 {
            bail!("--speed {s:?}: the speed must be above 0");
        }
        out.insert(name.to_string(), r);
    }
    Ok(out)
}

/// A bin length in seconds (1 s to a day) as milliseconds.
pub fn check_bin(bin: f64) -> Result<u64> {
    if !(1.0..=86_400.0).contains(&bin) {
        bail!("--bin must be 1 to 86400 seconds");
    }
    Ok((bin * 1000.0) as u64)
}

/// A run's length in seconds (`--duration`), when given: positive and finite.
pub fn check_duration(duration_s: Option<f64>) -> Result<()> {
    if let Some(d) = duration_s {
        if !(d > 0.0 && d.is_finite()) {
            bail!("--duration must be a positive number of seconds");
        }
    }
    Ok(())
}

/// The poller's times in seconds: between readings (`--every`, 0.1 s to an hour), the run's
/// length ([`check_duration`]) and the SNMP timeout (`--timeout`, above 0, at most a minute).
pub fn check_times(every_s: f64, duration_s: Option<f64>, timeout_s: f64) -> Result<()> {
    if !(0.1..=3600.0).contains(&every_s) {
        bail!("--every must be 0.1 to 3600 seconds");
    }
    check_duration(duration_s)?;
    if !(timeout_s > 0.0 && timeout_s <= 60.0) {
        bail!("--timeout must be above 0 and at most 60 seconds");
    }
    Ok(())
}

/// One source of readings.
pub enum Reader {
    /// This or another network namespace (rtnetlink), only the interfaces listed (none: all).
    Local(LocalReader, Vec<String>),
    /// An SNMP agent.
    Snmp(SnmpReader),
}

impl Reader {
    /// The interfaces of a namespace (`netns`; none: this one), named `device` (none: the host
    /// name, or the namespace file).
    pub fn local(netns: Option<&str>, device: Option<&str>, iface: &[String]) -> Result<Reader> {
        let dev = device.map(str::to_string).unwrap_or_else(|| netns.map_or_else(host_name, str::to_string));
        Ok(Reader::Local(LocalReader::open(netns, &dev)?, iface.to_vec()))
    }

    /// An SNMP agent's interfaces.
    pub fn snmp(agent: &str, creds: &Credentials, iface: &[String], timeout: Duration) -> Result<Reader> {
        Ok(Reader::Snmp(SnmpReader::open(agent, creds, iface, timeout)?))
    }

    fn read(&mut self) -> Result<Vec<IfCounters>> {
        Ok(match self {
            Reader::Local(r, wanted) => {
                let all = r.read()?;
                let names: Vec<String> = all.iter().map(|c| c.interface.clone()).collect();
                crate::select("this namespace", &names, wanted)?;
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

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "local".into())
}

fn key(c: &IfCounters, source: &str) -> SeriesKey {
    (c.device.clone(), c.interface.clone(), source.to_string())
}

fn with_speed(mut c: IfCounters, sp: &BTreeMap<String, u64>) -> IfCounters {
    if c.speed_bps.is_none() {
        c.speed_bps = sp.get(&c.interface).copied();
    }
    c
}

/// How to poll.
pub struct Poll {
    /// Seconds between readings.
    pub every_s: f64,
    /// Stop after this many seconds (none: at Ctrl-C).
    pub duration_s: Option<f64>,
    /// The summary's bin length.
    pub bin_ms: u64,
    /// Speeds the devices do not give.
    pub speeds: BTreeMap<String, u64>,
    /// JSON lines instead of text.
    pub json: bool,
    /// Where the readings are stored (for the first line), if they are.
    pub archive: Option<String>,
}

/// Reads every source every `cfg.every_s` until `stop` or the duration, storing each round's
/// readings in `store` and saying its rates; at the end one last reading and the summary.
pub fn poll(
    readers: &mut [Reader],
    mut store: Option<Box<dyn wanperf_archive::Store>>,
    cfg: &Poll,
    stop: &AtomicBool,
    say: &dyn Fn(&str),
) -> Result<()> {
    // The first reading checks that every wanted interface exists.
    let mut all: BTreeMap<(String, String, String), Vec<IfCounters>> = BTreeMap::new();
    let started = Instant::now();
    let every = Duration::from_secs_f64(cfg.every_s);
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
                    if cfg.json {
                        say(&json!({"event": "util_error", "source": src, "error": e.to_string()}).to_string());
                    } else {
                        eprintln!("wanperf util poll: {e:#} (a gap until it answers again)");
                    }
                    continue;
                }
                Err(e) => return Err(e),
            };
            for c in got {
                let c = with_speed(c, &cfg.speeds);
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
                cfg.every_s,
                cfg.archive.as_ref().map_or(String::new(), |a| format!(", archive {a}"))
            );
        }
        round_lines(&lines, cfg.json).iter().for_each(|l| say(l));
        if last {
            summary_lines(&all, cfg.bin_ms, cfg.json).iter().for_each(|l| say(l));
            return Ok(());
        }
        round += 1;
        // The next reading on the schedule; at the end (Ctrl-C, SIGTERM, --duration) one last
        // reading, so the summary covers everything up to the stop.
        let next = every * round as u32;
        let end = cfg.duration_s.map(Duration::from_secs_f64);
        loop {
            if stop.load(Ordering::Acquire) || end.is_some_and(|e| started.elapsed() >= e) {
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

/// One round's rates, a line per interface.
pub fn round_lines(lines: &[(SeriesKey, wanperf_flows::UtilBin)], json_out: bool) -> Vec<String> {
    let mut out = Vec::new();
    for ((dev, iface, src), b) in lines {
        if json_out {
            out.push(
                json!({"event": "util_reading", "device": dev, "interface": iface, "source": src,
                       "seconds": b.covered_ms as f64 / 1000.0, "in_bps": b.in_bps, "out_bps": b.out_bps,
                       "in_errors": b.in_errors, "out_errors": b.out_errors, "in_drops": b.in_drops,
                       "out_drops": b.out_drops, "speed_bps": b.speed_bps, "gap": b.covered_ms == 0})
                .to_string(),
            );
        } else if b.covered_ms == 0 {
            out.push(format!("{dev} {iface}: counters went back (reset): a gap"));
        } else {
            out.push(format!(
                "{dev} {iface}: in {} {} out {} {}  errors {}/{} drops {}/{}",
                wanperf_units::fmt_rate(b.in_bps),
                pct(b, "in"),
                wanperf_units::fmt_rate(b.out_bps),
                pct(b, "out"),
                b.in_errors,
                b.out_errors,
                b.in_drops,
                b.out_drops
            ));
        }
    }
    out
}

/// A series as `util show --json` prints it.
pub fn series_json(k: &SeriesKey, s: &UtilSeries, pct_t: f64, min_bins: usize) -> serde_json::Value {
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

/// A series as a table, saturated runs flagged.
pub fn series_lines(k: &SeriesKey, s: &UtilSeries, pct_t: f64, min_bins: usize) -> Vec<String> {
    let mut out = Vec::new();
    out.push(format!(
        "{} {} ({}): {} in, {} out over the readings; {} wrap(s), {} reset(s)",
        k.0,
        k.1,
        k.2,
        wanperf_units::fmt_bytes(s.in_octets),
        wanperf_units::fmt_bytes(s.out_octets),
        s.wraps,
        s.resets
    ));
    out.push(format!(
        "  {:<23} {:>8} {:>14} {:>7} {:>14} {:>14} {:>7} {:>14} {:>11} {:>11}",
        "bin (UTC)", "covered", "in avg", "", "in max", "out avg", "", "out max", "err in/out", "drop in/out"
    ));
    for b in &s.bins {
        out.push(format!(
            "  {:<23} {:>7.0}s {:>14} {} {:>14} {:>14} {} {:>14} {:>11} {:>11}",
            wanperf_report::utc(b.bin_ms as f64 / 1000.0),
            b.covered_ms as f64 / 1000.0,
            wanperf_units::fmt_rate(b.in_bps),
            pct(b, "in"),
            wanperf_units::fmt_rate(b.in_max_bps),
            wanperf_units::fmt_rate(b.out_bps),
            pct(b, "out"),
            wanperf_units::fmt_rate(b.out_max_bps),
            format!("{}/{}", b.in_errors, b.out_errors),
            format!("{}/{}", b.in_drops, b.out_drops)
        ));
    }
    for sat in s.saturation(pct_t, min_bins) {
        out.push(format!(
            "  SATURATED {}: {} to {}, peak {:.1}% (≥ {pct_t}% for ≥ {min_bins} bins)",
            sat.dir,
            wanperf_report::utc(sat.from_ms as f64 / 1000.0),
            wanperf_report::utc(sat.to_ms as f64 / 1000.0),
            sat.peak_pct
        ));
    }
    out
}

/// The summary of a poll: every interface's series.
pub fn summary_lines(all: &BTreeMap<SeriesKey, Vec<IfCounters>>, bin_ms: u64, json_out: bool) -> Vec<String> {
    let mut out = Vec::new();
    let series: Vec<_> = all.iter().map(|(k, v)| (k, UtilSeries::from_readings(v, bin_ms))).collect();
    if json_out {
        let v: Vec<_> = series.iter().map(|(k, s)| series_json(k, s, 95.0, 3)).collect();
        out.push(json!({"event": "util_end", "interfaces": v}).to_string());
    } else {
        for (k, s) in &series {
            out.extend(series_lines(k, s, 95.0, 3));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_are_checked() {
        assert_eq!(check_bin(300.0).unwrap(), 300_000);
        assert_eq!(check_bin(0.5).unwrap_err().to_string(), "--bin must be 1 to 86400 seconds");
        assert!(check_duration(None).is_ok() && check_duration(Some(60.0)).is_ok());
        for bad in [0.0, -1.0, f64::INFINITY, f64::NAN] {
            assert_eq!(
                check_duration(Some(bad)).unwrap_err().to_string(),
                "--duration must be a positive number of seconds"
            );
        }
        assert!(check_times(10.0, None, 2.0).is_ok());
        assert_eq!(check_times(0.05, None, 2.0).unwrap_err().to_string(), "--every must be 0.1 to 3600 seconds");
        assert!(check_times(10.0, Some(0.0), 2.0).is_err());
        assert_eq!(
            check_times(10.0, None, 61.0).unwrap_err().to_string(),
            "--timeout must be above 0 and at most 60 seconds"
        );
    }
}
