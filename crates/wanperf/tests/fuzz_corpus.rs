//! The fuzzing campaign's corpora, replayed on the stable toolchain (docs/fuzzing.md).
//!
//! Every file under `fuzz/corpus/<target>/` goes through the decoder its cargo-fuzz target
//! (`fuzz/fuzz_targets/<target>.rs`) calls, with the same assertions: nothing panics, what
//! decodes re-encodes to the same value, what imports is finite and storable. This is what CI
//! runs of the campaign (cargo-fuzz itself needs nightly and a sanitizer build).
//!
//! `cargo test --release -p wanperf --test fuzz_corpus -- --ignored write_encoder_seeds`
//! regenerates the encoder-made seeds (`enc-*` files) of the binary protocols.

use std::path::{Path, PathBuf};
use wanperf_archive::import::{import_iperf3, import_ping, MAX_PING_PROBES};
use wanperf_archive::{CellRecord, NewRun};
use wanperf_proto::data::{DataHello, UdpHeader, UDP_FIN_SEQ, UDP_HEADER_LEN};
use wanperf_proto::frame::{encode, FrameDecoder};
use wanperf_proto::probe::{Probe, PROBE_HEADER_LEN};
use wanperf_proto::udp::UdpRecvStats;
use wanperf_proto::units::{parse_duration, parse_rate, parse_size};

/// What replays one input.
type Replay = fn(&[u8]);

/// Every target, with its replay.
const TARGETS: &[(&str, Replay)] = &[
    ("control_frame", control_frame),
    ("data_hello", data_hello),
    ("udp_datagram", udp_datagram),
    ("ping_probe", ping_probe),
    ("study_toml", study_toml),
    ("import_iperf3", import_iperf3_bytes),
    ("import_ping", import_ping_bytes),
    ("units", units),
    ("auth_keys", auth_keys),
    ("server_handshake", server_handshake),
    ("topology_toml", topology_toml),
    ("iperf3_control", wanperf_iperf3::exercise),
    ("copy_data", wanperf_copy::exercise),
    ("flow_export", wanperf_flows::exercise),
    ("stamp_packet", wanperf_stamp::exercise),
    ("owamp_control", wanperf_owamp::exercise),
];

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = fuzz_dir().join("corpus").join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{}: empty corpus", dir.display());
    files.into_iter().map(|p| (p.clone(), std::fs::read(&p).unwrap())).collect()
}

fn replay(target: &str) {
    let (_, f) = TARGETS.iter().find(|(t, _)| *t == target).unwrap();
    for (path, data) in corpus(target) {
        let r = std::panic::catch_unwind(|| f(&data));
        assert!(r.is_ok(), "{target}: {} panicked", path.display());
    }
}

// --- The targets' bodies (keep in step with fuzz/fuzz_targets/*.rs). ---

fn control_frame(data: &[u8]) {
    let split = data.first().map_or(0, |b| *b as usize).min(data.len());
    let mut dec = FrameDecoder::new();
    dec.push(&data[..split]);
    let mut n = 0;
    loop {
        match dec.next_msg() {
            Ok(Some(m)) => {
                let mut d2 = FrameDecoder::new();
                d2.push(&encode(&m));
                assert_eq!(d2.next_msg().unwrap(), Some(m));
                n += 1;
                if n > 1000 {
                    break;
                }
            }
            Ok(None) if split < data.len() && dec.buffered() <= data.len() => {
                dec.push(&data[split..]);
                while let Ok(Some(_)) = dec.next_msg() {}
                break;
            }
            _ => break,
        }
    }
    let _ = dec.eof_error();
}

fn data_hello(data: &[u8]) {
    if let Ok(h) = DataHello::decode(data) {
        assert_eq!(DataHello::decode(&h.encode()), Ok(h));
    }
}

