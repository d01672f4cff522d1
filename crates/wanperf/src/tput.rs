//! `wanperf serve` and `wanperf tput`: flags, validation, and the glue to the engine.

use crate::args::size;
use crate::output::{JsonSink, TableSink};
use crate::{software, INTERRUPTED};
use anyhow::{bail, Result};
use clap::Args;
use ipnet::IpNet;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use wanperf_engine::client::{self, ClientConfig, ClientError};
use wanperf_engine::server::ServerConfig;
use wanperf_proto::msg::{Direction, TestSpec, Transport, DATA_PORTS, DEFAULT_PORT, MAX_STREAMS};
use wanperf_proto::server::{Limits, Timeouts};
use wanperf_proto::units;

fn rate(s: &str) -> Result<u64, String> {
    units::parse_rate(s).map_err(|e| e.to_string())
}

fn secs(s: &str) -> Result<f64, String> {
    units::parse_duration(s).map_err(|e| e.to_string())
}

fn cidrs(s: &str) -> Result<Vec<IpNet>, String> {
    s.split(',')
        .filter(|x| !x.trim().is_empty())
        .map(|x| {
            let x = x.trim();
            x.parse::<IpNet>()
                .or_else(|_| x.parse::<std::net::IpAddr>().map(IpNet::from))
                .map_err(|_| format!("`{x}` is not a CIDR (e.g. 198.18.0.0/15, 10.1.2.3, ::1/128)"))
        })
        .collect()
}

/// `serve --data-ports`: a range of ports, or `any` (the kernel's choice).
#[derive(Clone, Debug)]
struct DataPorts(Option<std::ops::RangeInclusive<u16>>);

impl std::fmt::Display for DataPorts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some(r) => write!(f, "{}-{}", r.start(), r.end()),
            None => f.write_str("any"),
        }
    }
}

fn data_ports(s: &str) -> Result<DataPorts, String> {
    if s == "any" {
        return Ok(DataPorts(None));
    }
    let bad = || format!("`{s}` is not a port range LO-HI (e.g. 5320-5399) or `any`");
    let (lo, hi) = s.split_once('-').ok_or_else(bad)?;
    let (lo, hi) = (lo.trim().parse::<u16>().map_err(|_| bad())?, hi.trim().parse::<u16>().map_err(|_| bad())?);
    if lo == 0 || lo > hi {
        return Err(bad());
    }
    Ok(DataPorts(Some(lo..=hi)))
}

/// Flags of `wanperf serve`.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  wanperf serve                                  # loopback clients only, port 5301
  wanperf serve --allow 198.18.0.0/15            # also clients from the emulator's hosts
  wanperf serve --max-rate 100M --max-duration 60s --max-concurrent 2
  wanperf serve --allow 0.0.0.0/0 --authorized-keys ~/.config/wanperf/authorized_keys
                                                 # anyone may connect, only key holders test

