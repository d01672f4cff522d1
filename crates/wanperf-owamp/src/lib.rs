//! OWAMP, the One-Way Active Measurement Protocol (RFC 4656), sans I/O.
//!
//! A client asks a server, over a TCP control connection (port 861), for test sessions in
//! either direction; the sender sends numbered, timestamped UDP packets on a schedule both
//! ends can compute; the receiver keeps a record per packet (send and receive times, TTL) and
//! the client fetches the records of sessions the server received. This crate holds the
//! control messages ([`control`]), the schedules and RFC 4656's exponential generator
//! ([`schedule`]) and the receiver's bookkeeping ([`receiver`]); `wanperf_engine::owamp` puts
//! them on sockets. Only the unauthenticated mode is implemented: its messages carry zeroed
//! HMAC blocks, which peers in that mode neither fill nor check.
//!
//! Test packets are STAMP's unauthenticated sender layout without the SSID (sequence number,
//! timestamp, error estimate, padding): [`wanperf_stamp::packet::Test`] reads and writes
//! them.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod control;
pub mod receiver;
pub mod schedule;

/// OWAMP's control port (IANA).
pub const OWAMP_PORT: u16 = 861;

/// Runs one control stream through every reader, asserting what must hold (the cargo-fuzz
/// target `owamp_control` and its corpus replay): whatever reads as a message writes back to
/// octets that read as the same message; nothing panics or allocates past the readers' bounds.
pub fn exercise(data: &[u8]) {
    use control::*;
    fn back<T: PartialEq + std::fmt::Debug>(
        p: Parsed<T>,
        enc: impl Fn(&T) -> Vec<u8>,
        parse: impl Fn(&[u8]) -> Parsed<T>,
    ) {
        if let Ok(Some((m, used))) = p {
            assert!(used > 0);
            let b = enc(&m);
            assert_eq!(parse(&b), Ok(Some((m, b.len()))));
        }
    }
    back(Greeting::parse(data), Greeting::encode, Greeting::parse);
    back(SetupResponse::parse(data), SetupResponse::encode, SetupResponse::parse);
    back(ServerStart::parse(data), ServerStart::encode, ServerStart::parse);
    back(RequestSession::parse(data), RequestSession::encode, RequestSession::parse);
    back(AcceptSession::parse(data), AcceptSession::encode, AcceptSession::parse);
    back(StopSessions::parse(data), StopSessions::encode, StopSessions::parse);
    back(FetchSession::parse(data), FetchSession::encode, FetchSession::parse);
    back(Fetched::parse(data), Fetched::encode, Fetched::parse);
    // A request a server would accept gives a receiver and a sender that agree on the times.
    if let Ok(Some((r, _))) = RequestSession::parse(data) {
        if r.packets <= 1000 {
            if let (Some(rx), Some(tx)) = (receiver::Receiver::new(&r), receiver::Sender::new(&r)) {
                assert_eq!(tx.next_due().is_some(), r.packets > 0);
                assert!(rx.records(None).len() == r.packets as usize);
            }
        }
    }
}

/// A 32.32 fixed-point number of seconds (OWAMP's timeouts and schedule parameters).
pub fn secs_to_num64(s: f64) -> u64 {
    if s <= 0.0 || !s.is_finite() {
        0
    } else {
        (s * 4_294_967_296.0).round().min(u64::MAX as f64) as u64
    }
}

/// A 32.32 fixed-point number of seconds as seconds.
pub fn num64_to_secs(n: u64) -> f64 {
    n as f64 / 4_294_967_296.0
}

/// The product of two 32.32 numbers, truncated (as the reference implementation computes it).
pub fn num64_mul(a: u64, b: u64) -> u64 {
    ((u128::from(a) * u128::from(b)) >> 32) as u64
}
