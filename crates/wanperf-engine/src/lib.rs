//! The I/O shells of wanperf: bulk TCP and UDP workers, TCP_INFO and /proc sampling, socket
//! options, and the server and client runtimes that drive the sans-IO sessions of
//! [`wanperf_proto`].
//!
//! ```no_run
//! use std::sync::{Arc, atomic::AtomicBool};
//! use wanperf_engine::server::{serve, ServerConfig};
//! let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
//! let cfg = ServerConfig {
//!     limits: Default::default(),
//!     timeouts: Default::default(),
//!     allow: vec![],
//!     software: "wanperf".into(),
//!     auth: None,
//!     gate: Default::default(),
//!     copy_root: None,
//!     data_ports: Some(wanperf_proto::msg::DATA_PORTS),
//! };
//! let stop = Arc::new(AtomicBool::new(false));
//! serve(listener, cfg, stop, Arc::new(|line: &str| eprintln!("{line}"))).unwrap();
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod client;
pub mod console;
mod control;
pub mod copy;
pub mod copy_fs;
pub mod copy_plan;
pub mod copy_probe;
pub mod daemon;
pub mod echo;
pub mod iperf3_client;
pub mod iperf3_server;
pub mod keys;
pub mod load;
pub mod opts;
pub mod owamp;
pub mod ping;
mod probe;
pub mod server;
pub mod stamp;
pub mod stream;
pub mod sys;
