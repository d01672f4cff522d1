//! Both stores against the same checks: a round trip of a run with cells, intervals and
//! probes (lost and late ones included), ordering, aggregates computed by hand, the
//! one-cell-once rule, missing runs, and refusing a newer schema. PostgreSQL runs when
//! `WANPERF_TEST_POSTGRES` holds a URL (and must, under CI).

use serde_json::json;
use std::path::PathBuf;
use wanperf_archive::schema::SCHEMA_VERSION;
use wanperf_archive::*;

/// A fresh directory under the system's temporary directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
        let p = std::env::temp_dir().join(format!("wanperf-archive-{name}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn new_run(study: &str, started_unix: f64) -> NewRun {
    NewRun {
        study: study.into(),
        study_text: "axes:\n  streams: [1, 4]\n".into(),
        spec: json!({"axes": {"streams": [1, 4]}, "measure": "load", "ratio": 0.1}),
        software: "wanperf 0.1.0".into(),
        cells_planned: 4,
        started_unix,
    }
}

fn probe(seq: u64, phase: &str, rtt_ms: Option<f64>, late: bool) -> ProbeRow {
    ProbeRow { seq, phase: phase.into(), sent_s: seq as f64 * 0.1, rtt_ms, late }
}

fn interval(stream: i32, start_s: f64, throughput_bps: f64, retransmits: u64) -> IntervalRow {
    IntervalRow {
        stream,
        start_s,
        end_s: start_s + 1.0,
        bytes: (throughput_bps / 8.0) as u64,
        throughput_bps,
        retransmits,
        cwnd_bytes: (stream >= 0).then_some(64_000),
        srtt_us: (stream >= 0).then_some(12_345),
        tcp: (stream >= 0).then(|| json!({"rttvar_us": 310, "sndbuf_limited_us": 201334})),
    }
}

/// Cell (0, 0): a load cell with two phases, lost and late probes, intervals out of order.
fn loaded_cell() -> CellRecord {
    CellRecord {
        index: 0,
        repeat: 0,
        kind: "load".into(),
        params: [("streams".to_string(), json!(4)), ("window".to_string(), json!(262144))].into(),
        ok: true,
        failure: None,
        started_unix: 1_700_000_010.25,
        duration_s: 12.5,
        summary: json!({"throughput_bps": 9.4e8, "rpm": 1234.5, "loaded": {"rtt_ms": {"median": 20.0}}}),
        hosts: Some(json!({"client": {"kernel": "6.8.0", "cpus": 48}})),
        emulator: Some(json!({"left": {"dropped": 3}})),
        // Stored shuffled; read back by (stream, start_s).
        intervals: vec![
            interval(0, 1.0, 150.0, 2),
            interval(-1, 2.0, 600.0, 3),
            interval(-1, 0.0, 100.0, 1),
            interval(0, 0.0, 50.0, 0),
            interval(-1, 1.0, 200.0, 2),
        ],
        // Stored out of seq order; read back by seq.
        probes: vec![
            probe(5, "unloaded", Some(1.0), false),
            probe(0, "loaded", Some(10.0), false),
            probe(1, "loaded", Some(20.0), false),
            probe(2, "loaded", None, false),
            probe(3, "loaded", Some(30.0), false),
            probe(4, "loaded", None, true),
            probe(6, "unloaded", Some(3.0), false),
        ],
    }
}

fn failed_cell() -> CellRecord {
    CellRecord {
        index: 1,
        repeat: 0,
        kind: "load".into(),
        params: [("streams".to_string(), json!(1))].into(),
        ok: false,
        failure: Some("server went away".into()),
        started_unix: 1_700_000_030.0,
        duration_s: 0.5,
        summary: json!({}),
        ..Default::default()
    }
}

fn ping_cell() -> CellRecord {
    CellRecord {
        index: 0,
        repeat: 1,
        kind: "ping".into(),
        ok: true,
        summary: json!({"sent": 3}),
        probes: vec![probe(0, "", Some(0.5), false), probe(1, "", Some(0.25), false), probe(2, "", Some(0.75), false)],
        ..Default::default()
    }
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-9)
}

