//! Endpoints, data connections and the blocking bulk loops the engine's stream threads run.
//!
//! Each wanperf stream is a bidirectional QUIC stream: the client opens it and writes the
//! 32-byte data hello first; then the data flows one way (the test's direction) and the sender
//! finishes the stream. A connection carries [`Tuning::streams`] of them (one by default),
//! which then share its congestion controller. Each stream thread blocks on its own future;
//! the endpoints' drivers run on [`crate::runtime`].

use crate::stats::PathSnapshot;
use crate::tls::{client_tls, server_tls, TestCert};
use crate::QuicError;
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::{Endpoint, EndpointConfig, TokioRuntime, TransportConfig, VarInt};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a blocked read or write waits before the loop looks at its stop condition again.
const POLL: Duration = Duration::from_millis(100);
/// A connection silent this long is gone.
const IDLE: Duration = Duration::from_secs(10);
/// What a peer gets for its handshake and hello once its first packet arrived.
const HELLO_WITHIN: Duration = Duration::from_secs(5);

/// How often a sender re-sizes its send window to its congestion window.
const SEND_TUNE: Duration = Duration::from_millis(10);
/// The smallest send window a sender sizes (before the window grows, it is the window).
const MIN_SEND_WINDOW: u64 = 1 << 20;

/// What a test sets of its connections' transport.
#[derive(Debug, Clone)]
pub struct Tuning {
    /// The stream's flow-control window (QUIC's receive window; `-w`), bytes.
    pub window: u64,
    /// `-C`: quinn's congestion controller: cubic (its default), newreno (or reno), bbr.
    pub cc: Option<String>,
    /// Streams a connection carries (at least 1).
    pub streams: u32,
}

impl Tuning {
    /// Checks the congestion controller's name (one clear line for one we do not have).
    pub fn check(&self) -> Result<(), String> {
        match self.cc.as_deref() {
            None | Some("cubic" | "newreno" | "reno" | "bbr") => Ok(()),
            Some(other) => Err(format!("QUIC has no congestion control `{other}` (cubic, newreno or bbr)")),
        }
    }

    /// The flow-control window, within what QUIC can say.
    fn window(&self) -> u64 {
        self.window.clamp(64 << 10, (1 << 30) - 1)
    }

    /// A connection's largest send window: the window for each of its streams.
    fn send_most(&self) -> u64 {
        self.window() * u64::from(self.streams.max(1))
    }

    /// The congestion controller the connections run, as `--cc` named it (cubic without it).
    pub fn cc_name(&self) -> String {
        self.cc.clone().unwrap_or_else(|| "cubic".into())
    }

    fn transport(&self) -> TransportConfig {
        let mut t = TransportConfig::default();
        let window = self.window();
        let streams = u64::from(self.streams.max(1));
        t.stream_receive_window(VarInt::from_u64(window).unwrap_or(VarInt::MAX));
        // The connection's window never holds its streams back: each stream's flow control
        // is the window (`-w`), as each TCP connection's is.
        t.receive_window(VarInt::from_u64((streams + 1) * window).unwrap_or(VarInt::MAX));
        t.send_window(streams * window);
        t.max_idle_timeout(IDLE.try_into().ok());
        t.keep_alive_interval(Some(Duration::from_secs(2)));
        // The test's streams a connection, opened by the client.
        t.max_concurrent_bidi_streams(VarInt::from_u32(self.streams.max(1)));
        t.max_concurrent_uni_streams(VarInt::from_u32(0));
        match self.cc.as_deref() {
            Some("newreno" | "reno") => {
                t.congestion_controller_factory(Arc::new(quinn::congestion::NewRenoConfig::default()));
            }
            Some("bbr") => {
                t.congestion_controller_factory(Arc::new(quinn::congestion::BbrConfig::default()));
            }
            _ => {
                t.congestion_controller_factory(Arc::new(quinn::congestion::CubicConfig::default()));
            }
        }
        t
    }
}

fn endpoint(socket: UdpSocket, server: Option<quinn::ServerConfig>) -> Result<Endpoint, QuicError> {
    let _rt = crate::runtime().enter();
    Endpoint::new(EndpointConfig::default(), server, socket, Arc::new(TokioRuntime))
        .map_err(|e| QuicError::Endpoint(e.to_string()))
}

