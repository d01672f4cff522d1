//! The I/O shell of `wanperf trace`: one unprivileged socket that sends TTL-limited probes and
//! reads what comes back — ICMP errors from the socket's error queue (IP_RECVERR), echo
//! replies as data — with the kernel's receive timestamps.
//!
//! Paris-style: every probe of a trace has the same addresses, protocol and ports (UDP) or
//! identifier and sequence number (ICMP echo), and the payload carries the probe's number
//! together with its one's complement, so the UDP or ICMP checksum is the same for every
//! probe too: a per-flow load balancer sends them all the same way. Probes are told apart by
//! the payload, which routers quote back in their ICMP errors.

use crate::trace::{Answer, Reply};
use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// How probes travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// UDP to a (normally closed) port: the destination answers port unreachable.
    Udp,
    /// ICMP echo through a ping socket: the destination answers with an echo reply.
    Icmp,
}

const MAGIC: &[u8; 4] = b"WPTR";
/// Bytes of the probe's own payload: magic, number, its complement.
pub const PAYLOAD_MIN: usize = 12;

const SO_EE_ORIGIN_LOCAL: u8 = 1;
const SO_EE_ORIGIN_ICMP: u8 = 2;
const SO_EE_ORIGIN_ICMP6: u8 = 3;

/// A socket sending probes toward one destination.
pub struct Prober {
    fd: OwnedFd,
    dst: SocketAddr,
    method: Method,
}

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn setopt(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, v: libc::c_int) -> io::Result<()> {
    // SAFETY: v lives across the call and its size is passed.
    check(unsafe {
        libc::setsockopt(fd.as_raw_fd(), level, name, (&v as *const libc::c_int).cast(), size_of::<libc::c_int>() as _)
    })
    .map(|_| ())
}

fn sockaddr(a: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: an all-zero sockaddr_storage is valid; the writes below stay inside it.
    let mut ss: libc::sockaddr_storage = unsafe { zeroed() };
    let len = match a {
        SocketAddr::V4(v) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as _,
                sin_port: v.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(v.ip().octets()) },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than sockaddr_in and suitably aligned.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin) };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(v) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as _,
                sin6_port: v.port().to_be(),
                sin6_flowinfo: 0,
                sin6_addr: libc::in6_addr { s6_addr: v.ip().octets() },
                sin6_scope_id: v.scope_id(),
            };
            // SAFETY: as above.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin6) };
            size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

/// The address in a sockaddr the kernel wrote (an ICMP error's offender).
///
/// # Safety
/// `p` must point to a sockaddr_in or sockaddr_in6 as its family says.
unsafe fn read_sockaddr(p: *const libc::sockaddr) -> Option<IpAddr> {
    // SAFETY: the caller guarantees the family matches the layout.
    unsafe {
        match i32::from((*p).sa_family) {
            libc::AF_INET => {
                let sin = std::ptr::read_unaligned(p.cast::<libc::sockaddr_in>());
                Some(IpAddr::V4(Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes())))
            }
            libc::AF_INET6 => {
                let sin6 = std::ptr::read_unaligned(p.cast::<libc::sockaddr_in6>());
                Some(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)))
            }
            _ => None,
        }
    }
}

/// The probe payload for probe number `seq`, `len` bytes (at least [`PAYLOAD_MIN`]).
pub fn payload(seq: u32, len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len.max(PAYLOAD_MIN)];
    p[..4].copy_from_slice(MAGIC);
    p[4..8].copy_from_slice(&seq.to_be_bytes());
    p[8..12].copy_from_slice(&(!seq).to_be_bytes());
    p
}

/// The probe number in a payload the network gave back (quoted in an ICMP error, or echoed),
/// looked for within its first bytes (a ping socket's quote starts with the ICMP header).
pub fn probe_number(data: &[u8]) -> Option<u32> {
    (0..=16).find_map(|off| {
        let p = data.get(off..off + PAYLOAD_MIN)?;
        let seq = u32::from_be_bytes([p[4], p[5], p[6], p[7]]);
        (p[..4] == *MAGIC && u32::from_be_bytes([p[8], p[9], p[10], p[11]]) == !seq).then_some(seq)
    })
}

/// What an extended socket error says about a probe.
pub fn classify(v6: bool, origin: u8, kind: u8, code: u8, info: u32) -> Option<Answer> {
    match (origin, v6) {
        (SO_EE_ORIGIN_ICMP, false) => match (kind, code) {
            (11, _) => Some(Answer::TimeExceeded),
            (3, 3) => Some(Answer::Reached),
            (3, 4) => Some(Answer::FragNeeded(info)),
            (3, c) => Some(Answer::Unreachable(c)),
            _ => None,
        },
        (SO_EE_ORIGIN_ICMP6, true) => match (kind, code) {
            (3, _) => Some(Answer::TimeExceeded),
            (1, 4) => Some(Answer::Reached),
            (1, c) => Some(Answer::Unreachable(c)),
            (2, _) => Some(Answer::FragNeeded(info)),
            _ => None,
        },
        _ => None,
    }
}

