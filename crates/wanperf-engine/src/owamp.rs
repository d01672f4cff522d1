//! OWAMP on sockets: the client behind `wanperf ping --owamp` (against any `owampd`, or a
//! `wanperf serve --owamp-port`) and the server behind `serve --owamp-port` (for perfSONAR's
//! `owping`). Unauthenticated mode. The messages, schedules and records are
//! `wanperf_owamp`'s, pure; the test packets `wanperf_stamp`'s.

use crate::ping::DelayStats;
use crate::server::{canonical, Log};
use crate::sys;
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wanperf_owamp::control::{
    self, AcceptSession, FetchSession, Fetched, Greeting, Parsed, Record, RequestSession, ServerStart, SessionEnd,
    SetupResponse, Slot, StopSessions, ACCEPT_OK, MODE_OPEN,
};
use wanperf_owamp::receiver::{Receiver, Sender};
use wanperf_owamp::{num64_to_secs, secs_to_num64};
use wanperf_stamp::packet::{Auth, Test};
use wanperf_stamp::time::{from_wire, to_wire, ErrorEstimate, Format};
use wanperf_stats::summary::{ipdv, Summary};

/// The time now as an NTP timestamp.
fn ntp_now() -> u64 {
    to_wire(sys::realtime_ns(), Format::Ntp)
}

/// Sleeps until the NTP time `t` (or returns at once if it is past).
fn sleep_until(t: u64) {
    let want = from_wire(t, Format::Ntp).unwrap_or(0);
    let now = sys::realtime_ns();
    if want > now {
        sys::pace_until(Instant::now() + Duration::from_nanos(want - now));
    }
}

/// Reads from `s` into `buf` until `parse` has a whole message (before `deadline`).
fn read_msg<T>(
    s: &mut TcpStream,
    buf: &mut Vec<u8>,
    parse: impl Fn(&[u8]) -> Parsed<T>,
    deadline: Instant,
) -> io::Result<T> {
    loop {
        match parse(buf) {
            Ok(Some((m, used))) => {
                buf.drain(..used);
                return Ok(m);
            }
            Ok(None) => {}
            Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e.to_string())),
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "OWAMP-Control: the peer stopped answering"));
        }
        s.set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "OWAMP-Control: the peer closed the connection"));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A UDP test socket on `ip` (any port), with kernel receive stamps and TTLs, sending with
/// TTL 255 (so a receiver sees the hops) and `dscp`.
fn test_socket(ip: IpAddr, dscp: Option<u8>) -> io::Result<UdpSocket> {
    let sock = UdpSocket::bind(SocketAddr::new(ip, 0))?;
    let fd = sock.as_raw_fd();
    sys::enable_rx_timestamps(fd)?;
    let v6 = ip.is_ipv6();
    wanperf_sys::sockopt::enable_rx_ttl_tos(fd, v6)?;
    let (level, opt) = if v6 { (libc::SOL_IPV6, libc::IPV6_UNICAST_HOPS) } else { (libc::SOL_IP, libc::IP_TTL) };
    sys::setsockopt_raw(fd, level, opt, &255i32.to_ne_bytes())?;
    if let Some(d) = dscp {
        sys::set_dscp(&socket2::SockRef::from(&sock), v6, d)?;
    }
    Ok(sock)
}

/// Sends a session's packets on schedule to `to`; its end for Stop-Sessions.
fn send_session(sock: &UdpSocket, to: SocketAddr, mut s: Sender, padding: usize, stop: &AtomicBool) -> SessionEnd {
    let error = crate::stamp::local_error_estimate();
    let mut b = Vec::with_capacity(64 + padding);
    while let Some(t) = s.next_due() {
        if stop.load(Ordering::Acquire) {
            break;
        }
        sleep_until(t);
        while let Some(seq) = s.due(ntp_now()) {
            Test { seq, timestamp: ntp_now(), error, ssid: 0 }.encode(&mut b, &Auth::Open, &[], 0);
            b.resize(14 + padding, 0);
            let _ = sock.send_to(&b, to);
        }
    }
    s.end()
}

