//! Decoder tests on datagrams built here byte by byte.

use super::*;

const T0: u32 = 1_700_000_000;

/// src, dst, proto, sport, dport, packets, bytes.
type V5Rec = ([u8; 4], [u8; 4], u8, u16, u16, u32, u32);

fn v5(seq: u32, sampling: u16, flows: &[V5Rec]) -> Vec<u8> {
    let mut p = Vec::new();
    p.extend(5u16.to_be_bytes());
    p.extend((flows.len() as u16).to_be_bytes());
    p.extend(100_000u32.to_be_bytes()); // uptime 100 s
    p.extend(T0.to_be_bytes());
    p.extend(0u32.to_be_bytes());
    p.extend(seq.to_be_bytes());
    p.extend([0u8, 0]);
    p.extend(sampling.to_be_bytes());
    for &(s, d, proto, sp, dp, pk, by) in flows {
        p.extend(s);
        p.extend(d);
        p.extend([0u8; 4]);
        p.extend([0u8; 4]); // in/out if
        p.extend(pk.to_be_bytes());
        p.extend(by.to_be_bytes());
        p.extend(90_000u32.to_be_bytes()); // first: 10 s before export
        p.extend(99_000u32.to_be_bytes()); // last: 1 s before
        p.extend(sp.to_be_bytes());
        p.extend(dp.to_be_bytes());
        p.extend([0u8, 0x18, proto, 0]);
        p.extend([0u8; 8]);
    }
    p
}

/// A v9 or IPFIX message: header then sets.
fn msg(version: u16, seq: u32, domain: u32, sets: &[Vec<u8>]) -> Vec<u8> {
    let body: Vec<u8> = sets.concat();
    let mut p = Vec::new();
    p.extend(version.to_be_bytes());
    if version == 9 {
        p.extend((sets.len() as u16).to_be_bytes());
        p.extend(100_000u32.to_be_bytes());
        p.extend(T0.to_be_bytes());
        p.extend(seq.to_be_bytes());
        p.extend(domain.to_be_bytes());
    } else {
        p.extend(((16 + body.len()) as u16).to_be_bytes());
        p.extend(T0.to_be_bytes());
        p.extend(seq.to_be_bytes());
        p.extend(domain.to_be_bytes());
    }
    p.extend(body);
    p
}

fn set(id: u16, body: &[u8]) -> Vec<u8> {
    let mut p = Vec::new();
    p.extend(id.to_be_bytes());
    p.extend(((4 + body.len()) as u16).to_be_bytes());
    p.extend(body);
    p
}

/// A template set (v9: id 0, IPFIX: id 2) of one template with (field, length) pairs.
fn template(version: u16, id: u16, fields: &[(u16, u16)]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(id.to_be_bytes());
    b.extend((fields.len() as u16).to_be_bytes());
    for &(f, l) in fields {
        b.extend(f.to_be_bytes());
        b.extend(l.to_be_bytes());
    }
    set(if version == 9 { 0 } else { 2 }, &b)
}

/// src, dst, proto, sport, dport, bytes (4), packets (4), start ms (8), end ms (8) for IPFIX.
const IPFIX_FIELDS: &[(u16, u16)] = &[(8, 4), (12, 4), (4, 1), (7, 2), (11, 2), (1, 4), (2, 4), (152, 8), (153, 8)];

fn ipfix_rec(s: [u8; 4], d: [u8; 4], proto: u8, sp: u16, dp: u16, bytes: u32, pkts: u32) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(s);
    b.extend(d);
    b.push(proto);
    b.extend(sp.to_be_bytes());
    b.extend(dp.to_be_bytes());
    b.extend(bytes.to_be_bytes());
    b.extend(pkts.to_be_bytes());
    b.extend((u64::from(T0) * 1000 - 5000).to_be_bytes());
    b.extend((u64::from(T0) * 1000 - 1000).to_be_bytes());
    b
}

