//! `wanperf tput --iperf3`: a test against an iperf3 server, measured by wanperf's own stream
//! workers. The control exchange follows iperf3's (docs/protocol.md, "iperf3"); the bytes and
//! their meaning come from [`wanperf_iperf3`]. What only the far end knows (bytes it
//! received, UDP loss and jitter, its CPU and retransmits) comes from its results at the end.

use crate::client::{connect_control, connect_tcp, preflight_warnings, ClientConfig, ClientError, Sink};

const NO_IPERF3: &str = "no iperf3 server listens there (give its port with -p)";
use crate::opts::{capped_note, SockOpts};
use crate::stream::{Conn, Peer, Side, StreamPlan};
use crate::sys;
use socket2::Socket;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use wanperf_iperf3::auth::{self, Padding};
use wanperf_iperf3::results::{Baseline, End};
use wanperf_iperf3::wire::{self, State, COOKIE_LEN, MAX_RESULTS_LEN, UDP_CONNECT_MSG};
use wanperf_iperf3::{errors, Params, Results};
use wanperf_proto::msg::{Direction, HostCapture, Role, SideReport, TestSpec, Transport};
use wanperf_proto::record::{summarize, ConnectionInfo, EndRecord, Merger, Only, StartRecord, Way, SCHEMA};

/// Credentials for an iperf3 server started with `--rsa-private-key-path` and
/// `--authorized-users-path`.
#[derive(Debug, Clone)]
pub struct Iperf3Auth {
    /// User name.
    pub user: String,
    /// Password.
    pub password: String,
    /// The server's RSA public key.
    pub key: auth::PublicKey,
    /// Padding; `None` tries OAEP (3.17 and later) and then PKCS#1 v1.5 (older servers).
    pub padding: Option<Padding>,
}

impl Iperf3Auth {
    /// `user`'s credentials as iperf3 reads them: the password from $IPERF3_PASSWORD, the
    /// server's RSA public key from `key_path` (PEM).
    pub fn load(user: &str, key_path: &std::path::Path, padding: Option<Padding>) -> Result<Self, Iperf3AuthError> {
        let password = std::env::var("IPERF3_PASSWORD").map_err(|_| Iperf3AuthError::NoPassword)?;
        let pem = std::fs::read_to_string(key_path)
            .map_err(|e| Iperf3AuthError::Key(format!("cannot read {}: {e}", key_path.display())))?;
        let key = auth::public_key(&pem).map_err(|e| Iperf3AuthError::Key(format!("{}: {e}", key_path.display())))?;
        Ok(Iperf3Auth { user: user.to_string(), password, key, padding })
    }
}

/// Why iperf3 credentials could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum Iperf3AuthError {
    /// No $IPERF3_PASSWORD.
    #[error("--username needs the password in $IPERF3_PASSWORD (as iperf3 reads it)")]
    NoPassword,
    /// The key file is missing or no RSA public key.
    #[error("{0}")]
    Key(String),
}

/// Runs one test against an iperf3 server. Records go to `sink` as for a wanperf server; the
/// start record says the far end is iperf3 and that it reports no intervals.
pub fn run(
    cfg: &ClientConfig,
    creds: Option<&Iperf3Auth>,
    sink: &mut dyn Sink,
    interrupt: &AtomicBool,
) -> Result<EndRecord, ClientError> {
    if cfg.spec.transport == Transport::Quic {
        return Err(ClientError::Usage("iperf3's protocol has no QUIC: --quic needs a wanperf server".into()));
    }
    let first = creds.map(|c| c.padding.unwrap_or(Padding::Oaep));
    match attempt(cfg, creds, first, sink, interrupt) {
        // A server before 3.17 cannot read OAEP: try the old padding once.
        Err(Attempt::AuthFailed(msg)) => match creds {
            Some(c) if c.padding.is_none() => {
                // iperf3's server closes its listening socket while it cleans up the refused
                // test and opens it again: a refused connection in that window is retried
                // for up to 2 s.
                let until = Instant::now() + Duration::from_secs(2);
                loop {
                    match attempt(cfg, creds, Some(Padding::Pkcs1), sink, interrupt) {
                        Err(Attempt::Other(ClientError::Connect(_)))
                            if Instant::now() < until && !interrupt.load(std::sync::atomic::Ordering::Acquire) =>
                        {
                            std::thread::sleep(Duration::from_millis(50));
                        }
                        r => {
                            break r.map_err(|e| match e {
                                Attempt::AuthFailed(m) => {
                                    ClientError::Refused(format!("{m} (tried OAEP and PKCS#1 v1.5 padding)"))
                                }
                                Attempt::Other(e) => e,
                            })
                        }
                    }
                }
            }
            _ => Err(ClientError::Refused(msg)),
        },
        Err(Attempt::Other(e)) => Err(e),
        Ok(end) => Ok(end),
    }
}

