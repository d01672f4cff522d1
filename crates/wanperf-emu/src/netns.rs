//! Privileged operations, all in one place: user and network namespaces, TUN devices, and
//! link and address setup over rtnetlink.
//!
//! Namespaces are anonymous: each lives as long as a file descriptor (and any process inside)
//! does, so nothing can be left behind when wanperf exits, however it exits. The system
//! calls themselves (unshare, setns, the TUN and ethtool ioctls, packet sockets) are
//! `wanperf_sys::netns`'s; this module adds the errors users read and the rtnetlink requests.

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL, NLM_F_REQUEST,
};
use netlink_packet_route::address::{AddressAttribute, AddressHeaderFlags, AddressMessage};
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use std::fs::File;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use thiserror::Error;

/// Why the emulated path could not be set up.
#[derive(Debug, Error)]
pub enum EnvError {
    /// Not allowed to create namespaces.
    #[error("cannot create a network namespace: {0}. Run as root, or enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 on Debian, user.max_user_namespaces > 0)")]
    Namespace(io::Error),
    /// Could not enter a user namespace.
    #[error("cannot enter an unprivileged user namespace: {0} (check `unshare -r -n true`; enable with sysctl kernel.unprivileged_userns_clone=1 or user.max_user_namespaces=15000)")]
    UserNamespace(io::Error),
    /// TUN missing.
    #[error("cannot create a TUN device: {0} (is /dev/net/tun present? `modprobe tun`)")]
    Tun(io::Error),
    /// /dev/net/tun is not open to this user.
    #[error("cannot open /dev/net/tun: permission denied. Unprivileged paths need it readable and writable by all (Debian's default: `chmod 0666 /dev/net/tun`), or run as root")]
    TunAccess,
    /// Netlink request failed.
    #[error("netlink {what}: {err}")]
    Netlink {
        /// The request.
        what: &'static str,
        /// The error.
        err: io::Error,
    },
    /// Another system call failed.
    #[error("{what}: {err}")]
    Sys {
        /// The call.
        what: &'static str,
        /// The error.
        err: io::Error,
    },
}

/// If not root, moves this process into a new user namespace where it is root, so it may create
/// network namespaces. Must run before any other thread starts (unshare(CLONE_NEWUSER) refuses
/// multithreaded callers).
pub fn become_root_in_user_namespace() -> Result<bool, EnvError> {
    let (uid, gid) = (wanperf_sys::process::euid(), wanperf_sys::process::egid());
    if uid == 0 {
        return Ok(false);
    }
    wanperf_sys::netns::unshare_user_namespace().map_err(EnvError::UserNamespace)?;
    let write = |path: &str, text: String| std::fs::write(path, text).map_err(EnvError::UserNamespace);
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("0 {uid} 1"))?;
    write("/proc/self/gid_map", format!("0 {gid} 1"))?;
    Ok(true)
}

/// A network namespace, alive while this value (or a process inside) is.
#[derive(Debug)]
pub struct Netns {
    fd: OwnedFd,
}

impl Netns {
    /// A fresh network namespace with its loopback up.
    pub fn new() -> Result<Netns, EnvError> {
        let fd = std::thread::spawn(|| -> Result<OwnedFd, EnvError> {
            // Affects only this (short-lived) thread's network namespace.
            wanperf_sys::netns::unshare_net_namespace().map_err(EnvError::Namespace)?;
            let f = File::open("/proc/thread-self/ns/net")
                .map_err(|e| EnvError::Sys { what: "opening the namespace", err: e })?;
            Ok(OwnedFd::from(f))
        })
        .join()
        .map_err(|_| EnvError::Sys { what: "namespace thread", err: io::Error::other("panicked") })??;
        let ns = Netns { fd };
        ns.run(|| {
            let lo = ifindex("lo")?;
            set_link(lo, None, None)
        })??;
        Ok(ns)
    }

    /// The namespace file descriptor (for `setns`).
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Runs `f` on a thread inside the namespace.
    pub fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> Result<T, EnvError> {
        let fd = self.fd.try_clone().map_err(|e| EnvError::Sys { what: "dup", err: e })?;
        std::thread::spawn(move || {
            // fd is a network namespace file; setns only affects this thread.
            wanperf_sys::netns::join_namespace(&fd, libc::CLONE_NEWNET)
                .map_err(|err| EnvError::Sys { what: "setns", err })?;
            Ok(f())
        })
        .join()
        .map_err(|_| EnvError::Sys { what: "namespace thread", err: io::Error::other("panicked") })?
    }
}

