//! `wanperf load`: the loaded-vs-unloaded experiment.

mod common;
use common::*;
use serde_json::Value;
use std::time::Duration;

#[test]
fn loopback_sweep_produces_a_cell_per_streams_and_window() {
    let s = Server::start(&[]);
    let port = s.port_s();
    let out = run(
        &[
            "load",
            "127.0.0.1",
            "-p",
            &port,
            "--streams",
            "1,2",
            "--window",
            "auto,64k",
            "--load-time",
            "1s",
            "--idle-time",
            "1s",
            "-i",
            "20ms",
            "--json",
        ],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let recs = records(&out);
    let cells: Vec<&Value> = recs.iter().filter(|r| r["event"] == "cell").collect();
    assert_eq!(cells.len(), 4);
    let e = end(&recs);
    assert_eq!(e["complete"], true);
    assert_eq!(e["cells"].as_array().unwrap().len(), 4);
    for c in cells {
        assert!(f(&c["throughput_bps"]) > 0.0);
        assert!(u(&c["loaded"]["received"]) >= 30, "{c}");
        assert!(u(&c["unloaded"]["received"]) >= 30, "{c}");
        assert!(f(&c["loaded"]["rtt_ms"]["median"]) < 5.0);
        assert!(c["rpm"].as_f64().is_some());
    }
    // The server dies mid-run: what was measured comes out, marked incomplete, exit non-zero.
    let mut s2 = Server::start(&[]);
    let p2 = s2.port_s();
    let child = std::process::Command::new(BIN)
        .args([
            "load",
            "127.0.0.1",
            "-p",
            &p2,
            "--streams",
            "1,2",
            "--load-time",
            "1s",
            "--idle-time",
            "1s",
            "-i",
            "20ms",
            "--json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    s2.child.kill().unwrap();
    let out2 = child.wait_with_output().unwrap();
    assert!(!out2.status.success());
    let recs2 = records(&out2);
    let e2 = end(&recs2);
    assert_eq!(e2["complete"], false);
    // Whichever notices first: the load connection or the probes.
    let err = e2["error"].as_str().unwrap();
    assert!(err.contains("load phase failed") || err.contains("server"), "{err}");
    assert!(!e2["cells"].as_array().unwrap().is_empty(), "the first cell was measured");
    assert_eq!(String::from_utf8_lossy(&out2.stderr).trim().lines().count(), 1);

    let out = run(&["load", "127.0.0.1", "-p", &port, "--streams", "0"], Duration::from_secs(10));
    assert!(!out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stderr).trim().lines().count(), 1);
}

fn load_through(extra_path: &[&str], extra_load: &[&str]) -> Value {
    let mut link = vec!["--rtt", "20ms", "--rate", "25M", "--queue", "300kB"];
    link.extend_from_slice(extra_path);
    let mut cmd =
        vec!["load", "198.18.0.2", "--cc", "cubic", "--load-time", "6s", "--idle-time", "2s", "-i", "50ms", "--json"];
    cmd.extend_from_slice(extra_load);
    let out = on_path(&link, &cmd, Duration::from_secs(90));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let recs = records(&out);
    recs.iter().find(|r| r["event"] == "cell").expect("a cell").clone()
}

#[test]
fn loaded_rtt_rises_by_queue_over_rate_and_priority_keeps_probes_steady() {
    if !paths_available() {
        return;
    }
    // Seed 000: a bulk load through a 25 Mbit/s bottleneck with a 300 kB queue adds about
    // queue/rate to everyone's RTT.
    let c = load_through(&[], &["--streams", "40"]);
    let want = 300.0 * 1024.0 * 8.0 / 25e6 * 1000.0;
    let added = f(&c["added_rtt_ms"]);
    assert!((added - want).abs() / want < 0.2, "loaded median RTT rose {added:.1} ms, queue/rate is {want:.1} ms");
    let idle = f(&c["unloaded"]["rtt_ms"]["min"]);
    assert!(rtt_fits(idle, 20.0, 2), "unloaded least RTT {idle} ms through a 20 ms path");
    // Responsiveness: the load connections' own RTT sits behind the same queue, and RPM is
    // 60 s over the mean of the two latency terms.
    let (fo, se) = (f(&c["rpm_foreign_ms"]), f(&c["rpm_self_ms"]));
    assert!(se > 20.0 + 0.5 * want, "load connections' smoothed RTT {se} ms");
    assert!((f(&c["rpm"]) - 60_000.0 / (0.5 * fo + 0.5 * se)).abs() < 1e-6);
    let be_iqr = f(&c["loaded"]["rtt_ms"]["iqr"]);
    // Seed 002: under a 40-stream load, probes in a priority class ride past the queue.
    let p = load_through(&["--priority", "dscp=46"], &["--streams", "40", "--dscp", "46"]);
    let pr_iqr = f(&p["loaded"]["rtt_ms"]["iqr"]);
    let pr_med = f(&p["loaded"]["rtt_ms"]["median"]);
    assert!(pr_med < 25.0, "priority probes waited: median {pr_med} ms");
    assert!(pr_iqr < 0.25 * be_iqr.max(1.0), "priority IQR {pr_iqr} ms vs best effort {be_iqr} ms");
}
