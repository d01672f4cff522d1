//! What the I/O loop counts of one direction of a link: per-class counters, its own lateness,
//! write errors and the per-second utilization series. Shared by [`crate::fabric`], which
//! counts them, and [`crate::path`], whose counters they are.

use crate::link::ClassCounters;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Scheduling lateness: how long after its theoretical time a packet was written out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Lateness {
    /// Median, µs.
    pub p50_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// Maximum, µs.
    pub max_us: f64,
}

/// Counters of one direction of one link.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DirStats {
    /// Per class.
    pub classes: BTreeMap<String, ClassCounters>,
    /// The emulator's own lateness.
    pub lateness: Lateness,
    /// Packets lost to writes the device refused (each datagram or segment of a refused
    /// super-packet).
    pub write_errors: u64,
    /// Bytes delivered in each whole second since the link came up (utilization series).
    #[serde(default)]
    pub per_second_bytes: Vec<u64>,
    /// Synthetic cross-traffic packets injected into this direction.
    #[serde(default)]
    pub injected: u64,
    /// The sending router's ICMP messages held back (its slow path).
    #[serde(default)]
    pub icmp_delayed: u64,
    /// The sending router's ICMP messages dropped (it never answers).
    #[serde(default)]
    pub icmp_dropped: u64,
    /// Packets the sending end's device dropped before the emulator read them (its queue was
    /// full: the emulator was behind, or a burst outran it), losses no configuration made.
    /// Counted where the end's queue is not part of the model (no `txqueuelen` configured:
    /// a configured one is the host's own queue, in its host report).
    #[serde(default)]
    pub unread_drops: u64,
}

impl DirStats {
    /// Sum over classes of one counter.
    pub fn total(&self, f: impl Fn(&ClassCounters) -> u64) -> u64 {
        self.classes.values().map(f).sum()
    }
}
