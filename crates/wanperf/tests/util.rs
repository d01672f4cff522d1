//! `wanperf util` against the emulator's own counters: snmpd (net-snmp) serves an emulated
//! router's IF-MIB while iperf3 loads the router's link out and then in; wanperf reads the
//! interface over SNMP v2c, SNMP v3 (SHA authentication, AES privacy) and rtnetlink, and every
//! reading's octets must equal what the emulator moved across that link within 1 %.

mod common;
use common::*;
use serde_json::Value;
use std::time::Duration;

const TOPO: &str = "name = \"util\"
[[host]]
name = \"a\"
[[router]]
name = \"r1\"
[[host]]
name = \"b\"
[[link]]
a = \"a\"
b = \"r1\"
delay = \"2ms\"
rate = \"20M\"
queue = \"100kB\"
offload = false
[[link]]
a = \"r1\"
b = \"b\"
";

struct Dir(std::path::PathBuf);
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn util_end(d: &Dir, file: &str) -> Value {
    let text = std::fs::read_to_string(d.0.join(file)).unwrap();
    let last = text.lines().rev().find(|l| l.contains("\"util_end\"")).unwrap_or_else(|| panic!("{file}: {text}"));
    let v: Value = serde_json::from_str(last).unwrap();
    let ifs = v["interfaces"].as_array().unwrap();
    assert_eq!(ifs.len(), 1, "{v}");
    ifs[0].clone()
}

fn total(dir: &Value, field: &str) -> u64 {
    dir["classes"].as_object().unwrap().values().map(|c| c[field].as_u64().unwrap()).sum()
}

fn within(got: u64, want: u64, pct: f64) -> bool {
    (got as f64 - want as f64).abs() <= want as f64 * pct / 100.0
}

