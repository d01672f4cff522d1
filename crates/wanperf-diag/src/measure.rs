//! `wanperf capacity`'s measurement: the RTT, back-to-back trains for the capacity, recursive
//! packet trains for the bottleneck's hop, paced streams for the available bandwidth — within
//! a budget of bytes and seconds — fed to the pure estimators of [`crate::capacity`].

use crate::capacity::{self, AvailProbe, Capacity, Location, RptResult, Stream, Train};
use crate::train::{overhead, pace_until, Heard, Pkt, Trainer};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};
use wanperf_proto::probe::{RPT_LOAD, RPT_SEQS, RPT_TAIL, TRAIN_MAX_GAP_NS, TRAIN_REQUEST_LEN};

/// The recursive trains of one direction as they come back.
#[derive(Default)]
struct RptLog {
    trains: Vec<RptResult>,
    /// The routers answering at each TTL, and how often.
    routers: HashMap<u8, HashMap<IpAddr, u32>>,
    /// The lowest TTL whose head packet reached the far end.
    dest_ttl: Option<u8>,
}

impl RptLog {
    /// Files the train numbered from `base` (as [`RPT_TAIL`] says) with `loads` large
    /// packets: the routers' answers to its head and tail packets, the far end's receive time
    /// of each large packet (`arrival` of its echo), the head packets that reached the far
    /// end. Returns the large packets that arrived.
    fn add(&mut self, heard: &[Heard], base: u64, loads: u64, arrival: impl Fn(&Heard) -> u64) -> u64 {
        let (mut head, mut tail) = (HashMap::new(), HashMap::new());
        let mut load_rx = Vec::new();
        for h in heard {
            match *h {
                Heard::TimeExceeded { seq, from, at_ns } if seq > base && seq < base + RPT_LOAD => {
                    let (ttl, is_tail) =
                        if seq > base + RPT_TAIL { (seq - base - RPT_TAIL, true) } else { (seq - base, false) };
                    let ttl = ttl as u8;
                    *self.routers.entry(ttl).or_default().entry(from).or_default() += 1;
                    if is_tail {
                        tail.insert(ttl, at_ns);
                    } else {
                        head.insert(ttl, at_ns);
                    }
                }
                Heard::Echo { seq, .. } if seq >= base + RPT_LOAD && seq < base + RPT_LOAD + loads => {
                    load_rx.push(arrival(h));
                }
                Heard::Echo { seq, .. } if seq > base && seq < base + RPT_TAIL => {
                    // A head packet reached the far end: it is at most this far.
                    let ttl = (seq - base) as u8;
                    self.dest_ttl = Some(self.dest_ttl.map_or(ttl, |d| d.min(ttl)));
                }
                _ => {}
            }
        }
        load_rx.sort_unstable();
        let mut hops: Vec<(u8, u64, u64)> =
            head.iter().filter_map(|(ttl, h)| tail.get(ttl).map(|t| (*ttl, *h, *t))).collect();
        hops.sort_unstable();
        // The routers' gaps span the large packets and the small ones around them; the
        // destination's spans the large ones first to last: scaled to n gaps for n packets.
        let dest = (load_rx.len() >= 2).then(|| {
            let (a, b) = (load_rx[0], load_rx[load_rx.len() - 1]);
            let n = load_rx.len() as u64;
            (a, a + (b - a) * n / (n - 1))
        });
        self.trains.push(RptResult { hops, dest });
        load_rx.len() as u64
    }

    /// The bottleneck's hop from the trains filed, with the trains' `shape` and the path's
    /// capacity `c` (the far end at `far`); when the trains say `c` is a faster link's after
    /// the narrow one, or too slow ([`capacity::post_narrow`], [`capacity::sub_narrow`], with
    /// the capacity trains' `rivals`), the capacity that replaces it too.
    fn place(
        &self,
        shape: capacity::TrainShape,
        c: Option<&Capacity>,
        rivals: &capacity::Rivals,
        far: IpAddr,
    ) -> (Option<Bottleneck>, Option<Capacity>) {
        let Some(d) = self.dest_ttl else { return (None, None) };
        let mut located = capacity::locate(&self.trains, d, c.map(|c| (shape, c.bps)));
        let better = located.as_ref().zip(c).and_then(|(l, c)| {
            capacity::post_narrow(c, rivals, l).or_else(|| capacity::sub_narrow(c, rivals, l, shape, d))
        });
        if let Some(b) = &better {
            located = capacity::locate(&self.trains, d, Some((shape, b.bps)));
        }
        let Some(l) = located else { return (None, better) };
        let mut rs: Vec<(u8, IpAddr)> = self
            .routers
            .iter()
            .filter(|(ttl, _)| **ttl < d)
            .filter_map(|(ttl, m)| m.iter().max_by_key(|x| x.1).map(|(a, _)| (*ttl, *a)))
            .collect();
        rs.sort_unstable();
        let address_of = |ttl: u8| rs.iter().find(|x| x.0 == ttl).map(|x| x.1).or((ttl == d).then_some(far));
        let tight = l.tight.as_ref().map(|t| TightLink {
            ttl: t.ttl,
            address: address_of(t.ttl),
            destination: t.ttl == d,
            stretch: t.stretch,
        });
        let address = address_of(l.ttl);
        (Some(Bottleneck { ttl: l.ttl, address, destination: l.ttl == d, location: l, routers: rs, tight }), better)
    }
}

