//! The SQLite store: one file, WAL journal, `synchronous = NORMAL` (a committed cell survives
//! a crash of wanperf; a power cut may lose the last commits but never corrupts the file),
//! foreign keys on.

use crate::schema::{self, SQLITE};
use crate::{
    ArchiveError, CellAggregate, CellRecord, IntervalRow, NewRun, ProbeRow, Result, RunData, RunInfo, RunStatus, Store,
    StoredCell,
};
use rusqlite::{params, Connection, ErrorCode, OptionalExtension, Row, TransactionBehavior};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// The archive in a SQLite file.
pub struct SqliteStore {
    conn: Connection,
}

fn db(e: rusqlite::Error) -> ArchiveError {
    ArchiveError::Db(e.to_string())
}

impl SqliteStore {
    /// Opens (creating it and its parent directories if needed) the archive at `path` and
    /// brings its schema up to date.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore> {
        let path = path.as_ref();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|err| ArchiveError::Io { what: format!("creating {}", dir.display()), err })?;
        }
        let conn = Connection::open(path).map_err(|e| ArchiveError::Db(format!("{}: {e}", path.display())))?;
        SqliteStore::setup(conn)
    }

    /// An archive in memory (for tests and throwaway use).
    pub fn in_memory() -> Result<SqliteStore> {
        SqliteStore::setup(Connection::open_in_memory().map_err(db)?)
    }

    fn setup(conn: Connection) -> Result<SqliteStore> {
        conn.busy_timeout(std::time::Duration::from_secs(10)).map_err(db)?;
        // journal_mode answers with a row; in memory it stays "memory".
        let _mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)).map_err(db)?;
        conn.execute_batch("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;").map_err(db)?;
        let mut store = SqliteStore { conn };
        store.migrate()?;
        Ok(store)
    }

    /// Applies the missing migrations in one transaction. The version is first read without
    /// a lock (opening an up-to-date archive never waits for a writer); when migrations are
    /// due, a write lock is taken and the version read again, so two processes opening a new
    /// archive at once do not both migrate.
    fn migrate(&mut self) -> Result<()> {
        if schema::pending(self.stored_version()?)?.is_empty() {
            return Ok(());
        }
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db)?;
        tx.execute(schema::CREATE_VERSION_TABLE, []).map_err(db)?;
        let current: Option<i64> =
            tx.query_row("SELECT MAX(version) FROM schema_version", [], |r| r.get(0)).map_err(db)?;
        let todo = schema::pending(current.unwrap_or(0))?;
        if todo.is_empty() {
            return Ok(());
        }
        for m in todo {
            for s in m.statements {
                tx.execute_batch(&schema::render(s, SQLITE)).map_err(db)?;
            }
        }
        let newest = todo[todo.len() - 1].version;
        tx.execute("DELETE FROM schema_version", []).map_err(db)?;
        tx.execute("INSERT INTO schema_version (version) VALUES (?1)", [newest]).map_err(db)?;
        tx.commit().map_err(db)
    }

    /// The stored schema version; 0 for a new database.
    fn stored_version(&self) -> Result<i64> {
        let has_table: bool = self
            .conn
            .query_row(
                "SELECT COUNT(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .map_err(db)?;
        if !has_table {
            return Ok(0);
        }
        let v: Option<i64> =
            self.conn.query_row("SELECT MAX(version) FROM schema_version", [], |r| r.get(0)).map_err(db)?;
        Ok(v.unwrap_or(0))
    }

    /// The schema version of the open database.
    pub fn schema_version(&self) -> Result<i64> {
        self.stored_version()
    }

    /// The underlying connection (for ad-hoc queries).
    pub fn connection(&self) -> &Connection {
        &self.conn
    }
}

/// JSON to stored text.
fn to_text<T: serde::Serialize + ?Sized>(v: &T) -> Result<String> {
    serde_json::to_string(v).map_err(|e| ArchiveError::Input(format!("cannot encode JSON: {e}")))
}

/// Stored text to JSON.
fn from_text<T: serde::de::DeserializeOwned>(column: &str, s: &str) -> Result<T> {
    serde_json::from_str(s).map_err(|e| ArchiveError::Db(format!("bad JSON in column {column}: {e}")))
}

