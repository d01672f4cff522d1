//! Data-stream workers and the per-end set of them ([`Side`]).
//!
//! Each stream runs on its own thread with blocking I/O — the cheapest way to move bytes —
//! and publishes cumulative counters through atomics. The control loop samples them (with
//! TCP_INFO) at interval boundaries and never touches the data path.

use crate::sys;
use socket2::Socket;
use std::io::{self, Read, Write};
use std::net::{Shutdown, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use wanperf_iperf3::wire::UdpHeader as Iperf3Header;
use wanperf_proto::data::{UdpHeader, UDP_FIN_SEQ, UDP_HEADER_LEN};
use wanperf_proto::msg::{CpuUsage, Role, SideInterval, SideReport, StreamFinal, StreamSample, TestSpec, UdpCounters};
use wanperf_proto::udp::UdpRecvStats;

/// A connected data socket.
#[derive(Debug)]
pub enum Conn {
    /// A TCP data connection (hello already exchanged).
    Tcp(Socket),
    /// A connected UDP socket.
    Udp(UdpSocket),
    /// A QUIC data connection (hello already exchanged) and its congestion controller's name.
    Quic(Box<wanperf_quic::QuicStream>, String),
}

impl Conn {
    fn try_clone_probe(&self) -> io::Result<Probe> {
        Ok(match self {
            Conn::Tcp(s) => Probe::Tcp(s.try_clone()?),
            Conn::Udp(s) => Probe::Udp(s.try_clone()?),
            Conn::Quic(s, cc) => Probe::Quic(s.probe(), cc.clone()),
        })
    }
}

#[derive(Debug)]
enum Probe {
    Tcp(Socket),
    Udp(UdpSocket),
    Quic(wanperf_quic::bulk::Probe, String),
}

/// What one stream must do.
#[derive(Debug, Clone)]
pub struct StreamPlan {
    /// Stream id.
    pub id: u32,
    /// This end's role.
    pub role: Role,
    /// Senders stop here.
    pub deadline: Option<Instant>,
    /// When the data should have all arrived (UDP receivers give up 3 s after it).
    pub expected_end: Option<Instant>,
    /// Senders stop after this many bytes.
    pub quota: Option<u64>,
    /// Bytes per write, or UDP payload size; 0 for TCP means adaptive (64 KiB to 256 KiB).
    pub block: usize,
    /// Zero-copy send (vmsplice + splice) and discarding receive (MSG_TRUNC).
    pub zerocopy: bool,
    /// UDP pacing rate for this stream, bit/s.
    pub rate_bps: Option<u64>,
    /// UDP token (first cookie bytes).
    pub token: u32,
    /// Test hook: a UDP sender numbers but does not send every Nth datagram.
    pub drop_every: Option<u64>,
    /// Whose conventions the far end follows.
    pub peer: Peer,
    /// Whether this stream reports its connection's counters (losses, congestion events):
    /// always, but for QUIC streams sharing a connection, where one per connection does — the
    /// first of those this end sends on (or the first of all, where it sends on none).
    pub speaks: bool,
}

impl StreamPlan {
    /// The plan for stream `id` of `spec` at the end playing `role`, without deadlines or
    /// test hooks (callers set those).
    pub fn new(spec: &TestSpec, id: u32, role: Role, token: u32, peer: Peer) -> StreamPlan {
        StreamPlan {
            id,
            role,
            deadline: None,
            expected_end: None,
            quota: spec.per_stream_bytes(id),
            block: spec.block_size as usize,
            zerocopy: spec.zerocopy,
            rate_bps: spec.per_stream_rate(),
            token,
            drop_every: None,
            peer,
            speaks: speaks_for_connection(spec, id, role),
        }
    }
}

/// Whether stream `id`, whose role on this end is `role`, reports its QUIC connection's
/// counters ([`StreamPlan::speaks`]).
fn speaks_for_connection(spec: &TestSpec, id: u32, role: Role) -> bool {
    if spec.transport != wanperf_proto::msg::Transport::Quic {
        return true;
    }
    // This end is the client if the client's role on `id` is ours.
    let client = spec.client_role(id) == role;
    let here = |j: u32| if client { spec.client_role(j) } else { spec.client_role(j).opposite() };
    let k = spec.quic_connection_of(id);
    let first = spec.quic_streams_on(k).find(|&j| here(j) == Role::Sender).unwrap_or(k);
    first == id
}

/// Whose conventions a stream's far end follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Peer {
    /// wanperf: UDP datagrams carry the 24-byte header and end with a marker; TCP senders
    /// close their streams at the end.
    #[default]
    Wanperf,
    /// iperf3: UDP datagrams carry (seconds, microseconds, packet count from 1) and have no end
    /// marker; TCP streams stay open until the control connection ends the test, so receivers
    /// keep SO_RCVLOWAT at 1 byte (a raised low-water mark would hold the last bytes back until
    /// the read timeout and make the test look up to 100 ms longer).
    Iperf3 {
        /// 64-bit packet counts.
        counters64: bool,
    },
}