/// The checks every store must pass. Assumes an empty archive.
fn round_trip(store: &mut dyn Store) {
    let older = store.create_run(&new_run("older", 1_700_000_000.0)).unwrap();
    let run_id = store.create_run(&new_run("study", 1_700_000_010.0)).unwrap();
    assert_ne!(older, run_id);

    // Stored out of (index, repeat) order.
    let cells = [failed_cell(), ping_cell(), loaded_cell()];
    let ids: Vec<i64> = cells.iter().map(|c| store.store_cell(run_id, c).unwrap()).collect();
    assert_eq!(store.done_cells(run_id).unwrap(), [(0, 0), (0, 1), (1, 0)]);
    assert!(store.done_cells(older).unwrap().is_empty());

    // A cell is never stored twice, and the refused one leaves nothing behind.
    let mut again = loaded_cell();
    again.probes.push(probe(99, "loaded", Some(1.0), false));
    match store.store_cell(run_id, &again) {
        Err(ArchiveError::DuplicateCell { run_id: r, index: 0, repeat: 0 }) => assert_eq!(r, run_id),
        other => panic!("duplicate cell stored: {other:?}"),
    }

    let info = store.run_info(run_id).unwrap();
    assert_eq!(
        (info.study.as_str(), info.cells_done, info.cells_planned, info.status, info.finished_unix),
        ("study", 3, 4, RunStatus::Running, None)
    );
    assert_eq!(info.spec, new_run("", 0.0).spec);
    store.finish_run(run_id, RunStatus::Complete, 1_700_000_100.5).unwrap();
    let info = store.run_info(run_id).unwrap();
    assert_eq!((info.status, info.finished_unix), (RunStatus::Complete, Some(1_700_000_100.5)));

    // Newest first.
    let runs = store.runs().unwrap();
    assert_eq!(runs.iter().map(|r| r.id).collect::<Vec<_>>(), [run_id, older]);
    assert_eq!(runs[0], info);
    assert_eq!(runs[1].cells_done, 0);

    // Everything back, in order.
    let data = store.run_data(run_id).unwrap();
    assert_eq!(data.run, info);
    let mut expected: Vec<StoredCell> =
        cells.iter().zip(&ids).map(|(c, id)| StoredCell { id: *id, run_id, cell: c.clone() }).collect();
    expected.sort_by_key(|c| (c.cell.index, c.cell.repeat));
    for c in &mut expected {
        c.cell.intervals.sort_by(|a, b| (a.stream, a.start_s).partial_cmp(&(b.stream, b.start_s)).unwrap());
        c.cell.probes.sort_by_key(|p| p.seq);
    }
    assert_eq!(data.cells, expected);

    // Aggregates, by hand.
    let agg = store.cell_aggregates(run_id).unwrap();
    assert_eq!(agg.iter().map(|a| (a.index, a.repeat)).collect::<Vec<_>>(), [(0, 0), (0, 1), (1, 0)]);
    let a = &agg[0];
    assert_eq!((a.cell_id, a.ok, a.params["streams"].as_u64()), (ids[2], true, Some(4)));
    let loaded = &a.phases["loaded"];
    // RTTs 10, 20, 30; one lost, one late: 5 sent, 3 received.
    assert_eq!((loaded.sent, loaded.received), (5, 3));
    assert!((loaded.loss_pct - 40.0).abs() < 1e-9);
    assert!(close(loaded.mean_ms, 20.0) && close(loaded.min_ms, 10.0) && close(loaded.max_ms, 30.0));
    assert!(close(loaded.stdev_ms, (200.0f64 / 3.0).sqrt()), "{loaded:?}");
    let unloaded = &a.phases["unloaded"];
    assert_eq!((unloaded.sent, unloaded.received, unloaded.loss_pct), (2, 2, 0.0));
    assert!(close(unloaded.mean_ms, 2.0) && close(unloaded.stdev_ms, 1.0), "{unloaded:?}");
    // All-streams intervals 100, 200, 600 bit/s; retransmits 1 + 2 + 3 (stream 0 ignored).
    assert!(close(a.mean_throughput_bps, 300.0), "{a:?}");
    assert_eq!(a.retransmits, 6);
    let p = &agg[1];
    assert_eq!(p.phases.keys().collect::<Vec<_>>(), [""]);
    assert!(close(p.phases[""].mean_ms, 0.5) && close(p.phases[""].stdev_ms, (0.125f64 / 3.0).sqrt()));
    assert_eq!((p.mean_throughput_bps, p.retransmits), (None, 0));
    let f = &agg[2];
    assert_eq!((f.ok, f.phases.len(), f.mean_throughput_bps, f.retransmits), (false, 0, None, 0));

    // Missing runs.
    let missing = run_id + older + 1000;
    assert!(matches!(store.run_info(missing), Err(ArchiveError::NoRun(_))));
    assert!(matches!(store.run_data(missing), Err(ArchiveError::NoRun(_))));
    assert!(matches!(store.cell_aggregates(missing), Err(ArchiveError::NoRun(_))));
    assert!(matches!(store.store_cell(missing, &ping_cell()), Err(ArchiveError::NoRun(_))));
    assert!(matches!(store.finish_run(missing, RunStatus::Incomplete, 0.0), Err(ArchiveError::NoRun(_))));

    assert!(matches!(store.store_verdicts(missing, &[]), Err(ArchiveError::NoRun(_))));

    // Verdicts: stored in order, replaced whole by the next evaluation (study check).
    let v = |pass: bool, measured: Option<f64>| Verdict {
        expect: 1,
        line: 14,
        text: "goodput ≤ 1.05 * window / rtt".into(),
        cells: "streams = 1".into(),
        pass,
        measured,
        bound: Some(5.5e6),
        margin: measured.map(|m| (5.5e6 - m) / 5.5e6),
        unit: "bit/s".into(),
        note: "seed 001".into(),
    };
    let first = [v(true, Some(5e6)), v(false, None)];
    store.store_verdicts(run_id, &first).unwrap();
    assert_eq!(store.run_data(run_id).unwrap().verdicts, first);
    store.store_verdicts(run_id, &first[1..]).unwrap();
    assert_eq!(store.run_data(run_id).unwrap().verdicts, first[1..]);
    assert!(store.run_data(older).unwrap().verdicts.is_empty());

    flows_round_trip(store);
    counters_round_trip(store);
    mesh_round_trip(store);
}

