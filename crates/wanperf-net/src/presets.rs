//! Built-in topologies: the seeds' networks, and a two-host network per `path` preset. Each
//! is topology-file text, so `wanperf net presets NAME` prints a file to start from.

use wanperf_emu::config::Rate;

/// A named topology.
#[derive(Debug, Clone)]
pub struct NetPreset {
    /// Name.
    pub name: String,
    /// One line: what it is and where its numbers come from.
    pub source: String,
    /// The topology file.
    pub toml: String,
}

const IEPM_2000: &str = r#"# The IEPM network of 2000 (seeds 000 and 004; docs/net.md says which numbers are the
# seeds' and which were chosen). SLAC and five remote sites; every SLAC path crosses the
# shared SLAC-ESnet ATM link, and CERN->SLAC has its bottleneck in Chicago.
name = "iepm-2000"

[[host]]
name = "slac"
[[host]]
name = "cern"
[[host]]
name = "in2p3"
[[host]]
name = "colorado"
[[host]]
name = "caltech"
[[host]]
name = "fnal"

[[router]]
name = "slac-gw"
[[router]]
name = "esnet"
[[router]]
name = "chicago"
[[router]]
name = "geneva"

[[link]]                      # SLAC's LAN
a = "slac"
b = "slac-gw"
rate = "100M"
delay = "100us"

[[link]]                      # seed 000: 43 Mbit/s ATM to ESnet, about 32 Mbit/s usable
a = "slac-gw"
b = "esnet"
rate = "32M"
delay = "1ms"
queue = "120kB"               # ~30 ms at 32 Mbit/s: one-way delay 80 -> 110 ms when full (seed 004)

[[link]]                      # ESnet to Chicago (OC-3)
a = "esnet"
b = "chicago"
rate = "155M"
delay = "24ms"
queue = "1MB"

[[link]]                      # transatlantic; seed 004: CERN->SLAC bottleneck 27 Mbit/s "in Chicago"
a = "chicago"
b = "geneva"
rate_ab = "45M"
rate_ba = "27M"
delay = "57.4ms"              # SLAC-CERN RTT 166 ms (seeds 000/004)
queue_ab = "300kB"
queue_ba = "470kB"            # ~140 ms at 27 Mbit/s: one-way delay 80 -> 220 ms when full (seed 004)

[[link]]                      # CERN's campus
a = "geneva"
b = "cern"
rate = "100M"
delay = "500us"

[[link]]                      # seed 000: IN2P3 reached via CERN
a = "geneva"
b = "in2p3"
rate = "34M"
delay = "4ms"

[[link]]
a = "esnet"
b = "colorado"
rate = "45M"
delay = "12ms"

[[link]]
a = "esnet"
b = "caltech"
rate = "45M"
delay = "5ms"

[[link]]
a = "chicago"
b = "fnal"
rate = "155M"
delay = "1ms"
"#;

const UMICH_2001: &str = r#"# Seed 001: SLAC (pharlap, GE) to U Michigan (speedy, multi-homed) over Abilene, ping RTT
# 67 ms. Speedy's name resolved to its slow interface (maxima 8.5 Mbit/s); its GE interface
# gave over 320 Mbit/s. WANPERF_ADDR_SPEEDY is the slow interface's address, as the name was.
name = "umich-2001"

[[host]]
name = "pharlap"
[[host]]
name = "speedy"

[[router]]
name = "slac-gw"
[[router]]
name = "abilene"
[[router]]
name = "umich-gw"

[[link]]
a = "pharlap"
b = "slac-gw"
rate = "1G"
delay = "100us"

[[link]]                      # SLAC -> CalREN / Internet2 at 622 Mbit/s
a = "slac-gw"
b = "abilene"
rate = "622M"
delay = "16ms"
queue = "2MB"

[[link]]                      # UMich's OC-12 to Internet2
a = "abilene"
b = "umich-gw"
rate = "622M"
delay = "17ms"
queue = "2MB"

[[link]]                      # the interface the name resolves to
a = "speedy"
b = "umich-gw"
name = "speedy-slow"
rate = "10M"
delay = "100us"
queue = "64kB"

[[link]]                      # the new GE interface
a = "speedy"
b = "umich-gw"
name = "speedy-ge"
rate = "1G"
delay = "100us"
cost = 2                      # routes prefer the slow one, as the name did
"#;

