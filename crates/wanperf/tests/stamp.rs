//! STAMP and TWAMP-Light: `wanperf ping --stamp` / `--twamp-light` against `wanperf serve
//! --stamp-port`, on loopback and through an emulated path with asymmetric delays and loss.

mod common;
use common::*;
use serde_json::Value;
use std::time::Duration;

fn summary(out: &std::process::Output) -> Value {
    end(&records(out))["summary"].clone()
}

#[test]
fn stamp_probes_to_a_stateful_reflector_on_loopback() {
    let s = Server::start(&["--stamp-port", "0"]);
    let port = s.stamp_port.expect("the reflector's port is announced").to_string();
    let out = run(
        &["ping", "127.0.0.1", "--stamp", "-p", &port, "-c", "100", "-i", "5ms", "--json"],
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let sum = summary(&out);
    assert_eq!((u(&sum["sent"]), u(&sum["received"])), (100, 100), "{sum}");
    // The reflector's stamps take its turnaround out and give one-way delays.
    assert!(f(&sum["rtt_ms"]["median"]) < 1.0, "{sum}");
    assert!(records(&out).iter().filter(|r| r["event"] == "probe").all(|p| p["server_us"].as_f64().is_some()));
    assert!(sum["owd_fwd_ms"]["median"].is_number() && sum["owd_rev_ms"]["median"].is_number());
    // Its counters (Direct Measurement TLV) split the losses: none either way.
    let l = &sum["loss_each_way"];
    assert_eq!((u(&l["basis"]), u(&l["forward"]), u(&l["reverse"]), u(&l["unknown"])), (100, 0, 0, 0), "{sum}");
    // Both ends' clocks are stated.
    assert!(sum["clocks"]["sender_error_ms"].is_number() && sum["clocks"]["reflector_synchronized"].is_boolean());
    // The same host's clock on both ends: the offset is within its stated uncertainty.
    assert!(f(&sum["clock_offset_ms"]).abs() <= f(&sum["clock_offset_uncertainty_ms"]) + 1e-3, "{sum}");

    // TWAMP-Light: the same packets without TLVs; the reflector's own numbering still splits.
    let out = run(
        &["ping", "127.0.0.1", "--twamp-light", "-p", &port, "-c", "20", "-i", "5ms", "-s", "41"],
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("20 sent, 20 received") && text.contains("clocks (error estimates)"), "{text}");
    let log = s.interrupt();
    assert!(log.contains("STAMP reflector: 120 packets reflected"), "{log}");
}

#[test]
fn authenticated_mode_needs_the_key_on_both_ends() {
    let dir = tmpdir("stamp-key");
    let key = dir.join("k.hex");
    let other = dir.join("other.hex");
    std::fs::write(&key, "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n").unwrap();
    std::fs::write(&other, "ff0102030405060708090a0b0c0d0e0f\n").unwrap();
    let k = key.to_str().unwrap();
    let s = Server::start(&["--stamp-port", "0", "--stamp-key", k]);
    let port = s.stamp_port.unwrap().to_string();
    let ping = |extra: &[&str]| {
        let mut a = vec!["ping", "127.0.0.1", "--stamp", "-p", &port, "-c", "10", "-i", "5ms", "-W", "200ms", "--json"];
        a.extend_from_slice(extra);
        run(&a, Duration::from_secs(30))
    };
    let out = ping(&["--stamp-key", k]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(u(&summary(&out)["received"]), 10);
    // Without the key (an unauthenticated packet) or with another, nothing comes back.
    for extra in [vec![], vec!["--stamp-key", other.to_str().unwrap()]] {
        let out = ping(&extra);
        assert!(!out.status.success());
        assert_eq!(u(&summary(&out)["received"]), 0);
    }
    let log = s.interrupt();
    assert!(log.contains("10 packets reflected") && log.contains("10 malformed, 10 with a wrong HMAC"), "{log}");
    // A key file that is not one is one clear line.
    std::fs::write(&other, "not hex").unwrap();
    let out = run(&["ping", "127.0.0.1", "--stamp", "--stamp-key", other.to_str().unwrap()], Duration::from_secs(10));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("STAMP key") && err.contains("hex digits"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn a_stateless_reflector_cannot_split_the_losses_and_says_so() {
    let s = Server::start(&["--stamp-port", "0", "--stamp-stateless"]);
    let port = s.stamp_port.unwrap().to_string();
    let out =
        run(&["ping", "127.0.0.1", "--stamp", "-p", &port, "-c", "10", "-i", "5ms", "--json"], Duration::from_secs(30));
    assert!(out.status.success());
    let sum = summary(&out);
    assert_eq!(u(&sum["received"]), 10);
    assert!(sum.get("loss_each_way").is_none(), "{sum}");
}

#[test]
fn no_reflector_is_one_clear_line() {
    // A free port: bind one and let it go.
    let port = std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
    let out = run(&["ping", "127.0.0.1", "--stamp", "-p", &port, "-c", "3", "-i", "10ms"], Duration::from_secs(20));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("no STAMP or TWAMP-Light reflector answers"), "{err}");
}

/// Through an emulated path with 30 ms one way and 10 ms the other, 4 % loss one way and 1 %
/// the other: one-way delays never below the configured ones and at most 0.3 ms above (plus
/// the emulator's own stated median lateness; common::assert_one_way), and each direction's loss
/// as the emulator's counters say.
#[test]
fn one_way_delays_and_losses_each_way_on_an_emulated_path() {
    if !paths_available() {
        return;
    }
    let link = [
        "--delay-up",
        "30ms",
        "--delay-down",
        "10ms",
        "--loss-up",
        "4%",
        "--loss-down",
        "1%",
        "--seed",
        "11",
        "--json",
    ];
    let ping =
        ["ping", "198.18.0.2", "--stamp", "-c", "1000", "-i", "2ms", "-W", "500ms", "--clock-offset", "0", "--json"];
    let out = on_path_serving(&["--stamp-port", "862"], &link, &ping, Duration::from_secs(60));
    let sum = summary(&out);
    let (fwd, rev) = (f(&sum["owd_fwd_ms"]["median"]), f(&sum["owd_rev_ms"]["median"]));
    assert_one_way(&out.stderr, (fwd, rev), (30.0, 10.0), &sum);
    let drops = |d: &str| random_losses(&out.stderr, d);
    let l = &sum["loss_each_way"];
    // Every probe the emulator dropped on the way there is a forward loss, every reflected
    // one it dropped on the way back a reverse loss (up to the last answer; the hosts' own
    // chatter may add a drop or two to its counters).
    let (fw, rv, unk) = (u(&l["forward"]), u(&l["reverse"]), u(&l["unknown"]));
    assert!(
        fw + unk >= drops("up").saturating_sub(3) && fw <= drops("up"),
        "forward {fw}+{unk}, emulator {}",
        drops("up")
    );
    assert!(rv <= drops("down") && rv + unk + 3 >= drops("down"), "reverse {rv}+{unk}, emulator {}", drops("down"));
    // And within the binomial bound of the configured rates (4 σ).
    let n = u(&l["basis"]) as f64;
    let within = |k: u64, p: f64, n: f64| (k as f64 - n * p).abs() <= 4.0 * (n * p * (1.0 - p)).sqrt();
    assert!(within(fw, 0.04, n), "forward {fw} of {n}");
    assert!(within(rv, 0.01, n - fw as f64), "reverse {rv} of {}", n - fw as f64);
}

/// Wireshark's dissector, an independent reader of TWAMP-Test's layout (which STAMP keeps),
/// decodes what the sender and the reflector put on the wire: the sequence numbers where they
/// belong and the reflector's receive and transmit timestamps as far apart as the sender's
/// record of the reflector's turnaround says.
#[test]
fn wiresharks_dissector_reads_the_packets_as_sent() {
    if std::process::Command::new("tshark").arg("--version").output().is_err() {
        assert!(std::env::var_os("CI").is_none(), "tshark is missing under CI (.ci/run installs it)");
        eprintln!("SKIPPED: no tshark here");
        return;
    }
    if wanperf_sys::euid() != 0 {
        eprintln!("SKIPPED: capturing on lo needs root");
        return;
    }
    let s = Server::start(&["--stamp-port", "0"]);
    let port = s.stamp_port.unwrap().to_string();
    let mut cap = std::process::Command::new("tshark")
        .args(["-i", "lo", "-l", "-c", "20", "-a", "duration:60", "-f", &format!("udp port {port}")])
        .args(["-d", &format!("udp.port=={port},twamp.test"), "-T", "fields", "-E", "separator=|"])
        .args(["-e", "udp.srcport", "-e", "twamp.test.seq_number", "-e", "twamp.test.sender_seq_number"])
        .args(["-e", "twamp.test.timestamp", "-e", "twamp.test.receive_timestamp", "-e", "twamp.test.sender_ttl"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until it captures ("Capturing on 'lo'" comes before the capture has started).
    let mut err = std::io::BufReader::new(cap.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("Capture started") {
        line.clear();
        assert!(std::io::BufRead::read_line(&mut err, &mut line).unwrap() > 0, "tshark did not start capturing");
    }
    let out = run(
        &["ping", "127.0.0.1", "--stamp", "-p", &port, "-c", "10", "-i", "20ms", "--json"],
        Duration::from_secs(30),
    );
    assert!(out.status.success());
    let probes: Vec<Value> = records(&out).into_iter().filter(|r| r["event"] == "probe").collect();
    let text = String::from_utf8(cap.wait_with_output().unwrap().stdout).unwrap();
    // "Nov 28, 2026 22:07:14.785843420 UTC" → seconds of the day.
    let secs = |t: &str| -> f64 {
        let hms = t.split_whitespace().nth(3).unwrap();
        let v: Vec<f64> = hms.split(':').map(|x| x.parse().unwrap()).collect();
        v[0] * 3600.0 + v[1] * 60.0 + v[2]
    };
    let mut replies = 0;
    for l in text.lines() {
        let c: Vec<&str> = l.split('|').collect();
        if c[0] != port {
            continue;
        }
        replies += 1;
        // The reflector's own number (stateful: its count) and the sender's it echoes.
        let (rseq, sseq): (u64, u64) = (c[1].parse().unwrap(), c[2].parse().unwrap());
        assert_eq!(rseq, sseq, "no loss on loopback: {l}");
        assert_eq!(c[5], "64", "the probe's TTL on arrival: {l}");
        let mut turn = secs(c[3]) - secs(c[4]);
        if turn < 0.0 {
            turn += 86_400.0;
        }
        let ours = f(&probes[sseq as usize]["server_us"]);
        assert!(
            (turn * 1e6 - ours).abs() < 0.01,
            "tshark reads a turnaround of {} µs, ping {ours} µs: {l}",
            turn * 1e6
        );
    }
    assert_eq!(replies, 10, "{text}");
}
