//! One direction of the emulated link as a pure state machine in (packet, now).
//!
//! Arrivals pass random loss and the policer, wait in their class's queue (strict priority:
//! priority, best effort, scavenger; each a FIFO or flow-fair, [`crate::fq`]), are serialized at the bottleneck rate and then held for
//! the propagation delay. Every packet carries its theoretical departure time, computed from
//! the previous one's, so the I/O loop's sleep error never accumulates: the loop only asks
//! [`Link::next_event`] when to come back and [`Link::pop`] what is due.

use crate::config::{DirConfig, LossModel, Nanos, PolicerAction, QueueLimit, Rate, Trace};
use crate::fq::{ClassQueue, Queued};
use crate::packet::Headers;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Traffic classes, served in this order.
pub const CLASSES: [&str; 3] = ["priority", "best_effort", "scavenger"];
const PRIORITY: usize = 0;
const BEST_EFFORT: usize = 1;
const SCAVENGER: usize = 2;

/// Why a packet did not get through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// Random loss model.
    RandomLoss,
    /// Out of the policer's profile.
    Policer,
    /// Queue full (flow-fair: dropped from the head of the longest flow).
    QueueFull,
    /// CoDel dropped it.
    Aqm,
}

/// An arrival loss and the policer let through: its class, and whether the policer re-marked
/// it into that class.
pub type Admitted = (usize, bool);

/// What happened to an arriving packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Queued in this class.
    Queued(usize),
    /// Queued after the policer re-marked it to the scavenger class.
    Remarked,
    /// Dropped.
    Dropped(DropReason),
}

/// Counters of one class in one direction.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClassCounters {
    /// Packets that arrived.
    pub packets_in: u64,
    /// Bytes that arrived.
    pub bytes_in: u64,
    /// Packets delivered.
    pub packets_out: u64,
    /// Bytes delivered.
    pub bytes_out: u64,
    /// Dropped because the queue was full.
    pub queue_drops: u64,
    /// Dropped by CoDel.
    pub aqm_drops: u64,
    /// Packets the policer decided on (its selector matched them): kept, dropped or
    /// re-marked. Zero with a policer configured means it never acted.
    #[serde(default)]
    pub policed: u64,
    /// Dropped by the policer.
    pub policer_drops: u64,
    /// Re-marked by the policer into the scavenger class.
    pub remarks: u64,
    /// Lost to the random loss model.
    pub random_losses: u64,
    /// Longest time a packet waited in the queue, ns.
    pub max_queue_delay_ns: u64,
    /// Sum of queue waits, ns (mean = sum / packets served).
    pub sum_queue_delay_ns: u64,
    /// Packets that left the queue (served or CoDel-dropped).
    pub dequeued: u64,
}

/// One direction of the link.
pub struct Link<P> {
    cfg: DirConfig,
    rng: SmallRng,
    queues: [ClassQueue<P>; 3],
    busy_until: Nanos,
    trace_idx: usize,
    trace_cycle: u64,
    in_flight: BinaryHeap<Reverse<(Nanos, u64, usize)>>,
    slots: Vec<Option<(P, usize, u32, usize)>>,
    free: Vec<usize>,
    seq: u64,
    last_deliver: Nanos,
    ge_bad: bool,
    tokens: f64,
    tokens_at: Nanos,
    counters: [ClassCounters; 3],
    remark_hook: Option<fn(&mut P)>,
}

impl<P> Link<P> {
    /// A link direction; `seed` makes loss and jitter reproducible.
    pub fn new(cfg: DirConfig, seed: u64) -> Self {
        let tokens = cfg.policer.map_or(0.0, |p| p.burst_bytes as f64);
        let b = cfg.aqm.buckets();
        Link {
            cfg,
            rng: SmallRng::seed_from_u64(seed),
            queues: [ClassQueue::new(b), ClassQueue::new(b), ClassQueue::new(b)],
            busy_until: 0,
            trace_idx: 0,
            trace_cycle: 0,
            in_flight: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            seq: 0,
            last_deliver: 0,
            ge_bad: false,
            tokens,
            tokens_at: 0,
            counters: Default::default(),
            remark_hook: None,
        }
    }

    /// Changes the link's configuration while it runs (`net set`): packets already queued or
    /// in flight keep their times; new arrivals meet the new rate, delay, queue, loss and
    /// policer (whose bucket starts full).
    pub fn set_config(&mut self, cfg: DirConfig) {
        if cfg.policer != self.cfg.policer {
            self.tokens = cfg.policer.map_or(0.0, |p| p.burst_bytes as f64);
        }
        if cfg.rate != self.cfg.rate {
            self.trace_idx = 0;
            self.trace_cycle = 0;
        }
        self.queues.iter_mut().for_each(|q| q.set_buckets(cfg.aqm.buckets()));
        self.cfg = cfg;
    }

    /// The current configuration.
    pub fn config(&self) -> &DirConfig {
        &self.cfg
    }

