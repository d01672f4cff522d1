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

/// One link of a network cell's measured route, as its emulator record (`CellRecord::emulator`)
/// has it: the route's `"NAME a → b"` entry, the link's record, and the counters of the
/// direction the route crosses it in (its `ab` when it leaves from the link's `a` end).
#[derive(Debug, Clone, Copy)]
pub struct RouteLink<'a> {
    /// The route's entry (`slac-gw-esnet slac-gw → esnet`).
    pub hop: &'a str,
    /// The link's name.
    pub name: &'a str,
    /// The link's record (`name`, `a`, `b`, `ab`, `ba`).
    pub link: &'a Value,
    /// The crossed direction's counters (`classes`, `per_second_bytes`, …).
    pub dir: &'a Value,
}

/// The links a network cell's route crosses, in order (none for a path's record, which has no
/// route, or for a route entry naming no link of the record).
pub fn route_links(emulator: &Value) -> Vec<RouteLink<'_>> {
    let links = emulator["links"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    emulator["route"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|h| {
            let hop = h.as_str()?;
            let mut w = hop.split_whitespace();
            let (name, from) = (w.next()?, w.next()?);
            let link = links.iter().find(|l| l["name"] == name)?;
            let dir = if link["a"] == from { &link["ab"] } else { &link["ba"] };
            Some(RouteLink { hop, name, link, dir })
        })
        .collect()
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
    /// What its study said must hold, as evaluated after the run (none without `[[expect]]`).
    #[serde(default)]
    pub verdicts: Vec<Verdict>,
}

/// One stated expectation of a study evaluated on one cell (or one step of a trend).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// The expectation's position among the study's.
    pub expect: u32,
    /// Its line in the study file.
    pub line: u32,
    /// The expectation as written: `goodput ≤ 1.05 * window / rtt where streams = 1`.
    pub text: String,
    /// The cells it was evaluated on: `streams = 2, window = 64.0 KiB` (a trend: the step).
    pub cells: String,
    /// Whether it held.
    pub pass: bool,
    /// The measured value, in base units (bits, bit/s, s); none when nothing was measured.
    pub measured: Option<f64>,
    /// The bound it was held to (the nearer one when there are two).
    pub bound: Option<f64>,
    /// How far inside the bound, as a fraction of it (negative: outside).
    pub margin: Option<f64>,
    /// The value's unit: `bit/s`, `s`, `bit` or empty.
    pub unit: String,
    /// Why it must hold, and anything about this evaluation (a failed cell, repeats).
    pub note: String,
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
    /// Time-weighted mean of the all-streams interval goodput, bit/s (none without intervals).
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

/// One bin of one flow key, as `wanperf flows collect` stores it (several rows may share a
/// key when a late flow adds to a bin already stored: queries sum them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowRow {
    /// Bin start, Unix seconds.
    pub bin_unix: f64,
    /// Bin length, seconds.
    pub bin_s: f64,
    /// Exporter address.
    pub exporter: String,
    /// Observation domain / source id.
    pub domain: i64,
    /// Source address.
    pub src: String,
    /// Destination address.
    pub dst: String,
    /// IP protocol.
    pub proto: i64,
    /// Source port.
    pub sport: i64,
    /// Destination port.
    pub dport: i64,
    /// Sampling rate of the records (1: unsampled).
    pub sampling: i64,
    /// Bytes, corrected by the sampling rate.
    pub bytes: f64,
    /// Packets, corrected by the sampling rate.
    pub packets: f64,
    /// Flow records (their share in the bin).
    pub flows: f64,
    /// Bytes as exported.
    pub raw_bytes: f64,
    /// Packets as exported.
    pub raw_packets: f64,
}

/// What one exporter sent to one collector session, and what was lost of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExporterRow {
    /// The collector session (its start, Unix seconds): counters are per session.
    pub session_unix: f64,
    /// Exporter address.
    pub exporter: String,
    /// `netflow-v5`, `netflow-v9`, `ipfix`, `sflow`.
    pub protocol: String,
    /// Observation domain / source id / sub-agent.
    pub domain: i64,
    /// What the sequence numbers count (`flows`, `packets`, `records`, `datagrams`).
    pub seq_unit: String,
    /// Datagrams received.
    pub datagrams: i64,
    /// Flow records decoded.
    pub records: i64,
    /// Malformed datagrams or sets.
    pub malformed: i64,
    /// Data sets that waited for a template.
    pub awaiting_template: i64,
    /// Units sent by the exporter (from its sequence numbers).
    pub expected: i64,
    /// Units lost on the way.
    pub lost: i64,
    /// Exporter restarts seen.
    pub resets: i64,
    /// Sampling rate last announced.
    pub sampling: i64,
    /// Datagrams the collector's socket dropped (all exporters of the session).
    pub socket_drops: i64,
    /// When these counters were taken, Unix seconds.
    pub updated_unix: f64,
}

