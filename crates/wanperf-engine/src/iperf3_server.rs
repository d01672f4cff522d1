//! `wanperf serve --iperf3-port`: iperf3 clients (`iperf3 -c`) test against wanperf's stream
//! workers. Like an iperf3 server, the port runs one test at a time and answers others
//! "busy"; wanperf's --allow, --max-duration, --max-streams and --max-rate apply, and
//! refusals go back as iperf3 error codes, so the client prints one line for them.

use crate::opts::SockOpts;
use crate::server::{Log, ServerConfig};
use crate::stream::{Conn, Peer, Side, StreamPlan};
use socket2::{Domain, Protocol, SockRef, Socket, Type};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use wanperf_iperf3::results::{Baseline, End};
use wanperf_iperf3::wire::{self, State, COOKIE_LEN, MAX_PARAMS_LEN, UDP_CONNECT_REPLY};
use wanperf_iperf3::{errors, Params, Results};
use wanperf_proto::msg::{Role, TestSpec, Transport};
use wanperf_proto::record::{Merger, Only};
use wanperf_proto::units;

/// The test in progress: its cookie, and where its data connections go.
struct Active {
    cookie: [u8; COOKIE_LEN],
    data: mpsc::Sender<TcpStream>,
}

struct Shared {
    cfg: ServerConfig,
    local: SocketAddr,
    active: Mutex<Option<Active>>,
    stop: Arc<AtomicBool>,
    log: Log,
}

/// Serves iperf3 clients on `listener` until `stop` is set; returns the accept thread.
pub fn spawn(listener: TcpListener, cfg: ServerConfig, stop: Arc<AtomicBool>, log: Log) -> io::Result<JoinHandle<()>> {
    let local = listener.local_addr()?;
    let shared = Arc::new(Shared { cfg, local, active: Mutex::new(None), stop, log });
    std::thread::Builder::new().name("wanperf-iperf3".into()).spawn(move || accept_loop(&listener, &shared))
}

fn accept_loop(listener: &TcpListener, sh: &Arc<Shared>) {
    let mut workers: Vec<JoinHandle<()>> = Vec::new();
    while !sh.stop.load(Ordering::Acquire) {
        let ready = matches!(wanperf_sys::poll_one(listener, libc::POLLIN, 100), Ok(true));
        workers.retain(|h| !h.is_finished());
        if !ready {
            continue;
        }
        let Ok((s, peer)) = listener.accept() else {
            continue;
        };
        // Strangers may not hold threads: cap connections in handshake like the main port.
        if workers.len() >= sh.cfg.gate.max_pending as usize {
            continue;
        }
        let sh2 = sh.clone();
        if let Ok(h) =
            std::thread::Builder::new().name("wanperf-iperf3-conn".into()).spawn(move || connection(s, peer, &sh2))
        {
            workers.push(h);
        }
    }
    for h in workers {
        let _ = h.join();
    }
}

fn connection(mut s: TcpStream, peer: SocketAddr, sh: &Arc<Shared>) {
    let hs = sh.cfg.timeouts.handshake;
    let _ = s.set_read_timeout(Some(hs));
    let _ = s.set_write_timeout(Some(hs));
    let mut cookie = [0u8; COOKIE_LEN];
    if s.read_exact(&mut cookie).is_err() || wire::check_cookie(&cookie).is_err() {
        return;
    }
    let data = {
        let Ok(mut g) = sh.active.lock() else {
            return;
        };
        match g.as_ref() {
            Some(a) if a.cookie == cookie => {
                let _ = a.data.send(s);
                return;
            }
            Some(_) => {
                // iperf3's "busy" answer; the client says the server is running a test.
                let _ = s.write_all(&[State::AccessDenied.byte()]);
                return;
            }
            None => {
                let (tx, rx) = mpsc::channel();
                *g = Some(Active { cookie, data: tx });
                rx
            }
        }
    };
    if let Err(why) = run_test(&mut s, peer, sh, &data, &cookie) {
        (sh.log)(&format!("iperf3 client {peer}: {why}"));
    }
    release(sh, &cookie);
}

/// Frees the server for the next test if the test holding it is still `cookie`'s.
fn release(sh: &Shared, cookie: &[u8; COOKIE_LEN]) {
    if let Ok(mut g) = sh.active.lock() {
        if g.as_ref().is_some_and(|a| &a.cookie == cookie) {
            *g = None;
        }
    }
}

