//! The study runner, the shell of [`crate::spec`]: runs a study's cells unattended and keeps
//! every result in the archive. Each cell on an emulated path gets a fresh path of its own
//! configuration, a `wanperf serve` on its right host and the measurement on its left; the
//! measurement's NDJSON becomes one archive cell, stored in one transaction, so a killed
//! study resumes exactly.

use crate::data;
use crate::spec::{self, CellPlan, Flags, Kind, Study, Target};
use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use wanperf_archive::{CellRecord, NewRun, ProbeRow, RunStatus, Store, StoredCell, Verdict};
use wanperf_emu::path::{Host, PathConfig};
use wanperf_net::child::{on_path, stop_child, wait_child, wait_ready};
use wanperf_net::netd::Session;
use wanperf_net::path::Path;
use wanperf_sys::INTERRUPTED;

/// What the runner needs from the command line: its flags (to check and estimate cells), the
/// path a cell's link flags make, what to call the software, and where lines go.
pub struct Env<'a> {
    /// The commands' own flags.
    pub flags: &'a dyn Flags,
    /// The emulated path of a cell's link flags (`Study::link_argv`).
    pub path_config: &'a dyn Fn(&[String]) -> Result<PathConfig>,
    /// Software name and version, stored with the run.
    pub software: String,
    /// Prints one line of output.
    pub say: &'a dyn Fn(&str),
}

fn now_unix() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// How a study run went.
pub struct Outcome {
    /// Whether `--strict` asked for the expectations to decide the exit status.
    pub strict: bool,
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
    /// The study's expectations as evaluated on the stored cells (stored with the run).
    pub verdicts: Vec<Verdict>,
}

impl Outcome {
    /// The lines after the table: what was stored where (`db`), how to resume, the report.
    pub fn summary_lines(&self, file: &std::path::Path, db: &str) -> Vec<String> {
        let mut out = vec![format!(
            "run {}: {} of {} cells stored{} in {db}",
            self.run_id,
            self.stored,
            self.planned,
            if self.failures > 0 { format!(" ({} failed, kept as data)", self.failures) } else { String::new() }
        )];
        if !self.complete {
            out.push(format!(
                "stopped early: `wanperf study run {} --resume {}` finishes it",
                file.display(),
                self.run_id
            ));
        }
        out.push(format!("report: wanperf report {} -o report.html", self.run_id));
        out
    }

    /// Whether the run succeeded: every cell measured, and with `strict`, every expectation held.
    pub fn ok(&self) -> bool {
        self.complete && self.failures == 0 && !(self.strict && self.verdicts.iter().any(|v| !v.pass))
    }
}

/// Evaluates a stored run's cells (`aggs`: their aggregates, as the caller has them) against
/// `study`'s expectations. Pure reading: the caller decides whether to store them.
fn evaluate(
    store: &mut dyn Store,
    run_id: i64,
    aggs: &[wanperf_archive::CellAggregate],
    study: &Study,
    flags: &dyn Flags,
) -> Result<Vec<Verdict>> {
    if study.expects.is_empty() {
        return Ok(Vec::new());
    }
    let data = store.run_data(run_id)?;
    let axes: Vec<String> = study.axes.iter().map(|a| crate::spec::param_key(&a.name)).collect();
    let mut verdicts =
        crate::expect::evaluate(&study.expects, &axes, aggs, &data.cells, &stored_configs(study, &data.cells, flags));
    let stored: std::collections::BTreeSet<u32> = data.cells.iter().map(|c| c.cell.index).collect();
    verdicts.extend(crate::expect::unmeasured(&study.expects, &axes, &study.planned(), &stored));
    // Each expectation's verdicts together, in the file's order.
    verdicts.sort_by_key(|v| v.expect);
    Ok(verdicts)
}

