//! The I/O shell of `wanperf trace`: one unprivileged socket that sends TTL-limited probes and
//! reads what comes back — ICMP errors from the socket's error queue (IP_RECVERR), echo
//! replies as data — with the kernel's receive timestamps.
//!
//! Paris-style: every probe of a trace has the same addresses, protocol and ports (UDP) or
//! identifier and sequence number (ICMP echo), and the payload carries the probe's number
//! together with its one's complement, so the UDP or ICMP checksum is the same for every
//! probe too: a per-flow load balancer sends them all the same way. Probes are told apart by
//! the payload, which routers quote back in their ICMP errors.
//!
//! With a `wanperf serve` at the destination (`--server`), UDP probes go to its port as echo
//! probes that ask for its count ([`Count`]): the number is the probe's `seq` and its
//! complement the client time field, so the checksum stays constant as before; the server
//! answers each one (no ICMP rate limit at the destination) with how many it has had.

use crate::answer::poll_one;
pub use crate::answer::{classify, Got};
use crate::trace::{Answer, Reply};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
pub use wanperf_engine::sys::realtime_ns;
use wanperf_engine::sys::{enable_rx_timestamps, recv_timestamped, setsockopt_raw, SO_EE_ORIGIN_LOCAL};
pub use wanperf_engine::sys::{recv_error, SockError};
use wanperf_proto::probe::{Count, Probe, COUNT_LEN};

/// How probes travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// UDP to a (normally closed) port: the destination answers port unreachable.
    Udp,
    /// ICMP echo through a ping socket: the destination answers with an echo reply.
    Icmp,
    /// TCP SYN to a port (open: SYN-ACK, closed: reset), one probe at a time ([`crate::syn`]).
    Tcp,
}

const MAGIC: &[u8; 4] = b"WPTR";
/// Bytes of the probe's own payload: magic, number, its complement.
pub const PAYLOAD_MIN: usize = 12;
/// Bytes of a probe's payload to a `wanperf serve` (an echo probe asking for the count).
pub const SERVER_PAYLOAD_MIN: usize = COUNT_LEN;

/// A socket sending probes toward one destination (for TCP, a socket per probe).
pub struct Prober {
    kind: Kind,
    v6: bool,
}

enum Kind {
    /// UDP or ICMP echo: one socket for every probe; `server`: UDP to a `wanperf serve`.
    Dgram { sock: Socket, dst: SockAddr, method: Method, server: bool },
    /// TCP SYN.
    Tcp(crate::syn::Syn),
}

fn setopt(sock: &Socket, level: libc::c_int, name: libc::c_int, v: libc::c_int) -> io::Result<()> {
    setsockopt_raw(sock.as_raw_fd(), level, name, &v.to_ne_bytes())
}

/// IP and UDP (or ICMP) header bytes in front of a probe's payload.
pub fn overhead(v6: bool) -> usize {
    (if v6 { 40 } else { 20 }) + 8
}

/// The probe payload for probe number `seq`, `len` bytes (at least [`PAYLOAD_MIN`]).
pub fn payload(seq: u32, len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len.max(PAYLOAD_MIN)];
    p[..4].copy_from_slice(MAGIC);
    p[4..8].copy_from_slice(&seq.to_be_bytes());
    p[8..12].copy_from_slice(&(!seq).to_be_bytes());
    p
}

/// The payload of probe number `seq` to a `wanperf serve`, `len` bytes (at least
/// [`SERVER_PAYLOAD_MIN`]): an echo probe asking for the count, the number and its
/// complement in place of the client's time, so every probe has the same checksum.
pub fn server_payload(seq: u32, len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len.max(SERVER_PAYLOAD_MIN)];
    let n = u64::from(seq);
    Probe { reply: false, short: false, seq: n, client_tx_ns: !n, server_rx_ns: 0, server_tx_ns: 0 }.write(&mut p);
    Count::ask(&mut p);
    p
}

/// The probe number in a payload the network gave back (quoted in an ICMP error, or echoed),
/// looked for within its first bytes (a ping socket's quote starts with the ICMP header);
/// either layout ([`payload`], [`server_payload`]).
pub fn probe_number(data: &[u8]) -> Option<u32> {
    (0..=16).find_map(|off| {
        let p = data.get(off..)?;
        if p.len() >= PAYLOAD_MIN && p[..4] == *MAGIC {
            let seq = u32::from_be_bytes([p[4], p[5], p[6], p[7]]);
            return (u32::from_be_bytes([p[8], p[9], p[10], p[11]]) == !seq).then_some(seq);
        }
        // The echo header without its version check: a router quotes the probe as it was.
        if p.len() >= 24 && p[..4] == wanperf_proto::probe::PROBE_MAGIC {
            let word = |i: usize| u64::from_be_bytes(p[i..i + 8].try_into().expect("8 bytes"));
            let seq = word(8);
            return (word(16) == !seq).then_some(seq).and_then(|s| u32::try_from(s).ok());
        }
        None
    })
}

