//! The I/O shell of `wanperf capacity`: one unprivileged UDP socket toward a `wanperf serve`,
//! which sends back-to-back trains (one sendmmsg, each packet optionally TTL-limited), paced
//! streams, and reads back what comes: the server's echo of each probe, stamped with the
//! kernel's receive time at the server, and the routers' ICMP time-exceeded answers to
//! TTL-limited packets, stamped with the kernel's receive time here.
//!
//! Every packet is a `wanperf ping` probe asking for a short reply, so the server answers a
//! 1500-byte packet with 68 bytes and the reverse path stays nearly idle; a probe's number
//! is in its first bytes, which routers quote back in their ICMP errors.

use crate::probe::{recv_error, SockError};
use socket2::{Domain, SockAddr, Socket, Type};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};
pub use wanperf_engine::sys::pace_until;
use wanperf_engine::sys::{
    enable_rx_timestamps, icmp_pending, realtime_ns, recv_timestamped, send_train_to, setsockopt_raw,
};
use wanperf_proto::probe::{
    Probe, RptReport, RptRequest, TrainRequest, PROBE_HEADER_LEN, RPT_REQUEST_LEN, RPT_TAIL, TRAIN_PACED_LEN,
    TRAIN_REQUEST_LEN,
};

/// One packet of a train.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pkt {
    /// Probe number (unique within a run).
    pub seq: u64,
    /// Size on the wire at the IP layer, bytes (header included).
    pub size: usize,
    /// TTL (hop limit), or the system's default.
    pub ttl: Option<u8>,
}

/// Something that came back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    /// The server echoed probe `seq`: when it left here (as stamped in it) and when it
    /// arrived there (the server's kernel time).
    Echo {
        /// Probe number.
        seq: u64,
        /// Send time here, ns since the epoch.
        client_tx_ns: u64,
        /// Receive time at the server, ns since the epoch (its clock).
        server_rx_ns: u64,
        /// Send time at the server (its clock).
        server_tx_ns: u64,
        /// When the echo arrived here.
        at_ns: u64,
    },
    /// The server answered a train request without a valid token with its token for this
    /// client (see [`TrainRequest`]).
    Token {
        /// The request's number.
        seq: u64,
        /// The token.
        token: u64,
    },
    /// A router answered probe `seq` with time exceeded.
    TimeExceeded {
        /// Probe number.
        seq: u64,
        /// The router.
        from: IpAddr,
        /// When the answer arrived (kernel time): here, or at the server for the packets of
        /// its recursive trains (the server's clock), which it reports.
        at_ns: u64,
    },
    /// Part `part` of `parts` of the server's report on its recursive train `seq` came (its
    /// answers are the `TimeExceeded` before it).
    Report {
        /// The request's number.
        seq: u64,
        /// This part, 0-based.
        part: u8,
        /// Parts of the report.
        parts: u8,
    },
}

/// The socket.
pub struct Trainer {
    sock: Socket,
    dst: SocketAddr,
    v6: bool,
}

fn setopt(sock: &Socket, level: libc::c_int, name: libc::c_int, v: libc::c_int) -> io::Result<()> {
    setsockopt_raw(sock.as_raw_fd(), level, name, &v.to_ne_bytes())
}

/// IP and UDP header bytes of a packet to `v6` or not.
pub fn overhead(v6: bool) -> usize {
    crate::probe::overhead(v6)
}

impl Trainer {
    /// A socket toward the server's UDP port `dst` (its echo).
    pub fn new(dst: SocketAddr) -> io::Result<Trainer> {
        let v6 = dst.is_ipv6();
        let sock = Socket::new(if v6 { Domain::IPV6 } else { Domain::IPV4 }, Type::DGRAM, None)?;
        if v6 {
            setopt(&sock, libc::SOL_IPV6, libc::IPV6_RECVERR, 1)?;
            setopt(&sock, libc::SOL_IPV6, libc::IPV6_MTU_DISCOVER, libc::IPV6_PMTUDISC_DONT)?;
        } else {
            setopt(&sock, libc::SOL_IP, libc::IP_RECVERR, 1)?;
            setopt(&sock, libc::SOL_IP, libc::IP_MTU_DISCOVER, libc::IP_PMTUDISC_DONT)?;
        }
        // A train of 64 large packets must fit in the send buffer at once; the answers too.
        let _ = sock.set_send_buffer_size(4 << 20);
        let _ = sock.set_recv_buffer_size(4 << 20);
        enable_rx_timestamps(sock.as_raw_fd())?;
        sock.connect(&SockAddr::from(dst))?;
        sock.set_nonblocking(true)?;
        Ok(Trainer { sock, dst, v6 })
    }