/// One data connection of a client, open for its streams ([`QuicConn::open`]).
pub struct QuicConn {
    conn: quinn::Connection,
    /// The connection's largest send window: the test's window for each of its streams.
    send_most: u64,
    /// Streams of this connection still receiving: the last one to finish closes it.
    live: Arc<AtomicUsize>,
    endpoint: Endpoint,
}

/// One data stream: its connection and its QUIC stream.
pub struct QuicStream {
    conn: quinn::Connection,
    send: quinn::SendStream,
    recv: quinn::RecvStream,
    /// Its connection's largest send window (the test's window for each of its streams; a
    /// connection's send window covers all of them).
    send_most: u64,
    live: Arc<AtomicUsize>,
    // The endpoint lives as long as its streams (a client's has no other owner).
    _endpoint: Endpoint,
}

impl std::fmt::Debug for QuicStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuicStream").field("remote", &self.conn.remote_address()).finish_non_exhaustive()
    }
}

/// A handle for sampling a stream's connection while its thread moves the data.
#[derive(Debug, Clone)]
pub struct Probe(quinn::Connection);

impl Probe {
    /// The congestion state and counters now.
    pub fn snapshot(&self) -> PathSnapshot {
        PathSnapshot::of(&self.0.stats())
    }

    /// Closes the connection (a stuck worker's reads and writes then fail).
    pub fn close(&self) {
        self.0.close(VarInt::from_u32(1), b"closed");
    }
}

impl QuicStream {
    /// A handle for sampling and closing.
    pub fn probe(&self) -> Probe {
        Probe(self.conn.clone())
    }

    /// The far end's address.
    pub fn remote(&self) -> SocketAddr {
        self.conn.remote_address()
    }

    /// Sends until `next` says stop: `next(total)` gives the size of the next write (None:
    /// the test's end); `moved(n)` counts what the stream took. At the end the stream is
    /// finished and, for at most `linger`, the loop waits until the receiver has it all. With
    /// `abort` set it resets the stream instead.
    pub fn send_bulk(
        &mut self,
        buf: &[u8],
        mut next: impl FnMut(u64) -> Option<usize>,
        mut moved: impl FnMut(usize),
        abort: &AtomicBool,
        linger: Duration,
    ) -> io::Result<()> {
        let send = &mut self.send;
        let conn = &self.conn;
        let most = self.send_most;
        crate::runtime().block_on(async {
            let mut total = 0u64;
            let mut tuned = Instant::now();
            while let Some(n) = next(total) {
                if tuned.elapsed() >= SEND_TUNE {
                    // As Linux sizes a TCP send buffer: twice the congestion window, so that
                    // what the test counts as sent is at most a window or so ahead of the
                    // network (a fixed 16 MiB would hold seconds of a slow path's data).
                    tuned = Instant::now();
                    let cwnd = conn.stats().path.cwnd;
                    conn.set_send_window(cwnd.saturating_mul(2).clamp(MIN_SEND_WINDOW.min(most), most));
                }
                if abort.load(Ordering::Acquire) {
                    let _ = send.reset(VarInt::from_u32(1));
                    return Ok(());
                }
                let n = n.min(buf.len());
                match tokio::time::timeout(POLL, send.write(&buf[..n])).await {
                    Ok(Ok(k)) => {
                        total += k as u64;
                        moved(k);
                    }
                    Ok(Err(e)) => return Err(io::Error::other(format!("QUIC stream: {e}"))),
                    Err(_) => {}
                }
            }
            let _ = send.finish();
            // Until the receiver has read it all (or stopped reading): what a TCP sender's
            // close leaves to the kernel.
            match tokio::time::timeout(linger, send.stopped()).await {
                Ok(Ok(None)) | Err(_) => Ok(()),
                // The receiver read it all and closed the connection (code 0) before the last
                // acknowledgement was seen: done as well.
                Ok(Err(quinn::StoppedError::ConnectionLost(quinn::ConnectionError::ApplicationClosed(c))))
                    if c.error_code == VarInt::from_u32(0) =>
                {
                    Ok(())
                }
                Ok(Ok(Some(code))) => Err(io::Error::other(format!("the receiver stopped the stream (code {code})"))),
                Ok(Err(e)) => Err(io::Error::other(format!("QUIC stream: {e}"))),
            }
        })
    }

