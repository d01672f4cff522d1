//! Datagrams: batched sends and receives (sendmmsg, recvmmsg), receive timestamps, the socket
//! error queue (ICMP errors, transmit timestamps), and trains of packets with per-packet TTLs.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::RawFd;

/// Sends datagrams on a connected socket with one sendmmsg; returns how many the kernel took.
pub fn send_batch(fd: RawFd, bufs: &[Vec<u8>]) -> io::Result<usize> {
    let mut iovs: Vec<libc::iovec> =
        bufs.iter().map(|b| libc::iovec { iov_base: b.as_ptr() as *mut libc::c_void, iov_len: b.len() }).collect();
    // SAFETY: an all-zero mmsghdr is valid (no address, no control data).
    let mut msgs: Vec<libc::mmsghdr> = iovs
        .iter_mut()
        .map(|iov| {
            let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
            m.msg_hdr.msg_iov = iov;
            m.msg_hdr.msg_iovlen = 1;
            m
        })
        .collect();
    let mut done = 0;
    while done < msgs.len() {
        // SAFETY: msgs[done..] are valid headers pointing at live buffers.
        let rc = unsafe { libc::sendmmsg(fd, msgs[done..].as_mut_ptr(), (msgs.len() - done) as libc::c_uint, 0) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return if done > 0 { Ok(done) } else { Err(e) };
        }
        done += rc as usize;
    }
    Ok(done)
}

/// Receives up to `slots` datagrams per recvmmsg call into buffers of its own (a collector
/// that takes tens of thousands of datagrams a second pays one system call per batch, not per
/// datagram).
pub struct RecvBatch {
    bufs: Vec<u8>,
    slot: usize,
    addrs: Vec<libc::sockaddr_storage>,
    iovs: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
    n: usize,
}

// SAFETY: the raw pointers in `iovs` and `msgs` point into the batch's own heap buffers, which
// move with it; nothing is shared.
unsafe impl Send for RecvBatch {}

impl RecvBatch {
    /// A batch of `slots` datagrams of at most `slot_len` bytes each (longer ones are cut).
    pub fn new(slots: usize, slot_len: usize) -> RecvBatch {
        let slots = slots.max(1);
        // SAFETY: all-zero sockaddr_storage and mmsghdr are valid values.
        let addrs = vec![unsafe { std::mem::zeroed::<libc::sockaddr_storage>() }; slots];
        let msgs = (0..slots).map(|_| unsafe { std::mem::zeroed::<libc::mmsghdr>() }).collect();
        RecvBatch {
            bufs: vec![0; slots * slot_len],
            slot: slot_len,
            addrs,
            iovs: Vec::with_capacity(slots),
            msgs,
            n: 0,
        }
    }

    /// Receives what is queued on `fd`, without waiting, up to the batch's size; returns how
    /// many datagrams came (0 when none was queued).
    pub fn recv(&mut self, fd: RawFd) -> io::Result<usize> {
        self.n = 0;
        let base = self.bufs.as_mut_ptr();
        self.iovs.clear();
        for i in 0..self.msgs.len() {
            // SAFETY: slot i lies inside bufs.
            let p = unsafe { base.add(i * self.slot) };
            self.iovs.push(libc::iovec { iov_base: p.cast(), iov_len: self.slot });
        }
        for (i, m) in self.msgs.iter_mut().enumerate() {
            m.msg_hdr.msg_name = (&mut self.addrs[i] as *mut libc::sockaddr_storage).cast();
            m.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            m.msg_hdr.msg_iov = &mut self.iovs[i];
            m.msg_hdr.msg_iovlen = 1;
            m.msg_hdr.msg_control = std::ptr::null_mut();
            m.msg_hdr.msg_controllen = 0;
            m.msg_hdr.msg_flags = 0;
            m.msg_len = 0;
        }
        loop {
            // SAFETY: every header points at this batch's live address and buffer slots.
            let rc = unsafe {
                libc::recvmmsg(
                    fd,
                    self.msgs.as_mut_ptr(),
                    self.msgs.len() as libc::c_uint,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            };
            if rc >= 0 {
                self.n = rc as usize;
                return Ok(self.n);
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return Ok(0),
                _ => return Err(e),
            }
        }
    }

    /// The datagrams of the last [`RecvBatch::recv`]: sender and bytes.
    pub fn iter(&self) -> impl Iterator<Item = (Option<SocketAddr>, &[u8])> + '_ {
        (0..self.n).map(move |i| {
            let m = &self.msgs[i];
            // SAFETY: the kernel wrote msg_namelen bytes of a socket address into addrs[i].
            let from = unsafe { socket2::SockAddr::new(self.addrs[i], m.msg_hdr.msg_namelen) }.as_socket();
            let len = (m.msg_len as usize).min(self.slot);
            (from, &self.bufs[i * self.slot..i * self.slot + len])
        })
    }
}

