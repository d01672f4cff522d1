//! Segmentation-offload super-packets as an offloading device hands them over: a virtio-net
//! header, the link header (none on TUN), then one IPv4 or IPv6 header and one TCP or UDP
//! header for up to 64 KiB of payload that stands for `ceil(payload / gso_size)` segments.
//!
//! Random loss and a policer decide for each segment ([`crate::link::Link::admit_segments`]);
//! where they decide differently for a super-packet's segments, [`pieces`] makes the segments
//! the sending host's kernel would have made, so each drop is a single packet's and the rest
//! go on as they would have. [`Joiner`] goes the other way for UDP: datagrams of one flow
//! that leave a link together become one UDP super-packet for the kernel router behind it to
//! forward once (the next link cuts it back into the datagrams). Pure byte work: no sockets,
//! no clocks.

use crate::packet::{fold, ones_sum as sum};

/// virtio-net header flag: the checksum from `csum_start` is left to the receiver.
const NEEDS_CSUM: u8 = 1;
/// `gso_type` values (without the ECN bit, 0x80): TCP over IPv4, TCP over IPv6, UDP (either).
const GSO_TCPV4: u8 = 1;
const GSO_TCPV6: u8 = 4;
const GSO_UDP_L4: u8 = 5;
/// TCP flags.
const FIN: u8 = 0x01;
const PSH: u8 = 0x08;
const CWR: u8 = 0x80;

/// A super-packet's shape: where its IP header starts, the IP + TCP or UDP header length, the
/// payload length and the segment size, and whether it is UDP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shape {
    ip_at: usize,
    l3: usize,
    headers: usize,
    payload: usize,
    gso_size: usize,
    udp: bool,
}

/// The shape of a TCP or UDP super-packet of more than one segment (`vnet`: the virtio-net
/// header's length, `l2`: the link header's), `None` for anything else.
fn shape(buf: &[u8], vnet: usize, l2: usize) -> Option<Shape> {
    let hdr = buf.get(..vnet.max(6))?;
    let gso_type = hdr[1] & 0x7f;
    let gso_size = usize::from(u16::from_le_bytes([hdr[4], hdr[5]]));
    let proto = match gso_type {
        GSO_TCPV4 | GSO_TCPV6 => 6,
        GSO_UDP_L4 => 17,
        _ => return None,
    };
    if gso_size == 0 {
        return None;
    }
    let ip_at = vnet + l2;
    let ip = buf.get(ip_at..)?;
    let l3 = match ip.first()? >> 4 {
        4 if ip.len() >= 20 && ip[9] == proto && ip[0] & 0x0f >= 5 => usize::from(ip[0] & 0x0f) * 4,
        6 if ip.len() >= 40 && ip[6] == proto => 40,
        _ => return None,
    };
    // A UDP super-packet's checksum to complete is its UDP header's (not, say, a tunnel's inner one).
    if proto == 17 && !csum_at_udp(hdr, vnet, l2 + l3) {
        return None;
    }
    let l4 = if proto == 17 { 8 } else { usize::from(ip.get(l3 + 12)? >> 4) * 4 };
    let headers = l3 + l4;
    if l4 < 8 || (proto == 6 && l4 < 20) || ip.len() < headers {
        return None;
    }
    let payload = ip.len() - headers;
    (payload > gso_size).then_some(Shape { ip_at, l3, headers, payload, gso_size, udp: proto == 17 })
}

/// Whether the virtio-net header `hdr` (at least `vnet` bytes, 10 or more) leaves the UDP
/// checksum at `udp` bytes after it to the receiver: csum_start there, csum_offset 6.
fn csum_at_udp(hdr: &[u8], vnet: usize, udp: usize) -> bool {
    vnet >= 10
        && hdr.len() >= 10
        && usize::from(u16::from_le_bytes([hdr[6], hdr[7]])) == udp
        && u16::from_le_bytes([hdr[8], hdr[9]]) == 6
}

/// Whether `buf` is a UDP super-packet (virtio-net `gso_type` UDP_L4), as [`Joiner`] makes them.
pub fn is_udp_super_packet(buf: &[u8]) -> bool {
    buf.get(1).is_some_and(|t| t & 0x7f == GSO_UDP_L4)
}

/// The wire length (link header, IP and TCP or UDP headers, payload) of each segment a
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

