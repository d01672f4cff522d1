//! OWAMP: `wanperf ping --owamp` against `wanperf serve --owamp-port`, on loopback and
//! through an emulated path with different delays and losses each way.

mod common;
use common::*;
use serde_json::Value;
use std::time::Duration;

fn owamp_summary(out: &std::process::Output) -> Value {
    end(&records(out))["owamp"].clone()
}

#[test]
fn both_directions_on_loopback() {
    let s = Server::start(&["--owamp-port", "0"]);
    let port = s.owamp_port.expect("the OWAMP port is announced").to_string();
    let out = run(
        &["ping", "127.0.0.1", "--owamp", "-p", &port, "-c", "40", "-i", "10ms", "-W", "1", "--json"],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let o = owamp_summary(&out);
    for dir in ["to", "from"] {
        let w = &o[dir];
        assert_eq!((u(&w["sent"]), u(&w["received"]), u(&w["duplicates"])), (40, 40, 0), "{dir}: {o}");
        // One clock on both ends: loopback one-way delays are tens of µs.
        let d = f(&w["owd_ms"]["median"]);
        assert!((0.0..1.0).contains(&d), "{dir}: {d} ms");
        // Sent with TTL 255, received on the same host: no hops.
        assert_eq!(u(&w["hops"]), 0, "{dir}: {o}");
    }
    // Nothing listens: one clear line.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
    let out = run(&["ping", "127.0.0.1", "--owamp", "-p", &free, "-c", "3"], Duration::from_secs(20));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("no OWAMP server answers"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn a_server_refuses_clients_outside_its_allow_list() {
    // Loopback only is the default; the client comes from 127.0.0.1, so bind the server to
    // an address the allow list excludes by allowing something else.
    let s = Server::start(&["--owamp-port", "0", "--allow", "198.18.0.0/15"]);
    let port = s.owamp_port.unwrap().to_string();
    let out = run(&["ping", "127.0.0.1", "--owamp", "-p", &port, "-c", "3"], Duration::from_secs(20));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("refused the connection"), "{err}");
}

/// 30 ms and 3 % loss one way, 10 ms and 1 % the other: each direction's delay never below
/// the configured one and at most 0.3 ms above (plus the emulator's own stated median
/// lateness; common::assert_one_way) and its loss the emulator's own count.
#[test]
fn one_way_delays_and_losses_on_an_emulated_path() {
    if !paths_available() {
        return;
    }
    let link =
        ["--delay-up", "30ms", "--delay-down", "10ms", "--loss-up", "3%", "--loss-down", "1%", "--seed", "5", "--json"];
    let ping = ["ping", "198.18.0.2", "--owamp", "-c", "1000", "-i", "2ms", "-W", "1", "--json"];
    let out = on_path_serving(&["--owamp-port", "861"], &link, &ping, Duration::from_secs(90));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let o = owamp_summary(&out);
    let (to, from) = (&o["to"], &o["from"]);
    let (fwd, rev) = (f(&to["owd_ms"]["median"]), f(&from["owd_ms"]["median"]));
    assert_one_way(&out.stderr, (fwd, rev), (30.0, 10.0), &o);
    let drops = |d: &str| random_losses(&out.stderr, d);
    let lost = |w: &Value| u(&w["sent"]) - u(&w["received"]);
    // The emulator's drops are the test packets' (and the control connection's and the hosts'
    // chatter's, a few): each direction's loss is at most its drops and close to them.
    assert!(lost(to) <= drops("up") && lost(to) + 5 >= drops("up"), "to: {} lost, emulator {}", lost(to), drops("up"));
    assert!(
        lost(from) <= drops("down") && lost(from) + 5 >= drops("down"),
        "from: {} lost, emulator {}",
        lost(from),
        drops("down")
    );
    let within = |k: u64, p: f64, n: f64| (k as f64 - n * p).abs() <= 4.0 * (n * p * (1.0 - p)).sqrt();
    assert!(within(lost(to), 0.03, 1000.0) && within(lost(from), 0.01, 1000.0), "{o}");
}
