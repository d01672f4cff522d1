//! `wanperf util`: interface utilization (MRTG's question) from the counters devices keep —
//! local interfaces in any network namespace over rtnetlink, remote devices over SNMP IF-MIB,
//! and the sFlow counter samples `wanperf flows collect` stores — in bins, in and out, with
//! wraps and resets as gaps and saturation flagged.

use crate::store::{describe_db, open_store, open_store_read_only};
use crate::INTERRUPTED;
use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use std::process::ExitCode;
use std::time::Duration;
use wanperf_collector::snmp::Credentials;
use wanperf_collector::util::{check_bin, check_times, select, series_json, series_lines, speeds, Poll, Reader};

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
    #[command(flatten)]
    select: crate::args::UtilSelect,
    /// From this time, Unix seconds (default: the beginning).
    #[arg(long, value_name = "UNIX")]
    from: Option<f64>,
    /// Until this time, Unix seconds (default: now and later).
    #[arg(long, value_name = "UNIX")]
    to: Option<f64>,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// `wanperf util poll`.
pub fn poll(a: PollArgs) -> Result<ExitCode> {
    if !a.local && a.netns.is_empty() && a.snmp.is_empty() {
        bail!("nothing to read: give --local, --netns PATH or --snmp HOST");
    }
    check_times(a.every, a.duration, a.timeout)?;
    let bin_ms = check_bin(a.bin)?;
    let sp = speeds(&a.speed)?;
    let creds = Credentials::from_flags(&a.community, a.user.as_deref(), a.auth.as_deref(), a.privacy.as_deref())?;
    let store = if a.no_store { None } else { Some(open_store(a.db.as_deref())?) };
    let mut readers = Vec::new();
    if a.local {
        readers.push(Reader::local(None, a.device.as_deref(), &a.iface)?);
    }
    for ns in &a.netns {
        readers.push(Reader::local(Some(ns), a.device.as_deref(), &a.iface)?);
    }
    for agent in &a.snmp {
        readers.push(Reader::snmp(agent, &creds, &a.iface, Duration::from_secs_f64(a.timeout))?);
    }
    let cfg = Poll {
        every_s: a.every,
        duration_s: a.duration,
        bin_ms,
        speeds: sp,
        json: a.json,
        archive: (!a.no_store).then(|| describe_db(a.db.as_deref())),
    };
    wanperf_collector::util::poll(&mut readers, store, &cfg, &INTERRUPTED, &|l| outln!("{l}"))?;
    Ok(ExitCode::SUCCESS)
}

/// `wanperf util show`.
pub fn show(a: ShowArgs) -> Result<ExitCode> {
    let sel = a.select.selection(a.from, a.to)?;
    let mut store = open_store_read_only(a.db.as_deref())?;
    let series = select(store.as_mut(), &sel)?;
    if a.json {
        let v: Vec<_> = series.iter().map(|(k, s)| series_json(k, s, sel.pct, sel.bins)).collect();
        outln!("{}", serde_json::to_string_pretty(&v)?);
    } else if series.is_empty() {
        outln!("no interface readings in the archive for that selection");
    } else {
        for (k, s) in &series {
            for l in series_lines(k, s, sel.pct, sel.bins) {
                outln!("{l}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
