//! Interop with iperf3 (Debian's 3.12 as the independent reference): `wanperf tput --iperf3`
//! against `iperf3 -s`, and `iperf3 -c` against `wanperf serve --iperf3-port`, on an emulated
//! 100 Mbit/s link so that both tools have one right answer; and the bad-input cases.

mod common;

use common::*;
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::Duration;

/// a — b over one emulated link: 100 Mbit/s, 2 ms each way, a flow-fair queue (with a
/// FIFO, a bidirectional test's ACKs wait behind the other direction's data and its upload
/// varies by ±8 % from run to run, iperf3's own as much as ours). UDP at 120 Mbit/s loses
/// about a sixth at the bottleneck: loss forced by the emulator, before which the UDP
/// handshakes (which iperf3's client does not repeat) have passed.
fn link() -> String {
    topo_file(
        "iperf3-link",
        r#"
[[host]]
name = "a"
[[host]]
name = "b"
[[link]]
a = "a"
b = "b"
delay = "2ms"
rate = "100M"
queue = "250kB"
aqm = "fq"
"#,
    )
}

/// Waits (bounded) until something accepts TCP connections on b's `port` (a wanperf server:
/// a connection that closes before its cookie is no test to it).
fn wait_port(port: u16) -> String {
    format!(
        "for i in $(seq 200); do (exec 3<>/dev/tcp/$WANPERF_ADDR_B/{port}) 2>/dev/null && break; sleep 0.05; done; "
    )
}

/// The matrix both directions of interop run: (name, flags common to both clients). The timed
/// TCP tests leave their first second out (both tools' --omit): the start-up on a busy
/// machine varies by a tenth of a second or more from run to run, either tool's, which is 3–5 %
/// of a 3 s test (CI: iperf3's own client 89.2 Mbit/s against wanperf's 94.0, bidirectional;
/// 92.0 against 95.2 with one stream, its first second at 91 where it is 104–106 in other
/// runs). Both tools run the omitted second before the 3 measured ones (-t counts what is
/// measured, as iperf3's does): both measure the steady rate the 100 Mbit/s link sets.
const MATRIX: &[(&str, &str)] = &[
    ("tcp1", "-t 3 --omit 1"),
    ("tcp4", "-t 3 -P 4 --omit 1"),
    ("reverse", "-t 3 -R --omit 1"),
    ("bidir", "-t 3 --bidir --omit 1"),
    ("bytes", "-n 20M"),
    ("udp", "-u -b 120M -l 1400 -t 3"),
];

fn iperf3_end(text: &str) -> Value {
    let v: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("iperf3 -J output: {e}\n{text}"));
    assert!(v.get("error").is_none(), "iperf3 reported an error: {}", v["error"]);
    v["end"].clone()
}

/// Receiver goodput of an iperf3 client's JSON, per direction: (up, down) bit/s.
fn iperf3_goodput(end: &Value, udp: bool) -> (f64, f64) {
    if udp {
        return (f(&end["sum"]["bits_per_second"]) * (1.0 - f(&end["sum"]["lost_percent"]) / 100.0), 0.0);
    }
    let down = end.get("sum_received_bidir_reverse").map_or(0.0, |s| f(&s["bits_per_second"]));
    (f(&end["sum_received"]["bits_per_second"]), down)
}

fn wanperf_goodput(end: &Value) -> (f64, f64) {
    let s = &end["summary"];
    match s.get("directions") {
        Some(d) => (f(&d["up"]["throughput_bps"]), f(&d["down"]["throughput_bps"])),
        None => (f(&s["throughput_bps"]), 0.0),
    }
}

