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
    /// Hash of the addresses, protocol and ports: which flow a flow-fair queue puts it in.
    pub flow: u32,
}

/// Parses an IPv4 or IPv6 packet as it comes off a TUN device (no link header). Malformed or
/// truncated packets give default fields; they are still forwarded (the receiver drops them).
pub fn parse(p: &[u8]) -> Headers {
    let Some(&first) = p.first() else {
        return Headers::default();
    };
    let (dscp, proto, l4, addrs) = match first >> 4 {
        4 if p.len() >= 20 => {
            let ihl = usize::from(first & 0x0f) * 4;
            let frag_off = u16::from_be_bytes([p[6], p[7]]) & 0x1fff;
            // Only the first fragment carries ports.
            let l4 = if frag_off == 0 { p.get(ihl..) } else { None };
            (p[1] >> 2, p[9], l4, &p[12..20])
        }
        6 if p.len() >= 40 => {
            let tc = ((p[0] & 0x0f) << 4) | (p[1] >> 4);
            (tc >> 2, p[6], p.get(40..), &p[8..40])
        }
        _ => return Headers::default(),
    };
    let (src_port, dst_port) = match (proto, l4) {
        (6 | 17, Some(l)) if l.len() >= 4 => (u16::from_be_bytes([l[0], l[1]]), u16::from_be_bytes([l[2], l[3]])),
        _ => (0, 0),
    };
    let flow = flow_hash(addrs, proto, src_port, dst_port);
    Headers { dscp, proto, src_port, dst_port, flow }
}

