//! The pure core of `wanperf trace`: which probes to send in each round, what each reply means,
//! and the per-hop report — responding addresses, RTT statistics, loss split into the loss the
//! path has from that hop on and the loss that is only the router not answering (ICMP rate
//! limiting), path MTU, and route changes between rounds. No sockets, no clock: probes and
//! replies come in with their times.
//!
//! Loss reasoning: a packet lost on the link into hop k is lost for every probe with TTL ≥ k,
//! so the loss the path has up to hop k is at most the loss seen at any later hop. Taking
//! `path_k = min(loss_j, j ≥ k)` over the hops that answer at all, a hop's own surplus
//! `loss_k − path_k` is that router's replies going missing (rate limiting, a busy control
//! plane), not loss on the path; the path's loss grows where `path_k` steps up.

use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

/// What came back for a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// A router's time exceeded.
    TimeExceeded,
    /// The destination answered (port unreachable, echo reply, or a TCP reset/SYN-ACK).
    Reached,
    /// A router could not forward a packet this large: the next link's MTU.
    FragNeeded(u32),
    /// Another unreachable (network, host, administratively prohibited …): the ICMP code.
    Unreachable(u8),
}

/// A reply to probe `seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    /// The probe's sequence number.
    pub seq: u32,
    /// Who answered.
    pub from: IpAddr,
    /// When the answer arrived, ns (same clock as the send times).
    pub at_ns: u64,
    /// What it said.
    pub answer: Answer,
}

/// Settings of a trace.
#[derive(Debug, Clone)]
pub struct Plan {
    /// First TTL probed.
    pub first_ttl: u8,
    /// Last TTL probed while the destination has not answered.
    pub max_ttl: u8,
    /// A probe unanswered after this long is lost, ns.
    pub wait_ns: u64,
}

#[derive(Debug, Clone)]
struct Sent {
    round: u32,
    ttl: u8,
    at_ns: u64,
    size: usize,
    answer: Option<(IpAddr, u64, Answer)>,
    expired: bool,
}

/// A route change seen between rounds: at `ttl`, `before` answered in earlier rounds and
/// `after` in round `round`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RouteChange {
    /// Round (from 1) in which the new address first answered.
    pub round: u32,
    /// TTL of the hop.
    pub ttl: u8,
    /// The address that answered before.
    pub before: IpAddr,
    /// The address that answers now.
    pub after: IpAddr,
}

/// RTT statistics of a hop, ms.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rtt {
    /// Minimum.
    pub min: f64,
    /// Median.
    pub median: f64,
    /// 90th percentile.
    pub p90: f64,
    /// Maximum.
    pub max: f64,
}

/// One hop of the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hop {
    /// TTL.
    pub ttl: u8,
    /// Addresses that answered and how often, most frequent first.
    pub addrs: Vec<(IpAddr, u32)>,
    /// Probes sent whose fate is known (answered or timed out).
    pub sent: u32,
    /// Probes answered.
    pub received: u32,
    /// Share of probes unanswered, %.
    pub loss_pct: f64,
    /// Loss the path has up to this hop, % (the least loss seen here or further on).
    pub path_loss_pct: f64,
    /// Loss that is only this router not answering (rate limiting), %.
    pub icmp_only_loss_pct: f64,
    /// RTT of the answered probes.
    pub rtt_ms: Option<Rtt>,
    /// The MTU of the link after this hop, when it reported one (fragmentation needed).
    pub next_mtu: Option<u32>,
    /// What to make of this hop's loss, if any: `rate-limited`, `loss starts here`.
    pub note: Option<String>,
    /// Whether this is the destination.
    pub destination: bool,
}

/// The result of a trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Hops in TTL order (TTLs nobody answered at are listed with no address).
    pub hops: Vec<Hop>,
    /// Whether the destination answered.
    pub reached: bool,
    /// The smallest MTU reported along the path.
    pub path_mtu: Option<u32>,
    /// Route changes between rounds.
    pub route_changes: Vec<RouteChange>,
    /// Rounds completed.
    pub rounds: u32,
}

