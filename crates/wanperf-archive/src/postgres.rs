//! The PostgreSQL store: the same schema as SQLite (JSON columns as `jsonb`), written with
//! binary `COPY` for intervals and probes, inside the cell's transaction.

use crate::error::{ArchiveError, Result};
use crate::model::{
    CellAggregate, CellRecord, CounterRow, ExporterRow, FlowRow, IntervalRow, MeshQuery, MeshRow, MeshSlot, MeshStats,
    NewRun, ProbeRow, RunData, RunInfo, RunStatus, StoredCell, Verdict,
};
use crate::schema::{self, POSTGRES};
use crate::sqlite::{from_i64, to_i64};
use crate::store::{lock_wait, Access, Store};
use ::postgres::binary_copy::BinaryCopyInWriter;
use ::postgres::error::SqlState;
use ::postgres::types::{ToSql, Type};
use ::postgres::{Client, GenericClient, IsolationLevel, NoTls, Row};
use serde_json::Value;
use std::collections::BTreeMap;

/// Arbitrary key of the advisory lock taken while migrating ("wanperf" in ASCII).
const MIGRATION_LOCK: i64 = 0x77_616e_7065_7266;

/// The archive in a PostgreSQL database.
pub struct PgStore {
    client: Client,
}

/// The error with the server's message when there is one.
fn db(e: ::postgres::Error) -> ArchiveError {
    if e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) {
        return ArchiveError::Busy { holder: None, waited: lock_wait() };
    }
    match e.as_db_error() {
        Some(d) => ArchiveError::Db(format!("{}: {}", d.severity(), d.message())),
        None => ArchiveError::Db(e.to_string()),
    }
}

fn to_json<T: serde::Serialize + ?Sized>(v: &T) -> Result<Value> {
    serde_json::to_value(v).map_err(|e| ArchiveError::Input(format!("cannot encode JSON: {e}")))
}

impl PgStore {
    /// Connects to `url` (`postgres://user@host:port/db?options=…`, without TLS) to write and
    /// brings the schema up to date.
    pub fn connect(url: &str) -> Result<PgStore> {
        PgStore::connect_with(url, Access::ReadWrite)
    }

    /// Connects to `url` to write ([`Access::ReadWrite`]: migrations applied) or only to read
    /// ([`Access::ReadOnly`]: every transaction is read-only, nothing is migrated). Every
    /// lock wait — a migration's advisory lock, a row another writer holds — is bounded by
    /// [`lock_wait`] (`lock_timeout`), and the session is named `wanperf (pid N)` so
    /// the other side of a wait can be told.
    pub fn connect_with(url: &str, access: Access) -> Result<PgStore> {
        let client = Client::connect(url, NoTls).map_err(|e| {
            // Never repeat the URL: it may hold a password.
            let why = std::error::Error::source(&e).map_or_else(|| e.to_string(), |s| s.to_string());
            ArchiveError::Db(format!("cannot connect to PostgreSQL: {why}"))
        })?;
        let mut store = PgStore { client };
        let wait_ms = lock_wait().as_millis().max(1);
        let cmd = std::env::args().nth(1).filter(|a| a.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
        let name = format!("wanperf {}(pid {})", cmd.map(|c| c + " ").unwrap_or_default(), std::process::id());
        let mut settings = format!("SET lock_timeout = {wait_ms}; SET application_name = '{name}';");
        if access == Access::ReadOnly {
            settings.push_str(" SET default_transaction_read_only = on;");
        }
        store.client.batch_execute(&settings).map_err(db)?;
        match access {
            Access::ReadWrite => {
                let r = store.migrate();
                store.named(r)?;
            }
            Access::ReadOnly => {
                let found = store.schema_version()?;
                if found == 0 {
                    return Err(ArchiveError::NoArchive("this PostgreSQL database".into()));
                }
                if found < schema::SCHEMA_VERSION {
                    return Err(ArchiveError::TooOld { found, known: schema::SCHEMA_VERSION });
                }
                schema::pending(found)?;
            }
        }
        Ok(store)
    }

    /// Fills in who holds the lock when `r` is [`ArchiveError::Busy`]: the other wanperf
    /// sessions of this database that are inside a transaction.
    fn named<T>(&mut self, r: Result<T>) -> Result<T> {
        match r {
            Err(ArchiveError::Busy { holder: None, waited }) => {
                let holder = self
                    .client
                    .query_one(
                        "SELECT string_agg(application_name || ' (backend ' || pid || ')', ', ')
                         FROM pg_stat_activity WHERE datname = current_database()
                         AND pid <> pg_backend_pid() AND xact_start IS NOT NULL",
                        &[],
                    )
                    .ok()
                    .and_then(|row| row.try_get::<_, Option<String>>(0).ok().flatten());
                Err(ArchiveError::Busy { holder, waited })
            }
            r => r,
        }
    }

    /// Applies the missing migrations in one transaction. The version is first read without
    /// a lock; when migrations are due, an advisory lock is taken and the version read again,
    /// so two processes opening a new archive at once do not both migrate.
    fn migrate(&mut self) -> Result<()> {
        if schema::pending(self.schema_version()?)?.is_empty() {
            return Ok(());
        }
        let mut tx = self.client.transaction().map_err(db)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).map_err(db)?;
        tx.batch_execute(schema::CREATE_VERSION_TABLE).map_err(db)?;
        let current: Option<i64> = get(&tx.query_one("SELECT MAX(version) FROM schema_version", &[]).map_err(db)?, 0)?;
        let todo = schema::pending(current.unwrap_or(0))?;
        if todo.is_empty() {
            return Ok(());
        }
        for m in todo {
            for s in m.statements {
                tx.batch_execute(&schema::render(s, POSTGRES)).map_err(db)?;
            }
        }
        let newest = todo[todo.len() - 1].version;
        tx.execute("DELETE FROM schema_version", &[]).map_err(db)?;
        tx.execute("INSERT INTO schema_version (version) VALUES ($1)", &[&newest]).map_err(db)?;
        tx.commit().map_err(db)
    }