fn refuse(s: &mut TcpStream, code: i32, why: String) -> Result<(), String> {
    let _ = s.write_all(&wire::server_error_bytes(code, 0));
    Err(why)
}

fn read_json<T: serde::de::DeserializeOwned>(s: &mut TcpStream, max: usize) -> Result<T, String> {
    let mut h = [0u8; 4];
    s.read_exact(&mut h).map_err(|e| format!("no JSON: {e}"))?;
    let len = wire::json_len(h, max).map_err(|e| e.to_string())?;
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).map_err(|e| format!("JSON cut short: {e}"))?;
    wire::parse_json(&body).map_err(|e| e.to_string())
}

fn run_test(
    s: &mut TcpStream,
    peer: SocketAddr,
    sh: &Shared,
    data: &mpsc::Receiver<TcpStream>,
    cookie: &[u8; COOKIE_LEN],
) -> Result<(), String> {
    let _ = s.set_nodelay(true);
    if !sh.cfg.allowed(peer.ip()) {
        return refuse(s, errors::AUTH_TEST, "refused: not in --allow".into());
    }
    s.write_all(&[State::ParamExchange.byte()]).map_err(|e| e.to_string())?;
    let params: Params = read_json(s, MAX_PARAMS_LEN)?;
    let spec = match params.to_spec(1.0) {
        Ok(spec) => spec,
        Err(e) => return refuse(s, e.code(), format!("refused: {e}")),
    };
    if let Err(why) = sh.cfg.limits.admit(&spec, 0) {
        use wanperf_proto::server::Refusal;
        let code = match why {
            Refusal::Streams { .. } => errors::NUM_STREAMS,
            Refusal::Duration { .. } => errors::DURATION,
            Refusal::Rate { .. } => errors::TOTAL_RATE,
            Refusal::Spec(_) | Refusal::Busy { .. } | Refusal::Uncapped { .. } => errors::RECV_PARAMS,
        };
        return refuse(s, code, format!("refused: {why}"));
    }
    let version = params.client_version.clone().unwrap_or_else(|| "unknown".into());
    let conns = match open_streams(s, peer, sh, &spec, &params, data) {
        Ok(c) => c,
        Err(e) => return refuse(s, 203, format!("streams not connected: {e}")),
    };
    s.write_all(&[State::TestStart.byte(), State::TestRunning.byte()]).map_err(|e| e.to_string())?;
    let start = Instant::now();
    // Senders run until the client's TEST_END; the limits end a test that overstays.
    let limit = start
        + Duration::from_secs_f64(
            spec.duration_s.unwrap_or(sh.cfg.limits.max_duration_s).min(sh.cfg.limits.max_duration_s),
        )
        + sh.cfg.timeouts.grace;
    let mut conns = conns;
    for (p, _) in &mut conns {
        p.deadline = Some(limit);
        p.expected_end = Some(limit);
    }
    let mut side = Side::start(conns, Duration::from_secs_f64(spec.interval_s), true, Arc::new(|| {}))
        .map_err(|e| format!("cannot start the streams: {e}"))?;
    let mut merger = Merger::one_ended(spec.clone(), Only::Remote);
    let ended = loop {
        if let Some(iv) = side.tick(Instant::now()) {
            merger.push_remote(iv);
        }
        while merger.poll().is_some() {}
        if sh.stop.load(Ordering::Acquire) {
            let _ = s.write_all(&[State::ServerTerminate.byte()]);
            break Err("the server is stopping".to_string());
        }
        if Instant::now() >= limit {
            let _ = s.write_all(&wire::server_error_bytes(errors::DURATION_EXPIRED, 0));
            break Err("ended: it ran past --max-duration".to_string());
        }
        let wait = crate::stream::wait_before(Some(limit), Some(&side)).max(Duration::from_millis(1));
        let _ = s.set_read_timeout(Some(wait));
        let mut b = [0u8; 1];
        match s.read(&mut b) {
            Ok(0) => break Err("the client closed the control connection during the test".to_string()),
            Ok(_) => match State::from_byte(b[0]) {
                Some(State::TestEnd) => break Ok(()),
                Some(State::ClientTerminate) => break Err("the client terminated the test".to_string()),
                other => break Err(format!("unexpected control byte {other:?} during the test")),
            },
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => break Err(format!("control connection: {e}")),
        }
    };
    side.stop();
    let (last, report) = side.finish(Duration::from_secs(2));
    merger.push_remote(last);
    ended?;
    let _ = s.set_read_timeout(Some(sh.cfg.timeouts.handshake));
    s.write_all(&[State::ExchangeResults.byte()]).map_err(|e| e.to_string())?;
    let _client: Results = read_json(s, 1 << 20)?;
    let (_, base) = merger.baseline();
    let base: Vec<Baseline> =
        base.into_iter().map(|(sent, received, retransmits)| Baseline { sent, received, retransmits }).collect();
    let moved: u64 = report.streams.iter().map(|x| x.bytes).sum();
    let secs = report.streams.iter().map(|x| x.duration_s).fold(0.0, f64::max);
    let line = format!(
        "{}: {} {} stream(s) for iperf3 {version} at {peer}, {} moved in {secs:.2} s ({})",
        sh.cfg.software,
        if spec.transport == Transport::Udp { "UDP" } else { "TCP" },
        spec.connections(),
        units::fmt_bytes(moved),
        units::fmt_rate(if secs > 0.0 { moved as f64 * 8.0 / secs } else { 0.0 })
    );
    let output = params.get_server_output.filter(|v| *v != 0).map(|_| format!("{line}\n"));
    let ours = Results::from_report(&spec, End::Server, &report, &base, output);
    s.write_all(&wire::json_frame(&ours)).map_err(|e| e.to_string())?;
    // The test is over: a client that starts the next one as soon as this one has its results
    // is not told the server is busy while this thread waits for IPERF_DONE.
    release(sh, cookie);
    s.write_all(&[State::DisplayResults.byte()]).map_err(|e| e.to_string())?;
    let mut done = [0u8; 1];
    let _ = s.read_exact(&mut done);
    (sh.log)(&line);
    Ok(())
}