fn udp_datagram(data: &[u8]) {
    let mut st = UdpRecvStats::new();
    let mut fresh = 0u64;
    for (i, chunk) in data.chunks(UDP_HEADER_LEN).enumerate() {
        let Ok(h) = UdpHeader::read(chunk) else { continue };
        if h.seq == UDP_FIN_SEQ {
            st.on_fin(h.send_ns);
        } else if st.on_packet(h.seq % (1 << 20), h.send_ns, i as u64 * 1000) {
            fresh += 1;
        }
    }
    let c = st.counters();
    assert_eq!(c.packets, fresh);
    assert_eq!(c.lost, st.expected().saturating_sub(c.packets));
    assert!(c.jitter_ms.is_finite() && c.jitter_ms >= 0.0);
}

fn ping_probe(data: &[u8]) {
    let Some(p) = Probe::read(data) else { return };
    assert!(data.len() >= PROBE_HEADER_LEN);
    let mut b = [0u8; PROBE_HEADER_LEN];
    p.write(&mut b);
    assert_eq!(Probe::read(&b), Some(p));
    if !p.reply {
        let mut echo = data.to_vec();
        let reply = Probe { reply: true, server_rx_ns: 1, server_tx_ns: 2, ..p };
        reply.write(&mut echo);
        assert_eq!(echo.len(), data.len());
        assert_eq!(echo[PROBE_HEADER_LEN..], data[PROBE_HEADER_LEN..]);
        let r = Probe::read(&echo).unwrap();
        assert!(r.reply && r.seq == p.seq && r.client_tx_ns == p.client_tx_ns);
    }
}

fn study_toml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(study) = wanperf::study::flags::parse(text) else { return };
    let cells = study.cells();
    assert!(!cells.is_empty());
    for c in cells.iter().take(64) {
        let _ = study.measure_argv(c, "host.invalid", Some(5301));
        let _ = study.link_argv(c);
        let _ = study.params(c);
        assert!(!study.estimate_s(c, &wanperf::study::flags::CliFlags).is_nan());
    }
    assert_eq!(wanperf::study::flags::parse(text).ok(), Some(study));
}

fn topology_toml(data: &[u8]) {
    use std::net::IpAddr;
    use wanperf_net::plan::Plan;
    use wanperf_net::topo::Topology;
    let read = |_: &str| -> Result<String, String> { Ok("1\n2\n".into()) };
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(t) = Topology::parse(text, &read) else { return };
    let p = Plan::new(&t).expect("parse checked the plan");
    for s in 0..t.nodes.len().min(16) {
        for i in p.ifaces.iter().take(16) {
            assert!(p.walk(s, IpAddr::V4(i.v4)).is_some(), "node {s} cannot reach {}", i.v4);
            assert!(p.walk(s, IpAddr::V6(i.v6)).is_some(), "node {s} cannot reach {}", i.v6);
        }
    }
    assert_eq!(Topology::parse(text, &read).ok(), Some(t));
}

fn storable(run: NewRun, cell: CellRecord) {
    assert!(run.started_unix.is_finite() && cell.started_unix.is_finite() && cell.duration_s.is_finite());
    for r in &cell.intervals {
        assert!(r.start_s.is_finite() && r.end_s.is_finite() && r.throughput_bps.is_finite(), "{r:?}");
    }
    for p in &cell.probes {
        assert!(p.sent_s.is_finite() && p.rtt_ms.is_none_or(f64::is_finite), "{p:?}");
    }
    // The JSON round trip on the first 1000 probes (a few lines may claim a million).
    let mut cell = cell;
    cell.probes.truncate(1000);
    let j = serde_json::to_string(&(&run, &cell)).unwrap();
    let back: (NewRun, CellRecord) = serde_json::from_str(&j).unwrap();
    assert_eq!(back, (run, cell));
}

fn import_iperf3_bytes(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok((run, cell)) = import_iperf3(text) {
        storable(run, cell);
    }
}

fn import_ping_bytes(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok((run, cell)) = import_ping(text) {
        assert!(cell.probes.len() as u64 <= MAX_PING_PROBES);
        storable(run, cell);
    }
}