    /// The schema version of the database; 0 for a new one.
    pub fn schema_version(&mut self) -> Result<i64> {
        let exists: bool =
            get(&self.client.query_one("SELECT to_regclass('schema_version') IS NOT NULL", &[]).map_err(db)?, 0)?;
        if !exists {
            return Ok(0);
        }
        let v: Option<i64> =
            get(&self.client.query_one("SELECT MAX(version) FROM schema_version", &[]).map_err(db)?, 0)?;
        Ok(v.unwrap_or(0))
    }

    /// The underlying client (for ad-hoc queries).
    pub fn client(&mut self) -> &mut Client {
        &mut self.client
    }
}

/// Reads column `i` (errors instead of panicking on a type mismatch).
fn get<'a, T: ::postgres::types::FromSql<'a>>(row: &'a Row, i: usize) -> Result<T> {
    row.try_get(i).map_err(db)
}

fn run_from_row(r: &Row) -> Result<RunInfo> {
    let status: String = get(r, 9)?;
    Ok(RunInfo {
        id: get(r, 0)?,
        study: get(r, 1)?,
        study_text: get(r, 2)?,
        spec: get(r, 3)?,
        software: get(r, 4)?,
        cells_planned: from_i64("cells_planned", get(r, 5)?)?,
        cells_done: from_i64("cells_done", get(r, 6)?)?,
        started_unix: get(r, 7)?,
        finished_unix: get(r, 8)?,
        status: RunStatus::parse(&status).ok_or_else(|| ArchiveError::Db(format!("unknown run status {status:?}")))?,
    })
}

fn params_from(v: Value) -> Result<BTreeMap<String, Value>> {
    serde_json::from_value(v).map_err(|e| ArchiveError::Db(format!("bad JSON in column cells.params: {e}")))
}

fn run_info(c: &mut impl GenericClient, run_id: i64) -> Result<RunInfo> {
    let row = c.query_opt(&schema::run_info_query(), &[&run_id]).map_err(db)?;
    run_from_row(&row.ok_or(ArchiveError::NoRun(run_id))?)
}