/// Pieces of a TCP or UDP super-packet, each the run of its segments in `runs` (ranges of
/// segment indices, in order, not overlapping). A run of one is a segment as the sending
/// kernel's own segmentation makes it: the virtio-net header with no segmentation left (its
/// checksum still the receiver's to complete), the link header, the IP header with its own
/// length (IPv4: identification advanced by one per segment, header checksum recomputed) and
/// the TCP header with its own sequence number, FIN and PSH on the last segment only, CWR on
/// the first only (UDP: the header with its own length), and the pseudo-header sum of its own
/// length in the checksum field. A longer run is a
/// smaller super-packet of its segments (the same segment size, its own length,
/// first sequence number and IPv4 identification, FIN and PSH only if it holds the last
/// segment, CWR only if it holds the first), so that what loss or a policer let through
/// together still travels in one piece. `None` if `buf` is not a TCP super-packet of more than
/// one segment whose checksum is left to the receiver, or for a run out of range.
/// (UDP super-packets are [`Joiner`]'s, which the next link cuts back into datagrams.)
pub fn pieces(buf: &[u8], vnet: usize, l2: usize, runs: &[std::ops::Range<usize>]) -> Option<Vec<Vec<u8>>> {
    let s = shape(buf, vnet, l2)?;
    let n = s.payload.div_ceil(s.gso_size);
    if buf[0] & NEEDS_CSUM == 0 || runs.iter().any(|r| r.start >= r.end || r.end > n) {
        return None;
    }
    let ip = &buf[s.ip_at..];
    let v4 = ip[0] >> 4 == 4;
    let tcp = &ip[s.l3..];
    let (seq0, flags) = match s.udp {
        true => (0, 0),
        false => (u32::from_be_bytes([tcp[4], tcp[5], tcp[6], tcp[7]]), tcp[13]),
    };
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
                let l4_len = total - s.l3;
                let pseudo =
                    |q: &[u8], proto: u32| if v4 { sum(&q[12..20]) } else { sum(&q[8..40]) } + proto + l4_len as u32;
                if s.udp {
                    let check = fold(pseudo(q, 17));
                    let u = &mut q[s.l3..];
                    u[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes());
                    u[6..8].copy_from_slice(&check.to_be_bytes());
                    return p;
                }
                let mut f = flags;
                if r.end < n {
                    f &= !(FIN | PSH);
                }
                if r.start > 0 {
                    f &= !CWR;
                }
                let pseudo = pseudo(q, 6);
                let t = &mut q[s.l3..];
                t[4..8].copy_from_slice(&seq0.wrapping_add(off as u32).to_be_bytes());
                t[13] = f;
                t[16..18].copy_from_slice(&fold(pseudo).to_be_bytes());
                p
            })
            .collect(),
    )
}

/// Every segment of a super-packet on its own ([`pieces`] with runs of one); `None` where
/// [`pieces`] would give none.
pub fn segments(buf: &[u8], vnet: usize, l2: usize) -> Option<Vec<Vec<u8>>> {
    let n = segment_lens(buf, vnet, l2)?.len();
    pieces(buf, vnet, l2, &(0..n).map(|i| i..i + 1).collect::<Vec<_>>())
}

/// Most datagrams [`Joiner`] puts in one super-packet (the kernel takes up to 64 on older
/// versions, `UDP_MAX_SEGMENTS`).
pub const JOIN_MAX: usize = 64;

/// Largest IP packet a joined super-packet may be (IPv4's total length is 16 bits).
const JOIN_MAX_BYTES: usize = 65_000;

/// Joins consecutive datagrams of one UDP flow into one UDP segmentation-offload packet
/// (virtio-net `gso_type` UDP_L4), as a sender's `UDP_SEGMENT` would have made them: the
/// kernel forwards it once, and segmenting it gives back exactly these datagrams. A datagram
/// follows the held ones when it is plain (no segmentation, its checksum left to the
/// receiver), IPv4 without options or IPv6 without extension headers, of the same addresses,
/// ports, DSCP/ECN, TTL (more than 1: one that expires at the next router must be answered
/// alone), DF and IPv6 flow label, its IPv4 identification the next one, and when every held
/// datagram has the first's size and it is no larger. A datagram larger than the smallest MTU
/// at the router is never joined either: the router answers it alone (ICMP "fragmentation
/// needed"), not once for the group. Anything else starts a new group.
#[derive(Debug)]
pub struct Joiner {
    vnet: usize,
    l2: usize,
    max_ip: usize,
    held: Vec<Vec<u8>>,
    payload: usize,
}

