//! The server's UDP echo responder for `wanperf ping`: on the server's port, it stamps each
//! probe with the kernel's receive time and its own send time and returns it to allowed
//! clients (others get nothing, so the server is no reflector) — as large as it came, or only
//! its header when the probe asks for a short reply (`wanperf capacity`'s trains). It also
//! sends trains back for `wanperf capacity --reverse`, to clients that hold its token (see
//! [`TrainRequest`]) and within a byte budget per client, and counts the probes of clients
//! that ask (see [`Count`]: `wanperf trace --server` tells forward from reverse loss). For
//! `wanperf capacity --locate-back` it sends recursive packet trains (see [`RptRequest`]):
//! the routers' ICMP answers come to this socket's error queue (IP_RECVERR), and the echo
//! reports them to the client.

use crate::sys;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wanperf_proto::probe::{
    Count, Probe, RptAnswer, RptReport, RptRequest, TrainRequest, PROBE_HEADER_LEN, RPT_LOAD, RPT_MAX_HEADS,
    RPT_MAX_WAIT_MS, RPT_TAIL, TRAIN_MAX_COUNT, TRAIN_MAX_GAP_NS, TRAIN_MAX_SIZE, TRAIN_REQUEST_LEN,
};

/// Bytes of trains a client may have per second, and at once.
pub const TRAIN_BYTES_PER_S: f64 = 2e6;

/// Tokens and byte budgets of the clients asking for trains.
pub struct Trains {
    key: [u8; 32],
    buckets: HashMap<IpAddr, (f64, Instant)>,
}

impl Trains {
    /// A fresh secret (tokens of an earlier server run are not valid).
    pub fn new() -> Trains {
        let mut key = [0u8; 32];
        let _ = getrandom::fill(&mut key);
        Trains { key, buckets: HashMap::new() }
    }

    /// The token of `ip` in the 10-minute period `period`.
    fn token_in(&self, ip: IpAddr, period: u64) -> u64 {
        let mut h = blake3::Hasher::new_keyed(&self.key);
        match ip {
            IpAddr::V4(a) => h.update(&a.octets()),
            IpAddr::V6(a) => h.update(&a.octets()),
        };
        h.update(&period.to_be_bytes());
        let mut t = [0u8; 8];
        t.copy_from_slice(&h.finalize().as_bytes()[..8]);
        u64::from_be_bytes(t).max(1)
    }

    /// The current token of `ip`, `now_s` seconds since the epoch.
    pub fn token(&self, ip: IpAddr, now_s: u64) -> u64 {
        self.token_in(ip, now_s / 600)
    }

    /// Whether `token` is `ip`'s, now or in the previous period.
    pub fn valid(&self, ip: IpAddr, token: u64, now_s: u64) -> bool {
        token != 0 && (token == self.token(ip, now_s) || token == self.token_in(ip, (now_s / 600).saturating_sub(1)))
    }

    /// Takes `bytes` from `ip`'s budget ([`TRAIN_BYTES_PER_S`], as much at once), or refuses.
    pub fn take(&mut self, ip: IpAddr, bytes: f64, now: Instant) -> bool {
        if self.buckets.len() > 4096 {
            self.buckets.retain(|_, (_, at)| now.duration_since(*at) < Duration::from_secs(5));
        }
        let (left, at) = self.buckets.entry(ip).or_insert((TRAIN_BYTES_PER_S, now));
        *left = (*left + now.duration_since(*at).as_secs_f64() * TRAIN_BYTES_PER_S).min(TRAIN_BYTES_PER_S);
        *at = now;
        if *left < bytes {
            return false;
        }
        *left -= bytes;
        true
    }
}

impl Default for Trains {
    fn default() -> Self {
        Trains::new()
    }
}

/// Clients whose counts are kept at most (a count is per address and port: one trace).
const COUNTED_MAX: usize = 16_384;
/// A client silent this long is forgotten when the table is full.
const COUNTED_IDLE: Duration = Duration::from_secs(600);