/// Counters a worker publishes.
#[derive(Debug, Default)]
pub struct Counters {
    bytes: AtomicU64,
    packets: AtomicU64,
    last_ns: AtomicU64,
    done: AtomicBool,
    udp: Mutex<Option<UdpRecvStats>>,
}

struct WorkerEnd {
    error: Option<String>,
    cpu: (f64, f64),
}

/// One running stream.
pub struct Running {
    plan: StreamPlan,
    counters: Arc<Counters>,
    probe: Probe,
    sndbuf: Option<u64>,
    rcvbuf: Option<u64>,
    thread: Option<JoinHandle<WorkerEnd>>,
    end: Option<WorkerEnd>,
}

/// All streams of one end of a test.
pub struct Side {
    start: Instant,
    streams: Vec<Running>,
    stop: Arc<AtomicBool>,
    interval: Duration,
    index: u32,
    last_t: f64,
    finished: bool,
    cpu_before: (f64, f64),
    counters_before: std::collections::BTreeMap<String, i64>,
    per_thread_cpu: bool,
}

/// How long a control loop may block: until its session's deadline, its side's next interval
/// sample, or 100 ms (so it notices shutdown and interrupts), whichever comes first.
pub fn wait_before(deadline: Option<Instant>, side: Option<&Side>) -> Duration {
    let now = Instant::now();
    [deadline, side.and_then(Side::next_tick)]
        .into_iter()
        .flatten()
        .fold(now + Duration::from_millis(100), Instant::min)
        .saturating_duration_since(now)
}

/// A stream worker other than the bulk sender and receiver (a copy's): it moves data on its
/// connection, counts it with [`Counters::add`] and returns when its stream is done.
/// Its last argument is the side's start, for [`Counters::add`].
pub type Worker = Arc<dyn Fn(&StreamPlan, Conn, &Counters, &AtomicBool, Instant) -> io::Result<()> + Send + Sync>;

impl Counters {
    /// Counts `n` bytes moved now (for a [`Worker`]).
    pub fn add(&self, n: usize, start: Instant) {
        self.moved(n, start);
    }

    /// Counts `n` bytes moved now; returns now.
    fn moved(&self, n: usize, start: Instant) -> Instant {
        let now = Instant::now();
        self.bytes.fetch_add(n as u64, Ordering::Release);
        self.last_ns.store(now.duration_since(start).as_nanos() as u64, Ordering::Release);
        now
    }
}

fn ns_since(start: Instant) -> u64 {
    start.elapsed().as_nanos() as u64
}

impl Side {
    /// Starts every stream now. `notify` is called (from the worker thread) when a stream ends.
    /// `per_thread_cpu` reports the workers' own CPU (a server running several tests) rather
    /// than the whole process's.
    pub fn start(
        conns: Vec<(StreamPlan, Conn)>,
        interval: Duration,
        per_thread_cpu: bool,
        notify: Arc<dyn Fn() + Send + Sync>,
    ) -> io::Result<Side> {
        Self::start_with(conns, interval, per_thread_cpu, notify, None)
    }

