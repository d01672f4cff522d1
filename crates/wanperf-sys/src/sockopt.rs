//! Socket options the standard library and socket2 lack: TCP_INFO, TCP_CONGESTION, pacing,
//! SO_RCVLOWAT, SO_RCVBUF, receive and transmit timestamps, and the zero-copy discard of
//! received bytes (MSG_TRUNC).

use std::io;
use std::os::fd::RawFd;

/// setsockopt with the bytes of `value` as the option value.
pub fn setsockopt_raw(fd: RawFd, level: libc::c_int, opt: libc::c_int, value: &[u8]) -> io::Result<()> {
    // SAFETY: pointer and length describe `value`, which outlives the call.
    let rc = unsafe { libc::setsockopt(fd, level, opt, value.as_ptr().cast(), value.len() as libc::socklen_t) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// getsockopt into `buf`: the bytes the kernel wrote.
fn getsockopt_raw(fd: RawFd, level: libc::c_int, opt: libc::c_int, buf: &mut [u8]) -> io::Result<usize> {
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf is valid for writes of `len` bytes and the kernel writes at most `len`.
    let rc = unsafe { libc::getsockopt(fd, level, opt, buf.as_mut_ptr().cast(), &mut len) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((len as usize).min(buf.len()))
}

/// The bytes of a `struct tcp_info` (linux/tcp.h) as the kernel returned them: as many as it
/// knows, up to 256. Fields are read by their offsets; those past `len` are `None`.
#[derive(Debug, Clone, Copy)]
pub struct TcpInfoBytes {
    /// The buffer (zero past `len`).
    pub buf: [u8; 256],
    /// How many bytes the kernel wrote.
    pub len: usize,
}

impl TcpInfoBytes {
    /// The byte at offset `off`, if the kernel wrote it.
    pub fn u8_at(&self, off: usize) -> Option<u8> {
        (off < self.len).then(|| self.buf[off])
    }

    /// The u32 at byte offset `off`, if the kernel wrote it.
    pub fn u32_at(&self, off: usize) -> Option<u32> {
        let b = &self.buf;
        (off + 4 <= self.len).then(|| u32::from_ne_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]]))
    }

    /// The u64 at byte offset `off`, if the kernel wrote it.
    pub fn u64_at(&self, off: usize) -> Option<u64> {
        (off + 8 <= self.len).then(|| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&self.buf[off..off + 8]);
            u64::from_ne_bytes(a)
        })
    }
}

/// Reads TCP_INFO.
pub fn tcp_info_bytes(fd: RawFd) -> io::Result<TcpInfoBytes> {
    let mut buf = [0u8; 256];
    let len = getsockopt_raw(fd, libc::IPPROTO_TCP, libc::TCP_INFO, &mut buf)?;
    Ok(TcpInfoBytes { buf, len })
}

/// `SOL_MPTCP` (linux/socket.h) and its options (linux/mptcp.h).
const SOL_MPTCP: libc::c_int = 284;
const MPTCP_TCPINFO: libc::c_int = 2;
const MPTCP_SUBFLOW_ADDRS: libc::c_int = 3;
/// The protocol number of MPTCP sockets (`IPPROTO_MPTCP`).
pub const IPPROTO_MPTCP: libc::c_int = 262;
/// Most subflows read of one MPTCP socket.
const MAX_SUBFLOWS: usize = 8;

/// One subflow of an MPTCP socket: its addresses and its TCP_INFO.
#[derive(Debug, Clone)]
pub struct Subflow {
    /// This end's address of the subflow.
    pub local: Option<std::net::SocketAddr>,
    /// The far end's.
    pub remote: Option<std::net::SocketAddr>,
    /// Its TCP_INFO.
    pub tcp_info: TcpInfoBytes,
}

/// The subflows of an MPTCP socket (MPTCP_TCPINFO and MPTCP_SUBFLOW_ADDRS, Linux 5.16+), at
/// most 8.
pub fn mptcp_subflows(fd: RawFd) -> io::Result<Vec<Subflow>> {
    let infos = subflow_data(fd, MPTCP_TCPINFO, 256)?;
    let addrs = subflow_data(fd, MPTCP_SUBFLOW_ADDRS, 256)?;
    Ok(infos
        .iter()
        .enumerate()
        .map(|(i, (info, len))| {
            let mut buf = [0u8; 256];
            buf[..info.len()].copy_from_slice(info);
            let addr = |half: usize| addrs.get(i).and_then(|(a, _)| sockaddr(&a[half * 128..half * 128 + 128]));
            Subflow { local: addr(0), remote: addr(1), tcp_info: TcpInfoBytes { buf, len: *len } }
        })
        .collect())
}

