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
