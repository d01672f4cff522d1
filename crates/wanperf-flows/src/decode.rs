//! Export datagrams → [`Flow`]s and [`IfCounters`], with loss and error accounting.
//!
//! NetFlow v5/v9 and IPFIX are read by [`netflow`] (templates compiled to field offsets, kept
//! per exporter address × version × observation domain — never the source port); sFlow v5 by
//! `flowparser-sflow`.

use crate::record::{Flow, IfCounters};
use crate::seq::Seq;
use flowparser_sflow::{SflowParser, SflowSample};
use netflow::{be16, be32, Netflow, Scope};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::net::IpAddr;

mod netflow;
pub use netflow::{MAX_SCOPES, TEMPLATE_TTL_MS};

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

/// An exporter's key in the accounting: address, protocol, domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StatKey(IpAddr, Protocol, u32);

impl std::hash::Hash for StatKey {
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        h.write_u128(addr_word(self.0));
        h.write_u64((self.1 as u64) << 32 | u64::from(self.2));
    }
}

/// An address as one word for hashing (IPv4 and IPv6 kept apart by a bit IPv6 addresses
/// held here never have set: the decoder folds IPv4-mapped ones to IPv4).
#[inline]
fn addr_word(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(v4) => 1 << 127 | u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6) & !(1 << 127),
    }
}

/// The decoder of every exporter's datagrams.
pub struct Decoder {
    netflow: Netflow,
    sflow: SflowParser,
    stats: HashMap<StatKey, ExporterStats, foldhash::fast::RandomState>,
    /// Datagrams that were neither NetFlow nor sFlow.
    pub unknown: u64,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Decoder {
    /// A decoder that knows no exporter yet.
    pub fn new() -> Self {
        Decoder { netflow: Netflow::default(), sflow: SflowParser::default(), stats: HashMap::default(), unknown: 0 }
    }

    /// Every exporter seen so far, in address order.
    pub fn stats(&self) -> Vec<ExporterStats> {
        let mut all: Vec<ExporterStats> = self.stats.values().cloned().collect();
        all.sort_by_key(|s| (s.exporter, s.protocol, s.domain));
        all
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
        if datagram.len() >= 4 && be32(datagram, 0) == 5 {
            return self.feed_sflow(from, now_ms, datagram, flows, counters);
        }
        let version = if datagram.len() >= 2 { be16(datagram, 0) } else { 0 };
        let (protocol, domain) = match version {
            5 if datagram.len() >= 24 => (Protocol::V5, u32::from(be16(datagram, 20))),
            9 if datagram.len() >= 20 => (Protocol::V9, be32(datagram, 16)),
            10 if datagram.len() >= 16 => (Protocol::Ipfix, be32(datagram, 12)),
            _ => {
                self.unknown += 1;
                return 0;
            }
        };
        let o = self.netflow.feed(Scope { exporter: from, version, domain }, now_ms, datagram, flows);
        let st = self
            .stats
            .entry(StatKey(from, protocol, domain))
            .or_insert_with(|| ExporterStats::new(from, protocol, domain));
        st.datagrams += 1;
        st.records += o.flows as u64;
        st.malformed += o.malformed;
        st.awaiting_template += o.held;
        st.sampling = o.sampling;
        if let Some((seq, n)) = o.seq {
            st.seq.observe(seq, n);
            if protocol == Protocol::Ipfix && o.held > 0 {
                // IPFIX numbers data records, and how many a held set has is not known yet.
                st.seq.resync();
            }
        }
        o.flows
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
                .entry(StatKey(from, Protocol::Sflow, domain))
                .or_insert_with(|| ExporterStats::new(from, Protocol::Sflow, domain));
            st.datagrams += 1;
            st.seq.observe(d.sequence_number, 1);
        }
        let decoded = flows.len() - before;
        if let Some(rate) = flows[before..].last().map(|f| f.sampling) {
            if let Some(st) = self.stats.get_mut(&StatKey(from, Protocol::Sflow, last.0)) {
                st.sampling = rate;
            }
        }
        if last.1.is_none() {
            // Not one datagram decoded: count it against the agent anyway.
            let st = self
                .stats
                .entry(StatKey(from, Protocol::Sflow, 0))
                .or_insert_with(|| ExporterStats::new(from, Protocol::Sflow, 0));
            st.datagrams += 1;
            st.malformed += 1;
            return 0;
        }
        if let Some(st) = self.stats.get_mut(&StatKey(from, Protocol::Sflow, last.0)) {
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

/// First and last packet times from sysUpTime-relative values. The differences are signed:
/// the header's uptime is taken at its whole `unix_secs`, so a packet up to a second later
/// has an uptime past the header's (read unsigned, that became 49 days earlier); the uptime
/// counter's own wrap (every 49.7 days) is still handled by the wrapping subtraction.
fn uptime_span(export_ms: u64, uptime: u32, first: u32, last: u32) -> (u64, u64) {
    let at = |t: u32| (export_ms as i64 - i64::from(uptime.wrapping_sub(t) as i32)).max(0) as u64;
    let (start, end) = (at(first), at(last));
    (start.min(end), end.max(start))
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