/// v9: src, dst, proto, sport, dport, IN_BYTES, IN_PKTS, FIRST_SWITCHED, LAST_SWITCHED.
const V9_FIELDS: &[(u16, u16)] = &[(8, 4), (12, 4), (4, 1), (7, 2), (11, 2), (1, 4), (2, 4), (22, 4), (21, 4)];

fn v9_rec(s: [u8; 4], d: [u8; 4], bytes: u32) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(s);
    b.extend(d);
    b.push(6);
    b.extend(40000u16.to_be_bytes());
    b.extend(5201u16.to_be_bytes());
    b.extend(bytes.to_be_bytes());
    b.extend((bytes / 1000).to_be_bytes());
    b.extend(95_000u32.to_be_bytes());
    b.extend(99_000u32.to_be_bytes());
    b
}

fn feed(d: &mut Decoder, from: [u8; 4], p: &[u8]) -> Vec<Flow> {
    let mut f = Vec::new();
    let mut c = Vec::new();
    d.feed(from.into(), u64::from(T0) * 1000 + 10, p, &mut f, &mut c);
    f
}

const R1: [u8; 4] = [198, 18, 0, 1];
const R2: [u8; 4] = [198, 18, 0, 2];

#[test]
fn v5_flows_times_sampling_and_sequence_loss() {
    let mut d = Decoder::new();
    let f = feed(&mut d, R1, &v5(0, 0, &[([10, 0, 0, 1], [10, 0, 0, 2], 6, 40000, 22, 10, 15_000)]));
    assert_eq!(f.len(), 1);
    assert_eq!((f[0].bytes, f[0].packets, f[0].sport, f[0].dport, f[0].proto), (15_000, 10, 40000, 22, 6));
    let t0 = u64::from(T0) * 1000;
    assert_eq!((f[0].start_ms, f[0].end_ms), (t0 - 10_000, t0 - 1_000));
    // Sequence 1 expected; 5 arrives: 4 flows lost. Sampling mode 1, interval 100.
    let f = feed(&mut d, R1, &v5(5, 0x4000 | 100, &[([10, 0, 0, 1], [10, 0, 0, 3], 17, 1, 2, 1, 100)]));
    assert_eq!(f[0].sampling, 100);
    assert_eq!(f[0].est_bytes(), 10_000.0);
    let s = &d.stats()[0];
    assert_eq!((s.protocol, s.records, s.seq.expected, s.seq.lost), (Protocol::V5, 2, 6, 4));
}

#[test]
fn v9_data_before_its_template_is_decoded_when_the_template_comes() {
    let mut d = Decoder::new();
    let data =
        set(256, &[v9_rec([10, 0, 0, 1], [10, 0, 0, 2], 5000), v9_rec([10, 0, 0, 3], [10, 0, 0, 4], 7000)].concat());
    assert!(feed(&mut d, R1, &msg(9, 0, 7, std::slice::from_ref(&data))).is_empty());
    assert_eq!((d.stats()[0].records, d.stats()[0].awaiting_template), (0, 1));
    let f = feed(&mut d, R1, &msg(9, 1, 7, &[template(9, 256, V9_FIELDS)]));
    let mut bytes: Vec<u64> = f.iter().map(|x| x.bytes).collect();
    bytes.sort();
    assert_eq!(bytes, [5000, 7000], "held data decoded when the template came");
    let f = feed(&mut d, R1, &msg(9, 2, 7, &[data]));
    assert_eq!(f.len(), 2);
    let t0 = u64::from(T0) * 1000;
    assert_eq!((f[0].start_ms, f[0].end_ms, f[0].domain), (t0 - 5_000, t0 - 1_000, 7));
    assert_eq!(d.stats()[0].seq.lost, 0);
}

