//! `wanperf study run` and `wanperf demo`: the arguments, and the glue to the study crate
//! (wanperf-study: the spec parser and the runner).

pub mod flags;
pub use wanperf_study::spec;

use crate::store::{describe_db, open_store};
use anyhow::{anyhow, Context, Result};
use clap::{Args, Subcommand};
use spec::{Study, Target};
use std::path::PathBuf;
use std::process::ExitCode;
use wanperf_study::run::{execute, Env};

/// `wanperf study` subcommands.
#[derive(Subcommand, Debug)]
pub enum StudyCmd {
    /// Run a study file (see scenarios/), storing every cell in the archive.
    Run(RunArgs),
    /// Re-evaluate a stored run's stated expectations (`[[expect]]` in its study file).
    Check(CheckArgs),
}

/// Options of `study check`.
#[derive(Args, Debug)]
#[command(after_long_help = "\
The expectations are read from the study text stored with the run and evaluated on its
stored cells, exactly as `study run` did after the run (each cell's value is the median of
its repeats). Exits non-zero if one fails.

Examples:
  wanperf study check latest
  wanperf study check 12 --json")]
pub struct CheckArgs {
    /// Run id, or `latest`.
    run: String,
    /// Archive: a SQLite file or a postgres:// URL.
    #[arg(long, value_name = "DB")]
    db: Option<String>,
    /// Print the verdicts as JSON.
    #[arg(long)]
    json: bool,
}

/// Options of `study run`.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  wanperf study run scenarios/seed000-load-rtt.toml --dry-run   # list the cells and the time
  wanperf study run scenarios/seed000-load-rtt.toml             # run, store, print the table
  wanperf study run scenarios/seed000-load-rtt.toml --resume    # finish a killed run
  wanperf study run scenarios/seed002-oscars-policer.toml --strict  # exit 1 on a failed [[expect]]
  wanperf study check latest                                     # re-evaluate them
  wanperf study run scenarios/seed000-cross-traffic.toml   # on the iepm-2000 network ([net])
  wanperf report latest -o report.html

A study file's [[expect]] entries state what must hold (e.g. `max = \"1.05 * rate\"`):
after the run each is printed PASS or FAIL with the measured value, the bound and the margin,
and stored with the run (docs/studies.md). It runs on an emulated path ([path]), a real host
or a network ([net]: pairs, cross traffic, link.NAME.KEY / host.… / traffic.… settings).

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
    /// Exit non-zero if a stated expectation (`[[expect]]`) fails (they are always evaluated,
    /// printed and stored).
    #[arg(long)]
    strict: bool,
    /// Run the file's reduced grid: its `[quick]` table merged over it (shorter tests, fewer
    /// cells; findings it drops are left to the full run).
    #[arg(long)]
    quick: bool,
}

/// Reads and parses a study file (its `[quick]` grid with `quick`); errors name the file and line.
pub fn load(file: &std::path::Path, quick: bool) -> Result<(String, Study)> {
    let mut text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    if quick {
        let q = wanperf_study::quick::apply(&text).map_err(|e| anyhow!("{}: {e}", file.display()))?;
        text = q.ok_or_else(|| anyhow!("{} has no [quick] table", file.display()))?.text;
    }
    let study = flags::parse(&text).map_err(|e| anyhow!("{}: {e}", file.display()))?;
    Ok((text, study))
}

impl RunArgs {
    /// Whether this run needs network namespaces (an emulated path or network, not a dry run).
    pub fn needs_path(&self) -> bool {
        !self.dry_run && load(&self.file, self.quick).is_ok_and(|(_, s)| !matches!(s.target, Target::Host { .. }))
    }
}

