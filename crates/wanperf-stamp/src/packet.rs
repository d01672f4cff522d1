//! The test packets (RFC 8762 §4.2–4.3, with RFC 8972 §3's Session-Sender Identifier).
//!
//! Unauthenticated packets are 44 octets before their TLVs, authenticated ones 112 with an
//! HMAC-SHA-256 (truncated to 16 octets) over their first 96. TWAMP-Light's packets are the
//! unauthenticated layout without the SSID and often shorter: a sender's may be 14 octets and
//! a reflector's 41, so reading zero-fills what is missing (RFC 8762 §4.6).

use crate::time::ErrorEstimate;
use crate::tlv::{self, Tlv, Value, FLAG_I};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use thiserror::Error;

/// Octets of an unauthenticated packet before its TLVs.
pub const OPEN_LEN: usize = 44;
/// Octets of an authenticated packet before its TLVs.
pub const AUTH_LEN: usize = 112;
/// The shortest TWAMP-Light sender packet (sequence number, timestamp, error estimate).
pub const TWAMP_LIGHT_SENDER_MIN: usize = 14;
/// The shortest reflected packet read: up to the sender's error estimate. RFC 5357's has 41
/// octets (the sender's TTL is octet 40), but reflectors in the field (twampy's) stop at 38;
/// the TTL then reads as 0, unknown.
pub const TWAMP_LIGHT_REFLECTOR_MIN: usize = 38;
/// Octets the HMAC of an authenticated packet covers.
const AUTH_COVERED: usize = 96;

/// The session's mode.
#[derive(Clone, PartialEq, Eq)]
pub enum Auth {
    /// Unauthenticated.
    Open,
    /// Authenticated with this shared key (HMAC-SHA-256).
    Hmac(Vec<u8>),
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Auth::Open => f.write_str("Open"),
            Auth::Hmac(_) => f.write_str("Hmac(…)"),
        }
    }
}

/// A key written as hex digits (whitespace between them is ignored), at least 16 octets.
pub fn key_from_hex(text: &str) -> Result<Vec<u8>, String> {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(2) || !digits.iter().all(u8::is_ascii_hexdigit) {
        return Err("a STAMP key is hex digits (e.g. 32 of them for 16 octets)".into());
    }
    let key: Vec<u8> =
        digits.chunks(2).map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap_or("00"), 16).unwrap_or(0)).collect();
    if key.len() < 16 {
        return Err(format!("a STAMP key of {} octets is too short: at least 16", key.len()));
    }
    Ok(key)
}

impl Auth {
    /// Octets before the TLVs.
    pub fn base_len(&self) -> usize {
        match self {
            Auth::Open => OPEN_LEN,
            Auth::Hmac(_) => AUTH_LEN,
        }
    }

    fn mac(&self, parts: &[&[u8]]) -> Option<[u8; 16]> {
        let Auth::Hmac(key) = self else { return None };
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(key).ok()?;
        for p in parts {
            m.update(p);
        }
        let full = m.finalize().into_bytes();
        let mut out = [0u8; 16];
        out.copy_from_slice(&full[..16]);
        Some(out)
    }
}

/// Why a packet was not read.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum PacketError {
    /// Fewer octets than the mode's packet.
    #[error("{got} octets: a {mode} packet has at least {need}")]
    Short {
        /// Octets there were.
        got: usize,
        /// Octets needed.
        need: usize,
        /// The mode's name.
        mode: &'static str,
    },
    /// The HMAC does not match the key.
    #[error("HMAC does not match: wrong key, or the packet was changed on the way")]
    Hmac,
}

/// A Session-Sender's test packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Test {
    /// Sequence number.
    pub seq: u32,
    /// Transmit timestamp (wire format; see [`crate::time`]).
    pub timestamp: u64,
    /// Error estimate of the sender's clock.
    pub error: ErrorEstimate,
    /// Session-Sender Identifier (RFC 8972; 0 when unused).
    pub ssid: u16,
}

