//! The running emulated path: namespaces `left` and `right`, a TUN device in each, and one
//! I/O thread that moves packets between them through a [`Link`] per direction.
//!
//! The I/O loop is the only part that sleeps. It reads what the TUNs have, hands each packet
//! to its direction's link with the current time, writes out what the links say is due, and
//! sleeps (ppoll with a nanosecond timeout, 1 µs timer slack) until the next event. How late
//! each packet leaves against its theoretical time is recorded.

use crate::config::{DirConfig, Nanos};
use crate::link::{ClassCounters, Link, Verdict, CLASSES};
use crate::netns::{self, EnvError, Netns};
use crate::packet;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

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

/// Most packets read from one TUN per turn of the I/O loop.
const READ_BATCH: usize = 16;

/// How long before an event the I/O loop stops sleeping and polls instead.
const SPIN_NS: Nanos = 250_000;

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

/// Scheduling lateness: how long after its theoretical time a packet was written out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Lateness {
    /// Median, µs.
    pub p50_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// Maximum, µs.
    pub max_us: f64,
}

/// Counters of one direction.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DirStats {
    /// Per class.
    pub classes: BTreeMap<String, ClassCounters>,
    /// The emulator's own lateness.
    pub lateness: Lateness,
    /// Packets the TUN refused on write.
    pub write_errors: u64,
}

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
    stop: Arc<AtomicBool>,
    live: Arc<Mutex<PathStats>>,
    io: Option<JoinHandle<PathStats>>,
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
        let mut up = Link::new(cfg.up.clone(), cfg.seed);
        let mut down = Link::new(cfg.down.clone(), cfg.seed.wrapping_add(0x9e37_79b9));
        // Policed packets leave re-marked, as a router's would (policers run without offload,
        // so the buffer starts with the IP header).
        let hook = if l2 == 0 { packet::remark_scavenger } else { packet::remark_scavenger_eth };
        up.set_remark_hook(hook);
        down.set_remark_hook(hook);
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let live = Arc::new(Mutex::new(PathStats::default()));
        let live2 = live.clone();
        let mtu = cfg.mtu as usize;
        let io = std::thread::Builder::new()
            .name("wanperf-path".into())
            .spawn(move || {
                io_loop(Io { left_tun: tl, right_tun: tr, up, down, mtu, offload, pull, l2 }, &s2, &live2, log)
            })
            .map_err(|e| EnvError::Sys { what: "starting the I/O thread", err: e })?;
        Ok(Path { left, right, _middle: middle, stop, live, io: Some(io), host_nice: cfg.host_nice })
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
        self.live.lock().map(|g| g.clone()).unwrap_or_default()
    }

    /// The descriptor that keeps `host`'s network namespace alive (for `/proc/PID/fd/N`).
    pub fn ns_fd(&self, host: Host) -> RawFd {
        match host {
            Host::Left => self.left.raw_fd(),
            Host::Right => self.right.raw_fd(),
        }
    }

    /// Stops forwarding and returns the counters.
    pub fn stop(mut self) -> PathStats {
        self.stop.store(true, Ordering::Release);
        self.io.take().and_then(|h| h.join().ok()).unwrap_or_default()
    }
}

impl Drop for Path {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.io.take() {
            let _ = h.join();
        }
    }
}

struct Dir {
    link: Link<Vec<u8>>,
    late: Histogram<u64>,
    write_errors: u64,
    name: &'static str,
}

impl Dir {
    fn stats(&self) -> DirStats {
        let c = self.link.counters();
        DirStats {
            classes: CLASSES.iter().zip(c.iter()).map(|(n, c)| (n.to_string(), c.clone())).collect(),
            lateness: Lateness {
                p50_us: self.late.value_at_quantile(0.5) as f64 / 1000.0,
                p99_us: self.late.value_at_quantile(0.99) as f64 / 1000.0,
                max_us: self.late.max() as f64 / 1000.0,
            },
            write_errors: self.write_errors,
        }
    }
}