/// The index of an interface in the calling thread's namespace.
pub fn ifindex(name: &str) -> Result<u32, EnvError> {
    if name.contains('\0') {
        return Err(EnvError::Sys { what: "interface name", err: io::Error::other("NUL in name") });
    }
    wanperf_sys::iface::if_index(name).map_err(|err| EnvError::Sys { what: "if_nametoindex", err })
}

/// Length of the virtio-net header that precedes each packet on an offloading TUN.
pub const VNET_HDR_LEN: usize = 10;

/// Creates a TUN device (IFF_TUN | IFF_NO_PI, non-blocking) in the calling thread's namespace.
/// With `offload`, packets carry a virtio-net header and may be TCP segmentation-offload
/// super-packets of up to 64 KiB (IFF_VNET_HDR, TUNSETOFFLOAD with checksum and TSO), UDP
/// ones too where the kernel has them: the second value says whether it took that (Linux 6.2
/// on).
pub fn create_tun(name: &str, offload: bool) -> Result<(OwnedFd, bool), EnvError> {
    let fd = wanperf_sys::netns::open_tun().map_err(|e| {
        if e.kind() == io::ErrorKind::PermissionDenied {
            EnvError::TunAccess
        } else {
            EnvError::Tun(e)
        }
    })?;
    let udp = wanperf_sys::netns::attach_tun(&fd, name, offload).map_err(EnvError::Tun)?;
    Ok((fd, udp))
}

/// Sends one rtnetlink request (`NLM_F_REQUEST | flags`) on a new socket in this thread's
/// network namespace; the socket, for the replies.
fn send(what: &'static str, msg: RouteNetlinkMessage, flags: u16) -> Result<Socket, EnvError> {
    send_on(NETLINK_ROUTE, what, NetlinkPayload::from(msg), flags)
}

/// Sends one request of a netlink `protocol` (`NLM_F_REQUEST | flags`) on a new socket in
/// this thread's network namespace; the socket, for the replies.
pub(crate) fn send_on<T: netlink_packet_core::NetlinkSerializable + std::fmt::Debug>(
    protocol: isize,
    what: &'static str,
    payload: NetlinkPayload<T>,
    flags: u16,
) -> Result<Socket, EnvError> {
    let nl = |err: io::Error| EnvError::Netlink { what, err };
    let mut sock = Socket::new(protocol).map_err(nl)?;
    sock.bind_auto().map_err(nl)?;
    sock.connect(&SocketAddr::new(0, 0)).map_err(nl)?;
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | flags;
    header.sequence_number = 1;
    let mut packet = NetlinkMessage::new(header, payload);
    packet.finalize();
    let mut buf = vec![0u8; packet.buffer_len()];
    packet.serialize(&mut buf);
    sock.send(&buf, 0).map_err(nl)?;
    Ok(sock)
}

fn netlink_request(what: &'static str, msg: RouteNetlinkMessage, flags: u16) -> Result<(), EnvError> {
    let nl = |err: io::Error| EnvError::Netlink { what, err };
    let sock = send(what, msg, NLM_F_ACK | flags)?;
    let mut rx = vec![0u8; 8192];
    let n = sock.recv(&mut &mut rx[..], 0).map_err(nl)?;
    let reply = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&rx[..n])
        .map_err(|e| nl(io::Error::other(e.to_string())))?;
    match reply.payload {
        NetlinkPayload::Error(e) => match e.code {
            None => Ok(()),
            Some(code) => Err(nl(io::Error::from_raw_os_error(-code.get()))),
        },
        _ => Ok(()),
    }
}

/// A device's root queueing discipline and what it did, as `tc -s qdisc` shows it: a host's
/// interface queue (`txqueuelen` packets of pfifo_fast) and the packets it dropped when full.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct QdiscStats {
    /// The device's index.
    pub ifindex: u32,
    /// The discipline (`pfifo_fast`, `noqueue`, `fq_codel`, …).
    pub kind: String,
    /// Packets it sent.
    pub packets: u64,
    /// Bytes it sent.
    pub bytes: u64,
    /// Packets it dropped (a full queue's overflow).
    pub drops: u64,
    /// Packets requeued (the device refused them for a moment).
    pub requeues: u64,
}