/// One MPTCP subflow-data option: `struct mptcp_subflow_data` (16 bytes: its size, the
/// subflows' count, the kernel's element size and the one used) and then the elements, one per
/// subflow, each as many bytes apart as the kernel says it used (`size_user`, which it lowers
/// to its own element's size: `struct tcp_info` is smaller than 256 bytes on many kernels);
/// the elements.
fn subflow_data(fd: RawFd, opt: libc::c_int, elem: usize) -> io::Result<Vec<(Vec<u8>, usize)>> {
    const HEAD: usize = 16;
    let mut buf = vec![0u8; HEAD + elem * MAX_SUBFLOWS];
    buf[0..4].copy_from_slice(&(HEAD as u32).to_ne_bytes());
    buf[12..16].copy_from_slice(&(elem as u32).to_ne_bytes());
    let got = getsockopt_raw(fd, SOL_MPTCP, opt, &mut buf)?;
    Ok(elements(&buf[..got], elem))
}

/// The elements of a `struct mptcp_subflow_data` answer of `got` bytes: as many as the kernel
/// counted and wrote, `size_user` bytes apart (at most `elem`).
fn elements(buf: &[u8], elem: usize) -> Vec<(Vec<u8>, usize)> {
    if buf.len() < 16 {
        return Vec::new();
    }
    let word = |o: usize| u32::from_ne_bytes([buf[o], buf[o + 1], buf[o + 2], buf[o + 3]]) as usize;
    let (head, stride) = (word(0).max(16), word(12).min(elem));
    if stride == 0 {
        return Vec::new();
    }
    let n = word(4).min(buf.len().saturating_sub(head) / stride);
    (0..n).map(|i| (buf[head + i * stride..head + (i + 1) * stride].to_vec(), stride)).collect()
}

/// A `struct sockaddr_in` or `sockaddr_in6` from its bytes.
fn sockaddr(b: &[u8]) -> Option<std::net::SocketAddr> {
    let family = libc::c_int::from(u16::from_ne_bytes([b[0], b[1]]));
    let port = u16::from_be_bytes([b[2], b[3]]);
    match family {
        libc::AF_INET => Some((std::net::Ipv4Addr::new(b[4], b[5], b[6], b[7]), port).into()),
        libc::AF_INET6 => {
            let mut a = [0u8; 16];
            a.copy_from_slice(&b[8..24]);
            Some((std::net::Ipv6Addr::from(a), port).into())
        }
        _ => None,
    }
}

/// Sets TCP_CONGESTION.
pub fn set_congestion(fd: RawFd, name: &str) -> io::Result<()> {
    setsockopt_raw(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, name.as_bytes())
}

/// Reads TCP_CONGESTION: the algorithm the socket runs.
pub fn congestion(fd: RawFd) -> io::Result<String> {
    let mut buf = [0u8; 32];
    let len = getsockopt_raw(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, &mut buf)?;
    let end = buf[..len].iter().position(|&b| b == 0).unwrap_or(len);
    Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
}

/// Caps the socket's pacing rate (SO_MAX_PACING_RATE), in bit/s.
pub fn set_max_pacing(fd: RawFd, bps: u64) -> io::Result<()> {
    let bytes_per_s: u64 = (bps / 8).max(1);
    setsockopt_raw(fd, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE, &bytes_per_s.to_ne_bytes())
}

/// Sets SO_RCVLOWAT: a blocking read returns once this many bytes are queued (or on
/// timeout, FIN or error).
pub fn set_rcvlowat(fd: RawFd, bytes: usize) -> io::Result<()> {
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    setsockopt_raw(fd, libc::SOL_SOCKET, libc::SO_RCVLOWAT, &v.to_ne_bytes())
}

/// The socket's current SO_RCVBUF (autotuning grows it).
pub fn rcvbuf(fd: RawFd) -> io::Result<usize> {
    let mut v = [0u8; std::mem::size_of::<libc::c_int>()];
    getsockopt_raw(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &mut v)?;
    Ok(libc::c_int::from_ne_bytes(v).max(0) as usize)
}

