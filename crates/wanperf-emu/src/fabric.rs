//! The I/O loop of every emulated network, from `wanperf path`'s one link to a topology's
//! many: each link joins two devices (TUN, or a packet socket on a veth end) and has a pure
//! [`Link`] cell per direction. One thread reads what the devices have, hands each packet to
//! its direction's cell with the current time, writes out what the cells say is due, and
//! sleeps (ppoll, 1 µs timer slack) until shortly before the next event. How late each packet
//! leaves against its theoretical time is recorded.
//!
//! Besides the cells the loop knows three small things: a router's ICMP may be held back
//! (its slow path) or dropped as it leaves the router ([`IcmpShape`]); synthetic cross
//! traffic may be injected into a direction's queue ([`Injection`]), where injected packets
//! take their place in the queue and on the wire and vanish at the far end; and a UDP flow's
//! datagrams that leave a link together are written as one super-packet ([`End::joins`]),
//! which the next link cuts back into the datagrams as it reads it.

use crate::config::{DirConfig, Nanos};
use crate::gso;
use crate::link::{Link, Verdict, CLASSES};
use crate::netns::{self, EnvError};
use crate::packet::{self, Headers};
pub use crate::stats::{DirStats, Lateness};
use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::Write;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;
use wanperf_sys::poll::{poll_fds, PollFd};

/// Most packets read from one device per turn of the I/O loop.
const READ_BATCH: usize = 16;

/// How long before an event the I/O loop stops sleeping and polls instead.
const SPIN_NS: Nanos = 250_000;

/// Longest per-second utilization series kept per direction (one day).
const MAX_SERIES: usize = 86_400;

/// Counters of one link.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkStats {
    /// The link's name.
    pub name: String,
    /// a → b.
    pub ab: DirStats,
    /// b → a.
    pub ba: DirStats,
}

/// The lateness (99th percentile, µs) beyond which the emulator did not keep its schedule:
/// an idle or busy but keeping-up loop reads 20–100 µs; past a millisecond, one packet in a
/// hundred left a millisecond or more after its time, and the network measured through it
/// was slower than the one configured (the offered packet rate exceeded what one thread
/// carries on this machine; or other work took its CPU).
pub const BEHIND_P99_US: f64 = 1000.0;

/// Where the emulator fell furthest behind: packets its ends' devices dropped unread, or a
/// lateness beyond [`BEHIND_P99_US`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Behind {
    /// The link's name.
    pub link: String,
    /// 0: a → b, 1: b → a.
    pub dir: usize,
    /// Its lateness's 99th percentile, µs.
    pub p99_us: f64,
    /// Packets the sending end's device dropped before the emulator read them
    /// ([`DirStats::unread_drops`]), in that direction.
    pub unread_drops: u64,
}

/// Fewest packets a direction must have carried for its p99 to say anything: over a few
/// dozen it is the single worst packet, and one packet late by milliseconds (a virtual
/// machine's core stolen for a moment) is no pattern; over a thousand it is ten or more.
pub const BEHIND_MIN_PACKETS: u64 = 1000;

/// The direction that lost the most packets unread (any: each is a loss the configured
/// network did not make), else the one whose lateness p99 is largest, when it is beyond
/// [`BEHIND_P99_US`] over at least [`BEHIND_MIN_PACKETS`] packets.
pub fn fell_behind(stats: &[LinkStats]) -> Option<Behind> {
    let late = |d: &DirStats| d.lateness.p99_us > BEHIND_P99_US && d.total(|c| c.packets_out) >= BEHIND_MIN_PACKETS;
    stats
        .iter()
        .flat_map(|l| [(l, 0, &l.ab), (l, 1, &l.ba)])
        .filter(|(_, _, d)| d.unread_drops > 0 || late(d))
        .max_by(|a, b| {
            let key = |d: &DirStats| (d.unread_drops, if late(d) { d.lateness.p99_us } else { 0.0 });
            let (ka, kb) = (key(a.2), key(b.2));
            ka.0.cmp(&kb.0).then(ka.1.total_cmp(&kb.1))
        })
        .map(|(l, dir, d)| Behind {
            link: l.name.clone(),
            dir,
            p99_us: d.lateness.p99_us,
            unread_drops: d.unread_drops,
        })
}

/// What a router does with the ICMP messages it sends (the kernel makes them).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IcmpShape {
    /// The router's own addresses (an ICMP packet from one of them is the router's).
    pub addrs: Vec<IpAddr>,
    /// Extra delay.
    pub delay_ns: Nanos,
    /// Uniform jitter on top (may reorder ICMP messages among themselves, as a slow path does).
    pub jitter_ns: Nanos,
    /// Drop them all.
    pub silent: bool,
}

/// One end of a link as the emulator sees it.
pub struct End {
    /// The device: a TUN's descriptor or a packet socket on a veth end.
    pub fd: OwnedFd,
    /// ICMP shaping of the node behind this end, for packets it sends.
    pub icmp: Option<IcmpShape>,
    /// Datagrams of one UDP flow that leave the link together toward this end are written as
    /// one UDP super-packet ([`gso::Joiner`]): its device takes UDP segmentation offload. A
    /// router's kernel forwards it once, and the next link cuts it back into the datagrams as
    /// it reads it, so every link's model still sees each one alone; a host's kernel hands the
    /// datagrams to its sockets one by one.
    pub joins: bool,
    /// The node behind this end (an index shared by all its ends): how long a joined group may
    /// wait for more datagrams depends on the delays of every link at that node.
    pub node: usize,
    /// The node forwards (a router): a group toward it may wait for more datagrams
    /// ([`join_holds`]). Toward a host only what is due at once is joined, so each datagram
    /// reaches it no later than alone.
    pub router: bool,
}

impl End {
    /// An end from a device and whether it [joins](End::joins) UDP datagrams, of node `node`,
    /// a router or not.
    pub fn new((fd, joins): (OwnedFd, bool), node: usize, router: bool, icmp: Option<IcmpShape>) -> End {
        End { fd, icmp, joins, node, router }
    }
}

/// Longest a group of joined datagrams waits for more before it is written (see [`join_holds`]).
const JOIN_HOLD_MAX_NS: Nanos = 100_000;

