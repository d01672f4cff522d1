//! The shell: runs the selected seeds' studies into the archive (the study runner's own
//! `execute`, each cell on a fresh emulated path or network), then writes each seed's report
//! and prints its summary line.

use crate::findings::{self, Counts, StudyResult};
use crate::page::{self, PublishedRow, SeedPage};
use crate::registry::{self, Seed};
use anyhow::{anyhow, bail, Context, Result};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use wanperf_archive::Store;
use wanperf_study::run::{execute, fmt_secs, Env};
use wanperf_study::spec::{Study, StudyError};

/// Where the registry and the study files come from.
pub enum Source {
    /// The copies built into the binary.
    Embedded,
    /// A folder with `seeds.toml` and the study files (edited copies).
    Dir(PathBuf),
}

impl Source {
    /// A file's text (`seeds.toml` or a study).
    pub fn text(&self, name: &str) -> Result<String> {
        match self {
            Source::Embedded => crate::SCENARIOS
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, t)| t.to_string())
                .ok_or_else(|| anyhow!("no built-in scenario {name}")),
            Source::Dir(d) => {
                let p = d.join(name);
                std::fs::read_to_string(&p).with_context(|| format!("cannot read {}", p.display()))
            }
        }
    }
}

/// What to reproduce and how.
pub struct Options<'a> {
    /// Seeds by id, or `all`.
    pub seeds: Vec<String>,
    /// The reduced grid (each study's `[quick]` table).
    pub quick: bool,
    /// Where the files come from.
    pub source: Source,
    /// Where the reports go (`seedNNN.html`).
    pub out_dir: PathBuf,
    /// JSON records instead of lines.
    pub json: bool,
    /// The command line's study parser.
    pub parse: &'a dyn Fn(&str) -> Result<Study, StudyError>,
    /// The archive as central is told it (a mesh run's results go there too).
    pub db: String,
}

/// How one seed went.
pub struct SeedOutcome {
    /// The seed.
    pub id: String,
    /// Its counts.
    pub counts: Counts,
}

struct Planned {
    file: String,
    text: String,
    study: Study,
    dropped: Vec<String>,
    cells: usize,
    estimate_s: f64,
}

/// Reads, merges (`--quick`) and parses a seed's studies: every error before anything runs.
fn plan(seed: &Seed, o: &Options, env: &Env) -> Result<Vec<Planned>> {
    let mut out = Vec::new();
    for file in &seed.studies {
        let full = o.source.text(file)?;
        let quick =
            if o.quick { wanperf_study::quick::apply(&full).map_err(|e| anyhow!("{file}: {e}"))? } else { None };
        let (text, dropped) = quick.map_or((full, Vec::new()), |q| (q.text, q.dropped));
        let study = (o.parse)(&text).map_err(|e| anyhow!("{file}{}: {e}", if o.quick { " (--quick)" } else { "" }))?;
        let cells = study.cells();
        let estimate_s = study.time_s(&cells, env.flags);
        out.push(Planned { file: file.clone(), text, study, dropped, cells: cells.len(), estimate_s });
    }
    Ok(out)
}

