//! `wanperf ping`: latency and loss probes to a `wanperf serve`.
//!
//! UDP probes carry the server's receive and send times, so the round trip excludes the
//! server's turnaround, and one-way delays can be estimated with the clock offset and its
//! uncertainty stated. RTTs are taken on the monotonic clock; the kernel's receive stamp
//! (wall clock) only corrects for the time between arrival and the program reading it, so a
//! clock step during a run cannot distort them. TCP mode times `connect()`.

pub use crate::probe::Clocks;
use crate::probe::{ProbeSocket, Prober};
use crate::sys;
use serde::{Deserialize, Serialize};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use thiserror::Error;
use wanperf_proto::probe::{Probe, PROBE_HEADER_LEN};
use wanperf_stats::summary::{ipdv, rfc3550_jitter, Summary};

/// How to probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PingMode {
    /// UDP echo with server timestamps.
    Udp,
    /// TCP connection set-up time.
    Tcp,
    /// ICMP echo (raw socket: root or CAP_NET_RAW).
    Icmp,
    /// STAMP (RFC 8762) to any Session-Reflector: a Direct Measurement TLV asks for its
    /// counters, so loss is split by direction.
    Stamp,
    /// TWAMP-Light (RFC 5357 appendix I): STAMP's unauthenticated packet without TLVs.
    #[serde(rename = "twamp-light")]
    TwampLight,
}

/// A ping run.
#[derive(Debug, Clone)]
pub struct PingConfig {
    /// Server.
    pub host: String,
    /// Port.
    pub port: u16,
    /// Probes to send.
    pub count: u64,
    /// Between probes.
    pub interval: Duration,
    /// UDP payload bytes (at least the 40-byte header).
    pub size: usize,
    /// A reply later than this counts as lost (and is reported as late).
    pub timeout: Duration,
    /// DSCP for the probes.
    pub dscp: Option<u8>,
    /// Mode.
    pub mode: PingMode,
    /// The server's clock minus this host's, ns, when it is known (0 for hosts that share a
    /// clock); None: estimated from the fastest probe.
    pub clock_offset_ns: Option<f64>,
    /// STAMP's authenticated mode: the shared key (HMAC-SHA-256); None: unauthenticated.
    pub stamp_key: Option<Vec<u8>>,
    /// Longest sleep between two looks at the interrupt flag when nothing else is due
    /// ([`WAKE`] for a command a person stops; a daemon probing hundreds of peers may take
    /// longer, for fewer wake-ups).
    pub wake: Duration,
}

/// [`PingConfig::wake`] for interactive use.
pub const WAKE: Duration = Duration::from_millis(250);

/// Why pinging failed.
#[derive(Debug, Error)]
pub enum PingError {
    /// Name does not resolve.
    #[error("cannot resolve `{0}`")]
    Resolve(String),
    /// No server answers.
    #[error("{0}")]
    NoServer(String),
    /// Socket trouble.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// One probe's fate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeRecord {
    /// Always `probe`.
    pub event: String,
    /// Probe number from 0.
    pub seq: u64,
    /// Send time, seconds since the first probe.
    pub sent_s: f64,
    /// `ok`, `lost` or `late` (answered after the timeout: counted as lost).
    pub status: String,
    /// Round trip without the server's turnaround, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_ms: Option<f64>,
    /// Server turnaround, µs (UDP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_us: Option<f64>,
    /// Client → server one-way delay, ms, using the run's clock-offset estimate (UDP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owd_fwd_ms: Option<f64>,
    /// Server → client one-way delay, ms (UDP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owd_rev_ms: Option<f64>,
}

/// Percentiles of a delay measure, ms.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DelayStats {
    /// Minimum.
    pub min: f64,
    /// Mean.
    pub avg: f64,
    /// Maximum.
    pub max: f64,
    /// Sample standard deviation.
    pub stdev: f64,
    /// Median.
    pub median: f64,
    /// Interquartile range.
    pub iqr: f64,
    /// 5th percentile.
    pub p5: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
}

