//! Local interfaces' counters over rtnetlink, in any network namespace.
//!
//! A netlink socket belongs to the namespace it was created in, so to read another namespace
//! a short-lived thread enters it (`setns`, which changes only that thread), opens the socket
//! and hands it back; every later reading uses that socket from wherever the caller runs.

use crate::{now_ms, PollError};
use netlink_packet_core::{NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST};
use netlink_packet_route::link::{LinkAttribute, LinkMessage};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use wanperf_flows::IfCounters;

/// Reads the link statistics of one network namespace.
pub struct LocalReader {
    sock: Socket,
    device: String,
    seq: u32,
}

fn nl(e: impl std::fmt::Display) -> PollError {
    PollError::Netlink(e.to_string())
}

fn open_socket() -> Result<Socket, PollError> {
    let mut sock = Socket::new(NETLINK_ROUTE).map_err(nl)?;
    sock.bind_auto().map_err(nl)?;
    sock.connect(&SocketAddr::new(0, 0)).map_err(nl)?;
    Ok(sock)
}

impl LocalReader {
    /// A reader of this process's namespace (`netns` None) or of the namespace file `netns`;
    /// `device` names it in the readings (e.g. `r1` or the host name).
    pub fn open(netns: Option<&str>, device: &str) -> Result<LocalReader, PollError> {
        let sock = match netns {
            None => open_socket()?,
            Some(path) => {
                let f = std::fs::File::open(path).map_err(|err| PollError::Netns { path: path.to_string(), err })?;
                let p = path.to_string();
                std::thread::spawn(move || {
                    // It changes only this thread, which ends right after opening the socket.
                    if let Err(err) = wanperf_sys::join_namespace(&f, libc::CLONE_NEWNET) {
                        return Err(PollError::Netns { path: p, err });
                    }
                    open_socket()
                })
                .join()
                .map_err(|_| PollError::Netlink("namespace thread panicked".into()))??
            }
        };
        Ok(LocalReader { sock, device: device.to_string(), seq: 0 })
    }

    /// Every interface's counters now.
    pub fn read(&mut self) -> Result<Vec<IfCounters>, PollError> {
        self.seq = self.seq.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | NLM_F_DUMP;
        header.sequence_number = self.seq;
        let msg = RouteNetlinkMessage::GetLink(LinkMessage::default());
        let mut packet = NetlinkMessage::new(header, NetlinkPayload::from(msg));
        packet.finalize();
        let mut buf = vec![0u8; packet.buffer_len()];
        packet.serialize(&mut buf);
        self.sock.send(&buf, 0).map_err(nl)?;
        let mut out = Vec::new();
        let mut rx = vec![0u8; 64 * 1024];
        loop {
            let n = self.sock.recv(&mut &mut rx[..], 0).map_err(nl)?;
            let at_ms = now_ms();
            let mut off = 0;
            while off < n {
                let m = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&rx[off..n]).map_err(nl)?;
                let len = m.header.length as usize;
                if len == 0 {
                    return Err(PollError::Netlink("zero-length message".into()));
                }
                off += (len + 3) & !3;
                if m.header.sequence_number != self.seq {
                    continue;
                }
                match m.payload {
                    NetlinkPayload::Done(_) => return Ok(out),
                    NetlinkPayload::Error(e) => return Err(nl(e)),
                    NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewLink(l)) => {
                        if let Some(c) = counters(&self.device, at_ms, &l) {
                            out.push(c);
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}

fn counters(device: &str, at_ms: u64, l: &LinkMessage) -> Option<IfCounters> {
    let mut name = None;
    let mut stats = None;
    for a in &l.attributes {
        match a {
            LinkAttribute::IfName(n) => name = Some(n.clone()),
            LinkAttribute::Stats64(s) => stats = Some(s),
            _ => {}
        }
    }
    let (name, s) = (name?, stats?);
    Some(IfCounters {
        device: device.to_string(),
        interface: name,
        at_ms,
        speed_bps: None,
        in_octets: s.rx_bytes,
        out_octets: s.tx_bytes,
        in_errors: s.rx_errors,
        out_errors: s.tx_errors,
        in_drops: s.rx_dropped,
        out_drops: s.tx_dropped,
        width: 64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_counts_what_is_sent_over_it() {
        let mut r = LocalReader::open(None, "here").unwrap();
        let lo = |v: Vec<IfCounters>| v.into_iter().find(|c| c.interface == "lo").expect("lo is listed");
        let before = lo(r.read().unwrap());
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = s.local_addr().unwrap();
        for _ in 0..100 {
            s.send_to(&[0u8; 1000], to).unwrap();
        }
        let after = lo(r.read().unwrap());
        // 100 datagrams of 1000 bytes + 28 bytes of headers each, out and in on lo (and
        // whatever else used lo meanwhile).
        assert!(after.out_octets - before.out_octets >= 102_800, "{before:?} {after:?}");
        assert!(after.in_octets - before.in_octets >= 102_800);
        assert_eq!(after.width, 64);
        assert!(after.at_ms >= before.at_ms);
    }

    #[test]
    fn a_missing_namespace_file_is_one_clear_error() {
        let e = LocalReader::open(Some("/nonexistent/ns/net"), "x").err().unwrap().to_string();
        assert!(e.starts_with("network namespace /nonexistent/ns/net: "), "{e}");
    }
}