/// How long datagrams toward each node may wait to be joined: a quarter of the shortest one-way
/// delay of the links at that node, at most [`JOIN_HOLD_MAX_NS`]. Waiting costs no emulated
/// time: the next link takes each datagram's due time as its arrival ([`Carry`]) and sends it
/// on after its own delay, by which time the datagram, written late by the wait, has long been
/// read. A node with a link of no delay gets no wait (only what is due at once is joined), and
/// so does a host (`ends`: each link's two nodes and whether each is a router), and so does a
/// router with more than two links: there, packets from two links may leave by one, and a
/// group held back would reach that link after packets due later from the other.
fn join_holds(ends: &[[(usize, bool); 2]], configs: &[[&DirConfig; 2]]) -> Vec<Nanos> {
    let n = ends.iter().flatten().map(|e| e.0 + 1).max().unwrap_or(0);
    let mut hold = vec![JOIN_HOLD_MAX_NS; n];
    let mut links = vec![0usize; n];
    for (ends, cfg) in ends.iter().zip(configs) {
        let shortest = cfg[0].delay_ns.min(cfg[1].delay_ns) / 4;
        for &(node, router) in ends {
            links[node] += 1;
            hold[node] = if router { hold[node].min(shortest) } else { 0 };
        }
    }
    for (h, l) in hold.iter_mut().zip(links) {
        if l > 2 {
            *h = 0;
        }
    }
    hold
}

/// One link to run.
pub struct LinkSpec {
    /// Name (for stats and the event log).
    pub name: String,
    /// Names of the two directions in the event log (`up`/`down` for a path).
    pub dir_names: [String; 2],
    /// End a.
    pub a: End,
    /// End b.
    pub b: End,
    /// a → b.
    pub ab: DirConfig,
    /// b → a.
    pub ba: DirConfig,
    /// MTU of both ends.
    pub mtu: u32,
    /// Packets carry a virtio-net header and may be 64 KiB segmentation-offload packets.
    pub offload: bool,
    /// Read a packet only when its direction's transmitter is free: the sending node's
    /// interface queue (txqueuelen) then holds the backlog, as behind a real NIC.
    pub pull: bool,
    /// Link-layer header before the IP packet (0 on TUN, 14 on veth).
    pub l2: usize,
    /// Seed for loss and jitter (b → a uses a derived one).
    pub seed: u64,
    /// What re-marking does to a packet's bytes.
    pub remark: fn(&mut Vec<u8>),
}

/// When an injector's packets are due (cross-traffic generators implement it).
pub trait Injector: Send {
    /// The next packet's due time, None when finished.
    fn next_at(&self) -> Option<Nanos>;
    /// Takes the next packet if due by `now`.
    fn pop(&mut self, now: Nanos) -> Option<Nanos>;
}

/// Synthetic traffic into one direction of one link.
pub struct Injection {
    /// Link index.
    pub link: usize,
    /// a → b (else b → a).
    pub ab: bool,
    /// Wire size of each packet, bytes.
    pub packet: usize,
    /// The schedule.
    pub source: Box<dyn Injector>,
}

/// One packet leaving a link direction, as a [`Tap`] sees it.
#[derive(Debug)]
pub struct Departure<'a> {
    /// Link index.
    pub link: usize,
    /// 0: a → b, 1: b → a.
    pub dir: usize,
    /// When it left (the loop's clock).
    pub now: Nanos,
    /// The packet from its IP header on (or a non-IP frame's payload, e.g. ARP on veth).
    pub ip: &'a [u8],
    /// The packets it stands for (a segmentation-offload packet stands for several).
    pub packets: u32,
    /// Their bytes from the IP header on (the link's count less the link-layer headers).
    pub ip_bytes: u64,
}

/// Sees every packet a link delivers (not the synthetic cross traffic, which has no
/// headers), in the I/O thread: keep it cheap. A flow exporter is one.
pub trait Tap: Send {
    /// The loop's clock starts now: `now` 0 is this wall-clock instant.
    fn begin(&mut self, at: std::time::SystemTime);
    /// A packet left a link.
    fn departed(&mut self, d: &Departure<'_>);
    /// Once a second.
    fn tick(&mut self, now: Nanos);
    /// The loop stops.
    fn finish(&mut self, now: Nanos);
}

type TapBox = Option<Box<dyn Tap>>;

/// A change while running.
#[derive(Debug, Clone)]
pub enum Control {
    /// New configurations for both directions of a link.
    Set {
        /// Link index.
        link: usize,
        /// a → b.
        ab: DirConfig,
        /// b → a.
        ba: DirConfig,
    },
}

/// Holds a router's ICMP messages for their extra delay: a pure cell in (packet, now).
#[derive(Debug)]
pub struct SlowPath<P> {
    delay: Nanos,
    jitter: Nanos,
    rng: SmallRng,
    held: Vec<(Nanos, u64, P)>,
    seq: u64,
}

impl<P> SlowPath<P> {
    /// A slow path of `delay` plus uniform 0..=`jitter`.
    pub fn new(delay: Nanos, jitter: Nanos, seed: u64) -> Self {
        SlowPath { delay, jitter, rng: SmallRng::seed_from_u64(seed), held: Vec::new(), seq: 0 }
    }

    /// Holds `p`, which arrived at `now`.
    pub fn hold(&mut self, now: Nanos, p: P) {
        let extra = if self.jitter > 0 { self.rng.random_range(0..=self.jitter) } else { 0 };
        self.seq += 1;
        self.held.push((now + self.delay + extra, self.seq, p));
        // Latest first, so the next due is at the end (few messages: a sorted Vec is plenty).
        self.held.sort_by_key(|h| std::cmp::Reverse((h.0, h.1)));
    }

    /// The next message due by `now`, with the time it was due.
    pub fn pop(&mut self, now: Nanos) -> Option<(Nanos, P)> {
        if self.held.last().is_some_and(|h| h.0 <= now) {
            self.held.pop().map(|h| (h.0, h.2))
        } else {
            None
        }
    }

    /// When the next message is due.
    pub fn next_at(&self) -> Option<Nanos> {
        self.held.last().map(|h| h.0)
    }
}

/// How long a written packet's due time is kept for the next link (forwarding is done in the
/// write itself, or soon after by the kernel's softirq thread).
const CARRY_KEEP_NS: Nanos = 20_000_000;

/// Most due times kept at once.
const CARRY_MAX: usize = 1 << 16;

/// Emulated time carried across a kernel router. The loop writes a packet out when it is due,
/// but this thread can be late (on a busy or virtual machine by a millisecond and more; under
/// a burst by the few µs each write takes), and the next link would stamp the packet with the
/// time it reads it: packets a 27 Mbit/s link spaced evenly would reach a 32 Mbit/s link after
/// it together and leave it 32 Mbit/s apart, a rate no link of the emulated path imposed (at
/// 1 Gbit/s, 12 µs a packet, a few µs late is enough). So every written packet's due time is
/// kept (by [`packet::identity`]) and the next link takes it as the packet's arrival; an ICMP
/// error a router or host sends about it takes it too (by the packet the error quotes).
/// Packets a host sends carry nothing: a host's own time is real.
#[derive(Default)]
struct Carry {
    due: HashMap<u64, (Nanos, Nanos), std::hash::BuildHasherDefault<Prehashed>>,
    swept: Nanos,
}

/// A hasher for keys that are hashes already ([`packet::identity`]): hashing them again is
/// a per-packet cost for nothing.
#[derive(Default)]
struct Prehashed(u64);

impl std::hash::Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

impl Carry {
    /// `ip` was written at `now`, due at `due`.
    fn wrote(&mut self, ip: &[u8], due: Nanos, now: Nanos) {
        if self.due.len() >= CARRY_MAX {
            return;
        }
        if let Some(id) = packet::identity(ip) {
            self.due.insert(id, (due, now));
        }
    }

