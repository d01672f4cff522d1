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

mod error;
pub mod export;
pub mod import;
pub mod model;
pub mod postgres;
pub mod save;
pub mod schema;
pub mod sqlite;
mod store;

pub use crate::postgres::PgStore;
pub use error::{ArchiveError, Result};
pub use export::{export, Format, Table};
pub use import::{import_iperf3, import_ping, import_wanperf};
pub use model::*;
pub use sqlite::SqliteStore;
pub use store::{lock_wait, Access, Store, LOCK_WAIT};

use std::path::PathBuf;

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
