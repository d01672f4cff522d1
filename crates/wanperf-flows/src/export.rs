//! The other side of the wire: a flow meter and a NetFlow v9 / IPFIX encoder, for exporters
//! that see every packet (the emulator's links). Pure: packets and the time are passed in,
//! datagrams come out.
//!
//! [`Meter`] keys packets by source, destination, protocol, ports and DSCP/ECN byte (ICMP's
//! type and code in the destination port, as NetFlow exporters do), counts packets and IP
//! bytes exactly, and ends a record on the idle timeout, the active timeout, a full cache or
//! the end of the run. [`Writer`] puts records into messages of at most `mtu` bytes, one
//! observation domain (v9 source id) at a time, with the domain's sequence numbers (IPFIX:
//! data records sent before; v9: messages sent before) and the templates in the first message
//! and again every [`TEMPLATE_EVERY`] messages or [`TEMPLATE_REFRESH_MS`], as exporting over
//! UDP requires (RFC 7011 §8.4, RFC 3954 §9). The wire format is written by `netflow_parser`,
//! the crate that also decodes it.

use netflow_parser::variable_versions::field_value::{DataNumber, FieldValue};
use netflow_parser::variable_versions::ipfix;
use netflow_parser::variable_versions::ipfix::lookup::{IANAIPFixField, IPFixField};
use netflow_parser::variable_versions::v9;
use netflow_parser::variable_versions::v9::lookup::V9Field;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Templates are resent after this many messages of a domain...
pub const TEMPLATE_EVERY: u64 = 20;
/// ... or after this long, whichever comes first.
pub const TEMPLATE_REFRESH_MS: u64 = 10_000;

/// What identifies a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct FlowKey {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// IP protocol (IPv6: the first next header).
    pub proto: u8,
    /// Source port (TCP, UDP, SCTP; else 0).
    pub sport: u16,
    /// Destination port; ICMP type × 256 + code.
    pub dport: u16,
    /// The IPv4 TOS / IPv6 traffic class byte.
    pub tos: u8,
}

/// The key of an IPv4 or IPv6 packet (None for anything else, or a truncated header).
pub fn key_of(p: &[u8]) -> Option<FlowKey> {
    let first = *p.first()?;
    let (src, dst, proto, tos, l4): (IpAddr, IpAddr, u8, u8, Option<&[u8]>) = match first >> 4 {
        4 if p.len() >= 20 => {
            let ihl = usize::from(first & 0x0f) * 4;
            let frag_off = u16::from_be_bytes([p[6], p[7]]) & 0x1fff;
            let src = Ipv4Addr::new(p[12], p[13], p[14], p[15]);
            let dst = Ipv4Addr::new(p[16], p[17], p[18], p[19]);
            (src.into(), dst.into(), p[9], p[1], if frag_off == 0 { p.get(ihl..) } else { None })
        }
        6 if p.len() >= 40 => {
            let src: [u8; 16] = p[8..24].try_into().ok()?;
            let dst: [u8; 16] = p[24..40].try_into().ok()?;
            let tc = ((p[0] & 0x0f) << 4) | (p[1] >> 4);
            (Ipv6Addr::from(src).into(), Ipv6Addr::from(dst).into(), p[6], tc, p.get(40..))
        }
        _ => return None,
    };
    let (sport, dport) = match (proto, l4) {
        (6 | 17 | 132, Some(l)) if l.len() >= 4 => (u16::from_be_bytes([l[0], l[1]]), u16::from_be_bytes([l[2], l[3]])),
        (1 | 58, Some(l)) if l.len() >= 2 => (0, u16::from_be_bytes([l[0], l[1]])),
        _ => (0, 0),
    };
    Some(FlowKey { src, dst, proto, sport, dport, tos })
}

/// Why a record ended (IPFIX flowEndReason, RFC 5102).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EndReason {
    /// No packet for the idle timeout.
    Idle = 1,
    /// Open for the active timeout.
    Active = 2,
    /// The meter stopped (end of the run).
    Forced = 4,
    /// The cache was full.
    LackOfResources = 5,
}

/// One finished flow record; times are the meter's (nanoseconds from its start).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The flow.
    pub key: FlowKey,
    /// Packets.
    pub packets: u64,
    /// IP bytes (headers and payload, no link layer).
    pub bytes: u64,
    /// First packet.
    pub first_ns: u64,
    /// Last packet.
    pub last_ns: u64,
    /// Why it ended.
    pub reason: EndReason,
}

