//! Importers: measurements made with other tools become a run of one cell in the archive.
//!
//! * [`import_iperf3`] reads `iperf3 -J` output (TCP or UDP, any number of streams, `-R`,
//!   `--bidir`).
//! * [`import_ping`] reads iputils `ping` output, with or without `-D` timestamps.
//! * [`import_wanperf`] reads wanperf's own `--json` output of `tput` and `copy`, through the
//!   record types that write it (`wanperf_proto::record`): a field renamed there is renamed
//!   here, or this does not compile.
//!
//! iperf3's and ping's outputs are formats of other tools, with no Rust types of ours behind
//! them: those are read by their keys (iperf3's JSON as a `serde_json::Value`) and checked at
//! run time, against the real tools' output in `tests/import.rs`.
//!
//! All are pure (text in, records out) and never panic: anything they cannot read is an
//! [`ArchiveError::Input`] with a one-line reason.

use crate::error::{ArchiveError, Result};
use crate::model::{CellRecord, IntervalRow, NewRun, ProbeRow};
use serde::de::{Deserialize, DeserializeOwned};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use wanperf_copy::spec::Compress;
use wanperf_proto::msg::TcpInfo;
use wanperf_proto::record::{EndRecord, IntervalRecord, StartRecord};
use wanperf_stats::summary::{ipdv, rfc3550_jitter, Summary};

/// At most this many probes are imported from one ping output (a forged statistics line
/// could otherwise ask for billions). Every probe up to the transmitted count becomes a row,
/// lost or not, so a 175-byte file may ask for this many rows: a million (11.6 days of
/// `ping` at its default interval) keeps that to about 100 MB and well under a second; ten
/// million took a gigabyte and timed out under the fuzzer.
pub const MAX_PING_PROBES: u64 = 1_000_000;

fn input(msg: impl Into<String>) -> ArchiveError {
    ArchiveError::Input(msg.into())
}

/// A non-negative integer from a JSON number (iperf3 writes some counts as floats).
fn uint(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_f64().filter(|f| f.is_finite() && *f >= 0.0 && *f < 1.8e19).map(|f| f as u64))
}

fn num(v: &Value) -> Option<f64> {
    v.as_f64().filter(|f| f.is_finite())
}

/// Parses `iperf3 -J` output into a run of one cell of kind `iperf3`.
///
/// * `params`: `transport` (`tcp`/`udp`), `direction` (`up`, `down` for `-R`, `bidir`),
///   `streams`, `duration_s`, `block_size`, and `window` / `rate_bps` when given (`-w`, `-b`).
/// * `summary`: `throughput_bps` (the receiver's), `sent_bytes`, `received_bytes`,
///   `retransmits`, `duration_s` (the receiver's), `protocol`, `omitted_s`, `streams` (one
///   object per stream with `id`, `throughput_bps`, `sent_bytes`, `received_bytes`,
///   `retransmits`, `duration_s`, like wanperf's), `cpu` (`client_pct`, `server_pct`),
///   `sender_cc` / `receiver_cc` when known, and for UDP `udp` (`packets_sent`,
///   `packets_received`, `lost`, `loss_pct`, `jitter_ms`, `out_of_order`).
/// * `hosts`: iperf3's `version`, `system_info` (the client's `uname`), `connecting_to` and
///   the socket buffer sizes it reports.
/// * `intervals`: one row per stream and interval (stream ids are positions in
///   `start.connected`), plus the sum as stream −1 (and, with `--bidir`, the reverse sum as
///   stream −2). `bytes` and `throughput_bps` are what iperf3 reports on the client: the
///   sender's counts when the client sends. `cwnd_bytes` is `snd_cwnd`, `srtt_us` is `rtt`;
///   `tcp` holds the rest of iperf3's interval object (`snd_wnd`, `rttvar`, `pmtu`, `omitted`,
///   `sender`, `packets` …).
///
/// A test that iperf3 reports as failed after measuring something is imported with
/// `ok = false` and iperf3's error as `failure`; one that measured nothing is an error.
pub fn import_iperf3(json_text: &str) -> Result<(NewRun, CellRecord)> {
    // iperf3's JSON is another tool's format, with no type of ours to read it through: it is
    // read as a `Value` by iperf3's key names (unlike wanperf's own records, see
    // `import_wanperf`).
    let doc: Value = serde_json::from_str(json_text.trim_start_matches('\u{feff}'))
        .map_err(|e| input(format!("not iperf3 JSON: {e}")))?;
    let root = doc.as_object().ok_or_else(|| input("not iperf3 JSON: expected an object"))?;
    let start =
        root.get("start").and_then(Value::as_object).ok_or_else(|| input("not iperf3 JSON: no `start` object"))?;
    let end = root.get("end").and_then(Value::as_object).cloned().unwrap_or_default();
    let error = root.get("error").and_then(Value::as_str).map(|e| e.to_string());
    let intervals_json = root.get("intervals").and_then(Value::as_array).cloned().unwrap_or_default();
    let has_end = end.contains_key("sum_received") || end.contains_key("sum") || end.contains_key("sum_sent");
    if !has_end && intervals_json.is_empty() {
        return Err(input(match &error {
            Some(e) => format!("iperf3 reported an error and measured nothing: {e}"),
            None => "iperf3 JSON without intervals or end summary".to_string(),
        }));
    }

    let test = start.get("test_start").and_then(Value::as_object).cloned().unwrap_or_default();
    let t = |k: &str| test.get(k).cloned().unwrap_or(Value::Null);
    let transport = t("protocol").as_str().unwrap_or("TCP").to_ascii_lowercase();
    if transport != "tcp" && transport != "udp" {
        return Err(input(format!("unsupported iperf3 protocol {transport:?} (TCP and UDP are)")));
    }
    let udp = transport == "udp";
    let direction = if uint(&t("bidir")).unwrap_or(0) > 0 {
        "bidir"
    } else if uint(&t("reverse")).unwrap_or(0) > 0 {
        "down"
    } else {
        "up"
    };
    let mut params = BTreeMap::new();
    params.insert("transport".to_string(), json!(transport));
    params.insert("direction".to_string(), json!(direction));
    if let Some(n) = uint(&t("num_streams")) {
        params.insert("streams".to_string(), json!(n));
    }
    if let Some(d) = num(&t("duration")) {
        params.insert("duration_s".to_string(), json!(d));
    }
    if let Some(b) = uint(&t("blksize")) {
        params.insert("block_size".to_string(), json!(b));
    }
    if let Some(w) = start.get("sock_bufsize").and_then(uint).filter(|w| *w > 0) {
        params.insert("window".to_string(), json!(w));
    }
    if let Some(r) = uint(&t("target_bitrate")).filter(|r| *r > 0) {
        params.insert("rate_bps".to_string(), json!(r));
    }

    // Stream ids: the position of the socket in `start.connected`.
    let sockets: Vec<i64> = start
        .get("connected")
        .and_then(Value::as_array)
        .map(|c| c.iter().filter_map(|s| s.get("socket").and_then(Value::as_i64)).collect())
        .unwrap_or_default();
    let stream_id = |obj: &Map<String, Value>, pos: usize| -> i32 {
        let id = obj.get("socket").and_then(Value::as_i64).and_then(|s| sockets.iter().position(|x| *x == s));
        i32::try_from(id.unwrap_or(pos)).unwrap_or(i32::MAX)
    };

    let mut intervals = Vec::new();
    for (k, iv) in intervals_json.iter().enumerate() {
        let iv = iv.as_object().ok_or_else(|| input(format!("iperf3 interval {k} is not an object")))?;
        if let Some(streams) = iv.get("streams").and_then(Value::as_array) {
            for (pos, s) in streams.iter().enumerate() {
                let s =
                    s.as_object().ok_or_else(|| input(format!("iperf3 interval {k}: a stream is not an object")))?;
                intervals.push(interval_row(stream_id(s, pos), s, k)?);
            }
        }
        for (key, id) in [("sum", -1), ("sum_bidir_reverse", -2)] {
            if let Some(s) = iv.get(key).and_then(Value::as_object) {
                intervals.push(interval_row(id, s, k)?);
            }
        }
    }
    intervals.sort_by(|a, b| a.stream.cmp(&b.stream).then(a.start_s.total_cmp(&b.start_s)));

    // The end summary: the receiver's view for throughput, the sender's for bytes sent.
    let obj = |k: &str| end.get(k).and_then(Value::as_object).cloned();
    let sent = obj("sum_sent").or_else(|| obj("sum")).unwrap_or_default();
    let received = obj("sum_received").or_else(|| obj("sum")).unwrap_or_default();
    let f = |m: &Map<String, Value>, k: &str| m.get(k).and_then(num);
    let u = |m: &Map<String, Value>, k: &str| m.get(k).and_then(uint);
    let last_sum = intervals.iter().filter(|i| i.stream == -1).map(|i| i.end_s).fold(0.0, f64::max);
    let duration_s = f(&received, "seconds").or_else(|| f(&sent, "seconds")).unwrap_or(last_sum);
    let throughput_bps = f(&received, "bits_per_second").unwrap_or(0.0);
    let received_bytes = u(&received, "bytes").unwrap_or(0);
    let mut summary = json!({
        "throughput_bps": throughput_bps,
        "sent_bytes": u(&sent, "bytes").unwrap_or(0),
        "received_bytes": received_bytes,
        "retransmits": u(&sent, "retransmits").unwrap_or(0),
        "duration_s": duration_s,
        "omitted_s": num(&t("omit")).unwrap_or(0.0),
        "protocol": transport,
        "streams": end_streams(&end, &stream_id),
    });
    if let Some(cpu) = obj("cpu_utilization_percent") {
        summary["cpu"] = json!({"client_pct": f(&cpu, "host_total"), "server_pct": f(&cpu, "remote_total")});
    }
    for (from, to) in [("sender_tcp_congestion", "sender_cc"), ("receiver_tcp_congestion", "receiver_cc")] {
        if let Some(cc) = end.get(from).and_then(Value::as_str) {
            summary[to] = json!(cc);
        }
    }
    if udp {
        let r = obj("sum_received").or_else(|| obj("sum")).unwrap_or_default();
        let packets = u(&r, "packets").unwrap_or(0);
        let lost = u(&r, "lost_packets").unwrap_or(0);
        let out_of_order: u64 = end
            .get("streams")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|s| s.pointer("/udp/out_of_order").and_then(uint)).sum())
            .unwrap_or(0);
        summary["udp"] = json!({
            "packets_sent": packets,
            "packets_received": packets.saturating_sub(lost),
            "lost": lost,
            "loss_pct": f(&r, "lost_percent").unwrap_or(0.0),
            "jitter_ms": f(&r, "jitter_ms").unwrap_or(0.0),
            "out_of_order": out_of_order,
        });
    }

    let mut hosts = Map::new();
    for k in
        ["version", "system_info", "connecting_to", "tcp_mss_default", "sock_bufsize", "sndbuf_actual", "rcvbuf_actual"]
    {
        if let Some(v) = start.get(k) {
            hosts.insert(k.to_string(), v.clone());
        }
    }
    let version = start.get("version").and_then(Value::as_str).unwrap_or("iperf3").to_string();
    let started_unix = start.get("timestamp").and_then(|t| t.get("timesecs")).and_then(num).unwrap_or(0.0);

    let run = NewRun {
        study: "import iperf3".to_string(),
        study_text: String::new(),
        spec: json!({"import": "iperf3", "test_start": Value::Object(test.clone())}),
        software: version,
        cells_planned: 1,
        started_unix,
    };
    let cell = CellRecord {
        index: 0,
        repeat: 0,
        kind: "iperf3".to_string(),
        params,
        ok: error.is_none(),
        failure: error,
        started_unix,
        duration_s,
        summary,
        hosts: Some(Value::Object(hosts)),
        emulator: None,
        intervals,
        probes: Vec::new(),
    };
    Ok((run, cell))
}

