//! Exports a run: the whole [`RunData`] as one JSON document, or one of its tables as CSV or
//! Parquet for spreadsheets and data frames.
//!
//! Tables (CSV: one header line, then one row per record; all rows carry `run_id`, `cell_id`,
//! `index` and `repeat`, so the tables join):
//!
//! * `cells`: `kind`, `ok`, `failure`, `started_unix`, `duration_s`, one `param.NAME` column per
//!   swept parameter and one `summary.PATH` column per scalar of the summary (nested objects
//!   flattened with dots, e.g. `summary.rtt_ms.median`; arrays are left to the JSON export).
//! * `intervals`: `stream`, `start_s`, `end_s`, `bytes`, `throughput_bps`, `retransmits`,
//!   `cwnd_bytes`, `srtt_us`, `tcp` (JSON text).
//! * `probes`: `phase`, `seq`, `sent_s`, `rtt_ms` (empty when lost), `late`.
//!
//! Parquet: one file holding one table, with the same columns in the same order as its CSV, one
//! row group per 2^20 rows, Snappy-compressed. Column types: `INT64` for the integers (ids,
//! `index`, `repeat`, `stream`, `seq`, `bytes`, `retransmits`, `cwnd_bytes`, `srtt_us`),
//! `DOUBLE` for times, rates and RTTs, `BOOLEAN` for `ok` and `late`, and UTF-8 strings
//! (`BYTE_ARRAY`, logical type `String`) for text (`kind`, `failure`, `phase`, `tcp` as JSON
//! text). Columns that can be empty are `OPTIONAL` and hold NULL where the CSV has an empty
//! field (`rtt_ms` of a lost probe, `failure` of a cell that worked, ...); the others are
//! `REQUIRED`. A `param.*` or `summary.*` column is `DOUBLE` when all its values are numbers,
//! `BOOLEAN` when all are booleans, and otherwise text as in the CSV (JSON null is NULL).
//! (Integers above 2^53 in such a column round to the nearest double; counts in the fixed
//! `INT64` columns are exact up to 2^63 − 1 and saturate beyond.)

use crate::error::{ArchiveError, Result};
use crate::model::{RunData, StoredCell};
use parquet::basic::{Compression, LogicalType, Repetition, Type as PhysicalType};
use parquet::column::writer::ColumnWriterImpl;
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DataType, DoubleType, Int64Type};
use parquet::errors::ParquetError;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type as SchemaType;
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::Write;
use std::str::FromStr;
use std::sync::Arc;

/// A table of a run (CSV or Parquet).
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
    /// One table as a Parquet file (binary: write it to a file, not a terminal).
    Parquet(Table),
}

impl Format {
    /// The names [`Format::from_str`] accepts.
    pub const NAMES: &'static [&'static str] = &[
        "json",
        "csv",
        "csv:cells",
        "csv:intervals",
        "csv:probes",
        "parquet",
        "parquet:cells",
        "parquet:intervals",
        "parquet:probes",
    ];
}

impl FromStr for Format {
    type Err = ArchiveError;

