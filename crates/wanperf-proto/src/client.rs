//! The client's side of one test, as a sans-IO state machine (the mirror of
//! [`crate::server::ServerSession`]).

use crate::auth::{nonce_from_hex, AuthError, PrivateKey};
use crate::data::{cookie_from_hex, Cookie};
use crate::msg::{HostCapture, Msg, SideInterval, SideReport, TestSpec};
use crate::server::SessionError;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the I/O layer must do for the client session.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientAction {
    /// Open the data connections (or UDP flows), then call
    /// [`ClientSession::handle_streams_connected`].
    Connect {
        /// Cookie for the hellos.
        cookie: Cookie,
        /// Server UDP ports (UDP tests).
        udp_ports: Vec<u16>,
        /// Pacing cap the server imposes, bit/s.
        pace_bps: Option<u64>,
        /// QUIC tests: the server certificate's fingerprint (its endpoint's port is
        /// `udp_ports[0]`).
        quic_cert: Option<String>,
        /// MPTCP tests: the port of the server's listener for them.
        data_port: Option<u16>,
    },
    /// Start the data workers now.
    StartWorkers,
    /// The test is over (well or not): stop everything.
    Close,
}

/// Things the client learns that the user wants to see.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEvent {
    /// The server admitted the test.
    Accepted {
        /// Server software.
        software: String,
        /// Server host capture.
        host: HostCapture,
    },
    /// The server's samples for an interval.
    RemoteInterval(SideInterval),
    /// The server's final report.
    Results(SideReport),
    /// A message of the copy's own exchange.
    Copy(wanperf_copy::spec::CopyMsg),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    AwaitAccept,
    Connecting,
    AwaitReady,
    Running,
    AwaitResults,
    Done,
    Failed,
}

impl State {
    fn describe(self) -> &'static str {
        match self {
            State::AwaitAccept => "waiting for the server to accept the test",
            State::Connecting => "opening data connections",
            State::AwaitReady => "waiting for the server to see the data connections",
            State::Running => "running the test",
            State::AwaitResults => "waiting for the server's results",
            State::Done => "finished",
            State::Failed => "failed",
        }
    }
}

/// One test, client side.
#[derive(Debug)]
pub struct ClientSession {
    state: State,
    spec: TestSpec,
    handshake: Duration,
    grace: Duration,
    deadline: Option<Instant>,
    out: VecDeque<Msg>,
    actions: VecDeque<ClientAction>,
    events: VecDeque<ClientEvent>,
    refused: Option<String>,
    key: Option<Arc<PrivateKey>>,
    challenged: bool,
}

impl ClientSession {
    /// Starts a test: queues the request.
    pub fn new(now: Instant, spec: TestSpec, software: String, handshake: Duration, grace: Duration) -> Self {
        let mut out = VecDeque::new();
        out.push_back(Msg::Request { software, spec: spec.clone() });
        ClientSession {
            state: State::AwaitAccept,
            spec,
            handshake,
            grace,
            deadline: Some(now + handshake),
            out,
            actions: VecDeque::new(),
            events: VecDeque::new(),
            refused: None,
            key: None,
            challenged: false,
        }
    }

    /// Proves possession of `key` when the server asks (servers with authorized keys).
    pub fn with_key(mut self, key: Arc<PrivateKey>) -> Self {
        self.key = Some(key);
        self
    }

    /// Next message to send.
    pub fn poll_transmit(&mut self) -> Option<Msg> {
        self.out.pop_front()
    }

    /// Next action for the I/O layer.
    pub fn poll_action(&mut self) -> Option<ClientAction> {
        self.actions.pop_front()
    }

    /// Next event for the user.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }

