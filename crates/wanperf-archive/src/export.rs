//! Exports a run: the whole [`RunData`] as one JSON document, or one of its tables as CSV
//! for spreadsheets and data frames.
//!
//! CSV tables (one header line, then one row per record; all rows carry `run_id`, `cell_id`,
//! `index` and `repeat`, so the tables join):
//!
//! * `cells`: `kind`, `ok`, `failure`, `started_unix`, `duration_s`, one `param.NAME` column per
//!   swept parameter and one `summary.PATH` column per scalar of the summary (nested objects
//!   flattened with dots, e.g. `summary.rtt_ms.median`; arrays are left to the JSON export).
//! * `intervals`: `stream`, `start_s`, `end_s`, `bytes`, `throughput_bps`, `retransmits`,
//!   `cwnd_bytes`, `srtt_us`, `tcp` (JSON text).
//! * `probes`: `phase`, `seq`, `sent_s`, `rtt_ms` (empty when lost), `late`.
//!
//! Parquet is not offered (yet).

use crate::{ArchiveError, Result, RunData};
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::Write;
use std::str::FromStr;

/// A CSV table of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// One row per cell, parameters and summary flattened into columns.
    Cells,
    /// One row per interval and stream.
    Intervals,
    /// One row per probe.
    Probes,
}

/// What to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The whole run as one JSON document (the serde form of [`RunData`]) and a newline.
    Json,
    /// One table as CSV.
    Csv(Table),
}

impl Format {
    /// The names [`Format::from_str`] accepts.
    pub const NAMES: &'static [&'static str] = &["json", "csv", "csv:cells", "csv:intervals", "csv:probes"];
}

impl FromStr for Format {
    type Err = ArchiveError;

    /// `json`, `csv:cells` (or just `csv`), `csv:intervals`, `csv:probes`.
    fn from_str(s: &str) -> Result<Format> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "json" => Format::Json,
            "csv" | "csv:cells" => Format::Csv(Table::Cells),
            "csv:intervals" => Format::Csv(Table::Intervals),
            "csv:probes" => Format::Csv(Table::Probes),
            _ => {
                return Err(ArchiveError::Input(format!(
                    "unknown export format {s:?}; use one of {}",
                    Format::NAMES.join(", ")
                )))
            }
        })
    }
}

fn io(err: std::io::Error) -> ArchiveError {
    ArchiveError::Io { what: "writing the export".to_string(), err }
}

/// Writes `data` to `out` in `format`.
pub fn export(data: &RunData, format: Format, out: &mut dyn Write) -> Result<()> {
    match format {
        Format::Json => {
            serde_json::to_writer(&mut *out, data).map_err(|e| io(e.into()))?;
            out.write_all(b"\n").map_err(io)?;
        }
        Format::Csv(table) => {
            let mut w = csv::Writer::from_writer(&mut *out);
            match table {
                Table::Cells => cells_csv(data, &mut w),
                Table::Intervals => intervals_csv(data, &mut w),
                Table::Probes => probes_csv(data, &mut w),
            }
            .map_err(|e| io(e.into()))?;
            w.flush().map_err(io)?;
        }
    }
    out.flush().map_err(io)
}

/// A JSON value as a CSV field: strings raw, null empty, the rest as JSON.
fn field(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// The scalar leaves of `v`, keyed by dotted path under `prefix`.
fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                flatten(&format!("{prefix}.{k}"), v, out);
            }
        }
        Value::Array(_) => {}
        scalar => out.push((prefix.to_string(), scalar.clone())),
    }
}

fn cells_csv<W: Write>(data: &RunData, w: &mut csv::Writer<W>) -> csv::Result<()> {
    let flat: Vec<Vec<(String, Value)>> = data
        .cells
        .iter()
        .map(|c| {
            let mut f: Vec<(String, Value)> =
                c.cell.params.iter().map(|(k, v)| (format!("param.{k}"), v.clone())).collect();
            flatten("summary", &c.cell.summary, &mut f);
            f
        })
        .collect();
    // Parameters first, then the summary; each group sorted.
    let params: BTreeSet<&str> =
        flat.iter().flatten().map(|(k, _)| k.as_str()).filter(|k| k.starts_with("param.")).collect();
    let summary: BTreeSet<&str> =
        flat.iter().flatten().map(|(k, _)| k.as_str()).filter(|k| k.starts_with("summary")).collect();
    let fixed = ["run_id", "cell_id", "index", "repeat", "kind", "ok", "failure", "started_unix", "duration_s"];
    let columns: Vec<&str> = params.iter().chain(summary.iter()).copied().collect();
    w.write_record(fixed.iter().chain(columns.iter()))?;
    for (c, f) in data.cells.iter().zip(&flat) {
        let mut row = vec![
            c.run_id.to_string(),
            c.id.to_string(),
            c.cell.index.to_string(),
            c.cell.repeat.to_string(),
            c.cell.kind.clone(),
            c.cell.ok.to_string(),
            c.cell.failure.clone().unwrap_or_default(),
            c.cell.started_unix.to_string(),
            c.cell.duration_s.to_string(),
        ];
        let map: std::collections::HashMap<&str, &Value> = f.iter().map(|(k, v)| (k.as_str(), v)).collect();
        row.extend(columns.iter().map(|k| map.get(k).map(|v| field(v)).unwrap_or_default()));
        w.write_record(&row)?;
    }
    Ok(())
}

