//! `wanperf copy --probe`: each stage's ceiling measured alone, after the copy, at the end
//! that runs it — the sender reads its largest source with that file's page cache dropped and
//! hashes and compresses a sample of it; the receiver writes a scratch file beside the copy
//! (flushed with fdatasync when the copy flushes, O_DIRECT when the copy asked for it),
//! verifies a sample and decompresses one. The ends probe one after the other (the server
//! before it sends its results, the client once they are in), so on one host they do not
//! share the CPUs. Each probe stops at [`BYTES`] or [`SECONDS`], whichever comes first.

use crate::copy_fs::{self, Aligned, Source};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};
use wanperf_copy::spec::{CopySpec, Entry, HashKind, Kind, Stage, StageProbe};

/// Most bytes a disk probe reads or writes.
pub const BYTES: u64 = 256 << 20;
/// Most time a probe takes (the CPU probes take a quarter of it).
pub const SECONDS: f64 = 1.5;
/// Bytes of the sample the CPU stages are measured on.
const SAMPLE: usize = 16 << 20;

const TMPFS_MAGIC: i64 = 0x0102_1994;

fn on_tmpfs(f: &impl AsFd) -> bool {
    wanperf_sys::fs::fs_type(f).is_ok_and(|t| t == TMPFS_MAGIC)
}

fn mib(b: u64) -> String {
    format!("{:.0} MiB", b as f64 / 1048576.0)
}

/// Deterministic incompressible bytes (xorshift), for the scratch file and samples.
fn noise(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut v = Vec::with_capacity(n + 8);
    while v.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(n);
    v
}

/// Runs `round` (which returns the bytes it handled) again and again for at least a quarter
/// of [`SECONDS`]; returns (bytes, seconds).
fn cpu_loop(mut round: impl FnMut() -> u64) -> (u64, f64) {
    let t0 = Instant::now();
    let mut bytes = 0u64;
    let budget = Duration::from_secs_f64(SECONDS / 4.0);
    loop {
        let n = round();
        bytes += n;
        if t0.elapsed() >= budget || n == 0 {
            return (bytes, t0.elapsed().as_secs_f64());
        }
    }
}

/// The copy's hash of the sample's blocks as the copy hashes them: hashing at the sender,
/// verification at the receiver.
fn hash_probe(kind: HashKind, stage: Stage, sample: &[u8], bs: usize, threads: u32) -> StageProbe {
    let size = (sample.len() as u64).max(bs as u64 * 2);
    let (bytes, secs) = cpu_loop(|| {
        for (i, b) in sample.chunks(bs).enumerate() {
            std::hint::black_box(kind.block(b, i as u64, bs as u32, size));
        }
        sample.len() as u64
    });
    StageProbe::measured(
        stage,
        bytes,
        secs,
        threads,
        format!("{} of a {} sample, {threads} thread(s)", kind.label(), mib(sample.len() as u64)),
    )
}

fn compress_probe(sample: &[u8], bs: usize, level: i32, threads: u32) -> StageProbe {
    let Ok(mut z) = zstd::bulk::Compressor::new(level) else {
        return StageProbe::failed(Stage::Compress, format!("zstd -{level} is not available"));
    };
    let mut out = 0u64;
    let (bytes, secs) = cpu_loop(|| {
        for b in sample.chunks(bs) {
            out += z.compress(b).map_or(b.len(), |c| c.len()) as u64;
        }
        sample.len() as u64
    });
    let ratio = out as f64 / bytes.max(1) as f64;
    StageProbe::measured(
        Stage::Compress,
        bytes,
        secs,
        threads,
        format!("zstd -{level} of a {} sample (ratio {ratio:.2}), {threads} thread(s)", mib(sample.len() as u64)),
    )
}

fn decompress_probe(sample: &[u8], bs: usize, level: i32, threads: u32) -> StageProbe {
    let packed: Vec<(Vec<u8>, usize)> =
        sample.chunks(bs).filter_map(|b| zstd::bulk::compress(b, level).ok().map(|c| (c, b.len()))).collect();
    let Ok(mut d) = zstd::bulk::Decompressor::new() else {
        return StageProbe::failed(Stage::Decompress, "zstd is not available");
    };
    let (bytes, secs) =
        cpu_loop(|| packed.iter().filter_map(|(c, n)| d.decompress(c, *n).ok()).map(|v| v.len() as u64).sum());
    StageProbe::measured(
        Stage::Decompress,
        bytes,
        secs,
        threads,
        format!("zstd -{level} blocks of a {} sample, {threads} thread(s)", mib(sample.len() as u64)),
    )
}