/// One iperf3 interval object (a stream's or a sum) as a row.
fn interval_row(stream: i32, s: &Map<String, Value>, k: usize) -> Result<IntervalRow> {
    let start_s = s.get("start").and_then(num).ok_or_else(|| input(format!("iperf3 interval {k} has no start")))?;
    let end_s = s.get("end").and_then(num).ok_or_else(|| input(format!("iperf3 interval {k} has no end")))?;
    let mapped = ["socket", "start", "end", "seconds", "bytes", "bits_per_second", "retransmits", "snd_cwnd", "rtt"];
    let rest: Map<String, Value> =
        s.iter().filter(|(k, _)| !mapped.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect();
    Ok(IntervalRow {
        stream,
        start_s,
        end_s,
        bytes: s.get("bytes").and_then(uint).unwrap_or(0),
        throughput_bps: s.get("bits_per_second").and_then(num).unwrap_or(0.0),
        retransmits: s.get("retransmits").and_then(uint).unwrap_or(0),
        cwnd_bytes: s.get("snd_cwnd").and_then(uint),
        srtt_us: s.get("rtt").and_then(uint).and_then(|r| u32::try_from(r).ok()),
        tcp: (!rest.is_empty()).then_some(Value::Object(rest)),
    })
}

/// Per-stream end summaries in wanperf's names.
fn end_streams(end: &Map<String, Value>, stream_id: &dyn Fn(&Map<String, Value>, usize) -> i32) -> Value {
    let empty = Map::new();
    let mut out = Vec::new();
    for (pos, s) in end.get("streams").and_then(Value::as_array).into_iter().flatten().enumerate() {
        // TCP (and newer UDP): sender and receiver objects; older UDP: one `udp` object.
        let sender = s.get("sender").or_else(|| s.get("udp")).and_then(Value::as_object).unwrap_or(&empty);
        let receiver = s.get("receiver").or_else(|| s.get("udp")).and_then(Value::as_object).unwrap_or(&empty);
        let g = |m: &Map<String, Value>, k: &str| m.get(k).cloned().unwrap_or(Value::Null);
        out.push(json!({
            "id": stream_id(sender, pos),
            "throughput_bps": g(receiver, "bits_per_second"),
            "sent_bytes": g(sender, "bytes"),
            "received_bytes": g(receiver, "bytes"),
            "retransmits": sender.get("retransmits").cloned().unwrap_or(json!(0)),
            "duration_s": g(receiver, "seconds"),
        }));
    }
    Value::Array(out)
}

/// Parses the NDJSON of `wanperf tput --json` (also `--iperf3`) or `wanperf copy --json` into
/// a run of one cell: kind `copy` when the start record's test has a `copy`, else `tput`.
///
/// The records are read through the types that write them ([`StartRecord`], [`IntervalRecord`],
/// [`EndRecord`] of `wanperf_proto::record`), so what is read here follows those types; fields
/// that records of an older wanperf lack are defaulted there. What is stored is what the types
/// hold, written back as JSON (a field no type knows is not kept).
///
/// * `params`: `transport`, `direction`, `streams`, and when set `duration_s`, `bytes`,
///   `window`, `rate_bps`, `cc`; for a copy also `way`, `block_size`, `compress`, `fsync` and
///   `hash`.
/// * `summary`: the end record's `summary` (throughput, streams, CPU, TCP counters, the
///   verdict, and a copy's files, bytes and both ends' pipeline stages); `complete` from the end
///   record, and for a copy the number of `file` records as `file_records`.
/// * `hosts`: the start record's `client_host` and `server_host`; `intervals`: one row per
///   stream and interval plus the sum as stream −1 ([`interval_rows`]).
///
/// A run whose end record says it is not complete is imported with `ok = false`; text with no
/// start or no end record is an error (an end record is written even when a test fails), and so
/// is a start, interval or end record that does not read as its type.
pub fn import_wanperf(ndjson: &str) -> Result<(NewRun, CellRecord)> {
    let mut start: Option<StartRecord> = None;
    let mut end: Option<EndRecord> = None;
    let mut intervals = Vec::new();
    let mut files = 0u64;
    for (n, line) in ndjson.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let v: Value =
            serde_json::from_str(line).map_err(|e| input(format!("line {}: not a wanperf JSON record: {e}", n + 1)))?;
        // `event` is the one field read by its name: every record type has it, and it says
        // which type the line is (`file`, `log` and other records are not read here).
        match v.get("event").and_then(Value::as_str) {
            Some("start") if start.is_none() => start = Some(record(&v, n, "start")?),
            Some("interval") => intervals.extend(interval_rows(&record(&v, n, "interval")?)),
            Some("file") => files += 1,
            Some("end") => end = Some(record(&v, n, "end")?),
            _ => {}
        }
    }
    let start = start.ok_or_else(|| input("no start record: not the --json output of wanperf tput or copy"))?;
    let end = end.ok_or_else(|| input("no end record: the test's output was cut short"))?;
    if !start.schema.starts_with("wanperf/") {
        return Err(input("the start record is not of the wanperf/1 schema"));
    }
    let test = &start.test;
    let mut params = BTreeMap::new();
    params.insert("transport".to_string(), json!(test.transport));
    params.insert("direction".to_string(), json!(test.direction));
    params.insert("streams".to_string(), json!(test.streams));
    let set = [
        ("duration_s", json!(test.duration_s)),
        ("bytes", json!(test.bytes)),
        ("window", json!(test.window)),
        ("rate_bps", json!(test.rate_bps)),
        ("cc", json!(test.cc)),
    ];
    for (k, v) in set.into_iter().filter(|(_, v)| !v.is_null()) {
        params.insert(k.to_string(), v);
    }
    if let Some(c) = &test.copy {
        params.insert("way".to_string(), json!(c.way));
        params.insert("block_size".to_string(), json!(c.block_size));
        params.insert("fsync".to_string(), json!(c.fsync));
        params.insert("hash".to_string(), json!(c.hash));
        let compress = match c.compress {
            Compress::Off => "off".to_string(),
            Compress::Zstd(l) => format!("zstd {l}"),
            Compress::Auto(l) => format!("auto {l}"),
        };
        params.insert("compress".to_string(), json!(compress));
    }
    let mut summary = json!(end.summary);
    summary["complete"] = json!(end.complete);
    if test.copy.is_some() {
        summary["file_records"] = json!(files);
    }
    let failure = (!end.complete).then(|| end.error.clone().unwrap_or_else(|| "the test did not complete".to_string()));
    let kind = if test.copy.is_some() { "copy" } else { "tput" };
    let run = NewRun {
        study: kind.to_string(),
        study_text: String::new(),
        spec: json!({"import": "wanperf", "server": start.server, "test": test}),
        software: start.version.clone(),
        cells_planned: 1,
        started_unix: start.timestamp,
    };
    let cell = CellRecord {
        index: 0,
        repeat: 0,
        kind: kind.to_string(),
        params,
        ok: end.complete,
        failure,
        started_unix: start.timestamp,
        duration_s: end.summary.duration_s,
        summary,
        hosts: Some(json!({"client": start.client_host, "server": start.server_host})),
        emulator: None,
        intervals,
        probes: Vec::new(),
    };
    Ok((run, cell))
}

