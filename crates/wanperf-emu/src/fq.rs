//! The queue of one traffic class: a single FIFO, or flow-fair as fq_codel is (RFC 8290).
//!
//! Flow-fair: arrivals are hashed by their 5-tuple into [`FLOWS`] buckets, each a FIFO with its
//! own CoDel state, served by deficit round robin with a one-MTU quantum, new (sparse) flows
//! before old ones. When the class's limit is exceeded the head of the longest flow is dropped,
//! not the arrival, so a greedy flow cannot fill the queue and starve the others. A FIFO is the
//! same structure with one bucket. Pure: times are passed in.

use crate::config::Nanos;
use std::collections::VecDeque;

pub use crate::config::FLOWS;

/// Bytes a flow may send per round (one Ethernet frame, fq_codel's default).
pub const QUANTUM: i64 = 1514;

/// A packet waiting in a queue.
pub(crate) struct Queued<P> {
    pub pkt: P,
    pub len: usize,
    pub segs: u32,
    pub arrival: Nanos,
}

/// CoDel's state (RFC 8289) for one queue.
#[derive(Default)]
pub(crate) struct CoDel {
    first_above: Option<Nanos>,
    dropping: bool,
    drop_next: Nanos,
    count: u32,
}

impl CoDel {
    /// Whether a packet leaving at `now` after waiting `sojourn`, with `backlog` bytes still
    /// queued behind it, is dropped.
    pub fn drop(&mut self, now: Nanos, sojourn: Nanos, backlog: usize, target: Nanos, interval: Nanos) -> bool {
        let ok_to_drop = if sojourn < target || backlog < 1500 {
            self.first_above = None;
            false
        } else {
            match self.first_above {
                None => {
                    self.first_above = Some(now + interval);
                    false
                }
                Some(t) => now >= t,
            }
        };
        if self.dropping {
            if !ok_to_drop {
                self.dropping = false;
                false
            } else if now >= self.drop_next {
                self.count += 1;
                self.drop_next += (interval as f64 / f64::from(self.count).sqrt()) as Nanos;
                true
            } else {
                false
            }
        } else if ok_to_drop {
            self.dropping = true;
            self.count =
                if self.count > 2 && now.saturating_sub(self.drop_next) < 16 * interval { self.count - 2 } else { 1 };
            self.drop_next = now + (interval as f64 / f64::from(self.count).sqrt()) as Nanos;
            true
        } else {
            false
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum List {
    Off,
    New,
    Old,
}

struct Flow<P> {
    q: VecDeque<Queued<P>>,
    bytes: usize,
    deficit: i64,
    codel: CoDel,
    list: List,
}

impl<P> Flow<P> {
    fn new() -> Self {
        Flow { q: VecDeque::new(), bytes: 0, deficit: 0, codel: CoDel::default(), list: List::Off }
    }
}

/// One class's queue.
pub(crate) struct ClassQueue<P> {
    flows: Vec<Flow<P>>,
    buckets: usize,
    new: VecDeque<usize>,
    old: VecDeque<usize>,
    /// Bytes queued.
    pub bytes: usize,
    /// Wire packets queued.
    pub pkts: usize,
}

impl<P> ClassQueue<P> {
    /// A queue of `buckets` flows (1: a FIFO).
    pub fn new(buckets: usize) -> Self {
        let mut q =
            ClassQueue { flows: Vec::new(), buckets: 1, new: VecDeque::new(), old: VecDeque::new(), bytes: 0, pkts: 0 };
        q.set_buckets(buckets);
        q
    }

    /// Changes the number of buckets new arrivals hash into; packets already queued stay in
    /// their flows and are served as before.
    pub fn set_buckets(&mut self, buckets: usize) {
        self.buckets = buckets.max(1);
        while self.flows.len() < self.buckets {
            self.flows.push(Flow::new());
        }
    }

    /// Queues a packet of flow `hash`; returns its bucket.
    pub fn push(&mut self, q: Queued<P>, hash: u32) -> usize {
        let f = hash as usize % self.buckets;
        self.bytes += q.len;
        self.pkts += q.segs as usize;
        let flow = &mut self.flows[f];
        flow.bytes += q.len;
        flow.q.push_back(q);
        if flow.list == List::Off {
            flow.list = List::New;
            flow.deficit = QUANTUM;
            self.new.push_back(f);
        }
        f
    }

    /// When the earliest queued packet arrived.
    pub fn earliest(&self) -> Option<Nanos> {
        if self.pkts == 0 {
            return None;
        }
        self.new.iter().chain(&self.old).filter_map(|&f| self.flows[f].q.front().map(|x| x.arrival)).min()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.pkts == 0
    }

    fn take(&mut self, f: usize) -> Queued<P> {
        let flow = &mut self.flows[f];
        let q = flow.q.pop_front().expect("a queued packet");
        flow.bytes -= q.len;
        self.bytes -= q.len;
        self.pkts -= q.segs as usize;
        q
    }

    /// Moves the flow at the head of the new (or old) list to the tail of the old list.
    fn rotate(&mut self, from_new: bool) {
        let f = if from_new { self.new.pop_front() } else { self.old.pop_front() }.expect("a listed flow");
        self.flows[f].list = List::Old;
        self.old.push_back(f);
    }

    /// The next packet to serialize at `start`, with its bucket: deficit round robin among the
    /// flows whose head has arrived by `start` (at least one must have).
    pub fn pop(&mut self, start: Nanos) -> Option<(Queued<P>, usize)> {
        if self.pkts == 0 {
            return None;
        }
        // One flow listed (always so for a FIFO): its head, without the round robin; it starts
        // afresh when others come.
        if self.new.len() + self.old.len() == 1 {
            if let Some(f) = self.new.pop_front() {
                self.flows[f].list = List::Old;
                self.old.push_back(f);
            }
            let f = *self.old.front()?;
            self.flows[f].deficit = QUANTUM;
            return (!self.flows[f].q.is_empty()).then(|| (self.take(f), f));
        }
        loop {
            let (f, from_new) = match self.new.front() {
                Some(&f) => (f, true),
                None => (*self.old.front()?, false),
            };
            if self.flows[f].deficit <= 0 {
                self.flows[f].deficit += QUANTUM;
                self.rotate(from_new);
                continue;
            }
            match self.flows[f].q.front().map(|x| x.arrival) {
                None => {
                    // An emptied new flow goes behind the old ones once, so that emptying and
                    // refilling does not keep it ahead; an emptied old flow leaves the lists.
                    if from_new && !self.old.is_empty() {
                        self.rotate(true);
                    } else {
                        if from_new {
                            self.new.pop_front();
                        } else {
                            self.old.pop_front();
                        }
                        self.flows[f].list = List::Off;
                    }
                }
                // Arrives after `start` (the link was idle): the others go first.
                Some(a) if a > start => self.rotate(from_new),
                Some(_) => {
                    let q = self.take(f);
                    self.flows[f].deficit -= q.len as i64;
                    return Some((q, f));
                }
            }
        }
    }

    /// Gives back the deficit charged for a packet CoDel dropped as it left: dropping is not
    /// sending.
    pub fn refund(&mut self, f: usize, len: usize) {
        self.flows[f].deficit += len as i64;
    }

    /// Bytes queued in bucket `f`.
    pub fn flow_bytes(&self, f: usize) -> usize {
        self.flows[f].bytes
    }

    /// Bucket `f`'s CoDel state.
    pub fn codel(&mut self, f: usize) -> &mut CoDel {
        &mut self.flows[f].codel
    }

    /// Drops the head of the longest flow (by bytes): what a flow-fair queue does when full.
    /// Returns the packet and its bucket.
    pub fn drop_from_longest(&mut self) -> Option<(Queued<P>, usize)> {
        let f = self.new.iter().chain(&self.old).copied().max_by_key(|&f| self.flows[f].bytes)?;
        if self.flows[f].q.is_empty() {
            return None;
        }
        Some((self.take(f), f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(id: u32, len: usize, at: Nanos) -> Queued<u32> {
        Queued { pkt: id, len, segs: 1, arrival: at }
    }

    #[test]
    fn one_bucket_is_a_fifo() {
        let mut q = ClassQueue::new(1);
        for i in 0..10 {
            q.push(pkt(i, 100 + i as usize * 500, 0), i * 7919);
        }
        let order: Vec<u32> = std::iter::from_fn(|| q.pop(0).map(|(p, _)| p.pkt)).collect();
        assert_eq!(order, (0..10).collect::<Vec<_>>());
        assert!(q.is_empty());
    }

    #[test]
    fn flows_share_bytes_equally_whatever_their_packet_sizes() {
        // Flow 1 sends 1500-byte packets, flow 2 300-byte ones, both backlogged: each gets the
        // same bytes per round.
        let mut q = ClassQueue::new(FLOWS);
        for _ in 0..300 {
            q.push(pkt(1, 1500, 0), 1);
            for _ in 0..5 {
                q.push(pkt(2, 300, 0), 2);
            }
        }
        let mut bytes = [0usize; 3];
        for _ in 0..400 {
            let (p, _) = q.pop(0).unwrap();
            bytes[p.pkt as usize] += p.len;
        }
        let (a, b) = (bytes[1] as f64, bytes[2] as f64);
        assert!((a - b).abs() / (a + b) < 0.02, "flow 1 {a} B, flow 2 {b} B");
    }

    #[test]
    fn a_sparse_flow_goes_before_a_backlogged_one() {
        let mut q = ClassQueue::new(FLOWS);
        for _ in 0..50 {
            q.push(pkt(1, 1500, 0), 1);
        }
        q.pop(0).unwrap();
        q.push(pkt(2, 100, 1), 2);
        // The new flow is served next, ahead of the bulk flow's backlog.
        assert_eq!(q.pop(1).unwrap().0.pkt, 2);
    }

    #[test]
    fn a_full_queue_drops_from_the_longest_flow() {
        let mut q = ClassQueue::new(FLOWS);
        for _ in 0..20 {
            q.push(pkt(1, 1000, 0), 1);
        }
        q.push(pkt(2, 1000, 0), 2);
        let (d, f) = q.drop_from_longest().unwrap();
        assert_eq!((d.pkt, f), (1, 1));
        assert_eq!(q.flow_bytes(1), 19_000);
        assert_eq!(q.flow_bytes(2), 1000);
        assert_eq!((q.bytes, q.pkts), (20_000, 20));
    }

    #[test]
    fn a_packet_that_arrives_after_start_waits() {
        let mut q = ClassQueue::new(FLOWS);
        q.push(pkt(1, 1500, 10), 1);
        q.push(pkt(2, 1500, 5), 2);
        assert_eq!(q.earliest(), Some(5));
        assert_eq!(q.pop(5).unwrap().0.pkt, 2);
        assert_eq!(q.pop(10).unwrap().0.pkt, 1);
        assert_eq!(q.pop(10).map(|x| x.0.pkt), None);
    }

    #[test]
    fn fewer_buckets_keep_queued_packets() {
        let mut q = ClassQueue::new(FLOWS);
        q.push(pkt(1, 100, 0), 500);
        q.push(pkt(2, 100, 0), 7);
        q.set_buckets(1);
        q.push(pkt(3, 100, 0), 500);
        let mut got: Vec<u32> = std::iter::from_fn(|| q.pop(0).map(|(p, _)| p.pkt)).collect();
        got.sort();
        assert_eq!(got, vec![1, 2, 3]);
    }
}
