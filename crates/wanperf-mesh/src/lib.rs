//! Monitoring meshes, sans I/O: what perfSONAR's pSConfig and SmokePing do, made simpler.
//!
//! A mesh file ([`config`]) names sites, hosts (each running an agent), groups of hosts and
//! the tests between them. Agents probe latency continuously and cut the probes into
//! periods ([`summary`]); throughput tests run in slots the central plans so no host is in
//! two tests at once ([`plan`]); the central judges every path against fixed thresholds and
//! its own baseline, and calls out rows and columns of the grid that point at a host or a
//! site rather than a path ([`status`]); level shifts, loss episodes and silent agents become
//! events with one line of text ([`events`]); [`wire`] holds the messages between agent and
//! central and the batch signature.
//!
//! Everything here is a pure function of its arguments: no sockets, no clocks, no threads, no
//! files. Time is passed in as `f64` Unix seconds (UTC).
//!
//! ```
//! let mesh = wanperf_mesh::config::parse(
//!     r#"
//! [mesh]
//! name = "demo"
//! [[site]]
//! name = "lab"
//! [[host]]
//! name = "a"
//! site = "lab"
//! address = "198.18.0.1"
//! [[host]]
//! name = "b"
//! site = "lab"
//! address = "198.18.0.2"
//! [[group]]
//! name = "all"
//! type = "mesh"
//! members = ["a", "b"]
//! [[test]]
//! name = "rtt"
//! type = "latency"
//! group = "all"
//! "#,
//! )
//! .unwrap();
//! assert_eq!(mesh.pairs(&mesh.tests[0]), [("a".to_string(), "b".to_string()), ("b".into(), "a".into())]);
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod config;
pub mod events;
pub mod plan;
pub mod status;
pub mod summary;
pub mod wire;

mod rng;