/// A Session-Reflector's reflected packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reflected {
    /// The reflector's sequence number (the sender's in stateless mode; its own count in
    /// stateful mode).
    pub seq: u32,
    /// The reflector's transmit timestamp.
    pub timestamp: u64,
    /// Error estimate of the reflector's clock.
    pub error: ErrorEstimate,
    /// Session-Sender Identifier.
    pub ssid: u16,
    /// When the test packet arrived at the reflector.
    pub receive_timestamp: u64,
    /// The test packet's sequence number.
    pub sender_seq: u32,
    /// The test packet's timestamp.
    pub sender_timestamp: u64,
    /// The test packet's error estimate.
    pub sender_error: ErrorEstimate,
    /// The test packet's TTL or hop limit on arrival (0 when unknown).
    pub sender_ttl: u8,
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Offsets of a mode's fields: (timestamp, error estimate, SSID).
fn head_offsets(auth: &Auth) -> (usize, usize, usize) {
    match auth {
        Auth::Open => (4, 12, 14),
        Auth::Hmac(_) => (16, 24, 26),
    }
}

/// Reflector-only offsets: (receive timestamp, sender seq, sender timestamp, sender error,
/// sender TTL).
fn reflector_offsets(auth: &Auth) -> (usize, usize, usize, usize, usize) {
    match auth {
        Auth::Open => (16, 24, 28, 36, 40),
        Auth::Hmac(_) => (32, 48, 64, 72, 80),
    }
}

/// Appends TLVs (with an HMAC TLV at the end in authenticated mode: RFC 8972 §4.8, over the
/// sequence number and the TLVs before it) and pads with zeros to `len`.
fn finish(out: &mut Vec<u8>, auth: &Auth, tlvs: &[Tlv], len: usize) {
    let base = auth.base_len();
    let body: Vec<&Tlv> = tlvs.iter().filter(|t| t.kind != tlv::kind::HMAC).collect();
    for t in &body {
        t.write(out);
    }
    if !body.is_empty() {
        if let Some(h) = auth.mac(&[&out[..4], &out[base..]]) {
            Tlv::new(Value::Hmac(h)).write(out);
        }
    }
    if out.len() < len {
        out.resize(len, 0);
    }
}

/// Checks the base packet's HMAC; `Err` if it does not match.
fn check_base_hmac(b: &[u8], auth: &Auth) -> Result<(), PacketError> {
    // Unauthenticated packets carry no HMAC (and may be shorter than its place).
    let Auth::Hmac(_) = auth else { return Ok(()) };
    match auth.mac(&[&b[..AUTH_COVERED]]) {
        Some(h) if b[AUTH_COVERED..AUTH_LEN] != h => Err(PacketError::Hmac),
        _ => Ok(()),
    }
}

/// The TLVs after the base packet; in authenticated mode an HMAC TLV that does not match
/// sets the I flag on every TLV (RFC 8972 §4.8).
fn read_tlvs(b: &[u8], auth: &Auth) -> tlv::Parsed {
    let base = auth.base_len();
    let mut p = tlv::read_all(b.get(base..).unwrap_or(&[]));
    if let Some(pos) = p.tlvs.iter().position(|t| t.kind == tlv::kind::HMAC) {
        let covered_end = base + tlv::wire_len(&p.tlvs[..pos]);
        let want = auth.mac(&[&b[..4], &b[base..covered_end]]);
        let ok = matches!((&p.tlvs[pos].value, want), (Value::Hmac(got), Some(w)) if *got == w);
        if !ok && want.is_some() {
            for t in &mut p.tlvs {
                t.flags |= FLAG_I;
            }
        }
    }
    p
}