/// Probes counted per client address and port, for probes that ask ([`Count`]).
#[derive(Default)]
pub struct Counts {
    seen: HashMap<SocketAddr, (u64, Instant)>,
}

impl Counts {
    /// Counts one more probe from `from`; returns its count so far. A full table forgets the
    /// clients silent for [`COUNTED_IDLE`], then, if it must, all but the newest half: a new
    /// client is always counted (a forgotten one starts again from 1, which its replies show).
    pub fn add(&mut self, from: SocketAddr, now: Instant) -> u64 {
        if self.seen.len() >= COUNTED_MAX && !self.seen.contains_key(&from) {
            self.seen.retain(|_, (_, at)| now.duration_since(*at) < COUNTED_IDLE);
            if self.seen.len() >= COUNTED_MAX {
                let mut ages: Vec<Instant> = self.seen.values().map(|(_, at)| *at).collect();
                ages.sort_unstable();
                let cut = ages[ages.len() / 2];
                self.seen.retain(|_, (_, at)| *at > cut);
            }
        }
        let e = self.seen.entry(from).or_insert((0, now));
        e.0 += 1;
        e.1 = now;
        e.0
    }
}

/// What the echo sends for one train request: `packets` replies of `len` bytes, the probe
/// and train fields written into each with the sequence number advanced.
struct TrainAnswer {
    probe: Probe,
    fields: TrainRequest,
    len: usize,
    packets: u16,
}

impl TrainAnswer {
    /// Reply `i` (0-based), its send time stamped now.
    fn packet(&self, i: u16) -> Vec<u8> {
        self.packet_at(u64::from(i), self.len)
    }

    /// A reply of `len` bytes numbered `off` after the request, its send time stamped now.
    fn packet_at(&self, off: u64, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        let seq = self.probe.seq.wrapping_add(off);
        Probe { seq, server_tx_ns: sys::realtime_ns(), ..self.probe }.write(&mut b);
        self.fields.write(&mut b);
        b
    }

    /// Sends it back to back (one sendmmsg as far as the send buffer allows: the train leaves
    /// at the host's own rate, not a system call's).
    fn send_train(&self, sock: &UdpSocket, to: SocketAddr) {
        let pkts: Vec<Vec<u8>> = (0..self.packets).map(|i| self.packet(i)).collect();
        let list: Vec<(&[u8], Option<u8>)> = pkts.iter().map(|b| (b.as_slice(), None)).collect();
        let _ = sys::send_train_to(sock.as_raw_fd(), &list, to);
    }

    /// Sends it as a recursive train of `heads` TTL-limited packets each side (see
    /// [`RptRequest`]), back to back as [`TrainAnswer::send_train`] does.
    fn send_rpt(&self, sock: &UdpSocket, heads: u8, to: SocketAddr) {
        let small = |off: u64| self.packet_at(off, TRAIN_REQUEST_LEN);
        let mut pkts: Vec<(Vec<u8>, Option<u8>)> = (1..=heads).map(|t| (small(u64::from(t)), Some(t))).collect();
        pkts.extend((0..u64::from(self.packets)).map(|i| (self.packet_at(RPT_LOAD + i, self.len), None)));
        pkts.extend((1..=heads).rev().map(|t| (small(RPT_TAIL + u64::from(t)), Some(t))));
        let list: Vec<(&[u8], Option<u8>)> = pkts.iter().map(|(b, t)| (b.as_slice(), *t)).collect();
        let _ = sys::send_train_to(sock.as_raw_fd(), &list, to);
    }
}

/// `f` again when it fails with an error an ICMP message left on the socket (with
/// IP_RECVERR, each fails the next send once; the message itself is on the error queue).
fn retry<T>(mut f: impl FnMut() -> std::io::Result<T>) -> std::io::Result<T> {
    let mut tries = 0;
    loop {
        match f() {
            Err(e) if tries < 3 && (sys::icmp_pending(&e) || e.kind() == std::io::ErrorKind::Interrupted) => tries += 1,
            r => return r,
        }
    }
}

