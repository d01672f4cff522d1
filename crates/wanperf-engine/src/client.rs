//! `wanperf tput`: the I/O shell around [`ClientSession`]. Results go to a [`Sink`].

use crate::control::CtrlEvent;
use crate::opts::{capped_note, preflight, OptError, SockOpts};
use crate::stream::{Conn, Peer, Side, StreamPlan};
use crate::sys;
use socket2::{SockAddr, Socket};
use std::io::{self, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use thiserror::Error;
use wanperf_proto::client::{ClientAction, ClientEvent, ClientSession};
use wanperf_proto::data::{udp_token, Cookie, DataHello};
use wanperf_proto::frame::{self, FrameError};
use wanperf_proto::msg::{HostCapture, Msg, Role, SideReport, SpecError, TestSpec, Transport};
use wanperf_proto::record::{summarize, ConnectionInfo, EndRecord, IntervalRecord, Merger, StartRecord, Way, SCHEMA};

/// Where a test's records go: the console table, the NDJSON writer, a test recorder.
pub trait Sink {
    /// The test started.
    fn start(&mut self, rec: &StartRecord);
    /// An interval completed.
    fn interval(&mut self, rec: &IntervalRecord);
    /// The test ended (always called once the start record was).
    fn end(&mut self, rec: &EndRecord);
    /// A copy completed a file (or left one alone).
    fn file(&mut self, _rec: &wanperf_copy::spec::FileRecord) {}
}

/// Client settings beyond the test itself.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Server host name or address.
    pub host: String,
    /// Server port.
    pub port: u16,
    /// The test.
    pub spec: TestSpec,
    /// Local address for control and data sockets.
    pub bind: Option<IpAddr>,
    /// Local interface for control and data sockets.
    pub bind_dev: Option<String>,
    /// How long to wait for connections and each handshake step.
    pub timeout: Duration,
    /// Test hook: UDP senders skip every Nth datagram (numbered, not sent).
    pub drop_every: Option<u64>,
    /// Software version string.
    pub software: String,
    /// Key to prove to servers with authorized keys (`--key`).
    pub key: Option<std::sync::Arc<wanperf_proto::auth::PrivateKey>>,
}