    /// Receives until the sender finishes the stream (or `stop` is set), counting with
    /// `moved`. `discard` takes the data in place without copying it out.
    pub fn recv_bulk(
        &mut self,
        buf: &mut [u8],
        discard: bool,
        stop: &AtomicBool,
        mut moved: impl FnMut(usize),
    ) -> io::Result<()> {
        let recv = &mut self.recv;
        let conn = &self.conn;
        crate::runtime().block_on(async {
            while !stop.load(Ordering::Acquire) {
                let got = if discard {
                    match tokio::time::timeout(POLL, recv.read_chunk(usize::MAX, true)).await {
                        Ok(r) => r.map(|c| c.map(|c| c.bytes.len())),
                        Err(_) => continue,
                    }
                } else {
                    match tokio::time::timeout(POLL, recv.read(buf)).await {
                        Ok(r) => r,
                        Err(_) => continue,
                    }
                };
                match got {
                    Ok(Some(n)) => moved(n),
                    Ok(None) => {
                        // All of it: the sender's stream is finished. The connection's last
                        // stream to finish closes it, which tells the sender at once.
                        if self.live.fetch_sub(1, Ordering::AcqRel) == 1 {
                            conn.close(VarInt::from_u32(0), b"done");
                        }
                        return Ok(());
                    }
                    Err(e) => return Err(io::Error::other(format!("QUIC stream: {e}"))),
                }
            }
            Ok(())
        })
    }
}

/// Connects a data connection from `socket` to `server`, showing `ours` and accepting only
/// the server certificate `server_pin`; [`QuicConn::open`] then opens its streams.
pub fn connect(
    socket: UdpSocket,
    server: SocketAddr,
    ours: &TestCert,
    server_pin: &str,
    tuning: &Tuning,
    timeout: Duration,
) -> Result<QuicConn, QuicError> {
    let tls = client_tls(ours, server_pin)?;
    let crypto = QuicClientConfig::try_from(tls).map_err(|e| QuicError::Tls(e.to_string()))?;
    let mut cfg = quinn::ClientConfig::new(Arc::new(crypto));
    cfg.transport_config(Arc::new(tuning.transport()));
    let ep = endpoint(socket, None)?;
    let fail = |why: String| QuicError::Connect { addr: server, why };
    crate::runtime().block_on(async {
        let connecting = ep.connect_with(cfg, server, "wanperf").map_err(|e| fail(e.to_string()))?;
        let conn = match tokio::time::timeout(timeout, connecting).await {
            Ok(r) => r.map_err(|e| fail(e.to_string()))?,
            Err(_) => return Err(fail(format!("no handshake within {} s", timeout.as_secs_f64()))),
        };
        Ok(QuicConn { conn, send_most: tuning.send_most(), live: Arc::new(AtomicUsize::new(0)), endpoint: ep.clone() })
    })
}

impl QuicConn {
    /// Opens a stream of the connection and writes `hello` on it, within `timeout` (a server
    /// that takes fewer streams a connection than the test puts on one never lets it open).
    pub fn open(&self, hello: &[u8], timeout: Duration) -> Result<QuicStream, QuicError> {
        let fail = |why: String| QuicError::Connect { addr: self.conn.remote_address(), why };
        crate::runtime().block_on(async {
            let opened = async {
                let (mut send, recv) = self.conn.open_bi().await.map_err(|e| fail(e.to_string()))?;
                send.write_all(hello).await.map_err(|e| fail(e.to_string()))?;
                Ok((send, recv))
            };
            let (send, recv) = match tokio::time::timeout(timeout, opened).await {
                Ok(r) => r?,
                Err(_) => {
                    return Err(fail(format!("the server took no further stream within {} s", timeout.as_secs_f64())))
                }
            };
            self.live.fetch_add(1, Ordering::AcqRel);
            Ok(QuicStream {
                conn: self.conn.clone(),
                send,
                recv,
                send_most: self.send_most,
                live: self.live.clone(),
                _endpoint: self.endpoint.clone(),
            })
        })
    }
}

/// What [`accept_streams`] hands over: a stream and the hello it began with.
#[derive(Debug)]
pub struct Accepted {
    /// The 32-byte data hello.
    pub hello: [u8; 32],
    /// The stream, its hello read.
    pub stream: QuicStream,
}

