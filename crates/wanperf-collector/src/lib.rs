//! The I/O shell of wanperf-flows: what `wanperf flows collect` receives and `wanperf util`
//! polls, into the archive.
//!
//! - [`collect`]: the collector loop — NetFlow/IPFIX/sFlow export over UDP, decoded and
//!   binned by the pure core, stored every flush and at the end.
//! - [`rows`]: the core's values as the archive's rows and back.
//! - [`util`]: the utilization poller (every source on a schedule, into the archive) and
//!   the archive's readings as binned series.
//!
//! And interface counters read from the devices that keep them, as
//! [`wanperf_flows::IfCounters`] readings for the pure utilization core
//! ([`wanperf_flows::UtilSeries`]):
//!
//! - [`local`]: the kernel's 64-bit link statistics over rtnetlink (`RTM_GETLINK`,
//!   `IFLA_STATS64`: octets, errors and drops in and out), in this network namespace or in any
//!   other one given by a namespace file (`/proc/PID/ns/net`, `/run/netns/NAME`).
//! - [`snmp`]: a remote device's IF-MIB (`ifXTable` 64-bit octets where it has them) over
//!   SNMP v2c or v3 (USM authentication and privacy), through the maintained `async-snmp` crate.
//!
//! Both readers are opened once and read as often as wanted; the time of each reading is taken
//! when its answer arrives.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod collect;
pub mod local;
pub mod rows;
pub mod site;
pub mod snmp;
pub mod text;
pub mod util;

use std::time::{SystemTime, UNIX_EPOCH};
use thiserror::Error;

/// Why counters could not be read.
#[derive(Debug, Error)]
pub enum PollError {
    /// The namespace file could not be opened or entered.
    #[error("network namespace {path}: {err}")]
    Netns {
        /// The namespace file.
        path: String,
        /// The error.
        err: std::io::Error,
    },
    /// An rtnetlink request failed.
    #[error("rtnetlink: {0}")]
    Netlink(String),
    /// An SNMP request failed.
    #[error("SNMP {agent}: {msg}")]
    Snmp {
        /// The agent.
        agent: String,
        /// What went wrong.
        msg: String,
    },
    /// No interface matched what was asked for.
    #[error("{device}: no interface {wanted} (it has: {have})")]
    NoInterface {
        /// The device.
        device: String,
        /// The interface asked for.
        wanted: String,
        /// The interfaces the device has.
        have: String,
    },
    /// A bad option value.
    #[error("{0}")]
    Option(String),
}

/// Now, Unix milliseconds.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// The interfaces of `all` (names) that `wanted` selects: every one when `wanted` is empty;
/// otherwise each wanted name must exist.
pub fn select<'a>(device: &str, all: &'a [String], wanted: &[String]) -> Result<Vec<&'a String>, PollError> {
    if wanted.is_empty() {
        return Ok(all.iter().collect());
    }
    wanted
        .iter()
        .map(|w| {
            all.iter().find(|n| *n == w).ok_or_else(|| PollError::NoInterface {
                device: device.to_string(),
                wanted: w.clone(),
                have: all.join(", "),
            })
        })
        .collect()
}