enum Attempt {
    AuthFailed(String),
    Other(ClientError),
}

impl From<ClientError> for Attempt {
    fn from(e: ClientError) -> Self {
        Attempt::Other(e)
    }
}

/// The control connection with the address it reaches, for messages.
struct Ctrl {
    s: TcpStream,
    peer: SocketAddr,
    timeout: Duration,
}

impl Ctrl {
    fn read_exact(&mut self, buf: &mut [u8], what: &str) -> Result<(), ClientError> {
        self.read_exact_or(buf, what, |peer| {
            format!("{peer} closed the control connection while wanperf waited for {what}")
        })
    }

    /// Reads `buf` whole; `closed` words a connection closed or reset on the way.
    fn read_exact_or(
        &mut self,
        buf: &mut [u8],
        what: &str,
        closed: impl Fn(SocketAddr) -> String,
    ) -> Result<(), ClientError> {
        self.s.set_read_timeout(Some(self.timeout)).map_err(|e| ClientError::Connect(e.to_string()))?;
        self.s.read_exact(buf).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset => ClientError::Connect(closed(self.peer)),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => ClientError::Connect(format!(
                "no {what} from {} within {} s: is it an iperf3 server (try without --iperf3 for a wanperf server)?",
                self.peer,
                self.timeout.as_secs_f64()
            )),
            _ => ClientError::Connect(format!("control connection to {}: {e}", self.peer)),
        })
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), ClientError> {
        self.s.write_all(bytes).map_err(|e| ClientError::Connect(format!("control connection to {}: {e}", self.peer)))
    }

    /// Reads a state byte; busy and error answers become errors.
    fn state(&mut self, what: &str) -> Result<State, Attempt> {
        let mut b = [0u8; 1];
        self.read_exact(&mut b, what)?;
        self.decode(b[0])
    }

    fn decode(&mut self, b: u8) -> Result<State, Attempt> {
        match State::from_byte(b) {
            Some(State::AccessDenied) => Err(Attempt::Other(ClientError::Refused(
                errors::server_error_text(errors::ACCESS_DENIED, 0) + &format!(" ({})", self.peer),
            ))),
            Some(State::ServerError) => {
                let mut codes = [0u8; 8];
                if self.read_exact(&mut codes, "the server's error code").is_err() {
                    // iperf3 3.12 closes without the codes when a client sends no credentials
                    // to a server that requires them.
                    return Err(Attempt::AuthFailed(format!(
                        "the iperf3 server at {} refused the test without saying why; it may require \
                         authentication (--username, $IPERF3_PASSWORD, --rsa-public-key-path)",
                        self.peer
                    )));
                }
                let (code, errno) = wire::server_error_codes(codes);
                let text = errors::server_error_text(code, errno);
                if code == errors::AUTH_TEST {
                    Err(Attempt::AuthFailed(text))
                } else {
                    Err(Attempt::Other(ClientError::Refused(text)))
                }
            }
            Some(State::ServerTerminate) => Err(Attempt::Other(ClientError::Refused("the iperf3 server terminated".into()))),
            Some(s) => Ok(s),
            None => Err(Attempt::Other(ClientError::Connect(format!(
                "{} does not speak iperf3's protocol (it sent byte 0x{b:02x}{}); is it a wanperf server (drop --iperf3) or another service?",
                self.peer,
                if b.is_ascii_graphic() { format!(" '{}'", b as char) } else { String::new() }
            )))),
        }
    }

    fn expect(&mut self, want: State, what: &str) -> Result<(), Attempt> {
        let got = self.state(what)?;
        if got != want {
            return Err(self.unexpected(got, want).into());
        }
        Ok(())
    }

    fn unexpected(&self, got: State, want: State) -> ClientError {
        ClientError::Connect(format!("{} sent {got:?} where iperf3's protocol has {want:?}", self.peer))
    }

    fn json<T: serde::de::DeserializeOwned>(&mut self, max: usize, what: &str) -> Result<T, ClientError> {
        let mut h = [0u8; 4];
        self.read_exact(&mut h, what)?;
        let len = wire::json_len(h, max).map_err(|e| ClientError::Connect(format!("{}: {e}", self.peer)))?;
        let mut body = vec![0u8; len];
        self.read_exact(&mut body, what)?;
        wire::parse_json(&body).map_err(|e| ClientError::Connect(format!("{}: {e}", self.peer)))
    }
}