Each test runs in its own threads; a client that stalls, disconnects or misbehaves only ends
its own test. Connections still in handshake are capped per address and in all, and cut at
--handshake-timeout, so a crowd of strangers cannot starve real tests. With --authorized-keys
a client must prove a listed Ed25519 key (`wanperf keygen`) before anything is admitted.
Stop the server with Ctrl-C: running tests are told and ended.")]
pub struct ServeArgs {
    /// Address and port to listen on (control and data share it).
    #[arg(long, value_name = "ADDR:PORT", default_value_t = SocketAddr::from(([0u16; 8], DEFAULT_PORT)))]
    listen: SocketAddr,
    /// Clients allowed to run tests (comma-separated CIDRs; repeatable). Default: loopback only,
    /// so a fresh server is not an open traffic generator.
    #[arg(long, value_name = "CIDR", value_parser = cidrs, action = clap::ArgAction::Append)]
    allow: Vec<Vec<IpNet>>,
    /// Longest test a client may run.
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = secs)]
    max_duration: f64,
    /// Most parallel streams per test.
    #[arg(long, value_name = "N", default_value_t = MAX_STREAMS, value_parser = clap::value_parser!(u32).range(1..=MAX_STREAMS as i64))]
    max_streams: u32,
    /// Highest rate per test and direction (e.g. 100M); TCP tests are paced to it, faster UDP tests refused.
    #[arg(long, value_name = "RATE", value_parser = rate)]
    max_rate: Option<u64>,
    /// Most tests at once.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    max_concurrent: u32,
    /// How long a client may take for each handshake step before its test is dropped (from
    /// connecting to being admitted, in all).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = secs)]
    handshake_timeout: f64,
    /// Admit only clients proving a key listed in FILE (one `wanperf-ed25519 …` public key per
    /// line, from `wanperf keygen`). A missing, empty or malformed file stops the server.
    #[arg(long, value_name = "FILE")]
    authorized_keys: Option<std::path::PathBuf>,
    /// Most connections in handshake at once (not yet admitted or attached to a test); more
    /// are closed at once.
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    max_handshakes: u32,
    /// Most connections in handshake at once from one address (IPv6: one /64).
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    max_handshakes_per_host: u32,
    /// Also accept iperf3 clients (`iperf3 -c HOST -p PORT`, 3.9 and later) on this TCP and
    /// UDP port (0: any free port, printed at start). One iperf3 test runs at a time, as with
    /// iperf3's own server; --allow and the --max-* limits apply to them.
    #[arg(long, value_name = "PORT")]
    iperf3_port: Option<u16>,
    /// Also reflect STAMP (RFC 8762) and TWAMP-Light on this UDP port (862 needs root; 0: any
    /// free port, printed at start). --allow applies; 10 000 packets/s per source at most.
    #[arg(long, value_name = "PORT")]
    stamp_port: Option<u16>,
    /// The reflector's authenticated mode: the key shared with its senders, as hex digits in
    /// FILE (16 octets or more); unauthenticated packets are then dropped.
    #[arg(long, value_name = "FILE", requires = "stamp_port")]
    stamp_key: Option<std::path::PathBuf>,
    /// Reflect statelessly (senders cannot then tell forward from reverse loss); by default
    /// each session is numbered and counted (RFC 8972).
    #[arg(long, requires = "stamp_port")]
    stamp_stateless: bool,
    /// Also serve OWAMP (RFC 4656, unauthenticated mode) on this TCP port (861 is its own and
    /// needs root; 0: any free port, printed at start), for perfSONAR's `owping` and `wanperf
    /// ping --owamp`. --allow applies; test packets go only to the client itself.
    #[arg(long, value_name = "PORT")]
    owamp_port: Option<u16>,
    /// Take copies (`wanperf copy`) into and out of DIR: clients read and write only inside
    /// it (`..`, absolute paths and symbolic links out of it are refused). Without it the
    /// server refuses copies. --allow, --authorized-keys and the --max-* limits apply to
    /// copies as to tests.
    #[arg(long, value_name = "DIR")]
    root: Option<std::path::PathBuf>,
    /// Ports for the data of UDP, QUIC and MPTCP tests (each stream's UDP socket, a QUIC
    /// test's endpoint, an MPTCP test's listener; TCP data shares the listening port): the
    /// first free ones of LO-HI, so a firewall or an emulated path's `port=test` can name them
    /// (any free port, logged, when all are taken). `any`: whatever port the kernel picks.
    #[arg(long, value_name = "LO-HI|any", default_value_t = DataPorts(Some(DATA_PORTS)), value_parser = data_ports)]
    data_ports: DataPorts,
    /// Print log lines as JSON objects.
    #[arg(long)]
    json: bool,
}

/// Flags of `wanperf tput`.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  wanperf tput 127.0.0.1                       # 10 s TCP upload, 1 stream
  wanperf tput host -P 8 -w 256k -t 30 -i 0.5  # 8 streams, 256 KiB windows, 30 s
  wanperf tput host -R --omit 2                # download, leave slow start out
  wanperf tput host -u -b 100M -l 1400         # UDP at 100 Mbit/s: loss, jitter, order
  wanperf tput host --bind-dev eth1            # measure through the interface you mean
  wanperf tput host --json > run.ndjson        # start, interval and end records

