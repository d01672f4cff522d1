//! Writes the report of a synthetic seed-000-like load study and says how long rendering took.
//!
//!     cargo run --release -p wanperf-report --example synthetic_report -- OUT.html [PROBES_PER_PHASE] [big]
//!
//! `big` sweeps 5 stream counts × 10 windows (50 cells); the default is 2 × 3.

use std::time::Instant;
use wanperf_report::synthetic;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let out = args.first().map_or("report.html", String::as_str);
    let probes: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(60);
    let big = args.get(2).is_some_and(|a| a == "big");
    let (streams, windows): (Vec<u32>, Vec<u64>) = if big {
        (vec![1, 2, 5, 10, 15], vec![8192, 16_384, 32_768, 51_200, 56_320, 61_440, 65_536, 131_072, 262_144, 512_000])
    } else {
        (vec![2, 10], vec![16_384, 65_536, 262_144])
    };
    let t = Instant::now();
    let data = synthetic::load_study("seed 000: effect of load on RTT and loss", &streams, &windows, probes, true);
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