fn unix_now() -> f64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

fn attempt(
    cfg: &ClientConfig,
    creds: Option<&Iperf3Auth>,
    padding: Option<Padding>,
    sink: &mut dyn Sink,
    interrupt: &AtomicBool,
) -> Result<EndRecord, Attempt> {
    let spec = cfg.spec.clone();
    spec.validate().map_err(ClientError::from)?;
    let mut params = Params::from_spec(&spec, &cfg.software).map_err(|e| ClientError::Usage(e.to_string()))?;
    if let (Some(c), Some(p)) = (creds, padding) {
        let mut rng = auth::OsRng;
        let tok = auth::authtoken(&mut rng, &c.key, &c.user, &c.password, unix_now() as i64, p)
            .map_err(|e| ClientError::Usage(e.to_string()))?;
        params.authtoken = Some(tok);
    }
    let mut warnings = preflight_warnings(&spec)?;
    let (s, server) = connect_control(cfg, NO_IPERF3)?;
    let mut ctrl = Ctrl { s, peer: server, timeout: cfg.timeout };

    let mut random = [0u8; 36];
    getrandom::fill(&mut random).map_err(|e| ClientError::Connect(format!("no randomness for the cookie: {e}")))?;
    let cookie = wire::make_cookie(&random);
    ctrl.write(&cookie)?;
    // An iperf3 server answers the cookie with one state byte; anything that closes instead
    // (a wanperf server resets the connection) is not one.
    let mut first = [0u8; 1];
    ctrl.read_exact_or(&mut first, "the server's first answer", |peer| {
        format!(
            "{peer} does not speak iperf3's protocol (it closed the connection at the first step); is it a \
             wanperf server (drop --iperf3) or another service?"
        )
    })?;
    let got = ctrl.decode(first[0])?;
    if got != State::ParamExchange {
        return Err(ctrl.unexpected(got, State::ParamExchange).into());
    }
    ctrl.write(&wire::json_frame(&params))?;
    ctrl.expect(State::CreateStreams, "the request to open the streams")?;
    let (conns, infos) = open_streams(cfg, &spec, server, &cookie, params.counters64())?;
    for c in &infos {
        if let (Some(w), Some(s), Some(r)) = (spec.window, c.sndbuf, c.rcvbuf) {
            if let Some(n) = capped_note(w, (s, r)) {
                if !warnings.contains(&n) {
                    warnings.push(n);
                }
            }
        }
    }
    ctrl.expect(State::TestStart, "the start of the test")?;
    ctrl.expect(State::TestRunning, "the start of the test")?;
    sink.start(&StartRecord {
        event: "start".into(),
        schema: SCHEMA.into(),
        version: cfg.software.clone(),
        timestamp: unix_now(),
        server: if cfg.host.contains(':') {
            format!("[{}]:{}", cfg.host, cfg.port)
        } else {
            format!("{}:{}", cfg.host, cfg.port)
        },
        test: spec.clone(),
        server_version: "iperf3".into(),
        client_host: sys::host_capture(Some(server.ip())),
        server_host: HostCapture::default(),
        connections: infos,
        warnings,
        one_ended: true,
    });
    let outcome = measure(&mut ctrl, &spec, conns, sink, interrupt);
    let _ = ctrl.s.shutdown(Shutdown::Both);
    outcome.map_err(Attempt::Other)
}

