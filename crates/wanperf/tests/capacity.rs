//! `wanperf capacity` on emulated networks with a known answer: the narrow link's rate within
//! 2 % and its hop named, with and without Poisson cross traffic on it; the seed 004 check on
//! the `iepm-2000` preset (CERN→SLAC about 27 Mbit/s, at Chicago), each with the reverse
//! direction's capacity from the server's trains; bad input.

mod common;

use common::*;
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

/// a — r1 — r2 — r3 — r4 — b; link `i` (0: a–r1 … 4: r4–b) has `rates[i]`, and `extra` is
/// appended (cross traffic).
fn chain(name: &str, rates: [&str; 5], extra: &str) -> String {
    let mut t = format!("name = \"{name}\"\n[[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n");
    for r in 1..=4 {
        t.push_str(&format!("[[router]]\nname = \"r{r}\"\n"));
    }
    let nodes = ["a", "r1", "r2", "r3", "r4", "b"];
    for (i, rate) in rates.iter().enumerate() {
        t.push_str(&format!(
            "[[link]]\na = \"{}\"\nb = \"{}\"\nrate = \"{rate}\"\ndelay = \"{}ms\"\nqueue = \"300kB\"\n",
            nodes[i],
            nodes[i + 1],
            i + 1
        ));
    }
    t.push_str(extra);
    t
}

/// `wanperf capacity --json` from `from` to a `wanperf serve` on `to` (at `addr`) in `net`.
fn capacity(net: &str, from: &str, to: &str, addr: &str) -> Value {
    let mut cmd = Command::new(BIN);
    cmd.args(["net", "exec", net, to, "--", BIN, "serve", "--listen", "0.0.0.0:0", "--allow", "198.18.0.0/15"]);
    let server = Server::spawn(cmd);
    let out = run(
        &["net", "exec", net, from, "--", BIN, "capacity", addr, "-p", &server.port_s(), "--json"],
        Duration::from_secs(60),
    );
    let text = ok(&out);
    let v: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(v["event"], "capacity");
    v["report"].clone()
}

fn within(got: f64, want: f64, rel: f64) -> bool {
    (got - want).abs() <= rel * want
}

#[test]
fn the_narrow_link_is_measured_and_named_with_and_without_cross_traffic() {
    let _g = serial();
    if !paths_available() {
        return;
    }
    // 10 Mbit/s into hop 3 (r3, whose address on that link is 198.18.2.2); then the same with
    // Poisson cross traffic at 30 % of it on that link.
    let cross =
        "[[traffic]]\nlink = \"r2-r3\"\ndirection = \"ab\"\nrate = \"3M\"\npattern = \"poisson\"\npacket = 1500\n";
    for (tag, extra) in [("plain", ""), ("cross", cross)] {
        let f = topo_file(&format!("cap-{tag}"), &chain("cap", ["200M", "200M", "10M", "200M", "200M"], extra));
        let net = format!("cap{tag}{}", std::process::id());
        let _up = Up::new(&f, &net);
        let r = capacity(&net, "a", "b", "198.18.4.2");
        let c = r["capacity"]["bps"].as_f64().unwrap();
        assert!(within(c, 10e6, 0.02), "{tag}: capacity {c} bit/s, not 10 Mbit/s ±2 %: {r}");
        let b = &r["bottleneck"];
        assert_eq!(b["ttl"], 3, "{tag}: {r}");
        assert_eq!(b["address"], "198.18.2.2", "{tag}: {r}");
        assert_eq!(r["hops"], 5, "{tag}: {r}");
        // The way back (trains from the server) has the same narrow link, without the cross
        // traffic (it runs a → b only).
        let back = r["reverse"]["capacity"]["bps"].as_f64().unwrap_or(0.0);
        assert!(within(back, 10e6, 0.02), "{tag}: capacity back {back} bit/s: {r}");
        // The available bandwidth is below the capacity, and lower with the cross traffic.
        let a = r["available"]["bps"].as_f64().unwrap();
        assert!(a > 0.0 && a <= c * 1.001, "{tag}: available {a} of {c}");
        if tag == "cross" {
            assert!(a < 0.95 * c, "cross traffic at 30 % left {a} of {c} available");
        }
        // The default budget holds: 1 MB (10^6 bytes) and 10 s (and a little for the last phase's
        // answers).
        assert!(r["bytes_sent"].as_u64().unwrap() <= 1_000_000, "{r}");
        assert!(r["seconds"].as_f64().unwrap() < 12.0, "{r}");
    }
}