/// `b` checked for a packet of the mode (at least `open_min` octets unauthenticated, the
/// whole packet and a matching HMAC authenticated) and zero-filled to the base packet's length
/// (RFC 8762 §4.6).
fn opened<'a>(
    b: &'a [u8],
    auth: &Auth,
    open_min: usize,
    what: &'static str,
) -> Result<std::borrow::Cow<'a, [u8]>, PacketError> {
    let (need, mode) = match auth {
        Auth::Open => (open_min, what),
        Auth::Hmac(_) => (AUTH_LEN, "authenticated STAMP"),
    };
    if b.len() < need {
        return Err(PacketError::Short { got: b.len(), need, mode });
    }
    let f = if b.len() >= auth.base_len() {
        std::borrow::Cow::Borrowed(b)
    } else {
        let mut v = b.to_vec();
        v.resize(auth.base_len(), 0);
        std::borrow::Cow::Owned(v)
    };
    check_base_hmac(&f, auth)?;
    Ok(f)
}

impl Test {
    /// Writes the packet into `out` (cleared first): the base packet, `tlvs`, and zeros up to
    /// `len` octets in all.
    pub fn encode(&self, out: &mut Vec<u8>, auth: &Auth, tlvs: &[Tlv], len: usize) {
        out.clear();
        out.resize(auth.base_len(), 0);
        let (ts, ee, ssid) = head_offsets(auth);
        out[..4].copy_from_slice(&self.seq.to_be_bytes());
        out[ts..ts + 8].copy_from_slice(&self.timestamp.to_be_bytes());
        out[ee..ee + 2].copy_from_slice(&self.error.to_bits().to_be_bytes());
        out[ssid..ssid + 2].copy_from_slice(&self.ssid.to_be_bytes());
        if let Some(h) = auth.mac(&[&out[..AUTH_COVERED.min(out.len())]]) {
            out[AUTH_COVERED..AUTH_LEN].copy_from_slice(&h);
        }
        finish(out, auth, tlvs, len);
    }

    /// Reads a test packet: unauthenticated ones from 14 octets (TWAMP-Light), zero-filled;
    /// authenticated ones whole, with their HMAC checked.
    pub fn decode(b: &[u8], auth: &Auth) -> Result<(Test, tlv::Parsed), PacketError> {
        let f = opened(b, auth, TWAMP_LIGHT_SENDER_MIN, "STAMP or TWAMP-Light test")?;
        let (ts, ee, ssid) = head_offsets(auth);
        let t = Test {
            seq: be32(&f, 0),
            timestamp: be64(&f, ts),
            error: ErrorEstimate::from_bits(be16(&f, ee)),
            ssid: be16(&f, ssid),
        };
        Ok((t, read_tlvs(&f, auth)))
    }
}

impl Reflected {
    /// Writes the packet into `out` (cleared first), as [`Test::encode`].
    pub fn encode(&self, out: &mut Vec<u8>, auth: &Auth, tlvs: &[Tlv], len: usize) {
        out.clear();
        out.resize(auth.base_len(), 0);
        let (ts, ee, ssid) = head_offsets(auth);
        let (rx, sseq, sts, see, ttl) = reflector_offsets(auth);
        out[..4].copy_from_slice(&self.seq.to_be_bytes());
        out[ts..ts + 8].copy_from_slice(&self.timestamp.to_be_bytes());
        out[ee..ee + 2].copy_from_slice(&self.error.to_bits().to_be_bytes());
        out[ssid..ssid + 2].copy_from_slice(&self.ssid.to_be_bytes());
        out[rx..rx + 8].copy_from_slice(&self.receive_timestamp.to_be_bytes());
        out[sseq..sseq + 4].copy_from_slice(&self.sender_seq.to_be_bytes());
        out[sts..sts + 8].copy_from_slice(&self.sender_timestamp.to_be_bytes());
        out[see..see + 2].copy_from_slice(&self.sender_error.to_bits().to_be_bytes());
        out[ttl] = self.sender_ttl;
        if let Some(h) = auth.mac(&[&out[..AUTH_COVERED.min(out.len())]]) {
            out[AUTH_COVERED..AUTH_LEN].copy_from_slice(&h);
        }
        finish(out, auth, tlvs, len);
    }