/// What a datagram's headers say about joining: its IP header length and payload length, if
/// it is one that may be joined at all.
fn joinable(p: &[u8], vnet: usize, l2: usize, max_ip: usize) -> Option<(usize, usize)> {
    if p.len() < vnet + l2 || p.len() - vnet - l2 > max_ip || vnet < 10 || p[0] & NEEDS_CSUM == 0 || p[1] != 0 {
        return None;
    }
    let ip = &p[vnet + l2..];
    let l3 = match ip.first()? >> 4 {
        // No options, not a fragment (DF alone may be set), UDP, TTL over 1.
        4 if ip.len() >= 28 && ip[0] == 0x45 && ip[6] & 0xbf == 0 && ip[7] == 0 && ip[9] == 17 && ip[8] > 1 => 20,
        6 if ip.len() >= 48 && ip[6] == 17 && ip[7] > 1 => 40,
        _ => return None,
    };
    if !csum_at_udp(p, vnet, l2 + l3) {
        return None;
    }
    let payload = ip.len() - l3 - 8;
    (payload > 0 && usize::from(u16::from_be_bytes([ip[l3 + 4], ip[l3 + 5]])) == 8 + payload).then_some((l3, payload))
}

impl Joiner {
    /// A joiner for packets with a `vnet`-byte virtio-net header and an `l2`-byte link header,
    /// joining IP packets of up to `max_ip` bytes.
    pub fn new(vnet: usize, l2: usize, max_ip: usize) -> Joiner {
        Joiner { vnet, l2, max_ip, held: Vec::new(), payload: 0 }
    }

    /// Whether `p` may follow the datagrams held.
    fn follows(&self, p: &[u8]) -> bool {
        let (Some(first), Some(last)) = (self.held.first(), self.held.last()) else { return false };
        let Some((l3, payload)) = joinable(p, self.vnet, self.l2, self.max_ip) else { return false };
        let at = self.vnet + self.l2;
        let (a, b) = (&first[at..], &p[at..]);
        // The link header and the IP and UDP headers but for lengths, identification and
        // checksums (the version first: the held datagrams' header length is then `l3` too).
        let same = first[self.vnet..at] == p[self.vnet..at]
            && a[0] == b[0]
            && if l3 == 20 {
                a[1] == b[1] && a[6..10] == b[6..10] && a[12..20] == b[12..20] && {
                    let id = |x: &[u8]| u16::from_be_bytes([x[4], x[5]]);
                    id(&last[at..]).wrapping_add(1) == id(b)
                }
            } else {
                a[..4] == b[..4] && a[6..40] == b[6..40]
            }
            && a[l3..l3 + 4] == b[l3..l3 + 4];
        if !same {
            return false;
        }
        // Every held datagram full-sized (the first's size); this one no larger.
        let size = a.len() - l3 - 8;
        let full = last.len() - at - l3 - 8 == size && payload <= size;
        full && self.held.len() < JOIN_MAX && l3 + 8 + self.payload + payload <= JOIN_MAX_BYTES
    }

