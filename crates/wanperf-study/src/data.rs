//! The data a copy study copies: files the runner makes for each cell in a directory of its
//! own, removed with it.

use crate::spec::{Content, DataSpec};
use anyhow::{Context, Result};
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};
use std::io::Write;
use std::path::{Path, PathBuf};

/// A scratch directory for one cell, removed (with everything in it) when dropped.
pub struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    /// A fresh directory under the system's temporary directory.
    pub fn new(what: &str) -> Result<Scratch> {
        let base = std::env::temp_dir();
        for n in 0..1000u32 {
            let dir = base.join(format!("wanperf-{what}-{}-{n}", std::process::id()));
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok(Scratch { dir }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e).with_context(|| format!("cannot create {}", dir.display())),
            }
        }
        anyhow::bail!("cannot create a scratch directory in {}", base.display())
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Words of the text content: zstd -3 shrinks random sentences of them about 3–4×.
const WORDS: &[&str] = &[
    "the",
    "path",
    "from",
    "SLAC",
    "to",
    "CERN",
    "window",
    "streams",
    "throughput",
    "loss",
    "queue",
    "router",
    "bottleneck",
    "Mbit/s",
    "RTT",
    "ms",
    "bbftp",
    "iperf",
    "transfer",
    "of",
    "and",
    "a",
    "with",
    "data",
    "physics",
    "event",
    "file",
    "disk",
    "host",
    "link",
    "ATM",
    "Chicago",
    "Geneva",
    "Stanford",
    "ESnet",
    "IN2P3",
];

/// Makes `spec.files` files (`f0000000`, …) in `dir` holding `spec.size` bytes in all (the
/// remainder goes to the first), with the content asked for. The same seed gives the same bytes.
pub fn make(dir: &Path, spec: &DataSpec, seed: u64) -> Result<()> {
    let files = u64::from(spec.files.max(1));
    let each = spec.size / files;
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut chunk = vec![0u8; 1 << 20];
    for i in 0..files {
        let len = if i == 0 { each + spec.size % files } else { each };
        let path = dir.join(format!("f{i:07}"));
        let f = std::fs::File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
        let mut left = len;
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            fill(&mut chunk[..n], spec.content, &mut rng);
            w.write_all(&chunk[..n]).with_context(|| format!("cannot write {}", path.display()))?;
            left -= n as u64;
        }
        w.flush().with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

fn fill(buf: &mut [u8], content: Content, rng: &mut SmallRng) {
    match content {
        Content::Random => rng.fill_bytes(buf),
        Content::Zeros => buf.fill(0),
        Content::Text => {
            let mut i = 0;
            while i < buf.len() {
                let w = WORDS[rng.random_range(0..WORDS.len())].as_bytes();
                for &b in w.iter().chain(b" ") {
                    if i == buf.len() {
                        break;
                    }
                    buf[i] = b;
                    i += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(dir: &Path) -> Vec<u64> {
        let mut v: Vec<(String, u64)> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.file_name().to_string_lossy().into_owned(), e.metadata().unwrap().len())
            })
            .collect();
        v.sort();
        v.into_iter().map(|(_, n)| n).collect()
    }

    #[test]
    fn files_hold_the_size_asked_for_and_scratch_goes_away() {
        let s = Scratch::new("test-data").unwrap();
        let spec = DataSpec { size: 10_000_003, files: 4, content: Content::Random };
        make(s.path(), &spec, 1).unwrap();
        assert_eq!(sizes(s.path()), vec![2_500_003, 2_500_000, 2_500_000, 2_500_000]);
        let p = s.path().to_path_buf();
        drop(s);
        assert!(!p.exists());
    }

    #[test]
    fn content_decides_what_compression_can_do() {
        let s = Scratch::new("test-content").unwrap();
        let ratio = |content| {
            let d = s.path().join(format!("{content:?}"));
            std::fs::create_dir(&d).unwrap();
            make(&d, &DataSpec { size: 1 << 20, files: 1, content }, 7).unwrap();
            let data = std::fs::read(d.join("f0000000")).unwrap();
            data.len() as f64 / zstd::bulk::compress(&data, 3).unwrap().len() as f64
        };
        let (random, text, zeros) = (ratio(Content::Random), ratio(Content::Text), ratio(Content::Zeros));
        assert!(random < 1.01, "random data compressed {random}×");
        assert!((2.0..8.0).contains(&text), "text compressed {text}×");
        assert!(zeros > 100.0, "zeros compressed {zeros}×");
    }
}