fn opt_from_text(column: &str, s: Option<String>) -> Result<Option<Value>> {
    s.map(|s| from_text(column, &s)).transpose()
}

/// u64 → i64 for storage.
pub(crate) fn to_i64(what: &str, v: u64) -> Result<i64> {
    i64::try_from(v).map_err(|_| ArchiveError::Input(format!("{what} {v} is too large to store")))
}

/// Stored i64 → u32/u64.
pub(crate) fn from_i64<T: TryFrom<i64>>(what: &str, v: i64) -> Result<T> {
    T::try_from(v).map_err(|_| ArchiveError::Db(format!("stored {what} {v} is out of range")))
}

fn run_from_row(r: &Row) -> rusqlite::Result<RunRow> {
    Ok(RunRow {
        id: r.get(0)?,
        study: r.get(1)?,
        study_text: r.get(2)?,
        spec: r.get(3)?,
        software: r.get(4)?,
        cells_planned: r.get(5)?,
        cells_done: r.get(6)?,
        started_unix: r.get(7)?,
        finished_unix: r.get(8)?,
        status: r.get(9)?,
    })
}

/// A runs row as stored, before decoding.
pub(crate) struct RunRow {
    pub id: i64,
    pub study: String,
    pub study_text: String,
    pub spec: String,
    pub software: String,
    pub cells_planned: i64,
    pub cells_done: i64,
    pub started_unix: f64,
    pub finished_unix: Option<f64>,
    pub status: String,
}

impl RunRow {
    /// Decodes (shared with the PostgreSQL store, which hands JSON over as text too).
    pub(crate) fn decode(self) -> Result<RunInfo> {
        Ok(RunInfo {
            id: self.id,
            study: self.study,
            study_text: self.study_text,
            spec: from_text("runs.spec", &self.spec)?,
            software: self.software,
            cells_planned: from_i64("cells_planned", self.cells_planned)?,
            cells_done: from_i64("cells_done", self.cells_done)?,
            started_unix: self.started_unix,
            finished_unix: self.finished_unix,
            status: RunStatus::parse(&self.status)
                .ok_or_else(|| ArchiveError::Db(format!("unknown run status {:?}", self.status)))?,
        })
    }
}

impl Store for SqliteStore {
    fn create_run(&mut self, run: &NewRun) -> Result<i64> {
        self.conn
            .query_row(
                schema::INSERT_RUN,
                params![
                    run.study,
                    run.study_text,
                    to_text(&run.spec)?,
                    run.software,
                    i64::from(run.cells_planned),
                    run.started_unix,
                    RunStatus::Running.as_str()
                ],
                |r| r.get(0),
            )
            .map_err(db)
    }

