//! Export loss from sequence numbers, one tracker per exporter and domain.
//!
//! Each protocol counts something different: NetFlow v5 numbers flows, v9 export packets, IPFIX
//! data records, sFlow datagrams. A tracker is told each datagram's sequence number and how many
//! units it carried; a forward jump is that many units lost, a datagram that comes late (a small
//! backward jump) fills the gap it left, and a large jump either way is an exporter restart
//! (counted, never turned into a huge loss).

use serde::{Deserialize, Serialize};

/// Jumps larger than this (either way) are restarts, not loss or reordering.
pub const MAX_GAP: i64 = 1 << 20;

/// The loss seen on one export stream.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seq {
    next: Option<u32>,
    /// Units the exporter sent since the first datagram seen (received + lost).
    pub expected: u64,
    /// Units never received (so far: a late datagram gives its units back).
    pub lost: u64,
    /// Datagrams that came after a later one.
    pub late: u64,
    /// Restarts (or jumps too large to be loss).
    pub resets: u64,
}

impl Seq {
    /// A datagram numbered `seq` that carried `count` units.
    pub fn observe(&mut self, seq: u32, count: u32) {
        if let Some(n) = self.next {
            let gap = i64::from(seq.wrapping_sub(n) as i32);
            if gap > 0 && gap < MAX_GAP {
                self.lost += gap as u64;
                self.expected += gap as u64;
            } else if gap < 0 && gap > -MAX_GAP {
                // Late: its units were counted lost when the gap opened.
                self.late += 1;
                self.lost = self.lost.saturating_sub(u64::from(count));
                return;
            } else if gap != 0 {
                self.resets += 1;
            }
        }
        self.expected += u64::from(count);
        self.next = Some(seq.wrapping_add(count));
    }

    /// Forget where the stream was (the next datagram starts afresh): used when a datagram's
    /// unit count cannot be known (IPFIX data that waited for its template).
    pub fn resync(&mut self) {
        self.next = None;
    }

    /// Lost units as a percentage of those sent.
    pub fn loss_pct(&self) -> f64 {
        if self.expected == 0 {
            0.0
        } else {
            100.0 * self.lost as f64 / self.expected as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_are_lost_and_late_datagrams_give_them_back() {
        let mut s = Seq::default();
        s.observe(100, 10);
        s.observe(110, 10);
        s.observe(130, 10); // 120..130 missing
        assert_eq!((s.expected, s.lost), (40, 10));
        s.observe(120, 10); // it was late
        assert_eq!((s.expected, s.lost, s.late), (40, 0, 1));
        s.observe(140, 5);
        assert_eq!((s.expected, s.lost), (45, 0));
    }

    #[test]
    fn wraps_are_continuous_and_restarts_are_not_loss() {
        let mut s = Seq::default();
        s.observe(u32::MAX - 1, 1);
        s.observe(u32::MAX, 1);
        s.observe(0, 1);
        s.observe(2, 1);
        assert_eq!((s.expected, s.lost, s.resets), (5, 1, 0));
        let mut r = Seq::default();
        r.observe(5_000_000, 1);
        r.observe(1, 1);
        assert_eq!((r.resets, r.lost), (1, 0));
        assert!((Seq { expected: 1000, lost: 10, ..Seq::default() }.loss_pct() - 1.0).abs() < 1e-9);
    }
}
