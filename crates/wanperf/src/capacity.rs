//! `wanperf capacity`: argument parsing and output around `wanperf_diag::measure`.

use crate::INTERRUPTED;
use anyhow::{bail, Result};
use clap::Args;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Duration;
use wanperf_diag::measure::{self, Options};
use wanperf_proto::msg::DEFAULT_PORT;
use wanperf_proto::units::{parse_duration, parse_size};

/// Flags of `wanperf capacity`.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  wanperf capacity 198.18.2.2               # capacity, available bandwidth, bottleneck hop
  wanperf capacity HOST --budget 4M --time 20s --json
  wanperf capacity HOST --no-locate         # no TTL-limited packets (routers need not answer)
  wanperf capacity HOST --no-reverse        # this direction only
  wanperf capacity HOST --locate-back       # the way back's bottleneck hop too
  wanperf capacity HOST --save              # kept in the archive: `wanperf report` tables it

Measures the path from this host to a `wanperf serve` (its UDP echo on the server's port
stamps every packet with the kernel's receive time there), in four phases within a budget
of bytes (--budget, 1.5 MB by default, no estimate more than 1 MB of it) and time (--time,
10 s):

capacity   (a sixth of the budget) back-to-back trains of 33 large packets; every window of 2, 3, 5 … 33 consecutive
           packets gives an estimate (bytes / dispersion at the receiver). Cross traffic
           widens windows, timer noise and interrupt coalescing move them both ways, so each
           window length's estimates are reduced to their modes (as wide as that length's
           timing noise), the capacity is the fastest mode that several window lengths agree
           on, and the most precise length that agrees places it. The range is the 10th-90th
           percentile of the estimates in that mode.
bottleneck (a tenth) recursive packet trains (Pathneck): small packets with TTL 1, 2, … at the head and
           … 2, 1 at the tail of 20 large ones; every router answers its head and tail
           packet, so the gap between its two answers is the train's length as it left that
           router. The train lengthens at a link narrower than all before it, to the length
           the capacity gives it after the narrowest: the first hop where it reaches 90 % of
           that is the narrow link, with the gap per hop. Where it grows by 4 % or more
           again after that (and each train is 2 % or more longer at the destination than
           at the narrow hop), cross traffic leaves less there than at the narrow link: a
           tight link, named beside it. Needs routers that answer ICMP (0.9–1.1 s between
           trains, at random, for their rate limits and so as not to fall in step with
           periodic cross traffic).
available  self-loading streams of 64 packets paced above the available bandwidth (first at
           the capacity, then between the estimate and the capacity): cross traffic sharing
           the bottleneck spreads them, by C·Δout/Δin − R = the cross traffic's rate, and the
           streams are pooled until the budget is spent (the rest of it, more than half: the
           cross traffic's own randomness over the time the streams sample is what limits
           this estimate, so it gets the most bytes). The range is ±2 standard errors of the
           streams' own estimates.

reverse    the server sends trains of 33 packets back to back (a tenth of the budget, counted
           as sent) and this host's kernel times their arrival: the capacity of the path
           back, estimated as above (paths are often asymmetric: seed 004's CERN→SLAC 27
           Mbit/s, SLAC→CERN 32). The server sends trains only to an address it gave its
           token to (one packet each way first) and at most 2 MB/s to each.

