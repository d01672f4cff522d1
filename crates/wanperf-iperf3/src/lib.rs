//! iperf3's control protocol, sans I/O.
//!
//! iperf3 (ESnet) runs a test over one TCP control connection and one connection (TCP) or
//! flow (UDP) per stream. The control connection carries single state bytes and
//! length-prefixed JSON objects; docs/protocol.md ("iperf3") describes the exchange as
//! observed against iperf3 3.12 and the current source, and lists what wanperf does with each
//! field. Everything here is a pure function of bytes and values: the I/O shells live in
//! `wanperf-engine` (`iperf3_client`, `iperf3_server`).
//!
//! - [`wire`]: state bytes, cookies, JSON framing, the UDP "connect" datagrams, UDP data
//!   headers, stream ids;
//! - [`params`]: the client's parameter object and its mapping to and from a [`TestSpec`];
//! - [`results`]: the result objects both ends exchange, and their mapping to and from
//!   wanperf's per-stream reports;
//! - [`errors`]: the server's error codes as one clear line each;
//! - [`auth`]: the RSA authentication token (`--username` / `--rsa-public-key-path`).
//!
//! [`TestSpec`]: wanperf_proto::msg::TestSpec

#![forbid(unsafe_code)]

pub mod auth;
pub mod errors;
pub mod params;
pub mod results;
pub mod wire;

pub use errors::server_error_text;
pub use params::{Params, ParamsError};
pub use results::{Results, StreamResult};
pub use wire::State;

/// Feeds peer bytes to every decoder, as the fuzz target `iperf3_control` and its corpus
/// replay do: nothing may panic, and what decodes must survive its own round trip.
#[doc(hidden)]
pub fn exercise(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let _ = State::from_byte(sel);
    let _ = wire::check_cookie(rest);
    if rest.len() >= 4 {
        let _ = wire::json_len([rest[0], rest[1], rest[2], rest[3]], wire::MAX_RESULTS_LEN);
    }
    for c64 in [false, true] {
        if let Some(h) = wire::UdpHeader::read(rest, c64) {
            let mut b = [0u8; 16];
            h.write(&mut b, c64);
            let back = wire::UdpHeader::read(&b, c64).expect("a written header reads back");
            assert_eq!((back.sec, back.usec), (h.sec, h.usec));
        }
    }
    match sel % 2 {
        0 => {
            if let Ok(p) = wire::parse_json::<Params>(rest) {
                if let Ok(spec) = p.to_spec(1.0) {
                    let again = Params::from_spec(&spec, "fuzz");
                    if let Ok(again) = again {
                        assert_eq!(again.parallel, p.parallel);
                    }
                }
            }
        }
        _ => {
            if let Ok(r) = wire::parse_json::<Results>(rest) {
                for spec in [wanperf_proto::msg::TestSpec::tcp(2, 5.0), {
                    let mut s = wanperf_proto::msg::TestSpec::tcp(1, 5.0);
                    s.direction = wanperf_proto::msg::Direction::Bidir;
                    s.transport = wanperf_proto::msg::Transport::Udp;
                    s.rate_bps = Some(1_000_000);
                    s
                }] {
                    let _ = r.to_report(&spec, results::End::Server);
                }
                let _ = r.server_version();
            }
        }
    }
}
