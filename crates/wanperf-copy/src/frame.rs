//! The block frame on copy data connections.
//!
//! After the 32-byte data hello, a sender's data connection carries blocks, each a 64-byte
//! header followed by `wire_len` payload bytes:
//!
//! ```text
//!  0  magic "WPCB"          4  file (u32, manifest index)
//!  8  block (u64)          16  raw_len (u32)      20  wire_len (u32)
//! 24  flags (bit 0: zstd)  25..32 zero
//! 32  hash: BLAKE3 of the raw block (32 bytes, see crate::blocks)
//! ```
//! All integers big-endian. A compressed block is sent only when it is smaller than the raw
//! one, so `wire_len <= raw_len` always holds and a receiver never allocates more than a
//! block for a header it was sent. The connection's end is the end of the sender's blocks.

use crate::spec::MAX_BLOCK;
use thiserror::Error;

/// Header length.
pub const HEADER_LEN: usize = 64;
/// First bytes of every block header.
pub const MAGIC: [u8; 4] = *b"WPCB";
/// Flag: payload is a zstd frame.
pub const FLAG_ZSTD: u8 = 1;

/// One block header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHeader {
    /// Manifest index of the file.
    pub file: u32,
    /// Block number in the file.
    pub block: u64,
    /// Bytes of file data the block holds.
    pub raw_len: u32,
    /// Payload bytes that follow the header.
    pub wire_len: u32,
    /// Payload is zstd-compressed.
    pub zstd: bool,
    /// BLAKE3 of the raw bytes.
    pub hash: [u8; 32],
}

/// Why a header is invalid.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// Not a block header.
    #[error("copy data out of step: bad block magic")]
    Magic,
    /// Lengths out of bounds.
    #[error("block of {raw} B ({wire} B on the wire) is larger than any block may be")]
    Length {
        /// raw_len.
        raw: u32,
        /// wire_len.
        wire: u32,
    },
    /// A raw block whose two lengths differ, or a compressed one that grew.
    #[error("block lengths disagree: {raw} B raw, {wire} B on the wire")]
    Mismatch {
        /// raw_len.
        raw: u32,
        /// wire_len.
        wire: u32,
    },
    /// Unknown flags or non-zero reserved bytes.
    #[error("block header has unknown flags")]
    Flags,
}

impl BlockHeader {
    /// Wire form.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[..4].copy_from_slice(&MAGIC);
        b[4..8].copy_from_slice(&self.file.to_be_bytes());
        b[8..16].copy_from_slice(&self.block.to_be_bytes());
        b[16..20].copy_from_slice(&self.raw_len.to_be_bytes());
        b[20..24].copy_from_slice(&self.wire_len.to_be_bytes());
        b[24] = if self.zstd { FLAG_ZSTD } else { 0 };
        b[32..].copy_from_slice(&self.hash);
        b
    }

    /// Parses and bounds-checks a header.
    pub fn decode(b: &[u8; HEADER_LEN]) -> Result<Self, FrameError> {
        if b[..4] != MAGIC {
            return Err(FrameError::Magic);
        }
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let raw = u32_at(16);
        let wire = u32_at(20);
        if b[24] & !FLAG_ZSTD != 0 || b[25..32].iter().any(|&x| x != 0) {
            return Err(FrameError::Flags);
        }
        if raw > MAX_BLOCK || wire > MAX_BLOCK {
            return Err(FrameError::Length { raw, wire });
        }
        let zstd = b[24] & FLAG_ZSTD != 0;
        if (!zstd && raw != wire) || (zstd && (wire >= raw || wire == 0)) {
            return Err(FrameError::Mismatch { raw, wire });
        }
        let mut block = [0u8; 8];
        block.copy_from_slice(&b[8..16]);
        let mut hash = [0u8; 32];
        hash.copy_from_slice(&b[32..]);
        Ok(BlockHeader { file: u32_at(4), block: u64::from_be_bytes(block), raw_len: raw, wire_len: wire, zstd, hash })
    }
}

/// Fuzz entry: decodes every 64-byte window of `data` and checks that what decodes
/// re-encodes to the same bytes.
pub fn exercise(data: &[u8]) {
    for w in data.chunks_exact(HEADER_LEN) {
        let arr: &[u8; HEADER_LEN] = w.try_into().expect("exact chunk");
        if let Ok(h) = BlockHeader::decode(arr) {
            assert_eq!(&h.encode(), arr, "decode/encode round trip");
            assert!(h.wire_len <= h.raw_len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h() -> BlockHeader {
        BlockHeader { file: 7, block: 3, raw_len: 1 << 20, wire_len: 1 << 20, zstd: false, hash: [9; 32] }
    }

    #[test]
    fn round_trip() {
        let x = h();
        assert_eq!(BlockHeader::decode(&x.encode()), Ok(x));
        let z = BlockHeader { zstd: true, wire_len: 1000, ..x };
        assert_eq!(BlockHeader::decode(&z.encode()), Ok(z));
    }

    #[test]
    fn refuses_bad_headers() {
        let mut b = h().encode();
        b[0] = b'X';
        assert_eq!(BlockHeader::decode(&b), Err(FrameError::Magic));
        let big = BlockHeader { raw_len: MAX_BLOCK + 1, wire_len: MAX_BLOCK + 1, ..h() };
        assert!(matches!(BlockHeader::decode(&big.encode()), Err(FrameError::Length { .. })));
        let odd = BlockHeader { wire_len: 5, ..h() };
        assert!(matches!(BlockHeader::decode(&odd.encode()), Err(FrameError::Mismatch { .. })));
        let grew = BlockHeader { zstd: true, wire_len: (1 << 20) + 1, ..h() };
        assert!(BlockHeader::decode(&grew.encode()).is_err());
        let mut f = h().encode();
        f[24] = 2;
        assert_eq!(BlockHeader::decode(&f), Err(FrameError::Flags));
        let mut r = h().encode();
        r[30] = 1;
        assert_eq!(BlockHeader::decode(&r), Err(FrameError::Flags));
        exercise(&[0xff; 200]);
        exercise(&h().encode());
    }
}