    /// Whether the server is reached over IPv6.
    pub fn v6(&self) -> bool {
        self.v6
    }

    /// This host's address toward the server.
    pub fn local_ip(&self) -> Option<IpAddr> {
        self.sock.local_addr().ok()?.as_socket().map(|a| a.ip())
    }

    fn payload(&self, p: &Pkt, tx_ns: u64) -> Vec<u8> {
        let mut b = vec![0u8; p.size.saturating_sub(overhead(self.v6)).max(PROBE_HEADER_LEN)];
        Probe { reply: false, short: true, seq: p.seq, client_tx_ns: tx_ns, server_rx_ns: 0, server_tx_ns: 0 }
            .write(&mut b);
        b
    }

    /// Sends `pkts` back to back (sendmmsg, as few calls as the send buffer allows, each
    /// packet with its TTL); returns the time just before the first left.
    pub fn send_train(&self, pkts: &[Pkt]) -> io::Result<u64> {
        let t0 = realtime_ns();
        let bufs: Vec<Vec<u8>> = pkts.iter().map(|p| self.payload(p, t0)).collect();
        let list: Vec<(&[u8], Option<u8>)> = bufs.iter().zip(pkts).map(|(b, p)| (b.as_slice(), p.ttl)).collect();
        send_train_to(self.sock.as_raw_fd(), &list, self.dst)?;
        Ok(t0)
    }

    /// Asks the server for a train of `count` packets of `size` bytes on the wire (IP header
    /// included) numbered from `seq`, with `token` (0 to ask for the token); returns the
    /// send time.
    pub fn request_train(&self, seq: u64, token: u64, count: u16, size: usize) -> io::Result<u64> {
        self.request_paced(seq, token, count, size, 0)
    }

    /// As [`Trainer::request_train`], the packets `gap_ns` apart (0: back to back).
    pub fn request_paced(&self, seq: u64, token: u64, count: u16, size: usize, gap_ns: u32) -> io::Result<u64> {
        let t = realtime_ns();
        let mut b = vec![0u8; if gap_ns > 0 { TRAIN_PACED_LEN } else { TRAIN_REQUEST_LEN }];
        Probe { reply: false, short: true, seq, client_tx_ns: t, server_rx_ns: 0, server_tx_ns: 0 }.write(&mut b);
        let payload = size.saturating_sub(overhead(self.v6)).clamp(b.len(), usize::from(u16::MAX));
        TrainRequest { token, count, size: payload as u16, gap_ns }.write(&mut b);
        self.send_buf(&b)?;
        Ok(t)
    }

    /// Asks the server for a recursive train back (see [`RptRequest`]): `heads` TTL-limited
    /// packets each side of `count` packets of `size` bytes on the wire, numbered from `seq`,
    /// the routers' answers reported after `wait_ms`; returns the send time.
    pub fn request_rpt(
        &self,
        seq: u64,
        token: u64,
        count: u16,
        size: usize,
        heads: u8,
        wait_ms: u16,
    ) -> io::Result<u64> {
        let t = realtime_ns();
        let mut b = vec![0u8; RPT_REQUEST_LEN];
        Probe { reply: false, short: true, seq, client_tx_ns: t, server_rx_ns: 0, server_tx_ns: 0 }.write(&mut b);
        let payload = size.saturating_sub(overhead(self.v6)).clamp(b.len(), usize::from(u16::MAX));
        let train = TrainRequest { token, count, size: payload as u16, gap_ns: 0 };
        RptRequest { train, heads, wait_ms }.write(&mut b);
        self.send_buf(&b)?;
        Ok(t)
    }

