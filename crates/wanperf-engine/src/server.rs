//! `wanperf serve`: the accept loop and the I/O shell around [`ServerSession`].
//!
//! One listening port carries control and data connections; the first four bytes say which.
//! Each control connection gets a thread that drives its session from one event channel
//! (control messages, data connections, worker ends, timer ticks), so a client that stalls,
//! lies or vanishes only ever affects its own test.

use crate::control::CtrlEvent;
use crate::opts::{preflight, SockOpts};
use crate::stream::{Conn, Peer, Side, StreamPlan};
use crate::sys;
use ipnet::IpNet;
use socket2::Socket;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wanperf_proto::auth::AuthorizedKeys;
use wanperf_proto::data::{self, udp_token, Cookie, DataHello, HELLO_LEN};
use wanperf_proto::frame::{self, FrameError, CONTROL_MAGIC};
use wanperf_proto::msg::{Msg, Role, TestSpec, Transport};
use wanperf_proto::server::{Limits, ServerAction, ServerSession, SessionError, Timeouts};
use wanperf_proto::units::fmt_rate;

/// Server settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Test limits.
    pub limits: Limits,
    /// Handshake and grace timeouts.
    pub timeouts: Timeouts,
    /// Client networks allowed (empty: loopback only).
    pub allow: Vec<IpNet>,
    /// Software version string sent to clients.
    pub software: String,
    /// When set, only clients proving one of these keys are admitted (`--authorized-keys`).
    pub auth: Option<Arc<AuthorizedKeys>>,
    /// Caps on connections that have not yet identified themselves.
    pub gate: Gate,
    /// The directory copies read from and write into (`--root`); no copies without it.
    pub copy_root: Option<std::path::PathBuf>,
    /// Ports for a test's data sockets (UDP streams, a QUIC endpoint, an MPTCP listener): the
    /// first free one of the range ([`wanperf_proto::msg::DATA_PORTS`] by default; any free
    /// port, logged, when all are taken), or any free port (`None`).
    pub data_ports: Option<std::ops::RangeInclusive<u16>>,
}

/// Caps on connections that have not yet identified themselves (a control connection until
/// its test is admitted, a data connection until its hello names a live test): a crowd of
/// strangers, or one address, cannot use up the server's threads, descriptors or memory.
/// Connections over a cap are closed at once. Data connections a just-admitted test from the
/// same address is waiting for do not count against its address's cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gate {
    /// Most unidentified connections in all (`--max-handshakes`).
    pub max_pending: u32,
    /// Most unidentified connections per client address, IPv6 per /64
    /// (`--max-handshakes-per-host`).
    pub max_pending_per_host: u32,
}

impl Default for Gate {
    fn default() -> Self {
        Gate { max_pending: 256, max_pending_per_host: 16 }
    }
}

/// Stack of a connection's thread (hello, handshake, the session's control loop).
const CONN_STACK: usize = 256 * 1024;

/// Largest control frame accepted before a test is admitted (a request is about 1 kB).
pub const PRE_ADMISSION_MAX_FRAME: usize = 64 * 1024;

/// An IPv4 client of a dual-stack socket as IPv4 (its IPv4-mapped IPv6 address unmapped).
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

impl ServerConfig {
    /// Whether a client address may run tests.
    pub fn allowed(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        if self.allow.is_empty() {
            return ip.is_loopback();
        }
        self.allow.iter().any(|n| n.contains(&ip))
    }
}

/// Receives one line per noteworthy server event.
pub type Log = Arc<dyn Fn(&str) + Send + Sync>;

type Registry = Arc<Mutex<HashMap<Cookie, Sender<Event>>>>;

enum Event {
    Msg(Msg),
    BadFrame(FrameError),
    Closed,
    Data(u32, TcpStream),
    UdpAttached(u32, UdpSocket),
    QuicAttached(u32, Box<wanperf_quic::QuicStream>),
    WorkerDone,
    Copy(crate::copy::CopyEvent),
}

struct Shared {
    cfg: ServerConfig,
    registry: Registry,
    /// Admitted tests in progress (the --max-concurrent count).
    active: AtomicU32,
    shutdown: Arc<AtomicBool>,
    log: Log,
    gate: Mutex<GateState>,
    quiet: Mutex<HashMap<IpAddr, (Instant, u32)>>,
}

/// Unidentified connections, per host and in all, and the data connections admitted tests
/// still wait for, per host.
#[derive(Default)]
struct GateState {
    total: u32,
    per_host: HashMap<IpAddr, u32>,
    expected: HashMap<IpAddr, u32>,
}

/// The address a per-host cap counts: IPv4 (also when mapped into IPv6), or the IPv6 /64.
fn host_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
        v4 => v4,
    }
}

/// One unidentified connection's place under the [`Gate`]; given back on drop.
struct Slot {
    sh: Arc<Shared>,
    host: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Ok(mut g) = self.sh.gate.lock() {
            g.total = g.total.saturating_sub(1);
            if let Some(n) = g.per_host.get_mut(&self.host) {
                *n -= 1;
                if *n == 0 {
                    g.per_host.remove(&self.host);
                }
            }
        }
    }
}

impl Shared {
    /// A place under the gate for a new connection from `ip`, or why not.
    fn enter(self: &Arc<Self>, ip: IpAddr) -> Result<Slot, String> {
        let host = host_of(ip);
        let mut g = self.gate.lock().map_err(|_| "server state poisoned".to_string())?;
        let expected = g.expected.get(&host).copied().unwrap_or(0);
        let here = g.per_host.get(&host).copied().unwrap_or(0);
        let gate = self.cfg.gate;
        if here >= gate.max_pending_per_host + expected {
            return Err(format!("{here} of its connections are in handshake (--max-handshakes-per-host)"));
        }
        if g.total >= gate.max_pending + g.expected.values().sum::<u32>() {
            return Err(format!("{} connections are in handshake (--max-handshakes)", g.total));
        }
        g.total += 1;
        *g.per_host.entry(host).or_insert(0) += 1;
        Ok(Slot { sh: self.clone(), host })
    }