/// Sends `b` to `to`, again if a pending ICMP error failed it (see [`retry`]).
fn send(sock: &UdpSocket, b: &[u8], to: SocketAddr) {
    let _ = retry(|| sock.send_to(b, to));
}

/// Recursive trains whose routers' answers the echo collects at once, at most (more are
/// refused: the client sees no report).
const RPT_JOBS_MAX: usize = 32;

/// A recursive train sent: the routers' answers to it until its report is due.
struct RptJob {
    to: SocketAddr,
    reply: Probe,
    heads: u8,
    due: Instant,
    answers: Vec<RptAnswer>,
}

/// The recursive trains in flight.
#[derive(Default)]
struct Rpts {
    jobs: Vec<RptJob>,
}

impl Rpts {
    /// Files a router's time exceeded for packet `seq` to `dest`, heard at `at_ns`; false
    /// when it is no train's (nothing is kept).
    fn heard(&mut self, dest: SocketAddr, seq: u64, from: IpAddr, at_ns: u64) -> bool {
        let Some(j) = self.jobs.iter_mut().find(|j| j.to == dest && seq > j.reply.seq && seq < j.reply.seq + RPT_LOAD)
        else {
            return false;
        };
        let off = seq - j.reply.seq;
        let (ttl, tail) = if off > RPT_TAIL { (off - RPT_TAIL, true) } else { (off, false) };
        if ttl == 0 || ttl > u64::from(j.heads) || j.answers.len() >= 2 * usize::from(j.heads) {
            return false;
        }
        j.answers.push(RptAnswer { ttl: ttl as u8, tail, from, at_ns });
        true
    }

    /// The jobs whose reports are due at `now`, taken out.
    fn due(&mut self, now: Instant) -> Vec<RptJob> {
        let (due, keep) = std::mem::take(&mut self.jobs).into_iter().partition(|j| j.due <= now);
        self.jobs = keep;
        due
    }

    /// When the next report is due.
    fn next_due(&self) -> Option<Instant> {
        self.jobs.iter().map(|j| j.due).min()
    }
}

/// Reads the socket's error queue: the routers' answers to recursive trains are filed, the
/// rest (a client's port unreachable, …) dropped.
fn drain_errors(sock: &UdpSocket, rpts: &mut Rpts) {
    let mut buf = [0u8; 2048];
    while let Ok(Some(e)) = sys::recv_error(sock.as_raw_fd(), &mut buf) {
        let quoted = Probe::read(&buf[..e.len]);
        if let (true, Some(dest), Some(from), Some(q)) = (e.time_exceeded(), e.dest, e.from, quoted) {
            rpts.heard(dest, q.seq, from, e.at_ns.unwrap_or_else(sys::realtime_ns));
        }
    }
}

/// The answer to a train request `t` in probe `p` from `from`: the token answer (one packet
/// the size of the smallest request) or the train, whose bytes and `extra` bytes are taken
/// from the client's budget; `None` over it.
fn train_reply(
    trains: &mut Trains,
    p: &Probe,
    t: TrainRequest,
    from: SocketAddr,
    rx_ns: u64,
    extra: f64,
) -> Option<TrainAnswer> {
    let now_s = rx_ns / 1_000_000_000;
    let probe = Probe { reply: true, short: false, server_rx_ns: rx_ns, server_tx_ns: 0, ..*p };
    if !trains.valid(from.ip(), t.token, now_s) || t.count == 0 {
        let fields = TrainRequest { token: trains.token(from.ip(), now_s), count: 0, size: 0, gap_ns: 0 };
        return Some(TrainAnswer { probe, fields, len: TRAIN_REQUEST_LEN, packets: 1 });
    }
    let count = t.count.min(TRAIN_MAX_COUNT);
    let size = t.size.clamp(TRAIN_REQUEST_LEN as u16, TRAIN_MAX_SIZE);
    if !trains.take(from.ip(), f64::from(count) * f64::from(size) + extra, Instant::now()) {
        return None;
    }
    let gap_ns = t.gap_ns.min(TRAIN_MAX_GAP_NS);
    let fields = TrainRequest { token: t.token, count, size, gap_ns };
    Some(TrainAnswer { probe, fields, len: usize::from(size), packets: count })
}