Units: sizes take k/M/G as powers of 1024 (256k = 262144 B); rates take k/M/G as powers of
1000 in bit/s (25M = 25 Mbit/s); durations take ms/s/m (bare numbers are seconds).
The summary's goodput is what the receiver read, divided by the time to its last byte.")]
pub struct TputArgs {
    /// Server running `wanperf serve` (name or address).
    host: String,
    /// Server port (default 5301, or 5201 with --iperf3).
    #[arg(short, long)]
    port: Option<u16>,
    /// The server is an iperf3 server (`iperf3 -s`, any version from 3.9): speak its protocol.
    /// wanperf measures its own end as usual (TCP_INFO per interval, host capture); what only
    /// the far end knows (bytes received, UDP loss and jitter, its CPU) comes from iperf3's
    /// results at the end. -t and --omit must be whole seconds.
    #[arg(long)]
    iperf3: bool,
    /// iperf3 authentication: user name (the password comes from $IPERF3_PASSWORD, as for
    /// iperf3 itself; also give --rsa-public-key-path).
    #[arg(long, value_name = "USER", requires_all = ["iperf3", "rsa_public_key_path"])]
    username: Option<String>,
    /// iperf3 authentication: the server's RSA public key (PEM).
    #[arg(long, value_name = "FILE", requires_all = ["iperf3", "username"])]
    rsa_public_key_path: Option<std::path::PathBuf>,
    /// iperf3 authentication: RSA padding. Default: OAEP (iperf3 3.17 and later), then
    /// PKCS#1 v1.5 (older servers) if the server refuses.
    #[arg(long, value_name = "PADDING", value_parser = ["oaep", "pkcs1"], requires = "username")]
    rsa_padding: Option<String>,
    /// Parallel streams (1..=128).
    #[arg(short = 'P', long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=MAX_STREAMS as i64))]
    streams: u32,
    /// Socket buffer (TCP window) on both ends: SO_SNDBUF and SO_RCVBUF (e.g. 64k, 4M).
    #[arg(short, long, value_name = "SIZE", value_parser = size)]
    window: Option<u64>,
    /// Time to measure (10 s without it); --omit runs before it, as with iperf3.
    #[arg(short = 't', long = "time", value_name = "DURATION", value_parser = secs, conflicts_with = "bytes")]
    time: Option<f64>,
    /// Bytes to send instead of a duration (split over the streams).
    #[arg(short = 'n', long, value_name = "SIZE", value_parser = size)]
    bytes: Option<u64>,
    /// Reporting interval (0.1 s or more).
    #[arg(short, long, value_name = "DURATION", default_value = "1", value_parser = secs)]
    interval: f64,
    /// Run this long first and leave it out of the summary (slow start), as iperf3's -O:
    /// `-t 10 -O 2` runs 12 s and measures the last 10.
    #[arg(short = 'O', long, value_name = "DURATION", default_value = "0", value_parser = secs)]
    omit: f64,
    /// Bytes per write (TCP) or datagram payload (UDP). Default for TCP: adaptive, about 1 ms
    /// of data per write between 64 KiB and 256 KiB; for UDP 1448 B.
    #[arg(short = 'l', long = "length", value_name = "SIZE", value_parser = size)]
    length: Option<u64>,
    /// Reverse: the server sends, the client receives.
    #[arg(short = 'R', long, conflicts_with = "bidir")]
    reverse: bool,
    /// Both directions at once (N streams each way).
    #[arg(long)]
    bidir: bool,
    /// Congestion control on both ends (e.g. cubic, bbr, reno).
    #[arg(long, value_name = "NAME")]
    cc: Option<String>,
    /// DSCP code point (0..=63) for data and control traffic.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(0..=63))]
    dscp: Option<u8>,
    /// Local address to send from.
    #[arg(long, value_name = "ADDR")]
    bind: Option<std::net::IpAddr>,
    /// Local interface to send through (SO_BINDTODEVICE): seed 001 measured a multi-homed
    /// host on the wrong interface and saw 8.5 instead of 320 Mbit/s.
    #[arg(long, value_name = "IFACE")]
    bind_dev: Option<String>,
    /// Zero-copy: the sender splices a fixed buffer's pages into the socket (vmsplice + splice),
    /// the receiver discards without copying (MSG_TRUNC).
    #[arg(short = 'Z', long)]
    zerocopy: bool,
    /// UDP instead of TCP (needs -b).
    #[arg(short, long, conflicts_with = "quic")]
    udp: bool,
    /// QUIC instead of TCP (quinn): a QUIC connection per stream (see --quic-connections) to
    /// the server's QUIC endpoint, certificates made for the test and pinned on both ends; -w sets the stream's
    /// flow-control window, -C quinn's congestion control (cubic, newreno, bbr); the intervals
    /// show quinn's RTT, window, lost packets and congestion events.
    #[arg(long, conflicts_with = "iperf3")]
    quic: bool,
    /// QUIC: carry the test's streams on N connections (stream i on connection i mod N; with
    /// --bidir the 2 × P streams, so both directions can share one), so that streams sharing
    /// one share its congestion controller: `-P 4 --quic-connections 1` is four streams under
    /// one controller, against four of their own without it.
    #[arg(long, value_name = "N", requires = "quic")]
    quic_connections: Option<u32>,
    /// Multipath TCP (MPTCP sockets on both ends, Linux): the streams use as many subflows as
    /// the hosts' MPTCP endpoints give (`ip mptcp endpoint`); the end record lists each
    /// stream's subflows with their addresses and TCP_INFO.
    #[arg(long, conflicts_with_all = ["iperf3", "udp", "quic"])]
    mptcp: bool,
    /// Target rate for all streams together (UDP pacing; TCP pacing cap), e.g. 100M.
    #[arg(short = 'b', long = "bitrate", value_name = "RATE", value_parser = rate)]
    bitrate: Option<u64>,
    /// Run even if the kernel grants a smaller buffer than --window asks (a warning says
    /// what was granted).
    #[arg(long)]
    accept_capped_window: bool,
    /// Connection and handshake timeout.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = secs)]
    timeout: f64,
    /// Private key to prove to servers started with --authorized-keys (from `wanperf keygen`;
    /// default: ~/.config/wanperf/key when it exists).
    #[arg(long, value_name = "FILE", env = "WANPERF_KEY")]
    key: Option<std::path::PathBuf>,
    /// Newline-delimited JSON records (schema wanperf/1, see docs/schema.md).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    save: crate::keep::SaveArgs,
    /// Test hook: UDP senders number but do not send every Nth datagram.
    #[arg(long, hide = true, value_name = "N")]
    udp_drop_every: Option<u64>,
}