/// Settings of a measurement.
#[derive(Debug, Clone)]
pub struct Options {
    /// Most bytes sent (IP bytes of every packet), all phases together: a sixth for the
    /// capacity, a tenth each for the way back and the bottleneck's hop, the rest (more than
    /// half) for the available bandwidth.
    pub budget_bytes: u64,
    /// Most time spent.
    pub time: Duration,
    /// Size of the large packets on the wire, IP header included.
    pub size: usize,
    /// Packets per capacity train.
    pub train_len: u32,
    /// Find the bottleneck's hop (recursive packet trains; needs routers that answer).
    pub locate: bool,
    /// Estimate the available bandwidth (self-loading streams).
    pub avail: bool,
    /// Highest TTL of the head and tail packets.
    pub max_ttl: u8,
    /// Measure the capacity from the server back to here too (the server sends trains).
    pub reverse: bool,
    /// Also the available bandwidth from the server back to here: streams the server paces,
    /// [`REVERSE_AVAIL_BYTES`] and [`REVERSE_AVAIL_TIME`] beyond the budget and the time.
    pub reverse_avail: bool,
    /// Also the bottleneck's hop on the way back: with each recursive train this side sends,
    /// one the server sends (its bytes beyond the budget; needs `reverse` and `locate`).
    pub reverse_locate: bool,
}

/// Shortest available-bandwidth stream, ns (64 packets when they take longer): each stream's
/// ends carry the hosts' and the emulator's timing noise (tens of µs), which 64 packets at
/// 1 Gbit/s (0.77 ms) would read as cross traffic.
const STREAM_MIN_NS: u64 = 1_500_000;

/// Bytes of the way back's available-bandwidth streams (beyond the budget).
pub const REVERSE_AVAIL_BYTES: u64 = 600_000;
/// Time they may take (beyond the time limit).
pub const REVERSE_AVAIL_TIME: Duration = Duration::from_secs(3);

impl Default for Options {
    fn default() -> Self {
        Options {
            budget_bytes: 1_500_000,
            time: Duration::from_secs(10),
            size: 1500,
            train_len: 33,
            locate: true,
            avail: true,
            max_ttl: 16,
            reverse: true,
            reverse_avail: false,
            reverse_locate: false,
        }
    }
}

/// A hop of the located bottleneck, with the router's address.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bottleneck {
    /// TTL of the hop the link leads into.
    pub ttl: u8,
    /// The router there (none: the destination, or a router that did not answer).
    pub address: Option<IpAddr>,
    /// Whether that hop is the destination.
    pub destination: bool,
    /// The estimator's view: gaps per hop, the growth.
    pub location: Location,
    /// The router answering at each TTL.
    pub routers: Vec<(u8, IpAddr)>,
    /// A tight link after the narrow one (less available bandwidth than the narrow link has),
    /// when the trains show one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tight: Option<TightLink>,
}

/// The hop of a tight link that is not the narrow link.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TightLink {
    /// TTL of the hop the link leads into.
    pub ttl: u8,
    /// The router there (none: the destination, or a router that did not answer).
    pub address: Option<IpAddr>,
    /// Whether that hop is the destination.
    pub destination: bool,
    /// The train's length there over its length at the capacity.
    pub stretch: f64,
}