/// Receives a session's packets from `from` (its address; its port too when not 0) until the
/// session is over.
fn receive_session(sock: &UdpSocket, from: SocketAddr, mut r: Receiver, stop: &AtomicBool) -> Receiver {
    let error = crate::stamp::local_error_estimate().to_bits();
    let _ = sock.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buf = vec![0u8; 65_536];
    // A little past the last packet's timeout, for the clock's sake.
    let end = r.ends_at().saturating_add(secs_to_num64(0.2));
    while ntp_now() < end && !stop.load(Ordering::Acquire) {
        let Ok(got) = sys::recv_timestamped(sock.as_raw_fd(), &mut buf) else { continue };
        let Some(src) = got.from else { continue };
        if canonical(src.ip()) != from.ip() || (from.port() != 0 && src.port() != from.port()) {
            continue;
        }
        let at = to_wire(got.kernel_ns.unwrap_or_else(sys::realtime_ns), Format::Ntp);
        let _ = r.arrive(&buf[..got.len], at, error, got.ttl.unwrap_or(255));
    }
    r
}

/// One direction's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OneWay {
    /// Packets the sender sent (its next sequence number).
    pub sent: u64,
    /// Received in time.
    pub received: u64,
    /// Lost, percent of sent.
    pub loss_pct: f64,
    /// Extra copies.
    pub duplicates: u64,
    /// Skipped by the sender (too late to send).
    pub skipped: u64,
    /// One-way delays, ms (receive time minus send time on the two hosts' clocks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owd_ms: Option<DelayStats>,
    /// RFC 3393 delay variation of consecutive packets, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipdv_ms: Option<DelayStats>,
    /// Both clocks said they were synchronized (the S bits of the error estimates).
    pub synchronized: bool,
    /// The delays' error bound: the two stated clock errors, ms (of the first record).
    pub error_ms: f64,
    /// Hops: 255 minus the smallest TTL seen, when the sender sent with 255.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hops: Option<u8>,
}

impl OneWay {
    /// From a session's records up to `next_seq` and its skip ranges.
    pub fn of(records: &[Record], next_seq: u32, skips: &[(u32, u32)], duplicates: u64) -> OneWay {
        let recs: Vec<&Record> = records.iter().filter(|r| r.seq < next_seq).collect();
        let skipped: u64 = skips.iter().map(|(a, b)| u64::from(b.saturating_sub(*a)) + 1).sum();
        let delay = |r: &Record| (r.recv_time as f64 - r.send_time as f64) / 4_294_967_296.0 * 1e3;
        let series: Vec<Option<f64>> = recs.iter().map(|r| (!r.lost()).then(|| delay(r))).collect();
        let owd: Vec<f64> = series.iter().flatten().copied().collect();
        let stats = |v: &[f64]| Summary::of(v).map(DelayStats::from);
        let sent = u64::from(next_seq).saturating_sub(skipped);
        let received = owd.len() as u64;
        let first = recs.iter().find(|r| !r.lost());
        let ee = |bits: u16| ErrorEstimate::from_bits(bits);
        OneWay {
            sent,
            received,
            loss_pct: if sent > 0 { 100.0 * sent.saturating_sub(received) as f64 / sent as f64 } else { 0.0 },
            duplicates,
            skipped,
            owd_ms: stats(&owd),
            ipdv_ms: stats(&ipdv(&series)),
            synchronized: first.is_some_and(|r| ee(r.send_error).synchronized && ee(r.recv_error).synchronized),
            error_ms: first.map_or(0.0, |r| {
                (ee(r.send_error).seconds().unwrap_or(1.0) + ee(r.recv_error).seconds().unwrap_or(1.0)) * 1e3
            }),
            hops: recs.iter().filter(|r| !r.lost()).map(|r| r.ttl).min().map(|t| 255 - t),
        }
    }
}

