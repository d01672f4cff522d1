//! The server's side of one test, as a sans-IO state machine.
//!
//! The I/O layer feeds it events (`handle_*`, each with the current time) and carries out what
//! it asks for: messages to send ([`ServerSession::poll_transmit`]) and actions
//! ([`ServerSession::poll_action`]). [`ServerSession::poll_timeout`] says when to call
//! [`ServerSession::handle_timeout`]. It never reads a clock or touches a socket.

use crate::auth::{nonce_hex, AuthError, AuthorizedKeys, NONCE_LEN};
use crate::data::{cookie_hex, Cookie};
use crate::msg::{HostCapture, Msg, SideInterval, SideReport, SpecError, TestSpec, Transport};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};
use thiserror::Error;

/// What a server lets clients do.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Longest test in seconds (`--max-duration`).
    pub max_duration_s: f64,
    /// Most streams per test (`--max-streams`).
    pub max_streams: u32,
    /// Highest rate per test and direction in bit/s (`--max-rate`); TCP tests are paced to it.
    pub max_rate_bps: Option<u64>,
    /// Most tests at once (`--max-concurrent`).
    pub max_concurrent: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_duration_s: 3600.0, max_streams: crate::msg::MAX_STREAMS, max_rate_bps: None, max_concurrent: 8 }
    }
}

impl Limits {
    /// Why a new test cannot start while `active` others run, if it cannot.
    pub fn busy(&self, active: u32) -> Option<Refusal> {
        (active >= self.max_concurrent).then_some(Refusal::Busy { active, max: self.max_concurrent })
    }

    /// Whether a test fits. `active` counts the other tests in progress.
    pub fn admit(&self, spec: &TestSpec, active: u32) -> Result<(), Refusal> {
        spec.validate()?;
        if let Some(busy) = self.busy(active) {
            return Err(busy);
        }
        if spec.streams > self.max_streams {
            return Err(Refusal::Streams { asked: spec.streams, max: self.max_streams });
        }
        if let Some(d) = spec.duration_s {
            if d > self.max_duration_s {
                return Err(Refusal::Duration { asked: d, max: self.max_duration_s });
            }
        }
        if let (Some(max), Some(rate)) = (self.max_rate_bps, spec.rate_bps) {
            if rate > max {
                return Err(Refusal::Rate { asked: rate, max });
            }
        }
        // The cap is held by pacing TCP sockets; QUIC is quinn's to pace, and MPTCP sockets
        // take no pacing cap (the kernel refuses SO_MAX_PACING_RATE on them).
        if let Some(max) = self.max_rate_bps {
            if spec.transport == Transport::Quic || spec.mptcp {
                return Err(Refusal::Uncapped { max });
            }
        }
        Ok(())
    }
}

/// Why a server refuses a test (the text is what the client is told).
#[derive(Debug, Clone, PartialEq, Error)]
pub enum Refusal {
    /// The request is not a valid test.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// `--max-concurrent` tests run already.
    #[error("server busy: {active} test(s) running, its --max-concurrent is {max}; try again later")]
    Busy {
        /// Tests running.
        active: u32,
        /// The limit.
        max: u32,
    },
    /// A QUIC or MPTCP test on a server whose `--max-rate` only TCP pacing can hold.
    #[error("the server caps tests at {max} bit/s (--max-rate), which it holds on TCP only: no QUIC or MPTCP tests")]
    Uncapped {
        /// The cap.
        max: u64,
    },
    /// More streams than `--max-streams`.
    #[error("{asked} streams asked, the server's --max-streams is {max}")]
    Streams {
        /// Streams asked.
        asked: u32,
        /// The limit.
        max: u32,
    },
    /// Longer than `--max-duration`.
    #[error("{asked} s asked, the server's --max-duration is {max} s")]
    Duration {
        /// Seconds asked.
        asked: f64,
        /// The limit.
        max: f64,
    },
    /// Faster than `--max-rate`.
    #[error("{} asked, the server's --max-rate is {}", crate::units::fmt_rate(*.asked as f64), crate::units::fmt_rate(*.max as f64))]
    Rate {
        /// bit/s asked.
        asked: u64,
        /// The limit, bit/s.
        max: u64,
    },
}