/// The data connections with their plans, and what the start record says of them.
type Opened = (Vec<(StreamPlan, Conn)>, Vec<ConnectionInfo>);

fn open_streams(
    cfg: &ClientConfig,
    spec: &TestSpec,
    server: SocketAddr,
    cookie: &[u8; COOKIE_LEN],
    counters64: bool,
) -> Result<Opened, ClientError> {
    let mut conns = Vec::new();
    let mut infos = Vec::new();
    for id in 0..spec.connections() {
        let role = spec.client_role(id);
        let mut plan = StreamPlan::new(spec, id, role, 0, Peer::Iperf3 { counters64 });
        plan.drop_every = if role == Role::Sender { cfg.drop_every } else { None };
        match spec.transport {
            Transport::Quic => {
                return Err(ClientError::Usage("iperf3's protocol has no QUIC: --quic needs a wanperf server".into()))
            }
            Transport::Tcp => {
                let opts = SockOpts {
                    window: spec.window,
                    cc: spec.cc.clone(),
                    dscp: spec.dscp,
                    bind: cfg.bind,
                    bind_dev: cfg.bind_dev.clone(),
                    pace_bps: if role == Role::Sender { spec.per_stream_rate() } else { None },
                    mptcp: false,
                };
                let mut s: Socket = connect_tcp(server, &opts, cfg.timeout, NO_IPERF3)?;
                s.write_all(cookie).map_err(|e| ClientError::Connect(format!("data connection {id}: {e}")))?;
                infos.push(ConnectionInfo {
                    id,
                    direction: Way::of(spec, id),
                    local: s.local_addr().ok().and_then(|a| a.as_socket()).map_or_else(String::new, |a| a.to_string()),
                    remote: server.to_string(),
                    sndbuf: s.send_buffer_size().ok().map(|v| v as u64),
                    rcvbuf: s.recv_buffer_size().ok().map(|v| v as u64),
                });
                conns.push((plan, Conn::Tcp(s)));
            }
            Transport::Udp => {
                let s = udp_connect(cfg, spec, server, id)?;
                let r = socket2::SockRef::from(&s);
                infos.push(ConnectionInfo {
                    id,
                    direction: Way::of(spec, id),
                    local: s.local_addr().map_or_else(|_| String::new(), |a| a.to_string()),
                    remote: server.to_string(),
                    sndbuf: r.send_buffer_size().ok().map(|v| v as u64),
                    rcvbuf: r.recv_buffer_size().ok().map(|v| v as u64),
                });
                conns.push((plan, Conn::Udp(s)));
            }
        }
    }
    Ok((conns, infos))
}