/// Each test's summary in `iperf3 -s` text output, in order: (received, sent) bit/s, the
/// `[SUM]` line where there is one.
fn iperf3_server_counts(log: &str) -> Vec<(f64, f64)> {
    let rate = |line: &str| -> f64 {
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = words.iter().position(|w| w.ends_with("bits/sec")).unwrap_or_else(|| panic!("no rate in {line}"));
        let scale = match &words[at][..1] {
            "K" => 1e3,
            "M" => 1e6,
            "G" => 1e9,
            _ => 1.0,
        };
        words[at - 1].parse::<f64>().unwrap() * scale
    };
    let pick = |block: &str, kind: &str| -> f64 {
        let lines: Vec<&str> = block.lines().filter(|l| l.trim_end().ends_with(kind)).collect();
        lines.iter().find(|l| l.starts_with("[SUM]")).or(lines.first()).map_or(0.0, |l| rate(l))
    };
    // The last block is the server listening for a test that never came.
    log.split("Server listening on")
        .filter(|b| b.contains("- - - -"))
        .map(|b| (pick(b, "receiver"), pick(b, "sender")))
        .collect()
}

fn within(a: f64, b: f64, pct: f64) -> bool {
    (a - b).abs() <= pct / 100.0 * a.max(b)
}

#[test]
fn wanperf_against_an_iperf3_server_agrees_with_iperf3s_own_client() {
    let _serial = serial();
    if !paths_available() || !have("iperf3") {
        return;
    }
    let dir = tempdir("iperf3-client");
    {
        let f = link();
        let log = format!("{dir}/iperf3-s.log");
        let mut script = format!(". {IPERF3_SH}; IPERF3_LOG={log}; ");
        for (name, flags) in MATRIX {
            // Interleaved: wanperf, then iperf3's own client, on the same path and server.
            script += &format!(
                "iperf3_next && {BIN} tput $WANPERF_ADDR_B --iperf3 {flags} --json > {dir}/w-{name}.json || exit 1; \
                 iperf3c $WANPERF_ADDR_B {flags} -J > {dir}/i-{name}.json || exit 1; "
            );
        }
        let right = format!("b=exec iperf3 -s --forceflush > {log}");
        ok(&run(&["net", "run", &f, "--on", &right, "--", "bash", "-c", &script], Duration::from_secs(120)));
    }
    // iperf3's server prints its own count of every test; the tests alternate, wanperf's
    // client first.
    let server = iperf3_server_counts(&std::fs::read_to_string(format!("{dir}/iperf3-s.log")).unwrap());
    assert_eq!(server.len(), 2 * MATRIX.len(), "tests the iperf3 server counted: {server:?}");
    for (k, (name, _)) in MATRIX.iter().enumerate() {
        let w = std::fs::read_to_string(format!("{dir}/w-{name}.json")).unwrap();
        let i = std::fs::read_to_string(format!("{dir}/i-{name}.json")).unwrap();
        let recs: Vec<Value> = w.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let start = &recs[0];
        assert_eq!(start["server_version"], "iperf3", "{name}: the far end is marked as iperf3");
        assert_eq!(start["one_ended"], true);
        let we = end(&recs);
        assert_eq!(we["complete"], true, "{name}: {we}");
        let ie = iperf3_end(&i);
        let udp = *name == "udp";
        let (mut wu, mut wd) = wanperf_goodput(we);
        let (mut iu, mut id) = iperf3_goodput(&ie, udp);
        if *name == "reverse" {
            // One direction, the server's: both clients report it as their only one.
            (wu, wd, iu, id) = (wd, wu, id, iu);
        }
        // The same transfer, counted by iperf3's server: what iperf3's own client would have
        // printed for it. Where the server received, its count is the goodput (iperf3's
        // client prints exactly that: it agreed within 0.05 % in 19 runs); where it sent,
        // what it wrote includes its send buffer at the end (seen: 0.5–4.7 % more than the
        // client received, with iperf3's own client alike).
        let (su, sd) = server[2 * k];
        assert!(within(wu, su, 1.0), "{name}: wanperf {wu:.0} bit/s, iperf3's server received {su:.0} bit/s");
        assert!(
            (0.93 * sd..=1.01 * sd).contains(&wd),
            "{name}: wanperf received {wd:.0} bit/s of the {sd:.0} bit/s iperf3's server sent"
        );
        // Separate transfers on a shared, busy machine: the emulated path's own rate varies
        // from run to run when the emulator is late (seen: 83–97 Mbit/s with either client in
        // the same run), so wanperf only has to drive it about as well as iperf3 does.
        assert!(wu >= 0.85 * iu && wd >= 0.85 * id, "{name}: wanperf {wu:.0}/{wd:.0}, iperf3 {iu:.0}/{id:.0} bit/s");
        assert!(wu + wd > 50e6, "{name}: {wu} + {wd} bit/s on a 100 Mbit/s link");
        if udp {
            // The bottleneck drops what exceeds 100 Mbit/s: both see the same share lost.
            let wl = f(&we["summary"]["udp"]["loss_pct"]);
            let il = f(&ie["sum"]["lost_percent"]);
            assert!(wl > 5.0 && (wl - il).abs() < 2.0, "loss: wanperf {wl:.2} %, iperf3 {il:.2} %");
            assert!(f(&we["summary"]["udp"]["jitter_ms"]) > 0.0);
        }
        if *name == "bytes" {
            // iperf3's protocol ends a -n test when the sender has written the bytes; what is
            // still in flight then is not counted by the server (with iperf3's client too).
            let got = u(&we["summary"]["received_bytes"]);
            assert!(((20 << 20) * 3 / 4..=20 << 20).contains(&got), "the server received {got} of -n 20 MiB");
            assert_eq!(u(&we["summary"]["sent_bytes"]), 20 << 20, "wanperf sent exactly -n");
        }
        if *name == "reverse" {
            // Our own end's TCP state is there as usual: the receiver's view of a download.
            assert!(recs.iter().any(|r| r["event"] == "interval"));
        }
    }
}

