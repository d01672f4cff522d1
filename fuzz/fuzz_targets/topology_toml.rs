//! A topology file (`wanperf net run FILE`): TOML text, validated node by node and link by link.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::net::IpAddr;
use wanperf_net::plan::Plan;
use wanperf_net::topo::Topology;

/// Every trace file "exists" and holds a tiny valid trace, so `trace` keys are exercised.
fn read(_: &str) -> Result<String, String> {
    Ok("1\n2\n".into())
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(t) = Topology::parse(text, &read) else { return };
    // A topology that parses has an address plan, and its routes take every node to every
    // address without loops or dead ends (checked on the first 16 × 16).
    let p = Plan::new(&t).expect("parse checked the plan");
    for s in 0..t.nodes.len().min(16) {
        for i in p.ifaces.iter().take(16) {
            assert!(p.walk(s, IpAddr::V4(i.v4)).is_some(), "node {s} cannot reach {}", i.v4);
            assert!(p.walk(s, IpAddr::V6(i.v6)).is_some(), "node {s} cannot reach {}", i.v6);
        }
    }
    // Parsing is deterministic.
    assert_eq!(Topology::parse(text, &read).ok(), Some(t));
});
