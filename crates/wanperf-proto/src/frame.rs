//! Control-channel framing.
//!
//! Every control message travels as one frame: a 12-byte header — the magic `WNPF`, the
//! protocol version (u16, big endian), two reserved bytes and the payload length (u32, big
//! endian) — followed by the message as JSON. The header layout never changes between
//! versions, so peers of different versions can always tell each other so.

use crate::msg::{Msg, PROTOCOL_VERSION};
use thiserror::Error;

/// First four bytes of every control frame.
pub const CONTROL_MAGIC: [u8; 4] = *b"WNPF";
/// Header length in bytes.
pub const HEADER_LEN: usize = 12;
/// Largest payload accepted (a 256-connection interval report is well under this).
pub const MAX_PAYLOAD: usize = 4 * 1024 * 1024;

/// Why bytes from the peer are not a valid frame.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// The peer does not speak wanperf at all.
    #[error("peer does not speak the wanperf protocol{}", foreign_hint(.0))]
    Foreign(Vec<u8>),
    /// The peer speaks another version of the protocol.
    #[error("peer speaks wanperf protocol version {theirs}, this program speaks version {ours}")]
    Version {
        /// Peer's version.
        theirs: u16,
        /// Ours.
        ours: u16,
    },
    /// Payload larger than the decoder's limit ([`MAX_PAYLOAD`] unless set lower).
    #[error("control frame of {len} bytes exceeds the {max}-byte limit")]
    TooLarge {
        /// Length the header claims.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Payload is not a message we know.
    #[error("malformed control message: {0}")]
    Payload(String),
}

/// Names the protocol some well-known foreign peers speak, from their first bytes.
pub fn foreign_hint(first: &[u8]) -> String {
    match first {
        // iperf3 answers a client's cookie with a one-byte state: PARAM_EXCHANGE (9),
        // ACCESS_DENIED (-1) or SERVER_ERROR (-2).
        [9, ..] | [0xff] | [0xfe] => {
            " (it looks like an iperf3 server; use iperf3 for it, or start `wanperf serve`)".into()
        }
        [b'H', b'T', b'T', b'P', ..] => " (it is an HTTP server)".into(),
        [b'S', b'S', b'H', b'-', ..] => " (it is an SSH server)".into(),
        _ => String::new(),
    }
}

/// Encodes one message as a frame.
pub fn encode(msg: &Msg) -> Vec<u8> {
    encode_with_version(msg, PROTOCOL_VERSION)
}

/// Encodes with an explicit version (tests and version-mismatch replies).
pub fn encode_with_version(msg: &Msg, version: u16) -> Vec<u8> {
    let payload = serde_json::to_vec(msg).expect("messages always serialize");
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&CONTROL_MAGIC);
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(&payload);
    out
}

/// Incremental frame decoder: push bytes as they arrive, pull whole messages out.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    max: usize,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        FrameDecoder { buf: Vec::new(), max: MAX_PAYLOAD }
    }
}

impl FrameDecoder {
    /// A decoder with an empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Refuses frames whose payload exceeds `max` bytes (at most [`MAX_PAYLOAD`]): a server
    /// keeps it small until a client is admitted, so strangers cannot make it buffer much.
    pub fn set_max_payload(&mut self, max: usize) {
        self.max = max.min(MAX_PAYLOAD);
    }

    /// Appends received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes buffered but not yet decoded.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Returns the next whole message, `Ok(None)` if more bytes are needed.
    /// After an error the stream is unusable.
    pub fn next_msg(&mut self) -> Result<Option<Msg>, FrameError> {
        let n = self.buf.len().min(4);
        if self.buf[..n] != CONTROL_MAGIC[..n] {
            return Err(FrameError::Foreign(self.buf[..n].to_vec()));
        }
        if self.buf.len() < HEADER_LEN {
            return Ok(None);
        }
        let version = u16::from_be_bytes([self.buf[4], self.buf[5]]);
        if version != PROTOCOL_VERSION {
            return Err(FrameError::Version { theirs: version, ours: PROTOCOL_VERSION });
        }
        let len = u32::from_be_bytes([self.buf[8], self.buf[9], self.buf[10], self.buf[11]]) as usize;
        if len > self.max {
            return Err(FrameError::TooLarge { len, max: self.max });
        }
        if self.buf.len() < HEADER_LEN + len {
            return Ok(None);
        }
        let msg = serde_json::from_slice(&self.buf[HEADER_LEN..HEADER_LEN + len])
            .map_err(|e| FrameError::Payload(e.to_string()));
        self.buf.drain(..HEADER_LEN + len);
        msg.map(Some)
    }