    /// An admitted test from `ip` will open `n` data connections (`n` may be negative to
    /// take back what did not come).
    fn expect(&self, ip: IpAddr, n: i64) {
        let host = host_of(ip);
        if let Ok(mut g) = self.gate.lock() {
            let e = g.expected.entry(host).or_insert(0);
            *e = (i64::from(*e) + n).max(0) as u32;
            if *e == 0 {
                g.expected.remove(&host);
            }
        }
    }

    /// Logs `line` about `ip`, but at most once a second per address (a crowd of bad
    /// connections must not flood the log); says how many were left out.
    fn log_quietly(&self, ip: IpAddr, line: &str) {
        let now = Instant::now();
        let said = match self.quiet.lock() {
            Ok(mut q) => {
                if q.len() > 4096 {
                    q.retain(|_, (t, _)| now.duration_since(*t) < Duration::from_secs(1));
                }
                let e = q.entry(host_of(ip)).or_insert((now - Duration::from_secs(2), 0));
                if now.duration_since(e.0) >= Duration::from_secs(1) {
                    let left_out = e.1;
                    *e = (now, 0);
                    Some(left_out)
                } else {
                    e.1 += 1;
                    None
                }
            }
            Err(_) => Some(0),
        };
        match said {
            Some(0) => (self.log)(line),
            Some(n) => (self.log)(&format!("{line} (and {n} more like it from {} in the last second)", host_of(ip))),
            None => {}
        }
    }
}

/// Serves until `shutdown` is set, then ends every running test and returns.
pub fn serve(listener: TcpListener, cfg: ServerConfig, shutdown: Arc<AtomicBool>, log: Log) -> io::Result<()> {
    let udp = bind_udp_like(&listener);
    if let Err(e) = &udp {
        log(&format!("no UDP echo for ping probes: {e}"));
    }
    serve_with(listener, udp.ok(), cfg, shutdown, log)
}

