//! `wanperf trace` on emulated networks with a known answer, against Debian's traceroute.

mod common;
use common::*;
use serde_json::Value;
use std::time::Duration;

/// Runs `wanperf trace ARGS $WANPERF_ADDR_B --json` from host a of `topology`; the report.
fn trace_in(topology: &str, args: &str) -> Value {
    let f = topo_file(&format!("trace-{}", args.len()), topology);
    let out = net_sh(&f, "a", &format!("{BIN} trace $WANPERF_ADDR_B {args} --json"), Duration::from_secs(90));
    let text = ok(&out);
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["event"], "trace", "{text}");
    last["report"].clone()
}

fn hops(r: &Value) -> &Vec<Value> {
    r["hops"].as_array().unwrap()
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

#[test]
fn trace_lists_the_routers_in_order_with_the_configured_delays_as_traceroute_does() {
    let _serial = serial();
    if !paths_available() || !have("traceroute") || !have("mtr") {
        return;
    }
    // UDP probes once a second: the destination's port unreachables stay within its ICMP rate
    // limit (Linux: one a second, a burst of 6).
    let topo = chain("icmp_ratelimit = \"0ms\"", "icmp_ratelimit = \"0ms\"", "");
    let f = topo_file("trace-vs-traceroute", &topo);
    let out = net_sh(
        &f,
        "a",
        &format!(
            "{BIN} trace $WANPERF_ADDR_B -c 4 --json | tail -1; echo ===; traceroute -n -q 4 $WANPERF_ADDR_B; \
             echo ===; mtr -n -r -c 4 $WANPERF_ADDR_B"
        ),
        Duration::from_secs(90),
    );
    let text = ok(&out);
    let (ours, rest) = text.split_once("===").unwrap();
    let (tr, mtr) = rest.split_once("===").unwrap();
    let r = &serde_json::from_str::<Value>(ours.trim()).unwrap()["report"];
    let theirs = traceroute_hops(tr);
    assert_eq!(r["reached"], true, "{ours}");
    assert_eq!(hops(r).len(), 6, "{ours}");
    let mut cum = 0.0;
    for (k, (h, (addr, rtts))) in hops(r).iter().zip(&theirs).enumerate() {
        cum += 2.0 * CHAIN_DELAYS_MS[k];
        let want = if k < 5 { format!("198.18.{k}.2") } else { "198.18.5.2".to_string() };
        assert_eq!(h["addrs"][0][0], want.as_str(), "hop {}: {h}", k + 1);
        assert_eq!(addr, &want, "traceroute hop {}", k + 1);
        assert_eq!(h["loss_pct"], 0.0, "{h}");
        let min = num(&h["rtt_ms"]["min"]);
        let tr_min = rtts.iter().cloned().fold(f64::MAX, f64::min);
        // The same path measured by both: ours within the emulator's per-crossing cost of the
        // configuration, and no more than 0.5 ms above traceroute's best (each is a best of
        // four probes that meet the emulator's wake-ups independently; traceroute, timing in
        // user space, is the one that reads high).
        assert!(rtt_fits(min, cum, 2 * (k as u32 + 1)), "hop {}: {min} ms, configured {cum} ms", k + 1);
        assert!(min <= tr_min + 0.5, "hop {}: ours {min} ms, traceroute {tr_min} ms", k + 1);
    }
    assert_eq!(hops(r)[5]["destination"], true);
    assert!(r["route_changes"].as_array().unwrap().is_empty());
    // mtr on the same network: the same routers in the same order, and ours no more than
    // 0.5 ms above its best at each hop (mtr times in user space too).
    let theirs = mtr_hops(mtr);
    assert_eq!(theirs.len(), 6, "{mtr}");
    for (h, (addr, _, best)) in hops(r).iter().zip(&theirs) {
        assert_eq!(h["addrs"][0][0], addr.as_str(), "{mtr}");
        assert!(num(&h["rtt_ms"]["min"]) <= best + 0.5, "hop {h}: mtr's best {best} ms\n{mtr}");
    }
}

#[test]
fn a_rate_limited_router_is_told_from_a_lossy_link() {
    let _serial = serial();
    if !paths_available() {
        return;
    }
    // r3 answers at most one probe in 10 s (after a burst); the others always. ICMP echo:
    // the destination's echo replies are not rate limited.
    let limited =
        chain("icmp_ratelimit = \"0ms\"", "icmp_ratelimit = \"10s\"\nicmp_msgs_per_sec = 1\nicmp_msgs_burst = 1", "");
    let r = trace_in(&limited, "--icmp -c 40 -i 0.1");
    let h = hops(&r);
    assert_eq!(h.len(), 6, "{r}");
    assert!(num(&h[2]["loss_pct"]) >= 50.0, "r3 limits its replies: {}", h[2]);
    assert_eq!(h[2]["note"], "rate-limited", "{}", h[2]);
    for x in h {
        assert_eq!(num(&x["path_loss_pct"]), 0.0, "no loss on the path: {x}");
    }
    // A link that loses 30 % of what goes toward b, into r3: hop 3 and everything after it.
    let lossy = chain_with(
        |_| "icmp_ratelimit = \"0ms\"".into(),
        |i| if i == 2 { "loss_ab = 0.3".into() } else { String::new() },
    );
    let r = trace_in(&lossy, "--icmp -c 60 -i 0.1");
    let h = hops(&r);
    assert_eq!(h.len(), 6, "{r}");
    assert_eq!(num(&h[1]["path_loss_pct"]), 0.0, "{}", h[1]);
    for x in &h[2..] {
        let l = num(&x["path_loss_pct"]);
        assert!((10.0..=50.0).contains(&l), "30 % lost into r3: {x}");
        assert_ne!(x["note"], "rate-limited", "{x}");
    }
    assert!(h[2]["note"].as_str().is_some_and(|n| n.starts_with("loss starts here")), "{}", h[2]);
    assert!(h[3..].iter().all(|x| x["note"].is_null()), "{r}");
}

/// Issue 43: probing faster than routers answer is their rate limit, not path loss. Every
/// router keeps Linux's default ICMP limit (one answer a second per destination after a burst
/// of 6), r3 a slower one (one in 4 s), b the default; the path loses nothing.
#[test]
fn fast_probing_against_icmp_rate_limits_is_not_called_path_loss() {
    let _serial = serial();
    if !paths_available() {
        return;
    }
    let net = format!("tfast{}", std::process::id() % 100_000);
    let f = topo_file("trace-fast", &chain("", "icmp_ratelimit = \"4s\"", ""));
    let _up = Up::new(&f, &net);
    // The default pace (one round a second): every router keeps up, bar r3 after its burst.
    let r = trace_exec(&net, &["-c", "8"]);
    let h = hops(&r);
    assert_eq!(h.len(), 6, "{r}");
    assert!(r["warning"].is_null(), "{r}");
    for x in h {
        assert_eq!(num(&x["path_loss_pct"]), 0.0, "{x}");
        assert!(!x["note"].as_str().is_some_and(|n| n.starts_with("loss")), "{x}");
    }
    // 200 ms and 50 ms: every hop, b included, answers about once a second. Not path loss.
    for args in [["-c", "40", "-i", "0.2"], ["-c", "120", "-i", "0.05"]] {
        let r = trace_exec(&net, &args);
        let h = hops(&r);
        assert_eq!(h.len(), 6, "{args:?}: {r}");
        assert!(num(&h[5]["loss_pct"]) > 50.0, "{args:?}: b limits its port unreachables: {}", h[5]);
        for x in h {
            assert_eq!(num(&x["path_loss_pct"]), 0.0, "{args:?}: no loss on the path: {x}");
            let note = x["note"].as_str().unwrap_or_default();
            assert!(!note.starts_with("loss"), "{args:?}: {x}");
            assert!(note == "rate-limited" || note == "cannot tell rate limiting from loss", "{args:?}: {x}");
        }
        // The hops with the default limit answer at its pace (most of them beyond chance; a
        // hop whose spacing the counts cannot tell from loss says so instead).
        let rates: Vec<f64> = h.iter().filter(|x| x["ttl"] != 3).filter_map(|x| x["answers_per_s"].as_f64()).collect();
        assert!(rates.len() >= 3, "{args:?}: {r}");
        assert!(rates.iter().all(|r| (0.7..=1.4).contains(r)), "{args:?}: {rates:?} answers/s");
        let w = r["warning"].as_str().unwrap_or_else(|| panic!("{args:?}: a warning: {r}"));
        assert!(
            w.starts_with("probed faster than they answer") && w.contains("-i 1s") && w.contains("--server"),
            "{w}"
        );
    }
}

#[test]
fn a_saved_trace_is_stored_and_drawn_as_a_ladder_with_its_loss() {
    let _serial = serial();
    if !paths_available() {
        return;
    }
    let limited =
        chain("icmp_ratelimit = \"0ms\"", "icmp_ratelimit = \"10s\"\nicmp_msgs_per_sec = 1\nicmp_msgs_burst = 1", "");
    let f = topo_file("trace-save", &limited);
    let dir = std::env::temp_dir().join(format!("wanperf-trace-save-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("a.sqlite").display().to_string();
    let cmd = format!("{BIN} trace $WANPERF_ADDR_B --icmp -c 30 -i 0.1 --db {db} --json");
    let text = ok(&net_sh(&f, "a", &cmd, Duration::from_secs(90))).to_string();
    let saved: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(saved["event"], "saved", "{text}");
    let out = run(&["export", "latest", "--db", &db, "--format", "json"], Duration::from_secs(20));
    let data: Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &data["cells"][0];
    assert_eq!(c["kind"], "trace", "{c}");
    assert_eq!(c["ok"], true, "{c}");
    assert_eq!(c["params"]["method"], "icmp");
    let h = hops(&c["summary"]["trace"]);
    assert_eq!(h.len(), 6, "{c}");
    assert_eq!(h[2]["note"], "rate-limited", "{}", h[2]);
    let html = dir.join("r.html");
    let out = run(&["report", "latest", "--db", &db, "-o", html.to_str().unwrap()], Duration::from_secs(20));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("Per-hop RTT and loss, trace to"), "no ladder");
    assert!(page.contains("<h3>Trace to"), "no hop table");
    // The finding reads the stored hops: hop 3 limits its replies, the path loses nothing.
    assert!(page.contains("Hops that only limit their ICMP replies (not path loss): 3 ("), "finding");
    assert!(page.contains("No loss on the path."), "finding");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mtu_discovery_finds_the_1400_byte_link() {
    let _serial = serial();
    if !paths_available() {
        return;
    }
    let topo = chain("icmp_ratelimit = \"0ms\"", "icmp_ratelimit = \"0ms\"", "");
    let r = trace_in(&topo, "--mtu --icmp -c 2 -i 0.3 --size 1500");
    assert_eq!(r["path_mtu"], 1400, "{r}");
    // r2 reports it: the link after hop 2.
    assert_eq!(hops(&r)[1]["next_mtu"], 1400, "{r}");
    assert_eq!(r["reached"], true);
}

#[test]
fn a_route_change_during_a_trace_is_reported() {
    let _serial = serial();
    if !paths_available() {
        return;
    }
    // The diamond without its route override: a → b over r1–r2 until r1–r2 gets expensive
    // mid-trace, then over r3.
    let f = topo_file("trace-diamond", DIAMOND.split("[[route]]").next().unwrap());
    let name = format!("t{}", std::process::id());
    let _up = Up::new(&f, &name);
    let tracer = std::process::Command::new(BIN)
        .args([
            "net",
            "exec",
            &name,
            "a",
            "--",
            BIN,
            "trace",
            "198.18.2.2",
            "--icmp",
            "-c",
            "16",
            "-i",
            "0.25",
            "--json",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    ok(&run(&["net", "set", &name, "r1-r2", "cost=10"], Duration::from_secs(10)));
    let out = tracer.wait_with_output().unwrap();
    let text = ok(&out);
    let r = &serde_json::from_str::<Value>(text.lines().last().unwrap()).unwrap()["report"];
    let changes = r["route_changes"].as_array().unwrap();
    // Hop 2 was r2 (its r1–r2 address) and becomes r3 (its r1–r3 address). The routers take
    // their new routes one after another, as a routing protocol converges, so the round that
    // crosses the change may see a mix — a CI run's round 7 had r2 at TTL 2 answering from
    // its r3–r2 address (its way back already through r3, r1 still forwarding to it) — and
    // that is reported too: the changes at hop 2 start from r2's r1–r2 address and end at r3's.
    let at2: Vec<&Value> = changes.iter().filter(|c| c["ttl"] == 2).collect();
    let (first, last) = (at2.first().unwrap_or_else(|| panic!("{r}")), at2.last().unwrap());
    assert_eq!(first["before"], "198.18.1.2", "{r}");
    assert_eq!(last["after"], "198.18.3.2", "{r}");
    assert!(
        at2.windows(2).all(|w| w[0]["after"] == w[1]["before"] && w[0]["round"].as_u64() <= w[1]["round"].as_u64()),
        "{r}"
    );
    assert_eq!(r["reached"], true);
}

#[test]
fn tcp_syn_probes_find_every_router_and_the_destination_open_or_closed() {
    let _serial = serial();
    if !paths_available() {
        return;
    }
    let f = topo_file("trace-tcp", &chain("icmp_ratelimit = \"0ms\"", "icmp_ratelimit = \"0ms\"", ""));
    let name = format!("tt{}", std::process::id());
    let _up = Up::new(&f, &name);
    let mut cmd = std::process::Command::new(BIN);
    cmd.args(["net", "exec", &name, "b", "--", BIN, "serve", "--listen", "0.0.0.0:0", "--allow", "198.18.0.0/15"]);
    let server = Server::spawn(cmd);
    // An open port (the server's: SYN-ACK) and a closed one (reset).
    for port in [server.port_s(), "9".to_string()] {
        let out = run(
            &["net", "exec", &name, "a", "--", BIN, "trace", "198.18.5.2", "--tcp", "-p", &port, "-c", "3", "--json"],
            Duration::from_secs(60),
        );
        let text = ok(&out);
        let r = &serde_json::from_str::<Value>(text.lines().last().unwrap()).unwrap()["report"];
        assert_eq!(r["reached"], true, "port {port}: {r}");
        let h = hops(r);
        assert_eq!(h.len(), 6, "port {port}: {r}");
        let mut cum = 0.0;
        for (k, x) in h.iter().enumerate() {
            cum += 2.0 * CHAIN_DELAYS_MS[k];
            let want = if k < 5 { format!("198.18.{k}.2") } else { "198.18.5.2".to_string() };
            assert_eq!(x["addrs"][0][0], want.as_str(), "port {port}, hop {}: {x}", k + 1);
            assert_eq!(x["addrs"].as_array().unwrap().len(), 1, "one flow, one path: {x}");
            assert_eq!(num(&x["loss_pct"]), 0.0, "port {port}: {x}");
            let min = num(&x["rtt_ms"]["min"]);
            assert!(
                rtt_fits(min, cum, 2 * (k as u32 + 1)),
                "port {port}, hop {}: {min} ms, configured {cum} ms",
                k + 1
            );
        }
        assert_eq!(h[5]["destination"], true);
    }
    // As root, Debian's traceroute -T (raw sockets) lists the same routers.
    if have("traceroute") && wanperf_sys::euid() == 0 {
        let out = run(
            &[
                "net",
                "exec",
                &name,
                "a",
                "--",
                "traceroute",
                "-T",
                "-n",
                "-q",
                "1",
                "-p",
                &server.port_s(),
                "198.18.5.2",
            ],
            Duration::from_secs(60),
        );
        let theirs = traceroute_hops(&ok(&out));
        let addrs: Vec<&str> = theirs.iter().map(|(a, _)| a.as_str()).collect();
        assert_eq!(addrs, ["198.18.0.2", "198.18.1.2", "198.18.2.2", "198.18.3.2", "198.18.4.2", "198.18.5.2"]);
    }
    // The server saw connections reset, and is still serving.
    let mut server = server;
    assert!(server.alive(), "{}", server.log_text());
}

/// a — r1 — r2 — r4 — b beside r1 — r3 — r4, equally short, with ECMP: r1 spreads flows
/// over r2 and r3 by their addresses, protocol and ports (and r4 its answers back to a).
const ECMP: &str = r#"
name = "ecmp"
ecmp = true
[[host]]
name = "a"
[[host]]
name = "b"
[[router]]
name = "r1"
icmp_ratelimit = "0ms"
[[router]]
name = "r2"
icmp_ratelimit = "0ms"
[[router]]
name = "r3"
icmp_ratelimit = "0ms"
[[router]]
name = "r4"
icmp_ratelimit = "0ms"
[[link]]
a = "a"
b = "r1"
delay = "1ms"
[[link]]
a = "r1"
b = "r2"
delay = "1ms"
[[link]]
a = "r1"
b = "r3"
delay = "1ms"
[[link]]
a = "r2"
b = "r4"
delay = "1ms"
[[link]]
a = "r3"
b = "r4"
delay = "1ms"
[[link]]
a = "r4"
b = "b"
delay = "1ms"
"#;

/// The addresses in a traceroute -n hop line.
fn addresses(line: &str) -> std::collections::BTreeSet<String> {
    line.split_whitespace().filter(|w| w.parse::<std::net::IpAddr>().is_ok()).map(str::to_string).collect()
}

#[test]
fn multipath_lists_both_load_balanced_paths_and_one_flow_keeps_to_one() {
    let _serial = serial();
    if !paths_available() {
        return;
    }
    let f = topo_file("trace-ecmp", ECMP);
    let name = format!("te{}", std::process::id());
    let _up = Up::new(&f, &name);
    let trace = |args: &[&str]| -> Value {
        let mut all = vec!["net", "exec", &name, "a", "--", BIN, "trace", "198.18.5.2", "--json"];
        all.extend_from_slice(args);
        let text = ok(&run(&all, Duration::from_secs(60)));
        serde_json::from_str::<Value>(text.lines().last().unwrap()).unwrap()["report"].clone()
    };
    let set = |h: &Value| -> std::collections::BTreeSet<String> {
        h["addrs"].as_array().unwrap().iter().map(|a| a[0].as_str().unwrap().to_string()).collect()
    };
    let both: std::collections::BTreeSet<String> = ["198.18.1.2", "198.18.2.2"].map(String::from).into();
    let r4: std::collections::BTreeSet<String> = ["198.18.3.2", "198.18.4.2"].map(String::from).into();
    // 16 flows: both ways out of r1 are seen (all 16 hashed alike: 2 in 65,536), and each
    // flow keeps to its own — load balancing, not route changes. UDP and TCP SYN probes.
    for args in
        [&["--multipath", "16", "-c", "32", "-i", "0.2"][..], &["--tcp", "--multipath", "16", "-c", "32", "-i", "0.05"]]
    {
        let r = trace(args);
        let h = hops(&r);
        assert_eq!(h.len(), 4, "{args:?}: {r}");
        assert_eq!(set(&h[1]), both, "{args:?}: hop 2 is r2 for some flows, r3 for others: {r}");
        assert_eq!(h[1]["load_balanced"], true, "{args:?}: {}", h[1]);
        assert_eq!(h[1]["flows"].as_array().unwrap().len(), 16, "{}", h[1]);
        assert!(set(&h[2]).is_subset(&r4), "{args:?}: hop 3 is r4: {}", h[2]);
        assert_eq!(h[3]["destination"], true);
        assert!(r["route_changes"].as_array().unwrap().is_empty(), "{args:?}: {r}");
    }
    // One flow (the default, Paris-style): one path, the same address at hop 2 every round.
    let r = trace(&["-c", "12", "-i", "0.2"]);
    let h = hops(&r);
    assert_eq!(set(&h[1]).len(), 1, "{r}");
    assert!(set(&h[1]).is_subset(&both), "{r}");
    assert_eq!(h[1]["load_balanced"], false);
    // Classic traceroute changes the port with every probe, so its probes of one hop take
    // different paths: hop 2 shows both routers (the false links Paris traceroute fixed).
    // Two runs of its most probes a hop (10), from two base ports: 20 ports.
    if have("traceroute") {
        let mut seen = std::collections::BTreeSet::new();
        for port in ["33434", "40000"] {
            let out = run(
                &["net", "exec", &name, "a", "--", "traceroute", "-n", "-q", "10", "-w", "1", "-p", port, "198.18.5.2"],
                Duration::from_secs(60),
            );
            let text = ok(&out);
            let line = text.lines().find(|l| l.trim_start().starts_with("2 ")).unwrap_or_else(|| panic!("{text}"));
            seen.extend(addresses(line));
        }
        assert_eq!(seen, both);
    }
}

#[test]
fn bad_input_gets_one_line() {
    for args in [
        vec!["trace", "no.such.host.invalid"],
        vec!["trace", "198.18.0.2", "--first-ttl", "9", "--max-ttl", "3"],
        vec!["trace", "198.18.0.2", "--size", "10"],
        vec!["trace", "198.18.0.2", "-c", "0"],
        vec!["trace", "198.18.0.2", "--tcp", "--mtu"],
        vec!["trace", "198.18.0.2", "--tcp", "--icmp"],
        vec!["trace", "198.18.0.2", "--icmp", "--multipath", "4"],
        vec!["trace", "198.18.0.2", "--multipath", "1"],
        vec!["trace", "198.18.0.2", "--server", "--tcp"],
        vec!["trace", "198.18.0.2", "--server", "--multipath", "4"],
        vec!["trace", "198.18.0.2", "--server", "--size", "60"],
    ] {
        let out = run(&args, Duration::from_secs(20));
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{err}");
        assert!(err.trim().lines().count() <= 3, "{args:?}: {err}");
    }
}

/// `wanperf trace --json ARGS` from a to b (198.18.5.2) of the named network `net`: the report.
fn trace_exec(net: &str, args: &[&str]) -> Value {
    let mut argv = vec!["net", "exec", net, "a", "--", BIN, "trace", "198.18.5.2", "--json"];
    argv.extend_from_slice(args);
    let text = ok(&run(&argv, Duration::from_secs(90)));
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["event"], "trace", "{text}");
    last["report"].clone()
}

/// `wanperf trace --server` from a in `net` to a `wanperf serve` on b: 1,000 rounds, 100 a
/// second.
fn trace_served(net: &str) -> Value {
    let mut cmd = std::process::Command::new(BIN);
    cmd.args(["net", "exec", net, "b", "--", BIN, "serve", "--listen", "0.0.0.0:0", "--allow", "198.18.0.0/15"]);
    let server = Server::spawn(cmd);
    let port = server.port_s();
    trace_exec(net, &["--server", "-p", &port, "-c", "1000", "-i", "0.01", "--gap", "1ms"])
}

#[test]
fn a_wanperf_serve_at_the_destination_splits_its_loss_by_direction_and_is_never_rate_limited() {
    let _serial = serial();
    if !paths_available() {
        return;
    }
    // Routers answer every probe; b is a plain host (Linux's default ICMP rate limit). The
    // r1–r2 link loses 5 % toward b, the r4–r5 link 3 % toward a.
    let topo = chain_with(
        |_| "icmp_ratelimit = \"0ms\"".into(),
        |i| match i {
            1 => "loss_ab = 0.05".into(),
            4 => "loss_ba = 0.03".into(),
            _ => String::new(),
        },
    );
    let net = format!("tsrv{}", std::process::id() % 100_000);
    let f = topo_file("trace-server", &topo);
    let _up = Up::new(&f, &net);
    // A hundred rounds a second: b's kernel answers port unreachable once a second (a burst
    // of 6), so a plain trace shows nearly all of the destination's answers missing.
    let plain = trace_exec(&net, &["-c", "100", "-i", "0.01", "--gap", "1ms"]);
    let last = hops(&plain).last().unwrap().clone();
    assert_eq!(last["destination"], true, "{plain}");
    assert!(num(&last["loss_pct"]) > 50.0, "b limits its port unreachables: {last}");
    assert!(plain["one_way"].is_null(), "no server, no split: {plain}");
    let r = trace_served(&net);
    let h = hops(&r);
    assert_eq!(h.len(), 6, "{r}");
    let dest = &h[5];
    assert_eq!((dest["destination"].clone(), dest["addrs"][0][0].clone()), (true.into(), "198.18.5.2".into()));
    // The server answers every probe that reaches it: the destination's loss is the path's
    // (1 − 0.95 × 0.97 ≈ 7.9 %), not rate limiting.
    let total = num(&dest["loss_pct"]);
    assert!((4.5..=11.5).contains(&total), "destination loss {total} %: {dest}");
    let w = &r["one_way"];
    let (fwd, rev) = (num(&w["forward_loss_pct"]), num(&w["reverse_loss_pct"]));
    // 1,000 probes: four standard deviations either side of 5 % and 3 %.
    assert!((2.2..=7.8).contains(&fwd), "forward {fwd} %: {w}");
    assert!((0.8..=5.2).contains(&rev), "reverse {rev} %: {w}");
    assert!(num(&w["sent"]) >= 990.0 && num(&w["arrived"]) <= num(&w["sent"]), "{w}");
    // The loss starts at r2, behind the forward-lossy link (the reverse loss, behind r4, adds
    // to hop 5 on): no hop is called rate-limited.
    assert!(h[1]["note"].as_str().is_some_and(|n| n.starts_with("loss starts here")), "{r}");
    assert!(h.iter().all(|x| x["note"] != "rate-limited"), "{r}");
    // With the server's split, a step's direction where only one assignment fits it: the
    // 5 % at r2 on the way there, the 3 % from r5 on the way back. With 1,000 probes the
    // swapped assignment is about 3.5 deviations off, so a run may leave them unnamed
    // (no fit 90:1 better) — but never names them wrong.
    for (i, x) in h.iter().enumerate() {
        match (i, x["loss_direction"].as_str()) {
            (_, None) | (1, Some("forward")) | (4, Some("reverse")) => {}
            _ => panic!("hop {}: {x}\n{r}", i + 1),
        }
    }
    assert_eq!(num(&h[0]["path_loss_pct"]), 0.0, "{}", h[0]);
}

#[test]
fn answers_lost_on_one_link_are_placed_there_on_the_way_back() {
    let _serial = serial();
    if !paths_available() {
        return;
    }
    // The r2–r3 link loses 3 % toward a only: every answer from r3 on crosses it, no probe
    // is lost. A one-ended trace sees 3 % from hop 3 on and cannot say which way; the server
    // at b has every probe, so the step is the answers'.
    let topo = chain_with(
        |_| "icmp_ratelimit = \"0ms\"".into(),
        |i| if i == 2 { "loss_ba = 0.03".into() } else { String::new() },
    );
    let net = format!("tdir{}", std::process::id() % 100_000);
    let f = topo_file("trace-direction", &topo);
    let _up = Up::new(&f, &net);
    let r = trace_served(&net);
    let h = hops(&r);
    assert!(num(&r["one_way"]["forward_loss_pct"]) < 0.5, "{r}");
    let at: Vec<&Value> = h.iter().filter(|x| !x["loss_direction"].is_null()).collect();
    assert_eq!(at.len(), 1, "one step, one direction: {r}");
    assert_eq!((at[0]["ttl"].clone(), at[0]["loss_direction"].clone()), (3.into(), "reverse".into()), "{r}");
    assert!(at[0]["note"].as_str().is_some_and(|n| n.starts_with("loss starts here, on the way back")), "{r}");
}