/// Both directions of an OWAMP run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OwampSummary {
    /// Client → server (fetched from the server).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<OneWay>,
    /// Server → client (received here).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<OneWay>,
}

/// An OWAMP run: one session each way, `count` packets each `interval` apart (fixed), `size` octets of UDP
/// payload (at least 14), lost after `timeout`.
#[derive(Debug, Clone)]
pub struct OwampConfig {
    /// Server.
    pub host: String,
    /// Its control port.
    pub port: u16,
    /// Packets each way.
    pub count: u32,
    /// Between packets.
    pub interval: Duration,
    /// UDP payload octets (at least 14).
    pub size: usize,
    /// A packet later than this is lost.
    pub timeout: Duration,
    /// DSCP of the test packets.
    pub dscp: Option<u8>,
}

/// `ping --owamp`: a session each way with `cfg`'s packets, interval, size, timeout and DSCP,
/// printed as text or (`json`) one `end` record; whether anything came back either way.
pub fn ping(cfg: &crate::ping::PingConfig, json: bool, stop: &AtomicBool) -> io::Result<bool> {
    if cfg.count > u64::from(wanperf_owamp::receiver::MAX_PACKETS) {
        return Err(owamp_err(
            "-c",
            format!("OWAMP sessions here have at most {} packets", wanperf_owamp::receiver::MAX_PACKETS),
        ));
    }
    let c = OwampConfig {
        host: cfg.host.clone(),
        port: cfg.port,
        count: cfg.count as u32,
        interval: cfg.interval,
        size: cfg.size.max(14),
        timeout: cfg.timeout,
        dscp: cfg.dscp,
    };
    let s = run_client(&c, stop)?;
    if json {
        let complete = !stop.load(Ordering::Acquire);
        crate::console::line(format_args!("{}", serde_json::json!({"event": "end", "complete": complete, "owamp": s})));
    } else {
        for l in lines(&cfg.host, &s) {
            crate::console::line(format_args!("{l}"));
        }
    }
    Ok([&s.to, &s.from].iter().any(|w| matches!(w, Some(w) if w.received > 0)))
}

fn owamp_err(what: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("{what}: {e}"))
}

