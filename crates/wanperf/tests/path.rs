//! The emulated path, checked with independent tools (iputils ping, iperf3) and with wanperf.

mod common;
use common::*;
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

#[test]
fn ping_rtt_equals_configured_rtt() {
    let _serial = serial();
    if !paths_available() || !have("ping") {
        return;
    }
    for rtt in [10.0, 100.0, 200.0] {
        let r = format!("{rtt}ms");
        let out = run(
            &["path", "run", "--rtt", &r, "--", "ping", "-c", "15", "-i", "0.05", "198.18.0.2"],
            Duration::from_secs(30),
        );
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let rtts = ping_rtts(&String::from_utf8_lossy(&out.stdout));
        assert_eq!(rtts.len(), 15);
        let m = least(&rtts);
        assert!(rtt_fits(m, rtt, 2), "least ping RTT {m} ms through a {rtt} ms path: {rtts:?}");
    }
}

/// Pings carry no ports: a policer on a port and a priority class on a DSCP the pings do not
/// use never act, and `path run` says so after its counters (text, and a `not_acted` record
/// with --json); a policer that matches everything acts and nothing is said.
#[test]
fn elements_that_never_acted_are_named_after_the_counters() {
    let _serial = serial();
    if !paths_available() || !have("ping") {
        return;
    }
    let ping = ["--", "ping", "-c", "5", "-i", "0.05", "198.18.0.2"];
    let args = |extra: &[&'static str]| -> Vec<&'static str> {
        let mut v = vec!["path", "run", "--rtt", "10ms", "--policer", "1M,64k,port=5011", "--priority", "dscp=46"];
        v.extend_from_slice(extra);
        v.extend_from_slice(&ping);
        v
    };
    let out = run(&args(&[]), Duration::from_secs(30));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("warning: left → right: its policer (1.00 Mbit/s, burst 64.0 KiB, port=5011) matched none of the"),
        "{err}"
    );
    assert!(err.contains("warning: left → right: its priority class (dscp=46) matched none"), "{err}");
    assert!(err.contains("warning: right → left: its priority class (dscp=46) matched none"), "{err}");
    let out = run(&args(&["--json"]), Duration::from_secs(30));
    let err = String::from_utf8_lossy(&out.stderr);
    let rec: Value = err
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["event"] == "not_acted")
        .unwrap_or_else(|| panic!("no not_acted record: {err}"));
    assert_eq!(rec["elements"].as_array().unwrap().len(), 3, "{rec}");
    let out = run(
        &["path", "run", "--rtt", "10ms", "--policer", "1M,64k", "--", "ping", "-c", "3", "-i", "0.05", "198.18.0.2"],
        Duration::from_secs(30),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !err.contains("never acted") && !err.contains("matched none"), "{err}");
}

/// `port=test` selects the data ports `wanperf serve` uses by default: the emulator's range
/// and the server's are one (a UDP or QUIC test's data would go unpoliced otherwise).
#[test]
fn port_test_selects_the_servers_default_data_ports() {
    assert_eq!(wanperf_emu::config::TEST_DATA_PORTS, wanperf_proto::msg::DATA_PORTS);
    assert!(wanperf_emu::config::TEST_PORTS.contains(&wanperf_proto::msg::DEFAULT_PORT));
}

