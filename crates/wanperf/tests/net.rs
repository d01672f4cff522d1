//! Emulated networks (`wanperf net`), checked with independent tools: Debian's traceroute and
//! mtr, iputils ping, iperf3. Routers are kernel namespaces, so what these tools see of TTL
//! expiry, ICMP errors, path MTU and ICMP rate limits is the kernel's own behaviour.

mod common;
use common::*;
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn traceroute_and_mtr_list_the_routers_in_order_with_their_cumulative_delay() {
    let _serial = serial();
    if !paths_available() || !have("traceroute") || !have("mtr") {
        return;
    }
    // No ICMP rate limit, so mtr's fast probes are all answered.
    let f = topo_file("trace", &chain("icmp_ratelimit = \"0ms\"", "icmp_ratelimit = \"0ms\"", ""));
    let out = net_sh(
        &f,
        "a",
        "traceroute -n -N 1 -q 3 $WANPERF_ADDR_B; echo ===; mtr -n -r -c 10 -i 0.1 $WANPERF_ADDR_B",
        Duration::from_secs(60),
    );
    let text = ok(&out);
    let (tr, mtr) = text.split_once("===").unwrap();
    // Hop k answers from its ingress address 198.18.(k-1).2, after 2 × the delays so far.
    let mut expect = Vec::new();
    let mut cum = 0.0;
    for (k, d) in CHAIN_DELAYS_MS.iter().enumerate() {
        cum += 2.0 * d;
        let addr = if k < 5 { format!("198.18.{k}.2") } else { "198.18.5.2".to_string() };
        expect.push((addr, cum));
    }
    let hops = traceroute_hops(tr);
    assert_eq!(hops.len(), 6, "{tr}");
    // Hop k's probe and answer cross 2k emulated links.
    for (k, ((addr, rtts), (want, cum))) in hops.iter().zip(&expect).enumerate() {
        assert_eq!(addr, want, "{tr}");
        let best = rtts.iter().cloned().fold(f64::MAX, f64::min);
        assert!(
            rtt_fits(best, *cum, 2 * (k as u32 + 1)),
            "traceroute hop {addr}: {best} ms, configured {cum} ms\n{tr}"
        );
    }
    let hops = mtr_hops(mtr);
    assert_eq!(hops.len(), 6, "{mtr}");
    for (k, ((addr, loss, best), (want, cum))) in hops.iter().zip(&expect).enumerate() {
        assert_eq!(addr, want, "{mtr}");
        assert_eq!(*loss, 0.0, "{mtr}");
        assert!(
            rtt_fits(*best, *cum, 2 * (k as u32 + 1)),
            "mtr hop {addr}: best {best} ms, configured {cum} ms\n{mtr}"
        );
    }
}

#[test]
fn a_low_icmp_rate_limit_shows_loss_at_that_hop_only() {
    let _serial = serial();
    if !paths_available() || !have("mtr") {
        return;
    }
    let f = topo_file(
        "ratelimit",
        &chain("icmp_ratelimit = \"0ms\"", "icmp_ratelimit = \"10s\"\nicmp_msgs_per_sec = 1\nicmp_msgs_burst = 1", ""),
    );
    let out =
        run(&["net", "run", &f, "--", "sh", "-c", "mtr -n -r -c 20 -i 0.1 $WANPERF_ADDR_B"], Duration::from_secs(60));
    let text = ok(&out);
    let hops = mtr_hops(&text);
    assert_eq!(hops.len(), 6, "{text}");
    assert!(hops[2].1 >= 30.0, "r3 rate-limits its ICMP, yet mtr shows {}% loss there\n{text}", hops[2].1);
    for (i, h) in hops.iter().enumerate().filter(|(i, _)| *i != 2) {
        assert_eq!(h.1, 0.0, "hop {} shows loss\n{text}", i + 1);
    }
}

#[test]
fn routers_can_answer_slowly_or_never() {
    let _serial = serial();
    if !paths_available() || !have("traceroute") {
        return;
    }
    // r2 answers 20 ms late (its slow path: per-hop RTTs stop being monotonic); r4 never answers.
    let mut t = chain("", "", "");
    t = t.replacen("name = \"r2\"\n", "name = \"r2\"\nicmp_delay = \"20ms\"\n", 1);
    t = t.replacen("name = \"r4\"\n", "name = \"r4\"\nicmp = \"silent\"\n", 1);
    let f = topo_file("slow", &t);
    let out = run(
        &["net", "run", &f, "--", "sh", "-c", "traceroute -n -N 1 -q 2 -w 1 $WANPERF_ADDR_B"],
        Duration::from_secs(60),
    );
    let text = ok(&out);
    let hops = traceroute_hops(&text);
    assert_eq!(hops.len(), 6, "{text}");
    let best = |i: usize| hops[i].1.iter().cloned().fold(f64::MAX, f64::min);
    assert!(best(1) >= 26.0 && best(1) <= 26.5, "r2's answer: {} ms, want 6 + 20\n{text}", best(1));
    assert!(best(1) > best(2), "the slow path makes hop 2 slower than hop 3\n{text}");
    assert!(hops[3].1.is_empty() && hops[3].0 == "*", "r4 is silent\n{text}");
    assert_eq!(hops[5].0, "198.18.5.2", "{text}");
}