    /// When `ip`, read at `now`, arrived in the emulated network.
    fn arrival(&mut self, ip: &[u8], now: Nanos) -> Nanos {
        if self.due.is_empty() {
            return now;
        }
        let mut take = |p: &[u8]| packet::identity(p).and_then(|id| self.due.remove(&id)).map(|d| d.0);
        take(ip).or_else(|| packet::quoted(ip).and_then(&mut take)).map_or(now, |at| at.min(now))
    }

    /// Forgets due times kept longer than [`CARRY_KEEP_NS`] (packets that went to a host).
    fn sweep(&mut self, now: Nanos) {
        if now.saturating_sub(self.swept) >= CARRY_KEEP_NS / 2 {
            self.due.retain(|_, d| now.saturating_sub(d.1) < CARRY_KEEP_NS);
            self.swept = now;
        }
    }
}

/// A running set of links; dropping it stops the I/O thread.
pub struct Fabric {
    stop: Arc<AtomicBool>,
    live: Arc<Mutex<Vec<LinkStats>>>,
    io: Option<JoinHandle<Vec<LinkStats>>>,
    ctl: Sender<Control>,
}

impl Fabric {
    /// Starts the I/O thread for `links` (and the cross traffic in `injections`).
    /// `cpu`: the CPU the thread keeps to (see [`crate::path::cpu_split`]).
    pub fn start(
        links: Vec<LinkSpec>,
        injections: Vec<Injection>,
        log: Option<Box<dyn Write + Send>>,
        tap: TapBox,
        cpu: Option<usize>,
    ) -> Result<Fabric, EnvError> {
        let stop = Arc::new(AtomicBool::new(false));
        // Listed with zero counters until the loop's first snapshot replaces them.
        let zero = |l: &LinkSpec| LinkStats { name: l.name.clone(), ab: DirStats::default(), ba: DirStats::default() };
        let live = Arc::new(Mutex::new(links.iter().map(zero).collect()));
        let (ctl, rx) = channel();
        let (s2, l2) = (stop.clone(), live.clone());
        let io = std::thread::Builder::new()
            .name("wanperf-fabric".into())
            .spawn(move || {
                // Best effort: without it the loop still runs, only shares its core.
                let _ = crate::path::pin(cpu.as_slice());
                io_loop(links, injections, rx, &s2, &l2, log, tap)
            })
            .map_err(|e| EnvError::Sys { what: "starting the I/O thread", err: e })?;
        Ok(Fabric { stop, live, io: Some(io), ctl })
    }

    /// The counters so far (refreshed every 100 ms).
    pub fn stats(&self) -> Vec<LinkStats> {
        self.live.lock().map(|g| g.clone()).unwrap_or_default()
    }

    /// Sends a change to the running loop (applied within a turn of the loop, < 50 ms).
    pub fn control(&self, c: Control) {
        let _ = self.ctl.send(c);
    }

    /// Stops forwarding and returns the counters.
    pub fn stop(mut self) -> Vec<LinkStats> {
        self.stop.store(true, Ordering::Release);
        self.io.take().and_then(|h| h.join().ok()).unwrap_or_default()
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.io.take() {
            let _ = h.join();
        }
    }
}

struct Dir {
    link: Link<Vec<u8>>,
    late: Histogram<u64>,
    write_errors: u64,
    name: String,
    series: Vec<u64>,
    counted: u64,
    injected: u64,
    icmp_delayed: u64,
    icmp_dropped: u64,
    /// The latest arrival time handed to the cell: arrivals stay in order.
    last_in: Nanos,
}

impl Dir {
    fn new(cfg: DirConfig, seed: u64, name: String, remark: fn(&mut Vec<u8>)) -> Dir {
        let mut link = Link::new(cfg, seed);
        link.set_remark_hook(remark);
        Dir {
            link,
            // Two significant digits (1 %): a small table that stays in cache, recorded per packet.
            late: Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 2).expect("valid bounds"),
            write_errors: 0,
            name,
            series: Vec::new(),
            counted: 0,
            injected: 0,
            icmp_delayed: 0,
            icmp_dropped: 0,
            last_in: 0,
        }
    }

    /// The arrival time for a packet that arrived (in the emulated network) at `at` and is
    /// handed over at `now`: never before the previous one, never in the future.
    fn arrival(&mut self, at: Nanos, now: Nanos) -> Nanos {
        self.last_in = at.max(self.last_in).min(now);
        self.last_in
    }

    fn bytes_out(&self) -> u64 {
        self.link.counters().iter().map(|c| c.bytes_out).sum()
    }

    fn tick_second(&mut self) {
        let total = self.bytes_out();
        if self.series.len() < MAX_SERIES {
            self.series.push(total - self.counted);
        }
        self.counted = total;
    }

    fn stats(&self) -> DirStats {
        let c = self.link.counters();
        DirStats {
            classes: CLASSES.iter().zip(c.iter()).map(|(n, c)| (n.to_string(), c.clone())).collect(),
            lateness: Lateness {
                p50_us: self.late.value_at_quantile(0.5) as f64 / 1000.0,
                p99_us: self.late.value_at_quantile(0.99) as f64 / 1000.0,
                max_us: self.late.max() as f64 / 1000.0,
            },
            write_errors: self.write_errors,
            per_second_bytes: self.series.clone(),
            injected: self.injected,
            icmp_delayed: self.icmp_delayed,
            icmp_dropped: self.icmp_dropped,
            unread_drops: 0,
        }
    }
}

