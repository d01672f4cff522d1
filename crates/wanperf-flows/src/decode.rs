//! Export datagrams → [`Flow`]s and [`IfCounters`], with loss and error accounting.
//!
//! Templates (and options templates) live per scope: exporter address, protocol version and
//! observation domain (v9 source id, IPFIX observation domain id, v5 engine type and id) —
//! never the source port, which an exporter may change. `netflow_parser` keeps them per scope
//! (`RouterScopedParser`), expires them after [`TEMPLATE_TTL`], and holds data that comes before
//! its template (bounded) until the template arrives.

use crate::seq::Seq;
use crate::{Flow, IfCounters};
use flowparser_sflow::{SflowParser, SflowSample};
use netflow_parser::scoped_parser::RouterScopedParser;
use netflow_parser::variable_versions::field_value::FieldValue;
use netflow_parser::variable_versions::ipfix::lookup::{IANAIPFixField, IPFixField};
use netflow_parser::variable_versions::ipfix::FlowSetBody as IpfixBody;
use netflow_parser::variable_versions::ttl::TtlConfig;
use netflow_parser::variable_versions::v9::FlowSetBody as V9Body;
use netflow_parser::PendingFlowsConfig;
use netflow_parser::{NetflowPacket, NetflowParser};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::time::Duration;

/// Templates not refreshed for this long are forgotten (exporters resend theirs every few
/// minutes at most; RFC 7011 §8.4's template withdrawal is honoured by the parser as well).
pub const TEMPLATE_TTL: Duration = Duration::from_secs(1800);
/// Scopes (exporter × version × domain) remembered at once.
pub const MAX_SCOPES: usize = 4096;

/// The export protocol of a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// NetFlow v5.
    V5,
    /// NetFlow v9.
    V9,
    /// IPFIX (NetFlow v10).
    Ipfix,
    /// sFlow v5.
    Sflow,
}

impl Protocol {
    /// Its name in tables and records.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::V5 => "netflow-v5",
            Protocol::V9 => "netflow-v9",
            Protocol::Ipfix => "ipfix",
            Protocol::Sflow => "sflow",
        }
    }
    /// What its sequence numbers count.
    pub fn seq_unit(self) -> &'static str {
        match self {
            Protocol::V5 => "flows",
            Protocol::V9 => "packets",
            Protocol::Ipfix => "records",
            Protocol::Sflow => "datagrams",
        }
    }
}

/// What one exporter (in one domain) sent and what was lost of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExporterStats {
    /// The exporter's address.
    pub exporter: IpAddr,
    /// Its protocol.
    pub protocol: Protocol,
    /// Observation domain / source id / sub-agent.
    pub domain: u32,
    /// Datagrams received.
    pub datagrams: u64,
    /// Flow records decoded.
    pub records: u64,
    /// Counter records decoded.
    pub counter_records: u64,
    /// Datagrams (or the rest of one) that could not be decoded.
    pub malformed: u64,
    /// Data records that waited for a template.
    pub awaiting_template: u64,
    /// The sampling rate last announced (1: unsampled).
    pub sampling: u32,
    /// Sequence-number accounting, in [`Protocol::seq_unit`]s.
    pub seq: Seq,
}

