//! `wanperf flows` against independent references: softflowd exports NetFlow v5, v9 and IPFIX
//! of an emulated router's interface while iperf3 and ping cross it; nfcapd stores the export
//! and repeats every datagram to `wanperf flows collect`, so nfdump and wanperf read the same
//! datagrams and their top tables must agree exactly.

mod common;
use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

const TOPO: &str = "name = \"flows\"
[[host]]
name = \"a\"
[[host]]
name = \"b\"
[[router]]
name = \"r1\"
[[link]]
a = \"a\"
b = \"r1\"
delay = \"1ms\"
rate = \"100mbit\"
offload = false
[[link]]
a = \"r1\"
b = \"b\"
delay = \"1ms\"
";

struct Dir(std::path::PathBuf);
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs the export script with NetFlow `version` (and sampling); returns its work directory
/// and the bytes the emulator carried over the captured link (a–r1), both directions.
fn export(version: &str, sampling: Option<u32>) -> (Dir, u64) {
    let mut env = format!("V={version} ");
    if let Some(s) = sampling {
        env.push_str(&format!("SAMP={s} "));
    }
    exercise("export.sh", &format!("v{version}"), &env)
}

/// Runs `script` (tests/flows/) on r1 of [`TOPO`] with iperf3 serving on a, and `env`.
fn exercise(script: &str, tag: &str, env: &str) -> (Dir, u64) {
    let d = std::env::temp_dir().join(format!("wanperf-flows-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("nf")).unwrap();
    let topo = topo_file(&format!("flows-{tag}"), TOPO);
    let script = format!("{}/tests/flows/{script}", env!("CARGO_MANIFEST_DIR"));
    let env = format!("D={} W={} {env}", d.display(), env!("CARGO_BIN_EXE_wanperf"));
    let out = run(
        &[
            "net",
            "run",
            &topo,
            "--json",
            "--host",
            "r1",
            "--on",
            &format!("a=exec iperf3 -s --forceflush > {}/iperf3-s.log", d.display()),
            "--",
            "sh",
            "-c",
            &format!("{env} sh {script}"),
        ],
        Duration::from_secs(90),
    );
    let log = |f: &str| std::fs::read_to_string(d.join(f)).unwrap_or_default();
    assert!(
        out.status.success(),
        "{tag} run failed: {}\ncollect: {}\nnfcapd: {}\nexporter: {}",
        String::from_utf8_lossy(&out.stderr),
        log("collect.err"),
        log("nfcapd.log"),
        log("sf.log") + &log("pm.log")
    );
    let text = String::from_utf8_lossy(&out.stderr);
    let line =
        text.lines().find(|l| l.starts_with("{\"event\":\"net_stats\"")).expect("net run --json prints its counters");
    let stats: Value = serde_json::from_str(line).unwrap();
    let link = &stats["links"][0];
    let carried = |dir: &str| -> u64 {
        link[dir]["classes"].as_object().unwrap().values().map(|c| c["bytes_out"].as_u64().unwrap()).sum()
    };
    (Dir(d), carried("ab") + carried("ba"))
}

/// wanperf's total bytes over all flows (sampling-corrected).
fn wanperf_total(d: &Dir) -> f64 {
    wanperf_top(d, "src").iter().map(|r| r["bytes"].as_f64().unwrap()).sum()
}

/// nfdump's statistic `stat` (e.g. `srcip/bytes`) as value → (flows, packets, bytes).
fn nfdump_stat(d: &Dir, stat: &str) -> BTreeMap<String, (u64, u64, u64)> {
    let out = Command::new("nfdump")
        .args(["-R", &d.0.join("nf").display().to_string(), "-s", stat, "-n", "0", "-N", "-o", "csv"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut m = BTreeMap::new();
    for line in text.lines().skip(1) {
        let c: Vec<&str> = line.split(',').collect();
        if c.len() < 10 || c[0] == "flows" {
            break;
        }
        m.insert(c[4].trim().to_string(), (c[5].parse().unwrap(), c[7].parse().unwrap(), c[9].parse().unwrap()));
    }
    assert!(!m.is_empty(), "nfdump printed no {stat}: {text}");
    m
}

/// nfdump's records as "src:sport dst:dport proto" → bytes.
fn nfdump_records(d: &Dir) -> BTreeMap<String, u64> {
    let out = Command::new("nfdump")
        .args(["-R", &d.0.join("nf").display().to_string(), "-N", "-o", "csv", "-q"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut m = BTreeMap::new();
    for line in text.lines() {
        let c: Vec<&str> = line.split(',').collect();
        if c.len() < 13 || c[0] == "ts" {
            continue;
        }
        let proto = match c[7] {
            "TCP" => "6",
            "UDP" => "17",
            "ICMP" => "1",
            "ICMP6" => "58",
            p => p,
        };
        if proto == "1" || proto == "58" {
            continue; // ports of ICMP are type/code, printed differently by each tool
        }
        *m.entry(format!("{}:{} {}:{} {proto}", c[3], c[5], c[4], c[6], proto = proto)).or_insert(0) +=
            c[12].parse::<u64>().unwrap();
    }
    m
}

fn wanperf_top(d: &Dir, key: &str) -> Vec<Value> {
    let db = d.0.join("flows.sqlite");
    let out = run(
        &["flows", "top", "--db", &db.display().to_string(), "--key", key, "-n", "0", "--json"],
        Duration::from_secs(20),
    );
    serde_json::from_str::<Value>(&ok(&out)).unwrap().as_array().unwrap().clone()
}

fn collect_end(d: &Dir) -> Value {
    serde_json::from_str(&std::fs::read_to_string(d.0.join("collect.json")).unwrap()).unwrap()
}

#[test]
fn top_sources_destinations_and_pairs_equal_nfdumps_for_v5_v9_and_ipfix() {
    let _serial = serial();
    if !paths_available() || !have("softflowd") || !have("nfdump") || !have("iperf3") {
        return;
    }
    for version in ["5", "9", "10"] {
        let (d, emulated) = export(version, None);
        let end = collect_end(&d);
        let ex = &end["exporters"][0];
        let want_proto = match version {
            "5" => "netflow-v5",
            "9" => "netflow-v9",
            _ => "ipfix",
        };
        assert_eq!(ex["protocol"], want_proto, "{end}");
        assert_eq!(ex["lost"], 0, "loopback export lost nothing: {end}");
        assert_eq!(ex["malformed"], 0, "{end}");
        for (key, stat, field) in [("src", "srcip/bytes", "src"), ("dst", "dstip/bytes", "dst")] {
            let nf = nfdump_stat(&d, stat);
            let ours = wanperf_top(&d, key);
            let got: BTreeMap<String, (u64, u64, u64)> = ours
                .iter()
                .map(|r| {
                    let n = |k: &str| r[k].as_f64().unwrap().round() as u64;
                    (r[field].as_str().unwrap().to_string(), (n("flows"), n("packets"), n("bytes")))
                })
                .collect();
            if version == "5" {
                // v5 carries IPv4 only: nfdump and wanperf both see no IPv6 rows.
                assert!(got.keys().all(|k| !k.contains(':')), "{got:?}");
            }
            assert_eq!(got, nf, "v{version} top {key}: wanperf (left) and nfdump (right) differ");
            // The ranking: by bytes, ties by address.
            let bytes: Vec<f64> = ours.iter().map(|r| r["bytes"].as_f64().unwrap()).collect();
            assert!(bytes.windows(2).all(|w| w[0] >= w[1]), "{bytes:?}");
        }
        let nf = nfdump_records(&d);
        let got: BTreeMap<String, u64> = wanperf_top(&d, "pair")
            .iter()
            .filter(|r| !matches!(r["proto"].as_u64(), Some(1 | 58)))
            .map(|r| {
                let ep = |a: &str, p: &str| format!("{}:{}", r[a].as_str().unwrap(), r[p].as_u64().unwrap());
                (
                    format!("{} {} {}", ep("src", "sport"), ep("dst", "dport"), r["proto"].as_u64().unwrap()),
                    r["bytes"].as_f64().unwrap().round() as u64,
                )
            })
            .collect();
        assert_eq!(got, nf, "v{version} pairs: wanperf (left) and nfdump (right) differ");
        // The iperf3 TCP test (about 2 s at 100 Mbit/s) is the top pair.
        let pairs = wanperf_top(&d, "pair");
        assert_eq!(pairs[0]["dport"], 5201, "{pairs:?}");
        assert!(pairs[0]["bytes"].as_f64().unwrap() > 15e6, "{pairs:?}");
        // Every packet crossed the captured link and nothing else did: the flows' bytes are the
        // emulator's (IP packets both ways; v5 has no IPv6, which is a few hundred bytes here).
        let ours = wanperf_total(&d);
        eprintln!("v{version}: flows {ours} B, emulator {emulated} B");
        assert!(
            (ours - emulated as f64).abs() <= 0.03 * emulated as f64,
            "v{version}: flows {ours} B, emulator {emulated} B"
        );
    }
}

#[test]
fn sampled_ipfix_is_corrected_by_its_announced_rate() {
    let _serial = serial();
    if !paths_available() || !have("softflowd") || !have("nfdump") || !have("iperf3") {
        return;
    }
    let (d, emulated) = export("10", Some(10));
    let end = collect_end(&d);
    assert_eq!(end["exporters"][0]["sampling"], 10, "{end}");
    // nfdump stores the raw (sampled) counts: wanperf's corrected bytes are 10 times those.
    let raw: u64 = nfdump_stat(&d, "srcip/bytes").values().map(|v| v.2).sum();
    let ours = wanperf_total(&d);
    assert!((ours - 10.0 * raw as f64).abs() < 1.0, "wanperf {ours} B, nfdump raw {raw} B × 10");
    eprintln!("sampled: flows {ours} B, emulator {emulated} B");
    // 1 packet in 10 seen, scaled back up: within 3 % of what the emulator carried.
    assert!((ours - emulated as f64).abs() <= 0.03 * emulated as f64, "sampled flows {ours} B, emulator {emulated} B");
}

/// pmacctd's sfprobe (pmacct) samples r1's interface as an sFlow v5 agent: every packet, then
/// 1 in 10; wanperf's totals, corrected by the announced rate, are the emulator's bytes.
#[test]
fn sflow_from_pmacct_sfprobe_adds_up_to_the_emulators_bytes() {
    let _serial = serial();
    if !paths_available() || !have("pmacctd") || !have("iperf3") {
        return;
    }
    for rate in [1u32, 10] {
        let (d, emulated) = exercise("sflow.sh", &format!("sflow{rate}"), &format!("SAMP={rate}"));
        let end = collect_end(&d);
        let ex = &end["exporters"][0];
        assert_eq!(ex["protocol"], "sflow", "{end}");
        assert_eq!(ex["sampling"], rate, "{end}");
        assert_eq!((ex["lost"].as_u64(), ex["malformed"].as_u64()), (Some(0), Some(0)), "{end}");
        let ours = wanperf_total(&d);
        eprintln!("sFlow 1:{rate}: flows {ours} B, emulator {emulated} B");
        // Within 3 %, sampled or not (measured: 0.6–0.8 % short both ways; pmacctd samples 1 in
        // N packets by count, so 1:10 is no noisier here than 1:1).
        assert!(
            (ours - emulated as f64).abs() <= 0.03 * emulated as f64,
            "sFlow 1:{rate}: flows {ours} B, emulator {emulated} B"
        );
        let pairs = wanperf_top(&d, "pair");
        assert_eq!(pairs[0]["dport"], 5201, "{pairs:?}");
    }
}

#[test]
fn collector_errors_are_one_line() {
    let out = run(&["flows", "collect", "--listen", "127.0.0.1:0", "--bin", "0"], Duration::from_secs(10));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.trim().lines().count() == 1 && err.contains("--bin"), "{err}");
    let out = run(&["flows", "collect", "--listen", "192.0.2.1:1"], Duration::from_secs(10));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("cannot listen on 192.0.2.1:1"), "{err}");
    let out = run(&["flows", "top", "--db", "/nonexistent/flows.sqlite"], Duration::from_secs(10));
    assert!(!out.status.success());
}

const LOSSY: &str = "name = \"flows-loss\"
[[host]]
name = \"a\"
[[host]]
name = \"b\"
[[host]]
name = \"c\"
[[router]]
name = \"r1\"
[[link]]
a = \"a\"
b = \"r1\"
[[link]]
a = \"b\"
b = \"r1\"
[[link]]
a = \"r1\"
b = \"c\"
loss_ab = \"1%\"
";

/// Two exporters (r1 and b, both nfreplay: the same template id and layout, interleaved) send
/// NetFlow v9 to a collector behind a link that drops 1 % of packets: each exporter's loss is
/// counted on its own, and together they are what the emulator dropped.
#[test]
fn export_loss_of_two_exporters_equals_the_emulators_drops() {
    let _serial = serial();
    if !paths_available() || !have("softflowd") || !have("nfcapd") || !have("nfreplay") || !have("bash") {
        return;
    }
    let d = Dir(std::env::temp_dir().join(format!("wanperf-flows-loss-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&d.0);
    std::fs::create_dir_all(d.0.join("nf")).unwrap();
    let dir = d.0.display().to_string();
    let topo = topo_file("flows-loss", LOSSY);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/flows/loss.sh");
    let collector = format!(
        "exec {} flows collect --listen 0.0.0.0:0 --db {dir}/loss.sqlite --flush 1 --json > {dir}/collect.json 2> {dir}/collect.err",
        env!("CARGO_BIN_EXE_wanperf")
    );
    let replay_b = format!(
        "until [ -f {dir}/port ]; do sleep 0.05; done; nfreplay -r {dir}/all.nf -H $WANPERF_ADDR_C -p $(cat {dir}/port) -v 9 -d 300; touch {dir}/b.done"
    );
    let out = run(
        &[
            "net",
            "run",
            &topo,
            "--json",
            "--host",
            "r1",
            "--on",
            &format!("c={collector}"),
            "--on",
            &format!("b={replay_b}"),
            "--",
            "sh",
            "-c",
            &format!("D={dir} W={} sh {script}", env!("CARGO_BIN_EXE_wanperf")),
        ],
        Duration::from_secs(120),
    );
    let log = |f: &str| std::fs::read_to_string(d.0.join(f)).unwrap_or_default();
    assert!(
        out.status.success(),
        "run failed: {}\ncollect: {}\nsoftflowd: {}",
        String::from_utf8_lossy(&out.stderr),
        log("collect.err"),
        log("sf.log")
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr.lines().find(|l| l.starts_with("{\"event\":\"net_stats\"")).expect("net_stats");
    let stats: Value = serde_json::from_str(line).unwrap();
    let lossy = &stats["links"][2]["ab"]["classes"]["best_effort"];
    let n = |v: &Value, k: &str| v[k].as_i64().unwrap_or_else(|| panic!("{k} in {v}"));
    let (dropped, arrived) = (n(lossy, "random_losses"), n(lossy, "packets_in"));
    let end = collect_end(&d);
    let ex = end["exporters"].as_array().unwrap();
    assert_eq!(ex.len(), 2, "two exporters, kept apart: {end}");
    let records: i64 = log("records").trim().parse().unwrap();
    assert!(records > 5_000, "softflowd recorded {records} flows");
    // The lossless replay over r1's loopback: how many datagrams each exporter sent.
    let reference: Value = serde_json::from_str(&log("ref.json")).unwrap();
    let sent = n(&reference["exporters"][0], "expected");
    assert_eq!(n(&reference["exporters"][0], "lost"), 0, "{reference}");
    assert_eq!(n(&reference["exporters"][0], "records"), records, "{reference}");
    for e in ex {
        assert_eq!(e["protocol"], "netflow-v9", "{e}");
        assert_eq!(n(e, "malformed"), 0, "{e}");
        assert_eq!(n(e, "resets"), 0, "{e}");
        // Every datagram is received or counted lost, except lost ones at the very end (no
        // later sequence number tells of them).
        assert_eq!(n(e, "datagrams") + n(e, "lost"), n(e, "expected"), "{e}");
        assert!(n(e, "expected") <= sent && n(e, "expected") >= sent - 3, "{e}: {sent} sent");
        assert!(n(e, "records") > records / 2 && n(e, "records") <= records, "{e}: the file has {records}");
    }
    // Together, what the exporters did not deliver is what the emulator dropped on the link,
    // which also carried a few packets that were not export (IPv6 neighbour discovery): a drop
    // may have hit one of those instead.
    let stray = arrived - 2 * sent;
    assert!((0..=10).contains(&stray), "{arrived} packets crossed the link, {sent} × 2 were export");
    assert!(dropped > 0, "1 % of {arrived} packets: the emulator dropped none");
    let undelivered: i64 = ex.iter().map(|e| sent - n(e, "datagrams")).sum();
    assert!(
        undelivered <= dropped && undelivered >= dropped - stray,
        "{undelivered} datagrams undelivered; the emulator dropped {dropped}"
    );
    // The loss the collector reports is the loss there was, within 0.1 percentage points.
    let lost: i64 = ex.iter().map(|e| n(e, "lost")).sum();
    let expected: i64 = ex.iter().map(|e| n(e, "expected")).sum();
    let (ours, truth) = (lost as f64 / expected as f64, dropped as f64 / arrived as f64);
    eprintln!("export loss: {lost}/{expected} reported, {dropped}/{arrived} dropped");
    assert!((ours - truth).abs() <= 0.001, "loss {:.3} % reported, {:.3} % dropped", ours * 100.0, truth * 100.0);
}

/// a — r1 — b: the first link offloads (super-packets stand for several packets), the second
/// drops 1 % from r1 to b (records count what a link delivered, not what it dropped).
const EMULATED: &str = "name = \"emu-export\"
[[host]]
name = \"a\"
[[host]]
name = \"b\"
[[router]]
name = \"r1\"
[[link]]
a = \"a\"
b = \"r1\"
delay = \"1ms\"
rate = \"100mbit\"
[[link]]
a = \"r1\"
b = \"b\"
delay = \"1ms\"
loss_ab = \"1%\"
";

/// Runs tests/flows/emulator.sh in a network namespace of its own; returns the work
/// directory and `net run`'s counters.
fn emulator_export(tag: &str, topo: &str, extra: &str) -> (Dir, Value) {
    let d = Dir(std::env::temp_dir().join(format!("wanperf-flows-emu-{}-{tag}", std::process::id())));
    let _ = std::fs::remove_dir_all(&d.0);
    std::fs::create_dir_all(d.0.join("nf")).unwrap();
    let topo = topo_file(&format!("flows-emu-{tag}"), topo);
    let out = Command::new("timeout")
        .args(["120", "unshare", "-n", "sh", concat!(env!("CARGO_MANIFEST_DIR"), "/tests/flows/emulator.sh")])
        .env("D", &d.0)
        .env("W", env!("CARGO_BIN_EXE_wanperf"))
        .env("T", &topo)
        .env("EXTRA", extra)
        .output()
        .unwrap();
    let log = |f: &str| std::fs::read_to_string(d.0.join(f)).unwrap_or_default();
    assert!(
        out.status.success(),
        "{tag}: {}\nnet: {}\ncollect: {}\nnfcapd: {}",
        String::from_utf8_lossy(&out.stderr),
        log("net.err"),
        log("collect.err"),
        log("nfcapd.log")
    );
    let net = log("net.err");
    let line =
        net.lines().find(|l| l.starts_with("{\"event\":\"net_stats\"")).expect("net run --json prints its counters");
    let stats = serde_json::from_str(line).unwrap();
    (d, stats)
}

/// nfdump's records as (ingress, egress) → "proto-number src:sport dst:dport" → (packets, bytes).
fn nfdump_by_iface(d: &Dir) -> BTreeMap<(u32, u32), BTreeMap<String, (u64, u64)>> {
    let out = Command::new("nfdump")
        .args([
            "-R",
            &d.0.join("nf").display().to_string(),
            "-q",
            "-N",
            "-o",
            "fmt:%in %out %pr %sa %sp %da %dp %pkt %byt",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut m: BTreeMap<(u32, u32), BTreeMap<String, (u64, u64)>> = BTreeMap::new();
    for line in text.lines() {
        let c: Vec<&str> = line.split_whitespace().collect();
        if c.len() != 9 {
            continue;
        }
        let (Ok(i), Ok(o), Ok(p), Ok(b)) = (c[0].parse(), c[1].parse(), c[7].parse::<u64>(), c[8].parse::<u64>())
        else {
            continue;
        };
        let e =
            m.entry((i, o)).or_default().entry(format!("{} {}:{} {}:{}", c[2], c[3], c[4], c[5], c[6])).or_default();
        e.0 += p;
        e.1 += b;
    }
    assert!(!m.is_empty(), "nfdump printed no records: {text}");
    m
}

/// The emulator's own IPFIX and NetFlow v9 (one observation domain per link direction) equal
/// its counters exactly — packets and IP bytes per direction, after the lossy link's drops and
/// with offload super-packets counted as the packets they stand for — in wanperf's collector
/// and in nfdump, record for record, with no export loss.
#[test]
fn the_emulators_own_flow_export_equals_its_counters_exactly() {
    let _serial = serial();
    if !paths_available() || !have("nfcapd") || !have("iperf3") {
        return;
    }
    if !Command::new("unshare").args(["-n", "true"]).status().is_ok_and(|s| s.success()) {
        eprintln!("skipped: unshare -n is not allowed here");
        return;
    }
    // IPFIX from the command line; v9 from the topology's [export] table with 1 s timeouts
    // (long flows leave as several records), its collectors replaced by the command line's.
    let v9 = format!(
        "{EMULATED}[export]\ncollectors = [\"127.0.0.1:9\"]\nformat = \"v9\"\nactive_timeout = \"1s\"\nidle_timeout = \"1s\"\n"
    );
    for (tag, topo, extra, protocol) in
        [("ipfix", EMULATED.to_string(), "--export-format ipfix", "ipfix"), ("v9", v9, "", "netflow-v9")]
    {
        let (d, stats) = emulator_export(tag, &topo, extra);
        let export = &stats["export"];
        let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"));
        assert_eq!(n(export, "send_errors"), 0, "{export}");
        assert_eq!(n(export, "open"), 0, "every record left as the network stopped: {export}");
        let nfdump = nfdump_by_iface(&d);
        let db = d.0.join("flows.sqlite").display().to_string();
        // What each direction delivered, by the emulator's counters.
        let mut non_ip = (0, 0);
        let mut total_flow_pkts = 0;
        let mut dropped = 0;
        for (li, link) in stats["links"].as_array().unwrap().iter().enumerate() {
            for (di, dir) in ["ab", "ba"].iter().enumerate() {
                let classes = link[dir]["classes"].as_object().unwrap();
                let sum = |k: &str| classes.values().map(|c| n(c, k)).sum::<u64>();
                let (pkts, bytes) = (sum("packets_out"), sum("bytes_out"));
                dropped += sum("random_losses");
                let domain = 2 * li + di + 1;
                let ifaces = ((2 * li + 1 + di) as u32, (2 * li + 2 - di) as u32);
                let rows: Vec<Value> = serde_json::from_str::<Value>(&ok(&run(
                    &[
                        "flows",
                        "top",
                        "--db",
                        &db,
                        "--domain",
                        &domain.to_string(),
                        "--key",
                        "pair",
                        "-n",
                        "0",
                        "--json",
                    ],
                    Duration::from_secs(20),
                )))
                .unwrap()
                .as_array()
                .unwrap()
                .clone();
                let ours = |k: &str| rows.iter().map(|r| r[k].as_f64().unwrap()).sum::<f64>().round() as u64;
                let (fp, fb) = (ours("packets"), ours("bytes"));
                let theirs = nfdump.get(&ifaces).cloned().unwrap_or_default();
                let (np, nb) = theirs.values().fold((0, 0), |a, v| (a.0 + v.0, a.1 + v.1));
                eprintln!(
                    "{tag} link {li} {dir}: emulator {pkts} pkts {bytes} B; wanperf {fp} pkts {fb} B; nfdump {np} pkts {nb} B ({} records)",
                    theirs.len()
                );
                assert!(pkts > 0, "{tag}: traffic crossed link {li} {dir}");
                assert_eq!((fp, fb), (np, nb), "{tag} link {li} {dir}: wanperf and nfdump read the same export");
                // IP bytes: the link counts link-layer headers too on veth links (14 B each).
                assert!(fp <= pkts && fb <= bytes, "{tag} link {li} {dir}: more exported than carried");
                let l2 = bytes - fb;
                non_ip.0 += pkts - fp;
                if pkts == fp {
                    assert!(l2 == 0 || l2 == 14 * fp, "{tag} link {li} {dir}: {bytes} B carried, {fb} B exported");
                }
                total_flow_pkts += fp;
            }
        }
        assert!(dropped > 0, "{tag}: the lossy link dropped packets");
        // Non-IP frames (ARP, only on veth links) are what is missing, and nothing else.
        assert_eq!(non_ip.0, n(export, "non_ip_packets"), "{tag}: {export}");
        assert_eq!(total_flow_pkts, n(export, "packets"), "{tag}: {export}");
        // No export loss, and wanperf saw as many records as the exporter sent.
        let end = collect_end(&d);
        let ex = end["exporters"].as_array().unwrap();
        assert_eq!(ex.len(), 4, "one domain per link direction: {end}");
        for e in ex {
            assert_eq!(e["protocol"], protocol, "{e}");
            assert_eq!((n(e, "lost"), n(e, "malformed")), (0, 0), "{e}");
        }
        assert_eq!(ex.iter().map(|e| n(e, "records")).sum::<u64>(), n(export, "records"), "{tag}");
        // ICMP and ICMPv6 echo are there, and the v9 run's 1 s active timeout split the TCP flows.
        let all = nfdump.values().flat_map(|m| m.keys()).cloned().collect::<Vec<_>>();
        assert!(all.iter().any(|k| k.starts_with("1 ")), "{tag}: {all:?}");
        assert!(all.iter().any(|k| k.starts_with("58 ")), "{tag}: {all:?}");
        if tag == "v9" {
            assert!(n(export, "records") as usize > all.len(), "{tag}: records split by the active timeout");
        }
    }
}

/// `wanperf path run --export-flows`: a path's two directions as observation domains 1 (up) and
/// 2 (down) in NetFlow v9, each adding up to the path's own counters exactly.
#[test]
fn path_run_exports_both_directions_equal_to_its_counters() {
    use std::io::BufRead;
    let _serial = serial();
    if !paths_available() {
        return;
    }
    let d = Dir(std::env::temp_dir().join(format!("wanperf-flows-path-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&d.0);
    std::fs::create_dir_all(&d.0).unwrap();
    let db = d.0.join("path.sqlite").display().to_string();
    let mut collector = Command::new(env!("CARGO_BIN_EXE_wanperf"))
        .args(["flows", "collect", "--listen", "127.0.0.1:0", "--db", &db, "--flush", "1", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Ready when it says where it listens.
    let mut line = String::new();
    std::io::BufReader::new(collector.stderr.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.split_whitespace().find(|w| w.starts_with("127.0.0.1:")).unwrap_or_else(|| panic!("{line}"));
    let out = run(
        &[
            "path",
            "run",
            "--rtt",
            "10ms",
            "--rate",
            "50M",
            "--export-flows",
            addr,
            "--export-format",
            "v9",
            "--json",
            "--",
            "sh",
            "-c",
            "ping -c 20 -i 0.02 -q $WANPERF_PEER && ping -6 -c 10 -i 0.02 -q fd57:414e::2",
        ],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stats = path_stats(&out.stderr);
    let text = String::from_utf8_lossy(&out.stderr);
    let export: Value = serde_json::from_str(
        text.lines().find(|l| l.starts_with("{\"event\":\"flow_export\"")).expect("path run prints its export"),
    )
    .unwrap();
    // The records left as the path stopped: give the datagrams a moment, then stop the collector.
    std::thread::sleep(Duration::from_millis(500));
    Command::new("kill").arg(collector.id().to_string()).status().unwrap();
    let end = collector.wait_with_output().unwrap();
    let end: Value = serde_json::from_slice(&end.stdout).unwrap();
    assert_eq!(export["export"]["send_errors"], 0, "{export}");
    let ex = end["exporters"].as_array().unwrap();
    assert_eq!(ex.len(), 2, "{end}");
    for (domain, dir) in [(1, "up"), (2, "down")] {
        let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"));
        let classes = stats[dir]["classes"].as_object().unwrap();
        let (pkts, bytes) = classes.values().fold((0, 0), |a, c| (a.0 + n(c, "packets_out"), a.1 + n(c, "bytes_out")));
        let rows: Vec<Value> = serde_json::from_str::<Value>(&ok(&run(
            &["flows", "top", "--db", &db, "--domain", &domain.to_string(), "-n", "0", "--json"],
            Duration::from_secs(20),
        )))
        .unwrap()
        .as_array()
        .unwrap()
        .clone();
        let sum = |k: &str| rows.iter().map(|r| r[k].as_f64().unwrap()).sum::<f64>().round() as u64;
        eprintln!("path {dir}: emulator {pkts} pkts {bytes} B, exported {} pkts {} B", sum("packets"), sum("bytes"));
        assert!(pkts >= 30, "{dir}: the pings crossed");
        // Packets exactly; bytes exactly on TUN, 14 B more per packet on the path's counters
        // when it runs on veth (link-layer headers), where ARP is not exported either.
        let non_ip = n(&export["export"], "non_ip_packets");
        assert!(pkts >= sum("packets") && pkts - sum("packets") <= non_ip, "{dir}: {pkts} vs {}", sum("packets"));
        if non_ip == 0 {
            let gap = bytes - sum("bytes");
            assert!(gap == 0 || gap == 14 * pkts, "{dir}: {bytes} B carried, {} B exported", sum("bytes"));
        }
        let e = ex.iter().find(|e| e["domain"] == domain).unwrap_or_else(|| panic!("domain {domain}: {end}"));
        assert_eq!((e["protocol"].as_str(), n(e, "lost")), (Some("netflow-v9"), 0), "{e}");
    }
}
