//! `wanperf reproduce`: a seed re-run from its study files with its findings checked, and a
//! check seen to fail when the emulation is wrong.

mod common;
use common::*;
use serde_json::Value;
use std::time::Duration;

const SCENARIOS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios");

#[test]
fn the_plan_lists_every_seed_and_bad_input_is_one_line() {
    let out = run(&["reproduce", "all", "--dry-run", "--quick"], Duration::from_secs(30));
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    for id in ["000", "001", "002", "003", "004"] {
        assert!(text.contains(&format!("seed {id}: ")), "{text}");
    }
    assert!(text.lines().next().unwrap().contains("(--quick)"), "{text}");

    let out = run(&["reproduce", "9"], Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out).trim(), "error: no seed `9` (one of 000, 001, 002, 003, 004, or all)");
    let d = tmpdir("bad");
    std::fs::write(d.join("seeds.toml"), "[[seed]]\nid = \"000\"\nstudies = 3\n").unwrap();
    let out = run(&["reproduce", "0", "--scenarios", d.to_str().unwrap()], Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(1));
    let e = stderr(&out);
    assert!(e.starts_with("error: seeds.toml: line 3") && e.lines().count() == 1, "{e}");
    let _ = std::fs::remove_dir_all(&d);
}

/// Seed 002's reduced grid, from a copy of the scenarios in which the 1 Mbit/s reservation of
/// `seed002-oscars-policer` is installed at ten times its rate. The checks stated through the
/// study's own policer still hold; the one stated in the seed's numbers (1 Mbit/s + 1 MB over
/// the test) fails, so the seed fails and the command exits 1. Every other study of the seed
/// runs as shipped and every one of its checks holds.
#[test]
fn seed_002_quick_is_checked_and_a_reservation_at_ten_times_its_rate_fails_its_check() {
    if !paths_available() {
        return;
    }
    let d = tmpdir("002");
    let copy = d.join("scenarios");
    std::fs::create_dir_all(&copy).unwrap();
    for e in std::fs::read_dir(SCENARIOS).unwrap() {
        let p = e.unwrap().path();
        let mut text = std::fs::read_to_string(&p).unwrap();
        if p.file_name().unwrap() == "seed002-oscars-policer.toml" {
            assert!(text.contains("\"1M,1MB,port=test\""));
            text = text.replace("\"1M,1MB,port=test\"", "\"10M,1MB,port=test\"");
        }
        std::fs::write(copy.join(p.file_name().unwrap()), text).unwrap();
    }
    let (db, reports) = (d.join("a.sqlite"), d.join("out"));
    let out = run(
        &[
            "reproduce",
            "002",
            "--quick",
            "--json",
            "--scenarios",
            copy.to_str().unwrap(),
            "--db",
            db.to_str().unwrap(),
            "-o",
            reports.to_str().unwrap(),
        ],
        Duration::from_secs(600),
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let recs = records(&out);
    let seed = recs.iter().find(|r| r["event"] == "seed").expect("a seed record");
    assert_eq!(seed["id"], "002");
    assert_eq!(seed["ok"], false);
    let findings = seed["findings"].as_array().unwrap();
    let by_id = |id: &str| findings.iter().find(|f| f["id"] == id).unwrap_or_else(|| panic!("{id}"));
    // The broken reservation: its own-numbers check fails, the others hold.
    let f3 = by_id("002-3");
    assert_eq!(f3["status"], "fail", "{f3}");
    let checks: Vec<&Value> = f3["checks"].as_array().unwrap().iter().map(|c| &c[1]).collect();
    let seeds_numbers = checks.iter().find(|v| v["text"].as_str().unwrap().contains("1 Mbit/s + 1 MiB")).unwrap();
    assert_eq!(seeds_numbers["pass"], false, "{seeds_numbers}");
    assert!(f(&seeds_numbers["measured"]) > f(&seeds_numbers["bound"]));
    assert_eq!(checks.iter().filter(|v| v["pass"] == false).count(), 1, "{checks:?}");
    // Everything else in the seed is checked and holds, or is said to need the full run or to
    // be uncheckable on an emulator.
    for f in findings.iter().filter(|f| f["id"] != "002-3") {
        let st = f["status"].as_str().unwrap();
        assert!(["pass", "full_run_only", "unchecked"].contains(&st), "{f}");
        if st == "unchecked" {
            assert!(!f["why"].as_str().unwrap().is_empty(), "{f}");
        }
    }
    assert!(findings.iter().filter(|f| f["status"] == "pass").count() >= 5, "{findings:?}");
    let c = &seed["counts"];
    assert_eq!(u(&c["checks_held"]) + 1, u(&c["checks"]), "{c}");
    assert_eq!(u(&c["passed"]) + u(&c["failed"]) + u(&c["unchecked"]) + u(&c["full_run_only"]), 15, "{c}");
    // The report shows it.
    let html = std::fs::read_to_string(reports.join("seed002.html")).unwrap();
    assert!(html.contains("data-finding=\"002-3\" data-status=\"fail\""));
    assert!(html.contains("data-finding=\"002-11\" data-status=\"pass\""));
    assert!(html.contains("874 kbit/s"), "the seed's published number beside the new run's");
    let _ = std::fs::remove_dir_all(&d);
}