    fn store_cell(&mut self, run_id: i64, cell: &CellRecord) -> Result<i64> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db)?;
        let exists = tx.query_row("SELECT 1 FROM runs WHERE id = ?1", [run_id], |_| Ok(())).optional().map_err(db)?;
        if exists.is_none() {
            return Err(ArchiveError::NoRun(run_id));
        }
        let cell_id: i64 = tx
            .query_row(
                schema::INSERT_CELL,
                params![
                    run_id,
                    i64::from(cell.index),
                    i64::from(cell.repeat),
                    cell.kind,
                    to_text(&cell.params)?,
                    cell.ok,
                    cell.failure,
                    cell.started_unix,
                    cell.duration_s,
                    to_text(&cell.summary)?,
                    cell.hosts.as_ref().map(to_text).transpose()?,
                    cell.emulator.as_ref().map(to_text).transpose()?,
                ],
                |r| r.get(0),
            )
            .map_err(|e| match e.sqlite_error_code() {
                Some(ErrorCode::ConstraintViolation) => {
                    ArchiveError::DuplicateCell { run_id, index: cell.index, repeat: cell.repeat }
                }
                _ => db(e),
            })?;
        {
            let mut st = tx
                .prepare_cached(
                    "INSERT INTO intervals (cell_id, stream, start_s, end_s, bytes, throughput_bps, retransmits,
                     cwnd_bytes, srtt_us, tcp) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                )
                .map_err(db)?;
            for i in &cell.intervals {
                st.execute(params![
                    cell_id,
                    i.stream,
                    i.start_s,
                    i.end_s,
                    to_i64("interval bytes", i.bytes)?,
                    i.throughput_bps,
                    to_i64("retransmits", i.retransmits)?,
                    i.cwnd_bytes.map(|c| to_i64("cwnd_bytes", c)).transpose()?,
                    i.srtt_us,
                    i.tcp.as_ref().map(to_text).transpose()?,
                ])
                .map_err(db)?;
            }
            let mut st = tx
                .prepare_cached(
                    "INSERT INTO probes (cell_id, seq, phase, sent_s, rtt_ms, late) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .map_err(db)?;
            for p in &cell.probes {
                st.execute(params![cell_id, to_i64("probe seq", p.seq)?, p.phase, p.sent_s, p.rtt_ms, p.late])
                    .map_err(db)?;
            }
        }
        tx.commit().map_err(db)?;
        Ok(cell_id)
    }

    fn done_cells(&mut self, run_id: i64) -> Result<Vec<(u32, u32)>> {
        let mut st = self.conn.prepare_cached(schema::DONE_CELLS).map_err(db)?;
        let rows = st.query_map([run_id], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?))).map_err(db)?;
        let mut out = Vec::new();
        for row in rows {
            let (i, r) = row.map_err(db)?;
            out.push((from_i64("cell index", i)?, from_i64("cell repeat", r)?));
        }
        Ok(out)
    }

    fn finish_run(&mut self, run_id: i64, status: RunStatus, finished_unix: f64) -> Result<()> {
        let n = self.conn.execute(schema::FINISH_RUN, params![status.as_str(), finished_unix, run_id]).map_err(db)?;
        if n == 0 {
            return Err(ArchiveError::NoRun(run_id));
        }
        Ok(())
    }

    fn runs(&mut self) -> Result<Vec<RunInfo>> {
        let mut st = self.conn.prepare(&schema::runs_query()).map_err(db)?;
        let rows = st.query_map([], run_from_row).map_err(db)?;
        let mut out = Vec::new();
        for row in rows {
            out.push(row.map_err(db)?.decode()?);
        }
        Ok(out)
    }

    fn run_info(&mut self, run_id: i64) -> Result<RunInfo> {
        let row = self.conn.query_row(&schema::run_info_query(), [run_id], run_from_row).optional().map_err(db)?;
        row.ok_or(ArchiveError::NoRun(run_id))?.decode()
    }

    fn run_data(&mut self, run_id: i64) -> Result<RunData> {
        // One read transaction: a consistent snapshot even while a study is writing.
        let tx = self.conn.transaction().map_err(db)?;
        let run = tx.query_row(&schema::run_info_query(), [run_id], run_from_row).optional().map_err(db)?;
        let run = run.ok_or(ArchiveError::NoRun(run_id))?.decode()?;
        let mut cells = Vec::new();
        {
            let mut st = tx.prepare(schema::CELLS).map_err(db)?;
            let mut rows = st.query([run_id]).map_err(db)?;
            while let Some(r) = rows.next().map_err(db)? {
                let params: String = r.get(4).map_err(db)?;
                let summary: String = r.get(9).map_err(db)?;
                let cell = CellRecord {
                    index: from_i64("cell index", r.get(1).map_err(db)?)?,
                    repeat: from_i64("cell repeat", r.get(2).map_err(db)?)?,
                    kind: r.get(3).map_err(db)?,
                    params: from_text("cells.params", &params)?,
                    ok: r.get(5).map_err(db)?,
                    failure: r.get(6).map_err(db)?,
                    started_unix: r.get(7).map_err(db)?,
                    duration_s: r.get(8).map_err(db)?,
                    summary: from_text("cells.summary", &summary)?,
                    hosts: opt_from_text("cells.hosts", r.get(10).map_err(db)?)?,
                    emulator: opt_from_text("cells.emulator", r.get(11).map_err(db)?)?,
                    intervals: Vec::new(),
                    probes: Vec::new(),
                };
                cells.push(StoredCell { id: r.get(0).map_err(db)?, run_id, cell });
            }
            let mut ist = tx.prepare(schema::INTERVALS).map_err(db)?;
            let mut pst = tx.prepare(schema::PROBES).map_err(db)?;
            for c in &mut cells {
                let mut rows = ist.query([c.id]).map_err(db)?;
                while let Some(r) = rows.next().map_err(db)? {
                    c.cell.intervals.push(IntervalRow {
                        stream: r.get(0).map_err(db)?,
                        start_s: r.get(1).map_err(db)?,
                        end_s: r.get(2).map_err(db)?,
                        bytes: from_i64("interval bytes", r.get(3).map_err(db)?)?,
                        throughput_bps: r.get(4).map_err(db)?,
                        retransmits: from_i64("retransmits", r.get(5).map_err(db)?)?,
                        cwnd_bytes: r.get::<_, Option<i64>>(6).map_err(db)?.map(|v| from_i64("cwnd", v)).transpose()?,
                        srtt_us: r.get::<_, Option<i64>>(7).map_err(db)?.map(|v| from_i64("srtt", v)).transpose()?,
                        tcp: opt_from_text("intervals.tcp", r.get(8).map_err(db)?)?,
                    });
                }
                let mut rows = pst.query([c.id]).map_err(db)?;
                while let Some(r) = rows.next().map_err(db)? {
                    c.cell.probes.push(ProbeRow {
                        seq: from_i64("probe seq", r.get(0).map_err(db)?)?,
                        phase: r.get(1).map_err(db)?,
                        sent_s: r.get(2).map_err(db)?,
                        rtt_ms: r.get(3).map_err(db)?,
                        late: r.get(4).map_err(db)?,
                    });
                }
            }
        }
        tx.commit().map_err(db)?;
        Ok(RunData { run, cells })
    }

    fn cell_aggregates(&mut self, run_id: i64) -> Result<Vec<CellAggregate>> {
        let tx = self.conn.transaction().map_err(db)?;
        let exists = tx.query_row("SELECT 1 FROM runs WHERE id = ?1", [run_id], |_| Ok(())).optional().map_err(db)?;
        if exists.is_none() {
            return Err(ArchiveError::NoRun(run_id));
        }
        let mut out = Vec::new();
        let mut by_id = BTreeMap::new();
        {
            let mut st = tx.prepare(schema::AGG_CELLS).map_err(db)?;
            let mut rows = st.query([run_id]).map_err(db)?;
            while let Some(r) = rows.next().map_err(db)? {
                let id: i64 = r.get(0).map_err(db)?;
                let params: String = r.get(3).map_err(db)?;
                by_id.insert(id, out.len());
                out.push(CellAggregate {
                    cell_id: id,
                    index: from_i64("cell index", r.get(1).map_err(db)?)?,
                    repeat: from_i64("cell repeat", r.get(2).map_err(db)?)?,
                    params: from_text("cells.params", &params)?,
                    ok: r.get(4).map_err(db)?,
                    ..CellAggregate::default()
                });
            }
            let mut st = tx.prepare(schema::AGG_PROBES).map_err(db)?;
            let mut rows = st.query([run_id]).map_err(db)?;
            while let Some(r) = rows.next().map_err(db)? {
                let id: i64 = r.get(0).map_err(db)?;
                let Some(&k) = by_id.get(&id) else { continue };
                let phase: String = r.get(1).map_err(db)?;
                let agg = crate::phase_aggregate(
                    r.get(2).map_err(db)?,
                    r.get(3).map_err(db)?,
                    r.get(4).map_err(db)?,
                    r.get(5).map_err(db)?,
                    r.get(6).map_err(db)?,
                    r.get(7).map_err(db)?,
                )?;
                out[k].phases.insert(phase, agg);
            }
            let mut st = tx.prepare(schema::AGG_INTERVALS).map_err(db)?;
            let mut rows = st.query([run_id]).map_err(db)?;
            while let Some(r) = rows.next().map_err(db)? {
                let id: i64 = r.get(0).map_err(db)?;
                let Some(&k) = by_id.get(&id) else { continue };
                out[k].mean_throughput_bps = r.get(1).map_err(db)?;
                out[k].retransmits = from_i64("retransmits", r.get(2).map_err(db)?)?;
            }
        }
        tx.commit().map_err(db)?;
        Ok(out)
    }
}