/// `wanperf serve`.
pub fn serve(a: ServeArgs) -> Result<ExitCode> {
    if a.max_duration <= 0.0 {
        bail!("--max-duration must be more than 0 s");
    }
    if a.max_rate == Some(0) {
        bail!("--max-rate must be more than 0 bit/s");
    }
    if a.iperf3_port.is_some() && a.authorized_keys.is_some() {
        bail!("--iperf3-port cannot be combined with --authorized-keys: iperf3 clients cannot prove a wanperf key");
    }
    let auth = a.authorized_keys.as_deref().map(wanperf_engine::keys::load_authorized_keys).transpose()?;
    if let Some(r) = &a.root {
        if !r.is_dir() {
            bail!("--root {}: not a directory", r.display());
        }
    }
    let allow: Vec<IpNet> = a.allow.into_iter().flatten().collect();
    let cfg = ServerConfig {
        limits: Limits {
            max_duration_s: a.max_duration,
            max_streams: a.max_streams,
            max_rate_bps: a.max_rate,
            max_concurrent: a.max_concurrent,
        },
        timeouts: Timeouts {
            handshake: Duration::from_secs_f64(a.handshake_timeout.max(0.1)),
            grace: Duration::from_secs(10),
        },
        allow: allow.clone(),
        software: software(),
        auth: auth.clone(),
        gate: wanperf_engine::server::Gate {
            max_pending: a.max_handshakes,
            max_pending_per_host: a.max_handshakes_per_host,
        },
        copy_root: a.root.clone(),
        data_ports: a.data_ports.0,
    };
    let log: wanperf_engine::server::Log = crate::output::stderr_log(a.json);
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = wanperf_sys::stop_on_interrupt(stop.clone());
    let stamp = a
        .stamp_port
        .map(|p| wanperf_engine::stamp::serve_at(p, a.stamp_key.as_deref(), a.stamp_stateless))
        .transpose()?;
    let run = wanperf_engine::daemon::run(
        a.listen,
        wanperf_engine::daemon::Services {
            iperf3_port: a.iperf3_port,
            stamp,
            owamp_port: a.owamp_port,
            root: a.root.as_deref(),
        },
        cfg,
        stop.clone(),
        log,
    );
    stop.store(true, Ordering::Release);
    let _ = watcher.join();
    run?;
    Ok(ExitCode::SUCCESS)
}

