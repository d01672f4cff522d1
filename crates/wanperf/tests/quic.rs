//! `tput --quic`: QUIC tests under wanperf's control protocol — each way on loopback with
//! quinn's congestion state in the intervals, the emulated path's rate and a policer's bound
//! from outside (the emulator's own counters), keys, and the flags' one-line errors.

mod common;

use common::*;
use serde_json::Value;
use std::time::Duration;

fn quic(server: &Server, extra: &[&str]) -> Vec<Value> {
    let port = server.port_s();
    let mut args = vec!["tput", "127.0.0.1", "-p", &port, "--quic", "--json"];
    args.extend_from_slice(extra);
    let out = run(&args, Duration::from_secs(30));
    assert!(out.status.success(), "{extra:?}: {}", String::from_utf8_lossy(&out.stderr));
    records(&out)
}

#[test]
fn quic_tests_run_each_way_with_quinns_congestion_state_in_every_interval() {
    // One at a time: a loopback QUIC test takes a core, and the path test measures a rate.
    let _serial = serial();
    let server = Server::start(&[]);
    for (flags, ways) in [
        (&["-t", "1"][..], &["up"][..]),
        (&["-t", "1", "-R"][..], &["down"][..]),
        (&["-t", "1.5", "--bidir", "-P", "2", "--cc", "bbr"][..], &["up", "down"][..]),
    ] {
        let recs = quic(&server, flags);
        assert_eq!(recs[0]["test"]["transport"], "quic", "{flags:?}");
        let e = end(&recs);
        assert_eq!(e["complete"], true, "{flags:?}: {e}");
        let s = &e["summary"];
        for st in s["streams"].as_array().unwrap() {
            assert!(ways.contains(&st["direction"].as_str().unwrap()), "{flags:?}: {st}");
            assert!(u(&st["received_bytes"]) > 1 << 20, "{flags:?}: a stream moved almost nothing: {st}");
            // What the receiver read is what the sender wrote: the stream is finished and
            // read to its end before the test's end.
            assert_eq!(st["received_bytes"], st["sent_bytes"], "{flags:?}: {st}");
            let cc = if flags.contains(&"bbr") { "bbr" } else { "cubic" };
            assert_eq!(st["sender_cc"], cc, "{flags:?}");
        }
        // Every interval of every stream carries quinn's view of its connection.
        let intervals: Vec<&Value> = recs.iter().filter(|r| r["event"] == "interval").collect();
        assert!(!intervals.is_empty());
        for iv in &intervals {
            for st in iv["streams"].as_array().unwrap() {
                let t = &st["tcp"];
                assert!(u(&t["srtt_us"]) > 0, "{flags:?}: no RTT in {st}");
                assert!(u(&t["snd_cwnd_bytes"]) > 0 && u(&t["cwnd"]) > 0, "{flags:?}: no window in {st}");
                assert!(t["congestion_events"].is_u64(), "{flags:?}: no congestion events in {st}");
            }
        }
    }
    // Three streams on one connection (one congestion controller): every stream carries its
    // own bytes over the one socket, and the connection's counters are counted once (its
    // first stream reports them), so the sums over the streams are the connection's.
    let recs = quic(&server, &["-t", "1", "-P", "3", "--quic-connections", "1"]);
    let conns = recs[0]["connections"].as_array().unwrap();
    assert_eq!(conns.len(), 3);
    assert!(conns.iter().all(|c| c["local"] == conns[0]["local"]), "one connection, one socket: {conns:?}");
    for st in end(&recs)["summary"]["streams"].as_array().unwrap() {
        assert!(u(&st["received_bytes"]) > 1 << 20 && st["received_bytes"] == st["sent_bytes"], "{st}");
    }
    for iv in recs.iter().filter(|r| r["event"] == "interval") {
        let streams = iv["streams"].as_array().unwrap();
        let speaking = streams.iter().filter(|st| st["tcp"]["congestion_events"].is_u64()).count();
        assert_eq!(speaking, 1, "one stream speaks for the connection: {iv}");
        assert!(streams.iter().all(|st| u(&st["tcp"]["snd_cwnd_bytes"]) > 0), "each shows its window: {iv}");
    }
    // Without the flag, a connection per stream.
    let recs = quic(&server, &["-t", "1", "-P", "2"]);
    let conns = recs[0]["connections"].as_array().unwrap();
    assert_ne!(conns[0]["local"], conns[1]["local"], "{conns:?}");
    // A byte count ends the test when the bytes are read.
    let recs = quic(&server, &["-n", "8M"]);
    let s = &end(&recs)["summary"];
    assert_eq!(u(&s["received_bytes"]), 8 << 20, "{s}");
    assert!(server.log_text().contains("QUIC client→server"), "{}", server.log_text());
}