    /// Error for a connection that ended: `None` if it ended on a frame boundary.
    pub fn eof_error(&self) -> Option<FrameError> {
        if self.buf.is_empty() {
            None
        } else if self.buf.len() < 4 || self.buf[..4] != CONTROL_MAGIC {
            Some(FrameError::Foreign(self.buf[..self.buf.len().min(4)].to_vec()))
        } else {
            Some(FrameError::Payload("connection closed in the middle of a frame".into()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::{SideInterval, StreamSample, TestSpec};

    fn samples() -> Vec<Msg> {
        vec![
            Msg::Request { software: "wanperf 0.1".into(), spec: TestSpec::tcp(4, 10.0) },
            Msg::Refused { reason: "too many streams".into() },
            Msg::Ready,
            Msg::Start,
            Msg::Interval(SideInterval {
                index: 3,
                t_s: 4.0,
                last: false,
                streams: vec![StreamSample { id: 1, bytes: 99, tcp: None, udp: None }],
            }),
            Msg::Error { message: "x".into() },
        ]
    }

    #[test]
    fn round_trip_byte_by_byte() {
        let mut wire = Vec::new();
        for m in samples() {
            wire.extend(encode(&m));
        }
        let mut dec = FrameDecoder::new();
        let mut got = Vec::new();
        for b in wire {
            dec.push(&[b]);
            while let Some(m) = dec.next_msg().unwrap() {
                got.push(m);
            }
        }
        assert_eq!(got, samples());
        assert_eq!(dec.eof_error(), None);
    }

    #[test]
    fn foreign_and_version_and_size() {
        let mut dec = FrameDecoder::new();
        dec.push(&[9]);
        let e = dec.next_msg().unwrap_err();
        assert!(e.to_string().contains("iperf3"), "{e}");

        let mut dec = FrameDecoder::new();
        dec.push(&encode_with_version(&Msg::Ready, 7));
        assert_eq!(dec.next_msg(), Err(FrameError::Version { theirs: 7, ours: PROTOCOL_VERSION }));

        let mut dec = FrameDecoder::new();
        let mut hdr = encode(&Msg::Ready);
        hdr[8..12].copy_from_slice(&(u32::MAX).to_be_bytes());
        dec.push(&hdr);
        assert!(matches!(dec.next_msg(), Err(FrameError::TooLarge { .. })));

        let mut dec = FrameDecoder::new();
        let mut f = encode(&Msg::Ready);
        let n = f.len();
        f[n - 2] = b'!';
        dec.push(&f);
        assert!(matches!(dec.next_msg(), Err(FrameError::Payload(_))));

        let mut dec = FrameDecoder::new();
        dec.push(&encode(&Msg::Ready)[..7]);
        assert_eq!(dec.next_msg(), Ok(None));
        assert!(matches!(dec.eof_error(), Some(FrameError::Payload(_))));
    }
}

#[cfg(test)]
mod garbage {
    //! Deterministic stand-in for the fuzz targets (fuzz/), run with the unit tests: random and
    //! mutated bytes never panic a decoder.
    use super::*;
    use crate::data::{DataHello, UdpHeader};
    use crate::msg::TestSpec;

    struct XorShift(u64);
    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn random_and_mutated_bytes_never_panic() {
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        let valid = encode(&Msg::Request { software: "x".into(), spec: TestSpec::tcp(2, 3.0) });
        for i in 0..20_000 {
            let mut bytes = if i % 2 == 0 {
                let n = (rng.next() % 200) as usize;
                (0..n).map(|_| rng.next() as u8).collect::<Vec<u8>>()
            } else {
                let mut v = valid.clone();
                for _ in 0..1 + rng.next() % 4 {
                    let at = (rng.next() as usize) % v.len();
                    v[at] = rng.next() as u8;
                }
                v
            };
            if i % 3 == 0 {
                bytes.splice(0..0, CONTROL_MAGIC);
            }
            let mut dec = FrameDecoder::new();
            dec.push(&bytes);
            while let Ok(Some(_)) = dec.next_msg() {}
            let _ = dec.eof_error();
            let _ = DataHello::decode(&bytes);
            let _ = UdpHeader::read(&bytes);
        }
    }
}