/// Why a test could not run or did not finish.
#[derive(Debug, Error)]
pub enum ClientError {
    /// The test asked for is invalid.
    #[error("{0}")]
    Spec(#[from] SpecError),
    /// Local socket options.
    #[error("{0}")]
    Opt(#[from] OptError),
    /// The host name does not resolve.
    #[error("cannot resolve `{host}`: {err}")]
    Resolve {
        /// Host.
        host: String,
        /// Resolver error.
        err: io::Error,
    },
    /// No server there.
    #[error("{0}")]
    Connect(String),
    /// The server said no.
    #[error("server refused the test: {0}")]
    Refused(String),
    /// The peer is not a (compatible) wanperf server.
    #[error("{0}")]
    Protocol(FrameError),
    /// The test started but did not finish; its end record (complete: false) was emitted.
    #[error("test incomplete: {0}")]
    Incomplete(String),
    /// Interrupted before the test started.
    #[error("interrupted")]
    Interrupted,
    /// The test cannot be asked of this kind of server (e.g. fractional seconds of iperf3).
    #[error("{0}")]
    Usage(String),
}

enum Event {
    Msg(Msg),
    BadFrame(FrameError),
    Closed,
    WorkerDone,
    Copy(crate::copy::CopyEvent),
}

/// Who should have answered a refused connection, for its error message.
pub(crate) const NO_WANPERF: &str =
    "no wanperf server listens there (start one with `wanperf serve`, or give the port with -p)";

fn connect_error(addr: SocketAddr, e: &io::Error, timeout: Duration, nobody: &str) -> String {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => format!("connection refused by {addr}: {nobody}"),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => {
            format!("no answer from {addr} within {} s", timeout.as_secs_f64())
        }
        _ => format!("cannot connect to {addr}: {e}"),
    }
}

/// A TCP connection to `addr` with `opts`; `nobody` says who should have listened.
pub(crate) fn connect_tcp(
    addr: SocketAddr,
    opts: &SockOpts,
    timeout: Duration,
    nobody: &str,
) -> Result<Socket, ClientError> {
    let s = crate::opts::stream_socket(addr, opts.mptcp)
        .map_err(|e| ClientError::Connect(format!("cannot create a socket: {e}")))?;
    opts.apply(&s, addr.is_ipv6(), "this host")?;
    s.connect_timeout(&SockAddr::from(addr), timeout)
        .map_err(|e| ClientError::Connect(connect_error(addr, &e, timeout, nobody)))?;
    Ok(s)
}

/// This host's side of a test, checked before connecting: a TCP window the kernel would cap
/// is an error, or (with --accept-capped-window) a warning, returned.
pub(crate) fn preflight_warnings(spec: &TestSpec) -> Result<Vec<String>, ClientError> {
    let granted = if spec.transport == Transport::Tcp {
        preflight(spec.window, spec.cc.as_deref(), spec.accept_capped_window, "this host")?
    } else {
        None
    };
    Ok(match (spec.window, granted) {
        (Some(w), Some(g)) => capped_note(w, g).into_iter().collect(),
        _ => Vec::new(),
    })
}

/// The control connection: the first of the server's addresses that accepts, with TCP_NODELAY
/// and the write timeout set.
pub(crate) fn connect_control(cfg: &ClientConfig, nobody: &str) -> Result<(TcpStream, SocketAddr), ClientError> {
    let addrs: Vec<SocketAddr> = (cfg.host.as_str(), cfg.port)
        .to_socket_addrs()
        .map_err(|err| ClientError::Resolve { host: cfg.host.clone(), err })?
        .collect();
    let opts = SockOpts { dscp: cfg.spec.dscp, bind: cfg.bind, bind_dev: cfg.bind_dev.clone(), ..Default::default() };
    let mut last_err = ClientError::Connect(format!("`{}` has no addresses", cfg.host));
    for a in &addrs {
        match connect_tcp(*a, &opts, cfg.timeout, nobody) {
            Ok(s) => {
                let s = TcpStream::from(s);
                let _ = s.set_nodelay(true);
                let _ = s.set_write_timeout(Some(cfg.timeout));
                return Ok((s, *a));
            }
            Err(e) => last_err = e,
        }
    }
    Err(last_err)
}

/// Runs one test against a `wanperf serve`. Records go to `sink`; on success returns the end
/// record. Setting `interrupt` ends the test early (the end record says so).
pub fn run(cfg: &ClientConfig, sink: &mut dyn Sink, interrupt: &AtomicBool) -> Result<EndRecord, ClientError> {
    run_inner(cfg, None, sink, interrupt)
}

/// What a copy's client end holds locally.
#[derive(Debug, Clone)]
pub enum CopyLocal {
    /// Pushing these files and trees.
    Push(Vec<std::path::PathBuf>),
    /// Pulling into this directory (created if missing); with a name, the single source is
    /// written as that name there (the destination named it).
    Pull(std::path::PathBuf, Option<String>),
}

/// Runs a copy (`cfg.spec.copy` set): like [`run`], with the files.
pub fn run_copy(
    cfg: &ClientConfig,
    local: &CopyLocal,
    sink: &mut dyn Sink,
    interrupt: &AtomicBool,
) -> Result<EndRecord, ClientError> {
    use crate::copy::{Hooks, Job, RecvJob, SendJob};
    let spec = cfg.spec.clone();
    spec.validate()?;
    let Some(cs) = spec.copy.clone() else {
        return Err(ClientError::Usage("not a copy".into()));
    };
    let (tx, rx) = mpsc::channel::<Event>();
    let to_loop = tx.clone();
    let notify: crate::copy::Notify = Arc::new(move |ev| {
        let _ = to_loop.send(Event::Copy(ev));
    });
    let job = match local {
        CopyLocal::Push(paths) => {
            let scan = crate::copy_fs::scan_local(paths).map_err(|e| ClientError::Usage(e.to_string()))?;
            Job::Send(SendJob::new(cs, scan, notify, Hooks::from_env()))
        }
        CopyLocal::Pull(dir, name) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| ClientError::Usage(format!("cannot create `{}`: {e}", dir.display())))?;
            let base =
                crate::copy_fs::open_base(dir).map_err(|e| ClientError::Usage(format!("`{}`: {e}", dir.display())))?;
            Job::Recv(RecvJob::new(cs, base, name.clone(), notify, Hooks::from_env()))
        }
    };
    run_inner(cfg, Some((job, tx, rx)), sink, interrupt)
}

type CopyParts = (crate::copy::Job, mpsc::Sender<Event>, mpsc::Receiver<Event>);

