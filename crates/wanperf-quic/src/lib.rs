//! QUIC as a throughput transport (`wanperf tput --quic`), on quinn.
//!
//! A QUIC test runs under wanperf's control protocol like a TCP one: the control connection
//! admits the test (with the client's Ed25519 key where the server asks for one) and hands
//! out the test's cookie; each data stream is then a bidirectional QUIC stream that starts with
//! the 32-byte data hello, as a TCP data connection does, on a QUIC connection of its own or
//! sharing one with others of the test's streams. Nothing is trusted on either side without a pin:
//! - the client makes a certificate for the test and puts its SHA-256 fingerprint into the
//!   test's spec, which its key signs; the server accepts only a client presenting that
//!   certificate ([`tls::Pinned`]);
//! - the server makes a certificate for the test and sends its fingerprint in its answer; the
//!   client accepts only a server presenting it ([`tls::Pinned`]).
//!
//! [`stats`] turns the library's path statistics (RTT, congestion window, losses, congestion
//! events) into plain numbers, as TCP_INFO is for TCP. [`bulk`] holds the blocking bulk sender
//! and receiver the engine's stream threads run, and the endpoints.
#![forbid(unsafe_code)]

pub mod bulk;
pub mod stats;
pub mod tls;

pub use bulk::{accept_streams, connect, Accepted, QuicConn, QuicStream, Tuning};
pub use stats::PathSnapshot;
pub use tls::{fingerprint, TestCert};

use std::sync::OnceLock;

/// The one tokio runtime QUIC endpoints run on: two worker threads (the endpoints' drivers and
/// timers); the stream threads block on their own futures.
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("wanperf-quic")
            .enable_all()
            .build()
            .expect("a tokio runtime for QUIC")
    })
}

/// ALPN of wanperf's QUIC data connections.
pub const ALPN: &[u8] = b"wanperf-data/1";

/// Why a QUIC data connection could not be made or used.
#[derive(Debug, thiserror::Error)]
pub enum QuicError {
    /// TLS or certificate set-up.
    #[error("QUIC TLS set-up: {0}")]
    Tls(String),
    /// The socket or endpoint.
    #[error("QUIC endpoint: {0}")]
    Endpoint(String),
    /// The handshake or the connection.
    #[error("QUIC connection to {addr}: {why}")]
    Connect {
        /// The server's address.
        addr: std::net::SocketAddr,
        /// What failed.
        why: String,
    },
}
