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
    /// The left host's model (CPU quota, TCP stack settings).
    #[serde(default)]
    pub left_host: wanperf_host::HostModel,
    /// The right host's model.
    #[serde(default)]
    pub right_host: wanperf_host::HostModel,
}

impl PathConfig {
    /// The path's values as a study's expectations name them, in bits, bit/s and seconds:
    /// `rtt`, `delay_up`/`delay_down`, `rate`(`_up`/`_down`), `queue`(`_up`/`_down`; a queue
    /// in packets counts full-MTU packets), `loss`/`loss_down` (mean loss), `policer_rate` and
    /// `burst` (left → right), `mtu`. What the path does not have (an unlimited or traced
    /// rate, no policer) is left out.
    pub fn values(&self) -> std::collections::BTreeMap<String, f64> {
        use crate::config::{QueueLimit, Rate};
        let mut v = std::collections::BTreeMap::new();
        let mut put = |k: &str, x: f64| {
            v.insert(k.to_string(), x);
        };
        let mtu_bits = f64::from(self.mtu) * 8.0;
        put("mtu", mtu_bits);
        put("delay_up", self.up.delay_ns as f64 / 1e9);
        put("delay_down", self.down.delay_ns as f64 / 1e9);
        put("rtt", (self.up.delay_ns + self.down.delay_ns) as f64 / 1e9);
        for (suffix, d) in [("_up", &self.up), ("_down", &self.down)] {
            if let Rate::Constant(r) = d.rate {
                put(&format!("rate{suffix}"), r as f64);
            }
            let q = match d.queue {
                QueueLimit::Packets(n) => n as f64 * mtu_bits,
                QueueLimit::Bytes(b) => b as f64 * 8.0,
            };
            put(&format!("queue{suffix}"), q);
        }
        if let Rate::Constant(r) = self.up.rate {
            put("rate", r as f64);
        }
        put(
            "queue",
            match self.up.queue {
                QueueLimit::Packets(n) => n as f64 * mtu_bits,
                QueueLimit::Bytes(b) => b as f64 * 8.0,
            },
        );
        put("loss", self.up.loss.mean_loss());
        put("loss_down", self.down.loss.mean_loss());
        if let Some(p) = &self.up.policer {
            put("policer_rate", p.rate_bps as f64);
            put("burst", p.burst_bytes as f64 * 8.0);
        }
        if let Some(q) = self.txqueuelen {
            put("txqueuelen", f64::from(q));
        }
        for (k, x) in self.left_host.values("_left").into_iter().chain(self.right_host.values("_right")) {
            put(&k, x);
        }
        v
    }
}

/// The niceness `path run` gives the hosts' commands unless told otherwise.
pub const DEFAULT_HOST_NICE: i32 = 10;

pub use crate::stats::{DirStats, Lateness};

/// Counters of both directions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PathStats {
    /// Left → right.
    pub up: DirStats,
    /// Right → left.
    pub down: DirStats,
}

/// The CPUs this process may run on, split between the emulator and the hosts: the I/O
/// thread takes the last to itself and the hosts' commands get the others. `None` with fewer
/// than two. The I/O thread polls without sleeping when a packet is due within a fraction of a
/// millisecond, so while traffic flows it keeps a core busy; sharing one with a host, it would
/// take the CPU from a host's sender in the middle of a burst (a wake-up preempts a niced
/// process after each packet of a sendmmsg), and a train of back-to-back packets would leave
/// that host 150 µs a packet — a link no topology has. A real network's routers do not run
/// on its hosts' processors either.
pub fn cpu_split() -> Option<(usize, Vec<usize>)> {
    let cpus = wanperf_sys::process::cpu_affinity().ok()?;
    let (&fabric, hosts) = cpus.split_last()?;
    (!hosts.is_empty()).then(|| (fabric, hosts.to_vec()))
}

/// Keeps the calling thread (in a child before exec: the process) on `cpus`; nothing when
/// `cpus` is empty.
pub fn pin(cpus: &[usize]) -> std::io::Result<()> {
    if cpus.is_empty() {
        return Ok(());
    }
    wanperf_sys::process::set_cpu_affinity(cpus)
}

/// Lowers the calling process's priority to `nice` (raising it would need privileges).
pub fn renice(nice: i32) -> std::io::Result<()> {
    wanperf_sys::process::set_nice(nice)
}
