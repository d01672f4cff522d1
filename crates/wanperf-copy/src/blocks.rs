//! Block arithmetic and the hashes of blocks and files (BLAKE3 or XXH3-128).
//!
//! Blocks are a power of two of BLAKE3's 1 KiB chunks, so each block of a multi-block file is
//! a complete subtree of the file's BLAKE3 tree: its chaining value can be computed on its
//! own (any thread, any order, `hazmat::HasherExt::set_input_offset`), verified on its own,
//! and the file's hash is the tree of those values ([`file_hash`]) — the same 32 bytes as
//! `b3sum FILE`. A file of one block is hashed whole, its block hash is the file's hash.

use crate::spec::HashKind;
use blake3::hazmat::{self, HasherExt, Mode};
use twox_hash::XxHash3_128;

impl HashKind {
    /// The hash block `block` (of `block_size` bytes, in a file of `file_size`) carries.
    /// XXH3-128 is seeded with the block's index, so a block in the wrong place fails; its 16
    /// bytes are followed by 16 zeros.
    pub fn block(self, data: &[u8], block: u64, block_size: u32, file_size: u64) -> [u8; 32] {
        match self {
            HashKind::Blake3 => block_hash(data, block, block_size, file_size),
            HashKind::Xxh3 => {
                let mut h = [0u8; 32];
                h[..16].copy_from_slice(&XxHash3_128::oneshot_with_seed(block, data).to_le_bytes());
                h
            }
        }
    }

    /// Whether the hash is cheap enough to compute in the thread that just copied the block
    /// (the reader, the receiving stream), while the block is still in that core's cache —
    /// XXH3 hashes such a block about twice as fast as one fetched from memory by another
    /// thread — needing neither the file's size nor a thread of its own; BLAKE3 is computed
    /// by its own threads in parallel.
    pub fn cheap(self) -> bool {
        self == HashKind::Xxh3
    }

    /// A block's hash where it is [`cheap`](Self::cheap), else `None`.
    pub fn cheap_block(self, data: &[u8], block: u64) -> Option<[u8; 32]> {
        self.cheap().then(|| self.block(data, block, 0, 0))
    }

    /// The file's hash from its blocks' hashes (in block order).
    pub fn file(self, hashes: &[[u8; 32]], size: u64, block_size: u32) -> [u8; 32] {
        match self {
            HashKind::Blake3 => file_hash(hashes, size, block_size),
            HashKind::Xxh3 => {
                // Seeded with the size; the block size and every block's hash follow.
                let mut x = XxHash3_128::with_seed(size);
                x.write(&block_size.to_le_bytes());
                for h in hashes {
                    x.write(&h[..16]);
                }
                let mut h = [0u8; 32];
                h[..16].copy_from_slice(&x.finish_128().to_le_bytes());
                h
            }
        }
    }

    /// Hex of a hash of this kind (64 digits for BLAKE3, 32 for XXH3-128).
    pub fn hex(self, h: &[u8; 32]) -> String {
        match self {
            HashKind::Blake3 => hex(h),
            HashKind::Xxh3 => h[..16].iter().map(|b| format!("{b:02x}")).collect(),
        }
    }
}

/// Number of blocks of a file (0 for an empty file).
pub fn count(size: u64, block_size: u32) -> u64 {
    size.div_ceil(u64::from(block_size))
}

/// Length of block `i`.
pub fn len(size: u64, block_size: u32, i: u64) -> u32 {
    let bs = u64::from(block_size);
    size.saturating_sub(i * bs).min(bs) as u32
}

/// The hash a block carries: for a file of one block its BLAKE3 root hash, otherwise the
/// chaining value of the subtree at `block × block_size`.
pub fn block_hash(data: &[u8], block: u64, block_size: u32, file_size: u64) -> [u8; 32] {
    if file_size <= u64::from(block_size) {
        return *blake3::hash(data).as_bytes();
    }
    let mut h = blake3::Hasher::new();
    h.set_input_offset(block * u64::from(block_size));
    h.update(data);
    h.finalize_non_root()
}

