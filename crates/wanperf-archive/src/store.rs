//! The one interface over both databases ([`Store`]), how an archive is opened
//! ([`Access`]) and how long a writer waits for another ([`lock_wait`]).

use crate::error::Result;
use crate::model::{
    CellAggregate, CellRecord, CounterRow, ExporterRow, FlowRow, MeshQuery, MeshRow, MeshSlot, NewRun, RunData,
    RunInfo, RunStatus, Verdict,
};

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
    /// Replaces a run's verdicts with these, in one transaction.
    fn store_verdicts(&mut self, run_id: i64, verdicts: &[Verdict]) -> Result<()>;
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
/// with [`ArchiveError::Busy`](crate::error::ArchiveError::Busy), unless `$WANPERF_LOCK_WAIT` gives seconds.
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