    /// Takes `p`, a packet leaving a link, and appends to `ready` what may be written now, in
    /// order: the datagrams held before when `p` cannot join them, and `p` itself when it can
    /// never join any (not a plain UDP datagram).
    pub fn push(&mut self, p: Vec<u8>, ready: &mut Vec<Vec<u8>>) {
        let joins = joinable(&p, self.vnet, self.l2, self.max_ip);
        if !(joins.is_some() && self.follows(&p)) {
            ready.extend(self.take());
        }
        match joins {
            Some((_, payload)) => {
                self.payload += payload;
                self.held.push(p);
            }
            None => ready.push(p),
        }
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// What is held, ready to write: one super-packet of the datagrams, or a lone one as it was.
    pub fn take(&mut self) -> Option<Vec<u8>> {
        self.payload = 0;
        match self.held.len() {
            0 => None,
            1 => self.held.pop(),
            n => {
                let at = self.vnet + self.l2;
                let first = &self.held[0];
                let l3 = if first[at] >> 4 == 4 { 20 } else { 40 };
                let head = at + l3 + 8;
                let gso_size = first.len() - head;
                let payload: usize = self.held.iter().map(|p| p.len() - head).sum();
                let mut out = Vec::with_capacity(head + payload);
                out.extend_from_slice(&first[..head]);
                for p in &self.held {
                    out.extend_from_slice(&p[head..]);
                }
                // virtio-net: checksum from the UDP header, segmentation UDP_L4 of gso_size.
                out[0] = NEEDS_CSUM;
                out[1] = GSO_UDP_L4;
                out[2..4].copy_from_slice(&((head - self.vnet) as u16).to_le_bytes());
                out[4..6].copy_from_slice(&(gso_size as u16).to_le_bytes());
                out[6..8].copy_from_slice(&((self.l2 + l3) as u16).to_le_bytes());
                out[8..10].copy_from_slice(&6u16.to_le_bytes());
                let q = &mut out[at..];
                let udp_len = 8 + payload;
                if l3 == 20 {
                    q[2..4].copy_from_slice(&((20 + udp_len) as u16).to_be_bytes());
                    q[10] = 0;
                    q[11] = 0;
                    let c = !fold(sum(&q[..20]));
                    q[10..12].copy_from_slice(&c.to_be_bytes());
                } else {
                    q[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
                }
                let pseudo = if l3 == 20 { sum(&q[12..20]) } else { sum(&q[8..40]) } + 17 + udp_len as u32;
                let check = fold(pseudo);
                q[l3 + 4..l3 + 6].copy_from_slice(&(udp_len as u16).to_be_bytes());
                q[l3 + 6..l3 + 8].copy_from_slice(&check.to_be_bytes());
                debug_assert_eq!(n, self.held.len());
                self.held.clear();
                Some(out)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VNET: usize = 10;

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
            let segs = segments(&b, VNET, 0).unwrap();
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
        let s = segments(&b, VNET, 0).unwrap();
        assert_eq!(u32::from_be_bytes(s[1][VNET + 24..VNET + 28].try_into().unwrap()), 1347);
    }

    #[test]
    fn runs_of_segments_stay_super_packets() {
        // 10 segments of 1000 B, the 4th lost: segments 0–2 and 4–9 travel as two smaller
        // super-packets, each exactly what splitting it again gives.
        let b = super_packet(false, 10_000, 1000, PSH | CWR | 0x10, 5000);
        let p = pieces(&b, VNET, 0, &[0..3, 4..10]).unwrap();
        let single = segments(&b, VNET, 0).unwrap();
        assert_eq!(p.len(), 2);
        for (piece, range) in p.iter().zip([0..3usize, 4..10]) {
            assert_eq!(piece[1] & 0x7f, GSO_TCPV4, "still a super-packet");
            assert_eq!(u16::from_le_bytes([piece[4], piece[5]]), 1000);
            assert_eq!(piece.len(), VNET + 52 + 1000 * range.len());
            assert!(completes(piece), "its partial checksum completes");
            let again = segments(piece, VNET, 0).unwrap();
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
        assert_eq!((segment_lens(&one, VNET, 0), segments(&one, VNET, 0)), (None, None));
        let mut plain = super_packet(false, 4000, 1448, 0x10, 1);
        plain[1] = 0;
        assert!(segments(&plain, VNET, 0).is_none());
        let mut udp = super_packet(false, 4000, 1448, 0x10, 1);
        udp[VNET + 9] = 17;
        assert!(segments(&udp, VNET, 0).is_none());
        let mut done = super_packet(false, 4000, 1448, 0x10, 1);
        done[0] = 2; // DATA_VALID
        assert!(segment_lens(&done, VNET, 0).is_none() && segments(&done, VNET, 0).is_none());
        assert!(segments(&one[..VNET + 30], VNET, 0).is_none());
        assert!(segments(&[], VNET, 0).is_none());
        // Behind a 14-byte link header (veth): the same segments, the header repeated.
        let b = super_packet(false, 4000, 1448, 0x10, 1);
        let mut eth = b[..VNET].to_vec();
        eth.extend_from_slice(&[0xaa; 12]);
        eth.extend_from_slice(&[0x08, 0x00]);
        eth.extend_from_slice(&b[VNET..]);
        let s = segments(&eth, VNET, 14).unwrap();
        assert_eq!(s.len(), 3);
        assert!(s.iter().all(|x| x[VNET..VNET + 14] == eth[VNET..VNET + 14]));
        assert_eq!(segment_lens(&eth, VNET, 14).unwrap()[0], 14 + 52 + 1448);
    }

    /// A UDP datagram as an offloading TUN device hands it over: the checksum left to the
    /// receiver (the pseudo-header sum in the field), IPv4 (identification `id`, DF, TTL
    /// `ttl`) or IPv6 (hop limit `ttl`), `payload` bytes from `fill` on, to port `port`.
    fn datagram(v6: bool, id: u16, payload: usize, ttl: u8, port: u16, fill: usize) -> Vec<u8> {
        let l3 = if v6 { 40 } else { 20 };
        let mut b = vec![0u8; VNET];
        b[0] = NEEDS_CSUM;
        b[6..8].copy_from_slice(&(l3 as u16).to_le_bytes());
        b[8..10].copy_from_slice(&6u16.to_le_bytes());
        let mut ip = vec![0u8; l3 + 8];
        let udp_len = 8 + payload;
        if v6 {
            ip[0] = 0x60;
            ip[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
            ip[6] = 17;
            ip[7] = ttl;
            ip[8..24].copy_from_slice(&[0xfd, 0x57, 0x41, 0x4e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
            ip[24..40].copy_from_slice(&[0xfd, 0x57, 0x41, 0x4e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        } else {
            ip[0] = 0x45;
            ip[2..4].copy_from_slice(&((20 + udp_len) as u16).to_be_bytes());
            ip[4..6].copy_from_slice(&id.to_be_bytes());
            ip[6] = 0x40;
            ip[8] = ttl;
            ip[9] = 17;
            ip[12..16].copy_from_slice(&[198, 18, 0, 1]);
            ip[16..20].copy_from_slice(&[198, 18, 4, 2]);
            let c = !fold(sum(&ip[..20]));
            ip[10..12].copy_from_slice(&c.to_be_bytes());
        }
        let pseudo = if v6 { sum(&ip[8..40]) } else { sum(&ip[12..20]) } + 17 + udp_len as u32;
        let u = &mut ip[l3..];
        u[0..2].copy_from_slice(&40000u16.to_be_bytes());
        u[2..4].copy_from_slice(&port.to_be_bytes());
        u[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
        u[6..8].copy_from_slice(&fold(pseudo).to_be_bytes());
        b.extend_from_slice(&ip);
        b.extend((fill..fill + payload).map(|i| (i % 251) as u8));
        b
    }

    /// What a joiner makes of `input`, each super-packet cut back into its datagrams (and the
    /// number of writes it took).
    fn through(j: &mut Joiner, input: Vec<Vec<u8>>) -> (Vec<Vec<u8>>, usize) {
        let mut ready = Vec::new();
        for p in input {
            j.push(p, &mut ready);
        }
        ready.extend(j.take());
        assert!(j.is_empty());
        let writes = ready.len();
        let out = ready
            .into_iter()
            .flat_map(|w| if is_udp_super_packet(&w) { segments(&w, VNET, 0).expect("cuts back") } else { vec![w] })
            .collect();
        (out, writes)
    }

    /// The IP packet and what the virtio-net header says of checksum and segmentation.
    fn meaning(p: &[u8]) -> (u8, u8, &[u8], &[u8]) {
        (p[0], p[1], &p[4..6], &p[VNET..])
    }

    #[test]
    fn datagrams_of_one_flow_join_and_cut_back_into_the_very_same_datagrams() {
        for v6 in [false, true] {
            // Five full datagrams and a smaller last one, as iperf3 -u -l 1400 sends them.
            let sent: Vec<Vec<u8>> = (0..6)
                .map(|i| datagram(v6, 0x1000 + i, if i < 5 { 1400 } else { 600 }, 63, 5201, i as usize))
                .collect();
            let mut j = Joiner::new(VNET, 0, 1500);
            let mut ready = Vec::new();
            for p in sent.clone() {
                j.push(p, &mut ready);
            }
            assert!(ready.is_empty(), "all held");
            let sp = j.take().unwrap();
            let l3 = if v6 { 40 } else { 20 };
            assert_eq!((sp[0], sp[1]), (NEEDS_CSUM, GSO_UDP_L4));
            assert_eq!(u16::from_le_bytes([sp[4], sp[5]]), 1400, "gso_size: the first datagram's payload");
            assert_eq!(u16::from_le_bytes([sp[2], sp[3]]) as usize, l3 + 8, "hdr_len");
            assert_eq!(u16::from_le_bytes([sp[6], sp[7]]) as usize, l3, "csum_start: the UDP header");
            assert_eq!(u16::from_le_bytes([sp[8], sp[9]]), 6, "csum_offset: the UDP checksum");
            let ip = &sp[VNET..];
            assert_eq!(ip.len(), l3 + 8 + 5 * 1400 + 600);
            let udp_len = 8 + 5 * 1400 + 600;
            assert_eq!(usize::from(u16::from_be_bytes([ip[l3 + 4], ip[l3 + 5]])), udp_len);
            // The kernel segments it by adjusting this field for each segment's length, so it
            // must be the pseudo-header sum of the whole: cutting back alone would not show it.
            let pseudo = if v6 { sum(&ip[8..40]) } else { sum(&ip[12..20]) } + 17 + udp_len as u32;
            assert_eq!(u16::from_be_bytes([ip[l3 + 6], ip[l3 + 7]]), fold(pseudo), "the UDP checksum field");
            if !v6 {
                assert_eq!(usize::from(u16::from_be_bytes([ip[2], ip[3]])), ip.len());
                assert_eq!(u16::from_be_bytes([ip[4], ip[5]]), 0x1000, "the first identification");
                assert_eq!(fold(sum(&ip[..20])), 0xffff, "IPv4 header checksum");
            }
            assert_eq!(segment_lens(&sp, VNET, 0).unwrap(), [1428, 1428, 1428, 1428, 1428, 628].map(|n| n + l3 - 20));
            // Cut back (as the next link does): every datagram exactly as it was sent, its
            // partial checksum included, so it meets its own due time there (the identity).
            let back = segments(&sp, VNET, 0).unwrap();
            assert_eq!(back.len(), 6);
            for (b, s) in back.iter().zip(&sent) {
                assert_eq!(meaning(b), meaning(s));
                assert_eq!(crate::packet::identity(&b[VNET..]), crate::packet::identity(&s[VNET..]));
            }
        }
    }

    #[test]
    fn what_may_not_join_goes_alone_and_nothing_changes_order() {
        let d = |id: u16, payload: usize, ttl: u8, port: u16| datagram(false, id, payload, ttl, port, 0);
        let mut tcp = d(9, 1000, 64, 5201);
        tcp[VNET + 9] = 6;
        let mut done = d(12, 1000, 64, 5201);
        done[0] = 0; // checksum complete: not the receiver's to do, so not joined
        let input = vec![
            d(1, 1000, 64, 5201),
            d(2, 1000, 64, 5201), // joins 1
            d(3, 1000, 64, 5311), // another port
            d(4, 1000, 64, 5311), // joins 3
            d(6, 1000, 64, 5311), // a gap in the identification
            d(7, 500, 64, 5311),  // smaller: joins 6, and ends the group
            d(8, 500, 64, 5311),  // after a smaller one
            tcp,
            d(10, 1000, 1, 5201), // expires at the router: answered alone
            d(11, 1000, 1, 5201),
            done,
            d(13, 1400, 64, 5201), // over the router's MTU (1400 here): alone
            d(14, 1400, 64, 5201),
        ];
        let mut j = Joiner::new(VNET, 0, 1400);
        let (out, writes) = through(&mut j, input.clone());
        assert_eq!(
            out.iter().map(|p| meaning(p)).collect::<Vec<_>>(),
            input.iter().map(|p| meaning(p)).collect::<Vec<_>>()
        );
        // Groups: 1+2, 3+4, 6+7, and the other seven alone.
        assert_eq!(writes, 3 + 7);
        // IPv4 and IPv6 of the same ports never join.
        let (_, writes) = through(&mut j, vec![datagram(false, 1, 100, 64, 1, 0), datagram(true, 2, 100, 64, 1, 0)]);
        assert_eq!(writes, 2);
    }

    #[test]
    fn a_group_holds_at_most_sixty_four_datagrams_and_64_kib() {
        let mut j = Joiner::new(VNET, 0, 9000);
        let many: Vec<Vec<u8>> = (0..70).map(|i| datagram(false, i, 100, 64, 5201, 0)).collect();
        let (out, writes) = through(&mut j, many.clone());
        assert_eq!((out.len(), writes), (70, 2));
        let big: Vec<Vec<u8>> = (0..10).map(|i| datagram(true, 0, 8000, 64, 5201, i * 8000)).collect();
        // (IPv6: no identification to follow.)
        let (out, writes) = through(&mut j, big.clone());
        assert_eq!(
            out.iter().map(|p| meaning(p)).collect::<Vec<_>>(),
            big.iter().map(|p| meaning(p)).collect::<Vec<_>>()
        );
        assert_eq!(writes, 2, "8 of 8000 bytes fit under 65 000");
    }
}