#[test]
fn templates_are_scoped_by_exporter_and_domain_not_shared() {
    let mut d = Decoder::new();
    // Two exporters, same template id 300, different layouts.
    feed(&mut d, R1, &msg(10, 0, 1, &[template(10, 300, IPFIX_FIELDS)]));
    let short: &[(u16, u16)] = &[(8, 4), (12, 4), (4, 1), (1, 8)];
    feed(&mut d, R2, &msg(10, 0, 1, &[template(10, 300, short)]));
    let a =
        feed(&mut d, R1, &msg(10, 0, 1, &[set(300, &ipfix_rec([10, 1, 0, 1], [10, 2, 0, 1], 6, 1000, 80, 4242, 3))]));
    let mut rb = Vec::new();
    rb.extend([10u8, 3, 0, 1, 10, 4, 0, 1, 17]);
    rb.extend(999u64.to_be_bytes());
    let b = feed(&mut d, R2, &msg(10, 0, 1, &[set(300, &rb)]));
    assert_eq!((a.len(), b.len()), (1, 1));
    assert_eq!((a[0].bytes, a[0].dport, a[0].packets), (4242, 80, 3));
    assert_eq!((b[0].bytes, b[0].proto, b[0].dport), (999, 17, 0));
    // Same exporter, another domain: its own template space.
    let c = feed(&mut d, R1, &msg(10, 0, 2, &[set(300, &ipfix_rec([10, 1, 0, 1], [10, 2, 0, 1], 6, 1, 2, 1, 1))]));
    assert!(c.is_empty(), "domain 2 has no template 300");
    // And the port an exporter sends from does not matter: the scope is its address.
    let mut f = Vec::new();
    let mut cs = Vec::new();
    d.feed(
        std::net::IpAddr::V6(std::net::Ipv4Addr::from(R1).to_ipv6_mapped()),
        0,
        &msg(10, 1, 1, &[set(300, &ipfix_rec([10, 1, 0, 1], [10, 2, 0, 1], 6, 1, 2, 77, 1))]),
        &mut f,
        &mut cs,
    );
    assert_eq!(f.len(), 1, "an IPv4-mapped source is the same exporter");
}

#[test]
fn ipfix_sequence_counts_records_and_options_give_the_sampling_rate() {
    let mut d = Decoder::new();
    // Options template 400: scope (observation domain 149, 4) + samplingPacketInterval 305 +
    // samplingPacketSpace 306: 1 in 1+99 packets.
    let mut ot = Vec::new();
    ot.extend(400u16.to_be_bytes());
    ot.extend(3u16.to_be_bytes());
    ot.extend(1u16.to_be_bytes());
    for (f, l) in [(149u16, 4u16), (305, 4), (306, 4)] {
        ot.extend(f.to_be_bytes());
        ot.extend(l.to_be_bytes());
    }
    let mut od = Vec::new();
    od.extend(1u32.to_be_bytes());
    od.extend(1u32.to_be_bytes());
    od.extend(99u32.to_be_bytes());
    feed(&mut d, R1, &msg(10, 0, 1, &[template(10, 256, IPFIX_FIELDS), set(3, &ot)]));
    feed(&mut d, R1, &msg(10, 0, 1, &[set(400, &od)]));
    let recs = [
        ipfix_rec([10, 1, 0, 1], [10, 2, 0, 1], 6, 1, 2, 1500, 1),
        ipfix_rec([10, 1, 0, 2], [10, 2, 0, 1], 6, 1, 2, 1500, 1),
    ]
    .concat();
    let f = feed(&mut d, R1, &msg(10, 1, 1, &[set(256, &recs)]));
    assert_eq!(f.len(), 2);
    assert_eq!(f[0].sampling, 100);
    // Next message should say 3; it says 13: 10 records lost.
    feed(&mut d, R1, &msg(10, 13, 1, &[set(256, &recs)]));
    let s = &d.stats()[0];
    assert_eq!((s.protocol, s.sampling, s.seq.lost), (Protocol::Ipfix, 100, 10));
}