#[test]
fn iperf3_clients_against_wanperf_serve_agree_with_an_iperf3_server() {
    let _serial = serial();
    if !paths_available() || !have("iperf3") {
        return;
    }
    let dir = tempdir("iperf3-server");
    {
        let f = link();
        let log = format!("{dir}/iperf3-s.log");
        let mut script = format!(". {IPERF3_SH}; IPERF3_LOG={log}; ") + &wait_port(5201);
        for (name, flags) in MATRIX {
            script += &format!(
                "iperf3 -c $WANPERF_ADDR_B -p 5201 {flags} -J > {dir}/w-{name}.json || exit 1; \
                 iperf3c $WANPERF_ADDR_B -p 5202 {flags} -J > {dir}/i-{name}.json || exit 1; "
            );
        }
        let right = format!(
            "b=iperf3 -s -p 5202 --forceflush > {log} & exec {BIN} serve --allow 198.18.0.0/15 --iperf3-port 5201"
        );
        ok(&run(&["net", "run", &f, "--on", &right, "--", "bash", "-c", &script], Duration::from_secs(120)));
    }
    for (name, _) in MATRIX {
        let ours = iperf3_end(&std::fs::read_to_string(format!("{dir}/w-{name}.json")).unwrap());
        let theirs = iperf3_end(&std::fs::read_to_string(format!("{dir}/i-{name}.json")).unwrap());
        let udp = *name == "udp";
        let (wu, wd) = iperf3_goodput(&ours, udp);
        let (iu, id) = iperf3_goodput(&theirs, udp);
        // Separate transfers: the emulated path's own rate varies from run to run when the
        // emulator is late (the client test saw 83–97 Mbit/s in one run). What the server
        // counts is checked on the same transfer below, against the client's own count.
        assert!(
            wu >= 0.85 * iu && wd >= 0.85 * id,
            "{name}: against wanperf {wu:.0}/{wd:.0} bit/s, against iperf3 {iu:.0}/{id:.0} bit/s"
        );
        if udp {
            let (l, lt) = (f(&ours["sum"]["lost_percent"]), f(&theirs["sum"]["lost_percent"]));
            assert!(
                l > 5.0 && (l - lt).abs() < 2.0,
                "iperf3 read {l:.2} % loss from wanperf's server, {lt:.2} % from iperf3's"
            );
            assert!(f(&ours["sum"]["jitter_ms"]) > 0.0, "wanperf's server measured jitter");
        } else if *name != "bytes" {
            // The server's results are the client's receiver line: consistent with what it sent.
            // "Sent" is what the sender wrote into its socket; its send buffer's content at
            // TEST_END never arrives (about 1 MiB here, 3 % of a 3 s test at 100 Mbit/s). Each
            // end starts counting when its own --omit second is over, so what was in flight
            // then is received but was not counted as sent: the link's queue and its
            // bandwidth-delay product (250 + 50 kB), and the sender's send buffer, written
            // before its boundary (autotuned; it carries most where the server sends: CI
            // 69 504 bytes more received than sent one way, a run here 424 584 with -R).
            const IN_FLIGHT: f64 = 300_000.0 + 1_048_576.0;
            let sent = f(&ours["sum_sent"]["bytes"]);
            let recv = f(&ours["sum_received"]["bytes"]);
            assert!(recv <= sent + IN_FLIGHT && recv >= sent * 0.9, "{name}: sent {sent}, received {recv}");
        }
        if *name == "bytes" {
            // iperf3's client counts -n as written into its socket; what is still in its send
            // buffer when TEST_END reaches the server is never counted (1.1 MiB of 20 seen in
            // CI, with iperf3's own server alike), so the received share is only bounded.
            assert_eq!(f(&ours["sum_sent"]["bytes"]) as u64, 20 << 20);
            let got = f(&ours["sum_received"]["bytes"]) as u64;
            assert!(((20 << 20) * 3 / 4..=20 << 20).contains(&got), "wanperf's server received {got} of -n 20 MiB");
        }
    }
}