    /// `json`, `csv:cells` (or just `csv`), `csv:intervals`, `csv:probes`, and the same three
    /// with `parquet` (`parquet` alone is `parquet:cells`); case does not matter.
    fn from_str(s: &str) -> Result<Format> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "json" => Format::Json,
            "csv" | "csv:cells" => Format::Csv(Table::Cells),
            "csv:intervals" => Format::Csv(Table::Intervals),
            "csv:probes" => Format::Csv(Table::Probes),
            "parquet" | "parquet:cells" => Format::Parquet(Table::Cells),
            "parquet:intervals" => Format::Parquet(Table::Intervals),
            "parquet:probes" => Format::Parquet(Table::Probes),
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
        Format::Parquet(table) => {
            let columns = match table {
                Table::Cells => cells_columns(data),
                Table::Intervals => intervals_columns(data),
                Table::Probes => probes_columns(data),
            };
            // The Parquet writer wants an owned `Write + Send` sink: build the file in memory.
            let file = write_parquet(&columns, ROW_GROUP_ROWS).map_err(|e| ArchiveError::Io {
                what: "writing the Parquet export".into(),
                err: std::io::Error::other(e),
            })?;
            out.write_all(&file).map_err(io)?;
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

/// Rows per Parquet row group (the last one may have fewer).
const ROW_GROUP_ROWS: usize = 1 << 20;

/// A Parquet column's values in row order, `None` for NULL.
#[derive(Debug)]
enum Values {
    Int(Vec<Option<i64>>),
    Double(Vec<Option<f64>>),
    Bool(Vec<Option<bool>>),
    Text(Vec<Option<String>>),
}

/// A Rust type stored as one of the [`Values`].
trait Kind: Sized {
    fn values(v: Vec<Option<Self>>) -> Values;
}

impl Kind for i64 {
    fn values(v: Vec<Option<i64>>) -> Values {
        Values::Int(v)
    }
}

impl Kind for f64 {
    fn values(v: Vec<Option<f64>>) -> Values {
        Values::Double(v)
    }
}

impl Kind for bool {
    fn values(v: Vec<Option<bool>>) -> Values {
        Values::Bool(v)
    }
}

impl Kind for String {
    fn values(v: Vec<Option<String>>) -> Values {
        Values::Text(v)
    }
}

/// One column of a Parquet table.
#[derive(Debug)]
struct Column {
    name: String,
    /// `OPTIONAL` (may hold NULLs) rather than `REQUIRED`.
    nullable: bool,
    values: Values,
}

/// A `REQUIRED` column.
fn required<T: Kind>(name: &str, v: impl IntoIterator<Item = T>) -> Column {
    Column { name: name.to_string(), nullable: false, values: T::values(v.into_iter().map(Some).collect()) }
}

/// An `OPTIONAL` column.
fn optional<T: Kind>(name: &str, v: impl IntoIterator<Item = Option<T>>) -> Column {
    Column { name: name.to_string(), nullable: true, values: T::values(v.into_iter().collect()) }
}

/// An unsigned count as `INT64` (saturating: no count measured comes near 2^63).
fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// `run_id`, `cell_id`, `index`, `repeat` for rows belonging to `cells`.
fn key_columns(cells: &[&StoredCell]) -> Vec<Column> {
    vec![
        required("run_id", cells.iter().map(|c| c.run_id)),
        required("cell_id", cells.iter().map(|c| c.id)),
        required("index", cells.iter().map(|c| i64::from(c.cell.index))),
        required("repeat", cells.iter().map(|c| i64::from(c.cell.repeat))),
    ]
}

/// A `param.*` or `summary.*` column from its values (`None` for missing or JSON null):
/// numbers as `DOUBLE`, booleans as `BOOLEAN`, anything else (or a mix) as text the way the
/// CSV writes it.
fn json_column(name: &str, values: &[Option<&Value>]) -> Column {
    let present = || values.iter().flatten();
    let some = present().next().is_some();
    if some && present().all(|v| v.is_number()) {
        optional(name, values.iter().map(|v| v.and_then(Value::as_f64)))
    } else if some && present().all(|v| v.is_boolean()) {
        optional(name, values.iter().map(|v| v.and_then(Value::as_bool)))
    } else {
        optional(name, values.iter().map(|v| v.map(field)))
    }
}

fn cells_columns(data: &RunData) -> Vec<Column> {
    let cells: Vec<&StoredCell> = data.cells.iter().collect();
    let mut cols = key_columns(&cells);
    cols.extend([
        required("kind", cells.iter().map(|c| c.cell.kind.clone())),
        required("ok", cells.iter().map(|c| c.cell.ok)),
        optional("failure", cells.iter().map(|c| c.cell.failure.clone())),
        required("started_unix", cells.iter().map(|c| c.cell.started_unix)),
        required("duration_s", cells.iter().map(|c| c.cell.duration_s)),
    ]);
    let flat: Vec<std::collections::HashMap<String, Value>> = data
        .cells
        .iter()
        .map(|c| {
            let mut f: Vec<(String, Value)> =
                c.cell.params.iter().map(|(k, v)| (format!("param.{k}"), v.clone())).collect();
            flatten("summary", &c.cell.summary, &mut f);
            f.into_iter().collect()
        })
        .collect();
    // The CSV's order: parameters first, then the summary; each group sorted.
    let names: BTreeSet<&str> = flat.iter().flat_map(|m| m.keys().map(String::as_str)).collect();
    let params = names.iter().filter(|k| k.starts_with("param."));
    let summary = names.iter().filter(|k| k.starts_with("summary"));
    for name in params.chain(summary) {
        let values: Vec<Option<&Value>> = flat.iter().map(|m| m.get(*name).filter(|v| !v.is_null())).collect();
        cols.push(json_column(name, &values));
    }
    cols
}

fn intervals_columns(data: &RunData) -> Vec<Column> {
    let rows: Vec<_> = data.cells.iter().flat_map(|c| c.cell.intervals.iter().map(move |i| (c, i))).collect();
    let cells: Vec<&StoredCell> = rows.iter().map(|(c, _)| *c).collect();
    let mut cols = key_columns(&cells);
    cols.extend([
        required("stream", rows.iter().map(|(_, i)| i64::from(i.stream))),
        required("start_s", rows.iter().map(|(_, i)| i.start_s)),
        required("end_s", rows.iter().map(|(_, i)| i.end_s)),
        required("bytes", rows.iter().map(|(_, i)| int(i.bytes))),
        required("throughput_bps", rows.iter().map(|(_, i)| i.throughput_bps)),
        required("retransmits", rows.iter().map(|(_, i)| int(i.retransmits))),
        optional("cwnd_bytes", rows.iter().map(|(_, i)| i.cwnd_bytes.map(int))),
        optional("srtt_us", rows.iter().map(|(_, i)| i.srtt_us.map(i64::from))),
        optional("tcp", rows.iter().map(|(_, i)| i.tcp.as_ref().map(Value::to_string))),
    ]);
    cols
}

fn probes_columns(data: &RunData) -> Vec<Column> {
    let rows: Vec<_> = data.cells.iter().flat_map(|c| c.cell.probes.iter().map(move |p| (c, p))).collect();
    let cells: Vec<&StoredCell> = rows.iter().map(|(c, _)| *c).collect();
    let mut cols = key_columns(&cells);
    cols.extend([
        required("phase", rows.iter().map(|(_, p)| p.phase.clone())),
        required("seq", rows.iter().map(|(_, p)| int(p.seq))),
        required("sent_s", rows.iter().map(|(_, p)| p.sent_s)),
        optional("rtt_ms", rows.iter().map(|(_, p)| p.rtt_ms)),
        required("late", rows.iter().map(|(_, p)| p.late)),
    ]);
    cols
}

/// A Parquet file of `columns` (all of the same length), `group_rows` rows per row group.
fn write_parquet(columns: &[Column], group_rows: usize) -> std::result::Result<Vec<u8>, ParquetError> {
    let fields = columns
        .iter()
        .map(|c| {
            let (physical, logical) = match c.values {
                Values::Int(_) => (PhysicalType::INT64, None),
                Values::Double(_) => (PhysicalType::DOUBLE, None),
                Values::Bool(_) => (PhysicalType::BOOLEAN, None),
                Values::Text(_) => (PhysicalType::BYTE_ARRAY, Some(LogicalType::String)),
            };
            let repetition = if c.nullable { Repetition::OPTIONAL } else { Repetition::REQUIRED };
            let field = SchemaType::primitive_type_builder(&c.name, physical)
                .with_repetition(repetition)
                .with_logical_type(logical)
                .build()?;
            Ok(Arc::new(field))
        })
        .collect::<std::result::Result<Vec<_>, ParquetError>>()?;
    let schema = Arc::new(SchemaType::group_type_builder("schema").with_fields(fields).build()?);
    let props = Arc::new(WriterProperties::builder().set_compression(Compression::SNAPPY).build());
    let rows = columns.first().map_or(0, |c| match &c.values {
        Values::Int(v) => v.len(),
        Values::Double(v) => v.len(),
        Values::Bool(v) => v.len(),
        Values::Text(v) => v.len(),
    });
    let mut buf = Vec::new();
    let mut file = SerializedFileWriter::new(&mut buf, schema, props)?;
    for start in (0..rows).step_by(group_rows) {
        let range = start..rows.min(start + group_rows);
        let mut group = file.next_row_group()?;
        for c in columns {
            let mut col = group.next_column()?.ok_or_else(|| ParquetError::General("too few columns".into()))?;
            let r = range.clone();
            match &c.values {
                Values::Int(v) => write_column(col.typed::<Int64Type>(), &v[r], c.nullable, |x| *x)?,
                Values::Double(v) => write_column(col.typed::<DoubleType>(), &v[r], c.nullable, |x| *x)?,
                Values::Bool(v) => write_column(col.typed::<BoolType>(), &v[r], c.nullable, |x| *x)?,
                Values::Text(v) => {
                    write_column(col.typed::<ByteArrayType>(), &v[r], c.nullable, |s| ByteArray::from(s.as_str()))?
                }
            }
            col.close()?;
        }
        group.close()?;
    }
    file.close()?;
    Ok(buf)
}

/// Writes one row group's slice of a column: the non-NULL values, with definition levels
/// (1 = value, 0 = NULL) when the column is `OPTIONAL`.
fn write_column<T: DataType, V>(
    w: &mut ColumnWriterImpl<'_, T>,
    values: &[Option<V>],
    nullable: bool,
    convert: impl Fn(&V) -> T::T,
) -> std::result::Result<(), ParquetError> {
    let present: Vec<T::T> = values.iter().flatten().map(convert).collect();
    let levels: Option<Vec<i16>> = nullable.then(|| values.iter().map(|v| i16::from(v.is_some())).collect());
    w.write_batch(&present, levels.as_deref(), None)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CellRecord, IntervalRow, ProbeRow, RunInfo, RunStatus, StoredCell};
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
            verdicts: Vec::new(),
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
        let e = "xlsx".parse::<Format>().unwrap_err().to_string();
        assert!(e.contains("unknown export format") && e.contains("parquet:probes"), "{e}");
        for name in Format::NAMES {
            name.parse::<Format>().unwrap();
        }
        assert_eq!("Parquet".parse::<Format>().unwrap(), Format::Parquet(Table::Cells));
        assert_eq!("parquet:probes".parse::<Format>().unwrap(), Format::Parquet(Table::Probes));
    }

    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;