fn open_streams(
    ctrl: &mut TcpStream,
    peer: SocketAddr,
    sh: &Shared,
    spec: &TestSpec,
    params: &Params,
    data: &mpsc::Receiver<TcpStream>,
) -> Result<Vec<(StreamPlan, Conn)>, String> {
    let hs = sh.cfg.timeouts.handshake;
    let plan = |id: u32| {
        let role = spec.client_role(id).opposite();
        StreamPlan::new(spec, id, role, 0, Peer::Iperf3 { counters64: params.counters64() })
    };
    let mut out = Vec::new();
    match spec.transport {
        // iperf3's parameters never ask for it.
        Transport::Quic => return Err("iperf3's protocol has no QUIC".into()),
        Transport::Tcp => {
            ctrl.write_all(&[State::CreateStreams.byte()]).map_err(|e| e.to_string())?;
            for id in 0..spec.connections() {
                let s = data
                    .recv_timeout(hs)
                    .map_err(|_| format!("data connection {id} did not come within {} s", hs.as_secs_f64()))?;
                let p = plan(id);
                let sock = Socket::from(s);
                let pace = if p.role == Role::Sender { spec.sender_pace(sh.cfg.limits.max_rate_bps) } else { None };
                let opts = SockOpts {
                    window: spec.window,
                    cc: spec.cc.clone(),
                    dscp: spec.dscp,
                    pace_bps: pace,
                    ..Default::default()
                };
                opts.apply(&sock, peer.is_ipv6(), "the server").map_err(|e| e.to_string())?;
                let _ = sock.set_read_timeout(None);
                let _ = sock.set_write_timeout(None);
                out.push((p, Conn::Tcp(sock)));
            }
        }
        Transport::Udp => {
            // The client's connect datagrams reach a socket on our port; each is then tied
            // to its sender and a fresh one waits for the next flow, as iperf3 does.
            let mut sock = udp_on(sh.local)?;
            ctrl.write_all(&[State::CreateStreams.byte()]).map_err(|e| e.to_string())?;
            let give_up = Instant::now() + hs;
            for id in 0..spec.connections() {
                let mut buf = [0u8; 64];
                let from = loop {
                    let left = give_up.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(format!("UDP flow {id} did not connect within {} s", hs.as_secs_f64()));
                    }
                    let _ = sock.set_read_timeout(Some(left.min(Duration::from_millis(200))));
                    match sock.recv_from(&mut buf) {
                        Ok((4, from)) if from.ip().to_canonical() == peer.ip().to_canonical() => break from,
                        _ => continue,
                    }
                };
                sock.connect(from).map_err(|e| e.to_string())?;
                crate::opts::size_udp_buffers(&SockRef::from(&sock), spec.window);
                if let Some(d) = spec.dscp {
                    let _ = crate::sys::set_dscp(&SockRef::from(&sock), from.is_ipv6(), d);
                }
                // The next flow's socket must exist before the reply: the client sends its
                // next connect datagram as soon as the reply arrives.
                let next = udp_on(sh.local)?;
                sock.send(&UDP_CONNECT_REPLY).map_err(|e| e.to_string())?;
                let _ = sock.set_read_timeout(None);
                out.push((plan(id), Conn::Udp(std::mem::replace(&mut sock, next))));
            }
        }
    }
    Ok(out)
}