/// The path from the server back to here.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reverse {
    /// Its capacity, from trains the server sent (none: see `note`).
    pub capacity: Option<Capacity>,
    /// Trains asked for.
    pub trains: u32,
    /// Why there is no estimate, when there is none.
    pub note: Option<String>,
    /// Its available bandwidth, from streams the server paced (`--avail-back`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available: Option<capacity::Avail>,
    /// Streams the server was asked for.
    #[serde(skip_serializing_if = "is_zero")]
    pub streams: u32,
    /// The bottleneck's hop on the way back (`--locate-back`): TTLs count from the server,
    /// the routers' addresses are those the server heard from, the destination is here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bottleneck: Option<Bottleneck>,
    /// Hops from the server to here, when its recursive trains found it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hops: Option<u8>,
    /// Recursive trains the server was asked for.
    #[serde(skip_serializing_if = "is_zero")]
    pub rpts: u32,
    /// Recursive trains whose report did not come (an older server, or lost).
    #[serde(skip_serializing_if = "is_zero")]
    pub rpts_unreported: u32,
    /// A faster mode of the way back's capacity set aside (see [`Report::post_narrow`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub post_narrow: Option<Capacity>,
}

fn is_zero<T: Default + PartialEq>(n: &T) -> bool {
    *n == T::default()
}

/// What a measurement found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Minimum round-trip time to the server's echo, ms.
    pub rtt_ms: f64,
    /// The capacity of the path from here to the server.
    pub capacity: Option<Capacity>,
    /// A mode the capacity's trains showed, set aside because the recursive trains' length
    /// at the narrow link says `capacity`: faster, packets that cross traffic on a faster
    /// link after the narrow one queued and sent on back to back (pathrate's post-narrow
    /// capacity mode); slower, cross packets that link put between theirs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub post_narrow: Option<Capacity>,
    /// The capacity of the path back (when asked for).
    pub reverse: Option<Reverse>,
    /// Its available bandwidth.
    pub available: Option<capacity::Avail>,
    /// The bottleneck's hop.
    pub bottleneck: Option<Bottleneck>,
    /// Hops to the server (the TTL at which it answers), when the trains found it.
    pub hops: Option<u8>,
    /// Trains sent for the capacity, recursive trains, streams.
    pub trains: u32,
    /// See `trains`.
    pub rpts: u32,
    /// See `trains`.
    pub streams: u32,
    /// Bytes sent, all phases (IP bytes).
    pub bytes_sent: u64,
    /// What each estimate cost (its own packets), bytes.
    pub cost: Cost,
    /// Packets sent that the server did not echo.
    pub lost: u64,
    /// Seconds spent.
    pub seconds: f64,
}

/// Bytes each phase sent (IP bytes; the way back's trains count as sent, by the server).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Cost {
    /// The RTT probes.
    pub rtt: u64,
    /// The capacity's trains.
    pub capacity: u64,
    /// The way back's trains and token exchange.
    pub reverse: u64,
    /// The recursive packet trains.
    pub bottleneck: u64,
    /// The available bandwidth's streams.
    pub available: u64,
    /// The way back's available-bandwidth streams (the server's bytes).
    #[serde(skip_serializing_if = "is_zero")]
    pub available_back: u64,
    /// The way back's recursive trains (the server's bytes, beyond the budget).
    #[serde(skip_serializing_if = "is_zero")]
    pub bottleneck_back: u64,
}

/// Why a measurement could not be made.
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    /// Sockets.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// No echo came back.
    #[error("no answer from the UDP echo of `wanperf serve` at {0} to 3 probes in 3 s (not running there, not allowing this host, or the path dropping everything)")]
    NoServer(SocketAddr),
}

struct Run<'a> {
    t: Trainer,
    o: &'a Options,
    started: Instant,
    seq: u64,
    sent_bytes: u64,
    lost: u64,
    rtt: Duration,
    /// The server's token for this address, once it gave one.
    token: Option<u64>,
    /// Bytes beyond the budget (the way back's recursive trains).
    beyond: u64,
    /// Draws the pauses between trains ([`Run::pause`]).
    rng: SmallRng,
}