/// Line `n` (from 0) read as the record type it says it is, or a one-line error.
fn record<T: DeserializeOwned>(v: &Value, n: usize, kind: &str) -> Result<T> {
    T::deserialize(v).map_err(|e| input(format!("line {}: not a wanperf/1 {kind} record: {e}", n + 1)))
}

/// The rows of one wanperf/1 interval record: one per stream (by its `id`), then the sum as
/// stream −1. `bytes` are the received bytes; `tcp` is the stream's TCP_INFO as JSON.
pub fn interval_rows(rec: &IntervalRecord) -> Vec<IntervalRow> {
    let row = |stream: i32, bytes: u64, throughput_bps: f64, retransmits: u64, tcp: Option<&TcpInfo>| IntervalRow {
        stream,
        start_s: rec.start_s,
        end_s: rec.end_s,
        bytes,
        throughput_bps,
        retransmits,
        // The congestion window in bytes: segments × MSS (a record that states it in bytes,
        // as early hand-written ones did, is taken at its word).
        cwnd_bytes: tcp.and_then(|t| {
            t.snd_cwnd_bytes.or_else(|| (t.cwnd > 0).then(|| u64::from(t.cwnd) * u64::from(t.snd_mss.max(1))))
        }),
        srtt_us: tcp.map(|t| t.srtt_us),
        tcp: tcp.map(|t| json!(t)),
    };
    let mut rows: Vec<IntervalRow> = rec
        .streams
        .iter()
        .map(|s| {
            let id = i32::try_from(s.id).unwrap_or(0);
            row(id, s.received_bytes, s.throughput_bps, s.retransmits, s.tcp.as_ref())
        })
        .collect();
    let sum = &rec.sum;
    rows.push(row(-1, sum.received_bytes, sum.throughput_bps, sum.retransmits, None));
    rows
}

/// [`interval_rows`] of an interval record as JSON (the study runner holds its records so);
/// none when it does not read as an [`IntervalRecord`].
pub fn wanperf_interval_rows(rec: &Value) -> Vec<IntervalRow> {
    IntervalRecord::deserialize(rec).map(|r| interval_rows(&r)).unwrap_or_default()
}

/// What one line of ping output says.
enum PingLine {
    /// An echo reply: raw icmp_seq, RTT ms, `-D` timestamp, whether marked `(DUP!)`.
    Reply { seq: u64, rtt_ms: f64, stamp: Option<f64>, dup: bool },
    /// Anything else.
    Other,
}

/// The value after `key` up to the next space (or the end), e.g. `icmp_seq=` → `12`.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let at = line.find(key)? + key.len();
    let rest = &line[at..];
    Some(rest.split(|c: char| c.is_whitespace()).next().unwrap_or(rest))
}

fn parse_line(line: &str) -> PingLine {
    let (stamp, body) = match line.strip_prefix('[').and_then(|l| l.split_once(']')) {
        Some((ts, body)) => (ts.trim().parse::<f64>().ok().filter(|t| t.is_finite()), body),
        None => (None, line),
    };
    if !body.contains(" bytes from ") {
        return PingLine::Other;
    }
    let seq = field(body, "icmp_seq=").and_then(|s| s.parse::<u64>().ok());
    let rtt = field(body, "time=").and_then(|t| t.trim_end_matches("ms").parse::<f64>().ok());
    match (seq, rtt) {
        (Some(seq), Some(rtt_ms)) if rtt_ms.is_finite() && rtt_ms >= 0.0 => {
            PingLine::Reply { seq, rtt_ms, stamp, dup: body.contains("(DUP!)") }
        }
        _ => PingLine::Other,
    }
}

/// The `N packets transmitted, M received, [+D duplicates, ][+E errors, ]P% packet loss, time Tms`
/// line.
#[derive(Default)]
struct PingStats {
    transmitted: u64,
    received: u64,
    duplicates: u64,
    errors: u64,
    loss_pct: Option<f64>,
    time_ms: Option<f64>,
}

fn parse_stats(line: &str) -> Option<PingStats> {
    if !line.contains("packets transmitted") {
        return None;
    }
    let mut st = PingStats::default();
    for part in line.split(',') {
        let part = part.trim();
        let first = part.split_whitespace().next().unwrap_or("");
        let n = || first.trim_start_matches('+').parse::<u64>().ok();
        if part.ends_with("packets transmitted") {
            st.transmitted = n()?;
        } else if part.ends_with("received") {
            st.received = n()?;
        } else if part.ends_with("duplicates") {
            st.duplicates = n()?;
        } else if part.ends_with("errors") {
            st.errors = n()?;
        } else if part.ends_with("packet loss") {
            st.loss_pct = first.trim_end_matches('%').parse().ok();
        } else if let Some(t) = part.strip_prefix("time ") {
            st.time_ms = t.trim_end_matches("ms").parse().ok().filter(|t: &f64| t.is_finite() && *t >= 0.0);
        }
    }
    Some(st)
}