/// `wanperf study run`.
pub fn run(a: RunArgs) -> Result<ExitCode> {
    let (text, study) = load(&a.file, a.quick)?;
    if a.dry_run {
        for l in wanperf_study::run::dry_run(&study, &study.cells(), a.json, &flags::CliFlags) {
            outln!("{l}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut store = open_store(a.db.as_deref())?;
    let mut out = execute(store.as_mut(), &text, &study, a.resume.as_deref(), a.json, &env())?;
    out.strict = a.strict;
    if !a.json {
        out.summary_lines(&a.file, &describe_db(a.db.as_deref())).iter().for_each(|l| outln!("{l}"));
    }
    Ok(if out.ok() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// `wanperf study check`.
pub fn check(a: CheckArgs) -> Result<ExitCode> {
    let mut store = crate::store::open_store_read_only(a.db.as_deref())?;
    let run_id = crate::keep::run_id(store.as_mut(), &a.run)?;
    let c = wanperf_study::run::check_stored(store.as_mut(), run_id, &flags::parse, &flags::CliFlags)?;
    if a.json {
        let same = c.stored == c.verdicts;
        outln!("{}", serde_json::json!({"run": run_id, "verdicts": c.verdicts, "same_as_stored": same}));
    } else {
        c.lines(run_id).iter().for_each(|l| outln!("{l}"));
    }
    Ok(if c.verdicts.iter().all(|v| v.pass) { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// What the runner needs from the command line.
fn env() -> Env<'static> {
    Env {
        flags: &flags::CliFlags,
        path_config: &flags::path_config,
        software: crate::software(),
        say: &|l| outln!("{l}"),
    }
}

/// Options of `wanperf reproduce`.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Each seed's studies (scenarios/seed00N-*.toml, listed in scenarios/seeds.toml) run on their
emulated paths and networks into the archive; each [[expect]] names the seed finding it checks.
A report per seed (reproduce/seed00N.html): the seed's published numbers beside the new run's,
every finding with its checks and their measured values, or why it cannot be checked on an
emulator, then each study's own report. Exits non-zero if a check fails or a study did not run.

Examples:
  wanperf reproduce 002 --dry-run     # its studies, cells and time
  wanperf reproduce 002 --quick       # the reduced grid, the same checks (a few minutes)
  wanperf reproduce all               # the five seeds in full
  wanperf reproduce 002 --scenarios my-copy/   # edited copies of seeds.toml and the studies")]
pub struct ReproduceArgs {
    /// Seeds to re-run: 000, 001, 002, 003, 004 (or 0…4), or all.
    #[arg(required = true, value_name = "SEED")]
    seeds: Vec<String>,
    /// The reduced grid: fewer cells and shorter tests (each study's `[quick]` table).
    #[arg(long)]
    quick: bool,
    /// Read seeds.toml and the study files from DIR instead of the built-in copies.
    #[arg(long, value_name = "DIR")]
    scenarios: Option<PathBuf>,
    /// Where the reports go (seed00N.html).
    #[arg(short, long, value_name = "DIR", default_value = "reproduce")]
    output: PathBuf,
    /// List each seed's studies, cells and time; run nothing.
    #[arg(long)]
    dry_run: bool,
    /// Archive: a SQLite file or a postgres:// URL.
    #[arg(long, value_name = "DB")]
    db: Option<String>,
    /// Print each stored cell and each seed's findings as JSON.
    #[arg(long)]
    json: bool,
}

impl ReproduceArgs {
    /// Whether this run needs network namespaces.
    pub fn needs_path(&self) -> bool {
        !self.dry_run
    }
}

/// `wanperf reproduce`.
pub fn reproduce(a: ReproduceArgs) -> Result<ExitCode> {
    use wanperf_reproduce::run::{Options, Source};
    let o = Options {
        seeds: a.seeds,
        quick: a.quick,
        source: a.scenarios.map_or(Source::Embedded, Source::Dir),
        out_dir: a.output,
        json: a.json,
        parse: &flags::parse,
        db: describe_db(a.db.as_deref()),
    };
    let mut store = if a.dry_run { None } else { Some(open_store(a.db.as_deref())?) };
    let outcomes = wanperf_reproduce::run::reproduce(store.as_mut().map(|s| s.as_mut() as _), &o, &env())?;
    Ok(if wanperf_reproduce::run::all_ok(&outcomes) { ExitCode::SUCCESS } else { ExitCode::FAILURE })
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

/// `wanperf demo`: seed 000 ("Effect of load on RTT and loss") re-run on an emulated
/// SLAC→CERN 2000 path, stored in the archive, with a report.
pub fn demo(a: DemoArgs) -> Result<ExitCode> {
    let mut store = open_store(a.db.as_deref())?;
    let ok =
        wanperf_reproduce::run::demo(store.as_mut(), &flags::parse, &env(), &a.output, &describe_db(a.db.as_deref()))?;
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