fn run_inner(
    cfg: &ClientConfig,
    copy: Option<CopyParts>,
    sink: &mut dyn Sink,
    interrupt: &AtomicBool,
) -> Result<EndRecord, ClientError> {
    let mut spec = cfg.spec.clone();
    // A QUIC test's data connections show a certificate made for it; the spec (which a key
    // signs) names it, so that the server accepts no other.
    let quic = if spec.transport == Transport::Quic {
        let c = wanperf_quic::TestCert::generate().map_err(|e| ClientError::Connect(e.to_string()))?;
        spec.quic_cert = Some(c.fingerprint.clone());
        quic_tuning(&spec).check().map_err(ClientError::Usage)?;
        Some(c)
    } else {
        None
    };
    spec.validate()?;
    let warnings = preflight_warnings(&spec)?;
    let (mut ctrl, server) = connect_control(cfg, NO_WANPERF)?;

    let (job, tx, rx) = match copy {
        Some((j, tx, rx)) => (Some(j), tx, rx),
        None => {
            let (tx, rx) = mpsc::channel::<Event>();
            (None, tx, rx)
        }
    };
    let reader = ctrl.try_clone().map_err(|e| ClientError::Connect(e.to_string()))?;
    let max_frame = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(wanperf_proto::frame::MAX_PAYLOAD));
    let reader_thread = crate::control::spawn_reader(reader, &[], max_frame, tx.clone(), |e| match e {
        CtrlEvent::Msg(m) => Event::Msg(m),
        CtrlEvent::Bad(e) => Event::BadFrame(e),
        CtrlEvent::Closed => Event::Closed,
    })
    .map_err(|e| ClientError::Connect(format!("cannot start a thread: {e}")))?;

    let result = drive(cfg, &spec, &mut ctrl, server, &rx, &tx, sink, interrupt, warnings, job.as_ref(), quic.as_ref());
    if let Some(j) = &job {
        j.abort();
    }
    let _ = ctrl.shutdown(Shutdown::Both);
    let _ = reader_thread.join();
    result
}

#[allow(clippy::too_many_arguments)]
fn drive(
    cfg: &ClientConfig,
    spec: &TestSpec,
    ctrl: &mut TcpStream,
    server: SocketAddr,
    rx: &mpsc::Receiver<Event>,
    tx: &mpsc::Sender<Event>,
    sink: &mut dyn Sink,
    interrupt: &AtomicBool,
    warnings: Vec<String>,
    job: Option<&crate::copy::Job>,
    quic: Option<&wanperf_quic::TestCert>,
) -> Result<EndRecord, ClientError> {
    let mut session = ClientSession::new(
        Instant::now(),
        spec.clone(),
        cfg.software.clone(),
        cfg.timeout,
        cfg.timeout + results_grace(spec),
    );
    if let Some(k) = &cfg.key {
        session = session.with_key(k.clone());
    }
    let mut d = ClientDriver {
        cfg,
        spec,
        ctrl,
        server,
        tx,
        sink,
        job,
        session,
        merger: Merger::new(spec.clone()),
        side: None,
        pending: None,
        local_report: None,
        server_report: None,
        server_info: None,
        udp_hellos: Vec::new(),
        last_hello: Instant::now(),
        started: false,
        failure: None,
        refused: None,
        foreign: None,
        lost: crate::copy::LostGrace::default(),
        warnings,
        quic,
        // Captured once: the start record shows it, the verdict counts its cores.
        client_host: sys::host_capture(Some(server.ip())),
    };
    loop {
        d.flush();
        d.on_session_events();
        while let Some(action) = d.session.poll_action() {
            d.on_action(action);
        }
        if d.session.is_finished() {
            break;
        }
        if interrupt.load(Ordering::Acquire) {
            d.fail("interrupted by the user".into());
            continue;
        }
        d.repeat_hellos();
        if let Some(why) = d.lost.due(Instant::now()) {
            d.fail(why);
            continue;
        }
        let wait = crate::stream::wait_before(d.session.poll_timeout(), d.side.as_ref());
        let ev = match rx.recv_timeout(d.lost.wait(wait, Instant::now())) {
            Ok(ev) => Some(ev),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => Some(Event::WorkerDone),
        };
        d.on_event(ev, Instant::now());
        d.tick();
    }
    d.finish(interrupt)
}

/// How long the client waits for the server's results past its own timeout: with --probe the
/// server measures its stages alone before it reports (a write probe flushes up to 256 MiB,
/// which a slow disk takes seconds over).
fn results_grace(spec: &TestSpec) -> Duration {
    if spec.copy.as_ref().is_some_and(|c| c.probe) {
        RESULTS_GRACE_PROBING
    } else {
        RESULTS_GRACE
    }
}