/// Runs the seeds into `store`, or without one lists their studies, cells and time (a dry
/// run); the outcome of each (the caller decides the exit status).
pub fn reproduce(store: Option<&mut dyn Store>, o: &Options, env: &Env) -> Result<Vec<SeedOutcome>> {
    let reg = registry::parse(&o.source.text("seeds.toml")?).map_err(|e| anyhow!("seeds.toml: {e}"))?;
    let seeds = registry::select(&reg, &o.seeds).map_err(|e| anyhow!(e))?;
    let mut plans = Vec::new();
    for s in &seeds {
        let problems = registry::problems(s, &|f| o.source.text(f).ok());
        if let Some(p) = problems.first() {
            bail!("seeds.toml: {p}");
        }
        plans.push(plan(s, o, env)?);
    }
    // A mesh run takes its own time (not in --quick: its finding needs the full run).
    let mesh_s = |s: &Seed| if o.quick { 0.0 } else { s.meshes.iter().map(registry::MeshRun::estimate_s).sum::<f64>() };
    let total: f64 =
        plans.iter().flatten().map(|p| p.estimate_s).sum::<f64>() + seeds.iter().map(|s| mesh_s(s)).sum::<f64>();
    let cells: usize = plans.iter().flatten().map(|p| p.cells).sum();
    let studies = plans.iter().map(Vec::len).sum::<usize>();
    let say = |l: &str| {
        if !o.json {
            (env.say)(l)
        }
    };
    say(&format!(
        "reproduce: seed{} {}{}: {studies} studies, {cells} cells, about {}",
        if seeds.len() > 1 { "s" } else { "" },
        seeds.iter().map(|s| s.id.as_str()).collect::<Vec<_>>().join(", "),
        if o.quick { " (--quick)" } else { "" },
        fmt_secs(total)
    ));
    let Some(store) = store else {
        if o.json {
            let seeds: Vec<_> = seeds
                .iter()
                .zip(&plans)
                .map(|(s, ps)| {
                    let studies: Vec<_> = ps
                        .iter()
                        .map(|p| json!({"file": p.file, "cells": p.cells, "estimate_s": p.estimate_s}))
                        .collect();
                    json!({"id": s.id, "title": s.title, "studies": studies})
                })
                .collect();
            (env.say)(&json!({"event": "plan", "quick": o.quick, "estimate_s": total, "seeds": seeds}).to_string());
        }
        for (s, ps) in seeds.iter().zip(&plans) {
            say(&format!("seed {}: {}", s.id, s.title));
            for p in ps {
                say(&format!("  {}: {} cells, about {}", p.file, p.cells, fmt_secs(p.estimate_s)));
            }
            for m in s.meshes.iter().filter(|_| !o.quick) {
                say(&format!(
                    "  a mesh on {}, `net set {}` part way: about {}",
                    m.net,
                    m.change.join(" "),
                    fmt_secs(m.estimate_s())
                ));
            }
        }
        return Ok(Vec::new());
    };
    std::fs::create_dir_all(&o.out_dir).with_context(|| format!("cannot create {}", o.out_dir.display()))?;
    let started = std::time::Instant::now();
    let mut left = total;
    let mut done = 0usize;
    let mut outcomes = Vec::new();
    for (seed, ps) in seeds.iter().zip(plans) {
        let mut results = Vec::new();
        // Each study's run and its cells' aggregates, in the same order.
        let mut runs = Vec::new();
        let mut aggs = Vec::new();
        for p in &ps {
            done += 1;
            if wanperf_sys::INTERRUPTED.load(Ordering::Acquire) {
                results.push(result_of(p, Some("interrupted before it started".into()), Vec::new()));
                continue;
            }
            say(&format!(
                "\n[{done}/{studies}] seed {}: {} — {} cells, about {} ({} elapsed, about {} left)",
                seed.id,
                p.file,
                p.cells,
                fmt_secs(p.estimate_s),
                fmt_secs(started.elapsed().as_secs_f64()),
                fmt_secs(left)
            ));
            left = (left - p.estimate_s).max(0.0);
            match execute(store, &p.text, &p.study, None, o.json, env) {
                Ok(out) => {
                    let error = (!out.complete || out.failures > 0).then(|| {
                        format!(
                            "{} of {} cells stored, {} failed (run {})",
                            out.stored, out.planned, out.failures, out.run_id
                        )
                    });
                    let data = store.run_data(out.run_id)?;
                    aggs.push(store.cell_aggregates(out.run_id)?);
                    results.push(result_of(p, error, out.verdicts));
                    runs.push((p.file.clone(), data));
                }
                Err(e) => results.push(result_of(p, Some(format!("{e:#}")), Vec::new())),
            }
        }
        for m in &seed.meshes {
            let file = format!("mesh on {}", m.net);
            if o.quick {
                results.push(StudyResult { file, dropped: vec![m.finding.clone()], ..StudyResult::default() });
                continue;
            }
            say(&format!(
                "\nseed {}: a mesh on {} for {}, `net set {}` at {:.0} % ({} elapsed, about {} left)",
                seed.id,
                m.net,
                fmt_secs(m.seconds),
                m.change.join(" "),
                m.at * 100.0,
                fmt_secs(started.elapsed().as_secs_f64()),
                fmt_secs(left)
            ));
            left = (left - m.estimate_s()).max(0.0);
            // Both its verdicts state the one finding (`expect` 0).
            let findings = vec![Some(m.finding.clone())];
            let outcome = mesh(m, &o.db).and_then(|events| {
                if wanperf_sys::INTERRUPTED.load(Ordering::Acquire) {
                    bail!("interrupted");
                }
                Ok(events)
            });
            results.push(match outcome {
                Ok(events) => {
                    let verdicts = findings::mesh_verdicts(m, &events);
                    for v in &verdicts {
                        say(&format!("  {}", wanperf_study::expect::line(v)));
                    }
                    StudyResult { file, findings, verdicts, ..StudyResult::default() }
                }
                Err(e) => StudyResult { file, findings, error: Some(format!("{e:#}")), ..StudyResult::default() },
            });
        }
        if !seed.compares.is_empty() {
            // Cell by cell across two studies (e.g. copy against tput); a comparison whose
            // finding the quick grid leaves to the full run is not made.
            let dropped: Vec<String> = results.iter().flat_map(|r| r.dropped.clone()).collect();
            let medians = |file: &str, metric: &str| {
                let i = runs.iter().position(|(f, _)| f == file)?;
                let m = wanperf_study::expect::medians_by_cell(metric, &aggs[i], &runs[i].1.cells).ok()?.0;
                Some(m.into_iter().map(|(p, v)| (p.clone(), v)).collect())
            };
            let (made, left): (Vec<_>, Vec<_>) =
                seed.compares.iter().cloned().partition(|c| !dropped.contains(&c.finding));
            results.push(StudyResult {
                file: "across studies".into(),
                findings: made.iter().map(|c| Some(c.finding.clone())).collect(),
                verdicts: findings::compare(&made, &medians),
                dropped: left.into_iter().map(|c| c.finding).collect(),
                error: None,
            });
        }
        let rows = findings::rows(seed, &results);
        let counts = findings::counts(&rows);
        let published = seed
            .published
            .iter()
            .map(|pb| {
                let measured = match runs.iter().position(|(f, _)| *f == pb.study) {
                    None => Err("not run".to_string()),
                    Some(i) => {
                        wanperf_study::expect::median_where(&pb.metric, &pb.select(), &aggs[i], &runs[i].1.cells)
                            .and_then(|m| m.ok_or_else(|| "no cell of this run measured it".to_string()))
                    }
                };
                PublishedRow { published: pb, measured }
            })
            .collect();
        let report = o.out_dir.join(format!("seed{}.html", seed.id));
        let html = page::render(&SeedPage {
            seed,
            rows: &rows,
            published,
            runs,
            quick: o.quick,
            software: env.software.clone(),
        });
        std::fs::write(&report, html).with_context(|| format!("cannot write {}", report.display()))?;
        if o.json {
            (env.say)(
                &json!({"event": "seed", "id": seed.id, "ok": counts.ok(), "counts": counts, "findings": rows,
                "report": report.display().to_string()})
                .to_string(),
            );
        } else {
            (env.say)(&format!("\n{} — report: {}", counts.line(&seed.id), report.display()));
            for r in rows.iter().filter(|r| matches!(r.status, findings::Status::Fail | findings::Status::NotRun(_))) {
                (env.say)(&format!("  {} (line {}): {}", r.id, r.line, r.finding));
                for (file, v) in r.checks.iter().filter(|(_, v)| !v.pass) {
                    (env.say)(&format!("    {file}: {}", wanperf_study::expect::line(v)));
                }
                if let findings::Status::NotRun(why) = &r.status {
                    (env.say)(&format!("    not run: {why}"));
                }
            }
        }
        outcomes.push(SeedOutcome { id: seed.id.clone(), counts });
    }
    if !o.json && outcomes.len() > 1 {
        (env.say)("");
        for s in &outcomes {
            (env.say)(&s.counts.line(&s.id));
        }
    }
    Ok(outcomes)
}