    /// Sets what re-marking does to a packet's bytes (the runtime rewrites its DSCP).
    pub fn set_remark_hook(&mut self, hook: fn(&mut P)) {
        self.remark_hook = Some(hook);
    }

    /// Counters per class ([`CLASSES`] order).
    pub fn counters(&self) -> &[ClassCounters; 3] {
        &self.counters
    }

    fn classify(&self, h: &Headers) -> usize {
        if self.cfg.priority.iter().any(|s| s.matches(h)) {
            PRIORITY
        } else {
            BEST_EFFORT
        }
    }

    fn lose(&mut self, len: usize) -> bool {
        match self.cfg.loss {
            LossModel::None => false,
            LossModel::Bernoulli(p) => p > 0.0 && self.rng.random::<f64>() < p,
            LossModel::Ber(b) => self.rng.random::<f64>() < crate::config::ber_loss(b, len),
            LossModel::GilbertElliott { p, r, h, k } => {
                let flip = self.rng.random::<f64>();
                self.ge_bad = if self.ge_bad { flip >= r } else { flip < p };
                let deliver = if self.ge_bad { h } else { k };
                self.rng.random::<f64>() >= deliver
            }
        }
    }

    /// A packet of `len` bytes arrives at `now`.
    pub fn push(&mut self, now: Nanos, pkt: P, len: usize, h: Headers) -> Verdict {
        self.push_segments(now, pkt, len, 1, h)
    }

    /// A segmentation-offload packet arrives: `segs` wire packets of `wire_len` bytes in all,
    /// kept together. Serialization, queue limits and counters use the wire figures; loss and
    /// the policer decide for the whole (the runtime asks [`Link::admit_segments`] instead
    /// where they are configured).
    pub fn push_segments(&mut self, now: Nanos, mut pkt: P, wire_len: usize, segs: u32, h: Headers) -> Verdict {
        let segs = segs.max(1);
        self.advance(now);
        match self.admit(now, wire_len, segs, &h) {
            Err(reason) => Verdict::Dropped(reason),
            Ok(admitted) => {
                if admitted.1 {
                    if let Some(hook) = self.remark_hook {
                        hook(&mut pkt);
                    }
                }
                self.enqueue(now, pkt, wire_len, segs, admitted, h)
            }
        }
    }

    /// Whether arrivals need a decision of their own (random loss or a policer is configured):
    /// then each segment of a super-packet is decided on ([`Link::admit_segments`]).
    pub fn decides_per_packet(&self) -> bool {
        self.cfg.loss != LossModel::None || self.cfg.policer.is_some()
    }

    /// Random loss and the policer decide for each segment of a super-packet arriving at
    /// `now` (`seg_lens`: their wire lengths, in order) exactly as for the same segments
    /// pushed one at a time: the policer's tokens spent segment by segment, every segment
    /// counted as an arrival, and one loss draw per segment in order — the same draws where
    /// the link has no jitter (jitter shares the generator and is drawn as packets leave, so
    /// with jitter the draws interleave differently: the same distribution, other values). Each passing segment's
    /// class is then queued with [`Link::push_admitted`]: the whole super-packet where all
    /// passed alike, else each segment alone.
    pub fn admit_segments(&mut self, now: Nanos, seg_lens: &[usize], h: &Headers) -> Vec<Result<Admitted, DropReason>> {
        self.advance(now);
        seg_lens.iter().map(|&len| self.admit(now, len, 1, h)).collect()
    }

    /// Queues what [`Link::admit_segments`] let through (`segs` of its segments, `wire_len`
    /// bytes), re-marked if the policer said so.
    pub fn push_admitted(
        &mut self,
        now: Nanos,
        mut pkt: P,
        wire_len: usize,
        segs: u32,
        admitted: Admitted,
        h: Headers,
    ) -> Verdict {
        if admitted.1 {
            if let Some(hook) = self.remark_hook {
                hook(&mut pkt);
            }
        }
        self.advance(now);
        self.enqueue(now, pkt, wire_len, segs.max(1), admitted, h)
    }

    /// An arrival of `segs` wire packets, `len` bytes, counted and passed through random loss
    /// and the policer: its class and whether the policer re-marked it, or why it was dropped.
    fn admit(&mut self, now: Nanos, len: usize, segs: u32, h: &Headers) -> Result<Admitted, DropReason> {
        let class = self.classify(h);
        self.counters[class].packets_in += u64::from(segs);
        self.counters[class].bytes_in += len as u64;
        if self.lose(len) {
            self.counters[class].random_losses += 1;
            return Err(DropReason::RandomLoss);
        }
        if let Some(pol) = self.cfg.policer {
            if pol.selector.is_none_or(|s| s.matches(h)) {
                self.counters[class].policed += u64::from(segs);
                let dt = now.saturating_sub(self.tokens_at) as f64 / 1e9;
                self.tokens = (self.tokens + dt * pol.rate_bps as f64 / 8.0).min(pol.burst_bytes as f64);
                self.tokens_at = now;
                if self.tokens >= len as f64 {
                    self.tokens -= len as f64;
                } else {
                    match pol.action {
                        PolicerAction::Drop => {
                            self.counters[class].policer_drops += 1;
                            return Err(DropReason::Policer);
                        }
                        PolicerAction::Remark => {
                            self.counters[class].remarks += 1;
                            return Ok((SCAVENGER, true));
                        }
                    }
                }
            }
        }
        Ok((class, false))
    }