/// [`serve`] with the UDP socket for ping probes bound by the caller (so it can announce the
/// server only once both are ready).
pub fn serve_with(
    listener: TcpListener,
    udp: Option<UdpSocket>,
    cfg: ServerConfig,
    shutdown: Arc<AtomicBool>,
    log: Log,
) -> io::Result<()> {
    let shared = Arc::new(Shared {
        cfg,
        registry: Arc::new(Mutex::new(HashMap::new())),
        active: AtomicU32::new(0),
        shutdown: shutdown.clone(),
        log,
        gate: Mutex::new(GateState::default()),
        quiet: Mutex::new(HashMap::new()),
    });
    let mut workers: Vec<std::thread::JoinHandle<()>> = Vec::new();
    // Probes for `wanperf ping` arrive as UDP on the same address and port.
    if let Some(udp) = udp {
        let sh = shared.clone();
        let stop = shutdown.clone();
        workers.push(std::thread::spawn(move || crate::echo::run_echo(udp, |ip| sh.cfg.allowed(ip), stop)));
    }
    // glibc gives each of up to 8 × cores threads its own malloc arena, which keeps freed
    // memory after a crowd of connection threads is gone; two arenas are plenty for a
    // server whose bulk data never goes through malloc.
    wanperf_sys::mem::set_malloc_arena_max(2);
    let base = workers.len();
    let mut crowd = 0usize;
    while !shutdown.load(Ordering::Acquire) {
        let ready = matches!(wanperf_sys::poll_one(&listener, libc::POLLIN, 100), Ok(true));
        workers.retain(|h| !h.is_finished());
        crowd = crowd.max(workers.len() - base.min(workers.len()));
        if crowd >= 32 && workers.len() <= base {
            // After a crowd of connections (hostile or not) every per-connection thread's
            // malloc arena holds freed memory; give it back to the system.
            crowd = 0;
            wanperf_sys::mem::malloc_trim();
        }
        if !ready {
            continue;
        }
        let (stream, peer) = match listener.accept() {
            Ok(x) => x,
            Err(e) if e.kind() == io::ErrorKind::Interrupted || e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => {
                (shared.log)(&format!("accept failed: {e}"));
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        // Over a cap: closed before any thread or buffer is spent on it.
        let slot = match shared.enter(peer.ip()) {
            Ok(slot) => slot,
            Err(why) => {
                drop(stream);
                shared.log_quietly(peer.ip(), &format!("closed connection from {peer} at once: {why}"));
                continue;
            }
        };
        let sh = shared.clone();
        // A small stack: most connections only ever read a hello, and glibc keeps up to
        // 40 MiB of finished threads' stacks for reuse, so their size is what a crowd leaves.
        match std::thread::Builder::new()
            .name("wanperf-conn".into())
            .stack_size(CONN_STACK)
            .spawn(move || handle_conn(&sh, stream, peer, slot))
        {
            Ok(h) => workers.push(h),
            Err(e) => (shared.log)(&format!("cannot start a thread for {peer}: {e}")),
        }
        workers.retain(|h| !h.is_finished());
    }
    // Sessions see the flag within 100 ms and abort their tests; data connections waiting
    // for their hello time out. Give them a bounded time to finish.
    let give_up = Instant::now() + Duration::from_secs(3);
    while workers.iter().any(|h| !h.is_finished()) && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// A UDP socket on the listener's address and port (dual stack like it).
pub fn bind_udp_like(listener: &TcpListener) -> io::Result<UdpSocket> {
    bind_udp(listener.local_addr()?)
}

/// Binds a test's data sockets: the first free port of the server's data range each (a
/// test's next socket looks past the last one's port), else any free port (`spilled` then
/// says so, for the log line, and the test's further sockets go straight to any port).
struct DataPorts<'a> {
    range: &'a Option<std::ops::RangeInclusive<u16>>,
    spilled: bool,
    next: u16,
}

impl<'a> DataPorts<'a> {
    fn new(range: &'a Option<std::ops::RangeInclusive<u16>>) -> Self {
        DataPorts { range, spilled: false, next: range.as_ref().map_or(0, |r| *r.start()) }
    }

    fn bind<T>(&mut self, ip: IpAddr, bind: impl Fn(SocketAddr) -> io::Result<T>) -> io::Result<T> {
        if let (Some(r), false) = (self.range, self.spilled) {
            for p in self.next..=*r.end() {
                match bind(SocketAddr::new(ip, p)) {
                    Ok(s) => {
                        self.next = p.saturating_add(1);
                        return Ok(s);
                    }
                    Err(e) if e.kind() == io::ErrorKind::AddrInUse => continue,
                    Err(e) => return Err(e),
                }
            }
            self.spilled = true;
        }
        bind(SocketAddr::new(ip, 0))
    }
}

/// A UDP socket on `addr`, dual stack on an IPv6 address.
pub fn bind_udp(addr: SocketAddr) -> io::Result<UdpSocket> {
    let s =
        socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::DGRAM, Some(socket2::Protocol::UDP))?;
    if addr.is_ipv6() {
        let _ = s.set_only_v6(false);
    }
    s.bind(&addr.into())?;
    Ok(s.into())
}

/// Reads exactly `buf.len()` bytes before `deadline` (a client that dribbles bytes is cut at
/// the deadline, not after one timeout per read).
fn read_exact_by(stream: &mut TcpStream, buf: &mut [u8], deadline: Instant) -> io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(&mut buf[got..]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn handle_conn(sh: &Arc<Shared>, mut stream: TcpStream, peer: SocketAddr, slot: Slot) {
    let deadline = Instant::now() + sh.cfg.timeouts.handshake;
    let _ = stream.set_nodelay(true);
    let mut magic = [0u8; 4];
    if read_exact_by(&mut stream, &mut magic, deadline).is_err() {
        return;
    }
    let allowed = sh.cfg.allowed(peer.ip());
    if magic == CONTROL_MAGIC {
        if !allowed {
            let reason = format!(
                "this server does not accept tests from {} (start it with --allow CIDR to permit them)",
                peer.ip()
            );
            sh.log_quietly(peer.ip(), &format!("refused {peer}: not in --allow"));
            let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
            let _ = stream.write_all(&frame::encode(&Msg::Refused { reason }));
            return;
        }
        run_session(sh, stream, peer, &magic, slot);
    } else if magic == data::DATA_MAGIC {
        if !allowed {
            return;
        }
        let mut rest = [0u8; HELLO_LEN];
        rest[..4].copy_from_slice(&magic);
        if read_exact_by(&mut stream, &mut rest[4..], deadline).is_err() {
            return;
        }
        let Ok(hello) = DataHello::decode(&rest) else {
            sh.log_quietly(peer.ip(), &format!("closed data connection from {peer}: malformed hello"));
            return;
        };
        let tx = sh.registry.lock().ok().and_then(|r| r.get(&hello.cookie).cloned());
        match tx {
            Some(tx) => {
                let _ = stream.set_read_timeout(None);
                drop(slot); // identified: it belongs to an admitted test now
                let _ = tx.send(Event::Data(hello.stream, stream));
            }
            None => sh.log_quietly(peer.ip(), &format!("closed data connection from {peer}: unknown test cookie")),
        }
    } else {
        sh.log_quietly(peer.ip(), &format!("closed connection from {peer}: not the wanperf protocol"));
    }
}

struct ActiveGuard<'a>(&'a AtomicU32);
impl Drop for ActiveGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

struct RegistryGuard {
    registry: Registry,
    cookie: Option<Cookie>,
}
impl Drop for RegistryGuard {
    fn drop(&mut self) {
        if let (Some(c), Ok(mut r)) = (self.cookie, self.registry.lock()) {
            r.remove(&c);
        }
    }
}

fn describe(spec: &TestSpec) -> String {
    let t = match spec.transport {
        Transport::Tcp if spec.mptcp => "MPTCP",
        Transport::Tcp => "TCP",
        Transport::Udp => "UDP",
        Transport::Quic => "QUIC",
    };
    let dir = match spec.direction {
        wanperf_proto::msg::Direction::Up => "client→server",
        wanperf_proto::msg::Direction::Down => "server→client",
        wanperf_proto::msg::Direction::Bidir => "both ways",
    };
    let len = match (spec.duration_s, spec.bytes) {
        (Some(d), _) => format!("{d} s"),
        (_, Some(b)) => wanperf_proto::units::fmt_bytes(b),
        _ => String::new(),
    };
    format!("{t} {dir}, {} stream(s), {len}", spec.streams)
}

/// How long the streams get to deliver their last bytes when the test ends.
const FINISH_GRACE: Duration = Duration::from_secs(2);

/// Serves one control connection to its end: the session's driver (quinn's shape) — the
/// sans-IO `ServerSession` decides, [`Driver`] carries out its actions and feeds it events.
fn run_session(sh: &Arc<Shared>, ctrl: TcpStream, peer: SocketAddr, prefix: &[u8], slot: Slot) {
    let mut cookie: Cookie = [0; 16];
    let mut nonce = [0u8; wanperf_proto::auth::NONCE_LEN];
    if getrandom::fill(&mut cookie).is_err() || getrandom::fill(&mut nonce).is_err() {
        return;
    }
    let mut session = ServerSession::new(
        Instant::now(),
        sh.cfg.limits.clone(),
        sh.cfg.timeouts,
        0,
        cookie,
        sh.cfg.software.clone(),
        Default::default(),
    );
    if let Some(keys) = &sh.cfg.auth {
        session.require_auth(keys.clone(), nonce);
    }
    let (tx, rx) = mpsc::channel::<Event>();
    // Reader thread: decodes frames into events until the connection closes. Frames stay
    // small until the test is admitted.
    let Ok(reader) = ctrl.try_clone() else {
        return;
    };
    let _ = reader.set_read_timeout(None);
    let max_frame = Arc::new(AtomicUsize::new(PRE_ADMISSION_MAX_FRAME));
    let Ok(reader_thread) = crate::control::spawn_reader(reader, prefix, max_frame.clone(), tx.clone(), |e| match e {
        CtrlEvent::Msg(m) => Event::Msg(m),
        CtrlEvent::Bad(e) => Event::BadFrame(e),
        CtrlEvent::Closed => Event::Closed,
    }) else {
        (sh.log)(&format!("closed connection from {peer}: cannot start a thread"));
        return;
    };
    let _ = ctrl.set_write_timeout(Some(sh.cfg.timeouts.handshake));
    let mut d = Driver {
        sh,
        session,
        ctrl,
        peer,
        cookie,
        tx,
        max_frame,
        slot: Some(slot),
        active_guard: None,
        reg: RegistryGuard { registry: sh.registry.clone(), cookie: None },
        expected_left: 0,
        pending: Vec::new(),
        side: None,
        udp_cancel: None,
        rate_check: RateCheck::default(),
        outcome: None,
        lost: crate::copy::LostGrace::default(),
        job: None,
    };
    loop {
        d.flush();
        while let Some(action) = d.session.poll_action() {
            d.on_action(action);
        }
        if d.session.is_finished() {
            // Flush what is left (an error or the results), then leave.
            while let Some(m) = d.session.poll_transmit() {
                if d.ctrl.write_all(&frame::encode(&m)).is_err() {
                    break;
                }
            }
            break;
        }
        if sh.shutdown.load(Ordering::Acquire) {
            d.abort("server is shutting down");
            continue;
        }
        if let Some(why) = d.lost.due(Instant::now()) {
            d.abort(&why);
            continue;
        }
        let wait = crate::stream::wait_before(d.session.poll_timeout(), d.side.as_ref());
        let ev = match rx.recv_timeout(d.lost.wait(wait, Instant::now())) {
            Ok(ev) => Some(ev),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        d.on_event(ev, Instant::now());
        d.tick();
    }
    d.finish(reader_thread);
}

/// One test's server side while it runs: the sans-IO session and the I/O it asked for.
struct Driver<'a> {
    sh: &'a Arc<Shared>,
    session: ServerSession,
    ctrl: TcpStream,
    peer: SocketAddr,
    cookie: Cookie,
    tx: Sender<Event>,
    /// The reader thread's frame limit, raised once the test is admitted.
    max_frame: Arc<AtomicUsize>,
    /// Given back when the test is admitted: until then it holds a place under the gate.
    slot: Option<Slot>,
    /// Taken when the test is admitted (--max-concurrent counts admitted tests only).
    active_guard: Option<ActiveGuard<'a>>,
    reg: RegistryGuard,
    /// Data connections this admitted test still waits for (they pass the per-host cap).
    expected_left: i64,
    pending: Vec<Option<Conn>>,
    side: Option<Side>,
    udp_cancel: Option<Arc<AtomicBool>>,
    rate_check: RateCheck,
    /// What the log says of the test when it ends (the first reason wins).
    outcome: Option<String>,
    /// A copy's broken data connection, reported when the client gives no reason in time.
    lost: crate::copy::LostGrace,
    job: Option<crate::copy::Job>,
}

impl Driver<'_> {
    /// Sends what the session queued.
    fn flush(&mut self) {
        while let Some(m) = self.session.poll_transmit() {
            if self.ctrl.write_all(&frame::encode(&m)).is_err() {
                if let Some(e) = self.session.handle_closed() {
                    self.outcome.get_or_insert(e.to_string());
                }
                break;
            }
        }
    }

    /// Aborts the test, keeping `why` for the log.
    fn abort(&mut self, why: &str) {
        let e = self.session.abort(why);
        self.outcome.get_or_insert(e.to_string());
    }

    fn on_action(&mut self, action: ServerAction) {
        match action {
            ServerAction::Prepare(spec) => self.prepare(&spec),
            ServerAction::StartWorkers => self.start_workers(),
            ServerAction::Collect => self.collect(),
            ServerAction::Copy(m) => {
                if let Some(j) = &self.job {
                    j.on_msg(m);
                }
            }
            ServerAction::Abort(reason) => {
                self.outcome.get_or_insert(reason);
                if let Some(j) = &self.job {
                    j.abort();
                }
                if let Some(s) = self.side.take() {
                    s.force_close();
                }
            }
            ServerAction::Close => {}
        }
    }

    /// Admits the test (or refuses it): a place among the running tests, the data
    /// connections or UDP sockets it needs, a copy's job.
    fn prepare(&mut self, spec: &TestSpec) {
        // Reserve a place among the running tests atomically, or refuse.
        let before = self.sh.active.fetch_add(1, Ordering::AcqRel);
        let guard = ActiveGuard(&self.sh.active);
        if let Some(busy) = self.sh.cfg.limits.busy(before) {
            drop(guard);
            self.session.handle_prepare_failed(busy.to_string());
            return;
        }
        self.active_guard = Some(guard);
        self.max_frame.store(frame::MAX_PAYLOAD, Ordering::Release);
        // The gate expects data connections on the main listener (an MPTCP test's come to
        // its own).
        if spec.transport == Transport::Tcp && !spec.mptcp {
            self.expected_left = i64::from(spec.connections());
            self.sh.expect(self.peer.ip(), self.expected_left);
        }
        self.pending = (0..spec.connections() as usize).map(|_| None).collect();
        if let Some(d) = spec.dscp {
            // The client marks its control traffic; the server's replies match.
            let v6 = self.ctrl.local_addr().is_ok_and(|a| a.is_ipv6());
            let _ = sys::set_dscp(&socket2::SockRef::from(&self.ctrl), v6, d);
        }
        self.session.set_host(sys::host_capture(Some(self.peer.ip())));
        if let Some(cs) = &spec.copy {
            match prepare_copy(cs, self.sh.cfg.copy_root.as_deref(), &self.tx) {
                Ok(j) => self.job = Some(j),
                Err(reason) => {
                    self.session.handle_prepare_failed(reason);
                    return;
                }
            }
        }
        let mut data = DataPorts::new(&self.sh.cfg.data_ports);
        match prepare(spec, &self.ctrl, &self.cookie, &self.tx, &mut data) {
            Ok((ports, cancel, quic_cert)) => {
                self.udp_cancel = cancel;
                if let Some(fp) = quic_cert {
                    self.session.set_quic_cert(fp);
                }
                if spec.mptcp {
                    match prepare_mptcp(spec, &self.ctrl, &self.cookie, &self.tx, &mut data) {
                        Ok((port, cancel)) => {
                            self.session.set_data_port(port);
                            self.udp_cancel = Some(cancel);
                        }
                        Err(reason) => {
                            self.session.handle_prepare_failed(reason);
                            return;
                        }
                    }
                }
                if let Ok(mut r) = self.sh.registry.lock() {
                    r.insert(self.cookie, self.tx.clone());
                    self.reg.cookie = Some(self.cookie);
                }
                let who = self.session.client_key().map(|k| format!(" (key {k})")).unwrap_or_default();
                (self.sh.log)(&format!("test from {}{who}: {}", self.peer, describe(spec)));
                if let (true, Some(r)) = (data.spilled, data.range) {
                    let line = format!(
                        "data ports {}-{} all in use: some of this test's data is on other ports",
                        r.start(),
                        r.end()
                    );
                    (self.sh.log)(&line);
                }
                self.session.handle_prepared(Instant::now(), ports);
            }
            Err(reason) => self.session.handle_prepare_failed(reason),
        }
    }

    /// Starts this end's stream workers on the connections that arrived.
    fn start_workers(&mut self) {
        let spec = self.session.spec().cloned().expect("spec before start");
        let notify_tx = Mutex::new(self.tx.clone());
        let notify: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
            if let Ok(t) = notify_tx.lock() {
                let _ = t.send(Event::WorkerDone);
            }
        });
        let conns = std::mem::take(&mut self.pending);
        let worker = self.job.as_ref().map(|j| j.start());
        let cap = self.sh.cfg.limits.max_rate_bps;
        match start_side(&spec, conns, &self.cookie, cap, notify, worker) {
            Ok(s) => {
                self.rate_check = RateCheck::for_test(&spec, cap);
                self.side = Some(s);
            }
            Err(e) => self.abort(&format!("server could not start the streams: {e}")),
        }
    }

    /// The test's end on this side: the last interval and this end's report.
    fn collect(&mut self) {
        let Some(s) = self.side.as_mut() else {
            self.abort("server has no streams to report");
            return;
        };
        let (last, mut report) = s.finish(FINISH_GRACE);
        report.copy = self.job.as_ref().map(|j| j.report());
        // --probe: this end's ceilings before the results go out, so that the client probes
        // its own after (never both at once).
        if let (Some(j), Some(c)) = (self.job.as_ref(), report.copy.as_mut()) {
            c.probes = j.probe();
        }
        self.outcome = Some(done_line(&report, last.t_s));
        self.session.queue_interval(last);
        self.session.handle_local_report(report);
    }

    /// Feeds one event (`None`: the session's timer) to the session.
    fn on_event(&mut self, ev: Option<Event>, now: Instant) {
        let res = match ev {
            Some(Event::Msg(m)) => self.session.handle_msg(now, m),
            Some(Event::BadFrame(e)) => {
                // Tell a peer of another version in a frame it can still read.
                if let FrameError::Version { .. } = e {
                    let refused = Msg::Refused { reason: format!("{e}; upgrade the older end") };
                    let _ = self.ctrl.write_all(&frame::encode(&refused));
                }
                Err(self.session.abort(&format!("bad control data from the client: {e}")))
            }
            Some(Event::Closed) => match self.session.handle_closed() {
                Some(e) => Err(e),
                None => Ok(()),
            },
            Some(Event::Data(id, s)) => {
                if self.expected_left > 0 {
                    self.expected_left -= 1;
                    self.sh.expect(self.peer.ip(), -1);
                }
                self.attach(now, id, Conn::Tcp(Socket::from(s)))
            }
            Some(Event::UdpAttached(id, s)) => self.attach(now, id, Conn::Udp(s)),
            Some(Event::QuicAttached(id, s)) => {
                let cc =
                    self.session.spec().map_or_else(|| "cubic".into(), |s| crate::client::quic_tuning(s).cc_name());
                self.attach(now, id, Conn::Quic(s, cc))
            }
            Some(Event::WorkerDone) => Ok(()),
            Some(Event::Copy(ev)) => match ev {
                crate::copy::CopyEvent::Msg(m) => {
                    self.session.send_copy(m);
                    Ok(())
                }
                crate::copy::CopyEvent::File(_) => Ok(()),
                crate::copy::CopyEvent::Failed(why) => Err(self.session.abort(&why)),
                crate::copy::CopyEvent::Lost(why) => {
                    self.lost.note(now, why);
                    Ok(())
                }
            },
            None => self.session.handle_timeout(now),
        };
        if let Err(e) = res {
            self.outcome.get_or_insert(e.to_string());
        }
        if self.slot.is_some() && (self.session.is_admitted() || self.session.is_finished()) {
            self.slot = None;
        }
    }

    /// A data connection or UDP flow of stream `id` arrived.
    fn attach(&mut self, now: Instant, id: u32, conn: Conn) -> Result<(), SessionError> {
        let r = self.session.handle_stream(now, id);
        if r.is_ok() {
            if let Some(slot) = self.pending.get_mut(id as usize) {
                *slot = Some(conn);
            }
        }
        r
    }

    /// Samples the streams at interval boundaries, holding the client to --max-rate.
    fn tick(&mut self) {
        let Some(iv) = self.side.as_mut().and_then(|s| s.tick(Instant::now())) else { return };
        if let Some(why) = self.rate_check.check(&iv) {
            self.abort(&why);
        }
        self.session.queue_interval(iv);
    }

    /// Frees everything in order and logs how the test went.
    fn finish(mut self, reader_thread: std::thread::JoinHandle<()>) {
        if let Some(c) = &self.udp_cancel {
            c.store(true, Ordering::Release);
        }
        self.sh.expect(self.peer.ip(), -self.expected_left);
        drop(self.slot.take());
        // A copy's pipeline stops first, so no stream worker waits on its queues.
        if let Some(j) = &self.job {
            j.abort();
        }
        drop(self.side.take());
        if let Some(j) = self.job.take() {
            j.join();
        }
        let _ = self.ctrl.shutdown(std::net::Shutdown::Both);
        let _ = reader_thread.join();
        drop(self.active_guard.take());
        if let Some(o) = &self.outcome {
            (self.sh.log)(&format!("test from {}: {o}", self.peer));
        }
    }
}