#[test]
fn snmp_v2c_v3_and_netlink_utilization_equal_the_emulators_counters() {
    let _serial = serial();
    if !paths_available() || !have("snmpd") || !have("snmpget") || !have("iperf3") {
        return;
    }
    let d = Dir(std::env::temp_dir().join(format!("wanperf-util-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&d.0);
    std::fs::create_dir_all(&d.0).unwrap();
    let topo = topo_file("util", TOPO);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/util/poll.sh");
    let env = format!("D={} W={}", d.0.display(), env!("CARGO_BIN_EXE_wanperf"));
    let out = run(
        &[
            "net",
            "run",
            &topo,
            "--json",
            "--host",
            "r1",
            "--on",
            &format!("a=exec iperf3 -s --forceflush > {}/iperf3-s.log", d.0.display()),
            "--",
            "sh",
            "-c",
            &format!("{env} sh {script}"),
        ],
        Duration::from_secs(90),
    );
    let log = |f: &str| std::fs::read_to_string(d.0.join(f)).unwrap_or_default();
    assert!(
        out.status.success(),
        "run failed: {}\nsnmpd: {}\nv2c: {}\nv3: {}\nlocal: {}",
        String::from_utf8_lossy(&out.stderr),
        log("snmpd.log").lines().rev().take(5).collect::<Vec<_>>().join("\n"),
        log("v2c.err"),
        log("v3.err"),
        log("local.err")
    );
    let text = String::from_utf8_lossy(&out.stderr);
    let line =
        text.lines().find(|l| l.starts_with("{\"event\":\"net_stats\"")).expect("net run --json prints its counters");
    let stats: Value = serde_json::from_str(line).unwrap();
    let link = &stats["links"][0];
    // r1's wan0 is the b end of link a–r1: what the emulator delivered a → r1 came in, what it
    // took from r1 toward a went out.
    let (emu_in, emu_out) = (total(&link["ab"], "bytes_out"), total(&link["ba"], "bytes_in"));
    // About 3 s at 20 Mbit/s each way.
    assert!(emu_in > 3_000_000 && emu_out > 3_000_000, "{link}");
    for file in ["v2c.json", "v3.json", "local.json"] {
        let s = util_end(&d, file);
        assert_eq!(s["interface"], "wan0", "{s}");
        let (i, o) = (s["in_octets"].as_u64().unwrap(), s["out_octets"].as_u64().unwrap());
        assert!(within(i, emu_in, 1.0), "{file}: {i} octets in, the emulator delivered {emu_in} B");
        assert!(within(o, emu_out, 1.0), "{file}: {o} octets out, the emulator carried {emu_out} B");
        assert_eq!((s["wraps"].as_u64(), s["resets"].as_u64()), (Some(0), Some(0)), "{s}");
    }
    assert_eq!(util_end(&d, "v2c.json")["source"], "snmp");
    assert_eq!(util_end(&d, "local.json")["source"], "netlink");

    // The archive keeps every reading: `util show` bins them again. The rtnetlink series,
    // binned by second against a 20 Mbit/s speed, shows the two 3-s loads as saturated runs
    // (at least two whole seconds each).
    let db = d.0.join("util.sqlite").display().to_string();
    let shown = run(
        &["util", "show", "--db", &db, "--bin", "1", "--speed", "wan0=20M", "--pct", "80", "--bins", "2", "--json"],
        Duration::from_secs(20),
    );
    let series: Vec<Value> = serde_json::from_str(&ok(&shown)).unwrap();
    assert_eq!(series.len(), 2, "{series:?}");
    for s in &series {
        let file = if s["source"] == "snmp" { "v2c.json" } else { "local.json" };
        let polled = util_end(&d, file);
        assert_eq!(s["in_octets"], polled["in_octets"], "{s}");
        assert_eq!(s["out_octets"], polled["out_octets"], "{s}");
        // Rates × covered time add back up to the octets.
        let bits: f64 = s["bins"].as_array().unwrap().iter().map(|b| f(&b["in_bps"]) * f(&b["covered_s"])).sum();
        assert!(within((bits / 8.0).round() as u64, s["in_octets"].as_u64().unwrap(), 0.1), "{s}");
    }
    let local = series.iter().find(|s| s["source"] == "netlink").unwrap();
    assert_eq!(local["device"], "r1");
    let dirs: Vec<&str> = local["saturated"].as_array().unwrap().iter().map(|r| r["dir"].as_str().unwrap()).collect();
    assert!(dirs.contains(&"in") && dirs.contains(&"out"), "{local}");

    // The site report: iputils ping ran across the link through both loads; imported, its
    // probes are laid against the link's utilization, and the finding says the delay follows
    // this link's load (the emulated queue is the only one on the path).
    ok(&run(&["import", "ping", &d.0.join("ping.txt").display().to_string(), "--db", &db], Duration::from_secs(20)));
    let html = d.0.join("site.html").display().to_string();
    let rep = run(
        &[
            "flows", "report", "--db", &db, "--device", "r1", "--iface", "wan0", "--bin", "1", "--speed", "wan0=20M",
            "--pct", "80", "--bins", "2", "-o", &html, "--json",
        ],
        Duration::from_secs(30),
    );
    let rep: Value = serde_json::from_str(&ok(&rep)).unwrap();
    assert_eq!((rep["interfaces"].as_u64(), rep["paths"].as_u64()), (Some(1), Some(1)), "{rep}");
    let figs = rep["figures"].as_array().unwrap();
    let names: Vec<&str> = figs.iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["util", "util-rtt-1-1"], "{rep}");
    let util_finding = figs[0]["finding"].as_str().unwrap();
    assert!(util_finding.contains("Saturated in") && util_finding.contains("Saturated out"), "{util_finding}");
    let finding = figs[1]["finding"].as_str().unwrap();
    eprintln!("{util_finding}\n{finding}");
    if let Some(keep) = std::env::var_os("WANPERF_KEEP_SITE") {
        let _ = std::fs::copy(&html, keep);
    }
    assert!(finding.contains("this link's queue explains the latency"), "{finding}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("Top 0 sources") && page.contains("No flow records in this range"),
        "no flows were collected"
    );
    assert_eq!(page.matches("<figure class=\"fig\"").count(), 2);
    assert!(page.contains("Utilization of r1 wan0 (netlink)") && page.contains("RTT (ms)"));
}

#[test]
fn bad_util_input_gets_one_clear_line() {
    let cases: [(&[&str], &str); 6] = [
        (&["util", "poll", "--no-store"], "nothing to read"),
        (
            &["util", "poll", "--local", "--no-store", "--iface", "nosuch0", "--duration", "1"],
            "this namespace: no interface nosuch0",
        ),
        (&["util", "poll", "--local", "--no-store", "--speed", "lo"], "IFACE=RATE"),
        (&["util", "poll", "--snmp", "127.0.0.1", "--user", "u", "--auth", "sha:short", "--no-store"], "at least 8"),
        (&["util", "poll", "--snmp", "127.0.0.1", "--user", "u", "--auth", "sha9:longenough", "--no-store"], "sha9"),
        (&["util", "show", "--db", "/nonexistent/dir/util.sqlite"], "cannot open the archive"),
    ];
    for (args, want) in cases {
        let out = run(args, Duration::from_secs(20));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
}
