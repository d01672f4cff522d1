//! `wanperf ping` on loopback and through an emulated path.

mod common;
use common::*;
use serde_json::Value;
use std::time::Duration;

fn quantile7(sorted: &[f64], q: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * q;
    let (lo, hi) = (h.floor() as usize, h.ceil() as usize);
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

#[test]
fn loopback_probes_and_summary_match_the_records() {
    let s = Server::start(&[]);
    let port = s.port_s();
    let out = run(&["ping", "127.0.0.1", "-p", &port, "-c", "200", "-i", "5ms", "--json"], Duration::from_secs(30));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let recs = records(&out);
    let probes: Vec<&Value> = recs.iter().filter(|r| r["event"] == "probe").collect();
    assert_eq!(probes.len(), 200);
    let sum = &end(&recs)["summary"];
    assert_eq!(u(&sum["sent"]), 200);
    assert_eq!(u(&sum["received"]), 200, "no loss on loopback");
    assert_eq!(f(&sum["loss_pct"]), 0.0);
    // Recompute the statistics from the per-probe records.
    let mut rtts: Vec<f64> = probes.iter().map(|p| f(&p["rtt_ms"])).collect();
    let mean = rtts.iter().sum::<f64>() / rtts.len() as f64;
    let sd = (rtts.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (rtts.len() - 1) as f64).sqrt();
    rtts.sort_by(f64::total_cmp);
    let r = &sum["rtt_ms"];
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(close(f(&r["avg"]), mean) && close(f(&r["stdev"]), sd));
    assert!(close(f(&r["min"]), rtts[0]) && close(f(&r["max"]), rtts[199]));
    assert!(close(f(&r["median"]), quantile7(&rtts, 0.5)));
    assert!(close(f(&r["iqr"]), quantile7(&rtts, 0.75) - quantile7(&rtts, 0.25)));
    assert!(close(f(&r["p99"]), quantile7(&rtts, 0.99)));
    // IPDV from consecutive RTTs.
    let series: Vec<f64> = probes.iter().map(|p| f(&p["rtt_ms"])).collect();
    let mut d: Vec<f64> = series.windows(2).map(|w| w[1] - w[0]).collect();
    d.sort_by(f64::total_cmp);
    assert!(close(f(&sum["ipdv_ms"]["iqr"]), quantile7(&d, 0.75) - quantile7(&d, 0.25)));
    // Loopback: sane and sub-millisecond; the server's turnaround is reported and taken out.
    assert!(f(&r["median"]) > 0.0 && f(&r["median"]) < 1.0, "{r}");
    assert!(probes.iter().all(|p| p["server_us"].as_f64().is_some()));
    // Same clock on both ends: the offset estimate is within its stated uncertainty.
    assert!(f(&sum["clock_offset_ms"]).abs() <= f(&sum["clock_offset_uncertainty_ms"]) + 1e-3);
}

#[test]
fn tcp_mode_and_errors() {
    let s = Server::start(&[]);
    let port = s.port_s();
    let out = run(
        &["ping", "127.0.0.1", "-p", &port, "-c", "3", "-i", "50ms", "--mode", "tcp", "--json"],
        Duration::from_secs(20),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let recs = records(&out);
    assert_eq!(u(&end(&recs)["summary"]["received"]), 3);

    // ICMP echo needs no wanperf server (root or CAP_NET_RAW; CI runs as root).
    if wanperf_sys::euid() == 0 {
        let out =
            run(&["ping", "127.0.0.1", "-c", "5", "-i", "10ms", "--mode", "icmp", "--json"], Duration::from_secs(20));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let recs = records(&out);
        let sum = &end(&recs)["summary"];
        assert_eq!(u(&sum["received"]), 5);
        assert!(sum.get("clock_offset_ms").is_none(), "ICMP carries no server clock");
        let out = run(&["ping", "::1", "-c", "3", "-i", "10ms", "--mode", "icmp", "--json"], Duration::from_secs(20));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(u(&end(&records(&out))["summary"]["received"]), 3);
    }

    // The server dies mid-run: the run ends with what it measured, incomplete, exit non-zero.
    let mut s2 = Server::start(&[]);
    let p2 = s2.port_s();
    let child = std::process::Command::new(BIN)
        .args(["ping", "127.0.0.1", "-p", &p2, "-c", "1000", "-i", "10ms", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    s2.child.kill().unwrap();
    let t0 = std::time::Instant::now();
    let out2 = child.wait_with_output().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(5), "ping kept going after the server died");
    assert!(!out2.status.success());
    let recs2 = records(&out2);
    let e2 = end(&recs2);
    assert_eq!(e2["complete"], false);
    assert!(u(&e2["summary"]["received"]) > 20, "what was measured is kept");
    assert!(e2["summary"]["error"].as_str().unwrap().contains("went away"));
    assert_eq!(String::from_utf8_lossy(&out2.stderr).trim().lines().count(), 1);

    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
    for mode in ["udp", "tcp"] {
        let out = run(&["ping", "127.0.0.1", "-p", &free, "-c", "3", "--mode", mode], Duration::from_secs(10));
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains("no wanperf server") || err.contains("refused"), "{err}");
    }
    for bad in [vec!["-i", "0"], vec!["-c", "0"], vec!["-W", "0"], vec!["-s", "10"]] {
        let mut a = vec!["ping", "127.0.0.1", "-p", &port];
        a.extend(bad.iter());
        let out = run(&a, Duration::from_secs(10));
        assert!(!out.status.success(), "{a:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr).trim().lines().count(), 1);
    }
}

#[test]
fn probe_rtt_through_an_emulated_path() {
    if !paths_available() {
        return;
    }
    let out = on_path(
        &["--rtt", "30ms"],
        &["ping", "198.18.0.2", "-c", "40", "-i", "20ms", "--json"],
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let recs = records(&out);
    let sum = &end(&recs)["summary"];
    assert_eq!(u(&sum["received"]), 40);
    let least = f(&sum["rtt_ms"]["min"]);
    assert!(rtt_fits(least, 30.0, 2), "least probe RTT {least} ms through a 30 ms path");
    // Both hosts share the machine's clock: one-way delays are about half each way.
    let fwd = f(&sum["owd_fwd_ms"]["median"]);
    assert!((fwd - 15.0).abs() < 0.5, "forward one-way {fwd} ms");
}

/// On an asymmetric path the offset estimate (both ways taken as equal) splits the RTT in two;
/// a stated offset (`--clock-offset 0`: the hosts share this machine's clock) gives each
/// direction its own delay, as the emulator set them.
#[test]
fn a_stated_clock_offset_gives_each_direction_its_own_delay() {
    if !paths_available() {
        return;
    }
    let owd = |extra: &[&str]| -> (f64, f64, f64) {
        let mut cmd = vec!["ping", "198.18.0.2", "-c", "20", "-i", "20ms", "--json"];
        cmd.extend_from_slice(extra);
        let out = on_path(&["--delay-up", "30ms", "--delay-down", "10ms"], &cmd, Duration::from_secs(30));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let recs = records(&out);
        let s = &end(&recs)["summary"];
        (f(&s["owd_fwd_ms"]["median"]), f(&s["owd_rev_ms"]["median"]), f(&s["clock_offset_uncertainty_ms"]))
    };
    let (fwd, rev, unc) = owd(&[]);
    assert!((fwd - 20.0).abs() < 2.0 && (rev - 20.0).abs() < 2.0 && unc > 19.0, "estimated: {fwd} / {rev} ± {unc} ms");
    let (fwd, rev, unc) = owd(&["--clock-offset", "0"]);
    assert!((fwd - 30.0).abs() < 2.0 && (rev - 10.0).abs() < 2.0 && unc == 0.0, "stated: {fwd} / {rev} ± {unc} ms");
}

#[test]
fn probe_losses_match_the_emulators_drop_counters() {
    if !paths_available() {
        return;
    }
    let out = on_path(
        &["--rtt", "10ms", "--loss", "10%", "--seed", "7", "--json"],
        &["ping", "198.18.0.2", "-c", "300", "-i", "5ms", "-W", "1", "--json"],
        Duration::from_secs(30),
    );
    let recs = records(&out);
    let sum = &end(&recs)["summary"];
    let lost = u(&sum["sent"]) - u(&sum["received"]);
    let drops = |d: &str| random_losses(&out.stderr, d);
    let emu = drops("up") + drops("down");
    // Every lost probe is a request or a reply the loss model dropped; the interfaces' own
    // chatter (router solicitations) may add a few more drops.
    assert!(lost > 0);
    assert!(emu >= lost && emu <= lost + 5, "{lost} probes lost, the emulator dropped {emu} packets");
}
