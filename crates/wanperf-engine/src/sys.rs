//! Thin, safe wrappers over the Linux calls the engine needs and the standard library lacks:
//! TCP_INFO, TCP_CONGESTION, pacing, MSG_TRUNC receive, vmsplice/splice sending, rusage, the
//! host's /proc and /sys counters, and the host capture.

use socket2::Socket;
use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use wanperf_proto::msg::{CpuUsage, HostCapture, InterfaceCapture, TcpInfo};

fn u32_at(b: &[u8], off: usize, len: usize) -> Option<u32> {
    (off + 4 <= len).then(|| u32::from_ne_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]]))
}

fn u64_at(b: &[u8], off: usize, len: usize) -> Option<u64> {
    (off + 8 <= len).then(|| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[off..off + 8]);
        u64::from_ne_bytes(a)
    })
}

/// Reads TCP_INFO. Fields are taken by their offsets in `struct tcp_info` (linux/tcp.h);
/// fields past the length the kernel returned are `None`.
pub fn tcp_info(fd: RawFd) -> io::Result<TcpInfo> {
    let mut buf = [0u8; 256];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf is valid for `len` bytes and the kernel writes at most `len`.
    let rc = unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, buf.as_mut_ptr().cast(), &mut len) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let n = len as usize;
    let g32 = |o| u32_at(&buf, o, n).unwrap_or(0);
    let ssthresh = g32(76);
    Ok(TcpInfo {
        cwnd: g32(80),
        ssthresh: (ssthresh < 0x7fff_ffff).then_some(ssthresh),
        snd_mss: g32(16),
        srtt_us: g32(68),
        rttvar_us: g32(72),
        min_rtt_us: u32_at(&buf, 148, n),
        total_retrans: g32(100),
        lost: g32(32),
        unacked: g32(24),
        reordering: g32(88),
        delivery_rate_bps: u64_at(&buf, 160, n).map(|v| v.saturating_mul(8)),
        pacing_rate_bps: u64_at(&buf, 104, n).map(|v| if v == u64::MAX { v } else { v.saturating_mul(8) }),
        snd_wnd: u32_at(&buf, 228, n),
        rcv_space: g32(96),
        busy_time_us: u64_at(&buf, 168, n),
        rwnd_limited_us: u64_at(&buf, 176, n),
        sndbuf_limited_us: u64_at(&buf, 184, n),
        bytes_acked: u64_at(&buf, 120, n),
        bytes_retrans: u64_at(&buf, 208, n),
        snd_cwnd_bytes: None,
    })
}

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

/// Sets TCP_CONGESTION.
pub fn set_congestion(fd: RawFd, name: &str) -> io::Result<()> {
    setsockopt_raw(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, name.as_bytes())
}

/// Reads TCP_CONGESTION: the algorithm the socket runs.
pub fn congestion(fd: RawFd) -> io::Result<String> {
    let mut buf = [0u8; 32];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf is valid for len bytes.
    let rc =
        unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, buf.as_mut_ptr().cast(), &mut len) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let end = buf[..len as usize].iter().position(|&b| b == 0).unwrap_or(len as usize);
    Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
}

/// The DSCP a socket marks with (IPv4 TOS or IPv6 traffic class, whichever family it is).
pub fn dscp(s: &Socket) -> Option<u8> {
    let v6 = s.local_addr().ok()?.is_ipv6();
    let tos = if v6 { s.tclass_v6().ok()? } else { s.tos().ok()? };
    Some((tos >> 2) as u8)
}

/// Caps the socket's pacing rate (SO_MAX_PACING_RATE), in bit/s.
pub fn set_max_pacing(fd: RawFd, bps: u64) -> io::Result<()> {
    let bytes_per_s: u64 = (bps / 8).max(1);
    setsockopt_raw(fd, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE, &bytes_per_s.to_ne_bytes())
}

/// Sets the DSCP code point on a socket of the given family.
pub fn set_dscp(sock: &Socket, ipv6: bool, dscp: u8) -> io::Result<()> {
    let tos = u32::from(dscp) << 2;
    if ipv6 {
        sock.set_tclass_v6(tos)
    } else {
        sock.set_tos(tos)
    }
}

/// Sets SO_RCVLOWAT: a blocking read returns once this many bytes are queued (or on
/// timeout, FIN or error).
pub fn set_rcvlowat(fd: RawFd, bytes: usize) -> io::Result<()> {
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    setsockopt_raw(fd, libc::SOL_SOCKET, libc::SO_RCVLOWAT, &v.to_ne_bytes())
}