/// `rtt min/avg/max/mdev = a/b/c/d ms` → the four numbers.
fn parse_rtt_line(line: &str) -> Option<[f64; 4]> {
    if !line.contains("min/avg/max") {
        return None;
    }
    let values = line.split('=').nth(1)?.split_whitespace().next()?;
    let v: Vec<f64> = values.split('/').filter_map(|x| x.parse().ok()).collect();
    (v.len() == 4).then(|| [v[0], v[1], v[2], v[3]])
}

/// Parses iputils `ping` output into a run of one cell of kind `ping`.
///
/// Probes are numbered by `icmp_seq` as ping printed it (from 1; wrap-around at 65536 is
/// undone), and every number up to the transmitted count without a reply is a lost probe.
/// With `ping -D`, each reply's timestamp minus its RTT gives the probe's send time; lost
/// probes, and all probes without `-D`, get send times from the mean interval (the fitted
/// one with timestamps, else the statistics' `time` over the probes sent, else 1 s). The
/// run's start time is the first probe's send time with `-D`, else 0 (unknown: the caller
/// may set it, e.g. from the file's time).
///
/// `summary` has wanperf ping's names (docs/schema.md): `sent`, `received`, `loss_pct`,
/// `duplicates`, `reordered`, `late` (always 0), `rtt_ms` and `ipdv_ms` (`min`, `avg`, `max`,
/// `stdev`, `median`, `iqr`, `p5`, `p95`, `p99`, all 0 without replies), `jitter_ms`, and
/// `ping_statistics`, ping's own statistics lines as printed.
pub fn import_ping(text: &str) -> Result<(NewRun, CellRecord)> {
    let mut host: Option<String> = None;
    let mut size: Option<u64> = None;
    let mut stats: Option<PingStats> = None;
    let mut rtt_line: Option<[f64; 4]> = None;
    // Unwrapped seq → (rtt, stamp) of the first reply; duplicates and reorderings counted.
    let mut replies: BTreeMap<u64, (f64, Option<f64>)> = BTreeMap::new();
    let (mut duplicates, mut reordered) = (0u64, 0u64);
    let (mut epoch, mut last, mut highest) = (0u64, 0u64, 0u64);
    for line in text.lines() {
        let line = line.trim_end();
        if let Some(rest) = line.strip_prefix("PING ") {
            // `PING host (addr) 56(84) bytes of data.` or `PING ::1(::1) 56 data bytes`
            host = rest.split([' ', '(']).next().map(str::to_string);
            size = rest
                .split(") ")
                .nth(1)
                .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|n| n.parse().ok());
            continue;
        }
        if let Some(s) = parse_stats(line) {
            stats = Some(s);
            continue;
        }
        if let Some(r) = parse_rtt_line(line) {
            rtt_line = Some(r);
            continue;
        }
        if let PingLine::Reply { seq, rtt_ms, stamp, dup } = parse_line(line) {
            if seq > 65535 {
                return Err(input(format!("ping output has icmp_seq={seq}, above 65535")));
            }
            // Undo the 16-bit wrap-around: a seq far below the last one is in the next round.
            let mut s = epoch + seq;
            if s + 32768 < last {
                epoch += 65536;
                s += 65536;
            }
            last = s;
            if dup || replies.contains_key(&s) {
                duplicates += 1;
                continue;
            }
            if s < highest {
                reordered += 1;
            }
            highest = highest.max(s);
            replies.insert(s, (rtt_ms, stamp));
        }
    }
    if replies.is_empty() && stats.is_none() {
        return Err(input("not ping output: no replies and no statistics line"));
    }
    let max_seq = replies.keys().next_back().copied().unwrap_or(0);
    let transmitted = stats.as_ref().map_or(max_seq, |s| s.transmitted).max(max_seq);
    if transmitted == 0 {
        return Err(input("ping output says no probes were sent"));
    }
    if transmitted > MAX_PING_PROBES {
        return Err(input(format!("ping output claims {transmitted} probes; at most {MAX_PING_PROBES} are imported")));
    }

    // Send times (Unix seconds) of the replies that carry a timestamp, and the interval.
    let stamped: Vec<(u64, f64)> =
        replies.iter().filter_map(|(s, (rtt, st))| st.map(|t| (*s, t - rtt / 1e3))).collect();
    let interval = match (stamped.first(), stamped.last()) {
        (Some(a), Some(b)) if b.0 > a.0 => (b.1 - a.1) / (b.0 - a.0) as f64,
        _ => match stats.as_ref().and_then(|s| s.time_ms) {
            Some(t) if transmitted > 1 => t / 1e3 / (transmitted - 1) as f64,
            _ => 1.0,
        },
    };
    // Unix send time of probe 1 (with -D), from the first stamped reply.
    // In floating point: an `icmp_seq=0` before any wrap (found by fuzzing) is probe 0, one
    // interval before probe 1, not an underflow.
    let t0 = stamped.first().map(|(s, t)| t - (*s as f64 - 1.0) * interval);

    let mut probes = Vec::with_capacity(transmitted as usize);
    for seq in 1..=transmitted {
        let reply = replies.get(&seq);
        let sent_s = match (reply.and_then(|r| r.1), t0) {
            (Some(stamp), Some(t0)) => stamp - reply.map_or(0.0, |r| r.0) / 1e3 - t0,
            _ => (seq - 1) as f64 * interval,
        };
        probes.push(ProbeRow { seq, phase: String::new(), sent_s, rtt_ms: reply.map(|r| r.0), late: false });
    }

    let rtts: Vec<f64> = probes.iter().filter_map(|p| p.rtt_ms).collect();
    let series: Vec<Option<f64>> = probes.iter().map(|p| p.rtt_ms).collect();
    let sent = probes.len() as u64;
    let received = rtts.len() as u64;
    let mut summary = json!({
        "sent": sent,
        "received": received,
        "loss_pct": 100.0 * (sent - received) as f64 / sent as f64,
        "duplicates": duplicates,
        "reordered": reordered,
        "late": 0,
        "rtt_ms": delay_stats(&rtts),
        "ipdv_ms": delay_stats(&ipdv(&series)),
        "jitter_ms": rfc3550_jitter(&rtts),
    });
    let mut reported = Map::new();
    if let Some(s) = &stats {
        reported.insert("transmitted".into(), json!(s.transmitted));
        reported.insert("received".into(), json!(s.received));
        reported.insert("duplicates".into(), json!(s.duplicates));
        reported.insert("errors".into(), json!(s.errors));
        reported.insert("loss_pct".into(), json!(s.loss_pct));
        reported.insert("time_ms".into(), json!(s.time_ms));
    }
    if let Some([min, avg, max, mdev]) = rtt_line {
        reported.insert("rtt_ms".into(), json!({"min": min, "avg": avg, "max": max, "mdev": mdev}));
    }
    summary["ping_statistics"] = Value::Object(reported);

    let mut params = BTreeMap::new();
    if let Some(h) = &host {
        params.insert("host".to_string(), json!(h));
    }
    if let Some(s) = size {
        params.insert("size".to_string(), json!(s));
    }
    let started_unix = t0.unwrap_or(0.0);
    let duration_s = stats.as_ref().and_then(|s| s.time_ms).map_or((sent - 1) as f64 * interval, |t| t / 1e3);
    // Timestamps each finite may still add up to infinities (or 0 × ∞): the archive stores
    // finite numbers only (found by fuzzing: `[1e308]` and `[-1e308]` stamps gave NaN send times).
    if !(started_unix.is_finite() && duration_s.is_finite() && probes.iter().all(|p| p.sent_s.is_finite())) {
        return Err(input("ping output has timestamps or times out of range"));
    }
    let run = NewRun {
        study: "import ping".to_string(),
        study_text: String::new(),
        spec: json!({"import": "ping", "host": host}),
        software: "iputils ping".to_string(),
        cells_planned: 1,
        started_unix,
    };
    let cell = CellRecord {
        index: 0,
        repeat: 0,
        kind: "ping".to_string(),
        params,
        ok: true,
        failure: None,
        started_unix,
        duration_s,
        summary,
        hosts: None,
        emulator: None,
        intervals: Vec::new(),
        probes,
    };
    Ok((run, cell))
}