/// Takes the next transmit timestamp off `fd`'s error queue: (send number from 0, ns since the
/// epoch). `Ok(None)` when the queue is empty; entries that are not timestamps are skipped.
pub fn recv_tx_timestamp(fd: RawFd) -> io::Result<Option<(u32, u64)>> {
    loop {
        let mut data = [0u8; 64];
        let mut iov = libc::iovec { iov_base: data.as_mut_ptr().cast(), iov_len: data.len() };
        let mut cmsg = [0u64; 32];
        // SAFETY: a zeroed msghdr is valid; the pointers set below stay valid for the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cmsg.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&cmsg);
        // SAFETY: msg describes valid buffers.
        let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::WouldBlock { Ok(None) } else { Err(e) };
        }
        let (mut id, mut ns) = (None, None);
        // SAFETY: walking the control buffer the kernel filled, with the libc macros; the
        // payloads are read unaligned.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                let (level, kind) = ((*c).cmsg_level, (*c).cmsg_type);
                if level == libc::SOL_SOCKET && kind == libc::SCM_TIMESTAMPING {
                    // struct scm_timestamping { timespec ts[3]; }: [0] is the software stamp.
                    let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    ns = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
                } else if (level == libc::IPPROTO_IP && kind == libc::IP_RECVERR)
                    || (level == libc::IPPROTO_IPV6 && kind == libc::IPV6_RECVERR)
                {
                    let ee: libc::sock_extended_err = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    if ee.ee_errno == libc::ENOMSG as u32 && ee.ee_origin == libc::SO_EE_ORIGIN_TIMESTAMPING {
                        id = Some(ee.ee_data);
                    }
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        if let (Some(id), Some(ns)) = (id, ns) {
            return Ok(Some((id, ns)));
        }
    }
}

/// A received datagram: length, sender, and the kernel's receive time (ns since the epoch).
pub struct Received {
    /// Bytes.
    pub len: usize,
    /// Sender.
    pub from: Option<SocketAddr>,
    /// Kernel receive timestamp, if the socket asked for one.
    pub kernel_ns: Option<u64>,
    /// TTL or hop limit on arrival, if the socket asked ([`crate::sockopt::enable_rx_ttl_tos`]).
    pub ttl: Option<u8>,
    /// TOS or traffic class (DSCP and ECN) on arrival, likewise.
    pub tos: Option<u8>,
}

/// recvmsg into `buf` with `flags`: the bytes read and the address the kernel gave (the
/// sender's; from the error queue, the offending packet's destination), each control
/// message handed to `on_cmsg` as (level, type, a pointer to its data, which the caller
/// reads as the type those say).
fn recvmsg_into(
    fd: RawFd,
    buf: &mut [u8],
    flags: libc::c_int,
    mut on_cmsg: impl FnMut(libc::c_int, libc::c_int, *const u8),
) -> io::Result<(usize, Option<SocketAddr>)> {
    let mut cmsg = [0u64; 64];
    // SAFETY: zeroed sockaddr_storage and msghdr are valid; the pointers set below outlive
    // the call.
    let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    // SAFETY: as above.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = (&mut addr as *mut libc::sockaddr_storage).cast();
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cmsg.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&cmsg) as _;
    // SAFETY: msg describes live buffers of the sizes given.
    let n = unsafe { libc::recvmsg(fd, &mut msg, flags) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the CMSG_* macros walk the control buffer the kernel filled, within
    // msg_controllen.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            on_cmsg((*c).cmsg_level, (*c).cmsg_type, libc::CMSG_DATA(c));
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    // SAFETY: the kernel wrote a sockaddr of the family it gives (or left it zeroed).
    let from = if msg.msg_namelen > 0 { unsafe { socket_addr(msg.msg_name.cast()) } } else { None };
    Ok(((n as usize).min(buf.len()), from))
}