impl From<Summary> for DelayStats {
    fn from(s: Summary) -> Self {
        DelayStats {
            min: s.min,
            avg: s.avg,
            max: s.max,
            stdev: s.stdev,
            median: s.median,
            iqr: s.iqr,
            p5: s.p5,
            p95: s.p95,
            p99: s.p99,
        }
    }
}

/// The end of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PingSummary {
    /// Probes sent.
    pub sent: u64,
    /// Answered in time.
    pub received: u64,
    /// Lost (including late), percent of sent.
    pub loss_pct: f64,
    /// Extra copies of answers.
    pub duplicates: u64,
    /// Answers that arrived after a later probe's.
    pub reordered: u64,
    /// Answers after the timeout.
    pub late: u64,
    /// Round-trip times.
    pub rtt_ms: DelayStats,
    /// RFC 3393 delay variation of consecutive RTTs; its `iqr` is PingER's IPDV figure.
    pub ipdv_ms: DelayStats,
    /// RFC 3550 interarrival jitter over the RTT series.
    pub jitter_ms: f64,
    /// Server clock minus client clock, estimated from the fastest probe, ms (UDP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_offset_ms: Option<f64>,
    /// ± bound of that estimate (half the fastest round trip), ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_offset_uncertainty_ms: Option<f64>,
    /// One-way delays client → server, ms (UDP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owd_fwd_ms: Option<DelayStats>,
    /// One-way delays server → client, ms (UDP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owd_rev_ms: Option<DelayStats>,
    /// Losses split by direction (STAMP: a stateful reflector's numbers or its counters).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss_each_way: Option<wanperf_stamp::loss::Split>,
    /// Both ends' clocks as their error estimates state them (STAMP, TWAMP-Light).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clocks: Option<Clocks>,
    /// Why the run ended early (the server went away), if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Summary statistics from probe records (pure; the tests recompute them independently).
pub fn summarize(records: &[ProbeRecord], duplicates: u64, reordered: u64) -> PingSummary {
    let sent = records.len() as u64;
    let rtts: Vec<f64> = records.iter().filter_map(|r| r.rtt_ms).collect();
    let received = rtts.len() as u64;
    let late = records.iter().filter(|r| r.status == "late").count() as u64;
    let series: Vec<Option<f64>> = records.iter().map(|r| r.rtt_ms).collect();
    let stats = |v: &[f64]| Summary::of(v).map(DelayStats::from).unwrap_or_default();
    let fwd: Vec<f64> = records.iter().filter_map(|r| r.owd_fwd_ms).collect();
    let rev: Vec<f64> = records.iter().filter_map(|r| r.owd_rev_ms).collect();
    PingSummary {
        sent,
        received,
        loss_pct: if sent > 0 { 100.0 * (sent - received) as f64 / sent as f64 } else { 0.0 },
        duplicates,
        reordered,
        late,
        rtt_ms: stats(&rtts),
        ipdv_ms: stats(&ipdv(&series)),
        jitter_ms: rfc3550_jitter(&rtts),
        clock_offset_ms: None,
        clock_offset_uncertainty_ms: None,
        owd_fwd_ms: (!fwd.is_empty()).then(|| stats(&fwd)),
        owd_rev_ms: (!rev.is_empty()).then(|| stats(&rev)),
        loss_each_way: None,
        clocks: None,
        error: None,
    }
}

/// Where probe records go.
pub trait PingSink {
    /// A probe was answered, lost or late (called in sequence order once its fate is known).
    fn probe(&mut self, r: &ProbeRecord);
}

/// A sink for runs whose records are only wanted at the end (`run` returns them all).
pub struct Quiet;

impl PingSink for Quiet {
    fn probe(&mut self, _: &ProbeRecord) {}
}

/// An answer in time: RTT ms, server turnaround µs, then t1 (client send, wall), t2 (server
/// receive), t3 (server send) and t4 (client receive, wall), all ns since the epoch.
type Answer = (f64, f64, u64, u64, u64, u64);

struct Pending {
    mono: Instant,
    wall_ns: u64,
}

