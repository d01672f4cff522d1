//! Binary headers on data connections and UDP datagrams.
//!
//! A TCP data connection opens with a 32-byte [`DataHello`] (magic `WNPD`, version, the test's
//! 16-byte cookie and the stream id) so the server can attach it to the right test; a UDP flow
//! opens with the same hello sent as a datagram. Every UDP data datagram starts with a 24-byte
//! [`UdpHeader`]: token (first 4 cookie bytes), stream id, sequence number and send time.

use thiserror::Error;

/// Version of the control protocol spoken on the wire (in every frame header).
pub const PROTOCOL_VERSION: u16 = 1;

/// First four bytes of a data-connection hello.
pub const DATA_MAGIC: [u8; 4] = *b"WNPD";
/// Length of [`DataHello`] on the wire.
pub const HELLO_LEN: usize = 32;
/// Length of [`UdpHeader`] on the wire.
pub const UDP_HEADER_LEN: usize = 24;
/// Sequence number marking a sender's end-of-flow datagram (its `send_ns` is the count sent).
pub const UDP_FIN_SEQ: u64 = u64::MAX;

/// 16 random bytes naming one test.
pub type Cookie = [u8; 16];

/// Why a data header is invalid.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DataError {
    /// Too few bytes.
    #[error("data header truncated: {0} bytes")]
    Short(usize),
    /// Wrong magic.
    #[error("not a wanperf data connection")]
    Magic,
    /// Other protocol version.
    #[error("data connection speaks protocol version {0}")]
    Version(u16),
}

/// The first bytes of every data connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataHello {
    /// Test cookie from `Accepted`.
    pub cookie: Cookie,
    /// Stream id.
    pub stream: u32,
}

impl DataHello {
    /// Wire form.
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[..4].copy_from_slice(&DATA_MAGIC);
        b[4..6].copy_from_slice(&PROTOCOL_VERSION.to_be_bytes());
        b[8..24].copy_from_slice(&self.cookie);
        b[24..28].copy_from_slice(&self.stream.to_be_bytes());
        b
    }

    /// Parses the wire form.
    pub fn decode(b: &[u8]) -> Result<Self, DataError> {
        if b.len() < HELLO_LEN {
            return Err(DataError::Short(b.len()));
        }
        if b[..4] != DATA_MAGIC {
            return Err(DataError::Magic);
        }
        let v = u16::from_be_bytes([b[4], b[5]]);
        if v != PROTOCOL_VERSION {
            return Err(DataError::Version(v));
        }
        let mut cookie = [0u8; 16];
        cookie.copy_from_slice(&b[8..24]);
        Ok(DataHello { cookie, stream: u32::from_be_bytes([b[24], b[25], b[26], b[27]]) })
    }
}

/// Header of every UDP data datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpHeader {
    /// First four cookie bytes; datagrams with another token are ignored.
    pub token: u32,
    /// Stream id.
    pub stream: u32,
    /// Sequence number from 0, or [`UDP_FIN_SEQ`].
    pub seq: u64,
    /// Sender's monotonic nanoseconds since its start (or the packet count in a FIN).
    pub send_ns: u64,
}

impl UdpHeader {
    /// Writes the header into the start of `buf` (which must hold [`UDP_HEADER_LEN`] bytes).
    pub fn write(&self, buf: &mut [u8]) {
        buf[..4].copy_from_slice(&self.token.to_be_bytes());
        buf[4..8].copy_from_slice(&self.stream.to_be_bytes());
        buf[8..16].copy_from_slice(&self.seq.to_be_bytes());
        buf[16..24].copy_from_slice(&self.send_ns.to_be_bytes());
    }

    /// Reads a header from a datagram.
    pub fn read(buf: &[u8]) -> Result<Self, DataError> {
        if buf.len() < UDP_HEADER_LEN {
            return Err(DataError::Short(buf.len()));
        }
        let u32_at = |i: usize| u32::from_be_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&buf[i..i + 8]);
            u64::from_be_bytes(a)
        };
        Ok(UdpHeader { token: u32_at(0), stream: u32_at(4), seq: u64_at(8), send_ns: u64_at(16) })
    }
}

/// The UDP token of a cookie; never equal to the hello magic so the two cannot be confused.
pub fn udp_token(cookie: &Cookie) -> u32 {
    let t = u32::from_be_bytes([cookie[0], cookie[1], cookie[2], cookie[3]]);
    if t == u32::from_be_bytes(DATA_MAGIC) {
        t ^ 1
    } else {
        t
    }
}

/// Cookie as lowercase hex.
pub fn cookie_hex(c: &Cookie) -> String {
    c.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses a cookie from hex.
pub fn cookie_from_hex(s: &str) -> Option<Cookie> {
    if s.len() != 32 {
        return None;
    }
    let mut c = [0u8; 16];
    for (i, chunk) in s.as_bytes().chunks(2).enumerate() {
        let hex = std::str::from_utf8(chunk).ok()?;
        c[i] = u8::from_str_radix(hex, 16).ok()?;
    }
    Some(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_round_trip_and_errors() {
        let h = DataHello { cookie: [7; 16], stream: 42 };
        assert_eq!(DataHello::decode(&h.encode()), Ok(h));
        assert_eq!(DataHello::decode(&h.encode()[..10]), Err(DataError::Short(10)));
        let mut bad = h.encode();
        bad[0] = b'X';
        assert_eq!(DataHello::decode(&bad), Err(DataError::Magic));
        let mut v = h.encode();
        v[5] = 9;
        assert_eq!(DataHello::decode(&v), Err(DataError::Version(9)));
    }

    #[test]
    fn udp_header_round_trip() {
        let h = UdpHeader { token: 0xdead_beef, stream: 3, seq: 1 << 40, send_ns: 123_456_789 };
        let mut buf = [0u8; 64];
        h.write(&mut buf);
        assert_eq!(UdpHeader::read(&buf), Ok(h));
        assert!(UdpHeader::read(&buf[..23]).is_err());
    }

    #[test]
    fn cookie_hex_round_trip_and_token() {
        let c: Cookie = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 254, 255];
        assert_eq!(cookie_from_hex(&cookie_hex(&c)), Some(c));
        assert_eq!(cookie_from_hex("zz"), None);
        assert_eq!(cookie_from_hex(&"g".repeat(32)), None);
        let mut m = [0u8; 16];
        m[..4].copy_from_slice(&DATA_MAGIC);
        assert_ne!(udp_token(&m), u32::from_be_bytes(DATA_MAGIC));
    }
}
