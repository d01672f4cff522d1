//! The archive: every run, cell, interval and probe wanperf measures or imports, in SQLite
//! (the default: a file in the user's data directory) or PostgreSQL (`postgres://…`), behind
//! one interface with one schema and versioned migrations.
//!
//! * [`open`] picks the store from a spec: a `postgres://` URL or a SQLite file path
//!   ([`default_path`] when the user gives none).
//! * [`Store`] writes runs and cells (a cell with all its intervals and probes in one
//!   transaction) and reads them back whole ([`Store::run_data`]) or aggregated in the database
//!   ([`Store::cell_aggregates`]).
//! * [`import`] turns iperf3 `-J` and iputils `ping` output into a run of one cell;
//!   [`export`] writes a run as JSON, or one table as CSV or Parquet.
//!
//! ```
//! use wanperf_archive::{CellRecord, NewRun, ProbeRow, SqliteStore, Store};
//! let mut store = SqliteStore::in_memory().unwrap();
//! let run = NewRun {
//!     study: "demo".into(),
//!     study_text: String::new(),
//!     spec: serde_json::json!({}),
//!     software: "wanperf 0.1.0".into(),
//!     cells_planned: 1,
//!     started_unix: 1.7e9,
//! };
//! let id = store.create_run(&run).unwrap();
//! let probes = vec![ProbeRow { seq: 0, rtt_ms: Some(1.5), ..Default::default() }];
//! store.store_cell(id, &CellRecord { kind: "ping".into(), ok: true, probes, ..Default::default() }).unwrap();
//! assert_eq!(store.cell_aggregates(id).unwrap()[0].phases[""].mean_ms, Some(1.5));
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod export;
pub mod import;
pub mod model;
pub mod postgres;
pub mod save;
pub mod schema;
pub mod sqlite;

pub use crate::postgres::PgStore;
pub use export::{export, Format, Table};
pub use import::{import_iperf3, import_ping, import_wanperf};
pub use model::*;
pub use sqlite::SqliteStore;

use std::path::PathBuf;

/// What can go wrong with the archive.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// The database said no.
    #[error("database error: {0}")]
    Db(String),
    /// No such run.
    #[error("no run {0} in the archive")]
    NoRun(i64),
    /// The archive was written by a newer wanperf.
    #[error("the archive's schema is version {found}, newer than this wanperf knows ({known}); upgrade wanperf")]
    TooNew {
        /// Version in the database.
        found: i64,
        /// Newest this build knows.
        known: i64,
    },
    /// The cell (index, repeat) is already stored for this run: a cell is never stored twice.
    #[error("run {run_id} already has cell {index} repeat {repeat}")]
    DuplicateCell {
        /// The run.
        run_id: i64,
        /// The cell's index.
        index: u32,
        /// The cell's repeat.
        repeat: u32,
    },
    /// The archive was written by an older wanperf and a read-only command cannot upgrade it.
    #[error("the archive's schema is version {found}, older than this wanperf's ({known}); any writing command (study run, import) upgrades it")]
    TooOld {
        /// Version in the database.
        found: i64,
        /// Newest this build knows.
        known: i64,
    },
    /// A read-only command found no archive (nothing has been stored there yet).
    #[error("no archive at {0} yet (nothing has been stored there)")]
    NoArchive(String),
    /// Another writer held the archive's write lock for longer than [`lock_wait`].
    #[error("the archive stayed locked by {} for {:.1} s; giving up (WANPERF_LOCK_WAIT=SECONDS waits longer)", holder.as_deref().unwrap_or("another writer"), waited.as_secs_f64())]
    Busy {
        /// Who holds the lock, when it can be told (`pid 1234: wanperf study run …`).
        holder: Option<String>,
        /// How long this process waited.
        waited: std::time::Duration,
    },
    /// A bad input file or value.
    #[error("{0}")]
    Input(String),
    /// Reading or writing a file.
    #[error("{what}: {err}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        err: std::io::Error,
    },
}

/// Result with [`ArchiveError`].
pub type Result<T> = std::result::Result<T, ArchiveError>;

