//! Synthetic runs with known answers, for tests, examples and timing: a seed-000-like load
//! study on a 25 Mbit/s, 166 ms path with a 290 625-byte drop-tail queue, where each cell's
//! loaded probes wait exactly the queue that streams × window leaves past the BDP.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use wanperf_archive::{CellRecord, IntervalRow, ProbeRow, RunData, RunInfo, RunStatus, StoredCell};

/// Path rate, bit/s.
pub const RATE_BPS: f64 = 25e6;
/// Base round trip, ms.
pub const BASE_RTT_MS: f64 = 166.0;
/// Queue capacity, bytes: 93 ms at 25 Mbit/s.
pub const QUEUE_BYTES: f64 = 290_625.0;

/// The queueing delay (ms) and goodput (bit/s) the model gives `streams` × `window`.
pub fn model(streams: u32, window: u64) -> (f64, f64) {
    let offered = f64::from(streams) * window as f64;
    let bdp = RATE_BPS * BASE_RTT_MS / 1000.0 / 8.0;
    let queued = (offered - bdp).clamp(0.0, QUEUE_BYTES);
    let tput = (offered * 8.0 / (BASE_RTT_MS / 1000.0)).min(0.94 * RATE_BPS);
    (queued * 8.0 / RATE_BPS * 1000.0, tput)
}

/// Deterministic noise in [0, 1).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One load cell: `probes` answered probes per phase (plus one lost loaded probe), one
/// interval per second per stream and summed, and the load `cell` summary.
pub fn load_cell(index: u32, streams: u32, window: u64, probes: usize) -> CellRecord {
    let (delay, tput) = model(streams, window);
    let mut rng = Lcg(u64::from(index) + 1);
    let noise: Vec<f64> = (0..probes).map(|_| rng.next()).collect();
    let mut rows = Vec::with_capacity(2 * probes + 1);
    // Idle: base + noise; loaded: the same noise plus the queue, so the medians differ by
    // exactly `delay`.
    for (i, n) in noise.iter().enumerate() {
        let seq = i as u64;
        rows.push(ProbeRow {
            seq,
            phase: "loaded".into(),
            sent_s: i as f64,
            rtt_ms: Some(BASE_RTT_MS + delay + n),
            late: false,
        });
    }
    rows.push(ProbeRow {
        seq: probes as u64,
        phase: "loaded".into(),
        sent_s: probes as f64,
        rtt_ms: None,
        late: false,
    });
    for (i, n) in noise.iter().enumerate() {
        let seq = (probes + 1 + i) as u64;
        let sent_s = (probes + 1 + i) as f64;
        rows.push(ProbeRow { seq, phase: "unloaded".into(), sent_s, rtt_ms: Some(BASE_RTT_MS + n), late: false });
    }
    let secs = 60usize;
    let retrans_per_s = if delay >= 92.9 { 8 } else { 0 };
    let mut intervals = Vec::new();
    for t in 0..secs {
        let (s0, s1) = (t as f64, t as f64 + 1.0);
        let wobble = 1.0 + 0.05 * (rng.next() - 0.5);
        let bps = tput * wobble;
        intervals.push(IntervalRow {
            stream: -1,
            start_s: s0,
            end_s: s1,
            bytes: (bps / 8.0) as u64,
            throughput_bps: bps,
            retransmits: retrans_per_s,
            cwnd_bytes: None,
            srtt_us: None,
            tcp: None,
        });
        for s in 0..streams {
            intervals.push(IntervalRow {
                stream: s as i32,
                start_s: s0,
                end_s: s1,
                bytes: (bps / 8.0 / f64::from(streams)) as u64,
                throughput_bps: bps / f64::from(streams),
                retransmits: 0,
                cwnd_bytes: Some(window),
                srtt_us: Some(((BASE_RTT_MS + delay) * 1000.0) as u32),
                tcp: Some(json!({"snd_mss": 1448})),
            });
        }
    }
    let loaded: Vec<f64> = noise.iter().map(|n| BASE_RTT_MS + delay + n).collect();
    let unloaded: Vec<f64> = noise.iter().map(|n| BASE_RTT_MS + n).collect();
    let ping = |v: &[f64], sent: usize| {
        let s = wanperf_stats::summary::Summary::of(v).unwrap();
        json!({"sent": sent, "received": v.len(), "loss_pct": 100.0 * (sent - v.len()) as f64 / sent as f64,
               "rtt_ms": {"min": s.min, "avg": s.avg, "max": s.max, "stdev": s.stdev, "median": s.median,
                          "iqr": s.iqr, "p5": s.p5, "p95": s.p95, "p99": s.p99}})
    };
    let mut params = BTreeMap::new();
    params.insert("streams".to_string(), Value::from(streams));
    params.insert("window".to_string(), Value::from(window));
    params.insert("rtt".to_string(), Value::from(BASE_RTT_MS / 1000.0));
    params.insert("rate".to_string(), Value::from(RATE_BPS));
    CellRecord {
        index,
        repeat: 0,
        kind: "load".into(),
        params,
        ok: true,
        failure: None,
        started_unix: 967_335_557.0 + 240.0 * f64::from(index),
        duration_s: 2.0 * secs as f64,
        summary: json!({"event": "cell", "streams": streams, "window": window,
            "loaded": ping(&loaded, probes + 1), "unloaded": ping(&unloaded, probes),
            "throughput_bps": tput, "retransmits": retrans_per_s * secs as u64, "added_rtt_ms": delay,
            "rpm": 60_000.0 / (BASE_RTT_MS + delay)}),
        hosts: Some(json!({"client": {"hostname": "slac", "kernel": "6.8.0", "congestion_control": "cubic",
            "tcp_wmem": [4096, 16384, 4194304]}, "server": {"hostname": "cern", "kernel": "6.8.0"}})),
        emulator: Some(json!({"left_to_right": {"delivered": 1000 + index, "queue_drops": retrans_per_s * 60}})),
        intervals,
        probes: rows,
    }
}

