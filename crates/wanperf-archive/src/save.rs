//! Measurements made outside a study (`tput --save`, `copy --save`, `trace --save`,
//! `capacity --save`), stored as runs of one cell.

use crate::{ArchiveError, CellRecord, NewRun, RunStatus, Store};
use std::time::{SystemTime, UNIX_EPOCH};

/// Why a measurement could not be stored.
#[derive(Debug, thiserror::Error)]
pub enum SaveError {
    /// Its records did not read as a wanperf/1 measurement.
    #[error("{0}")]
    Records(String),
    /// The archive refused it.
    #[error(transparent)]
    Store(#[from] ArchiveError),
}

/// Stores a run of one cell, finished with `status` at `finished_unix`; returns its id.
pub fn run_of_one(
    store: &mut dyn Store,
    run: &NewRun,
    cell: &CellRecord,
    status: RunStatus,
    finished_unix: f64,
) -> Result<i64, ArchiveError> {
    let id = store.create_run(run)?;
    store.store_cell(id, cell)?;
    store.finish_run(id, status, finished_unix)?;
    Ok(id)
}

/// A measurement that succeeded is a complete run.
fn status_of(cell: &CellRecord) -> RunStatus {
    if cell.ok {
        RunStatus::Complete
    } else {
        RunStatus::Incomplete
    }
}

/// Stores the NDJSON records of a `tput` or `copy` as a run, with `command_line` as its text;
/// returns its id.
pub fn records(store: &mut dyn Store, ndjson: &str, command_line: &str) -> Result<i64, SaveError> {
    let (mut run, cell) = crate::import::import_wanperf(ndjson).map_err(|e| SaveError::Records(e.to_string()))?;
    run.study_text = command_line.to_string();
    Ok(run_of_one(store, &run, &cell, status_of(&cell), run.started_unix + cell.duration_s)?)
}

/// One measurement made outside a study.
pub struct Measurement<'a> {
    /// Its kind (`trace`, `capacity`): the run is named after it.
    pub kind: &'a str,
    /// Its parameters, by name.
    pub params: &'a [(&'a str, serde_json::Value)],
    /// Its summary.
    pub summary: serde_json::Value,
    /// Why it failed (`None`: it succeeded).
    pub failure: Option<String>,
    /// When it began.
    pub started: SystemTime,
}

/// Stores `m` as a run of its own, with `command_line` as the run's text; returns its id.
pub fn measurement(
    store: &mut dyn Store,
    m: Measurement,
    command_line: &str,
    software: &str,
) -> Result<i64, SaveError> {
    let unix = |t: SystemTime| t.duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    let params: std::collections::BTreeMap<String, serde_json::Value> =
        m.params.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    let mut spec = serde_json::Map::new();
    spec.insert(m.kind.to_string(), serde_json::json!(params));
    let cell = CellRecord {
        kind: m.kind.into(),
        params,
        ok: m.failure.is_none(),
        failure: m.failure,
        started_unix: unix(m.started),
        duration_s: m.started.elapsed().map_or(0.0, |d| d.as_secs_f64()),
        summary: m.summary,
        ..Default::default()
    };
    let run = NewRun {
        study: cell.kind.clone(),
        study_text: command_line.to_string(),
        spec: serde_json::Value::Object(spec),
        software: software.to_string(),
        cells_planned: 1,
        started_unix: cell.started_unix,
    };
    Ok(run_of_one(store, &run, &cell, status_of(&cell), cell.started_unix + cell.duration_s)?)
}
