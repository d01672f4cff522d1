//! `wanperf trace`.

use crate::INTERRUPTED;
use anyhow::{bail, Result};
use clap::Args;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Duration;
use wanperf_diag::probe::{self, Method, PAYLOAD_MIN, SERVER_PAYLOAD_MIN};
use wanperf_diag::run::{self, Options};
use wanperf_proto::units::parse_duration;

/// Flags of `wanperf trace`.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  wanperf trace 198.18.5.2                  # 10 rounds, one a second, UDP probes
  wanperf trace HOST -c 60 --json           # a minute of rounds, one JSON report
  wanperf trace HOST --icmp                 # ICMP echo probes (needs ping sockets)
  wanperf trace HOST --tcp -p 443           # TCP SYN probes, where UDP and ICMP are filtered
  wanperf trace HOST --multipath 8 -c 32    # the paths of per-flow load balancers (8 flows)
  wanperf trace HOST --mtu                  # also find each link's MTU (DF set)
  wanperf trace HOST --server -c 300 -i 0.1 # HOST runs `wanperf serve`: loss split by direction

Every probe of a trace has the same addresses, ports and checksum (Paris traceroute's
constant flow identifier), so a per-flow load balancer sends them all one way; the probes are
told apart by their payload, which routers quote back. Unprivileged: UDP errors are read from
the socket's error queue (IP_RECVERR), ICMP echo uses ping sockets, and a TCP SYN probe is a
connect() from a TTL-limited socket whose ICMP errors land on its error queue too (the
destination answers a SYN-ACK or a reset: either is `reached`). TCP probes share one source
port, so they go one at a time, and one the kernel has resent (after 1 s) counts as lost. Times are the kernel's
receive timestamps. Each router is probed once a round, so with the default one round a
second no router's ICMP rate limit (Linux: one reply a second, a burst of 6) is reached.
Faster rounds are fine for --server and where routers do not limit; where they do, a hop
whose answers come at a steady rate however fast it is probed (a token bucket: no answer
right after another, gaps that hardly vary) is `rate-limited`, its loss is not the path's,
and a warning says so with the remedy; too few answers to tell are said to be too few.

Loss is split in two: `path` loss is what the path itself loses up to that hop (the least
loss seen at that hop or any later one: a packet lost on a link is lost for every probe that
crosses it); the rest of a hop's loss is only that router not answering (ICMP rate limiting
or a busy control plane), marked `rate-limited`. `loss starts here` marks the hop where
the path's loss steps up: the link into it (or the router) loses packets — judged against
all the probes of the hops before it and against the hop just before it (Fisher's exact test,
about 740:1, shared over the steps tested); `loss starts at or before here` where the loss is
certain but the hops before it saw too few probes to rule out an earlier start. With --server, the
server's count says which way when only one way fits it: `on the way there` (the probes are
lost) or `on the way back` (the answers are).

--multipath N gives the rounds N flow identifiers in turn (UDP: destination ports PORT ..
PORT+N-1; TCP: N source ports), each constant across the hops of its round: a per-flow load
balancer sends each flow its own way, and a hop answered from different addresses by
different flows — each flow keeping its own — is `load-balanced`, not a route change (which
is an address changing within one flow). Classic traceroute varies the port with every
probe and so draws links between the hops of different paths that do not exist.

--server: the destination runs `wanperf serve` (port 5301 unless -p says otherwise). UDP
probes go to its port; it answers every one itself — a host's kernel answers port
unreachable at most once a second (a burst of 6), so a fast trace to a plain host shows loss
at the destination that is only rate limiting — and with each answer says how many of this
trace's probes it has had. Probes that never reached it are the forward loss, answers that
never came back the reverse loss: the path's loss split by direction, which no one-ended tool
can do. Without a server answering, the trace goes on as a plain UDP trace.")]
pub struct TraceArgs {
    /// Destination (address or name).
    host: String,
    /// Rounds (each probes every hop once).
    #[arg(short = 'c', long = "count", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    rounds: u32,
    /// Time between rounds.
    #[arg(short, long, default_value = "1", value_parser = |s: &str| parse_duration(s).map_err(|e| e.to_string()))]
    interval: f64,
    /// A probe unanswered after this long is lost.
    #[arg(short = 'W', long, default_value = "2", value_parser = |s: &str| parse_duration(s).map_err(|e| e.to_string()))]
    wait: f64,
    /// First TTL probed.
    #[arg(short = 'f', long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=255))]
    first_ttl: u8,
    /// Highest TTL probed.
    #[arg(short = 'm', long, default_value_t = 30, value_parser = clap::value_parser!(u8).range(1..=255))]
    max_ttl: u8,
    /// ICMP echo probes instead of UDP.
    #[arg(long, conflicts_with = "tcp")]
    icmp: bool,
    /// TCP SYN probes instead of UDP (to port 80 unless -p says otherwise).
    #[arg(long)]
    tcp: bool,
    /// Destination port: UDP (a closed port, default 33434: the destination answers port
    /// unreachable; with --server the server's, default 5301) or TCP (default 80; open or
    /// closed, both answer).
    #[arg(short, long)]
    port: Option<u16>,
    /// Probe size on the wire, bytes (IP header included); with --mtu, where discovery starts.
    #[arg(short, long)]
    size: Option<usize>,
    /// Find the path MTU: probes with DF set, shrunk to each MTU a router reports.
    #[arg(long)]
    mtu: bool,
    /// Flow identifiers the rounds take in turn, to list load-balanced paths (UDP or TCP).
    #[arg(long, value_name = "FLOWS", value_parser = clap::value_parser!(u16).range(2..=256), conflicts_with = "icmp")]
    multipath: Option<u16>,
    /// The destination runs `wanperf serve`: it answers and counts the probes, and the
    /// destination's loss is split into forward and reverse (UDP only).
    #[arg(long, conflicts_with_all = ["icmp", "tcp", "multipath"])]
    server: bool,
    /// Time between the probes of one round.
    #[arg(long, default_value = "5ms", value_parser = |s: &str| parse_duration(s).map_err(|e| e.to_string()))]
    gap: f64,
    #[command(flatten)]
    save: crate::keep::SaveArgs,
    /// JSON: one record per round (`trace_round`) and the report (`trace`).
    #[arg(long)]
    json: bool,
}