/// The log's line for a test that ended: what this server received and sent, and at what rate.
fn done_line(report: &wanperf_proto::msg::SideReport, secs: f64) -> String {
    let sum = |role| report.streams.iter().filter(|x| x.role == Some(role)).map(|x| x.bytes).sum::<u64>();
    let (rx_bytes, tx_bytes) = (sum(Role::Receiver), sum(Role::Sender));
    let secs = secs.max(1e-9);
    format!(
        "done: server received {} ({}), sent {} ({})",
        wanperf_proto::units::fmt_bytes(rx_bytes),
        fmt_rate(rx_bytes as f64 * 8.0 / secs),
        wanperf_proto::units::fmt_bytes(tx_bytes),
        fmt_rate(tx_bytes as f64 * 8.0 / secs),
    )
}

/// Aborts a TCP test whose client sends faster than the server's --max-rate allows.
#[derive(Default, Debug)]
struct RateCheck {
    cap: Option<u64>,
    ids: Vec<u32>,
    prev: Option<(f64, u64)>,
}

/// Intervals shorter than this are not judged (too few bytes to tell a rate).
const RATE_CHECK_MIN_S: f64 = 0.05;
/// A client may exceed --max-rate by this factor before it is cut off (pacing bursts).
const RATE_CHECK_SLACK: f64 = 1.25;