/// Runs the sessions against an OWAMP server and fetches what it received.
pub fn run_client(cfg: &OwampConfig, stop: &AtomicBool) -> io::Result<OwampSummary> {
    let addr = (cfg.host.as_str(), cfg.port)
        .to_socket_addrs()
        .map_err(|_| owamp_err("cannot resolve", &cfg.host))?
        .next()
        .ok_or_else(|| owamp_err("cannot resolve", &cfg.host))?;
    let mut c = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(|e| {
        owamp_err(
            &format!("no OWAMP server answers at {addr} (start one with `wanperf serve --owamp-port PORT` or owampd)"),
            e,
        )
    })?;
    let _ = c.set_nodelay(true);
    let step = || Instant::now() + Duration::from_secs(10);
    let mut buf = Vec::new();
    let g = read_msg(&mut c, &mut buf, Greeting::parse, step())?;
    if g.modes & MODE_OPEN == 0 {
        return Err(owamp_err("OWAMP server", format!("offers no unauthenticated mode (modes {:#x})", g.modes)));
    }
    c.write_all(&SetupResponse { mode: MODE_OPEN }.encode())?;
    let t0 = Instant::now();
    let st = read_msg(&mut c, &mut buf, ServerStart::parse, step())?;
    if st.accept != ACCEPT_OK {
        return Err(owamp_err("OWAMP server", format!("refused the connection ({})", control::accept_text(st.accept))));
    }
    let rtt = t0.elapsed().as_secs_f64();
    let local = c.local_addr()?.ip();
    let far = addr.ip();
    let slots = vec![Slot { exponential: false, param: secs_to_num64(cfg.interval.as_secs_f64()) }];
    let timeout = secs_to_num64(cfg.timeout.as_secs_f64());
    let start = ntp_now().wrapping_add(secs_to_num64(1.0 + 3.0 * rtt));
    let padding = cfg.size.saturating_sub(14) as u32;
    let type_p = cfg.dscp.map_or(0, |d| u32::from(d) << 24);
    let base = RequestSession {
        conf_sender: false,
        conf_receiver: false,
        packets: cfg.count,
        sender: (local, 0),
        receiver: (far, 0),
        sid: [0; 16],
        padding,
        start_time: start,
        timeout,
        type_p,
        slots,
    };
    // The session the server receives.
    let to = {
        let sock = test_socket(local, cfg.dscp)?;
        let req = RequestSession { conf_receiver: true, sender: (local, sock.local_addr()?.port()), ..base.clone() };
        c.write_all(&req.encode())?;
        let a = read_msg(&mut c, &mut buf, AcceptSession::parse, step())?;
        if a.accept != ACCEPT_OK {
            return Err(owamp_err(
                "OWAMP server",
                format!("refused the session to it ({})", control::accept_text(a.accept)),
            ));
        }
        let req = RequestSession { sid: a.sid, ..req };
        (sock, SocketAddr::new(far, a.port), req)
    };
    // The session the server sends.
    let from = {
        let sock = test_socket(local, None)?;
        let mut sid = [0u8; 16];
        let _ = getrandom::fill(&mut sid);
        let req = RequestSession {
            conf_sender: true,
            sender: (far, 0),
            receiver: (local, sock.local_addr()?.port()),
            sid,
            ..base.clone()
        };
        c.write_all(&req.encode())?;
        let a = read_msg(&mut c, &mut buf, AcceptSession::parse, step())?;
        if a.accept != ACCEPT_OK {
            return Err(owamp_err(
                "OWAMP server",
                format!("refused the session from it ({})", control::accept_text(a.accept)),
            ));
        }
        (sock, SocketAddr::new(far, a.port), req)
    };
    c.write_all(&control::start_sessions())?;
    let ack = read_msg(&mut c, &mut buf, control::parse_ack, step())?;
    if ack != ACCEPT_OK {
        return Err(owamp_err("OWAMP server", format!("did not start the sessions ({})", control::accept_text(ack))));
    }
    let (to_sock, to_dest, to_req) = &to;
    let (from_sock, from_src, from_req) = &from;
    let (sent_end, received) = std::thread::scope(|sc| {
        let s = Sender::new(to_req).expect("bounded count");
        let tx = sc.spawn(move || send_session(to_sock, *to_dest, s, padding as usize, stop));
        let r = Receiver::new(from_req).expect("bounded count");
        let rx = sc.spawn(move || receive_session(from_sock, *from_src, r, stop));
        (tx.join().ok(), rx.join().ok())
    });
    // Stop-Sessions both ways: ours (what we sent), then the server's (what it sent).
    let ours = StopSessions {
        accept: if stop.load(Ordering::Acquire) { 1 } else { 0 },
        sessions: sent_end.clone().into_iter().collect(),
    };
    c.write_all(&ours.encode())?;
    let wait = Instant::now() + cfg.timeout + Duration::from_secs(15);
    let theirs = read_msg(&mut c, &mut buf, StopSessions::parse, wait)?;
    let mut summary = OwampSummary { to: None, from: None };
    if let Some(end) = &sent_end {
        c.write_all(&FetchSession { begin: 0, end: u32::MAX, sid: to_req.sid }.encode())?;
        let f = read_msg(&mut c, &mut buf, Fetched::parse, Instant::now() + Duration::from_secs(60))?;
        if f.accept != ACCEPT_OK {
            return Err(owamp_err(
                "OWAMP server",
                format!("did not give its records ({})", control::accept_text(f.accept)),
            ));
        }
        summary.to = Some(OneWay::of(&f.records, end.next_seq, &end.skips, 0));
    }
    if let Some(r) = &received {
        let end = theirs.sessions.iter().find(|e| e.sid == from_req.sid);
        let next = end.map_or(cfg.count, |e| e.next_seq);
        let skips = end.map_or(&[][..], |e| &e.skips[..]);
        summary.from = Some(OneWay::of(&r.records(Some(next)), next, skips, r.duplicates));
    }
    Ok(summary)
}