/// The replies to a dump request (`NLM_F_DUMP`) in this thread's network namespace.
fn dump(what: &'static str, msg: RouteNetlinkMessage) -> Result<Vec<RouteNetlinkMessage>, EnvError> {
    let nl = |err: io::Error| EnvError::Netlink { what, err };
    let sock = send(what, msg, NLM_F_DUMP)?;
    let mut out = Vec::new();
    let mut rx = vec![0u8; 64 * 1024];
    loop {
        let n = sock.recv(&mut &mut rx[..], 0).map_err(nl)?;
        let mut off = 0;
        while off < n {
            let m = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&rx[off..n])
                .map_err(|e| nl(io::Error::other(e.to_string())))?;
            let len = m.header.length as usize;
            if len == 0 {
                return Err(nl(io::Error::other("a zero-length netlink message")));
            }
            off += (len + 3) & !3;
            match m.payload {
                NetlinkPayload::Done(_) => return Ok(out),
                NetlinkPayload::Error(e) => {
                    let code = e.code.map_or(libc::EIO, |c| -c.get());
                    return Err(nl(io::Error::from_raw_os_error(code)));
                }
                NetlinkPayload::InnerMessage(m) => out.push(m),
                _ => {}
            }
        }
    }
}

/// Every device's root queueing discipline in this thread's network namespace, over rtnetlink
/// (a dump of RTM_GETQDISC).
pub fn qdisc_stats() -> Result<Vec<QdiscStats>, EnvError> {
    use netlink_packet_route::tc::{TcAttribute, TcHandle, TcMessage, TcStats2};
    let msgs = dump("read queueing disciplines", RouteNetlinkMessage::GetQueueDiscipline(TcMessage::default()))?;
    let mut out = Vec::new();
    for m in msgs {
        let RouteNetlinkMessage::NewQueueDiscipline(t) = m else { continue };
        if t.header.parent != TcHandle::ROOT {
            continue;
        }
        let mut q = QdiscStats { ifindex: t.header.index as u32, ..Default::default() };
        for a in t.attributes {
            match a {
                TcAttribute::Kind(k) => q.kind = k,
                TcAttribute::Stats2(v) => {
                    for s in v {
                        match s {
                            TcStats2::Basic(b) => (q.bytes, q.packets) = (b.bytes, u64::from(b.packets)),
                            TcStats2::Queue(x) => (q.drops, q.requeues) = (u64::from(x.drops), u64::from(x.requeues)),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        out.push(q);
    }
    Ok(out)
}

/// Each device's transmit drops in this thread's network namespace (index, `tx_dropped`, as
/// `ip -s link` shows them): a TUN device whose ring of `txqueuelen` packets is full drops
/// there, after its queueing discipline has sent the packet on.
pub fn tx_dropped() -> Result<Vec<(u32, u64)>, EnvError> {
    let msgs = dump("read interface counters", RouteNetlinkMessage::GetLink(LinkMessage::default()))?;
    Ok(msgs
        .into_iter()
        .filter_map(|m| match m {
            RouteNetlinkMessage::NewLink(l) => {
                let drops = l.attributes.iter().find_map(|a| match a {
                    LinkAttribute::Stats64(s) => Some(s.tx_dropped),
                    _ => None,
                })?;
                Some((l.header.index, drops))
            }
            _ => None,
        })
        .collect())
}

/// Brings link `index` up, optionally setting its MTU and transmit queue length.
pub fn set_link(index: u32, mtu: Option<u32>, txqueuelen: Option<u32>) -> Result<(), EnvError> {
    let mut m = LinkMessage::default();
    m.header.index = index;
    m.header.flags = LinkFlags::Up;
    m.header.change_mask = LinkFlags::Up;
    if let Some(mtu) = mtu {
        m.attributes.push(LinkAttribute::Mtu(mtu));
    }
    if let Some(q) = txqueuelen {
        m.attributes.push(LinkAttribute::TxQueueLen(q));
    }
    netlink_request("set link", RouteNetlinkMessage::SetLink(m), 0)
}

/// Adds `addr/prefix` to link `index` (IPv6 without duplicate address detection, so it is
/// usable at once).
pub fn add_address(index: u32, addr: IpAddr, prefix: u8) -> Result<(), EnvError> {
    let mut m = AddressMessage::default();
    m.header.index = index;
    m.header.prefix_len = prefix;
    m.header.family = if addr.is_ipv4() { AddressFamily::Inet } else { AddressFamily::Inet6 };
    if addr.is_ipv6() {
        m.header.flags = AddressHeaderFlags::Nodad;
    }
    m.attributes.push(AddressAttribute::Local(addr));
    m.attributes.push(AddressAttribute::Address(addr));
    netlink_request("add address", RouteNetlinkMessage::NewAddress(m), NLM_F_CREATE | NLM_F_EXCL)
}

/// Lets the calling thread's sleeps end within 1 µs of their deadline (default slack: 50 µs).
pub fn set_timer_slack() {
    wanperf_sys::process::set_timer_slack_ns(1000);
}

/// Creates a veth pair in the calling thread's namespace: `name` here and `peer_name` inside
/// the namespace `peer_ns`.
pub fn create_veth(name: &str, peer_name: &str, peer_ns: RawFd) -> Result<(), EnvError> {
    use netlink_packet_route::link::{InfoData, InfoKind, InfoVeth, LinkInfo};
    let mut peer = LinkMessage::default();
    peer.attributes.push(LinkAttribute::IfName(peer_name.to_string()));
    peer.attributes.push(LinkAttribute::NetNsFd(peer_ns));
    let mut m = LinkMessage::default();
    m.attributes.push(LinkAttribute::IfName(name.to_string()));
    m.attributes.push(LinkAttribute::LinkInfo(vec![
        LinkInfo::Kind(InfoKind::Veth),
        LinkInfo::Data(InfoData::Veth(InfoVeth::Peer(peer))),
    ]));
    netlink_request("create veth pair", RouteNetlinkMessage::NewLink(m), NLM_F_CREATE | NLM_F_EXCL)
}

/// Turns segmentation and transmit-checksum offload off on an interface (ethtool), so every
/// packet that leaves it is at most one MTU and carries a finished checksum (a packet socket
/// without virtio-net headers could not tell the far side that a checksum is still owed).
pub fn disable_segmentation(name: &str) -> Result<(), EnvError> {
    const ETHTOOL_STXCSUM: u32 = 0x17;
    const ETHTOOL_STSO: u32 = 0x1f;
    const ETHTOOL_SGSO: u32 = 0x24;
    let s = wanperf_sys::netns::ioctl_socket().map_err(|err| EnvError::Sys { what: "socket for ethtool", err })?;
    for cmd in [ETHTOOL_STSO, ETHTOOL_SGSO, ETHTOOL_STXCSUM] {
        wanperf_sys::netns::ethtool_set(&s, name, cmd, 0)
            .map_err(|err| EnvError::Sys { what: "ethtool: turning segmentation offload off", err })?;
    }
    Ok(())
}

/// A raw packet socket on interface `name` (all protocols, non-blocking, not seeing its own
/// transmissions); with `vnet`, frames carry a virtio-net header (GSO super-frames).
pub fn packet_socket(name: &str, vnet: bool) -> Result<OwnedFd, EnvError> {
    let idx = ifindex(name)?;
    let proto = (libc::ETH_P_ALL as u16).to_be();
    let fd = wanperf_sys::netns::packet_socket(proto).map_err(|err| EnvError::Sys { what: "packet socket", err })?;
    let set = |opt: libc::c_int, what: &'static str| -> Result<(), EnvError> {
        wanperf_sys::sockopt::setsockopt_raw(fd.as_raw_fd(), libc::SOL_PACKET, opt, &(1 as libc::c_int).to_ne_bytes())
            .map_err(|err| EnvError::Sys { what, err })
    };
    set(libc::PACKET_IGNORE_OUTGOING, "PACKET_IGNORE_OUTGOING")?;
    if vnet {
        set(libc::PACKET_VNET_HDR, "PACKET_VNET_HDR")?;
    }
    wanperf_sys::netns::bind_packet(&fd, idx, proto)
        .map_err(|err| EnvError::Sys { what: "binding the packet socket", err })?;
    Ok(fd)
}

/// Adds a route in the calling thread's namespace: `dst/prefix` via each (gateway, interface
/// index) of `hops` — one next hop, or a multipath route spreading flows over several (main
/// table, static, universe scope).
pub fn add_route(dst: IpAddr, prefix: u8, hops: &[(IpAddr, u32)]) -> Result<(), EnvError> {
    route_request(dst, prefix, hops, NLM_F_CREATE | NLM_F_EXCL)
}

/// Adds or replaces the route to `dst/prefix` in the calling thread's namespace.
pub fn replace_route(dst: IpAddr, prefix: u8, hops: &[(IpAddr, u32)]) -> Result<(), EnvError> {
    route_request(dst, prefix, hops, NLM_F_CREATE | netlink_packet_core::NLM_F_REPLACE)
}

fn route_request(dst: IpAddr, prefix: u8, hops: &[(IpAddr, u32)], flags: u16) -> Result<(), EnvError> {
    use netlink_packet_route::route::{
        RouteAttribute, RouteHeader, RouteMessage, RouteNextHop, RouteProtocol, RouteScope, RouteType,
    };
    let mut m = RouteMessage::default();
    m.header.address_family = if dst.is_ipv4() { AddressFamily::Inet } else { AddressFamily::Inet6 };
    m.header.destination_prefix_length = prefix;
    m.header.table = RouteHeader::RT_TABLE_MAIN;
    m.header.protocol = RouteProtocol::Static;
    m.header.scope = RouteScope::Universe;
    m.header.kind = RouteType::Unicast;
    m.attributes.push(RouteAttribute::Destination(dst.into()));
    match hops {
        [(gateway, oif)] => {
            m.attributes.push(RouteAttribute::Gateway((*gateway).into()));
            m.attributes.push(RouteAttribute::Oif(*oif));
        }
        _ => {
            let next = hops
                .iter()
                .map(|&(gateway, oif)| {
                    let mut h = RouteNextHop::default();
                    h.interface_index = oif;
                    h.attributes.push(RouteAttribute::Gateway(gateway.into()));
                    h
                })
                .collect();
            m.attributes.push(RouteAttribute::MultiPath(next));
        }
    }
    netlink_request("add route", RouteNetlinkMessage::NewRoute(m), flags)
}

/// Writes a sysctl of the calling thread's network namespace (`net/ipv4/ip_forward`).
pub fn sysctl(key: &'static str, value: &str) -> Result<(), EnvError> {
    std::fs::write(format!("/proc/sys/{key}"), value).map_err(|err| EnvError::Sys { what: key, err })
}

/// The inode of the network namespace `fd` refers to (as `/proc/PID/ns/net` links show it:
/// `net:[INODE]`).
pub fn ns_inode(fd: std::os::fd::RawFd) -> io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    // /proc/self/fd/N leads to the namespace file itself; its inode is the namespace's.
    Ok(std::fs::metadata(format!("/proc/self/fd/{fd}"))?.ino())
}

/// Processes (other than this one) whose network namespace is one of `inodes`: those that
/// joined an emulated node with `path exec` / `net exec` and would keep its namespace alive
/// after the network is gone.
pub fn processes_in(inodes: &[u64]) -> Vec<i32> {
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/ns/net"))
                .ok()
                .and_then(|l| {
                    let s = l.to_string_lossy().into_owned();
                    s.strip_prefix("net:[")?.strip_suffix(']')?.parse::<u64>().ok()
                })
                .is_some_and(|ino| inodes.contains(&ino))
        })
        .collect()
}

/// Ends the processes left in the namespaces of `fds` (see [`processes_in`]): SIGTERM, then
/// SIGKILL for those still there after `grace`. Returns how many there were.
pub fn end_processes_in(fds: &[std::os::fd::RawFd], grace: std::time::Duration) -> usize {
    let inodes: Vec<u64> = fds.iter().filter_map(|&fd| ns_inode(fd).ok()).collect();
    let pids = processes_in(&inodes);
    for &p in &pids {
        // At worst it is gone (ESRCH).
        let _ = wanperf_sys::terminate(p as u32);
    }
    let until = std::time::Instant::now() + grace;
    while std::time::Instant::now() < until && !processes_in(&inodes).is_empty() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for p in processes_in(&inodes) {
        let _ = wanperf_sys::kill(p as u32);
    }
    pids.len()
}
