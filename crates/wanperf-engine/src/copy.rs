//! `wanperf copy`'s I/O shell: the two ends of a copy as pipelines of threads with bounded
//! queues, each stage timing its work and its waits (the verdict's evidence).
//!
//! Sender: read (1 thread) → hash + compress (`prep` threads) → send (one per data
//! connection). Receiver: receive (one per data connection) → decompress + verify (`prep`
//! threads) → write (1 thread: partial file, journal, durable, rename). The control
//! connection carries the manifest, the receiver's wants, resend requests and completions
//! ([`CopyMsg`]); the session loops hand messages in with `on_msg` and take them out through
//! the [`Notify`] callback.

use crate::copy_fs::{self, Aligned, Source};
use crate::stream::{Conn, Counters, StreamPlan, Worker};
use crate::sys;
use crossbeam_channel::{bounded, unbounded, Receiver, RecvTimeoutError, Sender};
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use wanperf_copy::auto::Auto;
use wanperf_copy::blocks;
use wanperf_copy::frame::{BlockHeader, HEADER_LEN};
use wanperf_copy::journal::{self, Journal};
use wanperf_copy::paths::{journal_name, partial_name, RelPath};
use wanperf_copy::spec::{
    Compress, CopyMsg, CopyReport, CopySpec, Done, Entry, FileRecord, HashKind, Kind, Stage, StageStat, Want,
    MANIFEST_CHUNK,
};

/// What a copy tells its session loop.
#[derive(Debug, Clone)]
pub enum CopyEvent {
    /// Send this to the peer.
    Msg(CopyMsg),
    /// The copy cannot go on: abort the test with this line.
    Failed(String),
    /// A data connection broke. The peer usually stopped for a reason it is sending on the
    /// control connection, so the session waits up to [`LOST_GRACE`] for that reason and
    /// reports this line only if none comes.
    Lost(String),
    /// A file is done (or was already there).
    File(FileRecord),
}

/// How long a session waits for the peer's reason after a data connection broke.
pub const LOST_GRACE: Duration = Duration::from_secs(2);

/// A broken data connection held back for [`LOST_GRACE`] while the peer's reason may come:
/// both session loops keep one.
#[derive(Debug, Default)]
pub struct LostGrace(Option<(Instant, String)>);

impl LostGrace {
    /// A data connection broke at `now` (the first one counts).
    pub fn note(&mut self, now: Instant, why: String) {
        self.0.get_or_insert((now + LOST_GRACE, why));
    }
    /// The line to report once the grace has passed with no reason from the peer.
    pub fn due(&mut self, now: Instant) -> Option<String> {
        if self.0.as_ref().is_some_and(|(at, _)| now >= *at) {
            return self.0.take().map(|(_, why)| why);
        }
        None
    }
    /// `wait`, shortened to end when the grace does.
    pub fn wait(&self, wait: Duration, now: Instant) -> Duration {
        self.0.as_ref().map_or(wait, |(at, _)| wait.min(at.saturating_duration_since(now)))
    }
}

/// Where a copy's events go (called from its threads).
pub type Notify = Arc<dyn Fn(CopyEvent) + Send + Sync>;

/// Test hooks, from the environment: a slow source disk (`WANPERF_TEST_READ_RATE`, bytes/s),
/// a slow sink (`WANPERF_TEST_WRITE_RATE`), and one corrupted block on the wire
/// (`WANPERF_TEST_CORRUPT_BLOCK=N`: the sender flips a byte of its N-th block after hashing).
#[derive(Debug, Clone, Default)]
pub struct Hooks {
    /// Reader pace, bytes/s.
    pub read_bps: Option<f64>,
    /// Writer pace, bytes/s.
    pub write_bps: Option<f64>,
    /// Sequence number of the block to corrupt.
    pub corrupt_block: Option<u64>,
}

impl Hooks {
    /// The hooks set in this process's environment.
    pub fn from_env() -> Hooks {
        let num = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<f64>().ok()).filter(|v| *v > 0.0);
        Hooks {
            read_bps: num("WANPERF_TEST_READ_RATE"),
            write_bps: num("WANPERF_TEST_WRITE_RATE"),
            corrupt_block: std::env::var("WANPERF_TEST_CORRUPT_BLOCK").ok().and_then(|v| v.parse().ok()),
        }
    }
}

/// Paces a stage to a rate (a test hook's slow device): the sleep is the device's time.
struct Pacer {
    rate: f64,
    t0: Instant,
    bytes: f64,
}

impl Pacer {
    fn new(rate: Option<f64>) -> Option<Pacer> {
        rate.map(|rate| Pacer { rate, t0: Instant::now(), bytes: 0.0 })
    }
    fn pace(&mut self, n: usize) {
        self.bytes += n as f64;
        let due = self.t0 + Duration::from_secs_f64(self.bytes / self.rate);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
    }
}

/// One stage's time accounting, shared by its threads.
#[derive(Default)]
struct Acct {
    busy_ns: AtomicU64,
    starved_ns: AtomicU64,
    blocked_ns: AtomicU64,
    bytes: AtomicU64,
    cpu_ns: AtomicU64,
    runq_ns: AtomicU64,
    runq_known: AtomicBool,
    threads: AtomicU64,
}

fn ns(d: Duration) -> u64 {
    d.as_nanos() as u64
}

impl Acct {
    fn add(c: &AtomicU64, since: Instant) -> Instant {
        let now = Instant::now();
        c.fetch_add(ns(now - since), Ordering::Relaxed);
        now
    }
    fn busy(&self, since: Instant) -> Instant {
        Self::add(&self.busy_ns, since)
    }
    fn starved(&self, since: Instant) -> Instant {
        Self::add(&self.starved_ns, since)
    }
    fn blocked(&self, since: Instant) -> Instant {
        Self::add(&self.blocked_ns, since)
    }
    fn cpu_delta(&self, before: f64) {
        let (u, s) = sys::thread_cpu();
        self.cpu_ns.fetch_add(((u + s - before).max(0.0) * 1e9) as u64, Ordering::Relaxed);
    }
    /// Adds the calling thread's run-queue wait since `before` (from [`runq_now`]).
    fn runq_delta(&self, before: Option<u64>) {
        if let (Some(a), Some(b)) = (before, sys::thread_runq_wait_ns()) {
            self.runq_ns.fetch_add(b.saturating_sub(a), Ordering::Relaxed);
            self.runq_known.store(true, Ordering::Relaxed);
        }
    }
    fn stat(&self, stage: Stage) -> StageStat {
        let s = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64 / 1e9;
        StageStat {
            stage,
            threads: self.threads.load(Ordering::Relaxed).max(1) as u32,
            busy_s: s(&self.busy_ns),
            starved_s: s(&self.starved_ns),
            blocked_s: s(&self.blocked_ns),
            bytes: self.bytes.load(Ordering::Relaxed),
            cpu_s: Some(s(&self.cpu_ns)),
            cpu_wait_s: self.runq_known.load(Ordering::Relaxed).then(|| s(&self.runq_ns)),
        }
    }
}

fn runq_now() -> Option<u64> {
    sys::thread_runq_wait_ns()
}

fn cpu_now() -> f64 {
    let (u, s) = sys::thread_cpu();
    u + s
}

/// Threads for hashing, compression, verification: the cores, at most 4.
fn prep_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(1, 4)
}

/// How long a thread waits on a queue before it looks at the abort flag.
const POLL: Duration = Duration::from_millis(100);

