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
use std::collections::{BTreeMap, HashMap, VecDeque};
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
    /// Flow identifiers the rounds take in turn (1: Paris-style, one flow; more: each round
    /// probes every hop with the next flow, so that a per-flow load balancer shows each of
    /// its paths, and each flow keeps its own).
    pub flows: u16,
    /// A `wanperf serve` counts the probes that reach it ([`Trace::server_count`]): keep
    /// what forward and reverse loss are told apart with.
    pub server: bool,
    /// Time between rounds, ns: faster than a second, routers that limit their ICMP to one
    /// answer a second (Linux's default) answer fewer probes than they get.
    pub interval_ns: u64,
}

/// A probe still waiting for its answer.
#[derive(Debug, Clone)]
struct Pending {
    round: u32,
    ttl: u8,
    at_ns: u64,
    size: usize,
}

/// What the answered and lost probes of one TTL add up to.
#[derive(Debug, Clone, Default)]
struct Tally {
    /// Probes whose fate is known.
    sent: u32,
    /// RTTs of the answered ones, ms.
    rtts: Vec<f64>,
    /// Who answered, how often.
    addrs: BTreeMap<IpAddr, u32>,
    /// The answered probes' rounds and answer times, ns, in arrival order (the spacing of
    /// the answers tells a token bucket from loss).
    answers: Vec<(u32, u64)>,
}

/// A hop's counts so far (what a round's progress shows).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HopCount {
    /// TTL.
    pub ttl: u8,
    /// Addresses that answered and how often, most frequent first.
    pub addrs: Vec<(IpAddr, u32)>,
    /// Probes whose fate is known.
    pub sent: u32,
    /// Probes answered.
    pub received: u32,
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
    /// What to make of this hop's loss, if any: `rate-limited`, `loss starts here`; and
    /// `load-balanced` for a hop whose flows answer from different addresses.
    pub note: Option<String>,
    /// Whether this is the destination.
    pub destination: bool,
    /// When this hop's answers came at a steady rate however fast it was probed (a token
    /// bucket: the router limits its ICMP), that rate, answers per second ([`spacing`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answers_per_s: Option<f64>,
    /// With several flows: the address each flow met here (flow, address), by flow.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<(u16, IpAddr)>,
    /// Several flows met different addresses here and each kept its own: a per-flow load
    /// balancer before this hop (not a route change).
    pub load_balanced: bool,
    /// Which way the loss that starts here is lost, when a `wanperf serve` at the destination
    /// split its loss by direction and only one assignment of the path's loss steps to
    /// directions fits that split ([`step_directions`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss_direction: Option<Direction>,
}

/// A direction of the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Toward the destination: the probes were lost.
    Forward,
    /// Toward this host: the answers were lost.
    Reverse,
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
    /// The destination's loss split by direction, when a `wanperf serve` there counted the
    /// probes it had.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub one_way: Option<OneWayLoss>,
    /// Said when the destination, or most hops, answered at a steady rate below the probe
    /// rate: their loss is their ICMP rate limit, not the path's, and how to trace instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

pub use wanperf_proto::probe::OneWayLoss;

/// The state of a trace. Each probe is kept only until it is answered or lost; then it is
/// added to its TTL's tally, so a long trace costs the same per probe as a short one.
#[derive(Debug, Clone)]
pub struct Trace {
    plan: Plan,
    pending: HashMap<u32, Pending>,
    /// Pending probes in send order (send times only grow), for expiry.
    order: VecDeque<u32>,
    tallies: BTreeMap<u8, Tally>,
    /// The first address that answered each (TTL, flow, round), for route changes (within
    /// a flow) and load balancing (between flows).
    answered: BTreeMap<(u8, u16, u32), IpAddr>,
    next_seq: u32,
    rounds: u32,
    frontier: u8,
    dest_ttl: Option<u8>,
    size: Option<usize>,
    /// MTUs routers reported for their next link, by router address.
    mtus: BTreeMap<IpAddr, u32>,
    local_mtu: Option<u32>,
    /// With a server: every probe's (seq, TTL) in send order, the destination's answers in
    /// time, and the latest count (seq of its reply, count).
    sent_log: Vec<(u32, u8)>,
    reached: std::collections::HashSet<u32>,
    count: Option<(u32, u64)>,
}

/// The certainty every test here asks for: a one-sided tail of 0.135 %, three standard
/// deviations of a normal (about 740:1), shared out over the tests a report makes
/// (Bonferroni), so testing every hop does not make a chance step likely.
const ALPHA: f64 = 0.00135;

/// Fewest lost probes that make a step from a loss-free start (no hop before it to compare
/// with): one lost probe is not called anything.
const MIN_STEP_LOST: u32 = 2;

/// One-sided p-value of Fisher's exact test that the second of two binomial samples has the
/// higher rate: the chance, given `x1` of `n1` and `x2` of `n2` lost and the two samples
/// alike, that the second holds `x2` or more of the `x1 + x2` losses (hypergeometric). Exact
/// at any count, where the normal approximation fails at the few losses a clean path shows.
fn fisher_greater(x1: u32, n1: u32, x2: u32, n2: u32) -> f64 {
    let (n1, n2) = (n1.max(x1), n2.max(x2));
    let n = (n1 + n2) as usize;
    let k = x1 + x2;
    // ln i! for i ≤ n.
    let mut lf = Vec::with_capacity(n + 1);
    lf.push(0.0f64);
    for i in 1..=n {
        lf.push(lf[i - 1] + (i as f64).ln());
    }
    let ln_choose = |a: u32, b: u32| lf[a as usize] - lf[b as usize] - lf[(a - b) as usize];
    let denom = ln_choose(n1 + n2, k);
    let hi = k.min(n2);
    let lo = x2.max(k.saturating_sub(n1));
    (lo..=hi).map(|j| (ln_choose(n2, j) + ln_choose(n1, k - j) - denom).exp()).sum::<f64>().min(1.0)
}

/// erfc(x) for x ≥ 0 (Chebyshev fit, relative error below 1.2e-7).
fn erfc(x: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.5 * x.abs());
    let y = t
        * (-x * x - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 {
        y
    } else {
        2.0 - y
    }
}

/// One-sided p-value that the second of two binomial samples (`x2` of `n2` lost) has the
/// higher rate than the first (`x1` of `n1`): the likelihood-ratio (G) test, its statistic
/// against χ² with one degree of freedom, halved for the one side. Fisher's exact test
/// ([`fisher_greater`]) conditions on the total lost and so loses most of its power where a
/// clean path meets a few lost probes — 0 of 2000 before a hop against 5 of 1000 at it is
/// 1 in 250 to Fisher, though 0 of 2000 at that hop's rate happens once in 22,000 — and
/// the smaller of the two p-values is taken: either test's certainty is the step's. The
/// Monte Carlo test below holds the false steps this allows under 1 %.
fn step_p(x1: u32, n1: u32, x2: u32, n2: u32) -> f64 {
    let (n1, n2) = (n1.max(x1).max(1), n2.max(x2).max(1));
    // One lost probe is never a step, whatever came before.
    if x2 < MIN_STEP_LOST || u64::from(x2) * u64::from(n1) <= u64::from(x1) * u64::from(n2) {
        return 1.0;
    }
    let (x1f, n1f, x2f, n2f) = (f64::from(x1), f64::from(n1), f64::from(x2), f64::from(n2));
    let q = (x1f + x2f) / (n1f + n2f);
    let term = |o: f64, e: f64| if o > 0.0 { o * (o / e).ln() } else { 0.0 };
    let g = 2.0
        * (term(x1f, n1f * q)
            + term(n1f - x1f, n1f * (1.0 - q))
            + term(x2f, n2f * q)
            + term(n2f - x2f, n2f * (1.0 - q)));
    let lr = 0.5 * erfc((g.max(0.0) / 2.0).sqrt());
    lr.min(fisher_greater(x1, n1, x2, n2))
}

