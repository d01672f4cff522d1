//! TCP SYN probes without privileges: each probe is a non-blocking `connect()` from a socket
//! with a low TTL and IP_RECVERR set. A router's time exceeded for the SYN lands on that
//! socket's error queue with the router's address (Linux queues ICMP errors of a connecting
//! TCP socket there, as it does for UDP); the destination answers with a SYN-ACK (an open
//! port: the connection completes and is reset at once, SO_LINGER 0, so nothing lingers in
//! TIME_WAIT) or a reset (a closed port: the connect is refused). Either means "reached".
//!
//! Paris-style: every probe comes from the same source port to the same destination port, so
//! a per-flow load balancer hashes them all alike. Two sockets cannot connect with the same
//! four-tuple at once, so these probes go one at a time: the next one is sent when the last
//! was answered or given up ([`Syn::busy`]).
//!
//! Times: an ICMP answer carries the kernel's receive timestamp; a SYN-ACK's round trip is the
//! kernel's own measurement of the SYN (TCP_INFO's first RTT sample, µs); a reset is timed
//! when it is read.

use crate::answer::{classify, poll_one, Got};
use crate::trace::{Answer, Reply};
use socket2::{Domain, SockAddr, Socket, Type};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::Duration;
use wanperf_engine::sys::{enable_rx_timestamps, realtime_ns, recv_error, setsockopt_raw, tcp_info};

/// A probe in flight.
struct Open {
    seq: u32,
    sock: Socket,
    sent_ns: u64,
}

/// The TCP SYN probes toward one destination port.
pub struct Syn {
    dst: SocketAddr,
    /// The source port every probe of a flow uses (the flow's first probe's, chosen by the
    /// kernel), by flow.
    local_ports: Vec<Option<u16>>,
    open: Option<Open>,
}

fn setopt(sock: &Socket, level: libc::c_int, name: libc::c_int, v: libc::c_int) -> io::Result<()> {
    setsockopt_raw(sock.as_raw_fd(), level, name, &v.to_ne_bytes())
}

impl Syn {
    /// Probes to `dst` (address and TCP port).
    pub fn new(dst: SocketAddr) -> Syn {
        Syn { dst, local_ports: Vec::new(), open: None }
    }

    /// Whether a probe is still waiting for its answer.
    pub fn busy(&self) -> bool {
        self.open.is_some()
    }