fn io_err(e: io::Error, what: String) -> String {
    match e.raw_os_error() {
        Some(libc::ENOSPC) => format!("disk full on the receiver writing `{what}`: {e}"),
        Some(libc::EACCES) | Some(libc::EPERM) => format!("permission denied: `{what}`: {e}"),
        Some(libc::EDQUOT) => format!("disk quota exceeded on the receiver writing `{what}`: {e}"),
        _ => format!("`{what}`: {e}"),
    }
}

/// Everything both ends share: the failure flag and the event callback.
struct Common {
    notify: Notify,
    failed: AtomicBool,
    t0: Instant,
    first_ns: AtomicU64,
    last_ns: AtomicU64,
    ticks0: Option<(u64, u64)>,
    /// The receiver has every wanted block in place (sender: it said so).
    complete: AtomicBool,
    /// The pipeline's own threads (not the stream workers, which the `Side` owns).
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Common {
    fn new(notify: Notify) -> Common {
        Common {
            notify,
            failed: AtomicBool::new(false),
            t0: Instant::now(),
            first_ns: AtomicU64::new(u64::MAX),
            last_ns: AtomicU64::new(0),
            ticks0: sys::host_cpu_ticks(),
            complete: AtomicBool::new(false),
            threads: Mutex::new(Vec::new()),
        }
    }
    fn is_complete(&self) -> bool {
        self.complete.load(Ordering::Acquire)
    }
    /// Stops every thread.
    fn abort(&self) {
        self.failed.store(true, Ordering::Release);
    }
    /// Waits for the pipeline's threads (stopping them first unless the copy completed).
    fn join(&self) {
        if !self.is_complete() {
            self.abort();
        }
        for t in self.threads.lock().expect("threads").drain(..) {
            let _ = t.join();
        }
    }
    fn host_busy(&self) -> Option<f64> {
        sys::host_busy_between(self.ticks0?, sys::host_cpu_ticks()?)
    }
    fn fail(&self, why: String) {
        if !self.failed.swap(true, Ordering::AcqRel) {
            (self.notify)(CopyEvent::Failed(why));
        }
    }
    /// Like `fail`, for a broken data connection (see [`CopyEvent::Lost`]).
    fn lost(&self, why: String) {
        if !self.failed.swap(true, Ordering::AcqRel) {
            (self.notify)(CopyEvent::Lost(why));
        }
    }
    fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }
    fn mark(&self) {
        let t = ns(self.t0.elapsed());
        self.first_ns.fetch_min(t, Ordering::Relaxed);
        self.last_ns.fetch_max(t, Ordering::Relaxed);
    }
    fn wall_s(&self) -> f64 {
        let a = self.first_ns.load(Ordering::Relaxed);
        let b = self.last_ns.load(Ordering::Relaxed);
        if a == u64::MAX || b <= a {
            0.0
        } else {
            (b - a) as f64 / 1e9
        }
    }
}

/// What both ends count for their reports.
#[derive(Default)]
struct Tallies {
    files: AtomicU64,
    bytes: AtomicU64,
    wire: AtomicU64,
    resent: AtomicU64,
    skipped: AtomicU64,
    resumed: AtomicU64,
}

impl Tallies {
    fn report(&self, c: &Common, stages: Vec<StageStat>, compression: String, direct: bool) -> CopyReport {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CopyReport {
            wall_s: c.wall_s(),
            stages,
            files: l(&self.files),
            bytes: l(&self.bytes),
            wire_bytes: l(&self.wire),
            resent_blocks: l(&self.resent),
            skipped_files: l(&self.skipped),
            resumed_bytes: l(&self.resumed),
            compression,
            direct,
            host_cpu_busy: c.host_busy(),
            probes: Vec::new(),
        }
    }
}

// ───────────────────────────── sender ─────────────────────────────

struct Raw {
    file: u32,
    block: u64,
    /// HEADER_LEN bytes of room, then the block.
    buf: Vec<u8>,
    seq: u64,
    /// Its hash, when the reader computed it (a cheap hash, [`HashKind::cheap_block`]).
    hash: Option<[u8; 32]>,
}

struct Prepared {
    /// Header and payload, ready to write.
    buf: Vec<u8>,
    raw_len: u32,
}

struct SendShared {
    c: Common,
    spec: CopySpec,
    entries: Vec<Entry>,
    sources: Vec<Source>,
    hooks: Hooks,
    want_tx: Sender<Vec<Want>>,
    want_rx: Receiver<Vec<Want>>,
    resend_tx: Sender<(u32, u64)>,
    resend_rx: Receiver<(u32, u64)>,
    send_rx: Receiver<Prepared>,
    read: Acct,
    hash: Acct,
    compress: Acct,
    send: Acct,
    n: Tallies,
    auto: Mutex<Auto>,
}

/// The sending end of a copy.
pub struct SendJob {
    sh: Arc<SendShared>,
    send_tx: Mutex<Option<Sender<Prepared>>>,
}

impl SendJob {
    /// A sender of `scan`'s files; nothing runs before [`SendJob::start`].
    pub fn new(spec: CopySpec, scan: copy_fs::Scan, notify: Notify, hooks: Hooks) -> SendJob {
        let (want_tx, want_rx) = bounded(1);
        let (resend_tx, resend_rx) = unbounded();
        let (send_tx, send_rx) = bounded(16);
        let sh = Arc::new(SendShared {
            c: Common::new(notify),
            spec,
            entries: scan.entries,
            sources: scan.sources,
            hooks,
            want_tx,
            want_rx,
            resend_tx,
            resend_rx,
            send_rx,
            read: Acct::default(),
            hash: Acct::default(),
            compress: Acct::default(),
            send: Acct::default(),
            n: Tallies::default(),
            auto: Mutex::new(Auto::default()),
        });
        SendJob { sh, send_tx: Mutex::new(Some(send_tx)) }
    }

    /// Total bytes of the manifest's files.
    pub fn total_bytes(&self) -> u64 {
        self.sh.entries.iter().map(|e| e.size).sum()
    }

    /// Announces the manifest and starts the reader and prep threads; returns the stream
    /// worker for the data connections.
    pub fn start(&self) -> Worker {
        let sh = &self.sh;
        let send_tx = self.send_tx.lock().expect("send_tx").take().expect("started once");
        let n = sh.entries.len();
        let mut first = 0usize;
        loop {
            let end = (first + MANIFEST_CHUNK).min(n);
            (sh.c.notify)(CopyEvent::Msg(CopyMsg::Manifest {
                first: first as u32,
                entries: sh.entries[first..end].to_vec(),
                last: end == n,
            }));
            if end == n {
                break;
            }
            first = end;
        }
        let (prep_tx, prep_rx) = bounded::<Raw>(8);
        let mut threads = sh.c.threads.lock().expect("threads");
        let s = sh.clone();
        threads.push(std::thread::spawn(move || reader(&s, prep_tx)));
        sh.read.threads.store(1, Ordering::Relaxed);
        let k = prep_threads();
        // A cheap hash is the reader's (one thread), BLAKE3 the preparing threads'.
        let hashers = if sh.spec.hash.cheap() { 1 } else { k };
        sh.hash.threads.store(hashers as u64, Ordering::Relaxed);
        sh.compress.threads.store(k as u64, Ordering::Relaxed);
        for _ in 0..k {
            let (s, rx, tx) = (sh.clone(), prep_rx.clone(), send_tx.clone());
            threads.push(std::thread::spawn(move || prep_send(&s, rx, tx)));
        }
        drop(send_tx);
        let s = sh.clone();
        Arc::new(move |_p: &StreamPlan, conn: Conn, c: &Counters, stop: &AtomicBool, start: Instant| {
            s.send.threads.fetch_add(1, Ordering::Relaxed);
            send_worker(&s, conn, c, stop, start)
        })
    }