impl RateCheck {
    /// The check for `spec` under the server's cap: only TCP the client sends counts (the
    /// server paces its own sending in reverse and bidir tests).
    fn for_test(spec: &TestSpec, cap: Option<u64>) -> RateCheck {
        let cap = match (spec.transport, cap) {
            (Transport::Tcp, Some(cap)) if spec.direction != wanperf_proto::msg::Direction::Down => Some(cap),
            _ => None,
        };
        let ids = (0..spec.connections()).filter(|&i| spec.client_role(i) == Role::Sender).collect();
        RateCheck { cap, ids, prev: None }
    }

    fn check(&mut self, iv: &wanperf_proto::msg::SideInterval) -> Option<String> {
        let cap = self.cap?;
        let bytes: u64 = iv.streams.iter().filter(|s| self.ids.contains(&s.id)).map(|s| s.bytes).sum();
        let prev = self.prev.replace((iv.t_s, bytes));
        let (t0, b0) = prev?;
        let dt = iv.t_s - t0;
        if dt < RATE_CHECK_MIN_S {
            return None;
        }
        let rate = (bytes - b0) as f64 * 8.0 / dt;
        (rate > cap as f64 * RATE_CHECK_SLACK)
            .then(|| format!("client sent {} but the server's --max-rate is {}", fmt_rate(rate), fmt_rate(cap as f64)))
    }
}