impl Prober {
    /// A non-blocking socket for probes to `dst` (UDP or TCP to `port`, or ICMP echo), with
    /// path MTU discovery probing (DF set, nothing cached) when `df` (not for TCP: a SYN is
    /// small); `server`: UDP probes are echo probes to a `wanperf serve` on `port`.
    pub fn new(dst: IpAddr, method: Method, port: u16, df: bool, server: bool) -> io::Result<Prober> {
        let v6 = dst.is_ipv6();
        let proto = match (method, v6) {
            (Method::Udp, _) => Protocol::UDP,
            (Method::Icmp, false) => Protocol::ICMPV4,
            (Method::Icmp, true) => Protocol::ICMPV6,
            (Method::Tcp, _) => {
                return Ok(Prober { kind: Kind::Tcp(crate::syn::Syn::new(SocketAddr::new(dst, port))), v6 });
            }
        };
        let sock = Socket::new(if v6 { Domain::IPV6 } else { Domain::IPV4 }, Type::DGRAM, Some(proto))?;
        sock.set_nonblocking(true)?;
        if v6 {
            setopt(&sock, libc::SOL_IPV6, libc::IPV6_RECVERR, 1)?;
            if df {
                setopt(&sock, libc::SOL_IPV6, libc::IPV6_MTU_DISCOVER, libc::IPV6_PMTUDISC_PROBE)?;
            }
        } else {
            setopt(&sock, libc::SOL_IP, libc::IP_RECVERR, 1)?;
            let pmtu = if df { libc::IP_PMTUDISC_PROBE } else { libc::IP_PMTUDISC_DONT };
            setopt(&sock, libc::SOL_IP, libc::IP_MTU_DISCOVER, pmtu)?;
        }
        enable_rx_timestamps(sock.as_raw_fd())?;
        let dst = SockAddr::from(SocketAddr::new(dst, if method == Method::Udp { port } else { 0 }));
        let server = server && method == Method::Udp;
        Ok(Prober { kind: Kind::Dgram { sock, dst, method, server }, v6 })
    }

    /// Whether probes go one at a time (TCP: the next waits until this one is answered or
    /// given up), and this one is still out.
    pub fn busy(&self) -> bool {
        matches!(&self.kind, Kind::Tcp(s) if s.busy())
    }

    /// Sends probe `seq` with `ttl`, `size` bytes on the wire (IP header included; a TCP SYN
    /// has its own size), as flow `flow` (UDP: the destination port plus `flow`; TCP: a
    /// source port of the flow's own; ICMP: one flow only); returns the send time.
    pub fn send(&mut self, ttl: u8, seq: u32, size: usize, flow: u16) -> io::Result<u64> {
        let (sock, dst, method, server) = match &mut self.kind {
            Kind::Dgram { sock, dst, method, server } => (sock, dst, *method, *server),
            Kind::Tcp(s) => return s.send(ttl, seq, flow),
        };
        let flow_dst;
        let dst = match dst.as_socket() {
            Some(a) if flow > 0 && method == Method::Udp => {
                flow_dst = SockAddr::from(SocketAddr::new(a.ip(), a.port().wrapping_add(flow)));
                &flow_dst
            }
            _ => &*dst,
        };
        if self.v6 {
            sock.set_unicast_hops_v6(u32::from(ttl))?;
        } else {
            sock.set_ttl(u32::from(ttl))?;
        }
        let len = size.saturating_sub(overhead(self.v6));
        let body = if server { server_payload(seq, len) } else { payload(seq, len) };
        let data = match method {
            Method::Udp | Method::Tcp => body,
            Method::Icmp => {
                // Echo request, identifier and checksum filled in by the kernel, sequence 0 for
                // every probe.
                let mut m = vec![if self.v6 { 128 } else { 8 }, 0, 0, 0, 0, 0, 0, 0];
                m.extend_from_slice(&body);
                m
            }
        };
        // An ICMP error that came in since the last read fails one send with its errno (the
        // socket's pending error; the error itself waits on the queue): send again.
        let mut retries = 3;
        loop {
            let at = realtime_ns();
            match sock.send_to(&data, dst) {
                Ok(_) => return Ok(at),
                // A pending ICMP error fails one call; the error itself is on the error queue.
                Err(e) if retries > 0 && wanperf_engine::sys::icmp_pending(&e) => retries -= 1,
                Err(e) => return Err(e),
            }
        }
    }

