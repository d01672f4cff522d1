//! What cross traffic did (pure): the rate each `[[traffic]]` entry was set to and the rate it
//! carried while the network ran — a generator's injected packets from the links' counters, TCP's
//! received bytes as its `tput` reported them — and the entries that carried nothing.

use crate::topo::{Topology, Traffic};
use serde::{Deserialize, Serialize};
use wanperf_emu::fabric::LinkStats;
use wanperf_units::fmt_rate;

/// What one cross-traffic entry did: what it was told to send and what it carried.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TrafficReport {
    /// Its name.
    pub name: String,
    /// Where it runs: `link slac-esnet slac-gw → esnet` or `tcp slac → cern, 2 flows`.
    pub what: String,
    /// The rate it was set to, bit/s (None: TCP as fast as it goes).
    pub set_bps: Option<f64>,
    /// The rate it carried while it ran, bit/s: a generator's injected packets, TCP's
    /// received bytes (as its `tput` reported them).
    pub carried_bps: f64,
    /// Seconds it ran.
    pub active_s: f64,
    /// Bytes it carried.
    pub bytes: u64,
    /// Whether its schedule started while the network ran.
    pub started: bool,
}

impl TrafficReport {
    /// One line: `bulk (link …): set 40.0 Mbit/s, carried 39.9 Mbit/s over 10.0 s`.
    pub fn line(&self) -> String {
        let set = self.set_bps.map_or("as fast as TCP goes".to_string(), |b| format!("set {}", fmt_rate(b)));
        format!(
            "traffic {} ({}): {set}, carried {} over {:.1} s",
            self.name,
            self.what,
            fmt_rate(self.carried_bps),
            self.active_s
        )
    }
}

/// What each cross-traffic entry of `t` did over the `elapsed_s` seconds the network ran:
/// generators from the links' `injected` counters, TCP from `tcp` (name → bytes, seconds).
/// Pure.
pub fn traffic_reports(
    t: &Topology,
    stats: &[LinkStats],
    tcp: &[(String, u64, f64)],
    elapsed_s: f64,
) -> Vec<TrafficReport> {
    let span = |start: u64, stop: Option<u64>| {
        let (a, b) = (start as f64 / 1e9, stop.map_or(elapsed_s, |s| (s as f64 / 1e9).min(elapsed_s)));
        (b - a).max(0.0)
    };
    t.traffic
        .iter()
        .map(|x| match x {
            Traffic::Link { name, link, ab, rate_bps, packet, start_ns, stop_ns, .. } => {
                let started = (*start_ns as f64 / 1e9) < elapsed_s;
                let l = &t.links[*link];
                let (a, b) = (&t.nodes[l.a].name, &t.nodes[l.b].name);
                let (from, to) = if *ab { (a, b) } else { (b, a) };
                let injected = stats.get(*link).map_or(0, |s| if *ab { s.ab.injected } else { s.ba.injected });
                let active_s = span(*start_ns, *stop_ns);
                let bytes = injected * *packet as u64;
                TrafficReport {
                    name: name.clone(),
                    what: format!("link {} {from} → {to}", l.name),
                    set_bps: Some(*rate_bps as f64),
                    carried_bps: if active_s > 0.0 { bytes as f64 * 8.0 / active_s } else { 0.0 },
                    active_s,
                    bytes,
                    started,
                }
            }
            Traffic::Tcp { name, from, to, flows, rate_bps, start_ns, .. } => {
                let (bytes, secs) = tcp.iter().find(|(n, _, _)| n == name).map_or((0, 0.0), |(_, b, s)| (*b, *s));
                TrafficReport {
                    name: name.clone(),
                    what: format!(
                        "tcp {} → {}, {flows} flow{}",
                        t.nodes[*from].name,
                        t.nodes[*to].name,
                        if *flows == 1 { "" } else { "s" }
                    ),
                    set_bps: rate_bps.map(|r| r as f64),
                    carried_bps: if secs > 0.0 { bytes as f64 * 8.0 / secs } else { 0.0 },
                    active_s: secs,
                    bytes,
                    started: (*start_ns as f64 / 1e9) < elapsed_s,
                }
            }
        })
        .collect()
}

/// The cross traffic that carried nothing, one sentence each (it never loaded the network).
pub fn traffic_not_acted(reports: &[TrafficReport]) -> Vec<String> {
    reports
        .iter()
        .filter(|r| r.bytes == 0)
        .map(|r| {
            let when =
                if r.active_s == 0.0 { "its schedule never started while the network ran" } else { "nothing arrived" };
            format!("traffic {} ({}) carried nothing: {when}", r.name, r.what)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NET: &str = "[[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n[[link]]\na = \"a\"\nb = \"b\"\n\
        [[traffic]]\nname = \"bulk\"\nlink = \"a-b\"\ndirection = \"ba\"\nrate = \"8M\"\npacket = 1000\nstart = \"1s\"\n\
        [[traffic]]\nfrom = \"a\"\nto = \"b\"\nstart = \"1h\"\n";

    #[test]
    fn generators_count_what_they_injected_and_idle_traffic_is_said() {
        let t = Topology::parse(NET, &|_| Err("none".into())).unwrap();
        let mut s = LinkStats { name: "a-b".into(), ..Default::default() };
        // 9 s after its start at 1 s, 8 Mbit/s of 1000-byte packets is 9000 packets.
        s.ba.injected = 9000;
        let r = traffic_reports(&t, &[s], &[("traffic2".into(), 0, 0.0)], 10.0);
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].name.as_str(), r[0].what.as_str()), ("bulk", "link a-b b → a"));
        assert!((r[0].carried_bps - 8e6).abs() < 1.0 && (r[0].active_s - 9.0).abs() < 1e-9, "{:?}", r[0]);
        assert_eq!(r[1].name, "traffic2");
        let idle = traffic_not_acted(&r);
        assert_eq!(
            idle,
            ["traffic traffic2 (tcp a → b, 1 flow) carried nothing: its schedule never started while the network ran"]
        );
        assert!(r[0].line().contains("set 8.00 Mbit/s, carried 8.00 Mbit/s over 9.0 s"), "{}", r[0].line());
    }
}