/// Bounds of the server: control connections at once, sessions per connection, a session's
/// packets, its shortest gap, its longest timeout, how far ahead it may start.
const MAX_CONNECTIONS: usize = 16;
const MAX_SESSIONS: usize = 8;
const MAX_SESSION_PACKETS: u32 = 100_000;
const MIN_GAP_S: f64 = 0.000_1;
const MAX_TIMEOUT_S: f64 = 60.0;
const MAX_START_AHEAD_S: f64 = 300.0;
const MAX_PADDING: u32 = 9_000;

/// Why a session request is refused (Accept 3), if it is.
fn refuse(req: &RequestSession, peer: IpAddr) -> Option<String> {
    if req.conf_sender == req.conf_receiver {
        return Some("a session is sent or received by the server, not both or neither".into());
    }
    if req.packets == 0 || req.packets > MAX_SESSION_PACKETS {
        return Some(format!("{} packets (1 to {MAX_SESSION_PACKETS})", req.packets));
    }
    if req.slots.iter().any(|s| num64_to_secs(s.param) < MIN_GAP_S) {
        return Some("a schedule slot under 0.1 ms".into());
    }
    if num64_to_secs(req.timeout) > MAX_TIMEOUT_S || req.padding > MAX_PADDING {
        return Some("a timeout over 60 s or padding over 9000 octets".into());
    }
    let ahead = num64_to_secs(req.start_time.wrapping_sub(ntp_now()));
    if ahead > MAX_START_AHEAD_S && ahead < 4e9 {
        return Some("a start more than 5 minutes ahead".into());
    }
    // The open mode sends only to the client itself (no reflection to a third party).
    if req.conf_sender && canonical(req.receiver.0) != canonical(peer) {
        return Some("the receiver is not the client".into());
    }
    if req.conf_receiver && canonical(req.sender.0) != canonical(peer) {
        return Some("the sender is not the client".into());
    }
    None
}

enum Role {
    Send { sock: UdpSocket, to: SocketAddr },
    Receive { sock: UdpSocket, from: SocketAddr },
}

struct Session {
    req: RequestSession,
    role: Role,
}