/// The file's BLAKE3 hash from its blocks' hashes (in block order).
pub fn file_hash(hashes: &[[u8; 32]], size: u64, block_size: u32) -> [u8; 32] {
    if size == 0 {
        return *blake3::hash(b"").as_bytes();
    }
    assert_eq!(hashes.len() as u64, count(size, block_size), "one hash per block");
    if hashes.len() == 1 {
        return hashes[0];
    }
    let bs = u64::from(block_size);
    let (l, r) = split(hashes, size, bs);
    *hazmat::merge_subtrees_root(&l, &r, Mode::Hash).as_bytes()
}

/// Chaining values of the two halves of the subtree `hashes` covering `size` bytes.
fn split(hashes: &[[u8; 32]], size: u64, bs: u64) -> ([u8; 32], [u8; 32]) {
    let left_bytes = hazmat::left_subtree_len(size);
    let k = (left_bytes / bs) as usize;
    (node(&hashes[..k], left_bytes, bs), node(&hashes[k..], size - left_bytes, bs))
}

fn node(hashes: &[[u8; 32]], size: u64, bs: u64) -> [u8; 32] {
    if hashes.len() == 1 {
        return hashes[0];
    }
    let (l, r) = split(hashes, size, bs);
    hazmat::merge_subtrees_non_root(&l, &r, Mode::Hash)
}

/// Hex of a hash.
pub fn hex(h: &[u8; 32]) -> String {
    blake3::Hash::from_bytes(*h).to_hex().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 31 % 251) as u8).collect()
    }

    #[test]
    fn block_hashes_join_into_the_files_blake3() {
        let bs = 16 * 1024u32;
        for n in [0usize, 1, 1023, 1024, 16383, 16384, 16385, 32768, 49152 + 7, 5 * 16384, 7 * 16384 + 1, 200_000] {
            let d = data(n);
            let blocks = count(n as u64, bs);
            let hashes: Vec<[u8; 32]> = (0..blocks)
                .map(|i| {
                    let a = (i * u64::from(bs)) as usize;
                    let b = a + len(n as u64, bs, i) as usize;
                    block_hash(&d[a..b], i, bs, n as u64)
                })
                .collect();
            assert_eq!(file_hash(&hashes, n as u64, bs), *blake3::hash(&d).as_bytes(), "size {n}");
        }
    }

    #[test]
    fn arithmetic() {
        assert_eq!(count(0, 1024), 0);
        assert_eq!(count(1, 1024), 1);
        assert_eq!(count(2048, 1024), 2);
        assert_eq!(count(2049, 1024), 3);
        assert_eq!(len(2049, 1024, 2), 1);
        assert_eq!(len(2049, 1024, 1), 1024);
        assert_eq!(hex(&[0xab; 32]).len(), 64);
    }

    #[test]
    fn a_flipped_byte_changes_the_block_hash() {
        let mut d = data(16384);
        let a = block_hash(&d, 1, 16384, 100_000);
        d[100] ^= 1;
        assert_ne!(a, block_hash(&d, 1, 16384, 100_000));
        // The same bytes at another offset hash differently (a block cannot be misplaced).
        assert_ne!(block_hash(&d, 1, 16384, 100_000), block_hash(&d, 2, 16384, 100_000));
    }

    #[test]
    fn xxh3_blocks_are_bound_to_their_place_and_files_to_their_blocks() {
        let k = HashKind::Xxh3;
        let d = data(5000);
        let b = k.block(&d, 1, 1024, 1 << 20);
        assert_eq!(b[16..], [0u8; 16], "16 bytes of hash, then zeros");
        assert_ne!(b, k.block(&d, 2, 1024, 1 << 20), "the same bytes as another block");
        let mut e = d.clone();
        e[4000] ^= 1;
        assert_ne!(b, k.block(&e, 1, 1024, 1 << 20), "one flipped bit");
        let hs = [k.block(&d, 0, 1024, 10_000), b];
        let f = k.file(&hs, 10_000, 1024);
        assert_ne!(f, k.file(&[hs[1], hs[0]], 10_000, 1024), "blocks swapped");
        assert_ne!(f, k.file(&hs, 10_001, 1024), "another size");
        assert_ne!(f, k.file(&hs, 10_000, 2048), "another block size");
        assert_eq!(k.hex(&f).len(), 32);
        assert_eq!(HashKind::Blake3.hex(&f).len(), 64);
        // BLAKE3 through the kind is the block tree above.
        assert_eq!(HashKind::Blake3.block(&d, 0, 8192, 5000), *blake3::hash(&d).as_bytes());
    }
}