/// One reading of one interface's counters (`wanperf util`, sFlow counter samples). Octet
/// counters are unsigned 64-bit on the wire; they are stored as the same 64 bits in a signed
/// column (`as i64` / `as u64` round-trips every value).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterRow {
    /// The device (netns/host name, SNMP agent, sFlow agent).
    pub device: String,
    /// The interface (name or ifIndex).
    pub interface: String,
    /// Where the reading came from: `netlink`, `snmp`, `sflow`.
    pub source: String,
    /// When it was read, Unix seconds.
    pub at_unix: f64,
    /// Interface speed, bit/s, when known.
    pub speed_bps: Option<i64>,
    /// Octets in (bit pattern of the unsigned counter).
    pub in_octets: i64,
    /// Octets out.
    pub out_octets: i64,
    /// Errors in.
    pub in_errors: i64,
    /// Errors out.
    pub out_errors: i64,
    /// Drops in.
    pub in_drops: i64,
    /// Drops out.
    pub out_drops: i64,
    /// Counter width in bits (32 or 64).
    pub width: i64,
}

/// One result of a monitoring mesh (`wanperf agent` → `wanperf central`): a latency summary,
/// a throughput test or a trace, or a run that failed, was refused or was missed. An agent
/// numbers its results (`seq`, never reused), so `(agent, seq)` identifies a result and a
/// retried upload never stores one twice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeshRow {
    /// The agent (host name in the mesh file) that measured it.
    pub agent: String,
    /// The agent's number for it.
    pub seq: i64,
    /// The mesh test's name.
    pub test: String,
    /// `latency`, `throughput` or `trace`.
    pub kind: String,
    /// Source host.
    pub src: String,
    /// Destination host.
    pub dst: String,
    /// Start, Unix seconds.
    pub start_unix: f64,
    /// End, Unix seconds.
    pub end_unix: f64,
    /// `ok`, `failed`, `refused` or `missed`.
    pub status: String,
    /// Why it was not `ok`.
    pub reason: Option<String>,
    /// The headline number: median RTT in ms (latency), bit/s (throughput), or the
    /// destination's median RTT in ms (trace).
    pub value: Option<f64>,
    /// Loss fraction (latency).
    pub loss: Option<f64>,
    /// A latency summary's figures as columns, so pair pages are aggregated in the database.
    pub stats: Option<MeshStats>,
    /// The whole result as JSON.
    pub detail: serde_json::Value,
    /// When the central service stored it, Unix seconds.
    pub received_unix: f64,
}

/// A latency summary's figures (ms; probes sent and lost).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MeshStats {
    /// Probes sent.
    pub sent: i64,
    /// Probes lost.
    pub lost: i64,
    /// Minimum RTT.
    pub min_ms: Option<f64>,
    /// 25th percentile.
    pub p25_ms: Option<f64>,
    /// 75th percentile.
    pub p75_ms: Option<f64>,
    /// 90th percentile.
    pub p90_ms: Option<f64>,
    /// Maximum.
    pub max_ms: Option<f64>,
    /// Median one-way delay forward.
    pub owd_fwd_ms: Option<f64>,
    /// Median one-way delay back.
    pub owd_rev_ms: Option<f64>,
}

/// One time slot of a pair's latency summaries, aggregated in the database: slot `index`
/// starts at `from + index × slot_s`. Quantiles are the mean of the summaries' quantiles;
/// min and max are the extremes; loss is over all probes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MeshSlot {
    /// Slot number from the range's start.
    pub index: i64,
    /// Summaries in the slot.
    pub summaries: i64,
    /// Probes sent.
    pub sent: i64,
    /// Probes lost.
    pub lost: i64,
    /// Minimum RTT.
    pub min_ms: Option<f64>,
    /// Mean 25th percentile.
    pub p25_ms: Option<f64>,
    /// Mean median.
    pub median_ms: Option<f64>,
    /// Mean 75th percentile.
    pub p75_ms: Option<f64>,
    /// Mean 90th percentile.
    pub p90_ms: Option<f64>,
    /// Maximum.
    pub max_ms: Option<f64>,
    /// Mean forward one-way delay.
    pub owd_fwd_ms: Option<f64>,
    /// Mean reverse one-way delay.
    pub owd_rev_ms: Option<f64>,
}

/// Which mesh results to read: start in `[from_unix, to_unix)`, optionally one pair and kind.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MeshQuery {
    /// Earliest start, Unix seconds.
    pub from_unix: f64,
    /// Start before this, Unix seconds.
    pub to_unix: f64,
    /// Only this source.
    pub src: Option<String>,
    /// Only this destination.
    pub dst: Option<String>,
    /// Only this kind.
    pub kind: Option<String>,
    /// Only results that are not `ok` (failed, refused, missed).
    pub failed_only: bool,
}