/// What [`prepare`] readied: the UDP ports to announce, the flag that stops waiting for the
/// flows, a QUIC endpoint's certificate fingerprint.
type Prepared = (Vec<u16>, Option<Arc<AtomicBool>>, Option<String>);

/// Pre-flight checks and, for UDP, one bound socket per flow with a thread waiting for its
/// hello; for QUIC, the test's endpoint with a thread taking its data connections.
fn prepare(
    spec: &TestSpec,
    ctrl: &TcpStream,
    cookie: &Cookie,
    tx: &Sender<Event>,
    data: &mut DataPorts,
) -> Result<Prepared, String> {
    if spec.transport == Transport::Tcp {
        preflight(spec.window, spec.cc.as_deref(), spec.accept_capped_window, "the server")
            .map_err(|e| e.to_string())?;
        return Ok((vec![], None, None));
    }
    let local_ip = ctrl.local_addr().map_err(|e| e.to_string())?.ip();
    let cancel = Arc::new(AtomicBool::new(false));
    if spec.transport == Transport::Quic {
        let peer = ctrl.peer_addr().map_err(|e| e.to_string())?.ip();
        return prepare_quic(spec, (local_ip, peer), cookie, tx, cancel, data);
    }
    let mut ports = Vec::new();
    for id in 0..spec.connections() {
        let s = data.bind(local_ip, UdpSocket::bind).map_err(|e| format!("cannot bind a UDP port: {e}"))?;
        crate::opts::size_udp_buffers(&socket2::SockRef::from(&s), spec.window);
        if let Some(d) = spec.dscp {
            let _ = sys::set_dscp(&socket2::SockRef::from(&s), local_ip.is_ipv6(), d);
        }
        ports.push(s.local_addr().map_err(|e| e.to_string())?.port());
        let (tx, cancel, cookie) = (tx.clone(), cancel.clone(), *cookie);
        std::thread::spawn(move || {
            let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
            let mut buf = [0u8; 2048];
            let until = Instant::now() + Duration::from_secs(30);
            while !cancel.load(Ordering::Acquire) && Instant::now() < until {
                if let Ok((n, src)) = s.recv_from(&mut buf) {
                    if let Ok(h) = DataHello::decode(&buf[..n]) {
                        if h.cookie == cookie && h.stream == id && s.connect(src).is_ok() {
                            let _ = tx.send(Event::UdpAttached(id, s));
                            return;
                        }
                    }
                }
            }
        });
    }
    Ok((ports, Some(cancel), None))
}