/// A UDP socket on the server's address and port, shared with the flows already tied to
/// their clients (SO_REUSEADDR on every one; connected sockets win the kernel's lookup).
fn udp_on(local: SocketAddr) -> Result<UdpSocket, String> {
    let s = Socket::new(Domain::for_address(local), Type::DGRAM, Some(Protocol::UDP)).map_err(|e| e.to_string())?;
    if local.is_ipv6() {
        let _ = s.set_only_v6(false);
    }
    s.set_reuse_address(true).map_err(|e| e.to_string())?;
    s.bind(&local.into()).map_err(|e| format!("cannot bind UDP {local}: {e}"))?;
    Ok(s.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::Gate;

    /// A control connection that has sent a fresh cookie.
    fn client(addr: SocketAddr, seed: u8) -> (TcpStream, [u8; COOKIE_LEN]) {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let cookie = wire::make_cookie(&[seed; 36]);
        s.write_all(&cookie).unwrap();
        (s, cookie)
    }

    fn state(s: &mut TcpStream) -> Option<State> {
        let mut b = [0u8; 1];
        s.read_exact(&mut b).unwrap();
        State::from_byte(b[0])
    }

    #[test]
    fn one_test_at_a_time_and_the_next_client_is_let_in_once_a_test_has_its_results() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let cfg = ServerConfig {
            limits: Default::default(),
            timeouts: Default::default(),
            allow: vec![],
            software: "t".into(),
            auth: None,
            gate: Gate::default(),
            copy_root: None,
            data_ports: None,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let server = spawn(listener, cfg, stop.clone(), Arc::new(|_: &str| {})).unwrap();

        let (mut a, cookie) = client(addr, b'a');
        assert_eq!(state(&mut a), Some(State::ParamExchange));
        let params = Params { tcp: true, time: 1, parallel: 1, len: Some(128 << 10), ..Default::default() };
        a.write_all(&wire::json_frame(&params)).unwrap();
        assert_eq!(state(&mut a), Some(State::CreateStreams));
        let mut data = TcpStream::connect(addr).unwrap();
        data.write_all(&cookie).unwrap();
        assert_eq!(state(&mut a), Some(State::TestStart));
        assert_eq!(state(&mut a), Some(State::TestRunning));
        // While a test runs, another client hears "busy".
        let (mut b, _) = client(addr, b'b');
        assert_eq!(state(&mut b), Some(State::AccessDenied));

        a.write_all(&[State::TestEnd.byte()]).unwrap();
        assert_eq!(state(&mut a), Some(State::ExchangeResults));
        a.write_all(&wire::json_frame(&Results::default())).unwrap();
        let mut h = [0u8; 4];
        a.read_exact(&mut h).unwrap();
        let mut theirs = vec![0u8; wire::json_len(h, 1 << 20).unwrap()];
        a.read_exact(&mut theirs).unwrap();
        assert_eq!(state(&mut a), Some(State::DisplayResults));
        // The first client has its results but has not said IPERF_DONE yet: a client that
        // starts the next test at once gets it, not "busy".
        let (mut c, _) = client(addr, b'c');
        assert_eq!(state(&mut c), Some(State::ParamExchange));

        a.write_all(&[State::IperfDone.byte()]).unwrap();
        drop((a, b, c, data));
        stop.store(true, Ordering::Release);
        server.join().unwrap();
    }
}