/// The state of a trace.
#[derive(Debug, Clone)]
pub struct Trace {
    plan: Plan,
    sent: HashMap<u32, Sent>,
    next_seq: u32,
    dest_ttl: Option<u8>,
    size: Option<usize>,
    /// MTUs routers reported for their next link, by router address.
    mtus: BTreeMap<IpAddr, u32>,
    local_mtu: Option<u32>,
}

/// Two probes out of `n` answered differently by chance: the least difference in lost probes
/// that counts as real, for a hop probed `n` times (about three standard deviations of a
/// binomial at the observed rate, and at least two probes).
fn significant(diff: f64, rate: f64, n: u32) -> bool {
    let n = f64::from(n.max(1));
    let sd = (n * rate.max(1.0 / n) * (1.0 - rate).max(1.0 / n)).sqrt();
    diff * n >= 2.0_f64.max(3.0 * sd)
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

impl Trace {
    /// A trace that has sent nothing yet.
    pub fn new(plan: Plan) -> Trace {
        Trace {
            plan,
            sent: HashMap::new(),
            next_seq: 1,
            dest_ttl: None,
            size: None,
            mtus: BTreeMap::new(),
            local_mtu: None,
        }
    }

    /// The TTLs to probe in a round: up to the destination once it has answered, else up to
    /// `max_ttl`.
    pub fn ttls(&self) -> std::ops::RangeInclusive<u8> {
        self.plan.first_ttl..=self.dest_ttl.unwrap_or(self.plan.max_ttl).max(self.plan.first_ttl)
    }

    /// The probe size to use now, when path MTU discovery has lowered it (else the caller's).
    pub fn size(&self) -> Option<usize> {
        self.size
    }

    /// The highest TTL anybody has answered at so far (0: none).
    pub fn frontier(&self) -> u8 {
        self.sent.values().filter(|p| p.answer.is_some()).map(|p| p.ttl).max().unwrap_or(0)
    }

    /// Records a probe sent; returns its sequence number.
    pub fn sent(&mut self, round: u32, ttl: u8, at_ns: u64, size: usize) -> u32 {
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1).max(1);
        self.sent.insert(seq, Sent { round, ttl, at_ns, size, answer: None, expired: false });
        seq
    }

    /// Corrects a probe's send time to when it really left.
    pub fn sent_at(&mut self, seq: u32, at_ns: u64) {
        if let Some(p) = self.sent.get_mut(&seq) {
            p.at_ns = at_ns;
        }
    }

    /// Forgets a probe that could not be sent.
    pub fn unsend(&mut self, seq: u32) {
        self.sent.remove(&seq);
    }

    /// The first link's MTU is `mtu`: later probes are no larger.
    pub fn local_mtu(&mut self, mtu: u32) {
        if mtu >= 68 {
            self.size = Some(self.size.map_or(mtu as usize, |s| s.min(mtu as usize)));
            self.local_mtu = Some(self.local_mtu.map_or(mtu, |m| m.min(mtu)));
        }
    }

    /// A reply arrived. Replies to unknown, already answered or expired probes are ignored
    /// (a late answer counts as lost, as with every traceroute).
    pub fn reply(&mut self, r: Reply) {
        let Some(p) = self.sent.get_mut(&r.seq) else { return };
        if p.answer.is_some() || p.expired || r.at_ns < p.at_ns {
            return;
        }
        p.answer = Some((r.from, r.at_ns, r.answer));
        match r.answer {
            Answer::Reached if self.dest_ttl.is_none_or(|d| p.ttl < d) => self.dest_ttl = Some(p.ttl),
            Answer::FragNeeded(mtu) if mtu >= 68 && (mtu as usize) < p.size => {
                // The router before the narrow link answered (from a hop before the probe's
                // TTL); later probes use the smaller size.
                let e = self.mtus.entry(r.from).or_insert(mtu);
                *e = (*e).min(mtu);
                self.size = Some(self.size.map_or(mtu as usize, |s| s.min(mtu as usize)));
            }
            _ => {}
        }
    }

    /// Marks probes older than the wait as lost; returns how many are still outstanding.
    pub fn expire(&mut self, now_ns: u64) -> usize {
        let mut open = 0;
        for p in self.sent.values_mut() {
            if p.answer.is_none() && !p.expired {
                if now_ns >= p.at_ns + self.plan.wait_ns {
                    p.expired = true;
                } else {
                    open += 1;
                }
            }
        }
        open
    }

    /// The report so far. Probes still waiting are left out; probes beyond the destination's
    /// TTL and probes that met a too-small MTU (answered with fragmentation needed) are not
    /// counted as loss.
    pub fn report(&self) -> Report {
        let last = self.dest_ttl.unwrap_or(self.plan.max_ttl);
        let rounds = self.sent.values().map(|p| p.round).max().unwrap_or(0);
        let mut per_ttl: BTreeMap<u8, Vec<&Sent>> = BTreeMap::new();
        for p in self.sent.values() {
            if p.ttl <= last && (p.answer.is_some() || p.expired) {
                if matches!(p.answer, Some((_, _, Answer::FragNeeded(_)))) {
                    continue;
                }
                per_ttl.entry(p.ttl).or_default().push(p);
            }
        }
        // Without the destination, stop after the last TTL anybody answered at.
        let last_answered = per_ttl.iter().rev().find(|(_, v)| v.iter().any(|p| p.answer.is_some())).map(|(t, _)| *t);
        let end = if self.dest_ttl.is_some() { last } else { last_answered.unwrap_or(0) };
        let mut hops: Vec<Hop> = Vec::new();
        for ttl in self.plan.first_ttl..=end {
            let v = per_ttl.get(&ttl).map(Vec::as_slice).unwrap_or(&[]);
            let sent = v.len() as u32;
            let mut rtts: Vec<f64> = Vec::new();
            let mut addrs: BTreeMap<IpAddr, u32> = BTreeMap::new();
            for p in v {
                if let Some((from, at, _)) = p.answer {
                    rtts.push((at - p.at_ns) as f64 / 1e6);
                    *addrs.entry(from).or_default() += 1;
                }
            }
            rtts.sort_by(f64::total_cmp);
            let received = rtts.len() as u32;
            let mut addrs: Vec<(IpAddr, u32)> = addrs.into_iter().collect();
            addrs.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            let rtt_ms = (!rtts.is_empty()).then(|| Rtt {
                min: rtts[0],
                median: quantile(&rtts, 0.5),
                p90: quantile(&rtts, 0.9),
                max: rtts[rtts.len() - 1],
            });
            let loss = if sent == 0 { 0.0 } else { f64::from(sent - received) / f64::from(sent) };
            hops.push(Hop {
                ttl,
                addrs,
                sent,
                received,
                loss_pct: loss * 100.0,
                path_loss_pct: 0.0,
                icmp_only_loss_pct: 0.0,
                rtt_ms,
                next_mtu: None,
                note: None,
                destination: self.dest_ttl == Some(ttl),
            });
        }
        for h in hops.iter_mut() {
            h.next_mtu = h.addrs.iter().filter_map(|(a, _)| self.mtus.get(a).copied()).min();
        }
        // Path loss: the least loss at this hop or any later one that answers at all.
        let mut floor = f64::INFINITY;
        for h in hops.iter_mut().rev() {
            if h.received > 0 {
                floor = floor.min(h.loss_pct);
            }
            h.path_loss_pct = if floor.is_finite() { floor.min(h.loss_pct) } else { h.loss_pct };
            h.icmp_only_loss_pct = h.loss_pct - h.path_loss_pct;
        }
        let mut before = 0.0;
        let mut noted_before = 0.0;
        for h in hops.iter_mut() {
            let n = h.sent;
            if h.received > 0 && significant(h.icmp_only_loss_pct / 100.0, h.loss_pct / 100.0, n) {
                h.note = Some("rate-limited".into());
            }
            let step = (h.path_loss_pct - noted_before) / 100.0;
            if h.path_loss_pct > before && significant(step, h.path_loss_pct / 100.0, n) {
                h.note = Some(match h.note.take() {
                    Some(n) => format!("loss starts here; {n}"),
                    None => "loss starts here".into(),
                });
                noted_before = h.path_loss_pct;
            }
            before = h.path_loss_pct;
        }
        // Route changes: per TTL, the answering address of each round in order.
        let mut by_round: BTreeMap<(u8, u32), IpAddr> = BTreeMap::new();
        for p in self.sent.values() {
            if let Some((from, _, Answer::TimeExceeded | Answer::Reached)) = p.answer {
                by_round.entry((p.ttl, p.round)).or_insert(from);
            }
        }
        let mut route_changes = Vec::new();
        let mut prev: Option<(u8, IpAddr)> = None;
        for (&(ttl, round), &addr) in &by_round {
            if let Some((pt, pa)) = prev {
                if pt == ttl && pa != addr {
                    route_changes.push(RouteChange { round, ttl, before: pa, after: addr });
                }
            }
            prev = Some((ttl, addr));
        }
        Report {
            hops,
            reached: self.dest_ttl.is_some(),
            path_mtu: self.mtus.values().copied().chain(self.local_mtu).min(),
            route_changes,
            rounds,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn plan() -> Plan {
        Plan { first_ttl: 1, max_ttl: 30, wait_ns: 1_000 * MS }
    }

    /// Runs `rounds` rounds over a chain whose hop k (1-based) has address 10.0.k.1, RTT 2k ms,
    /// and answers unless `drop(round, ttl)`; hop `dest` is the destination.
    fn run(rounds: u32, dest: u8, drop: impl Fn(u32, u8) -> bool, addr: impl Fn(u32, u8) -> IpAddr) -> Report {
        let mut t = Trace::new(plan());
        for round in 1..=rounds {
            let base = u64::from(round) * 1_000 * MS;
            let ttls: Vec<u8> = t.ttls().collect();
            for ttl in ttls {
                let at = base + u64::from(ttl) * MS / 10;
                let seq = t.sent(round, ttl, at, 60);
                if ttl <= dest && !drop(round, ttl) {
                    let answer = if ttl == dest { Answer::Reached } else { Answer::TimeExceeded };
                    t.reply(Reply { seq, from: addr(round, ttl), at_ns: at + 2 * u64::from(ttl) * MS, answer });
                }
            }
            t.expire(base + 999 * MS);
        }
        t.expire(u64::MAX / 2);
        t.report()
    }

    fn chain_addr(_: u32, ttl: u8) -> IpAddr {
        ip(&format!("10.0.{ttl}.1"))
    }

    #[test]
    fn a_clean_chain_lists_every_hop_in_order_with_its_rtt() {
        let r = run(10, 5, |_, _| false, chain_addr);
        assert!(r.reached);
        assert_eq!(r.hops.len(), 5);
        for (k, h) in r.hops.iter().enumerate() {
            let ttl = k as u8 + 1;
            assert_eq!(h.ttl, ttl);
            assert_eq!(h.addrs, vec![(chain_addr(0, ttl), 10)]);
            assert_eq!((h.sent, h.received, h.loss_pct), (10, 10, 0.0));
            assert_eq!(h.rtt_ms.as_ref().unwrap().min, 2.0 * f64::from(ttl));
            assert_eq!(h.note, None);
        }
        assert!(r.hops[4].destination);
        assert!(r.route_changes.is_empty());
        assert_eq!(r.rounds, 10);
    }

    #[test]
    fn the_first_round_probes_far_then_stops_at_the_destination() {
        let mut t = Trace::new(plan());
        assert_eq!(t.ttls(), 1..=30);
        let seq = t.sent(1, 3, 0, 60);
        t.reply(Reply { seq, from: ip("10.0.3.1"), at_ns: 5, answer: Answer::Reached });
        assert_eq!(t.ttls(), 1..=3);
        // Probes beyond the destination are not hops.
        t.sent(1, 7, 0, 60);
        t.expire(u64::MAX / 2);
        assert_eq!(t.report().hops.len(), 3);
    }

    #[test]
    fn a_router_that_rate_limits_shows_loss_only_at_its_hop() {
        // Hop 3 answers every other probe; everything after it answers all.
        let r = run(20, 5, |round, ttl| ttl == 3 && round % 2 == 0, chain_addr);
        let h = &r.hops[2];
        assert_eq!(h.loss_pct, 50.0);
        assert_eq!(h.path_loss_pct, 0.0);
        assert_eq!(h.icmp_only_loss_pct, 50.0);
        assert_eq!(h.note.as_deref(), Some("rate-limited"));
        assert!(r.hops.iter().all(|h| h.path_loss_pct == 0.0));
        assert_eq!(r.hops[4].note, None);
    }

    #[test]
    fn real_loss_shows_at_its_hop_and_every_later_one() {
        // The link into hop 3 loses a quarter of the packets: probes with TTL ≥ 3 go missing.
        let lost = |round: u32, ttl: u8| ttl >= 3 && round.is_multiple_of(4);
        let r = run(40, 5, lost, chain_addr);
        assert_eq!(r.hops[1].path_loss_pct, 0.0);
        for h in &r.hops[2..] {
            assert_eq!(h.path_loss_pct, 25.0, "{h:?}");
        }
        assert_eq!(r.hops[2].note.as_deref(), Some("loss starts here"));
        assert_eq!(r.hops[3].note, None);
        assert_eq!(r.hops[4].note, None);
    }

    #[test]
    fn one_lost_probe_is_not_called_anything() {
        let r = run(10, 5, |round, ttl| ttl == 2 && round == 4, chain_addr);
        assert_eq!(r.hops[1].loss_pct, 10.0);
        assert_eq!(r.hops[1].note, None);
    }

    #[test]
    fn a_new_address_at_a_hop_is_a_route_change() {
        let addr = |round: u32, ttl: u8| if ttl == 2 && round > 6 { ip("10.9.9.9") } else { chain_addr(round, ttl) };
        let r = run(10, 4, |_, _| false, addr);
        assert_eq!(
            r.route_changes,
            vec![RouteChange { round: 7, ttl: 2, before: ip("10.0.2.1"), after: ip("10.9.9.9") }]
        );
        assert_eq!(r.hops[1].addrs, vec![(ip("10.0.2.1"), 6), (ip("10.9.9.9"), 4)]);
    }

    #[test]
    fn fragmentation_needed_lowers_the_size_and_is_not_loss() {
        let mut t = Trace::new(plan());
        // A probe for hop 3 meets the narrow link after hop 2: router 2 answers.
        let s = t.sent(1, 3, 0, 1500);
        t.reply(Reply { seq: s, from: ip("10.0.2.1"), at_ns: 4 * MS, answer: Answer::FragNeeded(1400) });
        assert_eq!(t.size(), Some(1400));
        let s = t.sent(1, 2, 10 * MS, 1400);
        t.reply(Reply { seq: s, from: ip("10.0.2.1"), at_ns: 14 * MS, answer: Answer::TimeExceeded });
        let s = t.sent(1, 3, 10 * MS, 1400);
        t.reply(Reply { seq: s, from: ip("10.0.3.1"), at_ns: 16 * MS, answer: Answer::Reached });
        let r = t.report();
        assert_eq!(r.path_mtu, Some(1400));
        assert_eq!(r.hops[1].next_mtu, Some(1400));
        assert_eq!(r.hops[2].next_mtu, None);
        assert_eq!((r.hops[1].sent, r.hops[1].received), (1, 1));
        assert_eq!((r.hops[2].sent, r.hops[2].received), (1, 1));
    }

    #[test]
    fn late_duplicate_and_unknown_replies_are_ignored() {
        let mut t = Trace::new(plan());
        let s = t.sent(1, 1, 0, 60);
        t.reply(Reply { seq: 999, from: ip("10.0.1.1"), at_ns: MS, answer: Answer::TimeExceeded });
        t.expire(2_000 * MS);
        t.reply(Reply { seq: s, from: ip("10.0.1.1"), at_ns: 2_001 * MS, answer: Answer::TimeExceeded });
        let r = t.report();
        assert!(r.hops.is_empty(), "nobody answered: {r:?}");
        let s = t.sent(2, 1, 3_000 * MS, 60);
        t.reply(Reply { seq: s, from: ip("10.0.1.1"), at_ns: 3_001 * MS, answer: Answer::TimeExceeded });
        t.reply(Reply { seq: s, from: ip("10.0.1.1"), at_ns: 3_002 * MS, answer: Answer::TimeExceeded });
        let r = t.report();
        assert_eq!((r.hops[0].sent, r.hops[0].received), (2, 1));
    }
}
