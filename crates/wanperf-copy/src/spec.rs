//! What a copy asks for, the messages its two ends exchange on the control connection, and
//! what each end reports at the end.

use crate::paths::RelPath;
use serde::{Deserialize, Serialize};

/// Default block: 1 MiB (a power of two of BLAKE3 chunks, so block hashes join into the
/// file's hash).
pub const DEFAULT_BLOCK: u32 = 1 << 20;
/// Smallest block (16 KiB).
pub const MIN_BLOCK: u32 = 16 << 10;
/// Largest block (16 MiB).
pub const MAX_BLOCK: u32 = 16 << 20;
/// Entries per manifest message (keeps each control frame well under its 4 MiB limit).
pub const MANIFEST_CHUNK: usize = 8192;

/// Which way the files go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Way {
    /// Client → server (`wanperf copy SRC… HOST:DST`).
    Push,
    /// Server → client (`wanperf copy HOST:SRC… DST`).
    Pull,
}

/// Compression of blocks on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "mode", content = "level")]
pub enum Compress {
    /// Raw blocks.
    Off,
    /// zstd at this level, for every block that gets smaller.
    Zstd(i32),
    /// zstd at this level while it pays (see [`crate::auto`]).
    Auto(i32),
}

/// A `--compress` value that is no zstd level.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a zstd level (1 to 22)")]
pub struct BadLevel(pub String);

impl Compress {
    /// Parses `off`, `auto`, `auto:LEVEL`, or a zstd level 1..=22.
    pub fn parse(s: &str) -> Result<Self, BadLevel> {
        let level = |t: &str| -> Result<i32, BadLevel> {
            match t.parse::<i32>() {
                Ok(l) if (1..=22).contains(&l) => Ok(l),
                _ => Err(BadLevel(t.to_string())),
            }
        };
        match s {
            "off" | "no" | "0" => Ok(Compress::Off),
            "auto" => Ok(Compress::Auto(3)),
            "on" | "yes" => Ok(Compress::Zstd(3)),
            _ => match s.strip_prefix("auto:") {
                Some(l) => Ok(Compress::Auto(level(l)?)),
                None => Ok(Compress::Zstd(level(s)?)),
            },
        }
    }

    /// The zstd level, if compression may be used at all.
    pub fn level(&self) -> Option<i32> {
        match self {
            Compress::Off => None,
            Compress::Zstd(l) | Compress::Auto(l) => Some(*l),
        }
    }

    /// Short text (`off`, `zstd -3`, `auto (zstd -3)`).
    pub fn describe(&self) -> String {
        match self {
            Compress::Off => "off".into(),
            Compress::Zstd(l) => format!("zstd -{l}"),
            Compress::Auto(l) => format!("auto (zstd -{l})"),
        }
    }
}

/// The copy part of a test request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CopySpec {
    /// Direction.
    pub way: Way,
    /// On the server, under its root: the destination directory (push, exactly one) or the
    /// sources (pull, one or more).
    pub remote: Vec<RelPath>,
    /// Block size in bytes (a power of two between [`MIN_BLOCK`] and [`MAX_BLOCK`]).
    pub block_size: u32,
    /// Compression on the wire.
    pub compress: Compress,
    /// Send files even when the receiver has one of the same size and modification time.
    #[serde(default)]
    pub force: bool,
    /// Receiver writes with O_DIRECT where the file system allows it.
    #[serde(default)]
    pub direct: bool,
    /// Receiver makes files durable (fsync) before they get their final names.
    pub fsync: bool,
    /// Each end measures its stages' ceilings alone once the copy is done (`--probe`).
    #[serde(default)]
    pub probe: bool,
    /// The hash that protects every block and names every file.
    #[serde(default)]
    pub hash: HashKind,
    /// The destination names the single source ([`crate::paths::takes_dest_name`]): the
    /// source is written as the destination, in its parent directory, unless the destination
    /// is an existing directory. Pushes only (a pull's destination is the client's own).
    #[serde(default)]
    pub dest_names_source: bool,
}

/// The hash of blocks and files: BLAKE3 (cryptographic; the file's hash is what `b3sum`
/// prints) or XXH3-128 (an error-detecting hash several times cheaper in CPU; the file's
/// hash is XXH3-128 over its blocks' hashes, which only wanperf computes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HashKind {
    /// BLAKE3.
    #[default]
    Blake3,
    /// XXH3-128.
    Xxh3,
}

