//! Flows summed into time bins (5 minutes by default), a flow spread over the bins it spans in
//! proportion to the time it spent in each.

use crate::Flow;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::net::IpAddr;

/// What a bin row is keyed by.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BinKey {
    /// Start of the bin, Unix milliseconds.
    pub bin_ms: u64,
    /// Exporter.
    pub exporter: IpAddr,
    /// Domain.
    pub domain: u32,
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// IP protocol.
    pub proto: u8,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// Sampling rate the records carried.
    pub sampling: u32,
}

/// One row of the archive's flow table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BinRow {
    /// The key.
    #[serde(flatten)]
    pub key: BinKey,
    /// Bin length, milliseconds.
    pub bin_len_ms: u64,
    /// Bytes, corrected by the sampling rate.
    pub bytes: f64,
    /// Packets, corrected by the sampling rate.
    pub packets: f64,
    /// Flow records (their share in this bin).
    pub flows: f64,
    /// Bytes as exported.
    pub raw_bytes: f64,
    /// Packets as exported.
    pub raw_packets: f64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Sums {
    bytes: f64,
    packets: f64,
    flows: f64,
    raw_bytes: f64,
    raw_packets: f64,
}

/// Accumulates flows into bins.
pub struct Binner {
    len_ms: u64,
    // Hashed, not ordered: a collector adds every record here, and an ordered map's key
    // comparisons (addresses, ports) were a quarter of its CPU; rows are sorted when drained.
    sums: HashMap<BinKey, Sums, foldhash::fast::RandomState>,
}

impl Binner {
    /// Bins of `len_ms` milliseconds (aligned to the Unix epoch).
    pub fn new(len_ms: u64) -> Self {
        Binner { len_ms: len_ms.max(1), sums: HashMap::default() }
    }

    /// The bin length.
    pub fn len_ms(&self) -> u64 {
        self.len_ms
    }

    /// Adds one flow.
    pub fn add(&mut self, f: &Flow) {
        let rate = f64::from(f.sampling.max(1));
        let (s, e) = (f.start_ms, f.end_ms.max(f.start_ms));
        let first = s - s % self.len_ms;
        let span = (e - s) as f64;
        let mut bin = first;
        // A flow longer than a day is clipped to its last day of bins (exporters time out
        // long flows every few minutes; this bounds the work for a bad timestamp).
        if e - bin > 86_400_000 {
            bin = (e - 86_400_000) - (e - 86_400_000) % self.len_ms;
        }
        while bin <= e {
            let lo = s.max(bin);
            let hi = e.min(bin.saturating_add(self.len_ms));
            let share = if span == 0.0 { 1.0 } else { (hi.saturating_sub(lo)) as f64 / span };
            if share > 0.0 || span == 0.0 {
                let key = BinKey {
                    bin_ms: bin,
                    exporter: f.exporter,
                    domain: f.domain,
                    src: f.src,
                    dst: f.dst,
                    proto: f.proto,
                    sport: f.sport,
                    dport: f.dport,
                    sampling: f.sampling.max(1),
                };
                let x = self.sums.entry(key).or_default();
                x.raw_bytes += f.bytes as f64 * share;
                x.raw_packets += f.packets as f64 * share;
                x.bytes += f.bytes as f64 * share * rate;
                x.packets += f.packets as f64 * share * rate;
                x.flows += share;
            }
            if span == 0.0 {
                break;
            }
            // A timestamp at the end of time (fuzzing found one) has no next bin.
            match bin.checked_add(self.len_ms) {
                Some(next) => bin = next,
                None => break,
            }
        }
    }

    /// Rows of bins that end at or before `before_ms` (they can get no more flows unless an
    /// exporter is that late), removed from the binner.
    pub fn drain_before(&mut self, before_ms: u64) -> Vec<BinRow> {
        let cut = before_ms.saturating_sub(self.len_ms) + 1;
        let (done, keep): (HashMap<_, _, _>, HashMap<_, _, _>) =
            std::mem::take(&mut self.sums).into_iter().partition(|(k, _)| k.bin_ms < cut);
        self.sums = keep;
        self.rows(done)
    }

    /// Every row, removed from the binner.
    pub fn drain_all(&mut self) -> Vec<BinRow> {
        let all = std::mem::take(&mut self.sums);
        self.rows(all)
    }

    /// Rows held.
    pub fn len(&self) -> usize {
        self.sums.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.sums.is_empty()
    }

    fn rows(&self, m: HashMap<BinKey, Sums, foldhash::fast::RandomState>) -> Vec<BinRow> {
        let mut m: Vec<(BinKey, Sums)> = m.into_iter().collect();
        m.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        m.into_iter()
            .map(|(key, s)| BinRow {
                key,
                bin_len_ms: self.len_ms,
                bytes: s.bytes,
                packets: s.packets,
                flows: s.flows,
                raw_bytes: s.raw_bytes,
                raw_packets: s.raw_packets,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(start: u64, end: u64, bytes: u64, sampling: u32) -> Flow {
        Flow {
            exporter: [198, 18, 0, 1].into(),
            domain: 0,
            src: [198, 18, 1, 1].into(),
            dst: [198, 18, 2, 1].into(),
            proto: 6,
            sport: 40000,
            dport: 5201,
            bytes,
            packets: bytes / 1000,
            start_ms: start,
            end_ms: end,
            sampling,
        }
    }

    #[test]
    fn a_flow_is_spread_over_the_bins_it_spans_by_time() {
        let mut b = Binner::new(300_000);
        // 100 s in the first bin, 200 s in the second.
        b.add(&flow(200_000, 500_000, 3_000_000, 1));
        let rows = b.drain_all();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].key.bin_ms, 0);
        assert!((rows[0].bytes - 1_000_000.0).abs() < 1e-6);
        assert!((rows[1].bytes - 2_000_000.0).abs() < 1e-6);
        let total: f64 = rows.iter().map(|r| r.flows).sum();
        assert!((total - 1.0).abs() < 1e-9);
    }

    #[test]
    fn sampled_flows_are_scaled_and_keep_their_raw_values() {
        let mut b = Binner::new(300_000);
        b.add(&flow(1_000, 1_000, 1_500, 100));
        let r = &b.drain_all()[0];
        assert_eq!((r.raw_bytes, r.bytes, r.key.sampling), (1_500.0, 150_000.0, 100));
    }

    #[test]
    fn only_finished_bins_are_drained() {
        let mut b = Binner::new(300_000);
        b.add(&flow(10_000, 10_000, 100, 1));
        b.add(&flow(310_000, 310_000, 100, 1));
        let done = b.drain_before(300_000);
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].key.bin_ms, 0);
        assert_eq!(b.len(), 1);
        assert!(b.drain_before(300_000).is_empty());
        assert_eq!(b.drain_before(600_000).len(), 1);
    }

    #[test]
    fn a_flow_at_the_end_of_time_is_binned_without_overflow() {
        // Found by fuzzing (flow_export): an exporter's timestamps near u64::MAX ms.
        let mut b = Binner::new(300_000);
        b.add(&flow(u64::MAX - 1_000, u64::MAX, 4_000, 1));
        b.add(&flow(u64::MAX, u64::MAX, 1_000, 1));
        let rows = b.drain_all();
        let total: f64 = rows.iter().map(|r| r.bytes).sum();
        assert!((total - 5_000.0).abs() < 1e-6, "{total}");
    }
}
