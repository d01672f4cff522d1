//! The two records every decoder and reader of the crate shares: one [`Flow`] as an exporter
//! reported it, and one [`IfCounters`] reading of an interface's counters.

use serde::{Deserialize, Serialize};
use std::net::IpAddr;

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