/// wanperf ping's delay statistics object (zeros without data, as wanperf writes them).
fn delay_stats(v: &[f64]) -> Value {
    let s = Summary::of(v);
    let g = |f: fn(&Summary) -> f64| s.as_ref().map_or(0.0, f);
    json!({
        "min": g(|s| s.min),
        "avg": g(|s| s.avg),
        "max": g(|s| s.max),
        "stdev": g(|s| s.stdev),
        "median": g(|s| s.median),
        "iqr": g(|s| s.iqr),
        "p5": g(|s| s.p5),
        "p95": g(|s| s.p95),
        "p99": g(|s| s.p99),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOSSY: &str = "PING 127.0.0.1 (127.0.0.1) 56(84) bytes of data.
64 bytes from 127.0.0.1: icmp_seq=1 ttl=64 time=0.100 ms
64 bytes from 127.0.0.1: icmp_seq=2 ttl=64 time=0.300 ms
64 bytes from 127.0.0.1: icmp_seq=2 ttl=64 time=0.310 ms (DUP!)
64 bytes from 127.0.0.1: icmp_seq=4 ttl=64 time=0.200 ms

--- 127.0.0.1 ping statistics ---
5 packets transmitted, 3 received, +1 duplicates, 40% packet loss, time 804ms
rtt min/avg/max/mdev = 0.100/0.200/0.300/0.081 ms
";

    #[test]
    fn ping_with_losses() {
        let (run, cell) = import_ping(LOSSY).unwrap();
        assert_eq!(run.study, "import ping");
        assert_eq!(cell.kind, "ping");
        assert_eq!(cell.params["host"], "127.0.0.1");
        assert_eq!(cell.params["size"], 56);
        let rtts: Vec<Option<f64>> = cell.probes.iter().map(|p| p.rtt_ms).collect();
        assert_eq!(rtts, [Some(0.1), Some(0.3), None, Some(0.2), None]);
        assert_eq!(cell.probes.iter().map(|p| p.seq).collect::<Vec<_>>(), [1, 2, 3, 4, 5]);
        // 804 ms over 4 gaps.
        assert!((cell.probes[4].sent_s - 0.804).abs() < 1e-9);
        let s = &cell.summary;
        assert_eq!(s["sent"], 5);
        assert_eq!(s["received"], 3);
        assert_eq!(s["loss_pct"], 40.0);
        assert_eq!(s["duplicates"], 1);
        assert!((s["rtt_ms"]["avg"].as_f64().unwrap() - 0.2).abs() < 1e-12);
        assert_eq!(s["rtt_ms"]["median"], 0.2);
        assert_eq!(s["rtt_ms"]["min"], 0.1);
        assert_eq!(s["rtt_ms"]["max"], 0.3);
        // Sample stdev of 0.1, 0.3, 0.2 is 0.1.
        assert!((s["rtt_ms"]["stdev"].as_f64().unwrap() - 0.1).abs() < 1e-12);
        assert_eq!(s["ping_statistics"]["rtt_ms"]["mdev"], 0.081);
        assert_eq!(s["ping_statistics"]["transmitted"], 5);
    }

    #[test]
    fn ping_timestamps_give_send_times() {
        let text = "PING 127.0.0.1 (127.0.0.1) 56(84) bytes of data.
[1700000000.500000] 64 bytes from 127.0.0.1: icmp_seq=1 ttl=64 time=100 ms
[1700000001.600000] 64 bytes from 127.0.0.1: icmp_seq=2 ttl=64 time=200 ms
[1700000003.400000] 64 bytes from 127.0.0.1: icmp_seq=4 ttl=64 time=0.5 ms
";
        let (run, cell) = import_ping(text).unwrap();
        assert!((run.started_unix - 1700000000.4).abs() < 1e-5);
        let sent: Vec<f64> = cell.probes.iter().map(|p| p.sent_s).collect();
        assert_eq!(sent.len(), 4);
        assert!(sent[0].abs() < 1e-5 && (sent[1] - 1.0).abs() < 1e-5, "{sent:?}");
        assert!((sent[3] - (3.0 - 0.0005)).abs() < 1e-5, "{sent:?}");
        // The lost probe 3 sits on the fitted interval (2.9995 s over 3 gaps).
        assert!((sent[2] - 2.0 * 2.9995 / 3.0).abs() < 1e-5, "{sent:?}");
        assert_eq!(cell.probes[2].rtt_ms, None);
    }

    #[test]
    fn a_forged_probe_count_is_bounded() {
        // fuzz/corpus/import_ping/timeout-10M-transmitted: ten million probes from one line.
        let claim = |n: u64| {
            format!(
                "64 bytes from x: icmp_seq=1 ttl=64 time=0.03 ms\n\
                 {n} packets transmitted, 1 received, 99% packet loss, time 1ms\n"
            )
        };
        assert!(matches!(import_ping(&claim(10_000_000)), Err(ArchiveError::Input(_))));
        assert!(matches!(import_ping(&claim(MAX_PING_PROBES + 1)), Err(ArchiveError::Input(_))));
        assert_eq!(import_ping(&claim(1000)).unwrap().1.probes.len(), 1000);
    }

    #[test]
    fn out_of_range_times_are_an_input_error() {
        // fuzz/corpus/import_ping/crash-stamp-overflow: finite stamps whose difference is not.
        let stamps = "[1e308] 64 bytes from x: icmp_seq=1 ttl=64 time=1 ms\n\
                      [-1e308] 64 bytes from x: icmp_seq=3 ttl=64 time=1 ms\n";
        assert!(matches!(import_ping(stamps), Err(ArchiveError::Input(_))));
        // An infinite `time` is ignored like a missing one (send times then default to 1 s).
        let time = "64 bytes from x: icmp_seq=1 ttl=64 time=1 ms\n\
                    3 packets transmitted, 1 received, 66% packet loss, time 1e400ms\n";
        let (_, cell) = import_ping(time).unwrap();
        assert_eq!(cell.duration_s, 2.0);
        assert_eq!(cell.probes[2].sent_s, 2.0);
    }

    #[test]
    fn a_first_stamped_seq_of_zero_is_no_underflow() {
        // fuzz/corpus/import_ping/crash-seq0-stamp: `(s - 1)` on icmp_seq=0 overflowed.
        let text = "[1700000000.5] 64 bytes from x: icmp_seq=0 ttl=64 time=1 ms\n\
                    [1700000001.5] 64 bytes from x: icmp_seq=1 ttl=64 time=1 ms\n";
        let (run, cell) = import_ping(text).unwrap();
        assert!((run.started_unix - 1700000001.499).abs() < 1e-6, "{}", run.started_unix);
        assert_eq!(cell.probes.len(), 1);
        assert!(cell.probes[0].sent_s.abs() < 1e-6);
    }

    #[test]
    fn ping_seq_wraps() {
        let mut text = String::new();
        for s in [65534u64, 65535, 0, 1] {
            text.push_str(&format!("64 bytes from ::1: icmp_seq={s} ttl=64 time=1.0 ms\n"));
        }
        let (_, cell) = import_ping(&text).unwrap();
        assert_eq!(cell.probes.len(), 65537);
        assert_eq!(cell.summary["received"], 4);
        assert_eq!(cell.probes[65536].rtt_ms, Some(1.0));
    }

    #[test]
    fn garbage_is_an_input_error() {
        for bad in [
            "",
            "hello world",
            "ping: unknown host nowhere.invalid",
            "0 packets transmitted, 0 received, 100% packet loss, time 0ms",
            "99999999999 packets transmitted, 0 received, 100% packet loss, time 0ms",
            "64 bytes from x: icmp_seq=99999 ttl=1 time=1 ms",
        ] {
            assert!(matches!(import_ping(bad), Err(ArchiveError::Input(_))), "{bad:?}");
        }
        for bad in ["", "{", "[]", "{\"start\": 3}", "{\"start\": {}}", "{\"start\":{},\"intervals\":[1]}", "null"] {
            let e = import_iperf3(bad);
            assert!(matches!(e, Err(ArchiveError::Input(ref m)) if !m.contains('\n')), "{bad:?}: {e:?}");
        }
        let refused = r#"{"start":{"connected":[],"version":"iperf 3.12","system_info":"Linux"},"intervals":[],"end":{},
            "error":"unable to connect to server: Connection refused"}"#;
        let e = import_iperf3(refused).unwrap_err().to_string();
        assert!(e.contains("Connection refused"), "{e}");
    }

    const COPY: &str = r#"{"event":"start","schema":"wanperf/1","version":"wanperf 0.1.0","timestamp":1795614848.5,"server":"h:5301","test":{"transport":"tcp","direction":"up","streams":2,"duration_s":null,"bytes":null,"window":4194304,"cc":null,"rate_bps":null,"copy":{"way":"push","remote":["in"],"block_size":1048576,"compress":{"mode":"auto","level":3},"fsync":true}},"client_host":{"hostname":"a"},"server_host":{"hostname":"b"}}
{"event":"interval","start_s":0.0,"end_s":1.0,"streams":[{"id":0,"received_bytes":1000,"throughput_bps":8000.0,"retransmits":1,"tcp":{"srtt_us":1200,"snd_cwnd_bytes":64000}},{"id":1,"received_bytes":500,"throughput_bps":4000.0,"retransmits":0}],"sum":{"received_bytes":1500,"throughput_bps":12000.0,"retransmits":1}}
{"event":"file","path":"a","bytes":1500,"blake3":"00","skipped":false}
{"event":"end","complete":false,"error":"disk full on the receiver","summary":{"throughput_bps":12000.0,"duration_s":1.0,"copy":{"files":1,"bytes":1500},"verdict":{"limit":"network","text":"limited by the network path"}}}
"#;

    #[test]
    fn wanperf_ndjson_becomes_a_cell() {
        let (run, cell) = import_wanperf(COPY).unwrap();
        assert_eq!((run.study.as_str(), cell.kind.as_str()), ("copy", "copy"));
        assert_eq!(run.started_unix, 1795614848.5);
        assert_eq!(cell.params["way"], "push");
        assert_eq!(cell.params["streams"], 2);
        assert_eq!(cell.params["window"], 4194304);
        assert_eq!(cell.params["compress"], "auto 3");
        assert!(!cell.params.contains_key("duration_s"), "null options are left out");
        assert!(!cell.ok);
        assert_eq!(cell.failure.as_deref(), Some("disk full on the receiver"));
        assert_eq!(cell.summary["verdict"]["text"], "limited by the network path");
        assert_eq!((cell.summary["file_records"].as_u64(), cell.summary["complete"].as_bool()), (Some(1), Some(false)));
        let ids: Vec<i32> = cell.intervals.iter().map(|r| r.stream).collect();
        assert_eq!(ids, [0, 1, -1]);
        assert_eq!((cell.intervals[0].srtt_us, cell.intervals[0].cwnd_bytes), (Some(1200), Some(64000)));
        assert_eq!(cell.intervals[2].bytes, 1500);
        assert_eq!(cell.hosts.unwrap()["server"]["hostname"], "b");
        // A test without a copy part is a `tput` cell.
        let tput = COPY.replace(r#","copy":{"way":"push","remote":["in"],"block_size":1048576,"compress":{"mode":"auto","level":3},"fsync":true}"#, "");
        assert_eq!(import_wanperf(&tput).unwrap().1.kind, "tput");
    }

    /// `wanperf tput --json` output written before the archive read records through their
    /// types: made with the record types as they were then (two streams up, two intervals,
    /// TCP_INFO, a complete end record), frozen here so that it keeps importing as it did.
    const OLD_TPUT: &str = r#"{"event":"start","schema":"wanperf/1","version":"wanperf 0.1.0","timestamp":1795614848.25,"server":"198.18.0.2:5301","test":{"transport":"tcp","direction":"up","streams":2,"duration_s":2.0,"bytes":null,"interval_s":1.0,"omit_s":0.0,"block_size":0,"window":4194304,"cc":"bbr","dscp":null,"rate_bps":null,"zerocopy":false,"accept_capped_window":false},"server_version":"wanperf 0.1.0","client_host":{"hostname":"left","kernel":"6.8.0","cpu_model":"Xeon","cpus":8,"rmem_max":33554432,"wmem_max":null,"tcp_rmem":null,"tcp_wmem":null,"congestion_control":"cubic","available_congestion_control":["reno","cubic","bbr"],"interface":null},"server_host":{"hostname":"right","kernel":"6.8.0","cpu_model":"Xeon","cpus":8,"rmem_max":33554432,"wmem_max":null,"tcp_rmem":null,"tcp_wmem":null,"congestion_control":"cubic","available_congestion_control":["reno","cubic","bbr"],"interface":null},"connections":[{"id":0,"direction":"up","local":"198.18.0.1:40000","remote":"198.18.0.2:5302","sndbuf":8388608,"rcvbuf":null},{"id":1,"direction":"up","local":"198.18.0.1:40000","remote":"198.18.0.2:5302","sndbuf":8388608,"rcvbuf":null}],"warnings":[]}
{"event":"interval","index":0,"start_s":0.0,"end_s":1.0004,"omitted":false,"streams":[{"id":0,"direction":"up","sent_bytes":1250000,"received_bytes":1240000,"throughput_bps":9920000.0,"retransmits":0,"tcp":{"cwnd":40,"ssthresh":null,"snd_mss":1448,"srtt_us":25000,"rttvar_us":900,"min_rtt_us":20000,"total_retrans":0,"lost":0,"unacked":0,"reordering":0,"delivery_rate_bps":10000000,"pacing_rate_bps":null,"snd_wnd":3000000,"rcv_space":14480,"busy_time_us":1000000,"rwnd_limited_us":null,"sndbuf_limited_us":null,"bytes_acked":null,"bytes_retrans":null},"rcv_space":65536},{"id":1,"direction":"up","sent_bytes":1251000,"received_bytes":1241000,"throughput_bps":9928000.0,"retransmits":1,"tcp":{"cwnd":41,"ssthresh":null,"snd_mss":1448,"srtt_us":25100,"rttvar_us":900,"min_rtt_us":20000,"total_retrans":1,"lost":0,"unacked":0,"reordering":0,"delivery_rate_bps":10000000,"pacing_rate_bps":null,"snd_wnd":3000000,"rcv_space":14480,"busy_time_us":1000000,"rwnd_limited_us":null,"sndbuf_limited_us":null,"bytes_acked":null,"bytes_retrans":null},"rcv_space":65536}],"sum":{"sent_bytes":2501000,"received_bytes":2481000,"throughput_bps":19848000.0,"retransmits":1}}
{"event":"interval","index":1,"start_s":1.0,"end_s":2.0004,"omitted":false,"streams":[{"id":0,"direction":"up","sent_bytes":1250001,"received_bytes":1240001,"throughput_bps":9920000.125,"retransmits":1,"tcp":{"cwnd":40,"ssthresh":null,"snd_mss":1448,"srtt_us":25001,"rttvar_us":900,"min_rtt_us":20000,"total_retrans":1,"lost":0,"unacked":0,"reordering":0,"delivery_rate_bps":10000000,"pacing_rate_bps":null,"snd_wnd":3000000,"rcv_space":14480,"busy_time_us":1000000,"rwnd_limited_us":null,"sndbuf_limited_us":null,"bytes_acked":null,"bytes_retrans":null},"rcv_space":65536},{"id":1,"direction":"up","sent_bytes":1251001,"received_bytes":1241001,"throughput_bps":9928000.125,"retransmits":2,"tcp":{"cwnd":41,"ssthresh":null,"snd_mss":1448,"srtt_us":25101,"rttvar_us":900,"min_rtt_us":20000,"total_retrans":2,"lost":0,"unacked":0,"reordering":0,"delivery_rate_bps":10000000,"pacing_rate_bps":null,"snd_wnd":3000000,"rcv_space":14480,"busy_time_us":1000000,"rwnd_limited_us":null,"sndbuf_limited_us":null,"bytes_acked":null,"bytes_retrans":null},"rcv_space":65536}],"sum":{"sent_bytes":2501002,"received_bytes":2481002,"throughput_bps":19848000.25,"retransmits":3}}
{"event":"end","complete":true,"summary":{"throughput_bps":19860001.0,"sent_bytes":5000002,"received_bytes":4960003,"retransmits":3,"duration_s":2.0008,"omitted_s":0.0,"cpu":{"sender_pct":12.5,"receiver_pct":7.25,"client_pct":12.5,"server_pct":7.25,"client_s":0.25,"server_s":0.145},"streams":[{"id":0,"direction":"up","throughput_bps":9930000.5,"sent_bytes":2500001,"received_bytes":2480001,"retransmits":1,"duration_s":2.0008,"sender_sndbuf":8388608,"receiver_rcvbuf":6291456,"sender_cc":"bbr"},{"id":1,"direction":"up","throughput_bps":9930000.5,"sent_bytes":2500001,"received_bytes":2480002,"retransmits":2,"duration_s":2.0008,"sender_sndbuf":8388608,"receiver_rcvbuf":6291456,"sender_cc":"bbr"}],"tcp_counters":{"client":{"TcpRetransSegs":3}}}}
"#;

    #[test]
    fn an_earlier_wanperf_output_imports_field_by_field() {
        let (run, cell) = import_wanperf(OLD_TPUT).unwrap();
        assert_eq!((run.study.as_str(), run.software.as_str(), run.cells_planned), ("tput", "wanperf 0.1.0", 1));
        assert_eq!(run.started_unix, 1795614848.25);
        assert_eq!(run.spec["import"], "wanperf");
        assert_eq!(run.spec["server"], "198.18.0.2:5301");
        assert_eq!(run.spec["test"]["interval_s"], 1.0);
        assert_eq!(run.spec["test"]["window"], 4194304);
        assert_eq!((cell.index, cell.repeat, cell.kind.as_str()), (0, 0, "tput"));
        assert!(cell.ok && cell.failure.is_none());
        assert_eq!((cell.started_unix, cell.duration_s), (1795614848.25, 2.0008));
        let params: Vec<(&str, Value)> = cell.params.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        assert_eq!(
            params,
            [
                ("cc", json!("bbr")),
                ("direction", json!("up")),
                ("duration_s", json!(2.0)),
                ("streams", json!(2)),
                ("transport", json!("tcp")),
                ("window", json!(4194304)),
            ]
        );
        let s = &cell.summary;
        assert_eq!(s["throughput_bps"], 19860001.0);
        assert_eq!((s["sent_bytes"].as_u64(), s["received_bytes"].as_u64()), (Some(5000002), Some(4960003)));
        assert_eq!((s["retransmits"].as_u64(), s["duration_s"].as_f64()), (Some(3), Some(2.0008)));
        assert_eq!((s["cpu"]["sender_pct"].as_f64(), s["cpu"]["server_s"].as_f64()), (Some(12.5), Some(0.145)));
        assert_eq!(s["streams"][1]["received_bytes"], 2480002);
        assert_eq!(s["streams"][0]["sender_cc"], "bbr");
        assert_eq!(s["tcp_counters"]["client"]["TcpRetransSegs"], 3);
        assert_eq!(s["complete"], true);
        assert!(s.get("file_records").is_none() && s.get("verdict").is_none() && s.get("udp").is_none());
        let hosts = cell.hosts.as_ref().unwrap();
        assert_eq!(
            (hosts["client"]["hostname"].as_str(), hosts["server"]["hostname"].as_str()),
            (Some("left"), Some("right"))
        );
        assert_eq!((hosts["client"]["kernel"].as_str(), hosts["client"]["cpus"].as_u64()), (Some("6.8.0"), Some(8)));
        assert_eq!(hosts["server"]["available_congestion_control"], json!(["reno", "cubic", "bbr"]));
        // Two intervals of two streams and the sum each, by stream then time as written.
        // (stream, start, end, bytes, throughput, retransmits, cwnd bytes, srtt µs)
        type Row = (i32, f64, f64, u64, f64, u64, Option<u64>, Option<u32>);
        let rows: Vec<Row> = cell
            .intervals
            .iter()
            .map(|r| (r.stream, r.start_s, r.end_s, r.bytes, r.throughput_bps, r.retransmits, r.cwnd_bytes, r.srtt_us))
            .collect();
        assert_eq!(
            rows,
            [
                // cwnd 40 and 41 segments of 1448 B.
                (0, 0.0, 1.0004, 1240000, 9920000.0, 0, Some(57920), Some(25000)),
                (1, 0.0, 1.0004, 1241000, 9928000.0, 1, Some(59368), Some(25100)),
                (-1, 0.0, 1.0004, 2481000, 19848000.0, 1, None, None),
                (0, 1.0, 2.0004, 1240001, 9920000.125, 1, Some(57920), Some(25001)),
                (1, 1.0, 2.0004, 1241001, 9928000.125, 2, Some(59368), Some(25101)),
                (-1, 1.0, 2.0004, 2481002, 19848000.25, 3, None, None),
            ]
        );
        let tcp = cell.intervals[1].tcp.as_ref().unwrap();
        assert_eq!(
            (tcp["cwnd"].as_u64(), tcp["snd_mss"].as_u64(), tcp["min_rtt_us"].as_u64()),
            (Some(41), Some(1448), Some(20000))
        );
        assert_eq!((tcp["snd_wnd"].as_u64(), tcp["ssthresh"].as_u64()), (Some(3000000), None));
        assert!(cell.intervals[2].tcp.is_none() && cell.probes.is_empty() && cell.emulator.is_none());
    }

    #[test]
    fn records_built_as_values_import_as_the_same_numbers() {
        use wanperf_copy::spec::{CopyReport, CopySpec, FileRecord, HashKind, Stage, StageStat, Way as CopyWay};
        use wanperf_copy::verdict::{Headroom, Limit, Verdict};
        use wanperf_proto::msg::{
            CpuUsage, HostCapture, SideInterval, SideReport, StreamFinal, StreamSample, TestSpec,
        };
        use wanperf_proto::record::{summarize, CopySummary, Merger, SCHEMA};

        let mut test = TestSpec::tcp(2, 2.0);
        test.window = Some(1 << 22);
        test.rate_bps = Some(900_000_000);
        test.copy = Some(CopySpec {
            way: CopyWay::Push,
            remote: vec!["in".to_string().try_into().unwrap()],
            block_size: 1 << 20,
            compress: Compress::Auto(3),
            force: false,
            direct: false,
            fsync: true,
            probe: false,
            hash: HashKind::Xxh3,
            dest_names_source: false,
        });
        let start = StartRecord {
            event: "start".into(),
            schema: SCHEMA.into(),
            version: "wanperf 9.9.9".into(),
            timestamp: 1_800_000_000.125,
            server: "198.18.0.2:5301".into(),
            test: test.clone(),
            server_version: "wanperf 9.9.8".into(),
            client_host: HostCapture {
                hostname: "left".into(),
                cpus: 4,
                tcp_rmem: Some([4096, 131072, 6291456]),
                ..Default::default()
            },
            server_host: HostCapture { hostname: "right".into(), kernel: "6.1".into(), ..Default::default() },
            connections: Vec::new(),
            warnings: vec!["a window was capped".into()],
            one_ended: false,
        };
        // Intervals as the engine makes them: both ends' samples merged.
        let tcp = |cwnd: u32, srtt_us: u32, total_retrans: u32| TcpInfo {
            cwnd,
            snd_mss: 1448,
            srtt_us,
            total_retrans,
            ..Default::default()
        };
        let sample = |index: u32, t_s: f64, last: bool, sender: bool, bytes: [u64; 2]| SideInterval {
            index,
            t_s,
            last,
            streams: (0..2u32)
                .map(|id| StreamSample {
                    id,
                    bytes: bytes[id as usize],
                    tcp: sender.then(|| tcp(10 * (index + 1) + id, 30_000 + id, index + id)),
                    udp: None,
                })
                .collect(),
        };
        let mut merger = Merger::new(test.clone());
        for (k, (sent, received)) in
            [([3_000_000, 2_000_000], [2_900_000, 1_999_999]), ([6_000_000, 4_000_001], [6_000_000, 4_000_001])]
                .into_iter()
                .enumerate()
        {
            let k = k as u32;
            merger.push_local(sample(k, f64::from(k) + 1.0, k == 1, true, sent));
            merger.push_remote(sample(k, f64::from(k) + 1.001, k == 1, false, received));
        }
        let records: Vec<IntervalRecord> = std::iter::from_fn(|| merger.poll()).collect();
        assert_eq!(records.len(), 2);
        let report = |bytes: [u64; 2]| SideReport {
            streams: (0..2u32)
                .map(|id| StreamFinal { id, bytes: bytes[id as usize], duration_s: 2.001, ..Default::default() })
                .collect(),
            cpu: CpuUsage { user_s: 0.25, system_s: 0.5, wall_s: 2.0 },
            ..Default::default()
        };
        let mut summary =
            summarize(&test, &merger, &report([6_000_000, 4_000_001]), Some(&report([6_000_000, 4_000_001])));
        summary.verdict = Some(Verdict {
            limit: Limit::Stage(Stage::Write),
            at: "receiver".into(),
            rate_bytes_s: 4_997_500.5,
            text: "limited by disk write (receiver)".into(),
            evidence: vec!["write busy 97 %".into()],
            headroom: vec![Headroom { what: "send (sender)".into(), capacity_bytes_s: 1.25e8, times: 25.0125 }],
            probe: None,
        });
        let stage = StageStat {
            stage: Stage::Write,
            threads: 1,
            busy_s: 1.9375,
            starved_s: 0.0625,
            blocked_s: 0.0,
            bytes: 10_000_001,
            cpu_s: Some(0.5),
            cpu_wait_s: None,
        };
        let side = CopyReport {
            wall_s: 2.001,
            stages: vec![stage],
            files: 2,
            bytes: 10_000_001,
            wire_bytes: 9_000_000,
            compression: "zstd -3".into(),
            ..Default::default()
        };
        summary.copy = Some(CopySummary {
            files: 2,
            bytes: 10_000_001,
            wall_s: 2.001,
            rate_bytes_s: 4_997_501.2,
            compression: "auto".into(),
            sender: side.clone(),
            receiver: side,
            ..Default::default()
        });
        let end = EndRecord {
            event: "end".into(),
            complete: false,
            error: Some("disk full".into()),
            summary: summary.clone(),
            server_version: None,
        };
        let file = |path: &str| FileRecord {
            event: "file".into(),
            path: path.into(),
            bytes: 5,
            blake3: None,
            xxh3: Some("00".into()),
            skipped: false,
        };

        let mut lines = vec![serde_json::to_string(&start).unwrap()];
        lines.extend(records.iter().map(|r| serde_json::to_string(r).unwrap()));
        lines.extend([file("a"), file("b")].iter().map(|f| serde_json::to_string(f).unwrap()));
        lines.push(serde_json::to_string(&end).unwrap());
        let (run, cell) = import_wanperf(&lines.join("\n")).unwrap();

        assert_eq!(
            (run.software.as_str(), run.started_unix, cell.started_unix),
            ("wanperf 9.9.9", start.timestamp, start.timestamp)
        );
        assert_eq!(run.spec["test"], serde_json::to_value(&test).unwrap());
        assert_eq!(cell.hosts.unwrap(), json!({"client": start.client_host, "server": start.server_host}));
        assert_eq!((cell.kind.as_str(), cell.ok, cell.failure.as_deref()), ("copy", false, Some("disk full")));
        assert_eq!(cell.duration_s, summary.duration_s);
        assert_eq!(cell.params["window"], 1 << 22);
        assert_eq!(cell.params["rate_bps"], 900_000_000);
        assert_eq!((cell.params["way"].as_str(), cell.params["hash"].as_str()), (Some("push"), Some("xxh3")));
        assert_eq!((cell.params["compress"].as_str(), cell.params["fsync"].as_bool()), (Some("auto 3"), Some(true)));
        assert_eq!(cell.params["block_size"], 1 << 20);
        // The summary is the end record's, with `complete` and the file records added.
        let mut want = serde_json::to_value(&summary).unwrap();
        want["complete"] = json!(false);
        want["file_records"] = json!(2);
        assert_eq!(cell.summary, want);
        let back: wanperf_proto::record::Summary = serde_json::from_value(cell.summary.clone()).unwrap();
        assert_eq!(back, summary);
        // Every stream of every interval, then its sum, with the numbers the merger made.
        let mut want_rows = Vec::new();
        for r in &records {
            for s in &r.streams {
                let t = s.tcp.as_ref().map(|t| serde_json::to_value(t).unwrap());
                want_rows.push((
                    s.id as i32,
                    r.start_s,
                    r.end_s,
                    s.received_bytes,
                    s.throughput_bps,
                    s.retransmits,
                    s.tcp.as_ref().map(|t| t.srtt_us),
                    t,
                ));
            }
            want_rows.push((
                -1,
                r.start_s,
                r.end_s,
                r.sum.received_bytes,
                r.sum.throughput_bps,
                r.sum.retransmits,
                None,
                None,
            ));
        }
        let rows: Vec<_> = cell
            .intervals
            .iter()
            .map(|r| (r.stream, r.start_s, r.end_s, r.bytes, r.throughput_bps, r.retransmits, r.srtt_us, r.tcp.clone()))
            .collect();
        assert_eq!(rows, want_rows);
        assert_eq!(cell.intervals[1].retransmits, 1);
        // The window in bytes is the stream's cwnd (segments) × its MSS; sums have none.
        let want_cwnd: Vec<Option<u64>> = records
            .iter()
            .flat_map(|r| {
                let streams = r.streams.iter().map(|s| {
                    s.tcp.as_ref().and_then(|t| (t.cwnd > 0).then(|| u64::from(t.cwnd) * u64::from(t.snd_mss.max(1))))
                });
                streams.chain([None])
            })
            .collect();
        assert_eq!(cell.intervals.iter().map(|r| r.cwnd_bytes).collect::<Vec<_>>(), want_cwnd);
        assert!(want_cwnd.iter().any(Option::is_some), "the records carry TCP_INFO");
        // The same rows from the record as JSON (how the study runner holds it).
        assert_eq!(wanperf_interval_rows(&serde_json::to_value(&records[0]).unwrap()), interval_rows(&records[0]));
    }

    #[test]
    fn a_record_that_does_not_read_as_its_type_is_one_line_naming_it() {
        let bad = COPY.replace(r#""start_s":0.0"#, r#""start_s":"zero""#);
        let e = import_wanperf(&bad).unwrap_err().to_string();
        assert!(e.starts_with("line 2: not a wanperf/1 interval record") && !e.contains('\n'), "{e}");
        assert!(wanperf_interval_rows(&json!({"event": "interval", "start_s": "zero"})).is_empty());
    }

    #[test]
    fn cut_or_foreign_wanperf_output_is_one_line_never_a_panic() {
        // Every prefix of a real output: a cell, or one line saying why not.
        for n in 0..=COPY.len() {
            if !COPY.is_char_boundary(n) {
                continue;
            }
            if let Err(e) = import_wanperf(&COPY[..n]) {
                assert!(matches!(e, ArchiveError::Input(ref m) if !m.contains('\n')), "{n}: {e:?}");
            }
        }
        for bad in [
            "",
            "{}",
            "[1]",
            "{\"event\":\"end\"}",
            "{\"event\":\"start\",\"schema\":\"iperf\",\"test\":{}}\n{\"event\":\"end\",\"summary\":{}}",
        ] {
            assert!(import_wanperf(bad).is_err(), "{bad:?}");
        }
    }
}