/// Wire size and segment count of a packet read from an offloading device (virtio-net header
/// first): a TSO super-packet stands for ceil(payload / gso_size) packets, each with headers.
pub fn offload_wire(buf: &[u8], l2: usize) -> (usize, u32) {
    let ip = &buf[(netns::VNET_HDR_LEN + l2).min(buf.len())..];
    let gso_type = buf.get(1).copied().unwrap_or(0) & 0x7f;
    let gso_size = buf.get(4..6).map_or(0, |b| u16::from_le_bytes([b[0], b[1]])) as usize;
    if gso_type == 0 || gso_size == 0 {
        return (ip.len() + l2, 1);
    }
    let l34 = packet::header_len(ip).min(ip.len());
    let payload = ip.len() - l34;
    let segs = payload.div_ceil(gso_size).max(1);
    (payload + segs * (l34 + l2), segs as u32)
}

/// Read buffers: a large packet travels in the buffer it was read into, which comes back
/// here once written; a small one (an ACK) is copied out so it holds no large buffer while
/// it waits in the delay line.
struct Buffers {
    size: usize,
    spare: Vec<Vec<u8>>,
}

impl Buffers {
    const SMALL: usize = 4096;
    const KEEP: usize = 256;

    fn take(&mut self) -> Vec<u8> {
        self.spare.pop().unwrap_or_else(|| vec![0; self.size])
    }

    fn fit(&mut self, mut buf: Vec<u8>, n: usize) -> Vec<u8> {
        if n <= Self::SMALL {
            let small = buf[..n].to_vec();
            self.keep(buf);
            small
        } else {
            buf.truncate(n);
            buf
        }
    }

    fn keep(&mut self, mut buf: Vec<u8>) {
        if buf.capacity() >= self.size && self.spare.len() < Self::KEEP {
            buf.resize(self.size, 0);
            self.spare.push(buf);
        }
    }
}

/// A held ICMP message: the packet, its wire length and segments, its headers.
type HeldIcmp = (Vec<u8>, usize, u32, Headers);

/// One link's state in the loop.
struct Running {
    fds: [RawFd; 2],
    /// UDP datagrams to each end, joined while they wait ([`End::joins`], with offload).
    joining: [Option<Joining>; 2],
    /// The node behind each end, and whether it is a router.
    ends: [(usize, bool); 2],
    _owned: [OwnedFd; 2],
    dirs: [Dir; 2],
    shapes: [Option<(IcmpShape, SlowPath<HeldIcmp>)>; 2],
    offload: bool,
    pull: bool,
    l2: usize,
}

impl Running {
    /// Where the IP packet starts in what its devices carry (after the virtio-net header when
    /// offloading, after the Ethernet header on packet sockets).
    fn ip_at(&self) -> usize {
        if self.offload {
            netns::VNET_HDR_LEN + self.l2
        } else {
            self.l2
        }
    }
}

type Log = Option<Box<dyn Write + Send>>;

fn log_verdict(log: &mut Log, now: Nanos, name: &str, len: usize, v: Verdict) {
    if let Some(l) = log.as_mut() {
        let what = match v {
            Verdict::Queued(c) => format!("arrive {len} queued {}", CLASSES[c]),
            Verdict::Remarked => format!("arrive {len} remarked scavenger"),
            Verdict::Dropped(r) => {
                format!("drop {len} {}", serde_json::to_string(&r).unwrap_or_default().trim_matches('"'))
            }
        };
        let _ = writeln!(l, "{now} {name} {what}");
    }
}

/// Reads one packet from end `e` (0: a, into a → b; 1: b, into b → a). Returns whether it did.
/// A UDP super-packet (datagrams a link before joined for the router between) is cut back
/// into its datagrams, and each arrives alone.
fn read_one(
    r: &mut Running,
    e: usize,
    clock: &dyn Fn() -> Nanos,
    pool: &mut Buffers,
    log: &mut Log,
    carry: &mut Carry,
) -> bool {
    // Each packet is stamped when it is read: a stamp from before a batch would let later
    // packets of the batch through early.
    if r.pull && !r.dirs[e].link.idle(clock()) {
        return false;
    }
    let mut buf = pool.take();
    let n = match wanperf_sys::fd::read(r.fds[e], &mut buf) {
        Ok(n) if n > 0 => n,
        _ => {
            pool.keep(buf);
            return false;
        }
    };
    if r.offload && gso::is_udp_super_packet(&buf[..n]) {
        // Cut from the read buffer itself, which goes straight back to the pool.
        if let Some(datagrams) = gso::segments(&buf[..n], netns::VNET_HDR_LEN, r.l2) {
            pool.keep(buf);
            for d in datagrams {
                arrive(r, e, d, clock(), pool, log, carry);
            }
            return true;
        }
    }
    let buf = pool.fit(buf, n);
    arrive(r, e, buf, clock(), pool, log, carry);
    true
}

/// `buf`, read from end `e` at `now`, arrives at its direction's link.
fn arrive(r: &mut Running, e: usize, buf: Vec<u8>, now: Nanos, pool: &mut Buffers, log: &mut Log, carry: &mut Carry) {
    let ip = &buf[r.ip_at().min(buf.len())..];
    let h = packet::parse(ip);
    let (len, segs) = if r.offload { offload_wire(&buf, r.l2) } else { (buf.len(), 1) };
    let dir = &mut r.dirs[e];
    let at = dir.arrival(carry.arrival(ip, now), now);
    if let Some((shape, slow)) = r.shapes[e].as_mut() {
        if packet::icmp_source(ip).is_some_and(|s| shape.addrs.contains(&s)) {
            if shape.silent {
                dir.icmp_dropped += 1;
                pool.keep(buf);
            } else {
                dir.icmp_delayed += 1;
                slow.hold(at, (buf, len, segs, h));
            }
            return;
        }
    }
    if r.offload && segs > 1 && dir.link.decides_per_packet() {
        admit_each_segment(dir, at, now, buf, (len, segs), h, r.l2, pool, log);
        return;
    }
    let v = dir.link.push_segments(at, buf, len, segs, h);
    log_verdict(log, now, &dir.name, len, v);
}