/// A test's QUIC endpoint on `socket` (its certificate `ours`, the client's pinned): accepts
/// data connections from `peer` (the test's client; any other address is refused before it
/// takes a slot) and gives each of their streams, hello read, to `deliver` (which says whether
/// it wanted it), until `want` were wanted, `cancel` is set or `until` passes. A peer gets
/// [`HELLO_WITHIN`] for its handshake and each stream's hello (at most [`Tuning::streams`] a
/// connection); at most `2 × want + 4` handshakes run at once, more are refused.
#[allow(clippy::too_many_arguments)]
pub fn accept_streams(
    socket: UdpSocket,
    peer: std::net::IpAddr,
    ours: &TestCert,
    client_pin: &str,
    tuning: &Tuning,
    want: usize,
    mut deliver: impl FnMut(Accepted) -> bool,
    cancel: &AtomicBool,
    until: Instant,
) -> Result<(), QuicError> {
    let tls = server_tls(ours, client_pin)?;
    let crypto = QuicServerConfig::try_from(tls).map_err(|e| QuicError::Tls(e.to_string()))?;
    let mut cfg = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    cfg.transport_config(Arc::new(tuning.transport()));
    let ep = endpoint(socket, Some(cfg))?;
    let most = 2 * want + 4;
    crate::runtime().block_on(async {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Accepted>(most);
        let in_flight = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut got = 0;
        while got < want && !cancel.load(Ordering::Acquire) && Instant::now() < until {
            tokio::select! {
                incoming = ep.accept() => {
                    let Some(incoming) = incoming else { break };
                    let from = incoming.remote_address().ip().to_canonical();
                    if from != peer.to_canonical() || in_flight.load(Ordering::Acquire) >= most {
                        incoming.refuse();
                        continue;
                    }
                    in_flight.fetch_add(1, Ordering::AcqRel);
                    let (tx, ep, n, t) = (tx.clone(), ep.clone(), in_flight.clone(), tuning.clone());
                    tokio::spawn(async move {
                        streams_of(incoming, ep, &t, &tx, until).await;
                        n.fetch_sub(1, Ordering::AcqRel);
                    });
                }
                Some(a) = rx.recv() => {
                    if deliver(a) {
                        got += 1;
                    }
                }
                () = tokio::time::sleep(POLL) => {}
            }
        }
        // Streams that arrive after the last wanted one are not wanted.
        ep.set_server_config(None);
        Ok(())
    })
}