#[derive(Debug, Clone, Copy)]
struct Counts {
    packets: u64,
    bytes: u64,
    first_ns: u64,
    last_ns: u64,
}

/// A flow cache in virtual time.
#[derive(Debug)]
pub struct Meter {
    active_ns: u64,
    idle_ns: u64,
    max_flows: usize,
    flows: HashMap<FlowKey, Counts>,
    non_ip: (u64, u64),
}

impl Meter {
    /// A meter with these timeouts and at most `max_flows` open records.
    pub fn new(active_ns: u64, idle_ns: u64, max_flows: usize) -> Self {
        Meter { active_ns, idle_ns, max_flows: max_flows.max(1), flows: HashMap::new(), non_ip: (0, 0) }
    }

    /// Counts a packet (`ip`: its IP header onwards) that stands for `packets` packets of
    /// `bytes` IP bytes in all (a segmentation-offload packet stands for several). A full
    /// cache ends every open record into `out` first.
    pub fn observe(&mut self, now_ns: u64, ip: &[u8], bytes: u64, packets: u64, out: &mut Vec<Record>) {
        let Some(key) = key_of(ip) else {
            self.non_ip.0 += packets;
            self.non_ip.1 += bytes;
            return;
        };
        if !self.flows.contains_key(&key) && self.flows.len() >= self.max_flows {
            self.drain(EndReason::LackOfResources, out);
        }
        let c = self.flows.entry(key).or_insert(Counts { packets: 0, bytes: 0, first_ns: now_ns, last_ns: now_ns });
        c.packets += packets;
        c.bytes += bytes;
        c.last_ns = now_ns;
    }

    /// Ends the records whose idle or active timeout has passed by `now_ns`.
    pub fn expire(&mut self, now_ns: u64, out: &mut Vec<Record>) {
        let (active, idle) = (self.active_ns, self.idle_ns);
        let start = out.len();
        self.flows.retain(|k, c| {
            let reason = if now_ns.saturating_sub(c.last_ns) >= idle {
                EndReason::Idle
            } else if now_ns.saturating_sub(c.first_ns) >= active {
                EndReason::Active
            } else {
                return true;
            };
            out.push(record(*k, c, reason));
            false
        });
        out[start..].sort_by_key(|r| (r.first_ns, r.key));
    }

    /// Ends every open record (the meter stops).
    pub fn flush(&mut self, out: &mut Vec<Record>) {
        self.drain(EndReason::Forced, out);
    }

    fn drain(&mut self, reason: EndReason, out: &mut Vec<Record>) {
        let start = out.len();
        out.extend(self.flows.drain().map(|(k, c)| record(k, &c, reason)));
        out[start..].sort_by_key(|r| (r.first_ns, r.key));
    }

    /// Open records.
    pub fn len(&self) -> usize {
        self.flows.len()
    }

    /// No open record.
    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    /// Packets and bytes that were not IP (ARP on a veth link): counted, not exported.
    pub fn non_ip(&self) -> (u64, u64) {
        self.non_ip
    }
}

fn record(key: FlowKey, c: &Counts, reason: EndReason) -> Record {
    Record { key, packets: c.packets, bytes: c.bytes, first_ns: c.first_ns, last_ns: c.last_ns, reason }
}

/// Export format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// NetFlow v9 (RFC 3954).
    V9,
    /// IPFIX (RFC 7011).
    Ipfix,
}

/// The interfaces a record is exported with (IPFIX ingressInterface / egressInterface).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ifaces {
    /// Where the packets came in.
    pub ingress: u32,
    /// Where they left.
    pub egress: u32,
}

/// Template ids: one per address family.
const TEMPLATE_V4: u16 = 256;
const TEMPLATE_V6: u16 = 257;

/// The fields of a data record in template order, (IANA number, length).
fn fields(format: Format, v6: bool) -> Vec<(u16, u16)> {
    let (src, dst, alen) = if v6 { (27, 28, 16) } else { (8, 12, 4) };
    let mut f = vec![(src, alen), (dst, alen), (4, 1), (7, 2), (11, 2), (5, 1), (10, 4), (14, 4), (2, 8), (1, 8)];
    match format {
        // flowStart/EndMilliseconds and flowEndReason.
        Format::Ipfix => f.extend([(152, 8), (153, 8), (136, 1)]),
        // FIRST_SWITCHED / LAST_SWITCHED, sysUpTime milliseconds.
        Format::V9 => f.extend([(22, 4), (21, 4)]),
    }
    f
}