    /// A copy message from the receiver.
    pub fn on_msg(&self, m: CopyMsg) {
        let sh = &self.sh;
        match m {
            CopyMsg::Want { wants, resumed_bytes, skipped } => {
                sh.n.resumed.store(resumed_bytes, Ordering::Relaxed);
                sh.n.skipped.store(u64::from(skipped), Ordering::Relaxed);
                if wants.iter().any(|w| w.file as usize >= sh.entries.len()) {
                    sh.c.fail("the receiver asked for a file the manifest does not have".into());
                    return;
                }
                let _ = sh.want_tx.try_send(wants);
            }
            CopyMsg::Resend { file, block } => {
                let ok =
                    sh.entries.get(file as usize).is_some_and(|e| block < blocks::count(e.size, sh.spec.block_size));
                if ok {
                    sh.n.resent.fetch_add(1, Ordering::Relaxed);
                    let _ = sh.resend_tx.send((file, block));
                } else {
                    sh.c.fail("the receiver asked again for a block that does not exist".into());
                }
            }
            CopyMsg::Done { files } => {
                for d in files {
                    if let Some(e) = sh.entries.get(d.file as usize) {
                        sh.n.files.fetch_add(1, Ordering::Relaxed);
                        (sh.c.notify)(CopyEvent::File(FileRecord::new(e, sh.spec.hash, d.hash, false)));
                    }
                }
            }
            CopyMsg::Complete => sh.c.complete.store(true, Ordering::Release),
            CopyMsg::Manifest { .. } => sh.c.fail("the receiver sent a manifest".into()),
        }
    }

    /// Waits for the internal threads and reports.
    pub fn report(&self) -> CopyReport {
        let sh = &self.sh;
        sh.c.join();
        let auto = sh.auto.lock().expect("auto");
        let compression = match sh.spec.compress {
            Compress::Auto(l) => format!("auto (zstd -{l}): {}, ratio {:.2}", auto.describe(), auto.ratio()),
            c => c.describe(),
        };
        let stages = vec![
            sh.read.stat(Stage::Read),
            sh.compress.stat(Stage::Compress),
            sh.hash.stat(Stage::Hash),
            sh.send.stat(Stage::Send),
        ];
        sh.n.report(&sh.c, stages, compression, false)
    }
}

fn reader(sh: &Arc<SendShared>, prep_tx: Sender<Raw>) {
    let cpu0 = cpu_now();
    let rq0 = runq_now();
    let wants = loop {
        match sh.want_rx.recv_timeout(POLL) {
            Ok(w) => break w,
            Err(RecvTimeoutError::Timeout) if !sh.c.failed() => {}
            Err(_) => return,
        }
    };
    let bs = sh.spec.block_size;
    let mut pacer = Pacer::new(sh.hooks.read_bps);
    let mut open: Option<(u32, File)> = None;
    let mut seq = 0u64;
    // CPU time of the hashing done here (a cheap hash), the hash stage's and not the read's.
    let hash_cpu = std::cell::Cell::new(0.0);
    let mut read_block = |file: u32, block: u64, check_end: bool, seq: u64| -> Result<Raw, String> {
        let e = &sh.entries[file as usize];
        let t = Instant::now();
        if open.as_ref().map(|o| o.0) != Some(file) {
            let f = sh.sources[file as usize].open().map_err(|err| format!("cannot read `{}`: {err}", e.path))?;
            if !copy_fs::as_listed(&f, e).map_err(|err| err.to_string())? {
                return Err(format!("`{}` changed after it was listed; copy it again", e.path));
            }
            open = Some((file, f));
        }
        let f = &open.as_ref().expect("opened").1;
        let len = blocks::len(e.size, bs, block) as usize;
        let mut buf = vec![0u8; HEADER_LEN + len];
        let off = block * u64::from(bs);
        f.read_exact_at(&mut buf[HEADER_LEN..], off).map_err(|err| format!("cannot read `{}`: {err}", e.path))?;
        if let Some(p) = pacer.as_mut() {
            p.pace(len);
        }
        if check_end {
            // The last block read: a file that changed while it was read is refused before
            // the block that would complete it leaves.
            if !copy_fs::as_listed(f, e).map_err(|err| err.to_string())? {
                return Err(format!("`{}` changed while it was read; copy it again", e.path));
            }
        }
        sh.read.bytes.fetch_add(len as u64, Ordering::Relaxed);
        let t = sh.read.busy(t);
        // (The thread's CPU clock is read only around a hash computed here.)
        let hash = if sh.spec.hash.cheap() {
            let c0 = cpu_now();
            let hash = sh.spec.hash.cheap_block(&buf[HEADER_LEN..], block);
            sh.hash.bytes.fetch_add(len as u64, Ordering::Relaxed);
            sh.hash.busy(t);
            hash_cpu.set(hash_cpu.get() + cpu_now() - c0);
            hash
        } else {
            None
        };
        Ok(Raw { file, block, buf, seq, hash })
    };
    let push = |raw: Raw| -> bool {
        let t = Instant::now();
        let mut raw = raw;
        loop {
            match prep_tx.send_timeout(raw, POLL) {
                Ok(()) => {
                    sh.read.blocked(t);
                    return true;
                }
                Err(crossbeam_channel::SendTimeoutError::Timeout(r)) if !sh.c.failed() => raw = r,
                Err(_) => return false,
            }
        }
    };
    'plan: for w in &wants {
        let last_range = w.ranges.last().copied();
        for &(a, b) in &w.ranges {
            for block in a..b {
                while let Ok((f, bl)) = sh.resend_rx.try_recv() {
                    match read_block(f, bl, false, u64::MAX) {
                        Ok(r) => {
                            if !push(r) {
                                break 'plan;
                            }
                        }
                        Err(e) => {
                            sh.c.fail(e);
                            break 'plan;
                        }
                    }
                }
                let end = Some((a, b)) == last_range && block + 1 == b;
                match read_block(w.file, block, end, seq) {
                    Ok(r) => {
                        seq += 1;
                        if !push(r) {
                            break 'plan;
                        }
                    }
                    Err(e) => {
                        sh.c.fail(e);
                        break 'plan;
                    }
                }
            }
        }
    }
    // Everything planned is read; answer resends until the receiver says it is complete.
    let t = Instant::now();
    while !sh.c.failed() && !sh.c.is_complete() {
        match sh.resend_rx.recv_timeout(Duration::from_millis(20)) {
            Ok((f, bl)) => match read_block(f, bl, false, u64::MAX) {
                Ok(r) => {
                    if !push(r) {
                        break;
                    }
                }
                Err(e) => sh.c.fail(e),
            },
            Err(RecvTimeoutError::Timeout) => {}
            Err(_) => break,
        }
    }
    sh.read.starved(t);
    sh.read.cpu_delta(cpu0 + hash_cpu.get());
    sh.hash.cpu_ns.fetch_add((hash_cpu.get() * 1e9) as u64, Ordering::Relaxed);
    sh.read.runq_delta(rq0);
}

