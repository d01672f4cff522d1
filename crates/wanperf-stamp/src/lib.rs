//! STAMP and TWAMP-Light, sans I/O.
//!
//! The Simple Two-Way Active Measurement Protocol (RFC 8762, with the optional extensions of
//! RFC 8972) and its predecessor TWAMP-Light (RFC 5357, appendix I) share one test packet: a
//! Session-Sender stamps and numbers a datagram, a Session-Reflector stamps its arrival and
//! its departure and sends it back. This crate holds everything about them that is not a
//! socket or a clock:
//!
//! - [`time`]: the 64-bit NTP and PTPv2 timestamps and the error estimate (RFC 4656 §4.1.2);
//! - [`packet`]: the sender's and the reflector's packets, unauthenticated (44 octets) and
//!   authenticated (112 octets, HMAC-SHA-256), with RFC 8972's Session-Sender Identifier;
//! - [`tlv`]: the RFC 8972 TLVs that matter for delay (extra padding, timestamp information,
//!   class of service, direct measurement, HMAC);
//! - [`reflector`]: what a reflector answers, stateless or stateful, with per-source rate
//!   limits and bounded state — the caller passes the receive and send times in;
//! - [`loss`]: loss each way from the reflector's sequence numbers or its counters.
//!
//! ```
//! use wanperf_stamp::packet::{Test, Reflected, Auth};
//! use wanperf_stamp::time::{ErrorEstimate, Format, to_wire};
//! let t = Test { seq: 7, timestamp: to_wire(1_700_000_000_000_000_000, Format::Ntp), error: ErrorEstimate::UNKNOWN, ssid: 0 };
//! let mut wire = Vec::new();
//! t.encode(&mut wire, &Auth::Open, &[], 44);
//! let (back, tlvs) = Test::decode(&wire, &Auth::Open).unwrap();
//! assert_eq!(back, t);
//! assert!(tlvs.tlvs.is_empty());
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod loss;
pub mod packet;
pub mod reflector;
pub mod time;
pub mod tlv;

/// Runs one datagram through every reader and the reflector, asserting what must hold (the
/// cargo-fuzz target `stamp_packet` and its corpus replay in the test suite): a test packet a
/// reflector answers reads back as its reflection, at least as long, the session's first; a
/// reflected packet that reads writes and reads back to the same fields.
pub fn exercise(data: &[u8]) {
    use packet::{Auth, Reflected, Test};
    use reflector::{Arrival, Config, Reflector};
    let key = Auth::Hmac(b"0123456789abcdef".to_vec());
    for auth in [Auth::Open, key] {
        let mut r = Reflector::new(Config { auth: auth.clone(), ..Config::default() });
        let from = std::net::SocketAddr::from(([198, 18, 0, 1], 9));
        let a = Arrival { from, packet: data, rx_ns: 1, ttl: Some(64), tos: None };
        if let Some(ans) = r.reflect(&a, 2) {
            assert!(ans.packet.len() >= data.len().max(auth.base_len()));
            let (t, _) = Test::decode(data, &auth).expect("a reflected test packet reads");
            let (p, _) = Reflected::decode(&ans.packet, &auth).expect("its answer reads");
            assert_eq!((p.sender_seq, p.sender_timestamp, p.seq), (t.seq, t.timestamp, 0));
        }
        if let Ok((p, _)) = Reflected::decode(data, &auth) {
            let mut b = Vec::new();
            p.encode(&mut b, &auth, &[], 0);
            assert_eq!(Reflected::decode(&b, &auth).map(|x| x.0), Ok(p));
        }
    }
}

/// The port IANA assigned to STAMP's and TWAMP's test packets (a privileged port: a
/// reflector run by a user takes another).
pub const STAMP_PORT: u16 = 862;