fn intervals_csv<W: Write>(data: &RunData, w: &mut csv::Writer<W>) -> csv::Result<()> {
    w.write_record([
        "run_id",
        "cell_id",
        "index",
        "repeat",
        "stream",
        "start_s",
        "end_s",
        "bytes",
        "throughput_bps",
        "retransmits",
        "cwnd_bytes",
        "srtt_us",
        "tcp",
    ])?;
    for c in &data.cells {
        let key = [c.run_id.to_string(), c.id.to_string(), c.cell.index.to_string(), c.cell.repeat.to_string()];
        for i in &c.cell.intervals {
            w.write_record(key.iter().cloned().chain([
                i.stream.to_string(),
                i.start_s.to_string(),
                i.end_s.to_string(),
                i.bytes.to_string(),
                i.throughput_bps.to_string(),
                i.retransmits.to_string(),
                opt(i.cwnd_bytes),
                opt(i.srtt_us),
                i.tcp.as_ref().map(Value::to_string).unwrap_or_default(),
            ]))?;
        }
    }
    Ok(())
}

fn probes_csv<W: Write>(data: &RunData, w: &mut csv::Writer<W>) -> csv::Result<()> {
    w.write_record(["run_id", "cell_id", "index", "repeat", "phase", "seq", "sent_s", "rtt_ms", "late"])?;
    for c in &data.cells {
        let key = [c.run_id.to_string(), c.id.to_string(), c.cell.index.to_string(), c.cell.repeat.to_string()];
        for p in &c.cell.probes {
            w.write_record(key.iter().cloned().chain([
                p.phase.clone(),
                p.seq.to_string(),
                p.sent_s.to_string(),
                opt(p.rtt_ms),
                p.late.to_string(),
            ]))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CellRecord, IntervalRow, ProbeRow, RunInfo, RunStatus, StoredCell};
    use serde_json::json;

    fn data() -> RunData {
        let cell = CellRecord {
            index: 0,
            repeat: 1,
            kind: "load".into(),
            params: [("streams".to_string(), json!(4)), ("cc".to_string(), json!("bbr"))].into(),
            ok: true,
            summary: json!({"throughput_bps": 1e9, "loaded": {"rtt_ms": {"median": 12.5}}, "list": [1, 2]}),
            intervals: vec![IntervalRow { stream: -1, end_s: 1.0, bytes: 10, ..Default::default() }],
            probes: vec![
                ProbeRow { seq: 0, phase: "loaded".into(), sent_s: 0.0, rtt_ms: Some(1.25), late: false },
                ProbeRow { seq: 1, phase: "loaded".into(), sent_s: 0.1, rtt_ms: None, late: true },
            ],
            ..Default::default()
        };
        RunData {
            run: RunInfo {
                id: 7,
                study: "s".into(),
                study_text: String::new(),
                spec: json!({}),
                software: "wanperf".into(),
                cells_planned: 1,
                cells_done: 1,
                started_unix: 1.0,
                finished_unix: None,
                status: RunStatus::Running,
            },
            cells: vec![StoredCell { id: 3, run_id: 7, cell }],
        }
    }

    fn run(format: &str) -> String {
        let mut out = Vec::new();
        export(&data(), format.parse().unwrap(), &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn json_round_trips() {
        let back: RunData = serde_json::from_str(&run("json")).unwrap();
        assert_eq!(back, data());
    }

    #[test]
    fn csv_tables() {
        let cells = run("csv");
        let mut lines = cells.lines();
        assert_eq!(
            lines.next().unwrap(),
            "run_id,cell_id,index,repeat,kind,ok,failure,started_unix,duration_s,param.cc,param.streams,\
             summary.loaded.rtt_ms.median,summary.throughput_bps"
        );
        assert_eq!(lines.next().unwrap(), "7,3,0,1,load,true,,0,0,bbr,4,12.5,1000000000.0");
        let probes = run("csv:probes");
        assert_eq!(probes.lines().nth(2).unwrap(), "7,3,0,1,loaded,1,0.1,,true");
        let intervals = run("CSV:intervals");
        assert_eq!(intervals.lines().count(), 2);
        assert!(intervals.lines().nth(1).unwrap().starts_with("7,3,0,1,-1,0,1,10,0,0,,,"));
    }

    #[test]
    fn unknown_format() {
        let e = "parquet".parse::<Format>().unwrap_err().to_string();
        assert!(e.contains("unknown export format") && e.contains("csv:probes"), "{e}");
    }
}