fn mesh_row(agent: &str, seq: i64, src: &str, dst: &str, kind: &str, start: f64) -> MeshRow {
    MeshRow {
        agent: agent.into(),
        seq,
        test: "t".into(),
        kind: kind.into(),
        src: src.into(),
        dst: dst.into(),
        start_unix: start,
        end_unix: start + 60.0,
        status: if seq % 2 == 0 { "ok".into() } else { "refused".into() },
        reason: (seq % 2 == 1).then(|| "busy: retry at 14:10".into()),
        value: (seq % 2 == 0).then_some(166.25),
        loss: (kind == "latency").then_some(0.01),
        stats: (kind == "latency").then_some(MeshStats {
            sent: 600,
            lost: 6,
            min_ms: Some(160.0 + seq as f64),
            p25_ms: Some(165.0),
            p75_ms: Some(167.0),
            p90_ms: Some(168.0),
            max_ms: Some(190.0 + seq as f64),
            owd_fwd_ms: None,
            owd_rev_ms: Some(83.0),
        }),
        detail: serde_json::json!({"seq": seq, "median_ms": 166.25}),
        received_unix: start + 61.0,
    }
}

/// Mesh results are stored once per (agent, seq) however often they are sent, and come back
/// filtered by time, pair and kind, in start order.
fn mesh_round_trip(store: &mut dyn Store) {
    let rows = vec![
        mesh_row("a", 1, "a", "b", "latency", 120.0),
        mesh_row("a", 2, "a", "b", "throughput", 60.0),
        mesh_row("b", 1, "b", "a", "latency", 60.0),
    ];
    assert_eq!(store.store_mesh(&rows).unwrap(), 3);
    // A retried batch with one new result stores only the new one.
    let again = vec![rows[0].clone(), mesh_row("a", 3, "a", "b", "latency", 180.0)];
    assert_eq!(store.store_mesh(&again).unwrap(), 1);
    let all = store.mesh_results(&MeshQuery { from_unix: 0.0, to_unix: 1e9, ..Default::default() }).unwrap();
    assert_eq!(all.len(), 4);
    assert_eq!(all[0], rows[1]);
    assert_eq!(all[1], rows[2]);
    let ab = store
        .mesh_results(&MeshQuery {
            from_unix: 100.0,
            to_unix: 1e9,
            src: Some("a".into()),
            dst: Some("b".into()),
            kind: Some("latency".into()),
            failed_only: false,
        })
        .unwrap();
    assert_eq!(ab.iter().map(|r| r.seq).collect::<Vec<_>>(), vec![1, 3]);
    assert_eq!(ab[0], rows[0]);
    // Only what failed (seq 1 and 3 of agent a are refused, by mesh_row's rule).
    let failed = store
        .mesh_results(&MeshQuery { from_unix: 0.0, to_unix: 1e9, failed_only: true, ..Default::default() })
        .unwrap();
    assert!(failed.iter().all(|r| r.status != "ok") && failed.len() == 3, "{failed:?}");
    // Slots aggregated in the database: a → b's ok summaries (4 at 130 s, 6 at 150 s) in one
    // slot; the refused ones (1 at 120 s, 3 at 180 s) and b → a's are left out.
    let ok = mesh_row("a", 4, "a", "b", "latency", 130.0);
    let mut ok2 = mesh_row("a", 6, "a", "b", "latency", 150.0);
    ok2.value = Some(170.0);
    assert_eq!(store.store_mesh(&[ok, ok2]).unwrap(), 2);
    let slots = store.mesh_slots("a", "b", 100.0, 400.0, 60.0).unwrap();
    assert_eq!(slots.len(), 1, "{slots:?}");
    let s = &slots[0];
    assert_eq!((s.index, s.summaries, s.sent, s.lost), (0, 2, 1200, 12));
    assert_eq!(s.min_ms, Some(164.0));
    assert_eq!(s.max_ms, Some(196.0));
    assert_eq!(s.median_ms, Some((166.25 + 170.0) / 2.0));
    assert_eq!(s.owd_fwd_ms, None);
    assert_eq!(s.owd_rev_ms, Some(83.0));
    assert!(store.mesh_slots("a", "b", 400.0, 500.0, 60.0).unwrap().is_empty());

    // Long ranges are read from the hourly sums (slots of whole hours from an hour boundary):
    // the same figures as the summaries themselves. Three hours of x → y, one summary without
    // quantiles, one refused, and one retried (stored once, summed once).
    let h0 = 1_700_000_000.0_f64.div_euclid(3600.0) * 3600.0;
    let mut rows = Vec::new();
    for i in 0..18i64 {
        let mut r = mesh_row("x", 2 * i, "x", "y", "latency", h0 + i as f64 * 600.0);
        r.value = Some(20.0 + i as f64);
        if i == 5 {
            r.stats.as_mut().unwrap().p25_ms = None;
        }
        rows.push(r);
    }
    rows.push(mesh_row("x", 101, "x", "y", "latency", h0 + 60.0)); // refused (odd seq)
    assert_eq!(store.store_mesh(&rows).unwrap(), 19);
    assert_eq!(store.store_mesh(&rows[..3]).unwrap(), 0);
    let hourly = store.mesh_slots("x", "y", h0, h0 + 36_000.0, 36_000.0).unwrap();
    let raw = store.mesh_slots("x", "y", h0 - 1.0, h0 + 36_000.0, 36_001.0).unwrap();
    assert_eq!((hourly.len(), raw.len()), (1, 1));
    let (h, r) = (&hourly[0], &raw[0]);
    assert_eq!((h.summaries, h.sent, h.lost), (18, 18 * 600, 18 * 6));
    assert_eq!((h.summaries, h.sent, h.lost, h.min_ms, h.max_ms), (r.summaries, r.sent, r.lost, r.min_ms, r.max_ms));
    let close = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => (a - b).abs() < 1e-9,
        (a, b) => a == b,
    };
    for (a, b) in [(h.p25_ms, r.p25_ms), (h.median_ms, r.median_ms), (h.p75_ms, r.p75_ms), (h.p90_ms, r.p90_ms)] {
        assert!(close(a, b), "{h:?} vs {r:?}");
    }
    assert!(close(h.median_ms, Some(20.0 + 8.5)));
    assert_eq!((h.owd_fwd_ms, h.owd_rev_ms), (None, Some(83.0)));
    // Hour slots: three of them, each of six summaries.
    let per_hour = store.mesh_slots("x", "y", h0, h0 + 3.0 * 3600.0, 3600.0).unwrap();
    assert_eq!(per_hour.iter().map(|s| (s.index, s.summaries)).collect::<Vec<_>>(), vec![(0, 6), (1, 6), (2, 6)]);
}