/// Wire size and segment count of a packet read from an offloading TUN (virtio-net header
/// first): a TSO super-packet stands for ceil(payload / gso_size) packets, each with headers.
pub fn offload_wire(buf: &[u8], l2: usize) -> (usize, u32) {
    let ip = &buf[(netns::VNET_HDR_LEN + l2).min(buf.len())..];
    let gso_type = buf.get(1).copied().unwrap_or(0) & 0x7f;
    let gso_size = buf.get(4..6).map_or(0, |b| u16::from_le_bytes([b[0], b[1]])) as usize;
    if gso_type == 0 || gso_size == 0 {
        return (ip.len() + l2, 1);
    }
    let l34 = packet::header_len(ip).min(ip.len());
    let payload = ip.len() - l34;
    let segs = payload.div_ceil(gso_size).max(1);
    (payload + segs * (l34 + l2), segs as u32)
}

/// How packets come off a host's device.
#[derive(Clone, Copy)]
struct ReadMode {
    mtu: usize,
    offload: bool,
    pull: bool,
    l2: usize,
}

impl ReadMode {
    /// The largest packet a read can return (offload: a 64 KiB super-packet).
    fn read_size(self) -> usize {
        let packet = if self.offload { 65_536 + netns::VNET_HDR_LEN } else { self.mtu.max(1500) };
        packet + 64 + self.l2
    }
}

/// Reads one packet, if the device has one, into its link; tells whether it did.
fn read_one(
    fd: RawFd,
    dir: &mut Dir,
    clock: &dyn Fn() -> Nanos,
    m: ReadMode,
    pool: &mut Buffers,
    log: &mut Option<Box<dyn Write + Send>>,
) -> bool {
    let ReadMode { offload, pull, l2, .. } = m;
    // Each packet is stamped when it is read: a stamp from before a batch would let
    // later packets of the batch through early.
    let now = clock();
    if pull && !dir.link.idle(now) {
        return false;
    }
    let mut buf = pool.take();
    // SAFETY: buf is valid for its length.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n <= 0 {
        pool.keep(buf);
        return false;
    }
    let buf = pool.fit(buf, n as usize);
    let (h, len, segs) = if offload {
        let (wire, segs) = offload_wire(&buf, l2);
        (packet::parse(&buf[(netns::VNET_HDR_LEN + l2).min(buf.len())..]), wire, segs)
    } else {
        (packet::parse(&buf[l2.min(buf.len())..]), buf.len(), 1)
    };
    let now = clock();
    let v = dir.link.push_segments(now, buf, len, segs, h);
    if let Some(l) = log.as_mut() {
        let what = match v {
            Verdict::Queued(c) => format!("arrive {len} queued {}", CLASSES[c]),
            Verdict::Remarked => format!("arrive {len} remarked scavenger"),
            Verdict::Dropped(r) => {
                format!("drop {len} {}", serde_json::to_string(&r).unwrap_or_default().trim_matches('"'))
            }
        };
        let _ = writeln!(l, "{now} {} {what}", dir.name);
    }
    true
}

/// Read buffers: a large packet travels in the buffer it was read into, which comes back
/// here once written; a small one (an ACK) is copied out so it holds no large buffer while
/// it waits in the delay line.
struct Buffers {
    size: usize,
    spare: Vec<Vec<u8>>,
}

impl Buffers {
    const SMALL: usize = 4096;
    const KEEP: usize = 256;

    fn take(&mut self) -> Vec<u8> {
        self.spare.pop().unwrap_or_else(|| vec![0; self.size])
    }

    fn fit(&mut self, mut buf: Vec<u8>, n: usize) -> Vec<u8> {
        if n <= Self::SMALL {
            let small = buf[..n].to_vec();
            self.keep(buf);
            small
        } else {
            buf.truncate(n);
            buf
        }
    }

    fn keep(&mut self, mut buf: Vec<u8>) {
        if buf.capacity() >= self.size && self.spare.len() < Self::KEEP {
            buf.resize(self.size, 0);
            self.spare.push(buf);
        }
    }
}

fn write_due(fd: RawFd, dir: &mut Dir, now: Nanos, pool: &mut Buffers, log: &mut Option<Box<dyn Write + Send>>) {
    while let Some((pkt, at)) = dir.link.pop(now) {
        // SAFETY: pkt is a valid buffer.
        let n = unsafe { libc::write(fd, pkt.as_ptr().cast(), pkt.len()) };
        if n < 0 {
            dir.write_errors += 1;
        }
        let _ = dir.late.record(now.saturating_sub(at).max(1));
        if let Some(l) = log.as_mut() {
            let _ = writeln!(l, "{now} {} depart {} due {at}", dir.name, pkt.len());
        }
        pool.keep(pkt);
    }
}