/// See [`results_grace`].
const RESULTS_GRACE: Duration = Duration::from_secs(5);
/// See [`results_grace`].
const RESULTS_GRACE_PROBING: Duration = Duration::from_secs(60);
/// UDP hellos are datagrams: repeated this often until the server says every flow is attached.
const HELLO_REPEAT: Duration = Duration::from_millis(100);
/// How long the streams get to deliver their last bytes when they end by themselves.
const FINISH_GRACE: Duration = Duration::from_secs(2);
/// How long they get when the test was cut short.
const ABORT_GRACE: Duration = Duration::from_millis(500);

/// The capped-window notes of the connections `infos` (each once) added to `warnings`.
fn window_warnings(spec: &TestSpec, infos: &[ConnectionInfo], warnings: &mut Vec<String>) {
    for c in infos {
        if let (Some(w), Some(s), Some(r)) = (spec.window, c.sndbuf, c.rcvbuf) {
            if let Some(n) = capped_note(w, (s, r)) {
                if !warnings.contains(&n) {
                    warnings.push(n);
                }
            }
        }
    }
}

/// Why a test that never started failed, most telling first: the server's refusal, a peer
/// that speaks another protocol, Ctrl-C, then whatever went wrong.
fn not_started(
    refused: Option<String>,
    foreign: Option<FrameError>,
    interrupted: bool,
    failure: Option<String>,
) -> ClientError {
    if let Some(r) = refused {
        return ClientError::Refused(r);
    }
    if let Some(e) = foreign {
        return ClientError::Protocol(e);
    }
    if interrupted {
        return ClientError::Interrupted;
    }
    ClientError::Connect(failure.unwrap_or_else(|| "the test did not start".into()))
}

/// One test's client side while it runs: the sans-IO session, the merge of both ends'
/// samples, and the I/O the session asked for.
struct ClientDriver<'a> {
    cfg: &'a ClientConfig,
    spec: &'a TestSpec,
    ctrl: &'a mut TcpStream,
    server: SocketAddr,
    tx: &'a mpsc::Sender<Event>,
    sink: &'a mut dyn Sink,
    job: Option<&'a crate::copy::Job>,
    session: ClientSession,
    merger: Merger,
    side: Option<Side>,
    pending: Option<Vec<(StreamPlan, Conn)>>,
    local_report: Option<SideReport>,
    server_report: Option<SideReport>,
    server_info: Option<(String, HostCapture)>,
    udp_hellos: Vec<(UdpSocket, [u8; 32])>,
    last_hello: Instant,
    /// The start record went out (the streams connected).
    started: bool,
    /// What went wrong first.
    failure: Option<String>,
    refused: Option<String>,
    foreign: Option<FrameError>,
    /// A copy's broken data connection, reported when the peer gives no reason in time.
    lost: crate::copy::LostGrace,
    warnings: Vec<String>,
    quic: Option<&'a wanperf_quic::TestCert>,
    client_host: HostCapture,
}