fn flow(bin_unix: f64, src: &str, bytes: f64) -> FlowRow {
    FlowRow {
        bin_unix,
        bin_s: 300.0,
        exporter: "198.18.0.1".into(),
        domain: 7,
        src: src.into(),
        dst: "fd00::2".into(),
        proto: 6,
        sport: 40000,
        dport: 5201,
        sampling: 10,
        bytes,
        packets: bytes / 1000.0,
        flows: 0.5,
        raw_bytes: bytes / 10.0,
        raw_packets: bytes / 10_000.0,
    }
}

fn exporter(session_unix: f64, lost: i64) -> ExporterRow {
    ExporterRow {
        session_unix,
        exporter: "198.18.0.1".into(),
        protocol: "ipfix".into(),
        domain: 7,
        seq_unit: "records".into(),
        datagrams: 10,
        records: 100,
        malformed: 1,
        awaiting_template: 2,
        expected: 100 + lost,
        lost,
        resets: 0,
        sampling: 10,
        socket_drops: 0,
        updated_unix: session_unix + 1.0,
    }
}

/// Flow bins come back in key order within a time range; an exporter's counters are
/// replaced, not duplicated, when a session stores them again.
fn flows_round_trip(store: &mut dyn Store) {
    let rows = vec![flow(600.0, "198.18.1.1", 1.5e6), flow(0.0, "198.18.1.2", 2.5e6), flow(300.0, "198.18.1.1", 1e3)];
    store.store_flows(&rows, &[exporter(1000.0, 3)]).unwrap();
    store.store_flows(&[], &[exporter(1000.0, 5), exporter(2000.0, 0)]).unwrap();
    let got = store.flows(0.0, 600.0).unwrap();
    assert_eq!(got, vec![rows[1].clone(), rows[2].clone()]);
    assert_eq!(store.flows(0.0, f64::MAX).unwrap().len(), 3);
    let ex = store.exporters().unwrap();
    assert_eq!(ex.len(), 2);
    assert_eq!(ex[0].session_unix, 2000.0);
    assert_eq!(ex[1].lost, 5);
}