/// How long the server waits for each step of a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// From accept to the request, and for each later handshake step.
    pub handshake: Duration,
    /// Slack after the test's nominal end before the server gives up on the client.
    pub grace: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts { handshake: Duration::from_secs(10), grace: Duration::from_secs(10) }
    }
}

/// What the I/O layer must do for the session.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerAction {
    /// Prepare the test's sockets (UDP: bind one per flow) and call
    /// [`ServerSession::handle_prepared`].
    Prepare(TestSpec),
    /// Start the data workers now.
    StartWorkers,
    /// Let the workers end, send the final interval with [`ServerSession::queue_interval`],
    /// then call [`ServerSession::handle_local_report`].
    Collect,
    /// Hand this copy message to the copy running in the workers.
    Copy(wanperf_copy::spec::CopyMsg),
    /// Tear the test down: close data connections, stop workers, close control.
    Abort(String),
    /// The test ended well: close everything.
    Close,
}

/// A protocol violation or timeout that ends the test.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum SessionError {
    /// A message that makes no sense now.
    #[error("unexpected `{got}` message while {state}")]
    Unexpected {
        /// Message kind.
        got: &'static str,
        /// What the session was waiting for.
        state: &'static str,
    },
    /// The peer said the test failed.
    #[error("peer aborted the test: {0}")]
    PeerError(String),
    /// A data connection names a stream the test does not have.
    #[error("data connection for stream {0}, but the test has {1}")]
    BadStream(u32, u32),
    /// Two data connections name the same stream.
    #[error("stream {0} attached twice")]
    DuplicateStream(u32),
    /// A deadline passed.
    #[error("timed out while {0}")]
    Timeout(&'static str),
    /// This end gave up (shutdown, interrupt, local failure).
    #[error("{0}")]
    Local(String),
    /// Control connection closed early.
    #[error("control connection closed while {0}")]
    Closed(&'static str),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    AwaitRequest,
    AwaitAuth,
    Preparing,
    AwaitStreams,
    AwaitStart,
    Running,
    Collecting,
    Done,
    Failed,
}

impl State {
    fn describe(self) -> &'static str {
        match self {
            State::AwaitRequest => "waiting for the test request",
            State::AwaitAuth => "waiting for the client's key proof",
            State::Preparing => "preparing the test",
            State::AwaitStreams => "waiting for data connections",
            State::AwaitStart => "waiting for the start",
            State::Running => "running the test",
            State::Collecting => "collecting results",
            State::Done => "finished",
            State::Failed => "failed",
        }
    }
}

/// One test, server side.
#[derive(Debug)]
pub struct ServerSession {
    state: State,
    limits: Limits,
    timeouts: Timeouts,
    active: u32,
    cookie: Cookie,
    software: String,
    host: HostCapture,
    spec: Option<TestSpec>,
    attached: Vec<bool>,
    deadline: Option<Instant>,
    out: VecDeque<Msg>,
    actions: VecDeque<ServerAction>,
    auth: Option<(Arc<AuthorizedKeys>, [u8; NONCE_LEN])>,
    client_key: Option<String>,
    quic_cert: Option<String>,
    data_port: Option<u16>,
}

impl ServerSession {
    /// A session for a fresh control connection. `active` is the number of other tests
    /// in progress.
    pub fn new(
        now: Instant,
        limits: Limits,
        timeouts: Timeouts,
        active: u32,
        cookie: Cookie,
        software: String,
        host: HostCapture,
    ) -> Self {
        ServerSession {
            state: State::AwaitRequest,
            limits,
            timeouts,
            active,
            cookie,
            software,
            host,
            spec: None,
            attached: Vec::new(),
            deadline: Some(now + timeouts.handshake),
            out: VecDeque::new(),
            actions: VecDeque::new(),
            auth: None,
            client_key: None,
            quic_cert: None,
            data_port: None,
        }
    }