impl ClientDriver<'_> {
    /// Sends what the session queued.
    fn flush(&mut self) {
        while let Some(m) = self.session.poll_transmit() {
            if self.ctrl.write_all(&frame::encode(&m)).is_err() {
                if let Some(e) = self.session.handle_closed() {
                    self.failure.get_or_insert(format!("lost the control connection: {e}"));
                }
                break;
            }
        }
    }

    /// Aborts the test, keeping `why` as its failure.
    fn fail(&mut self, why: String) {
        self.session.abort(&why);
        self.failure.get_or_insert(why);
    }

    /// What the server said, and the interval records both ends' samples now complete.
    fn on_session_events(&mut self) {
        while let Some(ev) = self.session.poll_event() {
            match ev {
                ClientEvent::Accepted { software, host } => self.server_info = Some((software, host)),
                ClientEvent::RemoteInterval(iv) => self.merger.push_remote(iv),
                ClientEvent::Results(r) => self.server_report = Some(r),
                ClientEvent::Copy(m) => {
                    if let Some(j) = self.job {
                        j.on_msg(m);
                    }
                }
            }
        }
        while let Some(rec) = self.merger.poll() {
            self.sink.interval(&rec);
        }
    }

    fn on_action(&mut self, action: ClientAction) {
        match action {
            ClientAction::Connect { cookie, udp_ports, pace_bps, quic_cert, data_port } => {
                let quic = self.quic.zip(quic_cert.as_deref());
                // An MPTCP test's data connections go to the listener the server opened for it.
                let server = data_port.map_or(self.server, |p| SocketAddr::new(self.server.ip(), p));
                match open_streams(self.cfg, self.spec, server, &cookie, &udp_ports, pace_bps, quic) {
                    Ok((conns, infos, hellos)) => {
                        self.udp_hellos = hellos;
                        window_warnings(self.spec, &infos, &mut self.warnings);
                        self.sink.start(&self.start_record(infos));
                        self.started = true;
                        self.pending = Some(conns);
                        self.session.handle_streams_connected(Instant::now());
                    }
                    Err(e) => {
                        let err = self.session.handle_connect_failed(e.to_string());
                        self.failure.get_or_insert(err.to_string());
                    }
                }
            }
            ClientAction::StartWorkers => {
                self.udp_hellos.clear();
                if let Some(conns) = self.pending.take() {
                    match start_side(conns, self.spec, self.tx, self.job.map(|j| j.start())) {
                        Ok(s) => self.side = Some(s),
                        Err(e) => self.fail(format!("cannot start the streams: {e}")),
                    }
                }
            }
            ClientAction::Close => {}
        }
    }

    /// The start record: the test, both hosts, the connections as they were made.
    fn start_record(&self, connections: Vec<ConnectionInfo>) -> StartRecord {
        let (server_version, server_host) = self.server_info.clone().unwrap_or_default();
        let (host, port) = (&self.cfg.host, self.cfg.port);
        StartRecord {
            event: "start".into(),
            schema: SCHEMA.into(),
            version: self.cfg.software.clone(),
            timestamp: SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64()),
            server: if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") },
            test: self.spec.clone(),
            server_version,
            client_host: self.client_host.clone(),
            server_host,
            connections,
            warnings: self.warnings.clone(),
            one_ended: false,
        }
    }

    /// Repeats the UDP hellos until the server says every flow is attached.
    fn repeat_hellos(&mut self) {
        if !self.udp_hellos.is_empty() && self.last_hello.elapsed() >= HELLO_REPEAT {
            for (s, h) in &self.udp_hellos {
                let _ = s.send(h);
            }
            self.last_hello = Instant::now();
        }
    }

    /// Feeds one event (`None`: the session's timer) to the session.
    fn on_event(&mut self, ev: Option<Event>, now: Instant) {
        let res = match ev {
            Some(Event::Msg(m)) => {
                if let Msg::Refused { reason } = &m {
                    self.refused = Some(reason.clone());
                }
                self.session.handle_msg(now, m)
            }
            Some(Event::BadFrame(e)) => {
                let msg = e.to_string();
                self.foreign = Some(e);
                self.session.abort(&msg);
                Err(wanperf_proto::server::SessionError::Local(msg))
            }
            Some(Event::Closed) => match self.session.handle_closed() {
                Some(e) => Err(e),
                None => Ok(()),
            },
            Some(Event::WorkerDone) => Ok(()),
            Some(Event::Copy(ev)) => match ev {
                crate::copy::CopyEvent::Msg(m) => {
                    self.session.send_copy(m);
                    Ok(())
                }
                crate::copy::CopyEvent::File(r) => {
                    self.sink.file(&r);
                    Ok(())
                }
                crate::copy::CopyEvent::Failed(why) => {
                    self.session.abort(&why);
                    Err(wanperf_proto::server::SessionError::Local(why))
                }
                crate::copy::CopyEvent::Lost(why) => {
                    self.lost.note(now, why);
                    Ok(())
                }
            },
            None => self.session.handle_timeout(now),
        };
        if let Err(e) = res {
            self.failure.get_or_insert(e.to_string());
        }
    }

    /// Samples this end's streams at interval boundaries; once they are all done, this end's
    /// report goes to the session.
    fn tick(&mut self) {
        let Some(s) = self.side.as_mut() else { return };
        if let Some(iv) = s.tick(Instant::now()) {
            self.merger.push_local(iv);
        }
        if s.all_done() && self.local_report.is_none() {
            let (last, mut report) = s.finish(FINISH_GRACE);
            report.copy = self.job.map(|j| j.report());
            self.merger.push_local(last);
            self.session.handle_local_done(Instant::now(), report.clone());
            self.local_report = Some(report);
        }
    }

    /// The end: what is left of the merge, the summary and verdict, the end record.
    fn finish(mut self, interrupt: &AtomicBool) -> Result<EndRecord, ClientError> {
        // Drain what is left of the server's events and the merge.
        while let Some(ev) = self.session.poll_event() {
            match ev {
                ClientEvent::RemoteInterval(iv) => self.merger.push_remote(iv),
                ClientEvent::Results(r) => self.server_report = Some(r),
                ClientEvent::Accepted { .. } | ClientEvent::Copy(_) => {}
            }
        }
        if let Some(s) = self.side.as_mut() {
            if self.local_report.is_none() {
                s.force_close();
                if let Some(j) = self.job {
                    j.abort();
                }
                let (last, mut report) = s.finish(ABORT_GRACE);
                report.copy = self.job.map(|j| j.report());
                self.merger.push_local(last);
                self.local_report = Some(report);
            }
        }
        while let Some(rec) = self.merger.poll() {
            self.sink.interval(&rec);
        }
        for rec in self.merger.flush() {
            self.sink.interval(&rec);
        }
        if !self.started {
            return Err(not_started(self.refused, self.foreign, interrupt.load(Ordering::Acquire), self.failure));
        }
        let (cfg, spec, job) = (self.cfg, self.spec, self.job);
        let complete = self.session.is_done() && self.failure.is_none();
        let mut local = self.local_report.take().unwrap_or_default();
        // --probe: this end's ceilings once the server's are in (it probed before it
        // reported), then the network's with a memory-to-memory test over the same path.
        let mut network = None;
        if let (true, Some(j), Some(c)) = (complete, job, local.copy.as_mut()) {
            c.probes = j.probe();
            if !c.probes.is_empty() {
                network = Some(network_probe(cfg, spec, interrupt));
            }
        }
        let server_report = self.server_report.as_ref();
        let mut summary = summarize(spec, &self.merger, &local, server_report);
        let (_, server_host) = self.server_info.clone().unwrap_or_default();
        summary.verdict = wanperf_proto::record::verdict(
            spec,
            &summary,
            &local,
            server_report,
            &self.client_host,
            &server_host,
            self.server.ip().is_loopback(),
        );
        summary.copy = wanperf_proto::record::copy_summary(spec, &local, server_report);
        if let (Some(net), Some(v), Some(c)) = (&network, summary.verdict.as_mut(), summary.copy.as_ref()) {
            let check = wanperf_copy::verdict::confirm(v, &c.sender.probes, &c.receiver.probes, Some(net));
            v.evidence.extend(check.lines());
            v.probe = Some(check);
        }
        let failure = self.failure.take();
        let end = EndRecord { event: "end".into(), complete, error: failure.clone(), summary, server_version: None };
        self.sink.end(&end);
        if complete {
            Ok(end)
        } else {
            Err(ClientError::Incomplete(failure.unwrap_or_else(|| "the server sent no results".into())))
        }
    }
}

