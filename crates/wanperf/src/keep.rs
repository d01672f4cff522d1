//! The archive's commands: `runs`, `export`, `import`, `report`.

use crate::store::{describe_db, open_store, open_store_read_only};
use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, ValueEnum};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use wanperf_archive::Store;

/// Options every archive command takes.
#[derive(Args, Debug, Clone)]
pub struct DbArgs {
    /// Archive: a SQLite file or a postgres:// URL (default: $WANPERF_DB, or
    /// ~/.local/share/wanperf/archive.sqlite).
    #[arg(long, value_name = "DB")]
    db: Option<String>,
}

/// `--save` and `--db` of `tput`, `copy` and `trace`.
#[derive(Args, Debug, Clone)]
pub struct SaveArgs {
    /// Store the test in the archive as a run of its own (`wanperf runs` lists it, `wanperf
    /// report` draws it); an incomplete one is stored too, marked failed.
    #[arg(long)]
    save: bool,
    /// With --save: the archive, a SQLite file or a postgres:// URL (default: $WANPERF_DB,
    /// or ~/.local/share/wanperf/archive.sqlite). Naming one implies --save.
    #[arg(long, value_name = "DB")]
    db: Option<String>,
}

impl SaveArgs {
    /// Whether to store.
    pub fn wanted(&self) -> bool {
        self.save || self.db.is_some()
    }

    /// Opens the archive before the test, so that a wrong --db fails before anything is
    /// measured.
    pub fn open(&self) -> Result<Option<Box<dyn Store>>> {
        self.wanted().then(|| open_store(self.db.as_deref())).transpose()
    }
}

/// Stores the NDJSON records of a `tput` or `copy` as a run; returns its id. The command line
/// is kept as the run's text.
pub fn save_records(store: &mut dyn Store, ndjson: &str) -> Result<i64> {
    wanperf_archive::save::records(store, ndjson, &command_line()).map_err(|e| anyhow!("cannot store: {e}"))
}

/// The command line, kept as a saved run's text.
fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

/// Why a measurement to save failed: interrupted, or what it `missed`; `None`: it succeeded.
pub fn failure(complete: bool, missed: Option<&str>) -> Option<String> {
    if complete {
        missed.map(str::to_string)
    } else {
        Some("interrupted".to_string())
    }
}

/// Stores a measurement of one cell made outside a study (`trace`, `capacity`) begun at
/// `started` (see [`wanperf_archive::save::measurement`]) and says where; returns the run's id.
pub fn save_measurement(
    store: &mut dyn Store,
    kind: &str,
    params: &[(&str, serde_json::Value)],
    summary: serde_json::Value,
    failure: Option<String>,
    started: std::time::SystemTime,
    json: bool,
) -> Result<i64> {
    let m = wanperf_archive::save::Measurement { kind, params, summary, failure, started };
    let id =
        wanperf_archive::save::measurement(store, m, &command_line(), &crate::software()).context("cannot store")?;
    say_saved(id, json);
    Ok(id)
}

/// Stores the records of a test that started (a test that did not printed nothing to store;
/// one that did always printed its end record) and says where: a `saved` record with --json,
/// else a line on stderr.
pub fn save_and_say(store: &mut dyn Store, ndjson: &str, json: bool) -> Result<()> {
    if ndjson.is_empty() {
        return Ok(());
    }
    let id = save_records(store, ndjson)?;
    say_saved(id, json);
    Ok(())
}

/// Says where a measurement was stored: a `saved` record with --json, else a line on stderr.
fn say_saved(id: i64, json: bool) {
    if json {
        outln!("{}", serde_json::json!({"event": "saved", "run": id}));
    } else {
        eprintln!("stored as run {id} (wanperf report {id} -o report.html)");
    }
}