    /// Admits only clients that prove they hold one of `keys`, over this connection's fresh
    /// random `nonce` (see [`crate::auth`]). Call before the first message.
    pub fn require_auth(&mut self, keys: Arc<AuthorizedKeys>, nonce: [u8; NONCE_LEN]) {
        self.auth = Some((keys, nonce));
    }

    /// The authenticated client's key name (its comment), once it proved it.
    pub fn client_key(&self) -> Option<&str> {
        self.client_key.as_deref()
    }

    /// Whether the test has been admitted (past the request, and the key proof if required):
    /// from then on it counts against the server's limits.
    pub fn is_admitted(&self) -> bool {
        matches!(
            self.state,
            State::Preparing
                | State::AwaitStreams
                | State::AwaitStart
                | State::Running
                | State::Collecting
                | State::Done
        )
    }

    /// Replaces the host capture sent with `Accepted` (the I/O layer takes it only once a
    /// test is admitted: a stranger's connection must not cost the server that work).
    pub fn set_host(&mut self, host: HostCapture) {
        self.host = host;
    }

    /// The admitted test, once there is one.
    pub fn spec(&self) -> Option<&TestSpec> {
        self.spec.as_ref()
    }

    /// The test's cookie.
    pub fn cookie(&self) -> &Cookie {
        &self.cookie
    }

    /// Whether the session has ended (well or not).
    pub fn is_finished(&self) -> bool {
        matches!(self.state, State::Done | State::Failed)
    }

    /// Whether the session ended in failure.
    pub fn is_failed(&self) -> bool {
        self.state == State::Failed
    }

    /// Next message to send on the control connection.
    pub fn poll_transmit(&mut self) -> Option<Msg> {
        self.out.pop_front()
    }

    /// Next thing the I/O layer must do.
    pub fn poll_action(&mut self) -> Option<ServerAction> {
        self.actions.pop_front()
    }