/// One client's control connection, to its end.
fn serve_client(mut c: TcpStream, allowed: &dyn Fn(IpAddr) -> bool, stop: &AtomicBool, log: &Log) -> io::Result<()> {
    let peer = c.peer_addr()?;
    let local = c.local_addr()?.ip();
    let _ = c.set_nodelay(true);
    let mut challenge = [0u8; 16];
    let mut salt = [0u8; 16];
    let _ = getrandom::fill(&mut challenge);
    let _ = getrandom::fill(&mut salt);
    c.write_all(&Greeting { modes: MODE_OPEN, challenge, salt, count: 1024 }.encode())?;
    let mut buf = Vec::new();
    let step = Duration::from_secs(10);
    let setup = read_msg(&mut c, &mut buf, SetupResponse::parse, Instant::now() + step)?;
    if setup.mode != MODE_OPEN {
        return Ok(());
    }
    let ok = allowed(peer.ip());
    let started = to_wire(sys::realtime_ns(), Format::Ntp);
    c.write_all(
        &ServerStart { accept: if ok { ACCEPT_OK } else { control::ACCEPT_FAILURE }, start_time: started }.encode(),
    )?;
    if !ok {
        log(&format!("owamp: {} not allowed", peer.ip()));
        return Ok(());
    }
    let mut sessions: Vec<Session> = Vec::new();
    let mut finished: Vec<(RequestSession, Receiver, SessionEnd)> = Vec::new();
    let idle = Duration::from_secs(120);
    loop {
        if stop.load(Ordering::Acquire) {
            return Ok(());
        }
        // Wait for a command's first octet.
        if buf.is_empty() {
            let mut one = [0u8; 4096];
            c.set_read_timeout(Some(idle))?;
            let n = c.read(&mut one)?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&one[..n]);
        }
        match buf[0] {
            control::command::REQUEST_SESSION => {
                let req = read_msg(&mut c, &mut buf, RequestSession::parse, Instant::now() + step)?;
                let why = refuse(&req, peer.ip())
                    .or_else(|| (sessions.len() >= MAX_SESSIONS).then(|| "too many sessions".into()));
                if let Some(why) = why {
                    log(&format!("owamp: a session from {} refused: {why}", peer.ip()));
                    c.write_all(
                        &AcceptSession { accept: control::ACCEPT_UNSUPPORTED, port: 0, sid: [0; 16] }.encode(),
                    )?;
                    continue;
                }
                let sock = test_socket(local, (req.type_p >> 24 != 0).then_some((req.type_p >> 24) as u8 & 0x3f))?;
                let port = sock.local_addr()?.port();
                let (req, role) = if req.conf_receiver {
                    // The receiver names the session: its address's last octets, the time, chance.
                    let mut sid = [0u8; 16];
                    let ip = match local {
                        IpAddr::V4(a) => a.octets().to_vec(),
                        IpAddr::V6(a) => a.octets()[12..].to_vec(),
                    };
                    sid[..4].copy_from_slice(&ip[ip.len() - 4..]);
                    sid[4..12].copy_from_slice(&ntp_now().to_be_bytes());
                    let _ = getrandom::fill(&mut sid[12..]);
                    let from = SocketAddr::new(req.sender.0, req.sender.1);
                    (RequestSession { sid, receiver: (local, port), ..req }, Role::Receive { sock, from })
                } else {
                    let to = SocketAddr::new(req.receiver.0, req.receiver.1);
                    (RequestSession { sender: (local, port), ..req }, Role::Send { sock, to })
                };
                c.write_all(&AcceptSession { accept: ACCEPT_OK, port, sid: req.sid }.encode())?;
                sessions.push(Session { req, role });
            }
            control::command::START_SESSIONS => {
                read_msg(&mut c, &mut buf, |b| Ok((b.len() >= 32).then_some(((), 32))), Instant::now() + step)?;
                c.write_all(&control::ack(ACCEPT_OK))?;
                let run = std::mem::take(&mut sessions);
                let (ends, received) = run_sessions(&run, stop);
                // The client's Stop-Sessions: what it sent (the sessions it received here end
                // at its next sequence number).
                let wait = Instant::now() + Duration::from_secs(30);
                let theirs = read_msg(&mut c, &mut buf, StopSessions::parse, wait)?;
                c.write_all(&StopSessions { accept: ACCEPT_OK, sessions: ends }.encode())?;
                for (req, r) in received {
                    let end = theirs.sessions.iter().find(|e| e.sid == req.sid).cloned().unwrap_or(SessionEnd {
                        sid: req.sid,
                        next_seq: req.packets,
                        skips: vec![],
                    });
                    finished.push((req, r, end));
                }
            }
            control::command::FETCH_SESSION => {
                let f = read_msg(&mut c, &mut buf, FetchSession::parse, Instant::now() + step)?;
                let answer = match finished.iter().find(|(req, _, _)| req.sid == f.sid) {
                    Some((req, r, end)) => {
                        let records: Vec<Record> = r
                            .records(Some(end.next_seq))
                            .into_iter()
                            .filter(|x| x.seq >= f.begin && x.seq <= f.end)
                            .collect();
                        Fetched {
                            accept: ACCEPT_OK,
                            finished: true,
                            next_seq: end.next_seq,
                            request: Some(req.clone()),
                            skips: end.skips.clone(),
                            records,
                        }
                    }
                    None => Fetched {
                        accept: control::ACCEPT_FAILURE,
                        finished: false,
                        next_seq: 0,
                        request: None,
                        skips: vec![],
                        records: vec![],
                    },
                };
                c.write_all(&answer.encode())?;
            }
            other => {
                log(&format!("owamp: {} sent command {other}; closing", peer.ip()));
                return Ok(());
            }
        }
    }
}