fn prep_send(sh: &Arc<SendShared>, rx: Receiver<Raw>, tx: Sender<Prepared>) {
    let cpu0 = cpu_now();
    let rq0 = runq_now();
    // Compression's CPU is measured around each compression; the rest of these threads'
    // CPU is hashing's (and the queues').
    let mut comp_cpu = 0.0;
    let bs = sh.spec.block_size;
    let mut zc = sh.spec.compress.level().and_then(|l| zstd::bulk::Compressor::new(l).ok());
    loop {
        let t = Instant::now();
        let raw = match rx.recv_timeout(POLL) {
            Ok(r) => r,
            Err(RecvTimeoutError::Timeout) if !sh.c.failed() => {
                sh.hash.starved(t);
                continue;
            }
            Err(_) => break,
        };
        let t = sh.hash.starved(t);
        let e = &sh.entries[raw.file as usize];
        let data = &raw.buf[HEADER_LEN..];
        let hash = raw.hash.unwrap_or_else(|| {
            sh.hash.bytes.fetch_add(data.len() as u64, Ordering::Relaxed);
            sh.spec.hash.block(data, raw.block, bs, e.size)
        });
        let t = sh.hash.busy(t);
        let want_z = match sh.spec.compress {
            Compress::Off => false,
            Compress::Zstd(_) => true,
            Compress::Auto(_) => sh.auto.lock().expect("auto").compress(raw.seq),
        };
        let mut out: Option<Vec<u8>> = None;
        if want_z && !data.is_empty() {
            if let Some(z) = zc.as_mut() {
                let c0 = cpu_now();
                let mut v = vec![0u8; HEADER_LEN + data.len()];
                if let Ok(n) = z.compress_to_buffer(data, &mut v[HEADER_LEN..]) {
                    if matches!(sh.spec.compress, Compress::Auto(_)) {
                        sh.auto.lock().expect("auto").observe_ratio(data.len() as u32, n as u32);
                    }
                    if n < data.len() {
                        v.truncate(HEADER_LEN + n);
                        out = Some(v);
                    }
                } else if matches!(sh.spec.compress, Compress::Auto(_)) {
                    sh.auto.lock().expect("auto").observe_ratio(data.len() as u32, data.len() as u32);
                }
                sh.compress.bytes.fetch_add(data.len() as u64, Ordering::Relaxed);
                sh.compress.busy(t);
                comp_cpu += cpu_now() - c0;
            }
        }
        let raw_len = data.len() as u32;
        let (mut buf, zstd) = match out {
            Some(v) => (v, true),
            None => (raw.buf, false),
        };
        let wire_len = (buf.len() - HEADER_LEN) as u32;
        let h = BlockHeader { file: raw.file, block: raw.block, raw_len, wire_len, zstd, hash };
        buf[..HEADER_LEN].copy_from_slice(&h.encode());
        if sh.hooks.corrupt_block == Some(raw.seq) && buf.len() > HEADER_LEN {
            let i = HEADER_LEN + (buf.len() - HEADER_LEN) / 2;
            buf[i] ^= 0x20;
        }
        let t = Instant::now();
        let mut p = Prepared { buf, raw_len };
        loop {
            match tx.send_timeout(p, POLL) {
                Ok(()) => break,
                Err(crossbeam_channel::SendTimeoutError::Timeout(x)) if !sh.c.failed() => p = x,
                Err(_) => {
                    sh.hash.blocked(t);
                    return;
                }
            }
        }
        sh.hash.blocked(t);
    }
    let total = cpu_now() - cpu0;
    sh.hash.cpu_ns.fetch_add(((total - comp_cpu).max(0.0) * 1e9) as u64, Ordering::Relaxed);
    sh.compress.cpu_ns.fetch_add((comp_cpu * 1e9) as u64, Ordering::Relaxed);
    sh.hash.runq_delta(rq0);
}