    /// Queues an admitted arrival in its class (a FIFO drops it when full, a flow-fair queue
    /// drops from its longest flow).
    fn enqueue(
        &mut self,
        now: Nanos,
        pkt: P,
        len: usize,
        segs: u32,
        (class, remarked): Admitted,
        h: Headers,
    ) -> Verdict {
        let limit = self.cfg.queue;
        let over = |q: &ClassQueue<P>, len: usize, segs: u32| match limit {
            QueueLimit::Packets(n) => q.pkts + segs as usize > n,
            QueueLimit::Bytes(b) => q.bytes + len > b,
        };
        // A FIFO drops the arrival; a flow-fair queue takes it and drops from the longest flow,
        // unless it could never fit.
        let fair = self.cfg.aqm.buckets() > 1;
        let never_fits = match limit {
            QueueLimit::Packets(n) => segs as usize > n,
            QueueLimit::Bytes(b) => len > b,
        };
        let queue = &mut self.queues[class];
        if over(queue, len, segs) && (!fair || never_fits) {
            self.counters[class].queue_drops += u64::from(segs);
            return Verdict::Dropped(DropReason::QueueFull);
        }
        let f = queue.push(Queued { pkt, len, segs, arrival: now }, h.flow);
        let mut arrival_dropped = false;
        while over(queue, 0, 0) {
            let Some((d, from)) = queue.drop_from_longest() else { break };
            self.counters[class].queue_drops += u64::from(d.segs);
            arrival_dropped |= from == f && queue.flow_bytes(f) == 0;
        }
        self.advance(now);
        if arrival_dropped {
            return Verdict::Dropped(DropReason::QueueFull);
        }
        if remarked {
            Verdict::Remarked
        } else {
            Verdict::Queued(class)
        }
    }

    /// Transmission time of `len` bytes starting at `start`: when the last bit has left.
    fn transmit_end(&mut self, len: usize, start: Nanos) -> Nanos {
        match &self.cfg.rate {
            Rate::Unlimited => start,
            Rate::Constant(bps) => start + (len as u128 * 8 * 1_000_000_000 / u128::from(*bps)) as Nanos,
            Rate::Trace(t) => {
                let needed = len.div_ceil(Trace::OPPORTUNITY_BYTES).max(1);
                let period = t.period_ms * 1_000_000;
                // Skip whole idle periods at once.
                let at = |cycle: u64, idx: usize| cycle * period + t.opportunities_ms[idx] * 1_000_000;
                if at(self.trace_cycle, self.trace_idx) + period < start {
                    self.trace_cycle = start / period;
                    self.trace_idx = 0;
                }
                let mut last = start;
                let mut used = 0;
                while used < needed {
                    let ot = at(self.trace_cycle, self.trace_idx);
                    self.trace_idx += 1;
                    if self.trace_idx == t.opportunities_ms.len() {
                        self.trace_idx = 0;
                        self.trace_cycle += 1;
                    }
                    // Opportunities that pass before the packet is ready go unused, as on a
                    // real link.
                    if ot >= start {
                        last = ot;
                        used += 1;
                    }
                }
                last
            }
        }
    }

    /// Serializes every packet whose transmission starts by `now`.
    fn advance(&mut self, now: Nanos) {
        loop {
            // Each class's earliest arrival, once per packet (a flow-fair queue looks at every
            // active flow for it).
            let heads = self.queues.each_ref().map(ClassQueue::earliest);
            let Some(earliest) = heads.iter().flatten().min() else {
                return;
            };
            let start = self.busy_until.max(*earliest);
            if start > now {
                return;
            }
            // Strict priority among what has arrived by the time the link is free.
            let class =
                (0..3).find(|&c| heads[c].is_some_and(|a| a <= start)).expect("a queued packet has arrived by `start`");
            let queue = &mut self.queues[class];
            let (q, flow) = queue.pop(start).expect("a queued packet has arrived by `start`");
            let sojourn = start - q.arrival;
            let c = &mut self.counters[class];
            c.dequeued += 1;
            c.sum_queue_delay_ns += sojourn;
            c.max_queue_delay_ns = c.max_queue_delay_ns.max(sojourn);
            if let Some((target, interval)) = self.cfg.aqm.codel_params() {
                let backlog = queue.flow_bytes(flow);
                if queue.codel(flow).drop(start, sojourn, backlog, target, interval) {
                    queue.refund(flow, q.len);
                    c.aqm_drops += 1;
                    continue;
                }
            }
            let end = self.transmit_end(q.len, start);
            self.busy_until = end;
            let jitter = if self.cfg.jitter_ns > 0 { self.rng.random_range(0..=self.cfg.jitter_ns) } else { 0 };
            let mut deliver = end + self.cfg.delay_ns + jitter;
            if !self.cfg.reorder {
                deliver = deliver.max(self.last_deliver);
            }
            self.last_deliver = self.last_deliver.max(deliver);
            let slot = match self.free.pop() {
                Some(i) => {
                    self.slots[i] = Some((q.pkt, q.len, q.segs, class));
                    i
                }
                None => {
                    self.slots.push(Some((q.pkt, q.len, q.segs, class)));
                    self.slots.len() - 1
                }
            };
            self.seq += 1;
            self.in_flight.push(Reverse((deliver, self.seq, slot)));
        }
    }