#[test]
fn ping_with_dont_fragment_finds_the_smallest_mtu() {
    let _serial = serial();
    if !paths_available() || !have("ping") {
        return;
    }
    let f = topo_file("mtu", &chain("", "", ""));
    // 1400-byte link r2–r3: 1372 bytes of ICMP payload fit (1400 − 20 − 8), 1373 do not, and
    // r2 says so; IPv6 likewise (1400 − 40 − 8).
    let script = "ping -c 1 -W 2 -M do -s 1372 $WANPERF_ADDR_B && ! ping -c 1 -W 2 -M do -s 1373 $WANPERF_ADDR_B; \
                  ping -6 -c 1 -W 2 -M do -s 1352 $WANPERF_ADDR6_B && ! ping -6 -c 1 -W 2 -M do -s 1353 $WANPERF_ADDR6_B";
    let out = run(&["net", "run", &f, "--", "sh", "-c", script], Duration::from_secs(30));
    let text = ok(&out);
    assert!(text.contains("From 198.18.1.2 icmp_seq=1 Frag needed and DF set (mtu = 1400)"), "{text}");
    assert!(text.contains("Packet too big: mtu=1400"), "{text}");
}

fn iperf3_bps(json: &str) -> f64 {
    let j: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"));
    j["end"]["sum_received"]["bits_per_second"].as_f64().unwrap()
}

/// TCP goodput through a link of `rate` bit/s: 1448 payload bytes per 1500-byte packet.
fn goodput(rate: f64) -> f64 {
    rate * 1448.0 / 1500.0
}

