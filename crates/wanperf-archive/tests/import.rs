//! The importers on real output of iperf3 and iputils ping, made here on 127.0.0.1 (only), and
//! stored and read back through the SQLite store.

use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::Duration;
use wanperf_archive::*;

/// Whether `tool` runs; fails under CI (which installs it), skips loudly elsewhere.
fn have(tool: &str) -> bool {
    let ok = Command::new(tool).arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok();
    if !ok {
        if std::env::var_os("CI").is_some() {
            panic!("{tool} is not installed; .ci/run installs it");
        }
        eprintln!("SKIPPED: {tool} not installed");
    }
    ok
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// One iperf3 test against a one-off server on 127.0.0.1; the client's `-J` output.
fn iperf3(extra: &[&str]) -> String {
    let port = free_port().to_string();
    let mut server = Command::new("iperf3")
        .args(["-s", "-1", "-B", "127.0.0.1", "-p", &port])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = String::new();
    for _ in 0..50 {
        let o = Command::new("iperf3")
            .args(["-c", "127.0.0.1", "-p", &port, "-t", "1", "-J"])
            .args(extra)
            .stderr(Stdio::null())
            .output()
            .unwrap();
        out = String::from_utf8(o.stdout).unwrap();
        if !out.contains("unable to connect") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = server.kill();
    let _ = server.wait();
    out
}

fn round_trip(run: &NewRun, cell: &CellRecord) -> RunData {
    let mut store = SqliteStore::in_memory().unwrap();
    let id = store.create_run(run).unwrap();
    store.store_cell(id, cell).unwrap();
    let data = store.run_data(id).unwrap();
    assert_eq!(data.cells.len(), 1);
    data
}

#[test]
fn real_iperf3_tcp() {
    if !have("iperf3") {
        return;
    }
    let text = iperf3(&["-P", "2"]);
    let raw: Value = serde_json::from_str(&text).unwrap();
    let (run, cell) = import_iperf3(&text).unwrap();
    assert_eq!((run.study.as_str(), cell.kind.as_str(), cell.ok), ("import iperf3", "iperf3", true));
    assert!(run.software.starts_with("iperf 3"), "{}", run.software);
    assert_eq!(run.started_unix, raw["start"]["timestamp"]["timesecs"].as_f64().unwrap());
    assert_eq!(cell.params["transport"], "tcp");
    assert_eq!(cell.params["streams"], 2);
    assert_eq!(cell.params["direction"], "up");
    let s = &cell.summary;
    assert_eq!(s["protocol"], "tcp");
    assert_eq!(s["throughput_bps"], raw["end"]["sum_received"]["bits_per_second"]);
    assert_eq!(s["sent_bytes"], raw["end"]["sum_sent"]["bytes"]);
    assert_eq!(s["received_bytes"], raw["end"]["sum_received"]["bytes"]);
    assert_eq!(s["retransmits"], raw["end"]["sum_sent"]["retransmits"]);
    assert!(s["throughput_bps"].as_f64().unwrap() > 0.0);
    assert_eq!(s["streams"].as_array().unwrap().len(), 2);
    let hosts = cell.hosts.as_ref().unwrap();
    assert_eq!(hosts["system_info"], raw["start"]["system_info"]);
    assert_eq!(hosts["version"], raw["start"]["version"]);
    // One row per stream and interval, plus the sums; the sums add up the streams.
    let n = raw["intervals"].as_array().unwrap().len();
    assert!(n >= 1);
    assert_eq!(cell.intervals.len(), 3 * n);
    let sums: Vec<&IntervalRow> = cell.intervals.iter().filter(|i| i.stream == -1).collect();
    assert_eq!(sums.len(), n);
    for sum in &sums {
        let parts: u64 =
            cell.intervals.iter().filter(|i| i.stream >= 0 && i.start_s == sum.start_s).map(|i| i.bytes).sum();
        assert_eq!(parts, sum.bytes);
    }
    let first = cell.intervals.iter().find(|i| i.stream == 0).unwrap();
    assert!(first.cwnd_bytes.unwrap() > 0 && first.srtt_us.is_some(), "{first:?}");
    assert!(first.tcp.as_ref().unwrap().get("snd_wnd").is_some());
    assert_eq!(round_trip(&run, &cell).cells[0].cell, cell);
}

#[test]
fn real_iperf3_udp() {
    if !have("iperf3") {
        return;
    }
    let text = iperf3(&["-u", "-b", "10M"]);
    let (_, cell) = import_iperf3(&text).unwrap();
    assert_eq!(cell.params["transport"], "udp");
    assert_eq!(cell.params["rate_bps"], 10_000_000);
    let udp = &cell.summary["udp"];
    assert!(udp["packets_sent"].as_u64().unwrap() > 10, "{udp}");
    assert!(cell.summary["throughput_bps"].as_f64().unwrap() > 5e6);
    assert!(cell.intervals.iter().any(|i| i.stream == 0 && i.bytes > 0));
    assert_eq!(round_trip(&import_iperf3(&text).unwrap().0, &cell).cells[0].cell, cell);
}

#[test]
fn real_iperf3_reverse() {
    if !have("iperf3") {
        return;
    }
    let (_, cell) = import_iperf3(&iperf3(&["-R"])).unwrap();
    assert_eq!(cell.params["direction"], "down");
    assert!(cell.summary["received_bytes"].as_u64().unwrap() > 0);
}

#[test]
fn real_ping() {
    if !have("ping") {
        return;
    }
    let out = Command::new("ping").args(["-c", "5", "-i", "0.2", "127.0.0.1"]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "ping failed: {text}");
    let (run, cell) = import_ping(&text).unwrap();
    assert_eq!((run.study.as_str(), cell.kind.as_str()), ("import ping", "ping"));
    assert_eq!(cell.params["host"], "127.0.0.1");
    assert_eq!(cell.probes.len(), 5);
    assert!(cell.probes.iter().all(|p| p.rtt_ms.is_some_and(|r| r >= 0.0) && !p.late));
    let s = &cell.summary;
    assert_eq!((s["sent"].as_u64(), s["received"].as_u64(), s["loss_pct"].as_f64()), (Some(5), Some(5), Some(0.0)));
    // ping's own figures (rounded to µs) agree with ours.
    let own = &s["ping_statistics"]["rtt_ms"];
    for (ours, theirs, tol) in [("min", "min", 1e-9), ("max", "max", 1e-9), ("avg", "avg", 2e-3)] {
        let (a, b) = (s["rtt_ms"][ours].as_f64().unwrap(), own[theirs].as_f64().unwrap());
        assert!((a - b).abs() <= tol, "{ours}: {a} vs ping's {b}");
    }
    // Without -D the send times follow the interval, estimated from ping's `time`.
    let gap = cell.probes[1].sent_s - cell.probes[0].sent_s;
    assert!(gap > 0.15 && gap < 0.5, "{gap}");
    assert_eq!(round_trip(&run, &cell).cells[0].cell, cell);
}

#[test]
fn real_ping_with_timestamps() {
    if !have("ping") {
        return;
    }
    let out = Command::new("ping").args(["-D", "-c", "3", "-i", "0.2", "127.0.0.1"]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let (run, cell) = import_ping(&text).unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    assert!((now - run.started_unix).abs() < 60.0, "{} vs now {now}", run.started_unix);
    assert_eq!(cell.started_unix, run.started_unix);
    assert!(cell.probes[0].sent_s.abs() < 1e-6);
    for w in cell.probes.windows(2) {
        let gap = w[1].sent_s - w[0].sent_s;
        assert!(gap > 0.15 && gap < 0.5, "{gap}");
    }
}

/// The importers and the CSV export on anything: errors, never panics.
#[test]
fn garbage_never_panics() {
    let samples = [
        "\u{0}\u{1}\u{2}",
        "PING",
        "PING x (y) z(",
        "[] 64 bytes from : icmp_seq= time=",
        "[1e400] 64 bytes from x: icmp_seq=1 ttl=1 time=NaN ms",
        "64 bytes from x: icmp_seq=1 ttl=1 time=-1 ms",
        "packets transmitted, received",
        "rtt min/avg/max/mdev = 1/2 ms",
        "{\"start\":{\"test_start\":{\"protocol\":\"SCTP\"}},\"intervals\":[{}]}",
        "{\"start\":{},\"intervals\":[{\"streams\":[{\"start\":0}]}]}",
        "{\"start\":{},\"intervals\":[{\"streams\":[7]}]}",
        "{\"start\":{},\"end\":{\"sum\":{\"bytes\":-5,\"seconds\":\"x\"}}}",
    ];
    for s in samples {
        for r in [import_ping(s), import_iperf3(s)] {
            if let Err(e) = r {
                assert!(matches!(e, ArchiveError::Input(_)) && !e.to_string().contains('\n'), "{s:?}: {e}");
            }
        }
    }
}