/// Runs a [`MeshRun`] and returns the events central raised.
fn mesh(m: &registry::MeshRun, db: &str) -> Result<Vec<String>> {
    let hosts: Vec<&str> = m.hosts.iter().map(String::as_str).collect();
    let tests = format!(
        "[[test]]\nname = \"rtt\"\ntype = \"latency\"\ngroup = \"all\"\nrate = 10\n\
         [[test]]\nname = \"bulk\"\ntype = \"throughput\"\ngroup = \"all\"\ninterval = \"{}\"\nduration = \"{}\"\n",
        m.interval, m.duration
    );
    let file = |keys: &[String], addrs: &[String]| {
        wanperf_monitor::demo::mesh_file(&m.net, "10s", &hosts, keys, addrs, &tests)
    };
    let change: Vec<&str> = m.change.iter().map(String::as_str).collect();
    let says = format!("`net set {}`", m.change.join(" "));
    wanperf_monitor::demo::run_scenario(wanperf_monitor::demo::Scenario {
        preset: &m.net,
        sites: &hosts,
        mesh: &file,
        seconds: m.seconds,
        change_at: m.at,
        change: &change,
        change_says: &says,
        db,
        dashboard: None,
    })
}

fn result_of(p: &Planned, error: Option<String>, verdicts: Vec<wanperf_archive::Verdict>) -> StudyResult {
    StudyResult {
        file: p.file.clone(),
        findings: p.study.expects.iter().map(|e| e.finding.clone()).collect(),
        verdicts,
        dropped: p.dropped.clone(),
        error,
    }
}