    /// Reads a reflected packet: unauthenticated ones from 38 octets (TWAMP-Light's),
    /// zero-filled; authenticated ones whole, with their HMAC checked.
    pub fn decode(b: &[u8], auth: &Auth) -> Result<(Reflected, tlv::Parsed), PacketError> {
        let f = opened(b, auth, TWAMP_LIGHT_REFLECTOR_MIN, "STAMP or TWAMP-Light reflected")?;
        let (ts, ee, ssid) = head_offsets(auth);
        let (rx, sseq, sts, see, ttl) = reflector_offsets(auth);
        let r = Reflected {
            seq: be32(&f, 0),
            timestamp: be64(&f, ts),
            error: ErrorEstimate::from_bits(be16(&f, ee)),
            ssid: be16(&f, ssid),
            receive_timestamp: be64(&f, rx),
            sender_seq: be32(&f, sseq),
            sender_timestamp: be64(&f, sts),
            sender_error: ErrorEstimate::from_bits(be16(&f, see)),
            sender_ttl: f[ttl],
        };
        Ok((r, read_tlvs(&f, auth)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Format;

    fn ee(ms: f64) -> ErrorEstimate {
        ErrorEstimate::of(ms / 1e3, true, Format::Ntp)
    }

    fn reflected() -> Reflected {
        Reflected {
            seq: 3,
            timestamp: 0x1111_2222_3333_4444,
            error: ee(0.5),
            ssid: 77,
            receive_timestamp: 0x1111_2222_3333_0000,
            sender_seq: 9,
            sender_timestamp: 0x1111_2222_0000_0000,
            sender_error: ee(2.0),
            sender_ttl: 63,
        }
    }

    #[test]
    fn unauthenticated_fields_sit_at_rfc_8762_offsets() {
        let t = Test { seq: 0x0102_0304, timestamp: 0x0a0b_0c0d_0e0f_1011, error: ee(1.0), ssid: 0xbeef };
        let mut b = Vec::new();
        t.encode(&mut b, &Auth::Open, &[], 0);
        assert_eq!(b.len(), OPEN_LEN);
        assert_eq!(b[..4], [1, 2, 3, 4]);
        assert_eq!(b[4..12], [0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11]);
        assert_eq!(be16(&b, 12), ee(1.0).to_bits());
        assert_eq!(b[14..16], [0xbe, 0xef]);
        assert!(b[16..].iter().all(|&x| x == 0));

        let r = reflected();
        r.encode(&mut b, &Auth::Open, &[], 0);
        assert_eq!(b.len(), OPEN_LEN);
        assert_eq!(be64(&b, 16), r.receive_timestamp);
        assert_eq!(be32(&b, 24), 9);
        assert_eq!(be64(&b, 28), r.sender_timestamp);
        assert_eq!(b[40], 63);
        assert_eq!(Reflected::decode(&b, &Auth::Open).unwrap().0, r);
    }

    #[test]
    fn authenticated_packets_are_112_octets_and_their_hmac_is_checked() {
        let key = Auth::Hmac(b"0123456789abcdef0123456789abcdef".to_vec());
        let t = Test { seq: 5, timestamp: 42, error: ee(1.0), ssid: 1 };
        let mut b = Vec::new();
        t.encode(&mut b, &key, &[], 0);
        assert_eq!(b.len(), AUTH_LEN);
        assert_eq!(be64(&b, 16), 42);
        assert_eq!(Test::decode(&b, &key).unwrap().0, t);
        // One changed bit, or another key, fails the check.
        b[17] ^= 1;
        assert_eq!(Test::decode(&b, &key), Err(PacketError::Hmac));
        b[17] ^= 1;
        assert_eq!(Test::decode(&b, &Auth::Hmac(b"another key, just as long.......".to_vec())), Err(PacketError::Hmac));

        let r = reflected();
        r.encode(&mut b, &key, &[], 0);
        assert_eq!(b.len(), AUTH_LEN);
        assert_eq!(be64(&b, 32), r.receive_timestamp);
        assert_eq!(be32(&b, 48), 9);
        assert_eq!(be64(&b, 64), r.sender_timestamp);
        assert_eq!(b[80], 63);
        assert_eq!(Reflected::decode(&b, &key).unwrap().0, r);
        assert!(matches!(Reflected::decode(&b[..100], &key), Err(PacketError::Short { .. })));
    }

    #[test]
    fn the_hmac_is_rfc_4231s_hmac_sha_256_truncated() {
        // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
        let h = Auth::Hmac(b"Jefe".to_vec()).mac(&[b"what do ya want ", b"for nothing?"]).unwrap();
        assert_eq!(h, [0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24, 0x26, 0x08, 0x95, 0x75, 0xc7]);
    }

    #[test]
    fn tlvs_follow_the_base_packet_and_an_hmac_tlv_guards_them() {
        let key = Auth::Hmac(b"0123456789abcdef".to_vec());
        let tlvs = [Tlv::new(Value::DirectMeasurement { s_tx: 10, r_rx: 0, r_tx: 0 })];
        let t = Test { seq: 1, timestamp: 2, error: ee(1.0), ssid: 0 };
        let mut b = Vec::new();
        t.encode(&mut b, &key, &tlvs, 200);
        assert_eq!(b.len(), 200);
        let (_, p) = Test::decode(&b, &key).unwrap();
        assert_eq!(p.tlvs.len(), 2);
        assert_eq!(p.tlvs[0].value, tlvs[0].value);
        assert!(p.tlvs.iter().all(|t| t.flags & FLAG_I == 0));
        // A changed counter keeps the base packet valid but fails the TLVs' HMAC: every TLV
        // is marked I.
        b[AUTH_LEN + 4] ^= 0x80;
        let (_, p) = Test::decode(&b, &key).unwrap();
        assert!(p.tlvs.iter().all(|t| t.flags & FLAG_I != 0));
        // Unauthenticated: no HMAC TLV is added.
        t.encode(&mut b, &Auth::Open, &tlvs, 0);
        assert_eq!(b.len(), OPEN_LEN + 16);
        assert_eq!(Test::decode(&b, &Auth::Open).unwrap().1.tlvs.len(), 1);
    }

    #[test]
    fn keys_are_hex_of_at_least_16_octets() {
        assert_eq!(key_from_hex("00112233 44556677 8899aabb ccddeeff\n"), Ok((0..16).map(|i| i * 0x11).collect()));
        assert!(key_from_hex("0011").unwrap_err().contains("too short"));
        assert!(key_from_hex("zz").unwrap_err().contains("hex"));
        assert!(key_from_hex("001").is_err());
    }

    #[test]
    fn twamp_light_packets_are_read_zero_filled() {
        // A 14-octet TWAMP-Light test packet.
        let mut b = vec![0, 0, 0, 9];
        b.extend_from_slice(&77u64.to_be_bytes());
        b.extend_from_slice(&[0x80, 0x01]);
        let (t, p) = Test::decode(&b, &Auth::Open).unwrap();
        assert_eq!((t.seq, t.timestamp, t.ssid), (9, 77, 0));
        assert!(t.error.synchronized);
        assert!(p.tlvs.is_empty());
        assert!(matches!(Test::decode(&b[..13], &Auth::Open), Err(PacketError::Short { need: 14, .. })));
        // A 41-octet TWAMP-Light reflected packet, and a 38-octet one without the TTL (as
        // twampy's reflector sends).
        let mut r = Vec::new();
        reflected().encode(&mut r, &Auth::Open, &[], 0);
        let (back, _) = Reflected::decode(&r[..41], &Auth::Open).unwrap();
        assert_eq!(back, reflected());
        let (back, _) = Reflected::decode(&r[..38], &Auth::Open).unwrap();
        assert_eq!(back, Reflected { sender_ttl: 0, ..reflected() });
        assert!(Reflected::decode(&r[..37], &Auth::Open).is_err());
    }
}