/// An MPTCP test's listener (IPPROTO_MPTCP) on a port of its own: the main listener is
/// TCP's, and MPTCP is negotiated only with an MPTCP listener. A thread takes its data
/// connections (5 s each for the hello, `2 × connections + 4` at most, for 30 s), hands those
/// with the test's cookie to the session, and keeps the listener open for the subflows that
/// join them until the session ends.
fn prepare_mptcp(
    spec: &TestSpec,
    ctrl: &TcpStream,
    cookie: &Cookie,
    tx: &Sender<Event>,
    data: &mut DataPorts,
) -> Result<(u16, Arc<AtomicBool>), String> {
    let local = SocketAddr::new(ctrl.local_addr().map_err(|e| e.to_string())?.ip(), 0);
    let peer = canonical(ctrl.peer_addr().map_err(|e| e.to_string())?.ip());
    let s = crate::opts::stream_socket(local, true).map_err(|e| e.to_string())?;
    data.bind(local.ip(), |a| s.bind(&a.into())).map_err(|e| format!("cannot bind an MPTCP listener: {e}"))?;
    s.listen(64).map_err(|e| format!("cannot listen for MPTCP: {e}"))?;
    let listener: TcpListener = s.into();
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let cancel = Arc::new(AtomicBool::new(false));
    let (tx, stop, cookie, want) = (tx.clone(), cancel.clone(), *cookie, spec.connections() as usize);
    std::thread::Builder::new()
        .name("wanperf-mptcp-accept".into())
        .spawn(move || {
            let until = Instant::now() + Duration::from_secs(30);
            let (mut seen, mut tries) = (vec![false; want], 0);
            // The listener stays open until the session ends: MPTCP's further subflows
            // (MP_JOIN) come to it, and a closed one answers them with a reset.
            while !stop.load(Ordering::Acquire) {
                let taking = Instant::now() < until && seen.iter().any(|s| !s) && tries < 2 * want + 4;
                if !taking {
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
                if !matches!(wanperf_sys::poll_one(&listener, libc::POLLIN, 100), Ok(true)) {
                    continue;
                }
                let Ok((mut stream, from)) = listener.accept() else { continue };
                // Only the test's client: anyone else is closed before it takes a try.
                if canonical(from.ip()) != peer {
                    continue;
                }
                tries += 1;
                let _ = stream.set_nonblocking(false);
                let mut hello = [0u8; HELLO_LEN];
                if read_exact_by(&mut stream, &mut hello, Instant::now() + Duration::from_secs(5)).is_err() {
                    continue;
                }
                match DataHello::decode(&hello) {
                    Ok(h) if h.cookie == cookie && (h.stream as usize) < want && !seen[h.stream as usize] => {
                        seen[h.stream as usize] = true;
                        let _ = stream.set_read_timeout(None);
                        if tx.send(Event::Data(h.stream, stream)).is_err() {
                            return;
                        }
                    }
                    _ => {}
                }
            }
        })
        .map_err(|e| format!("cannot start a thread: {e}"))?;
    Ok((port, cancel))
}

/// A QUIC test's endpoint on a port of its own (the control port's UDP number is the ping
/// echo's), showing a certificate made for the test and accepting only the client's, whose
/// fingerprint the (signed) spec carries; a thread hands each data connection whose hello
/// carries the test's cookie to the session, for 30 s at most.
fn prepare_quic(
    spec: &TestSpec,
    (local_ip, peer): (std::net::IpAddr, std::net::IpAddr),
    cookie: &Cookie,
    tx: &Sender<Event>,
    cancel: Arc<AtomicBool>,
    data: &mut DataPorts,
) -> Result<Prepared, String> {
    let client_pin = spec.quic_cert.clone().ok_or("a QUIC test without a client certificate")?;
    let tuning = crate::client::quic_tuning(spec);
    tuning.check()?;
    let cert = wanperf_quic::TestCert::generate().map_err(|e| e.to_string())?;
    let fp = cert.fingerprint.clone();
    let s = data.bind(local_ip, bind_udp).map_err(|e| format!("cannot bind a UDP port for QUIC: {e}"))?;
    if let Some(d) = spec.dscp {
        let _ = sys::set_dscp(&socket2::SockRef::from(&s), local_ip.is_ipv6(), d);
    }
    crate::opts::size_udp_buffers(&socket2::SockRef::from(&s), Some(crate::client::quic_socket_buffer(spec)));
    let port = s.local_addr().map_err(|e| e.to_string())?.port();
    let (tx, stop, cookie, want) = (tx.clone(), cancel.clone(), *cookie, spec.connections() as usize);
    std::thread::Builder::new()
        .name("wanperf-quic-accept".into())
        .spawn(move || {
            let mut seen = vec![false; want];
            let deliver = |a: wanperf_quic::Accepted| match DataHello::decode(&a.hello) {
                Ok(h) if h.cookie == cookie && (h.stream as usize) < want && !seen[h.stream as usize] => {
                    seen[h.stream as usize] = true;
                    tx.send(Event::QuicAttached(h.stream, Box::new(a.stream))).is_ok()
                }
                _ => false,
            };
            let until = Instant::now() + Duration::from_secs(30);
            let _ = wanperf_quic::accept_streams(s, peer, &cert, &client_pin, &tuning, want, deliver, &stop, until);
        })
        .map_err(|e| format!("cannot start a thread: {e}"))?;
    Ok((vec![port], Some(cancel), Some(fp)))
}

/// A copy's server end under `root`: a receiver writing into the destination (push), or a
/// sender of the named sources (pull). Errors are the refusal's one line.
fn prepare_copy(
    cs: &wanperf_copy::spec::CopySpec,
    root: Option<&std::path::Path>,
    tx: &Sender<Event>,
) -> Result<crate::copy::Job, String> {
    use crate::copy::{Hooks, Job, RecvJob, SendJob};
    use wanperf_copy::spec::Way;
    let root = root.ok_or("this server does not take copies (start it with --root DIR)")?;
    let rootfd = crate::copy_fs::open_base(root).map_err(|e| format!("the server's --root is unusable: {e}"))?;
    let to_loop = tx.clone();
    let notify: crate::copy::Notify = Arc::new(move |ev| {
        let _ = to_loop.send(Event::Copy(ev));
    });
    match cs.way {
        Way::Push => {
            let dest = &cs.remote[0];
            // scp's rule: a destination that is not an existing directory names the single
            // source (the client said whether the rule applies; only here is it known whether
            // the destination is a directory).
            let is_dir = crate::copy_fs::open_dir(&rootfd, dest, false).is_ok();
            let (dir, name) = if cs.dest_names_source && !is_dir && !dest.is_root() {
                (dest.parent(), Some(dest.file_name().to_string()))
            } else {
                (dest.clone(), None)
            };
            let base = crate::copy_fs::open_dir(&rootfd, &dir, true).map_err(|e| format!("destination {e}"))?;
            Ok(Job::Recv(RecvJob::new(cs.clone(), base, name, notify, Hooks::from_env())))
        }
        Way::Pull => {
            let scan = crate::copy_fs::scan_root(&rootfd, &cs.remote).map_err(|e| format!("source {e}"))?;
            Ok(Job::Send(SendJob::new(cs.clone(), scan, notify, Hooks::from_env())))
        }
    }
}

fn start_side(
    spec: &TestSpec,
    conns: Vec<Option<Conn>>,
    cookie: &Cookie,
    max_rate: Option<u64>,
    notify: Arc<dyn Fn() + Send + Sync>,
    worker: Option<crate::stream::Worker>,
) -> io::Result<Side> {
    let deadline = spec.duration_s.map(|d| Instant::now() + Duration::from_secs_f64(d));
    let expected_end = spec.expected_duration_s().map(|d| Instant::now() + Duration::from_secs_f64(d));
    let mut plans = Vec::new();
    for (id, c) in conns.into_iter().enumerate() {
        let id = id as u32;
        let conn = c.ok_or_else(|| io::Error::other(format!("stream {id} never attached")))?;
        // The server's role is the opposite of the client's.
        let role = spec.client_role(id).opposite();
        if let Conn::Tcp(s) = &conn {
            let opts = SockOpts {
                window: spec.window,
                cc: spec.cc.clone(),
                dscp: spec.dscp,
                pace_bps: if role == Role::Sender { spec.sender_pace(max_rate) } else { None },
                ..Default::default()
            };
            let v6 = s.local_addr().ok().and_then(|a| a.as_socket()).is_some_and(|a| a.is_ipv6());
            opts.apply(s, v6, "the server").map_err(|e| io::Error::other(e.to_string()))?;
            let _ = s.set_nodelay(false);
        }
        plans.push((
            StreamPlan { deadline, expected_end, ..StreamPlan::new(spec, id, role, udp_token(cookie), Peer::Wanperf) },
            conn,
        ));
    }
    // QUIC's work (crypto, packets) runs on the endpoints' runtime threads, not the stream
    // threads: the process's CPU is the honest count there.
    let per_thread_cpu = spec.transport != Transport::Quic;
    Side::start_with(plans, Duration::from_secs_f64(spec.interval_s), per_thread_cpu, notify, worker)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_defaults_to_loopback() {
        let mut cfg = ServerConfig {
            limits: Limits::default(),
            timeouts: Timeouts::default(),
            allow: vec![],
            software: "t".into(),
            auth: None,
            gate: Gate::default(),
            copy_root: None,
            data_ports: None,
        };
        assert!(cfg.allowed("127.0.0.1".parse().unwrap()));
        assert!(cfg.allowed("::1".parse().unwrap()));
        assert!(cfg.allowed("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!cfg.allowed("198.18.0.2".parse().unwrap()));
        cfg.allow = vec!["198.18.0.0/15".parse().unwrap()];
        assert!(cfg.allowed("198.19.1.1".parse().unwrap()));
        assert!(!cfg.allowed("127.0.0.1".parse().unwrap()));
    }

    fn interval(t_s: f64, bytes: &[(u32, u64)]) -> wanperf_proto::msg::SideInterval {
        let streams = bytes
            .iter()
            .map(|&(id, bytes)| wanperf_proto::msg::StreamSample { id, bytes, ..Default::default() })
            .collect();
        wanperf_proto::msg::SideInterval { index: 0, t_s, last: false, streams }
    }

    #[test]
    fn the_rate_cap_holds_what_the_client_sends_over_tcp_only() {
        use wanperf_proto::msg::Direction;
        let mut up = TestSpec::tcp(2, 10.0);
        let c = RateCheck::for_test(&up, Some(8_000_000));
        assert_eq!((c.cap, c.ids.as_slice()), (Some(8_000_000), &[0, 1][..]));
        up.direction = Direction::Down;
        assert_eq!(RateCheck::for_test(&up, Some(8_000_000)).cap, None, "the server paces its own sending");
        up.direction = Direction::Bidir;
        let bidir = RateCheck::for_test(&up, Some(8_000_000));
        assert!(bidir.cap.is_some() && bidir.ids.len() == 2, "in bidir only the client's senders count: {bidir:?}");
        assert_eq!(RateCheck::for_test(&TestSpec::tcp(1, 10.0), None).cap, None);
    }

    #[test]
    fn a_client_is_cut_off_only_past_the_slack_and_over_a_long_enough_interval() {
        let mut c = RateCheck::for_test(&TestSpec::tcp(1, 10.0), Some(8_000_000));
        assert_eq!(c.check(&interval(0.0, &[(0, 0)])), None, "the first sample has nothing to compare");
        // 1.2 × the cap: within the slack.
        assert_eq!(c.check(&interval(1.0, &[(0, 1_200_000)])), None);
        // Far over the cap, but over too short an interval to judge.
        assert_eq!(c.check(&interval(1.0 + RATE_CHECK_MIN_S / 2.0, &[(0, 2_200_000)])), None);
        // 1.3 × the cap over a second: cut off, and the reason names both rates.
        let why = c.check(&interval(2.0 + RATE_CHECK_MIN_S / 2.0, &[(0, 3_500_000)])).expect("over the cap");
        assert!(why.contains("--max-rate is 8.00 Mbit/s"), "{why}");
    }

    #[test]
    fn the_log_line_of_a_finished_test_sums_each_role() {
        use wanperf_proto::msg::{SideReport, StreamFinal};
        let s = |id, role, bytes| StreamFinal { id, role: Some(role), bytes, ..Default::default() };
        let report = SideReport {
            streams: vec![
                s(0, Role::Receiver, 1_000_000),
                s(1, Role::Receiver, 1_000_000),
                s(2, Role::Sender, 500_000),
            ],
            ..Default::default()
        };
        let line = done_line(&report, 2.0);
        assert!(line.contains("received 1.91 MiB (8.00 Mbit/s)"), "{line}");
        assert!(line.contains("sent 488 KiB (2.00 Mbit/s)"), "{line}");
        assert!(done_line(&SideReport::default(), 0.0).contains("received 0 B"));
    }
}