/// Runs the probes. Returns the records and the summary; `interrupt` ends early (the summary
/// covers what was sent).
pub fn run(
    cfg: &PingConfig,
    sink: &mut dyn PingSink,
    interrupt: &AtomicBool,
) -> Result<(Vec<ProbeRecord>, PingSummary), PingError> {
    let addr: SocketAddr = (cfg.host.as_str(), cfg.port)
        .to_socket_addrs()
        .map_err(|_| PingError::Resolve(cfg.host.clone()))?
        .next()
        .ok_or_else(|| PingError::Resolve(cfg.host.clone()))?;
    match cfg.mode {
        PingMode::Udp => run_datagram(cfg, addr, &mut UdpProber::new(cfg, addr)?, sink, interrupt),
        PingMode::Icmp => run_datagram(cfg, addr, &mut IcmpProber::new(cfg, addr)?, sink, interrupt),
        PingMode::Stamp | PingMode::TwampLight => {
            let twamp_light = cfg.mode == PingMode::TwampLight;
            let key = cfg.stamp_key.clone();
            let mut p = crate::stamp::StampProber::new(addr, cfg.dscp, cfg.size, cfg.count, twamp_light, key)?;
            run_datagram(cfg, addr, &mut p, sink, interrupt)
        }
        PingMode::Tcp => run_tcp(cfg, addr, sink, interrupt),
    }
}

fn run_tcp(
    cfg: &PingConfig,
    addr: SocketAddr,
    sink: &mut dyn PingSink,
    interrupt: &AtomicBool,
) -> Result<(Vec<ProbeRecord>, PingSummary), PingError> {
    let start = Instant::now();
    let mut records = Vec::new();
    for seq in 0..cfg.count {
        if interrupt.load(Ordering::Acquire) {
            break;
        }
        let due = start + cfg.interval * seq as u32;
        if let Some(d) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
        let t0 = Instant::now();
        let r = TcpStream::connect_timeout(&addr, cfg.timeout);
        let sent_s = t0.duration_since(start).as_secs_f64();
        let rec = match r {
            Ok(_) => ProbeRecord {
                event: "probe".into(),
                seq,
                sent_s,
                status: "ok".into(),
                rtt_ms: Some(t0.elapsed().as_secs_f64() * 1e3),
                server_us: None,
                owd_fwd_ms: None,
                owd_rev_ms: None,
            },
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused && seq == 0 => {
                return Err(PingError::NoServer(format!(
                    "connection refused by {addr}: nothing listens on TCP port {}",
                    addr.port()
                )));
            }
            Err(_) => ProbeRecord {
                event: "probe".into(),
                seq,
                sent_s,
                status: "lost".into(),
                rtt_ms: None,
                server_us: None,
                owd_fwd_ms: None,
                owd_rev_ms: None,
            },
        };
        sink.probe(&rec);
        records.push(rec);
    }
    let s = summarize(&records, 0, 0);
    Ok((records, s))
}

struct UdpProber {
    sock: ProbeSocket,
    out: Vec<u8>,
}

impl UdpProber {
    fn new(cfg: &PingConfig, addr: SocketAddr) -> Result<Self, PingError> {
        Ok(UdpProber { sock: ProbeSocket::connect(cfg.dscp, addr)?, out: vec![0u8; cfg.size.max(PROBE_HEADER_LEN)] })
    }
}

impl Prober for UdpProber {
    fn fd(&self) -> std::os::fd::RawFd {
        self.sock.sock.as_raw_fd()
    }
    fn send(&mut self, seq: u64, wall_ns: u64) -> std::io::Result<()> {
        Probe { reply: false, short: false, seq, client_tx_ns: wall_ns, server_rx_ns: 0, server_tx_ns: 0 }
            .write(&mut self.out);
        self.sock.send(seq, &self.out)
    }
    fn tx_stamps(&mut self) -> Vec<(u64, u64)> {
        self.sock.tx_stamps()
    }
    fn parse(&mut self, buf: &[u8]) -> Option<(u64, Option<(u64, u64)>)> {
        let p = Probe::read(buf)?;
        p.reply.then_some((p.seq, Some((p.server_rx_ns, p.server_tx_ns))))
    }
}

/// ICMP echo on a raw socket; the far host's kernel answers, so there is no server
/// turnaround to take out (and no one-way delays).
struct IcmpProber {
    sock: socket2::Socket,
    v6: bool,
    id: u16,
    out: Vec<u8>,
}

