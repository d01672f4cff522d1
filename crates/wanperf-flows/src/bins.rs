//! Flows summed into time bins (5 minutes by default), a flow spread over the bins it spans in
//! proportion to the time it spent in each.

use crate::record::Flow;
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

/// What a bin row has summed: the values as exported (the sampling rate is part of the key, so
/// the corrected values are these times the rate).
#[derive(Debug, Clone, Copy, Default)]
struct Sums {
    raw_bytes: f64,
    raw_packets: f64,
    flows: f64,
}

impl Sums {
    #[inline]
    fn add(&mut self, f: &Flow, share: f64) {
        self.raw_bytes += f.bytes as f64 * share;
        self.raw_packets += f.packets as f64 * share;
        self.flows += share;
    }
}

/// The key of the common case — exporter, source and destination all IPv4, a bin index below
/// 2^32 — packed into four words: a row is 56 bytes instead of 112, so the table a collector
/// touches for every record holds twice the rows per cache line, and hashes four words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Key4([u64; 4]);

impl std::hash::Hash for Key4 {
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        for w in self.0 {
            h.write_u64(w);
        }
    }
}

fn v4(a: IpAddr) -> Option<u64> {
    match a {
        IpAddr::V4(a) => Some(u64::from(u32::from(a))),
        IpAddr::V6(_) => None,
    }
}

impl Key4 {
    #[inline]
    fn new(f: &Flow, bin: u64, sampling: u32) -> Option<Key4> {
        let bin = u32::try_from(bin).ok()?;
        Some(Key4([
            u64::from(bin) << 32 | u64::from(f.domain),
            v4(f.exporter)? << 32 | u64::from(sampling),
            v4(f.src)? << 32 | v4(f.dst)?,
            u64::from(f.proto) << 32 | u64::from(f.sport) << 16 | u64::from(f.dport),
        ]))
    }

    fn bin(&self) -> u64 {
        self.0[0] >> 32
    }

    fn key(&self, len_ms: u64) -> BinKey {
        let [a, b, c, d] = self.0;
        let ip = |x: u64| IpAddr::V4(std::net::Ipv4Addr::from(x as u32));
        BinKey {
            bin_ms: (a >> 32) * len_ms,
            exporter: ip(b >> 32),
            domain: a as u32,
            src: ip(c >> 32),
            dst: ip(c),
            proto: (d >> 32) as u8,
            sport: (d >> 16) as u16,
            dport: d as u16,
            sampling: b as u32,
        }
    }
}

type Map<K> = HashMap<K, Sums, foldhash::fast::RandomState>;

/// Accumulates flows into bins.
pub struct Binner {
    len_ms: u64,
    // Hashed, not ordered (an ordered map's key comparisons were a quarter of a collector's
    // CPU); rows are sorted when drained. IPv4 rows packed (`Key4`), the rest keyed in full.
    packed: Map<Key4>,
    wide: Map<BinKey>,
}

impl Binner {
    /// Bins of `len_ms` milliseconds (aligned to the Unix epoch).
    pub fn new(len_ms: u64) -> Self {
        Binner { len_ms: len_ms.max(1), packed: Map::default(), wide: Map::default() }
    }

    /// The bin length.
    pub fn len_ms(&self) -> u64 {
        self.len_ms
    }