/// A host model acts where the kernel shows it: the host's TCP settings read back from its
/// own /proc/sys, its CPU quota in the CPU time the shell's `times` reports for a busy loop
/// (and in the quota's throttled periods); a quota nothing ran into is said to have never
/// acted.
#[test]
fn a_host_model_sets_the_hosts_kernel_and_caps_its_cpu() {
    let _serial = serial();
    if !paths_available() {
        return;
    }
    // Two seconds of a busy loop, then the CPU time its children used (`times`' second line).
    let busy = "cat /proc/sys/net/ipv4/tcp_sack /proc/sys/net/ipv4/tcp_congestion_control \
                /proc/sys/net/ipv4/tcp_rmem; \
                timeout 2 sh -c 'while :; do :; done'; times";
    let cpu_used = |stdout: &str| -> f64 {
        let line = stdout.lines().last().unwrap_or("");
        let user = line.split_whitespace().next().unwrap_or("");
        // "0m0.41s"
        let (m, s) = user.trim_end_matches('s').split_once('m').unwrap_or(("0", "0"));
        m.parse::<f64>().unwrap_or(f64::NAN) * 60.0 + s.parse::<f64>().unwrap_or(f64::NAN)
    };
    let out = run(
        &["path", "run", "--host-left", "cpu=0.2,sack=off,cc=reno,rmem=256K", "--json", "--", "sh", "-c", busy],
        Duration::from_secs(30),
    );
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    let mut lines = stdout.lines();
    assert_eq!((lines.next(), lines.next()), (Some("0"), Some("reno")), "{stdout}");
    // The receive buffer's maximum is the model's (the kernel's own file, tab-separated).
    let rmem: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
    assert_eq!(rmem.last(), Some(&"262144"), "{stdout}");
    let capped = cpu_used(&stdout);
    assert!(capped <= 0.2 * 2.0 * 1.5, "a quarter-core quota let a 2 s busy loop use {capped} s of CPU: {stdout}");
    let hosts: Value = stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["event"] == "hosts")
        .unwrap_or_else(|| panic!("no hosts record: {stderr}"));
    let left = &hosts["hosts"][0];
    assert_eq!(left["host"], "left");
    assert!(left["cpu"]["throttled"].as_u64().unwrap() > 5, "{left}");
    assert!(left["settings"].to_string().contains("\"net/ipv4/tcp_sack\",\"0\""), "{left}");
    assert!(!stderr.contains("never acted"), "{stderr}");
    // The same loop without a quota uses far more, on a host with the default stack.
    let out = run(&["path", "run", "--", "sh", "-c", busy], Duration::from_secs(30));
    let free_out = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(free_out.starts_with("1\n"), "{free_out}");
    let free = cpu_used(&free_out);
    assert!(free > 2.0 * capped, "without a quota {free} s, with 0.2 cores {capped} s");
    // A quota the host never needs never acts, and that is said.
    let out = run(&["path", "run", "--host-left", "cpu=4", "--", "true"], Duration::from_secs(30));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("warning: host left: its CPU quota (4 cores) never throttled"), "{err}");
    // Bad models are one line.
    let out = run(&["path", "run", "--host-left", "cpu=0", "--", "true"], Duration::from_secs(10));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("--host-left: `cpu` is 0.01–1024 cores") && err.lines().count() == 1,
        "{err}"
    );
}

#[test]
fn iperf3_reaches_the_configured_rate() {
    if !paths_available() || !have("iperf3") {
        return;
    }
    for (rate, bps) in [("10M", 10e6), ("100M", 100e6)] {
        let out = run(
            &[
                "path",
                "run",
                "--rtt",
                "20ms",
                "--rate",
                rate,
                "--queue",
                "1M",
                "--right",
                "iperf3 -s -1",
                "--",
                "iperf3",
                "-c",
                "198.18.0.2",
                "-t",
                "4",
                "-J",
            ],
            Duration::from_secs(40),
        );
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let j: Value = serde_json::from_slice(&out.stdout).unwrap();
        let got = j["end"]["sum_received"]["bits_per_second"].as_f64().unwrap();
        assert!(got >= 0.9 * bps, "iperf3 got {got} bit/s through {rate}");
        assert!(got <= 1.02 * bps, "iperf3 got {got} bit/s, more than the {rate} bottleneck");
    }
}

