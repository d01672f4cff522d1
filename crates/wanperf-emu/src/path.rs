//! What `wanperf path` is made of: its configuration, its two hosts' addresses and its
//! counters. The running path is the two-host case of the network engine
//! (`wanperf_net::path::Path`), carried by this crate's I/O loop ([`crate::fabric`]).

use crate::config::DirConfig;
use serde::{Deserialize, Serialize};
use std::net::{Ipv4Addr, Ipv6Addr};

/// The left host's IPv4 address.
pub const LEFT_V4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// The right host's IPv4 address.
pub const RIGHT_V4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// The left host's IPv6 address (ULA).
pub const LEFT_V6: Ipv6Addr = Ipv6Addr::new(0xfd57, 0x414e, 0, 0, 0, 0, 0, 1);
/// The right host's IPv6 address (ULA).
pub const RIGHT_V6: Ipv6Addr = Ipv6Addr::new(0xfd57, 0x414e, 0, 0, 0, 0, 0, 2);

/// Name of the TUN device on both hosts.
pub const DEVICE: &str = "wan0";

/// Which host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    /// The left host (usually the client).
    Left,
    /// The right host (usually the server).
    Right,
}

impl Host {
    /// This host's IPv4 address.
    pub fn addr(self) -> Ipv4Addr {
        match self {
            Host::Left => LEFT_V4,
            Host::Right => RIGHT_V4,
        }
    }

    /// The other host's IPv4 address.
    pub fn peer(self) -> Ipv4Addr {
        match self {
            Host::Left => RIGHT_V4,
            Host::Right => LEFT_V4,
        }
    }
}

/// The whole path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathConfig {
    /// Left → right.
    pub up: DirConfig,
    /// Right → left.
    pub down: DirConfig,
    /// MTU of both TUN devices.
    pub mtu: u32,
    /// Transmit queue length of both TUN devices.
    pub txqueuelen: Option<u32>,
    /// Seed for loss and jitter.
    pub seed: u64,
    /// Niceness of the commands run on the hosts (0 = normal). The I/O thread keeps normal
    /// priority, so when the machine's cores are busy the hosts wait, not the wire.
    #[serde(default)]
    pub host_nice: i32,
}

/// The niceness `path run` gives the hosts' commands unless told otherwise.
pub const DEFAULT_HOST_NICE: i32 = 10;

pub use crate::fabric::{DirStats, Lateness};

/// Counters of both directions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PathStats {
    /// Left → right.
    pub up: DirStats,
    /// Right → left.
    pub down: DirStats,
}

/// Lowers the calling process's priority to `nice` (raising it would need privileges).
pub fn renice(nice: i32) -> std::io::Result<()> {
    // SAFETY: setpriority takes plain integers and affects only this process.
    if nice != 0 && unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
