//! `wanperf ping`.

use crate::INTERRUPTED;
use anyhow::{bail, Result};
use clap::Args;
use std::process::ExitCode;
use std::time::Duration;
use wanperf_engine::console::{ping_summary, PingLines};
use wanperf_engine::ping::{self, PingConfig, PingMode};
use wanperf_proto::msg::DEFAULT_PORT;
use wanperf_proto::units::parse_duration;

/// Flags of `wanperf ping`.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  wanperf ping 127.0.0.1 -c 100 -i 10ms          # UDP probes to a `wanperf serve`
  wanperf ping HOST -c 3600 -i 1 -s 100 -W 20    # seed 000's probes: 100 B once a second
  wanperf ping HOST --mode tcp -c 10             # TCP connection set-up time
  wanperf ping HOST --mode icmp -c 10            # ICMP echo (any host; root or CAP_NET_RAW)
  wanperf ping HOST --dscp 46 --json             # EF-marked probes, NDJSON records
  wanperf ping ROUTER --stamp -c 100             # a STAMP reflector (RFC 8762) on port 862
  wanperf ping HOST --stamp --stamp-key k.hex    # STAMP's authenticated mode (HMAC-SHA-256)
  wanperf ping HOST --twamp-light -p 5000        # a TWAMP-Light reflector
  wanperf ping HOST --owamp -c 100 -i 100ms      # OWAMP (RFC 4656) both ways: a perfSONAR owampd

UDP probes carry the server's receive and send times: the RTT excludes its turnaround, and
one-way delays are estimated with the clock offset and its uncertainty (half the fastest round
trip) stated. RTTs use the monotonic clock. A reply after -W counts as lost and is reported
as late. With --json, one probe record per probe and a final end record are printed when the
run ends.

--stamp and --twamp-light probe any such reflector (routers, perfSONAR, `serve --stamp-port`)
with the same records; a stateful reflector's counters split the loss by direction, and clocks
both ends call synchronized give one-way delays with their two errors as the uncertainty.
--owamp runs one OWAMP session each way with an OWAMP server (perfSONAR's owampd, `serve
--owamp-port`) and fetches its records: one-way delay, loss and hops per direction.")]
pub struct PingArgs {
    /// Server running `wanperf serve` (or a STAMP / TWAMP-Light reflector).
    host: String,
    /// Server port [default: 5301; 862 with --stamp or --twamp-light].
    #[arg(short, long)]
    port: Option<u16>,
    /// Probes to send.
    #[arg(short, long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    count: u64,
    /// Interval between probes (1 ms or more).
    #[arg(short, long, default_value = "1", value_parser = |s: &str| parse_duration(s).map_err(|e| e.to_string()))]
    interval: f64,
    /// UDP probe size in bytes (40 to 65000).
    #[arg(short, long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(40..=65_000))]
    size: u32,
    /// Timeout: later replies count as lost (reported as late).
    #[arg(short = 'W', long, default_value = "2", value_parser = |s: &str| parse_duration(s).map_err(|e| e.to_string()))]
    timeout: f64,
    /// DSCP code point for the probes.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=63))]
    dscp: Option<u8>,
    /// udp (echo with server timestamps), icmp (echo, needs root or CAP_NET_RAW; no server
    /// needed) or tcp (connect time).
    #[arg(long, default_value = "udp", value_parser = ["udp", "icmp", "tcp"])]
    mode: String,
    /// Probe a STAMP Session-Reflector (RFC 8762, RFC 8972 TLVs).
    #[arg(long, conflicts_with_all = ["mode", "twamp_light"])]
    stamp: bool,
    /// Probe a TWAMP-Light reflector (RFC 5357 appendix I).
    #[arg(long, conflicts_with = "mode")]
    twamp_light: bool,
    /// One-way sessions both ways with an OWAMP server (RFC 4656, unauthenticated) [port 861].
    #[arg(long, conflicts_with_all = ["mode", "stamp", "twamp_light", "clock_offset"])]
    owamp: bool,
    /// STAMP's authenticated mode: the key shared with the reflector, as hex digits in FILE
    /// (16 octets or more).
    #[arg(long, value_name = "FILE", requires = "stamp")]
    stamp_key: Option<std::path::PathBuf>,
    /// The server's clock minus this host's, when known (`0` for one clock, as emulated hosts
    /// share; `-1.5ms`): one-way delays use it, not an estimate that takes both ways as equal
    #[arg(long, allow_hyphen_values = true, value_parser = |s: &str| wanperf_proto::units::parse_signed_duration(s).map_err(|e| e.to_string()))]
    clock_offset: Option<f64>,
    /// Newline-delimited JSON.
    #[arg(long)]
    json: bool,
}

/// `wanperf ping`.
pub fn run(a: PingArgs) -> Result<ExitCode> {
    if a.interval < 0.001 {
        bail!("-i must be at least 1 ms");
    }
    if a.timeout <= 0.0 {
        bail!("-W must be more than 0 s");
    }
    let stamp_key = a.stamp_key.as_deref().map(wanperf_engine::stamp::load_key).transpose()?;
    let std_port = a.stamp || a.twamp_light;
    let cfg = PingConfig {
        host: a.host.clone(),
        port: a.port.unwrap_or(match (std_port, a.owamp) {
            (_, true) => wanperf_owamp::OWAMP_PORT,
            (true, _) => wanperf_stamp::STAMP_PORT,
            _ => DEFAULT_PORT,
        }),
        count: a.count,
        interval: Duration::from_secs_f64(a.interval),
        size: a.size as usize,
        timeout: Duration::from_secs_f64(a.timeout),
        dscp: a.dscp,
        mode: match a.mode.as_str() {
            _ if a.stamp => PingMode::Stamp,
            _ if a.twamp_light => PingMode::TwampLight,
            "tcp" => PingMode::Tcp,
            "icmp" => PingMode::Icmp,
            _ => PingMode::Udp,
        },
        clock_offset_ns: a.clock_offset.map(|s| s * 1e9),
        stamp_key,
        wake: wanperf_engine::ping::WAKE,
    };
    if a.owamp {
        let ok = wanperf_engine::owamp::ping(&cfg, a.json, &INTERRUPTED)?;
        return Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE });
    }
    let mut live = PingLines { quiet: a.json };
    let (records, summary) = ping::run(&cfg, &mut live, &INTERRUPTED)?;
    let complete = summary.sent == a.count && summary.error.is_none();
    if a.json {
        for r in &records {
            outln!("{}", serde_json::to_string(r)?);
        }
        outln!("{}", serde_json::json!({"event": "end", "complete": complete, "summary": summary}));
    } else {
        for l in ping_summary(&a.host, &summary) {
            outln!("{l}");
        }
    }
    if let Some(e) = &summary.error {
        eprintln!("error: {e} (the summary holds what was measured)");
        return Ok(ExitCode::FAILURE);
    }
    Ok(if !complete {
        ExitCode::from(130)
    } else if summary.received == 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