#[test]
fn full_queue_adds_queue_over_rate_to_the_rtt() {
    let _serial = serial();
    if !paths_available() || !have("ping") || !have("iperf3") {
        return;
    }
    // Seed 000's arithmetic: 300 kB of queue at 25 Mbit/s is about 100 ms; pings that meet a
    // full queue wait queue/rate. A constant overload (UDP at 30 Mbit/s) keeps the drop-tail
    // queue full for every ping. (A bulk TCP flow does not: Cubic's sawtooth at this
    // bandwidth-delay product lasts about 5.7 s, K = cbrt(0.3 W/0.4) for W of 250 packets, so
    // 4 s of pings can all fall where the queue is a third empty: CI saw 60 ms for 98.)
    let script =
        "iperf3 -c 198.18.0.2 -u -b 30M -l 1400 -t 8 > /dev/null & sleep 3; ping -c 20 -i 0.2 198.18.0.2; wait";
    let out = run(
        &[
            "path",
            "run",
            "--rtt",
            "20ms",
            "--rate",
            "25M",
            "--queue",
            "300kB",
            "--json",
            "--right",
            "iperf3 -s -1",
            "--",
            "sh",
            "-c",
            script,
        ],
        Duration::from_secs(40),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let want_ms = 300.0 * 1024.0 * 8.0 / 25e6 * 1000.0;
    let stats = path_stats(&out.stderr);
    let be = &stats["up"]["classes"]["best_effort"];
    let max_q = be["max_queue_delay_ns"].as_f64().unwrap() / 1e6;
    assert!(
        (max_q - want_ms).abs() / want_ms < 0.05,
        "fullest queue waited {max_q:.1} ms, queue/rate is {want_ms:.1} ms"
    );
    assert!(be["queue_drops"].as_u64().unwrap() > 0, "the queue never filled");
    let rtts = ping_rtts(&String::from_utf8_lossy(&out.stdout));
    assert!(rtts.len() >= 15, "{rtts:?}");
    let worst = rtts.iter().cloned().fold(0.0, f64::max) - 20.0;
    assert!(
        (worst - want_ms).abs() / want_ms < 0.2,
        "pings behind a full queue gained {worst:.1} ms, queue/rate is {want_ms:.1} ms"
    );
    let mut sorted = rtts.clone();
    let loaded = median(&mut sorted) - 20.0;
    assert!(
        (loaded - want_ms).abs() / want_ms < 0.1,
        "the median ping behind a full queue gained {loaded:.1} ms, queue/rate is {want_ms:.1} ms"
    );
}

#[test]
fn policer_holds_its_class_and_burst_size_matters() {
    let _serial = serial();
    if !paths_available() {
        return;
    }
    let w = BIN;
    // Two servers on the right: 5011 is policed at 5 Mbit/s, 5012 is not.
    let right = format!("{w} serve --listen 0.0.0.0:5011 --allow 198.18.0.0/15 & {w} serve --listen 0.0.0.0:5012 --allow 198.18.0.0/15 & wait");
    let left = format!(
        "{w} tput 198.18.0.2 -p 5011 -P 10 -t 6 --omit 2 --json > /tmp/wanperf-pol-a.json & {w} tput 198.18.0.2 -p 5012 -t 8 --json > /tmp/wanperf-pol-b.json; wait"
    );
    let out = run(
        &[
            "path",
            "run",
            "--rtt",
            "20ms",
            "--rate",
            "100M",
            "--queue",
            "500kB",
            "--policer",
            "5M,64k,port=5011",
            "--right",
            &right,
            "--json",
            "--",
            "sh",
            "-c",
            &left,
        ],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let last = |p: &str| -> Value {
        let text = std::fs::read_to_string(p).unwrap();
        serde_json::from_str(text.lines().last().unwrap()).unwrap()
    };
    let a = last("/tmp/wanperf-pol-a.json");
    let b = last("/tmp/wanperf-pol-b.json");
    let policed = f(&a["summary"]["throughput_bps"]);
    let other = f(&b["summary"]["throughput_bps"]);
    assert!(policed <= 1.05 * 5e6, "10 streams through a 5 Mbit/s policer got {policed}");
    assert!(policed >= 0.5 * 5e6, "policed class starved: {policed}");
    assert!(other >= 40e6, "the other class was hurt: {other}");
    let stats = path_stats(&out.stderr);
    assert!(stats["up"]["classes"]["best_effort"]["policer_drops"].as_u64().unwrap() > 0);

    // burst-size-limit: a larger bucket lets more through in the first second.
    let first_second = |burst: &str| -> f64 {
        let pol = format!("5M,{burst},port=5011");
        let left = format!("{w} tput 198.18.0.2 -p 5011 -t 2 -i 1 --json");
        let out = run(
            &[
                "path",
                "run",
                "--rtt",
                "20ms",
                "--rate",
                "100M",
                "--queue",
                "2M",
                "--policer",
                &pol,
                "--right",
                &format!("{w} serve --listen 0.0.0.0:5011 --allow 198.18.0.0/15"),
                "--",
                "sh",
                "-c",
                &left,
            ],
            Duration::from_secs(30),
        );
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let recs = records(&out);
        f(&intervals(&recs)[0]["sum"]["received_bytes"])
    };
    let small = first_second("16k");
    let big = first_second("2M");
    assert!(big > small + 1_000_000.0, "first second: burst 2 MiB moved {big} B, 16 KiB moved {small} B");
}

#[test]
fn bernoulli_loss_is_observed_within_bounds() {
    let _serial = serial();
    if !paths_available() {
        return;
    }
    let out = on_path(
        &["--rtt", "10ms", "--loss", "5%", "--seed", "42", "--json"],
        &["tput", "198.18.0.2", "-u", "-b", "8M", "-l", "1000", "-t", "3", "--json"],
        Duration::from_secs(30),
    );
    // Control traffic is TCP and survives loss by retransmission; the test must complete.
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let recs = records(&out);
    let udp = &end(&recs)["summary"]["udp"];
    let sent = u(&udp["packets_sent"]) as f64;
    let lost = u(&udp["lost"]) as f64;
    let sd = (sent * 0.05 * 0.95).sqrt();
    assert!((lost - sent * 0.05).abs() < 4.0 * sd, "lost {lost} of {sent}, expected 5 % ± {sd:.0}");
    let stats = path_stats(&out.stderr);
    let emu_losses = stats["up"]["classes"]["best_effort"]["random_losses"].as_u64().unwrap() as f64;
    assert!(emu_losses >= lost, "the emulator's counter ({emu_losses}) covers every lost datagram ({lost})");
}

#[test]
fn cmd_starts_once_the_right_command_listens() {
    let _serial = serial();
    if !paths_available() || !have("iperf3") {
        return;
    }
    // A server that takes a second to come up: CMD runs once it listens, neither before (the
    // client would be refused) nor after the whole --right-wait (past `run`'s 20 s limit).
    let out = run(
        &[
            "path",
            "run",
            "--right",
            "sleep 1; exec iperf3 -s -1",
            "--right-wait",
            "30s",
            "--",
            "iperf3",
            "-c",
            "198.18.0.2",
            "-t",
            "1",
            "-J",
        ],
        Duration::from_secs(20),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(j["end"]["sum_received"]["bytes"].as_f64().unwrap() > 0.0, "{j}");
    // A right command that never listens holds CMD back for --right-wait only.
    let out =
        run(&["path", "run", "--right", "sleep 30", "--right-wait", "200ms", "--", "true"], Duration::from_secs(20));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn exit_status_cleanup_and_bad_input() {
    let _serial = serial();
    if !paths_available() {
        return;
    }
    let out = run(
        &[
            "path",
            "run",
            "--right",
            "sleep 1000; : wanperf-marker-7",
            "--right-wait",
            "100ms",
            "--",
            "sh",
            "-c",
            "exit 3",
        ],
        Duration::from_secs(20),
    );
    assert_eq!(out.status.code(), Some(3));
    std::thread::sleep(Duration::from_millis(300));
    let left = Command::new("pgrep").args(["-f", "wanperf-marker-7"]).output().unwrap();
    assert!(left.stdout.is_empty(), "right command left behind");
    // A killed path leaves nothing behind either: its namespaces die with it.
    let mut child = Command::new(BIN)
        .args([
            "path",
            "run",
            "--right",
            "sleep 1000; : wanperf-marker-8",
            "--right-wait",
            "100ms",
            "--",
            "sh",
            "-c",
            "sleep 1000; : wanperf-marker-9",
        ])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    child.kill().unwrap();
    child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let left = Command::new("pgrep").args(["-f", "wanperf-marker-[89]"]).output().unwrap();
    assert!(left.stdout.is_empty(), "processes left after kill -9: {}", String::from_utf8_lossy(&left.stdout));

    let dir = std::env::temp_dir();
    let empty = dir.join("wanperf-empty.trace");
    std::fs::write(&empty, "").unwrap();
    let backwards = dir.join("wanperf-backwards.trace");
    std::fs::write(&backwards, "1\n5\n3\n").unwrap();
    let (e, b) = (empty.display().to_string(), backwards.display().to_string());
    for (args, want) in [
        (vec!["--rate", "0"], "more than 0"),
        (vec!["--rtt=-5ms"], "negative"),
        (vec!["--rtt", "5 parsecs"], "duration"),
        (vec!["--queue", "0p"], "hold something"),
        (vec!["--policer", "10M,0"], "burst"),
        (vec!["--trace-up", &e], "empty"),
        (vec!["--trace-up", &b], "line 3"),
        (vec!["--preset", "moon-2030"], "unknown preset"),
        (vec!["--loss", "2"], "between 0 and 1"),
    ] {
        let mut a = vec!["path", "run"];
        a.extend(args.iter());
        a.extend(["--", "true"]);
        let out = run(&a, Duration::from_secs(10));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{a:?} succeeded");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{a:?}: {err}");
        assert!(lines[0].contains(want), "{a:?}: `{}` lacks `{want}`", lines[0]);
    }
}

#[test]
fn named_path_up_exec_stats_down_list() {
    let _serial = serial();
    if !paths_available() || !have("ping") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("wanperf-rt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let envd = dir.display().to_string();
    let wp = |args: &[&str]| {
        let out = Command::new(BIN).args(args).env("WANPERF_RUNTIME_DIR", &envd).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (c, _, e) = wp(&["path", "up", "study-1", "--rtt", "40ms"]);
    assert_eq!(c, Some(0), "{e}");
    let (c, _, e) = wp(&["path", "up", "study-1", "--rtt", "40ms"]);
    assert_ne!(c, Some(0));
    assert!(e.contains("already up"), "{e}");
    let (_, out, _) = wp(&["path", "list"]);
    assert!(out.contains("study-1") && out.contains("RTT 40.0 ms"), "{out}");
    let (c, out, e) = wp(&["path", "exec", "study-1", "left", "--", "ping", "-c", "5", "-i", "0.05", "198.18.0.2"]);
    assert_eq!(c, Some(0), "{e}");
    let rtts = ping_rtts(&out);
    assert!(rtt_fits(least(&rtts), 40.0, 2), "{rtts:?}");
    let (_, out, _) = wp(&["path", "exec", "study-1", "right", "--", "sh", "-c", "echo $WANPERF_PEER"]);
    assert_eq!(out.trim(), "198.18.0.1");
    let (c, out, _) = wp(&["path", "stats", "study-1", "--json"]);
    assert_eq!(c, Some(0));
    let st: Value = serde_json::from_str(out.trim()).unwrap();
    assert!(st["stats"]["up"]["classes"]["best_effort"]["packets_in"].as_u64().unwrap() >= 5);
    // What `path exec` left running ends with `path down`.
    let mut sleeper = Command::new(BIN)
        .args(["path", "exec", "study-1", "right", "--", "sleep", "1000"])
        .env("WANPERF_RUNTIME_DIR", &envd)
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(sleeper.try_wait().unwrap().is_none(), "the sleeper ended early");
    let (c, _, _) = wp(&["path", "down", "study-1"]);
    assert_eq!(c, Some(0));
    let t = std::time::Instant::now();
    while sleeper.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(sleeper.try_wait().unwrap().is_some(), "a `path exec` process outlived `path down`");
    let (_, out, _) = wp(&["path", "list"]);
    assert!(out.contains("no paths are up"), "{out}");
    let (c, _, e) = wp(&["path", "exec", "study-1", "left", "--", "true"]);
    assert_ne!(c, Some(0));
    assert!(e.contains("no path named `study-1`"), "{e}");
    let (c, _, e) = wp(&["path", "exec", "study-1", "middle", "--", "true"]);
    assert_ne!(c, Some(0));
    assert!(e.contains("left or right"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn txqueuelen_acts_on_the_senders_interface_queue() {
    let _serial = serial();
    if !paths_available() {
        return;
    }
    // Seed 003 (DataTAG, 120 ms, 1 Gbit/s): with txqueuelen 100 the 2003 hosts did not reach
    // 100 Mbit/s; over 10 000 they neared line rate. The backlog sits in the sending host's
    // interface queue, whose overflow TCP takes as loss; the bottleneck queue stays empty.
    let mut results = Vec::new();
    for q in ["100", "1000", "10000", "50000"] {
        let out = on_path(
            &["--preset", "datatag-2003", "--txqueuelen", q, "--json"],
            &["tput", "198.18.0.2", "-t", "5", "--cc", "cubic", "--json"],
            Duration::from_secs(60),
        );
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let recs = records(&out);
        let sum = end(&recs)["summary"].clone();
        let stats = path_stats(&out.stderr);
        let bottleneck_drops = stats["up"]["classes"]["best_effort"]["queue_drops"].as_u64().unwrap();
        let bps = f(&sum["throughput_bps"]);
        let retrans = u(&sum["retransmits"]);
        eprintln!(
            "txqueuelen {q}: {:.0} Mbit/s, {retrans} retransmits, bottleneck queue drops {bottleneck_drops}",
            bps / 1e6
        );
        assert_eq!(bottleneck_drops, 0, "the backlog must wait in the host's interface queue, not the bottleneck");
        // The kernel's own count of that queue's overflow (`tc -s qdisc`'s dropped) on the
        // sending host: seed 003's SendStall.
        let err = String::from_utf8_lossy(&out.stderr);
        let hosts: Value = err
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["event"] == "hosts")
            .unwrap_or_else(|| panic!("no hosts record: {err}"));
        let queue = &hosts["hosts"][0]["queues"][0];
        assert_eq!(
            (&hosts["hosts"][0]["host"], &queue["txqueuelen"]),
            (&Value::from("left"), &Value::from(q.parse::<u32>().unwrap())),
            "{hosts}"
        );
        assert_eq!(queue["qdisc"]["kind"], "pfifo_fast", "{queue}");
        assert!(u(&queue["qdisc"]["packets"]) > 1000, "{queue}");
        // A TUN device's queue of txqueuelen packets drops in the device (`ip -s link`'s TX
        // dropped), after the qdisc: the two together are the host's own drops.
        let host_drops = u(&queue["tx_dropped"]) + u(&queue["qdisc"]["drops"]);
        eprintln!("  left host's wan0 queue dropped {host_drops}");
        results.push((q, bps, retrans, host_drops));
    }
    let (small, large) = (&results[0], &results[3]);
    assert!(small.2 > 0, "txqueuelen 100 overflows: TCP must retransmit");
    assert!(small.3 > 0, "txqueuelen 100 overflows: the host's queue drops");
    assert!(large.3 < small.3, "a queue of 50000 drops less than one of 100: {results:?}");
    assert!(large.1 > 5.0 * small.1, "txqueuelen 50000 ({}) not far above 100 ({})", large.1, small.1);
    assert!(large.2 < small.2, "fewer retransmits with the long queue");
}

#[test]
fn unprivileged_user_gets_a_path_too() {
    let _serial = serial();
    if !paths_available() || !have("ping") {
        return;
    }
    let Some(out) =
        run_as_nobody(&[], &["path", "run", "--rtt", "20ms", "--", "ping", "-c", "7", "-i", "0.1", "198.18.0.2"])
    else {
        return;
    };
    assert!(out.status.success(), "unprivileged path failed: {}", String::from_utf8_lossy(&out.stderr));
    let rtts = ping_rtts(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(rtts.len(), 7);
    // The first probe also waits for address resolution across the path.
    assert!(rtt_fits(least(&rtts), 20.0, 2), "{rtts:?}");
}

/// SACK switched off on the sending host shows in the sender's own TCP_INFO (what the
/// connection negotiated), as the host's other TCP options do; on the default stack it is on.
#[test]
fn a_hosts_tcp_options_show_in_the_senders_tcp_info() {
    let _serial = serial();
    if !paths_available() {
        return;
    }
    let negotiated = |model: &str| -> Value {
        let mut link = vec!["--rtt", "10ms", "--rate", "50M"];
        if !model.is_empty() {
            link.extend(["--host-left", model]);
        }
        let out = on_path(&link, &["tput", "198.18.0.2", "-t", "1", "--json"], Duration::from_secs(60));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let intervals: Vec<Value> = records(&out).into_iter().filter(|r| r["event"] == "interval").collect();
        intervals.iter().find_map(|i| i["streams"][0]["tcp"].as_object().cloned()).map(Value::Object).expect("TCP_INFO")
    };
    let open = negotiated("");
    assert_eq!((&open["sack"], &open["timestamps"]), (&Value::Bool(true), &Value::Bool(true)), "{open}");
    assert!(open["wscale"].is_array(), "{open}");
    let old = negotiated("sack=off,timestamps=off,window_scaling=off");
    assert_eq!((&old["sack"], &old["timestamps"]), (&Value::Bool(false), &Value::Bool(false)), "{old}");
    assert!(old.get("wscale").is_none(), "{old}");
}

#[test]
fn packets_the_sending_device_drops_unread_are_counted_and_said() {
    let _serial = serial();
    if !paths_available() || !have("ip") {
        return;
    }
    // A host's TUN device holds 10 000 packets unless a txqueuelen is configured. Here the
    // host cuts its own to 8 and floods: the device drops what the emulator did not read in
    // time (no configured element's loss), and the path's counters must carry exactly the
    // kernel's count (`ip -s link`'s TX dropped) and say that the emulator fell behind.
    let script = format!(
        "ip -j link show wan0; ip link set wan0 txqueuelen 8; \
         {BIN} tput $WANPERF_PEER -u -b 3G -l 1400 -t 1 > /dev/null; ip -s -j link show wan0"
    );
    let right = right_server();
    let out = run(
        &["path", "run", "--rtt", "10ms", "--json", "--right", &right, "--", "sh", "-c", &script],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let links: Vec<Value> = text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).collect();
    assert_eq!(links.len(), 2, "{text}");
    assert_eq!(links[0][0]["txqlen"], 10_000, "wanperf's default queue: {}", links[0]);
    let kernel = u(&links[1][0]["stats64"]["tx"]["dropped"]);
    assert!(kernel > 0, "a queue of 8 packets under a 3 Gbit/s flood drops: {}", links[1]);
    let stats = path_stats(&out.stderr);
    assert_eq!(u(&stats["up"]["unread_drops"]), kernel, "{stats}");
    let err = String::from_utf8_lossy(&out.stderr);
    let path: Value =
        err.lines().find(|l| l.starts_with("{\"event\":\"path\"")).map(|l| serde_json::from_str(l).unwrap()).unwrap();
    assert_eq!(path["fell_behind"]["unread_drops"], kernel, "{}", path["fell_behind"]);
    assert_eq!(path["fell_behind"]["dir"], 0);
}

#[test]
fn random_loss_keeps_offload_and_drops_single_segments() {
    let _serial = serial();
    if !paths_available() || !have("ip") {
        return;
    }
    // 0.05 % random loss at 2 ms: TCP runs at hundreds of Mbit/s and sends 64 kB
    // super-packets. The emulator decides for each of their segments and splits a super-packet
    // where one is lost, so each loss is one segment: the sender retransmits about as many
    // segments as the emulator lost, not a super-packet's worth for each, and the loss rate
    // per segment is the configured one. The sending device's own count (fewer, larger
    // packets than the segments on the emulated wire) shows offload still carried them.
    let script = format!("{BIN} tput $WANPERF_PEER -t 4 --json | tail -1; ip -s -j link show wan0");
    let right = right_server();
    let out = run(
        &[
            "path", "run", "--rtt", "2ms", "--rate", "500M", "--loss", "0.05%", "--seed", "11", "--json", "--right",
            &right, "--", "sh", "-c", &script,
        ],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok());
    let end = lines.next().unwrap_or_else(|| panic!("{text}"));
    let dev = lines.next().unwrap_or_else(|| panic!("{text}"));
    let retransmits = u(&end["summary"]["retransmits"]);
    let stats = path_stats(&out.stderr);
    let be = &stats["up"]["classes"]["best_effort"];
    let (segments, lost) = (u(&be["packets_in"]), u(&be["random_losses"]));
    let device_packets = u(&dev[0]["stats64"]["tx"]["packets"]);
    eprintln!("{segments} segments in {device_packets} device packets; {lost} lost, {retransmits} retransmitted");
    assert!(segments > 3 * device_packets, "offload carried the segments: {segments} in {device_packets} packets");
    let expected = segments as f64 * 0.0005;
    assert!(
        (lost as f64 - expected).abs() < 4.0 * expected.sqrt() + 2.0,
        "lost {lost} of {segments}, expected {expected:.0}"
    );
    assert!(lost >= 10, "enough losses to tell: {lost}");
    assert!(retransmits <= lost + lost / 2 + 10, "each loss one segment: {retransmits} retransmits for {lost} losses");
}