fn send_worker(sh: &Arc<SendShared>, conn: Conn, c: &Counters, stop: &AtomicBool, start: Instant) -> io::Result<()> {
    let Conn::Tcp(sock) = conn else {
        return Err(io::Error::other("copies run over TCP"));
    };
    let cpu0 = cpu_now();
    let rq0 = runq_now();
    let rx = sh.send_rx.clone();
    let res = loop {
        let t = Instant::now();
        match rx.recv_timeout(POLL) {
            Ok(p) => {
                let t = sh.send.starved(t);
                if let Err(e) = (&sock).write_all(&p.buf) {
                    sh.send.busy(t);
                    if !sh.c.failed() {
                        sh.c.lost(format!("data connection: {e}"));
                    }
                    break Err(e);
                }
                sh.send.busy(t);
                sh.c.mark();
                c.add(p.buf.len(), start);
                sh.send.bytes.fetch_add(u64::from(p.raw_len), Ordering::Relaxed);
                sh.n.wire.fetch_add(p.buf.len() as u64, Ordering::Relaxed);
                sh.n.bytes.fetch_add(u64::from(p.raw_len), Ordering::Relaxed);
                if matches!(sh.spec.compress, Compress::Auto(_)) {
                    let now = sh.c.t0.elapsed().as_secs_f64();
                    sh.auto.lock().expect("auto").observe_progress(now, sh.n.bytes.load(Ordering::Relaxed));
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                sh.send.starved(t);
                if stop.load(Ordering::Acquire) || sh.c.failed() {
                    break Ok(());
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                sh.send.starved(t);
                break Ok(());
            }
        }
    };
    let _ = sock.shutdown(std::net::Shutdown::Write);
    sh.send.cpu_delta(cpu0);
    sh.send.runq_delta(rq0);
    res
}

// ───────────────────────────── receiver ─────────────────────────────

struct Got {
    h: BlockHeader,
    payload: Vec<u8>,
    /// The payload's hash, when the receiving thread computed it (a cheap hash of an
    /// uncompressed block, [`HashKind::cheap_block`]).
    hash: Option<[u8; 32]>,
}

struct Verified {
    file: u32,
    block: u64,
    data: Vec<u8>,
    hash: [u8; 32],
}

/// The receiver's plan once the manifest is in.
struct Plan {
    entries: Vec<Entry>,
    /// Per file: blocks still expected (a set as a bitmap of pending blocks).
    pending: Vec<Mutex<Option<Vec<bool>>>>,
    /// Hashes of blocks the receiver already had (resume), per file.
    had: Vec<Mutex<HashMap<u64, [u8; 32]>>>,
    /// The directory each entry is written into (its parent under the base).
    parents: Vec<Arc<OwnedFd>>,
}

struct RecvShared {
    c: Common,
    spec: CopySpec,
    base: OwnedFd,
    /// The name the single source takes, when the destination names it.
    name: Option<String>,
    hooks: Hooks,
    manifest: Mutex<Vec<Entry>>,
    plan: OnceLock<Plan>,
    outstanding: AtomicU64,
    verify_tx: Sender<Got>,
    verify_rx: Receiver<Got>,
    write_tx: Sender<Verified>,
    write_rx: Receiver<Verified>,
    receive: Acct,
    verify: Acct,
    decompress: Acct,
    write: Acct,
    n: Tallies,
    direct: AtomicBool,
}

/// The receiving end of a copy.
pub struct RecvJob {
    sh: Arc<RecvShared>,
}

impl RecvJob {
    /// A receiver writing under `base` (the server's root joined with the destination, or
    /// the client's destination directory); with `name`, the single source is written as
    /// `name` there (the destination named it: [`wanperf_copy::paths::takes_dest_name`]).
    pub fn new(spec: CopySpec, base: OwnedFd, name: Option<String>, notify: Notify, hooks: Hooks) -> RecvJob {
        let (verify_tx, verify_rx) = bounded(16);
        let (write_tx, write_rx) = bounded(16);
        RecvJob {
            sh: Arc::new(RecvShared {
                c: Common::new(notify),
                spec,
                base,
                name,
                hooks,
                manifest: Mutex::new(Vec::new()),
                plan: OnceLock::new(),
                outstanding: AtomicU64::new(u64::MAX),
                verify_tx,
                verify_rx,
                write_tx,
                write_rx,
                receive: Acct::default(),
                verify: Acct::default(),
                decompress: Acct::default(),
                write: Acct::default(),
                n: Tallies::default(),
                direct: AtomicBool::new(false),
            }),
        }
    }

    /// Starts the verify and write threads; returns the stream worker.
    pub fn start(&self) -> Worker {
        let sh = &self.sh;
        let mut threads = sh.c.threads.lock().expect("threads");
        let k = prep_threads();
        // A cheap hash of uncompressed blocks is verified by the receiving threads (counted
        // as they start), anything else by the verifying threads.
        let inline = sh.spec.hash.cheap() && sh.spec.compress == Compress::Off;
        sh.verify.threads.store(if inline { 0 } else { k as u64 }, Ordering::Relaxed);
        sh.decompress.threads.store(k as u64, Ordering::Relaxed);
        sh.write.threads.store(1, Ordering::Relaxed);
        for _ in 0..k {
            let s = sh.clone();
            threads.push(std::thread::spawn(move || verifier(&s)));
        }
        let s = sh.clone();
        threads.push(std::thread::spawn(move || writer(&s)));
        let s = sh.clone();
        Arc::new(move |_p: &StreamPlan, conn: Conn, c: &Counters, _stop: &AtomicBool, start: Instant| {
            s.receive.threads.fetch_add(1, Ordering::Relaxed);
            if inline {
                s.verify.threads.fetch_add(1, Ordering::Relaxed);
            }
            recv_worker(&s, conn, c, start)
        })
    }

    /// A copy message from the sender.
    pub fn on_msg(&self, m: CopyMsg) {
        let sh = &self.sh;
        match m {
            CopyMsg::Manifest { first, entries, last } => {
                let mut man = sh.manifest.lock().expect("manifest");
                if first as usize != man.len() || sh.plan.get().is_some() {
                    drop(man);
                    sh.c.fail("the manifest arrived out of order".into());
                    return;
                }
                man.extend(entries);
                if last {
                    let entries = std::mem::take(&mut *man);
                    drop(man);
                    let entries = match &sh.name {
                        None => entries,
                        Some(name) => match renamed(entries, name) {
                            Ok(e) => e,
                            Err(why) => return sh.c.fail(why),
                        },
                    };
                    let s = sh.clone();
                    sh.c.threads.lock().expect("threads").push(std::thread::spawn(move || {
                        if let Err(e) = setup(&s, entries) {
                            s.c.fail(e);
                        }
                    }));
                }
            }
            other => sh.c.fail(format!("the sender sent a receiver's message ({other:?})")),
        }
    }

    /// Waits for the internal threads and reports.
    pub fn report(&self) -> CopyReport {
        let sh = &self.sh;
        sh.c.join();
        let stages = vec![
            sh.receive.stat(Stage::Receive),
            sh.decompress.stat(Stage::Decompress),
            sh.verify.stat(Stage::Verify),
            sh.write.stat(Stage::Write),
        ];
        sh.n.report(&sh.c, stages, sh.spec.compress.describe(), sh.direct.load(Ordering::Relaxed))
    }
}

/// The entries of a single source (one top-level name) written as `name` instead.
fn renamed(entries: Vec<Entry>, name: &str) -> Result<Vec<Entry>, String> {
    let top = |e: &Entry| e.path.components().next().map(str::to_string);
    let first = entries.first().and_then(top);
    if entries.iter().any(|e| top(e) != first) {
        return Err("the destination names one source, but the sender sent several".into());
    }
    entries
        .into_iter()
        .map(|mut e| {
            e.path = e.path.renamed_top(name).map_err(|err| err.to_string())?;
            Ok(e)
        })
        .collect()
}

/// Directories, skips, resume: decides what to ask for, and asks.
fn setup(sh: &Arc<RecvShared>, entries: Vec<Entry>) -> Result<(), String> {
    let bs = sh.spec.block_size;
    let mut dirs: HashMap<RelPath, Arc<OwnedFd>> = HashMap::new();
    dirs.insert(RelPath::root(), Arc::new(sh.base.try_clone().map_err(|e| e.to_string())?));
    let mut wants = Vec::new();
    let mut pending = Vec::with_capacity(entries.len());
    let mut had = Vec::with_capacity(entries.len());
    let mut parents = Vec::with_capacity(entries.len());
    let (mut resumed, mut skipped, mut outstanding) = (0u64, 0u32, 0u64);
    let mut done_now: Vec<(u32, [u8; 32])> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let parent = e.path.parent();
        if !dirs.contains_key(&parent) {
            let d = copy_fs::open_dir(&sh.base, &parent, true).map_err(|err| io_err(err, parent.to_string()))?;
            dirs.insert(parent.clone(), Arc::new(d));
        }
        let dir = dirs[&parent].clone();
        let name = e.path.file_name().to_string();
        let mut have: HashMap<u64, [u8; 32]> = HashMap::new();
        let mut pend: Option<Vec<bool>> = None;
        match e.kind {
            Kind::Dir => {
                let d = copy_fs::open_dir(&sh.base, &e.path, true).map_err(|err| io_err(err, e.path.to_string()))?;
                dirs.insert(e.path.clone(), Arc::new(d));
            }
            Kind::File => {
                let st = copy_fs::stat_at(&dir, &name).ok();
                if let Some(st) = st {
                    if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
                        return Err(format!("`{}` exists as a directory on the receiver", e.path));
                    }
                }
                let same = st.is_some_and(|st| {
                    st.st_mode & libc::S_IFMT == libc::S_IFREG
                        && st.st_size as u64 == e.size
                        && copy_fs::mtime_ns(&st) == e.mtime_ns
                });
                if same && !sh.spec.force {
                    skipped += 1;
                    (sh.c.notify)(CopyEvent::File(FileRecord::new(e, sh.spec.hash, String::new(), true)));
                } else {
                    let count = blocks::count(e.size, bs);
                    if count > 1 {
                        have = resume(&dir, &name, e, bs, sh.spec.hash);
                        resumed += have.keys().map(|&b| u64::from(blocks::len(e.size, bs, b))).sum::<u64>();
                    } else {
                        let _ = copy_fs::unlink_at(&dir, &partial_name(&name));
                    }
                    let ranges = journal::missing_ranges(count, |b| have.contains_key(&b));
                    let missing: u64 = ranges.iter().map(|(a, b)| b - a).sum();
                    if missing == 0 {
                        // Empty, or every block already there: complete it now.
                        let mut hs = Vec::with_capacity(count as usize);
                        for b in 0..count {
                            hs.push(have[&b]);
                        }
                        let h = sh.spec.hash.file(&hs, e.size, bs);
                        finalize_file(sh, &dir, &name, e, count > 1, None)
                            .map_err(|err| io_err(err, e.path.to_string()))?;
                        done_now.push((i as u32, h));
                    } else {
                        let mut p = vec![false; count as usize];
                        for &(a, b) in &ranges {
                            for x in a..b {
                                p[x as usize] = true;
                            }
                        }
                        pend = Some(p);
                        outstanding += missing;
                        wants.push(Want { file: i as u32, ranges });
                    }
                }
            }
        }
        pending.push(Mutex::new(pend));
        had.push(Mutex::new(have));
        parents.push(dir);
    }
    if sh.spec.fsync && !done_now.is_empty() {
        copy_fs::syncfs(&sh.base).map_err(|e| format!("cannot make files durable: {e}"))?;
    }
    sh.n.resumed.store(resumed, Ordering::Relaxed);
    sh.n.skipped.store(u64::from(skipped), Ordering::Relaxed);
    let done: Vec<Done> = done_now
        .iter()
        .map(|(f, h)| {
            let e = &entries[*f as usize];
            (sh.c.notify)(CopyEvent::File(FileRecord::new(e, sh.spec.hash, sh.spec.hash.hex(h), false)));
            sh.n.files.fetch_add(1, Ordering::Relaxed);
            Done { file: *f, hash: sh.spec.hash.hex(h) }
        })
        .collect();
    if sh.plan.set(Plan { entries, pending, had, parents }).is_err() {
        return Err("the manifest arrived twice".into());
    }
    sh.outstanding.store(outstanding, Ordering::Release);
    (sh.c.notify)(CopyEvent::Msg(CopyMsg::Want { wants, resumed_bytes: resumed, skipped }));
    if !done.is_empty() {
        (sh.c.notify)(CopyEvent::Msg(CopyMsg::Done { files: done }));
    }
    if outstanding == 0 {
        sh.c.complete.store(true, Ordering::Release);
        (sh.c.notify)(CopyEvent::Msg(CopyMsg::Complete));
    }
    Ok(())
}

