//! The running emulated path: namespaces `left` and `right`, a TUN device in each, joined
//! by one link of the network engine ([`crate::fabric`]): the two-host special case of
//! `wanperf net`, with the same I/O loop.

use crate::config::DirConfig;
use crate::fabric::{End, Fabric, LinkSpec};
use crate::netns::{self, EnvError, Netns};
use crate::packet;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

/// The left host's IPv4 address.
pub const LEFT_V4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// The right host's IPv4 address.
pub const RIGHT_V4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// The left host's IPv6 address (ULA).
pub const LEFT_V6: Ipv6Addr = Ipv6Addr::new(0xfd57, 0x414e, 0, 0, 0, 0, 0, 1);
/// The right host's IPv6 address (ULA).
pub const RIGHT_V6: Ipv6Addr = Ipv6Addr::new(0xfd57, 0x414e, 0, 0, 0, 0, 0, 2);
/// Ethernet header length (veth backend).
const ETHERNET_HEADER: usize = 14;


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

pub use crate::fabric::{offload_wire, DirStats, Lateness};

/// Counters of both directions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PathStats {
    /// Left → right.
    pub up: DirStats,
    /// Right → left.
    pub down: DirStats,
}

/// A running path; dropping it stops the I/O thread and frees the namespaces.
pub struct Path {
    left: Netns,
    right: Netns,
    _middle: Option<Netns>,
    fabric: Fabric,
    host_nice: i32,
}

/// Lowers the calling process's priority to `nice` (raising it would need privileges).
pub fn renice(nice: i32) -> std::io::Result<()> {
    // SAFETY: setpriority takes plain integers and affects only this process.
    if nice != 0 && unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Configures a host's `wan0` (which must exist in the calling thread's namespace).
fn configure_host(host: Host, mtu: u32, txq: Option<u32>) -> Result<(), EnvError> {
    // Hosts tuned for long fat paths, as the seeds' were ("large maximum TCP windows,
    // > 20 MBytes"): TCP autotuning may grow buffers to 64 MiB. Per-namespace sysctls.
    for (k, v) in [("tcp_rmem", "4096 131072 67108864"), ("tcp_wmem", "4096 16384 67108864")] {
        let _ = std::fs::write(format!("/proc/sys/net/ipv4/{k}"), v);
    }
    let idx = netns::ifindex(DEVICE)?;
    netns::set_link(idx, Some(mtu), txq)?;
    netns::add_address(idx, IpAddr::V4(host.addr()), 24)?;
    let v6 = if host == Host::Left { LEFT_V6 } else { RIGHT_V6 };
    netns::add_address(idx, IpAddr::V6(v6), 64)
}

fn setup_tun_host(ns: &Netns, host: Host, mtu: u32, txq: Option<u32>, offload: bool) -> Result<OwnedFd, EnvError> {
    ns.run(move || -> Result<OwnedFd, EnvError> {
        let fd = netns::create_tun(DEVICE, offload)?;
        configure_host(host, mtu, txq)?;
        Ok(fd)
    })?
}

/// The other way to join the hosts, for unprivileged users when /dev/net/tun is closed to
/// them: a third namespace holds the far ends of two veth pairs, and the emulator moves
/// Ethernet frames between them through packet sockets.
fn setup_veth(
    left: &Netns,
    right: &Netns,
    mtu: u32,
    txq: Option<u32>,
    offload: bool,
) -> Result<(Netns, OwnedFd, OwnedFd), EnvError> {
    let middle = Netns::new()?;
    let (lfd, rfd) = (left.raw_fd(), right.raw_fd());
    middle.run(move || -> Result<(), EnvError> {
        netns::create_veth("l0", DEVICE, lfd)?;
        netns::create_veth("r0", DEVICE, rfd)?;
        for n in ["l0", "r0"] {
            netns::set_link(netns::ifindex(n)?, Some(mtu), None)?;
        }
        Ok(())
    })??;
    for (ns, host) in [(left, Host::Left), (right, Host::Right)] {
        ns.run(move || -> Result<(), EnvError> {
            if !offload {
                netns::disable_segmentation(DEVICE)?;
            }
            configure_host(host, mtu, txq)
        })??;
    }
    let (a, b) = middle.run(move || -> Result<(OwnedFd, OwnedFd), EnvError> {
        Ok((netns::packet_socket("l0", offload)?, netns::packet_socket("r0", offload)?))
    })??;
    Ok((middle, a, b))
}