fn reading(interface: &str, at_unix: f64, in_octets: u64) -> CounterRow {
    CounterRow {
        device: "r1".into(),
        interface: interface.into(),
        source: "snmp".into(),
        at_unix,
        speed_bps: if interface == "wan0" { Some(10_000_000_000) } else { None },
        in_octets: in_octets as i64,
        out_octets: 42,
        in_errors: 1,
        out_errors: 2,
        in_drops: 3,
        out_drops: 4,
        width: 64,
    }
}

/// Counter readings come back per interface in time order, and an unsigned 64-bit counter
/// above i64::MAX keeps every bit.
fn counters_round_trip(store: &mut dyn Store) {
    let rows = vec![reading("wan1", 20.0, 5), reading("wan0", 20.0, u64::MAX - 1), reading("wan0", 10.0, 7)];
    store.store_counters(&rows).unwrap();
    let got = store.counters(0.0, 20.0).unwrap();
    assert_eq!(got, vec![rows[2].clone()]);
    let all = store.counters(0.0, 100.0).unwrap();
    assert_eq!(all, vec![rows[2].clone(), rows[1].clone(), rows[0].clone()]);
    assert_eq!(all[1].in_octets as u64, u64::MAX - 1);
}

#[test]
fn sqlite_round_trip() {
    let dir = TempDir::new("rt");
    // Parent directories are created.
    let path = dir.0.join("a/b/archive.sqlite");
    let mut store = SqliteStore::open(&path).unwrap();
    let mode: String = store.connection().query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");
    let fk: i64 = store.connection().query_row("PRAGMA foreign_keys", [], |r| r.get(0)).unwrap();
    assert_eq!(fk, 1);
    round_trip(&mut store);
    drop(store);
    // Reopening migrates nothing and keeps everything.
    let mut again = open(path.to_str().unwrap()).unwrap();
    assert_eq!(again.runs().unwrap().len(), 2);
}

#[test]
fn sqlite_in_memory_round_trip() {
    round_trip(&mut SqliteStore::in_memory().unwrap());
}

#[test]
fn sqlite_newer_schema_is_refused() {
    let dir = TempDir::new("toonew");
    let path = dir.0.join("archive.sqlite");
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    store.connection().execute("UPDATE schema_version SET version = ?1", [SCHEMA_VERSION + 1]).unwrap();
    drop(store);
    match SqliteStore::open(&path) {
        Err(ArchiveError::TooNew { found, known }) => assert_eq!((found, known), (SCHEMA_VERSION + 1, SCHEMA_VERSION)),
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a newer schema was accepted"),
    }
}