fn units(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if let Ok(n) = parse_size(s) {
        assert!(n <= u64::MAX / 2);
        if n < 1 << 53 {
            assert_eq!(parse_size(&n.to_string()), Ok(n));
        }
    }
    if let Ok(n) = parse_rate(s) {
        assert!(n <= 1_000_000_000_000_000);
        assert_eq!(parse_rate(&n.to_string()), Ok(n));
    }
    if let Ok(d) = parse_duration(s) {
        assert!(d.is_finite() && (0.0..=1e9).contains(&d), "{d}");
        assert_eq!(parse_duration(&d.to_string()), Ok(d));
    }
}

fn auth_keys(data: &[u8]) {
    use wanperf_proto::auth::{nonce_from_hex, nonce_hex, AuthorizedKeys, PrivateKey, PublicKey};
    let Ok(s) = std::str::from_utf8(data) else { return };
    let check_public = |k: &PublicKey| {
        let line = k.to_line();
        assert_eq!(PublicKey::parse(&line).as_ref(), Ok(k), "{line}");
        assert_eq!(AuthorizedKeys::parse(&line).unwrap().len(), 1);
    };
    if let Ok(keys) = AuthorizedKeys::parse(s) {
        let lines: Vec<&str> = s.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
        for l in &lines {
            check_public(&PublicKey::parse(l).expect("a line of a parsed file parses alone"));
        }
        assert_eq!(keys.len(), lines.len());
    }
    if let Ok(k) = PublicKey::parse(s) {
        check_public(&k);
    }
    if let Ok(p) = PrivateKey::parse(s) {
        let again = PrivateKey::parse(&p.to_text()).expect("a printed private key parses");
        assert_eq!(again.public(), p.public());
        let line = p.public().to_line();
        let keys = AuthorizedKeys::parse(&line).unwrap();
        let sig = p.sign(&[9; 32], s);
        assert!(keys.verify(&line, &sig, &[9; 32], s).is_ok());
        assert!(keys.verify(&line, &sig, &[8; 32], s).is_err());
    }
    let listed = AuthorizedKeys::parse(&PrivateKey::from_seed([7; 32], "fuzz").public().to_line()).unwrap();
    let mut ls = s.splitn(3, '\n');
    let (k, sig, spec) = (ls.next().unwrap_or(""), ls.next().unwrap_or(""), ls.next().unwrap_or(""));
    assert!(listed.verify(k, sig, &[9; 32], spec).is_err());
    if let Some(n) = nonce_from_hex(s) {
        assert_eq!(nonce_from_hex(&nonce_hex(&n)), Some(n));
    }
}