impl ExporterStats {
    fn new(exporter: IpAddr, protocol: Protocol, domain: u32) -> Self {
        ExporterStats {
            exporter,
            protocol,
            domain,
            datagrams: 0,
            records: 0,
            counter_records: 0,
            malformed: 0,
            awaiting_template: 0,
            sampling: 1,
            seq: Seq::default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Scope {
    exporter: IpAddr,
    version: u16,
    domain: u32,
}

/// The decoder of every exporter's datagrams.
pub struct Decoder {
    netflow: RouterScopedParser<Scope>,
    sflow: SflowParser,
    stats: BTreeMap<(IpAddr, Protocol, u32), ExporterStats>,
    /// Options-announced sampling per scope.
    sampling: HashMap<Scope, u32>,
    /// Datagrams that were neither NetFlow nor sFlow.
    pub unknown: u64,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new()
    }
}

fn parser_builder() -> netflow_parser::NetflowParserBuilder {
    NetflowParser::builder().with_ttl(TtlConfig::new(TEMPLATE_TTL)).with_pending_flows(PendingFlowsConfig::new(256))
}

impl Decoder {
    /// A decoder that knows no exporter yet.
    pub fn new() -> Self {
        let netflow = RouterScopedParser::try_with_builder(parser_builder())
            .and_then(|p| p.with_max_sources(MAX_SCOPES))
            .expect("static parser configuration is valid");
        Decoder { netflow, sflow: SflowParser::default(), stats: BTreeMap::new(), sampling: HashMap::new(), unknown: 0 }
    }

    /// Every exporter seen so far, in address order.
    pub fn stats(&self) -> Vec<ExporterStats> {
        self.stats.values().cloned().collect()
    }

    /// Decodes one datagram from `from` received at `now_ms` (Unix milliseconds); flows and
    /// counters are appended. Returns the number of flow records it held.
    pub fn feed(
        &mut self,
        from: IpAddr,
        now_ms: u64,
        datagram: &[u8],
        flows: &mut Vec<Flow>,
        counters: &mut Vec<IfCounters>,
    ) -> usize {
        let from = canonical(from);
        if datagram.len() >= 4 && u32::from_be_bytes([datagram[0], datagram[1], datagram[2], datagram[3]]) == 5 {
            return self.feed_sflow(from, now_ms, datagram, flows, counters);
        }
        let version = if datagram.len() >= 2 { u16::from_be_bytes([datagram[0], datagram[1]]) } else { 0 };
        let (protocol, domain) = match version {
            5 if datagram.len() >= 24 => (Protocol::V5, u32::from(u16::from_be_bytes([datagram[20], datagram[21]]))),
            9 if datagram.len() >= 20 => (Protocol::V9, be32(&datagram[16..20])),
            10 if datagram.len() >= 16 => (Protocol::Ipfix, be32(&datagram[12..16])),
            _ => {
                self.unknown += 1;
                return 0;
            }
        };
        let scope = Scope { exporter: from, version, domain };
        let result = self.netflow.parse_from_source(scope.clone(), datagram);
        let before = flows.len();
        let mut malformed = u64::from(result.error.is_some());
        let mut awaiting = 0u64;
        let mut seq_obs: Option<(u32, u32)> = None;
        // Data sets in the output, against those on the wire: fewer means some wait for their
        // template (the parser holds them), more means held ones were released.
        let mut out_sets = 0u64;
        for packet in &result.packets {
            match packet {
                NetflowPacket::V5(v5) => {
                    let h = &v5.header;
                    let export_ms = u64::from(h.unix_secs) * 1000 + u64::from(h.unix_nsecs) / 1_000_000;
                    let rate = u32::from(h.sampling_interval & 0x3fff).max(1);
                    for r in &v5.flowsets {
                        let (start_ms, end_ms) = uptime_span(export_ms, h.sys_up_time, r.first, r.last);
                        flows.push(Flow {
                            exporter: from,
                            domain,
                            src: r.src_addr.into(),
                            dst: r.dst_addr.into(),
                            proto: r.protocol_number,
                            sport: r.src_port,
                            dport: r.dst_port,
                            bytes: u64::from(r.d_octets),
                            packets: u64::from(r.d_pkts),
                            start_ms,
                            end_ms,
                            sampling: rate,
                        });
                    }
                    self.sampling.insert(scope.clone(), rate);
                    seq_obs = Some((h.flow_sequence, v5.flowsets.len() as u32));
                }
                NetflowPacket::V9(v9) => {
                    let h = &v9.header;
                    let export_ms = u64::from(h.unix_secs) * 1000;
                    for set in &v9.flowsets {
                        match &set.body {
                            V9Body::Data(d) => {
                                out_sets += 1;
                                for rec in &d.fields {
                                    let mut acc = Acc::default();
                                    for (f, v) in rec {
                                        acc.put(u16::from(*f), v);
                                    }
                                    let rate = self.rate(&scope, acc.sampling);
                                    if let Some(fl) = acc.flow(from, domain, rate, export_ms, Some(h.sys_up_time)) {
                                        flows.push(fl);
                                    }
                                }
                            }
                            V9Body::OptionsData(o) => {
                                out_sets += 1;
                                for rec in &o.fields {
                                    let mut acc = Acc::default();
                                    for (f, v) in &rec.options_fields {
                                        acc.put(u16::from(*f), v);
                                    }
                                    if let Some(r) = acc.sampling {
                                        self.sampling.insert(scope.clone(), r);
                                    }
                                }
                            }
                            V9Body::NoTemplate(_) => {
                                out_sets += 1;
                                awaiting += 1;
                            }
                            V9Body::Template(_) | V9Body::OptionsTemplate(_) | V9Body::Empty => {}
                        }
                    }
                    seq_obs = Some((h.sequence_number, 1));
                }
                NetflowPacket::IPFix(ipfix) => {
                    let h = &ipfix.header;
                    let export_ms = u64::from(h.export_time) * 1000;
                    let mut n = 0u32;
                    for set in &ipfix.flowsets {
                        match &set.body {
                            IpfixBody::Data(d) => {
                                out_sets += 1;
                                for rec in &d.fields {
                                    let mut acc = Acc::default();
                                    for (f, v) in rec {
                                        if let Some(id) = ipfix_id(f) {
                                            acc.put(id, v);
                                        }
                                    }
                                    n += 1;
                                    let rate = self.rate(&scope, acc.sampling);
                                    if let Some(fl) = acc.flow(from, domain, rate, export_ms, None) {
                                        flows.push(fl);
                                    }
                                }
                            }
                            IpfixBody::OptionsData(o) => {
                                out_sets += 1;
                                for rec in &o.fields {
                                    n += 1;
                                    let mut acc = Acc::default();
                                    for (f, v) in rec {
                                        if let Some(id) = ipfix_id(f) {
                                            acc.put(id, v);
                                        }
                                    }
                                    if let Some(r) = acc.sampling {
                                        self.sampling.insert(scope.clone(), r);
                                    }
                                }
                            }
                            IpfixBody::NoTemplate(_) => {
                                out_sets += 1;
                                awaiting += 1;
                            }
                            IpfixBody::Template(_)
                            | IpfixBody::Templates(_)
                            | IpfixBody::OptionsTemplate(_)
                            | IpfixBody::OptionsTemplates(_)
                            | IpfixBody::V9Template(_)
                            | IpfixBody::V9Templates(_)
                            | IpfixBody::V9OptionsTemplate(_)
                            | IpfixBody::V9OptionsTemplates(_) => {}
                            IpfixBody::V9Data(_) | IpfixBody::V9OptionsData(_) | IpfixBody::Empty => {
                                malformed += 1;
                            }
                        }
                    }
                    seq_obs = Some((h.sequence_number, n));
                }
                _ => malformed += 1,
            }
        }
        let decoded = flows.len() - before;
        let wire_sets = data_sets_on_wire(datagram, version);
        let held_now = wire_sets.saturating_sub(out_sets);
        let released = out_sets > wire_sets;
        awaiting += held_now;
        let st =
            self.stats.entry((from, protocol, domain)).or_insert_with(|| ExporterStats::new(from, protocol, domain));
        st.datagrams += 1;
        st.records += decoded as u64;
        st.malformed += malformed;
        st.awaiting_template += awaiting;
        st.sampling = self.sampling.get(&scope).copied().unwrap_or(1);
        if let Some((seq, n)) = seq_obs {
            if protocol == Protocol::Ipfix {
                // IPFIX numbers data records: a message whose data waited for its template (or one
                // that released such data) has a count that cannot be told from its own sets.
                if held_now > 0 || released {
                    st.seq.observe(seq, n);
                    st.seq.resync();
                } else {
                    st.seq.observe(seq, n);
                }
            } else {
                st.seq.observe(seq, n);
            }
        }
        decoded
    }

    fn rate(&self, scope: &Scope, in_record: Option<u32>) -> u32 {
        in_record.or_else(|| self.sampling.get(scope).copied()).unwrap_or(1).max(1)
    }

    fn feed_sflow(
        &mut self,
        from: IpAddr,
        now_ms: u64,
        datagram: &[u8],
        flows: &mut Vec<Flow>,
        counters: &mut Vec<IfCounters>,
    ) -> usize {
        let result = self.sflow.parse_bytes(datagram);
        let before = flows.len();
        let mut n_counters = 0u64;
        let malformed = u64::from(result.error.is_some());
        let mut last = (0u32, None);
        for d in &result.datagrams {
            let domain = d.sub_agent_id;
            last = (domain, Some(d.sequence_number));
            for s in &d.samples {
                let (rate, records) = match s {
                    SflowSample::Flow(f) => (f.sampling_rate, &f.records),
                    SflowSample::ExpandedFlow(f) => (f.sampling_rate, &f.records),
                    SflowSample::Counter(c) => {
                        n_counters += push_counters(from, c.source_id_index, now_ms, &c.records, counters);
                        continue;
                    }
                    SflowSample::ExpandedCounter(c) => {
                        n_counters += push_counters(from, c.source_id_index, now_ms, &c.records, counters);
                        continue;
                    }
                    _ => continue,
                };
                if let Some(mut fl) = sflow_flow(records) {
                    fl.exporter = from;
                    fl.domain = domain;
                    fl.start_ms = now_ms;
                    fl.end_ms = now_ms;
                    fl.sampling = rate.max(1);
                    flows.push(fl);
                }
            }
            let st = self
                .stats
                .entry((from, Protocol::Sflow, domain))
                .or_insert_with(|| ExporterStats::new(from, Protocol::Sflow, domain));
            st.datagrams += 1;
            st.seq.observe(d.sequence_number, 1);
        }
        let decoded = flows.len() - before;
        if let Some(rate) = flows[before..].last().map(|f| f.sampling) {
            if let Some(st) = self.stats.get_mut(&(from, Protocol::Sflow, last.0)) {
                st.sampling = rate;
            }
        }
        if last.1.is_none() {
            // Not one datagram decoded: count it against the agent anyway.
            let st = self
                .stats
                .entry((from, Protocol::Sflow, 0))
                .or_insert_with(|| ExporterStats::new(from, Protocol::Sflow, 0));
            st.datagrams += 1;
            st.malformed += 1;
            return 0;
        }
        if let Some(st) = self.stats.get_mut(&(from, Protocol::Sflow, last.0)) {
            st.records += decoded as u64;
            st.counter_records += n_counters;
            st.malformed += malformed;
        }
        decoded
    }
}

/// IPv4-mapped IPv6 addresses (a dual-stack socket's view of an IPv4 exporter) as IPv4.
fn canonical(a: IpAddr) -> IpAddr {
    match a {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(a, IpAddr::V4),
        v4 => v4,
    }
}

/// Data and options-data sets (id ≥ 256) in a v9 or IPFIX datagram, walking the set headers.
fn data_sets_on_wire(d: &[u8], version: u16) -> u64 {
    let mut at = match version {
        9 => 20,
        10 => 16,
        _ => return 0,
    };
    let end = if version == 10 && d.len() >= 4 {
        usize::from(u16::from_be_bytes([d[2], d[3]])).min(d.len())
    } else {
        d.len()
    };
    let mut n = 0;
    while at + 4 <= end {
        let id = u16::from_be_bytes([d[at], d[at + 1]]);
        let len = usize::from(u16::from_be_bytes([d[at + 2], d[at + 3]]));
        if len < 4 {
            break;
        }
        if id >= 256 {
            n += 1;
        }
        at += len;
    }
    n
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// First and last packet times from sysUpTime-relative values. The differences are signed:
/// the header's uptime is taken at its whole `unix_secs`, so a packet up to a second later
/// has an uptime past the header's (read unsigned, that became 49 days earlier); the uptime
/// counter's own wrap (every 49.7 days) is still handled by the wrapping subtraction.
fn uptime_span(export_ms: u64, uptime: u32, first: u32, last: u32) -> (u64, u64) {
    let at = |t: u32| (export_ms as i64 - i64::from(uptime.wrapping_sub(t) as i32)).max(0) as u64;
    let (start, end) = (at(first), at(last));
    (start.min(end), end.max(start))
}

/// IANA numbers of the IPFIX fields a flow needs.
fn ipfix_id(f: &IPFixField) -> Option<u16> {
    use IANAIPFixField as I;
    let IPFixField::IANA(i) = f else { return None };
    Some(match i {
        I::OctetDeltaCount => 1,
        I::PacketDeltaCount => 2,
        I::ProtocolIdentifier => 4,
        I::SourceTransportPort => 7,
        I::SourceIpv4address => 8,
        I::DestinationTransportPort => 11,
        I::DestinationIpv4address => 12,
        I::FlowEndSysUpTime => 21,
        I::FlowStartSysUpTime => 22,
        I::PostOctetDeltaCount => 23,
        I::PostPacketDeltaCount => 24,
        I::SourceIpv6address => 27,
        I::DestinationIpv6address => 28,
        I::IcmpTypeCodeIpv4 => 32,
        I::SamplingInterval => 34,
        I::OctetTotalCount => 85,
        I::PacketTotalCount => 86,
        I::IcmpTypeCodeIpv6 => 139,
        I::FlowStartSeconds => 150,
        I::FlowEndSeconds => 151,
        I::FlowStartMilliseconds => 152,
        I::FlowEndMilliseconds => 153,
        I::FlowStartMicroseconds => 154,
        I::FlowEndMicroseconds => 155,
        I::FlowStartNanoseconds => 156,
        I::FlowEndNanoseconds => 157,
        I::SystemInitTimeMilliseconds => 160,
        I::SamplingPacketInterval => 305,
        I::SamplingPacketSpace => 306,
        _ => return None,
    })
}

/// The fields of one data record, by IANA number.
#[derive(Default)]
struct Acc {
    src: Option<IpAddr>,
    dst: Option<IpAddr>,
    proto: Option<u8>,
    sport: Option<u16>,
    dport: Option<u16>,
    icmp: Option<u16>,
    bytes: Option<u64>,
    packets: Option<u64>,
    up_first: Option<u64>,
    up_last: Option<u64>,
    abs_start: Option<u64>,
    abs_end: Option<u64>,
    init_ms: Option<u64>,
    sampling: Option<u32>,
    interval: Option<u64>,
    space: Option<u64>,
}

fn addr(v: &FieldValue) -> Option<IpAddr> {
    match v {
        FieldValue::Ip4Addr(a) => Some(IpAddr::V4(*a)),
        FieldValue::Ip6Addr(a) => Some(IpAddr::V6(*a)),
        _ => IpAddr::try_from(v).ok(),
    }
}

impl Acc {
    fn put(&mut self, id: u16, v: &FieldValue) {
        match id {
            1 | 85 => self.bytes = self.bytes.or(v.as_u64()),
            2 | 86 => self.packets = self.packets.or(v.as_u64()),
            23 => self.bytes = self.bytes.or(v.as_u64()),
            24 => self.packets = self.packets.or(v.as_u64()),
            4 => self.proto = v.as_u8(),
            7 => self.sport = v.as_u16(),
            11 => self.dport = v.as_u16(),
            8 | 27 => self.src = addr(v),
            12 | 28 => self.dst = addr(v),
            32 | 139 => self.icmp = v.as_u16(),
            21 => self.up_last = v.as_u64(),
            22 => self.up_first = v.as_u64(),
            150 | 152 | 154 | 156 => self.abs_start = v.as_u64(),
            151 | 153 | 155 | 157 => self.abs_end = v.as_u64(),
            160 => self.init_ms = v.as_u64(),
            34 => self.sampling = v.as_u64().filter(|&r| r > 0).map(|r| r.min(u64::from(u32::MAX)) as u32),
            305 => self.interval = v.as_u64(),
            306 => self.space = v.as_u64(),
            _ => {}
        }
        if let (Some(i), Some(s)) = (self.interval, self.space) {
            // `interval` packets looked at in every interval + space (RFC 5477).
            if let Some(r) = (i + s).checked_div(i) {
                self.sampling = Some(r.clamp(1, u64::from(u32::MAX)) as u32);
            }
        }
    }

    fn flow(&self, exporter: IpAddr, domain: u32, rate: u32, export_ms: u64, uptime: Option<u32>) -> Option<Flow> {
        let (src, dst) = (self.src?, self.dst?);
        let bytes = self.bytes?;
        let packets = self.packets.unwrap_or(0);
        let (start_ms, end_ms) = match (self.abs_start, self.abs_end, self.up_first, self.up_last) {
            (Some(s), Some(e), _, _) => (s.min(e), e.max(s)),
            (_, _, Some(f), Some(l)) => match (uptime, self.init_ms) {
                (Some(up), _) => uptime_span(export_ms, up, f as u32, l as u32),
                (None, Some(init)) => (init + f.min(l), init + l.max(f)),
                (None, None) => (export_ms, export_ms),
            },
            _ => (export_ms, export_ms),
        };
        let proto = self.proto.unwrap_or(0);
        let icmp = matches!(proto, 1 | 58);
        Some(Flow {
            exporter,
            domain,
            src,
            dst,
            proto,
            sport: if icmp { 0 } else { self.sport.unwrap_or(0) },
            dport: if icmp { self.icmp.or(self.dport).unwrap_or(0) } else { self.dport.unwrap_or(0) },
            bytes,
            packets,
            start_ms,
            end_ms,
            sampling: rate.max(1),
        })
    }
}

/// The flow an sFlow flow sample describes (one sampled packet).
fn sflow_flow(records: &[flowparser_sflow::flow_records::FlowRecord]) -> Option<Flow> {
    use flowparser_sflow::flow_records::FlowRecord as R;
    for r in records {
        match r {
            R::SampledIpv4(s) => {
                return Some(blank(
                    s.src_ip.into(),
                    s.dst_ip.into(),
                    s.protocol as u8,
                    s.src_port,
                    s.dst_port,
                    s.length,
                ))
            }
            R::SampledIpv6(s) => {
                return Some(blank(
                    s.src_ip.into(),
                    s.dst_ip.into(),
                    s.protocol as u8,
                    s.src_port,
                    s.dst_port,
                    s.length,
                ))
            }
            R::RawPacketHeader(h) => {
                if let Some(f) = header_flow(h.header_protocol, &h.header, h.frame_length, h.stripped) {
                    return Some(f);
                }
            }
            _ => {}
        }
    }
    None
}

fn blank(src: IpAddr, dst: IpAddr, proto: u8, sport: u32, dport: u32, len: u32) -> Flow {
    Flow {
        exporter: src,
        domain: 0,
        src,
        dst,
        proto,
        sport: sport as u16,
        dport: dport as u16,
        bytes: u64::from(len),
        packets: 1,
        start_ms: 0,
        end_ms: 0,
        sampling: 1,
    }
}

/// A sampled packet's header (sFlow header protocol 1: Ethernet, 11: IPv4, 12: IPv6): its
/// addresses, protocol, ports and IP length (the frame length less layer 2 when the IP header
/// does not say).
fn header_flow(protocol: u32, header: &[u8], frame_length: u32, stripped: u32) -> Option<Flow> {
    use etherparse::{LaxNetSlice, LaxSlicedPacket, TransportSlice};
    // Lax: a sampled header is cut short of the packet it came from.
    let (sliced, l2) = match protocol {
        1 => (LaxSlicedPacket::from_ethernet(header).ok()?, 14u32),
        11 | 12 => (LaxSlicedPacket::from_ip(header).ok()?, 0),
        _ => return None,
    };
    let (src, dst, proto, ip_len) = match sliced.net? {
        LaxNetSlice::Ipv4(v4) => {
            let h = v4.header();
            (IpAddr::V4(h.source_addr()), IpAddr::V4(h.destination_addr()), h.protocol().0, u32::from(h.total_len()))
        }
        LaxNetSlice::Ipv6(v6) => {
            let h = v6.header();
            (
                IpAddr::V6(h.source_addr()),
                IpAddr::V6(h.destination_addr()),
                v6.payload().ip_number.0,
                u32::from(h.payload_length()) + 40,
            )
        }
    };
    let (sport, dport) = match sliced.transport {
        Some(TransportSlice::Tcp(t)) => (t.source_port(), t.destination_port()),
        Some(TransportSlice::Udp(u)) => (u.source_port(), u.destination_port()),
        Some(TransportSlice::Icmpv4(i)) => (0, u16::from_be_bytes([i.type_u8(), i.code_u8()])),
        Some(TransportSlice::Icmpv6(i)) => (0, u16::from_be_bytes([i.type_u8(), i.code_u8()])),
        _ => (0, 0),
    };
    let len = if ip_len > 0 { ip_len } else { frame_length.saturating_sub(stripped).saturating_sub(l2) };
    Some(blank(src, dst, proto, u32::from(sport), u32::from(dport), len))
}

fn push_counters(
    device: IpAddr,
    source_index: u32,
    now_ms: u64,
    records: &[flowparser_sflow::counter_records::CounterRecord],
    out: &mut Vec<IfCounters>,
) -> u64 {
    use flowparser_sflow::counter_records::CounterRecord as C;
    let mut n = 0;
    for r in records {
        if let C::GenericInterface(g) = r {
            n += 1;
            out.push(IfCounters {
                device: device.to_string(),
                interface: if g.if_index != 0 { g.if_index } else { source_index }.to_string(),
                at_ms: now_ms,
                speed_bps: (g.if_speed > 0).then_some(g.if_speed),
                in_octets: g.if_in_octets,
                out_octets: g.if_out_octets,
                in_errors: u64::from(g.if_in_errors),
                out_errors: u64::from(g.if_out_errors),
                in_drops: u64::from(g.if_in_discards),
                out_drops: u64::from(g.if_out_discards),
                width: 64,
            });
        }
    }
    n
}

#[cfg(test)]
mod tests;