    /// Sends one packet now, stamped with its send time; returns that time.
    pub fn send_one(&self, p: &Pkt) -> io::Result<u64> {
        let t = realtime_ns();
        let b = self.payload(p, t);
        self.send_buf(&b)?;
        Ok(t)
    }

    /// Sends one datagram, waiting for room in the send buffer.
    fn send_buf(&self, b: &[u8]) -> io::Result<()> {
        loop {
            match self.sock.send(b) {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait(libc::POLLOUT, 5).map(|_| ())?,
                // A pending ICMP error fails a send once; it is read from the queue later.
                Err(e) if e.raw_os_error() == Some(libc::EINTR) || icmp_pending(&e) => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn wait(&self, events: libc::c_short, timeout_ms: i32) -> io::Result<bool> {
        wanperf_sys::poll_one(&self.sock, events, timeout_ms)
    }

    /// Everything that can be read now.
    pub fn drain(&self, out: &mut Vec<Heard>) -> io::Result<()> {
        let mut buf = [0u8; 9216];
        loop {
            let mut any = false;
            while let Some(e) = recv_error(self.sock.as_raw_fd(), &mut buf)? {
                any = true;
                if let Some(h) = time_exceeded(&e, &buf[..e.len]) {
                    out.push(h);
                }
            }
            match recv_timestamped(self.sock.as_raw_fd(), &mut buf) {
                Ok(r) => {
                    if let Some((p, rep)) = RptReport::read(&buf[..r.len]) {
                        for a in &rep.answers {
                            let seq = p.seq + u64::from(a.ttl) + if a.tail { RPT_TAIL } else { 0 };
                            out.push(Heard::TimeExceeded { seq, from: a.from, at_ns: a.at_ns });
                        }
                        out.push(Heard::Report { seq: p.seq, part: rep.part, parts: rep.parts });
                    } else if let Some(p) = Probe::read(&buf[..r.len]).filter(|p| p.reply) {
                        // A train answer of count 0 carries the server's token; any other
                        // reply is an echo (a train's packets too).
                        out.push(match TrainRequest::read(&buf[..r.len]).filter(|t| t.count == 0) {
                            Some(t) => Heard::Token { seq: p.seq, token: t.token },
                            None => Heard::Echo {
                                seq: p.seq,
                                client_tx_ns: p.client_tx_ns,
                                server_rx_ns: p.server_rx_ns,
                                server_tx_ns: p.server_tx_ns,
                                at_ns: r.kernel_ns.unwrap_or_else(realtime_ns),
                            },
                        });
                    }
                }
                Err(e) => match e.raw_os_error() {
                    Some(libc::EAGAIN) => {
                        if !any {
                            return Ok(());
                        }
                    }
                    // A pending ICMP error fails a plain read once; it is on the queue.
                    Some(libc::EINTR) => {}
                    _ if icmp_pending(&e) => {}
                    _ => return Err(e),
                },
            }
        }
    }

    /// Reads until `until`, or until `enough` says so (checked after each read), or until
    /// nothing has come for `quiet` after the first answer.
    pub fn collect(
        &self,
        until: Instant,
        quiet: Duration,
        mut enough: impl FnMut(&[Heard]) -> bool,
    ) -> io::Result<Vec<Heard>> {
        let mut out = Vec::new();
        let mut last = None::<Instant>;
        loop {
            let before = out.len();
            self.drain(&mut out)?;
            if out.len() > before {
                last = Some(Instant::now());
                if enough(&out) {
                    return Ok(out);
                }
            }
            let now = Instant::now();
            let mut end = until;
            if let Some(l) = last {
                end = end.min(l + quiet);
            }
            if now >= end {
                return Ok(out);
            }
            let ms = (end - now).as_micros().div_ceil(1000).min(50) as i32;
            self.wait(libc::POLLIN | libc::POLLERR, ms)?;
        }
    }
}

/// A time-exceeded answer quoting one of our probes.
fn time_exceeded(e: &SockError, quoted: &[u8]) -> Option<Heard> {
    if !e.time_exceeded() {
        return None;
    }
    let p = Probe::read(quoted)?;
    Some(Heard::TimeExceeded { seq: p.seq, from: e.from?, at_ns: e.at_ns.unwrap_or_else(realtime_ns) })
}