impl PgStore {
    fn create_run_(&mut self, run: &NewRun) -> Result<i64> {
        let row = self
            .client
            .query_one(
                schema::INSERT_RUN,
                &[
                    &run.study,
                    &run.study_text,
                    &run.spec,
                    &run.software,
                    &i64::from(run.cells_planned),
                    &run.started_unix,
                    &RunStatus::Running.as_str(),
                ],
            )
            .map_err(db)?;
        get(&row, 0)
    }
    fn store_cell_(&mut self, run_id: i64, cell: &CellRecord) -> Result<i64> {
        let mut tx = self.client.transaction().map_err(db)?;
        if tx.query_opt("SELECT 1 FROM runs WHERE id = $1", &[&run_id]).map_err(db)?.is_none() {
            return Err(ArchiveError::NoRun(run_id));
        }
        let params = to_json(&cell.params)?;
        let row = tx
            .query_one(
                schema::INSERT_CELL,
                &[
                    &run_id,
                    &i64::from(cell.index),
                    &i64::from(cell.repeat),
                    &cell.kind,
                    &params,
                    &cell.ok,
                    &cell.failure,
                    &cell.started_unix,
                    &cell.duration_s,
                    &cell.summary,
                    &cell.hosts,
                    &cell.emulator,
                ],
            )
            .map_err(|e| {
                if e.code() == Some(&SqlState::UNIQUE_VIOLATION) {
                    ArchiveError::DuplicateCell { run_id, index: cell.index, repeat: cell.repeat }
                } else {
                    db(e)
                }
            })?;
        let cell_id: i64 = get(&row, 0)?;
        if !cell.intervals.is_empty() {
            let sink = tx
                .copy_in(
                    "COPY intervals (cell_id, stream, start_s, end_s, bytes, throughput_bps, retransmits, cwnd_bytes,
                     srtt_us, tcp) FROM STDIN (FORMAT binary)",
                )
                .map_err(db)?;
            let types = [
                Type::INT8,
                Type::INT4,
                Type::FLOAT8,
                Type::FLOAT8,
                Type::INT8,
                Type::FLOAT8,
                Type::INT8,
                Type::INT8,
                Type::INT8,
                Type::JSONB,
            ];
            let mut w = BinaryCopyInWriter::new(sink, &types);
            for i in &cell.intervals {
                let bytes = to_i64("interval bytes", i.bytes)?;
                let retransmits = to_i64("retransmits", i.retransmits)?;
                let cwnd = i.cwnd_bytes.map(|c| to_i64("cwnd_bytes", c)).transpose()?;
                let srtt = i.srtt_us.map(i64::from);
                let row: [&(dyn ToSql + Sync); 10] = [
                    &cell_id,
                    &i.stream,
                    &i.start_s,
                    &i.end_s,
                    &bytes,
                    &i.throughput_bps,
                    &retransmits,
                    &cwnd,
                    &srtt,
                    &i.tcp,
                ];
                w.write(&row).map_err(db)?;
            }
            w.finish().map_err(db)?;
        }
        if !cell.probes.is_empty() {
            let sink = tx
                .copy_in("COPY probes (cell_id, seq, phase, sent_s, rtt_ms, late) FROM STDIN (FORMAT binary)")
                .map_err(db)?;
            let types = [Type::INT8, Type::INT8, Type::TEXT, Type::FLOAT8, Type::FLOAT8, Type::BOOL];
            let mut w = BinaryCopyInWriter::new(sink, &types);
            for p in &cell.probes {
                let seq = to_i64("probe seq", p.seq)?;
                w.write(&[&cell_id, &seq, &p.phase, &p.sent_s, &p.rtt_ms, &p.late]).map_err(db)?;
            }
            w.finish().map_err(db)?;
        }
        tx.commit().map_err(db)?;
        Ok(cell_id)
    }
    fn finish_run_(&mut self, run_id: i64, status: RunStatus, finished_unix: f64) -> Result<()> {
        let n = self.client.execute(schema::FINISH_RUN, &[&status.as_str(), &finished_unix, &run_id]).map_err(db)?;
        if n == 0 {
            return Err(ArchiveError::NoRun(run_id));
        }
        Ok(())
    }
}

impl Store for PgStore {
    fn create_run(&mut self, run: &NewRun) -> Result<i64> {
        let r = self.create_run_(run);
        self.named(r)
    }

    fn store_cell(&mut self, run_id: i64, cell: &CellRecord) -> Result<i64> {
        let r = self.store_cell_(run_id, cell);
        self.named(r)
    }

    fn finish_run(&mut self, run_id: i64, status: RunStatus, finished_unix: f64) -> Result<()> {
        let r = self.finish_run_(run_id, status, finished_unix);
        self.named(r)
    }