/// Now, ns since the epoch (the clock of SO_TIMESTAMPNS).
pub fn realtime_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// What one read found.
pub enum Got {
    /// A reply to a probe.
    Reply(Reply),
    /// A send failed locally because the first link's MTU is smaller: that MTU.
    LocalMtu(u32),
    /// Something else (not ours, unparseable).
    Other,
}

impl Prober {
    /// A socket for probes to `dst` (UDP to `port`, or ICMP echo), with path MTU discovery
    /// probing (DF set, nothing cached) when `df`.
    pub fn new(dst: IpAddr, method: Method, port: u16, df: bool) -> io::Result<Prober> {
        let v6 = dst.is_ipv6();
        let family = if v6 { libc::AF_INET6 } else { libc::AF_INET };
        let proto = match (method, v6) {
            (Method::Udp, _) => libc::IPPROTO_UDP,
            (Method::Icmp, false) => libc::IPPROTO_ICMP,
            (Method::Icmp, true) => libc::IPPROTO_ICMPV6,
        };
        // SAFETY: plain socket(2); the descriptor is owned at once.
        let fd =
            unsafe { OwnedFd::from_raw_fd(check(libc::socket(family, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, proto))?) };
        if v6 {
            setopt(&fd, libc::SOL_IPV6, libc::IPV6_RECVERR, 1)?;
            if df {
                setopt(&fd, libc::SOL_IPV6, libc::IPV6_MTU_DISCOVER, libc::IPV6_PMTUDISC_PROBE)?;
            }
        } else {
            setopt(&fd, libc::SOL_IP, libc::IP_RECVERR, 1)?;
            setopt(
                &fd,
                libc::SOL_IP,
                libc::IP_MTU_DISCOVER,
                if df { libc::IP_PMTUDISC_PROBE } else { libc::IP_PMTUDISC_DONT },
            )?;
        }
        setopt(&fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)?;
        let dst = SocketAddr::new(dst, if method == Method::Udp { port } else { 0 });
        Ok(Prober { fd, dst, method })
    }

    fn v6(&self) -> bool {
        self.dst.is_ipv6()
    }

    /// IP and transport header bytes in front of the payload.
    pub fn overhead(&self) -> usize {
        (if self.v6() { 40 } else { 20 }) + 8
    }

