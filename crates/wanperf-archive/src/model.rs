//! What the archive keeps: runs of studies, their cells, and each cell's per-interval and
//! per-probe records. Plain data, shared by the stores, the importers, the study runner and
//! the report.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// How a run ended (or that it has not).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Started and not finished: still running, or killed (then `--resume` can finish it).
    Running,
    /// Every planned cell was measured (some may have failed, as data).
    Complete,
    /// Stopped early (Ctrl-C, a fatal error); what was measured is kept.
    Incomplete,
}

impl RunStatus {
    /// The stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Complete => "complete",
            RunStatus::Incomplete => "incomplete",
        }
    }

    /// Parses the stored text.
    pub fn parse(s: &str) -> Option<RunStatus> {
        match s {
            "running" => Some(RunStatus::Running),
            "complete" => Some(RunStatus::Complete),
            "incomplete" => Some(RunStatus::Incomplete),
            _ => None,
        }
    }
}

/// A new run: what to store when it starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewRun {
    /// The study's name (from its file, or e.g. `import iperf3`).
    pub study: String,
    /// The study file's text, as given (empty for imports).
    pub study_text: String,
    /// The study as parsed (axes, measurement, path), for the report.
    pub spec: Value,
    /// wanperf's version and build, e.g. `wanperf 0.1.0`.
    pub software: String,
    /// Cells the study plans (cells × repeats).
    pub cells_planned: u32,
    /// Unix time, seconds.
    pub started_unix: f64,
}

/// A run as listed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    /// Archive-wide id.
    pub id: i64,
    /// See [`NewRun`].
    pub study: String,
    /// See [`NewRun`].
    pub study_text: String,
    /// See [`NewRun`].
    pub spec: Value,
    /// See [`NewRun`].
    pub software: String,
    /// See [`NewRun`].
    pub cells_planned: u32,
    /// Cells stored so far (failed ones included).
    pub cells_done: u32,
    /// Unix time, seconds.
    pub started_unix: f64,
    /// Unix time, seconds; none while running.
    pub finished_unix: Option<f64>,
    /// How it ended.
    pub status: RunStatus,
}

/// One measured cell with everything it produced. Stored in one transaction: a cell is
/// either wholly in the archive or not at all (which is what makes `--resume` exact).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CellRecord {
    /// Position in the study's list of cells (stable across `--resume`).
    pub index: u32,
    /// Repeat number, 0-based.
    pub repeat: u32,
    /// `tput`, `ping`, `load` (or `iperf3`, `ping` for imports).
    pub kind: String,
    /// The swept values for this cell, axis name → value (numbers in base units: bytes,
    /// bit/s, seconds; strings for direction, cc, preset).
    pub params: BTreeMap<String, Value>,
    /// False when the measurement failed; `failure` says why. Failures are data.
    pub ok: bool,
    /// Why it failed.
    pub failure: Option<String>,
    /// Unix time the cell started, seconds.
    pub started_unix: f64,
    /// Wall time the cell took, seconds.
    pub duration_s: f64,
    /// The measurement's own summary: the tput `end` record's `summary`, the ping `end`
    /// record's `summary`, or the load `cell` record (see docs/schema.md).
    pub summary: Value,
    /// Host captures (kernel, CPU, buffers, congestion control, interface) when known.
    pub hosts: Option<Value>,
    /// The emulated path's counters for this cell (`path stats` JSON) when it ran on one.
    pub emulator: Option<Value>,
    /// Per-interval throughput with TCP_INFO.
    pub intervals: Vec<IntervalRow>,
    /// Per-probe RTTs with phase tags.
    pub probes: Vec<ProbeRow>,
}

/// One interval of one stream (or of all streams together, `stream = -1`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IntervalRow {
    /// Stream id, or -1 for the sum over streams.
    pub stream: i32,
    /// Seconds since the test start.
    pub start_s: f64,
    /// Seconds since the test start.
    pub end_s: f64,
    /// Bytes received in the interval.
    pub bytes: u64,
    /// Goodput, bit/s.
    pub throughput_bps: f64,
    /// Retransmitted segments in the interval.
    pub retransmits: u64,
    /// Sender congestion window, bytes.
    pub cwnd_bytes: Option<u64>,
    /// Sender smoothed RTT, µs.
    pub srtt_us: Option<u32>,
    /// The rest of TCP_INFO as reported (docs/schema.md), if any.
    pub tcp: Option<Value>,
}

/// One probe.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeRow {
    /// Sequence number.
    pub seq: u64,
    /// `loaded`, `unloaded`, or empty when the measurement has no phases.
    pub phase: String,
    /// Seconds since the measurement started.
    pub sent_s: f64,
    /// Round-trip time, ms; none when lost.
    pub rtt_ms: Option<f64>,
    /// The reply came after the timeout (counted lost).
    pub late: bool,
}

/// A stored cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredCell {
    /// Archive-wide id.
    pub id: i64,
    /// Its run.
    pub run_id: i64,
    /// What was measured.
    #[serde(flatten)]
    pub cell: CellRecord,
}

/// A whole run: what the report and `export` read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunData {
    /// The run.
    pub run: RunInfo,
    /// Its cells, in (index, repeat) order.
    pub cells: Vec<StoredCell>,
}

/// Per-cell aggregates computed by the store's query (no per-probe rows fetched).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CellAggregate {
    /// The cell.
    pub cell_id: i64,
    /// See [`CellRecord`].
    pub index: u32,
    /// See [`CellRecord`].
    pub repeat: u32,
    /// See [`CellRecord`].
    pub params: BTreeMap<String, Value>,
    /// See [`CellRecord`].
    pub ok: bool,
    /// Per probe phase (`loaded`, `unloaded`, or empty).
    pub phases: BTreeMap<String, PhaseAggregate>,
    /// Mean of the all-streams interval goodput, bit/s (none without intervals).
    pub mean_throughput_bps: Option<f64>,
    /// Sum of the all-streams interval retransmits.
    pub retransmits: u64,
}

/// Probe aggregates for one phase of one cell.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseAggregate {
    /// Probes sent.
    pub sent: u64,
    /// Probes answered.
    pub received: u64,
    /// 100 × (sent − received) / sent.
    pub loss_pct: f64,
    /// Mean RTT, ms.
    pub mean_ms: Option<f64>,
    /// Population standard deviation of RTT, ms.
    pub stdev_ms: Option<f64>,
    /// Minimum RTT, ms.
    pub min_ms: Option<f64>,
    /// Maximum RTT, ms.
    pub max_ms: Option<f64>,
}