impl Path {
    /// Creates both hosts and starts forwarding.
    pub fn start(cfg: &PathConfig, log: Option<Box<dyn Write + Send>>) -> Result<Path, EnvError> {
        let left = Netns::new()?;
        let right = Netns::new()?;
        // Segmentation offload moves 64 KiB super-packets instead of 1500-byte ones; loss and
        // policing need per-packet decisions, so paths with either run without it.
        // With --txqueuelen the hosts' interface queues must count real packets, so the path
        // runs without offload and pulls from each TUN only when its link is free (below).
        let pull = cfg.txqueuelen.is_some();
        let offload = !pull
            && [&cfg.up, &cfg.down].iter().all(|d| d.loss == crate::config::LossModel::None && d.policer.is_none());
        let (middle, tl, tr, l2) = match setup_tun_host(&left, Host::Left, cfg.mtu, cfg.txqueuelen, offload) {
            Ok(tl) => (None, tl, setup_tun_host(&right, Host::Right, cfg.mtu, cfg.txqueuelen, offload)?, 0),
            Err(EnvError::TunAccess) => {
                let (m, a, b) = setup_veth(&left, &right, cfg.mtu, cfg.txqueuelen, offload)?;
                (Some(m), a, b, ETHERNET_HEADER)
            }
            Err(e) => return Err(e),
        };
        // Policed packets leave re-marked, as a router's would (policers run without offload,
        // so the buffer starts with the IP header).
        let remark = if l2 == 0 { packet::remark_scavenger } else { packet::remark_scavenger_eth };
        // The two-host case of the network engine: one link, a = left, b = right.
        let link = LinkSpec {
            name: "path".into(),
            dir_names: ["up".into(), "down".into()],
            a: End { fd: tl, icmp: None },
            b: End { fd: tr, icmp: None },
            ab: cfg.up.clone(),
            ba: cfg.down.clone(),
            mtu: cfg.mtu,
            offload,
            pull,
            l2,
            seed: cfg.seed,
            remark,
        };
        let fabric = Fabric::start(vec![link], Vec::new(), log)?;
        Ok(Path { left, right, _middle: middle, fabric, host_nice: cfg.host_nice })
    }

    /// A command that will run inside `host`, with `WANPERF_PEER` set to the other host.
    pub fn command(&self, host: Host, program: &str) -> Command {
        let mut c = Command::new(program);
        self.enter(host, &mut c);
        c
    }

    /// Makes `cmd` run inside `host` (and sets `WANPERF_PEER`).
    pub fn enter(&self, host: Host, cmd: &mut Command) {
        let fd: RawFd = match host {
            Host::Left => self.left.raw_fd(),
            Host::Right => self.right.raw_fd(),
        };
        cmd.env("WANPERF_PEER", host.peer().to_string());
        cmd.env("WANPERF_SELF", host.addr().to_string());
        let nice = self.host_nice;
        // SAFETY: setns and setpriority are async-signal-safe; fd stays open in the child until exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                renice(nice)?;
                // Die with the parent, so a killed wanperf leaves no process in the path.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
    }

    /// The counters so far (refreshed every 100 ms).
    pub fn stats(&self) -> PathStats {
        to_path_stats(self.fabric.stats())
    }

    /// The descriptor that keeps `host`'s network namespace alive (for `/proc/PID/fd/N`).
    pub fn ns_fd(&self, host: Host) -> RawFd {
        match host {
            Host::Left => self.left.raw_fd(),
            Host::Right => self.right.raw_fd(),
        }
    }

    /// Stops forwarding and returns the counters.
    pub fn stop(self) -> PathStats {
        let Path { fabric, .. } = self;
        to_path_stats(fabric.stop())
    }
}

fn to_path_stats(links: Vec<crate::fabric::LinkStats>) -> PathStats {
    links.into_iter().next().map(|l| PathStats { up: l.ab, down: l.ba }).unwrap_or_default()
}