    /// When [`Self::handle_timeout`] is due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.is_finished() {
            None
        } else {
            self.deadline
        }
    }

    fn fail(&mut self, err: SessionError, tell_peer: bool) -> SessionError {
        if !self.is_finished() {
            if tell_peer {
                self.out.push_back(Msg::Error { message: err.to_string() });
            }
            self.actions.push_back(ServerAction::Abort(err.to_string()));
            self.state = State::Failed;
            self.deadline = None;
        }
        err
    }

    fn refuse(&mut self, reason: String) {
        self.out.push_back(Msg::Refused { reason: reason.clone() });
        self.actions.push_back(ServerAction::Abort(format!("refused: {reason}")));
        self.state = State::Failed;
        self.deadline = None;
    }

    /// A control message arrived.
    pub fn handle_msg(&mut self, now: Instant, msg: Msg) -> Result<(), SessionError> {
        match (self.state, msg) {
            (State::AwaitRequest, Msg::Request { spec, .. }) => {
                if let Some((_, nonce)) = &self.auth {
                    // Nothing is admitted, counted or prepared before the proof; the
                    // handshake deadline set at connection stays (a silent client is cut).
                    self.out.push_back(Msg::Challenge { nonce: nonce_hex(nonce) });
                    self.spec = Some(spec);
                    self.state = State::AwaitAuth;
                } else {
                    self.admit(now, spec);
                }
                Ok(())
            }
            (State::AwaitAuth, Msg::Auth { key, spec: signed, signature }) => {
                let (keys, nonce) = self.auth.as_ref().expect("auth state only with keys");
                let requested = self.spec.take().expect("spec kept for the proof");
                let checked = keys.verify(&key, &signature, nonce, &signed).map(|k| k.name()).and_then(|name| {
                    match serde_json::from_str::<TestSpec>(&signed) {
                        Ok(s) if s == requested => Ok(name),
                        _ => Err(AuthError::SpecMismatch),
                    }
                });
                match checked {
                    Ok(name) => {
                        self.client_key = Some(name);
                        self.admit(now, requested);
                    }
                    Err(e) => self.refuse(format!("not authorized: {e}")),
                }
                Ok(())
            }
            (State::AwaitStart, Msg::Start) => {
                self.actions.push_back(ServerAction::StartWorkers);
                self.state = State::Running;
                let spec = self.spec.as_ref().expect("spec set before start");
                let nominal = spec.duration_s.unwrap_or(self.limits.max_duration_s).min(self.limits.max_duration_s);
                self.deadline = Some(now + Duration::from_secs_f64(nominal) + self.timeouts.grace);
                Ok(())
            }
            (State::Running, Msg::Copy(m)) if self.spec.as_ref().is_some_and(|s| s.copy.is_some()) => {
                self.actions.push_back(ServerAction::Copy(m));
                Ok(())
            }
            (State::Running, Msg::Finish { .. }) => {
                self.actions.push_back(ServerAction::Collect);
                self.state = State::Collecting;
                self.deadline = Some(now + self.timeouts.handshake);
                Ok(())
            }
            (_, Msg::Error { message }) => Err(self.fail(SessionError::PeerError(message), false)),
            (State::Done | State::Failed, _) => Ok(()),
            (state, msg) => Err(self.fail(SessionError::Unexpected { got: msg.kind(), state: state.describe() }, true)),
        }
    }

    fn admit(&mut self, now: Instant, spec: TestSpec) {
        match self.limits.admit(&spec, self.active) {
            Ok(()) => {
                self.attached = vec![false; spec.connections() as usize];
                self.actions.push_back(ServerAction::Prepare(spec.clone()));
                self.spec = Some(spec);
                self.state = State::Preparing;
                self.deadline = Some(now + self.timeouts.handshake);
            }
            Err(reason) => self.refuse(reason.to_string()),
        }
    }

    /// A QUIC test: the fingerprint of the certificate its endpoint shows, for the answer
    /// (before [`Self::handle_prepared`], whose `udp_ports` is then the endpoint's port).
    pub fn set_quic_cert(&mut self, fingerprint: String) {
        self.quic_cert = Some(fingerprint);
    }

    /// An MPTCP test: the port of the listener opened for its data connections, for the
    /// answer (before [`Self::handle_prepared`]).
    pub fn set_data_port(&mut self, port: u16) {
        self.data_port = Some(port);
    }

    /// The I/O layer prepared the test; `udp_ports` are the flows' ports (UDP tests).
    /// `pace_bps` is the per-test cap the client must honour, if the server has one.
    pub fn handle_prepared(&mut self, now: Instant, udp_ports: Vec<u16>) {
        if self.state != State::Preparing {
            return;
        }
        let spec = self.spec.as_ref().expect("spec set while preparing");
        let pace_bps = match (spec.transport, self.limits.max_rate_bps) {
            (Transport::Tcp, Some(max)) => Some(spec.rate_bps.unwrap_or(max).min(max)),
            _ => None,
        };
        self.out.push_back(Msg::Accepted {
            cookie: cookie_hex(&self.cookie),
            software: self.software.clone(),
            host: self.host.clone(),
            udp_ports,
            pace_bps,
            quic_cert: self.quic_cert.clone(),
            data_port: self.data_port,
        });
        self.state = State::AwaitStreams;
        self.deadline = Some(now + self.timeouts.handshake);
    }

    /// The I/O layer could not prepare the test.
    pub fn handle_prepare_failed(&mut self, reason: String) {
        if self.state == State::Preparing {
            self.refuse(reason);
        }
    }

    /// A data connection (or UDP hello) for stream `id` arrived.
    pub fn handle_stream(&mut self, now: Instant, id: u32) -> Result<(), SessionError> {
        if self.state != State::AwaitStreams {
            return Err(
                self.fail(SessionError::Unexpected { got: "data connection", state: self.state.describe() }, true)
            );
        }
        let n = self.attached.len() as u32;
        match self.attached.get_mut(id as usize) {
            None => Err(self.fail(SessionError::BadStream(id, n), true)),
            Some(true) => Err(self.fail(SessionError::DuplicateStream(id), true)),
            Some(slot) => {
                *slot = true;
                if self.attached.iter().all(|a| *a) {
                    self.out.push_back(Msg::Ready);
                    self.state = State::AwaitStart;
                }
                // Each connection is a step of the handshake: a client opening 64 streams one
                // after another over a 170 ms path needs 11 s for all, under 10 s for each.
                self.deadline = Some(now + self.timeouts.handshake);
                Ok(())
            }
        }
    }

    /// Queues a message of this end's copy (only while it runs).
    pub fn send_copy(&mut self, m: wanperf_copy::spec::CopyMsg) {
        if self.state == State::Running {
            self.out.push_back(Msg::Copy(m));
        }
    }

    /// Queues this end's samples for an interval (only while the test runs).
    pub fn queue_interval(&mut self, iv: SideInterval) {
        if matches!(self.state, State::Running | State::Collecting) {
            self.out.push_back(Msg::Interval(iv));
        }
    }

    /// The I/O layer collected this end's report.
    pub fn handle_local_report(&mut self, report: SideReport) {
        if self.state == State::Collecting {
            self.out.push_back(Msg::Results { report });
            self.actions.push_back(ServerAction::Close);
            self.state = State::Done;
            self.deadline = None;
        }
    }

    /// This end ends the test (server shutting down, local failure); the peer is told why.
    pub fn abort(&mut self, why: &str) -> SessionError {
        self.fail(SessionError::Local(why.to_string()), true)
    }

    /// The control connection closed.
    pub fn handle_closed(&mut self) -> Option<SessionError> {
        if self.is_finished() {
            None
        } else {
            let st = self.state.describe();
            Some(self.fail(SessionError::Closed(st), false))
        }
    }

    /// Time passed; fails the session if its deadline is over.
    pub fn handle_timeout(&mut self, now: Instant) -> Result<(), SessionError> {
        match self.deadline {
            Some(d) if now >= d && !self.is_finished() => {
                let st = self.state.describe();
                Err(self.fail(SessionError::Timeout(st), true))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(now: Instant) -> ServerSession {
        ServerSession::new(now, Limits::default(), Timeouts::default(), 0, [1; 16], "t".into(), HostCapture::default())
    }

    fn request(streams: u32) -> Msg {
        Msg::Request { software: "c".into(), spec: TestSpec::tcp(streams, 5.0) }
    }

    fn drain(s: &mut ServerSession) -> (Vec<Msg>, Vec<ServerAction>) {
        let mut m = vec![];
        while let Some(x) = s.poll_transmit() {
            m.push(x);
        }
        let mut a = vec![];
        while let Some(x) = s.poll_action() {
            a.push(x);
        }
        (m, a)
    }

    /// Client and server sessions talking to each other in virtual time: the client's
    /// messages go to the server until the server refuses, admits or goes quiet.
    fn handshake(
        server: &mut ServerSession,
        client: &mut crate::client::ClientSession,
        t: Instant,
    ) -> (Vec<Msg>, Vec<ServerAction>) {
        let (mut to_client, mut actions) = (vec![], vec![]);
        for _ in 0..4 {
            while let Some(m) = client.poll_transmit() {
                let _ = server.handle_msg(t, m);
            }
            let (m, a) = drain(server);
            actions.extend(a);
            if m.is_empty() {
                break;
            }
            for x in m {
                to_client.push(x.clone());
                let _ = client.handle_msg(t, x);
            }
        }
        (to_client, actions)
    }

    fn keyed(t: Instant, nonce: u8) -> ServerSession {
        let listed = crate::auth::PrivateKey::from_seed([7; 32], "listed").public().to_line();
        let mut s = session(t);
        s.require_auth(Arc::new(AuthorizedKeys::parse(&listed).unwrap()), [nonce; NONCE_LEN]);
        s
    }

    fn client(t: Instant, seed: Option<u8>) -> crate::client::ClientSession {
        let c = crate::client::ClientSession::new(
            t,
            TestSpec::tcp(2, 5.0),
            "c".into(),
            Duration::from_secs(5),
            Duration::from_secs(5),
        );
        match seed {
            Some(s) => c.with_key(Arc::new(crate::auth::PrivateKey::from_seed([s; 32], "k"))),
            None => c,
        }
    }

    #[test]
    fn a_listed_key_is_admitted_and_named() {
        let t = Instant::now();
        let mut s = keyed(t, 1);
        let mut c = client(t, Some(7));
        let (m, a) = handshake(&mut s, &mut c, t);
        assert!(matches!(m[..], [Msg::Challenge { .. }]), "{m:?}");
        assert!(matches!(a[..], [ServerAction::Prepare(_)]));
        s.handle_prepared(t, vec![]);
        assert!(matches!(drain(&mut s).0[..], [Msg::Accepted { .. }]));
        assert_eq!(s.client_key(), Some("listed"));
        assert!(s.is_admitted());
    }

    #[test]
    fn nothing_is_prepared_before_the_proof_and_a_silent_client_times_out() {
        let t = Instant::now();
        let mut s = keyed(t, 1);
        s.handle_msg(t, request(1)).unwrap();
        let (m, a) = drain(&mut s);
        assert!(matches!(m[..], [Msg::Challenge { .. }]) && a.is_empty());
        assert!(!s.is_admitted());
        // The deadline set at connection stays: the challenge does not extend it.
        assert_eq!(s.poll_timeout(), Some(t + Timeouts::default().handshake));
        assert!(s.handle_timeout(t + Duration::from_secs(11)).is_err());
        assert!(s.is_failed());
    }

    #[test]
    fn no_key_wrong_key_and_replay_are_refused() {
        let t = Instant::now();
        // No key: the client stops with one line, the server never admits.
        let (mut s, mut c) = (keyed(t, 1), client(t, None));
        let (_, a) = handshake(&mut s, &mut c, t);
        assert!(!a.iter().any(|x| matches!(x, ServerAction::Prepare(_))));
        assert!(c.is_finished());
        // A key that is not listed.
        let (mut s, mut c) = (keyed(t, 1), client(t, Some(8)));
        let (m, a) = handshake(&mut s, &mut c, t);
        assert!(
            matches!(&m[1], Msg::Refused { reason } if reason.contains("not in this server's authorized keys")),
            "{m:?}"
        );
        assert!(!a.iter().any(|x| matches!(x, ServerAction::Prepare(_))));
        assert_eq!(c.refusal().map(|r| r.contains("not authorized")), Some(true));
        // A proof recorded on one connection (nonce 1) replayed on another (nonce 2).
        let (mut s1, mut c1) = (keyed(t, 1), client(t, Some(7)));
        let mut recorded = vec![];
        while let Some(m) = c1.poll_transmit() {
            recorded.push(m.clone());
            s1.handle_msg(t, m).unwrap();
        }
        let (m, _) = drain(&mut s1);
        c1.handle_msg(t, m[0].clone()).unwrap();
        recorded.push(c1.poll_transmit().unwrap());
        assert!(matches!(recorded[1], Msg::Auth { .. }));
        let mut s2 = keyed(t, 2);
        for m in recorded {
            s2.handle_msg(t, m).unwrap();
        }
        let (m, a) = drain(&mut s2);
        assert!(matches!(&m[1], Msg::Refused { reason } if reason.contains("does not verify")), "{m:?}");
        assert!(!a.iter().any(|x| matches!(x, ServerAction::Prepare(_))));
    }

    #[test]
    fn happy_path() {
        let t0 = Instant::now();
        let mut s = session(t0);
        s.handle_msg(t0, request(2)).unwrap();
        let (m, a) = drain(&mut s);
        assert!(m.is_empty());
        assert!(matches!(a[..], [ServerAction::Prepare(_)]));
        s.handle_prepared(t0, vec![]);
        let (m, _) = drain(&mut s);
        assert!(matches!(&m[..], [Msg::Accepted { pace_bps: None, .. }]));
        s.handle_stream(t0, 1).unwrap();
        assert!(drain(&mut s).0.is_empty());
        s.handle_stream(t0, 0).unwrap();
        assert_eq!(drain(&mut s).0, vec![Msg::Ready]);
        s.handle_msg(t0, Msg::Start).unwrap();
        assert_eq!(drain(&mut s).1, vec![ServerAction::StartWorkers]);
        // Running deadline is duration + grace.
        assert_eq!(s.poll_timeout(), Some(t0 + Duration::from_secs(15)));
        s.queue_interval(SideInterval::default());
        s.handle_msg(t0, Msg::Finish { report: SideReport::default() }).unwrap();
        let (m, a) = drain(&mut s);
        assert_eq!(m.len(), 1);
        assert_eq!(a, vec![ServerAction::Collect]);
        s.handle_local_report(SideReport::default());
        let (m, a) = drain(&mut s);
        assert!(matches!(&m[..], [Msg::Results { .. }]));
        assert_eq!(a, vec![ServerAction::Close]);
        assert!(s.is_finished() && !s.is_failed());
        assert_eq!(s.poll_timeout(), None);
    }

    #[test]
    fn refusals() {
        let t0 = Instant::now();
        let limits = Limits { max_streams: 4, max_duration_s: 10.0, max_rate_bps: Some(1_000_000), max_concurrent: 2 };
        let cases = [
            (request(5), 0, "--max-streams"),
            (request(2), 2, "busy"),
            (
                Msg::Request {
                    software: "c".into(),
                    spec: TestSpec { duration_s: Some(11.0), ..TestSpec::tcp(1, 1.0) },
                },
                0,
                "--max-duration",
            ),
            (
                Msg::Request {
                    software: "c".into(),
                    spec: TestSpec { rate_bps: Some(2_000_000), ..TestSpec::tcp(1, 1.0) },
                },
                0,
                "--max-rate",
            ),
            (request(0), 0, "streams must be"),
            // The cap is held by pacing TCP: QUIC and MPTCP tests cannot be held to it.
            (
                Msg::Request {
                    software: "c".into(),
                    spec: TestSpec {
                        transport: Transport::Quic,
                        quic_cert: Some("a".repeat(64)),
                        ..TestSpec::tcp(1, 1.0)
                    },
                },
                0,
                "no QUIC or MPTCP tests",
            ),
            (
                Msg::Request { software: "c".into(), spec: TestSpec { mptcp: true, ..TestSpec::tcp(1, 1.0) } },
                0,
                "no QUIC or MPTCP tests",
            ),
            (
                Msg::Request {
                    software: "c".into(),
                    spec: TestSpec { mptcp: true, rate_bps: Some(500_000), ..TestSpec::tcp(1, 1.0) },
                },
                0,
                "MPTCP tests are not paced",
            ),
        ];
        for (req, active, want) in cases {
            let mut s = ServerSession::new(
                t0,
                limits.clone(),
                Timeouts::default(),
                active,
                [0; 16],
                "t".into(),
                HostCapture::default(),
            );
            s.handle_msg(t0, req).unwrap();
            let (m, a) = drain(&mut s);
            match &m[..] {
                [Msg::Refused { reason }] => {
                    assert!(reason.contains(want), "{reason} lacks {want}")
                }
                other => panic!("{other:?}"),
            }
            assert!(matches!(a[..], [ServerAction::Abort(_)]));
            assert!(s.is_failed());
        }
    }

    #[test]
    fn max_rate_paces_tcp() {
        let t0 = Instant::now();
        let limits = Limits { max_rate_bps: Some(5_000_000), ..Limits::default() };
        let mut s = ServerSession::new(t0, limits, Timeouts::default(), 0, [0; 16], "t".into(), HostCapture::default());
        s.handle_msg(t0, request(1)).unwrap();
        s.handle_prepared(t0, vec![]);
        let (m, _) = drain(&mut s);
        assert!(matches!(&m[..], [Msg::Accepted { pace_bps: Some(5_000_000), .. }]));
    }

    #[test]
    fn every_error_path() {
        let t0 = Instant::now();
        // Unexpected message before request.
        let mut s = session(t0);
        assert!(matches!(s.handle_msg(t0, Msg::Start), Err(SessionError::Unexpected { got: "start", .. })));
        let (m, a) = drain(&mut s);
        assert!(matches!(&m[..], [Msg::Error { .. }]));
        assert!(matches!(a[..], [ServerAction::Abort(_)]));
        // Further input after failure is ignored.
        assert!(s.handle_msg(t0, Msg::Start).is_ok());

        // Request timeout.
        let mut s = session(t0);
        assert!(s.handle_timeout(t0 + Duration::from_secs(9)).is_ok());
        assert_eq!(
            s.handle_timeout(t0 + Duration::from_secs(10)),
            Err(SessionError::Timeout("waiting for the test request"))
        );

        // Bad and duplicate streams; stream before accept.
        let mut s = session(t0);
        assert!(s.handle_stream(t0, 0).is_err());
        let mut s = session(t0);
        s.handle_msg(t0, request(2)).unwrap();
        s.handle_prepared(t0, vec![]);
        assert_eq!(s.handle_stream(t0, 2), Err(SessionError::BadStream(2, 2)));
        let mut s = session(t0);
        s.handle_msg(t0, request(2)).unwrap();
        s.handle_prepared(t0, vec![]);
        s.handle_stream(t0, 0).unwrap();
        assert_eq!(s.handle_stream(t0, 0), Err(SessionError::DuplicateStream(0)));

        // Streams that keep arriving, each within the handshake timeout, are waited for however
        // long all of them take; a gap longer than it is not.
        let mut s = session(t0);
        s.handle_msg(t0, request(64)).unwrap();
        s.handle_prepared(t0, vec![]);
        for i in 0..63 {
            let t = t0 + Duration::from_millis(340 * (i + 1));
            assert_eq!(s.handle_timeout(t), Ok(()));
            s.handle_stream(t, i as u32).unwrap();
        }
        let last = t0 + Duration::from_millis(340 * 63);
        assert_eq!(s.handle_timeout(last + Duration::from_secs(9)), Ok(()));
        assert_eq!(
            s.handle_timeout(last + Duration::from_secs(11)),
            Err(SessionError::Timeout("waiting for data connections"))
        );

        // Streams never arrive.
        let mut s = session(t0);
        s.handle_msg(t0, request(2)).unwrap();
        s.handle_prepared(t0, vec![]);
        assert_eq!(
            s.handle_timeout(t0 + Duration::from_secs(11)),
            Err(SessionError::Timeout("waiting for data connections"))
        );

        // Client stalls while running: deadline is duration + grace.
        let mut s = session(t0);
        s.handle_msg(t0, request(1)).unwrap();
        s.handle_prepared(t0, vec![]);
        s.handle_stream(t0, 0).unwrap();
        s.handle_msg(t0, Msg::Start).unwrap();
        assert!(s.handle_timeout(t0 + Duration::from_secs(14)).is_ok());
        assert!(s.handle_timeout(t0 + Duration::from_secs(15)).is_err());

        // Peer error, closed connection, prepare failure.
        let mut s = session(t0);
        assert_eq!(
            s.handle_msg(t0, Msg::Error { message: "boom".into() }),
            Err(SessionError::PeerError("boom".into()))
        );
        let mut s = session(t0);
        s.handle_msg(t0, request(1)).unwrap();
        assert!(matches!(s.handle_closed(), Some(SessionError::Closed(_))));
        assert!(s.handle_closed().is_none());
        let mut s = session(t0);
        s.handle_msg(t0, request(1)).unwrap();
        drain(&mut s);
        s.handle_prepare_failed("no ports".into());
        assert!(matches!(&drain(&mut s).0[..], [Msg::Refused { .. }]));

        // A second request mid-test is a violation.
        let mut s = session(t0);
        s.handle_msg(t0, request(1)).unwrap();
        s.handle_prepared(t0, vec![]);
        assert!(s.handle_msg(t0, request(1)).is_err());
    }
}