#[test]
fn garbage_is_counted_never_fatal() {
    let mut d = Decoder::new();
    assert!(feed(&mut d, R1, &[0xff, 0xff, 1, 2, 3]).is_empty());
    assert_eq!(d.unknown, 1);
    // A v9 header claiming a set longer than the datagram.
    let mut bad = msg(9, 0, 1, &[template(9, 256, V9_FIELDS)]);
    bad.extend(set(256, &[1, 2, 3]));
    let n = bad.len();
    bad[n - 5] = 0xff;
    feed(&mut d, R1, &bad);
    let truncated = &v5(0, 0, &[([1, 1, 1, 1], [2, 2, 2, 2], 6, 1, 2, 3, 4)])[..40];
    feed(&mut d, R2, truncated);
    let total: u64 = d.stats().iter().map(|s| s.malformed).sum();
    assert!(total >= 2, "{:?}", d.stats());
}

/// An sFlow datagram: one flow sample (rate 512) with a raw Ethernet/IPv4/UDP header, one
/// counter sample.
fn sflow_datagram() -> Vec<u8> {
    // One flow sample (rate 512) with a raw Ethernet/IPv4/UDP header, one counter sample.
    let mut eth = Vec::new();
    eth.extend([0u8; 12]);
    eth.extend(0x0800u16.to_be_bytes());
    let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0];
    ip[2..4].copy_from_slice(&1028u16.to_be_bytes());
    ip.extend([10, 0, 0, 1, 10, 0, 0, 2]);
    let udp = [0x1b, 0x59, 0x1b, 0x58, 0x04, 0x00, 0, 0]; // 7001 → 7000
    let mut hdr = [eth, ip, udp.to_vec()].concat();
    while hdr.len() % 4 != 0 {
        hdr.push(0);
    }
    let mut rec = Vec::new();
    rec.extend(1u32.to_be_bytes()); // ethernet
    rec.extend(1046u32.to_be_bytes()); // frame length
    rec.extend(4u32.to_be_bytes()); // stripped
    rec.extend(42u32.to_be_bytes()); // header length
    rec.extend(&hdr);
    let mut fs = Vec::new();
    for v in [1u32, 3, 512, 5120, 0, 1, 2, 1] {
        fs.extend(v.to_be_bytes());
    }
    fs.extend(1u32.to_be_bytes()); // record format 1
    fs.extend((rec.len() as u32).to_be_bytes());
    fs.extend(&rec);
    let mut gi = Vec::new();
    gi.extend(3u32.to_be_bytes()); // ifIndex
    gi.extend(6u32.to_be_bytes());
    gi.extend(1_000_000_000u64.to_be_bytes());
    gi.extend(1u32.to_be_bytes());
    gi.extend(3u32.to_be_bytes());
    gi.extend(123_456_789u64.to_be_bytes()); // in octets
    for v in [1u32, 0, 0, 2, 3, 0] {
        gi.extend(v.to_be_bytes());
    }
    gi.extend(987_654_321u64.to_be_bytes()); // out octets
    for v in [1u32, 0, 0, 4, 5, 0] {
        gi.extend(v.to_be_bytes());
    }
    let mut cs = Vec::new();
    for v in [1u32, 3, 1] {
        cs.extend(v.to_be_bytes());
    }
    cs.extend(1u32.to_be_bytes());
    cs.extend((gi.len() as u32).to_be_bytes());
    cs.extend(&gi);
    let mut p = Vec::new();
    for v in [5u32, 1] {
        p.extend(v.to_be_bytes());
    }
    p.extend(R1);
    for v in [0u32, 42, 1000, 2] {
        p.extend(v.to_be_bytes());
    }
    p.extend(1u32.to_be_bytes());
    p.extend((fs.len() as u32).to_be_bytes());
    p.extend(&fs);
    p.extend(2u32.to_be_bytes());
    p.extend((cs.len() as u32).to_be_bytes());
    p.extend(&cs);
    p
}