/// Seconds of the memory-to-memory test that `--probe` runs after a copy, and of its start
/// left out (slow start).
const NETWORK_PROBE_S: (f64, f64) = (3.0, 1.0);

/// The network's ceiling for a copy: a `tput` test to the same server with the copy's
/// streams, windows, congestion control and direction.
fn network_probe(cfg: &ClientConfig, spec: &TestSpec, interrupt: &AtomicBool) -> wanperf_copy::spec::StageProbe {
    use wanperf_copy::spec::{Stage, StageProbe};
    struct Quiet;
    impl Sink for Quiet {
        fn start(&mut self, _: &StartRecord) {}
        fn interval(&mut self, _: &IntervalRecord) {}
        fn end(&mut self, _: &EndRecord) {}
    }
    let mut t = spec.clone();
    t.copy = None;
    t.duration_s = Some(NETWORK_PROBE_S.0);
    t.omit_s = NETWORK_PROBE_S.1;
    t.bytes = None;
    let c = ClientConfig { spec: t, ..cfg.clone() };
    match run(&c, &mut Quiet, interrupt) {
        Ok(end) => {
            let s = &end.summary;
            let rate = s.throughput_bps / 8.0;
            let window = spec
                .window
                .map_or("autotuned windows".to_string(), |w| format!("{} windows", wanperf_proto::units::fmt_bytes(w)));
            StageProbe {
                stage: Stage::Send,
                bytes: s.received_bytes,
                seconds: s.duration_s,
                threads: spec.streams,
                rate_bytes_s: (rate > 0.0).then_some(rate),
                how: format!(
                    "wanperf tput, {} stream(s), {window}, {:.0} s after {:.0} s left out",
                    spec.streams,
                    NETWORK_PROBE_S.0 - NETWORK_PROBE_S.1,
                    NETWORK_PROBE_S.1
                ),
            }
        }
        Err(e) => StageProbe::failed(Stage::Send, format!("the memory-to-memory test failed: {e}")),
    }
}