/// The socket's current SO_RCVBUF (autotuning grows it).
pub fn rcvbuf(fd: RawFd) -> io::Result<usize> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: v and len are valid out-pointers of the sizes given.
    let rc = unsafe {
        libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, (&mut v as *mut libc::c_int).cast(), &mut len)
    };
    if rc == 0 {
        Ok(v.max(0) as usize)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Receives and discards up to `len` bytes without copying them (TCP MSG_TRUNC, tcp(7)).
pub fn recv_discard(fd: RawFd, len: usize) -> io::Result<usize> {
    loop {
        // SAFETY: a null buffer is allowed with MSG_TRUNC on TCP: nothing is copied.
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

/// A zero-copy sender: a static buffer spliced into the socket through a pipe (vmsplice the
/// buffer's pages into the pipe, splice the pipe into the socket). The pages are shared with
/// the kernel, never copied; that is safe here because the buffer never changes.
#[derive(Debug)]
pub struct SpliceSender {
    buf: Vec<u8>,
    rd: OwnedFd,
    wr: OwnedFd,
    in_pipe: usize,
}

impl SpliceSender {
    /// A sender whose buffer holds `len` bytes of pattern.
    pub fn new(len: usize) -> io::Result<SpliceSender> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: fds is a valid array of two ints.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both fds were just created and are owned here.
        let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // A pipe as large as one write (within fs.pipe-max-size); failure just means smaller chunks.
        // SAFETY: plain fcntl on an owned fd.
        unsafe { libc::fcntl(wr.as_raw_fd(), libc::F_SETPIPE_SZ, len as libc::c_int) };
        let buf = (0..len).map(|i| (i % 251) as u8).collect();
        Ok(SpliceSender { buf, rd, wr, in_pipe: 0 })
    }

    /// Moves up to `count` bytes into the socket; returns how many reached it.
    pub fn send(&mut self, sock: RawFd, count: usize) -> io::Result<usize> {
        if self.in_pipe == 0 {
            let iov =
                libc::iovec { iov_base: self.buf.as_ptr() as *mut libc::c_void, iov_len: count.min(self.buf.len()) };
            // SAFETY: iov points into self.buf, which outlives the pipe's references (the
            // pipe is drained into the socket, whose skbs hold page references of their own).
            let n = unsafe { libc::vmsplice(self.wr.as_raw_fd(), &iov, 1, 0) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            self.in_pipe = n as usize;
        }
        // SAFETY: valid fds; null offsets for pipe and socket.
        let n = unsafe {
            libc::splice(
                self.rd.as_raw_fd(),
                std::ptr::null_mut(),
                sock,
                std::ptr::null_mut(),
                self.in_pipe,
                libc::SPLICE_F_MOVE | libc::SPLICE_F_MORE,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        self.in_pipe -= n as usize;
        Ok(n as usize)
    }
}

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

/// Lets the calling thread's sleeps end within `ns` of their deadline (the default slack is
/// 50 µs), so paced senders keep their schedule.
pub fn set_timer_slack_ns(ns: u64) {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and affects only this thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) };
}

fn rusage(who: libc::c_int) -> (f64, f64) {
    // SAFETY: an all-zero rusage is valid; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: ru is a valid out-pointer.
    unsafe { libc::getrusage(who, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

/// CPU seconds (user, system) of the calling thread.
pub fn thread_cpu() -> (f64, f64) {
    rusage(libc::RUSAGE_THREAD)
}

/// CPU seconds (user, system) of the whole process.
pub fn process_cpu() -> (f64, f64) {
    rusage(libc::RUSAGE_SELF)
}

/// CPU used between two readings over `wall_s` seconds.
pub fn cpu_between(before: (f64, f64), after: (f64, f64), wall_s: f64) -> CpuUsage {
    CpuUsage { user_s: (after.0 - before.0).max(0.0), system_s: (after.1 - before.1).max(0.0), wall_s }
}

/// The host's TCP counters: `TcpExt.*` from /proc/net/netstat and `Tcp.*` from /proc/net/snmp.
pub fn tcp_counters() -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for (path, prefix) in [("/proc/net/netstat", "TcpExt:"), ("/proc/net/snmp", "Tcp:")] {
        if let Ok(text) = std::fs::read_to_string(path) {
            parse_proc_pairs(&text, prefix, &mut out);
        }
    }
    out
}

/// Parses the header/value line pairs of /proc/net/{netstat,snmp} for one prefix.
pub fn parse_proc_pairs(text: &str, prefix: &str, out: &mut BTreeMap<String, i64>) {
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with(prefix)).collect();
    for pair in lines.chunks(2) {
        if let [names, values] = pair {
            let name = prefix.trim_end_matches(':');
            for (k, v) in names.split_whitespace().skip(1).zip(values.split_whitespace().skip(1)) {
                if let Ok(v) = v.parse::<i64>() {
                    out.insert(format!("{name}.{k}"), v);
                }
            }
        }
    }
}

/// Non-zero differences `after - before` (gauges like Tcp.CurrEstab included as differences).
pub fn counter_delta(before: &BTreeMap<String, i64>, after: &BTreeMap<String, i64>) -> BTreeMap<String, i64> {
    after
        .iter()
        .filter_map(|(k, v)| {
            let d = v - before.get(k).copied().unwrap_or(0);
            (d != 0 && k != "Tcp.MaxConn" && k != "Tcp.RtoMin" && k != "Tcp.RtoMax" && k != "Tcp.RtoAlgorithm")
                .then(|| (k.clone(), d))
        })
        .collect()
}

fn read_trim(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn read_u64(path: &str) -> Option<u64> {
    read_trim(path)?.parse().ok()
}

fn read_triple(path: &str) -> Option<[u64; 3]> {
    let s = read_trim(path)?;
    let v: Vec<u64> = s.split_whitespace().filter_map(|x| x.parse().ok()).collect();
    (v.len() == 3).then(|| [v[0], v[1], v[2]])
}

/// `net.core.rmem_max` and `net.core.wmem_max`.
pub fn buffer_max() -> (Option<u64>, Option<u64>) {
    (read_u64("/proc/sys/net/core/rmem_max"), read_u64("/proc/sys/net/core/wmem_max"))
}

/// Congestion control algorithms the kernel offers now.
pub fn available_cc() -> Vec<String> {
    read_trim("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// The interface whose address the kernel would use to reach `peer`.
pub fn route_interface(peer: IpAddr) -> Option<InterfaceCapture> {
    let bind: SocketAddr = if peer.is_ipv4() { "0.0.0.0:0".parse().ok()? } else { "[::]:0".parse().ok()? };
    let s = UdpSocket::bind(bind).ok()?;
    // connect() on UDP sends nothing; it only asks the routing table.
    s.connect(SocketAddr::new(peer, 9)).ok()?;
    let local = s.local_addr().ok()?.ip();
    interface_of(local)
}

/// The interface holding address `local`.
pub fn interface_of(local: IpAddr) -> Option<InterfaceCapture> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return None;
    }
    let mut found = None;
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: cur is a node of the list getifaddrs returned.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: ifa_addr is non-null and points at a sockaddr of the family it names.
        let addr = unsafe {
            match i32::from((*ifa.ifa_addr).sa_family) {
                libc::AF_INET => {
                    let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                    Some(IpAddr::from(u32::from_be(sin.sin_addr.s_addr).to_be_bytes()))
                }
                libc::AF_INET6 => {
                    let sin6 = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                    Some(IpAddr::from(sin6.sin6_addr.s6_addr))
                }
                _ => None,
            }
        };
        if addr == Some(local) {
            // SAFETY: ifa_name is a NUL-terminated string owned by the list.
            let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }.to_string_lossy().into_owned();
            found = Some(name);
            break;
        }
    }
    // SAFETY: head came from getifaddrs.
    unsafe { libc::freeifaddrs(head) };
    let name = found?;
    let base = format!("/sys/class/net/{name}");
    Some(InterfaceCapture {
        mtu: read_u64(&format!("{base}/mtu")).map(|v| v as u32),
        txqueuelen: read_u64(&format!("{base}/tx_queue_len")).map(|v| v as u32),
        speed_mbps: read_trim(&format!("{base}/speed"))
            .and_then(|s| s.parse::<i64>().ok())
            .filter(|v| *v > 0)
            .map(|v| v as u64),
        address: local.to_string(),
        name,
    })
}

/// What this host looks like; `peer` selects the interface recorded.
pub fn host_capture(peer: Option<IpAddr>) -> HostCapture {
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_default();
    let (rmem_max, wmem_max) = buffer_max();
    HostCapture {
        hostname: read_trim("/proc/sys/kernel/hostname").unwrap_or_default(),
        kernel: read_trim("/proc/sys/kernel/osrelease").unwrap_or_default(),
        cpu_model,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        rmem_max,
        wmem_max,
        tcp_rmem: read_triple("/proc/sys/net/ipv4/tcp_rmem"),
        tcp_wmem: read_triple("/proc/sys/net/ipv4/tcp_wmem"),
        congestion_control: read_trim("/proc/sys/net/ipv4/tcp_congestion_control"),
        available_congestion_control: available_cc(),
        interface: peer.and_then(route_interface),
    }
}

/// Asks the kernel to stamp each received datagram (SO_TIMESTAMPNS, wall clock).
pub fn enable_rx_timestamps(fd: RawFd) -> io::Result<()> {
    setsockopt_raw(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, &(1 as libc::c_int).to_ne_bytes())
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

/// Waits until `at` (a `Instant`): sleeps while more than 200 µs are left, then spins, so
/// streams can be paced to a few µs.
pub fn pace_until(at: std::time::Instant) {
    loop {
        let now = std::time::Instant::now();
        if now >= at {
            return;
        }
        let left = at - now;
        if left > std::time::Duration::from_micros(200) {
            std::thread::sleep(left - std::time::Duration::from_micros(150));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Wall-clock nanoseconds since the Unix epoch.
pub fn realtime_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// A received datagram: length, sender, and the kernel's receive time (ns since the epoch).
pub struct Received {
    /// Bytes.
    pub len: usize,
    /// Sender.
    pub from: Option<SocketAddr>,
    /// Kernel receive timestamp, if the socket asked for one.
    pub kernel_ns: Option<u64>,
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
    let mut kernel_ns = None;
    let (len, from) = recvmsg_into(fd, buf, 0, |level, kind, d| {
        if level == libc::SOL_SOCKET && kind == libc::SCM_TIMESTAMPNS {
            // SAFETY: its level and type say it is a timespec.
            kernel_ns = Some(unsafe { timestamp_ns(d) });
        }
    })?;
    Ok(Received { len, from, kernel_ns })
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
                    let mut p = libc::pollfd { fd, events: libc::POLLOUT, revents: 0 };
                    // SAFETY: one valid pollfd.
                    unsafe { libc::poll(&mut p, 1, 5) };
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

/// The host's CPU time so far from /proc/stat: (busy, total) in clock ticks over all cores
/// (idle and iowait are not busy).
pub fn host_cpu_ticks() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    Some((total.saturating_sub(idle), total))
}

/// Share of the host's CPU busy between two [`host_cpu_ticks`] readings.
pub fn host_busy_between(a: (u64, u64), b: (u64, u64)) -> Option<f64> {
    let dt = b.1.checked_sub(a.1)?;
    (dt > 0).then(|| (b.0.saturating_sub(a.0)) as f64 / dt as f64)
}

/// Nanoseconds the calling thread has waited on a run queue for a CPU (/proc/thread-self/
/// schedstat), where the kernel keeps it.
pub fn thread_runq_wait_ns() -> Option<u64> {
    let t = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    t.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn proc_pairs_and_delta() {
        let text = "TcpExt: SyncookiesSent TCPTimeouts\nTcpExt: 0 5\nIpExt: A\nIpExt: 1\n";
        let mut a = BTreeMap::new();
        parse_proc_pairs(text, "TcpExt:", &mut a);
        assert_eq!(a.get("TcpExt.TCPTimeouts"), Some(&5));
        assert_eq!(a.len(), 2);
        let mut b = a.clone();
        b.insert("TcpExt.TCPTimeouts".into(), 9);
        let d = counter_delta(&a, &b);
        assert_eq!(d.len(), 1);
        assert_eq!(d["TcpExt.TCPTimeouts"], 4);
    }

    #[test]
    fn real_counters_and_capture() {
        let c = tcp_counters();
        assert!(c.contains_key("Tcp.ActiveOpens"), "{c:?}");
        let h = host_capture(Some("127.0.0.1".parse().unwrap()));
        assert!(!h.kernel.is_empty());
        assert!(h.cpus >= 1);
        assert_eq!(h.interface.unwrap().name, "lo");
    }

    #[test]
    fn tcp_info_on_a_live_socket() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let info = tcp_info(c.as_raw_fd()).unwrap();
        assert!(info.cwnd > 0);
        assert!(info.snd_mss > 0);
        assert!(set_congestion(c.as_raw_fd(), "no-such-cc").is_err());
        assert!(set_congestion(c.as_raw_fd(), "reno").is_ok());
    }
}