/// One interface over both databases.
pub trait Store {
    /// Starts a run; returns its id.
    fn create_run(&mut self, run: &NewRun) -> Result<i64>;
    /// Stores one cell with its intervals and probes in one transaction; returns its id.
    fn store_cell(&mut self, run_id: i64, cell: &CellRecord) -> Result<i64>;
    /// (index, repeat) of every cell stored for the run (for `--resume`).
    fn done_cells(&mut self, run_id: i64) -> Result<Vec<(u32, u32)>>;
    /// Marks the run finished.
    fn finish_run(&mut self, run_id: i64, status: RunStatus, finished_unix: f64) -> Result<()>;
    /// Every run, newest first.
    fn runs(&mut self) -> Result<Vec<RunInfo>>;
    /// One run.
    fn run_info(&mut self, run_id: i64) -> Result<RunInfo>;
    /// One run with all its cells, intervals and probes.
    fn run_data(&mut self, run_id: i64) -> Result<RunData>;
    /// Per-cell probe and throughput aggregates computed in the database.
    fn cell_aggregates(&mut self, run_id: i64) -> Result<Vec<CellAggregate>>;
    /// Stores flow bins and the exporters' counters in one transaction.
    fn store_flows(&mut self, rows: &[FlowRow], exporters: &[ExporterRow]) -> Result<()>;
    /// Flow bins that start in [from_unix, to_unix).
    fn flows(&mut self, from_unix: f64, to_unix: f64) -> Result<Vec<FlowRow>>;
    /// Every exporter's counters, newest session first.
    fn exporters(&mut self) -> Result<Vec<ExporterRow>>;
    /// Stores interface counter readings in one transaction.
    fn store_counters(&mut self, rows: &[CounterRow]) -> Result<()>;
    /// Counter readings taken in [from_unix, to_unix), per device, interface and source in time
    /// order.
    fn counters(&mut self, from_unix: f64, to_unix: f64) -> Result<Vec<CounterRow>>;
    /// Stores mesh results in one transaction; one whose `(agent, seq)` is already stored is
    /// skipped. Returns how many were new.
    fn store_mesh(&mut self, rows: &[MeshRow]) -> Result<u64>;
    /// Mesh results that match, in start order.
    fn mesh_results(&mut self, q: &MeshQuery) -> Result<Vec<MeshRow>>;
    /// One pair's `ok` latency summaries starting in `[from, to)`, aggregated per slot of
    /// `slot_s` seconds in the database (a year of one-minute summaries is one index range
    /// scan, not half a million rows to the caller).
    fn mesh_slots(&mut self, src: &str, dst: &str, from: f64, to: f64, slot_s: f64) -> Result<Vec<MeshSlot>>;
}

/// How long a writer waits for another writer's transaction (or a migration) before it fails
/// with [`ArchiveError::Busy`], unless `$WANPERF_LOCK_WAIT` gives seconds.
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// [`LOCK_WAIT`], or `$WANPERF_LOCK_WAIT` seconds (0.1 to 86400) when set.
pub fn lock_wait() -> std::time::Duration {
    std::env::var("WANPERF_LOCK_WAIT")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| (0.1..=86_400.0).contains(s))
        .map_or(LOCK_WAIT, std::time::Duration::from_secs_f64)
}

/// Whether an archive is opened to write, or only to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Creates the archive when it does not exist and brings its schema up to date.
    ReadWrite,
    /// Never creates, migrates or takes a write lock: `runs`, `export`, `report`.
    ReadOnly,
}

/// Opens the archive named by `spec` to write: a `postgres://` or `postgresql://` URL opens a
/// [`PgStore`], anything else is a SQLite file path (created with its directories if needed,
/// atomically: see [`SqliteStore::open`]). The schema is brought up to date either way.
pub fn open(spec: &str) -> Result<Box<dyn Store>> {
    open_with(spec, Access::ReadWrite)
}

/// Opens the archive named by `spec` only to read: never creates it, never migrates, never
/// takes a write lock, so it cannot make a writer wait or fail. A missing (or empty) SQLite
/// archive is [`ArchiveError::NoArchive`].
pub fn open_read_only(spec: &str) -> Result<Box<dyn Store>> {
    open_with(spec, Access::ReadOnly)
}

/// [`open`] or [`open_read_only`].
pub fn open_with(spec: &str, access: Access) -> Result<Box<dyn Store>> {
    if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
        Ok(Box::new(PgStore::connect_with(spec, access)?))
    } else if spec.is_empty() {
        Err(ArchiveError::Input("empty archive path".into()))
    } else {
        match access {
            Access::ReadWrite => Ok(Box::new(SqliteStore::open(spec)?)),
            Access::ReadOnly => Ok(Box::new(SqliteStore::open_read_only(spec)?)),
        }
    }
}

/// Where the archive is by default: `$WANPERF_DB` if set (a path or a `postgres://` URL; pass
/// it to [`open`] as a string), else `$XDG_DATA_HOME/wanperf/archive.sqlite`, else
/// `$HOME/.local/share/wanperf/archive.sqlite` (relative to the current directory when even
/// `HOME` is unset).
pub fn default_path() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(p) = var("WANPERF_DB") {
        return PathBuf::from(p);
    }
    // The XDG spec says relative values are to be ignored.
    if let Some(p) = var("XDG_DATA_HOME").map(PathBuf::from).filter(|p| p.is_absolute()) {
        return p.join("wanperf").join("archive.sqlite");
    }
    let home = var("HOME").map(PathBuf::from).unwrap_or_default();
    home.join(".local/share/wanperf/archive.sqlite")
}

/// Builds a phase's aggregate from the columns of [`schema::AGG_PROBES`] (shared by the
/// stores): probes sent and answered, mean, min, max and mean of squares of the RTTs.
pub(crate) fn phase_aggregate(
    sent: i64,
    received: i64,
    mean: Option<f64>,
    min: Option<f64>,
    max: Option<f64>,
    mean_sq: Option<f64>,
) -> Result<PhaseAggregate> {
    let sent = u64::try_from(sent).map_err(|_| ArchiveError::Db(format!("negative probe count {sent}")))?;
    let received = u64::try_from(received).map_err(|_| ArchiveError::Db(format!("negative count {received}")))?;
    Ok(PhaseAggregate {
        sent,
        received,
        loss_pct: if sent > 0 { 100.0 * sent.saturating_sub(received) as f64 / sent as f64 } else { 0.0 },
        mean_ms: mean,
        stdev_ms: mean.zip(mean_sq).map(|(m, sq)| schema::pop_stdev(m, sq)),
        min_ms: min,
        max_ms: max,
    })
}