fn record_len(format: Format, v6: bool) -> usize {
    fields(format, v6).iter().map(|f| usize::from(f.1)).sum()
}

#[derive(Debug, Default)]
struct Domain {
    /// IPFIX: data records sent; v9: messages sent.
    seq: u64,
    since_template: u64,
    template_ms: Option<u64>,
}

/// Encodes records into export messages, keeping each domain's sequence and template state.
#[derive(Debug)]
pub struct Writer {
    format: Format,
    boot_unix_ns: u64,
    mtu: usize,
    domains: HashMap<u32, Domain>,
}

impl Writer {
    /// A writer whose meter's time 0 was `boot_unix_ns` (Unix nanoseconds); messages are at
    /// most `mtu` bytes (at least room for the templates and one record).
    pub fn new(format: Format, boot_unix_ns: u64, mtu: usize) -> Self {
        Writer { format, boot_unix_ns, mtu: mtu.clamp(300, 65_000), domains: HashMap::new() }
    }

    /// The format.
    pub fn format(&self) -> Format {
        self.format
    }

    fn unix_ms(&self, meter_ns: u64) -> u64 {
        (self.boot_unix_ns + meter_ns) / 1_000_000
    }

    /// Messages carrying `records` for observation domain `domain`, exported at `now_ns`
    /// (meter time). An empty `records` gives no message.
    pub fn encode(&mut self, domain: u32, ifaces: Ifaces, now_ns: u64, records: &[Record]) -> Vec<Vec<u8>> {
        let (header, set_header) = match self.format {
            Format::Ipfix => (16, 4),
            Format::V9 => (20, 4),
        };
        let template_len =
            set_header + [false, true].iter().map(|&v6| 4 + 4 * fields(self.format, v6).len()).sum::<usize>();
        let mut out = Vec::new();
        let mut rest = records;
        while !rest.is_empty() {
            let now_ms = self.unix_ms(now_ns);
            let d = self.domains.entry(domain).or_default();
            let with_template = d.template_ms.is_none_or(|t| now_ms.saturating_sub(t) >= TEMPLATE_REFRESH_MS)
                || d.since_template >= TEMPLATE_EVERY;
            // Room: two data sets, each padded to 4 bytes.
            let mut room = self.mtu - header - 2 * (set_header + 3) - if with_template { template_len } else { 0 };
            let mut n = 0;
            for r in rest {
                let len = record_len(self.format, r.key.src.is_ipv6());
                if len > room {
                    break;
                }
                room -= len;
                n += 1;
            }
            let (now, later) = rest.split_at(n.max(1));
            rest = later;
            let msg = self.message(domain, ifaces, now_ns, now, with_template);
            let d = self.domains.entry(domain).or_default();
            if with_template {
                d.template_ms = Some(now_ms);
                d.since_template = 0;
            }
            d.since_template += 1;
            d.seq += match self.format {
                Format::Ipfix => now.len() as u64,
                Format::V9 => 1,
            };
            out.push(msg);
        }
        out
    }