/// Whether every seed reproduced.
pub fn all_ok(outcomes: &[SeedOutcome]) -> bool {
    outcomes.iter().all(|s| s.counts.ok())
}

/// The default folder for reports: `reproduce/` in the working directory.
pub fn default_out_dir() -> &'static Path {
    Path::new("reproduce")
}

/// The demo study: seed 000 on the SLAC→CERN 2000 path, scaled down.
pub const DEMO_STUDY: &str = include_str!("../../../scenarios/demo.toml");

/// `wanperf demo`: seed 000 ("Effect of load on RTT and loss") re-run on an emulated
/// SLAC→CERN 2000 path into `store` (described as `db`), with its report at `out`. Whether
/// every cell was measured.
pub fn demo(
    store: &mut dyn Store,
    parse: &dyn Fn(&str) -> Result<Study, StudyError>,
    env: &Env,
    out: &Path,
    db: &str,
) -> Result<bool> {
    let study = parse(DEMO_STUDY).map_err(|e| anyhow!("demo study: {e}"))?;
    let cells = study.cells();
    let est = study.time_s(&cells, env.flags);
    (env.say)("wanperf demo: seed 000 (\"Effect of load on RTT and loss\", SLAC → CERN, 2000) on an emulated path");
    (env.say)(study.description.trim());
    (env.say)(&format!("{} cells, about {}\n", cells.len(), fmt_secs(est)));
    let o = execute(store, DEMO_STUDY, &study, None, false, env)?;
    let data = store.run_data(o.run_id)?;
    if data.cells.is_empty() {
        bail!("run {} has no cells: nothing to report", o.run_id);
    }
    let report = wanperf_report::report(&data);
    std::fs::write(out, &report.html).with_context(|| format!("cannot write {}", out.display()))?;
    (env.say)(&format!("\nrun {} stored in {db}", o.run_id));
    (env.say)(&format!("report: {} ({} figures, open it in a browser)", out.display(), report.figures.len()));
    (env.say)("next: `wanperf reproduce 002 --quick` re-runs a whole seed and checks its findings");
    if !o.complete || o.failures > 0 {
        (env.say)(&format!("({} of {} cells measured, {} failed)", o.stored, o.planned, o.failures));
        return Ok(false);
    }
    Ok(true)
}