#[test]
fn iperf3_is_limited_by_the_narrowest_link_of_each_direction() {
    let _serial = serial();
    if !paths_available() || !have("iperf3") {
        return;
    }
    let f = topo_file("diamond", DIAMOND);
    // a → b crosses r1–r2 (20 Mbit/s); b → a is routed over r3 (8 Mbit/s on r1–r3's b → a).
    let log = std::env::temp_dir().join(format!("wanperf-net-iperf3-s-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let log = log.display();
    let out = run(
        &["net", "run", &f, "--on", &format!("b=exec iperf3 -s --forceflush > {log}"), "--", "sh", "-c",
          &format!(". {IPERF3_SH}; IPERF3_LOG={log}; \
                    iperf3c $WANPERF_ADDR_B -t 4 -O 1 -J > /tmp/wanperf-net-fwd.json && iperf3c $WANPERF_ADDR_B -R -t 4 -O 1 -J")],
        Duration::from_secs(60),
    );
    let rev = ok(&out);
    let fwd = std::fs::read_to_string("/tmp/wanperf-net-fwd.json").unwrap();
    let (f_bps, r_bps) = (iperf3_bps(&fwd), iperf3_bps(&rev));
    for (got, rate) in [(f_bps, 20e6), (r_bps, 8e6)] {
        let want = goodput(rate);
        assert!((got - want).abs() <= 0.05 * want, "iperf3 {got} bit/s, narrowest link {rate} bit/s (goodput {want})");
    }
    // The traceroute of each direction shows its own route.
    if have("traceroute") {
        let out = run(
            &["net", "run", &f, "--host", "b", "--", "traceroute", "-n", "-N", "1", "-q", "1", "198.18.0.1"],
            Duration::from_secs(30),
        );
        let hops: Vec<String> = traceroute_hops(&ok(&out)).into_iter().map(|h| h.0).collect();
        // b → r2 (198.18.2.1) → r3 (its r3–r2 address, 198.18.4.1) → r1 → a. The kernel
        // answers from the address of its route back to the sender: r1 reaches b over r1–r2,
        // so it answers as 198.18.1.1 although the probe came in on r1–r3 (as real routers
        // do, which is one way traceroutes of asymmetric paths mislead).
        assert_eq!(hops, ["198.18.2.1", "198.18.4.1", "198.18.1.1", "198.18.0.1"]);
    }
}

#[test]
fn cross_traffic_on_a_shared_link_raises_rtt_by_queue_over_rate() {
    let _serial = serial();
    if !paths_available() || !have("ping") {
        return;
    }
    // 10 Mbit/s shared link with a 100 kB queue, overloaded (12 Mbit/s of generated packets)
    // from 1.5 s to 4.5 s: a ping crossing it waits for a full queue, 100 kB / 10 Mbit/s = 80 ms.
    let t = r#"
[[host]]
name = "a"
[[host]]
name = "b"
[[router]]
name = "r"
[[link]]
a = "a"
b = "r"
delay = "1ms"
[[link]]
a = "r"
b = "b"
name = "shared"
delay = "4ms"
rate = "10M"
queue = "100000B"
[[traffic]]
link = "shared"
direction = "ab"
rate = "12M"
pattern = "poisson"
start = "1.5s"
stop = "4.5s"
"#;
    let f = topo_file("cross", t);
    let out = run(
        &["net", "run", &f, "--json", "--", "ping", "-c", "50", "-i", "0.1", "-D", "198.18.1.2"],
        Duration::from_secs(40),
    );
    let text = ok(&out);
    let rtts = ping_rtts(&text);
    assert_eq!(rtts.len(), 50, "{text}");
    // ping starts within ~0.1 s of the network: probes 0–9 precede the load, 25–40 meet a full queue.
    let mut during: Vec<f64> = rtts[25..40].to_vec();
    let (b, d) = (least(&rtts[..10]), median(&mut during));
    // Four crossings (a→r, r→b and back); the 10 Mbit/s link serializes the probe both ways.
    let base = 10.0 + 2.0 * ping_serialization_ms(10e6);
    assert!(rtt_fits(b, base, 4), "unloaded RTT {b} ms, configured {base:.3} ms");
    let want = 10.0 + 80.0;
    assert!((d - want).abs() < 0.1 * want, "loaded RTT {d} ms, want base + queue/rate = {want} ms");
    let err = String::from_utf8_lossy(&out.stderr);
    let stats: Value =
        err.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).find(|v| v["event"] == "net_stats").unwrap();
    let shared = &stats["links"][1]["ab"];
    assert!(shared["injected"].as_u64().unwrap() > 2000, "{shared}");
    assert!(shared["classes"]["best_effort"]["queue_drops"].as_u64().unwrap() > 0, "{shared}");
}

#[test]
fn a_flow_fair_link_keeps_a_ping_out_of_the_cross_traffics_queue() {
    let _serial = serial();
    if !paths_available() || !have("ping") {
        return;
    }
    // The same overload as above (12 Mbit/s of generated traffic into 10 Mbit/s) through an
    // fq bottleneck: the generator's flow fills its own queue and loses the excess; the ping
    // is another flow and waits at most for a packet or two of it, not 80 ms.
    let f = topo_file(
        "fqcross",
        r#"[[host]]
name = "a"
[[host]]
name = "b"
[[link]]
a = "a"
b = "b"
name = "shared"
delay = "5ms"
rate = "10M"
queue = "100000B"
aqm = "fq"
[[traffic]]
link = "shared"
direction = "ab"
rate = "12M"
pattern = "poisson"
start = "0.5s"
stop = "3.5s"
"#,
    );
    let out = run(
        &["net", "run", &f, "--json", "--", "ping", "-c", "30", "-i", "0.1", "198.18.0.2"],
        Duration::from_secs(40),
    );
    let rtts = ping_rtts(&ok(&out));
    assert_eq!(rtts.len(), 30);
    let mut during = rtts[10..28].to_vec();
    let d = median(&mut during);
    // Base 10 ms, the probe's own serialization, and the round robin: the generator's packet on
    // the wire and one more (1.2 ms each at 10 Mbit/s).
    let bound = 10.0 + 2.0 * ping_serialization_ms(10e6) + 2.0 * 1.2;
    assert!(
        rtt_fits(d, 10.0, 2) || d < bound + 2.0 * CROSSING_MS,
        "RTT {d} ms under load, bound {bound:.2} ms: {rtts:?}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let stats: Value =
        err.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).find(|v| v["event"] == "net_stats").unwrap();
    let shared = &stats["links"][0]["ab"];
    assert!(shared["injected"].as_u64().unwrap() > 2000, "{shared}");
    // The generator still overflows its queue.
    assert!(shared["classes"]["best_effort"]["queue_drops"].as_u64().unwrap() > 100, "{shared}");
}

#[test]
fn tcp_cross_traffic_between_hosts_runs_on_its_schedule() {
    let _serial = serial();
    if !paths_available() || !have("ping") {
        return;
    }
    // c → d sends two bulk TCP flows over the shared 20 Mbit/s link from 1 s to 4 s; a ping
    // from a to b crosses the same link and sees the queue while they run, not before or after.
    let f = topo_file(
        "tcpx",
        r#"[[host]]
name = "a"
[[host]]
name = "b"
[[host]]
name = "c"
[[host]]
name = "d"
[[router]]
name = "r1"
[[router]]
name = "r2"
[[link]]
a = "a"
b = "r1"
[[link]]
a = "c"
b = "r1"
[[link]]
a = "r1"
b = "r2"
name = "shared"
rate = "20M"
delay = "5ms"
queue = "100kB"
[[link]]
a = "r2"
b = "b"
[[link]]
a = "r2"
b = "d"
[[traffic]]
from = "c"
to = "d"
flows = 2
start = "1s"
stop = "4s"
"#,
    );
    let out = run(
        &["net", "run", &f, "--json", "--", "ping", "-c", "30", "-i", "0.2", "198.18.3.2"],
        Duration::from_secs(40),
    );
    let rtts = ping_rtts(&ok(&out));
    assert_eq!(rtts.len(), 30);
    let mut during = rtts[9..18].to_vec();
    let (b, d, a) = (least(&rtts[..4]), median(&mut during), least(&rtts[25..]));
    // Six crossings (a→r1→r2→b and back); the 20 Mbit/s link serializes the probe both ways.
    let base = 10.0 + 2.0 * ping_serialization_ms(20e6);
    assert!(rtt_fits(b, base, 6) && rtt_fits(a, base, 6), "RTT before {b} ms, after {a} ms; configured {base:.3} ms");
    assert!(d > b + 10.0, "RTT {d} ms while the flows run, {b} ms before");
    let err = String::from_utf8_lossy(&out.stderr);
    let stats: Value =
        err.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).find(|v| v["event"] == "net_stats").unwrap();
    let shared = &stats["links"][2]["ab"];
    let bytes = shared["classes"]["best_effort"]["bytes_out"].as_u64().unwrap() as f64;
    // Three seconds of a 20 Mbit/s link (2.5 MB/s), less slow start, plus the tput
    // handshake's few tenths of a second: more than 4 MB, less than 3.6 s' worth.
    assert!(bytes > 4e6 && bytes <= 9e6, "{shared}");
}