    /// [`Side::start`] with `worker` in place of the bulk sender and receiver.
    pub fn start_with(
        conns: Vec<(StreamPlan, Conn)>,
        interval: Duration,
        per_thread_cpu: bool,
        notify: Arc<dyn Fn() + Send + Sync>,
        worker: Option<Worker>,
    ) -> io::Result<Side> {
        let counters_before = sys::tcp_counters();
        let cpu_before = sys::process_cpu();
        let start = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let mut streams = Vec::with_capacity(conns.len());
        for (plan, conn) in conns {
            let probe = conn.try_clone_probe()?;
            let (sndbuf, rcvbuf) = match &conn {
                Conn::Tcp(s) => (s.send_buffer_size().ok(), s.recv_buffer_size().ok()),
                Conn::Udp(s) => {
                    let s = socket2::SockRef::from(s);
                    (s.send_buffer_size().ok(), s.recv_buffer_size().ok())
                }
                Conn::Quic(..) => (None, None),
            };
            let counters = Arc::new(Counters::default());
            let (c, p, st, n) = (counters.clone(), plan.clone(), stop.clone(), notify.clone());
            let w = worker.clone();
            let thread = std::thread::Builder::new().name(format!("wanperf-stream-{}", plan.id)).spawn(move || {
                let r = match &w {
                    Some(w) => w(&p, conn, &c, &st, start),
                    None => run_worker(&p, conn, &c, &st, start),
                };
                let error = r.err().map(|e| e.to_string());
                c.done.store(true, Ordering::Release);
                let cpu = sys::thread_cpu();
                n();
                WorkerEnd { error, cpu }
            })?;
            streams.push(Running {
                plan,
                counters,
                probe,
                sndbuf: sndbuf.map(|v| v as u64),
                rcvbuf: rcvbuf.map(|v| v as u64),
                thread: Some(thread),
                end: None,
            });
        }
        Ok(Side {
            start,
            streams,
            stop,
            interval,
            index: 0,
            last_t: 0.0,
            finished: false,
            cpu_before,
            counters_before,
            per_thread_cpu,
        })
    }

    /// When the next interval sample is due (none once every stream is done).
    pub fn next_tick(&self) -> Option<Instant> {
        (!self.finished && !self.all_done()).then(|| self.start + self.interval * (self.index + 1))
    }

    /// Bytes moved so far by this end's senders and by its receivers.
    pub fn moved(&self) -> (u64, u64) {
        self.streams.iter().fold((0, 0), |(snd, rcv), s| {
            let b = s.counters.bytes.load(Ordering::Acquire);
            match s.plan.role {
                Role::Sender => (snd + b, rcv),
                Role::Receiver => (snd, rcv + b),
            }
        })
    }

    /// Whether every stream has ended.
    pub fn all_done(&self) -> bool {
        self.streams.iter().all(|s| s.counters.done.load(Ordering::Acquire))
    }

    /// Samples every stream if an interval boundary has passed.
    pub fn tick(&mut self, now: Instant) -> Option<SideInterval> {
        let due = self.next_tick()?;
        if now < due {
            return None;
        }
        let t = (now - self.start).as_secs_f64();
        let iv = self.sample(t, false);
        self.index += 1;
        Some(iv)
    }

    fn sample(&mut self, t_s: f64, last: bool) -> SideInterval {
        self.last_t = t_s;
        SideInterval { index: self.index, t_s, last, streams: self.streams.iter().map(sample_stream).collect() }
    }

