//! wanperf's wide-area path emulator.
//!
//! The link model is a set of pure cells driven by `(packet, now)` and tested in virtual
//! time ([`link::Link`]); configuration and its parsing live in [`config`]; [`packet`] reads
//! the header fields that classification needs, and [`gso`] splits a segmentation-offload
//! super-packet into its segments where loss or a policer decides differently for them.
//!
//! ```
//! use wanperf_emu::config::{DirConfig, Rate};
//! use wanperf_emu::link::Link;
//! use wanperf_emu::packet::Headers;
//! // 12 Mbit/s and 10 ms: a 1500-byte packet arrives 1 ms + 10 ms after it was sent.
//! let mut l = Link::new(DirConfig { rate: Rate::Constant(12_000_000), delay_ns: 10_000_000, ..Default::default() }, 1);
//! l.push(0, "pkt", 1500, Headers::default());
//! assert_eq!(l.next_event(), Some(11_000_000));
//! assert_eq!(l.pop(11_000_000), Some(("pkt", 11_000_000)));
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod acted;
pub mod config;
pub mod fabric;
pub mod fq;
pub mod gso;
pub mod link;
pub mod mptcp;
pub mod netns;
pub mod options;
pub mod packet;
pub mod path;
pub mod presets;
pub mod stats;