fn start_side(
    conns: Vec<(StreamPlan, Conn)>,
    spec: &TestSpec,
    tx: &mpsc::Sender<Event>,
    worker: Option<crate::stream::Worker>,
) -> io::Result<Side> {
    let mut conns = conns;
    let deadline = spec.duration_s.map(|d| Instant::now() + Duration::from_secs_f64(d));
    let expected_end = spec.expected_duration_s().map(|d| Instant::now() + Duration::from_secs_f64(d));
    for (plan, _) in &mut conns {
        plan.deadline = deadline;
        plan.expected_end = expected_end;
    }
    let notify_tx = Mutex::new(tx.clone());
    let notify: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
        if let Ok(t) = notify_tx.lock() {
            let _ = t.send(Event::WorkerDone);
        }
    });
    Side::start_with(conns, Duration::from_secs_f64(spec.interval_s), false, notify, worker)
}

type Opened = (Vec<(StreamPlan, Conn)>, Vec<ConnectionInfo>, Vec<(UdpSocket, [u8; 32])>);

fn open_streams(
    cfg: &ClientConfig,
    spec: &TestSpec,
    server: SocketAddr,
    cookie: &Cookie,
    udp_ports: &[u16],
    pace_bps: Option<u64>,
    quic: Option<(&wanperf_quic::TestCert, &str)>,
) -> Result<Opened, ClientError> {
    let mut conns = Vec::new();
    let mut infos = Vec::new();
    let mut hellos = Vec::new();
    // A QUIC test's streams, opened with their connection as soon as it is up (the server
    // waits for each connection's streams while the client makes the others), by id.
    let mut quic_streams: std::collections::BTreeMap<u32, (wanperf_quic::QuicStream, String)> = Default::default();
    for id in 0..spec.connections() {
        let role = spec.client_role(id);
        let mut plan = StreamPlan::new(spec, id, role, udp_token(cookie), Peer::Wanperf);
        plan.drop_every = if role == Role::Sender { cfg.drop_every } else { None };
        let hello = DataHello { cookie: *cookie, stream: id }.encode();
        match spec.transport {
            Transport::Tcp => {
                let pace = if role == Role::Sender { spec.sender_pace(pace_bps) } else { None };
                let opts = SockOpts {
                    window: spec.window,
                    cc: spec.cc.clone(),
                    dscp: spec.dscp,
                    bind: cfg.bind,
                    bind_dev: cfg.bind_dev.clone(),
                    pace_bps: pace,
                    mptcp: spec.mptcp,
                };
                let mut s = connect_tcp(server, &opts, cfg.timeout, NO_WANPERF)?;
                s.write_all(&hello).map_err(|e| ClientError::Connect(format!("data connection {id}: {e}")))?;
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
                let s = data_udp_socket(cfg, spec, server)?;
                let r = socket2::SockRef::from(&s);
                crate::opts::size_udp_buffers(&r, spec.window);
                let port = udp_ports.get(id as usize).copied().unwrap_or(0);
                s.connect(SocketAddr::new(server.ip(), port))
                    .map_err(|e| ClientError::Connect(format!("UDP flow {id}: {e}")))?;
                let _ = s.send(&hello);
                infos.push(ConnectionInfo {
                    id,
                    direction: Way::of(spec, id),
                    local: s.local_addr().map_or_else(|_| String::new(), |a| a.to_string()),
                    remote: SocketAddr::new(server.ip(), port).to_string(),
                    sndbuf: r.send_buffer_size().ok().map(|v| v as u64),
                    rcvbuf: r.recv_buffer_size().ok().map(|v| v as u64),
                });
                let clone = s.try_clone().map_err(|e| ClientError::Connect(e.to_string()))?;
                hellos.push((clone, hello));
                conns.push((plan, Conn::Udp(s)));
            }
            Transport::Quic => {
                let Some((cert, pin)) = quic else {
                    return Err(ClientError::Connect("the server sent no QUIC certificate".into()));
                };
                let at = SocketAddr::new(server.ip(), udp_ports.first().copied().unwrap_or(0));
                let tuning = quic_tuning(spec);
                if !quic_streams.contains_key(&id) {
                    // The first stream of a connection not made yet: make it, open all its streams.
                    let k = spec.quic_connection_of(id);
                    let s = data_udp_socket(cfg, spec, server)?;
                    crate::opts::size_udp_buffers(&socket2::SockRef::from(&s), Some(quic_socket_buffer(spec)));
                    let local = s.local_addr().map_or_else(|_| String::new(), |a| a.to_string());
                    let c = wanperf_quic::connect(s, at, cert, pin, &tuning, cfg.timeout)
                        .map_err(|e| ClientError::Connect(format!("data connection {k}: {e}")))?;
                    for j in spec.quic_streams_on(k) {
                        let hello = DataHello { cookie: *cookie, stream: j }.encode();
                        let q = c
                            .open(&hello, cfg.timeout)
                            .map_err(|e| ClientError::Connect(format!("data stream {j}: {e}")))?;
                        quic_streams.insert(j, (q, local.clone()));
                    }
                }
                let (q, local) = quic_streams
                    .remove(&id)
                    .ok_or_else(|| ClientError::Connect(format!("data stream {id} was not opened")))?;
                infos.push(ConnectionInfo {
                    id,
                    direction: Way::of(spec, id),
                    local,
                    remote: at.to_string(),
                    sndbuf: None,
                    rcvbuf: None,
                });
                conns.push((plan, Conn::Quic(Box::new(q), tuning.cc_name())));
            }
        }
    }
    Ok((conns, infos, hellos))
}