    /// The next packet due for delivery by `now`, with its theoretical delivery time.
    pub fn pop(&mut self, now: Nanos) -> Option<(P, Nanos)> {
        self.advance(now);
        let &Reverse((at, _, slot)) = self.in_flight.peek()?;
        if at > now {
            return None;
        }
        self.in_flight.pop();
        let (pkt, len, segs, class) = self.slots[slot].take().expect("slot in use");
        self.free.push(slot);
        self.counters[class].packets_out += u64::from(segs);
        self.counters[class].bytes_out += len as u64;
        Some((pkt, at))
    }

    /// When something next happens (a delivery or a transmission start), if anything is pending.
    pub fn next_event(&self) -> Option<Nanos> {
        let deliver = self.in_flight.peek().map(|Reverse((t, _, _))| *t);
        let tx = self.queues.iter().filter_map(ClassQueue::earliest).min().map(|a| a.max(self.busy_until));
        match (deliver, tx) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether the transmitter is free and nothing waits: a pulling reader may take the next
    /// packet from the host's interface queue.
    pub fn idle(&self, now: Nanos) -> bool {
        self.busy_until <= now && self.queues.iter().all(ClassQueue::is_empty)
    }

    /// When the transmitter finishes its current packet.
    pub fn free_at(&self) -> Nanos {
        self.busy_until
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Aqm, PolicerConfig, Selector};

    const MS: Nanos = 1_000_000;

    fn drain(l: &mut Link<u32>, until: Nanos) -> Vec<(u32, Nanos)> {
        let mut out = Vec::new();
        while let Some(t) = l.next_event() {
            if t > until {
                break;
            }
            while let Some(x) = l.pop(t) {
                out.push(x);
            }
        }
        out
    }

    #[test]
    fn pure_delay_is_exact() {
        let mut l = Link::new(DirConfig { delay_ns: 50 * MS, ..Default::default() }, 1);
        for i in 0..100u32 {
            l.push(u64::from(i) * 7_777, i, 1500, Headers::default());
        }
        let out = drain(&mut l, u64::MAX);
        assert_eq!(out.len(), 100);
        for (i, (id, at)) in out.iter().enumerate() {
            assert_eq!(*id, i as u32);
            assert_eq!(*at, i as u64 * 7_777 + 50 * MS);
        }
    }

    #[test]
    fn rate_serializes_back_to_back() {
        // 12 Mbit/s: a 1500 B packet takes exactly 1 ms.
        let mut l =
            Link::new(DirConfig { rate: Rate::Constant(12_000_000), delay_ns: 10 * MS, ..Default::default() }, 1);
        for i in 0..10u32 {
            assert_eq!(l.push(0, i, 1500, Headers::default()), Verdict::Queued(1));
        }
        let out = drain(&mut l, u64::MAX);
        let times: Vec<Nanos> = out.iter().map(|x| x.1).collect();
        let want: Vec<Nanos> = (1..=10).map(|k| k * MS + 10 * MS).collect();
        assert_eq!(times, want);
        let c = &l.counters()[1];
        assert_eq!(c.max_queue_delay_ns, 9 * MS);
        assert_eq!(c.sum_queue_delay_ns, 45 * MS);
    }

    #[test]
    fn a_super_packets_segments_meet_loss_and_the_policer_as_if_sent_alone() {
        // 30 super-packets of 10 segments of 1500 B, 1 ms apart, into a 100 Mbit/s link with
        // 2 % random loss and a 50 Mbit/s policer (burst 30 kB); the same 300 segments pushed
        // one at a time into a link with the same seed. Loss draws once per segment in order
        // and the policer spends its tokens segment by segment, so the two make the same
        // decisions: the same segments dropped for the same reasons, the same counters, and
        // where every segment of a super-packet passed, its departure is its last segment's.
        for action in [PolicerAction::Drop, PolicerAction::Remark] {
            let pol = PolicerConfig { rate_bps: 50_000_000, burst_bytes: 30_000, selector: None, action };
            let cfg = DirConfig {
                rate: Rate::Constant(100_000_000),
                delay_ns: 5 * MS,
                loss: LossModel::Bernoulli(0.02),
                policer: Some(pol),
                ..Default::default()
            };
            let (mut batched, mut single) = (Link::new(cfg.clone(), 7), Link::new(cfg, 7));
            assert!(batched.decides_per_packet());
            let (mut split_fates, mut single_fates) = (Vec::new(), Vec::new());
            let mut whole = Vec::new();
            for k in 0..30u32 {
                let now = u64::from(k) * MS;
                let fates = batched.admit_segments(now, &[1500; 10], &Headers::default());
                if fates.iter().all(|f| f == &fates[0]) && fates[0].is_ok() {
                    batched.push_admitted(now, k * 10 + 9, 15_000, 10, fates[0].unwrap(), Headers::default());
                    whole.push(k);
                } else {
                    for (i, f) in fates.iter().enumerate() {
                        if let Ok(a) = f {
                            batched.push_admitted(now, k * 10 + i as u32, 1500, 1, *a, Headers::default());
                        }
                    }
                }
                split_fates.extend(fates.iter().map(|f| (*f).map(|a| a.0)));
                for i in 0..10 {
                    let v = single.push(now, k * 10 + i, 1500, Headers::default());
                    single_fates.push(match v {
                        Verdict::Queued(c) => Ok(c),
                        Verdict::Remarked => Ok(SCAVENGER),
                        Verdict::Dropped(r) => Err(r),
                    });
                }
            }
            assert_eq!(split_fates, single_fates, "{action:?}");
            let dropped = single_fates.iter().filter(|f| f.is_err()).count();
            assert!(dropped >= 3 && !whole.is_empty() && whole.len() < 30, "{dropped} dropped, {} whole", whole.len());
            let (cb, cs) = (batched.counters(), single.counters());
            for c in 0..3 {
                let k = |x: &ClassCounters| {
                    (x.packets_in, x.bytes_in, x.random_losses, x.policed, x.policer_drops, x.remarks)
                };
                assert_eq!(k(&cb[c]), k(&cs[c]), "class {c}, {action:?}");
            }
            // Departures: a whole super-packet leaves when its last segment would have.
            let (ob, os) = (drain(&mut batched, u64::MAX), drain(&mut single, u64::MAX));
            for k in whole {
                let id = k * 10 + 9;
                let at = |o: &[(u32, Nanos)]| o.iter().find(|x| x.0 == id).map(|x| x.1);
                assert_eq!(at(&ob), at(&os), "super-packet {k}, {action:?}");
            }
        }
    }

    #[test]
    fn offload_packets_count_as_their_segments() {
        // 10 segments of 1500 B at 12 Mbit/s take 10 ms on the wire; a 15-packet queue holds one.
        let cfg = DirConfig { rate: Rate::Constant(12_000_000), queue: QueueLimit::Packets(15), ..Default::default() };
        let mut l = Link::new(cfg, 1);
        assert_eq!(l.push_segments(0, 1u32, 15_000, 10, Headers::default()), Verdict::Queued(1));
        assert_eq!(l.push_segments(0, 2u32, 15_000, 10, Headers::default()), Verdict::Queued(1));
        assert_eq!(l.push_segments(0, 3u32, 15_000, 10, Headers::default()), Verdict::Dropped(DropReason::QueueFull));
        let out = drain(&mut l, u64::MAX);
        assert_eq!(out.iter().map(|x| x.1).collect::<Vec<_>>(), vec![10 * MS, 20 * MS]);
        assert_eq!(l.counters()[1].packets_out, 20);
        assert_eq!(l.counters()[1].queue_drops, 10);
    }

    #[test]
    fn queue_bounds_in_packets_and_bytes() {
        let mut l = Link::new(
            DirConfig { rate: Rate::Constant(1_000_000), queue: QueueLimit::Packets(5), ..Default::default() },
            1,
        );
        let v: Vec<Verdict> = (0..10u32).map(|i| l.push(0, i, 1000, Headers::default())).collect();
        // The first is in service at once, five wait, the rest are dropped.
        assert_eq!(v.iter().filter(|x| matches!(x, Verdict::Queued(_))).count(), 6);
        assert_eq!(l.counters()[1].queue_drops, 4);
        let mut l = Link::new(
            DirConfig { rate: Rate::Constant(1_000_000), queue: QueueLimit::Bytes(2500), ..Default::default() },
            1,
        );
        let v: Vec<Verdict> = (0..5u32).map(|i| l.push(0, i, 1000, Headers::default())).collect();
        assert_eq!(v.iter().filter(|x| matches!(x, Verdict::Queued(_))).count(), 3);
    }

    #[test]
    fn full_queue_adds_queue_over_rate() {
        // 25 Mbit/s and a 300 kB queue: a standing queue adds about 100 ms (seed 000's sum).
        let cfg =
            DirConfig { rate: Rate::Constant(25_000_000), queue: QueueLimit::Bytes(300_000), ..Default::default() };
        let mut l = Link::new(cfg, 1);
        let mut t = 0;
        let mut last = 0;
        for i in 0..2000u32 {
            // Arrivals at 50 Mbit/s keep the queue full.
            l.push(t, i, 1500, Headers::default());
            t += 240_000;
            while let Some((_, at)) = l.pop(t) {
                last = at;
            }
        }
        let _ = last;
        let c = &l.counters()[1];
        let want = 300_000.0 * 8.0 / 25e6;
        let got = c.max_queue_delay_ns as f64 / 1e9;
        assert!((got - want).abs() / want < 0.02, "max queue delay {got} s, want {want} s");
        // Half of 2000 offered at twice the rate is dropped, less the 200 the queue absorbs.
        assert!((750..=850).contains(&c.queue_drops), "{}", c.queue_drops);
    }

    #[test]
    fn policer_conforms_and_burst_lets_more_through() {
        let run = |burst: u64| {
            let pol =
                PolicerConfig { rate_bps: 8_000_000, burst_bytes: burst, selector: None, action: PolicerAction::Drop };
            let mut l = Link::new(
                DirConfig { policer: Some(pol), queue: QueueLimit::Packets(1_000_000), ..Default::default() },
                1,
            );
            // Offer 80 Mbit/s for 10 s in 1000 B packets.
            let mut passed_first_s = 0u64;
            let mut passed = 0u64;
            for i in 0..100_000u64 {
                let now = i * 100_000;
                if matches!(l.push(now, 0u32, 1000, Headers::default()), Verdict::Queued(_)) {
                    passed += 1000;
                    if now < 1_000_000_000 {
                        passed_first_s += 1000;
                    }
                }
            }
            (passed, passed_first_s)
        };
        let (small, small_1s) = run(10_000);
        let (big, big_1s) = run(1_000_000);
        // 8 Mbit/s for 10 s = 10 MB, plus at most the burst.
        assert!((9_900_000..=10_010_000).contains(&small), "{small}");
        assert!(big <= 10_000_000 + 1_000_000, "{big}");
        assert!(big_1s > small_1s + 900_000, "burst-size-limit: {big_1s} vs {small_1s}");
    }

    #[test]
    fn policer_selects_and_remarks_to_scavenger() {
        let pol = PolicerConfig {
            rate_bps: 1_000_000,
            burst_bytes: 1500,
            selector: Some(Selector::Dscp(46)),
            action: PolicerAction::Remark,
        };
        let mut l =
            Link::new(DirConfig { policer: Some(pol), rate: Rate::Constant(1_000_000_000), ..Default::default() }, 1);
        let ef = Headers { dscp: 46, ..Default::default() };
        assert_eq!(l.push(0, 1u32, 1500, ef), Verdict::Queued(1));
        assert_eq!(l.push(0, 2u32, 1500, ef), Verdict::Remarked);
        assert_eq!(l.push(0, 3u32, 1500, Headers::default()), Verdict::Queued(1), "other classes are not policed");
        assert_eq!(l.counters()[1].remarks, 1);
    }

    #[test]
    fn strict_priority_serves_priority_first() {
        let cfg =
            DirConfig { rate: Rate::Constant(12_000_000), priority: vec![Selector::Port(7)], ..Default::default() };
        let mut l = Link::new(cfg, 1);
        for i in 0..5u32 {
            l.push(0, i, 1500, Headers::default());
        }
        let hi = Headers { proto: 17, dst_port: 7, ..Default::default() };
        l.push(10, 99, 1500, hi);
        let order: Vec<u32> = drain(&mut l, u64::MAX).into_iter().map(|x| x.0).collect();
        // Packet 0 was already on the wire; the priority packet goes next.
        assert_eq!(order, vec![0, 99, 1, 2, 3, 4]);
    }

    #[test]
    fn bernoulli_loss_within_bounds_and_seeded() {
        let n = 100_000u32;
        let count = |seed| {
            let mut l = Link::new(
                DirConfig {
                    loss: LossModel::Bernoulli(0.02),
                    queue: QueueLimit::Packets(usize::MAX),
                    ..Default::default()
                },
                seed,
            );
            (0..n)
                .filter(|&i| {
                    l.push(u64::from(i), i, 100, Headers::default()) == Verdict::Dropped(DropReason::RandomLoss)
                })
                .count()
        };
        let a = count(7);
        assert_eq!(a, count(7), "same seed, same losses");
        let mean = f64::from(n) * 0.02;
        let sd = (f64::from(n) * 0.02 * 0.98).sqrt();
        assert!((a as f64 - mean).abs() < 4.0 * sd, "{a} losses, expected {mean} ± {sd}");
    }

    #[test]
    fn gilbert_elliott_mean_and_burstiness() {
        let model = LossModel::GilbertElliott { p: 0.01, r: 0.25, h: 0.0, k: 1.0 };
        let mut l =
            Link::new(DirConfig { loss: model, queue: QueueLimit::Packets(usize::MAX), ..Default::default() }, 3);
        let n = 200_000u32;
        let lost: Vec<bool> = (0..n)
            .map(|i| l.push(u64::from(i), i, 100, Headers::default()) == Verdict::Dropped(DropReason::RandomLoss))
            .collect();
        let rate = lost.iter().filter(|x| **x).count() as f64 / f64::from(n);
        assert!((rate - model.mean_loss()).abs() < 0.006, "{rate} vs {}", model.mean_loss());
        // Mean burst length 1/r = 4.
        let bursts = lost.windows(2).filter(|w| !w[0] && w[1]).count();
        let mean_burst = lost.iter().filter(|x| **x).count() as f64 / bursts as f64;
        assert!((mean_burst - 4.0).abs() < 0.5, "mean burst {mean_burst}");
    }

    #[test]
    fn bit_errors_lose_big_packets_more_often_than_small_ones() {
        // Seed 001: 1 in 10^6 bits wrong loses about 1.19 % of 1500-byte packets and 0.08 % of
        // 100-byte ones.
        let model = LossModel::Ber(1e-6);
        let mut l =
            Link::new(DirConfig { loss: model, queue: QueueLimit::Packets(usize::MAX), ..Default::default() }, 5);
        let n = 100_000u32;
        let mut lost = |len: usize| {
            (0..n)
                .filter(|&i| {
                    l.push(u64::from(i), i, len, Headers::default()) == Verdict::Dropped(DropReason::RandomLoss)
                })
                .count() as f64
        };
        for (len, got) in [(1500, lost(1500)), (100, lost(100))] {
            let p = crate::config::ber_loss(1e-6, len);
            let (mean, sd) = (f64::from(n) * p, (f64::from(n) * p * (1.0 - p)).sqrt());
            assert!((got - mean).abs() < 4.0 * sd, "{len} B: {got} lost, expected {mean:.0} ± {sd:.1}");
        }
        assert!((crate::config::ber_loss(1e-6, 1500) - 0.011929).abs() < 1e-5);
        assert_eq!(LossModel::parse("ber:1e-7"), Ok(LossModel::Ber(1e-7)));
        assert!(LossModel::parse("ber:0.5").is_err() && LossModel::parse("ber:x").is_err());
    }

    #[test]
    fn jitter_never_reorders_unless_asked() {
        let cfg = DirConfig { delay_ns: 10 * MS, jitter_ns: 5 * MS, ..Default::default() };
        let mut l = Link::new(cfg.clone(), 9);
        for i in 0..1000u32 {
            l.push(u64::from(i) * 100_000, i, 100, Headers::default());
        }
        let out = drain(&mut l, u64::MAX);
        assert!(out.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        assert!(
            out.iter()
                .enumerate()
                .all(|(i, x)| x.1 >= i as u64 * 100_000 + 10 * MS && x.1 <= i as u64 * 100_000 + 15 * MS
                    || x.1 >= 10 * MS)
        );
        let mut l = Link::new(DirConfig { reorder: true, ..cfg }, 9);
        for i in 0..1000u32 {
            l.push(u64::from(i) * 100_000, i, 100, Headers::default());
        }
        let out = drain(&mut l, u64::MAX);
        assert!(out.windows(2).any(|w| w[0].0 > w[1].0), "reordering allowed and expected");
        assert!(out.windows(2).all(|w| w[0].1 <= w[1].1), "delivered in time order");
    }

    #[test]
    fn trace_rate_delivers_at_opportunities() {
        let trace = Trace::parse("t", "1\n2\n3\n10\n").unwrap();
        let mut l = Link::new(DirConfig { rate: Rate::Trace(trace), ..Default::default() }, 1);
        for i in 0..6u32 {
            l.push(0, i, 1500, Headers::default());
        }
        let times: Vec<Nanos> = drain(&mut l, u64::MAX).into_iter().map(|x| x.1 / MS).collect();
        assert_eq!(times, vec![1, 2, 3, 10, 11, 12]);
    }

    #[test]
    fn codel_keeps_sojourn_near_target() {
        let cfg = DirConfig {
            rate: Rate::Constant(10_000_000),
            queue: QueueLimit::Packets(10_000),
            aqm: Aqm::codel(),
            ..Default::default()
        };
        let mut l = Link::new(cfg, 1);
        // Offer 20 Mbit/s for 5 s: droptail would build a huge queue; CoDel must not.
        let mut t = 0;
        let mut recent = Vec::new();
        for i in 0..8_333u32 {
            l.push(t, i, 1500, Headers::default());
            t += 600_000;
            while let Some((_, _)) = l.pop(t) {}
            if t > 4_000_000_000 {
                recent.push(l.queues[1].pkts);
            }
        }
        assert!(l.counters()[1].aqm_drops > 0);
        // With no response from senders CoDel cannot hold 5 ms, but it drops enough to stay
        // far below the 10 000-packet limit.
        let max_q = recent.iter().max().copied().unwrap_or(0);
        assert!(max_q < 5000, "queue {max_q} packets");
    }

    /// A greedy flow offering 4× the link rate and a light one offering half of it, 2 s at
    /// 12 Mbit/s with a 30-packet queue: (light flow's packets sent, delivered, its worst
    /// queue delay in ns, greedy flow's delivered).
    fn greedy_and_light(aqm: Aqm) -> (u32, u32, Nanos, u32) {
        let cfg =
            DirConfig { rate: Rate::Constant(12_000_000), queue: QueueLimit::Packets(30), aqm, ..Default::default() };
        let mut l: Link<(u32, Nanos)> = Link::new(cfg, 1);
        let (greedy, light) = (Headers { flow: 1, ..Default::default() }, Headers { flow: 2, ..Default::default() });
        let (mut sent, mut got, mut worst, mut bulk) = (0, 0, 0, 0);
        let mut t = 0;
        while t < 2_000 * MS {
            // The greedy flow every 250 µs, the light one every 2 ms in between.
            if t % (MS / 4) == 0 {
                l.push(t, (1, t), 1500, greedy);
            }
            if t % (2 * MS) == MS / 8 {
                l.push(t, (2, t), 1500, light);
                sent += 1;
            }
            t += MS / 8;
            while let Some(((flow, at), left)) = l.pop(t) {
                if flow == 2 {
                    got += 1;
                    worst = worst.max(left - at);
                } else {
                    bulk += 1;
                }
            }
        }
        // What is still queued of the light flow.
        while let Some(((flow, at), left)) = l.pop(t + 100 * MS) {
            if flow == 2 {
                got += 1;
                worst = worst.max(left - at);
            }
        }
        (sent, got, worst, bulk)
    }

    #[test]
    fn flow_fair_queue_protects_a_light_flow_from_a_greedy_one() {
        // Droptail: the greedy flow keeps the queue full, so the light one is dropped.
        let (sent, got, _, _) = greedy_and_light(Aqm::DropTail);
        assert!(got < sent / 10, "droptail delivered {got} of {sent}");
        // Flow-fair: it asks for less than its fair half, so it loses nothing, and it waits at
        // most the deficit round robin's bound, not behind the 30 ms of a full FIFO: the
        // packet on the wire, a round of both flows (up to a quantum plus one packet each),
        // then its own serialization — 1 + 2 × 2 + 1 ms at 1 ms a packet.
        let (sent, got, worst, bulk) = greedy_and_light(Aqm::Fq);
        assert_eq!(got, sent, "fq lost light packets");
        assert!(worst <= 6 * MS, "fq worst delay {worst} ns");
        // The greedy flow gets the rest of the link: 2 s × 1000 packets/s in all.
        assert!((1995..=2001).contains(&(bulk + got)), "link not kept busy: {bulk} + {got}");
    }

    #[test]
    fn flow_fair_queue_splits_a_link_evenly_among_backlogged_flows() {
        // Eight flows offering 1, 2, … 8 times a fair share each (4.5 times the link in all):
        // every one gets an eighth.
        let cfg = DirConfig {
            rate: Rate::Constant(96_000_000),
            queue: QueueLimit::Bytes(200_000),
            aqm: Aqm::Fq,
            ..Default::default()
        };
        let mut l: Link<u32> = Link::new(cfg, 1);
        let mut bytes = [0usize; 8];
        let mut t: Nanos = 0;
        let step = 125_000; // 1500 B every 125 µs is 96 Mbit/s, the whole link.
        let mut n = 0u64;
        while t < 1_000 * MS {
            for f in 0..8u32 {
                // Flow f sends (f+1)/8 of the link.
                if n % 8 < u64::from(f) + 1 {
                    l.push(t, f, 1500, Headers { flow: f * 7919 + 3, ..Default::default() });
                }
            }
            n += 1;
            t += step;
            while let Some((f, _)) = l.pop(t) {
                bytes[f as usize] += 1500;
            }
        }
        let total: usize = bytes.iter().sum();
        assert!(total as f64 > 0.99 * 12e6, "link idle: {total} B in 1 s");
        for (f, b) in bytes.iter().enumerate() {
            let share = *b as f64 / total as f64;
            assert!((share - 0.125).abs() < 0.125 * 0.02, "flow {f}: {share:.3} of the link");
        }
    }

    #[test]
    fn fq_codel_holds_each_flows_queue_near_target() {
        let cfg = DirConfig {
            rate: Rate::Constant(10_000_000),
            queue: QueueLimit::Packets(10_000),
            aqm: Aqm::parse("fq_codel").unwrap(),
            ..Default::default()
        };
        let mut l = Link::new(cfg, 1);
        let mut t = 0;
        for i in 0..8_333u32 {
            l.push(t, i, 1500, Headers { flow: i % 2, ..Default::default() });
            t += 600_000;
            while l.pop(t).is_some() {}
        }
        assert!(l.counters()[1].aqm_drops > 0);
        assert!(l.queues[1].pkts < 5000, "queue {} packets", l.queues[1].pkts);
    }

    #[test]
    fn aqm_names() {
        assert_eq!(Aqm::parse("fq"), Ok(Aqm::Fq));
        assert_eq!(Aqm::parse("fq_codel").unwrap().buckets(), crate::fq::FLOWS);
        assert_eq!(Aqm::parse("codel").unwrap().buckets(), 1);
        assert!(Aqm::parse("red").unwrap_err().to_string().contains("droptail, codel, fq or fq_codel"));
    }
}
