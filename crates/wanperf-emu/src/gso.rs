//! TCP segmentation-offload super-packets as an offloading device hands them over: a
//! virtio-net header, the link header (none on TUN), then one IPv4 or IPv6 header and one TCP
//! header for up to 64 KiB of payload that stands for `ceil(payload / gso_size)` segments.
//!
//! Random loss and a policer decide for each segment ([`crate::link::Link::admit_segments`]);
//! where they decide differently for a super-packet's segments, [`pieces`] makes the segments
//! the sending host's kernel would have made, so each drop is a single packet's and the rest
//! go on as they would have. Pure byte work: no sockets, no clocks.

use crate::packet::{fold, ones_sum as sum};

/// virtio-net header flag: the checksum from `csum_start` is left to the receiver.
const NEEDS_CSUM: u8 = 1;
/// `gso_type` values (without the ECN bit, 0x80): TCP over IPv4, TCP over IPv6.
const GSO_TCPV4: u8 = 1;
const GSO_TCPV6: u8 = 4;
/// TCP flags.
const FIN: u8 = 0x01;
const PSH: u8 = 0x08;
const CWR: u8 = 0x80;

/// A super-packet's shape: where its IP header starts, the IP + TCP header length, the
/// payload length and the segment size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shape {
    ip_at: usize,
    l3: usize,
    headers: usize,
    payload: usize,
    gso_size: usize,
}

/// The shape of a TCP super-packet of more than one segment (`vnet`: the virtio-net header's
/// length, `l2`: the link header's), `None` for anything else.
fn shape(buf: &[u8], vnet: usize, l2: usize) -> Option<Shape> {
    let hdr = buf.get(..vnet.max(6))?;
    let gso_type = hdr[1] & 0x7f;
    let gso_size = usize::from(u16::from_le_bytes([hdr[4], hdr[5]]));
    if !matches!(gso_type, GSO_TCPV4 | GSO_TCPV6) || gso_size == 0 {
        return None;
    }
    let ip_at = vnet + l2;
    let ip = buf.get(ip_at..)?;
    let l3 = match ip.first()? >> 4 {
        4 if ip.len() >= 20 && ip[9] == 6 => usize::from(ip[0] & 0x0f) * 4,
        6 if ip.len() >= 40 && ip[6] == 6 => 40,
        _ => return None,
    };
    let doff = usize::from(ip.get(l3 + 12)? >> 4) * 4;
    let headers = l3 + doff;
    if doff < 20 || ip.len() < headers {
        return None;
    }
    let payload = ip.len() - headers;
    (payload > gso_size).then_some(Shape { ip_at, l3, headers, payload, gso_size })
}

/// The wire length (link header, IP and TCP headers, payload) of each segment a TCP
/// super-packet stands for, in order; `None` if it is not one of more than one segment that
/// [`pieces`] can cut (its checksum left to the receiver).
pub fn segment_lens(buf: &[u8], vnet: usize, l2: usize) -> Option<Vec<usize>> {
    let s = shape(buf, vnet, l2)?;
    if buf[0] & NEEDS_CSUM == 0 {
        return None;
    }
    let n = s.payload.div_ceil(s.gso_size);
    Some((0..n).map(|i| l2 + s.headers + s.gso_size.min(s.payload - i * s.gso_size)).collect())
}