fn inet_checksum(b: &[u8]) -> u16 {
    let mut sum: u32 = b.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

impl IcmpProber {
    fn new(cfg: &PingConfig, addr: SocketAddr) -> Result<Self, PingError> {
        use socket2::{Domain, Protocol, Type};
        if cfg.count > 65_536 {
            return Err(PingError::NoServer("ICMP mode numbers probes with 16 bits: at most 65536 per run".into()));
        }
        let v6 = addr.is_ipv6();
        let (dom, proto) = if v6 { (Domain::IPV6, Protocol::ICMPV6) } else { (Domain::IPV4, Protocol::ICMPV4) };
        let sock = socket2::Socket::new(dom, Type::RAW, Some(proto)).map_err(|e| {
            PingError::NoServer(format!(
                "ICMP needs a raw socket ({e}): run as root or grant CAP_NET_RAW, or use --mode udp"
            ))
        })?;
        sock.connect(&addr.into())?;
        sock.set_nonblocking(true)?;
        if let Some(d) = cfg.dscp {
            sys::set_dscp(&sock, v6, d)?;
        }
        sys::enable_rx_timestamps(sock.as_raw_fd())?;
        Ok(IcmpProber { sock, v6, id: (std::process::id() & 0xffff) as u16, out: vec![0u8; cfg.size.max(16)] })
    }
}

impl Prober for IcmpProber {
    fn fd(&self) -> std::os::fd::RawFd {
        self.sock.as_raw_fd()
    }
    fn send(&mut self, seq: u64, _wall_ns: u64) -> std::io::Result<()> {
        let b = &mut self.out;
        b[0] = if self.v6 { 128 } else { 8 };
        b[1] = 0;
        b[2] = 0;
        b[3] = 0;
        b[4..6].copy_from_slice(&self.id.to_be_bytes());
        b[6..8].copy_from_slice(&(seq as u16).to_be_bytes());
        if !self.v6 {
            // The kernel fills ICMPv6 checksums itself; ICMPv4's is ours.
            let c = inet_checksum(b);
            b[2..4].copy_from_slice(&c.to_be_bytes());
        }
        self.sock.send(b).map(|_| ())
    }
    fn parse(&mut self, buf: &[u8]) -> Option<(u64, Option<(u64, u64)>)> {
        // IPv4 raw sockets deliver the IP header too.
        let icmp = if self.v6 { buf } else { buf.get(usize::from(buf.first()? & 0x0f) * 4..)? };
        let want = if self.v6 { 129 } else { 0 };
        if icmp.len() < 8 || icmp[0] != want || u16::from_be_bytes([icmp[4], icmp[5]]) != self.id {
            return None;
        }
        Some((u64::from(u16::from_be_bytes([icmp[6], icmp[7]])), None))
    }
}

fn run_datagram(
    cfg: &PingConfig,
    addr: SocketAddr,
    prober: &mut dyn Prober,
    sink: &mut dyn PingSink,
    interrupt: &AtomicBool,
) -> Result<(Vec<ProbeRecord>, PingSummary), PingError> {
    let fd = prober.fd();
    // Answers are our probes coming back (an ICMP echo reply may carry an IP header): room
    // for the probe size and a margin; anything longer is truncated and not ours.
    let mut inb = vec![0u8; (cfg.size + 256).max(2048)];
    let n = cfg.count as usize;
    let mut pending: Vec<Option<Pending>> = (0..n).map(|_| None).collect();
    let mut answers: Vec<Option<Answer>> = vec![None; n];
    let mut late = vec![false; n];
    let mut duplicates = 0u64;
    let mut reordered = 0u64;
    let mut highest_answered: Option<u64> = None;
    let start = Instant::now();
    let mut next_seq = 0u64;
    let mut emitted = 0usize;
    let mut refused = false;
    let mut answered_any = false;
    let mut has_server_times = false;
    let mut gone: Option<String> = None;
    loop {
        let now = Instant::now();
        let stop = interrupt.load(Ordering::Acquire) || gone.is_some();
        // Send every probe that is due (the schedule is fixed from the start).
        while !stop && next_seq < cfg.count && start + cfg.interval * next_seq as u32 <= now {
            let wall = sys::realtime_ns();
            let mono = Instant::now();
            match prober.send(next_seq, wall) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => refused = true,
                Err(_) => {}
            }
            pending[next_seq as usize] = Some(Pending { mono, wall_ns: wall });
            next_seq += 1;
        }
        // The kernel's transmit stamps move each send time from before the system call to
        // when the probe left for the device. A stamp that does not fit (before the call, or
        // more than 5 ms after it) is not this probe's and is ignored.
        for (seq, tx_ns) in prober.tx_stamps() {
            let i = seq as usize;
            if let (Some(Some(p)), None) = (pending.get_mut(i), answers.get(i).copied().flatten()) {
                let d = tx_ns.wrapping_sub(p.wall_ns);
                if tx_ns >= p.wall_ns && d < 5_000_000 {
                    p.mono += Duration::from_nanos(d);
                    p.wall_ns = tx_ns;
                }
            }
        }
        // Read every answer that is there.
        loop {
            let r = match sys::recv_timestamped(fd, &mut inb) {
                Ok(r) => r,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    refused = true;
                    continue;
                }
                Err(_) => break,
            };
            let read_mono = Instant::now();
            let read_wall = sys::realtime_ns();
            let Some((seq, server)) = prober.parse(&inb[..r.len]) else { continue };
            if seq >= cfg.count {
                continue;
            }
            let i = seq as usize;
            let Some(sent) = &pending[i] else { continue };
            if answers[i].is_some() || late[i] {
                duplicates += 1;
                continue;
            }
            // Arrival on the monotonic clock: the read time less the time the datagram
            // waited in the socket (both wall-clock readings a few µs apart).
            let kernel = r.kernel_ns.unwrap_or(read_wall);
            let waited = Duration::from_nanos(read_wall.saturating_sub(kernel));
            let arrival = read_mono.checked_sub(waited).unwrap_or(read_mono);
            let elapsed = arrival.saturating_duration_since(sent.mono);
            if elapsed > cfg.timeout {
                late[i] = true;
                continue;
            }
            answered_any = true;
            let (t2, t3) = server.unwrap_or((0, 0));
            let turnaround = t3.saturating_sub(t2);
            let rtt = elapsed.as_secs_f64() * 1e3 - turnaround as f64 / 1e6;
            if highest_answered.is_some_and(|h| seq < h) {
                reordered += 1;
            }
            highest_answered = Some(highest_answered.map_or(seq, |h| h.max(seq)));
            has_server_times |= server.is_some();
            answers[i] = Some((rtt.max(0.0), turnaround as f64 / 1e3, sent.wall_ns, t2, t3, kernel));
        }
        // Probes whose fate is sealed (answered, or timed out) are reported in order.
        while emitted < next_seq as usize {
            let i = emitted;
            let timed_out = pending[i].as_ref().is_some_and(|p| p.mono.elapsed() > cfg.timeout);
            if answers[i].is_none() && !timed_out && !stop {
                break;
            }
            let rec = ProbeRecord {
                event: "probe".into(),
                seq: i as u64,
                sent_s: pending[i].as_ref().map_or(0.0, |p| p.mono.duration_since(start).as_secs_f64()),
                status: if answers[i].is_some() { "ok" } else { "lost" }.into(),
                rtt_ms: answers[i].map(|a| a.0),
                server_us: answers[i].map(|a| a.1),
                owd_fwd_ms: None,
                owd_rev_ms: None,
            };
            sink.probe(&rec);
            emitted += 1;
        }
        if refused && !answered_any {
            return Err(PingError::NoServer(format!(
                "no {} answers probes at {addr} (UDP port unreachable; start one with `wanperf serve{}`)",
                if matches!(cfg.mode, PingMode::Stamp | PingMode::TwampLight) {
                    "STAMP or TWAMP-Light reflector"
                } else {
                    "wanperf server"
                },
                if matches!(cfg.mode, PingMode::Stamp | PingMode::TwampLight) { " --stamp-port PORT" } else { "" }
            )));
        }
        // The server answered before and now its port is closed: it went away. Stop sending,
        // wait out the probes in flight, and report what was measured.
        if refused && gone.is_none() {
            gone = Some(format!("the server at {addr} went away (UDP port unreachable) after {next_seq} probes"));
        }
        let stop = stop || gone.is_some();
        if emitted as u64 >= next_seq && (next_seq >= cfg.count || stop) {
            break;
        }
        // Sleep until the next send or the oldest pending probe's timeout.
        let next_send = (next_seq < cfg.count && !stop).then(|| start + cfg.interval * next_seq as u32);
        let next_timeout = pending.get(emitted).and_then(|p| p.as_ref()).map(|p| p.mono + cfg.timeout);
        let wake = [next_send, next_timeout].into_iter().flatten().min().unwrap_or(now + Duration::from_millis(10));
        let wait = wake.saturating_duration_since(Instant::now()).min(cfg.wake.max(Duration::from_millis(1)));
        let mut pfd = [wanperf_sys::poll::PollFd { fd, events: libc::POLLIN, revents: 0 }];
        let _ = wanperf_sys::poll::poll_fds(&mut pfd, Some(wait));
    }
    // Clock offset from the fastest probe (NTP's estimate): ((t2 − t1) + (t3 − t4)) / 2.
    let fastest = answers.iter().flatten().min_by(|a, b| a.0.total_cmp(&b.0)).copied();
    // A stated offset (hosts sharing a clock) is used as it is, with no uncertainty: the
    // estimate splits any asymmetry of the fastest probe's path evenly between the directions.
    // Clocks that state their synchronization (STAMP's error estimates) are taken at their
    // word, with their errors as the uncertainty.
    let stated = cfg.clock_offset_ns.map(|o| (o, 0.0)).or_else(|| prober.stated_offset());
    let offset_ns = fastest.filter(|_| has_server_times).map(|(_, _, t1, t2, t3, t4)| {
        stated.map_or(((t2 as f64 - t1 as f64) + (t3 as f64 - t4 as f64)) / 2.0, |s| s.0)
    });
    let sent = next_seq as usize;
    let records: Vec<ProbeRecord> = (0..sent)
        .map(|i| {
            let a = answers[i];
            let (fwd, rev) = match (a, offset_ns) {
                (Some((_, _, t1, t2, t3, t4)), Some(off)) => {
                    (Some((t2 as f64 - t1 as f64 - off) / 1e6), Some((t4 as f64 - t3 as f64 + off) / 1e6))
                }
                _ => (None, None),
            };
            ProbeRecord {
                event: "probe".into(),
                seq: i as u64,
                sent_s: pending[i].as_ref().map_or(0.0, |p| p.mono.duration_since(start).as_secs_f64()),
                status: if a.is_some() {
                    "ok"
                } else if late[i] {
                    "late"
                } else {
                    "lost"
                }
                .into(),
                rtt_ms: a.map(|x| x.0),
                server_us: a.filter(|_| has_server_times).map(|x| x.1),
                owd_fwd_ms: fwd,
                owd_rev_ms: rev,
            }
        })
        .collect();
    let mut s = summarize(&records, duplicates, reordered);
    s.clock_offset_ms = offset_ns.map(|o| o / 1e6);
    // The bound comes from the same four wall-clock stamps as the estimate: with t1 ≤ t2 and
    // t3 ≤ t4 on a shared clock, |estimate| ≤ ((t4 − t1) − (t3 − t2)) / 2. The monotonic RTT
    // is read a few µs apart from them and may not bound the estimate on a 30 µs loopback.
    s.clock_offset_uncertainty_ms = fastest.filter(|_| has_server_times).map(|(_, _, t1, t2, t3, t4)| {
        if let Some((_, u)) = stated {
            u / 1e6
        } else {
            ((t4 as f64 - t1 as f64) - (t3 as f64 - t2 as f64)).max(0.0) / 2e6
        }
    });
    s.error = gone;
    let x = prober.finish(s.sent);
    (s.loss_each_way, s.clocks) = (x.loss_each_way, x.clocks);
    Ok((records, s))
}