    fn done_cells(&mut self, run_id: i64) -> Result<Vec<(u32, u32)>> {
        let rows = self.client.query(schema::DONE_CELLS, &[&run_id]).map_err(db)?;
        rows.iter().map(|r| Ok((from_i64("cell index", get(r, 0)?)?, from_i64("cell repeat", get(r, 1)?)?))).collect()
    }

    fn runs(&mut self) -> Result<Vec<RunInfo>> {
        let rows = self.client.query(&schema::runs_query(), &[]).map_err(db)?;
        rows.iter().map(run_from_row).collect()
    }

    fn run_info(&mut self, run_id: i64) -> Result<RunInfo> {
        run_info(&mut self.client, run_id)
    }

    fn run_data(&mut self, run_id: i64) -> Result<RunData> {
        // One snapshot for the whole read, even while a study is writing.
        let mut tx = self
            .client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(db)?;
        let run = run_info(&mut tx, run_id)?;
        let mut cells = Vec::new();
        for r in tx.query(schema::CELLS, &[&run_id]).map_err(db)? {
            let cell = CellRecord {
                index: from_i64("cell index", get(&r, 1)?)?,
                repeat: from_i64("cell repeat", get(&r, 2)?)?,
                kind: get(&r, 3)?,
                params: params_from(get(&r, 4)?)?,
                ok: get(&r, 5)?,
                failure: get(&r, 6)?,
                started_unix: get(&r, 7)?,
                duration_s: get(&r, 8)?,
                summary: get(&r, 9)?,
                hosts: get(&r, 10)?,
                emulator: get(&r, 11)?,
                intervals: Vec::new(),
                probes: Vec::new(),
            };
            cells.push(StoredCell { id: get(&r, 0)?, run_id, cell });
        }
        let intervals = tx.prepare(schema::INTERVALS).map_err(db)?;
        let probes = tx.prepare(schema::PROBES).map_err(db)?;
        for c in &mut cells {
            for r in tx.query(&intervals, &[&c.id]).map_err(db)? {
                c.cell.intervals.push(IntervalRow {
                    stream: get(&r, 0)?,
                    start_s: get(&r, 1)?,
                    end_s: get(&r, 2)?,
                    bytes: from_i64("interval bytes", get(&r, 3)?)?,
                    throughput_bps: get(&r, 4)?,
                    retransmits: from_i64("retransmits", get(&r, 5)?)?,
                    cwnd_bytes: get::<Option<i64>>(&r, 6)?.map(|v| from_i64("cwnd", v)).transpose()?,
                    srtt_us: get::<Option<i64>>(&r, 7)?.map(|v| from_i64("srtt", v)).transpose()?,
                    tcp: get(&r, 8)?,
                });
            }
            for r in tx.query(&probes, &[&c.id]).map_err(db)? {
                c.cell.probes.push(ProbeRow {
                    seq: from_i64("probe seq", get(&r, 0)?)?,
                    phase: get(&r, 1)?,
                    sent_s: get(&r, 2)?,
                    rtt_ms: get(&r, 3)?,
                    late: get(&r, 4)?,
                });
            }
        }
        let mut verdicts = Vec::new();
        for r in tx.query(schema::SELECT_VERDICTS, &[&run_id]).map_err(db)? {
            verdicts.push(Verdict {
                expect: from_i64("verdict expect", get(&r, 0)?)?,
                line: from_i64("verdict line", get(&r, 1)?)?,
                text: get(&r, 2)?,
                cells: get(&r, 3)?,
                pass: get(&r, 4)?,
                measured: get(&r, 5)?,
                bound: get(&r, 6)?,
                margin: get(&r, 7)?,
                unit: get(&r, 8)?,
                note: get(&r, 9)?,
            });
        }
        tx.commit().map_err(db)?;
        Ok(RunData { run, cells, verdicts })
    }

    fn store_verdicts(&mut self, run_id: i64, verdicts: &[Verdict]) -> Result<()> {
        let r = self.store_verdicts_(run_id, verdicts);
        self.named(r)
    }

