//! The SQLite store: one file, WAL journal, `synchronous = NORMAL` (a committed cell survives
//! a crash of wanperf; a power cut may lose the last commits but never corrupts the file),
//! foreign keys on.
//!
//! Concurrency, and why it is built this way:
//! * A new archive is made complete under a temporary name in the same directory (WAL
//!   switched on, every migration applied, checkpointed and closed) and then renamed into
//!   place without replacing anything (`renameat2(RENAME_NOREPLACE)`, or a hard link where
//!   the file system lacks it). No process ever sees a half-made archive, and no two processes
//!   ever switch one file's journal mode at once: that switch upgrades a read lock to an
//!   exclusive one, and SQLite answers `SQLITE_BUSY` at once, without waiting, when two
//!   connections try it together — the "database is locked" that made `wanperf runs` fail
//!   while a study created the archive.
//! * Writers take the write lock first (`BEGIN IMMEDIATE`, or a single-statement write), so
//!   the busy handler always applies; they wait up to [`lock_wait`] and then fail with
//!   [`ArchiveError::Busy`] naming the holder's pid and command when `/proc/locks` tells it.
//! * Readers open the file read-only and never migrate: in WAL mode they neither wait for
//!   writers nor make writers wait.

use crate::error::{ArchiveError, Result};
use crate::model::{
    CellAggregate, CellRecord, CounterRow, ExporterRow, FlowRow, IntervalRow, MeshQuery, MeshRow, MeshSlot, MeshStats,
    NewRun, ProbeRow, RunData, RunInfo, RunStatus, StoredCell, Verdict,
};
use crate::schema::{self, SQLITE};
use crate::store::{lock_wait, Access, Store};
use rusqlite::{params, Connection, ErrorCode, OpenFlags, OptionalExtension, Row, TransactionBehavior};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The archive in a SQLite file.
pub struct SqliteStore {
    conn: Connection,
    /// The file (None in memory), for naming a lock's holder.
    path: Option<PathBuf>,
}

fn db(e: rusqlite::Error) -> ArchiveError {
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            ArchiveError::Busy { holder: None, waited: lock_wait() }
        }
        _ => ArchiveError::Db(e.to_string()),
    }
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> ArchiveError {
    move |err| ArchiveError::Io { what, err }
}

impl SqliteStore {
    /// Opens the archive at `path` to write, creating it (and its parent directories) if
    /// needed, and brings its schema up to date. A new archive appears under its name only
    /// when it is complete (see the module's notes).
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore> {
        let path = path.as_ref();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
        }
        if !path.try_exists().map_err(io(format!("looking for {}", path.display())))? {
            create(path)?;
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags)
            .map_err(|e| ArchiveError::Db(format!("{}: {e}", path.display())))?;
        let mut store = SqliteStore::setup(conn, Some(path.to_path_buf()))?;
        let r = store.migrate();
        store.named(r)?;
        Ok(store)
    }

    /// Opens the archive at `path` only to read (`runs`, `export`, `report`): never creates,
    /// migrates or writes, so it never takes a write lock. A missing or empty file is
    /// [`ArchiveError::NoArchive`]; an older schema is [`ArchiveError::TooOld`].
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<SqliteStore> {
        let path = path.as_ref();
        let missing = || ArchiveError::NoArchive(path.display().to_string());
        if !path.try_exists().map_err(io(format!("looking for {}", path.display())))? {
            return Err(missing());
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags)
            .map_err(|e| ArchiveError::Db(format!("{}: {e}", path.display())))?;
        let store = SqliteStore::setup(conn, Some(path.to_path_buf()))?;
        let found = store.stored_version()?;
        let known = schema::SCHEMA_VERSION;
        match found {
            0 => Err(missing()),
            v if v < known => Err(ArchiveError::TooOld { found, known }),
            _ => {
                schema::pending(found)?; // refuses a newer schema
                Ok(store)
            }
        }
    }

    /// An archive in memory (for tests and throwaway use).
    pub fn in_memory() -> Result<SqliteStore> {
        let mut store = SqliteStore::setup(Connection::open_in_memory().map_err(db)?, None)?;
        store.migrate()?;
        Ok(store)
    }

    /// Per-connection settings; never changes the file (the journal mode is the file's own).
    fn setup(conn: Connection, path: Option<PathBuf>) -> Result<SqliteStore> {
        conn.busy_timeout(lock_wait()).map_err(db)?;
        conn.execute_batch("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;").map_err(db)?;
        Ok(SqliteStore { conn, path })
    }

    /// Whether this store was opened read-only.
    pub fn access(&self) -> Access {
        if self.conn.is_readonly(rusqlite::MAIN_DB).unwrap_or(false) {
            Access::ReadOnly
        } else {
            Access::ReadWrite
        }
    }

    /// Fills in who holds the lock when `r` is [`ArchiveError::Busy`].
    fn named<T>(&self, r: Result<T>) -> Result<T> {
        match r {
            Err(ArchiveError::Busy { holder: None, waited }) => {
                Err(ArchiveError::Busy { holder: self.path.as_deref().and_then(lock_holders), waited })
            }
            r => r,
        }
    }

    /// Applies the missing migrations in one transaction. The version is first read without
    /// a lock (opening an up-to-date archive never waits for a writer); when migrations are
    /// due (an archive of an older wanperf), the write lock is taken and the version read
    /// again, so two processes upgrading at once do not both migrate.
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

