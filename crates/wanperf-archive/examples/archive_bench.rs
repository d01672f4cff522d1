//! Archive benchmark (bench/archive.sh runs it): stores a synthetic 50-cell run with
//! 1,000,000 probes and 100,000 intervals into SQLite and, given a URL, PostgreSQL; reports
//! rows/s, and the median time of `cell_aggregates` and the time of `run_data` on that run.
//!
//! ```text
//! archive_bench [--sqlite PATH] [--postgres URL] [--cells N] [--probes N] [--intervals N] [--repeats N]
//! ```
//!
//! The SQLite file defaults to a new file in the temporary directory (removed afterwards);
//! PostgreSQL defaults to `$WANPERF_BENCH_POSTGRES` and is skipped without a URL. The
//! PostgreSQL run uses a schema of its own, dropped afterwards.

use serde_json::json;
use std::time::{Duration, Instant};
use wanperf_archive::{CellRecord, IntervalRow, NewRun, PgStore, ProbeRow, SqliteStore, Store};

struct Args {
    sqlite: Option<String>,
    postgres: Option<String>,
    cells: u32,
    probes: u64,
    intervals: u64,
    repeats: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        sqlite: None,
        postgres: std::env::var("WANPERF_BENCH_POSTGRES").ok().filter(|u| !u.is_empty()),
        cells: 50,
        probes: 1_000_000,
        intervals: 100_000,
        repeats: 7,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let num = |v: String| v.parse::<u64>().map_err(|e| format!("{v}: {e}"));
        match flag.as_str() {
            "--sqlite" => a.sqlite = Some(value()?),
            "--postgres" => a.postgres = Some(value()?).filter(|u| !u.is_empty()),
            "--cells" => a.cells = num(value()?)?.clamp(1, 100_000) as u32,
            "--probes" => a.probes = num(value()?)?,
            "--intervals" => a.intervals = num(value()?)?,
            "--repeats" => a.repeats = num(value()?)?.clamp(1, 1000) as usize,
            "-h" | "--help" => {
                println!("archive_bench [--sqlite PATH] [--postgres URL] [--cells N] [--probes N] [--intervals N] [--repeats N]");
                std::process::exit(0);
            }
            _ => return Err(format!("unknown argument {flag}")),
        }
    }
    Ok(a)
}

