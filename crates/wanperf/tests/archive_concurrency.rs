//! Many writers and readers on one new archive at once, as a monitoring host sees it: six
//! processes keep storing runs (`wanperf import`, each a run with one cell) while six keep
//! listing, exporting and reporting (`runs`, `export`, `report`), for a bounded time, starting
//! together on an archive that does not exist yet. No command may fail, and every stored cell
//! must be there exactly once. Run on SQLite and on the PostgreSQL that `.ci/run` starts.

mod common;

use common::BIN;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the writers and readers keep going.
const SOAK: Duration = Duration::from_secs(30);
const WRITERS: usize = 6;
const READERS: usize = 6;

fn tmpdir(tag: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    let d = std::env::temp_dir().join(format!("wanperf-conc-{tag}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs wanperf to completion (each command here is short; a hang fails the test).
fn wanperf(args: &[&str]) -> Output {
    common::run(args, Duration::from_secs(120))
}

/// iperf3 `-J` output of a short loopback test, in the shape the importer reads.
fn iperf3_json(tag: &str) -> String {
    serde_json::json!({
        "start": {
            "version": "iperf 3.12",
            "system_info": "Linux test",
            "timestamp": {"timesecs": 1_700_000_000},
            "connecting_to": {"host": "127.0.0.1", "port": 5201},
            "test_start": {"protocol": "TCP", "num_streams": 1, "blksize": 131072, "duration": 2, "reverse": 0},
            "cookie": tag,
        },
        "intervals": [
            {"streams": [{"socket": 5, "start": 0.0, "end": 1.0, "bytes": 1_000_000_000u64,
                          "bits_per_second": 8e9, "retransmits": 0, "snd_cwnd": 1_000_000, "rtt": 40}],
             "sum": {"start": 0.0, "end": 1.0, "bytes": 1_000_000_000u64, "bits_per_second": 8e9, "retransmits": 0}},
            {"streams": [{"socket": 5, "start": 1.0, "end": 2.0, "bytes": 1_100_000_000u64,
                          "bits_per_second": 8.8e9, "retransmits": 1, "snd_cwnd": 1_100_000, "rtt": 42}],
             "sum": {"start": 1.0, "end": 2.0, "bytes": 1_100_000_000u64, "bits_per_second": 8.8e9, "retransmits": 1}}
        ],
        "end": {
            "sum_sent": {"start": 0, "end": 2.0, "bytes": 2_100_000_000u64, "bits_per_second": 8.4e9, "retransmits": 1},
            "sum_received": {"start": 0, "end": 2.0, "bytes": 2_100_000_000u64, "bits_per_second": 8.4e9},
            "cpu_utilization_percent": {"host_total": 50.0, "remote_total": 40.0}
        }
    })
    .to_string()
}

/// What one soak saw.
#[derive(Default)]
struct Tally {
    /// Run id → file, for every import that said it stored a run.
    stored: BTreeMap<i64, String>,
    failures: Vec<String>,
    reads: usize,
}

fn soak(db: &str, dir: &Path) {
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let mut handles = Vec::new();
    for w in 0..WRITERS {
        let (db, dir, stop, tally) = (db.to_string(), dir.to_path_buf(), stop.clone(), tally.clone());
        handles.push(std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::Acquire) {
                let file = dir.join(format!("w{w}-{i}.json"));
                std::fs::write(&file, iperf3_json(&format!("w{w}-{i}"))).unwrap();
                let f = file.display().to_string();
                let out = wanperf(&["import", "iperf3", &f, "--db", &db, "--json"]);
                let mut t = tally.lock().unwrap();
                if !out.status.success() {
                    t.failures.push(format!("import {f}: {}", String::from_utf8_lossy(&out.stderr).trim()));
                } else {
                    let v: Value = serde_json::from_slice(&out.stdout).expect("import --json prints one record");
                    let id = v["run"].as_i64().expect("run id");
                    if let Some(other) = t.stored.insert(id, f.clone()) {
                        t.failures.push(format!("run {id} reported by two imports: {other} and {f}"));
                    }
                }
                i += 1;
            }
        }));
    }
    for r in 0..READERS {
        let (db, dir, stop, tally) = (db.to_string(), dir.to_path_buf(), stop.clone(), tally.clone());
        handles.push(std::thread::spawn(move || {
            let html = dir.join(format!("r{r}.html")).display().to_string();
            let mut k = 0usize;
            while !stop.load(Ordering::Acquire) {
                let fail = |what: &str, out: &Output| {
                    format!("{what}: exit {:?}: {}", out.status.code(), String::from_utf8_lossy(&out.stderr).trim())
                };
                let out = wanperf(&["runs", "--db", &db, "--json"]);
                if !out.status.success() {
                    tally.lock().unwrap().failures.push(fail("runs", &out));
                    continue;
                }
                // A complete run has its cell (import stores the cell, then finishes the run).
                let complete: Vec<i64> = common::records(&out)
                    .iter()
                    .filter(|v| v["status"] == "complete")
                    .filter_map(|v| v["id"].as_i64())
                    .collect();
                let mut seen = 1;
                if let Some(id) = complete.get(k % complete.len().max(1)).map(|i| i.to_string()) {
                    let out = wanperf(&["export", &id, "--db", &db, "--format", "json"]);
                    let cells = serde_json::from_slice::<Value>(&out.stdout)
                        .ok()
                        .and_then(|v| v["cells"].as_array().map(Vec::len));
                    if !out.status.success() || cells != Some(1) {
                        tally.lock().unwrap().failures.push(fail(&format!("export {id} ({cells:?} cells)"), &out));
                    }
                    let out = wanperf(&["report", &id, "--db", &db, "-o", &html]);
                    if !out.status.success() {
                        tally.lock().unwrap().failures.push(fail(&format!("report {id}"), &out));
                    }
                    seen += 2;
                }
                tally.lock().unwrap().reads += seen;
                k += 1;
            }
        }));
    }
    let t0 = Instant::now();
    while t0.elapsed() < SOAK {
        std::thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, Ordering::Release);
    for h in handles {
        h.join().unwrap();
    }
    let t = tally.lock().unwrap();
    assert!(
        t.failures.is_empty(),
        "{} failed commands, first: {:#?}",
        t.failures.len(),
        &t.failures[..t.failures.len().min(5)]
    );
    assert!(t.stored.len() >= WRITERS, "only {} runs stored in {SOAK:?}", t.stored.len());
    assert!(t.reads >= READERS, "only {} reads in {SOAK:?}", t.reads);

    // Every stored run is there exactly once, with exactly its one cell, and nothing else is.
    let out = wanperf(&["runs", "--db", db, "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let listed = common::records(&out);
    let mut ids = BTreeMap::new();
    for r in &listed {
        let id = r["id"].as_i64().unwrap();
        assert!(ids.insert(id, r["cells_done"].as_u64().unwrap()).is_none(), "run {id} listed twice");
        let file =
            t.stored.get(&id).unwrap_or_else(|| panic!("run {id} ({}) is not one any import stored", r["study"]));
        let name = Path::new(file).file_name().unwrap().to_string_lossy().to_string();
        assert!(r["study"].as_str().unwrap().contains(&name), "run {id} is {} but was stored for {name}", r["study"]);
        assert_eq!(r["status"], "complete", "run {id}");
    }
    assert_eq!(ids.len(), t.stored.len(), "runs listed vs. imports that succeeded");
    assert!(ids.values().all(|&c| c == 1), "a run without its cell or with two: {ids:?}");
    eprintln!(
        "{db}: {} runs stored by {WRITERS} writers, {} reads by {READERS} readers, no failure",
        ids.len(),
        t.reads
    );
}

#[test]
fn sqlite_six_writers_six_readers_on_a_new_archive() {
    let d = tmpdir("sqlite");
    let db = d.join("new").join("archive.sqlite");
    soak(&db.display().to_string(), &d);
    // The archive is the only thing left beside the inputs: no temporary archive remains.
    let left: Vec<String> = std::fs::read_dir(d.join("new"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.contains("creating"))
        .collect();
    assert!(left.is_empty(), "temporary archives left: {left:?}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn postgres_six_writers_six_readers_on_a_new_schema() {
    let Some(base) = postgres_url() else { return };
    let schema = PgSchema::new(&base, "conc");
    let d = tmpdir("pg");
    soak(&schema.url, &d);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn read_only_commands_create_nothing_and_say_what_is_missing() {
    let d = tmpdir("ro");
    let db = d.join("none.sqlite").display().to_string();
    let out = wanperf(&["runs", "--db", &db]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("no runs"));
    let out = wanperf(&["export", "latest", "--db", &db]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no archive at") && err.lines().count() == 1, "{err}");
    let out = wanperf(&["report", "1", "--db", &db, "-o", &d.join("r.html").display().to_string()]);
    assert!(!out.status.success());
    assert!(!Path::new(&db).exists(), "a read-only command created the archive");
    let _ = std::fs::remove_dir_all(&d);
}

/// A writer that cannot get the write lock within WANPERF_LOCK_WAIT fails with one line that
/// names the process holding it.
#[test]
fn a_writer_blocked_too_long_names_the_holder() {
    let d = tmpdir("busy");
    let db = d.join("a.sqlite").display().to_string();
    let file = d.join("x.json");
    std::fs::write(&file, iperf3_json("x")).unwrap();
    let f = file.display().to_string();
    assert!(wanperf(&["import", "iperf3", &f, "--db", &db]).status.success());
    // The holder keeps a write transaction open (a wanperf writer holds it for milliseconds
    // only); Python's sqlite3 module is an independent SQLite client.
    let Ok(mut holder) = Command::new("python3")
        .args([
            "-c",
            "import sqlite3,sys,time\nc=sqlite3.connect(sys.argv[1],isolation_level=None)\n\
             c.execute('BEGIN IMMEDIATE')\nprint('locked',flush=True)\ntime.sleep(20)",
            &db,
        ])
        .stdout(Stdio::piped())
        .spawn()
    else {
        eprintln!("SKIPPED: python3 is not installed");
        return;
    };
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(holder.stdout.as_mut().unwrap()), &mut line).unwrap();
    assert_eq!(line.trim(), "locked");
    let t0 = Instant::now();
    let out =
        Command::new(BIN).args(["import", "iperf3", &f, "--db", &db]).env("WANPERF_LOCK_WAIT", "1.5").output().unwrap();
    let waited = t0.elapsed();
    // Readers are not held up by the writer's lock.
    let runs = wanperf(&["runs", "--db", &db, "--json"]);
    let _ = holder.kill();
    let _ = holder.wait();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("locked by pid") && err.contains("python3") && err.contains("WANPERF_LOCK_WAIT"), "{err}");
    assert!(waited >= Duration::from_millis(1400), "gave up after {waited:?}");
    assert!(runs.status.success() && common::records(&runs).len() == 1, "{}", String::from_utf8_lossy(&runs.stderr));
    // Once the holder is gone, the same import goes through.
    assert!(wanperf(&["import", "iperf3", &f, "--db", &db]).status.success());
    let _ = std::fs::remove_dir_all(&d);
}

fn postgres_url() -> Option<String> {
    match std::env::var("WANPERF_TEST_POSTGRES") {
        Ok(u) if !u.is_empty() => Some(u),
        _ if std::env::var_os("CI").is_some() => {
            panic!("CI is set but WANPERF_TEST_POSTGRES is not: CI must test the PostgreSQL store (.ci/run starts one)")
        }
        _ => {
            eprintln!("SKIPPED: set WANPERF_TEST_POSTGRES=postgres://… to test the PostgreSQL store");
            None
        }
    }
}

/// A schema of its own (the archive starts empty: the writers race to migrate it), dropped
/// at the end.
struct PgSchema {
    base: String,
    name: String,
    url: String,
}

impl PgSchema {
    fn new(base: &str, tag: &str) -> PgSchema {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        let name = format!("wanperf_test_{tag}_{}_{nanos}", std::process::id());
        psql(base, &format!("CREATE SCHEMA {name}"));
        let sep = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{sep}options=-csearch_path%3D{name}");
        PgSchema { base: base.to_string(), name, url }
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        psql(&self.base, &format!("DROP SCHEMA {} CASCADE", self.name));
    }
}

/// One SQL statement through psql (the PostgreSQL client .ci/run installs with the server).
fn psql(url: &str, sql: &str) {
    let out = Command::new("psql").args([url, "-v", "ON_ERROR_STOP=1", "-q", "-c", sql]).output().expect("psql");
    assert!(out.status.success(), "psql {sql}: {}", String::from_utf8_lossy(&out.stderr));
}