/// Blocks of `name`'s partial file that its journal records and that still hash right.
fn resume(dir: &OwnedFd, name: &str, e: &Entry, bs: u32, kind: HashKind) -> HashMap<u64, [u8; 32]> {
    let mut have = HashMap::new();
    let jn = journal_name(name);
    let pn = partial_name(name);
    let j = copy_fs::openat(dir, &jn, libc::O_RDONLY, 0).ok().and_then(|fd| {
        let mut v = Vec::new();
        File::from(fd).read_to_end(&mut v).ok()?;
        Journal::parse(&v)
    });
    let part = copy_fs::openat(dir, &pn, libc::O_RDONLY, 0).ok().map(File::from);
    match (j, part) {
        (Some(j), Some(part)) if j.matches(e.size, e.mtime_ns, bs) => {
            let mut buf = vec![0u8; bs as usize];
            for (&b, h) in &j.blocks {
                let len = blocks::len(e.size, bs, b) as usize;
                if part.read_exact_at(&mut buf[..len], b * u64::from(bs)).is_ok()
                    && kind.block(&buf[..len], b, bs, e.size) == *h
                {
                    have.insert(b, *h);
                }
            }
        }
        _ => {
            let _ = copy_fs::unlink_at(dir, &pn);
            let _ = copy_fs::unlink_at(dir, &jn);
        }
    }
    have
}

/// Puts a completed file in place: durable if asked, mode and time set, renamed, journal gone.
/// `part` is the open partial file (None: open it, or create it empty).
fn finalize_file(
    sh: &RecvShared,
    dir: &OwnedFd,
    name: &str,
    e: &Entry,
    journalled: bool,
    part: Option<&File>,
) -> io::Result<()> {
    let pn = partial_name(name);
    let owned;
    let f = match part {
        Some(f) => f,
        None => {
            owned = File::from(copy_fs::openat(dir, &pn, libc::O_WRONLY | libc::O_CREAT, 0o600)?);
            &owned
        }
    };
    if sh.spec.fsync && journalled {
        f.sync_data()?;
    }
    copy_fs::set_meta(f, e.mode, e.mtime_ns)?;
    copy_fs::rename_at(dir, &pn, name)?;
    if journalled {
        copy_fs::unlink_at(dir, &journal_name(name))?;
    }
    Ok(())
}