#[test]
fn a_fast_narrow_link_on_the_first_hop() {
    let _g = serial();
    if !paths_available() {
        return;
    }
    let f = topo_file("cap-first", &chain("capf", ["100M", "300M", "300M", "300M", "300M"], ""));
    let net = format!("capf{}", std::process::id());
    let _up = Up::new(&f, &net);
    let r = capacity(&net, "a", "b", "198.18.4.2");
    let c = r["capacity"]["bps"].as_f64().unwrap();
    assert!(within(c, 100e6, 0.02), "capacity {c} bit/s, not 100 Mbit/s ±2 %: {r}");
    assert_eq!(r["bottleneck"]["ttl"], 1, "{r}");
    assert_eq!(r["bottleneck"]["address"], "198.18.0.2", "{r}");
}

#[test]
fn seed_004_cern_to_slac_is_27_mbit_at_chicago() {
    let _g = serial();
    if !paths_available() {
        return;
    }
    let net = format!("cap4{}", std::process::id());
    let _up = Up::new("iepm-2000", &net);
    // CERN → SLAC: Geneva → Chicago carries 27 Mbit/s (the reverse 45); Chicago's address on
    // that link is 198.18.3.1.
    let r = capacity(&net, "cern", "slac", "198.18.0.1");
    let c = r["capacity"]["bps"].as_f64().unwrap();
    assert!(within(c, 27e6, 0.02), "CERN→SLAC {c} bit/s: {r}");
    assert_eq!(r["bottleneck"]["address"], "198.18.3.1", "{r}");
    // The same run's trains from SLAC back: the 32 Mbit/s ATM link, the seed's asymmetry.
    let back = r["reverse"]["capacity"]["bps"].as_f64().unwrap_or(0.0);
    assert!(within(back, 32e6, 0.02), "SLAC→CERN from CERN {back} bit/s: {r}");
    // And SLAC → CERN: SLAC's 32 Mbit/s ATM link into ESnet (198.18.1.2).
    let r = capacity(&net, "slac", "cern", "198.18.4.2");
    let c = r["capacity"]["bps"].as_f64().unwrap();
    assert!(within(c, 32e6, 0.02), "SLAC→CERN {c} bit/s: {r}");
    assert_eq!(r["bottleneck"]["address"], "198.18.1.2", "{r}");
    let back = r["reverse"]["capacity"]["bps"].as_f64().unwrap_or(0.0);
    assert!(within(back, 27e6, 0.02), "CERN→SLAC from SLAC {back} bit/s: {r}");
}

#[test]
fn bad_input_gets_one_line() {
    // Nobody answers on this port: one line, exit 1, within the RTT phase's 3 s.
    let out = run(&["capacity", "127.0.0.1", "-p", "9", "--no-locate"], Duration::from_secs(20));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("no answer from the UDP echo of `wanperf serve`"), "{err}");
    for (args, want) in [
        (vec!["capacity", "127.0.0.1", "--budget", "10"], "--budget"),
        (vec!["capacity", "127.0.0.1", "--time", "0"], "--time"),
        (vec!["capacity", "127.0.0.1", "--size", "50"], "--size"),
    ] {
        let out = run(&args, Duration::from_secs(20));
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    // Against a local server: a loopback path is measured (its capacity is whatever this host
    // does; only that an estimate comes out).
    let s = Server::start(&[]);
    let out = run(&["capacity", "127.0.0.1", "-p", &s.port_s(), "--json", "--no-locate"], Duration::from_secs(30));
    let v: Value = serde_json::from_str(ok(&out).lines().last().unwrap()).unwrap();
    assert!(v["report"]["capacity"]["bps"].as_f64().unwrap() > 1e6, "{v}");
    // The server gave its token and sent trains back.
    assert!(v["report"]["reverse"]["capacity"]["bps"].as_f64().unwrap_or(0.0) > 1e6, "{v}");
    // --no-reverse asks for none.
    let out = run(
        &["capacity", "127.0.0.1", "-p", &s.port_s(), "--json", "--no-locate", "--no-avail", "--no-reverse"],
        Duration::from_secs(30),
    );
    let v: Value = serde_json::from_str(ok(&out).lines().last().unwrap()).unwrap();
    assert!(v["report"]["reverse"].is_null(), "{v}");
}