/// `wanperf runs`.
#[derive(Args, Debug)]
pub struct RunsArgs {
    #[command(flatten)]
    db: DbArgs,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// `wanperf export`.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  wanperf export 3 --format json -o run3.json          # the whole run, one JSON document
  wanperf export latest --format csv --table probes    # every probe: cell, phase, seq, RTT
  wanperf export 3 --format csv --table intervals -o iv.csv
  wanperf export 3 --format parquet --table probes -o probes.parquet")]
pub struct ExportArgs {
    /// Run id, or `latest`.
    run: String,
    /// Output format.
    #[arg(long, value_enum, default_value = "json")]
    format: Format,
    /// For CSV and Parquet: which rows.
    #[arg(long, value_enum, default_value = "cells")]
    table: Table,
    /// Output file (default: standard output).
    #[arg(short, long)]
    output: Option<PathBuf>,
    #[command(flatten)]
    db: DbArgs,
}

/// Export formats.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum Format {
    /// One JSON document with the run, its cells, intervals and probes.
    Json,
    /// Comma-separated rows of one table.
    Csv,
    /// One table as a Parquet file (typed columns; NULL for lost probes).
    Parquet,
}

/// CSV tables.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum Table {
    /// One row per cell, parameters as columns.
    Cells,
    /// One row per interval and stream.
    Intervals,
    /// One row per probe.
    Probes,
}

/// `wanperf import`.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  iperf3 -c HOST -J > run.json && wanperf import iperf3 run.json
  ping -D -c 100 HOST > ping.txt && wanperf import ping ping.txt
  wanperf copy big.dat HOST: --json > copy.ndjson && wanperf import wanperf copy.ndjson
Each file becomes a run of its own with one cell; `wanperf runs` lists it.")]
pub struct ImportArgs {
    /// What produced the file.
    #[arg(value_enum)]
    tool: Tool,
    /// The files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    #[command(flatten)]
    db: DbArgs,
    /// One JSON line per imported file.
    #[arg(long)]
    json: bool,
}

/// Importable tools.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum Tool {
    /// `iperf3 -J` output.
    Iperf3,
    /// iputils `ping` output (with or without -D).
    Ping,
    /// wanperf's own `tput --json` or `copy --json` output (or use --save at the time).
    Wanperf,
}

/// `wanperf report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Run id, or `latest`.
    run: String,
    /// The HTML file to write.
    #[arg(short, long, default_value = "report.html")]
    output: PathBuf,
    #[command(flatten)]
    db: DbArgs,
    /// Draw the time series of the cell these axis values select (`AXIS=VALUE`, several
    /// separated by spaces, all must match), instead of the cells the report picks; repeat
    /// for more cells: --series 'streams=4 window=64K' --series streams=1
    #[arg(long, value_name = "AXIS=VALUE ...")]
    series: Vec<String>,
    /// Say what was written as one JSON line.
    #[arg(long)]
    json: bool,
}

/// The cells (by index) that each `--series` selection names, in order.
fn series_cells(data: &wanperf_archive::RunData, selections: &[String]) -> Result<Vec<u32>> {
    selections
        .iter()
        .map(|sel| {
            wanperf_study::expect::select_cell(data.run.id, &data.cells, sel)
                .map_err(|e| anyhow!("--series `{sel}`: {e}"))
        })
        .collect()
}

/// Resolves `latest` or a number to a run id.
pub fn run_id(store: &mut dyn Store, which: &str) -> Result<i64> {
    if which == "latest" {
        return store.runs()?.first().map(|r| r.id).ok_or_else(|| anyhow!("the archive has no runs yet"));
    }
    which.parse().map_err(|_| anyhow!("`{which}` is not a run id (a number, or `latest`)"))
}