fn recv_worker(sh: &Arc<RecvShared>, conn: Conn, c: &Counters, start: Instant) -> io::Result<()> {
    let Conn::Tcp(sock) = conn else {
        return Err(io::Error::other("copies run over TCP"));
    };
    let cpu0 = cpu_now();
    let rq0 = runq_now();
    let mut r = &sock;
    let mut vcpu = 0.0;
    let res = loop {
        let mut hb = [0u8; HEADER_LEN];
        let t = Instant::now();
        // A clean end: EOF before a header's first byte.
        let mut got = 0;
        let mut eof = false;
        while got < HEADER_LEN {
            match r.read(&mut hb[got..]) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        if eof {
            sh.receive.busy(t);
            if got == 0 {
                break Ok(());
            }
            break Err(io::Error::new(io::ErrorKind::UnexpectedEof, "data connection ended inside a block"));
        }
        if got < HEADER_LEN {
            break Err(io::Error::other("data connection failed"));
        }
        let h = match BlockHeader::decode(&hb) {
            Ok(h) => h,
            Err(e) => {
                sh.c.fail(e.to_string());
                break Err(io::Error::other(e.to_string()));
            }
        };
        // The copy's time runs from the first block's first bytes: with many streams, their
        // first blocks cross together, and the first one complete arrives late in the copy
        // (measured: 8 MiB over 10 streams at 27 Mbit/s timed at 1.95 s, 34 Mbit/s).
        sh.c.mark();
        let mut payload = vec![0u8; h.wire_len as usize];
        if let Err(e) = r.read_exact(&mut payload) {
            sh.receive.busy(t);
            break Err(e);
        }
        let t = sh.receive.busy(t);
        sh.c.mark();
        let n = HEADER_LEN + payload.len();
        c.add(n, start);
        sh.receive.bytes.fetch_add(n as u64, Ordering::Relaxed);
        sh.n.wire.fetch_add(n as u64, Ordering::Relaxed);
        // A cheap hash is verified here, while the block is in this core's cache.
        let (hash, t) = if !h.zstd && sh.spec.hash.cheap() {
            let c0 = cpu_now();
            let hash = sh.spec.hash.cheap_block(&payload, h.block);
            sh.verify.bytes.fetch_add(payload.len() as u64, Ordering::Relaxed);
            vcpu += cpu_now() - c0;
            (hash, sh.verify.busy(t))
        } else {
            (None, t)
        };
        let mut g = Got { h, payload, hash };
        let sent = loop {
            match sh.verify_tx.send_timeout(g, POLL) {
                Ok(()) => break true,
                Err(crossbeam_channel::SendTimeoutError::Timeout(x)) if !sh.c.failed() => g = x,
                Err(_) => break false,
            }
        };
        sh.receive.blocked(t);
        if !sent {
            break Ok(());
        }
    };
    sh.receive.cpu_delta(cpu0 + vcpu);
    sh.verify.cpu_ns.fetch_add((vcpu * 1e9) as u64, Ordering::Relaxed);
    sh.receive.runq_delta(rq0);
    if res.is_err() && !sh.c.is_complete() && !sh.c.failed() {
        // The sender vanished mid-copy: keep what is written (the journal resumes it).
        sh.c.lost("the sender's data connection ended before the copy was complete".into());
    }
    res
}

fn verifier(sh: &Arc<RecvShared>) {
    let cpu0 = cpu_now();
    let rq0 = runq_now();
    let mut dz = zstd::bulk::Decompressor::new().ok();
    // Decompression's CPU is measured around each decompression; the rest is verification's.
    let mut dcpu = 0.0;
    let bs = sh.spec.block_size;
    loop {
        let t = Instant::now();
        let g = match sh.verify_rx.recv_timeout(POLL) {
            Ok(g) => g,
            Err(RecvTimeoutError::Timeout) if !sh.c.failed() && !sh.c.is_complete() => {
                sh.verify.starved(t);
                continue;
            }
            Err(_) => break,
        };
        let mut t = sh.verify.starved(t);
        let Some(plan) = sh.plan.get() else {
            sh.c.fail("a block arrived before the manifest".into());
            break;
        };
        let h = g.h;
        let Some(e) = plan.entries.get(h.file as usize) else {
            sh.c.fail(format!("a block for file {} which the manifest does not have", h.file));
            break;
        };
        if h.block >= blocks::count(e.size, bs) || h.raw_len != blocks::len(e.size, bs, h.block) {
            sh.c.fail(format!("a block of `{}` out of the file's bounds", e.path));
            break;
        }
        let data = if h.zstd {
            let c0 = cpu_now();
            let r = dz.as_mut().map(|d| d.decompress(&g.payload, h.raw_len as usize));
            sh.decompress.bytes.fetch_add(u64::from(h.raw_len), Ordering::Relaxed);
            t = sh.decompress.busy(t);
            dcpu += cpu_now() - c0;
            match r {
                Some(Ok(d)) if d.len() == h.raw_len as usize => Some(d),
                _ => None,
            }
        } else {
            Some(g.payload)
        };
        let ok = match (&data, g.hash) {
            (Some(_), Some(pre)) => pre == h.hash,
            (Some(d), None) => {
                sh.verify.bytes.fetch_add(u64::from(h.raw_len), Ordering::Relaxed);
                sh.spec.hash.block(d, h.block, bs, e.size) == h.hash
            }
            (None, _) => false,
        };
        t = sh.verify.busy(t);
        match data {
            Some(data) if ok => {
                let mut v = Verified { file: h.file, block: h.block, data, hash: h.hash };
                loop {
                    match sh.write_tx.send_timeout(v, POLL) {
                        Ok(()) => break,
                        Err(crossbeam_channel::SendTimeoutError::Timeout(x)) if !sh.c.failed() => v = x,
                        Err(_) => break,
                    }
                }
                sh.verify.blocked(t);
            }
            _ => {
                sh.n.resent.fetch_add(1, Ordering::Relaxed);
                (sh.c.notify)(CopyEvent::Msg(CopyMsg::Resend { file: h.file, block: h.block }));
            }
        }
    }
    let total = cpu_now() - cpu0;
    sh.verify.cpu_ns.fetch_add(((total - dcpu).max(0.0) * 1e9) as u64, Ordering::Relaxed);
    sh.decompress.cpu_ns.fetch_add((dcpu * 1e9) as u64, Ordering::Relaxed);
    sh.verify.runq_delta(rq0);
}

struct OpenFile {
    f: File,
    journal: Option<File>,
    hashes: Vec<Option<[u8; 32]>>,
    left: u64,
    direct: bool,
    /// The aligned buffer O_DIRECT writes go through, reused block after block.
    scratch: Option<Aligned>,
}

/// Most small files that wait for one syncfs before their renames.
const BATCH_FILES: usize = 1024;
/// Longest a small file waits for its batch's syncfs.
const BATCH_WAIT: Duration = Duration::from_millis(200);
/// Most completions held before they are sent to the sender.
const DONE_FILES: usize = 512;
/// Longest a completion is held.
const DONE_WAIT: Duration = Duration::from_millis(200);

/// Whether the batch of small files is made durable and named now: it is full, its oldest
/// file has waited long enough, or nothing more is coming (`left`: blocks still expected).
fn flush_due(files: usize, oldest: Option<Duration>, left: u64) -> bool {
    files >= BATCH_FILES || oldest.is_some_and(|w| w > BATCH_WAIT) || left == 0
}

/// Whether the completions held are sent now (same rule, for `Done` messages).
fn done_due(files: usize, since_last: Duration, left: u64) -> bool {
    files >= DONE_FILES || since_last > DONE_WAIT || left == 0
}

/// Small files waiting for one syncfs before their renames.
#[derive(Default)]
struct Batch {
    files: Vec<(u32, File, [u8; 32])>,
    since: Option<Instant>,
}

fn writer(sh: &Arc<RecvShared>) {
    let cpu0 = cpu_now();
    let rq0 = runq_now();
    let mut open: HashMap<u32, OpenFile> = HashMap::new();
    let mut batch = Batch::default();
    let mut done: Vec<Done> = Vec::new();
    let mut last_done = Instant::now();
    let mut pacer = Pacer::new(sh.hooks.write_bps);
    let bs = sh.spec.block_size;
    loop {
        let t = Instant::now();
        let v = match sh.write_rx.recv_timeout(Duration::from_millis(50)) {
            Ok(v) => Some(v),
            Err(RecvTimeoutError::Timeout) => None,
            Err(_) => break,
        };
        let t = sh.write.starved(t);
        if sh.c.failed() {
            break;
        }
        let Some(v) = v else {
            if let Err(e) = flush(sh, &mut batch, &mut done) {
                sh.c.fail(e);
            }
            send_done(sh, &mut done);
            if sh.c.is_complete() {
                break;
            }
            continue;
        };
        let plan = sh.plan.get().expect("blocks only after the plan");
        let e = &plan.entries[v.file as usize];
        // Only blocks still pending are written (a resent block may come twice).
        {
            let mut p = plan.pending[v.file as usize].lock().expect("pending");
            match p.as_mut().and_then(|p| p.get_mut(v.block as usize)) {
                Some(x) if *x => *x = false,
                _ => continue,
            }
        }
        let count = blocks::count(e.size, bs);
        let (parent_dir, name) = (&plan.parents[v.file as usize], e.path.file_name());
        if let std::collections::hash_map::Entry::Vacant(slot) = open.entry(v.file) {
            match open_partial(sh, parent_dir, name, e, count) {
                Ok(mut of) => {
                    let had = plan.had[v.file as usize].lock().expect("had");
                    for (&b, h) in had.iter() {
                        of.hashes[b as usize] = Some(*h);
                    }
                    of.left = count - had.len() as u64;
                    slot.insert(of);
                }
                Err(err) => {
                    sh.c.fail(io_err(err, e.path.to_string()));
                    break;
                }
            }
        }
        let of = open.get_mut(&v.file).expect("opened");
        let off = v.block * u64::from(bs);
        let w = write_block(of, &v.data, off);
        if let Err(err) = w {
            sh.c.fail(io_err(err, e.path.to_string()));
            break;
        }
        if let Some(p) = pacer.as_mut() {
            p.pace(v.data.len());
        }
        if let Some(j) = of.journal.as_mut() {
            if let Err(err) = j.write_all(&journal::record(v.block, &v.hash)) {
                sh.c.fail(io_err(err, e.path.to_string()));
                break;
            }
        }
        sh.write.bytes.fetch_add(v.data.len() as u64, Ordering::Relaxed);
        sh.n.bytes.fetch_add(v.data.len() as u64, Ordering::Relaxed);
        of.hashes[v.block as usize] = Some(v.hash);
        of.left -= 1;
        if of.left == 0 {
            let of = open.remove(&v.file).expect("open");
            let hs: Vec<[u8; 32]> = of.hashes.iter().map(|h| h.expect("every block")).collect();
            let h = sh.spec.hash.file(&hs, e.size, bs);
            if count > 1 {
                if let Err(err) = finalize_file(sh, parent_dir, name, e, true, Some(&of.f)) {
                    sh.c.fail(io_err(err, e.path.to_string()));
                    break;
                }
                sh.n.files.fetch_add(1, Ordering::Relaxed);
                (sh.c.notify)(CopyEvent::File(FileRecord::new(e, sh.spec.hash, sh.spec.hash.hex(&h), false)));
                done.push(Done { file: v.file, hash: sh.spec.hash.hex(&h) });
            } else {
                batch.since.get_or_insert_with(Instant::now);
                batch.files.push((v.file, of.f, h));
            }
        }
        sh.write.busy(t);
        sh.c.mark();
        let left = sh.outstanding.fetch_sub(1, Ordering::AcqRel) - 1;
        if flush_due(batch.files.len(), batch.since.map(|s| s.elapsed()), left) {
            let t = Instant::now();
            if let Err(e) = flush(sh, &mut batch, &mut done) {
                sh.c.fail(e);
                break;
            }
            sh.write.busy(t);
        }
        if done_due(done.len(), last_done.elapsed(), left) {
            send_done(sh, &mut done);
            last_done = Instant::now();
        }
        if left == 0 {
            // With --fsync a failure to make the last files durable fails the copy, as a batch's
            // does (`flush`): reporting it complete would be a lie.
            if sh.spec.fsync {
                if let Err(e) = copy_fs::syncfs(&sh.base) {
                    sh.c.fail(format!("cannot make files durable: {e}"));
                    break;
                }
            }
            sh.c.complete.store(true, Ordering::Release);
            (sh.c.notify)(CopyEvent::Msg(CopyMsg::Complete));
        }
    }
    sh.write.cpu_delta(cpu0);
    sh.write.runq_delta(rq0);
}

fn send_done(sh: &RecvShared, done: &mut Vec<Done>) {
    if !done.is_empty() {
        (sh.c.notify)(CopyEvent::Msg(CopyMsg::Done { files: std::mem::take(done) }));
    }
}

/// Makes a batch of small files durable with one syncfs, then gives them their names.
fn flush(sh: &RecvShared, batch: &mut Batch, done: &mut Vec<Done>) -> Result<(), String> {
    if batch.files.is_empty() {
        return Ok(());
    }
    let plan = sh.plan.get().expect("plan");
    if sh.spec.fsync {
        copy_fs::syncfs(&sh.base).map_err(|e| format!("cannot make files durable: {e}"))?;
    }
    for (file, f, h) in batch.files.drain(..) {
        let e = &plan.entries[file as usize];
        let (dir, name) = (&plan.parents[file as usize], e.path.file_name());
        copy_fs::set_meta(&f, e.mode, e.mtime_ns).map_err(|err| io_err(err, e.path.to_string()))?;
        copy_fs::rename_at(dir, &partial_name(name), name).map_err(|err| io_err(err, e.path.to_string()))?;
        sh.n.files.fetch_add(1, Ordering::Relaxed);
        (sh.c.notify)(CopyEvent::File(FileRecord::new(e, sh.spec.hash, sh.spec.hash.hex(&h), false)));
        done.push(Done { file, hash: sh.spec.hash.hex(&h) });
    }
    batch.since = None;
    Ok(())
}

fn open_partial(sh: &RecvShared, dir: &OwnedFd, name: &str, e: &Entry, count: u64) -> io::Result<OpenFile> {
    let pn = partial_name(name);
    let jn = journal_name(name);
    let resuming = count > 1 && copy_fs::stat_at(dir, &jn).is_ok();
    let mut flags = libc::O_WRONLY | libc::O_CREAT;
    let mut direct = false;
    let fd = if sh.spec.direct && count > 1 {
        match copy_fs::openat(dir, &pn, flags | libc::O_DIRECT, 0o600) {
            Ok(fd) => {
                direct = true;
                fd
            }
            Err(_) => copy_fs::openat(dir, &pn, flags, 0o600)?,
        }
    } else {
        copy_fs::openat(dir, &pn, flags, 0o600)?
    };
    if direct {
        sh.direct.store(true, Ordering::Relaxed);
    }
    let f = File::from(fd);
    if !resuming && e.size > 0 {
        // Claim the space now: a full disk is found before any block is written.
        match wanperf_sys::fs::fallocate(&f, 0, e.size) {
            Err(e) if !matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EINVAL)) => return Err(e),
            _ => {}
        }
    }
    let journal = if count > 1 {
        flags = libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND;
        let j = File::from(copy_fs::openat(dir, &jn, flags, 0o600)?);
        if !resuming {
            j.set_len(0)?;
            (&j).write_all(journal::header(e.size, e.mtime_ns, sh.spec.block_size).as_bytes())?;
        }
        Some(j)
    } else {
        None
    };
    Ok(OpenFile { f, journal, hashes: vec![None; count as usize], left: count, direct, scratch: None })
}