/// The path's loss level at each of a sequence of hops, from their (lost, sent) counts: the
/// non-decreasing levels closest to them (pool adjacent violators, each level the pooled
/// share of its hops), then adjacent levels whose difference Fisher's exact test does not find
/// at [`ALPHA`] (shared over the rises the first fit leaves: the places the data puts a step
/// at all) pooled too, the least certain first. A level's hops are one sample: at hop k a step
/// is judged against everything the hops before it saw, not against one hop's estimate taken
/// as exact. Hops that lost nothing at the start are never pooled with what follows (that
/// would smear a step somewhere later back to the first hop): the first rise from them is
/// kept, and is certain only if the test finds it. A certain step is placed at its hop when
/// the hop just before it, alone, lost less beyond chance too; else it starts at or before
/// that hop. Returns each hop's level and whether a step starts at it.
fn loss_levels(counts: &[(u32, u32)]) -> Vec<(f64, Step)> {
    // Blocks of (lost, sent, hops).
    let mut blocks: Vec<(u32, u32, usize)> = Vec::with_capacity(counts.len());
    for &(lost, sent) in counts {
        let mut b = (lost, sent, 1);
        while let Some(last) = blocks.last() {
            // Pool unless last < b (compared without division): equal levels are one level.
            if u64::from(last.0) * u64::from(b.1) < u64::from(b.0) * u64::from(last.1) {
                break;
            }
            let l = blocks.pop().expect("last");
            b = (l.0 + b.0, l.1 + b.1, l.2 + b.2);
        }
        blocks.push(b);
    }
    let tests = blocks.len().saturating_sub(1).max(1) as f64;
    let clean_start = blocks.first().is_some_and(|b| b.0 == 0);
    let p = |a: &(u32, u32, usize), b: &(u32, u32, usize)| step_p(a.0, a.1, b.0, b.1) * tests;
    loop {
        let first = usize::from(clean_start);
        let Some((i, q)) = (first..blocks.len().saturating_sub(1))
            .map(|i| (i, p(&blocks[i], &blocks[i + 1])))
            .max_by(|a, b| a.1.total_cmp(&b.1))
        else {
            break;
        };
        if q < ALPHA {
            break;
        }
        let b = blocks.remove(i + 1);
        blocks[i] = (blocks[i].0 + b.0, blocks[i].1 + b.1, blocks[i].2 + b.2);
    }
    // Each block's first hop, to find the hop just before a step.
    let mut first_hop = Vec::with_capacity(blocks.len());
    let mut at = 0;
    for b in &blocks {
        first_hop.push(at);
        at += b.2;
    }
    let mut out = Vec::with_capacity(counts.len());
    // A rise that is no step (too few lost probes to say the path loses anything more) keeps
    // the level before it: its loss is not the path's, as far as the counts can tell.
    let mut shown = 0.0;
    for (k, b) in blocks.iter().enumerate() {
        let step = if b.0 == 0 {
            Step::None
        } else if k == 0 {
            // From the loss-free start (no link before the first hop): two lost probes.
            if b.0 >= MIN_STEP_LOST {
                Step::Here
            } else {
                Step::None
            }
        } else if p(&blocks[k - 1], b) >= ALPHA {
            // Only the first rise after hops that lost nothing is left unmerged by chance:
            // loss is certain there, but not that it starts there.
            if b.0 >= MIN_STEP_LOST {
                Step::AtOrBefore
            } else {
                Step::None
            }
        } else {
            // Placed when the hop just before it, on its own, lost less beyond chance too
            // (else a luckier hop before the step would move it one hop on).
            let (lost, sent) = counts[first_hop[k] - 1];
            if p(&(lost, sent, 1), b) < ALPHA {
                Step::Here
            } else {
                Step::AtOrBefore
            }
        };
        let share = if b.1 == 0 { 0.0 } else { f64::from(b.0) / f64::from(b.1) };
        if step != Step::None || b.0 == 0 {
            shown = share;
        }
        out.extend((0..b.2).map(|j| (shown, if j == 0 { step } else { Step::None })));
    }
    out
}

/// Whether the path's loss steps up at a hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// No.
    None,
    /// Yes, placed: the hops before it lost less, beyond chance.
    Here,
    /// Loss is certain from here on, but the hops before it saw too few probes to say that
    /// it does not start earlier.
    AtOrBefore,
}

/// Survival function of χ² with 2k degrees of freedom at x (exact for even degrees):
/// e^(−x/2) Σ_{j<k} (x/2)^j / j!. Fisher's method: −2 Σ ln pᵢ over k independent tests.
fn chi2_even_sf(x: f64, k: usize) -> f64 {
    let h = x / 2.0;
    let (mut term, mut sum) = (1.0f64, 0.0f64);
    for j in 0..k {
        if j > 0 {
            term *= h / j as f64;
        }
        sum += term;
    }
    ((-h).exp() * sum).min(1.0)
}

/// Most leading answers in a row taken as a token bucket's burst (Linux lets 6 through after
/// an idle spell) before the spacing of a hop's answers is judged.
const MAX_BURST: usize = 8;

/// The note of a hop that lost probes while others answered at their own pace, its own
/// answers unable to tell which (too few, or spaced like a bucket's but not beyond chance).
const TOO_FEW: &str = "cannot tell rate limiting from loss";

/// Fewest gaps between answers (after the burst) the spacing test judges.
const MIN_GAPS: usize = 4;

/// The rounds between a hop's answers (`rounds`: the answered rounds, ascending) after a
/// token bucket's burst: the leading answers in a row (at most [`MAX_BURST`]) and the gap in
/// which the bucket spends what the burst left of its tokens.
fn gaps_after_burst(rounds: &[u32]) -> Vec<u32> {
    let gaps: Vec<u32> = rounds.windows(2).map(|w| w[1].saturating_sub(w[0])).collect();
    let burst = gaps.iter().take(MAX_BURST).take_while(|g| **g <= 1).count();
    gaps[(burst + usize::from(burst > 0)).min(gaps.len())..].to_vec()
}