/// An SCM_TIMESTAMPNS control message's time, ns since the epoch.
///
/// # Safety
/// `d` must point to the data of an SCM_TIMESTAMPNS control message.
unsafe fn timestamp_ns(d: *const u8) -> u64 {
    // SAFETY: the caller guarantees `d` points to a timespec.
    let ts = unsafe { std::ptr::read_unaligned(d.cast::<libc::timespec>()) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// recvmsg with the sender's address and the SO_TIMESTAMPNS control message.
pub fn recv_timestamped(fd: RawFd, buf: &mut [u8]) -> io::Result<Received> {
    let (mut kernel_ns, mut ttl, mut tos) = (None, None, None);
    let (len, from) = recvmsg_into(fd, buf, 0, |level, kind, d| {
        // SAFETY (each arm): the level and type say what the data is — a timespec, an int
        // (IP_TTL, IPV6_HOPLIMIT, IPV6_TCLASS) or one byte (IP_TOS).
        match (level, kind) {
            (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS) => kernel_ns = Some(unsafe { timestamp_ns(d) }),
            (libc::SOL_IP, libc::IP_TTL) | (libc::SOL_IPV6, libc::IPV6_HOPLIMIT) => {
                ttl = Some(unsafe { std::ptr::read_unaligned(d.cast::<libc::c_int>()) } as u8);
            }
            (libc::SOL_IP, libc::IP_TOS) => tos = Some(unsafe { *d }),
            (libc::SOL_IPV6, libc::IPV6_TCLASS) => {
                tos = Some(unsafe { std::ptr::read_unaligned(d.cast::<libc::c_int>()) } as u8);
            }
            _ => {}
        }
    })?;
    Ok(Received { len, from, kernel_ns, ttl, tos })
}

/// Sends `buf` to `to` with this TOS (IPv4) or traffic class (IPv6) when one is given (a
/// control message: the socket's own is unchanged).
pub fn send_to_tos(fd: RawFd, buf: &[u8], to: SocketAddr, tos: Option<u8>) -> io::Result<usize> {
    let dst = socket2::SockAddr::from(to);
    let mut iov = libc::iovec { iov_base: buf.as_ptr() as *mut libc::c_void, iov_len: buf.len() };
    let mut ctl = [0u64; 4];
    // SAFETY: a zeroed msghdr is valid; its pointers go to `dst`, `iov` and `ctl`, which
    // outlive the call, and the one control message is written within `ctl`'s 32 bytes.
    let rc = unsafe {
        let mut h: libc::msghdr = std::mem::zeroed();
        h.msg_name = dst.as_ptr() as *mut libc::c_void;
        h.msg_namelen = dst.len();
        h.msg_iov = &mut iov;
        h.msg_iovlen = 1;
        if let Some(tos) = tos {
            // An IPv4 client of a dual-stack socket (a mapped address) takes IPv4's option.
            let v6 = matches!(to.ip(), IpAddr::V6(a) if a.to_ipv4_mapped().is_none());
            let (level, kind) = if v6 { (libc::SOL_IPV6, libc::IPV6_TCLASS) } else { (libc::SOL_IP, libc::IP_TOS) };
            h.msg_control = ctl.as_mut_ptr().cast();
            h.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) as _;
            let c = libc::CMSG_FIRSTHDR(&h);
            (*c).cmsg_level = level;
            (*c).cmsg_type = kind;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>(), libc::c_int::from(tos));
        }
        libc::sendmsg(fd, &h, 0)
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rc as usize)
}

/// The address and port in a sockaddr the kernel wrote.
///
/// # Safety
/// `p` must point to a sockaddr_in or sockaddr_in6 as its family says (or any sockaddr of
/// another family, which gives `None`).
unsafe fn socket_addr(p: *const libc::sockaddr) -> Option<SocketAddr> {
    // SAFETY: the caller guarantees the family matches the layout.
    unsafe {
        match i32::from((*p).sa_family) {
            libc::AF_INET => {
                let a = std::ptr::read_unaligned(p.cast::<libc::sockaddr_in>());
                Some(SocketAddr::new(IpAddr::from(a.sin_addr.s_addr.to_ne_bytes()), u16::from_be(a.sin_port)))
            }
            libc::AF_INET6 => {
                let a = std::ptr::read_unaligned(p.cast::<libc::sockaddr_in6>());
                Some(SocketAddr::new(IpAddr::from(a.sin6_addr.s6_addr), u16::from_be(a.sin6_port)))
            }
            _ => None,
        }
    }
}

/// `ee_origin` of an error the local stack raised (e.g. EMSGSIZE with the path MTU).
pub const SO_EE_ORIGIN_LOCAL: u8 = 1;
/// `ee_origin` of an ICMP error.
pub const SO_EE_ORIGIN_ICMP: u8 = 2;
/// `ee_origin` of an ICMPv6 error.
pub const SO_EE_ORIGIN_ICMP6: u8 = 3;