    /// Stops the workers (senders stop sending; receivers stop waiting).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
    }

    /// Forces every socket closed so blocked workers return.
    pub fn force_close(&self) {
        self.stop();
        for s in &self.streams {
            match &s.probe {
                Probe::Tcp(p) => {
                    let _ = p.shutdown(Shutdown::Both);
                }
                Probe::Udp(p) => {
                    // A connected UDP socket cannot be shut down; the receive timeout and the
                    // stop flag end its worker.
                    let _ = p;
                }
                Probe::Quic(p, _) => p.close(),
            }
        }
    }

    /// Waits for the workers (forcing them closed after `patience`), then returns the final
    /// sample and this end's report.
    pub fn finish(&mut self, patience: Duration) -> (SideInterval, SideReport) {
        let give_up = Instant::now() + patience;
        while !self.all_done() && Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(2));
        }
        if !self.all_done() {
            self.force_close();
        }
        for s in &mut self.streams {
            if let Some(t) = s.thread.take() {
                s.end = Some(
                    t.join().unwrap_or(WorkerEnd { error: Some("stream worker panicked".into()), cpu: (0.0, 0.0) }),
                );
            }
        }
        let wall = self.start.elapsed().as_secs_f64();
        let last_byte =
            self.streams.iter().map(|s| s.counters.last_ns.load(Ordering::Acquire) as f64 / 1e9).fold(0.0, f64::max);
        let t_last = last_byte.max(self.last_t);
        let last = self.sample(t_last, true);
        self.finished = true;
        let cpu = if self.per_thread_cpu {
            let (u, s) = self
                .streams
                .iter()
                .filter_map(|s| s.end.as_ref())
                .fold((0.0, 0.0), |a, e| (a.0 + e.cpu.0, a.1 + e.cpu.1));
            CpuUsage { user_s: u, system_s: s, wall_s: wall }
        } else {
            sys::cpu_between(self.cpu_before, sys::process_cpu(), wall)
        };
        // The final sample was just taken; the report reuses it rather than reading the
        // sockets again.
        let streams = self
            .streams
            .iter()
            .zip(&last.streams)
            .map(|(s, sm)| StreamFinal {
                id: s.plan.id,
                role: Some(s.plan.role),
                bytes: sm.bytes,
                duration_s: s.counters.last_ns.load(Ordering::Acquire) as f64 / 1e9,
                sndbuf: s.sndbuf,
                rcvbuf: s.rcvbuf,
                tcp: sm.tcp.clone(),
                udp: sm.udp.clone(),
                error: s.end.as_ref().and_then(|e| e.error.clone()),
                cc: match &s.probe {
                    Probe::Tcp(p) => sys::congestion(p.as_raw_fd()).ok(),
                    Probe::Udp(_) => None,
                    Probe::Quic(_, cc) => Some(cc.clone()),
                },
                dscp: match &s.probe {
                    Probe::Tcp(p) => sys::dscp(p),
                    Probe::Udp(p) => sys::dscp(&socket2::SockRef::from(p)),
                    Probe::Quic(..) => None,
                },
                retransmits: None,
                subflows: match &s.probe {
                    Probe::Tcp(p) if crate::opts::is_mptcp(p) => subflows(p),
                    _ => Vec::new(),
                },
            })
            .collect();
        let report = SideReport {
            streams,
            cpu,
            tcp_counters: sys::counter_delta(&self.counters_before, &sys::tcp_counters()),
            copy: None,
        };
        (last, report)
    }
}

impl Drop for Side {
    fn drop(&mut self) {
        if self.streams.iter().any(|s| s.thread.is_some()) {
            self.force_close();
            for s in &mut self.streams {
                if let Some(t) = s.thread.take() {
                    let _ = t.join();
                }
            }
        }
    }
}

fn sample_stream(s: &Running) -> StreamSample {
    let tcp = match &s.probe {
        Probe::Tcp(p) => sys::tcp_info(p.as_raw_fd()).ok(),
        Probe::Udp(_) => None,
        Probe::Quic(p, _) => Some(quic_info(&p.snapshot(), s.plan.speaks)),
    };
    let udp = match (&s.probe, s.plan.role) {
        (Probe::Udp(_), Role::Receiver) => {
            s.counters.udp.lock().ok().and_then(|g| g.as_ref().map(UdpRecvStats::counters))
        }
        (Probe::Udp(_), Role::Sender) => {
            Some(UdpCounters { packets: s.counters.packets.load(Ordering::Acquire), ..Default::default() })
        }
        _ => None,
    };
    StreamSample { id: s.plan.id, bytes: s.counters.bytes.load(Ordering::Acquire), tcp, udp }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted)
}