    /// When [`Self::handle_timeout`] is due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.deadline
    }

    /// Whether the session ended.
    pub fn is_finished(&self) -> bool {
        matches!(self.state, State::Done | State::Failed)
    }

    /// Whether the test ran to its end and the results are in.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// The server's refusal, if it refused.
    pub fn refusal(&self) -> Option<&str> {
        self.refused.as_deref()
    }

    fn fail(&mut self, err: SessionError, tell_peer: bool) -> SessionError {
        if !self.is_finished() {
            if tell_peer {
                self.out.push_back(Msg::Error { message: err.to_string() });
            }
            self.actions.push_back(ClientAction::Close);
            self.state = State::Failed;
            self.deadline = None;
        }
        err
    }

    /// A control message arrived.
    pub fn handle_msg(&mut self, now: Instant, msg: Msg) -> Result<(), SessionError> {
        match (self.state, msg) {
            (
                State::AwaitAccept,
                Msg::Accepted { cookie, software, host, udp_ports, pace_bps, quic_cert, data_port },
            ) => {
                let Some(cookie) = cookie_from_hex(&cookie) else {
                    return Err(self.fail(SessionError::Local("server sent a malformed cookie".into()), true));
                };
                if self.spec.transport == crate::msg::Transport::Udp
                    && udp_ports.len() != self.spec.connections() as usize
                {
                    return Err(
                        self.fail(SessionError::Local("server sent the wrong number of UDP ports".into()), true)
                    );
                }
                if self.spec.transport == crate::msg::Transport::Quic && (udp_ports.len() != 1 || quic_cert.is_none()) {
                    return Err(self.fail(
                        SessionError::Local("server sent no QUIC port and certificate for a QUIC test".into()),
                        true,
                    ));
                }
                if self.spec.mptcp && data_port.is_none() {
                    return Err(self.fail(
                        SessionError::Local("server sent no MPTCP port for an MPTCP test (an older server?)".into()),
                        true,
                    ));
                }
                self.events.push_back(ClientEvent::Accepted { software, host });
                self.actions.push_back(ClientAction::Connect { cookie, udp_ports, pace_bps, quic_cert, data_port });
                self.state = State::Connecting;
                self.deadline = Some(now + self.handshake);
                Ok(())
            }
            (State::AwaitAccept, Msg::Challenge { nonce }) if !self.challenged => {
                self.challenged = true;
                let Some(nonce) = nonce_from_hex(&nonce) else {
                    return Err(self.fail(SessionError::Local("server sent a malformed challenge".into()), true));
                };
                let Some(key) = self.key.clone() else {
                    return Err(self.fail(SessionError::Local(AuthError::NoKey.to_string()), true));
                };
                let spec = serde_json::to_string(&self.spec).expect("a spec always encodes");
                let signature = key.sign(&nonce, &spec);
                self.out.push_back(Msg::Auth { key: key.public().to_line(), spec, signature });
                Ok(())
            }
            (State::AwaitAccept, Msg::Refused { reason }) => {
                self.refused = Some(reason.clone());
                Err(self.fail(SessionError::PeerError(format!("server refused the test: {reason}")), false))
            }
            (State::AwaitReady, Msg::Ready) => {
                self.out.push_back(Msg::Start);
                self.actions.push_back(ClientAction::StartWorkers);
                self.state = State::Running;
                let nominal = self.spec.duration_s.unwrap_or(crate::msg::MAX_DURATION_S);
                self.deadline = Some(now + Duration::from_secs_f64(nominal) + self.grace);
                Ok(())
            }
            (State::Running | State::AwaitResults, Msg::Interval(iv)) => {
                self.events.push_back(ClientEvent::RemoteInterval(iv));
                Ok(())
            }
            (State::Running | State::AwaitResults, Msg::Copy(m)) if self.spec.copy.is_some() => {
                self.events.push_back(ClientEvent::Copy(m));
                Ok(())
            }
            (State::AwaitResults, Msg::Results { report }) => {
                self.events.push_back(ClientEvent::Results(report));
                self.actions.push_back(ClientAction::Close);
                self.state = State::Done;
                self.deadline = None;
                Ok(())
            }
            (_, Msg::Error { message }) => Err(self.fail(SessionError::PeerError(message), false)),
            (State::Done | State::Failed, _) => Ok(()),
            (state, msg) => Err(self.fail(SessionError::Unexpected { got: msg.kind(), state: state.describe() }, true)),
        }
    }

    /// Queues a message of this end's copy (only while it runs).
    pub fn send_copy(&mut self, m: wanperf_copy::spec::CopyMsg) {
        if self.state == State::Running {
            self.out.push_back(Msg::Copy(m));
        }
    }

    /// Every data connection is open and has sent its hello.
    pub fn handle_streams_connected(&mut self, now: Instant) {
        if self.state == State::Connecting {
            self.state = State::AwaitReady;
            self.deadline = Some(now + self.handshake);
        }
    }

    /// Opening the data connections failed.
    pub fn handle_connect_failed(&mut self, reason: String) -> SessionError {
        self.fail(SessionError::Local(reason), true)
    }

    /// The client's own workers are done; tell the server and wait for its results.
    pub fn handle_local_done(&mut self, now: Instant, report: SideReport) {
        if self.state == State::Running {
            self.out.push_back(Msg::Finish { report });
            self.state = State::AwaitResults;
            // The server may wait a little for its own streams to drain before it reports.
            self.deadline = Some(now + self.grace);
        }
    }

    /// The user interrupted the test.
    pub fn abort(&mut self, why: &str) {
        if !self.is_finished() {
            self.out.push_back(Msg::Error { message: why.to_string() });
            self.actions.push_back(ClientAction::Close);
            self.state = State::Failed;
            self.deadline = None;
        }
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

    /// Time passed.
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
    use crate::data::cookie_hex;

    fn accepted() -> Msg {
        Msg::Accepted {
            cookie: cookie_hex(&[3; 16]),
            software: "s".into(),
            host: HostCapture::default(),
            udp_ports: vec![],
            pace_bps: None,
            quic_cert: None,
            data_port: None,
        }
    }

    fn new(t0: Instant) -> ClientSession {
        ClientSession::new(t0, TestSpec::tcp(1, 2.0), "c".into(), Duration::from_secs(5), Duration::from_secs(5))
    }

    #[test]
    fn happy_path() {
        let t0 = Instant::now();
        let mut c = new(t0);
        assert!(matches!(c.poll_transmit(), Some(Msg::Request { .. })));
        c.handle_msg(t0, accepted()).unwrap();
        assert!(matches!(c.poll_event(), Some(ClientEvent::Accepted { .. })));
        assert_eq!(
            c.poll_action(),
            Some(ClientAction::Connect {
                cookie: [3; 16],
                udp_ports: vec![],
                pace_bps: None,
                quic_cert: None,
                data_port: None
            })
        );
        c.handle_streams_connected(t0);
        c.handle_msg(t0, Msg::Ready).unwrap();
        assert_eq!(c.poll_transmit(), Some(Msg::Start));
        assert_eq!(c.poll_action(), Some(ClientAction::StartWorkers));
        assert_eq!(c.poll_timeout(), Some(t0 + Duration::from_secs(7)));
        c.handle_msg(t0, Msg::Interval(SideInterval::default())).unwrap();
        assert!(matches!(c.poll_event(), Some(ClientEvent::RemoteInterval(_))));
        c.handle_local_done(t0, SideReport::default());
        assert!(matches!(c.poll_transmit(), Some(Msg::Finish { .. })));
        c.handle_msg(t0, Msg::Interval(SideInterval::default())).unwrap();
        c.handle_msg(t0, Msg::Results { report: SideReport::default() }).unwrap();
        assert!(c.is_done());
        assert_eq!(c.poll_action(), Some(ClientAction::Close));
    }

    #[test]
    fn error_paths() {
        let t0 = Instant::now();
        let mut c = new(t0);
        assert!(c.handle_msg(t0, Msg::Refused { reason: "busy".into() }).is_err());
        assert_eq!(c.refusal(), Some("busy"));
        assert!(c.is_finished() && !c.is_done());

        let mut c = new(t0);
        assert!(matches!(c.handle_msg(t0, Msg::Ready), Err(SessionError::Unexpected { got: "ready", .. })));

        let mut c = new(t0);
        let bad = Msg::Accepted {
            cookie: "xyz".into(),
            software: "s".into(),
            host: HostCapture::default(),
            udp_ports: vec![],
            pace_bps: None,
            quic_cert: None,
            data_port: None,
        };
        assert!(c.handle_msg(t0, bad).is_err());

        let mut c = ClientSession::new(
            t0,
            TestSpec { transport: crate::msg::Transport::Udp, rate_bps: Some(1), ..TestSpec::tcp(2, 1.0) },
            "c".into(),
            Duration::from_secs(5),
            Duration::from_secs(5),
        );
        assert!(c.handle_msg(t0, accepted()).is_err(), "UDP accept without ports");

        let mut c = new(t0);
        assert!(c.handle_timeout(t0 + Duration::from_secs(5)).is_err());

        let mut c = new(t0);
        c.handle_msg(t0, accepted()).unwrap();
        assert!(matches!(c.handle_closed(), Some(SessionError::Closed(_))));

        let mut c = new(t0);
        c.handle_msg(t0, accepted()).unwrap();
        c.handle_streams_connected(t0);
        c.handle_msg(t0, Msg::Ready).unwrap();
        assert!(c.handle_msg(t0, Msg::Results { report: SideReport::default() }).is_err(), "results before finish");

        let mut c = new(t0);
        c.handle_msg(t0, accepted()).unwrap();
        c.handle_streams_connected(t0);
        c.handle_msg(t0, Msg::Ready).unwrap();
        assert!(c.handle_msg(t0, Msg::Error { message: "server stopping".into() }).is_err());

        let mut c = new(t0);
        c.poll_transmit();
        c.abort("interrupted");
        assert!(matches!(c.poll_transmit(), Some(Msg::Error { .. })));
        assert!(c.is_finished());
    }
}