/// Whether a hop's answers are spaced like a token bucket's, not thinned by loss: probes of
/// rounds `rounds` (ascending) answered, `loss` the hop's share unanswered. With each probe
/// lost at random, the rounds between answers are geometric — P(gap ≥ k) = loss^(k−1), an
/// answer right after an answer being the likeliest gap of all — where a router that answers
/// at a steady rate below the probe rate leaves gaps that never fall to one round and hardly
/// vary. The p-value: the chance under random loss that all G gaps after the burst fall
/// within some window as narrow as the one they fill, [k, k + w] with k ≥ 2,
/// Σₖ (loss^(k−1) (1 − loss^(w+1)))^G = (1 − loss^(w+1))^G · loss^G / (1 − loss^G). None when
/// the test does not apply (a gap of one round, too few gaps, no loss). After a burst, the
/// first gap (the bucket spending the rest of its tokens) is left out too.
pub fn spacing(rounds: &[u32], loss: f64) -> Option<f64> {
    let gaps = gaps_after_burst(rounds);
    let (&lo, &hi) = (gaps.iter().min()?, gaps.iter().max()?);
    if gaps.len() < MIN_GAPS || lo < 2 || !(0.0..1.0).contains(&loss) || loss == 0.0 {
        return None;
    }
    let g = gaps.len() as i32;
    let w = hi - lo;
    let p = (1.0 - loss.powi(w as i32 + 1)).powi(g) * loss.powi(g) / (1.0 - loss.powi(g));
    Some(p.min(1.0))
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// Whether a hop's loss above the least loss of the hops from it on (`icmp_only_loss_pct`
/// before the fit) is more than chance: at least two probes and three standard deviations of
/// the difference of the two binomial counts, the least later loss's variance counted twice
/// (the least of several hops is biased low: a hop behind a 1 % link that lost 1.5 % beside
/// a luckier later hop's 0.3 % is not a router limiting its replies).
fn limits_replies(h: &Hop) -> bool {
    let n = f64::from(h.sent.max(1));
    let (p, f) = ((h.loss_pct / 100.0).clamp(0.0, 1.0), (h.path_loss_pct / 100.0).clamp(0.0, 1.0));
    let sd = (n * p * (1.0 - p) + 2.0 * n * f * (1.0 - f)).sqrt();
    h.icmp_only_loss_pct / 100.0 * n >= 2.0_f64.max(3.0 * sd)
}

/// Which way each of a path's loss steps is lost (`steps`: at each hop where loss starts,
/// the share lost on the link or links into it, probes and answers together), from the
/// destination's split `w`. A trace sees at hop k only what survives both ways, k links out
/// and k links back; the server's count splits the whole path's loss, not a hop's. With each
/// step lost one way only, every assignment of steps to directions predicts the
/// destination's forward and reverse loss (1 − the product of its steps' survival); the
/// answer is the assignment that fits the split within three standard deviations (each of the
/// two compared counts binomial, doubled for the steps' own noise) when every other one
/// misfits by nine more in χ² (90:1 in likelihood) — `None` otherwise: two steps of equal
/// size, a step lost both ways, answers that come back by another path. At most 8 steps.
pub fn step_directions(steps: &[f64], w: &OneWayLoss) -> Option<Vec<Direction>> {
    if steps.is_empty() || steps.len() > 8 || w.sent == 0 || w.arrived == 0 {
        return None;
    }
    let (f, r) = (w.forward_loss_pct / 100.0, w.reverse_loss_pct / 100.0);
    let misfit = |seen: f64, want: f64, n: u32| {
        let n = f64::from(n);
        let p = want.max(0.5 / n).min(1.0 - 0.5 / n);
        (seen - want).powi(2) / (2.0 * p * (1.0 - p) / n)
    };
    let mut fits: Vec<(f64, u32)> = (0..1u32 << steps.len())
        .map(|mask| {
            let (mut fs, mut rs) = (1.0, 1.0);
            for (k, &s) in steps.iter().enumerate() {
                if mask & (1 << k) != 0 {
                    fs *= 1.0 - s;
                } else {
                    rs *= 1.0 - s;
                }
            }
            (misfit(f, 1.0 - fs, w.sent) + misfit(r, 1.0 - rs, w.arrived), mask)
        })
        .collect();
    fits.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (best, mask) = fits[0];
    if best > 9.0 || fits.get(1).is_some_and(|x| x.0 < best + 9.0) {
        return None;
    }
    Some((0..steps.len()).map(|k| if mask & (1 << k) != 0 { Direction::Forward } else { Direction::Reverse }).collect())
}

/// The steady rate of a hop's answers after the burst, answers per second: the answers
/// (round, time) past the leading run of consecutive rounds, over their time span.
fn answer_rate(answers: &[(u32, u64)]) -> Option<f64> {
    let mut a = answers.to_vec();
    a.sort_unstable();
    let burst = a.windows(2).take(MAX_BURST).take_while(|w| w[1].0 <= w[0].0 + 1).count();
    let a = &a[burst..];
    let (first, last) = (a.first()?.1, a.last()?.1);
    (a.len() >= 2 && last > first).then(|| (a.len() - 1) as f64 / ((last - first) as f64 / 1e9))
}

/// What to say when the destination, or most of the hops that answer, answered at a steady
/// rate below the probe rate: their loss is their ICMP rate limit, not the path's.
fn rate_limit_warning(hops: &[Hop]) -> Option<String> {
    let spaced: Vec<&Hop> = hops.iter().filter(|h| h.answers_per_s.is_some()).collect();
    let answering = hops.iter().filter(|h| h.received > 0).count();
    let dest = spaced.iter().any(|h| h.destination);
    if spaced.is_empty() || (!dest && 2 * spaced.len() <= answering) {
        return None;
    }
    let mut rates: Vec<f64> = spaced.iter().filter_map(|h| h.answers_per_s).collect();
    rates.sort_by(f64::total_cmp);
    let rate = quantile(&rates, 0.5);
    let which: Vec<String> = spaced.iter().map(|h| h.ttl.to_string()).collect();
    let unsure: Vec<String> =
        hops.iter().filter(|h| h.note.as_deref() == Some(TOO_FEW)).map(|h| h.ttl.to_string()).collect();
    let unsure = match unsure.len() {
        0 => String::new(),
        1 => format!(" (hop {} lost probes too, and its answers cannot tell which)", unsure[0]),
        _ => format!(" (hops {} lost probes too, and their answers cannot tell which)", unsure.join(", ")),
    };
    Some(format!(
        "probed faster than they answer: hop{} {} ({}) answered at a steady {rate:.2} per second \
         however fast they were probed, a token bucket's pattern (ICMP rate limiting, \
         net.ipv4.icmp_ratelimit on Linux), so {} loss is not the path's{unsure}; to measure path loss, \
         trace slower (-i 1s or more), use --tcp to an open port, or --server (its answers are not ICMP)",
        if which.len() > 1 { "s" } else { "" },
        which.join(", "),
        if dest { "the destination among them" } else { "most of the path" },
        if which.len() > 1 { "their" } else { "its" },
    ))
}

impl Trace {
    /// A trace that has sent nothing yet.
    pub fn new(plan: Plan) -> Trace {
        Trace {
            plan,
            pending: HashMap::new(),
            order: VecDeque::new(),
            tallies: BTreeMap::new(),
            answered: BTreeMap::new(),
            next_seq: 1,
            rounds: 0,
            frontier: 0,
            dest_ttl: None,
            size: None,
            mtus: BTreeMap::new(),
            local_mtu: None,
            sent_log: Vec::new(),
            reached: std::collections::HashSet::new(),
            count: None,
        }
    }

    /// The server at the destination has had `count` of this trace's probes, counting probe
    /// `seq` (its reply said so, in time or late).
    pub fn server_count(&mut self, seq: u32, count: u64) {
        if self.plan.server && self.count.is_none_or(|(s, _)| seq > s) {
            self.count = Some((seq, count));
        }
    }

    /// The destination's loss by direction, from the server's latest count.
    fn one_way(&self) -> Option<OneWayLoss> {
        let (upto, count) = self.count?;
        let dest = self.dest_ttl?;
        let sent = self.sent_log.iter().filter(|(s, ttl)| *s <= upto && *ttl >= dest).count() as u32;
        let arrived = u32::try_from(count).unwrap_or(u32::MAX).min(sent);
        let answered = (self.reached.iter().filter(|s| **s <= upto).count() as u32).min(arrived);
        let pct = |lost: u32, of: u32| if of == 0 { 0.0 } else { f64::from(lost) * 100.0 / f64::from(of) };
        Some(OneWayLoss {
            sent,
            arrived,
            answered,
            forward_loss_pct: pct(sent - arrived, sent),
            reverse_loss_pct: pct(arrived - answered, arrived),
        })
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
        self.frontier
    }

    /// The flow identifier of a round's probes (0 .. flows).
    pub fn flow(&self, round: u32) -> u16 {
        (round.saturating_sub(1) % u32::from(self.plan.flows.max(1))) as u16
    }

    /// The sequence number the next probe recorded with [`Trace::sent`] gets.
    pub fn next_seq(&self) -> u32 {
        self.next_seq
    }

    /// Records a probe sent; returns its sequence number.
    pub fn sent(&mut self, round: u32, ttl: u8, at_ns: u64, size: usize) -> u32 {
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1).max(1);
        self.pending.insert(seq, Pending { round, ttl, at_ns, size });
        if self.plan.server {
            self.sent_log.push((seq, ttl));
        }
        self.order.push_back(seq);
        self.rounds = self.rounds.max(round);
        seq
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
        if self.pending.get(&r.seq).is_none_or(|p| r.at_ns < p.at_ns) {
            return;
        }
        let p = self.pending.remove(&r.seq).expect("pending");
        if let Answer::FragNeeded(mtu) = r.answer {
            // The router before the narrow link answered (from a hop before the probe's TTL);
            // later probes use the smaller size. The probe met the MTU, not loss: not counted.
            if mtu >= 68 && (mtu as usize) < p.size {
                let e = self.mtus.entry(r.from).or_insert(mtu);
                *e = (*e).min(mtu);
                self.size = Some(self.size.map_or(mtu as usize, |s| s.min(mtu as usize)));
            }
            return;
        }
        let t = self.tallies.entry(p.ttl).or_default();
        t.sent += 1;
        t.rtts.push((r.at_ns - p.at_ns) as f64 / 1e6);
        *t.addrs.entry(r.from).or_default() += 1;
        t.answers.push((p.round, r.at_ns));
        self.frontier = self.frontier.max(p.ttl);
        match r.answer {
            Answer::Reached if self.dest_ttl.is_none_or(|d| p.ttl < d) => self.dest_ttl = Some(p.ttl),
            _ => {}
        }
        if self.plan.server && r.answer == Answer::Reached {
            self.reached.insert(r.seq);
        }
        if matches!(r.answer, Answer::TimeExceeded | Answer::Reached) {
            let flow = self.flow(p.round);
            self.answered.entry((p.ttl, flow, p.round)).or_insert(r.from);
        }
    }

    /// What to say when rounds come faster than once a second, hops that answer ICMP lost
    /// probes, and they answered too few times for [`spacing`] to tell a rate limit from
    /// path loss.
    fn pace_caution(&self, hops: &[Hop]) -> Option<String> {
        if self.plan.server || self.plan.interval_ns >= 1_000_000_000 {
            return None;
        }
        let few: Vec<String> = hops
            .iter()
            .filter(|h| h.received > 0 && h.sent > h.received && h.note.is_none())
            .filter(|h| {
                let mut rounds: Vec<u32> =
                    self.tallies.get(&h.ttl).map(|t| t.answers.iter().map(|a| a.0).collect()).unwrap_or_default();
                rounds.sort_unstable();
                rounds.dedup();
                gaps_after_burst(&rounds).len() < MIN_GAPS
            })
            .map(|h| h.ttl.to_string())
            .collect();
        (!few.is_empty()).then(|| {
            format!(
                "one round every {:.0} ms is faster than routers answer by default (Linux: one ICMP \
                 answer a second after a burst of 6, net.ipv4.icmp_ratelimit), and hop{} {} lost \
                 probes but answered too few times to tell a rate limit from path loss: trace \
                 longer (-c), slower (-i 1s), or with --server",
                self.plan.interval_ns as f64 / 1e6,
                if few.len() > 1 { "s" } else { "" },
                few.join(", ")
            )
        })
    }

    /// Marks probes older than the wait as lost; returns how many are still outstanding.
    pub fn expire(&mut self, now_ns: u64) -> usize {
        while let Some(&seq) = self.order.front() {
            match self.pending.get(&seq) {
                None => {}
                Some(p) if now_ns >= p.at_ns + self.plan.wait_ns => {
                    self.tallies.entry(p.ttl).or_default().sent += 1;
                    self.pending.remove(&seq);
                }
                Some(_) => break,
            }
            self.order.pop_front();
        }
        self.pending.len()
    }

    /// The TTLs a report lists: to the destination's, or without it to the last TTL anybody
    /// answered at.
    fn span(&self) -> std::ops::RangeInclusive<u8> {
        let end = self
            .dest_ttl
            .unwrap_or_else(|| self.tallies.iter().rev().find(|(_, t)| !t.rtts.is_empty()).map_or(0, |(ttl, _)| *ttl));
        self.plan.first_ttl..=end
    }

    fn addrs(t: &Tally) -> Vec<(IpAddr, u32)> {
        let mut addrs: Vec<(IpAddr, u32)> = t.addrs.iter().map(|(a, n)| (*a, *n)).collect();
        addrs.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        addrs
    }

    /// Each listed hop's counts so far: cheap enough for every round.
    pub fn counts(&self) -> Vec<HopCount> {
        let none = Tally::default();
        self.span()
            .map(|ttl| {
                let t = self.tallies.get(&ttl).unwrap_or(&none);
                HopCount { ttl, addrs: Self::addrs(t), sent: t.sent, received: t.rtts.len() as u32 }
            })
            .collect()
    }

    /// The report so far. Probes still waiting are left out; probes beyond the destination's
    /// TTL and probes that met a too-small MTU (answered with fragmentation needed) are not
    /// counted as loss.
    pub fn report(&self) -> Report {
        let none = Tally::default();
        let mut hops: Vec<Hop> = Vec::new();
        for ttl in self.span() {
            let t = self.tallies.get(&ttl).unwrap_or(&none);
            let mut rtts = t.rtts.clone();
            rtts.sort_by(f64::total_cmp);
            let received = rtts.len() as u32;
            let addrs = Self::addrs(t);
            let rtt_ms = (!rtts.is_empty()).then(|| Rtt {
                min: rtts[0],
                median: quantile(&rtts, 0.5),
                p90: quantile(&rtts, 0.9),
                max: rtts[rtts.len() - 1],
            });
            let loss = if t.sent == 0 { 0.0 } else { f64::from(t.sent - received) / f64::from(t.sent) };
            hops.push(Hop {
                ttl,
                next_mtu: addrs.iter().filter_map(|(a, _)| self.mtus.get(a).copied()).min(),
                addrs,
                sent: t.sent,
                received,
                loss_pct: loss * 100.0,
                path_loss_pct: 0.0,
                icmp_only_loss_pct: 0.0,
                rtt_ms,
                note: None,
                destination: self.dest_ttl == Some(ttl),
                flows: Vec::new(),
                load_balanced: false,
                loss_direction: None,
                answers_per_s: None,
            });
        }
        // Hops whose answers are spaced like a token bucket's (a router, or the destination,
        // that answers at its own rate however fast it is probed): their loss is theirs. A hop
        // is judged on its own (its share of ALPHA), or with the others: when the hops'
        // spacings together (Fisher's method) are beyond chance, each hop whose own spacing is
        // unlikely under loss (5 %) — the pattern "every hop losing alike".
        let answering = hops.iter().filter(|h| h.received > 0).count().max(1) as f64;
        let ps: Vec<Option<f64>> = hops
            .iter()
            .map(|h| {
                let t = self.tallies.get(&h.ttl)?;
                let mut rounds: Vec<u32> = t.answers.iter().map(|a| a.0).collect();
                rounds.sort_unstable();
                rounds.dedup();
                spacing(&rounds, h.loss_pct / 100.0)
            })
            .collect();
        let tested: Vec<f64> = ps.iter().flatten().copied().collect();
        let together = tested.len() >= 2
            && chi2_even_sf(-2.0 * tested.iter().map(|p| p.max(1e-300).ln()).sum::<f64>(), tested.len()) < ALPHA;
        let spaced: Vec<Option<f64>> = hops
            .iter()
            .zip(&ps)
            .map(|(h, p)| {
                let p = (*p)?;
                let alone = p * answering < ALPHA;
                ((alone || (together && p < 0.05)) && h.received > 0)
                    .then(|| answer_rate(&self.tallies.get(&h.ttl)?.answers))
                    .flatten()
            })
            .collect();
        // When the destination or most hops answer at their own pace, the probes come faster
        // than the routers here answer: a lossy hop with too few answers to test may be one
        // more of them, and is not taken for path loss either.
        let n_spaced = spaced.iter().filter(|s| s.is_some()).count();
        let too_fast =
            hops.iter().zip(&spaced).any(|(h, s)| h.destination && s.is_some()) || 2 * n_spaced > answering as usize;
        let unsure: Vec<bool> = hops
            .iter()
            .zip(&spaced)
            .map(|(h, sp)| {
                too_fast && sp.is_none() && h.received > 0 && h.sent > h.received && {
                    let mut rounds: Vec<u32> =
                        self.tallies.get(&h.ttl).map(|t| t.answers.iter().map(|a| a.0).collect()).unwrap_or_default();
                    rounds.sort_unstable();
                    rounds.dedup();
                    // Too few answers to test, or never two in a row after the burst (what a
                    // bucket does, though not beyond chance here): it cannot tell. Answers in
                    // consecutive rounds are what a bucket at this pace does not give: loss.
                    gaps_after_burst(&rounds).len() < MIN_GAPS || spacing(&rounds, h.loss_pct / 100.0).is_some()
                }
            })
            .collect();
        // Path loss, first as the least loss at this hop or any later one that answers at
        // all (a later hop's loss bounds the path's up to here, whatever else it is): a
        // router answering less than that only limits its replies.
        let mut floor = f64::INFINITY;
        for h in hops.iter_mut().rev() {
            if h.received > 0 {
                floor = floor.min(h.loss_pct);
            }
            h.path_loss_pct = if floor.is_finite() { floor.min(h.loss_pct) } else { h.loss_pct };
            h.icmp_only_loss_pct = h.loss_pct - h.path_loss_pct;
        }
        let limited: Vec<bool> = hops
            .iter()
            .zip(&spaced)
            .zip(&unsure)
            .map(|((h, sp), u)| h.received > 0 && (sp.is_some() || *u || limits_replies(h)))
            .collect();
        // Then, over the hops that answer for themselves, the path's loss levels: the
        // non-decreasing levels closest to what they saw (the least later loss is biased low
        // — the luckiest of several hops — where the fit pools them), steps that chance
        // explains pooled too ([`loss_levels`]).
        let fit = loss_levels(
            &hops
                .iter()
                .zip(&limited)
                .filter(|(h, l)| h.received > 0 && !**l)
                .map(|(h, _)| (h.sent - h.received, h.sent))
                .collect::<Vec<_>>(),
        );
        let mut fitted = fit.into_iter();
        // A hop that only limits its replies says nothing of the path's loss up to it: its
        // path loss is the level before it (the path's loss only grows along it, so the truth
        // lies between that and the next hop's), not the next hops' — which would blame the
        // link into it for loss further on — and a step in loss is placed at the next hop
        // that answers enough to show it. A hop nobody answers at says nothing either.
        let mut before = 0.0f64;
        let mut noted_before = 0.0f64;
        let mut limited_before: Option<u8> = None;
        // (hop index, the loss of the link or links into it: 1 − survival here / before, its
        // note)
        let mut steps: Vec<(usize, f64, String)> = Vec::new();
        for (i, (((h, &lim), sp), &unsure)) in hops.iter_mut().zip(&limited).zip(&spaced).zip(&unsure).enumerate() {
            if lim {
                h.note = Some(if unsure { TOO_FEW } else { "rate-limited" }.into());
                h.answers_per_s = *sp;
                h.path_loss_pct = h.path_loss_pct.min(before);
                h.icmp_only_loss_pct = h.loss_pct - h.path_loss_pct;
                limited_before = Some(h.ttl);
                continue;
            }
            if h.received == 0 {
                continue;
            }
            // (Above its own loss where it was luckier than the hops around it.)
            let (level, step) = fitted.next().unwrap_or((h.path_loss_pct / 100.0, Step::None));
            h.path_loss_pct = level * 100.0;
            h.icmp_only_loss_pct = (h.loss_pct - h.path_loss_pct).max(0.0);
            // Where the levels put a step that the tests found ([`loss_levels`]).
            if step != Step::None && h.path_loss_pct > before {
                let here = match (step, limited_before) {
                    (Step::AtOrBefore, _) => "loss starts at or before here".to_string(),
                    (_, Some(t)) => format!("loss starts here or at hop {t} (it limits its replies)"),
                    _ => "loss starts here".into(),
                };
                // Its note is written once the steps' directions are known.
                let s = 1.0 - (1.0 - h.path_loss_pct / 100.0) / (1.0 - noted_before / 100.0).max(1e-9);
                steps.push((i, s, here));
                noted_before = h.path_loss_pct;
            }
            before = h.path_loss_pct;
            limited_before = None;
        }
        let warning = rate_limit_warning(&hops).or_else(|| self.pace_caution(&hops));
        let one_way = self.one_way();
        let sizes: Vec<f64> = steps.iter().map(|x| x.1).collect();
        let dirs = one_way.as_ref().and_then(|w| step_directions(&sizes, w));
        for (k, &(i, _, ref here)) in steps.iter().enumerate() {
            let h = &mut hops[i];
            h.loss_direction = dirs.as_ref().map(|d| d[k]);
            let here = match h.loss_direction {
                Some(Direction::Forward) => format!("{here}, on the way there"),
                Some(Direction::Reverse) => format!("{here}, on the way back"),
                None => here.clone(),
            };
            h.note = Some(match h.note.take() {
                Some(n) => format!("{here}; {n}"),
                None => here,
            });
        }
        // Route changes: per TTL and flow, the answering address of each round in order.
        let mut route_changes = Vec::new();
        let mut prev: Option<(u8, u16, IpAddr)> = None;
        // Per TTL, each flow's latest address (what it meets now).
        let mut latest: BTreeMap<u8, BTreeMap<u16, IpAddr>> = BTreeMap::new();
        for (&(ttl, flow, round), &addr) in &self.answered {
            if let Some((pt, pf, pa)) = prev {
                if pt == ttl && pf == flow && pa != addr {
                    route_changes.push(RouteChange { round, ttl, before: pa, after: addr });
                }
            }
            prev = Some((ttl, flow, addr));
            latest.entry(ttl).or_default().insert(flow, addr);
        }
        route_changes.sort_by_key(|c| (c.round, c.ttl));
        if self.plan.flows > 1 {
            for h in hops.iter_mut() {
                let Some(by_flow) = latest.get(&h.ttl) else { continue };
                h.flows = by_flow.iter().map(|(f, a)| (*f, *a)).collect();
                let distinct: std::collections::BTreeSet<IpAddr> = by_flow.values().copied().collect();
                let changed = route_changes.iter().any(|c| c.ttl == h.ttl);
                // Different flows, different addresses, none of them moving: load balancing.
                // (The destination answers from its own address whichever way a probe came.)
                if distinct.len() > 1 && !changed {
                    h.load_balanced = true;
                    h.note = Some(match h.note.take() {
                        Some(n) => format!("{n}; load-balanced over {}", distinct.len()),
                        None => format!("load-balanced over {}", distinct.len()),
                    });
                }
            }
        }
        Report {
            hops,
            reached: self.dest_ttl.is_some(),
            path_mtu: self.mtus.values().copied().chain(self.local_mtu).min(),
            route_changes,
            rounds: self.rounds,
            one_way,
            warning,
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
        Plan { first_ttl: 1, max_ttl: 30, wait_ns: 1_000 * MS, flows: 1, server: false, interval_ns: 1_000 * MS }
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

    /// `rounds` rounds to a chain whose destination, hop `dest`, runs a counting server: a
    /// probe `ahead(round, ttl)` says is lost never reaches its hop (nor the server), and an
    /// answer `back(round, ttl, arrived)` says is lost never comes back (`arrived`: the
    /// server's count so far). The server's count rides on each answer that comes back.
    fn served(rounds: u32, dest: u8, ahead: impl Fn(u32, u8) -> bool, back: impl Fn(u32, u8, u64) -> bool) -> Report {
        let mut t = Trace::new(Plan { server: true, ..plan() });
        let mut arrived = 0u64;
        for round in 1..=rounds {
            let base = u64::from(round) * 1_000 * MS;
            let ttls: Vec<u8> = t.ttls().filter(|&ttl| ttl <= dest).collect();
            for ttl in ttls {
                let at = base + u64::from(ttl) * MS;
                let seq = t.sent(round, ttl, at, 60);
                if ahead(round, ttl) {
                    continue;
                }
                if ttl == dest {
                    arrived += 1;
                }
                if !back(round, ttl, arrived) {
                    let answer = if ttl < dest { Answer::TimeExceeded } else { Answer::Reached };
                    t.reply(Reply { seq, from: chain_addr(round, ttl), at_ns: at + MS, answer });
                    if ttl == dest {
                        t.server_count(seq, arrived);
                    }
                }
            }
            t.expire(base + 999 * MS);
        }
        t.expire(u64::MAX / 2);
        t.report()
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
    fn half_a_percent_in_a_thousand_probes_is_placed_no_closer_than_the_counts_allow() {
        // 5 of 1000 probes lost on the link into hop 3 (and so at every later hop): loss is
        // certain from hop 3 (0 of 2000 before it against 15 of 3000), but hop 2's own 0 of
        // 1000 happens at 0.5 % loss once in 150: it starts at or before hop 3.
        let lost = |round: u32, ttl: u8| ttl >= 3 && round % 200 == 7;
        let r = run(1000, 5, lost, chain_addr);
        assert_eq!(r.hops[1].path_loss_pct, 0.0);
        assert_eq!(r.hops[2].path_loss_pct, 0.5);
        assert_eq!(r.hops[2].note.as_deref(), Some("loss starts at or before here"));
        assert!(r.hops[3..].iter().all(|h| h.note.is_none()), "{r:?}");
        // 2 % (20 of 1000 at each hop behind the link): placed.
        let lost = |round: u32, ttl: u8| ttl >= 3 && round % 50 == 7;
        let r = run(1000, 5, lost, chain_addr);
        assert_eq!(r.hops[2].path_loss_pct, 2.0);
        assert_eq!(r.hops[2].note.as_deref(), Some("loss starts here"));
        assert!(r.hops[3..].iter().all(|h| h.note.is_none()), "{r:?}");
    }

    #[test]
    fn a_rate_limited_hop_before_a_lossy_link_is_not_blamed_for_it() {
        // Hop 2 answers one probe in 20; the link into hop 4 loses 2 %.
        let lost = |round: u32, ttl: u8| (ttl == 2 && !round.is_multiple_of(20)) || (ttl >= 4 && round % 50 == 3);
        let r = run(1000, 5, lost, chain_addr);
        let h = &r.hops[1];
        assert_eq!(h.note.as_deref(), Some("rate-limited"), "{h:?}");
        assert_eq!(h.path_loss_pct, 0.0, "no false loss at the limited hop: {h:?}");
        assert_eq!(r.hops[2].path_loss_pct, 0.0);
        assert_eq!(r.hops[3].path_loss_pct, 2.0);
        assert_eq!(r.hops[3].note.as_deref(), Some("loss starts here"));
        // The same router behind the lossy link: the path's loss there, and the step placed
        // at the next hop that shows it, naming the limited one it may be at.
        let lost = |round: u32, ttl: u8| (ttl == 3 && !round.is_multiple_of(20)) || (ttl >= 3 && round % 50 == 3);
        let r = run(1000, 5, lost, chain_addr);
        assert_eq!(r.hops[2].note.as_deref(), Some("rate-limited"), "{:?}", r.hops[2]);
        assert_eq!(r.hops[2].path_loss_pct, 0.0);
        assert_eq!(r.hops[3].path_loss_pct, 2.0);
        assert_eq!(r.hops[3].note.as_deref(), Some("loss starts here or at hop 3 (it limits its replies)"));
    }

    #[test]
    fn chance_differences_after_a_lossy_link_are_pooled_not_called_rate_limiting() {
        // The link into hop 2 loses; by chance hop 2 lost 10 of 400 and the later hops 4 each.
        let lost = |round: u32, ttl: u8| match ttl {
            2 => round % 40 == 1,
            3 => round % 100 == 1,
            4 => round % 130 == 1,
            _ => false,
        };
        let r = run(400, 4, lost, chain_addr);
        assert_eq!(r.hops[1].loss_pct, 2.5);
        // (Hop 1's 0 of 400 against the 18 of 1200 behind it: 1 in 180 to Fisher's exact
        // test, well beyond 1 in 740 to the likelihood ratio — 0 of 400 at 1.5 % happens once
        // in 400.)
        assert_eq!(r.hops[1].note.as_deref(), Some("loss starts here"), "{:?}", r.hops[1]);
        // One level for the three hops behind the lossy link: their pooled loss.
        for h in &r.hops[1..] {
            assert!((h.path_loss_pct - 1.5).abs() < 1e-9, "{h:?}");
        }
        assert!(r.hops[2..].iter().all(|h| h.note.is_none()), "{r:?}");
    }

    #[test]
    fn a_lossy_hop_beside_a_luckier_later_one_is_not_rate_limiting() {
        // Hop 1 limits its replies; the link into hop 2 loses 1 %, and by chance hop 2 lost 15
        // of 1000, hop 3 only 3 and the destination 7 (as a run in bench/diagnose.sh did).
        let lost = |round: u32, ttl: u8| match ttl {
            1 => !round.is_multiple_of(30),
            2 => round % 67 == 5,
            3 => round % 333 == 5,
            4 => round % 160 == 5,
            _ => false,
        };
        let r = run(1000, 4, lost, chain_addr);
        assert_eq!(r.hops[0].note.as_deref(), Some("rate-limited"));
        assert_eq!(r.hops[1].loss_pct, 1.5);
        assert_eq!(r.hops[1].note.as_deref(), Some("loss starts here or at hop 1 (it limits its replies)"));
        assert!(r.hops[2..].iter().all(|h| h.note.is_none()), "{r:?}");
    }

    #[test]
    fn a_counting_server_splits_the_destinations_loss_by_direction() {
        // A 3-hop chain; of 100 rounds' probes to the destination (hop 3), every 10th never
        // reaches the server (forward) and every 25th of those that do is answered but the
        // answer is lost (reverse).
        let r = served(100, 3, |round, ttl| ttl == 3 && round % 10 == 0, |_, ttl, n| ttl == 3 && n % 25 == 0);
        let w = r.one_way.expect("split");
        // The last count came with round 99's answer (round 100's probe was lost on the way):
        // 99 probes, 9 lost forward, 3 of the 90 answers lost.
        assert_eq!((w.sent, w.arrived, w.answered), (99, 90, 87), "{w:?}");
        assert!((w.forward_loss_pct - 900.0 / 99.0).abs() < 1e-9, "{w:?}");
        assert!((w.reverse_loss_pct - 300.0 / 90.0).abs() < 1e-9, "{w:?}");
        // Without a count (no server, or a plain trace) there is no split.
        assert_eq!(run(5, 3, |_, _| false, chain_addr).one_way, None);
    }

    #[test]
    fn each_loss_step_gets_the_direction_the_servers_split_allows() {
        let w = |f: f64, r: f64| OneWayLoss {
            sent: 1000,
            arrived: (1000.0 * (1.0 - f / 100.0)) as u32,
            answered: 0,
            forward_loss_pct: f,
            reverse_loss_pct: r,
        };
        use Direction::{Forward, Reverse};
        // One step of 3 %: wherever the server says it went.
        assert_eq!(step_directions(&[0.03], &w(3.1, 0.0)), Some(vec![Forward]));
        assert_eq!(step_directions(&[0.03], &w(0.1, 2.8)), Some(vec![Reverse]));
        // 5 % at hop 1 and 3 % at hop 4 (tests/trace.rs's chain): 5 % forward and 3 % back fit
        // one assignment; the swap predicts 3 % and 5 %, four and three deviations off.
        assert_eq!(step_directions(&[0.05, 0.03], &w(5.0, 3.0)), Some(vec![Forward, Reverse]));
        assert_eq!(step_directions(&[0.05, 0.03], &w(3.0, 5.0)), Some(vec![Reverse, Forward]));
        // Two steps of the same size, one each way: either could be either.
        assert_eq!(step_directions(&[0.03, 0.03], &w(3.0, 3.0)), None);
        // A split no assignment explains (answers back by another path, a step lost both ways).
        assert_eq!(step_directions(&[0.03], &w(1.5, 1.5)), None);
        assert_eq!(step_directions(&[0.03], &w(10.0, 0.0)), None);
        assert_eq!(step_directions(&[], &w(0.0, 0.0)), None);
    }

    #[test]
    fn answers_lost_on_a_link_are_placed_on_the_way_back() {
        // A 4-hop chain with a server at hop 4; the link into hop 2 loses every 20th answer of
        // the hops from 2 on (the same rounds for each: the answers share the link), and
        // no probe: the server has them all.
        let lost = |round: u32, ttl: u8| ttl >= 2 && round % 20 == 7;
        let r = served(400, 4, |_, _| false, |round, ttl, _| lost(round, ttl));
        let w = r.one_way.as_ref().expect("split");
        assert_eq!(w.forward_loss_pct, 0.0, "{w:?}");
        assert_eq!(r.hops[1].note.as_deref(), Some("loss starts here, on the way back"), "{:?}", r.hops[1]);
        assert_eq!(r.hops[1].loss_direction, Some(Direction::Reverse));
        assert!(r.hops.iter().enumerate().all(|(i, h)| i == 1 || h.loss_direction.is_none()), "{r:?}");
        // Without the server's count nothing says which way.
        let plain = run(400, 4, lost, chain_addr);
        assert_eq!(plain.hops[1].note.as_deref(), Some("loss starts here"));
        assert_eq!(plain.hops[1].loss_direction, None);
    }

    #[test]
    fn loss_levels_pool_what_decreases_and_what_chance_explains() {
        let levels = |c: &[(u32, u32)]| loss_levels(c).into_iter().map(|l| l.0).collect::<Vec<_>>();
        // Decreasing runs pooled (pool adjacent violators) into their shared share.
        assert_eq!(levels(&[(0, 100), (30, 100), (20, 100), (120, 200)]), vec![0.0, 0.25, 0.25, 0.6]);
        assert_eq!(levels(&[(30, 100), (10, 300)]), vec![0.1, 0.1]);
        assert_eq!(loss_levels(&[]), Vec::<(f64, Step)>::new());
        // 11 of 120 then 23 of 120 (issue 43's draw): Fisher's one-sided p is about 0.02,
        // chance at 740:1, so one level with one step; 0 of 240 before it is not.
        let l = loss_levels(&[(0, 120), (0, 120), (11, 120), (23, 120)]);
        let (n, h) = (Step::None, Step::Here);
        assert_eq!(l, vec![(0.0, n), (0.0, n), (34.0 / 240.0, h), (34.0 / 240.0, n)]);
        // One lost probe behind clean hops is nothing: the level stays 0.
        assert_eq!(loss_levels(&[(0, 8), (0, 8), (1, 8), (0, 8)]), vec![(0.0, n); 4]);
        // 3 lost behind 200 clean probes: loss from hop 3 on or earlier, not placed.
        let l = loss_levels(&[(0, 100), (0, 100), (1, 100), (2, 100)]);
        assert_eq!(l.iter().map(|x| x.1).collect::<Vec<_>>(), vec![n, n, Step::AtOrBefore, n], "{l:?}");
        assert_eq!(l[0].0, 0.0);
        // Loss from the first hop on: a step there once two probes are lost.
        assert_eq!(loss_levels(&[(2, 100), (1, 100)])[0].1, h);
        assert_eq!(loss_levels(&[(1, 100), (0, 100)])[0].1, n);
    }

    /// `rounds` rounds `interval_ns` apart over a chain whose hop k (1-based) has address
    /// 10.0.k.1 and answers when `answer(round, ttl, at_ns)`; hop `dest` is the destination.
    fn run_at(rounds: u32, interval_ns: u64, dest: u8, mut answer: impl FnMut(u32, u8, u64) -> bool) -> Report {
        let mut t = Trace::new(Plan { wait_ns: interval_ns.min(1_000 * MS), interval_ns, ..plan() });
        for round in 1..=rounds {
            let base = u64::from(round) * interval_ns;
            let ttls: Vec<u8> = t.ttls().collect();
            for ttl in ttls {
                let at = base + u64::from(ttl) * MS / 100;
                let seq = t.sent(round, ttl, at, 60);
                if ttl <= dest && answer(round, ttl, at) {
                    let a = if ttl == dest { Answer::Reached } else { Answer::TimeExceeded };
                    t.reply(Reply {
                        seq,
                        from: chain_addr(round, ttl),
                        at_ns: at + u64::from(ttl) * MS / 10,
                        answer: a,
                    });
                }
            }
            t.expire(base + interval_ns - 1);
        }
        t.expire(u64::MAX / 2);
        t.report()
    }

    /// A router's ICMP token bucket, as Linux keeps one per destination: a token every
    /// `every_ns`, at most `burst`, full at the start.
    struct Bucket {
        every_ns: u64,
        burst: u64,
        tokens_ns: u64,
        last_ns: Option<u64>,
    }

    impl Bucket {
        fn new(every_ns: u64, burst: u64) -> Bucket {
            Bucket { every_ns, burst, tokens_ns: every_ns * burst, last_ns: None }
        }
        fn allow(&mut self, now_ns: u64) -> bool {
            let elapsed = self.last_ns.map_or(0, |l| now_ns - l);
            self.last_ns = Some(now_ns);
            self.tokens_ns = (self.tokens_ns + elapsed).min(self.every_ns * self.burst);
            if self.tokens_ns >= self.every_ns {
                self.tokens_ns -= self.every_ns;
                true
            } else {
                false
            }
        }
    }

    /// Every hop of a 5-hop chain (the destination too) answers at most once a second after a
    /// burst of 6 (Linux's icmp_ratelimit default) and the path loses nothing.
    fn limited_chain(rounds: u32, interval_ns: u64) -> Report {
        let mut buckets: Vec<Bucket> = (0..5).map(|_| Bucket::new(1_000 * MS, 6)).collect();
        run_at(rounds, interval_ns, 5, |_, ttl, at| buckets[usize::from(ttl) - 1].allow(at))
    }

    #[test]
    fn probing_faster_than_the_routers_answer_is_rate_limiting_not_path_loss() {
        for interval_ms in [50, 200] {
            let r = limited_chain(120, interval_ms * MS);
            assert!(r.hops.iter().all(|h| h.loss_pct > 50.0), "{interval_ms} ms: {r:?}");
            for h in &r.hops {
                assert_eq!(h.note.as_deref(), Some("rate-limited"), "{interval_ms} ms: {h:?}");
                assert_eq!(h.path_loss_pct, 0.0, "{interval_ms} ms: {h:?}");
                let rate = h.answers_per_s.expect("a steady answer rate");
                assert!((rate - 1.0).abs() < 0.1, "{interval_ms} ms: {rate} answers/s");
            }
            let w = r.warning.expect("a warning");
            assert!(w.contains("the destination among them") && w.contains("-i 1s"), "{w}");
            assert!(w.contains("--tcp") && w.contains("--server"), "{w}");
        }
        // Hop 3 limits itself to one answer in 4 s (a burst of 6 too): at 200 ms it answers
        // too few times to test, among hops that plainly limit theirs — not path loss.
        let mut buckets: Vec<Bucket> =
            (0..5).map(|i| Bucket::new(if i == 2 { 4_000 } else { 1_000 } * MS, 6)).collect();
        let r = run_at(40, 200 * MS, 5, |_, ttl, at| buckets[usize::from(ttl) - 1].allow(at));
        assert_eq!(r.hops[2].note.as_deref(), Some(TOO_FEW), "{r:?}");
        assert!(r.hops.iter().all(|h| h.path_loss_pct == 0.0), "{r:?}");
        assert!(r.warning.as_deref().is_some_and(|w| w.contains("hop 3 lost probes too")), "{r:?}");
        // Probed once a second, the same routers answer every probe: nothing to say.
        let r = limited_chain(30, 1_000 * MS);
        assert!(r.hops.iter().all(|h| h.loss_pct == 0.0 && h.note.is_none() && h.answers_per_s.is_none()));
        assert_eq!(r.warning, None);
    }

    #[test]
    fn too_few_fast_rounds_to_tell_are_said_to_be_so() {
        // 10 rounds 50 ms apart: each hop answers its burst of 6, then nothing. Not enough
        // answers to see the spacing: the report says so instead of staying silent.
        let r = limited_chain(10, 50 * MS);
        assert!(r.hops.iter().all(|h| h.answers_per_s.is_none()), "{r:?}");
        let w = r.warning.expect("a caution");
        assert!(w.contains("one round every 50 ms") && w.contains("too few times"), "{w}");
        // The same at one round a second: nothing to say.
        assert_eq!(limited_chain(10, 1_000 * MS).warning, None);
    }

    #[test]
    fn one_router_with_a_slow_bucket_is_rate_limited_without_a_warning() {
        // Hop 2 answers once in 4 s (icmp_ratelimit = 4s), probed once a second; the path is
        // clean. (Issue 43's chain.)
        let mut b = Bucket::new(4_000 * MS, 1);
        let r = run_at(120, 1_000 * MS, 5, |_, ttl, at| ttl != 2 || b.allow(at));
        assert_eq!(r.hops[1].note.as_deref(), Some("rate-limited"), "{:?}", r.hops[1]);
        let rate = r.hops[1].answers_per_s.expect("spaced answers");
        assert!((rate - 0.25).abs() < 0.03, "{rate}");
        assert!(r.hops.iter().all(|h| h.path_loss_pct == 0.0), "{r:?}");
        assert_eq!(r.warning, None);
    }

    #[test]
    fn random_loss_of_half_the_probes_is_not_a_token_bucket() {
        use rand::{Rng, SeedableRng};
        // The link into hop 3 loses half the packets at random, probed every 50 ms: path loss,
        // at hop 3, however fast.
        for seed in 0..20 {
            let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
            let r = run_at(120, 50 * MS, 5, |_, ttl, _| ttl < 3 || rng.random::<f64>() >= 0.5);
            assert!(r.hops.iter().all(|h| h.answers_per_s.is_none()), "seed {seed}: {r:?}");
            assert_eq!(r.warning, None);
            assert_eq!(r.hops[2].note.as_deref(), Some("loss starts here"), "seed {seed}: {:?}", r.hops[2]);
        }
    }

    /// Issue 43's draw: 120 rounds over a–r1–r2–r3–r4–b, r2 answering once in 4 s, the link
    /// r3 → r4 losing 10 %: hop 4 lost 11 probes, hop 5 (b) 23. One step, at hop 4.
    #[test]
    fn a_lucky_hop_before_an_unlucky_one_is_not_a_second_loss_step() {
        let lost = |round: u32, ttl: u8| match ttl {
            2 => !round.is_multiple_of(4),
            4 => round % 11 == 3,
            5 => round % 5 == 1 && round < 115,
            _ => false,
        };
        let r = run(120, 5, lost, chain_addr);
        assert_eq!((r.hops[3].sent - r.hops[3].received, r.hops[4].sent - r.hops[4].received), (11, 23));
        assert_eq!(r.hops[1].note.as_deref(), Some("rate-limited"));
        assert_eq!(r.hops[3].note.as_deref(), Some("loss starts here"), "{:?}", r.hops[3]);
        assert_eq!(r.hops[4].note, None, "{:?}", r.hops[4]);
        assert_eq!(r.hops[3].path_loss_pct, r.hops[4].path_loss_pct);
    }

    /// A single lossy link (into hop 3 of 5) at 1, 5 and 10 % over 100, 300 and 1000 rounds,
    /// each probe lost at random, in many seeded draws. False: a "loss starts here" anywhere
    /// but hop 3, or any loss note before it — under 1 % of the draws everywhere. Found: the
    /// loss seen at hop 3 ("here" or "at or before here") in 95 % of the draws wherever the
    /// three hops behind the link expect 15 or more lost probes between them, and placed
    /// there ("here", which needs hop 2 alone to have lost less beyond chance) wherever they
    /// expect 30 or more.
    #[test]
    fn false_loss_steps_are_rare_and_true_ones_are_found() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(43);
        for rounds in [100u32, 300, 1000] {
            for loss in [0.01, 0.05, 0.10] {
                let draws = if rounds == 1000 { 300 } else { 1000 };
                let (mut seen, mut placed, mut false_steps) = (0, 0, 0);
                for _ in 0..draws {
                    let drops: Vec<bool> = (0..rounds * 5).map(|_| rng.random::<f64>() < loss).collect();
                    let at = |round: u32, ttl: u8| drops[((round - 1) * 5 + u32::from(ttl) - 1) as usize];
                    let r = run(rounds, 5, |round, ttl| ttl >= 3 && at(round, ttl), chain_addr);
                    let note = |ttl: u8| r.hops[usize::from(ttl) - 1].note.clone().unwrap_or_default();
                    seen += usize::from(note(3).starts_with("loss starts"));
                    placed += usize::from(note(3) == "loss starts here");
                    false_steps += usize::from(
                        note(1).starts_with("loss")
                            || note(2).starts_with("loss")
                            || note(4) == "loss starts here"
                            || note(5) == "loss starts here",
                    );
                }
                let expected_lost = 3.0 * f64::from(rounds) * loss;
                eprintln!(
                    "{rounds} rounds, {:.0} % loss ({expected_lost:.0} lost expected behind the link): \
                     seen at hop 3 in {seen} of {draws}, placed there in {placed}, a false step in {false_steps}",
                    loss * 100.0
                );
                assert!(false_steps * 100 < draws, "{rounds} rounds, {loss}: {false_steps} false steps in {draws}");
                if expected_lost >= 15.0 {
                    assert!(seen * 100 >= 95 * draws, "{rounds} rounds, {loss}: seen in {seen} of {draws}");
                }
                if expected_lost >= 30.0 {
                    assert!(placed * 100 >= 95 * draws, "{rounds} rounds, {loss}: placed in {placed} of {draws}");
                }
            }
        }
    }

    #[test]
    fn the_step_test_is_the_stronger_of_the_likelihood_ratio_and_fishers() {
        // erfc against known values.
        assert!((erfc(0.0) - 1.0).abs() < 1e-6 && (erfc(1.0) - 0.157_299_2).abs() < 1e-6);
        // A clean stretch before a few lost probes: 0 of 2000 against 5 of 1000.
        let p = step_p(0, 2000, 5, 1000);
        assert!(p < ALPHA && p < fisher_greater(0, 2000, 5, 1000), "{p}");
        // Issue 43's draw stays chance: 11/120 against 23/120.
        let p = step_p(11, 120, 23, 120);
        assert!(p > 0.005 && p < 0.03, "{p}");
        // No rise, no evidence; one lost probe is never a step.
        assert_eq!(step_p(5, 100, 5, 100), 1.0);
        assert!(step_p(0, 100_000, 1, 1000) > ALPHA);
    }

    #[test]
    fn chi_square_survival_for_even_degrees() {
        // 2 degrees: e^(−x/2); 4 degrees at x = 9.49: 0.05.
        assert!((chi2_even_sf(2.0, 1) - (-1.0f64).exp()).abs() < 1e-12);
        assert!((chi2_even_sf(9.4877, 2) - 0.05).abs() < 1e-4);
        assert_eq!(chi2_even_sf(0.0, 3), 1.0);
    }

    #[test]
    fn fishers_exact_test_matches_the_hypergeometric_tail() {
        // 0 of 10 vs 3 of 10: C(10,3)/C(20,3) = 120/1140.
        assert!((fisher_greater(0, 10, 3, 10) - 120.0 / 1140.0).abs() < 1e-12);
        // The same rate both sides: no evidence.
        assert!(fisher_greater(5, 100, 5, 100) > 0.5);
        assert!(fisher_greater(10, 100, 0, 100) > 0.99);
        // 11/120 vs 23/120, issue 43's false step: about 2 %.
        let p = fisher_greater(11, 120, 23, 120);
        assert!(p > 0.01 && p < 0.03, "{p}");
        // A big step is certain.
        assert!(fisher_greater(0, 240, 24, 240) < 1e-6);
    }

    #[test]
    fn one_lost_probe_is_not_called_anything() {
        let r = run(10, 5, |round, ttl| ttl == 2 && round == 4, chain_addr);
        assert_eq!(r.hops[1].loss_pct, 10.0);
        assert_eq!(r.hops[1].note, None);
        // Nor path loss: the path loses nothing the counts can show.
        assert!(r.hops.iter().all(|h| h.path_loss_pct == 0.0), "{r:?}");
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

    /// [`run`]'s chain probed with `flows` flows, hop 2's address chosen by `addr(round, flow)`.
    fn run_flows(rounds: u32, flows: u16, addr: impl Fn(u32, u16) -> IpAddr) -> Report {
        let mut t = Trace::new(Plan { flows, ..plan() });
        for round in 1..=rounds {
            let base = u64::from(round) * 1_000 * MS;
            let ttls: Vec<u8> = t.ttls().collect();
            let flow = t.flow(round);
            for ttl in ttls.into_iter().filter(|&x| x <= 4) {
                let at = base + u64::from(ttl) * MS / 10;
                let seq = t.sent(round, ttl, at, 60);
                let from = if ttl == 2 { addr(round, flow) } else { chain_addr(round, ttl) };
                let answer = if ttl == 4 { Answer::Reached } else { Answer::TimeExceeded };
                t.reply(Reply { seq, from, at_ns: at + 2 * u64::from(ttl) * MS, answer });
            }
            t.expire(base + 999 * MS);
        }
        t.report()
    }

    #[test]
    fn flows_that_keep_their_own_path_are_load_balancing_not_route_changes() {
        // Even flows go by 10.0.2.1, odd ones by 10.0.2.9: a per-flow load balancer at hop 1.
        let split = |_: u32, flow: u16| if flow & 1 == 0 { ip("10.0.2.1") } else { ip("10.0.2.9") };
        let r = run_flows(16, 8, split);
        assert!(r.route_changes.is_empty(), "{:?}", r.route_changes);
        let h = &r.hops[1];
        assert!(h.load_balanced, "{h:?}");
        assert_eq!(h.note.as_deref(), Some("load-balanced over 2"));
        assert_eq!(h.flows.len(), 8);
        assert!(h.flows.iter().all(|&(f, a)| a == split(0, f)), "{:?}", h.flows);
        assert!(r.hops.iter().enumerate().all(|(i, x)| i == 1 || !x.load_balanced), "{r:?}");
        // One flow (Paris-style) sees one address, whatever the balancer does with others.
        let r = run_flows(16, 1, split);
        assert_eq!(r.hops[1].addrs.len(), 1);
        assert!(!r.hops[1].load_balanced && r.hops[1].flows.is_empty());
        // A flow that moves is a route change, at the round it moved, even with several flows.
        let moved = |round: u32, flow: u16| if round > 8 && flow == 3 { ip("10.0.7.7") } else { split(round, flow) };
        let r = run_flows(16, 4, moved);
        assert_eq!(
            r.route_changes,
            vec![RouteChange { round: 12, ttl: 2, before: ip("10.0.2.9"), after: ip("10.0.7.7") }]
        );
        assert!(!r.hops[1].load_balanced, "a hop that changed is not called balanced: {:?}", r.hops[1]);
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