/// Paced trains sending at once, at most (each at most 64 packets over 0.64 s).
const PACED_MAX: usize = 4;

/// Sends a paced train from a thread of its own (the echo goes on answering), unless
/// [`PACED_MAX`] are being sent: then nothing (the client sees the stream lost).
fn paced(sock: &UdpSocket, answer: TrainAnswer, to: SocketAddr, running: &Arc<std::sync::atomic::AtomicUsize>) {
    if running.fetch_add(1, Ordering::AcqRel) >= PACED_MAX {
        running.fetch_sub(1, Ordering::AcqRel);
        return;
    }
    let Ok(sock) = sock.try_clone() else {
        running.fetch_sub(1, Ordering::AcqRel);
        return;
    };
    let running = running.clone();
    std::thread::spawn(move || {
        let gap = Duration::from_nanos(u64::from(answer.fields.gap_ns));
        let t0 = Instant::now();
        for i in 0..answer.packets {
            sys::pace_until(t0 + gap * u32::from(i));
            send(&sock, &answer.packet(i), to);
        }
        running.fetch_sub(1, Ordering::AcqRel);
    });
}

/// Answers probes on `sock` until `stop` is set. `allowed` decides per client address.
pub fn run_echo(sock: UdpSocket, allowed: impl Fn(std::net::IpAddr) -> bool, stop: Arc<AtomicBool>) {
    let fd = sock.as_raw_fd();
    let _ = sys::enable_rx_timestamps(fd);
    // A train of 64 large packets must fit in the send buffer at once.
    let _ = sys::setsockopt_raw(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, &(4i32 << 20).to_ne_bytes());
    // The routers' answers to recursive trains come to the error queue (for IPv4 clients of
    // an IPv6 socket too).
    let _ = sys::setsockopt_raw(fd, libc::SOL_IP, libc::IP_RECVERR, &1i32.to_ne_bytes());
    if sock.local_addr().is_ok_and(|a| a.is_ipv6()) {
        let _ = sys::setsockopt_raw(fd, libc::SOL_IPV6, libc::IPV6_RECVERR, &1i32.to_ne_bytes());
    }
    let idle = Duration::from_millis(100);
    let _ = sock.set_read_timeout(Some(idle));
    let mut timeout = idle;
    let mut buf = vec![0u8; 65_536];
    let mut trains = Trains::new();
    let mut counts = Counts::default();
    let mut rpts = Rpts::default();
    let pacing = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut served = 0u32;
    while !stop.load(Ordering::Acquire) {
        // Wake for the next report due.
        let want = rpts
            .next_due()
            .map_or(idle, |d| d.saturating_duration_since(Instant::now()).clamp(Duration::from_millis(1), idle));
        if want != timeout {
            let _ = sock.set_read_timeout(Some(want));
            timeout = want;
        }
        let got = sys::recv_timestamped(fd, &mut buf);
        served = served.wrapping_add(1);
        // A pending ICMP error fails a read; answers are due; now and then in any case (the
        // queue takes from the receive buffer).
        if got.is_err() || !rpts.jobs.is_empty() || served.is_multiple_of(64) {
            drain_errors(&sock, &mut rpts);
            for j in rpts.due(Instant::now()) {
                let reply = Probe { server_tx_ns: sys::realtime_ns(), ..j.reply };
                for b in RptReport::packets(&reply, &j.answers) {
                    send(&sock, &b, j.to);
                }
            }
        }
        let Ok(r) = got else { continue };
        let Some(from) = r.from else { continue };
        let Some(p) = Probe::read(&buf[..r.len]) else { continue };
        if p.reply || r.len < PROBE_HEADER_LEN || !allowed(from.ip()) {
            continue;
        }
        let rx = r.kernel_ns.unwrap_or_else(sys::realtime_ns);
        if let Some(q) = RptRequest::read(&buf[..r.len]) {
            let heads = q.heads.clamp(1, RPT_MAX_HEADS);
            if rpts.jobs.len() >= RPT_JOBS_MAX {
                continue;
            }
            let extra = 2.0 * f64::from(heads) * TRAIN_REQUEST_LEN as f64;
            if let Some(answer) = train_reply(&mut trains, &p, q.train, from, rx, extra) {
                if answer.fields.count == 0 {
                    send(&sock, &answer.packet(0), from);
                    continue;
                }
                answer.send_rpt(&sock, heads, from);
                let wait = Duration::from_millis(u64::from(q.wait_ms.min(RPT_MAX_WAIT_MS)));
                rpts.jobs.push(RptJob {
                    to: from,
                    reply: answer.probe,
                    heads,
                    due: Instant::now() + wait,
                    answers: vec![],
                });
            }
            continue;
        }
        if let Some(t) = TrainRequest::read(&buf[..r.len]) {
            if let Some(answer) = train_reply(&mut trains, &p, t, from, rx, 0.0) {
                if answer.fields.gap_ns == 0 || answer.packets < 2 {
                    answer.send_train(&sock, from);
                } else {
                    paced(&sock, answer, from, &pacing);
                }
            }
            continue;
        }
        let reply = Probe { reply: true, server_rx_ns: rx, server_tx_ns: sys::realtime_ns(), ..p };
        let counted = Count::asked(&buf[..r.len]);
        reply.write(&mut buf);
        if counted {
            Count::write(&mut buf, counts.add(from, Instant::now()));
        }
        let len = if p.short && !counted { PROBE_HEADER_LEN } else { r.len };
        send(&sock, &buf[..len], from);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(token: u64, count: u16, size: u16) -> (Probe, TrainRequest) {
        (
            Probe { reply: false, short: true, seq: 100, client_tx_ns: 5, server_rx_ns: 0, server_tx_ns: 0 },
            TrainRequest { token, count, size, gap_ns: 0 },
        )
    }

    #[test]
    fn counts_are_per_client_and_a_full_table_still_counts_a_new_one() {
        let mut c = Counts::default();
        let t0 = Instant::now();
        let a: SocketAddr = "198.18.0.1:4000".parse().unwrap();
        let b: SocketAddr = "198.18.0.1:4001".parse().unwrap();
        assert_eq!((c.add(a, t0), c.add(a, t0), c.add(b, t0), c.add(a, t0)), (1, 2, 1, 3));
        // Fill the table with clients active later than `a` and `b`.
        let later = t0 + Duration::from_secs(1);
        for i in 0..COUNTED_MAX {
            let ip = std::net::Ipv4Addr::from(0xc612_0000 + i as u32);
            c.add(SocketAddr::new(ip.into(), 9), later + Duration::from_nanos(i as u64));
        }
        assert!(c.seen.len() <= COUNTED_MAX);
        let n: SocketAddr = "198.19.0.1:1".parse().unwrap();
        assert_eq!(c.add(n, later + Duration::from_secs(1)), 1);
        assert!(c.seen.len() <= COUNTED_MAX, "the table stays bounded");
        assert_eq!(c.add(n, later + Duration::from_secs(1)), 2, "the new client is kept");
    }

    #[test]
    fn trains_go_only_to_token_holders_and_within_their_budget() {
        let mut tr = Trains::new();
        let from: SocketAddr = "198.18.0.1:4000".parse().unwrap();
        let rx = 1_700_000_000_000_000_000u64;
        // Without the token: one packet no larger than the request, carrying it.
        let (p, t) = request(0, 33, 1472);
        let a = train_reply(&mut tr, &p, t, from, rx, 0.0).unwrap();
        let (b, n) = (a.packet(0), a.packets);
        assert_eq!((b.len(), n), (TRAIN_REQUEST_LEN, 1));
        let answer = TrainRequest::read(&b).unwrap();
        assert_eq!(answer.count, 0);
        assert!(Probe::read(&b).unwrap().reply);
        // Another address's token, or a made-up one, gets the same.
        let other: SocketAddr = "198.18.0.9:4000".parse().unwrap();
        let (p2, t2) = request(answer.token, 33, 1472);
        assert_eq!(train_reply(&mut tr, &p2, t2, other, rx, 0.0).unwrap().packets, 1);
        // With it: the train, capped at 64 packets and 8952 bytes.
        let (p, t) = request(answer.token, 500, 60_000);
        let a = train_reply(&mut tr, &p, t, from, rx, 0.0).unwrap();
        let (b, n) = (a.packet(1), a.packets);
        assert_eq!((b.len(), n), (usize::from(TRAIN_MAX_SIZE), TRAIN_MAX_COUNT));
        // The token of the previous 10 minutes still counts; one from 20 minutes ago not.
        assert!(tr.valid(from.ip(), answer.token, rx / 1_000_000_000 + 600));
        assert!(!tr.valid(from.ip(), answer.token, rx / 1_000_000_000 + 1200));
        // The budget: 2 MB at once, refilled at 2 MB/s.
        let t0 = Instant::now();
        let mut tr = Trains::new();
        let ip = from.ip();
        assert!(tr.take(ip, 1.5e6, t0));
        assert!(!tr.take(ip, 1.0e6, t0));
        assert!(tr.take(ip, 1.0e6, t0 + Duration::from_millis(300)));
        assert!(tr.take("198.18.0.2".parse().unwrap(), 2e6, t0), "budgets are per client");
    }
    #[test]
    fn routers_answers_are_filed_to_their_train_and_reported_when_due() {
        let mut r = Rpts::default();
        let a: SocketAddr = "198.18.0.1:4000".parse().unwrap();
        let b: SocketAddr = "198.18.0.2:4000".parse().unwrap();
        let t0 = Instant::now();
        let job = |to, seq, due| RptJob {
            to,
            reply: Probe { reply: true, short: false, seq, client_tx_ns: 0, server_rx_ns: 0, server_tx_ns: 0 },
            heads: 4,
            due,
            answers: vec![],
        };
        r.jobs.push(job(a, 1000, t0 + Duration::from_millis(50)));
        r.jobs.push(job(b, 1000, t0 + Duration::from_millis(80)));
        let router: IpAddr = "198.18.3.1".parse().unwrap();
        // Head TTL 2 and tail TTL 2 of a's train; the same numbers toward b go to b's.
        assert!(r.heard(a, 1002, router, 10));
        assert!(r.heard(a, 1000 + RPT_TAIL + 2, router, 20));
        assert!(r.heard(b, 1001, router, 30));
        // Not ours: the request's own number, a large packet, beyond the heads, another client.
        assert!(!r.heard(a, 1000, router, 0));
        assert!(!r.heard(a, 1000 + RPT_LOAD + 3, router, 0));
        assert!(!r.heard(a, 1005, router, 0));
        assert!(!r.heard("198.18.0.9:4000".parse().unwrap(), 1002, router, 0));
        assert_eq!(r.next_due(), Some(t0 + Duration::from_millis(50)));
        assert!(r.due(t0).is_empty());
        let due = r.due(t0 + Duration::from_millis(60));
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].to, a);
        let got: Vec<(u8, bool, u64)> = due[0].answers.iter().map(|x| (x.ttl, x.tail, x.at_ns)).collect();
        assert_eq!(got, vec![(2, false, 10), (2, true, 20)]);
        assert_eq!(r.jobs.len(), 1);
        // A router answering over and over fills no more than two answers a hop.
        for _ in 0..100 {
            r.heard(b, 1001, router, 40);
        }
        assert_eq!(r.jobs[0].answers.len(), 8);
    }
}