/// A whole load study over `streams` × `windows` with `probes` answered probes per phase and
/// cell, named `study`, plus one failed cell when `with_failure`.
pub fn load_study(study: &str, streams: &[u32], windows: &[u64], probes: usize, with_failure: bool) -> RunData {
    let mut cells = Vec::new();
    for &s in streams {
        for &w in windows {
            let i = cells.len() as u32;
            cells.push(load_cell(i, s, w, probes));
        }
    }
    if with_failure {
        let mut params = BTreeMap::new();
        params.insert("streams".to_string(), Value::from(15));
        params.insert("window".to_string(), Value::from(524_288));
        cells.push(CellRecord {
            index: cells.len() as u32,
            kind: "load".into(),
            params,
            ok: false,
            failure: Some("server refused the test: <b>too many streams</b> & \"15\"".into()),
            started_unix: 967_340_000.0,
            ..Default::default()
        });
    }
    let n = cells.len() as u32;
    RunData {
        verdicts: Vec::new(),
        run: RunInfo {
            id: 7,
            study: study.into(),
            study_text: "[study]\nname = \"seed000\"\n".into(),
            spec: json!({"name": study, "measure": "load", "axes": {"streams": streams, "window": windows},
                         "path": {"rtt": "166ms", "rate": "25M"}}),
            software: "wanperf 0.1.0".into(),
            cells_planned: n,
            cells_done: n,
            started_unix: 967_335_557.0,
            finished_unix: Some(967_335_557.0 + 240.0 * f64::from(n)),
            status: RunStatus::Complete,
        },
        cells: cells
            .into_iter()
            .enumerate()
            .map(|(i, cell)| StoredCell { id: i as i64 + 1, run_id: 7, cell })
            .collect(),
    }
}