    /// A Parquet export read back: each column as `name REPETITION TYPE [String]`, and the rows
    /// as (column, value) pairs.
    fn parquet(data: &RunData, table: Table) -> (Vec<String>, Vec<Vec<(String, Field)>>) {
        let mut out = Vec::new();
        export(data, Format::Parquet(table), &mut out).unwrap();
        assert_eq!(&out[..4], b"PAR1");
        let reader = SerializedFileReader::new(bytes::Bytes::from(out)).unwrap();
        let meta = reader.metadata().file_metadata();
        let schema = meta
            .schema_descr()
            .columns()
            .iter()
            .map(|c| {
                let rep = if c.self_type().is_optional() { "OPTIONAL" } else { "REQUIRED" };
                let text = if c.logical_type_ref() == Some(&LogicalType::String) { " String" } else { "" };
                format!("{} {rep} {}{text}", c.name(), c.physical_type())
            })
            .collect();
        let rows: Vec<_> = reader
            .get_row_iter(None)
            .unwrap()
            .map(|r| r.unwrap().get_column_iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .collect();
        assert_eq!(meta.num_rows(), rows.len() as i64);
        (schema, rows)
    }

    /// The value of `column` in `row`.
    fn get<'a>(row: &'a [(String, Field)], column: &str) -> &'a Field {
        &row.iter().find(|(k, _)| k == column).unwrap_or_else(|| panic!("no column {column}")).1
    }

    /// The CSV export's header, as column names.
    fn csv_header(data: &RunData, table: Table) -> Vec<String> {
        let mut out = Vec::new();
        export(data, Format::Csv(table), &mut out).unwrap();
        String::from_utf8(out).unwrap().lines().next().unwrap().split(',').map(String::from).collect()
    }

    /// Two cells: [`data`]'s and a failed one with a string where the first has a number.
    fn two_cells() -> RunData {
        let mut d = data();
        let cell = CellRecord {
            index: 1,
            kind: "load".into(),
            params: [("streams".to_string(), json!("auto")), ("cc".to_string(), json!("cubic"))].into(),
            ok: false,
            failure: Some("no route".into()),
            summary: json!({"throughput_bps": null}),
            ..Default::default()
        };
        d.cells.push(StoredCell { id: 4, run_id: 7, cell });
        d
    }

    #[test]
    fn parquet_tables_have_the_csv_columns() {
        let d = two_cells();
        for table in [Table::Cells, Table::Intervals, Table::Probes] {
            let (schema, rows) = parquet(&d, table);
            let names: Vec<String> = schema.iter().map(|c| c.split(' ').next().unwrap().to_string()).collect();
            assert_eq!(names, csv_header(&d, table), "{table:?}");
            let csv_rows = match table {
                Table::Cells => 2,
                Table::Intervals => 1,
                Table::Probes => 2,
            };
            assert_eq!(rows.len(), csv_rows, "{table:?}");
            assert!(rows.iter().all(|r| r.len() == names.len()));
        }
    }

    #[test]
    fn parquet_probes() {
        let (schema, rows) = parquet(&data(), Table::Probes);
        assert_eq!(
            schema,
            [
                "run_id REQUIRED INT64",
                "cell_id REQUIRED INT64",
                "index REQUIRED INT64",
                "repeat REQUIRED INT64",
                "phase REQUIRED BYTE_ARRAY String",
                "seq REQUIRED INT64",
                "sent_s REQUIRED DOUBLE",
                "rtt_ms OPTIONAL DOUBLE",
                "late REQUIRED BOOLEAN",
            ]
        );
        assert_eq!(get(&rows[0], "run_id"), &Field::Long(7));
        assert_eq!(get(&rows[0], "cell_id"), &Field::Long(3));
        assert_eq!(get(&rows[0], "repeat"), &Field::Long(1));
        assert_eq!(get(&rows[0], "phase"), &Field::Str("loaded".into()));
        assert_eq!(get(&rows[0], "rtt_ms"), &Field::Double(1.25));
        assert_eq!(get(&rows[0], "late"), &Field::Bool(false));
        // The lost probe: NULL RTT.
        assert_eq!(get(&rows[1], "seq"), &Field::Long(1));
        assert_eq!(get(&rows[1], "sent_s"), &Field::Double(0.1));
        assert_eq!(get(&rows[1], "rtt_ms"), &Field::Null);
        assert_eq!(get(&rows[1], "late"), &Field::Bool(true));
    }

    #[test]
    fn parquet_intervals() {
        let (schema, rows) = parquet(&data(), Table::Intervals);
        assert_eq!(
            schema[4..8],
            ["stream REQUIRED INT64", "start_s REQUIRED DOUBLE", "end_s REQUIRED DOUBLE", "bytes REQUIRED INT64"]
        );
        assert_eq!(
            schema[10..],
            ["cwnd_bytes OPTIONAL INT64", "srtt_us OPTIONAL INT64", "tcp OPTIONAL BYTE_ARRAY String"]
        );
        assert_eq!(rows.len(), 1);
        assert_eq!(get(&rows[0], "stream"), &Field::Long(-1));
        assert_eq!(get(&rows[0], "end_s"), &Field::Double(1.0));
        assert_eq!(get(&rows[0], "bytes"), &Field::Long(10));
        assert_eq!(get(&rows[0], "cwnd_bytes"), &Field::Null);
        assert_eq!(get(&rows[0], "tcp"), &Field::Null);
    }

    #[test]
    fn parquet_cells() {
        // One cell: every parameter and summary value is a number or a string.
        let (schema, rows) = parquet(&data(), Table::Cells);
        assert!(schema.contains(&"ok REQUIRED BOOLEAN".to_string()), "{schema:?}");
        assert!(schema.contains(&"failure OPTIONAL BYTE_ARRAY String".to_string()), "{schema:?}");
        assert!(schema.contains(&"param.cc OPTIONAL BYTE_ARRAY String".to_string()), "{schema:?}");
        assert!(schema.contains(&"param.streams OPTIONAL DOUBLE".to_string()), "{schema:?}");
        assert!(schema.contains(&"summary.loaded.rtt_ms.median OPTIONAL DOUBLE".to_string()), "{schema:?}");
        assert_eq!(get(&rows[0], "kind"), &Field::Str("load".into()));
        assert_eq!(get(&rows[0], "ok"), &Field::Bool(true));
        assert_eq!(get(&rows[0], "failure"), &Field::Null);
        assert_eq!(get(&rows[0], "param.streams"), &Field::Double(4.0));
        assert_eq!(get(&rows[0], "summary.throughput_bps"), &Field::Double(1e9));
        // Two cells: `streams` is 4 in one and "auto" in the other, so text as in the CSV;
        // the second's summary has no RTT and a JSON null throughput: NULLs.
        let (schema, rows) = parquet(&two_cells(), Table::Cells);
        assert!(schema.contains(&"param.streams OPTIONAL BYTE_ARRAY String".to_string()), "{schema:?}");
        assert!(schema.contains(&"summary.throughput_bps OPTIONAL DOUBLE".to_string()), "{schema:?}");
        assert_eq!(get(&rows[0], "param.streams"), &Field::Str("4".into()));
        assert_eq!(get(&rows[1], "param.streams"), &Field::Str("auto".into()));
        assert_eq!(get(&rows[1], "index"), &Field::Long(1));
        assert_eq!(get(&rows[1], "ok"), &Field::Bool(false));
        assert_eq!(get(&rows[1], "failure"), &Field::Str("no route".into()));
        assert_eq!(get(&rows[1], "summary.loaded.rtt_ms.median"), &Field::Null);
        assert_eq!(get(&rows[1], "summary.throughput_bps"), &Field::Null);
    }

    #[test]
    fn parquet_row_groups() {
        // Three probes in row groups of two: the slicing keeps each NULL on its row.
        let mut d = two_cells();
        d.cells[1].cell.probes = vec![ProbeRow { seq: 9, rtt_ms: Some(3.0), ..Default::default() }];
        let file = write_parquet(&probes_columns(&d), 2).unwrap();
        let reader = SerializedFileReader::new(bytes::Bytes::from(file)).unwrap();
        assert_eq!(reader.metadata().num_row_groups(), 2);
        let rtts: Vec<Field> = reader
            .get_row_iter(None)
            .unwrap()
            .map(|r| {
                get(&r.unwrap().get_column_iter().map(|(k, v)| (k.clone(), v.clone())).collect::<Vec<_>>(), "rtt_ms")
                    .clone()
            })
            .collect();
        assert_eq!(rtts, [Field::Double(1.25), Field::Null, Field::Double(3.0)]);
    }

    #[test]
    fn parquet_empty_run() {
        let mut d = data();
        d.cells.clear();
        let (schema, rows) = parquet(&d, Table::Cells);
        assert_eq!(schema.len(), 9);
        assert!(rows.is_empty());
        let (schema, rows) = parquet(&d, Table::Probes);
        assert_eq!(schema.len(), 9);
        assert!(rows.is_empty());
    }
}