/// xorshift64*: reproducible data without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The synthetic cells: a load study (streams × windows), probes alternating between idle
/// and loaded phases (1 % lost, 0.1 % late), intervals for 4 streams and their sum.
fn cells(a: &Args) -> Vec<CellRecord> {
    let mut rng = Rng(0x5eed);
    let probes_per_cell = a.probes / u64::from(a.cells);
    let steps = a.intervals / u64::from(a.cells) / 5;
    (0..a.cells)
        .map(|index| {
            let probes = (0..probes_per_cell)
                .map(|seq| {
                    let loaded = (seq / 100) % 2 == 1;
                    let r = rng.next();
                    let rtt = if loaded { 40.0 + 30.0 * rng.next() } else { 20.0 + 2.0 * rng.next() };
                    ProbeRow {
                        seq,
                        phase: if loaded { "loaded" } else { "unloaded" }.to_string(),
                        sent_s: seq as f64 * 0.01,
                        rtt_ms: (r >= 0.011).then_some(rtt),
                        late: r < 0.001,
                    }
                })
                .collect();
            let mut intervals = Vec::new();
            for stream in [-1, 0, 1, 2, 3] {
                for k in 0..steps {
                    let bps = if stream < 0 { 9.0e8 } else { 2.25e8 } * (0.9 + 0.2 * rng.next());
                    intervals.push(IntervalRow {
                        stream,
                        start_s: k as f64,
                        end_s: k as f64 + 1.0,
                        bytes: (bps / 8.0) as u64,
                        throughput_bps: bps,
                        retransmits: (rng.next() * 10.0) as u64,
                        cwnd_bytes: (stream >= 0).then(|| (rng.next() * 1e6) as u64),
                        srtt_us: (stream >= 0).then(|| 40_000 + (rng.next() * 30_000.0) as u32),
                        tcp: None,
                    });
                }
            }
            CellRecord {
                index,
                repeat: 0,
                kind: "load".into(),
                params: [
                    ("streams".to_string(), json!(1 + index % 10)),
                    ("window".to_string(), json!(65536 << (index / 10))),
                ]
                .into(),
                ok: true,
                failure: None,
                started_unix: 1.7e9 + f64::from(index) * 30.0,
                duration_s: 30.0,
                summary: json!({"throughput_bps": 9e8, "retransmits": 12}),
                hosts: None,
                emulator: None,
                intervals,
                probes,
            }
        })
        .collect()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn bench(name: &str, store: &mut dyn Store, cells: &[CellRecord], repeats: usize) -> Result<(), String> {
    let run = store
        .create_run(&NewRun {
            study: "archive bench".into(),
            study_text: String::new(),
            spec: json!({}),
            software: "archive_bench".into(),
            cells_planned: cells.len() as u32,
            started_unix: 1.7e9,
        })
        .map_err(|e| e.to_string())?;
    let rows: usize = cells.iter().map(|c| c.probes.len() + c.intervals.len()).sum();
    let t = Instant::now();
    for c in cells {
        store.store_cell(run, c).map_err(|e| e.to_string())?;
    }
    let took = t.elapsed();
    println!(
        "{name}: stored {} cells, {} probes + {} intervals in {:.2} s: {:.0} rows/s",
        cells.len(),
        cells.iter().map(|c| c.probes.len()).sum::<usize>(),
        cells.iter().map(|c| c.intervals.len()).sum::<usize>(),
        took.as_secs_f64(),
        rows as f64 / took.as_secs_f64()
    );
    let mut times = Vec::new();
    for _ in 0..repeats {
        let t = Instant::now();
        let agg = store.cell_aggregates(run).map_err(|e| e.to_string())?;
        times.push(t.elapsed());
        assert_eq!(agg.len(), cells.len());
    }
    let (min, max) = (times.iter().min().copied().unwrap_or_default(), times.iter().max().copied().unwrap_or_default());
    println!(
        "{name}: cell_aggregates median {:.1} ms ({repeats} runs, {:.1}-{:.1} ms)",
        ms(median(times)),
        ms(min),
        ms(max)
    );
    let t = Instant::now();
    let data = store.run_data(run).map_err(|e| e.to_string())?;
    println!("{name}: run_data {:.0} ms ({} cells)", ms(t.elapsed()), data.cells.len());

    // The report of this run is timed by bench/archive.sh with `wanperf report` (the report
    // crate depends on this one, so it cannot be called from here).
    Ok(())
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let cells = cells(&args);
    let mut failed = false;

    let (path, temp) = match &args.sqlite {
        Some(p) => (std::path::PathBuf::from(p), false),
        None => (std::env::temp_dir().join(format!("wanperf-archive-bench-{}.sqlite", std::process::id())), true),
    };
    match SqliteStore::open(&path) {
        Ok(mut s) => {
            if let Err(e) = bench("sqlite", &mut s, &cells, args.repeats) {
                eprintln!("error: sqlite: {e}");
                failed = true;
            }
        }
        Err(e) => {
            eprintln!("error: sqlite: {e}");
            failed = true;
        }
    }
    if let Ok(m) = std::fs::metadata(&path) {
        println!("sqlite: file {} ({:.0} MB)", path.display(), m.len() as f64 / 1e6);
    }
    if temp {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }

    match &args.postgres {
        None => println!("postgres: skipped (give --postgres URL or WANPERF_BENCH_POSTGRES)"),
        Some(url) => {
            if let Err(e) = postgres(url, &cells, args.repeats) {
                eprintln!("error: postgres: {e}");
                failed = true;
            }
        }
    }
    std::process::exit(i32::from(failed));
}

/// The PostgreSQL run, in a schema of its own that is dropped afterwards.
fn postgres(url: &str, cells: &[CellRecord], repeats: usize) -> Result<(), String> {
    let mut admin = ::postgres::Client::connect(url, ::postgres::NoTls).map_err(|e| e.to_string())?;
    let schema = format!("wanperf_bench_{}", std::process::id());
    admin.batch_execute(&format!("CREATE SCHEMA {schema}")).map_err(|e| e.to_string())?;
    let sep = if url.contains('?') { '&' } else { '?' };
    let result = PgStore::connect(&format!("{url}{sep}options=-csearch_path%3D{schema}"))
        .map_err(|e| e.to_string())
        .and_then(|mut s| bench("postgres", &mut s, cells, repeats));
    let _ = admin.batch_execute(&format!("DROP SCHEMA {schema} CASCADE"));
    result
}