impl Run<'_> {
    fn left(&self) -> Duration {
        self.o.time.saturating_sub(self.started.elapsed())
    }

    fn affordable(&self, bytes: u64) -> bool {
        self.sent_bytes + bytes <= self.o.budget_bytes && !self.left().is_zero()
    }

    fn quiet(&self) -> Duration {
        (self.rtt * 4).max(Duration::from_millis(100))
    }

    /// A pause between trains of `mean` on average, drawn uniformly within `spread` of it
    /// (0.1: 10 % either side). Trains a fixed time apart sample periodic cross traffic at the
    /// same phase every time: a paced TCP flow sending a pair of packets every 3.9 ms on a
    /// 20 Mbit/s narrow link slipped between all four recursive trains a second apart (each
    /// 2.5 ms long as it reached the link), in every run, while the capacity trains caught it,
    /// and the difference read as a tight link after the narrow one. Random pauses sample its
    /// phases evenly (Poisson sampling's point, within one period of the spread's width).
    fn pause(&mut self, mean: Duration, spread: f64) -> Duration {
        mean.mul_f64(1.0 + spread * self.rng.random_range(-1.0..=1.0))
    }

    fn next_seqs(&mut self, n: u64) -> u64 {
        let base = self.seq;
        self.seq += n;
        base
    }

    /// Sends `pkts` as one train and collects echoes (and answers) until all `expect_echo`
    /// echoes came, nothing came for a while, or 2 s passed.
    fn train(&mut self, pkts: &[Pkt], expect_echo: usize) -> io::Result<Vec<Heard>> {
        self.sent_bytes += pkts.iter().map(|p| p.size as u64).sum::<u64>();
        self.t.send_train(pkts)?;
        let until = Instant::now() + Duration::from_secs(2).min(self.left() + self.quiet());
        let lo = pkts.first().map_or(0, |p| p.seq);
        let hi = pkts.last().map_or(0, |p| p.seq);
        let heard = self.t.collect(until, self.quiet(), |h| {
            h.iter().filter(|x| matches!(x, Heard::Echo { seq, .. } if (lo..=hi).contains(seq))).count() >= expect_echo
        })?;
        Ok(heard)
    }

    /// Asks the server for `count` packets of `size` bytes, `gap_ns` apart (0: back to back),
    /// with `token` (a new one the server sends, after a restart, replaces it), and reads them
    /// until `until` or until all came: (position, the server's send time, the arrival time
    /// here) of each that did. Their bytes count as sent; the missing ones as lost.
    fn train_back(
        &mut self,
        count: u32,
        size: usize,
        gap_ns: u32,
        token: &mut u64,
        until: Instant,
    ) -> io::Result<Vec<(u32, u64, u64)>> {
        let base = self.next_seqs(u64::from(count));
        let ours = base..base + u64::from(count);
        self.t.request_paced(base, *token, count as u16, size, gap_ns)?;
        self.sent_bytes += u64::from(count) * size as u64;
        let heard = self.t.collect(until, self.quiet(), |h| {
            h.iter().filter(|x| matches!(x, Heard::Echo { seq, .. } if ours.contains(seq))).count() >= count as usize
                || h.iter().any(|x| matches!(x, Heard::Token { .. }))
        })?;
        let mut got = Vec::new();
        for h in heard {
            match h {
                Heard::Echo { seq, server_tx_ns, at_ns, .. } if ours.contains(&seq) => {
                    got.push(((seq - base) as u32, server_tx_ns, at_ns));
                }
                // The server restarted (a new secret): its new token, for the next train.
                Heard::Token { token: t, .. } => *token = t,
                _ => {}
            }
        }
        self.lost += u64::from(count).saturating_sub(got.len() as u64);
        Ok(got)
    }

    /// The reverse path's capacity from up to `want` trains of `size`-byte packets, and the
    /// other modes its trains showed (see [`capacity::estimate`]).
    fn reverse(&mut self, want: u32, size: usize) -> io::Result<(Reverse, capacity::Rivals)> {
        let len = self.o.train_len.min(u32::from(wanperf_proto::probe::TRAIN_MAX_COUNT));
        let train_bytes = u64::from(len) * size as u64;
        let mut out = Reverse {
            capacity: None,
            trains: 0,
            note: None,
            available: None,
            streams: 0,
            bottleneck: None,
            hops: None,
            rpts: 0,
            rpts_unreported: 0,
            post_narrow: None,
        };
        // The server's token for this address: one packet out, one of the same size back.
        let mut token = None;
        for _ in 0..3 {
            let seq = self.next_seqs(1);
            self.t.request_train(seq, 0, 0, size)?;
            self.sent_bytes += 2 * wanperf_proto::probe::TRAIN_REQUEST_LEN as u64;
            let wait = (self.rtt * 2).max(Duration::from_millis(300));
            let heard = self.t.collect(Instant::now() + wait, wait, |h| {
                h.iter().any(|x| matches!(x, Heard::Token { seq: s, .. } if *s == seq))
            })?;
            token = heard.iter().find_map(|h| match *h {
                Heard::Token { seq: s, token } if s == seq => Some(token),
                _ => None,
            });
            if token.is_some() {
                break;
            }
        }
        let Some(mut token) = token else {
            out.note = Some("the server sends no trains (a wanperf serve older than this client?)".into());
            return Ok((out, capacity::Rivals::default()));
        };
        let mut trains = Vec::new();
        while out.trains < want && self.affordable(train_bytes) && self.left() > self.o.time * 2 / 5 {
            let until = Instant::now() + Duration::from_secs(2).min(self.left() + self.quiet());
            let got = self.train_back(len, size, 0, &mut token, until)?;
            out.trains += 1;
            let arrivals: Vec<(u32, u64)> = got.into_iter().map(|(i, _, at)| (i, at)).collect();
            trains.push(Train { wire_bytes: size as u32, sent: len, arrivals });
            std::thread::sleep(self.rtt.max(Duration::from_millis(20)));
        }
        self.token = Some(token);
        let (chosen, rivals) = capacity::estimate(&trains).map_or((None, Default::default()), |(c, r)| (Some(c), r));
        out.capacity = chosen;
        if out.capacity.is_none() {
            out.note = Some(if trains.iter().all(|t| t.arrivals.is_empty()) {
                "no train came back (the server limits trains to 2 MB/s per client, or the path drops them)".into()
            } else {
                "too few trains arrived whole".into()
            });
        }
        Ok((out, rivals))
    }

    /// A recursive train back (see [`RptRequest`]): requested with the server's token, its
    /// large packets timed here, the routers' answers from the server's report, filed in
    /// `log`. Its bytes are beyond the budget. Returns whether the report came.
    fn rpt_back(&mut self, log: &mut RptLog, loads: u64, size: usize, heads: u8, back_bps: f64) -> io::Result<bool> {
        let Some(token) = self.token else { return Ok(false) };
        let base = self.next_seqs(RPT_SEQS);
        let small = (overhead(self.t.v6()) + TRAIN_REQUEST_LEN) as u64;
        let bytes = loads * size as u64 + 2 * u64::from(heads) * small;
        // The routers' answers come within the train's time on the way back and a round trip.
        let span = Duration::from_secs_f64(bytes as f64 * 8.0 / back_bps.max(1e3));
        let wait = (span * 3 / 2 + self.rtt * 2 + Duration::from_millis(30)).min(Duration::from_millis(2000));
        self.t.request_rpt(base, token, loads as u16, size, heads, wait.as_millis() as u16)?;
        self.beyond += bytes;
        let until = Instant::now() + wait + self.rtt * 2 + self.quiet();
        let heard = self.t.collect(until, until - Instant::now(), |h| {
            let mut parts = h.iter().filter_map(|x| match *x {
                Heard::Report { seq, part, parts } if seq == base => Some((part, parts)),
                _ => None,
            });
            let Some((_, n)) = parts.next() else { return false };
            1 + parts.count() >= usize::from(n)
        })?;
        let arrived = log.add(&heard, base, loads, |h| match *h {
            Heard::Echo { at_ns, .. } => at_ns,
            _ => 0,
        });
        self.lost += loads.saturating_sub(arrived);
        Ok(heard.iter().any(|x| matches!(x, Heard::Report { seq, .. } if *seq == base)))
    }

    /// The way back's available bandwidth: self-loading streams of 64 packets the server
    /// paces at the rates the probe asks for (above the available bandwidth, as this side's
    /// streams), stamped with the server's send times and this host's kernel receive times;
    /// at most [`REVERSE_AVAIL_BYTES`] and [`REVERSE_AVAIL_TIME`]. Returns the estimate and
    /// the streams asked for.
    fn reverse_avail(&mut self, mut probe: AvailProbe, size: usize) -> io::Result<(Option<capacity::Avail>, u32)> {
        let Some(mut token) = self.token else { return Ok((None, 0)) };
        let k = 64u64;
        let stream_bytes = k * size as u64;
        let (limit, until) = (self.sent_bytes + REVERSE_AVAIL_BYTES, Instant::now() + REVERSE_AVAIL_TIME);
        let mut streams = 0;
        while self.sent_bytes + stream_bytes <= limit && Instant::now() < until {
            let rate = probe.next();
            let gap_ns = (size as f64 * 8.0 / rate.max(1.0) * 1e9).min(f64::from(TRAIN_MAX_GAP_NS)) as u32;
            let wait = Duration::from_nanos(u64::from(gap_ns) * k) + self.rtt * 2 + self.quiet();
            let packets =
                self.train_back(k as u32, size, gap_ns, &mut token, Instant::now() + wait.min(Duration::from_secs(2)))?;
            streams += 1;
            probe.record(&Stream { wire_bytes: size as u32, sent: k as u32, packets });
            std::thread::sleep(self.rtt.min(Duration::from_millis(500)));
        }
        Ok((probe.estimate(), streams))
    }
}

