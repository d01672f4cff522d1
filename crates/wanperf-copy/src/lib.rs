//! `wanperf copy`, sans I/O.
//!
//! A copy moves a manifest of files from a sender to a receiver over a `wanperf serve`
//! connection: the sender announces the files ([`spec::Entry`]), the receiver answers which
//! blocks it still needs ([`spec::Want`], from the journals of partial files it kept), and the
//! sender's data connections carry [`frame`]d blocks, each with the BLAKE3 chaining value of
//! its raw bytes. The receiver verifies every block before it writes it, asks again for a
//! block that fails ([`spec::CopyMsg::Resend`]), and joins the blocks' chaining values into the
//! file's BLAKE3 hash ([`blocks::file_hash`]) — the same value `b3sum` prints.
//!
//! Everything here is a pure function of bytes and numbers; the threads, files and sockets
//! live in `wanperf-engine` (`copy.rs`):
//! - [`spec`]: what a copy asks for, its control messages and its report;
//! - [`paths`]: relative paths a server may touch (no `..`, no absolute paths);
//! - [`frame`]: the 64-byte block header on data connections;
//! - [`blocks`]: block arithmetic and the BLAKE3 tree over blocks;
//! - [`journal`]: the record of verified blocks kept beside a partial file (resume);
//! - [`auto`]: `--compress auto`, which turns itself off when it does not pay;
//! - [`verdict`]: which stage limits a copy, and what limits a `tput` test.
//!
//! ```
//! use wanperf_copy::paths::RelPath;
//! assert!(RelPath::parse("data/run1/file.root").is_ok());
//! assert!(RelPath::parse("../etc/passwd").is_err());
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod auto;
pub mod blocks;
pub mod frame;
pub mod journal;
pub mod paths;
pub mod spec;
pub mod verdict;

/// Fuzz entry for everything a copy decodes from a peer: block headers, journals, relative
/// paths and control messages. Panics only on a broken invariant.
pub fn exercise(data: &[u8]) {
    frame::exercise(data);
    if let Some(j) = journal::Journal::parse(data) {
        assert!(j.blocks.keys().all(|&b| b < blocks::count(j.size, j.block_size)));
    }
    if let Ok(s) = std::str::from_utf8(data) {
        if let Ok(p) = paths::RelPath::parse(s) {
            assert!(p.components().all(|c| c != ".." && !c.is_empty()));
        }
        if let Ok(m) = serde_json::from_str::<spec::CopyMsg>(s) {
            let back = serde_json::to_string(&m).expect("serializes");
            assert_eq!(serde_json::from_str::<spec::CopyMsg>(&back).expect("re-parses"), m);
        }
        let _ = spec::Compress::parse(s);
    }
}