#[test]
fn net_set_changes_a_rate_mid_run_and_iperf3_follows() {
    let _serial = serial();
    if !paths_available() || !have("iperf3") {
        return;
    }
    let name = format!("t{}", std::process::id());
    let f = topo_file(
        "set",
        "[[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n[[router]]\nname = \"r\"\n[[link]]\na = \"a\"\nb = \"r\"\ndelay = \"2ms\"\n[[link]]\na = \"r\"\nb = \"b\"\nname = \"wan\"\ndelay = \"3ms\"\nrate = \"50M\"\nqueue = \"150kB\"\n",
    );
    let _up = Up::new(&f, &name);
    let listed = ok(&run(&["net", "list", "--json"], Duration::from_secs(10)));
    assert!(listed.contains(&format!("\"name\":\"{name}\"")), "{listed}");
    let mut server = Command::new(BIN)
        .args(["net", "exec", &name, "b", "--", "iperf3", "-s", "-1"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let client = Command::new(BIN)
        // -R: b sends, and the client's per-second figures are the receiver's (a sender's
        // count what it wrote into its socket buffer, in 128 KiB steps).
        .args(["net", "exec", &name, "a", "--", "iperf3", "-c", "198.18.1.2", "-R", "-t", "8", "-i", "1", "-J"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_millis(3000));
    let set = ok(&run(&["net", "set", &name, "wan", "rate_ba=10M"], Duration::from_secs(10)));
    let at = t0.elapsed().as_secs_f64();
    assert!(set.contains("a → b 3 ms, 50.0 Mbit/s; b → a 3 ms, 10.0 Mbit/s"), "{set}");
    let out = client.wait_with_output().unwrap();
    let _ = server.wait();
    let stats = ok(&run(&["net", "stats", &name, "--json", "--link", "wan"], Duration::from_secs(10)));
    let down = ok(&run(&["net", "down", &name], Duration::from_secs(20)));
    assert!(down.contains("wan"), "{down}");
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    let iv: Vec<f64> =
        j["intervals"].as_array().unwrap().iter().map(|i| i["sum"]["bits_per_second"].as_f64().unwrap()).collect();
    assert_eq!(iv.len(), 8, "{iv:?}");
    // Before the change (second 1–2) near 50 Mbit/s; from 2 s after it, near 10 Mbit/s.
    assert!(iv[1] > goodput(50e6) * 0.85, "{iv:?}");
    // Each second from 2 s after the change is well below the old rate, and together they
    // average the new one (single seconds swing with TCP's sawtooth in a 120 ms queue).
    let after = (at + 2.0).ceil() as usize;
    for (i, bps) in iv.iter().enumerate().skip(after) {
        assert!(*bps < 0.3 * goodput(50e6), "second {i}: {bps} bit/s after the set at {at:.1} s: {iv:?}");
    }
    let tail = &iv[after..];
    let mean = tail.iter().sum::<f64>() / tail.len() as f64;
    assert!((mean - goodput(10e6)).abs() < 0.1 * goodput(10e6), "mean {mean} bit/s after the set: {iv:?}");
    // The per-second utilization series shows the same step.
    let s: Value = serde_json::from_str(stats.trim()).unwrap();
    let series: Vec<u64> = serde_json::from_value(s["links"][0]["ba"]["per_second_bytes"].clone()).unwrap();
    let peak = *series.iter().max().unwrap() as f64 * 8.0;
    assert!(peak > 40e6 && peak <= 50.5e6, "{series:?}");
}

#[test]
fn net_set_cost_reroutes_mid_run() {
    let _serial = serial();
    if !paths_available() || !have("traceroute") {
        return;
    }
    // The diamond without its override: a → b over r1–r2 until r1–r2 costs 10, then over r3.
    let name = format!("c{}", std::process::id());
    let f = topo_file("reroute", DIAMOND.split("[[route]]").next().unwrap());
    let _up = Up::new(&f, &name);
    let trace = || -> Vec<String> {
        let out = run(
            &["net", "exec", &name, "a", "--", "traceroute", "-n", "-N", "1", "-q", "1", "198.18.2.2"],
            Duration::from_secs(30),
        );
        traceroute_hops(&ok(&out)).into_iter().map(|h| h.0).collect()
    };
    let before = trace();
    let set = run(&["net", "set", &name, "r1-r2", "cost=10", "--json"], Duration::from_secs(10));
    let after = trace();
    assert_eq!(before, ["198.18.0.2", "198.18.1.2", "198.18.2.2"]);
    let v: Value = serde_json::from_str(ok(&set).trim()).unwrap();
    assert!(v["routes_changed"].as_u64().unwrap() > 0, "{v}");
    // a → r1 → r3 (its r1–r3 address) → r2 (its r3–r2 address) → b.
    assert_eq!(after, ["198.18.0.2", "198.18.3.2", "198.18.4.2", "198.18.2.2"]);
}

#[test]
fn cmd_starts_once_each_on_command_listens() {
    let _serial = serial();
    if !paths_available() || !have("iperf3") {
        return;
    }
    let f = topo_file("listens", &chain("", "", ""));
    // Two servers on b that take a while to come up, one TCP, one UDP. CMD, on b too, finds
    // both listening: it ran once they did, neither before nor after the whole --wait (past
    // `run`'s 20 s limit).
    let out = run(
        &[
            "net",
            "run",
            &f,
            "--wait",
            "30s",
            "--host",
            "b",
            "--on",
            "b=sleep 1; exec iperf3 -s -1",
            "--on",
            "b=sleep 1.5; exec iperf -s -u -p 5002",
            "--",
            "sh",
            "-c",
            "ss -Htln 'sport = :5201' | grep -q . && ss -Huln 'sport = :5002' | grep -q .",
        ],
        Duration::from_secs(20),
    );
    ok(&out);
}

#[test]
fn kill_9_and_down_leave_nothing_behind() {
    let _serial = serial();
    if !paths_available() {
        return;
    }
    let f = topo_file("kill", &chain("", "", ""));
    let mut child = Command::new(BIN)
        .args([
            "net",
            "run",
            &f,
            "--on",
            "b=sleep 1000; : wanperf-net-marker-1",
            "--",
            "sh",
            "-c",
            "sleep 1000; : wanperf-net-marker-2",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2000));
    let before = Command::new("pgrep").args(["-f", "wanperf-net-marker-[12]"]).output().unwrap();
    assert!(!before.stdout.is_empty(), "the commands never ran");
    child.kill().unwrap();
    child.wait().unwrap();
    let gone = (0..50).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        Command::new("pgrep").args(["-f", "wanperf-net-marker-[12]"]).output().unwrap().stdout.is_empty()
    });
    assert!(gone, "processes left after kill -9");
    // A named network's daemon killed with -9: its nodes' processes die, `list` forgets it.
    let name = format!("k{}", std::process::id());
    let _up = Up::new(&f, &name);
    let mut sleeper = Command::new(BIN).args(["net", "exec", &name, "r3", "--", "sleep", "1000"]).spawn().unwrap();
    let info = ok(&run(&["net", "list", "--json"], Duration::from_secs(10)));
    let v: Value = serde_json::from_str(info.trim()).unwrap();
    let pid =
        v["networks"].as_array().unwrap().iter().find(|n| n["name"] == name.as_str()).unwrap()["pid"].as_i64().unwrap();
    let netns_before = std::fs::read_link(format!("/proc/{pid}/ns/net")).ok();
    // Killing the daemon we started.
    let _ = wanperf_sys::kill(pid as u32);
    // `net exec` joined the namespace itself; it is the user's process and outlives the daemon
    // like a shell in `ip netns exec` would, until it is stopped.
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    let listed = ok(&run(&["net", "list"], Duration::from_secs(10)));
    assert!(!listed.contains(&name), "{listed}");
    let _ = netns_before;
    // `net down`, on the other hand, ends what `net exec` left running in the network: it
    // would keep a namespace of a network that is gone (and itself) alive.
    let name = format!("d{}", std::process::id());
    let up = Up::new(&f, &name);
    let mut sleepers: Vec<std::process::Child> = ["a", "r3"]
        .iter()
        .map(|node| Command::new(BIN).args(["net", "exec", &name, node, "--", "sleep", "1000"]).spawn().unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    assert!(sleepers.iter_mut().all(|c| c.try_wait().unwrap().is_none()), "a sleeper ended early");
    ok(&run(&["net", "down", &name], Duration::from_secs(20)));
    std::mem::forget(up); // already down
    let t = std::time::Instant::now();
    while sleepers.iter_mut().any(|c| c.try_wait().unwrap().is_none()) && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(sleepers.iter_mut().all(|c| c.try_wait().unwrap().is_some()), "`net exec` processes outlived `net down`");
}

#[test]
fn bad_topologies_get_one_line_naming_the_line() {
    let two = "[[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n";
    for (text, want) in [
        (format!("{two}[[link]]\na = \"a\"\nb = \"c\"\n"), "line 7: `b`: no host or router is called `c`"),
        (two.to_string(), "line 3: the network is not connected"),
        (
            format!("{two}[[link]]\na = \"a\"\nb = \"b\"\nsubnet = \"198.18.3.0/24\"\n[[link]]\na = \"b\"\nb = \"a\"\nsubnet = \"198.18.3.0/24\"\n"),
            "line 9: duplicate address",
        ),
        (
            format!("{two}[[router]]\nname = \"r\"\n[[link]]\na = \"a\"\nb = \"r\"\n[[link]]\na = \"r\"\nb = \"b\"\n[[route]]\npath = [\"a\", \"b\"]\n"),
            "line 14: `path` goes from `a` to `b`, but no link joins them",
        ),
        (format!("{two}[[link]]\na = \"a\"\nb = \"b\"\nrate = \"lots\"\n"), "line 8"),
        ("[[host]\n".to_string(), "line 1"),
    ] {
        let f = topo_file("bad", &text);
        for cmd in [vec!["net", "show", f.as_str()], vec!["net", "run", f.as_str(), "--", "true"]] {
            let out = run(&cmd, Duration::from_secs(10));
            assert!(!out.status.success());
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(err.lines().count(), 1, "{cmd:?}: {err}");
            assert!(err.contains(want), "{cmd:?}: `{err}` lacks `{want}`");
        }
    }
    let out = run(&["net", "run", "no-such-preset", "--", "true"], Duration::from_secs(10));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such file, and no preset"));
}

/// The minimum of iputils ping's summary line (`rtt min/avg/max/mdev = …`), in ms.
fn ping_min(text: &str) -> Vec<f64> {
    text.lines()
        .filter_map(|l| l.strip_prefix("rtt min/avg/max/mdev = "))
        .filter_map(|r| r.split('/').next()?.parse().ok())
        .collect()
}

#[test]
fn the_iepm_2000_preset_has_the_seeds_rtts() {
    let _serial = serial();
    if !paths_available() || !have("ping") {
        return;
    }
    let out = net_sh(
        "iepm-2000",
        "slac",
        "ping -c 5 -i 0.2 $WANPERF_ADDR_CERN; ping -c 5 -i 0.2 $WANPERF_ADDR_FNAL",
        Duration::from_secs(30),
    );
    let mins = ping_min(&ok(&out));
    assert_eq!(mins.len(), 2);
    // SLAC–CERN 166 ms over 5 links (seeds 000/004); SLAC–FNAL 52.2 ms over 4: never less, and
    // above by at most what the emulator adds per crossing (and the links' serialization).
    for (got, want, links) in [(mins[0], 166.0, 5), (mins[1], 52.2, 4)] {
        assert!(rtt_fits(got, want, 2 * links), "min RTT {got} ms, configured {want} ms");
    }
}

#[test]
fn unprivileged_user_gets_a_network_too() {
    let _serial = serial();
    if !paths_available() || !have("ping") {
        return;
    }
    let topo = chain("", "", "");
    let Some(out) = run_as_nobody(
        &[("chain.toml", &topo)],
        &["net", "run", "chain.toml", "--", "sh", "-c", "ping -c 9 -i 0.2 $WANPERF_ADDR_B"],
    ) else {
        return;
    };
    let rtts = ping_rtts(&ok(&out));
    assert_eq!(rtts.len(), 9);
    // The first probe also waits for address resolution on each Ethernet hop (twice the
    // delays again): the rest cross 12 links each.
    let m = least(&rtts[1..]);
    assert!(rtt_fits(m, 32.0, 12), "least {m} ms of {rtts:?}");
}

/// a has two 20 Mbit/s links to the router (the second costlier, as umich-2001's speedy has
/// two interfaces), b is behind it on a 1 Gbit/s link.
const TWO_HOMED: &str = r#"
[[host]]
name = "a"
[[host]]
name = "b"
[[router]]
name = "r"
[[link]]
a = "a"
b = "r"
name = "one"
rate = "20M"
delay = "5ms"
[[link]]
a = "a"
b = "r"
name = "two"
rate = "20M"
delay = "5ms"
cost = 2
[[link]]
a = "r"
b = "b"
rate = "1G"
delay = "1ms"
"#;

#[test]
fn mptcp_carries_more_than_either_interface_of_a_two_homed_host() {
    let _serial = serial();
    if !paths_available() || !have("ip") {
        return;
    }
    let topo = topo_file("two-homed", TWO_HOMED);
    let dir = std::env::temp_dir().join(format!("wanperf-mptcp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.display();
    // The network made a's second interface an MPTCP endpoint (as iproute2 lists it); then
    // TCP alone, MPTCP, and MPTCP switched off in the host's namespace.
    let script = format!(
        "ip mptcp endpoint show > {d}/endpoints && ip mptcp limits > {d}/limits && \
         {BIN} tput $WANPERF_ADDR_B -t 2 --omit 1 --json > {d}/tcp.json && \
         {BIN} tput $WANPERF_ADDR_B --mptcp -t 2 --omit 1 --json > {d}/mptcp.json && \
         sysctl -qw net.mptcp.enabled=0 && ! {BIN} tput $WANPERF_ADDR_B --mptcp -t 1 2> {d}/off.err"
    );
    let right = format!("b=exec {BIN} serve --allow 198.18.0.0/15");
    ok(&run(&["net", "run", &topo, "--on", &right, "--", "sh", "-c", &script], Duration::from_secs(90)));
    let last = |name: &str| -> Value {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        serde_json::from_str(text.lines().last().unwrap()).unwrap()
    };
    let endpoints = std::fs::read_to_string(dir.join("endpoints")).unwrap();
    assert!(
        endpoints.contains("198.18.1.1") && endpoints.contains("subflow") && endpoints.contains("wan1"),
        "{endpoints}"
    );
    assert!(!endpoints.contains("198.18.0.1"), "the first address is the connections' own: {endpoints}");
    let limits = std::fs::read_to_string(dir.join("limits")).unwrap();
    assert!(limits.contains("subflows 2"), "{limits}");
    let tcp = f(&last("tcp.json")["summary"]["throughput_bps"]);
    let mp = last("mptcp.json");
    let both = f(&mp["summary"]["throughput_bps"]);
    assert!(tcp <= 20e6 * 1.02, "one interface carried {tcp} bit/s over a 20 Mbit/s link");
    assert!(both > 1.5 * tcp && both > 30e6, "MPTCP over two 20 Mbit/s interfaces: {both} bit/s (TCP alone {tcp})");
    // The sender's subflows, one from each of a's addresses, each carrying a fair share.
    let subflows = mp["summary"]["streams"][0]["subflows"].as_array().unwrap();
    let mut locals: Vec<&str> = subflows.iter().map(|s| s["local"].as_str().unwrap()).collect();
    locals.sort_unstable();
    assert!(
        locals.len() == 2 && locals[0].starts_with("198.18.0.1:") && locals[1].starts_with("198.18.1.1:"),
        "{locals:?}"
    );
    let acked: Vec<u64> = subflows.iter().map(|s| u(&s["tcp"]["bytes_acked"])).collect();
    let total: u64 = acked.iter().sum();
    assert!(acked.iter().all(|&a| a * 4 > total), "each subflow carried a share: {acked:?}");
    // A host whose kernel does not allow MPTCP: one line saying so.
    let err = std::fs::read_to_string(dir.join("off.err")).unwrap();
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("does not allow MPTCP"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn udp_datagrams_cross_the_routers_joined_yet_each_meets_the_links_alone() {
    let _serial = serial();
    if !paths_available() || !have("iperf3") {
        return;
    }
    // a — r1 — r2 — r3 — b, 1 ms a link, 1 % random loss on r2–r3. Datagrams that leave a link
    // toward a router together are written to it as one UDP super-packet (the kernel forwards
    // it once); the next link cuts it back into the datagrams, each decided on alone.
    let mut t = String::from("name = \"join\"\n[[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n");
    for r in ["r1", "r2", "r3"] {
        t.push_str(&format!("[[router]]\nname = \"{r}\"\n"));
    }
    for (x, y) in [("a", "r1"), ("r1", "r2"), ("r2", "r3"), ("r3", "b")] {
        let loss = if x == "r2" { "loss = \"1%\"\n" } else { "" };
        t.push_str(&format!("[[link]]\na = \"{x}\"\nb = \"{y}\"\ndelay = \"1ms\"\n{loss}"));
    }
    let f = topo_file("join", &t);
    // What r3's kernel counted arriving on its devices, read from inside it (bounded loop).
    let dev = std::env::temp_dir().join(format!("wanperf-net-join-r3-{}.txt", std::process::id()));
    let _ = std::fs::remove_file(&dev);
    let watch = format!(
        "r3=for i in $(seq 200); do cat /proc/net/dev > {0}.new && mv {0}.new {0}; sleep 0.05; done",
        dev.display()
    );
    // And what b's kernel dropped for a full receive buffer (b shares the CPUs with the rest).
    let snmp = std::env::temp_dir().join(format!("wanperf-net-join-b-{}.txt", std::process::id()));
    let _ = std::fs::remove_file(&snmp);
    let server = format!("b=iperf3 -s -1; cat /proc/net/snmp > {}", snmp.display());
    let out = run(
        &[
            "net",
            "run",
            &f,
            "--json",
            "--on",
            &server,
            "--on",
            &watch,
            "--",
            "sh",
            "-c",
            "iperf3 -c $WANPERF_ADDR_B -u -b 300M -l 1000 -w 8M -t 3 -J; sleep 0.5",
        ],
        Duration::from_secs(60),
    );
    let j: Value = serde_json::from_str(&ok(&out)).unwrap();
    let sum = &j["end"]["sum"];
    let (sent, lost) = (sum["packets"].as_u64().unwrap(), sum["lost_packets"].as_u64().unwrap());
    let err = String::from_utf8_lossy(&out.stderr);
    let stats: Value =
        err.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).find(|v| v["event"] == "net_stats").unwrap();
    let be = |link: usize, k: &str| stats["links"][link]["ab"]["classes"]["best_effort"][k].as_u64().unwrap();
    // Every datagram met each link alone: each link counted them one by one, the lossy link
    // decided on each (iperf3's losses are exactly its random losses, about 1 % of them, and
    // what b's full receive buffer dropped).
    let random = be(2, "random_losses");
    let snmp = std::fs::read_to_string(&snmp).unwrap();
    let udp: Vec<Vec<&str>> =
        snmp.lines().filter(|l| l.starts_with("Udp:")).map(|l| l.split_whitespace().collect()).collect();
    let field = |name: &str| udp[0].iter().position(|&k| k == name).map(|i| udp[1][i].parse::<u64>().unwrap()).unwrap();
    let full = field("RcvbufErrors");
    assert_eq!(lost, random + full, "iperf3 lost {lost} of {sent}; the link lost {random}, b's buffer {full}: {stats}");
    assert!(random as f64 > 0.005 * sent as f64 && (random as f64) < 0.015 * sent as f64, "{random} of {sent}");
    assert_eq!(be(2, "packets_in"), be(1, "packets_out"), "{stats}");
    assert!(be(1, "packets_out") >= sent, "r1–r2 carried {} of {sent} datagrams", be(1, "packets_out"));
    assert_eq!(sum["out_of_order"].as_u64().unwrap_or(0), 0, "{sum}");
    // Yet r3's kernel received fewer packets than the datagrams it forwarded: they came joined
    // (where TUN devices take UDP segmentation offload, Linux 6.2 on).
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let version: Vec<u32> = release.split(['.', '-']).take(2).filter_map(|x| x.trim().parse().ok()).collect();
    if version < vec![6, 2] {
        eprintln!("kernel {release}: no UDP segmentation offload on TUN, datagrams are not joined");
        return;
    }
    let table = std::fs::read_to_string(&dev).unwrap();
    let rx: u64 = table
        .lines()
        .filter(|l| !l.trim_start().starts_with("lo:") && l.contains(':'))
        .filter_map(|l| l.split(':').nth(1)?.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum();
    let forwarded = be(3, "packets_in");
    assert!(rx * 3 < forwarded * 2, "r3 received {rx} packets for {forwarded} datagrams: not joined\n{table}");
    let _ = std::fs::remove_file(&dev);
}