/// A throughput-only run: `tput` cells over one window and several stream counts, no probes.
pub fn tput_study(streams: &[u32]) -> RunData {
    let mut d = load_study("tput only", streams, &[65_536], 1, false);
    for c in &mut d.cells {
        let s = &mut c.cell;
        s.kind = "tput".into();
        s.probes.clear();
        let t = s.summary["throughput_bps"].clone();
        s.summary = json!({"throughput_bps": t, "sent_bytes": 1.0e8, "received_bytes": 1.0e8, "retransmits": 3,
            "duration_s": 60.0, "cpu": {"sender_pct": 12.0, "receiver_pct": 20.0},
            "tcp_counters": {"client": {"Tcp.RetransSegs": 3, "TcpExt.TCPTimeouts": 1}}});
    }
    d
}

/// A site for `site_report`: one 20 Mbit/s link over 40 one-minute bins whose outbound load
/// ramps up and down, a ping path whose queueing delay follows it, and a few talkers.
pub fn site(title: &str) -> crate::site::SiteData {
    use wanperf_flows::top::{MixRow, TopRow};
    use wanperf_flows::util::{UtilBin, UtilSeries};
    let t0 = 1_700_000_000_000u64;
    let load = |i: u64| if i < 20 { i as f64 } else { (40 - i) as f64 };
    let bins: Vec<UtilBin> = (0..40u64)
        .filter(|i| *i != 30) // a gap: one bin without readings
        .map(|i| UtilBin {
            bin_ms: t0 + i * 60_000,
            covered_ms: 60_000,
            in_bps: 1.5e6 + (i % 3) as f64 * 1e5,
            out_bps: load(i) * 1e6,
            in_max_bps: 2e6,
            out_max_bps: load(i) * 1.1e6,
            speed_bps: Some(20_000_000),
            ..Default::default()
        })
        .collect();
    let series =
        UtilSeries { bin_len_ms: 60_000, in_octets: 450_000_000, out_octets: 3_000_000_000, bins, wraps: 0, resets: 1 };
    let saturated = series.saturation(90.0, 2);
    let probes = (0..400u64)
        .map(|k| {
            let t = t0 as f64 / 1000.0 + k as f64 * 6.0;
            let bin = k / 10;
            (
                t,
                if (18..=21).contains(&bin) && k % 10 == 0 {
                    None
                } else {
                    Some(166.0 + 3.0 * load(bin) + (k % 4) as f64)
                },
            )
        })
        .collect();
    let row = |rank: usize, src: [u8; 4], dst: [u8; 4], bytes: f64, pair: bool| TopRow {
        rank,
        src: Some(src.into()),
        dst: Some(dst.into()),
        proto: pair.then_some(6),
        sport: pair.then_some(40_000 + rank as u16),
        dport: pair.then_some(5201),
        bytes,
        packets: bytes / 1400.0,
        flows: 3.0,
        share_pct: bytes / 3.0e7,
    };
    crate::site::SiteData {
        title: title.into(),
        from_unix: Some(t0 as f64 / 1000.0),
        to_unix: Some(t0 as f64 / 1000.0 + 2400.0),
        local: vec!["198.18.0.0/24".into()],
        top_src: vec![
            row(1, [198, 18, 0, 1], [198, 18, 5, 2], 2.0e9, false),
            row(2, [198, 18, 0, 9], [198, 18, 6, 2], 9.0e8, false),
        ],
        top_dst: vec![row(1, [198, 18, 0, 1], [198, 18, 5, 2], 2.0e9, false)],
        pairs: vec![row(1, [198, 18, 0, 1], [198, 18, 5, 2], 2.0e9, true)],
        mix: vec![MixRow {
            app: "iperf3".into(),
            bytes_in: 4.0e8,
            bytes_out: 2.9e9,
            share_in_pct: 88.0,
            share_out_pct: 97.0,
            flows: 12.0,
        }],
        links: vec![crate::site::Link {
            device: "slac-border".into(),
            interface: "wan0".into(),
            source: "snmp".into(),
            series,
            saturated,
        }],
        paths: vec![crate::site::Path { label: "ping slac → cern".into(), probes }],
    }
}