/// The available-bandwidth probe below capacity `c`: behind the tight link after the narrow
/// one when the trains found one and the capacity trains showed a faster mode that was set
/// aside ([`capacity::post_narrow`]; the trains that crossed that link behind its cross
/// traffic left it at its rate).
fn avail_probe(c: &Capacity, b: Option<&Bottleneck>, set_aside: Option<&Capacity>) -> AvailProbe {
    let probe = AvailProbe::new(c.bps);
    match b.and_then(|b| b.tight.as_ref()).and(set_aside) {
        Some(t) => probe.behind(t.bps),
        None => probe,
    }
}

/// Measures the path from here to the `wanperf serve` whose UDP echo is at `dst`. `progress`
/// is told each phase and the share of the time budget used; returning false stops early
/// (what was measured so far is reported).
pub fn measure(
    dst: SocketAddr,
    o: &Options,
    mut progress: impl FnMut(&str, f64) -> bool,
) -> Result<Report, MeasureError> {
    let t = Trainer::new(dst)?;
    let v6 = t.v6();
    let small = overhead(v6) + wanperf_proto::probe::PROBE_HEADER_LEN;
    let size = o.size.clamp(small, 9000);
    let mut r = Run {
        t,
        o,
        started: Instant::now(),
        seq: 1,
        sent_bytes: 0,
        lost: 0,
        rtt: Duration::ZERO,
        token: None,
        beyond: 0,
        rng: SmallRng::seed_from_u64(getrandom::u64().unwrap_or(0x5eed)),
    };
    let share = |r: &Run| r.started.elapsed().as_secs_f64() / o.time.as_secs_f64().max(1e-9);

    // RTT: three small probes, one at a time.
    let mut rtt_ns: Option<u64> = None;
    for _ in 0..3 {
        let seq = r.next_seqs(1);
        r.t.send_one(&Pkt { seq, size: small, ttl: None })?;
        r.sent_bytes += small as u64;
        let heard = r.t.collect(Instant::now() + Duration::from_secs(1), Duration::from_secs(1), |h| {
            h.iter().any(|x| matches!(x, Heard::Echo { seq: s, .. } if *s == seq))
        })?;
        for h in heard {
            if let Heard::Echo { seq: s, client_tx_ns, at_ns, .. } = h {
                if s == seq && at_ns > client_tx_ns {
                    rtt_ns = Some(rtt_ns.map_or(at_ns - client_tx_ns, |x| x.min(at_ns - client_tx_ns)));
                }
            }
        }
    }
    let Some(rtt_ns) = rtt_ns else { return Err(MeasureError::NoServer(dst)) };
    r.rtt = Duration::from_nanos(rtt_ns);
    let mut report = Report {
        rtt_ms: rtt_ns as f64 / 1e6,
        capacity: None,
        post_narrow: None,
        reverse: None,
        available: None,
        bottleneck: None,
        hops: None,
        trains: 0,
        rpts: 0,
        streams: 0,
        bytes_sent: 0,
        cost: Cost::default(),
        lost: 0,
        seconds: 0.0,
    };
    report.cost.rtt = r.sent_bytes;

    // Capacity: back-to-back trains, a sixth of the budget (at least 4 trains if it allows).
    let train_bytes = u64::from(o.train_len) * size as u64;
    let want_trains = ((o.budget_bytes as f64 / 6.0) / train_bytes as f64).floor().max(4.0) as u32;
    let phase_start = r.sent_bytes;
    let mut trains = Vec::new();
    while report.trains < want_trains && r.affordable(train_bytes) && r.left() > o.time / 2 {
        if !progress("capacity", share(&r)) {
            break;
        }
        let base = r.next_seqs(u64::from(o.train_len));
        let pkts: Vec<Pkt> = (0..u64::from(o.train_len)).map(|i| Pkt { seq: base + i, size, ttl: None }).collect();
        let heard = r.train(&pkts, pkts.len())?;
        let arrivals: Vec<(u32, u64)> = heard
            .iter()
            .filter_map(|h| match *h {
                Heard::Echo { seq, server_rx_ns, .. } if seq >= base && seq < base + u64::from(o.train_len) => {
                    Some(((seq - base) as u32, server_rx_ns))
                }
                _ => None,
            })
            .collect();
        r.lost += u64::from(o.train_len).saturating_sub(arrivals.len() as u64);
        trains.push(Train { wire_bytes: size as u32, sent: o.train_len, arrivals });
        report.trains += 1;
        std::thread::sleep(r.pause(r.rtt.max(Duration::from_millis(20)), 0.5));
    }
    let (chosen, rivals) = capacity::estimate(&trains).map_or((None, Default::default()), |(c, r)| (Some(c), r));
    report.capacity = chosen;
    report.cost.capacity = r.sent_bytes - phase_start;

    // The reverse path: trains the server sends back to back, timed here by the kernel,
    // a tenth of the budget (their bytes count: they load the path as much).
    let phase_start = r.sent_bytes;
    let mut rev_rivals = capacity::Rivals::default();
    if o.reverse && progress("reverse capacity", share(&r)) {
        let want = ((o.budget_bytes as f64 * 0.1) / train_bytes as f64).floor().max(3.0) as u32;
        let (rev, rivals) = r.reverse(want, size)?;
        report.reverse = Some(rev);
        rev_rivals = rivals;
    }
    report.cost.reverse = r.sent_bytes - phase_start;

    // The bottleneck's hop: recursive packet trains, a second apart (routers' ICMP rate limits
    // refill), a tenth of the budget; with `reverse_locate`, one from the server each second
    // too (the routers answer it toward the server, under a rate limit of its own).
    let phase_start = r.sent_bytes;
    if o.locate {
        let loads = 20u64;
        let heads = o.max_ttl;
        let rpt_bytes = loads * size as u64 + 2 * u64::from(heads) * small as u64;
        let want = ((o.budget_bytes as f64 * 0.1) / rpt_bytes as f64).floor().clamp(3.0, 8.0) as u32;
        let back_bps = report.reverse.as_ref().and_then(|x| x.capacity.as_ref()).map(|c| c.bps);
        let back_bps = back_bps.filter(|_| o.reverse_locate && r.token.is_some());
        let (mut there, mut back) = (RptLog::default(), RptLog::default());
        while report.rpts < want && r.affordable(rpt_bytes) && r.left() > o.time / 4 {
            if !progress("bottleneck", share(&r)) {
                break;
            }
            let base = r.next_seqs(RPT_SEQS);
            let mut pkts = Vec::new();
            for ttl in 1..=heads {
                pkts.push(Pkt { seq: base + u64::from(ttl), size: small, ttl: Some(ttl) });
            }
            for i in 0..loads {
                pkts.push(Pkt { seq: base + RPT_LOAD + i, size, ttl: None });
            }
            for ttl in (1..=heads).rev() {
                pkts.push(Pkt { seq: base + RPT_TAIL + u64::from(ttl), size: small, ttl: Some(ttl) });
            }
            let started = Instant::now();
            let heard = r.train(&pkts, loads as usize)?;
            let arrived = there.add(&heard, base, loads, |h| match *h {
                Heard::Echo { server_rx_ns, .. } => server_rx_ns,
                _ => 0,
            });
            r.lost += loads.saturating_sub(arrived);
            report.rpts += 1;
            if let (Some(bps), Some(rev)) = (back_bps, report.reverse.as_mut()) {
                rev.rpts += 1;
                if !r.rpt_back(&mut back, loads, size, heads, bps)? {
                    // The report is the only way to the routers' answers.
                    rev.rpts_unreported += 1;
                }
            }
            // Routers answer ICMP at a limited rate (Linux: one a second, six at once): a
            // second between trains on average, 0.9–1.1 s: each train takes two answers from
            // each router, and the default budget's four trains stay within that bucket.
            let wait = r.pause(Duration::from_secs(1), 0.1).saturating_sub(started.elapsed());
            std::thread::sleep(wait.min(r.left()));
        }
        report.hops = there.dest_ttl;
        let shape = capacity::TrainShape { loads: loads as u32, size: size as u32, small: small as u32, heads };
        // The capacity trains as the destination saw them count at its hop too (without a
        // recursive train the hop is unknown and nothing is placed).
        there.trains.extend(trains.iter().filter_map(|t| RptResult::from_train(t, shape.loads, shape.size)));
        let (located, better) = there.place(shape, report.capacity.as_ref(), &rivals, dst.ip());
        if let Some(better) = better {
            report.post_narrow = report.capacity.replace(better);
        }
        report.bottleneck = located;
        if let (Some(_), Some(rev)) = (back_bps, report.reverse.as_mut()) {
            // The server's small packets carry the train fields.
            let small_back = (overhead(v6) + TRAIN_REQUEST_LEN) as u32;
            let shape = capacity::TrainShape { small: small_back, ..shape };
            let rivals = std::mem::take(&mut rev_rivals);
            let here = r.t.local_ip().unwrap_or(dst.ip());
            let (located, better) = back.place(shape, rev.capacity.as_ref(), &rivals, here);
            if let Some(better) = better {
                rev.post_narrow = rev.capacity.replace(better);
            }
            rev.bottleneck = located;
            rev.hops = back.dest_ttl;
        }
    }

    report.cost.bottleneck = r.sent_bytes - phase_start;

    // Available bandwidth: paced streams above it, their spread pooled, with what is left.
    let phase_start = r.sent_bytes;
    if let (true, Some(c)) = (o.avail, &report.capacity) {
        let mut probe = avail_probe(c, report.bottleneck.as_ref(), report.post_narrow.as_ref());
        // Streams of 64 packets, or of STREAM_MIN_NS at their rate if that is more (but no
        // more than a quarter of what the phase may spend: the estimate needs a few), the last
        // one shorter (at least 16) to spend what is left.
        let quarter = o.budget_bytes.saturating_sub(phase_start) / 4 / size as u64;
        loop {
            let rate = probe.next();
            let gap = Duration::from_secs_f64(size as f64 * 8.0 / rate.max(1.0));
            let want = (STREAM_MIN_NS / gap.as_nanos().max(1) as u64).min(quarter).max(64);
            let k = want.min(o.budget_bytes.saturating_sub(r.sent_bytes) / size as u64);
            let stream_bytes = k * size as u64;
            if k < 16 || !r.affordable(stream_bytes) || !progress("available bandwidth", share(&r)) {
                break;
            }
            // The stream, and its last echo an RTT later (with an RTT of queue to spare), fit
            // in the time left: the run ends within `--time` (a 4-router chain at 300 Mbit/s
            // ran 10.1 s of 10 when only the sending had to fit).
            if gap * k as u32 + r.rtt * 2 > r.left() {
                break;
            }
            let base = r.next_seqs(k);
            let t0 = Instant::now();
            for i in 0..k {
                pace_until(t0 + gap * i as u32);
                r.t.send_one(&Pkt { seq: base + i, size, ttl: None })?;
            }
            r.sent_bytes += stream_bytes;
            let until = Instant::now() + Duration::from_secs(2).min(r.left() + r.quiet());
            let heard = r.t.collect(until, r.quiet(), |h| {
                h.iter().filter(|x| matches!(x, Heard::Echo { seq, .. } if *seq >= base && *seq < base + k)).count()
                    >= k as usize
            })?;
            let packets: Vec<(u32, u64, u64)> = heard
                .iter()
                .filter_map(|h| match *h {
                    Heard::Echo { seq, client_tx_ns, server_rx_ns, .. } if seq >= base && seq < base + k => {
                        Some(((seq - base) as u32, client_tx_ns, server_rx_ns))
                    }
                    _ => None,
                })
                .collect();
            let s = Stream { wire_bytes: size as u32, sent: k as u32, packets };
            r.lost += k.saturating_sub(s.packets.len() as u64);
            probe.record(&s);
            report.streams += 1;
            // Let the stream's queue drain before the next.
            std::thread::sleep((r.rtt + gap * k as u32 / 2).min(Duration::from_millis(500)).min(r.left()));
        }
        report.available = probe.estimate();
    }
    report.cost.available = r.sent_bytes - phase_start;

    // The way back's available bandwidth, beyond the budget and the time when asked for.
    let phase_start = r.sent_bytes;
    let back = report
        .reverse
        .as_ref()
        .and_then(|x| x.capacity.as_ref().map(|c| avail_probe(c, x.bottleneck.as_ref(), x.post_narrow.as_ref())));
    if let (true, Some(probe)) = (o.reverse_avail, back) {
        if progress("available bandwidth back", share(&r)) {
            let (a, n) = r.reverse_avail(probe, size)?;
            if let Some(rev) = report.reverse.as_mut() {
                rev.available = a;
                rev.streams = n;
            }
        }
    }
    report.cost.available_back = r.sent_bytes - phase_start;
    report.cost.bottleneck_back = r.beyond;
    report.bytes_sent = r.sent_bytes + r.beyond;
    report.lost = r.lost;
    report.seconds = r.started.elapsed().as_secs_f64();
    Ok(report)
}