    fn cell_aggregates(&mut self, run_id: i64) -> Result<Vec<CellAggregate>> {
        let mut tx = self
            .client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(db)?;
        if tx.query_opt("SELECT 1 FROM runs WHERE id = $1", &[&run_id]).map_err(db)?.is_none() {
            return Err(ArchiveError::NoRun(run_id));
        }
        let mut out = Vec::new();
        let mut by_id = BTreeMap::new();
        for r in tx.query(schema::AGG_CELLS, &[&run_id]).map_err(db)? {
            let id: i64 = get(&r, 0)?;
            by_id.insert(id, out.len());
            out.push(CellAggregate {
                cell_id: id,
                index: from_i64("cell index", get(&r, 1)?)?,
                repeat: from_i64("cell repeat", get(&r, 2)?)?,
                params: params_from(get(&r, 3)?)?,
                ok: get(&r, 4)?,
                ..CellAggregate::default()
            });
        }
        for r in tx.query(schema::AGG_PROBES, &[&run_id]).map_err(db)? {
            let Some(&k) = by_id.get(&get::<i64>(&r, 0)?) else { continue };
            let agg =
                schema::phase_aggregate(get(&r, 2)?, get(&r, 3)?, get(&r, 4)?, get(&r, 5)?, get(&r, 6)?, get(&r, 7)?)?;
            out[k].phases.insert(get(&r, 1)?, agg);
        }
        for r in tx.query(schema::AGG_INTERVALS, &[&run_id]).map_err(db)? {
            let Some(&k) = by_id.get(&get::<i64>(&r, 0)?) else { continue };
            out[k].mean_throughput_bps = get(&r, 1)?;
            out[k].retransmits = from_i64("retransmits", get(&r, 2)?)?;
        }
        tx.commit().map_err(db)?;
        Ok(out)
    }
    fn store_flows(&mut self, rows: &[FlowRow], exporters: &[ExporterRow]) -> Result<()> {
        let r = self.store_flows_(rows, exporters);
        self.named(r)
    }

    fn flows(&mut self, from_unix: f64, to_unix: f64) -> Result<Vec<FlowRow>> {
        let rows = self.client.query(schema::SELECT_FLOWS, &[&from_unix, &to_unix]).map_err(db)?;
        rows.iter()
            .map(|r| {
                Ok(FlowRow {
                    bin_unix: get(r, 0)?,
                    bin_s: get(r, 1)?,
                    exporter: get(r, 2)?,
                    domain: get(r, 3)?,
                    src: get(r, 4)?,
                    dst: get(r, 5)?,
                    proto: i64::from(get::<i32>(r, 6)?),
                    sport: i64::from(get::<i32>(r, 7)?),
                    dport: i64::from(get::<i32>(r, 8)?),
                    sampling: get(r, 9)?,
                    bytes: get(r, 10)?,
                    packets: get(r, 11)?,
                    flows: get(r, 12)?,
                    raw_bytes: get(r, 13)?,
                    raw_packets: get(r, 14)?,
                })
            })
            .collect()
    }

    fn exporters(&mut self) -> Result<Vec<ExporterRow>> {
        let rows = self.client.query(schema::SELECT_EXPORTERS, &[]).map_err(db)?;
        rows.iter()
            .map(|r| {
                Ok(ExporterRow {
                    session_unix: get(r, 0)?,
                    exporter: get(r, 1)?,
                    protocol: get(r, 2)?,
                    domain: get(r, 3)?,
                    seq_unit: get(r, 4)?,
                    datagrams: get(r, 5)?,
                    records: get(r, 6)?,
                    malformed: get(r, 7)?,
                    awaiting_template: get(r, 8)?,
                    expected: get(r, 9)?,
                    lost: get(r, 10)?,
                    resets: get(r, 11)?,
                    sampling: get(r, 12)?,
                    socket_drops: get(r, 13)?,
                    updated_unix: get(r, 14)?,
                })
            })
            .collect()
    }

    fn store_counters(&mut self, rows: &[CounterRow]) -> Result<()> {
        let r = self.store_counters_(rows);
        self.named(r)
    }

    fn counters(&mut self, from_unix: f64, to_unix: f64) -> Result<Vec<CounterRow>> {
        let rows = self.client.query(schema::SELECT_COUNTERS, &[&from_unix, &to_unix]).map_err(db)?;
        rows.iter()
            .map(|r| {
                Ok(CounterRow {
                    device: get(r, 0)?,
                    interface: get(r, 1)?,
                    source: get(r, 2)?,
                    at_unix: get(r, 3)?,
                    speed_bps: get(r, 4)?,
                    in_octets: get(r, 5)?,
                    out_octets: get(r, 6)?,
                    in_errors: get(r, 7)?,
                    out_errors: get(r, 8)?,
                    in_drops: get(r, 9)?,
                    out_drops: get(r, 10)?,
                    width: i64::from(get::<i32>(r, 11)?),
                })
            })
            .collect()
    }