fn run_worker(p: &StreamPlan, conn: Conn, c: &Counters, stop: &AtomicBool, start: Instant) -> io::Result<()> {
    match (conn, p.role) {
        (Conn::Tcp(s), Role::Sender) => tcp_send(p, s, c, stop, start),
        (Conn::Tcp(s), Role::Receiver) => tcp_recv(p, s, c, stop, start),
        (Conn::Udp(s), Role::Sender) => udp_send(p, s, c, stop, start),
        (Conn::Udp(s), Role::Receiver) => udp_recv(p, s, c, stop, start),
        (Conn::Quic(mut s, _), Role::Sender) => quic_send(p, &mut s, c, stop, start),
        (Conn::Quic(mut s, _), Role::Receiver) => {
            let mut buf = if p.zerocopy { Vec::new() } else { vec![0u8; p.block.max(RECV_BUF)] };
            s.recv_bulk(&mut buf, p.zerocopy, stop, |n| {
                c.moved(n, start);
            })
        }
    }
}

/// An MPTCP socket's subflows: addresses and TCP_INFO each (none where the kernel cannot say).
fn subflows(s: &Socket) -> Vec<wanperf_proto::msg::Subflow> {
    let addr = |a: Option<std::net::SocketAddr>| a.map_or_else(String::new, |a| a.to_string());
    wanperf_sys::sockopt::mptcp_subflows(s.as_raw_fd())
        .unwrap_or_default()
        .iter()
        .map(|f| wanperf_proto::msg::Subflow {
            local: addr(f.local),
            remote: addr(f.remote),
            tcp: sys::tcp_info_from(&f.tcp_info),
        })
        .collect()
}

/// A QUIC connection's congestion state in TCP_INFO's terms: the window in packets of the
/// path's size and in bytes, the smoothed RTT, packets declared lost as the retransmissions
/// (QUIC sends lost frames again in new packets), the pacer's rate, the congestion events.
pub fn quic_info(s: &wanperf_quic::PathSnapshot, leads: bool) -> wanperf_proto::msg::TcpInfo {
    wanperf_proto::msg::TcpInfo {
        cwnd: s.cwnd_packets(),
        snd_mss: s.mtu,
        srtt_us: s.rtt_us.min(u64::from(u32::MAX)) as u32,
        // Streams sharing a connection share its counters: its first stream reports them,
        // so that sums over the streams count each loss once.
        total_retrans: if leads { s.lost_packets.min(u64::from(u32::MAX)) as u32 } else { 0 },
        bytes_retrans: leads.then_some(s.lost_bytes),
        snd_cwnd_bytes: Some(s.cwnd_bytes),
        pacing_rate_bps: s.pacing_bps(),
        congestion_events: leads.then_some(s.congestion_events),
        ..Default::default()
    }
}

/// How long a QUIC sender waits, after its last write, for the receiver to have it all.
const QUIC_LINGER: Duration = Duration::from_secs(3);

fn quic_send(
    p: &StreamPlan,
    s: &mut wanperf_quic::QuicStream,
    c: &Counters,
    stop: &AtomicBool,
    start: Instant,
) -> io::Result<()> {
    let block = if p.block == 0 { WriteSize::MAX } else { p.block };
    let own: Vec<u8>;
    let buf: &[u8] = if block <= SEND_PATTERN {
        &send_pattern()[..block]
    } else {
        own = pattern(block);
        &own
    };
    let next = |sent: u64| -> Option<usize> {
        if stop.load(Ordering::Relaxed) || p.deadline.is_some_and(|d| Instant::now() >= d) {
            return None;
        }
        match p.quota {
            Some(q) if sent >= q => None,
            Some(q) => Some((q - sent).min(block as u64) as usize),
            None => Some(block),
        }
    };
    s.send_bulk(
        buf,
        next,
        |n| {
            c.moved(n, start);
        },
        stop,
        QUIC_LINGER,
    )
}

/// The rate a stream achieves, in bytes per millisecond, re-estimated every 20 ms.
struct RateWindow {
    since: Instant,
    bytes: u64,
}

impl RateWindow {
    fn new() -> Self {
        RateWindow { since: Instant::now(), bytes: 0 }
    }