#[test]
fn sflow_flow_and_counter_samples() {
    let mut p = sflow_datagram();
    let mut d = Decoder::new();
    let mut f = Vec::new();
    let mut c = Vec::new();
    assert_eq!(d.feed(R1.into(), 5, &p, &mut f, &mut c), 1);
    assert_eq!((f[0].sport, f[0].dport, f[0].proto, f[0].bytes, f[0].sampling), (7001, 7000, 17, 1028, 512));
    assert_eq!(c.len(), 1);
    assert_eq!((c[0].in_octets, c[0].out_octets, c[0].in_errors, c[0].out_drops), (123_456_789, 987_654_321, 3, 4));
    // Sequence 42 then 45: two datagrams lost.
    p[16..20].copy_from_slice(&45u32.to_be_bytes());
    d.feed(R1.into(), 6, &p, &mut f, &mut c);
    let s = &d.stats()[0];
    assert_eq!((s.protocol, s.seq.lost, s.sampling), (Protocol::Sflow, 2, 512));
}

/// Writes the fuzz target's seed corpus from these builders (run with `--ignored`).
#[test]
#[ignore]
fn write_fuzz_seeds() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/flow_export");
    std::fs::create_dir_all(&dir).unwrap();
    let put = |name: &str, b: &[u8]| std::fs::write(dir.join(name), b).unwrap();
    put("v5", &v5(7, 0x4000 | 10, &[([10, 0, 0, 1], [10, 0, 0, 2], 6, 40000, 22, 10, 15_000)]));
    put(
        "v9-template-and-data",
        &msg(9, 0, 7, &[template(9, 256, V9_FIELDS), set(256, &v9_rec([10, 0, 0, 1], [10, 0, 0, 2], 5000))]),
    );
    put(
        "ipfix-template-and-data",
        &msg(
            10,
            0,
            1,
            &[
                template(10, 300, IPFIX_FIELDS),
                set(300, &ipfix_rec([10, 1, 0, 1], [10, 2, 0, 1], 6, 1000, 80, 4242, 3)),
            ],
        ),
    );
    put("sflow", &sflow_datagram());
}

#[test]
fn uptime_spans_allow_packets_after_the_header_second_and_the_counter_wrap() {
    // Header at 1000.000 s with uptime 5000 ms; a flow from uptime 4500 to 5600 (600 ms
    // after the header's whole second, as an exporter that stamps headers by the second has).
    assert_eq!(super::uptime_span(1_000_000, 5000, 4500, 5600), (999_500, 1_000_600));
    // The counter wrapped between the first packet and the header.
    assert_eq!(super::uptime_span(1_000_000, 100, u32::MAX - 899, 50), (999_000, 999_950));
}

/// An IPFIX template set whose fields may carry enterprise numbers: (id, length, enterprise).
fn ipfix_template_pen(id: u16, fields: &[(u16, u16, Option<u32>)]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(id.to_be_bytes());
    b.extend((fields.len() as u16).to_be_bytes());
    for &(f, l, pen) in fields {
        b.extend((f | if pen.is_some() { 0x8000 } else { 0 }).to_be_bytes());
        b.extend(l.to_be_bytes());
        if let Some(p) = pen {
            b.extend(p.to_be_bytes());
        }
    }
    set(2, &b)
}

/// A variable-length value: one length byte, or 255 and two.
fn varlen(v: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    if v.len() < 255 {
        b.push(v.len() as u8);
    } else {
        b.push(255);
        b.extend((v.len() as u16).to_be_bytes());
    }
    b.extend(v);
    b
}