/// Makes a complete archive at `path` (see the module's notes). Losing the race to another
/// process that creates it at the same time is fine: its archive is used.
fn create(path: &Path) -> Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map_or_else(|| "archive".into(), |n| n.to_string_lossy().into_owned());
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let tmp = dir.join(format!(".{name}.creating-{}-{nanos}", std::process::id()));
    let _cleanup = Cleanup(tmp.clone());
    {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&tmp, flags)
            .map_err(|e| ArchiveError::Db(format!("{}: {e}", tmp.display())))?;
        // Nobody else can see this file: switching the journal mode cannot meet a lock.
        let _mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)).map_err(db)?;
        let mut store = SqliteStore::setup(conn, None)?;
        store.migrate()?;
        // Everything into the main file before it is renamed (the WAL is named after it).
        store.conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).map_err(db)?;
        store.conn.close().map_err(|(_, e)| db(e))?;
    }
    std::fs::File::open(&tmp).and_then(|f| f.sync_all()).map_err(io(format!("syncing {}", tmp.display())))?;
    match rename_noreplace(&tmp, path) {
        Ok(()) => {
            let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(ArchiveError::Io { what: format!("creating {}", path.display()), err: e }),
    }
}

/// Removes a temporary archive and its WAL and shared-memory files, whatever happened.
struct Cleanup(PathBuf);
impl Drop for Cleanup {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut p = self.0.clone().into_os_string();
            p.push(suffix);
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Renames `from` to `to` unless `to` exists (then `AlreadyExists`), atomically.
fn rename_noreplace(from: &Path, to: &Path) -> std::io::Result<()> {
    wanperf_sys::rename_noreplace(from, to)
}

/// Who holds a write lock on the archive at `path`, from `/proc/locks`: SQLite's WAL write
/// lock is byte 120 of the `-shm` file; in rollback mode, the RESERVED/PENDING bytes at 1 GiB
/// of the database file. Read without opening either file (closing a descriptor of a file
/// drops every POSIX lock this process holds on it, SQLite's included).
pub fn lock_holders(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let mut shm = path.as_os_str().to_owned();
    shm.push("-shm");
    let inode = |p: &Path| std::fs::metadata(p).ok().map(|m| m.ino());
    let targets: Vec<(u64, u64)> =
        [(inode(Path::new(&shm)), 120), (inode(path), 0x4000_0001), (inode(path), 0x4000_0000)]
            .into_iter()
            .filter_map(|(i, b)| Some((i?, b)))
            .collect();
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let me = std::process::id();
    let mut pids: Vec<u32> = locks.lines().filter_map(|l| holder_of(l, &targets)).filter(|&p| p != me).collect();
    pids.sort_unstable();
    pids.dedup();
    if pids.is_empty() {
        return None;
    }
    let described: Vec<String> = pids
        .iter()
        .map(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace(|c: char| c.is_control(), " ");
            let cmd: String = cmd.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(100).collect();
            if cmd.is_empty() {
                format!("pid {pid}")
            } else {
                format!("pid {pid}: {cmd}")
            }
        })
        .collect();
    Some(described.join(", "))
}