    /// Sends probe `seq` of flow `flow` with `ttl`: a SYN. A probe still open is given up
    /// (closed) first.
    pub fn send(&mut self, ttl: u8, seq: u32, flow: u16) -> io::Result<u64> {
        self.open = None;
        let v6 = self.dst.is_ipv6();
        let sock = Socket::new(if v6 { Domain::IPV6 } else { Domain::IPV4 }, Type::STREAM, None)?;
        sock.set_nonblocking(true)?;
        // Closing sends a reset, not a FIN: no TIME_WAIT holds the four-tuple the next probe
        // needs.
        sock.set_linger(Some(Duration::ZERO))?;
        sock.set_reuse_address(true)?;
        if v6 {
            setopt(&sock, libc::SOL_IPV6, libc::IPV6_RECVERR, 1)?;
            sock.set_unicast_hops_v6(u32::from(ttl))?;
        } else {
            setopt(&sock, libc::SOL_IP, libc::IP_RECVERR, 1)?;
            sock.set_ttl(u32::from(ttl))?;
        }
        enable_rx_timestamps(sock.as_raw_fd())?;
        // TCP resends an unanswered SYN after a second (one retry at most here); an answer
        // after that may be the retry's, so such a probe counts as lost ([`Syn::read`]).
        setopt(&sock, libc::IPPROTO_TCP, libc::TCP_SYNCNT, 1)?;
        let any: IpAddr =
            if v6 { std::net::Ipv6Addr::UNSPECIFIED.into() } else { std::net::Ipv4Addr::UNSPECIFIED.into() };
        let f = usize::from(flow);
        if self.local_ports.len() <= f {
            self.local_ports.resize(f + 1, None);
        }
        match sock.bind(&SockAddr::from(SocketAddr::new(any, self.local_ports[f].unwrap_or(0)))) {
            Ok(()) => {}
            // Another socket took the flow's port since its last probe: the flow moves to a
            // port the kernel picks (a new flow identifier for it from here on).
            Err(e) if e.raw_os_error() == Some(libc::EADDRINUSE) && self.local_ports[f].is_some() => {
                sock.bind(&SockAddr::from(SocketAddr::new(any, 0)))?;
                self.local_ports[f] = None;
            }
            Err(e) => return Err(e),
        }
        if self.local_ports[f].is_none() {
            self.local_ports[f] = sock.local_addr()?.as_socket().map(|a| a.port());
        }
        let at = realtime_ns();
        match sock.connect(&SockAddr::from(self.dst)) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) => return Err(e),
        }
        self.open = Some(Open { seq, sock, sent_ns: at });
        Ok(at)
    }

    /// Waits up to `timeout_ms` for the open probe's answer (or just waits, with none open).
    pub fn wait(&self, timeout_ms: i32) -> io::Result<bool> {
        let Some(o) = &self.open else {
            std::thread::sleep(Duration::from_millis(timeout_ms.max(0) as u64));
            return Ok(false);
        };
        poll_one(&o.sock, libc::POLLOUT | libc::POLLERR, timeout_ms)
    }

    /// The open probe's answer, if it has one; the probe is then closed. A probe whose SYN
    /// the kernel has resent is closed without one: an answer could be the resent SYN's, a
    /// second later than the probe's time says.
    pub fn read(&mut self) -> io::Result<Option<Got>> {
        let Some(o) = &self.open else { return Ok(None) };
        if tcp_info(o.sock.as_raw_fd()).is_ok_and(|t| t.total_retrans > 0) {
            self.open = None;
            return Ok(Some(Got::Other));
        }
        let v6 = self.dst.is_ipv6();
        let mut buf = [0u8; 512];
        // A router's (or the destination's) ICMP error first.
        if let Some(e) = recv_error(o.sock.as_raw_fd(), &mut buf)? {
            let answer = match classify(v6, e.origin, e.kind, e.code, e.info) {
                Some(Answer::FragNeeded(_)) | None => None,
                a => a,
            };
            let got = match (answer, e.from) {
                (Some(answer), Some(from)) => {
                    Got::Reply(Reply { seq: o.seq, from, at_ns: e.at_ns.unwrap_or_else(realtime_ns), answer })
                }
                _ => Got::Other,
            };
            self.open = None;
            return Ok(Some(got));
        }
        match o.sock.take_error()? {
            // A reset: the port is closed, and the destination was reached.
            Some(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => {
                let got = Got::Reply(Reply {
                    seq: o.seq,
                    from: self.dst.ip(),
                    at_ns: realtime_ns(),
                    answer: Answer::Reached,
                });
                self.open = None;
                Ok(Some(got))
            }
            // Any other failure without an ICMP error to say where: nothing to report.
            Some(_) => {
                self.open = None;
                Ok(Some(Got::Other))
            }
            None => {
                if o.sock.peer_addr().is_err() {
                    return Ok(None); // still connecting
                }
                // A SYN-ACK: the kernel's RTT of the SYN (its first sample is the measurement).
                let rtt_us = tcp_info(o.sock.as_raw_fd()).map(|t| t.srtt_us).unwrap_or(0);
                let at_ns = if rtt_us > 0 { o.sent_ns + u64::from(rtt_us) * 1000 } else { realtime_ns() };
                let got = Got::Reply(Reply { seq: o.seq, from: self.dst.ip(), at_ns, answer: Answer::Reached });
                self.open = None;
                Ok(Some(got))
            }
        }
    }
}