#[test]
fn ipfix_variable_length_enterprise_and_reduced_size_fields() {
    let mut d = Decoder::new();
    // src, an enterprise field of 6 bytes, interfaceName (variable), dst, proto, octets in 3
    // bytes and packets in 2 (reduced-size encoding), flowStartMicroseconds and End (NTP).
    let fields = [
        (8, 4, None),
        (100, 6, Some(29305)),
        (82, 0xffff, None),
        (12, 4, None),
        (4, 1, None),
        (1, 3, None),
        (2, 2, None),
        (154, 8, None),
        (155, 8, None),
    ];
    let ntp = |unix_ms: u64| {
        let secs = unix_ms / 1000 + 2_208_988_800;
        let frac = ((unix_ms % 1000) << 32) / 1000 + 1; // a hair past the millisecond
        (secs << 32 | frac).to_be_bytes()
    };
    let t0 = u64::from(T0) * 1000;
    let rec = |src: [u8; 4], name: &[u8], bytes: u32| {
        let mut r = Vec::new();
        r.extend(src);
        r.extend([0xee; 6]);
        r.extend(varlen(name));
        r.extend([10, 9, 9, 9, 17]);
        r.extend(&bytes.to_be_bytes()[1..]);
        r.extend(7u16.to_be_bytes());
        r.extend(ntp(t0 - 2_500));
        r.extend(ntp(t0 - 500));
        r
    };
    let body = [rec([10, 0, 0, 1], b"eth0", 70_000), rec([10, 0, 0, 2], &[b'x'; 300], 1_000_000)].concat();
    let f = feed(&mut d, R1, &msg(10, 0, 5, &[ipfix_template_pen(256, &fields), set(256, &body)]));
    assert_eq!(f.len(), 2, "{:?}", d.stats());
    assert_eq!((f[0].src.to_string(), f[0].dst.to_string(), f[0].proto), ("10.0.0.1".into(), "10.9.9.9".into(), 17));
    assert_eq!((f[0].bytes, f[0].packets, f[1].bytes, f[1].src.to_string()), (70_000, 7, 1_000_000, "10.0.0.2".into()));
    assert_eq!((f[0].start_ms, f[0].end_ms), (t0 - 2_500, t0 - 500), "NTP times are from 1900");
    let s = &d.stats()[0];
    assert_eq!((s.malformed, s.seq.expected), (0, 2));
}

#[test]
fn ipfix_withdrawn_templates_are_forgotten_and_v9_options_give_the_rate() {
    let mut d = Decoder::new();
    let rec = ipfix_rec([10, 1, 0, 1], [10, 2, 0, 1], 6, 1000, 80, 4242, 3);
    assert_eq!(feed(&mut d, R1, &msg(10, 0, 1, &[template(10, 300, IPFIX_FIELDS), set(300, &rec)])).len(), 1);
    // Withdraw template 300: its data now waits; a new template releases it.
    let withdraw = set(2, &[300u16.to_be_bytes(), 0u16.to_be_bytes()].concat());
    assert!(feed(&mut d, R1, &msg(10, 1, 1, &[withdraw, set(300, &rec)])).is_empty());
    assert_eq!(d.stats()[0].awaiting_template, 1);
    assert_eq!(feed(&mut d, R1, &msg(10, 2, 1, &[template(10, 300, IPFIX_FIELDS)])).len(), 1);
    // "Withdraw all data templates" (template id 2).
    let all = set(2, &[2u16.to_be_bytes(), 0u16.to_be_bytes()].concat());
    assert!(feed(&mut d, R1, &msg(10, 3, 1, &[all, set(300, &rec)])).is_empty());

    // NetFlow v9 options template (set 1): scope system (1, 4 bytes), SAMPLING_INTERVAL (34).
    let mut ot = Vec::new();
    for x in [257u16, 4, 4, 1, 4, 34, 4] {
        ot.extend(x.to_be_bytes());
    }
    ot.extend([0, 0]); // padding
    let od = [0u32.to_be_bytes(), 50u32.to_be_bytes()].concat();
    let data = set(256, &v9_rec([10, 0, 0, 1], [10, 0, 0, 2], 5000));
    let f = feed(&mut d, R2, &msg(9, 0, 3, &[template(9, 256, V9_FIELDS), set(1, &ot), set(257, &od), data]));
    assert_eq!(f.len(), 1);
    assert_eq!((f[0].sampling, f[0].est_bytes()), (50, 250_000.0));
    assert!(d.stats().iter().all(|s| s.malformed == 0), "{:?}", d.stats());
}