#[test]
fn quic_flags_that_cannot_work_get_one_line() {
    // One at a time: a loopback QUIC test takes a core, and the path test measures a rate.
    let _serial = serial();
    let server = Server::start(&[]);
    let port = server.port_s();
    for (flags, want) in [
        (&["--quic", "--cc", "vegas", "-t", "1"][..], "QUIC has no congestion control `vegas`"),
        (&["--quic", "-b", "10M", "-t", "1"][..], "not paced"),
        (&["--quic", "-u", "-b", "1M", "-t", "1"][..], "cannot be used with"),
        (&["--quic", "--iperf3", "-t", "1"][..], "cannot be used with"),
        (&["--quic", "-P", "2", "--quic-connections", "3", "-t", "1"][..], "between 1 and the test's streams"),
        (&["--quic-connections", "1", "-t", "1"][..], "--quic"),
    ] {
        let mut args = vec!["tput", "127.0.0.1", "-p", &port];
        args.extend_from_slice(flags);
        let out = run(&args, Duration::from_secs(20));
        assert!(!out.status.success(), "{flags:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{flags:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn a_keyed_server_refuses_a_quic_test_without_a_key_and_runs_one_with_it() {
    // One at a time: a loopback QUIC test takes a core, and the path test measures a rate.
    let _serial = serial();
    let dir = std::env::temp_dir().join(format!("wanperf-quic-keys-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("k");
    let key_s = key.display().to_string();
    ok(&run(&["keygen", "-o", &key_s, "-C", "alice@lab"], Duration::from_secs(10)));
    let authorized = dir.join("authorized_keys");
    std::fs::copy(dir.join("k.pub"), &authorized).unwrap();
    let server = Server::start(&["--authorized-keys", &authorized.display().to_string()]);
    let port = server.port_s();
    let out = run(&["tput", "127.0.0.1", "-p", &port, "--quic", "-t", "1"], Duration::from_secs(20));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("key"), "{err}");
    let recs = quic(&server, &["-t", "1", "--key", &key_s]);
    assert_eq!(end(&recs)["complete"], true);
    let _ = std::fs::remove_dir_all(&dir);
}

/// One test on an emulated path (QUIC unless `tput_flags` say `-u`); its end record and the
/// path's counters.
fn on_path(path_flags: &[&str], tput_flags: &str) -> (Value, Value) {
    let right = format!("{BIN} serve --allow 198.18.0.0/15");
    let quic = if tput_flags.starts_with("-u ") { "" } else { "--quic" };
    let left = format!("{BIN} tput 198.18.0.2 {quic} --json {tput_flags}");
    let mut args = vec!["path", "run", "--json", "--right", &right];
    args.extend_from_slice(path_flags);
    args.extend_from_slice(&["--", "sh", "-c", &left]);
    let out = run(&args, Duration::from_secs(60));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let recs = records(&out);
    (end(&recs).clone(), path_stats(&out.stderr))
}

#[test]
fn quic_fills_the_emulated_path_and_a_policer_holds_it_to_its_bound() {
    let _serial = serial();
    if !paths_available() {
        return;
    }
    // 50 Mbit/s, 20 ms: QUIC's goodput is the link's rate less its headers (IP, UDP, QUIC's
    // short header, AEAD tag and frame: about 4 % of a 1452-byte packet).
    let (e, stats) = on_path(&["--rtt", "20ms", "--rate", "50M", "--queue", "250kB"], "-t 2.5 --omit 1.5");
    let got = f(&e["summary"]["throughput_bps"]);
    assert!((0.85 * 50e6..=50e6).contains(&got), "QUIC through a 50 Mbit/s link: {got} bit/s");
    let up = &stats["up"]["classes"]["best_effort"];
    assert!(u(&up["packets_in"]) > 10_000, "the emulator saw the QUIC packets: {up}");
    assert!(e["summary"]["verdict"]["text"].as_str().unwrap().contains("network path"), "{}", e["summary"]["verdict"]);

    // -w 64k: QUIC's flow control holds one stream to window / RTT, and the verdict says so.
    let (e, _) = on_path(&["--rtt", "20ms", "--rate", "50M"], "-t 2 --omit 1 -w 64k");
    let got = f(&e["summary"]["throughput_bps"]);
    let bound = 65536.0 * 8.0 / 0.020;
    assert!((0.6 * bound..=1.05 * bound).contains(&got), "64 KiB at 20 ms: {got} bit/s, window/RTT {bound}");
    let v = e["summary"]["verdict"]["text"].as_str().unwrap();
    assert!(v.contains("receiver's window") && v.contains("QUIC flow control"), "{v}");

    // A 10 Mbit/s policer with a 100 kB bucket on the test's own traffic (`port=test`: the
    // server's QUIC endpoint is on one of its data ports): the token bucket bounds what
    // passes to rate × t + burst, and it dropped what did not fit.
    let policer = ["--rtt", "20ms", "--rate", "50M", "--policer", "10M,100k,port=test"];
    let (e, stats) = on_path(&policer, "-t 3.5 --omit 1.5");
    let got = f(&e["summary"]["throughput_bps"]);
    let secs = f(&e["summary"]["duration_s"]);
    let bound = 10e6 + 100e3 * 8.0 / secs;
    assert!(got <= bound, "QUIC through a 10 Mbit/s policer: {got} bit/s, bound {bound}");
    assert!(got >= 0.5 * 10e6, "QUIC starved by a 10 Mbit/s policer: {got} bit/s");
    let up = &stats["up"]["classes"]["best_effort"];
    assert!(u(&up["policer_drops"]) > 0, "the policer never acted: {up}");
    assert!(u(&up["policed"]) as f64 >= 0.99 * u(&up["packets_in"]) as f64, "port=test missed QUIC's data: {up}");
    let lost: u64 = e["summary"]["streams"].as_array().unwrap().iter().map(|s| u(&s["retransmits"])).sum();
    assert!(lost > 0, "quinn declared no packet lost behind a dropping policer");

    // The same policer holds a UDP test's data (its streams' server sockets are data ports
    // too): 20 Mbit/s offered, rate × t + burst received.
    let (e, stats) = on_path(&policer, "-u -b 20M -t 3");
    let got = f(&e["summary"]["throughput_bps"]);
    let bound = 10e6 + 100e3 * 8.0 / f(&e["summary"]["duration_s"]);
    assert!((0.8 * 10e6..=bound).contains(&got), "UDP at 20 Mbit/s through a 10 Mbit/s policer: {got} bit/s");
    let up = &stats["up"]["classes"]["best_effort"];
    assert!(u(&up["policed"]) as f64 >= 0.99 * u(&up["packets_in"]) as f64, "port=test missed UDP's data: {up}");
    assert!(u(&up["policer_drops"]) > 0, "{up}");
}