/// Receives and discards up to `len` bytes without copying them (TCP MSG_TRUNC, tcp(7)).
pub fn recv_discard(fd: RawFd, len: usize) -> io::Result<usize> {
    loop {
        // SAFETY: a null buffer is allowed with MSG_TRUNC on TCP: nothing is copied. On a
        // socket of another kind the kernel finds no buffer to write to and fails (EFAULT).
        let rc = unsafe { libc::recv(fd, std::ptr::null_mut(), len, libc::MSG_TRUNC) };
        if rc >= 0 {
            return Ok(rc as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Asks the kernel to stamp each received datagram (SO_TIMESTAMPNS, wall clock).
pub fn enable_rx_timestamps(fd: RawFd) -> io::Result<()> {
    setsockopt_raw(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, &(1 as libc::c_int).to_ne_bytes())
}

/// Asks the kernel to hand each received datagram's TTL (hop limit) and TOS (traffic class)
/// to [`crate::msg::recv_timestamped`]; an IPv6 socket asks for both families' (its IPv4
/// clients arrive as mapped addresses).
pub fn enable_rx_ttl_tos(fd: RawFd, v6: bool) -> io::Result<()> {
    let on = (1 as libc::c_int).to_ne_bytes();
    setsockopt_raw(fd, libc::SOL_IP, libc::IP_RECVTTL, &on)?;
    setsockopt_raw(fd, libc::SOL_IP, libc::IP_RECVTOS, &on)?;
    if v6 {
        setsockopt_raw(fd, libc::SOL_IPV6, libc::IPV6_RECVHOPLIMIT, &on)?;
        setsockopt_raw(fd, libc::SOL_IPV6, libc::IPV6_RECVTCLASS, &on)?;
    }
    Ok(())
}

/// Asks the kernel for a software transmit timestamp of every datagram sent on `fd`, taken
/// when the packet leaves for the device and numbered in send order (SOF_TIMESTAMPING_OPT_ID);
/// they arrive on the socket's error queue without the packet (OPT_TSONLY).
pub fn enable_tx_timestamps(fd: RawFd) -> io::Result<()> {
    let flags = libc::SOF_TIMESTAMPING_TX_SOFTWARE
        | libc::SOF_TIMESTAMPING_SOFTWARE
        | libc::SOF_TIMESTAMPING_OPT_ID
        | libc::SOF_TIMESTAMPING_OPT_TSONLY;
    setsockopt_raw(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPING, &(flags as libc::c_int).to_ne_bytes())
}

#[cfg(test)]
mod tests {
    #[test]
    fn subflow_elements_are_as_far_apart_as_the_kernel_says() {
        // Two tcp_info of 248 bytes (a kernel whose struct is smaller than our 256): the
        // second starts at 16 + 248, not 16 + 256.
        let mut b = vec![0u8; 16 + 2 * 248];
        for (o, v) in [(0, 16u32), (4, 2), (8, 248), (12, 248)] {
            b[o..o + 4].copy_from_slice(&v.to_ne_bytes());
        }
        b[16] = 1;
        b[16 + 248] = 2;
        let e = super::elements(&b, 256);
        assert_eq!(e.len(), 2);
        assert_eq!((e[0].0[0], e[1].0[0], e[1].1), (1, 2, 248));
        // The kernel counted three but wrote two; a zero size is nothing.
        b[4..8].copy_from_slice(&3u32.to_ne_bytes());
        assert_eq!(super::elements(&b, 256).len(), 2);
        b[12..16].copy_from_slice(&0u32.to_ne_bytes());
        assert!(super::elements(&b, 256).is_empty());
        assert!(super::elements(&b[..8], 256).is_empty());
    }

    #[test]
    fn socket_addresses_read_from_their_kernel_bytes() {
        let mut v4 = [0u8; 128];
        v4[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        v4[2..4].copy_from_slice(&5301u16.to_be_bytes());
        v4[4..8].copy_from_slice(&[198, 18, 1, 1]);
        assert_eq!(super::sockaddr(&v4), Some("198.18.1.1:5301".parse().unwrap()));
        let mut v6 = [0u8; 128];
        v6[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
        v6[2..4].copy_from_slice(&80u16.to_be_bytes());
        v6[8..24].copy_from_slice(&"fd57:414e::1".parse::<std::net::Ipv6Addr>().unwrap().octets());
        assert_eq!(super::sockaddr(&v6), Some("[fd57:414e::1]:80".parse().unwrap()));
        assert_eq!(super::sockaddr(&[0u8; 128]), None);
    }

    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn tcp_options_on_a_live_socket() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let info = tcp_info_bytes(c.as_raw_fd()).unwrap();
        assert!(info.len >= 104, "{}", info.len);
        assert!(info.u32_at(80).unwrap() > 0, "cwnd");
        assert_eq!(info.u32_at(info.len), None);
        assert!(set_congestion(c.as_raw_fd(), "no-such-cc").is_err());
        set_congestion(c.as_raw_fd(), "reno").unwrap();
        assert_eq!(congestion(c.as_raw_fd()).unwrap(), "reno");
        assert!(rcvbuf(c.as_raw_fd()).unwrap() > 0);
        set_rcvlowat(c.as_raw_fd(), 1).unwrap();
        assert!(tcp_info_bytes(-1).is_err());
    }
}
