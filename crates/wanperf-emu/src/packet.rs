//! What the emulator reads from a packet: its length, DSCP and transport ports.

/// Header fields the link model classifies on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Headers {
    /// DSCP (0..=63).
    pub dscp: u8,
    /// Transport protocol number (6 TCP, 17 UDP, 1/58 ICMP).
    pub proto: u8,
    /// Source port (TCP/UDP), 0 otherwise.
    pub src_port: u16,
    /// Destination port (TCP/UDP), 0 otherwise.
    pub dst_port: u16,
}

/// Parses an IPv4 or IPv6 packet as it comes off a TUN device (no link header). Malformed or
/// truncated packets give default fields; they are still forwarded (the receiver drops them).
pub fn parse(p: &[u8]) -> Headers {
    let Some(&first) = p.first() else {
        return Headers::default();
    };
    let (dscp, proto, l4) = match first >> 4 {
        4 if p.len() >= 20 => {
            let ihl = usize::from(first & 0x0f) * 4;
            let frag_off = u16::from_be_bytes([p[6], p[7]]) & 0x1fff;
            // Only the first fragment carries ports.
            let l4 = if frag_off == 0 { p.get(ihl..) } else { None };
            (p[1] >> 2, p[9], l4)
        }
        6 if p.len() >= 40 => {
            let tc = ((p[0] & 0x0f) << 4) | (p[1] >> 4);
            (tc >> 2, p[6], p.get(40..))
        }
        _ => return Headers::default(),
    };
    let (src_port, dst_port) = match (proto, l4) {
        (6 | 17, Some(l)) if l.len() >= 4 => (u16::from_be_bytes([l[0], l[1]]), u16::from_be_bytes([l[2], l[3]])),
        _ => (0, 0),
    };
    Headers { dscp, proto, src_port, dst_port }
}

/// Length of the IP and TCP/UDP headers at the start of `p` (the part every segment of an
/// offloaded super-packet repeats).
pub fn header_len(p: &[u8]) -> usize {
    let Some(&first) = p.first() else { return 0 };
    let (l3, proto) = match first >> 4 {
        4 if p.len() >= 20 => (usize::from(first & 0x0f) * 4, p[9]),
        6 if p.len() >= 40 => (40, p[6]),
        _ => return p.len(),
    };
    match proto {
        6 => p.get(l3 + 12).map_or(l3, |b| l3 + usize::from(b >> 4) * 4),
        17 => l3 + 8,
        _ => l3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_tcp_with_dscp() {
        let mut p = vec![0u8; 40];
        p[0] = 0x45;
        p[1] = 46 << 2;
        p[9] = 6;
        p[20..22].copy_from_slice(&5301u16.to_be_bytes());
        p[22..24].copy_from_slice(&40000u16.to_be_bytes());
        assert_eq!(parse(&p), Headers { dscp: 46, proto: 6, src_port: 5301, dst_port: 40000 });
        // A later fragment has no ports.
        p[6] = 0x00;
        p[7] = 0x10;
        assert_eq!(parse(&p).src_port, 0);
    }

    #[test]
    fn header_lengths() {
        let mut p = vec![0u8; 60];
        p[0] = 0x45;
        p[9] = 6;
        p[32] = 8 << 4; // TCP data offset: 8 words = 32 bytes (with timestamps)
        assert_eq!(header_len(&p), 52);
        p[9] = 17;
        assert_eq!(header_len(&p), 28);
    }

    #[test]
    fn ipv6_udp_and_garbage() {
        let mut p = vec![0u8; 48];
        p[0] = 0x60 | (46 >> 2);
        p[1] = (46 & 0x3) << 6;
        p[6] = 17;
        p[40..42].copy_from_slice(&9u16.to_be_bytes());
        p[42..44].copy_from_slice(&10u16.to_be_bytes());
        assert_eq!(parse(&p), Headers { dscp: 46, proto: 17, src_port: 9, dst_port: 10 });
        assert_eq!(parse(&[]), Headers::default());
        assert_eq!(parse(&[0x45, 0, 1]), Headers::default());
        assert_eq!(parse(&[0x99; 60]), Headers::default());
    }
}