/// Runs a connection's sessions to their ends: what each sent session sent, and each received
/// session's records.
fn run_sessions(run: &[Session], stop: &AtomicBool) -> (Vec<SessionEnd>, Vec<(RequestSession, Receiver)>) {
    std::thread::scope(|sc| {
        let handles: Vec<_> = run
            .iter()
            .map(|s| {
                let req = &s.req;
                match &s.role {
                    Role::Send { sock, to } => {
                        let tx = Sender::new(req).expect("bounded");
                        let pad = req.padding as usize;
                        sc.spawn(move || (Some(send_session(sock, *to, tx, pad, stop)), None))
                    }
                    Role::Receive { sock, from } => {
                        let rx = Receiver::new(req).expect("bounded");
                        sc.spawn(move || (None, Some((req.clone(), receive_session(sock, *from, rx, stop)))))
                    }
                }
            })
            .collect();
        let mut ends = vec![];
        let mut received = vec![];
        for h in handles {
            if let Ok((e, r)) = h.join() {
                ends.extend(e);
                received.extend(r);
            }
        }
        (ends, received)
    })
}

/// Serves OWAMP clients on `listener` until `stop`; those `allowed` refuses are told so.
pub fn serve(
    listener: TcpListener,
    allowed: Arc<dyn Fn(IpAddr) -> bool + Send + Sync>,
    stop: Arc<AtomicBool>,
    log: Log,
) {
    let _ = listener.set_nonblocking(true);
    let active = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::Acquire) {
        match listener.accept() {
            Ok((c, _)) => {
                if active.load(Ordering::Acquire) >= MAX_CONNECTIONS {
                    continue;
                }
                let _ = c.set_nonblocking(false);
                active.fetch_add(1, Ordering::AcqRel);
                let (a, s, l, n) = (allowed.clone(), stop.clone(), log.clone(), active.clone());
                std::thread::spawn(move || {
                    if let Err(e) = serve_client(c, &*a, &s, &l) {
                        l(&format!("owamp: {e}"));
                    }
                    n.fetch_sub(1, Ordering::AcqRel);
                });
            }
            Err(_) => {
                let _ = wanperf_sys::poll_one(&listener, libc::POLLIN, 100);
            }
        }
    }
}

/// `ping --owamp`'s lines: per direction, the counts, the one-way delays and the clocks.
pub fn lines(host: &str, s: &OwampSummary) -> Vec<String> {
    let mut out = vec![];
    for (dir, w) in [("to", &s.to), ("from", &s.from)] {
        let Some(w) = w else { continue };
        out.push(format!(
            "--- {dir} {host}: {} sent, {} received, {:.1} % loss, {} duplicates{}",
            w.sent,
            w.received,
            w.loss_pct,
            w.duplicates,
            if w.skipped > 0 { format!(", {} skipped by the sender", w.skipped) } else { String::new() }
        ));
        if let Some(d) = &w.owd_ms {
            out.push(format!(
                "one-way ms: min {:.3} / median {:.3} / max {:.3} / p95 {:.3}; ipdv iqr {:.3} ms",
                d.min,
                d.median,
                d.max,
                d.p95,
                w.ipdv_ms.as_ref().map_or(0.0, |x| x.iqr)
            ));
        }
        out.push(format!(
            "clocks: {}, ± {:.3} ms{}",
            if w.synchronized { "both synchronized" } else { "not both synchronized" },
            w.error_ms,
            w.hops.map_or(String::new(), |h| format!("; {h} hops"))
        ));
    }
    out
}
