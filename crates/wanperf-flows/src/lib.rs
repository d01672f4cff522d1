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
mod record;
pub mod seq;
pub mod top;
pub mod util;

use std::net::IpAddr;

pub use bins::{BinKey, BinRow, Binner};
pub use decode::{Decoder, ExporterStats, Protocol};
pub use record::{Flow, IfCounters};
pub use top::{mix, top, Dir, Key, Metric, MixRow, TopRow};
pub use util::{Saturation, UtilBin, UtilSeries};

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
