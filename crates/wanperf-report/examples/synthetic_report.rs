//! Writes the report of a synthetic seed-000-like load study and says how long rendering took.
//!
//!     cargo run --release -p wanperf-report --example synthetic_report -- OUT.html [PROBES_PER_PHASE] [big]
//!
//! `big` sweeps 5 stream counts × 10 windows (50 cells), `one` is one cell (10 streams of
//! 256 KiB, seed 000's first experiment), `tput` a throughput-only run over 1–8 streams; the
//! default is 2 streams counts × 3 windows.

use std::time::Instant;
use wanperf_report::synthetic;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let out = args.first().map_or("report.html", String::as_str);
    let probes: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(60);
    let (streams, windows): (Vec<u32>, Vec<u64>) = match args.get(2).map(String::as_str) {
        Some("big") => (
            vec![1, 2, 5, 10, 15],
            vec![8192, 16_384, 32_768, 51_200, 56_320, 61_440, 65_536, 131_072, 262_144, 512_000],
        ),
        Some("one") => (vec![10], vec![262_144]),
        _ => (vec![2, 10], vec![16_384, 65_536, 262_144]),
    };
    let t = Instant::now();
    let data = if args.get(2).is_some_and(|a| a == "tput") {
        synthetic::tput_study(&[1, 2, 4, 8])
    } else {
        synthetic::load_study("seed 000: effect of load on RTT and loss", &streams, &windows, probes, true)
    };
    let built = t.elapsed();
    let n: usize = data.cells.iter().map(|c| c.cell.probes.len()).sum();
    let t = Instant::now();
    let html = wanperf_report::render(&data);
    let took = t.elapsed();
    std::fs::write(out, &html).expect("write the report");
    eprintln!(
        "{} cells, {n} probes: data built in {built:.2?}, rendered in {took:.2?}, {} bytes to {out}",
        data.cells.len(),
        html.len()
    );
}
