//! `wanperf copy`: flags and glue (the paths' syntax is `wanperf_engine::copy_plan`, the
//! table `wanperf_engine::console::CopyTable`).

use crate::output::JsonSink;
use crate::INTERRUPTED;
use anyhow::{bail, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use wanperf_copy::spec::{Compress, CopySpec, HashKind, Way, DEFAULT_BLOCK};
use wanperf_engine::client::{self, ClientConfig, ClientError, Sink};
use wanperf_engine::console::CopyTable;
use wanperf_engine::copy_plan::plan;
use wanperf_proto::msg::{Direction, TestSpec, Transport, DEFAULT_PORT, MAX_STREAMS};

/// Flags of `wanperf copy`.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  wanperf copy data/ run.root host:incoming      # push a tree and a file into incoming/ (created)
  wanperf copy big.dat host:big2.dat             # one file, stored as big2.dat (as scp does)
  wanperf copy host:incoming/run.root .          # pull a file into the current directory
  wanperf copy -P 4 -w 4M big.dat host:          # 4 streams, 4 MiB windows
  wanperf copy -z auto logs/ host:archive        # zstd while it pays, off when it does not
  wanperf copy host:. mirror/ --json             # start, interval, file and end records
  wanperf copy --probe --save big.dat host:      # confirm the verdict; keep it in the archive

The server is a `wanperf serve --root DIR`; remote paths are HOST:PATH relative to its root
(HOST may be [IPv6]:PATH). Destinations are read as scp, rsync and cp read them: one that is
an existing directory or ends in `/` receives the sources under their own names (created if
missing); otherwise a single source, file or tree, takes the destination's name; several
sources go into it as a directory. Every block carries a BLAKE3 hash checked before it
is written (a block that fails is sent again); files get their final names only when
complete and verified, with the whole file's BLAKE3 (what `b3sum` prints) in --json. An
interrupted copy resumes: run it again and only the missing blocks move. Files the receiver
has with the same size and modification time are left alone (--force sends them anyway).

At the end the copy says what limited it — disk read, compression, hashing, the network
(the path, the receiver's window or the sender's buffer, from TCP_INFO), verification,
decompression, disk write, or the CPU — with each stage's busy time and what the others
could do; --probe measures each stage alone afterwards and says whether that confirms it.
--save stores the copy in the archive (`wanperf report` draws it like a test).")]
pub struct CopyArgs {
    /// Sources, then the destination; exactly one side is remote (HOST:PATH).
    #[arg(required = true, num_args = 2.., value_name = "PATH")]
    paths: Vec<String>,
    /// Server port.
    #[arg(short = 'p', long, value_name = "PORT")]
    port: Option<u16>,
    /// Parallel TCP streams.
    #[arg(short = 'P', long = "parallel", value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=MAX_STREAMS as i64))]
    streams: u32,
    /// Socket buffer (SO_SNDBUF and SO_RCVBUF) at both ends, e.g. 4M.
    #[arg(short = 'w', long, value_name = "SIZE", value_parser = crate::args::size)]
    window: Option<u64>,
    /// Compression: a zstd level (1-22), `auto` (or auto:LEVEL: on while it pays), or `off`.
    #[arg(short = 'z', long, value_name = "LEVEL|auto|off", default_value = "off", value_parser = Compress::parse)]
    compress: Compress,
    /// The hash of every block and file: blake3 (cryptographic; each file's hash is what
    /// `b3sum` prints) or xxh3 (XXH3-128: detects corruption for a fraction of the CPU; the
    /// file's hash is over its blocks' hashes, so only wanperf can recompute it).
    #[arg(long, value_name = "blake3|xxh3", default_value = "blake3", value_parser = hash_kind)]
    hash: HashKind,
    /// Block size: the unit of hashing, resending and resuming (power of two, 16k to 16M).
    #[arg(long, value_name = "SIZE", value_parser = crate::args::size)]
    block: Option<u64>,
    /// Send files even when the receiver has them with the same size and modification time.
    #[arg(long)]
    force: bool,
    /// Write with O_DIRECT at the receiver where its file system allows it.
    #[arg(long)]
    direct: bool,
    /// Do not make files durable (fsync) before they get their final names.
    #[arg(long)]
    no_fsync: bool,
    /// After the copy, measure each stage's ceiling alone to confirm the verdict: each end
    /// reads (page cache dropped), writes (fdatasync), hashes and compresses on its own, one
    /// end after the other, then a 3 s memory-to-memory test runs over the same path with the
    /// same streams and windows (adds about 10 s).
    #[arg(long)]
    probe: bool,
    /// Congestion control for the data connections (both ends).
    #[arg(long, value_name = "NAME")]
    cc: Option<String>,
    /// Seconds between interval records.
    #[arg(short = 'i', long, value_name = "SECONDS", default_value_t = 1.0)]
    interval: f64,
    /// How long to wait for the server at each handshake step.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    timeout: f64,
    /// Key to prove to a server with --authorized-keys (default ~/.config/wanperf/id_ed25519 if present).
    #[arg(long, value_name = "FILE")]
    key: Option<PathBuf>,
    /// Print also one line per file.
    #[arg(short = 'v', long)]
    verbose: bool,
    /// NDJSON records: start, interval, file, end.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    save: crate::keep::SaveArgs,
}

fn hash_kind(s: &str) -> Result<HashKind, String> {
    match s {
        "blake3" => Ok(HashKind::Blake3),
        "xxh3" => Ok(HashKind::Xxh3),
        _ => Err(format!("`{s}` is not a hash (blake3 or xxh3)")),
    }
}

/// `wanperf copy`.
pub fn copy(a: CopyArgs) -> Result<ExitCode> {
    let p = plan(&a.paths)?;
    if a.timeout <= 0.0 {
        bail!("--timeout must be more than 0 s");
    }
    let block = a.block.unwrap_or(u64::from(DEFAULT_BLOCK));
    let cs = CopySpec {
        way: p.way,
        remote: p.remote.clone(),
        block_size: u32::try_from(block).unwrap_or(0),
        compress: a.compress,
        force: a.force,
        direct: a.direct,
        fsync: !a.no_fsync,
        probe: a.probe,
        hash: a.hash,
        dest_names_source: p.dest_names_source,
    };
    cs.validate()?;
    let spec = TestSpec {
        transport: Transport::Tcp,
        direction: if p.way == Way::Push { Direction::Up } else { Direction::Down },
        streams: a.streams,
        duration_s: None,
        bytes: None,
        interval_s: a.interval,
        omit_s: 0.0,
        block_size: 0,
        window: a.window,
        cc: a.cc.clone(),
        dscp: None,
        rate_bps: None,
        zerocopy: false,
        accept_capped_window: true,
        copy: Some(cs),
        mptcp: false,
        quic_cert: None,
        quic_connections: None,
    };
    spec.validate()?;
    let cfg = ClientConfig {
        host: p.host.clone(),
        port: a.port.unwrap_or(DEFAULT_PORT),
        spec,
        bind: None,
        bind_dev: None,
        timeout: Duration::from_secs_f64(a.timeout),
        drop_every: None,
        software: crate::software(),
        key: wanperf_engine::keys::client_key(a.key.as_deref())?,
    };
    let mut store = a.save.open()?;
    let mut table;
    let mut json;
    let out: &mut dyn Sink = if a.json {
        json = JsonSink::stdout();
        &mut json
    } else {
        table = CopyTable::new(a.verbose);
        &mut table
    };
    let mut rec = crate::output::Recorder::new(out, store.is_some());
    let result = client::run_copy(&cfg, &p.local, &mut rec, &INTERRUPTED);
    if let Some(store) = store.as_mut() {
        crate::keep::save_and_say(store.as_mut(), &rec.lines, a.json)?;
    }
    match result {
        Ok(_) => Ok(ExitCode::SUCCESS),
        Err(ClientError::Incomplete(why)) => {
            eprintln!("error: copy incomplete: {why} (run it again to resume)");
            Ok(ExitCode::FAILURE)
        }
        Err(ClientError::Interrupted) => Ok(ExitCode::from(130)),
        Err(e) => Err(e.into()),
    }
}