/// What the I/O thread owns.
struct Io {
    left_tun: OwnedFd,
    right_tun: OwnedFd,
    up: Link<Vec<u8>>,
    down: Link<Vec<u8>>,
    mtu: usize,
    offload: bool,
    /// Read a packet only when its link is free: the sending host's interface queue
    /// (txqueuelen) then holds the backlog, where a real NIC's would.
    pull: bool,
    /// Link-layer header before the IP packet (0 on TUN, 14 on veth).
    l2: usize,
}

fn io_loop(io: Io, stop: &AtomicBool, live: &Mutex<PathStats>, mut log: Option<Box<dyn Write + Send>>) -> PathStats {
    crate::netns::set_timer_slack();
    let hist = || Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds");
    let Io { left_tun: tl, right_tun: tr, up, down, mtu, offload, pull, l2 } = io;
    let mut up = Dir { link: up, late: hist(), write_errors: 0, name: "up" };
    let mut down = Dir { link: down, late: hist(), write_errors: 0, name: "down" };
    let start = Instant::now();
    let now_ns = || start.elapsed().as_nanos() as Nanos;
    let (l, r) = (tl.as_raw_fd(), tr.as_raw_fd());
    let mode = ReadMode { mtu, offload, pull, l2 };
    let mut pool = Buffers { size: mode.read_size(), spare: Vec::new() };
    let mut published = 0;
    while !stop.load(Ordering::Acquire) {
        let now = now_ns();
        if now - published >= 100_000_000 {
            if let Ok(mut g) = live.lock() {
                *g = PathStats { up: up.stats(), down: down.stats() };
            }
            published = now;
        }
        // Due packets leave before more are read, and between every read: when the hosts send
        // faster than one thread can carry, the backlog waits in the hosts' device queues (as
        // behind a real busy NIC), not in packets that are already due.
        for _ in 0..READ_BATCH {
            let now = now_ns();
            write_due(r, &mut up, now, &mut pool, &mut log);
            write_due(l, &mut down, now, &mut pool, &mut log);
            let got = read_one(l, &mut up, &now_ns, mode, &mut pool, &mut log)
                | read_one(r, &mut down, &now_ns, mode, &mut pool, &mut log);
            if !got {
                break;
            }
        }
        let now = now_ns();
        write_due(r, &mut up, now, &mut pool, &mut log);
        write_due(l, &mut down, now, &mut pool, &mut log);
        let now = now_ns();
        let mut next = [up.link.next_event(), down.link.next_event()].into_iter().flatten().min();
        if pull {
            // Come back when a busy transmitter frees up to pull the next packet.
            for d in [&up, &down] {
                let f = d.link.free_at();
                if f > now {
                    next = Some(next.map_or(f, |n| n.min(f)));
                }
            }
        }
        let wait = next.map_or(50_000_000, |t| t.saturating_sub(now)).min(50_000_000);
        // Waking from a sleep takes tens of µs: sleep until shortly before the event, then
        // poll without sleeping for the rest, so packets leave on time.
        if wait <= SPIN_NS {
            if wait > 0 {
                std::hint::spin_loop();
            }
            continue;
        }
        let wait = wait - SPIN_NS;
        // A pulling reader does not wait on a TUN whose link is busy.
        let want = |d: &Dir| if pull && !d.link.idle(now) { 0 } else { libc::POLLIN };
        let mut fds = [
            libc::pollfd { fd: l, events: want(&up), revents: 0 },
            libc::pollfd { fd: r, events: want(&down), revents: 0 },
        ];
        let ts = libc::timespec {
            tv_sec: (wait / 1_000_000_000) as libc::time_t,
            tv_nsec: (wait % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: two valid pollfds and a valid timespec.
        unsafe { libc::ppoll(fds.as_mut_ptr(), 2, &ts, std::ptr::null()) };
    }
    if let Some(l) = log.as_mut() {
        let _ = l.flush();
    }
    PathStats { up: up.stats(), down: down.stats() }
}