    /// Sends probe `seq` with `ttl`, `size` bytes on the wire (IP header included); returns the
    /// send time.
    pub fn send(&self, ttl: u8, seq: u32, size: usize) -> io::Result<u64> {
        let (level, name) =
            if self.v6() { (libc::SOL_IPV6, libc::IPV6_UNICAST_HOPS) } else { (libc::SOL_IP, libc::IP_TTL) };
        setopt(&self.fd, level, name, i32::from(ttl))?;
        let body = payload(seq, size.saturating_sub(self.overhead()));
        let data = match self.method {
            Method::Udp => body,
            Method::Icmp => {
                // Echo request, identifier and checksum filled in by the kernel, sequence 0 for
                // every probe.
                let mut m = vec![if self.v6() { 128 } else { 8 }, 0, 0, 0, 0, 0, 0, 0];
                m.extend_from_slice(&body);
                m
            }
        };
        let (sa, len) = sockaddr(self.dst);
        let at = realtime_ns();
        // SAFETY: data and sa are valid for the lengths given.
        check(unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                data.as_ptr().cast(),
                data.len(),
                0,
                (&sa as *const libc::sockaddr_storage).cast(),
                len,
            ) as libc::c_int
        })?;
        Ok(at)
    }

    /// Waits up to `timeout_ms` for something to read.
    pub fn wait(&self, timeout_ms: i32) -> io::Result<bool> {
        let mut p = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN | libc::POLLERR, revents: 0 };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut p, 1, timeout_ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted { Ok(false) } else { Err(e) };
        }
        Ok(n > 0)
    }

    /// Reads one message, from the error queue first; `None` when there is nothing.
    pub fn read(&self) -> io::Result<Option<Got>> {
        if let Some(g) = self.recv(true)? {
            return Ok(Some(g));
        }
        self.recv(false)
    }

    fn recv(&self, errqueue: bool) -> io::Result<Option<Got>> {
        let mut buf = [0u8; 2048];
        let mut cmsg = [0u64; 64];
        // SAFETY: an all-zero sockaddr_storage and msghdr are valid; the pointers set below
        // outlive the recvmsg call.
        let mut name: libc::sockaddr_storage = unsafe { zeroed() };
        let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
        let mut msg: libc::msghdr = unsafe { zeroed() };
        msg.msg_name = (&mut name as *mut libc::sockaddr_storage).cast();
        msg.msg_namelen = size_of::<libc::sockaddr_storage>() as _;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cmsg.as_mut_ptr().cast();
        msg.msg_controllen = size_of_val(&cmsg) as _;
        let flags = libc::MSG_DONTWAIT | if errqueue { libc::MSG_ERRQUEUE } else { 0 };
        // SAFETY: msg points at live buffers of the sizes given.
        let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, flags) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
                // A queued error also fails a plain read: it is read from the queue next.
                _ if !errqueue => Ok(Some(Got::Other)),
                _ => Err(e),
            };
        }
        let data = &buf[..n as usize];
        let mut at = None;
        let mut err: Option<(u8, u8, u8, u32, Option<IpAddr>, u32)> = None;
        // SAFETY: the CMSG_* macros walk the control buffer the kernel filled, within
        // msg_controllen; each payload is read unaligned as the type its level and type say.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                let (level, kind) = ((*c).cmsg_level, (*c).cmsg_type);
                let d = libc::CMSG_DATA(c);
                if level == libc::SOL_SOCKET && kind == libc::SCM_TIMESTAMPNS {
                    let ts = std::ptr::read_unaligned(d.cast::<libc::timespec>());
                    at = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
                } else if (level == libc::SOL_IP && kind == libc::IP_RECVERR)
                    || (level == libc::SOL_IPV6 && kind == libc::IPV6_RECVERR)
                {
                    let ee = std::ptr::read_unaligned(d.cast::<libc::sock_extended_err>());
                    let offender = d.add(size_of::<libc::sock_extended_err>()).cast::<libc::sockaddr>();
                    err =
                        Some((ee.ee_origin, ee.ee_type, ee.ee_code, ee.ee_info, read_sockaddr(offender), ee.ee_errno));
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        let at_ns = at.unwrap_or_else(realtime_ns);
        if let Some((origin, kind, code, info, from, errno)) = err {
            if origin == SO_EE_ORIGIN_LOCAL && errno == libc::EMSGSIZE as u32 {
                return Ok(Some(Got::LocalMtu(info)));
            }
            let (Some(answer), Some(from), Some(seq)) =
                (classify(self.v6(), origin, kind, code, info), from, probe_number(data))
            else {
                return Ok(Some(Got::Other));
            };
            return Ok(Some(Got::Reply(Reply { seq, from, at_ns, answer })));
        }
        if errqueue {
            return Ok(Some(Got::Other));
        }
        // An echo reply (ICMP type 0 or 129) from the destination.
        let echo_reply = data.first().is_some_and(|&t| t == if self.v6() { 129 } else { 0 });
        // SAFETY: the kernel wrote a sockaddr of the socket's family into `name`.
        let from = unsafe { read_sockaddr((&name as *const libc::sockaddr_storage).cast()) };
        match (self.method, echo_reply, from, probe_number(data)) {
            (Method::Icmp, true, Some(from), Some(seq)) => {
                Ok(Some(Got::Reply(Reply { seq, from, at_ns, answer: Answer::Reached })))
            }
            _ => Ok(Some(Got::Other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_payload_has_the_same_checksum() {
        fn sum(p: &[u8]) -> u32 {
            let mut s: u32 = p.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
            while s > 0xffff {
                s = (s & 0xffff) + (s >> 16);
            }
            s
        }
        let a = sum(&payload(1, 40));
        for seq in [2, 77, 65_535, 65_536, 0xdead_beef, u32::MAX] {
            assert_eq!(sum(&payload(seq, 40)), a, "seq {seq}");
        }
    }

    #[test]
    fn probe_numbers_are_found_in_quotes_and_echoes() {
        let p = payload(4242, 32);
        assert_eq!(probe_number(&p), Some(4242));
        let mut icmp = vec![0u8; 8];
        icmp.extend_from_slice(&p);
        assert_eq!(probe_number(&icmp), Some(4242));
        assert_eq!(probe_number(&p[..11]), None);
        let mut bad = p.clone();
        bad[9] ^= 1;
        assert_eq!(probe_number(&bad), None);
        assert_eq!(probe_number(b""), None);
    }

    #[test]
    fn icmp_errors_mean_what_rfc_792_and_4443_say() {
        assert_eq!(classify(false, SO_EE_ORIGIN_ICMP, 11, 0, 0), Some(Answer::TimeExceeded));
        assert_eq!(classify(false, SO_EE_ORIGIN_ICMP, 3, 3, 0), Some(Answer::Reached));
        assert_eq!(classify(false, SO_EE_ORIGIN_ICMP, 3, 4, 1400), Some(Answer::FragNeeded(1400)));
        assert_eq!(classify(false, SO_EE_ORIGIN_ICMP, 3, 13, 0), Some(Answer::Unreachable(13)));
        assert_eq!(classify(true, SO_EE_ORIGIN_ICMP6, 3, 0, 0), Some(Answer::TimeExceeded));
        assert_eq!(classify(true, SO_EE_ORIGIN_ICMP6, 1, 4, 0), Some(Answer::Reached));
        assert_eq!(classify(true, SO_EE_ORIGIN_ICMP6, 2, 0, 1280), Some(Answer::FragNeeded(1280)));
        assert_eq!(classify(true, SO_EE_ORIGIN_ICMP, 11, 0, 0), None);
        assert_eq!(classify(false, SO_EE_ORIGIN_LOCAL, 0, 0, 0), None);
    }
}