/// The pid in one `/proc/locks` line when it is a granted WRITE lock covering one of the
/// (inode, byte) targets: `1: POSIX  ADVISORY  WRITE 1234 00:2a:5678 120 120`.
fn holder_of(line: &str, targets: &[(u64, u64)]) -> Option<u32> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.get(1) == Some(&"->") || f.len() < 8 || f[3] != "WRITE" {
        return None; // a waiter, or not an exclusive lock
    }
    let pid: u32 = f[4].parse().ok()?;
    let ino: u64 = f[5].rsplit(':').next()?.parse().ok()?;
    let start: u64 = f[6].parse().ok()?;
    let end: u64 = if f[7] == "EOF" { u64::MAX } else { f[7].parse().ok()? };
    targets.iter().any(|&(i, b)| i == ino && (start..=end).contains(&b)).then_some(pid)
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

impl SqliteStore {
    fn create_run_(&mut self, run: &NewRun) -> Result<i64> {
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

    fn store_cell_(&mut self, run_id: i64, cell: &CellRecord) -> Result<i64> {
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

    fn done_cells_(&mut self, run_id: i64) -> Result<Vec<(u32, u32)>> {
        let mut st = self.conn.prepare_cached(schema::DONE_CELLS).map_err(db)?;
        let rows = st.query_map([run_id], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?))).map_err(db)?;
        let mut out = Vec::new();
        for row in rows {
            let (i, r) = row.map_err(db)?;
            out.push((from_i64("cell index", i)?, from_i64("cell repeat", r)?));
        }
        Ok(out)
    }

    fn finish_run_(&mut self, run_id: i64, status: RunStatus, finished_unix: f64) -> Result<()> {
        let n = self.conn.execute(schema::FINISH_RUN, params![status.as_str(), finished_unix, run_id]).map_err(db)?;
        if n == 0 {
            return Err(ArchiveError::NoRun(run_id));
        }
        Ok(())
    }

    fn runs_(&mut self) -> Result<Vec<RunInfo>> {
        let mut st = self.conn.prepare(&schema::runs_query()).map_err(db)?;
        let rows = st.query_map([], run_from_row).map_err(db)?;
        let mut out = Vec::new();
        for row in rows {
            out.push(row.map_err(db)?.decode()?);
        }
        Ok(out)
    }

    fn run_info_(&mut self, run_id: i64) -> Result<RunInfo> {
        let row = self.conn.query_row(&schema::run_info_query(), [run_id], run_from_row).optional().map_err(db)?;
        row.ok_or(ArchiveError::NoRun(run_id))?.decode()
    }

    fn run_data_(&mut self, run_id: i64) -> Result<RunData> {
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
        let mut verdicts = Vec::new();
        {
            let mut st = tx.prepare(schema::SELECT_VERDICTS).map_err(db)?;
            let mut rows = st.query([run_id]).map_err(db)?;
            while let Some(r) = rows.next().map_err(db)? {
                verdicts.push(Verdict {
                    expect: from_i64("verdict expect", r.get(0).map_err(db)?)?,
                    line: from_i64("verdict line", r.get(1).map_err(db)?)?,
                    text: r.get(2).map_err(db)?,
                    cells: r.get(3).map_err(db)?,
                    pass: r.get(4).map_err(db)?,
                    measured: r.get(5).map_err(db)?,
                    bound: r.get(6).map_err(db)?,
                    margin: r.get(7).map_err(db)?,
                    unit: r.get(8).map_err(db)?,
                    note: r.get(9).map_err(db)?,
                });
            }
        }
        tx.commit().map_err(db)?;
        Ok(RunData { run, cells, verdicts })
    }

