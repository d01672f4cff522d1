//! The agent's spool: every result is written here first (SQLite, one row per result) and
//! removed only once the central service has acknowledged it, so a central that is down for
//! hours, or an agent that is killed, loses nothing. The row id is the result's `seq`:
//! `AUTOINCREMENT` never reuses an id, so `(agent, seq)` stays unique for the central's
//! de-duplication even after rows are deleted.
//!
//! The spool is bounded ([`Spool::max`] rows): a full spool refuses new results and counts
//! them, and the agent says so in its log and, once there is room, in a result of its own.

use rusqlite::{Connection, OptionalExtension};
use std::path::Path;
use wanperf_mesh::wire::MeshResult;

/// Why the spool failed.
#[derive(Debug, thiserror::Error)]
#[error("spool {path}: {msg}")]
pub struct SpoolError {
    path: String,
    msg: String,
}

/// The spool file.
pub struct Spool {
    conn: Connection,
    path: String,
    /// Most results held.
    pub max: u64,
    len: u64,
    /// Results refused because the spool was full, since it last had room.
    pub dropped: u64,
}

impl Spool {
    /// Opens (or creates) the spool at `path`, holding at most `max` results.
    pub fn open(path: &Path, max: u64) -> Result<Spool, SpoolError> {
        let p = path.display().to_string();
        let err = |e: rusqlite::Error| SpoolError { path: p.clone(), msg: e.to_string() };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| SpoolError { path: p.clone(), msg: e.to_string() })?;
        }
        let conn = Connection::open(path).map_err(err)?;
        conn.busy_timeout(std::time::Duration::from_secs(5)).map_err(err)?;
        conn.pragma_update(None, "journal_mode", "WAL").map_err(err)?;
        conn.pragma_update(None, "synchronous", "NORMAL").map_err(err)?;
        // A small page cache: the spool is a queue read from its head (an agent probing
        // hundreds of peers should stay within a few tens of MB).
        conn.pragma_update(None, "cache_size", -512).map_err(err)?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS results (seq INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);",
        )
        .map_err(err)?;
        let len: i64 = conn.query_row("SELECT COUNT(*) FROM results", [], |r| r.get(0)).map_err(err)?;
        let dropped: Option<i64> =
            conn.query_row("SELECT value FROM meta WHERE key = 'dropped'", [], |r| r.get(0)).optional().map_err(err)?;
        Ok(Spool { conn, path: p, max: max.max(1), len: len as u64, dropped: dropped.unwrap_or(0) as u64 })
    }

    fn err(&self, e: impl std::fmt::Display) -> SpoolError {
        SpoolError { path: self.path.clone(), msg: e.to_string() }
    }

    /// Results held.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds a result, numbered by the spool (the number comes back as its `seq` from
    /// [`Spool::peek`]). Returns the number, or `None` when the spool is full (the result is counted in [`Spool::dropped`]).
    pub fn push(&mut self, r: MeshResult) -> Result<Option<u64>, SpoolError> {
        if self.len >= self.max {
            self.dropped += 1;
            self.conn
                .execute(
                    "INSERT INTO meta (key, value) VALUES ('dropped', ?1)
                     ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    [self.dropped as i64],
                )
                .map_err(|e| self.err(e))?;
            return Ok(None);
        }
        // The row's number is the result's: `peek` sets it, the stored body's own is not read.
        let body = serde_json::to_string(&r).map_err(|e| self.err(e))?;
        self.conn.execute("INSERT INTO results (body) VALUES (?1)", [body]).map_err(|e| self.err(e))?;
        self.len += 1;
        Ok(Some(self.conn.last_insert_rowid() as u64))
    }

    /// The oldest `n` results, in `seq` order, each numbered by its row.
    pub fn peek(&self, n: usize) -> Result<Vec<MeshResult>, SpoolError> {
        let mut st =
            self.conn.prepare_cached("SELECT seq, body FROM results ORDER BY seq LIMIT ?1").map_err(|e| self.err(e))?;
        let rows =
            st.query_map([n as i64], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))).map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (seq, body) = row.map_err(|e| self.err(e))?;
            let mut r: MeshResult =
                serde_json::from_str(&body).map_err(|e| self.err(format!("a spooled result is damaged: {e}")))?;
            r.seq = seq as u64;
            out.push(r);
        }
        Ok(out)
    }

    /// Removes every result up to and including `seq` (acknowledged by the central service).
    pub fn remove_upto(&mut self, seq: u64) -> Result<(), SpoolError> {
        let n = self.conn.execute("DELETE FROM results WHERE seq <= ?1", [seq as i64]).map_err(|e| self.err(e))?;
        self.len = self.len.saturating_sub(n as u64);
        Ok(())
    }

    /// Takes the count of refused results (and clears it), once there is room to say so.
    pub fn take_dropped(&mut self) -> Result<u64, SpoolError> {
        let d = self.dropped;
        if d > 0 && self.len < self.max {
            self.dropped = 0;
            self.conn.execute("DELETE FROM meta WHERE key = 'dropped'", []).map_err(|e| self.err(e))?;
            return Ok(d);
        }
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wanperf_mesh::wire::{ResultKind, RunStatus};

    fn result(test: &str) -> MeshResult {
        MeshResult {
            seq: 0,
            test: test.into(),
            kind: ResultKind::Latency,
            src: "a".into(),
            dst: "b".into(),
            start: 1.0,
            end: 2.0,
            status: RunStatus::Ok,
            reason: None,
            latency: None,
            throughput: None,
            trace: None,
            capacity: None,
        }
    }

    fn tmp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("wanperf-spool-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d.join("spool.sqlite")
    }

    #[test]
    fn numbers_are_never_reused_and_survive_reopening() {
        let path = tmp("seq");
        let mut s = Spool::open(&path, 10).unwrap();
        assert_eq!(s.push(result("x")).unwrap(), Some(1));
        assert_eq!(s.push(result("y")).unwrap(), Some(2));
        s.remove_upto(2).unwrap();
        assert!(s.is_empty());
        drop(s);
        let mut s = Spool::open(&path, 10).unwrap();
        assert_eq!(s.push(result("z")).unwrap(), Some(3));
        let held = s.peek(10).unwrap();
        assert_eq!(held.len(), 1);
        assert_eq!((held[0].seq, held[0].test.as_str()), (3, "z"));
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    #[test]
    fn a_full_spool_refuses_and_counts() {
        let path = tmp("full");
        let mut s = Spool::open(&path, 2).unwrap();
        s.push(result("a")).unwrap();
        s.push(result("b")).unwrap();
        assert_eq!(s.push(result("c")).unwrap(), None);
        assert_eq!(s.push(result("d")).unwrap(), None);
        assert_eq!(s.take_dropped().unwrap(), 0, "no room yet to say so");
        drop(s);
        let mut s = Spool::open(&path, 2).unwrap();
        assert_eq!(s.dropped, 2, "the count survives a restart");
        s.remove_upto(1).unwrap();
        assert_eq!(s.take_dropped().unwrap(), 2);
        assert_eq!(s.take_dropped().unwrap(), 0);
        assert_eq!(s.peek(5).unwrap().iter().map(|r| r.test.clone()).collect::<Vec<_>>(), vec!["b"]);
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }
}