#[test]
fn busy_foreign_and_authenticating_iperf3_servers_get_one_clear_line() {
    let _serial = serial();
    if !have("iperf3") {
        return;
    }
    let dir = tempdir("iperf3-bad");
    // A wanperf server is not an iperf3 server.
    let w = Server::start(&["--iperf3-port", "0"]);
    let out = run(&["tput", "127.0.0.1", "-p", &w.port_s(), "--iperf3", "-t", "1"], Duration::from_secs(20));
    one_line_error(&out, "does not speak iperf3's protocol");
    // Whole seconds only: iperf3 takes integers.
    let out = run(&["tput", "127.0.0.1", "--iperf3", "-t", "1.5"], Duration::from_secs(20));
    one_line_error(&out, "whole seconds");
    // Our iperf3 port is busy while an iperf3 test runs on it; iperf3 says so.
    let i3 = w.iperf3_port.expect("the server printed its iperf3 port").to_string();
    let mut long = Kill(
        Command::new("iperf3")
            .args(["-c", "127.0.0.1", "-p", &i3, "-t", "6", "-b", "10M", "--forceflush"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    assert!(announced(long.0.stdout.take().unwrap(), "sec"), "the iperf3 client ended without a report");
    let busy = Command::new("iperf3").args(["-c", "127.0.0.1", "-p", &i3, "-t", "1"]).output().unwrap();
    assert!(!busy.status.success());
    assert!(String::from_utf8_lossy(&busy.stderr).contains("busy"), "{}", String::from_utf8_lossy(&busy.stderr));
    drop(long);

    // A busy iperf3 server.
    let (srv, port) = iperf3_server(&[]);
    let mut long = Kill(
        Command::new("iperf3")
            .args(["-c", "127.0.0.1", "-p", &port, "-t", "6", "-b", "10M", "--forceflush"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    assert!(announced(long.0.stdout.take().unwrap(), "sec"), "the iperf3 client ended without a report");
    let out = run(&["tput", "127.0.0.1", "--iperf3", "-p", &port, "-t", "1"], Duration::from_secs(20));
    one_line_error(&out, "busy");
    drop(long);
    drop(srv);

    // An iperf3 server that requires authentication (3.12: PKCS#1 v1.5 padding; wanperf
    // tries OAEP first and falls back).
    let key = format!("{dir}/private.pem");
    let public = format!("{dir}/public.pem");
    let users = format!("{dir}/users.csv");
    assert!(Command::new("openssl")
        .args(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", &key])
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success());
    assert!(Command::new("openssl")
        .args(["pkey", "-in", &key, "-pubout", "-out", &public])
        .status()
        .unwrap()
        .success());
    std::fs::write(&users, format!("{}\n", wanperf_iperf3_line("mary", "s3cret"))).unwrap();
    // A server of its own for each client: iperf3 reopens its listening socket after every
    // test, and a client that comes in between is reset.
    let server = || iperf3_server(&["--rsa-private-key-path", &key, "--authorized-users-path", &users]);
    let (_srv, port) = server();
    let out = run(&["tput", "127.0.0.1", "--iperf3", "-p", &port, "-t", "1"], Duration::from_secs(20));
    one_line_error(&out, "authentication");
    let with = |password: &str| {
        let (_srv, port) = server();
        let mut c = Command::new(BIN);
        c.args(["tput", "127.0.0.1", "--iperf3", "-p", &port, "-t", "1", "--json"])
            .args(["--username", "mary", "--rsa-public-key-path", &public])
            .env("IPERF3_PASSWORD", password);
        c.output().unwrap()
    };
    let good = with("s3cret");
    assert!(good.status.success(), "{}", String::from_utf8_lossy(&good.stderr));
    let recs = records(&good);
    assert!(f(&end(&recs)["summary"]["throughput_bps"]) > 0.0);
    let bad = with("wrong");
    one_line_error(&bad, "tried OAEP and PKCS#1 v1.5 padding");
}

fn one_line_error(out: &std::process::Output, want: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "expected a failure, got success: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line, got: {err}");
    assert!(lines[0].contains(want), "`{want}` not in `{}`", lines[0]);
    assert!(!err.contains("panicked"), "{err}");
}

fn wanperf_iperf3_line(user: &str, password: &str) -> String {
    // iperf3's credentials file: user,sha256("{user}password"), computed with sha256sum.
    let out =
        Command::new("sh").args(["-c", &format!("printf '%s' '{{{user}}}{password}' | sha256sum")]).output().unwrap();
    let hex = String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap().to_string();
    format!("{user},{hex}")
}

fn tempdir(name: &str) -> String {
    let d = std::env::temp_dir().join(format!("wanperf-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d.to_string_lossy().into_owned()
}

#[test]
fn load_against_an_iperf3_server_probes_by_icmp() {
    let _serial = serial();
    if !have("iperf3") {
        return;
    }
    let (_srv, port) = iperf3_server(&[]);
    let out = run(
        &["load", "127.0.0.1", "--iperf3", "-p", &port, "--load-time", "1s", "--idle-time", "1s", "--json"],
        Duration::from_secs(30),
    );
    let recs = records(&out);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(recs[0]["server_version"], "iperf3");
    let cell = recs.iter().find(|r| r["event"] == "cell").expect("a cell record");
    assert!(f(&cell["throughput_bps"]) > 0.0, "the load ran over iperf3's protocol: {cell}");
    // iperf3 has no echo: the probes are ICMP, and they came back.
    let answered = recs.iter().filter(|r| r["event"] == "probe" && r["status"] == "ok").count();
    assert!(answered >= 10, "{answered} probes answered");
    // Fractional phases cannot be asked of iperf3.
    let out = run(&["load", "127.0.0.1", "--iperf3", "-p", &port, "--load-time", "1.5s"], Duration::from_secs(10));
    one_line_error(&out, "whole seconds");
}
