//! `wanperf study run`: runs a study file's cells unattended and keeps every result in the
//! archive. Each cell on an emulated path gets a fresh path of its own configuration, a
//! `wanperf serve` on its right host and the measurement on its left; the measurement's NDJSON
//! becomes one archive cell, stored in one transaction, so a killed study resumes exactly.

pub mod data;
pub mod flags;
pub use wanperf_study::spec;

use crate::store::{describe_db, open_store};
use crate::INTERRUPTED;
use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use serde_json::{json, Value};
use spec::{CellPlan, Kind, Study, Target};
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use wanperf_archive::{CellRecord, NewRun, ProbeRow, RunStatus, Store};
use wanperf_emu::path::Host;
use wanperf_net::path::Path;

/// `wanperf study` subcommands.
#[derive(Subcommand, Debug)]
pub enum StudyCmd {
    /// Run a study file (see scenarios/), storing every cell in the archive.
    Run(RunArgs),
}

/// Options of `study run`.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  wanperf study run scenarios/seed000-load-rtt.toml --dry-run   # list the cells and the time
  wanperf study run scenarios/seed000-load-rtt.toml             # run, store, print the table
  wanperf study run scenarios/seed000-load-rtt.toml --resume    # finish a killed run
  wanperf report latest -o report.html

The archive is SQLite at $WANPERF_DB, or $XDG_DATA_HOME/wanperf/archive.sqlite, or
~/.local/share/wanperf/archive.sqlite; --db PATH or --db postgres://user@host/db picks another.")]
pub struct RunArgs {
    /// The study file (TOML).
    file: PathBuf,
    /// List the cells and the estimated time, run nothing.
    #[arg(long)]
    dry_run: bool,
    /// Finish an unfinished run of this study: its latest, or the run id given.
    #[arg(long, value_name = "RUN", num_args = 0..=1, default_missing_value = "latest")]
    resume: Option<String>,
    /// Archive: a SQLite file or a postgres:// URL.
    #[arg(long, value_name = "DB")]
    db: Option<String>,
    /// Print each stored cell as JSON and a final summary record.
    #[arg(long)]
    json: bool,
}

fn now_unix() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// Reads and parses a study file; errors name the file and line.
pub fn load(file: &std::path::Path) -> Result<(String, Study)> {
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let study = flags::parse(&text).map_err(|e| anyhow!("{}: {e}", file.display()))?;
    Ok((text, study))
}

impl RunArgs {
    /// Whether this run needs network namespaces (an emulated path, not a dry run).
    pub fn needs_path(&self) -> bool {
        !self.dry_run && load(&self.file).is_ok_and(|(_, s)| matches!(s.target, Target::Path { .. }))
    }
}