/// `wanperf runs`.
pub fn runs(a: RunsArgs) -> Result<ExitCode> {
    let runs = match open_store_read_only(a.db.db.as_deref()) {
        Ok(mut store) => store.runs()?,
        // Nothing stored yet is an empty list, not an error (and creates nothing).
        Err(e) if matches!(e.downcast_ref(), Some(wanperf_archive::ArchiveError::NoArchive(_))) => Vec::new(),
        Err(e) => return Err(e),
    };
    if a.json {
        for r in &runs {
            let mut v = serde_json::to_value(r)?;
            if let Some(o) = v.as_object_mut() {
                o.remove("study_text");
                o.remove("spec");
            }
            outln!("{v}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    if runs.is_empty() {
        outln!("no runs in {}", describe_db(a.db.db.as_deref()));
        return Ok(ExitCode::SUCCESS);
    }
    for l in wanperf_report::runs_table(&runs) {
        outln!("{l}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `wanperf export`.
pub fn export(a: ExportArgs) -> Result<ExitCode> {
    if matches!(a.format, Format::Parquet) && a.output.is_none() && std::io::IsTerminal::is_terminal(&std::io::stdout())
    {
        bail!("Parquet is binary: give -o FILE (or redirect standard output)");
    }
    let mut store = open_store_read_only(a.db.db.as_deref())?;
    let id = run_id(store.as_mut(), &a.run)?;
    let data = store.run_data(id)?;
    let mut out: Box<dyn Write> = match &a.output {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("cannot create {}", p.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    use wanperf_archive::export as x;
    let table = match a.table {
        Table::Cells => x::Table::Cells,
        Table::Intervals => x::Table::Intervals,
        Table::Probes => x::Table::Probes,
    };
    let format = match a.format {
        Format::Json => x::Format::Json,
        Format::Csv => x::Format::Csv(table),
        Format::Parquet => x::Format::Parquet(table),
    };
    x::export(&data, format, &mut out)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// `wanperf import`.
pub fn import(a: ImportArgs) -> Result<ExitCode> {
    let mut store = open_store(a.db.db.as_deref())?;
    for f in &a.files {
        let text = std::fs::read_to_string(f).with_context(|| format!("cannot read {}", f.display()))?;
        let parsed = match a.tool {
            Tool::Iperf3 => wanperf_archive::import::import_iperf3(&text),
            Tool::Ping => wanperf_archive::import::import_ping(&text),
            Tool::Wanperf => wanperf_archive::import::import_wanperf(&text),
        };
        let (mut run, cell) = parsed.map_err(|e| anyhow!("{}: {e}", f.display()))?;
        run.study = format!("{} ({})", run.study, f.file_name().map_or(String::new(), |n| n.to_string_lossy().into()));
        let id = wanperf_archive::save::run_of_one(
            store.as_mut(),
            &run,
            &cell,
            wanperf_archive::RunStatus::Complete,
            run.started_unix,
        )?;
        let intervals = cell.intervals.iter().filter(|i| i.stream == -1).count();
        if a.json {
            outln!(
                "{}",
                serde_json::json!({"file": f, "run": id, "intervals": intervals, "probes": cell.probes.len()})
            );
        } else {
            outln!("{}: run {id} ({intervals} intervals, {} probes)", f.display(), cell.probes.len());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `wanperf report`.
pub fn report(a: ReportArgs) -> Result<ExitCode> {
    let mut store = open_store_read_only(a.db.db.as_deref())?;
    let id = run_id(store.as_mut(), &a.run)?;
    let figures = write_report(store.as_mut(), id, &a.output, &a.series)?;
    if a.json {
        outln!("{}", serde_json::json!({"run": id, "output": a.output, "figures": figures}));
    } else {
        outln!("report for run {id}: {} ({figures} figures)", a.output.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Renders run `id` into `out` (with the time series of the cells `series` selects, if
/// any); returns how many figures it holds.
pub fn write_report(store: &mut dyn Store, id: i64, out: &std::path::Path, series: &[String]) -> Result<usize> {
    let data = store.run_data(id)?;
    if data.cells.is_empty() {
        bail!("run {id} has no cells yet");
    }
    let opts =
        wanperf_report::Options { series: if series.is_empty() { None } else { Some(series_cells(&data, series)?) } };
    let report = wanperf_report::report_with(&data, &opts);
    std::fs::write(out, &report.html).with_context(|| format!("cannot write {}", out.display()))?;
    Ok(report.figures.len())
}