/// The server's handshake against a hostile control stream (see the target for the layout):
/// nothing is admitted without the listed key's proof, the session always ends, no panic.
fn server_handshake(data: &[u8]) {
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    use wanperf_proto::auth::{AuthorizedKeys, PrivateKey};
    use wanperf_proto::msg::{HostCapture, Msg, SideInterval, SideReport, TestSpec};
    use wanperf_proto::server::{Limits, ServerAction, ServerSession, Timeouts};
    const NONCE: [u8; 32] = [9; 32];
    let Some((&mode, rest)) = data.split_first() else { return };
    let genuine = mode & 1 == 1;
    let key = PrivateKey::from_seed([7; 32], "fuzz");
    let keys = Arc::new(AuthorizedKeys::parse(&key.public().to_line()).unwrap());
    let spec = TestSpec::tcp(1, 1.0);
    let spec_json = serde_json::to_string(&spec).unwrap();
    let mut stream = Vec::new();
    if genuine {
        stream.extend(encode(&Msg::Request { software: "fuzz".into(), spec: spec.clone() }));
        stream.extend(encode(&Msg::Auth {
            key: key.public().to_line(),
            spec: spec_json.clone(),
            signature: key.sign(&NONCE, &spec_json),
        }));
    }
    stream.extend_from_slice(rest);
    let base = Instant::now();
    let mut s = ServerSession::new(
        base,
        Limits::default(),
        Timeouts::default(),
        0,
        [5; 16],
        "fuzz".into(),
        HostCapture::default(),
    );
    s.require_auth(keys, NONCE);
    let mut dec = FrameDecoder::new();
    dec.set_max_payload(64 * 1024);
    dec.push(&stream);
    let mut now = base;
    let mut prepared = 0;
    let mut drain = |s: &mut ServerSession, dec: &mut FrameDecoder, now: Instant| {
        for _ in 0..64 {
            let mut any = false;
            while let Some(m) = s.poll_transmit() {
                any = true;
                if matches!(m, Msg::Accepted { .. } | Msg::Ready | Msg::Results { .. }) {
                    assert!(genuine, "{} sent without a proof", m.kind());
                }
            }
            while let Some(a) = s.poll_action() {
                any = true;
                match a {
                    ServerAction::Prepare(p) => {
                        assert!(genuine, "test admitted without a valid proof");
                        assert_eq!(p, spec);
                        prepared += 1;
                        dec.set_max_payload(wanperf_proto::frame::MAX_PAYLOAD);
                        s.handle_prepared(now, vec![]);
                        if mode & 2 == 2 {
                            for id in 0..p.connections() {
                                let _ = s.handle_stream(now, id);
                            }
                        }
                        if mode & 4 == 4 {
                            let _ = s.handle_stream(now, u32::from(mode >> 3));
                        }
                    }
                    ServerAction::Collect => {
                        s.queue_interval(SideInterval::default());
                        s.handle_local_report(SideReport::default());
                    }
                    _ => {}
                }
            }
            if !any {
                break;
            }
        }
        if !genuine {
            assert!(!s.is_admitted());
        }
    };
    for _ in 0..1000 {
        if s.is_finished() {
            break;
        }
        let at = stream.len() - dec.buffered();
        let ms = stream.get(at + 6..at + 8).map_or(0, |r| u16::from_be_bytes([r[0], r[1]]));
        let msg = match dec.next_msg() {
            Ok(Some(m)) => m,
            Ok(None) | Err(_) => break,
        };
        now += Duration::from_millis(u64::from(ms));
        if s.poll_timeout().is_some_and(|t| now >= t) {
            let _ = s.handle_timeout(now);
            drain(&mut s, &mut dec, now);
        }
        let _ = s.handle_msg(now, msg);
        drain(&mut s, &mut dec, now);
    }
    let _ = s.handle_closed();
    drain(&mut s, &mut dec, now);
    assert!(s.is_finished());
    assert!(prepared <= 1);
}

// --- One test per target. ---