    /// Counts `n` bytes; every 20 ms returns the rate since the last estimate.
    fn per_ms(&mut self, n: usize, now: Instant) -> Option<usize> {
        self.bytes += n as u64;
        let dt = now.duration_since(self.since);
        if dt < Duration::from_millis(20) {
            return None;
        }
        let rate = (self.bytes as f64 / dt.as_secs_f64() / 1000.0) as usize;
        self.since = now;
        self.bytes = 0;
        Some(rate)
    }
}

/// Write size for TCP when the user gave none: about a millisecond of data at the rate the
/// stream is achieving, between 64 KiB and 256 KiB. Bigger writes cut syscalls and wake-ups
/// at tens of Gbit/s; small ones keep the sender's counters current at low rates.
struct WriteSize {
    current: usize,
    rate: RateWindow,
}

impl WriteSize {
    const MIN: usize = 64 * 1024;
    const MAX: usize = 256 * 1024;

    fn new() -> Self {
        WriteSize { current: 128 * 1024, rate: RateWindow::new() }
    }

    fn account(&mut self, n: usize, now: Instant) {
        if let Some(per_ms) = self.rate.per_ms(n, now) {
            self.current = per_ms.clamp(Self::MIN, Self::MAX);
        }
    }
}

/// Bytes of the pattern every TCP sender writes from: the largest automatic write.
const SEND_PATTERN: usize = WriteSize::MAX;

/// The one pattern all of a process's TCP senders write from (read-only, so shared): with
/// several streams, one buffer in the cores' caches instead of one per stream.
fn send_pattern() -> &'static [u8] {
    static PATTERN: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    PATTERN.get_or_init(|| pattern(SEND_PATTERN))
}

/// `len` bytes of the payload pattern (a period of 251: no page repeats another's bytes).
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

fn tcp_send(p: &StreamPlan, mut s: Socket, c: &Counters, stop: &AtomicBool, start: Instant) -> io::Result<()> {
    // A timeout lets a sender blocked on a closed window notice the deadline and the stop flag.
    s.set_write_timeout(Some(Duration::from_millis(100)))?;
    let auto = p.block == 0;
    let cap = if auto { WriteSize::MAX } else { p.block };
    let mut size = WriteSize::new();
    // Zero-copy: vmsplice + splice measured fastest (docs/performance.md): sendfile from a
    // memfd lost half its speed with two streams, MSG_ZEROCOPY copies on loopback anyway.
    let mut splicer = if p.zerocopy { Some(sys::SpliceSender::new(cap)?) } else { None };
    // A block larger than the shared pattern (`--length 1M`) gets a pattern of its own.
    let own: Vec<u8>;
    let buf: &[u8] = if p.zerocopy {
        &[]
    } else if cap <= SEND_PATTERN {
        &send_pattern()[..cap]
    } else {
        own = pattern(cap);
        &own
    };
    let mut sent: u64 = 0;
    let result = loop {
        if stop.load(Ordering::Relaxed) || p.deadline.is_some_and(|d| Instant::now() >= d) {
            break Ok(());
        }
        let block = if auto { size.current } else { p.block };
        let want = match p.quota {
            Some(q) if sent >= q => break Ok(()),
            Some(q) => (q - sent).min(block as u64) as usize,
            None => block,
        };
        let r = match splicer.as_mut() {
            Some(sp) => sp.send(s.as_raw_fd(), want),
            None => s.write(&buf[..want]),
        };
        match r {
            Ok(0) => break Err(io::Error::new(io::ErrorKind::WriteZero, "peer stopped accepting data")),
            Ok(n) => {
                sent += n as u64;
                let now = c.moved(n, start);
                size.account(n, now);
            }
            Err(e) if is_timeout(&e) => continue,
            Err(e) => break Err(e),
        }
    };
    let _ = s.flush();
    let _ = s.shutdown(Shutdown::Write);
    result
}

/// Wakes the receiver only when about a millisecond of data has arrived (SO_RCVLOWAT), so
/// at tens of Gbit/s it reads big chunks instead of being woken for every 64 KiB segment.
/// Bounded by a quarter of the receive buffer (never waiting for more than the window can
/// hold) and by 256 KiB; at low rates it stays 1 byte, so interval counts are never late.
struct LowWater {
    fd: std::os::fd::RawFd,
    current: usize,
    rate: RateWindow,
}