/// Reads up to [`BYTES`] (or [`SECONDS`]) of `f` from its start with its page cache dropped;
/// returns the probe and the first [`SAMPLE`] bytes read.
fn read_probe(f: &File, name: &str, bs: usize) -> (StageProbe, Vec<u8>) {
    let dropped = wanperf_sys::fs::drop_cache(f).is_ok();
    let how = if on_tmpfs(f) {
        "on tmpfs: from memory".to_string()
    } else if dropped {
        "page cache dropped".to_string()
    } else {
        "page cache could not be dropped".to_string()
    };
    let mut buf = vec![0u8; bs];
    let mut sample = Vec::new();
    let t0 = Instant::now();
    let mut off = 0u64;
    while off < BYTES && t0.elapsed().as_secs_f64() < SECONDS {
        match f.read_at(&mut buf, off) {
            Ok(0) => break,
            Ok(n) => {
                if sample.len() < SAMPLE {
                    sample.extend_from_slice(&buf[..n.min(SAMPLE - sample.len())]);
                }
                off += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (StageProbe::failed(Stage::Read, format!("reading `{name}`: {e}")), sample),
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    (StageProbe::measured(Stage::Read, off, secs, 1, format!("{} of `{name}`, {how}", mib(off))), sample)
}

/// The index of the largest file among `entries`.
pub fn largest_file(entries: &[Entry]) -> Option<usize> {
    entries.iter().enumerate().filter(|(_, e)| e.kind == Kind::File).max_by_key(|(_, e)| e.size).map(|(i, _)| i)
}

/// The sender's ceilings: disk read of the largest source file, hashing, and compression
/// when the copy compresses.
pub fn sender(spec: &CopySpec, entries: &[Entry], sources: &[Source], threads: u32) -> Vec<StageProbe> {
    let bs = spec.block_size as usize;
    let mut out = Vec::new();
    let mut sample = Vec::new();
    match largest_file(entries).map(|i| (&entries[i], sources[i].open())) {
        Some((e, Ok(f))) => {
            let (p, s) = read_probe(&f, e.path.as_str(), bs);
            out.push(p);
            sample = s;
        }
        Some((e, Err(err))) => out.push(StageProbe::failed(Stage::Read, format!("cannot open `{}`: {err}", e.path))),
        None => out.push(StageProbe::failed(Stage::Read, "no file to read")),
    }
    if sample.len() < bs {
        sample = noise(SAMPLE);
    }
    out.push(hash_probe(spec.hash, Stage::Hash, &sample, bs, threads));
    if let Some(level) = spec.compress.level() {
        out.push(compress_probe(&sample, bs, level, threads));
    }
    out
}

/// The receiver's ceilings: disk write of a scratch file in `dir` (where the copy wrote),
/// verification, and decompression of a sample of `largest` (a file it received) when the
/// copy compresses.
pub fn receiver(spec: &CopySpec, dir: &OwnedFd, largest: Option<File>, threads: u32) -> Vec<StageProbe> {
    let bs = spec.block_size as usize;
    let mut out = vec![write_probe(spec, dir)];
    let mut sample = Vec::new();
    if let Some(f) = largest {
        // What could be read of its head (a short read is a smaller sample).
        let _ = f.take(SAMPLE as u64).read_to_end(&mut sample);
    }
    let real = sample.len() >= bs;
    if !real {
        sample = noise(SAMPLE);
    }
    out.push(hash_probe(spec.hash, Stage::Verify, &sample, bs, threads));
    if let Some(level) = spec.compress.level() {
        let mut p = decompress_probe(&sample, bs, level, threads);
        if !real {
            p.how += " (random bytes: no file received to sample)";
        }
        out.push(p);
    }
    out
}

/// Writes up to [`BYTES`] (or [`SECONDS`]) into a scratch file in `dir` and flushes it as the
/// copy would, then removes it.
fn write_probe(spec: &CopySpec, dir: &OwnedFd) -> StageProbe {
    let bs = spec.block_size as usize;
    let name = format!(".wanperf-probe.{}", std::process::id());
    let base = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC;
    let (f, direct) = match spec.direct.then(|| copy_fs::openat(dir, &name, base | libc::O_DIRECT, 0o600)) {
        Some(Ok(fd)) => (Ok(fd), true),
        _ => (copy_fs::openat(dir, &name, base, 0o600), false),
    };
    let f = match f {
        Ok(fd) => File::from(fd),
        Err(e) => return StageProbe::failed(Stage::Write, format!("cannot create a scratch file: {e}")),
    };
    // O_DIRECT wants buffers aligned to the logical block: the copy's own aligned buffer.
    let mut aligned = Aligned::new(bs);
    aligned.as_mut().copy_from_slice(&noise(bs));
    let block = aligned.as_ref();
    let t0 = Instant::now();
    let mut off = 0u64;
    let mut res = Ok(());
    while off < BYTES && t0.elapsed().as_secs_f64() < SECONDS {
        if let Err(e) = f.write_all_at(block, off) {
            res = Err(e);
            break;
        }
        off += bs as u64;
    }
    if res.is_ok() && spec.fsync {
        // fdatasync(2).
        if let Err(e) = f.sync_data() {
            res = Err(e);
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    drop(f);
    let _ = copy_fs::unlink_at(dir, &name);
    if let Err(e) = res {
        return StageProbe::failed(Stage::Write, format!("writing a scratch file: {e}"));
    }
    let mut how = vec![format!("{} to a scratch file", mib(off))];
    if spec.fsync {
        how.push("fdatasync".into());
    }
    if direct {
        how.push("O_DIRECT".into());
    }
    if on_tmpfs(dir) {
        how.push("on tmpfs".into());
    }
    StageProbe::measured(Stage::Write, off, secs, 1, how.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wanperf_copy::paths::RelPath;
    use wanperf_copy::spec::{Compress, Way};

    fn spec(compress: Compress) -> CopySpec {
        CopySpec {
            way: Way::Push,
            remote: vec![RelPath::parse("x").unwrap()],
            block_size: 1 << 20,
            compress,
            force: false,
            direct: false,
            fsync: true,
            probe: true,
            hash: HashKind::Blake3,
            dest_names_source: false,
        }
    }

    #[test]
    fn each_end_measures_its_stages_and_leaves_nothing_behind() {
        let dir = std::env::temp_dir().join(format!("wanperf-probe-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("big"), noise(8 << 20)).unwrap();
        let scan = copy_fs::scan_local(&[dir.join("big")]).unwrap();
        let s = spec(Compress::Zstd(1));
        let sent = sender(&s, &scan.entries, &scan.sources, 2);
        let stages: Vec<Stage> = sent.iter().map(|p| p.stage).collect();
        assert_eq!(stages, [Stage::Read, Stage::Hash, Stage::Compress]);
        assert_eq!(sent[0].bytes, 8 << 20, "{:?}", sent[0]);
        assert!(sent.iter().all(|p| p.rate_bytes_s.is_some_and(|r| r > 0.0)), "{sent:?}");
        assert!(sent[0].how.contains("`big`"), "{:?}", sent[0]);
        assert_eq!(sent[1].threads, 2);
        let base = copy_fs::open_base(&dir).unwrap();
        let got = receiver(&s, &base, File::open(dir.join("big")).ok(), 2);
        let stages: Vec<Stage> = got.iter().map(|p| p.stage).collect();
        assert_eq!(stages, [Stage::Write, Stage::Verify, Stage::Decompress]);
        assert!(got.iter().all(|p| p.rate_bytes_s.is_some_and(|r| r > 0.0)), "{got:?}");
        assert!(got[0].how.contains("fdatasync"), "{:?}", got[0]);
        // The scratch file is gone; only the source is left.
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, ["big"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_probe_that_cannot_run_says_why() {
        let s = spec(Compress::Off);
        let dir = std::env::temp_dir().join(format!("wanperf-probe-ro-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let base = copy_fs::open_base(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        // The directory is gone: the scratch file cannot be made.
        let got = receiver(&s, &base, None, 1);
        assert_eq!(got[0].stage, Stage::Write);
        assert!(got[0].rate_bytes_s.is_none() && got[0].how.contains("cannot create"), "{:?}", got[0]);
        assert_eq!(got.len(), 2, "no decompression without compression: {got:?}");
        let none = sender(&s, &[], &[], 1);
        assert!(none[0].rate_bytes_s.is_none() && none[0].how.contains("no file"), "{none:?}");
    }
}