/// Every preset.
pub fn all() -> Vec<NetPreset> {
    let mut v = vec![
        NetPreset {
            name: "iepm-2000".into(),
            source: "seeds 000/004: SLAC, CERN, IN2P3, Colorado, Caltech, FNAL behind one SLAC-ESnet link; CERN->SLAC bottleneck in Chicago".into(),
            toml: IEPM_2000.into(),
        },
        NetPreset {
            name: "umich-2001".into(),
            source: "seed 001: a multi-homed host whose name resolves to its slow interface, 67 ms from SLAC".into(),
            toml: UMICH_2001.into(),
        },
    ];
    for p in wanperf_emu::presets::all() {
        let c = p.path();
        let rate = |r: &Rate| match r {
            Rate::Constant(b) => format!("{b}"),
            _ => "unlimited".into(),
        };
        let mut link = format!(
            "[[link]]\na = \"left\"\nb = \"right\"\ndelay_ab = \"{}us\"\ndelay_ba = \"{}us\"\nrate_ab = \"{}\"\nrate_ba = \"{}\"\nqueue = \"{}B\"\n",
            c.up.delay_ns / 1000,
            c.down.delay_ns / 1000,
            rate(&c.up.rate),
            rate(&c.down.rate),
            p.queue_bytes
        );
        if let Some(pol) = &c.up.policer {
            let sel = pol.selector.map(|s| format!(",{}", s.describe())).unwrap_or_default();
            let action = if pol.action == wanperf_emu::config::PolicerAction::Remark { ",action=remark" } else { "" };
            link.push_str(&format!("policer_ab = \"{},{}B{sel}{action}\"\n", pol.rate_bps, pol.burst_bytes));
        }
        let txq = c.txqueuelen.map(|q| format!("txqueuelen = {q}\n")).unwrap_or_default();
        v.push(NetPreset {
            name: p.name.to_string(),
            source: format!("the `path` preset: {}", p.source),
            toml: format!("# Two hosts, the path preset `{}`.\nname = \"{}\"\n\n[[host]]\nname = \"left\"\n{txq}[[host]]\nname = \"right\"\n\n{link}", p.name, p.name),
        });
    }
    v
}

/// The preset called `name`.
pub fn find(name: &str) -> Option<NetPreset> {
    all().into_iter().find(|p| p.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Plan;
    use crate::topo::Topology;
    use std::net::IpAddr;

    #[test]
    fn every_preset_parses_and_plans() {
        for p in all() {
            let t = Topology::parse(&p.toml, &|_| Err("no".into())).unwrap_or_else(|e| panic!("{}: {e}", p.name));
            Plan::new(&t).unwrap_or_else(|e| panic!("{}: {e}", p.name));
            assert_eq!(t.name, p.name);
        }
    }

    #[test]
    fn path_presets_keep_their_numbers() {
        for p in wanperf_emu::presets::all() {
            let n = find(p.name).unwrap();
            let t = Topology::parse(&n.toml, &|_| Err("no".into())).unwrap();
            let c = p.path();
            assert_eq!(t.links[0].ab, c.up, "{}", p.name);
            assert_eq!(t.links[0].ba.delay_ns, c.down.delay_ns, "{}", p.name);
            assert_eq!(t.links[0].ba.rate, c.down.rate, "{}", p.name);
            assert_eq!(t.nodes[0].txqueuelen, c.txqueuelen, "{}", p.name);
        }
    }

    #[test]
    fn iepm_2000_routes_every_slac_path_over_the_shared_link() {
        let t = Topology::parse(&find("iepm-2000").unwrap().toml, &|_| Err("no".into())).unwrap();
        let p = Plan::new(&t).unwrap();
        let slac = t.node("slac").unwrap();
        let shared = t.link("slac-gw-esnet").unwrap();
        for site in ["cern", "in2p3", "colorado", "caltech", "fnal"] {
            let dst = IpAddr::V4(p.addr_of(t.node(site).unwrap()).unwrap());
            let hops = p.walk(slac, dst).unwrap();
            assert!(hops.contains(&t.links[shared].a) && hops.contains(&t.links[shared].b), "{site}");
        }
        let cern = IpAddr::V4(p.addr_of(t.node("cern").unwrap()).unwrap());
        let names: Vec<&str> = p.walk(slac, cern).unwrap().iter().map(|&i| t.nodes[i].name.as_str()).collect();
        assert_eq!(names, ["slac", "slac-gw", "esnet", "chicago", "geneva", "cern"]);
    }
}