/// Pieces of a TCP super-packet, each the run of its segments in `runs` (ranges of segment
/// indices, in order, not overlapping). A run of one is a segment as the sending kernel's own
/// segmentation makes it: the virtio-net header with no segmentation left (its checksum
/// still the receiver's to complete), the link header, the IP header with its own length
/// (IPv4: identification advanced by one per segment, header checksum recomputed) and the TCP
/// header with its own sequence number, FIN and PSH on the last segment only, CWR on the first
/// only, and the pseudo-header sum of its own length in the checksum field. A longer run is a
/// smaller super-packet of its segments (the same segment size, its own length,
/// first sequence number and IPv4 identification, FIN and PSH only if it holds the last
/// segment, CWR only if it holds the first), so that what loss or a policer let through
/// together still travels in one piece. `None` if `buf` is not a TCP super-packet of more than
/// one segment whose checksum is left to the receiver, or for a run out of range.
pub fn pieces(buf: &[u8], vnet: usize, l2: usize, runs: &[std::ops::Range<usize>]) -> Option<Vec<Vec<u8>>> {
    let s = shape(buf, vnet, l2)?;
    let n = s.payload.div_ceil(s.gso_size);
    if buf[0] & NEEDS_CSUM == 0 || runs.iter().any(|r| r.start >= r.end || r.end > n) {
        return None;
    }
    let ip = &buf[s.ip_at..];
    let v4 = ip[0] >> 4 == 4;
    let tcp = &ip[s.l3..];
    let seq0 = u32::from_be_bytes([tcp[4], tcp[5], tcp[6], tcp[7]]);
    let flags = tcp[13];
    let id0 = u16::from_be_bytes([ip[4], ip[5]]);
    let head = s.ip_at + s.headers;
    Some(
        runs.iter()
            .map(|r| {
                let off = r.start * s.gso_size;
                let len = (r.end * s.gso_size).min(s.payload) - off;
                let mut p = Vec::with_capacity(head + len);
                p.extend_from_slice(&buf[..head]);
                p.extend_from_slice(&buf[head + off..head + off + len]);
                // The headers, no more: the kernel sizes the written packet's linear part by
                // it and refuses a length beyond the packet (the super-packet's may have
                // covered all of it).
                p[2..4].copy_from_slice(&((l2 + s.headers) as u16).to_le_bytes());
                if r.len() == 1 {
                    // No segmentation left: gso_type NONE (ECN bit too), gso_size 0.
                    p[1] = 0;
                    p[4] = 0;
                    p[5] = 0;
                } else if r.start > 0 {
                    // Congestion window reduced is said once, by the first segment.
                    p[1] &= 0x7f;
                }
                let q = &mut p[s.ip_at..];
                let total = s.headers + len;
                if v4 {
                    q[2..4].copy_from_slice(&(total as u16).to_be_bytes());
                    q[4..6].copy_from_slice(&id0.wrapping_add(r.start as u16).to_be_bytes());
                    q[10] = 0;
                    q[11] = 0;
                    let c = !fold(sum(&q[..s.l3]));
                    q[10..12].copy_from_slice(&c.to_be_bytes());
                } else {
                    q[4..6].copy_from_slice(&((total - 40) as u16).to_be_bytes());
                }
                let mut f = flags;
                if r.end < n {
                    f &= !(FIN | PSH);
                }
                if r.start > 0 {
                    f &= !CWR;
                }
                let tcp_len = total - s.l3;
                let pseudo = if v4 { sum(&q[12..20]) } else { sum(&q[8..40]) } + 6 + tcp_len as u32;
                let t = &mut q[s.l3..];
                t[4..8].copy_from_slice(&seq0.wrapping_add(off as u32).to_be_bytes());
                t[13] = f;
                t[16..18].copy_from_slice(&fold(pseudo).to_be_bytes());
                p
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const VNET: usize = 10;

    /// Every segment on its own: [`pieces`] with runs of one.
    fn split(buf: &[u8], vnet: usize, l2: usize) -> Option<Vec<Vec<u8>>> {
        let n = segment_lens(buf, vnet, l2)?.len();
        pieces(buf, vnet, l2, &(0..n).map(|i| i..i + 1).collect::<Vec<_>>())
    }

    /// A TCP super-packet as a TUN device with offload hands it over: `payload` bytes in
    /// segments of `mss`, IPv4 (identification 0x1234) or IPv6, the checksum left to the
    /// receiver, TCP flags `flags`, sequence number `seq`.
    fn super_packet(v6: bool, payload: usize, mss: u16, flags: u8, seq: u32) -> Vec<u8> {
        let mut b = vec![0u8; VNET];
        b[0] = NEEDS_CSUM;
        b[1] = if v6 { GSO_TCPV6 } else { GSO_TCPV4 } | 0x80;
        b[4..6].copy_from_slice(&mss.to_le_bytes());
        let l3 = if v6 { 40 } else { 20 };
        // hdr_len: the linear part, which after a router can be the whole packet.
        b[2..4].copy_from_slice(&((l3 + 32 + payload) as u16).to_le_bytes());
        b[6..8].copy_from_slice(&(l3 as u16).to_le_bytes()); // csum_start
        b[8..10].copy_from_slice(&16u16.to_le_bytes()); // csum_offset
        let mut ip = vec![0u8; l3 + 32];
        if v6 {
            ip[0] = 0x60;
            ip[4..6].copy_from_slice(&((32 + payload) as u16).to_be_bytes());
            ip[6] = 6;
            ip[7] = 64;
            ip[8..24].copy_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
            ip[24..40].copy_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        } else {
            ip[0] = 0x45;
            ip[2..4].copy_from_slice(&((l3 + 32 + payload) as u16).to_be_bytes());
            ip[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
            ip[6] = 0x40;
            ip[8] = 64;
            ip[9] = 6;
            ip[12..16].copy_from_slice(&[198, 18, 0, 1]);
            ip[16..20].copy_from_slice(&[198, 18, 0, 2]);
        }
        let t = &mut ip[l3..];
        t[0..2].copy_from_slice(&40000u16.to_be_bytes());
        t[2..4].copy_from_slice(&5301u16.to_be_bytes());
        t[4..8].copy_from_slice(&seq.to_be_bytes());
        t[12] = 8 << 4; // 32-byte header (timestamps)
        t[13] = flags;
        b.extend_from_slice(&ip);
        b.extend((0..payload).map(|i| (i % 251) as u8));
        b
    }

    /// The TCP checksum the receiver completes from the partial one: valid when the sum over
    /// the pseudo-header, the TCP header and the payload, with the completed field, is 0xffff.
    fn completes(seg: &[u8]) -> bool {
        let ip = &seg[VNET..];
        let l3 = if ip[0] >> 4 == 4 { 20 } else { 40 };
        let mut t = ip[l3..].to_vec();
        let partial = u16::from_be_bytes([t[16], t[17]]);
        t[16] = 0;
        t[17] = 0;
        // What the kernel does with NEEDS_CSUM: the sum from csum_start, the partial value in
        // the field included, complemented into the field.
        let done = !fold(sum(&t) + u32::from(partial));
        t[16..18].copy_from_slice(&done.to_be_bytes());
        let pseudo = if l3 == 20 { sum(&ip[12..20]) } else { sum(&ip[8..40]) } + 6 + t.len() as u32;
        fold(pseudo + sum(&t)) == 0xffff
    }

    #[test]
    fn a_super_packet_splits_into_the_segments_the_kernel_would_have_sent() {
        for v6 in [false, true] {
            // 4000 bytes in segments of 1448: 1448, 1448, 1104; PSH and FIN on the last only,
            // CWR on the first only.
            let b = super_packet(v6, 4000, 1448, PSH | FIN | CWR | 0x10, 1_000_000);
            let l3 = if v6 { 40 } else { 20 };
            assert_eq!(segment_lens(&b, VNET, 0).unwrap(), vec![l3 + 32 + 1448, l3 + 32 + 1448, l3 + 32 + 1104]);
            let segs = split(&b, VNET, 0).unwrap();
            assert_eq!(segs.len(), 3);
            let mut payload = Vec::new();
            for (i, s) in segs.iter().enumerate() {
                let ip = &s[VNET..];
                assert_eq!(s[1], 0, "no segmentation left");
                assert_eq!(u16::from_le_bytes([s[4], s[5]]), 0);
                assert_eq!(s[0] & NEEDS_CSUM, NEEDS_CSUM);
                assert_eq!(usize::from(u16::from_le_bytes([s[2], s[3]])), l3 + 32, "hdr_len: the headers");
                let want_len = [1448, 1448, 1104][i];
                if v6 {
                    assert_eq!(usize::from(u16::from_be_bytes([ip[4], ip[5]])), 32 + want_len);
                } else {
                    assert_eq!(usize::from(u16::from_be_bytes([ip[2], ip[3]])), 20 + 32 + want_len);
                    assert_eq!(u16::from_be_bytes([ip[4], ip[5]]), 0x1234 + i as u16);
                    assert_eq!(fold(sum(&ip[..20])), 0xffff, "IPv4 header checksum");
                }
                let t = &ip[l3..];
                assert_eq!(u32::from_be_bytes([t[4], t[5], t[6], t[7]]), 1_000_000 + 1448 * i as u32);
                let f = t[13];
                assert_eq!(f & (PSH | FIN) != 0, i == 2, "segment {i}: flags {f:#x}");
                assert_eq!(f & CWR != 0, i == 0, "segment {i}: flags {f:#x}");
                assert_eq!(f & 0x10, 0x10, "ACK on every segment");
                assert!(completes(s), "segment {i}'s checksum completes to a valid one (v6 {v6})");
                assert_eq!(ip.len(), l3 + 32 + want_len);
                payload.extend_from_slice(&ip[l3 + 32..]);
            }
            assert_eq!(payload, (0..4000).map(|i| (i % 251) as u8).collect::<Vec<_>>(), "the bytes in order");
        }
        // A sequence number wraps as TCP's does.
        let b = super_packet(false, 3000, 1448, 0x10, u32::MAX - 100);
        let s = split(&b, VNET, 0).unwrap();
        assert_eq!(u32::from_be_bytes(s[1][VNET + 24..VNET + 28].try_into().unwrap()), 1347);
    }

    #[test]
    fn runs_of_segments_stay_super_packets() {
        // 10 segments of 1000 B, the 4th lost: segments 0–2 and 4–9 travel as two smaller
        // super-packets, each exactly what splitting it again gives.
        let b = super_packet(false, 10_000, 1000, PSH | CWR | 0x10, 5000);
        let p = pieces(&b, VNET, 0, &[0..3, 4..10]).unwrap();
        let single = split(&b, VNET, 0).unwrap();
        assert_eq!(p.len(), 2);
        for (piece, range) in p.iter().zip([0..3usize, 4..10]) {
            assert_eq!(piece[1] & 0x7f, GSO_TCPV4, "still a super-packet");
            assert_eq!(u16::from_le_bytes([piece[4], piece[5]]), 1000);
            assert_eq!(piece.len(), VNET + 52 + 1000 * range.len());
            assert!(completes(piece), "its partial checksum completes");
            let again = split(piece, VNET, 0).unwrap();
            assert_eq!(again, single[range.clone()].to_vec(), "segments {range:?}");
        }
        assert_eq!(b[1] & 0x80, 0x80);
        assert_eq!((p[0][1] & 0x80, p[1][1] & 0x80), (0x80, 0), "ECN's CWR with the first segment only");
        assert_eq!(pieces(&b, VNET, 0, std::slice::from_ref(&(0..11))), None);
        assert_eq!(pieces(&b, VNET, 0, std::slice::from_ref(&(3..3))), None);
    }

    #[test]
    fn what_is_not_a_tcp_super_packet_is_left_whole() {
        // One segment's worth, no segmentation, not TCP, a checksum already done, truncated.
        let one = super_packet(false, 1448, 1448, 0x10, 1);
        assert_eq!((segment_lens(&one, VNET, 0), split(&one, VNET, 0)), (None, None));
        let mut plain = super_packet(false, 4000, 1448, 0x10, 1);
        plain[1] = 0;
        assert!(split(&plain, VNET, 0).is_none());
        let mut udp = super_packet(false, 4000, 1448, 0x10, 1);
        udp[VNET + 9] = 17;
        assert!(split(&udp, VNET, 0).is_none());
        let mut done = super_packet(false, 4000, 1448, 0x10, 1);
        done[0] = 2; // DATA_VALID
        assert!(segment_lens(&done, VNET, 0).is_none() && split(&done, VNET, 0).is_none());
        assert!(split(&one[..VNET + 30], VNET, 0).is_none());
        assert!(split(&[], VNET, 0).is_none());
        // Behind a 14-byte link header (veth): the same segments, the header repeated.
        let b = super_packet(false, 4000, 1448, 0x10, 1);
        let mut eth = b[..VNET].to_vec();
        eth.extend_from_slice(&[0xaa; 12]);
        eth.extend_from_slice(&[0x08, 0x00]);
        eth.extend_from_slice(&b[VNET..]);
        let s = split(&eth, VNET, 14).unwrap();
        assert_eq!(s.len(), 3);
        assert!(s.iter().all(|x| x[VNET..VNET + 14] == eth[VNET..VNET + 14]));
        assert_eq!(segment_lens(&eth, VNET, 14).unwrap()[0], 14 + 52 + 1448);
    }
}