/// Each planned cell's configuration for the bounds: its path's values as stored with the cell
/// (what the emulator ran: a run checked later is held to its own path, whatever today's
/// presets say), else as the study makes them today.
fn stored_configs(study: &Study, cells: &[StoredCell], flags: &dyn Flags) -> crate::expect::Configs {
    let mut configs = study.configs(flags);
    for plan in study.cells().iter().filter(|c| c.repeat == 0) {
        let stored = cells.iter().find(|c| c.cell.index == plan.index).and_then(|c| c.cell.emulator.as_ref());
        if let Some(path) = stored.and_then(stored_path_values) {
            configs.insert(plan.index, study.config_with(plan, path));
        }
    }
    configs
}

/// The path values a cell's stored emulator record holds: a network's route values, or an
/// emulated path's configuration.
fn stored_path_values(emulator: &Value) -> Option<BTreeMap<String, f64>> {
    if let Some(v) = emulator.get("values") {
        return serde_json::from_value(v.clone()).ok();
    }
    let cfg: PathConfig = serde_json::from_value(emulator.get("config")?.clone()).ok()?;
    Some(cfg.values())
}

/// A stored run's expectations evaluated again (`study check`).
pub struct Checked {
    /// The study's name.
    pub study: String,
    /// The verdicts now.
    pub verdicts: Vec<Verdict>,
    /// The verdicts stored after the run.
    pub stored: Vec<Verdict>,
}

impl Checked {
    /// What `study check` prints: the run, the verdicts, and whether they differ from the
    /// stored ones.
    pub fn lines(&self, run_id: i64) -> Vec<String> {
        let mut out = vec![format!("run {run_id}: {}", self.study)];
        out.extend(verdict_lines(&self.verdicts).into_iter().skip(1));
        if self.stored != self.verdicts {
            out.push(format!("(these differ from the verdicts stored after the run: {} stored)", self.stored.len()));
        }
        out
    }
}

/// Re-evaluates a stored run's expectations from the study text stored with it, parsed by
/// `parse` (the command line's own parsers).
pub fn check_stored(
    store: &mut dyn Store,
    run_id: i64,
    parse: &dyn Fn(&str) -> Result<Study, spec::StudyError>,
    flags: &dyn Flags,
) -> Result<Checked> {
    let info = store.run_info(run_id)?;
    if info.study_text.is_empty() {
        bail!("run {run_id} ({}) has no study file: nothing states what it expects", info.study);
    }
    let study = parse(&info.study_text).map_err(|e| anyhow!("run {run_id}'s study file: {e}"))?;
    if study.expects.is_empty() {
        bail!("run {run_id}'s study `{}` states no expectations ([[expect]])", study.name);
    }
    let aggs = store.cell_aggregates(run_id)?;
    let verdicts = evaluate(store, run_id, &aggs, &study, flags)?;
    let stored = store.run_data(run_id)?.verdicts;
    Ok(Checked { study: study.name, verdicts, stored })
}

/// The verdicts as printed after a run and by `study check`: one line each, then a count.
pub fn verdict_lines(verdicts: &[Verdict]) -> Vec<String> {
    if verdicts.is_empty() {
        return Vec::new();
    }
    let mut out = vec![String::new(), "expectations:".to_string()];
    out.extend(verdicts.iter().map(|v| format!("  {}", crate::expect::line(v))));
    let failed = verdicts.iter().filter(|v| !v.pass).count();
    out.push(format!(
        "{} of {} held{}",
        verdicts.len() - failed,
        verdicts.len(),
        if failed > 0 { format!("; {failed} FAILED") } else { String::new() }
    ));
    out
}