/// A super-packet (`wire`: its wire bytes and segments) on a link with random loss or a
/// policer: each segment is decided on as if sent alone ([`crate::link::Link::admit_segments`]).
/// Where all passed alike it stays whole; otherwise it is cut where the decisions change
/// ([`gso::pieces`]: each run of segments decided alike travels as one smaller super-packet,
/// as the sender's kernel would have segmented it) and only the runs that passed go on, so a
/// drop is a single packet's. A super-packet that cannot be cut (not one the kernel makes)
/// is decided on whole, as on a link without offload decisions.
#[allow(clippy::too_many_arguments)]
fn admit_each_segment(
    dir: &mut Dir,
    at: Nanos,
    now: Nanos,
    buf: Vec<u8>,
    (len, segs): (usize, u32),
    h: Headers,
    l2: usize,
    pool: &mut Buffers,
    log: &mut Log,
) {
    let Some(lens) = gso::segment_lens(&buf, netns::VNET_HDR_LEN, l2) else {
        // Not one the kernel's segmentation makes (or cuts): decided on whole, as before.
        let v = dir.link.push_segments(at, buf, len, segs, h);
        log_verdict(log, now, &dir.name, len, v);
        return;
    };
    let fates = dir.link.admit_segments(at, &lens, &h);
    let mut runs: Vec<std::ops::Range<usize>> = Vec::new();
    for i in 0..fates.len() {
        match runs.last_mut() {
            Some(r) if fates[r.start] == fates[i] => r.end = i + 1,
            _ => runs.push(i..i + 1),
        }
    }
    // Only what passed is cut out and copied; a dropped run is logged by its wire bytes.
    let (pass, drop): (Vec<_>, Vec<_>) = runs.into_iter().partition(|r| fates[r.start].is_ok());
    // `pieces` takes every packet `segment_lens` took: the whole-packet branch below is the
    // one where all segments passed alike.
    let whole = pass.len() == 1 && drop.is_empty();
    let parts = if pass.is_empty() {
        Some(Vec::new())
    } else if whole {
        None
    } else {
        gso::pieces(&buf, netns::VNET_HDR_LEN, l2, &pass)
    };
    let Some(parts) = parts else {
        match fates[0] {
            Ok(a) => {
                let v = dir.link.push_admitted(at, buf, len, segs, a, h);
                log_verdict(log, now, &dir.name, len, v);
            }
            Err(reason) => {
                log_verdict(log, now, &dir.name, len, Verdict::Dropped(reason));
                pool.keep(buf);
            }
        }
        return;
    };
    for r in drop {
        if let Err(reason) = fates[r.start] {
            log_verdict(log, now, &dir.name, lens[r].iter().sum(), Verdict::Dropped(reason));
        }
    }
    for (p, r) in parts.into_iter().zip(pass) {
        let (wire, n) = offload_wire(&p, l2);
        if let Ok(a) = fates[r.start] {
            let v = dir.link.push_admitted(at, p, wire, n, a, h);
            log_verdict(log, now, &dir.name, wire, v);
        }
    }
    pool.keep(buf);
}

#[allow(clippy::too_many_arguments)]
fn write_due(
    r: &mut Running,
    li: usize,
    now: Nanos,
    holds: &[Nanos],
    pool: &mut Buffers,
    log: &mut Log,
    tap: &mut TapBox,
    carry: &mut Carry,
) {
    let ip_at = r.ip_at();
    for e in 0..2 {
        // A router's held ICMP joins its link when its slow path lets it go.
        if let Some((_, slow)) = r.shapes[e].as_mut() {
            while let Some((due, (buf, len, segs, h))) = slow.pop(now) {
                let at = r.dirs[e].arrival(due, now);
                let v = r.dirs[e].link.push_segments(at, buf, len, segs, h);
                log_verdict(log, now, &r.dirs[e].name, len, v);
            }
        }
        let (out, l2) = (1 - e, r.l2);
        let dir = &mut r.dirs[e];
        let joining = &mut r.joining[out];
        while let Some((pkt, at)) = dir.link.pop(now) {
            if !pkt.is_empty() {
                carry.wrote(&pkt[ip_at.min(pkt.len())..], at, now);
            }
            let _ = dir.late.record(now.saturating_sub(at).max(1));
            if let Some(t) = tap.as_mut() {
                if !pkt.is_empty() {
                    let (wire, segs) = if r.offload { offload_wire(&pkt, r.l2) } else { (pkt.len(), 1) };
                    t.departed(&Departure {
                        link: li,
                        dir: e,
                        now,
                        ip: &pkt[ip_at.min(pkt.len())..],
                        packets: segs,
                        ip_bytes: wire.saturating_sub(segs as usize * r.l2) as u64,
                    });
                }
            }
            if let Some(l) = log.as_mut() {
                let _ = writeln!(l, "{now} {} depart {} due {at}", dir.name, pkt.len());
            }
            match joining.as_mut() {
                _ if pkt.is_empty() => pool.keep(pkt),
                Some(j) => j.push(pkt, now).for_each(|p| put(r.fds[out], p, l2, &mut dir.write_errors, pool)),
                None => put(r.fds[out], pkt, l2, &mut dir.write_errors, pool),
            }
        }
        // A group that waited its time (or may not wait at all) goes now.
        if let Some(p) = joining.as_mut().and_then(|j| j.due(now, holds[r.ends[out].0])) {
            put(r.fds[out], p, l2, &mut dir.write_errors, pool);
        }
    }
}

/// Writes every group of joined datagrams held, whatever its wait.
fn flush_joined(run: &mut [Running], pool: &mut Buffers) {
    for r in run.iter_mut() {
        for o in 0..2 {
            let (fd, l2) = (r.fds[o], r.l2);
            if let Some(p) = r.joining[o].as_mut().and_then(Joining::take) {
                put(fd, p, l2, &mut r.dirs[1 - o].write_errors, pool);
            }
        }
    }
}

/// Writes `p` to device `fd`; a failed write counts each packet it stood for in `errors`.
fn put(fd: RawFd, p: Vec<u8>, l2: usize, errors: &mut u64, pool: &mut Buffers) {
    if wanperf_sys::fd::write(fd, &p).is_err() {
        *errors += gso::segment_lens(&p, netns::VNET_HDR_LEN, l2).map_or(1, |l| l.len() as u64);
    }
    pool.keep(p);
}

/// UDP datagrams leaving a link toward a router, joined while they wait ([`gso::Joiner`]).
struct Joining {
    joiner: gso::Joiner,
    /// When the first datagram held left its link.
    since: Option<Nanos>,
    /// What [`Joining::push`] hands back, kept to be reused packet after packet.
    ready: Vec<Vec<u8>>,
}

impl Joining {
    fn new(l2: usize, max_ip: usize) -> Joining {
        Joining { joiner: gso::Joiner::new(netns::VNET_HDR_LEN, l2, max_ip), since: None, ready: Vec::new() }
    }

