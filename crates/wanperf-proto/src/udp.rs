//! Receiver-side UDP accounting: loss, duplicates, reordering and RFC 3550 jitter.
//!
//! Pure: the I/O loop passes each datagram's sequence number, the sender's timestamp and the
//! arrival time; nothing here reads a clock.

use crate::msg::UdpCounters;

const WINDOW: u64 = 1 << 16;

/// Running counters of one UDP flow at the receiver.
#[derive(Debug, Clone)]
pub struct UdpRecvStats {
    distinct: u64,
    max_seq: Option<u64>,
    out_of_order: u64,
    duplicates: u64,
    jitter_ns: f64,
    last_transit_ns: Option<i128>,
    /// Bitmap of seen sequence numbers in (max_seq - WINDOW, max_seq].
    seen: Vec<u64>,
    sender_total: Option<u64>,
}

impl Default for UdpRecvStats {
    fn default() -> Self {
        Self::new()
    }
}

impl UdpRecvStats {
    /// Empty counters.
    pub fn new() -> Self {
        UdpRecvStats {
            distinct: 0,
            max_seq: None,
            out_of_order: 0,
            duplicates: 0,
            jitter_ns: 0.0,
            last_transit_ns: None,
            seen: vec![0; (WINDOW / 64) as usize],
            sender_total: None,
        }
    }

    fn bit(&mut self, seq: u64) -> (&mut u64, u64) {
        let i = (seq % WINDOW) as usize;
        (&mut self.seen[i / 64], 1u64 << (i % 64))
    }

    /// Accounts one datagram. `send_ns` is on the sender's clock, `arrival_ns` on ours; only
    /// differences of their difference matter, so the clocks need not agree. Returns false
    /// for a duplicate.
    pub fn on_packet(&mut self, seq: u64, send_ns: u64, arrival_ns: u64) -> bool {
        match self.max_seq {
            Some(max) if seq <= max => {
                if max - seq >= WINDOW {
                    // Too old to tell a duplicate from a straggler: count it as reordered.
                    self.out_of_order += 1;
                    self.distinct += 1;
                } else {
                    let (word, mask) = self.bit(seq);
                    if *word & mask != 0 {
                        self.duplicates += 1;
                        return false;
                    }
                    *word |= mask;
                    self.out_of_order += 1;
                    self.distinct += 1;
                }
            }
            _ => {
                // Clear the bits of the sequence numbers we skip over (and wrap onto).
                let from = self.max_seq.map_or(0, |m| m + 1);
                if seq - from >= WINDOW {
                    self.seen.iter_mut().for_each(|w| *w = 0);
                } else {
                    for s in from..seq {
                        let (word, mask) = self.bit(s);
                        *word &= !mask;
                    }
                }
                let (word, mask) = self.bit(seq);
                *word |= mask;
                self.max_seq = Some(seq);
                self.distinct += 1;
            }
        }
        let transit = arrival_ns as i128 - send_ns as i128;
        if let Some(prev) = self.last_transit_ns {
            let d = (transit - prev).abs() as f64;
            self.jitter_ns += (d - self.jitter_ns) / 16.0;
        }
        self.last_transit_ns = Some(transit);
        true
    }

    /// Records the sender's end-of-flow count, which makes tail losses countable.
    pub fn on_fin(&mut self, packets_sent: u64) {
        self.sender_total = Some(packets_sent);
    }

    /// Datagrams expected so far: the sender's count if known, else highest sequence + 1.
    pub fn expected(&self) -> u64 {
        let by_seq = self.max_seq.map_or(0, |m| m + 1);
        self.sender_total.map_or(by_seq, |t| t.max(by_seq))
    }

    /// The counters as reported.
    pub fn counters(&self) -> UdpCounters {
        UdpCounters {
            packets: self.distinct,
            lost: self.expected().saturating_sub(self.distinct),
            out_of_order: self.out_of_order,
            duplicates: self.duplicates,
            jitter_ms: self.jitter_ns / 1e6,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(seqs: &[u64]) -> UdpRecvStats {
        let mut s = UdpRecvStats::new();
        for (i, &q) in seqs.iter().enumerate() {
            let _ = s.on_packet(q, q * 1000, q * 1000 + 50 + i as u64);
        }
        s
    }

    #[test]
    fn in_order_no_loss() {
        let c = feed(&[0, 1, 2, 3, 4]).counters();
        assert_eq!((c.packets, c.lost, c.out_of_order, c.duplicates), (5, 0, 0, 0));
    }

    #[test]
    fn gaps_are_losses_until_filled() {
        let s = feed(&[0, 1, 4, 5, 9]);
        assert_eq!(s.counters().lost, 5); // 2,3,6,7,8
        let s = feed(&[0, 1, 4, 2, 5, 3]);
        let c = s.counters();
        assert_eq!((c.lost, c.out_of_order, c.duplicates), (0, 2, 0));
    }

    #[test]
    fn duplicates_not_counted_twice() {
        let c = feed(&[0, 1, 1, 2, 0, 2]).counters();
        assert_eq!((c.packets, c.duplicates, c.lost), (3, 3, 0));
    }

    #[test]
    fn tail_loss_needs_fin() {
        let mut s = feed(&[0, 1, 2]);
        assert_eq!(s.counters().lost, 0);
        s.on_fin(10);
        assert_eq!(s.counters().lost, 7);
    }

    #[test]
    fn exact_loss_every_tenth_over_wraparound() {
        let mut s = UdpRecvStats::new();
        let n = 300_000u64;
        for q in 0..n {
            if q % 10 != 3 {
                assert!(s.on_packet(q, q, q + 7));
            }
        }
        s.on_fin(n);
        let c = s.counters();
        assert_eq!(c.lost, n / 10);
        assert_eq!(c.packets, n - n / 10);
        assert_eq!(c.jitter_ms, 0.0);
    }

    #[test]
    fn jitter_follows_rfc3550() {
        // Transit alternates 0 and 1 ms: |D| = 1 ms each step, J -> 1 ms.
        let mut s = UdpRecvStats::new();
        let mut j = 0.0f64;
        for q in 0..200u64 {
            let extra = if q % 2 == 0 { 0 } else { 1_000_000 };
            assert!(s.on_packet(q, q * 10_000_000, q * 10_000_000 + extra));
            if q > 0 {
                j += (1_000_000.0 - j) / 16.0;
            }
        }
        assert!((s.counters().jitter_ms - j / 1e6).abs() < 1e-9);
        assert!(s.counters().jitter_ms > 0.99);
    }
}