/// An extended socket error read from the error queue (IP_RECVERR / IPV6_RECVERR).
#[derive(Debug, Clone, Copy)]
pub struct SockError {
    /// Bytes of the quoted payload in the buffer.
    pub len: usize,
    /// The kernel's receive time, ns since the epoch.
    pub at_ns: Option<u64>,
    /// `ee_origin`: local, ICMP or ICMPv6.
    pub origin: u8,
    /// `ee_errno`.
    pub errno: u32,
    /// ICMP type.
    pub kind: u8,
    /// ICMP code.
    pub code: u8,
    /// `ee_info` (an MTU for fragmentation needed).
    pub info: u32,
    /// The offender (the router or host that sent the ICMP error).
    pub from: Option<IpAddr>,
    /// Where the packet the error is about was going (its destination address and port).
    pub dest: Option<SocketAddr>,
}

impl SockError {
    /// An ICMP (v4 or v6) time exceeded.
    pub fn time_exceeded(&self) -> bool {
        matches!((self.origin, self.kind), (SO_EE_ORIGIN_ICMP, 11) | (SO_EE_ORIGIN_ICMP6, 3))
    }
}

/// Reads one message from `fd`'s error queue into `buf` (the quoted payload); `None` when
/// the queue is empty. The socket must have IP_RECVERR (or IPV6_RECVERR) set and, for
/// `at_ns`, receive timestamps enabled.
pub fn recv_error(fd: RawFd, buf: &mut [u8]) -> io::Result<Option<SockError>> {
    let mut at = None;
    let mut err: Option<(libc::sock_extended_err, Option<IpAddr>)> = None;
    let got = recvmsg_into(fd, buf, libc::MSG_DONTWAIT | libc::MSG_ERRQUEUE, |level, kind, d| {
        if level == libc::SOL_SOCKET && kind == libc::SCM_TIMESTAMPNS {
            // SAFETY: its level and type say it is a timespec.
            at = Some(unsafe { timestamp_ns(d) });
        } else if (level == libc::SOL_IP && kind == libc::IP_RECVERR)
            || (level == libc::SOL_IPV6 && kind == libc::IPV6_RECVERR)
        {
            // SAFETY: an extended error, the offender's sockaddr right after it.
            unsafe {
                let ee = std::ptr::read_unaligned(d.cast::<libc::sock_extended_err>());
                let offender = d.add(std::mem::size_of::<libc::sock_extended_err>()).cast::<libc::sockaddr>();
                err = Some((ee, socket_addr(offender).map(|a| a.ip())));
            }
        }
    });
    let (len, dest) = match got {
        Ok(x) => x,
        Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR)) => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(err.map(|(ee, from)| SockError {
        len,
        at_ns: at,
        origin: ee.ee_origin,
        errno: ee.ee_errno,
        kind: ee.ee_type,
        code: ee.ee_code,
        info: ee.ee_info,
        from,
        dest,
    }))
}

/// Whether `e` is the error an ICMP message left on a socket with IP_RECVERR: it fails the
/// next send or read once, and the message itself waits on the error queue.
pub fn icmp_pending(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ECONNREFUSED | libc::EHOSTUNREACH | libc::ENETUNREACH | libc::EHOSTDOWN | libc::EPROTO)
    )
}