/// What a QUIC test asks of its connections: `-w` as the stream's flow-control window, `-C`
/// as quinn's congestion controller, and the streams each carries.
pub(crate) fn quic_tuning(spec: &TestSpec) -> wanperf_quic::Tuning {
    wanperf_quic::Tuning {
        window: spec.quic_window(),
        cc: spec.cc.clone(),
        streams: spec.quic_streams_per_connection(),
    }
}

/// The socket buffers of a QUIC data connection: its streams' windows, at least 4 MiB (a
/// burst of GSO-sized sends must not overflow the receiver's socket).
pub(crate) fn quic_socket_buffer(spec: &TestSpec) -> u64 {
    (spec.quic_window() * u64::from(spec.quic_streams_per_connection())).max(4 << 20)
}

/// A UDP socket for a data flow to `server`: bound as the test asks (--bind, --bind-dev),
/// marked with its DSCP.
fn data_udp_socket(cfg: &ClientConfig, spec: &TestSpec, server: SocketAddr) -> Result<UdpSocket, ClientError> {
    let local = cfg.bind.unwrap_or(if server.is_ipv6() { IpAddr::from([0u16; 8]) } else { IpAddr::from([0u8; 4]) });
    let s = UdpSocket::bind(SocketAddr::new(local, 0))
        .map_err(|e| ClientError::Connect(format!("cannot bind a UDP socket: {e}")))?;
    let r = socket2::SockRef::from(&s);
    if let Some(dev) = &cfg.bind_dev {
        r.bind_device(Some(dev.as_bytes())).map_err(|err| OptError::BindDev { dev: dev.clone(), err })?;
    }
    if let Some(d) = spec.dscp {
        let _ = sys::set_dscp(&r, server.is_ipv6(), d);
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_that_never_started_says_the_most_telling_reason() {
        let foreign = || Some(FrameError::Version { theirs: 9, ours: wanperf_proto::data::PROTOCOL_VERSION });
        let refused = || Some("busy".to_string());
        let failure = || Some("connection refused".to_string());
        assert!(matches!(not_started(refused(), foreign(), true, failure()), ClientError::Refused(r) if r == "busy"));
        assert!(matches!(not_started(None, foreign(), true, failure()), ClientError::Protocol(_)));
        assert!(matches!(not_started(None, None, true, failure()), ClientError::Interrupted));
        assert!(
            matches!(not_started(None, None, false, failure()), ClientError::Connect(f) if f == "connection refused")
        );
        assert!(matches!(not_started(None, None, false, None), ClientError::Connect(f) if f.contains("did not start")));
    }

    #[test]
    fn a_capped_window_is_noted_once_whatever_the_number_of_streams() {
        let mut spec = TestSpec::tcp(3, 10.0);
        spec.window = Some(4 << 20);
        let conn = |id, sndbuf| ConnectionInfo {
            id,
            direction: Way::Up,
            local: String::new(),
            remote: String::new(),
            sndbuf: Some(sndbuf),
            rcvbuf: Some(16 << 20),
        };
        let mut warnings = vec!["earlier".to_string()];
        // The kernel doubles what it grants: 8 MiB for a 4 MiB window is not capped.
        window_warnings(&spec, &[conn(0, 8 << 20)], &mut warnings);
        assert_eq!(warnings, ["earlier"]);
        window_warnings(&spec, &[conn(0, 1 << 20), conn(1, 1 << 20), conn(2, 1 << 20)], &mut warnings);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[1].contains("capped by the kernel"), "{warnings:?}");
        spec.window = None;
        window_warnings(&spec, &[conn(0, 1)], &mut warnings);
        assert_eq!(warnings.len(), 2, "no window asked, nothing capped");
    }

    #[test]
    fn the_server_gets_longer_for_its_results_only_when_it_probes() {
        assert_eq!(results_grace(&TestSpec::tcp(1, 10.0)), RESULTS_GRACE);
        assert!(RESULTS_GRACE_PROBING > RESULTS_GRACE);
    }
}