    /// `p` left its link at `now`; what may be written now, in order.
    fn push(&mut self, p: Vec<u8>, now: Nanos) -> std::vec::Drain<'_, Vec<u8>> {
        self.joiner.push(p, &mut self.ready);
        if self.joiner.is_empty() {
            self.since = None;
        } else if !self.ready.is_empty() || self.since.is_none() {
            // A new group began (with `p`).
            self.since = Some(now);
        }
        self.ready.drain(..)
    }

    /// The group held, if it has waited `hold` (or is to go now: `hold` 0).
    fn due(&mut self, now: Nanos, hold: Nanos) -> Option<Vec<u8>> {
        let since = self.since?;
        (now >= since + hold).then(|| self.take()).flatten()
    }

    /// The group held, whatever its wait.
    fn take(&mut self) -> Option<Vec<u8>> {
        self.since = None;
        self.joiner.take()
    }
}

fn io_loop(
    links: Vec<LinkSpec>,
    mut injections: Vec<Injection>,
    ctl: Receiver<Control>,
    stop: &AtomicBool,
    live: &Mutex<Vec<LinkStats>>,
    mut log: Log,
    mut tap: TapBox,
) -> Vec<LinkStats> {
    netns::set_timer_slack();
    // The smallest MTU at each node: a router answers a larger datagram alone.
    let mut mtus: Vec<u32> = Vec::new();
    for l in &links {
        for node in [l.a.node, l.b.node] {
            if mtus.len() <= node {
                mtus.resize(node + 1, u32::MAX);
            }
            mtus[node] = mtus[node].min(l.mtu);
        }
    }
    let mut read_size = 1500;
    let names: Vec<String> = links.iter().map(|l| l.name.clone()).collect();
    let mut run: Vec<Running> = links
        .into_iter()
        .map(|l| {
            let packet = if l.offload { 65_536 + netns::VNET_HDR_LEN } else { (l.mtu as usize).max(1500) };
            read_size = read_size.max(packet + 64 + l.l2);
            let [na, nb] = l.dir_names;
            let shape = |s: Option<IcmpShape>, seed: u64| {
                s.map(|s| {
                    let slow = SlowPath::new(s.delay_ns, s.jitter_ns, seed);
                    (s, slow)
                })
            };
            Running {
                fds: [l.a.fd.as_raw_fd(), l.b.fd.as_raw_fd()],
                joining: [(l.a.joins, l.a.node), (l.b.joins, l.b.node)]
                    .map(|(j, node)| (j && l.offload).then(|| Joining::new(l.l2, mtus[node] as usize))),
                ends: [(l.a.node, l.a.router), (l.b.node, l.b.router)],
                shapes: [shape(l.a.icmp, l.seed ^ 0x0005_eeda), shape(l.b.icmp, l.seed ^ 0x0005_eedb)],
                _owned: [l.a.fd, l.b.fd],
                dirs: [
                    Dir::new(l.ab, l.seed, na, l.remark),
                    Dir::new(l.ba, l.seed.wrapping_add(0x9e37_79b9), nb, l.remark),
                ],
                offload: l.offload,
                pull: l.pull,
                l2: l.l2,
            }
        })
        .collect();
    let holds_of = |run: &[Running]| {
        let nodes: Vec<[(usize, bool); 2]> = run.iter().map(|r| r.ends).collect();
        let configs: Vec<[&DirConfig; 2]> = run.iter().map(|r| r.dirs.each_ref().map(|d| d.link.config())).collect();
        join_holds(&nodes, &configs)
    };
    let mut holds = holds_of(&run);
    let start = Instant::now();
    if let Some(t) = tap.as_mut() {
        t.begin(std::time::SystemTime::now());
    }
    let now_ns = || start.elapsed().as_nanos() as Nanos;
    let mut pool = Buffers { size: read_size, spare: Vec::new() };
    let mut carry = Carry::default();
    let mut published = 0;
    let mut next_second: Nanos = 1_000_000_000;
    let mut ready = vec![true; run.len() * 2];
    let mut fds: Vec<PollFd> = Vec::with_capacity(run.len() * 2);
    let snapshot = |run: &[Running]| -> Vec<LinkStats> {
        run.iter()
            .zip(&names)
            .map(|(r, n)| LinkStats { name: n.clone(), ab: r.dirs[0].stats(), ba: r.dirs[1].stats() })
            .collect()
    };
    // Every link is listed from the start (zero counters), not only after the first refresh:
    // `net stats` right after `net up` shows the links.
    if let Ok(mut g) = live.lock() {
        *g = snapshot(&run);
    }
    while !stop.load(Ordering::Acquire) {
        while let Ok(c) = ctl.try_recv() {
            match c {
                Control::Set { link, ab, ba } => {
                    if let Some(r) = run.get_mut(link) {
                        r.dirs[0].link.set_config(ab);
                        r.dirs[1].link.set_config(ba);
                    }
                    holds = holds_of(&run);
                }
            }
        }
        let now = now_ns();
        while now >= next_second {
            run.iter_mut().for_each(|r| r.dirs.iter_mut().for_each(Dir::tick_second));
            if let Some(t) = tap.as_mut() {
                t.tick(now);
            }
            next_second += 1_000_000_000;
        }
        carry.sweep(now);
        if now - published >= 100_000_000 {
            if let Ok(mut g) = live.lock() {
                *g = snapshot(&run);
            }
            published = now;
        }
        // Due packets leave before more are read, and between every read: when the hosts send
        // faster than one thread can carry, the backlog waits in the hosts' device queues (as
        // behind a real busy NIC), not in packets that are already due.
        for _ in 0..READ_BATCH {
            let now = now_ns();
            run.iter_mut()
                .enumerate()
                .for_each(|(li, r)| write_due(r, li, now, &holds, &mut pool, &mut log, &mut tap, &mut carry));
            let mut got = false;
            for (i, r) in run.iter_mut().enumerate() {
                for e in 0..2 {
                    if ready[i * 2 + e] {
                        if read_one(r, e, &now_ns, &mut pool, &mut log, &mut carry) {
                            got = true;
                        } else {
                            ready[i * 2 + e] = false;
                        }
                    }
                }
            }
            if !got {
                break;
            }
        }
        let now = now_ns();
        for (i, inj) in injections.iter_mut().enumerate() {
            if let Some(r) = run.get_mut(inj.link) {
                let d = &mut r.dirs[usize::from(!inj.ab)];
                // Each generator is one flow to a flow-fair queue.
                let h = Headers { flow: (i as u32 + 1).wrapping_mul(0x9e37_79b9), ..Headers::default() };
                while let Some(due) = inj.source.pop(now) {
                    d.injected += 1;
                    let at = d.arrival(due, now);
                    d.link.push(at, Vec::new(), inj.packet, h);
                }
            }
        }
        run.iter_mut()
            .enumerate()
            .for_each(|(li, r)| write_due(r, li, now, &holds, &mut pool, &mut log, &mut tap, &mut carry));
        let now = now_ns();
        let mut next = injections.iter().filter_map(|i| i.source.next_at()).min();
        let mut earliest = |t: Nanos| next = Some(next.map_or(t, |n| n.min(t)));
        for r in &run {
            for e in 0..2 {
                if let Some(t) = r.dirs[e].link.next_event() {
                    earliest(t);
                }
                if let Some(t) = r.shapes[e].as_ref().and_then(|s| s.1.next_at()) {
                    earliest(t);
                }
                // Come back when a busy transmitter frees up to pull the next packet.
                let f = r.dirs[e].link.free_at();
                if r.pull && f > now {
                    earliest(f);
                }
            }
        }
        earliest(next_second);
        let wait = next.map_or(50_000_000, |t| t.saturating_sub(now)).min(50_000_000);
        // Waking from a sleep takes tens of µs: sleep until shortly before the event, then
        // poll without sleeping for the rest, so packets leave on time.
        let wait = wait.saturating_sub(SPIN_NS);
        if wait > 0 {
            // Nothing more is due soon: joined datagrams do not wait through a sleep. (While
            // the loop spins instead, `write_due` sends each group when its wait is over.)
            flush_joined(&mut run, &mut pool);
        }
        fds.clear();
        for r in &run {
            for e in 0..2 {
                // A pulling reader does not wait on a device whose link is busy.
                let events = if r.pull && !r.dirs[e].link.idle(now) { 0 } else { libc::POLLIN };
                fds.push(PollFd { fd: r.fds[e], events, revents: 0 });
            }
        }
        match poll_fds(&mut fds, Some(std::time::Duration::from_nanos(wait))) {
            Ok(n) if n > 0 => {
                for (flag, p) in ready.iter_mut().zip(&fds) {
                    *flag = p.revents & libc::POLLIN != 0;
                }
            }
            Ok(_) => ready.iter_mut().for_each(|f| *f = false),
            // EINTR: look again at everything.
            Err(_) => ready.iter_mut().for_each(|f| *f = true),
        }
    }
    // Groups still held left their links already (counted, seen by the tap): write them.
    flush_joined(&mut run, &mut pool);
    if let Some(l) = log.as_mut() {
        let _ = l.flush();
    }
    if let Some(t) = tap.as_mut() {
        t.finish(now_ns());
    }
    let stats = snapshot(&run);
    // Closing a TUN descriptor unregisters its device, which waits for an RCU grace period
    // (~30 ms here); closing them all at once lets those waits overlap instead of adding up.
    let fds: Vec<OwnedFd> = run.into_iter().flat_map(|r| r._owned).collect();
    std::thread::scope(|s| {
        for fd in fds {
            s.spawn(move || drop(fd));
        }
    });
    stats
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::ClassCounters;

    /// An IPv4 UDP packet from 198.18.0.2 to 198.18.4.2 with `ttl` and `seq` in its payload.
    fn udp(ttl: u8, seq: u8) -> Vec<u8> {
        let mut p = vec![0u8; 60];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&60u16.to_be_bytes());
        p[4..6].copy_from_slice(&[0x12, seq]);
        p[8] = ttl;
        p[9] = 17;
        p[12..16].copy_from_slice(&[198, 18, 0, 2]);
        p[16..20].copy_from_slice(&[198, 18, 4, 2]);
        p[20..24].copy_from_slice(&[0x9c, 0x40, 0x82, 0x9a]);
        p[26] = seq;
        p[40] = seq;
        p
    }

    /// The time-exceeded message 198.18.1.1 sends about `quoting`.
    fn time_exceeded(quoting: &[u8]) -> Vec<u8> {
        let mut p = vec![0u8; 28];
        p[0] = 0x45;
        p[8] = 64;
        p[9] = 1;
        p[12..16].copy_from_slice(&[198, 18, 1, 1]);
        p[16..20].copy_from_slice(&[198, 18, 0, 2]);
        p[20] = 11;
        p.extend_from_slice(&quoting[..28]);
        p
    }

    #[test]
    fn a_late_packet_arrives_at_the_next_link_when_it_was_due() {
        let mut c = Carry::default();
        let sent = udp(5, 1);
        // Nothing kept: the next link stamps the read time.
        assert_eq!(c.arrival(&sent, 1_020_000), 1_020_000);
        // 1.5 ms late: the router forwards it (TTL one less, header checksum changed) and the
        // next link takes its due time, once.
        c.wrote(&sent, 2_000_000, 3_500_000);
        let mut forwarded = sent.clone();
        forwarded[8] -= 1;
        forwarded[10] = 0xab;
        assert_eq!(c.arrival(&forwarded, 3_510_000), 2_000_000);
        assert_eq!(c.arrival(&forwarded, 3_520_000), 3_520_000);
        // Another packet (another sequence number) is not taken for it.
        c.wrote(&sent, 4_000_000, 5_000_000);
        assert_eq!(c.arrival(&udp(5, 2), 5_010_000), 5_010_000);
        // A router's time-exceeded message about a late packet leaves when that packet arrived.
        let expiring = udp(1, 3);
        c.wrote(&expiring, 6_000_000, 7_000_000);
        assert_eq!(c.arrival(&time_exceeded(&expiring), 7_010_000), 6_000_000);
        // Kept no longer than CARRY_KEEP_NS.
        c.sweep(5_000_000 + CARRY_KEEP_NS);
        assert_eq!(c.arrival(&udp(5, 1), 30_000_000), 30_000_000);
    }

    #[test]
    fn arrivals_stay_in_order_and_never_in_the_future() {
        let mut d = Dir::new(DirConfig::default(), 1, "x".into(), |_| {});
        assert_eq!(d.arrival(900, 1_000), 900);
        assert_eq!(d.arrival(800, 1_100), 900, "not before the previous one");
        assert_eq!(d.arrival(5_000, 1_200), 1_200, "not after now");
    }

    #[test]
    fn slow_path_holds_each_message_for_delay_plus_jitter() {
        let mut s = SlowPath::new(5_000_000, 0, 1);
        s.hold(1_000, "a");
        s.hold(2_000, "b");
        assert_eq!(s.next_at(), Some(5_001_000));
        assert_eq!(s.pop(5_000_999), None);
        assert_eq!(s.pop(5_001_000), Some((5_001_000, "a")));
        assert_eq!(s.pop(5_001_500), None);
        assert_eq!(s.pop(9_000_000), Some((5_002_000, "b")));
        assert_eq!(s.next_at(), None);
        let mut j = SlowPath::new(1_000_000, 4_000_000, 9);
        for i in 0..200u64 {
            j.hold(i, i);
        }
        let mut out = Vec::new();
        let mut t = 0;
        while out.len() < 200 {
            t += 100_000;
            while let Some((due, p)) = j.pop(t) {
                assert!(due <= t);
                out.push((t, p));
            }
        }
        // Every message waits at least the delay and at most delay + jitter (+ the poll step);
        // jitter reorders them.
        assert!(out.iter().all(|&(t, p)| t >= p + 1_000_000 && t <= p + 5_100_000));
        assert!(out.windows(2).any(|w| w[1].1 < w[0].1), "jitter reorders");
    }

    #[test]
    fn falling_behind_is_the_worst_direction_past_a_millisecond() {
        let dir = |p99_us: f64, packets_out: u64| DirStats {
            classes: [("besteffort".to_string(), ClassCounters { packets_out, ..ClassCounters::default() })].into(),
            lateness: Lateness { p50_us: 5.0, p99_us, max_us: 19_000.0 },
            ..DirStats::default()
        };
        let link =
            |name: &str, ab: f64, ba: f64| LinkStats { name: name.into(), ab: dir(ab, 96_315), ba: dir(ba, 5000) };
        // Keeping up: tens of µs at p99, whatever the worst single packet (a VM's stolen ms).
        assert_eq!(fell_behind(&[link("a-r1", 40.0, 70.0), link("r1-b", 90.0, 30.0)]), None);
        assert_eq!(fell_behind(&[]), None);
        let got = fell_behind(&[link("a-r1", 52.0, 18.0), link("r1-r2", 1367.0, 40.0), link("r2-b", 30.0, 4927.0)]);
        assert_eq!(got, Some(Behind { link: "r2-b".into(), dir: 1, p99_us: 4927.0, unread_drops: 0 }));
        // The way back of a flood: 17 packets, the worst of them 21.6 ms late behind the
        // flood's backlog, is one packet's fate; the flood's own direction is the finding.
        let flood = LinkStats { name: "a-r1".into(), ab: dir(8126.0, 96_315), ba: dir(21_600.0, 17) };
        assert_eq!(
            fell_behind(&[flood]),
            Some(Behind { link: "a-r1".into(), dir: 0, p99_us: 8126.0, unread_drops: 0 })
        );
        // A packet a sending host's device dropped unread is a loss no configuration made:
        // named however punctual the rest, and before a later direction.
        let mut dropped = link("a-r1", 40.0, 70.0);
        dropped.ab.unread_drops = 3;
        let got = fell_behind(&[link("r1-b", 4927.0, 30.0), dropped]);
        assert_eq!(got, Some(Behind { link: "a-r1".into(), dir: 0, p99_us: 40.0, unread_drops: 3 }));
    }

    #[test]
    fn icmp_source_reads_both_families() {
        let mut v4 = vec![0u8; 28];
        v4[0] = 0x45;
        v4[9] = 1;
        v4[12..16].copy_from_slice(&[198, 18, 3, 2]);
        assert_eq!(packet::icmp_source(&v4), Some(IpAddr::from([198, 18, 3, 2])));
        v4[9] = 17;
        assert_eq!(packet::icmp_source(&v4), None);
        let mut v6 = vec![0u8; 48];
        v6[0] = 0x60;
        v6[6] = 58;
        v6[8] = 0xfd;
        assert_eq!(packet::icmp_source(&v6).map(|a| a.is_ipv6()), Some(true));
        assert_eq!(packet::icmp_source(&[]), None);
    }

    #[test]
    fn a_group_waits_toward_a_chains_router_only_and_a_quarter_of_its_shortest_delay() {
        let d = |ms: u64| DirConfig { delay_ns: ms * 1_000_000, ..DirConfig::default() };
        let (slow, fast, none) = (d(20), DirConfig { delay_ns: 200_000, ..DirConfig::default() }, d(0));
        // a(0) — r1(1) — r2(2) — b(3), and r2 — x(4) as well: r2 has three links.
        let ends = [[(0, false), (1, true)], [(1, true), (2, true)], [(2, true), (3, false)], [(2, true), (4, false)]];
        let configs = [[&slow, &slow], [&fast, &slow], [&slow, &slow], [&slow, &slow]];
        let h = join_holds(&ends, &configs);
        assert_eq!(h[1], 50_000, "r1: a quarter of its shortest delay (200 µs)");
        assert_eq!(h[2], 0, "r2: three links, two may feed one");
        assert_eq!((h[0], h[3], h[4]), (0, 0, 0), "hosts: only what is due at once");
        let configs = [[&slow, &slow], [&slow, &slow], [&slow, &slow], [&slow, &slow]];
        assert_eq!(join_holds(&ends[..3], &configs[..3])[1], JOIN_HOLD_MAX_NS, "at most 100 µs");
        let configs = [[&slow, &none], [&slow, &slow], [&slow, &slow]];
        assert_eq!(join_holds(&ends[..3], &configs)[1], 0, "a link without delay: no wait");
    }

    #[test]
    fn a_held_group_goes_when_its_wait_is_over_or_a_datagram_cannot_join() {
        /// A plain IPv4 UDP datagram as a TUN device with offload hands it over.
        fn dgram(id: u16, port: u16) -> Vec<u8> {
            let mut b = vec![0u8; netns::VNET_HDR_LEN];
            b[0] = 1; // NEEDS_CSUM
            b[6] = 20; // csum_start: the UDP header
            b[8] = 6; // csum_offset: its checksum
            let mut ip = udp(64, id as u8);
            ip[4..6].copy_from_slice(&id.to_be_bytes());
            ip[6] = 0x40;
            ip[22..24].copy_from_slice(&port.to_be_bytes());
            ip[24..26].copy_from_slice(&40u16.to_be_bytes());
            b.extend_from_slice(&ip);
            b
        }
        let mut j = Joining::new(0, 1500);
        let mut ready = Vec::new();
        ready.extend(j.push(dgram(1, 9), 1_000));
        ready.extend(j.push(dgram(2, 9), 1_500));
        assert!(ready.is_empty());
        assert_eq!(j.due(50_999, 50_000), None, "the wait runs from the first datagram held");
        let group = j.due(51_000, 50_000).expect("its wait is over");
        assert!(gso::is_udp_super_packet(&group));
        assert_eq!(j.due(1_000_000, 0), None, "nothing held");
        // Another flow sends the group held on, and waits from its own time.
        ready.extend(j.push(dgram(3, 9), 2_000));
        ready.extend(j.push(dgram(4, 7), 3_000));
        assert_eq!(ready.len(), 1);
        assert_eq!(j.due(52_999, 50_000), None);
        assert!(j.due(53_000, 50_000).is_some());
    }
}