impl LowWater {
    const CAP: usize = 256 * 1024;
    const MIN: usize = 16 * 1024;

    fn new(fd: std::os::fd::RawFd) -> Self {
        LowWater { fd, current: 1, rate: RateWindow::new() }
    }

    fn account(&mut self, n: usize, now: Instant) {
        let Some(per_ms) = self.rate.per_ms(n, now) else {
            return;
        };
        let rcvbuf = sys::rcvbuf(self.fd).unwrap_or(0);
        let mut want = per_ms.min(Self::CAP).min(rcvbuf / 4);
        if want < Self::MIN {
            want = 1;
        }
        if want != self.current && sys::set_rcvlowat(self.fd, want).is_ok() {
            self.current = want;
        }
    }
}

/// The receiver's read size when the user gave no larger block: as large as the low-water mark
/// can ask for (one read a wake-up), and small enough that the buffer the kernel copies into
/// stays in a core's cache. A 1 MiB buffer, a whole L2 on this machine's cores, cost the
/// receiver 3× the CPU per GB of a 256 KiB one (0.43–0.55 against 0.13–0.33 s/GB, measured
/// interleaved on loopback, docs/performance.md).
const RECV_BUF: usize = LowWater::CAP;

fn tcp_recv(p: &StreamPlan, mut s: Socket, c: &Counters, stop: &AtomicBool, start: Instant) -> io::Result<()> {
    s.set_read_timeout(Some(Duration::from_millis(100)))?;
    let len = p.block.max(RECV_BUF);
    let mut buf = if p.zerocopy { Vec::new() } else { vec![0u8; len] };
    let mut low = LowWater::new(s.as_raw_fd());
    let adapt = p.peer == Peer::Wanperf;
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let r = if p.zerocopy { sys::recv_discard(s.as_raw_fd(), len) } else { s.read(&mut buf) };
        match r {
            Ok(0) => return Ok(()),
            Ok(n) => {
                let now = c.moved(n, start);
                if adapt {
                    low.account(n, now);
                }
            }
            Err(e) if is_timeout(&e) => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Most datagrams handed to the kernel in one sendmmsg.
const UDP_BATCH: usize = 64;
/// Shortest sleep of a UDP sender: at high rates it wakes at most every 200 µs and sends what
/// fell due meanwhile in one batch, instead of waking for every datagram.
const UDP_MIN_SLEEP_NS: u64 = 200_000;

fn udp_send(p: &StreamPlan, s: UdpSocket, c: &Counters, stop: &AtomicBool, start: Instant) -> io::Result<()> {
    sys::set_timer_slack_ns(1_000);
    let rate = p.rate_bps.unwrap_or(1_000_000).max(1) as f64;
    let len = p.block.max(UDP_HEADER_LEN);
    let gap_ns = (len as f64 * 8.0 * 1e9 / rate).max(1.0);
    let template = pattern(len);
    let mut bufs: Vec<Vec<u8>> = (0..UDP_BATCH).map(|_| template.clone()).collect();
    let mut seq: u64 = 0;
    let mut sent_bytes: u64 = 0;
    let fd = s.as_raw_fd();
    let result = 'outer: loop {
        if stop.load(Ordering::Relaxed) || p.deadline.is_some_and(|d| Instant::now() >= d) {
            break Ok(());
        }
        // Every datagram has a scheduled time counted from the start (not from the previous
        // send), so sleep error never adds up; all that are due go out in one batch.
        let now_ns = ns_since(start);
        let wall_ns = if p.peer == Peer::Wanperf { 0 } else { sys::realtime_ns() };
        let mut n = 0;
        let mut quota_done = false;
        while n < UDP_BATCH && (seq as f64 * gap_ns) as u64 <= now_ns {
            if p.quota.is_some_and(|q| sent_bytes >= q) {
                quota_done = true;
                break;
            }
            let dropped = p.drop_every.is_some_and(|k| k > 0 && seq % k == k - 1);
            if !dropped {
                match p.peer {
                    Peer::Wanperf => {
                        UdpHeader { token: p.token, stream: p.id, seq, send_ns: now_ns }.write(&mut bufs[n])
                    }
                    Peer::Iperf3 { counters64 } => Iperf3Header::at(wall_ns, seq + 1).write(&mut bufs[n], counters64),
                }
                n += 1;
            }
            seq += 1;
            sent_bytes += len as u64;
        }
        if n > 0 {
            match sys::send_batch(fd, &bufs[..n]) {
                Ok(_) => {}
                // A full local queue loses datagrams at the sender; the receiver counts them.
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) || is_timeout(&e) => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    break 'outer Err(io::Error::new(e.kind(), "peer's UDP port is unreachable"));
                }
                Err(e) => break 'outer Err(e),
            }
        }
        c.packets.store(seq, Ordering::Release);
        c.bytes.store(sent_bytes, Ordering::Release);
        c.last_ns.store(ns_since(start), Ordering::Release);
        if quota_done {
            break Ok(());
        }
        let next_ns = (seq as f64 * gap_ns) as u64;
        let now_ns = ns_since(start);
        if next_ns > now_ns {
            let wait = (next_ns - now_ns).max(UDP_MIN_SLEEP_NS.min(gap_ns as u64 * UDP_BATCH as u64));
            std::thread::sleep(Duration::from_nanos(wait.min(50_000_000)));
        }
    };
    if p.peer != Peer::Wanperf {
        // iperf3 has no end marker: the control connection ends the test.
        return result;
    }
    // End-of-flow marker, repeated in case one is lost; it carries the count sent.
    let mut fin = [0u8; UDP_HEADER_LEN];
    UdpHeader { token: p.token, stream: p.id, seq: UDP_FIN_SEQ, send_ns: seq }.write(&mut fin);
    for _ in 0..3 {
        let _ = s.send(&fin);
        std::thread::sleep(Duration::from_millis(5));
    }
    result
}