impl HashKind {
    /// Its name, as `--hash` takes it.
    pub fn name(self) -> &'static str {
        match self {
            HashKind::Blake3 => "blake3",
            HashKind::Xxh3 => "xxh3",
        }
    }

    /// Its name in prose.
    pub fn label(self) -> &'static str {
        match self {
            HashKind::Blake3 => "BLAKE3",
            HashKind::Xxh3 => "XXH3-128",
        }
    }
}

/// Why a copy spec is invalid.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum CopySpecError {
    /// Bad block size.
    #[error("block size {0} B must be a power of two from 16 KiB to 16 MiB")]
    Block(u32),
    /// Push needs exactly one destination, pull at least one source.
    #[error("{0}")]
    Paths(&'static str),
}

impl CopySpec {
    /// Checks the fields a server relies on.
    pub fn validate(&self) -> Result<(), CopySpecError> {
        if !self.block_size.is_power_of_two() || !(MIN_BLOCK..=MAX_BLOCK).contains(&self.block_size) {
            return Err(CopySpecError::Block(self.block_size));
        }
        match (self.way, self.remote.len()) {
            (Way::Push, 1) => Ok(()),
            (Way::Push, _) => Err(CopySpecError::Paths("a push names exactly one destination")),
            (Way::Pull, 0) => Err(CopySpecError::Paths("a pull names at least one source")),
            (Way::Pull, n) if n > 4096 => Err(CopySpecError::Paths("a pull names at most 4096 sources")),
            _ => Ok(()),
        }
    }
}

/// What one manifest entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory (created, possibly empty).
    Dir,
}

/// One file or directory to copy; its index in the manifest is its id on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Path under the destination.
    pub path: RelPath,
    /// File or directory.
    pub kind: Kind,
    /// Size in bytes (0 for directories).
    pub size: u64,
    /// Permission bits (07777).
    pub mode: u32,
    /// Modification time, ns since the epoch.
    pub mtime_ns: i64,
}

/// Blocks of one file the receiver still needs: `[start, end)` block ranges.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Want {
    /// Manifest index.
    pub file: u32,
    /// Block ranges.
    pub ranges: Vec<(u64, u64)>,
}

/// A file the receiver has completed: verified, durable if asked, under its final name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Done {
    /// Manifest index.
    pub file: u32,
    /// The whole file's hash, hex (of the copy's [`HashKind`]).
    pub hash: String,
}

/// Copy messages on the control connection (inside [`crate`]'s host protocol).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "copy", rename_all = "snake_case")]
pub enum CopyMsg {
    /// Sender → receiver: entries `first..first+entries.len()` of the manifest.
    Manifest {
        /// Index of the first entry.
        first: u32,
        /// The entries.
        entries: Vec<Entry>,
        /// True on the last part.
        last: bool,
    },
    /// Receiver → sender: what to send (files not listed are already there).
    Want {
        /// Per file.
        wants: Vec<Want>,
        /// Bytes the receiver already had in partial files.
        resumed_bytes: u64,
        /// Files skipped as already present (same size and modification time).
        skipped: u32,
    },
    /// Receiver → sender: a block failed its hash; send it again.
    Resend {
        /// Manifest index.
        file: u32,
        /// Block number.
        block: u64,
    },
    /// Receiver → sender: files completed since the last such message.
    Done {
        /// The files.
        files: Vec<Done>,
    },
    /// Receiver → sender: every wanted block arrived and every file is in place.
    Complete,
}

/// A stage of the copy pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Sender: reading files.
    Read,
    /// Sender: zstd compression.
    Compress,
    /// Sender: BLAKE3 of each block.
    Hash,
    /// Sender: writing to the data connections (time in the socket's write: the network).
    Send,
    /// Receiver: reading from the data connections.
    Receive,
    /// Receiver: BLAKE3 check of each block.
    Verify,
    /// Receiver: zstd decompression.
    Decompress,
    /// Receiver: writing files.
    Write,
}

impl Stage {
    /// Name in the verdict.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Read => "disk read",
            Stage::Compress => "compression",
            Stage::Hash => "hashing",
            Stage::Send => "the network",
            Stage::Receive => "receiving",
            Stage::Verify => "verification",
            Stage::Decompress => "decompression",
            Stage::Write => "disk write",
        }
    }
}

/// What one stage did over the copy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageStat {
    /// The stage.
    pub stage: Stage,
    /// Threads running it.
    pub threads: u32,
    /// Seconds its threads spent working (summed over threads).
    pub busy_s: f64,
    /// Seconds its threads waited for input (summed).
    pub starved_s: f64,
    /// Seconds its threads waited for room downstream (summed).
    pub blocked_s: f64,
    /// File bytes it handled (Receive: bytes on the wire).
    pub bytes: u64,
    /// CPU seconds its threads used, where measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_s: Option<f64>,
    /// Seconds its threads were ready to run but waited for a CPU (scheduler run queue).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_wait_s: Option<f64>,
}

