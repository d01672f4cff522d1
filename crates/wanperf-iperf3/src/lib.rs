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

pub mod auth;
pub mod errors;
pub mod params;
pub mod results;
pub mod wire;

pub use errors::server_error_text;
pub use params::{Params, ParamsError};
pub use results::{Results, StreamResult};
pub use wire::State;