/// kill -9 in the middle of writing: every cell in the archive afterwards is whole. The test
/// runs itself as the writer (`crash_writer` below) and kills it.
#[test]
fn a_killed_writer_leaves_whole_cells() {
    const PROBES: u64 = 200_000;
    let dir = TempDir::new("crash");
    let path = dir.0.join("archive.sqlite");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash_writer", "--nocapture", "--test-threads", "1"])
        .env("WANPERF_CRASH_DB", &path)
        .env("WANPERF_CRASH_PROBES", PROBES.to_string())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill it once a few cells are in, while it writes the next.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let done = SqliteStore::open(&path).ok().and_then(|mut s| {
            let runs = s.runs().ok()?;
            Some(runs.first().map_or(0, |r| r.cells_done))
        });
        if done.unwrap_or(0) >= 3 || std::time::Instant::now() > deadline {
            break;
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let mut store = SqliteStore::open(&path).unwrap();
    let run = store.runs().unwrap()[0].id;
    let data = store.run_data(run).unwrap();
    assert!(data.cells.len() >= 3, "only {} cells were written", data.cells.len());
    for c in &data.cells {
        assert_eq!(c.cell.probes.len() as u64, PROBES, "cell {} is partial", c.cell.index);
    }
}

/// The writer for the test above; does nothing unless run by it.
#[test]
fn crash_writer() {
    let Some(path) = std::env::var_os("WANPERF_CRASH_DB") else { return };
    let n: u64 = std::env::var("WANPERF_CRASH_PROBES").unwrap().parse().unwrap();
    let mut store = SqliteStore::open(PathBuf::from(path)).unwrap();
    let run = store.create_run(&new_run("crash", 0.0)).unwrap();
    for index in 0..10_000 {
        let probes = (0..n).map(|s| probe(s, "", Some(1.0), false)).collect();
        store.store_cell(run, &CellRecord { index, kind: "ping".into(), probes, ..Default::default() }).unwrap();
    }
}

/// The PostgreSQL URL to test against, or None to skip (which fails under CI).
fn postgres_url() -> Option<String> {
    match std::env::var("WANPERF_TEST_POSTGRES") {
        Ok(u) if !u.is_empty() => Some(u),
        _ if std::env::var_os("CI").is_some() => {
            panic!("CI is set but WANPERF_TEST_POSTGRES is not: CI must test the PostgreSQL store (.ci/run starts one)")
        }
        _ => {
            eprintln!("SKIPPED: set WANPERF_TEST_POSTGRES=postgres://… to test the PostgreSQL store");
            None
        }
    }
}

/// A schema of its own in the test database (so runs start empty and tests do not meet),
/// dropped at the end; `url` connects with it as the search path.
struct PgSchema {
    admin: ::postgres::Client,
    name: String,
    url: String,
}

impl PgSchema {
    fn new(base: &str, tag: &str) -> PgSchema {
        let mut admin = ::postgres::Client::connect(base, ::postgres::NoTls).expect("connect to WANPERF_TEST_POSTGRES");
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        let name = format!("wanperf_test_{tag}_{}_{nanos}", std::process::id());
        admin.batch_execute(&format!("CREATE SCHEMA {name}")).unwrap();
        let sep = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{sep}options=-csearch_path%3D{name}");
        PgSchema { admin, name, url }
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        let _ = self.admin.batch_execute(&format!("DROP SCHEMA {} CASCADE", self.name));
    }
}

#[test]
fn postgres_round_trip() {
    let Some(base) = postgres_url() else { return };
    let schema = PgSchema::new(&base, "rt");
    let mut store = open(&schema.url).unwrap();
    round_trip(store.as_mut());
    // The tables are where the search path says, as jsonb.
    let mut admin = ::postgres::Client::connect(&base, ::postgres::NoTls).unwrap();
    let t: String = admin
        .query_one(
            "SELECT data_type FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'cells'
             AND column_name = 'summary'",
            &[&schema.name],
        )
        .unwrap()
        .get(0);
    assert_eq!(t, "jsonb");
}

#[test]
fn postgres_newer_schema_is_refused() {
    let Some(base) = postgres_url() else { return };
    let schema = PgSchema::new(&base, "toonew");
    let mut store = PgStore::connect(&schema.url).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    store.client().execute("UPDATE schema_version SET version = $1", &[&(SCHEMA_VERSION + 1)]).unwrap();
    drop(store);
    match PgStore::connect(&schema.url) {
        Err(ArchiveError::TooNew { found, known }) => assert_eq!((found, known), (SCHEMA_VERSION + 1, SCHEMA_VERSION)),
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a newer schema was accepted"),
    }
}

#[test]
fn bad_postgres_url_is_an_error() {
    // Nothing listens on port 1; the error must not repeat the password.
    match open("postgres://u:secret@127.0.0.1:1/db?connect_timeout=2") {
        Err(ArchiveError::Db(m)) => assert!(!m.contains("secret") && m.contains("PostgreSQL"), "{m}"),
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("connected to nothing"),
    }
}