    fn message(&self, domain: u32, ifaces: Ifaces, now_ns: u64, records: &[Record], template: bool) -> Vec<u8> {
        let seq = self.domains.get(&domain).map_or(0, |d| d.seq) as u32;
        let now_ms = self.unix_ms(now_ns);
        let secs = (now_ms / 1000) as u32;
        let (v4, v6): (Vec<&Record>, Vec<&Record>) = records.iter().partition(|r| !r.key.src.is_ipv6());
        let values = |r: &Record| -> Vec<(u16, FieldValue)> {
            let addr = |a: IpAddr| match a {
                IpAddr::V4(a) => FieldValue::Ip4Addr(a),
                IpAddr::V6(a) => FieldValue::Ip6Addr(a),
            };
            let n = |x: DataNumber| FieldValue::DataNumber(x);
            let k = &r.key;
            let mut v = vec![
                (0, addr(k.src)),
                (0, addr(k.dst)),
                (4, n(DataNumber::U8(k.proto))),
                (7, n(DataNumber::U16(k.sport))),
                (11, n(DataNumber::U16(k.dport))),
                (5, n(DataNumber::U8(k.tos))),
                (10, n(DataNumber::U32(ifaces.ingress))),
                (14, n(DataNumber::U32(ifaces.egress))),
                (2, n(DataNumber::U64(r.packets))),
                (1, n(DataNumber::U64(r.bytes))),
            ];
            match self.format {
                Format::Ipfix => v.extend([
                    (152, n(DataNumber::U64(self.unix_ms(r.first_ns)))),
                    (153, n(DataNumber::U64(self.unix_ms(r.last_ns)))),
                    (136, n(DataNumber::U8(r.reason as u8))),
                ]),
                Format::V9 => {
                    // The header's sysUpTime is taken at its whole `unix_secs`, so that the
                    // collector dates packets to the millisecond.
                    v.extend([
                        (22, n(DataNumber::U32(self.uptime_ms(r.first_ns) as u32))),
                        (21, n(DataNumber::U32(self.uptime_ms(r.last_ns) as u32))),
                    ])
                }
            }
            v
        };
        match self.format {
            Format::Ipfix => {
                let mut sets = Vec::new();
                if template {
                    let templates = [(TEMPLATE_V4, false), (TEMPLATE_V6, true)]
                        .iter()
                        .map(|&(id, v6)| {
                            let f = fields(Format::Ipfix, v6);
                            ipfix::Template {
                                template_id: id,
                                field_count: f.len() as u16,
                                fields: f
                                    .iter()
                                    .map(|&(t, l)| ipfix::TemplateField {
                                        field_type_number: t,
                                        field_length: l,
                                        enterprise_number: None,
                                        field_type: IPFixField::new(t, None),
                                    })
                                    .collect(),
                            }
                        })
                        .collect();
                    sets.push(ipfix_set(2, ipfix::FlowSetBody::Templates(templates)));
                }
                for (id, rs) in [(TEMPLATE_V4, &v4), (TEMPLATE_V6, &v6)] {
                    if rs.is_empty() {
                        continue;
                    }
                    let recs = rs
                        .iter()
                        .map(|r| {
                            values(r).into_iter().map(|(t, v)| (IPFixField::IANA(IANAIPFixField::from(t)), v)).collect()
                        })
                        .collect();
                    sets.push(ipfix_set(id, ipfix::FlowSetBody::Data(ipfix::Data::new(recs))));
                }
                let m = ipfix::IPFix {
                    header: ipfix::Header {
                        version: 10,
                        length: 0,
                        export_time: secs,
                        sequence_number: seq,
                        observation_domain_id: domain,
                    },
                    flowsets: sets,
                };
                m.to_be_bytes().unwrap_or_default()
            }
            Format::V9 => {
                let mut sets = Vec::new();
                if template {
                    let templates = [(TEMPLATE_V4, false), (TEMPLATE_V6, true)]
                        .iter()
                        .map(|&(id, v6)| {
                            let f = fields(Format::V9, v6);
                            v9::Template {
                                template_id: id,
                                field_count: f.len() as u16,
                                fields: f
                                    .iter()
                                    .map(|&(t, l)| v9::TemplateField {
                                        field_type_number: t,
                                        field_type: V9Field::from(t),
                                        field_length: l,
                                    })
                                    .collect(),
                            }
                        })
                        .collect();
                    sets.push(v9_set(0, v9::FlowSetBody::Template(v9::Templates { templates, padding: Vec::new() })));
                }
                for (id, rs) in [(TEMPLATE_V4, &v4), (TEMPLATE_V6, &v6)] {
                    if rs.is_empty() {
                        continue;
                    }
                    let recs = rs
                        .iter()
                        .map(|r| values(r).into_iter().map(|(t, v)| (V9Field::from(t), v)).collect())
                        .collect();
                    sets.push(v9_set(id, v9::FlowSetBody::Data(v9::Data::new(recs))));
                }
                let m = v9::V9 {
                    header: v9::Header {
                        version: 9,
                        count: 0,
                        sys_up_time: (u64::from(secs) * 1000).saturating_sub(self.boot_floor_ms()) as u32,
                        unix_secs: secs,
                        sequence_number: seq,
                        source_id: domain,
                    },
                    flowsets: sets,
                };
                m.to_be_bytes().unwrap_or_default()
            }
        }
    }

    /// v9's sysUpTime counts from the whole second the meter started in, so that the header's
    /// uptime at `unix_secs` is never negative.
    fn boot_floor_ms(&self) -> u64 {
        self.boot_unix_ns / 1_000_000_000 * 1000
    }