    fn store_mesh(&mut self, rows: &[MeshRow]) -> Result<u64> {
        let r = self.store_mesh_(rows);
        self.named(r)
    }

    fn mesh_results(&mut self, q: &MeshQuery) -> Result<Vec<MeshRow>> {
        let rows = self
            .client
            .query(schema::SELECT_MESH, &[&q.from_unix, &q.to_unix, &q.src, &q.dst, &q.kind, &i64::from(q.failed_only)])
            .map_err(db)?;
        rows.iter()
            .map(|r| {
                Ok(MeshRow {
                    agent: get(r, 0)?,
                    seq: get(r, 1)?,
                    test: get(r, 2)?,
                    kind: get(r, 3)?,
                    src: get(r, 4)?,
                    dst: get(r, 5)?,
                    start_unix: get(r, 6)?,
                    end_unix: get(r, 7)?,
                    status: get(r, 8)?,
                    reason: get(r, 9)?,
                    value: get(r, 10)?,
                    loss: get(r, 11)?,
                    stats: match get::<Option<i64>>(r, 12)? {
                        Some(sent) => Some(MeshStats {
                            sent,
                            lost: get::<Option<i64>>(r, 13)?.unwrap_or(0),
                            min_ms: get(r, 14)?,
                            p25_ms: get(r, 15)?,
                            p75_ms: get(r, 16)?,
                            p90_ms: get(r, 17)?,
                            max_ms: get(r, 18)?,
                            owd_fwd_ms: get(r, 19)?,
                            owd_rev_ms: get(r, 20)?,
                        }),
                        None => None,
                    },
                    detail: get(r, 21)?,
                    received_unix: get(r, 22)?,
                })
            })
            .collect()
    }

    fn mesh_slots(&mut self, src: &str, dst: &str, from: f64, to: f64, slot_s: f64) -> Result<Vec<MeshSlot>> {
        let q = if schema::hourly_slots(from, slot_s) {
            schema::mesh_slots_hourly_postgres()
        } else {
            schema::mesh_slots_postgres()
        };
        let rows = self.client.query(&q, &[&src, &dst, &from, &to, &slot_s]).map_err(db)?;
        rows.iter()
            .map(|r| {
                Ok(MeshSlot {
                    index: get(r, 0)?,
                    summaries: get(r, 1)?,
                    sent: get::<Option<i64>>(r, 2)?.unwrap_or(0),
                    lost: get::<Option<i64>>(r, 3)?.unwrap_or(0),
                    min_ms: get(r, 4)?,
                    p25_ms: get(r, 5)?,
                    median_ms: get(r, 6)?,
                    p75_ms: get(r, 7)?,
                    p90_ms: get(r, 8)?,
                    max_ms: get(r, 9)?,
                    owd_fwd_ms: get(r, 10)?,
                    owd_rev_ms: get(r, 11)?,
                })
            })
            .collect()
    }
}

impl PgStore {
    fn store_verdicts_(&mut self, run_id: i64, verdicts: &[Verdict]) -> Result<()> {
        let mut tx = self.client.transaction().map_err(db)?;
        if tx.query_opt("SELECT 1 FROM runs WHERE id = $1", &[&run_id]).map_err(db)?.is_none() {
            return Err(ArchiveError::NoRun(run_id));
        }
        tx.execute(schema::DELETE_VERDICTS, &[&run_id]).map_err(db)?;
        let st = tx.prepare(schema::INSERT_VERDICT).map_err(db)?;
        for (i, v) in verdicts.iter().enumerate() {
            tx.execute(
                &st,
                &[
                    &run_id,
                    &(i as i64),
                    &i64::from(v.expect),
                    &i64::from(v.line),
                    &v.text,
                    &v.cells,
                    &v.pass,
                    &v.measured,
                    &v.bound,
                    &v.margin,
                    &v.unit,
                    &v.note,
                ],
            )
            .map_err(db)?;
        }
        tx.commit().map_err(db)
    }