/// Builds the test from the flags (checked before anything touches the network).
pub fn spec_from(a: &TputArgs) -> Result<TestSpec> {
    if a.udp && a.zerocopy {
        bail!("--zerocopy applies to TCP only");
    }
    let transport = match (a.udp, a.quic) {
        (true, _) => Transport::Udp,
        (_, true) => Transport::Quic,
        _ => Transport::Tcp,
    };
    let block = match a.length {
        Some(l) if l > u64::from(u32::MAX) => bail!("-l {l} is too large"),
        Some(l) => l as u32,
        None if a.udp => 1448,
        // Adaptive: about 1 ms of data per write, 64 KiB to 256 KiB.
        None => 0,
    };
    let spec = TestSpec {
        transport,
        direction: Direction::from_flags(a.reverse, a.bidir),
        streams: a.streams,
        // The spec's duration is the whole test, --omit included.
        duration_s: if a.bytes.is_some() { None } else { Some(a.time.unwrap_or(10.0) + a.omit) },
        bytes: a.bytes,
        interval_s: a.interval,
        omit_s: a.omit,
        block_size: block,
        window: a.window,
        cc: a.cc.clone(),
        dscp: a.dscp,
        rate_bps: a.bitrate,
        zerocopy: a.zerocopy,
        accept_capped_window: a.accept_capped_window,
        copy: None,
        mptcp: a.mptcp,
        quic_cert: None,
        quic_connections: a.quic_connections,
    };
    // A QUIC test's client certificate is made when it runs; everything else is checked now.
    let placeholder = TestSpec { quic_cert: a.quic.then(|| "0".repeat(64)), ..spec.clone() };
    placeholder.validate()?;
    Ok(spec)
}

/// `wanperf tput`.
pub fn tput(a: TputArgs) -> Result<ExitCode> {
    let spec = spec_from(&a)?;
    if a.timeout <= 0.0 {
        bail!("--timeout must be more than 0 s");
    }
    let default_port = if a.iperf3 { wanperf_iperf3::wire::DEFAULT_PORT } else { DEFAULT_PORT };
    let creds = iperf3_credentials(&a)?;
    if a.iperf3 && a.key.is_some() {
        bail!(
            "--key proves a wanperf key to a wanperf server; iperf3 servers take --username and --rsa-public-key-path"
        );
    }
    let cfg = ClientConfig {
        host: a.host.clone(),
        port: a.port.unwrap_or(default_port),
        spec,
        bind: a.bind,
        bind_dev: a.bind_dev.clone(),
        timeout: Duration::from_secs_f64(a.timeout),
        drop_every: a.udp_drop_every,
        software: software(),
        key: if a.iperf3 { None } else { wanperf_engine::keys::client_key(a.key.as_deref())? },
    };
    let mut store = a.save.open()?;
    let mut table;
    let mut json;
    let out: &mut dyn client::Sink = if a.json {
        json = JsonSink::stdout();
        &mut json
    } else {
        table = TableSink::stdout();
        &mut table
    };
    let mut rec = crate::output::Recorder::new(out, store.is_some());
    let result = if a.iperf3 {
        wanperf_engine::iperf3_client::run(&cfg, creds.as_ref(), &mut rec, &INTERRUPTED)
    } else {
        client::run(&cfg, &mut rec, &INTERRUPTED)
    };
    if let Some(store) = store.as_mut() {
        crate::keep::save_and_say(store.as_mut(), &rec.lines, a.json)?;
    }
    match result {
        Ok(_) => Ok(ExitCode::SUCCESS),
        Err(ClientError::Incomplete(why)) => {
            eprintln!("error: test incomplete: {why} (the summary above holds what was measured)");
            Ok(ExitCode::FAILURE)
        }
        Err(ClientError::Interrupted) => Ok(ExitCode::from(130)),
        Err(e) => Err(e.into()),
    }
}

/// iperf3 credentials from --username, $IPERF3_PASSWORD and --rsa-public-key-path.
fn iperf3_credentials(a: &TputArgs) -> Result<Option<wanperf_engine::iperf3_client::Iperf3Auth>> {
    use wanperf_iperf3::auth::Padding;
    let (Some(user), Some(path)) = (&a.username, &a.rsa_public_key_path) else {
        return Ok(None);
    };
    let padding = a.rsa_padding.as_deref().map(|p| if p == "pkcs1" { Padding::Pkcs1 } else { Padding::Oaep });
    Ok(Some(wanperf_engine::iperf3_client::Iperf3Auth::load(user, path, padding)?))
}