#[test]
fn templates_expire_and_held_data_is_bounded() {
    let mut d = Decoder::new();
    let (mut f, mut c) = (Vec::new(), Vec::new());
    let t0 = u64::from(T0) * 1000;
    let data = set(256, &v9_rec([10, 0, 0, 1], [10, 0, 0, 2], 5000));
    d.feed(R1.into(), t0, &msg(9, 0, 1, &[template(9, 256, V9_FIELDS)]), &mut f, &mut c);
    d.feed(R1.into(), t0 + TEMPLATE_TTL_MS - 1, &msg(9, 1, 1, std::slice::from_ref(&data)), &mut f, &mut c);
    assert_eq!(f.len(), 1, "a template within its lifetime");
    d.feed(R1.into(), t0 + TEMPLATE_TTL_MS, &msg(9, 2, 1, std::slice::from_ref(&data)), &mut f, &mut c);
    assert_eq!(f.len(), 1, "a template not refreshed for its lifetime is gone");
    // Far more data sets than are held: the newest MAX_HELD_SETS are decoded when the
    // template comes (one of them the set above).
    f.clear();
    for i in 0..netflow::MAX_HELD_SETS + 50 {
        let data = set(256, &v9_rec([10, 0, 0, 1], [10, 0, 0, 2], 1000 + i as u32));
        d.feed(R1.into(), t0 + TEMPLATE_TTL_MS, &msg(9, 3 + i as u32, 1, &[data]), &mut f, &mut c);
    }
    assert!(f.is_empty());
    d.feed(R1.into(), t0 + TEMPLATE_TTL_MS, &msg(9, 999, 1, &[template(9, 256, V9_FIELDS)]), &mut f, &mut c);
    assert_eq!(f.len(), netflow::MAX_HELD_SETS);
    assert_eq!(f.last().unwrap().bytes, 1000 + netflow::MAX_HELD_SETS as u64 + 49);
}

#[test]
fn a_flood_of_exporters_keeps_the_scope_table_bounded() {
    let mut d = Decoder::new();
    let (mut f, mut c) = (Vec::new(), Vec::new());
    let p = msg(9, 0, 1, &[template(9, 256, V9_FIELDS), set(256, &v9_rec([10, 0, 0, 1], [10, 0, 0, 2], 5000))]);
    let n = MAX_SCOPES * 3;
    for i in 0..n {
        let from: IpAddr = std::net::Ipv4Addr::from(0xc612_0000 + i as u32).into();
        d.feed(from, 1_000 + i as u64, &p, &mut f, &mut c);
    }
    assert_eq!(f.len(), n, "every exporter's datagram decoded");
    assert!(d.netflow.scopes() <= MAX_SCOPES, "{} scopes", d.netflow.scopes());
}

/// A deterministic generator for the differential test.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

type Tuple = (IpAddr, IpAddr, u8, u16, u16, u64, u64);