/// Runs (or resumes) a study into `store`, printing the headline table (or JSON records).
pub fn execute(
    store: &mut dyn Store,
    text: &str,
    study: &Study,
    resume: Option<&str>,
    json: bool,
    env: &Env,
) -> Result<Outcome> {
    let cells = study.cells();
    let (run_id, done) = match resume {
        None => {
            let run = NewRun {
                study: study.name.clone(),
                study_text: text.to_string(),
                spec: serde_json::to_value(study)?,
                software: env.software.clone(),
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
    let bar = progress(cells.len(), done.len(), study, &todo, env.flags);
    let exe = std::env::current_exe().context("cannot find the wanperf executable")?;
    let mut failures = 0usize;
    let mut not_acting_cells = 0usize;
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
        let rec = run_cell(study, cell, &exe, env);
        if INTERRUPTED.load(Ordering::Acquire) && !rec.ok {
            // A cell cut short by Ctrl-C is not a result: leave it for --resume.
            stopped = true;
            break;
        }
        failures += usize::from(!rec.ok);
        store.store_cell(run_id, &rec).context("cannot store the cell")?;
        stored += 1;
        if json {
            (env.say)(
                &json!({"event": "cell", "run": run_id, "index": rec.index, "repeat": rec.repeat,
                "params": rec.params, "ok": rec.ok, "failure": rec.failure, "summary": rec.summary,
                "not_acted": not_acted(&rec), "fell_behind": fell_behind(&rec)})
                .to_string(),
            );
        }
        if let Some(b) = &bar {
            b.inc(1);
        }
        // Said where the user reads it, whatever the output (a hidden progress bar prints
        // nothing): why a cell failed, and that a cell did not measure the path that was
        // configured.
        let idle = not_acted(&rec);
        if !idle.is_empty() {
            not_acting_cells += 1;
        }
        // "cell streams=4", or "cell 0" in a study without axes.
        let d = describe(cell);
        let label = if d.starts_with("cell ") { d } else { format!("cell {d}") };
        let failed = rec.failure.iter().map(|f| format!("warning: {label} failed: {f}"));
        let warned = idle.into_iter().chain(fell_behind(&rec)).map(|l| format!("warning: {label}: {l}"));
        for line in failed.chain(warned) {
            match &bar {
                Some(b) => b.println(line),
                None => eprintln!("{line}"),
            }
        }
        if i + 1 < todo.len() && study.pause_s > 0.0 {
            wanperf_sys::sleep_unless_interrupted(study.pause_s);
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let complete = !stopped && stored == cells.len();
    let status = if complete { RunStatus::Complete } else { RunStatus::Incomplete };
    store.finish_run(run_id, status, now_unix())?;
    let aggs = store.cell_aggregates(run_id)?;
    let verdicts = evaluate(store, run_id, &aggs, study, env.flags)?;
    store.store_verdicts(run_id, &verdicts)?;
    if json {
        (env.say)(
            &json!({"event": "end", "run": run_id, "complete": complete, "cells_stored": stored,
            "cells_planned": cells.len(), "failed": failures, "cells": aggs, "verdicts": verdicts})
            .to_string(),
        );
    } else {
        let lines = match study.kind {
            Kind::Copy => crate::headline::copy(study, &store.run_data(run_id)?.cells),
            Kind::Capacity => crate::headline::capacity(study, &store.run_data(run_id)?.cells),
            Kind::Trace => crate::headline::trace(study, &store.run_data(run_id)?.cells),
            Kind::Tput | Kind::Ping | Kind::Load => crate::headline::measured(study, &aggs),
        };
        lines.iter().for_each(|l| (env.say)(l));
        if not_acting_cells > 0 {
            (env.say)(&format!(
                "{not_acting_cells} cell(s) ran on a path part of whose configuration never acted (warnings above; the report lists them)"
            ));
        }
        verdict_lines(&verdicts).iter().for_each(|l| (env.say)(l));
    }
    Ok(Outcome { strict: false, run_id, complete, stored, planned: cells.len(), failures, verdicts })
}

/// A cell as a line of its axis values.
pub fn describe(c: &CellPlan) -> String {
    let v: Vec<String> = c.values.iter().map(|(k, v)| format!("{}={v}", spec::param_key(k))).collect();
    let r = if c.repeat > 0 { format!(" (repeat {})", c.repeat + 1) } else { String::new() };
    if v.is_empty() {
        format!("cell {}{r}", c.index)
    } else {
        format!("{}{r}", v.join(" "))
    }
}

fn progress(
    total: usize,
    done: usize,
    study: &Study,
    todo: &[&CellPlan],
    flags: &dyn Flags,
) -> Option<indicatif::ProgressBar> {
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) && std::env::var_os("WANPERF_PROGRESS").is_none() {
        return None;
    }
    let b = indicatif::ProgressBar::with_draw_target(Some(total as u64), indicatif::ProgressDrawTarget::stderr());
    if let Ok(st) = indicatif::ProgressStyle::with_template("{bar:30} cells {pos}/{len} · {msg} · ETA {eta}") {
        b.set_style(st);
    }
    b.set_position(done as u64);
    let est = study.time_s(todo.iter().copied(), flags);
    b.println(format!("{}: {} cells to run, about {}", study.name, todo.len(), fmt_secs(est)));
    b.enable_steady_tick(Duration::from_millis(500));
    Some(b)
}

/// A duration as `1 h 02 min`, `3 min 04 s` or `5 s`.
pub fn fmt_secs(s: f64) -> String {
    let s = s.round() as u64;
    if s >= 3600 {
        format!("{} h {:02} min", s / 3600, s / 60 % 60)
    } else if s >= 60 {
        format!("{} min {:02} s", s / 60, s % 60)
    } else {
        format!("{s} s")
    }
}

/// What `--dry-run` prints: the cells, what each runs, and the estimated time.
pub fn dry_run(study: &Study, cells: &[CellPlan], json: bool, flags: &dyn Flags) -> Vec<String> {
    let total = study.time_s(cells, flags);
    if json {
        let list: Vec<Value> = cells
            .iter()
            .map(|c| {
                json!({"index": c.index, "repeat": c.repeat, "params": study.params(c),
                    "link": study.link_argv(c), "net": study.net_cell(c), "measure": study.measure_argv(c, "PEER", None), "estimate_s": study.estimate_s(c, flags)})
            })
            .collect();
        let expects: Vec<Value> = study.expects.iter().map(|e| json!({"line": e.line, "text": e.text()})).collect();
        return vec![
            json!({"study": study.name, "cells": list, "estimate_s": total, "expectations": expects}).to_string()
        ];
    }
    let mut lines = vec![format!("{} ({} study, {} cells)", study.name, study.kind.command(), cells.len())];
    for (n, c) in cells.iter().enumerate() {
        // Where it runs: a network and its pair, an emulated path's flags, or nothing (a host).
        let link = match (study.net_cell(c), study.link_argv(c)) {
            (Some(n), _) => {
                let set: Vec<String> = n.settings.iter().map(|(k, v)| format!(" {k}={v}")).collect();
                format!("net {} {} → {}{} · ", n.topology, n.from, n.to, set.concat())
            }
            (None, flags) if flags.is_empty() => String::new(),
            (None, flags) => format!("path {} · ", flags.join(" ")),
        };
        let m = study.measure_argv(c, "PEER", None).join(" ");
        lines.push(format!(
            "{:>4}. {:<40} {link}wanperf {m} (≈ {})",
            n + 1,
            describe(c),
            fmt_secs(study.estimate_s(c, flags))
        ));
    }
    lines.push(format!("estimated time: {}", fmt_secs(total)));
    if !study.expects.is_empty() {
        let n = study.expects.len();
        lines.push(format!("checked after the run ({n} expectation{}):", if n == 1 { "" } else { "s" }));
        lines.extend(study.expects.iter().map(|e| format!("  line {}: {}", e.line, e.text())));
    }
    lines
}

/// Runs one cell; whatever happens, returns a record (failures are data).
fn run_cell(study: &Study, cell: &CellPlan, exe: &std::path::Path, env: &Env) -> CellRecord {
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
            cell_on_path(study, cell, exe, &data_arg, root.as_deref(), env)
        }
        Target::Net(_) => {
            let root = scratch.as_ref().map(|s| s.path().join("root"));
            cell_on_net(study, cell, exe, &data_arg, root.as_deref(), env)
        }
        Target::Host { host, port } => {
            let mut c = Command::new(exe);
            c.args(study.argv_with_data(cell, host, Some(*port), &data_arg));
            // The measurement dies with the study (kill -9 included), as on a path.
            wanperf_sys::die_with_parent(&mut c);
            measure(c, study.estimate_s(cell, env.flags), &mut |c, d| wait_child(c, d)).map(|m| (m, None))
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

/// Waits for a measurement: its child, and a deadline at which it is stopped (None: it was).
type Wait<'a> = dyn FnMut(&mut std::process::Child, Option<Instant>) -> Option<std::process::ExitStatus> + 'a;

/// Runs a measurement command to its end (or its deadline), collecting its NDJSON; `wait`
/// waits for it (on a network, while the cross traffic keeps its schedule).
fn measure(mut c: Command, estimate_s: f64, wait: &mut Wait<'_>) -> Result<Measured> {
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
    let status = wait(&mut child, Some(deadline));
    let records: Vec<Value> = reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    // The command's last line says why it failed (without its own `error: `, which the study
    // adds where it prints it).
    let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).map(|l| {
        let l = l.trim();
        l.strip_prefix("error: ").unwrap_or(l).to_string()
    });
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

/// Runs a cell on a fresh emulated path; returns what it measured and the path's counters.
fn cell_on_path(
    study: &Study,
    cell: &CellPlan,
    exe: &std::path::Path,
    data: &str,
    root: Option<&std::path::Path>,
    env: &Env,
) -> Result<(Measured, Option<Value>)> {
    let cfg = (env.path_config)(&study.link_argv(cell))?;
    let path = Path::start(&cfg, None)?;
    let (serve, iperf3) = server_argv(study, exe, root);
    let mut server = start_server(on_path(&path, Host::Right, &serve)?, iperf3, "the right host")?;
    let mut argv = vec![exe.display().to_string()];
    argv.extend(study.argv_with_data(cell, &Host::Right.addr().to_string(), None, data));
    let result = on_path(&path, Host::Left, &argv)
        .and_then(|left| measure(left, study.estimate_s(cell, env.flags), &mut |c, d| wait_child(c, d)));
    stop_child(&mut server);
    let hosts = path.host_reports();
    let stats = path.stop();
    // What the configuration did not do: a policer, class or loss that never acted, a host's
    // CPU quota it never ran into.
    let mut idle = wanperf_emu::acted::on_path(&cfg, &stats);
    idle.extend(wanperf_net::show::hosts_not_acted(&hosts));
    let behind = wanperf_net::show::path_behind(&stats)
        .map(|b| wanperf_net::show::behind_warning(&b, ["left → right", "right → left"]));
    let emulator = json!({"config": cfg, "stats": stats, "idle": idle, "hosts": hosts, "behind": behind});
    result.map(|m| (m, Some(emulator)))
}

/// Starts the far end's server (the command [`server_argv`] made, contained where it runs,
/// `on` naming that host) and waits until it listens; a server that never does is stopped.
fn start_server(mut c: Command, iperf3: bool, on: &str) -> Result<std::process::Child> {
    // iperf3 says it is ready on stdout; wanperf serve's errors go to stderr.
    let (out, err) = if iperf3 { (Stdio::piped(), Stdio::null()) } else { (Stdio::null(), Stdio::piped()) };
    c.stdout(out).stderr(err).stdin(Stdio::null());
    let mut server = c.spawn().with_context(|| format!("cannot start the server on {on}"))?;
    if let Err(e) = wait_ready(&mut server, &format!("the server on {on}"), 10.0) {
        stop_child(&mut server);
        return Err(e);
    }
    Ok(server)
}

/// The far end's command: `wanperf serve` on the measurement's port (with a copy's `root`),
/// or Debian's iperf3 server when `[measure]` says `iperf3 = true`; and whether it is iperf3.
fn server_argv(study: &Study, exe: &std::path::Path, root: Option<&std::path::Path>) -> (Vec<String>, bool) {
    if study.measure.iter().any(|(k, v)| k == "iperf3" && v == "true") {
        return (["iperf3", "-s", "-p", "5201", "--forceflush"].map(String::from).to_vec(), true);
    }
    let exe = exe.display().to_string();
    // The STAMP reflector on its standard port answers `stamp = true` pings and
    // `stamp_port = 862` loads.
    let mut v: Vec<String> =
        [exe.as_str(), "serve", "--listen", "0.0.0.0:5301", "--allow", "198.18.0.0/15", "--stamp-port", "862"]
            .map(String::from)
            .to_vec();
    if let Some(r) = root {
        v.extend(["--root".to_string(), r.display().to_string()]);
    }
    (v, false)
}

/// Runs a cell on a fresh emulated network: the cell's topology with its settings and the
/// study's cross traffic, `wanperf serve` on the pair's destination host and the measurement
/// on its source, aimed at the destination's address (a host's name, or one interface's);
/// returns what it measured and what every link, host model and cross traffic did.
fn cell_on_net(
    study: &Study,
    cell: &CellPlan,
    exe: &std::path::Path,
    data: &str,
    root: Option<&std::path::Path>,
    env: &Env,
) -> Result<(Measured, Option<Value>)> {
    let nc = study.net_cell(cell).ok_or_else(|| anyhow!("not a [net] study"))?;
    let net = wanperf_net::netd::load_cell(&nc.topology, &nc.traffic, &nc.settings, &nc.from, &nc.to)?;
    let mut session = Session::start(&net.topology, wanperf_emu::path::DEFAULT_HOST_NICE, None)?;
    let (serve, iperf3) = server_argv(study, exe, root);
    let mut server = start_server(session.contained(net.to.node, &serve), iperf3, &nc.to)?;
    let mut argv = vec![exe.display().to_string()];
    argv.extend(study.argv_with_data(cell, &net.to.addr.to_string(), None, data));
    let c = session.contained(net.from.node, &argv);
    let result = measure(c, study.estimate_s(cell, env.flags), &mut |c, d| session.wait(c, d));
    stop_child(&mut server);
    let hosts = session.net().host_reports();
    let (stats, _, traffic) = session.finish();
    let t = &net.topology;
    let mut idle = wanperf_net::show::links_not_acted(t, &stats);
    idle.extend(wanperf_net::show::hosts_not_acted(&hosts));
    idle.extend(wanperf_net::traffic::traffic_not_acted(&traffic));
    let links: Vec<Value> = t
        .links
        .iter()
        .zip(&stats)
        .map(|(l, s)| json!({"name": l.name, "a": t.nodes[l.a].name, "b": t.nodes[l.b].name, "ab": s.ab, "ba": s.ba}))
        .collect();
    let behind = wanperf_net::show::net_behind(t, &stats);
    let emulator = json!({"net": t.name, "from": nc.from, "to": nc.to, "address": net.to.addr.to_string(),
        "route": net.route, "values": net.values, "links": links, "idle": idle, "hosts": hosts, "traffic": traffic,
        "behind": behind});
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

/// The sentences of a cell's emulator that say what of its configuration never acted.
fn not_acted(rec: &CellRecord) -> Vec<String> {
    let idle = rec.emulator.as_ref().and_then(|e| e["idle"].as_array());
    idle.into_iter().flatten().filter_map(|l| l.as_str().map(str::to_string)).collect()
}

/// The warning a cell's emulator stored when it fell behind its schedule, if it did.
fn fell_behind(rec: &CellRecord) -> Option<String> {
    rec.emulator.as_ref().and_then(|e| e["behind"].as_str()).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_cell_gives_the_path_it_ran_on() {
        // An emulated path's stored configuration: its own values, whatever a preset says today.
        let mut cfg = wanperf_emu::presets::find("slac-cern-2000").unwrap().path();
        cfg.up.delay_ns = 7_000_000;
        let em = json!({ "config": cfg, "stats": {} });
        let v = stored_path_values(&em).unwrap();
        assert_eq!(v["delay_up"], 0.007, "{v:?}");
        assert_eq!(v, cfg.values());
        // A network cell stores its route's values as they were.
        let em = json!({ "net": "iepm-2000", "values": { "rtt": 0.166, "rate": 27e6 } });
        assert_eq!(stored_path_values(&em).unwrap()["rtt"], 0.166);
        // Nothing stored (a real host): today's configuration stands.
        assert!(stored_path_values(&json!({})).is_none());
    }
}