    /// sysUpTime, milliseconds, of a meter time.
    fn uptime_ms(&self, meter_ns: u64) -> u64 {
        self.unix_ms(meter_ns) - self.boot_floor_ms()
    }
}

fn ipfix_set(id: u16, body: ipfix::FlowSetBody) -> ipfix::FlowSet {
    ipfix::FlowSet { header: ipfix::FlowSetHeader { header_id: id, length: 0 }, body }
}

fn v9_set(id: u16, body: v9::FlowSetBody) -> v9::FlowSet {
    v9::FlowSet { header: v9::FlowSetHeader { flowset_id: id, length: 0 }, body }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::Decoder;

    fn v4_udp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, len: usize) -> Vec<u8> {
        let mut p = vec![0u8; len.max(28)];
        p[0] = 0x45;
        p[1] = 0xb8; // EF
        p[9] = 17;
        p[12..16].copy_from_slice(&src);
        p[16..20].copy_from_slice(&dst);
        p[20..22].copy_from_slice(&sport.to_be_bytes());
        p[22..24].copy_from_slice(&dport.to_be_bytes());
        p
    }

    fn v6_icmp(ty: u8, code: u8) -> Vec<u8> {
        let mut p = vec![0u8; 48];
        p[0] = 0x60;
        p[6] = 58;
        p[8] = 0xfd;
        p[23] = 1;
        p[24] = 0xfd;
        p[39] = 2;
        p[40] = ty;
        p[41] = code;
        p
    }

    #[test]
    fn keys_read_addresses_ports_icmp_and_fragments() {
        let k = key_of(&v4_udp([198, 18, 0, 1], [198, 18, 1, 1], 5000, 53, 60)).unwrap();
        assert_eq!((k.proto, k.sport, k.dport, k.tos), (17, 5000, 53, 0xb8));
        assert_eq!(k.src, IpAddr::from([198, 18, 0, 1]));
        let k6 = key_of(&v6_icmp(128, 0)).unwrap();
        assert_eq!((k6.proto, k6.sport, k6.dport), (58, 0, 128 * 256));
        let mut frag = v4_udp([1, 1, 1, 1], [2, 2, 2, 2], 1, 2, 60);
        frag[7] = 10; // a later fragment: no ports
        assert_eq!(key_of(&frag).map(|k| (k.sport, k.dport)), Some((0, 0)));
        assert_eq!(key_of(&[0x00, 0x01, 0x08, 0x00]), None, "ARP is not IP");
        assert_eq!(key_of(&[0x45, 0, 0]), None, "truncated");
        assert_eq!(key_of(&[]), None);
    }

    #[test]
    fn meter_counts_exactly_and_ends_records_on_idle_active_full_and_flush() {
        let s = 1_000_000_000u64;
        let mut m = Meter::new(60 * s, 15 * s, 3);
        let mut out = Vec::new();
        let a = v4_udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 100);
        let b = v4_udp([10, 0, 0, 1], [10, 0, 0, 3], 1, 2, 1500);
        for t in 0..100 {
            m.observe(t * s, &a, 100, 1, &mut out); // one packet a second for 100 s
        }
        m.observe(0, &b, 3000, 2, &mut out); // an offload packet standing for two
        m.observe(0, &[0, 1, 8, 0], 42, 1, &mut out);
        assert!(out.is_empty());
        assert_eq!(m.non_ip(), (1, 42));
        m.expire(20 * s, &mut out);
        // b idle since 0; a open since 0, active timeout 60 s not reached at 20 s.
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].packets, out[0].bytes, out[0].reason), (2, 3000, EndReason::Idle));
        out.clear();
        m.expire(99 * s, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].reason, EndReason::Active);
        assert_eq!((out[0].packets, out[0].first_ns, out[0].last_ns), (100, 0, 99 * s));
        out.clear();
        // Full: the fourth flow ends the three open ones.
        for (i, d) in [[9, 0, 0, 1], [9, 0, 0, 2], [9, 0, 0, 3], [9, 0, 0, 4]].iter().enumerate() {
            m.observe(100 * s + i as u64, &v4_udp([9, 9, 9, 9], *d, 7, 7, 50), 50, 1, &mut out);
        }
        assert_eq!(out.len(), 3);
        assert!(out.iter().all(|r| r.reason == EndReason::LackOfResources));
        m.flush(&mut out);
        assert_eq!(out.len(), 4);
        assert_eq!(out[3].reason, EndReason::Forced);
        assert!(m.is_empty());
        let total: u64 = out.iter().map(|r| r.bytes).sum();
        assert_eq!(total, 200);
    }

    fn records(n: usize) -> Vec<Record> {
        (0..n)
            .map(|i| {
                let p = if i % 3 == 2 {
                    v6_icmp(128, i as u8)
                } else {
                    v4_udp([198, 18, 0, 1], [198, 18, (i / 256) as u8, i as u8], 40_000 + i as u16, 5201, 1500)
                };
                Record {
                    key: key_of(&p).unwrap(),
                    packets: 1 + i as u64,
                    bytes: 1000 * (1 + i as u64),
                    first_ns: 1_000_000 * i as u64,
                    // Up to 4.999 s: some after the whole second of the export time (4.877 s).
                    last_ns: 1_000_000 * i as u64 + 4_800_000_000,
                    reason: EndReason::Idle,
                }
            })
            .collect()
    }

    fn decode_all(format: Format, msgs: &[Vec<u8>], skip: &[usize]) -> (Vec<crate::record::Flow>, Decoder) {
        let mut d = Decoder::new();
        let (mut flows, mut counters) = (Vec::new(), Vec::new());
        let from: IpAddr = [127, 0, 0, 1].into();
        for (i, m) in msgs.iter().enumerate() {
            if !skip.contains(&i) {
                d.feed(from, 0, m, &mut flows, &mut counters);
            }
        }
        let _ = format;
        (flows, d)
    }

    #[test]
    fn ipfix_and_v9_messages_decode_to_the_same_records_times_and_sequence() {
        // Boot at an odd instant: times must come back to the millisecond.
        let boot = 1_700_000_000_123_456_789u64;
        for format in [Format::Ipfix, Format::V9] {
            let recs = records(200);
            let mut w = Writer::new(format, boot, 1400);
            let msgs = w.encode(7, Ifaces { ingress: 1, egress: 2 }, 5_000_000_000, &recs);
            assert!(msgs.len() > 5, "{format:?}: split into several messages");
            assert!(msgs.iter().all(|m| m.len() <= 1400), "{format:?}: within the MTU");
            let (flows, d) = decode_all(format, &msgs, &[]);
            assert_eq!(flows.len(), 200, "{format:?}");
            // Within a message IPv4 records come before IPv6 ones: compare in key order.
            let got: std::collections::BTreeMap<_, _> = flows
                .iter()
                .map(|f| {
                    (
                        (f.src, f.dst, f.proto, f.sport, f.dport),
                        (f.bytes, f.packets, f.domain, f.sampling, f.start_ms, f.end_ms),
                    )
                })
                .collect();
            let want: std::collections::BTreeMap<_, _> = recs
                .iter()
                .map(|r| {
                    let k = &r.key;
                    let ms = |ns: u64| (boot + ns) / 1_000_000;
                    (
                        (k.src, k.dst, k.proto, k.sport, k.dport),
                        (r.bytes, r.packets, 7, 1, ms(r.first_ns), ms(r.last_ns)),
                    )
                })
                .collect();
            assert_eq!(got, want, "{format:?}");
            let st = &d.stats()[0];
            assert_eq!((st.records, st.malformed, st.seq.lost), (200, 0, 0), "{format:?}");
        }
    }

    #[test]
    fn a_lost_message_shows_as_export_loss_and_templates_come_back() {
        for format in [Format::Ipfix, Format::V9] {
            let mut w = Writer::new(format, 1_700_000_000_000_000_000, 1400);
            let mut msgs = Vec::new();
            for round in 0..30u64 {
                msgs.extend(w.encode(1, Ifaces { ingress: 1, egress: 2 }, round * 100_000_000, &records(10)));
            }
            assert_eq!(msgs.len(), 30);
            // Lose the first message (which had the only template until message 20) and the 25th.
            let (flows, d) = decode_all(format, &msgs, &[0, 24]);
            let st = &d.stats()[0];
            let lost_unit = match format {
                Format::Ipfix => 10, // records
                Format::V9 => 1,     // messages
            };
            assert_eq!(st.seq.lost, lost_unit, "{format:?}: only the 25th is seen missing");
            // Messages 1..19 wait for the template of message 20 and are decoded then.
            assert_eq!(flows.len(), 28 * 10, "{format:?}");
        }
    }
}