/// netflow_parser's reading of the same datagrams (an independent implementation): every data
/// record's addresses, protocol, ports, octets and packets.
fn oracle(datagrams: &[Vec<u8>]) -> Vec<Tuple> {
    use netflow_parser::variable_versions::field_value::FieldValue;
    use netflow_parser::variable_versions::ipfix::lookup::{IANAIPFixField, IPFixField};
    use netflow_parser::variable_versions::ipfix::FlowSetBody as I;
    use netflow_parser::variable_versions::v9::FlowSetBody as V;
    use netflow_parser::NetflowPacket;
    let mut p = netflow_parser::NetflowParser::builder()
        .with_pending_flows(netflow_parser::PendingFlowsConfig::new(256))
        .build()
        .unwrap();
    let mut out = Vec::new();
    let mut take = |fields: &mut dyn Iterator<Item = (u16, &FieldValue)>| {
        let (mut s, mut d, mut pr, mut sp, mut dp, mut by, mut pk) = (None, None, 0, 0, 0, 0, 0);
        for (id, v) in fields {
            match id {
                8 | 27 => s = IpAddr::try_from(v).ok(),
                12 | 28 => d = IpAddr::try_from(v).ok(),
                4 => pr = v.as_u8().unwrap(),
                7 => sp = v.as_u16().unwrap(),
                11 => dp = v.as_u16().unwrap(),
                1 => by = v.as_u64().unwrap(),
                2 => pk = v.as_u64().unwrap(),
                _ => {}
            }
        }
        out.push((s.unwrap(), d.unwrap(), pr, sp, dp, by, pk));
    };
    for dg in datagrams {
        let r = p.parse_bytes(dg);
        assert!(r.error.is_none(), "netflow_parser: {:?}", r.error);
        for pkt in &r.packets {
            match pkt {
                NetflowPacket::V9(v9) => {
                    for set in &v9.flowsets {
                        if let V::Data(data) = &set.body {
                            for rec in &data.fields {
                                take(&mut rec.iter().map(|(f, v)| (u16::from(*f), v)));
                            }
                        }
                    }
                }
                NetflowPacket::IPFix(ipfix) => {
                    for set in &ipfix.flowsets {
                        if let I::Data(data) = &set.body {
                            for rec in &data.fields {
                                take(&mut rec.iter().filter_map(|(f, v)| {
                                    match f {
                                        IPFixField::IANA(i) => [8u16, 27, 12, 28, 4, 7, 11, 1, 2]
                                            .into_iter()
                                            .find(|&id| IANAIPFixField::from(id) == *i)
                                            .map(|id| (id, v)),
                                        _ => None,
                                    }
                                }));
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }
    out
}

#[test]
fn random_templates_and_records_read_the_same_as_netflow_parser() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut total = 0;
    for case in 0..300 {
        let version = if case % 2 == 0 { 9 } else { 10 };
        let v6 = rng.below(4) == 0;
        // The fields a flow needs, at standard lengths, in a random order, between fillers
        // (tos, tcp flags, interfaces, next hop, uptimes) of the lengths exporters use.
        let mut fields: Vec<(u16, u16)> = vec![
            if v6 { (27, 16) } else { (8, 4) },
            if v6 { (28, 16) } else { (12, 4) },
            (4, 1),
            (7, 2),
            (11, 2),
            (1, if rng.below(2) == 0 { 4 } else { 8 }),
            (2, if rng.below(2) == 0 { 4 } else { 8 }),
        ];
        for filler in [(5u16, 1u16), (6, 1), (10, 4), (14, 2), (15, 4), (21, 4), (22, 4), (61, 1)] {
            if rng.below(2) == 0 {
                fields.push(filler);
            }
        }
        for i in (1..fields.len()).rev() {
            fields.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let tid = 256 + rng.below(1000) as u16;
        let n = 1 + rng.below(20) as usize;
        let mut body = Vec::new();
        for _ in 0..n {
            for &(_, len) in &fields {
                let v = rng.next().to_be_bytes();
                let mut x: Vec<u8> = Vec::new();
                while x.len() < usize::from(len) {
                    x.extend(&v[..(usize::from(len) - x.len()).min(8)]);
                }
                body.extend(x);
            }
        }
        // Template and data in one message, or data first (held until the template comes).
        let datagrams = if rng.below(3) == 0 {
            vec![msg(version, 0, 7, &[set(tid, &body)]), msg(version, 1, 7, &[template(version, tid, &fields)])]
        } else {
            vec![msg(version, 0, 7, &[template(version, tid, &fields), set(tid, &body)])]
        };
        let want = oracle(&datagrams);
        let mut d = Decoder::new();
        let mut got = Vec::new();
        for dg in &datagrams {
            for f in feed(&mut d, R1, dg) {
                got.push((f.src, f.dst, f.proto, f.sport, f.dport, f.bytes, f.packets));
            }
        }
        // ICMP ports are type × 256 + code in wanperf; compare the rest.
        let norm = |v: Vec<Tuple>| -> Vec<Tuple> { v.into_iter().filter(|t| t.2 != 1 && t.2 != 58).collect() };
        assert_eq!(want.len(), n, "case {case}: the oracle read every record");
        assert_eq!(norm(got), norm(want), "case {case}: v{version} fields {fields:?}");
        total += n;
    }
    assert!(total > 1000);
}