    /// Adds one flow.
    pub fn add(&mut self, f: &Flow) {
        let (s, e) = (f.start_ms, f.end_ms.max(f.start_ms));
        let first = s - s % self.len_ms;
        if e - first < self.len_ms {
            // The common case: the flow lies in one bin.
            self.put(f, first, 1.0);
            return;
        }
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
            let share = (hi.saturating_sub(lo)) as f64 / span;
            if share > 0.0 {
                self.put(f, bin, share);
            }
            // A timestamp at the end of time (fuzzing found one) has no next bin.
            match bin.checked_add(self.len_ms) {
                Some(next) => bin = next,
                None => break,
            }
        }
    }

    #[inline]
    fn put(&mut self, f: &Flow, bin_ms: u64, share: f64) {
        let sampling = f.sampling.max(1);
        match Key4::new(f, bin_ms / self.len_ms, sampling) {
            Some(k) => self.packed.entry(k).or_default().add(f, share),
            None => {
                let key = BinKey {
                    bin_ms,
                    exporter: f.exporter,
                    domain: f.domain,
                    src: f.src,
                    dst: f.dst,
                    proto: f.proto,
                    sport: f.sport,
                    dport: f.dport,
                    sampling,
                };
                self.wide.entry(key).or_default().add(f, share)
            }
        }
    }

    /// Rows of bins that end at or before `before_ms` (they can get no more flows unless an
    /// exporter is that late), removed from the binner.
    pub fn drain_before(&mut self, before_ms: u64) -> Vec<BinRow> {
        let cut = before_ms.saturating_sub(self.len_ms) + 1;
        let len = self.len_ms;
        let (done, keep): (Map<_>, Map<_>) =
            std::mem::take(&mut self.packed).into_iter().partition(|(k, _)| k.bin() * len < cut);
        self.packed = keep;
        let (done_wide, keep): (Map<_>, Map<_>) =
            std::mem::take(&mut self.wide).into_iter().partition(|(k, _)| k.bin_ms < cut);
        self.wide = keep;
        self.rows(done, done_wide)
    }

    /// Every row, removed from the binner.
    pub fn drain_all(&mut self) -> Vec<BinRow> {
        let (packed, wide) = (std::mem::take(&mut self.packed), std::mem::take(&mut self.wide));
        self.rows(packed, wide)
    }

    /// Rows held.
    pub fn len(&self) -> usize {
        self.packed.len() + self.wide.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn rows(&self, packed: Map<Key4>, wide: Map<BinKey>) -> Vec<BinRow> {
        let mut m: Vec<(BinKey, Sums)> = packed.into_iter().map(|(k, s)| (k.key(self.len_ms), s)).collect();
        m.extend(wide);
        m.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        m.into_iter()
            .map(|(key, s)| {
                let rate = f64::from(key.sampling);
                BinRow {
                    key,
                    bin_len_ms: self.len_ms,
                    bytes: s.raw_bytes * rate,
                    packets: s.raw_packets * rate,
                    flows: s.flows,
                    raw_bytes: s.raw_bytes,
                    raw_packets: s.raw_packets,
                }
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

    #[test]
    fn ipv6_and_far_bins_are_kept_beside_the_packed_ipv4_rows() {
        let mut b = Binner::new(1);
        let mut six = flow(1_000, 1_000, 600, 1);
        six.src = "fd00::1".parse().unwrap();
        six.dst = "fd00::2".parse().unwrap();
        b.add(&six);
        b.add(&flow(1_000, 1_000, 400, 1));
        b.add(&flow(1_000, 1_000, 400, 1));
        // A bin index past 2^32 (1 ms bins, 2^40 ms) is kept in full too.
        b.add(&flow(1 << 40, 1 << 40, 7, 1));
        assert_eq!(b.len(), 3);
        let rows = b.drain_all();
        let got: Vec<(u64, String, f64)> =
            rows.iter().map(|r| (r.key.bin_ms, r.key.src.to_string(), r.bytes)).collect();
        assert_eq!(
            got,
            [
                (1_000, "198.18.1.1".to_string(), 800.0),
                (1_000, "fd00::1".to_string(), 600.0),
                (1 << 40, "198.18.1.1".to_string(), 7.0)
            ]
        );
        let r = &rows[0];
        assert_eq!(
            (r.key.exporter.to_string(), r.key.dst.to_string(), r.key.proto, r.key.sport, r.key.dport),
            ("198.18.0.1".to_string(), "198.18.2.1".to_string(), 6, 40000, 5201)
        );
        assert_eq!((r.raw_packets, r.flows, r.bin_len_ms), (0.0, 2.0, 1));
    }
}
