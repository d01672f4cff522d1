//! The journal kept beside a partial file, so that a copy interrupted at any instant resumes
//! by sending only what is missing.
//!
//! The receiver appends one 40-byte record (block number, BLAKE3 of the block) after it has
//! written a verified block into the partial file. The first line names the source file's
//! size, modification time and the block size; a journal that does not match the new
//! manifest entry is discarded with its partial file. On resume the receiver re-reads every
//! journalled block and keeps only those whose bytes still hash to the recorded value, so a
//! torn last record, a crash of the machine before the page cache reached the disk, or a
//! partial file changed by someone else all cost a resend, never a wrong file.

use std::collections::BTreeMap;

/// Length of one record.
pub const RECORD_LEN: usize = 40;

/// The header line for a file of `size` bytes, `mtime_ns`, in blocks of `block_size`.
pub fn header(size: u64, mtime_ns: i64, block_size: u32) -> String {
    format!("wanperf-journal v1 size={size} mtime_ns={mtime_ns} block={block_size}\n")
}

/// One record.
pub fn record(block: u64, hash: &[u8; 32]) -> [u8; RECORD_LEN] {
    let mut r = [0u8; RECORD_LEN];
    r[..8].copy_from_slice(&block.to_be_bytes());
    r[8..].copy_from_slice(hash);
    r
}

/// A parsed journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Journal {
    /// Source size.
    pub size: u64,
    /// Source modification time.
    pub mtime_ns: i64,
    /// Block size.
    pub block_size: u32,
    /// Blocks recorded as written, with their hashes (the last record wins).
    pub blocks: BTreeMap<u64, [u8; 32]>,
}

impl Journal {
    /// Parses a journal; `None` if its header is not one (a torn tail record is ignored).
    pub fn parse(bytes: &[u8]) -> Option<Journal> {
        let nl = bytes.iter().position(|&b| b == b'\n')?;
        let line = std::str::from_utf8(&bytes[..nl]).ok()?;
        let mut it = line.split(' ');
        if it.next()? != "wanperf-journal" || it.next()? != "v1" {
            return None;
        }
        let mut field = |name: &str| it.next()?.strip_prefix(name).map(str::to_string);
        let size = field("size=")?.parse().ok()?;
        let mtime_ns = field("mtime_ns=")?.parse().ok()?;
        let block_size: u32 = field("block=")?.parse().ok()?;
        if block_size == 0 {
            return None;
        }
        let count = crate::blocks::count(size, block_size);
        let mut blocks = BTreeMap::new();
        for r in bytes[nl + 1..].chunks_exact(RECORD_LEN) {
            let mut b = [0u8; 8];
            b.copy_from_slice(&r[..8]);
            let block = u64::from_be_bytes(b);
            if block >= count {
                return None;
            }
            let mut h = [0u8; 32];
            h.copy_from_slice(&r[8..]);
            blocks.insert(block, h);
        }
        Some(Journal { size, mtime_ns, block_size, blocks })
    }

    /// Whether the journal was kept for this source file and block size.
    pub fn matches(&self, size: u64, mtime_ns: i64, block_size: u32) -> bool {
        self.size == size && self.mtime_ns == mtime_ns && self.block_size == block_size
    }
}

/// `[start, end)` ranges of the blocks `0..count` that `have` does not hold.
pub fn missing_ranges(count: u64, have: impl Fn(u64) -> bool) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for b in 0..count {
        if have(b) {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.1 == b => last.1 = b + 1,
            _ => out.push((b, b + 1)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_with_a_torn_tail() {
        let mut j = header(5 * 1024, -3, 1024).into_bytes();
        j.extend_from_slice(&record(0, &[1; 32]));
        j.extend_from_slice(&record(3, &[2; 32]));
        j.extend_from_slice(&record(0, &[4; 32]));
        j.extend_from_slice(&record(4, &[3; 32])[..17]); // torn
        let p = Journal::parse(&j).unwrap();
        assert!(p.matches(5 * 1024, -3, 1024));
        assert!(!p.matches(5 * 1024, 0, 1024));
        assert_eq!(p.blocks.len(), 2);
        assert_eq!(p.blocks[&0], [4; 32]);
        assert_eq!(missing_ranges(5, |b| p.blocks.contains_key(&b)), vec![(1, 3), (4, 5)]);
    }

    #[test]
    fn refuses_what_is_not_a_journal() {
        assert!(Journal::parse(b"").is_none());
        assert!(Journal::parse(b"hello\n").is_none());
        assert!(Journal::parse(b"wanperf-journal v1 size=1 mtime_ns=0 block=0\n").is_none());
        let mut j = header(1024, 0, 1024).into_bytes();
        j.extend_from_slice(&record(9, &[0; 32])); // beyond the file
        assert!(Journal::parse(&j).is_none());
        assert_eq!(missing_ranges(3, |_| false), vec![(0, 3)]);
        assert!(missing_ranges(3, |_| true).is_empty());
    }
}