    fn store_verdicts_(&mut self, run_id: i64, verdicts: &[Verdict]) -> Result<()> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db)?;
        let exists = tx.query_row("SELECT 1 FROM runs WHERE id = ?1", [run_id], |_| Ok(())).optional().map_err(db)?;
        if exists.is_none() {
            return Err(ArchiveError::NoRun(run_id));
        }
        tx.execute(schema::DELETE_VERDICTS, [run_id]).map_err(db)?;
        {
            let mut st = tx.prepare_cached(schema::INSERT_VERDICT).map_err(db)?;
            for (i, v) in verdicts.iter().enumerate() {
                st.execute(params![
                    run_id,
                    i as i64,
                    i64::from(v.expect),
                    i64::from(v.line),
                    v.text,
                    v.cells,
                    v.pass,
                    v.measured,
                    v.bound,
                    v.margin,
                    v.unit,
                    v.note
                ])
                .map_err(db)?;
            }
        }
        tx.commit().map_err(db)
    }

    fn cell_aggregates_(&mut self, run_id: i64) -> Result<Vec<CellAggregate>> {
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
                let agg = schema::phase_aggregate(
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

impl Store for SqliteStore {
    fn create_run(&mut self, run: &NewRun) -> Result<i64> {
        let r = self.create_run_(run);
        self.named(r)
    }
    fn store_cell(&mut self, run_id: i64, cell: &CellRecord) -> Result<i64> {
        let r = self.store_cell_(run_id, cell);
        self.named(r)
    }
    fn done_cells(&mut self, run_id: i64) -> Result<Vec<(u32, u32)>> {
        let r = self.done_cells_(run_id);
        self.named(r)
    }
    fn finish_run(&mut self, run_id: i64, status: RunStatus, finished_unix: f64) -> Result<()> {
        let r = self.finish_run_(run_id, status, finished_unix);
        self.named(r)
    }
    fn runs(&mut self) -> Result<Vec<RunInfo>> {
        let r = self.runs_();
        self.named(r)
    }
    fn run_info(&mut self, run_id: i64) -> Result<RunInfo> {
        let r = self.run_info_(run_id);
        self.named(r)
    }
    fn run_data(&mut self, run_id: i64) -> Result<RunData> {
        let r = self.run_data_(run_id);
        self.named(r)
    }
    fn store_verdicts(&mut self, run_id: i64, verdicts: &[Verdict]) -> Result<()> {
        let r = self.store_verdicts_(run_id, verdicts);
        self.named(r)
    }
    fn cell_aggregates(&mut self, run_id: i64) -> Result<Vec<CellAggregate>> {
        let r = self.cell_aggregates_(run_id);
        self.named(r)
    }
    fn store_flows(&mut self, rows: &[FlowRow], exporters: &[ExporterRow]) -> Result<()> {
        let r = self.store_flows_(rows, exporters);
        self.named(r)
    }
    fn flows(&mut self, from_unix: f64, to_unix: f64) -> Result<Vec<FlowRow>> {
        let mut st = self.conn.prepare_cached(schema::SELECT_FLOWS).map_err(db)?;
        let rows = st
            .query_map(params![from_unix, to_unix], |r| {
                Ok(FlowRow {
                    bin_unix: r.get(0)?,
                    bin_s: r.get(1)?,
                    exporter: r.get(2)?,
                    domain: r.get(3)?,
                    src: r.get(4)?,
                    dst: r.get(5)?,
                    proto: r.get(6)?,
                    sport: r.get(7)?,
                    dport: r.get(8)?,
                    sampling: r.get(9)?,
                    bytes: r.get(10)?,
                    packets: r.get(11)?,
                    flows: r.get(12)?,
                    raw_bytes: r.get(13)?,
                    raw_packets: r.get(14)?,
                })
            })
            .map_err(db)?;
        rows.collect::<std::result::Result<Vec<_>, _>>().map_err(db)
    }
    fn exporters(&mut self) -> Result<Vec<ExporterRow>> {
        let mut st = self.conn.prepare_cached(schema::SELECT_EXPORTERS).map_err(db)?;
        let rows = st
            .query_map([], |r| {
                Ok(ExporterRow {
                    session_unix: r.get(0)?,
                    exporter: r.get(1)?,
                    protocol: r.get(2)?,
                    domain: r.get(3)?,
                    seq_unit: r.get(4)?,
                    datagrams: r.get(5)?,
                    records: r.get(6)?,
                    malformed: r.get(7)?,
                    awaiting_template: r.get(8)?,
                    expected: r.get(9)?,
                    lost: r.get(10)?,
                    resets: r.get(11)?,
                    sampling: r.get(12)?,
                    socket_drops: r.get(13)?,
                    updated_unix: r.get(14)?,
                })
            })
            .map_err(db)?;
        rows.collect::<std::result::Result<Vec<_>, _>>().map_err(db)
    }
    fn store_counters(&mut self, rows: &[CounterRow]) -> Result<()> {
        let r = self.store_counters_(rows);
        self.named(r)
    }
    fn counters(&mut self, from_unix: f64, to_unix: f64) -> Result<Vec<CounterRow>> {
        let mut st = self.conn.prepare_cached(schema::SELECT_COUNTERS).map_err(db)?;
        let rows = st
            .query_map(params![from_unix, to_unix], |r| {
                Ok(CounterRow {
                    device: r.get(0)?,
                    interface: r.get(1)?,
                    source: r.get(2)?,
                    at_unix: r.get(3)?,
                    speed_bps: r.get(4)?,
                    in_octets: r.get(5)?,
                    out_octets: r.get(6)?,
                    in_errors: r.get(7)?,
                    out_errors: r.get(8)?,
                    in_drops: r.get(9)?,
                    out_drops: r.get(10)?,
                    width: r.get(11)?,
                })
            })
            .map_err(db)?;
        rows.collect::<std::result::Result<Vec<_>, _>>().map_err(db)
    }
    fn store_mesh(&mut self, rows: &[MeshRow]) -> Result<u64> {
        let r = self.store_mesh_(rows);
        self.named(r)
    }
    fn mesh_results(&mut self, q: &MeshQuery) -> Result<Vec<MeshRow>> {
        let mut st = self.conn.prepare_cached(schema::SELECT_MESH).map_err(db)?;
        let rows = st
            .query_map(params![q.from_unix, q.to_unix, q.src, q.dst, q.kind, i64::from(q.failed_only)], |r| {
                let sent: Option<i64> = r.get(12)?;
                let stats = match sent {
                    Some(sent) => Some(MeshStats {
                        sent,
                        lost: r.get::<_, Option<i64>>(13)?.unwrap_or(0),
                        min_ms: r.get(14)?,
                        p25_ms: r.get(15)?,
                        p75_ms: r.get(16)?,
                        p90_ms: r.get(17)?,
                        max_ms: r.get(18)?,
                        owd_fwd_ms: r.get(19)?,
                        owd_rev_ms: r.get(20)?,
                    }),
                    None => None,
                };
                Ok((
                    MeshRow {
                        agent: r.get(0)?,
                        seq: r.get(1)?,
                        test: r.get(2)?,
                        kind: r.get(3)?,
                        src: r.get(4)?,
                        dst: r.get(5)?,
                        start_unix: r.get(6)?,
                        end_unix: r.get(7)?,
                        status: r.get(8)?,
                        reason: r.get(9)?,
                        value: r.get(10)?,
                        loss: r.get(11)?,
                        stats,
                        detail: Value::Null,
                        received_unix: r.get(22)?,
                    },
                    r.get::<_, String>(21)?,
                ))
            })
            .map_err(db)?;
        rows.map(|r| {
            let (mut row, detail) = r.map_err(db)?;
            row.detail = from_text("mesh_results.detail", &detail)?;
            Ok(row)
        })
        .collect()
    }
    fn mesh_slots(&mut self, src: &str, dst: &str, from: f64, to: f64, slot_s: f64) -> Result<Vec<MeshSlot>> {
        let q = if schema::hourly_slots(from, slot_s) {
            schema::mesh_slots_hourly_sqlite()
        } else {
            schema::mesh_slots_sqlite()
        };
        let mut st = self.conn.prepare_cached(&q).map_err(db)?;
        let rows = st
            .query_map(params![src, dst, from, to, slot_s], |r| {
                Ok(MeshSlot {
                    index: r.get(0)?,
                    summaries: r.get(1)?,
                    sent: r.get::<_, Option<i64>>(2)?.unwrap_or(0),
                    lost: r.get::<_, Option<i64>>(3)?.unwrap_or(0),
                    min_ms: r.get(4)?,
                    p25_ms: r.get(5)?,
                    median_ms: r.get(6)?,
                    p75_ms: r.get(7)?,
                    p90_ms: r.get(8)?,
                    max_ms: r.get(9)?,
                    owd_fwd_ms: r.get(10)?,
                    owd_rev_ms: r.get(11)?,
                })
            })
            .map_err(db)?;
        rows.collect::<std::result::Result<Vec<_>, _>>().map_err(db)
    }
}

impl SqliteStore {
    fn store_mesh_(&mut self, rows: &[MeshRow]) -> Result<u64> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db)?;
        let mut new = 0u64;
        {
            let mut st = tx.prepare_cached(schema::INSERT_MESH).map_err(db)?;
            let mut hour = tx.prepare_cached(schema::UPSERT_MESH_HOUR).map_err(db)?;
            for r in rows {
                let x = r.stats.clone();
                let (sent, lost) = (x.as_ref().map(|x| x.sent), x.as_ref().map(|x| x.lost));
                let f = |g: fn(&MeshStats) -> Option<f64>| x.as_ref().and_then(g);
                let added = st
                    .execute(params![
                        r.agent,
                        r.seq,
                        r.test,
                        r.kind,
                        r.src,
                        r.dst,
                        r.start_unix,
                        r.end_unix,
                        r.status,
                        r.reason,
                        r.value,
                        r.loss,
                        sent,
                        lost,
                        f(|x| x.min_ms),
                        f(|x| x.p25_ms),
                        f(|x| x.p75_ms),
                        f(|x| x.p90_ms),
                        f(|x| x.max_ms),
                        f(|x| x.owd_fwd_ms),
                        f(|x| x.owd_rev_ms),
                        to_text(&r.detail)?,
                        r.received_unix
                    ])
                    .map_err(db)? as u64;
                new += added;
                if let (1, Some(x)) = (added, r.stats.as_ref().filter(|_| r.kind == "latency" && r.status == "ok")) {
                    let (h, [a, b, c, d, e, g]) = schema::hour_params(r.start_unix, x, r.value);
                    hour.execute(params![
                        r.src, r.dst, h, x.sent, x.lost, x.min_ms, x.max_ms, a.0, a.1, b.0, b.1, c.0, c.1, d.0, d.1,
                        e.0, e.1, g.0, g.1
                    ])
                    .map_err(db)?;
                }
            }
        }
        tx.commit().map_err(db)?;
        Ok(new)
    }

    fn store_counters_(&mut self, rows: &[CounterRow]) -> Result<()> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db)?;
        {
            let mut st = tx.prepare_cached(schema::INSERT_COUNTERS).map_err(db)?;
            for r in rows {
                st.execute(params![
                    r.device,
                    r.interface,
                    r.source,
                    r.at_unix,
                    r.speed_bps,
                    r.in_octets,
                    r.out_octets,
                    r.in_errors,
                    r.out_errors,
                    r.in_drops,
                    r.out_drops,
                    r.width
                ])
                .map_err(db)?;
            }
        }
        tx.commit().map_err(db)
    }

    fn store_flows_(&mut self, rows: &[FlowRow], exporters: &[ExporterRow]) -> Result<()> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db)?;
        {
            let mut st = tx.prepare_cached(schema::INSERT_FLOW).map_err(db)?;
            for r in rows {
                st.execute(params![
                    r.bin_unix,
                    r.bin_s,
                    r.exporter,
                    r.domain,
                    r.src,
                    r.dst,
                    r.proto,
                    r.sport,
                    r.dport,
                    r.sampling,
                    r.bytes,
                    r.packets,
                    r.flows,
                    r.raw_bytes,
                    r.raw_packets
                ])
                .map_err(db)?;
            }
            let mut st = tx.prepare_cached(schema::UPSERT_EXPORTER).map_err(db)?;
            for e in exporters {
                st.execute(params![
                    e.session_unix,
                    e.exporter,
                    e.protocol,
                    e.domain,
                    e.seq_unit,
                    e.datagrams,
                    e.records,
                    e.malformed,
                    e.awaiting_template,
                    e.expected,
                    e.lost,
                    e.resets,
                    e.sampling,
                    e.socket_drops,
                    e.updated_unix
                ])
                .map_err(db)?;
            }
        }
        tx.commit().map_err(db)
    }
}

#[cfg(test)]
mod tests {
    use super::holder_of;

    #[test]
    fn lock_lines() {
        let t = [(5678, 120), (99, 0x4000_0001)];
        assert_eq!(holder_of("1: POSIX  ADVISORY  WRITE 1234 00:2a:5678 120 120", &t), Some(1234));
        assert_eq!(holder_of("2: POSIX  ADVISORY  READ 1234 00:2a:5678 120 120", &t), None);
        assert_eq!(holder_of("3: POSIX  ADVISORY  WRITE 1234 00:2a:5678 123 127", &t), None);
        assert_eq!(holder_of("4: -> POSIX  ADVISORY  WRITE 77 00:2a:5678 120 120", &t), None);
        assert_eq!(holder_of("5: POSIX  ADVISORY  WRITE 42 fd:01:99 1073741824 EOF", &t), Some(42));
        assert_eq!(holder_of("6: OFDLCK ADVISORY  WRITE -1 00:2a:5678 120 120", &t), None);
        assert_eq!(holder_of("garbage", &t), None);
    }
}
