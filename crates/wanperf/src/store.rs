//! The archive the commands write to and read from (`--db`, or the default one).

use anyhow::{Context, Result};
use wanperf_archive::Store;

/// Opens the archive named by `--db` or the default one to write (creating it if needed).
pub fn open_store(db: Option<&str>) -> Result<Box<dyn Store>> {
    let spec = describe_db(db);
    wanperf_archive::open(&spec).with_context(|| format!("cannot open the archive {spec}"))
}

/// Opens the archive named by `--db` or the default one only to read: `runs`, `export` and
/// `report` never create, migrate or lock it, so they cannot make a study wait or fail.
pub fn open_store_read_only(db: Option<&str>) -> Result<Box<dyn Store>> {
    let spec = describe_db(db);
    wanperf_archive::open_read_only(&spec).with_context(|| format!("cannot open the archive {spec}"))
}

/// Where a run is (for messages).
pub fn describe_db(db: Option<&str>) -> String {
    db.map_or_else(|| wanperf_archive::default_path().display().to_string(), str::to_string)
}
