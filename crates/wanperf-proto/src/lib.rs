//! Sans-IO core of wanperf.
//!
//! Everything here is pure: the control protocol's framing ([`frame`]) and messages
//! ([`msg`]), the binary headers of data connections and UDP datagrams ([`data`]), the
//! server's and client's state machines ([`server`], [`client`]), receiver-side UDP loss and
//! jitter accounting ([`udp`]), the `wanperf/1` result records and the merge of both ends'
//! samples ([`record`]), and unit parsing ([`units`]). No sockets, no clocks: time is passed in.
//!
//! ```
//! use wanperf_proto::{frame, msg::Msg};
//! let wire = frame::encode(&Msg::Ready);
//! let mut dec = frame::FrameDecoder::new();
//! dec.push(&wire);
//! assert_eq!(dec.next_msg().unwrap(), Some(Msg::Ready));
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod auth;
pub mod client;
pub mod data;
pub mod frame;
pub mod msg;
pub mod probe;
pub mod record;
pub mod server;
pub mod udp;
/// Units (a leaf crate of their own; re-exported so `wanperf_proto::units` keeps working).
pub use wanperf_units as units;