/// Opens one UDP flow: a socket connected to the server's port, the connect datagram, and
/// the server's reply (a reverse test's first data may arrive before it).
fn udp_connect(cfg: &ClientConfig, spec: &TestSpec, server: SocketAddr, id: u32) -> Result<UdpSocket, ClientError> {
    let local = cfg.bind.unwrap_or(if server.is_ipv6() { IpAddr::from([0u16; 8]) } else { IpAddr::from([0u8; 4]) });
    let s = UdpSocket::bind(SocketAddr::new(local, 0))
        .map_err(|e| ClientError::Connect(format!("cannot bind a UDP socket: {e}")))?;
    let r = socket2::SockRef::from(&s);
    if let Some(dev) = &cfg.bind_dev {
        r.bind_device(Some(dev.as_bytes())).map_err(|err| crate::opts::OptError::BindDev { dev: dev.clone(), err })?;
    }
    crate::opts::size_udp_buffers(&r, spec.window);
    if let Some(d) = spec.dscp {
        let _ = sys::set_dscp(&r, server.is_ipv6(), d);
    }
    s.connect(server).map_err(|e| ClientError::Connect(format!("UDP flow {id}: {e}")))?;
    let give_up = Instant::now() + cfg.timeout;
    let mut buf = vec![0u8; 65_536];
    let mut last_send = None::<Instant>;
    loop {
        let now = Instant::now();
        if now >= give_up {
            return Err(ClientError::Connect(format!(
                "UDP flow {id}: no answer from {server} within {} s (UDP blocked on the way?)",
                cfg.timeout.as_secs_f64()
            )));
        }
        // The datagram may be lost: repeat it every 500 ms.
        if last_send.is_none_or(|t| now - t >= Duration::from_millis(500)) {
            s.send(&UDP_CONNECT_MSG).map_err(|e| ClientError::Connect(format!("UDP flow {id}: {e}")))?;
            last_send = Some(now);
        }
        let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
        match s.recv(&mut buf) {
            Ok(n) if wire::is_connect_reply(&buf[..n]) => return Ok(s),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                return Err(ClientError::Connect(format!("UDP flow {id}: {server} refused UDP ({e})")))
            }
            Err(e) => return Err(ClientError::Connect(format!("UDP flow {id}: {e}"))),
        }
    }
}