/// `wanperf trace`.
pub fn run(a: TraceArgs) -> Result<ExitCode> {
    if a.interval < 0.01 {
        bail!("-i must be at least 10 ms");
    }
    if a.wait <= 0.0 {
        bail!("-W must be more than 0 s");
    }
    if a.first_ttl > a.max_ttl {
        bail!("--first-ttl {} is above --max-ttl {}", a.first_ttl, a.max_ttl);
    }
    if a.tcp && (a.mtu || a.size.is_some()) {
        bail!("--tcp sends SYNs of their own size: --mtu and --size are for UDP and ICMP probes");
    }
    let dst = crate::args::resolve(&a.host, 0)?.ip();
    let overhead = probe::overhead(dst.is_ipv6());
    let least = overhead + if a.server { SERVER_PAYLOAD_MIN } else { PAYLOAD_MIN };
    let size = a.size.unwrap_or(if a.mtu { 65_000 } else { least.max(overhead + 32) });
    if size < least || size > 65_000 {
        bail!("--size must be between {least} and 65000 bytes");
    }
    let method = if a.icmp {
        Method::Icmp
    } else if a.tcp {
        Method::Tcp
    } else {
        Method::Udp
    };
    let o = Options {
        method,
        port: a.port.unwrap_or(if a.tcp {
            80
        } else if a.server {
            5301
        } else {
            33434
        }),
        rounds: a.rounds,
        interval: Duration::from_secs_f64(a.interval),
        wait: Duration::from_secs_f64(a.wait),
        first_ttl: a.first_ttl,
        max_ttl: a.max_ttl,
        size,
        mtu: a.mtu,
        gap: Duration::from_secs_f64(a.gap),
        flows: a.multipath.unwrap_or(1),
        server: a.server,
    };
    // A wrong --db fails before anything is sent.
    let mut store = a.save.open()?;
    let started = std::time::SystemTime::now();
    let show = !a.json && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let bar = crate::output::bar(show, u64::from(a.rounds), "{spinner} round {pos}/{len} {wide_bar} {eta} left");
    let json = a.json;
    let report = run::trace(dst, &o, |round, t| {
        if let Some(b) = &bar {
            b.set_position(u64::from(round));
        }
        if json {
            outln!("{}", serde_json::json!({"event": "trace_round", "round": round, "hops": t.counts()}));
        }
        !INTERRUPTED.load(Ordering::Acquire)
    })
    .map_err(|e| match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) if a.icmp => {
            anyhow::anyhow!("ICMP probes need ping sockets (net.ipv4.ping_group_range) or privileges: {e}")
        }
        _ => anyhow::anyhow!("trace to {dst}: {e}"),
    })?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if a.json {
        outln!(
            "{}",
            serde_json::json!({"event": "trace", "host": a.host, "address": dst, "complete": !INTERRUPTED.load(Ordering::Acquire), "report": report})
        );
    } else {
        let _ = wanperf_diag::text::trace_table(&mut std::io::stdout(), &a.host, dst, &report);
    }
    if let Some(s) = store.as_mut() {
        let complete = !INTERRUPTED.load(Ordering::Acquire);
        let failure = crate::keep::failure(complete, (!report.reached).then_some("the destination did not answer"));
        let params = [
            ("host", serde_json::json!(a.host)),
            ("address", serde_json::json!(dst.to_string())),
            ("method", serde_json::json!(format!("{method:?}").to_lowercase())),
            ("rounds", serde_json::json!(a.rounds)),
            ("flows", serde_json::json!(a.multipath.unwrap_or(1))),
            ("size", serde_json::json!(size)),
            ("server", serde_json::json!(a.server)),
        ];
        let summary = serde_json::json!({"trace": report, "host": a.host, "address": dst, "complete": complete});
        crate::keep::save_measurement(s.as_mut(), "trace", &params, summary, failure, started, a.json)?;
    }
    Ok(if INTERRUPTED.load(Ordering::Acquire) {
        ExitCode::from(130)
    } else if report.reached {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