With --avail-back and --locate-back the server also paces streams and sends recursive trains
toward this host: the way back's available bandwidth, and its bottleneck hop (the routers
answer the server's TTL-limited packets toward the server, which reports when each answer
came; the hops count from the server). The narrow link
(least capacity) and the tight link (least available bandwidth) need not be the same: the
bottleneck is the narrow link, and a tight link after it is named too. The streams' spread is
read against the tight link's capacity when the capacity trains showed it (a faster mode set
aside: trains that crossed that link behind its cross traffic left it at its rate), else
against the narrow link's, which reads a faster tight link's cross traffic low.")]
pub struct CapacityArgs {
    /// The `wanperf serve` host (address or name).
    host: String,
    /// Server port (its UDP echo).
    #[arg(short, long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// Most bytes sent, all phases, both directions (e.g. 2M, 500k; 1.5 MB = 1.5 × 10^6 by
    /// default).
    #[arg(long, default_value = "1500000", value_parser = |s: &str| parse_size(s).map_err(|e| e.to_string()))]
    budget: u64,
    /// Most time spent.
    #[arg(long, default_value = "10s", value_parser = |s: &str| parse_duration(s).map_err(|e| e.to_string()))]
    time: f64,
    /// Size of the large packets on the wire, bytes (IP header included).
    #[arg(short, long, default_value_t = 1500, value_parser = clap::value_parser!(u16).range(100..=9000))]
    size: u16,
    /// Do not look for the bottleneck's hop (no TTL-limited packets).
    #[arg(long)]
    no_locate: bool,
    /// Do not estimate the available bandwidth (no self-loading streams).
    #[arg(long)]
    no_avail: bool,
    /// Do not measure the capacity of the way back (no trains from the server).
    #[arg(long)]
    no_reverse: bool,
    /// Also the available bandwidth of the way back: the server paces self-loading streams
    /// toward this host (0.6 MB and up to 3 s more than --budget and --time).
    #[arg(long, conflicts_with = "no_reverse")]
    avail_back: bool,
    /// Also the bottleneck's hop on the way back: with each recursive train this host sends,
    /// the server sends one toward it and reports the routers' answers (about 0.03 MB a
    /// train, 3–8 trains, beyond --budget; no more time).
    #[arg(long, conflicts_with_all = ["no_reverse", "no_locate"])]
    locate_back: bool,
    /// Highest TTL of the bottleneck trains' head and tail packets.
    #[arg(short = 'm', long, default_value_t = 16, value_parser = clap::value_parser!(u8).range(1..=64))]
    max_ttl: u8,
    #[command(flatten)]
    save: crate::keep::SaveArgs,
    /// One JSON record (`capacity`) instead of the table.
    #[arg(long)]
    json: bool,
}

/// `wanperf capacity`.
pub fn run(a: CapacityArgs) -> Result<ExitCode> {
    if !(a.time > 0.0 && a.time <= 600.0) {
        bail!("--time must be more than 0 s and at most 10 minutes");
    }
    if !(100_000..=1_000_000_000).contains(&a.budget) {
        bail!("--budget must be between 100k and 1G bytes");
    }
    let dst = crate::args::resolve(&a.host, a.port)?;
    let o = Options {
        budget_bytes: a.budget,
        time: Duration::from_secs_f64(a.time),
        size: usize::from(a.size),
        locate: !a.no_locate,
        avail: !a.no_avail,
        reverse: !a.no_reverse,
        reverse_avail: a.avail_back,
        reverse_locate: a.locate_back,
        max_ttl: a.max_ttl,
        ..Options::default()
    };
    // A wrong --db fails before anything is sent.
    let mut store = a.save.open()?;
    let started = std::time::SystemTime::now();
    let show = !a.json && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let bar = crate::output::bar(show, 1000, "{spinner} {msg:20} {wide_bar} {elapsed}");
    let report = measure::measure(dst, &o, |phase, share| {
        if let Some(b) = &bar {
            b.set_message(phase.to_string());
            b.set_position((share * 1000.0).min(1000.0) as u64);
        }
        !INTERRUPTED.load(Ordering::Acquire)
    })?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if a.json {
        outln!(
            "{}",
            serde_json::json!({"event": "capacity", "host": a.host, "address": dst.ip(), "port": dst.port(),
                "complete": !INTERRUPTED.load(Ordering::Acquire), "report": report})
        );
    } else {
        let _ = wanperf_diag::text::capacity_table(&mut std::io::stdout(), &a.host, dst, &report);
    }
    if let Some(s) = store.as_mut() {
        let complete = !INTERRUPTED.load(Ordering::Acquire);
        let failure = crate::keep::failure(
            complete,
            report.capacity.is_none().then_some("no capacity estimate (too few trains arrived whole)"),
        );
        let params = [
            ("host", serde_json::json!(a.host)),
            ("address", serde_json::json!(dst.ip().to_string())),
            ("budget_bytes", serde_json::json!(a.budget)),
            ("time_s", serde_json::json!(a.time)),
            ("size", serde_json::json!(a.size)),
        ];
        let summary =
            serde_json::json!({"capacity": report, "host": a.host, "address": dst.ip(), "complete": complete});
        crate::keep::save_measurement(s.as_mut(), "capacity", &params, summary, failure, started, a.json)?;
    }
    Ok(if INTERRUPTED.load(Ordering::Acquire) {
        ExitCode::from(130)
    } else if report.capacity.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