/// Writes a block at `off`; with O_DIRECT through an aligned buffer, and the unaligned tail
/// of a file without it.
fn write_block(of: &mut OpenFile, data: &[u8], off: u64) -> io::Result<()> {
    if of.direct {
        if data.len().is_multiple_of(4096) {
            let a = match &mut of.scratch {
                Some(a) if a.as_ref().len() == data.len() => a,
                slot => slot.insert(Aligned::new(data.len())),
            };
            a.as_mut().copy_from_slice(data);
            return of.f.write_all_at(a.as_ref(), off);
        }
        // Clears O_DIRECT for the tail.
        let _ = wanperf_sys::fs::clear_direct(&of.f);
        of.direct = false;
    }
    of.f.write_all_at(data, off)
}

/// Either end of a copy, for the session loops.
pub enum Job {
    /// Sending files.
    Send(SendJob),
    /// Receiving files.
    Recv(RecvJob),
}

impl Job {
    /// Starts the pipeline; returns the stream worker.
    pub fn start(&self) -> Worker {
        match self {
            Job::Send(j) => j.start(),
            Job::Recv(j) => j.start(),
        }
    }

    /// A copy message from the peer.
    pub fn on_msg(&self, m: CopyMsg) {
        match self {
            Job::Send(j) => j.on_msg(m),
            Job::Recv(j) => j.on_msg(m),
        }
    }

    /// Stops every thread.
    pub fn abort(&self) {
        match self {
            Job::Send(j) => j.sh.c.abort(),
            Job::Recv(j) => j.sh.c.abort(),
        }
    }

    /// Waits for the pipeline's threads (stopping them unless the copy completed).
    pub fn join(&self) {
        match self {
            Job::Send(j) => j.sh.c.join(),
            Job::Recv(j) => j.sh.c.join(),
        }
    }

    /// Waits for the pipeline's threads and reports.
    pub fn report(&self) -> CopyReport {
        match self {
            Job::Send(j) => j.report(),
            Job::Recv(j) => j.report(),
        }
    }

    /// This end's stages' ceilings measured alone, once the copy is done — none unless the
    /// copy asked for them (`--probe`) and completed.
    pub fn probe(&self) -> Vec<wanperf_copy::spec::StageProbe> {
        let (spec, c) = match self {
            Job::Send(j) => (&j.sh.spec, &j.sh.c),
            Job::Recv(j) => (&j.sh.spec, &j.sh.c),
        };
        if !spec.probe || !c.is_complete() {
            return Vec::new();
        }
        let threads = prep_threads() as u32;
        match self {
            Job::Send(j) => crate::copy_probe::sender(&j.sh.spec, &j.sh.entries, &j.sh.sources, threads),
            Job::Recv(j) => {
                let sh = &j.sh;
                // A sample of the largest file this end received, for decompression.
                let largest = sh.plan.get().and_then(|p| {
                    let i = crate::copy_probe::largest_file(&p.entries)?;
                    let name = p.entries[i].path.file_name();
                    copy_fs::openat(&p.parents[i], name, libc::O_RDONLY | libc::O_NOFOLLOW, 0).ok().map(File::from)
                });
                // The scratch file goes where the copy wrote: the destination directory.
                crate::copy_probe::receiver(&sh.spec, &sh.base, largest, threads)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_files_are_flushed_and_completions_sent_by_count_age_or_the_end() {
        let ms = Duration::from_millis;
        assert!(!flush_due(1, Some(ms(10)), 5));
        assert!(flush_due(BATCH_FILES, Some(ms(10)), 5));
        assert!(flush_due(1, Some(BATCH_WAIT + ms(1)), 5));
        assert!(flush_due(0, None, 0));
        assert!(!flush_due(0, None, 1));
        assert!(!done_due(3, ms(10), 7));
        assert!(done_due(DONE_FILES, ms(10), 7));
        assert!(done_due(3, DONE_WAIT + ms(1), 7));
        assert!(done_due(0, ms(0), 0));
    }
}