/// A connection's handshake (within [`HELLO_WITHIN`]) and its streams, sent on as they come:
/// each stream may open until `until` (the client makes its other connections meanwhile), and
/// has [`HELLO_WITHIN`] for its hello once open; a connection closed or past that ends it.
async fn streams_of(
    incoming: quinn::Incoming,
    ep: Endpoint,
    tuning: &Tuning,
    tx: &tokio::sync::mpsc::Sender<Accepted>,
    until: Instant,
) {
    let Ok(Ok(conn)) = tokio::time::timeout(HELLO_WITHIN, incoming).await else { return };
    let live = Arc::new(AtomicUsize::new(0));
    for _ in 0..tuning.streams.max(1) {
        let left = until.saturating_duration_since(Instant::now());
        let Ok(Ok((send, mut recv))) = tokio::time::timeout(left, conn.accept_bi()).await else { return };
        let mut hello = [0u8; 32];
        let Ok(Ok(())) = tokio::time::timeout(HELLO_WITHIN, recv.read_exact(&mut hello)).await else { return };
        live.fetch_add(1, Ordering::AcqRel);
        let stream = QuicStream {
            conn: conn.clone(),
            send,
            recv,
            send_most: tuning.send_most(),
            live: live.clone(),
            _endpoint: ep.clone(),
        };
        if tx.send(Accepted { hello, stream }).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp() -> UdpSocket {
        UdpSocket::bind("127.0.0.1:0").unwrap()
    }

    const LOCALHOST: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    fn tuning() -> Tuning {
        Tuning { window: 16 << 20, cc: None, streams: 1 }
    }

    /// What a test server's stream brought: its hello, its bytes, its connection's state.
    type Received = ([u8; 32], usize, PathSnapshot);

    /// A server thread taking `want` streams on a fresh socket; returns its address and the
    /// hellos with the bytes each stream received.
    fn server(client_pin: String, want: usize) -> (SocketAddr, String, std::thread::JoinHandle<Vec<Received>>) {
        server_with(client_pin, want, tuning())
    }

    fn server_with(
        client_pin: String,
        want: usize,
        t: Tuning,
    ) -> (SocketAddr, String, std::thread::JoinHandle<Vec<Received>>) {
        let ours = TestCert::generate().unwrap();
        let pin = ours.fingerprint.clone();
        let s = udp();
        let at = s.local_addr().unwrap();
        let h = std::thread::spawn(move || {
            let stop = AtomicBool::new(false);
            let mut streams = Vec::new();
            let until = Instant::now() + Duration::from_secs(3);
            let deliver = |a: Accepted| {
                streams.push(a);
                true
            };
            accept_streams(s, LOCALHOST, &ours, &client_pin, &t, want, deliver, &stop, until).unwrap();
            streams
                .into_iter()
                .map(|mut a| {
                    let mut total = 0;
                    let mut buf = vec![0u8; 65536];
                    a.stream.recv_bulk(&mut buf, false, &stop, |n| total += n).unwrap();
                    (a.hello, total, a.stream.probe().snapshot())
                })
                .collect()
        });
        (at, pin, h)
    }

    #[test]
    fn a_stream_carries_its_hello_and_all_its_bytes_over_loopback() {
        let ours = TestCert::generate().unwrap();
        let (at, pin, srv) = server(ours.fingerprint.clone(), 1);
        let hello = [7u8; 32];
        let c = connect(udp(), at, &ours, &pin, &tuning(), Duration::from_secs(5)).unwrap();
        let mut c = c.open(&hello, Duration::from_secs(5)).unwrap();
        let buf = vec![1u8; 65536];
        let mut sent = 0usize;
        let quota = 20u64 << 20;
        let next = |total: u64| (total < quota).then(|| (quota - total).min(65536) as usize);
        c.send_bulk(&buf, next, |n| sent += n, &AtomicBool::new(false), Duration::from_secs(5)).unwrap();
        let got = srv.join().unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, hello);
        assert_eq!(sent as u64, quota, "the sender wrote the quota");
        assert_eq!(got[0].1 as u64, quota, "the receiver read every byte before the stream ended");
        let snap = c.probe().snapshot();
        assert!(snap.rtt_us > 0 && snap.cwnd_bytes > 0 && snap.sent_packets > 0, "{snap:?}");
    }

    #[test]
    fn streams_sharing_a_connection_each_carry_their_own_bytes_and_one_speaks_for_it() {
        let ours = TestCert::generate().unwrap();
        let t = Tuning { streams: 2, ..tuning() };
        let (at, pin, srv) = server_with(ours.fingerprint.clone(), 2, t.clone());
        let c = connect(udp(), at, &ours, &pin, &t, Duration::from_secs(5)).unwrap();
        let wait = Duration::from_secs(5);
        let (mut a, mut b) = (c.open(&[1; 32], wait).unwrap(), c.open(&[2; 32], wait).unwrap());
        // A third is more than the server takes on one connection: the open gives up in time.
        let e = c.open(&[3; 32], Duration::from_millis(300)).unwrap_err();
        assert!(e.to_string().contains("no further stream"), "{e}");
        let buf = vec![0u8; 65536];
        for (s, quota) in [(&mut a, 4u64 << 20), (&mut b, 2 << 20)] {
            let next = |t: u64| (t < quota).then(|| (quota - t).min(65536) as usize);
            s.send_bulk(&buf, next, |_| {}, &AtomicBool::new(false), Duration::from_secs(5)).unwrap();
        }
        let mut got = srv.join().unwrap();
        got.sort_by_key(|g| g.0);
        let got: Vec<([u8; 32], usize)> = got.iter().map(|g| (g.0, g.1)).collect();
        assert_eq!(got, [([1; 32], 4 << 20), ([2; 32], 2 << 20)]);
        // One connection: both streams sample the same connection.
        assert_eq!(a.remote(), b.remote());
        assert_eq!(a.probe().snapshot().sent_packets, b.probe().snapshot().sent_packets);
    }

    #[test]
    fn a_client_showing_another_certificate_or_pinning_another_server_gets_no_stream() {
        let ours = TestCert::generate().unwrap();
        let other = TestCert::generate().unwrap();
        // The server expects `other`'s certificate; we show ours.
        let (at, pin, srv) = server(other.fingerprint.clone(), 1);
        let r = connect(udp(), at, &ours, &pin, &tuning(), Duration::from_secs(3))
            .and_then(|c| c.open(&[0; 32], Duration::from_secs(3)));
        // The client's handshake may complete before the server refuses the certificate; the
        // hello then fails or the stream dies: either way the server delivers nothing.
        drop(r);
        assert!(srv.join().unwrap().is_empty(), "the server took a stream from an unpinned client");
        // The client pins a fingerprint the server's certificate does not have.
        let (at, _pin, srv) = server(ours.fingerprint.clone(), 1);
        let err = connect(udp(), at, &ours, &other.fingerprint, &tuning(), Duration::from_secs(3))
            .and_then(|c| c.open(&[0; 32], Duration::from_secs(3)))
            .unwrap_err();
        assert!(err.to_string().contains("not the one its test announced"), "{err}");
        assert!(srv.join().unwrap().is_empty());
    }

    #[test]
    fn an_unknown_congestion_control_is_one_clear_line() {
        assert!(Tuning { cc: Some("bbr".into()), ..tuning() }.check().is_ok());
        let e = Tuning { cc: Some("vegas".into()), ..tuning() }.check().unwrap_err();
        assert!(e.contains("vegas") && e.contains("cubic"), "{e}");
    }

    #[test]
    fn garbage_datagrams_cost_nothing_and_the_real_stream_still_comes() {
        let ours = TestCert::generate().unwrap();
        let (at, pin, srv) = server(ours.fingerprint.clone(), 1);
        // Datagrams that look like QUIC long headers (Initial, version 1) with garbage after,
        // and short ones: each is dropped without state.
        let g = udp();
        for i in 0..5000u32 {
            let mut d = [0u8; 1200];
            d[0] = 0xc0;
            d[1..5].copy_from_slice(&1u32.to_be_bytes());
            d[5..9].copy_from_slice(&i.to_be_bytes());
            let len = if i % 2 == 0 { 1200 } else { 9 };
            let _ = g.send_to(&d[..len], at);
        }
        let c = connect(udp(), at, &ours, &pin, &tuning(), Duration::from_secs(5)).unwrap();
        let mut c = c.open(&[9; 32], Duration::from_secs(5)).unwrap();
        let buf = vec![0u8; 65536];
        let next = |t: u64| (t < 1 << 20).then_some(65536);
        c.send_bulk(&buf, next, |_| {}, &AtomicBool::new(false), Duration::from_secs(5)).unwrap();
        let got = srv.join().unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].0, got[0].1), ([9; 32], 1 << 20));
    }

    #[test]
    fn a_peer_silent_after_its_handshake_gets_no_stream_and_the_wait_ends_on_time() {
        let (ours, theirs) = (TestCert::generate().unwrap(), TestCert::generate().unwrap());
        let s = udp();
        let at = s.local_addr().unwrap();
        let pin = theirs.fingerprint.clone();
        let cpin = ours.fingerprint.clone();
        let t0 = Instant::now();
        let srv = std::thread::spawn(move || {
            let mut n = 0;
            let until = Instant::now() + Duration::from_secs(2);
            let stop = AtomicBool::new(false);
            accept_streams(
                s,
                LOCALHOST,
                &theirs,
                &cpin,
                &tuning(),
                1,
                |_| {
                    n += 1;
                    true
                },
                &stop,
                until,
            )
            .unwrap();
            n
        });
        // The right certificate, a finished handshake, then nothing: no stream, no hello.
        let tls = client_tls(&ours, &pin).unwrap();
        let mut cfg = quinn::ClientConfig::new(Arc::new(QuicClientConfig::try_from(tls).unwrap()));
        cfg.transport_config(Arc::new(tuning().transport()));
        let ep = endpoint(udp(), None).unwrap();
        let conn = crate::runtime().block_on(async { ep.connect_with(cfg, at, "wanperf").unwrap().await.unwrap() });
        assert_eq!(srv.join().unwrap(), 0, "a stream without a hello was delivered");
        let waited = t0.elapsed();
        assert!(waited < Duration::from_secs(4), "the wait for streams outlived its deadline: {waited:?}");
        drop(conn);
    }
}
