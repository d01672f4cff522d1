//! wanperf flows' pure core: export datagrams (NetFlow v5 and v9, IPFIX, sFlow v5) decoded into
//! one [`Flow`] record and one [`IfCounters`] record, export loss counted from sequence numbers
//! per exporter and domain, sampled records corrected by their rate, flows spread over time bins,
//! the seed's top-talker tables and protocol mix, and interface-counter utilization with wraps
//! and resets turned into gaps.
//!
//! Nothing here opens a socket or reads a clock: datagrams and the time they arrived are passed
//! in. NetFlow v5/v9 and IPFIX are read in place by templates compiled to field offsets (kept
//! per scope; data that comes before its template held until it comes); sFlow v5 by
//! `flowparser-sflow`; `etherparse` reads the packet headers sFlow samples carry.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bins;
pub mod decode;
pub mod export;
pub mod ifmib;
pub mod seq;
pub mod top;
pub mod util;

use serde::{Deserialize, Serialize};
use std::net::IpAddr;

pub use bins::{BinKey, BinRow, Binner};
pub use decode::{Decoder, ExporterStats, Protocol};
pub use top::{mix, top, Dir, Key, Metric, MixRow, TopRow};
pub use util::{Saturation, UtilBin, UtilSeries};

/// One flow as an exporter reported it, in wanperf's terms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Flow {
    /// The exporter's address (the datagram's source address; the port never matters).
    pub exporter: IpAddr,
    /// NetFlow v9 source id, IPFIX observation domain, sFlow sub-agent and source index (0 for v5).
    pub domain: u32,
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// IP protocol number.
    pub proto: u8,
    /// Source port (0 when the protocol has none).
    pub sport: u16,
    /// Destination port (ICMP: type × 256 + code, as NetFlow exporters do).
    pub dport: u16,
    /// Octets as exported (before sampling correction).
    pub bytes: u64,
    /// Packets as exported (before sampling correction).
    pub packets: u64,
    /// First packet, Unix milliseconds.
    pub start_ms: u64,
    /// Last packet, Unix milliseconds (≥ `start_ms`).
    pub end_ms: u64,
    /// 1 in `sampling` packets was looked at (1: unsampled).
    pub sampling: u32,
}

impl Flow {
    /// Bytes corrected by the sampling rate.
    pub fn est_bytes(&self) -> f64 {
        self.bytes as f64 * f64::from(self.sampling.max(1))
    }
    /// Packets corrected by the sampling rate.
    pub fn est_packets(&self) -> f64 {
        self.packets as f64 * f64::from(self.sampling.max(1))
    }
}

/// An interface's counters as a device reported them at one time (sFlow counter samples, SNMP
/// IF-MIB ifHC counters, rtnetlink statistics).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IfCounters {
    /// The device (exporter address, SNMP agent, or `netns/ifname`).
    pub device: String,
    /// The interface (ifIndex or name).
    pub interface: String,
    /// When the counters were read, Unix milliseconds.
    pub at_ms: u64,
    /// Interface speed in bit/s when known.
    pub speed_bps: Option<u64>,
    /// Octets received.
    pub in_octets: u64,
    /// Octets sent.
    pub out_octets: u64,
    /// Receive errors.
    pub in_errors: u64,
    /// Transmit errors.
    pub out_errors: u64,
    /// Receive drops (discards).
    pub in_drops: u64,
    /// Transmit drops (discards).
    pub out_drops: u64,
    /// Width of the octet counters in bits (32 or 64): where they wrap.
    pub width: u8,
}

/// Feeds arbitrary bytes to a decoder as datagrams from two exporters (the fuzz target
/// `flow_export`): nothing may panic, and every flow that comes out is well formed.
pub fn exercise(data: &[u8]) {
    let mut d = Decoder::new();
    let mut flows = Vec::new();
    let mut counters = Vec::new();
    let a: IpAddr = [198, 18, 0, 1].into();
    let b: IpAddr = [198, 18, 0, 2].into();
    for (i, chunk) in data.split(|&x| x == 0xA5).enumerate() {
        let from = if i % 2 == 0 { a } else { b };
        d.feed(from, 1_700_000_000_000 + i as u64, chunk, &mut flows, &mut counters);
    }
    for f in &flows {
        assert!(f.end_ms >= f.start_ms);
        assert!(f.sampling >= 1);
    }
    let mut binner = Binner::new(300_000);
    for f in &flows {
        binner.add(f);
    }
    let rows = binner.drain_all();
    let _ = top(&rows, Key::Pair, Metric::Bytes, None, &[], 10);
    let _ = mix(&rows, &[]);
}