    /// Waits up to `timeout_ms` for something to read.
    pub fn wait(&self, timeout_ms: i32) -> io::Result<bool> {
        let sock = match &self.kind {
            Kind::Dgram { sock, .. } => sock,
            Kind::Tcp(s) => return s.wait(timeout_ms),
        };
        poll_one(sock, libc::POLLIN | libc::POLLERR, timeout_ms)
    }

    /// Reads one message, from the error queue first; `None` when there is nothing.
    pub fn read(&mut self) -> io::Result<Option<Got>> {
        let (sock, method, server) = match &mut self.kind {
            Kind::Dgram { sock, method, server, .. } => (&*sock, *method, *server),
            Kind::Tcp(s) => return s.read(),
        };
        if let Some(g) = Self::recv_error(sock, self.v6)? {
            return Ok(Some(g));
        }
        // An echo reply (ICMP type 0 or 129) from the destination, or the server's.
        let mut buf = [0u8; 2048];
        let r = match recv_timestamped(sock.as_raw_fd(), &mut buf) {
            Ok(r) => r,
            Err(e) => {
                return match e.raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
                    // A queued error also fails a plain read: it is read from the queue next.
                    _ => Ok(Some(Got::Other)),
                };
            }
        };
        let data = &buf[..r.len];
        if server {
            let at_ns = r.kernel_ns.unwrap_or_else(realtime_ns);
            // A reply with the server's count (Count::read: flag 8 and the reply flag), to one
            // of this trace's probes.
            return Ok(Some(match (Probe::read(data), Count::read(data), probe_number(data), r.from) {
                (Some(p), Some(count), Some(seq), Some(from)) => {
                    // The server's time between receiving and answering is not the path's.
                    let turnaround = p.server_tx_ns.saturating_sub(p.server_rx_ns).min(1_000_000_000);
                    let at_ns = at_ns.saturating_sub(turnaround);
                    Got::Echo(Reply { seq, from: from.ip(), at_ns, answer: Answer::Reached }, count)
                }
                _ => Got::Other,
            }));
        }
        let echo_reply = data.first().is_some_and(|&t| t == if self.v6 { 129 } else { 0 });
        Ok(Some(match (method, echo_reply, r.from, probe_number(data)) {
            (Method::Icmp, true, Some(from), Some(seq)) => Got::Reply(Reply {
                seq,
                from: from.ip(),
                at_ns: r.kernel_ns.unwrap_or_else(realtime_ns),
                answer: Answer::Reached,
            }),
            _ => Got::Other,
        }))
    }

    /// One message from the error queue: an ICMP error quoting a probe, with the offender's
    /// address and the kernel's receive time.
    fn recv_error(sock: &Socket, v6: bool) -> io::Result<Option<Got>> {
        let mut buf = [0u8; 2048];
        let Some(e) = recv_error(sock.as_raw_fd(), &mut buf)? else { return Ok(None) };
        if e.origin == SO_EE_ORIGIN_LOCAL && e.errno == libc::EMSGSIZE as u32 {
            return Ok(Some(Got::LocalMtu(e.info)));
        }
        let answer = classify(v6, e.origin, e.kind, e.code, e.info);
        Ok(Some(match (answer, e.from, probe_number(&buf[..e.len])) {
            (Some(answer), Some(from), Some(seq)) => {
                Got::Reply(Reply { seq, from, at_ns: e.at_ns.unwrap_or_else(realtime_ns), answer })
            }
            _ => Got::Other,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wanperf_engine::sys::{SO_EE_ORIGIN_ICMP, SO_EE_ORIGIN_ICMP6};

    /// The one's complement sum of 16-bit words that UDP and ICMP checksums are made of.
    fn sum(p: &[u8]) -> u32 {
        let mut s: u32 = p.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        s
    }

    #[test]
    fn every_payload_has_the_same_checksum() {
        let a = sum(&payload(1, 40));
        for seq in [2, 77, 65_535, 65_536, 0xdead_beef, u32::MAX] {
            assert_eq!(sum(&payload(seq, 40)), a, "seq {seq}");
        }
    }

    #[test]
    fn server_probes_keep_one_checksum_ask_for_the_count_and_are_found_in_quotes() {
        let a = server_payload(1, 60);
        assert_eq!(a.len(), 60);
        assert!(Count::asked(&a) && Probe::read(&a).is_some_and(|p| !p.reply && p.seq == 1));
        for seq in [2, 77, 65_536, u32::MAX] {
            assert_eq!(sum(&server_payload(seq, 60)), sum(&a), "seq {seq}");
            assert_eq!(probe_number(&server_payload(seq, 60)), Some(seq));
        }
        assert_eq!(server_payload(5, 10).len(), SERVER_PAYLOAD_MIN);
        let mut bad = server_payload(9, 48);
        bad[20] ^= 1;
        assert_eq!(probe_number(&bad), None);
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
