//! What can go wrong with the archive: one error type for every store, importer and exporter.

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
    /// Another writer held the archive's write lock for longer than `lock_wait()`.
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