fn measure(
    ctrl: &mut Ctrl,
    spec: &TestSpec,
    conns: Vec<(StreamPlan, Conn)>,
    sink: &mut dyn Sink,
    interrupt: &AtomicBool,
) -> Result<EndRecord, ClientError> {
    let mut conns = conns;
    let start = Instant::now();
    let deadline = spec.duration_s.map(|d| start + Duration::from_secs_f64(d));
    for (plan, _) in &mut conns {
        plan.deadline = deadline;
        plan.expected_end = deadline;
    }
    let mut side = Side::start(conns, Duration::from_secs_f64(spec.interval_s), false, Arc::new(|| {}))
        .map_err(|e| ClientError::Connect(format!("cannot start the streams: {e}")))?;
    let mut merger = Merger::one_ended(spec.clone(), Only::Local);
    let mut failure: Option<String> = None;
    let by_bytes = spec.bytes.filter(|_| spec.duration_s.is_none());
    let receives = spec.direction != Direction::Up;
    // Ending on bytes received needs a close watch; otherwise the interval clock and 100 ms.
    let poll_cap = if by_bytes.is_some() && receives { Duration::from_millis(1) } else { Duration::from_millis(100) };
    loop {
        if let Some(iv) = side.tick(Instant::now()) {
            merger.push_local(iv);
        }
        while let Some(rec) = merger.poll() {
            sink.interval(&rec);
        }
        if interrupt.load(Ordering::Acquire) {
            failure = Some("interrupted by the user".into());
            let _ = ctrl.s.write_all(&[State::ClientTerminate.byte()]);
            break;
        }
        let now = Instant::now();
        let done = match (deadline, by_bytes) {
            (Some(d), _) => now >= d,
            (None, Some(n)) => {
                let (sent, received) = side.moved();
                sent >= n || received >= n || (!receives && side.all_done())
            }
            (None, None) => true,
        };
        if done {
            break;
        }
        if side.all_done() {
            failure = Some("every data stream ended before the test did (the server closed them)".into());
            break;
        }
        // Anything the server says during the test is an error or its end.
        let wait = crate::stream::wait_before(deadline, Some(&side)).min(poll_cap).max(Duration::from_micros(200));
        let _ = ctrl.s.set_read_timeout(Some(wait));
        let mut b = [0u8; 1];
        match ctrl.s.read(&mut b) {
            Ok(0) => {
                failure = Some(format!("{} closed the control connection during the test", ctrl.peer));
                break;
            }
            Ok(_) => {
                failure = Some(match ctrl.decode(b[0]) {
                    Err(Attempt::AuthFailed(m)) => m,
                    Err(Attempt::Other(e)) => e.to_string(),
                    Ok(s) => format!("{} sent {s:?} during the test", ctrl.peer),
                });
                break;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => {
                failure = Some(format!("control connection to {}: {e}", ctrl.peer));
                break;
            }
        }
    }
    let mut server_results: Option<Results> = None;
    if failure.is_none() {
        side.stop();
        if let Err(e) = ctrl.write(&[State::TestEnd.byte()]) {
            failure = Some(e.to_string());
        }
    }
    let (last, report) = side.finish(Duration::from_secs(2));
    merger.push_local(last);
    if failure.is_none() {
        match exchange(ctrl, spec, &merger, &report) {
            Ok(r) => server_results = Some(r),
            Err(e) => failure = Some(e.to_string()),
        }
    }
    while let Some(rec) = merger.poll() {
        sink.interval(&rec);
    }
    for rec in merger.flush() {
        sink.interval(&rec);
    }
    let server_report: Option<SideReport> = match server_results.as_ref().map(|r| r.to_report(spec, End::Server)) {
        Some(Ok(r)) => Some(r),
        Some(Err(e)) => {
            failure.get_or_insert(e);
            None
        }
        None => None,
    };
    let summary = summarize(spec, &merger, &report, server_report.as_ref());
    let server_version = server_results.as_ref().map(|r| {
        let v =
            r.server_version().unwrap_or_else(|| "iperf3 (version not reported: the server runs without -J)".into());
        match r.server_system() {
            Some(sys) => format!("{v}, {sys}"),
            None => v,
        }
    });
    let complete = failure.is_none();
    let end = EndRecord { event: "end".into(), complete, error: failure.clone(), summary, server_version };
    sink.end(&end);
    match failure {
        None => Ok(end),
        Some(f) => Err(ClientError::Incomplete(f)),
    }
}

/// Results, client first; then the server's `DisplayResults`, and our goodbye.
fn exchange(ctrl: &mut Ctrl, spec: &TestSpec, merger: &Merger, report: &SideReport) -> Result<Results, ClientError> {
    let flatten = |r: Result<State, Attempt>| match r {
        Ok(s) => Ok(s),
        Err(Attempt::AuthFailed(m)) => Err(ClientError::Refused(m)),
        Err(Attempt::Other(e)) => Err(e),
    };
    // The server may still be draining its streams: give it the usual timeout plus a margin.
    ctrl.timeout += Duration::from_secs(5);
    let st = flatten(ctrl.state("the server's results request"))?;
    if st != State::ExchangeResults {
        return Err(ClientError::Connect(format!("{} sent {st:?} instead of asking for results", ctrl.peer)));
    }
    let (_, base) = merger.baseline();
    let base: Vec<Baseline> =
        base.into_iter().map(|(sent, received, retransmits)| Baseline { sent, received, retransmits }).collect();
    let ours = Results::from_report(spec, End::Client, report, &base, None);
    ctrl.write(&wire::json_frame(&ours))?;
    let theirs: Results = ctrl.json(MAX_RESULTS_LEN, "the server's results")?;
    let st = flatten(ctrl.state("the end of the test"))?;
    if st != State::DisplayResults {
        return Err(ClientError::Connect(format!("{} sent {st:?} instead of ending the test", ctrl.peer)));
    }
    let _ = ctrl.s.write_all(&[State::IperfDone.byte()]);
    Ok(theirs)
}