/// Sends `pkts` to `to` back to back, each with its own TTL (hop limit) when it has one (a
/// control message: the socket's own TTL is unchanged), in as few sendmmsg calls as the send
/// buffer allows (a non-blocking socket's waits for room, 5 s at most); a call failed by an
/// error an ICMP message left on the socket (with IP_RECVERR, each fails the next send once)
/// is made again. Returns how many were sent.
pub fn send_train_to(fd: RawFd, pkts: &[(&[u8], Option<u8>)], to: SocketAddr) -> io::Result<usize> {
    let dst = socket2::SockAddr::from(to);
    let (level, kind) = if to.is_ipv6() { (libc::SOL_IPV6, libc::IPV6_HOPLIMIT) } else { (libc::SOL_IP, libc::IP_TTL) };
    let mut iovs: Vec<libc::iovec> =
        pkts.iter().map(|(b, _)| libc::iovec { iov_base: b.as_ptr() as *mut libc::c_void, iov_len: b.len() }).collect();
    // One control buffer per packet (a cmsg of one int fits in 32 bytes).
    let mut ctl: Vec<[u64; 4]> = vec![[0; 4]; pkts.len()];
    // SAFETY: zeroed mmsghdrs are valid; every pointer set below points into `dst`, `iovs` or
    // `ctl`, which outlive the sendmmsg calls, and each control message is written within its
    // 32-byte buffer.
    let mut msgs: Vec<libc::mmsghdr> = (0..pkts.len()).map(|_| unsafe { std::mem::zeroed() }).collect();
    for (i, (_, ttl)) in pkts.iter().enumerate() {
        let h = &mut msgs[i].msg_hdr;
        h.msg_name = dst.as_ptr() as *mut libc::c_void;
        h.msg_namelen = dst.len();
        h.msg_iov = &mut iovs[i];
        h.msg_iovlen = 1;
        if let Some(ttl) = ttl {
            h.msg_control = ctl[i].as_mut_ptr().cast();
            // SAFETY: see above.
            unsafe {
                h.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) as _;
                let c = libc::CMSG_FIRSTHDR(h);
                (*c).cmsg_level = level;
                (*c).cmsg_type = kind;
                (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as _;
                std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>(), libc::c_int::from(*ttl));
            }
        }
    }
    let (mut done, mut again) = (0, 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while done < msgs.len() {
        // SAFETY: msgs[done..] are valid headers pointing at live buffers.
        let rc = unsafe { libc::sendmmsg(fd, msgs[done..].as_mut_ptr(), (msgs.len() - done) as libc::c_uint, 0) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                // A non-blocking socket's buffer is full: wait for room, a while at most.
                Some(libc::EAGAIN | libc::ENOBUFS) if std::time::Instant::now() < deadline => {
                    let mut p = [crate::poll::PollFd { fd, events: libc::POLLOUT, revents: 0 }];
                    let _ = crate::poll::poll_fds(&mut p, Some(std::time::Duration::from_millis(5)));
                    continue;
                }
                _ if icmp_pending(&e) && again < 8 => {
                    again += 1;
                    continue;
                }
                _ => return if done > 0 { Ok(done) } else { Err(e) },
            }
        }
        done += rc as usize;
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sockopt::enable_tx_timestamps;
    use std::os::fd::AsRawFd;

    fn realtime_ns() -> u64 {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
    }

    #[test]
    fn a_receive_batch_takes_what_is_queued_with_senders_and_lengths() {
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = rx.local_addr().unwrap();
        for i in 0..5u8 {
            let s = if i % 2 == 0 { &a } else { &b };
            s.send_to(&vec![i; 100 * usize::from(i) + 1], to).unwrap();
        }
        // Queued on loopback by the time send_to returns; one more datagram than fits a slot.
        a.send_to(&[9u8; 3000], to).unwrap();
        let mut batch = RecvBatch::new(4, 2048);
        let mut got = Vec::new();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while got.len() < 6 && std::time::Instant::now() < until {
            let n = batch.recv(rx.as_raw_fd()).unwrap();
            assert!(n <= 4);
            got.extend(batch.iter().map(|(from, d)| (from.unwrap(), d.len(), d[0])));
        }
        let (ta, tb) = (a.local_addr().unwrap(), b.local_addr().unwrap());
        assert_eq!(got, [(ta, 1, 0), (tb, 101, 1), (ta, 201, 2), (tb, 301, 3), (ta, 401, 4), (ta, 2048, 9)]);
        assert_eq!(batch.recv(rx.as_raw_fd()).unwrap(), 0, "nothing queued: no wait, no datagram");
    }

    #[test]
    fn transmit_timestamps_come_back_numbered_in_send_order() {
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        enable_tx_timestamps(tx.as_raw_fd()).unwrap();
        let before = realtime_ns();
        for _ in 0..3 {
            tx.send(b"probe").unwrap();
        }
        let mut got = Vec::new();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while got.len() < 3 && std::time::Instant::now() < until {
            match recv_tx_timestamp(tx.as_raw_fd()).unwrap() {
                Some(s) => got.push(s),
                None => std::thread::sleep(std::time::Duration::from_millis(1)),
            }
        }
        let ids: Vec<u32> = got.iter().map(|g| g.0).collect();
        assert_eq!(ids, vec![0, 1, 2]);
        assert!(got.iter().all(|g| g.1 >= before && g.1 - before < 1_000_000_000), "{got:?} vs {before}");
        assert!(recv_tx_timestamp(tx.as_raw_fd()).unwrap().is_none());
    }
}