/// FNV-1a over the flow's addresses, protocol and ports (fragments after the first hash as
/// port 0: the same flow as long as a flow's packets are all fragmented alike).
fn flow_hash(addrs: &[u8], proto: u8, src_port: u16, dst_port: u16) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    let ports = [src_port.to_be_bytes(), dst_port.to_be_bytes()];
    for &b in addrs.iter().chain([proto].iter()).chain(ports.iter().flatten()) {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    h
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

/// DSCP that re-marked packets carry: CS1, the scavenger / lower-effort class OSCARS used.
pub const SCAVENGER_DSCP: u8 = 8;

/// Rewrites an IP packet's DSCP (keeping ECN) and, for IPv4, its header checksum.
pub fn set_dscp(p: &mut [u8], dscp: u8) {
    let Some(&first) = p.first() else { return };
    match first >> 4 {
        4 if p.len() >= 20 => {
            p[1] = (dscp << 2) | (p[1] & 0x03);
            let ihl = (usize::from(first & 0x0f) * 4).min(p.len());
            p[10] = 0;
            p[11] = 0;
            let c = !fold(ones_sum(&p[..ihl]));
            p[10..12].copy_from_slice(&c.to_be_bytes());
        }
        6 if p.len() >= 40 => {
            let tc = (dscp << 2) | ((p[1] >> 4) & 0x03);
            p[0] = 0x60 | (tc >> 4);
            p[1] = (tc << 4) | (p[1] & 0x0f);
        }
        _ => {}
    }
}

/// The one's-complement sum of `b` as big-endian 16-bit words (an odd last byte padded),
/// carries not yet folded: IP, TCP and pseudo-header checksums are [`fold`]s of such sums.
pub(crate) fn ones_sum(b: &[u8]) -> u32 {
    b.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum()
}

/// Folds a one's-complement sum's carries into 16 bits.
pub(crate) fn fold(mut s: u32) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// [`set_dscp`] to [`SCAVENGER_DSCP`], as a re-marking hook.
#[allow(clippy::ptr_arg)] // the hook's type is fn(&mut P) with P = Vec<u8>
pub fn remark_scavenger(p: &mut Vec<u8>) {
    set_dscp(p, SCAVENGER_DSCP);
}

/// [`remark_scavenger`] for Ethernet frames (the veth backend).
#[allow(clippy::ptr_arg)] // the hook's type is fn(&mut P) with P = Vec<u8>
pub fn remark_scavenger_eth(p: &mut Vec<u8>) {
    remark_eth_at(p, 0);
}

/// [`remark_scavenger`] behind a virtio-net header (an offloading TUN device).
#[allow(clippy::ptr_arg)] // the hook's type is fn(&mut P) with P = Vec<u8>
pub fn remark_scavenger_vnet(p: &mut Vec<u8>) {
    if let Some(ip) = p.get_mut(crate::netns::VNET_HDR_LEN..) {
        set_dscp(ip, SCAVENGER_DSCP);
    }
}

/// [`remark_scavenger_eth`] behind a virtio-net header (an offloading veth backend).
#[allow(clippy::ptr_arg)] // the hook's type is fn(&mut P) with P = Vec<u8>
pub fn remark_scavenger_vnet_eth(p: &mut Vec<u8>) {
    remark_eth_at(p, crate::netns::VNET_HDR_LEN);
}

/// Re-marks the IP packet in the Ethernet frame that starts at `at`.
fn remark_eth_at(p: &mut [u8], at: usize) {
    let Some(f) = p.get_mut(at..) else { return };
    if f.len() > 14 && matches!(u16::from_be_bytes([f[12], f[13]]), 0x0800 | 0x86dd) {
        set_dscp(&mut f[14..], SCAVENGER_DSCP);
    }
}

/// The source address of an ICMP or ICMPv6 packet (an IP packet as on a TUN), None for
/// anything else: what a router's ICMP shaping looks at.
pub fn icmp_source(p: &[u8]) -> Option<std::net::IpAddr> {
    match p.first()? >> 4 {
        4 if p.len() >= 20 && p[9] == 1 => Some(std::net::IpAddr::from([p[12], p[13], p[14], p[15]])),
        6 if p.len() >= 40 && p[6] == 58 => {
            let src: [u8; 16] = p[8..24].try_into().ok()?;
            Some(std::net::IpAddr::from(src))
        }
        _ => None,
    }
}

/// A packet's identity across a router: a hash of the fields forwarding leaves alone
/// (addresses, IPv4 identification and length or IPv6 flow label and payload length, the
/// protocol, the fragment offset and the first 8 bytes after the IP header: ports and checksum
/// or sequence number), not the TTL/hop limit or the header checksum. An ICMP error quotes
/// exactly these fields of the packet it answers, so [`quoted`] finds the same identity.
pub fn identity(p: &[u8]) -> Option<u64> {
    // Up to 8 bytes as one word (shorter runs zero-padded); a multiply-and-shift mix per word,
    // a few per packet: this runs twice per packet per link.
    let word = |b: &[u8]| {
        let mut w = [0u8; 8];
        let n = b.len().min(8);
        w[..n].copy_from_slice(&b[..n]);
        u64::from_le_bytes(w)
    };
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |w: u64| {
        h = (h ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h ^= h >> 29;
    };
    let l3 = match p.first()? >> 4 {
        4 if p.len() >= 20 => {
            // Length, identification, flags and fragment offset; protocol; addresses.
            eat(word(&p[2..8]) | u64::from(p[9]) << 48);
            eat(word(&p[12..20]));
            usize::from(p[0] & 0x0f) * 4
        }
        6 if p.len() >= 40 => {
            // Flow label (not the traffic class beside it), payload length, next header,
            // addresses.
            eat(word(&p[2..7]) | u64::from(p[1] & 0x0f) << 40);
            for a in p[8..40].chunks(8) {
                eat(word(a));
            }
            40
        }
        _ => return None,
    };
    // The first 8 bytes after the IP header (fewer if the packet ends), and how many there are.
    let rest = p.get(l3..(l3 + 8).min(p.len())).unwrap_or(&[]);
    eat(word(rest));
    eat(rest.len() as u64);
    Some(h)
}

/// The packet an ICMP error (IPv4 destination unreachable, time exceeded, parameter problem;
/// ICMPv6 types 1–4) quotes, as far as it is quoted.
pub fn quoted(p: &[u8]) -> Option<&[u8]> {
    match p.first()? >> 4 {
        4 if p.len() >= 20 && p[9] == 1 => {
            let ihl = usize::from(p[0] & 0x0f) * 4;
            let ty = *p.get(ihl)?;
            matches!(ty, 3 | 11 | 12).then(|| p.get(ihl + 8..)).flatten()
        }
        6 if p.len() >= 40 && p[6] == 58 => {
            let ty = *p.get(40)?;
            (1..=4).contains(&ty).then(|| p.get(48..)).flatten()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_are_told_apart_by_addresses_and_ports_not_dscp() {
        let mut p = vec![0u8; 40];
        p[0] = 0x45;
        p[9] = 6;
        p[12..16].copy_from_slice(&[198, 18, 0, 1]);
        p[16..20].copy_from_slice(&[198, 18, 1, 2]);
        p[20..22].copy_from_slice(&5201u16.to_be_bytes());
        p[22..24].copy_from_slice(&40000u16.to_be_bytes());
        let a = parse(&p).flow;
        set_dscp(&mut p, 46);
        assert_eq!(parse(&p).flow, a, "re-marking keeps the flow");
        p[23] ^= 1;
        let b = parse(&p).flow;
        p[19] ^= 1;
        let c = parse(&p).flow;
        assert!(a != b && b != c && a != c);
    }

    #[test]
    fn identity_survives_forwarding_and_quoting_but_not_other_fields() {
        let mut p = vec![0u8; 48];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&48u16.to_be_bytes());
        p[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
        p[8] = 64;
        p[9] = 17;
        p[12..16].copy_from_slice(&[198, 18, 0, 1]);
        p[16..20].copy_from_slice(&[198, 18, 1, 2]);
        p[20..28].copy_from_slice(&[0x9c, 0x40, 0x14, 0x51, 0, 28, 0xbe, 0xef]);
        let id = identity(&p).unwrap();
        let mut fwd = p.clone();
        fwd[8] = 63;
        fwd[10..12].copy_from_slice(&[1, 2]);
        set_dscp(&mut fwd, 8);
        assert_eq!(identity(&fwd), Some(id), "TTL, checksum and DSCP are not identity");
        for i in [5, 13, 19, 21, 27] {
            let mut q = p.clone();
            q[i] ^= 1;
            assert_ne!(identity(&q), Some(id), "byte {i}");
        }
        // What a time-exceeded message quotes: the header and 8 bytes.
        let mut icmp = vec![0u8; 20];
        icmp[0] = 0x45;
        icmp[9] = 1;
        icmp.extend_from_slice(&[11, 0, 0, 0, 0, 0, 0, 0]);
        icmp.extend_from_slice(&fwd[..28]);
        assert_eq!(quoted(&icmp).and_then(identity), Some(id));
        icmp[20] = 0; // an echo reply quotes nothing
        assert_eq!(quoted(&icmp), None);
        // IPv6: the hop limit and traffic class are not identity, the flow label is.
        let mut v6 = vec![0u8; 48];
        v6[0] = 0x60;
        v6[1] = 0x0a;
        v6[3] = 7;
        v6[6] = 17;
        v6[7] = 64;
        v6[8] = 0xfd;
        v6[40..48].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        let id6 = identity(&v6).unwrap();
        let mut f6 = v6.clone();
        f6[7] = 63;
        set_dscp(&mut f6, 8);
        assert_eq!(identity(&f6), Some(id6));
        f6[3] = 8;
        assert_ne!(identity(&f6), Some(id6));
        let mut e6 = vec![0u8; 48];
        e6[0] = 0x60;
        e6[6] = 58;
        e6[40] = 3;
        e6.extend_from_slice(&v6);
        assert_eq!(quoted(&e6).and_then(identity), Some(id6));
        assert_eq!(identity(&[0x45, 0, 0]), None);
    }

    #[test]
    fn ipv4_tcp_with_dscp() {
        let mut p = vec![0u8; 40];
        p[0] = 0x45;
        p[1] = 46 << 2;
        p[9] = 6;
        p[20..22].copy_from_slice(&5301u16.to_be_bytes());
        p[22..24].copy_from_slice(&40000u16.to_be_bytes());
        let h = parse(&p);
        assert_eq!((h.dscp, h.proto, h.src_port, h.dst_port), (46, 6, 5301, 40000));
        // A later fragment has no ports.
        p[6] = 0x00;
        p[7] = 0x10;
        assert_eq!(parse(&p).src_port, 0);
    }

    #[test]
    fn remarking_rewrites_dscp_and_checksum() {
        // A real IPv4 header (checksum 0xb1e6) with DSCP 0.
        let mut p = vec![
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8,
            0x00, 0xc7,
        ];
        set_dscp(&mut p, 46);
        assert_eq!(parse(&p).dscp, 46);
        // The checksum over a header with a correct checksum folds to 0xffff.
        let mut sum: u32 = p.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c[1]]))).sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        assert_eq!(sum, 0xffff);
        let mut v6 = vec![0u8; 40];
        v6[0] = 0x60;
        v6[1] = 0x3f; // traffic-class ECN bits 11, flow label nibble f
        set_dscp(&mut v6, SCAVENGER_DSCP);
        assert_eq!(parse(&v6).dscp, SCAVENGER_DSCP);
        assert_eq!(v6[1] & 0x0f, 0x0f, "flow label kept");
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
        let h = parse(&p);
        assert_eq!((h.dscp, h.proto, h.src_port, h.dst_port), (46, 17, 9, 10));
        assert_eq!(parse(&[]), Headers::default());
        assert_eq!(parse(&[0x45, 0, 1]), Headers::default());
        assert_eq!(parse(&[0x99; 60]), Headers::default());
    }
}