/// `wanperf study run`.
pub fn run(a: RunArgs) -> Result<ExitCode> {
    let (text, study) = load(&a.file)?;
    if a.dry_run {
        return dry_run(&study, &study.cells(), a.json);
    }
    let mut store = open_store(a.db.as_deref())?;
    let out = execute(store.as_mut(), &text, &study, a.resume.as_deref(), a.json)?;
    if !a.json {
        outln!(
            "run {}: {} of {} cells stored{} in {}",
            out.run_id,
            out.stored,
            out.planned,
            if out.failures > 0 { format!(" ({} failed, kept as data)", out.failures) } else { String::new() },
            describe_db(a.db.as_deref())
        );
        if !out.complete {
            outln!("stopped early: `wanperf study run {} --resume {}` finishes it", a.file.display(), out.run_id);
        }
        outln!("report: wanperf report {} -o report.html", out.run_id);
    }
    Ok(if out.complete && out.failures == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// How a study run went.
pub struct Outcome {
    /// The run's id in the archive.
    pub run_id: i64,
    /// Every planned cell is stored.
    pub complete: bool,
    /// Cells stored (earlier sessions of a resumed run included).
    pub stored: usize,
    /// Cells planned.
    pub planned: usize,
    /// Cells that failed (stored as failures).
    pub failures: usize,
}

/// Runs (or resumes) a study into `store`, printing the headline table (or JSON records).
pub fn execute(store: &mut dyn Store, text: &str, study: &Study, resume: Option<&str>, json: bool) -> Result<Outcome> {
    let cells = study.cells();
    let (run_id, done) = match resume {
        None => {
            let run = NewRun {
                study: study.name.clone(),
                study_text: text.to_string(),
                spec: serde_json::to_value(study)?,
                software: crate::software(),
                cells_planned: cells.len() as u32,
                started_unix: now_unix(),
            };
            (store.create_run(&run)?, Vec::new())
        }
        Some(which) => {
            let id = match which {
                "latest" => store
                    .runs()?
                    .into_iter()
                    .find(|r| r.study == study.name && r.status != RunStatus::Complete)
                    .map(|r| r.id)
                    .ok_or_else(|| anyhow!("no unfinished run of study `{}` to resume", study.name))?,
                n => n.parse().map_err(|_| anyhow!("--resume takes a run id, not `{n}`"))?,
            };
            let info = store.run_info(id)?;
            if info.study_text != text {
                bail!("run {id} was made from a different study file; resume it with the file it was started with");
            }
            (id, store.done_cells(id)?)
        }
    };
    let todo: Vec<&CellPlan> = cells.iter().filter(|c| !done.contains(&(c.index, c.repeat))).collect();
    let bar = progress(cells.len(), done.len(), study, &todo);
    let exe = std::env::current_exe().context("cannot find the wanperf executable")?;
    let mut failures = 0usize;
    let mut stored = done.len();
    let mut stopped = false;
    for (i, cell) in todo.iter().enumerate() {
        if INTERRUPTED.load(Ordering::Acquire) {
            stopped = true;
            break;
        }
        if let Some(b) = &bar {
            b.set_message(describe(cell));
        }
        let rec = run_cell(study, cell, &exe);
        if INTERRUPTED.load(Ordering::Acquire) && !rec.ok {
            // A cell cut short by Ctrl-C is not a result: leave it for --resume.
            stopped = true;
            break;
        }
        failures += usize::from(!rec.ok);
        store.store_cell(run_id, &rec).context("cannot store the cell")?;
        stored += 1;
        if json {
            outln!(
                "{}",
                json!({"event": "cell", "run": run_id, "index": rec.index, "repeat": rec.repeat,
                "params": rec.params, "ok": rec.ok, "failure": rec.failure, "summary": rec.summary})
            );
        }
        if let Some(b) = &bar {
            b.inc(1);
            if let Some(f) = &rec.failure {
                b.println(format!("cell {} failed: {f}", describe(cell)));
            }
        }
        if i + 1 < todo.len() && study.pause_s > 0.0 {
            crate::sleep_unless_interrupted(study.pause_s);
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let complete = !stopped && stored == cells.len();
    let status = if complete { RunStatus::Complete } else { RunStatus::Incomplete };
    store.finish_run(run_id, status, now_unix())?;
    let aggs = store.cell_aggregates(run_id)?;
    if json {
        outln!(
            "{}",
            json!({"event": "end", "run": run_id, "complete": complete, "cells_stored": stored,
            "cells_planned": cells.len(), "failed": failures, "cells": aggs})
        );
    } else if study.kind == Kind::Copy {
        print_copy_headline(study, &store.run_data(run_id)?.cells);
    } else if study.kind == Kind::Capacity {
        print_capacity_headline(study, &store.run_data(run_id)?.cells);
    } else if study.kind == Kind::Trace {
        print_trace_headline(study, &store.run_data(run_id)?.cells);
    } else {
        print_headline(study, &aggs);
    }
    Ok(Outcome { run_id, complete, stored, planned: cells.len(), failures })
}

/// Options of `wanperf demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Archive: a SQLite file or a postgres:// URL (default: the user's archive).
    #[arg(long, value_name = "DB")]
    db: Option<String>,
    /// Where to write the report.
    #[arg(short, long, default_value = "wanperf-demo.html")]
    output: PathBuf,
}

/// The demo study: seed 000 on the SLAC→CERN 2000 path, scaled down.
pub const DEMO_STUDY: &str = include_str!("../../../../scenarios/demo.toml");

/// `wanperf demo`: seed 000 ("Effect of load on RTT and loss") re-run on an emulated
/// SLAC→CERN 2000 path, stored in the archive, with a report.
pub fn demo(a: DemoArgs) -> Result<ExitCode> {
    let study = flags::parse(DEMO_STUDY).map_err(|e| anyhow!("demo study: {e}"))?;
    let est: f64 = study.cells().iter().map(|c| study.estimate_s(c, &flags::CliFlags) + study.pause_s).sum();
    outln!("wanperf demo: seed 000 (\"Effect of load on RTT and loss\", SLAC → CERN, 2000) on an emulated path");
    outln!("{}", study.description.trim());
    outln!("{} cells, about {}\n", study.cells().len(), fmt_secs(est));
    let mut store = open_store(a.db.as_deref())?;
    let out = execute(store.as_mut(), DEMO_STUDY, &study, None, false)?;
    let figures = crate::keep::write_report(store.as_mut(), out.run_id, &a.output)?;
    outln!("\nrun {} stored in {}", out.run_id, describe_db(a.db.as_deref()));
    outln!("report: {} ({figures} figures, open it in a browser)", a.output.display());
    if !out.complete || out.failures > 0 {
        outln!("({} of {} cells measured, {} failed)", out.stored, out.planned, out.failures);
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

fn describe(c: &CellPlan) -> String {
    let v: Vec<String> = c.values.iter().map(|(k, v)| format!("{}={v}", spec::param_key(k))).collect();
    let r = if c.repeat > 0 { format!(" (repeat {})", c.repeat + 1) } else { String::new() };
    if v.is_empty() {
        format!("cell {}{r}", c.index)
    } else {
        format!("{}{r}", v.join(" "))
    }
}

fn progress(total: usize, done: usize, study: &Study, todo: &[&CellPlan]) -> Option<indicatif::ProgressBar> {
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) && std::env::var_os("WANPERF_PROGRESS").is_none() {
        return None;
    }
    let b = indicatif::ProgressBar::with_draw_target(Some(total as u64), indicatif::ProgressDrawTarget::stderr());
    if let Ok(st) = indicatif::ProgressStyle::with_template("{bar:30} cells {pos}/{len} · {msg} · ETA {eta}") {
        b.set_style(st);
    }
    b.set_position(done as u64);
    let est: f64 = todo.iter().map(|c| study.estimate_s(c, &flags::CliFlags) + study.pause_s).sum();
    b.println(format!("{}: {} cells to run, about {}", study.name, todo.len(), fmt_secs(est)));
    b.enable_steady_tick(Duration::from_millis(500));
    Some(b)
}

fn fmt_secs(s: f64) -> String {
    let s = s.round() as u64;
    if s >= 3600 {
        format!("{} h {:02} min", s / 3600, s / 60 % 60)
    } else if s >= 60 {
        format!("{} min {:02} s", s / 60, s % 60)
    } else {
        format!("{s} s")
    }
}

fn dry_run(study: &Study, cells: &[CellPlan], json: bool) -> Result<ExitCode> {
    let total: f64 =
        cells.iter().map(|c| study.estimate_s(c, &flags::CliFlags)).sum::<f64>() + study.pause_s * cells.len() as f64;
    if json {
        let list: Vec<Value> = cells
            .iter()
            .map(|c| {
                json!({"index": c.index, "repeat": c.repeat, "params": study.params(c),
                    "link": study.link_argv(c), "measure": study.measure_argv(c, "PEER", None), "estimate_s": study.estimate_s(c, &flags::CliFlags)})
            })
            .collect();
        outln!("{}", json!({"study": study.name, "cells": list, "estimate_s": total}));
        return Ok(ExitCode::SUCCESS);
    }
    outln!("{} ({} study, {} cells)", study.name, study.kind.command(), cells.len());
    for (n, c) in cells.iter().enumerate() {
        let link = study.link_argv(c).join(" ");
        let m = study.measure_argv(c, "PEER", None).join(" ");
        let link = if link.is_empty() { String::new() } else { format!("path {link} · ") };
        outln!(
            "{:>4}. {:<40} {link}wanperf {m} (≈ {})",
            n + 1,
            describe(c),
            fmt_secs(study.estimate_s(c, &flags::CliFlags))
        );
    }
    outln!("estimated time: {}", fmt_secs(total));
    Ok(ExitCode::SUCCESS)
}

/// Runs one cell; whatever happens, returns a record (failures are data).
fn run_cell(study: &Study, cell: &CellPlan, exe: &std::path::Path) -> CellRecord {
    let started = now_unix();
    let t0 = Instant::now();
    let mut rec = CellRecord {
        index: cell.index,
        repeat: cell.repeat,
        kind: study.kind.command().to_string(),
        params: study.params(cell),
        ok: false,
        started_unix: started,
        ..Default::default()
    };
    // A copy's data, made afresh for the cell, and (on a path) the server's root it goes to.
    let scratch = match study.data(cell).map(|d| copy_data(&d, cell)).transpose() {
        Ok(s) => s,
        Err(e) => {
            rec.failure = Some(format!("{e:#}"));
            rec.duration_s = t0.elapsed().as_secs_f64();
            return rec;
        }
    };
    let data = scratch.as_ref().map(|s| s.path().join("data"));
    let data_arg = data.as_ref().map_or_else(String::new, |d| d.display().to_string());
    let outcome = match &study.target {
        Target::Path { .. } => {
            let root = scratch.as_ref().map(|s| s.path().join("root"));
            on_path(study, cell, exe, &data_arg, root.as_deref())
        }
        Target::Host { host, port } => {
            let mut c = Command::new(exe);
            c.args(study.argv_with_data(cell, host, Some(*port), &data_arg));
            // The measurement dies with the study (kill -9 included), as on a path.
            wanperf_sys::die_with_parent(&mut c);
            measure(c, study.estimate_s(cell, &flags::CliFlags)).map(|m| (m, None))
        }
    };
    match outcome {
        Ok((m, emulator)) => {
            fill(&mut rec, study.kind, &m.records);
            rec.emulator = emulator;
            rec.ok = m.success && !rec.summary.is_null();
            if !rec.ok {
                rec.failure = Some(m.error.unwrap_or_else(|| "the measurement printed no summary".into()));
            }
        }
        Err(e) => rec.failure = Some(format!("{e:#}")),
    }
    rec.duration_s = t0.elapsed().as_secs_f64();
    rec
}

/// What a measurement process printed.
struct Measured {
    records: Vec<Value>,
    success: bool,
    error: Option<String>,
}

/// Runs a measurement command to its end (or its deadline), collecting its NDJSON.
fn measure(mut c: Command, estimate_s: f64) -> Result<Measured> {
    c.stdout(Stdio::piped()).stderr(Stdio::piped()).stdin(Stdio::null());
    let mut child = c.spawn().context("cannot start the measurement")?;
    let out = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
    let mut err = child.stderr.take().ok_or_else(|| anyhow!("no stderr"))?;
    let reader = std::thread::spawn(move || {
        BufReader::new(out)
            .lines()
            .map_while(|l| l.ok())
            .filter_map(|l| serde_json::from_str::<Value>(&l).ok())
            .collect()
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs_f64(estimate_s * 1.5 + 30.0);
    let status = crate::child::wait_child(&mut child, Some(deadline));
    let records: Vec<Value> = reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).map(|l| l.trim().to_string());
    Ok(match status {
        Some(st) => Measured { records, success: st.success(), error: last },
        None => Measured {
            records,
            success: false,
            error: Some(if INTERRUPTED.load(Ordering::Acquire) {
                "interrupted".into()
            } else {
                format!("no result within {:.0} s", estimate_s * 1.5 + 30.0)
            }),
        },
    })
}

/// Runs a cell on a fresh emulated path; returns what it measured and the path's counters.
/// A scratch directory with the copy's data in `data/` and an empty `root/` for the server.
fn copy_data(d: &spec::DataSpec, cell: &CellPlan) -> Result<data::Scratch> {
    let s = data::Scratch::new("study-copy")?;
    let (src, root) = (s.path().join("data"), s.path().join("root"));
    for dir in [&src, &root] {
        std::fs::create_dir(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    data::make(&src, d, u64::from(cell.index) << 32 | u64::from(cell.repeat))?;
    Ok(s)
}

fn on_path(
    study: &Study,
    cell: &CellPlan,
    exe: &std::path::Path,
    data: &str,
    root: Option<&std::path::Path>,
) -> Result<(Measured, Option<Value>)> {
    let cfg = flags::link_config(study, cell)?;
    let path = Path::start(&cfg, None)?;
    let exe_s = exe.display().to_string();
    // `iperf3 = true` in [measure]: the far end is Debian's iperf3 server, not wanperf's.
    let iperf3 = study.measure.iter().any(|(k, v)| k == "iperf3" && v == "true");
    let serve: Vec<String> = if iperf3 {
        ["iperf3", "-s", "-p", "5201", "--forceflush"].map(String::from).to_vec()
    } else {
        let mut v: Vec<String> = [exe_s.as_str(), "serve", "--listen", "0.0.0.0:5301", "--allow", "198.18.0.0/15"]
            .map(String::from)
            .to_vec();
        if let Some(r) = root {
            v.extend(["--root".to_string(), r.display().to_string()]);
        }
        v
    };
    let mut right = crate::path::contained(&path, Host::Right, &serve)?;
    if iperf3 {
        right.stdout(Stdio::piped()).stderr(Stdio::null()).stdin(Stdio::null());
    } else {
        right.stdout(Stdio::null()).stderr(Stdio::piped()).stdin(Stdio::null());
    }
    let mut server = right.spawn().context("cannot start the server on the right host")?;
    let ready = crate::child::wait_ready(&mut server, "the server on the right host", 10.0);
    let result = ready.and_then(|()| {
        let mut argv = vec![exe_s.clone()];
        argv.extend(study.argv_with_data(cell, &Host::Right.addr().to_string(), None, data));
        let left = crate::path::contained(&path, Host::Left, &argv)?;
        measure(left, study.estimate_s(cell, &flags::CliFlags))
    });
    crate::child::stop_child(&mut server);
    let stats = path.stop();
    let emulator = json!({"config": cfg, "stats": stats});
    result.map(|m| (m, Some(emulator)))
}

/// Fills a cell record from a measurement's NDJSON records.
fn fill(rec: &mut CellRecord, kind: Kind, records: &[Value]) {
    if kind == Kind::Copy {
        // The same reading as `copy --save` and `wanperf import wanperf`.
        let ndjson: Vec<String> = records.iter().map(Value::to_string).collect();
        if let Ok((_, c)) = wanperf_archive::import::import_wanperf(&ndjson.join("\n")) {
            rec.summary = c.summary;
            rec.intervals = c.intervals;
            rec.hosts = c.hosts;
            // What the copy reports of itself (way, streams, block size, …) beside the axes.
            for (k, v) in c.params {
                rec.params.entry(k).or_insert(v);
            }
        }
        return;
    }
    let f = |v: &Value| v.as_f64();
    for r in records {
        match r["event"].as_str() {
            Some("start") if !r["client_host"].is_null() => {
                rec.hosts = Some(json!({"client": r["client_host"], "server": r["server_host"]}));
            }
            Some("interval") => rec.intervals.extend(wanperf_archive::import::wanperf_interval_rows(r)),
            Some("probe") => rec.probes.push(ProbeRow {
                seq: r["seq"].as_u64().unwrap_or(0),
                phase: r["phase"].as_str().unwrap_or("").to_string(),
                sent_s: f(&r["sent_s"]).unwrap_or(0.0),
                rtt_ms: if r["status"] == "ok" { f(&r["rtt_ms"]) } else { None },
                late: r["status"] == "late",
            }),
            Some("cell") if kind == Kind::Load => rec.summary = r.clone(),
            Some("end") => match kind {
                Kind::Tput | Kind::Ping => rec.summary = r["summary"].clone(),
                Kind::Load | Kind::Copy | Kind::Capacity | Kind::Trace => {}
            },
            // The same summary as `capacity --save`; none without a capacity estimate.
            Some("capacity") if kind == Kind::Capacity && !r["report"]["capacity"].is_null() => {
                rec.summary = json!({"capacity": r["report"], "host": r["host"], "address": r["address"],
                    "complete": r["complete"]});
            }
            // The same summary as `trace --save`.
            Some("trace") if kind == Kind::Trace => {
                rec.summary = json!({"trace": r["report"], "host": r["host"], "address": r["address"],
                    "complete": r["complete"]});
            }
            _ => {}
        }
    }
}

/// A cell's axis values, formatted for a table.
fn axis_cells(axes: &[String], params: &std::collections::BTreeMap<String, Value>) -> Vec<String> {
    axes.iter()
        .map(|a| {
            params.get(a).map_or("-".into(), |v| match (a.as_str(), v.as_f64()) {
                ("window" | "queue" | "size" | "block", Some(b)) => wanperf_proto::units::fmt_bytes(b as u64),
                ("rate", Some(r)) => wanperf_proto::units::fmt_rate(r),
                ("rtt" | "duration", Some(s)) => format!("{:.0} ms", s * 1000.0),
                _ => v.to_string().trim_matches('"').to_string(),
            })
        })
        .collect()
}

/// The headline table of a copy study: per cell, the data rate, the bytes on the wire, the
/// time and what limited the copy (its verdict).
pub fn print_copy_headline(study: &Study, cells: &[wanperf_archive::StoredCell]) {
    let axes: Vec<String> = study.axes.iter().map(|a| spec::param_key(&a.name)).collect();
    let mut head: Vec<String> = axes.clone();
    head.extend(["rep", "data rate", "on the wire", "time"].map(String::from));
    outln!("{}  limited by", head.iter().map(|h| format!("{h:>12}")).collect::<Vec<_>>().join(""));
    for c in cells.iter().map(|c| &c.cell) {
        let copy = &c.summary["copy"];
        let mut row = axis_cells(&axes, &c.params);
        row.push((c.repeat + 1).to_string());
        row.push(copy["rate_bytes_s"].as_f64().map_or("-".into(), |r| wanperf_proto::units::fmt_rate(r * 8.0)));
        row.push(copy["wire_bytes"].as_u64().map_or("-".into(), wanperf_proto::units::fmt_bytes));
        row.push(copy["wall_s"].as_f64().map_or("-".into(), |t| format!("{t:.2} s")));
        let text = c.summary["verdict"]["text"].as_str().unwrap_or("");
        let why = match &c.failure {
            Some(f) => format!("(failed: {f})"),
            None => text.split(": ").next().unwrap_or("").trim_start_matches("limited by ").to_string(),
        };
        outln!("{}  {why}", row.iter().map(|h| format!("{h:>12}")).collect::<Vec<_>>().join(""));
    }
}

/// The headline table of a capacity study: per cell, the capacity, the available bandwidth,
/// the capacity back and the bottleneck's hop.
pub fn print_capacity_headline(study: &Study, cells: &[wanperf_archive::StoredCell]) {
    let axes: Vec<String> = study.axes.iter().map(|a| spec::param_key(&a.name)).collect();
    let mut head: Vec<String> = axes.clone();
    head.extend(["rep", "capacity", "available", "back"].map(String::from));
    // Rates are up to 13 characters ("999.00 Mbit/s"): wider columns than the other tables'.
    let line = |row: &[String]| row.iter().map(|h| format!("{h:>14}")).collect::<Vec<_>>().join("");
    outln!("{}  bottleneck", line(&head));
    for c in cells.iter().map(|c| &c.cell) {
        let r = &c.summary["capacity"];
        let rate = |v: &Value| v.as_f64().map_or("-".into(), wanperf_proto::units::fmt_rate);
        let mut row = axis_cells(&axes, &c.params);
        row.push((c.repeat + 1).to_string());
        row.push(rate(&r["capacity"]["bps"]));
        row.push(rate(&r["available"]["bps"]));
        row.push(rate(&r["reverse"]["capacity"]["bps"]));
        let at = match (&c.failure, r["bottleneck"]["ttl"].as_u64()) {
            (Some(f), _) => format!("(failed: {f})"),
            (None, Some(t)) if r["bottleneck"]["destination"] == true => format!("hop {t}, the last link"),
            (None, Some(t)) => format!("hop {t} ({})", r["bottleneck"]["address"].as_str().unwrap_or("no answer")),
            (None, None) => "-".into(),
        };
        outln!("{}  {at}", line(&row));
    }
}

/// The headline table of a trace study: per cell, the hops, the destination's RTT and the
/// path's loss, and what the trace found on the way (where loss starts, rate-limited
/// routers, route changes, the path MTU).
pub fn print_trace_headline(study: &Study, cells: &[wanperf_archive::StoredCell]) {
    let axes: Vec<String> = study.axes.iter().map(|a| spec::param_key(&a.name)).collect();
    let mut head: Vec<String> = axes.clone();
    head.extend(["rep", "hops", "RTT min", "RTT median", "loss", "forward", "reverse"].map(String::from));
    outln!("{}  found", head.iter().map(|h| format!("{h:>12}")).collect::<Vec<_>>().join(""));
    for c in cells.iter().map(|c| &c.cell) {
        let t = &c.summary["trace"];
        let hops = t["hops"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        let last = hops.iter().rev().find(|h| h["destination"] == true);
        let ms = |k: &str| last.and_then(|h| h["rtt_ms"][k].as_f64()).map_or("-".into(), |x| format!("{x:.2} ms"));
        let mut row = axis_cells(&axes, &c.params);
        row.push((c.repeat + 1).to_string());
        row.push(last.and_then(|h| h["ttl"].as_u64()).map_or("-".into(), |t| t.to_string()));
        row.push(ms("min"));
        row.push(ms("median"));
        let pct = |v: Option<f64>| v.map_or("-".into(), |l| format!("{l:.1} %"));
        row.push(pct(last.and_then(|h| h["path_loss_pct"].as_f64())));
        // Split by the study's server (none when it did not answer).
        row.push(pct(t["one_way"]["forward_loss_pct"].as_f64()));
        row.push(pct(t["one_way"]["reverse_loss_pct"].as_f64()));
        let mut found: Vec<String> = Vec::new();
        if let Some(f) = &c.failure {
            found.push(format!("(failed: {f})"));
        }
        for h in hops {
            let ttl = h["ttl"].as_u64().unwrap_or(0);
            let note = h["note"].as_str().unwrap_or("");
            if note.contains("loss starts here") {
                found.push(match h["loss_direction"].as_str() {
                    Some("forward") => format!("loss starts at hop {ttl} (on the way there)"),
                    Some("reverse") => format!("loss starts at hop {ttl} (on the way back)"),
                    _ => format!("loss starts at hop {ttl}"),
                });
            }
            if note.contains("rate-limited") {
                found.push(format!("hop {ttl} rate-limited"));
            }
        }
        if let Some(n) = t["route_changes"].as_array().map(Vec::len).filter(|n| *n > 0) {
            found.push(format!("{n} route change{}", if n == 1 { "" } else { "s" }));
        }
        if let Some(m) = t["path_mtu"].as_u64() {
            found.push(format!("path MTU {m} B"));
        }
        outln!("{}  {}", row.iter().map(|h| format!("{h:>12}")).collect::<Vec<_>>().join(""), found.join("; "));
    }
}

/// The headline table: per cell, throughput and (for probes) loaded/unloaded RTT and loss.
pub fn print_headline(study: &Study, aggs: &[wanperf_archive::CellAggregate]) {
    let axes: Vec<String> = study.axes.iter().map(|a| spec::param_key(&a.name)).collect();
    let mut head: Vec<String> = axes.clone();
    head.extend(["rep", "goodput", "RTT idle", "RTT loaded", "loss"].map(String::from));
    outln!("{}", head.iter().map(|h| format!("{h:>12}")).collect::<Vec<_>>().join(""));
    for c in aggs {
        let mut row = axis_cells(&axes, &c.params);
        row.push((c.repeat + 1).to_string());
        row.push(c.mean_throughput_bps.map_or("-".into(), wanperf_proto::units::fmt_rate));
        let ms = |p: &str| c.phases.get(p).and_then(|x| x.mean_ms).map_or("-".into(), |m| format!("{m:.1} ms"));
        // Load studies have both phases; a ping study's probes are all "idle" (no load).
        let (idle, loaded) = if c.phases.contains_key("loaded") { ("unloaded", "loaded") } else { ("", "-") };
        row.push(ms(idle));
        row.push(ms(loaded));
        let lossy = if loaded == "-" { idle } else { loaded };
        row.push(c.phases.get(lossy).map_or("-".into(), |x| format!("{:.1} %", x.loss_pct)));
        if !c.ok {
            row.push("  (failed)".into());
        }
        outln!("{}", row.iter().map(|h| format!("{h:>12}")).collect::<Vec<_>>().join(""));
    }
}