#[test]
fn every_fuzz_target_has_a_corpus_and_a_replay() {
    let mut targets: Vec<String> = std::fs::read_dir(fuzz_dir().join("fuzz_targets"))
        .unwrap()
        .filter_map(|e| e.unwrap().path().file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    targets.sort();
    let mut known: Vec<String> = TARGETS.iter().map(|(t, _)| t.to_string()).collect();
    known.sort();
    assert_eq!(
        targets, known,
        "every fuzz target needs a committed corpus (fuzz/corpus/<target>/) and a replay here (TARGETS)"
    );
}

#[test]
fn corpus_control_frame() {
    replay("control_frame");
}

#[test]
fn corpus_data_hello() {
    replay("data_hello");
}

#[test]
fn corpus_udp_datagram() {
    replay("udp_datagram");
}

#[test]
fn corpus_ping_probe() {
    replay("ping_probe");
}

#[test]
fn corpus_study_toml() {
    replay("study_toml");
}

#[test]
fn corpus_import_iperf3() {
    replay("import_iperf3");
}

#[test]
fn corpus_import_ping() {
    replay("import_ping");
}

#[test]
fn corpus_units() {
    replay("units");
}

#[test]
fn corpus_auth_keys() {
    replay("auth_keys");
}

#[test]
fn corpus_server_handshake() {
    replay("server_handshake");
}

#[test]
fn corpus_topology_toml() {
    replay("topology_toml");
}

#[test]
fn corpus_iperf3_control() {
    replay("iperf3_control");
}

#[test]
fn corpus_copy_data() {
    replay("copy_data");
}

#[test]
fn corpus_flow_export() {
    replay("flow_export");
}

#[test]
fn corpus_stamp_packet() {
    replay("stamp_packet");
}

#[test]
fn corpus_owamp_control() {
    replay("owamp_control");
}

/// Writes the seeds made by the protocol's own encoders (run with `--ignored`).
#[test]
#[ignore]
fn write_encoder_seeds() {
    use wanperf_proto::msg::{
        CpuUsage, HostCapture, Msg, SideInterval, SideReport, StreamFinal, StreamSample, TcpInfo, TestSpec, UdpCounters,
    };
    let put = |target: &str, name: &str, bytes: &[u8]| {
        std::fs::write(fuzz_dir().join("corpus").join(target).join(format!("enc-{name}")), bytes).unwrap();
    };
    let mut udp = TestSpec::tcp(2, 5.0);
    udp.transport = wanperf_proto::msg::Transport::Udp;
    udp.rate_bps = Some(10_000_000);
    let report = SideReport {
        streams: vec![StreamFinal { id: 0, ..Default::default() }, StreamFinal { id: 1, ..Default::default() }],
        cpu: CpuUsage { user_s: 0.25, ..Default::default() },
        tcp_counters: [("TCPTimeouts".to_string(), 3)].into_iter().collect(),
        copy: None,
    };
    let msgs: Vec<(&str, Msg)> = vec![
        ("request_tcp", Msg::Request { software: "wanperf 0.1".into(), spec: TestSpec::tcp(4, 10.0) }),
        ("request_udp", Msg::Request { software: "wanperf 0.1".into(), spec: udp }),
        (
            "accepted",
            Msg::Accepted {
                cookie: "00112233445566778899aabbccddeeff".into(),
                software: "wanperf 0.1".into(),
                host: HostCapture { hostname: "server".into(), ..Default::default() },
                udp_ports: vec![5302, 5303],
                pace_bps: Some(25_000_000),
                quic_cert: None,
                data_port: None,
            },
        ),
        ("refused", Msg::Refused { reason: "too many streams".into() }),
        (
            "interval",
            Msg::Interval(SideInterval {
                index: 3,
                t_s: 4.0,
                last: false,
                streams: vec![
                    StreamSample { id: 0, bytes: 99, tcp: Some(TcpInfo::default()), udp: None },
                    StreamSample { id: 1, bytes: 7, tcp: None, udp: Some(UdpCounters::default()) },
                ],
            }),
        ),
        ("finish", Msg::Finish { report: report.clone() }),
        ("results", Msg::Results { report }),
        ("error", Msg::Error { message: "aborted".into() }),
    ];
    let mut session = Vec::new();
    for (name, m) in &msgs {
        put("control_frame", name, &encode(m));
        session.extend(encode(m));
    }
    put("control_frame", "session", &session);
    for (name, h) in [
        ("hello0", DataHello { cookie: *b"0123456789abcdef", stream: 0 }),
        ("hello7", DataHello { cookie: [0xa5; 16], stream: 7 }),
    ] {
        put("data_hello", name, &h.encode());
    }
    let mut flow = Vec::new();
    for seq in [0, 1, 2, 4, 3, 3, 5, UDP_FIN_SEQ] {
        let mut b = [0u8; UDP_HEADER_LEN];
        UdpHeader { token: 0x5157_0001, stream: 0, seq, send_ns: if seq == UDP_FIN_SEQ { 6 } else { seq * 1_000_000 } }
            .write(&mut b);
        flow.extend(b);
    }
    put("udp_datagram", "flow", &flow);
    let mut b = vec![0u8; 64];
    Probe { reply: false, short: false, seq: 9, client_tx_ns: 123, server_rx_ns: 0, server_tx_ns: 0 }.write(&mut b);
    put("ping_probe", "request64", &b);
    Probe { reply: true, short: false, seq: 9, client_tx_ns: 123, server_rx_ns: 456, server_tx_ns: 789 }.write(&mut b);
    put("ping_probe", "reply64", &b);
}