fn udp_recv(p: &StreamPlan, s: UdpSocket, c: &Counters, stop: &AtomicBool, start: Instant) -> io::Result<()> {
    s.set_read_timeout(Some(Duration::from_millis(100)))?;
    *c.udp.lock().map_err(|_| io::Error::other("poisoned"))? = Some(UdpRecvStats::new());
    let mut buf = vec![0u8; 65_536];
    // A receiver whose sender's end marker never comes gives up a little after the data
    // should have arrived.
    let give_up = p.expected_end.or(p.deadline).map(|d| d + Duration::from_secs(3));
    loop {
        if stop.load(Ordering::Relaxed) || give_up.is_some_and(|g| Instant::now() >= g) {
            return Ok(());
        }
        let n = match s.recv(&mut buf) {
            Ok(n) => n,
            Err(e) if is_timeout(&e) => continue,
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
            Err(e) => return Err(e),
        };
        let arrival = ns_since(start);
        let h = match p.peer {
            Peer::Wanperf => match UdpHeader::read(&buf[..n]) {
                Ok(h) if h.token == p.token && h.stream == p.id => h,
                _ => continue,
            },
            Peer::Iperf3 { counters64 } => match Iperf3Header::read(&buf[..n], counters64) {
                // The 4-byte connect datagrams are shorter than a header.
                Some(h) => UdpHeader { token: 0, stream: p.id, seq: h.pcount.saturating_sub(1), send_ns: h.send_ns() },
                None => continue,
            },
        };
        let mut g = c.udp.lock().map_err(|_| io::Error::other("poisoned"))?;
        let st = g.get_or_insert_with(UdpRecvStats::new);
        if h.seq == UDP_FIN_SEQ {
            st.on_fin(h.send_ns);
            return Ok(());
        }
        let fresh = st.on_packet(h.seq, h.send_ns, arrival);
        drop(g);
        if fresh {
            c.bytes.fetch_add(n as u64, Ordering::Release);
        }
        c.last_ns.store(arrival, Ordering::Release);
    }
}