impl StageStat {
    /// An empty stat for `stage` with `threads` threads.
    pub fn new(stage: Stage, threads: u32) -> Self {
        StageStat {
            stage,
            threads,
            busy_s: 0.0,
            starved_s: 0.0,
            blocked_s: 0.0,
            bytes: 0,
            cpu_s: None,
            cpu_wait_s: None,
        }
    }
}

/// What one end of a copy reports.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CopyReport {
    /// Seconds from the first block read (sender) or received (receiver) to the last written.
    pub wall_s: f64,
    /// Its pipeline stages.
    pub stages: Vec<StageStat>,
    /// Files completed (receiver) or whose blocks were all sent (sender).
    pub files: u64,
    /// File bytes moved.
    pub bytes: u64,
    /// Bytes on the wire (block headers and compressed payloads).
    pub wire_bytes: u64,
    /// Blocks sent again after a failed check.
    pub resent_blocks: u64,
    /// Files left alone as already present.
    pub skipped_files: u64,
    /// Bytes already present in partial files.
    pub resumed_bytes: u64,
    /// Compression actually used: e.g. `zstd -3`, `off`, `auto: off (incompressible)`.
    pub compression: String,
    /// Whether O_DIRECT writes were used.
    #[serde(default)]
    pub direct: bool,
    /// Share of this end's host CPU (all cores, all processes) busy during the copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cpu_busy: Option<f64>,
    /// Its stages' ceilings measured alone after the copy (`--probe`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<StageProbe>,
}

/// A stage's ceiling measured alone, with nothing else of the copy running (`--probe`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageProbe {
    /// The stage (`send` stands for the memory-to-memory test of the network).
    pub stage: Stage,
    /// Bytes it handled.
    pub bytes: u64,
    /// Seconds it took, one thread.
    pub seconds: f64,
    /// Threads the copy gives the stage; the ceiling counts them all.
    pub threads: u32,
    /// What it could do alone: bytes × threads / seconds (none when it could not be measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_bytes_s: Option<f64>,
    /// How it was measured (`page cache dropped`, `fdatasync`, `zstd -3`), or why it was not.
    pub how: String,
}

impl StageProbe {
    /// A measured ceiling.
    pub fn measured(stage: Stage, bytes: u64, seconds: f64, threads: u32, how: impl Into<String>) -> StageProbe {
        let rate = (seconds > 0.0 && bytes > 0).then(|| bytes as f64 * f64::from(threads.max(1)) / seconds);
        StageProbe { stage, bytes, seconds, threads, rate_bytes_s: rate, how: how.into() }
    }

    /// A ceiling that could not be measured, and why.
    pub fn failed(stage: Stage, why: impl Into<String>) -> StageProbe {
        StageProbe { stage, bytes: 0, seconds: 0.0, threads: 0, rate_bytes_s: None, how: why.into() }
    }
}

/// The `file` record of `wanperf copy --json`: one per file completed or left alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileRecord {
    /// Always `file`.
    pub event: String,
    /// Path under the destination.
    pub path: String,
    /// Size in bytes.
    pub bytes: u64,
    /// BLAKE3 of the whole file as the receiver wrote it (what `b3sum` prints), with
    /// `--hash blake3` (the default); absent when the file was left alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blake3: Option<String>,
    /// The file's XXH3-128 list hash (over its blocks' XXH3-128), with `--hash xxh3`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xxh3: Option<String>,
    /// Left alone: the receiver had it with the same size and modification time.
    pub skipped: bool,
}

impl FileRecord {
    /// The record for `e`.
    pub fn new(e: &Entry, kind: HashKind, hash: String, skipped: bool) -> Self {
        let hash = (!skipped && !hash.is_empty()).then_some(hash);
        let (blake3, xxh3) = match kind {
            HashKind::Blake3 => (hash, None),
            HashKind::Xxh3 => (None, hash),
        };
        FileRecord { event: "file".into(), path: e.path.to_string(), bytes: e.size, blake3, xxh3, skipped }
    }

    /// The file's hash with its name (`blake3 …` or `xxh3 …`), if it has one.
    pub fn hash(&self) -> Option<String> {
        (self.blake3.as_ref().map(|h| format!("blake3 {h}")))
            .or_else(|| self.xxh3.as_ref().map(|h| format!("xxh3 {h}")))
    }
}