    fn store_mesh_(&mut self, rows: &[MeshRow]) -> Result<u64> {
        let mut tx = self.client.transaction().map_err(db)?;
        let st = tx.prepare(schema::INSERT_MESH).map_err(db)?;
        let hour = tx.prepare(schema::UPSERT_MESH_HOUR).map_err(db)?;
        let mut new = 0u64;
        for r in rows {
            let x = r.stats.clone();
            let (sent, lost) = (x.as_ref().map(|x| x.sent), x.as_ref().map(|x| x.lost));
            let f = |g: fn(&MeshStats) -> Option<f64>| x.as_ref().and_then(g);
            let (a, b, c, d, e, g, h) = (
                f(|x| x.min_ms),
                f(|x| x.p25_ms),
                f(|x| x.p75_ms),
                f(|x| x.p90_ms),
                f(|x| x.max_ms),
                f(|x| x.owd_fwd_ms),
                f(|x| x.owd_rev_ms),
            );
            let added = tx
                .execute(
                    &st,
                    &[
                        &r.agent,
                        &r.seq,
                        &r.test,
                        &r.kind,
                        &r.src,
                        &r.dst,
                        &r.start_unix,
                        &r.end_unix,
                        &r.status,
                        &r.reason,
                        &r.value,
                        &r.loss,
                        &sent,
                        &lost,
                        &a,
                        &b,
                        &c,
                        &d,
                        &e,
                        &g,
                        &h,
                        &r.detail,
                        &r.received_unix,
                    ],
                )
                .map_err(db)?;
            new += added;
            if let (1, Some(x)) = (added, r.stats.as_ref().filter(|_| r.kind == "latency" && r.status == "ok")) {
                let (h, [a, b, c, d, e, g]) = schema::hour_params(r.start_unix, x, r.value);
                tx.execute(
                    &hour,
                    &[
                        &r.src, &r.dst, &h, &x.sent, &x.lost, &x.min_ms, &x.max_ms, &a.0, &a.1, &b.0, &b.1, &c.0, &c.1,
                        &d.0, &d.1, &e.0, &e.1, &g.0, &g.1,
                    ],
                )
                .map_err(db)?;
            }
        }
        tx.commit().map_err(db)?;
        Ok(new)
    }

    fn store_counters_(&mut self, rows: &[CounterRow]) -> Result<()> {
        let mut tx = self.client.transaction().map_err(db)?;
        let st = tx.prepare(schema::INSERT_COUNTERS).map_err(db)?;
        for r in rows {
            let width = r.width as i32;
            tx.execute(
                &st,
                &[
                    &r.device,
                    &r.interface,
                    &r.source,
                    &r.at_unix,
                    &r.speed_bps,
                    &r.in_octets,
                    &r.out_octets,
                    &r.in_errors,
                    &r.out_errors,
                    &r.in_drops,
                    &r.out_drops,
                    &width,
                ],
            )
            .map_err(db)?;
        }
        tx.commit().map_err(db)
    }

    fn store_flows_(&mut self, rows: &[FlowRow], exporters: &[ExporterRow]) -> Result<()> {
        let mut tx = self.client.transaction().map_err(db)?;
        let st = tx.prepare(schema::INSERT_FLOW).map_err(db)?;
        for r in rows {
            let (proto, sport, dport) = (r.proto as i32, r.sport as i32, r.dport as i32);
            tx.execute(
                &st,
                &[
                    &r.bin_unix,
                    &r.bin_s,
                    &r.exporter,
                    &r.domain,
                    &r.src,
                    &r.dst,
                    &proto,
                    &sport,
                    &dport,
                    &r.sampling,
                    &r.bytes,
                    &r.packets,
                    &r.flows,
                    &r.raw_bytes,
                    &r.raw_packets,
                ],
            )
            .map_err(db)?;
        }
        let st = tx.prepare(schema::UPSERT_EXPORTER).map_err(db)?;
        for e in exporters {
            tx.execute(
                &st,
                &[
                    &e.session_unix,
                    &e.exporter,
                    &e.protocol,
                    &e.domain,
                    &e.seq_unit,
                    &e.datagrams,
                    &e.records,
                    &e.malformed,
                    &e.awaiting_template,
                    &e.expected,
                    &e.lost,
                    &e.resets,
                    &e.sampling,
                    &e.socket_drops,
                    &e.updated_unix,
                ],
            )
            .map_err(db)?;
        }
        tx.commit().map_err(db)
    }
}
