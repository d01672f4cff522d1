//! `wanperf calc`: the path arithmetic the seed studies did by hand.

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use serde_json::json;
use std::process::ExitCode;
use wanperf_stats::calc::{self, check_mss, parse_loss, parse_queue, rate_flag, window_flag};

/// `wanperf calc` subcommands.
#[derive(Subcommand, Debug)]
#[command(after_long_help = "\
Examples:
  wanperf calc bdp --rate 622M --rtt 67ms          # the window a path needs
  wanperf calc queue --delay 100ms --rate 25M      # seed 000: ≈ 300 kB ≈ 2100 packets
  wanperf calc queue --queue 300kB --rate 25M      # the delay a full queue adds
  wanperf calc window --window 64k --rtt 166ms     # the most a window allows
  wanperf calc mathis --rtt 166ms --loss 0.001     # Reno's loss-limited rate")]
pub enum CalcCmd {
    /// Bandwidth-delay product: the window (and socket buffer) a path needs.
    Bdp(BdpArgs),
    /// Queue size ↔ queueing delay at a bottleneck rate.
    Queue(QueueArgs),
    /// The highest rate a TCP window allows at an RTT.
    Window(WindowArgs),
    /// The Mathis et al. bound: MSS/RTT × √(3/2)/√p.
    Mathis(MathisArgs),
}

/// `calc bdp`.
#[derive(Args, Debug)]
pub struct BdpArgs {
    /// Bottleneck rate (e.g. 25M, 1G).
    #[arg(long)]
    rate: String,
    /// Round-trip time (e.g. 166ms).
    #[arg(long)]
    rtt: String,
    /// Segment size for the packet count.
    #[arg(long, default_value_t = 1460.0)]
    mss: f64,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// `calc queue`.
#[derive(Args, Debug)]
pub struct QueueArgs {
    /// Bottleneck rate.
    #[arg(long)]
    rate: String,
    /// Queueing delay to convert into a queue size.
    #[arg(long, conflicts_with = "queue", required_unless_present = "queue")]
    delay: Option<String>,
    /// Queue size (bytes, or packets with a `p` suffix) to convert into a delay.
    #[arg(long)]
    queue: Option<String>,
    /// Segment size for the packet count.
    #[arg(long, default_value_t = 1460.0)]
    mss: f64,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// `calc window`.
#[derive(Args, Debug)]
pub struct WindowArgs {
    /// TCP window (e.g. 64k).
    #[arg(long)]
    window: String,
    /// Round-trip time.
    #[arg(long)]
    rtt: String,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// `calc mathis`.
#[derive(Args, Debug)]
pub struct MathisArgs {
    /// Round-trip time.
    #[arg(long)]
    rtt: String,
    /// Packet loss probability (0.001 or 0.1%).
    #[arg(long)]
    loss: String,
    /// Segment size, bytes.
    #[arg(long, default_value_t = 1460.0)]
    mss: f64,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// Runs `wanperf calc`.
pub fn run(c: CalcCmd) -> Result<ExitCode> {
    let (json_out, text, v) = match c {
        CalcCmd::Bdp(a) => {
            let (r, t, m) = (rate_flag(&a.rate)?, crate::args::positive_secs("--rtt", &a.rtt)?, check_mss(a.mss)?);
            let b = calc::bdp_bytes(r, t);
            let text = calc::explain_bdp(r, t, m);
            (a.json, text, json!({"rate_bps": r, "rtt_s": t, "bdp_bytes": b, "packets": calc::packets(b, m)}))
        }
        CalcCmd::Queue(a) => {
            let (r, m) = (rate_flag(&a.rate)?, check_mss(a.mss)?);
            let (qb, delay) = match (&a.delay, &a.queue) {
                (Some(d), _) => {
                    let d = crate::args::positive_secs("--delay", d)?;
                    (calc::queue_bytes(d, r), d)
                }
                (None, Some(q)) => {
                    let b = parse_queue(q, m)?;
                    (b, calc::queue_delay_s(b, r))
                }
                (None, None) => bail!("give --delay or --queue"),
            };
            let text = calc::explain_queue(delay, r, qb, m);
            (a.json, text, json!({"rate_bps": r, "delay_s": delay, "queue_bytes": qb, "packets": calc::packets(qb, m)}))
        }
        CalcCmd::Window(a) => {
            let w = window_flag(&a.window)?;
            let t = crate::args::positive_secs("--rtt", &a.rtt)?;
            let r = calc::window_rate_bps(w, t);
            let text = calc::explain_window(w, t);
            (a.json, text, json!({"window_bytes": w, "rtt_s": t, "max_rate_bps": r}))
        }
        CalcCmd::Mathis(a) => {
            let t = crate::args::positive_secs("--rtt", &a.rtt)?;
            let m = check_mss(a.mss)?;
            let p = parse_loss(&a.loss)?;
            let r = calc::mathis_bps(m, t, p);
            let text = calc::explain_mathis(m, t, p);
            (a.json, text, json!({"mss_bytes": m, "rtt_s": t, "loss": p, "rate_bps": r}))
        }
    };
    if json_out {
        outln!("{v}");
    } else {
        outln!("{text}");
    }
    Ok(ExitCode::SUCCESS)
}
