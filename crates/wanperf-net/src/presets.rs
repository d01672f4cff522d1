//! Built-in topologies: the seeds' networks, and a two-host network per `path` preset. Each
//! is topology-file text, so `wanperf net presets NAME` prints a file to start from.

use wanperf_emu::config::{LossModel, Rate};

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

const IEPM_2000: &str = r#"# The IEPM network of 2000 (seeds 000 and 004). Each number cites its seed and line, or says
# it is assumed (docs/net.md, Presets). SLAC has two uplinks (seed 000 line 10): the shared ATM
# link to ESnet, which every SLAC path but Caltech's crosses, and one to CalREN/Internet2, which
# Caltech's takes (seed 000 line 83: 62.8 Mbit/s to Caltech, more than the ATM link's 32).
# CERN->SLAC has its bottleneck in Chicago.
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
[[router]]
name = "calren"

[[link]]                      # SLAC's LAN: assumed, above every bottleneck
a = "slac"
b = "slac-gw"
rate = "100M"
delay = "100us"

[[link]]                      # seed 004 line 53: 43 Mbit/s ATM, 3.5 reserved, ~20 % overhead: ~32
a = "slac-gw"
b = "esnet"
rate = "32M"
delay = "1ms"                 # assumed
queue = "120kB"               # 30 ms at 32M. Seed 004 line 48: SLAC->CERN one-way 80 -> 110 ms
                              # loaded; seed 000 line 50: Colorado->SLAC x3-4, (13.1 + 30) / 13.1 = 3.3

[[link]]                      # ESnet to Chicago: assumed OC-3 (>= seed 004 line 30's FNAL->SLAC 29.6)
a = "esnet"
b = "chicago"
rate = "155M"
delay = "24ms"                # assumed
queue = "1MB"                 # assumed

[[link]]                      # transatlantic
a = "chicago"
b = "geneva"
rate_ab = "45M"               # assumed (T3); must carry FNAL->CERN's 30.1 (seed 004 line 26)
rate_ba = "27M"               # seed 004 line 42: CERN->SLAC bottleneck "about 27Mbps", in Chicago
                              # (CERN->FNAL then gets ~26, not line 88's 30.1: see docs/net.md)
delay = "57.4ms"              # SLAC-CERN RTT 2 x (0.1 + 1 + 24 + 57.4 + 0.5) = 166 ms: seed 000 line 65
queue_ab = "300kB"            # assumed
queue_ba = "470kB"            # 140 ms at 27M: seed 004 line 48, CERN->SLAC one-way 80 -> 220 ms loaded
loss = "0.04%"                # each way: seed 000 line 82, 2 x 256 kB got 8.82 Mbit/s (Mathis, as the
                              # slac-cern-2000 path preset); that it is on this link is assumed

[[link]]                      # CERN's campus: assumed
a = "geneva"
b = "cern"
rate = "100M"
delay = "500us"

[[link]]                      # assumed: the seeds name IN2P3 (seed 004 line 16, Gilles Farrache's
a = "geneva"                  # CERN<->SLAC tests) but not its path; reached via CERN, 34 Mbit/s (E3)
b = "in2p3"                   # and 4 ms, all assumed
rate = "34M"
delay = "4ms"

[[link]]                      # assumed; seed 000 line 50's x3-4 under a 30 ms queue needs a
a = "esnet"                   # Colorado->SLAC one-way delay of 10-15 ms: 13.1 here
b = "colorado"
rate = "45M"
delay = "12ms"

[[link]]                      # Caltech, on SLAC's second uplink; seed 000 line 83's 62.8 Mbit/s needs
a = "calren"                  # >= 65M: 100M assumed. The delay is assumed (no Caltech RTT in the
b = "caltech"                 # seeds): SLAC-Caltech RTT 12.2 ms
rate = "100M"
delay = "5ms"
loss = "0.2%"                 # each way: seed 000 line 81, unloaded ping loss 0.42 % and 0.39 % (round trips)

[[link]]                      # assumed
a = "chicago"
b = "fnal"
rate = "155M"
delay = "1ms"

[[link]]                      # SLAC's second uplink (seed 000 line 10), via Stanford to CalREN/Internet2:
a = "slac-gw"                 # 622 Mbit/s as seed 001 line 10 has it in 2001 (assumed for 2000)
b = "calren"
rate = "622M"
delay = "1ms"                 # assumed

[[link]]                      # assumed: CalREN/Internet2 peers with ESnet, so Caltech reaches the
a = "calren"                  # other sites without crossing SLAC
b = "esnet"
rate = "155M"
delay = "1ms"
"#;

const UMICH_2001: &str = r#"# Seed 001: SLAC (pharlap, GE) to U Michigan (speedy, multi-homed) over Abilene, ping RTT
# 67 ms. Speedy's name resolved to its slow interface (maxima 8.5 Mbit/s); its GE interface
# gave over 320 Mbit/s. WANPERF_ADDR_SPEEDY is the slow interface's address, as the name was.
# No random loss: 3 x 256 kB ran at 70-80 Mbit/s (seed 001 line 29), which bounds it below
# ~7e-5; line 10's lost large pings were to routers along the path.
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

[[link]]                      # seed 001 line 10: pharlap's GE, SLAC's 1 Gbit/s to Stanford
a = "pharlap"
b = "slac-gw"
rate = "1G"
delay = "100us"               # assumed

[[link]]                      # seed 001 line 10: SLAC -> CalREN / Internet2 at 622 Mbit/s
a = "slac-gw"
b = "abilene"
rate = "622M"
delay = "16ms"                # assumed split of the 67 ms
queue = "2MB"                 # assumed

[[link]]                      # seed 001 line 10: UMich's OC-12 (622 Mbit/s) to Internet2
a = "abilene"
b = "umich-gw"
rate = "622M"
delay = "17.3ms"              # RTT 2 x (0.1 + 16 + 17.3 + 0.1) = 67 ms: seed 001 line 10's minimum
queue = "2MB"                 # assumed

[[link]]                      # the interface the name resolves to (seed 001 line 33)
a = "speedy"
b = "umich-gw"
name = "speedy-slow"
rate = "10M"                  # assumed: 10 Mbit/s Ethernet carries line 27's maxima above 8.5 Mbit/s
delay = "100us"
queue = "64kB"                # assumed

[[link]]                      # the new GE interface: over 320 Mbit/s (seed 001 line 33)
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
            source: "seeds 000/004: SLAC, CERN, IN2P3, Colorado, Caltech, FNAL; every SLAC path but Caltech's on the shared SLAC-ESnet link, Caltech's on SLAC's second uplink; CERN->SLAC bottleneck in Chicago".into(),
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
        for (key, d) in [("loss_ab", &c.up), ("loss_ba", &c.down)] {
            if let LossModel::Bernoulli(p) = d.loss {
                link.push_str(&format!("{key} = \"{p}\"\n"));
            }
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
            assert_eq!(t.links[0].ba.loss, c.down.loss, "{}", p.name);
            assert_eq!(t.nodes[0].txqueuelen, c.txqueuelen, "{}", p.name);
        }
    }

    /// The one-way delay from `from` to `to`'s address along the routes, in µs.
    fn one_way_us(t: &Topology, p: &Plan, from: &str, to: &str) -> u64 {
        let dst = IpAddr::V4(p.addr_of(t.node(to).unwrap()).unwrap());
        let hops = p.walk(t.node(from).unwrap(), dst).unwrap();
        hops.windows(2)
            .map(|w| {
                let l = t.links.iter().find(|l| (l.a, l.b) == (w[0], w[1]) || (l.b, l.a) == (w[0], w[1])).unwrap();
                if l.a == w[0] {
                    l.ab.delay_ns
                } else {
                    l.ba.delay_ns
                }
            })
            .sum::<u64>()
            / 1000
    }

    #[test]
    fn iepm_2000_routes_every_slac_path_but_caltechs_over_the_shared_link() {
        let t = Topology::parse(&find("iepm-2000").unwrap().toml, &|_| Err("no".into())).unwrap();
        let p = Plan::new(&t).unwrap();
        let slac = t.node("slac").unwrap();
        let names = |site: &str| -> Vec<&str> {
            let dst = IpAddr::V4(p.addr_of(t.node(site).unwrap()).unwrap());
            p.walk(slac, dst).unwrap().iter().map(|&i| t.nodes[i].name.as_str()).collect()
        };
        for site in ["cern", "in2p3", "colorado", "fnal"] {
            assert_eq!(names(site)[..3], ["slac", "slac-gw", "esnet"], "{site}");
        }
        assert_eq!(names("cern"), ["slac", "slac-gw", "esnet", "chicago", "geneva", "cern"]);
        // Seed 000's 62.8 Mbit/s to Caltech: SLAC's second uplink, not the 32 Mbit/s ATM link.
        assert_eq!(names("caltech"), ["slac", "slac-gw", "calren", "caltech"]);
        // The other sites reach Caltech through ESnet's peering, not through SLAC.
        let dst = IpAddr::V4(p.addr_of(t.node("caltech").unwrap()).unwrap());
        let via: Vec<&str> =
            p.walk(t.node("fnal").unwrap(), dst).unwrap().iter().map(|&i| t.nodes[i].name.as_str()).collect();
        assert_eq!(via, ["fnal", "chicago", "esnet", "calren", "caltech"]);
        // RTTs: SLAC-CERN 166 ms (seed 000 line 65), both ways; SLAC-FNAL 52.2 (tests/net.rs).
        assert_eq!((one_way_us(&t, &p, "slac", "cern"), one_way_us(&t, &p, "cern", "slac")), (83_000, 83_000));
        assert_eq!(one_way_us(&t, &p, "slac", "fnal"), 26_100);
        // The seed's numbers the links carry (rates are lower bounds from measured goodput).
        let l = |n: &str| &t.links[t.link(n).unwrap()];
        let rate = |d: &wanperf_emu::config::DirConfig| match d.rate {
            Rate::Constant(b) => b,
            _ => u64::MAX,
        };
        assert_eq!((rate(&l("slac-gw-esnet").ab), rate(&l("chicago-geneva").ba)), (32_000_000, 27_000_000));
        assert!(rate(&l("calren-caltech").ab).min(rate(&l("slac-gw-calren").ab)) as f64 * 1448.0 / 1500.0 >= 62.8e6);
        assert_eq!(l("chicago-geneva").ab.loss, LossModel::Bernoulli(4e-4));
        assert_eq!(l("calren-caltech").ba.loss, LossModel::Bernoulli(2e-3));
    }

    #[test]
    fn umich_2001_has_the_seeds_67_ms() {
        let t = Topology::parse(&find("umich-2001").unwrap().toml, &|_| Err("no".into())).unwrap();
        let p = Plan::new(&t).unwrap();
        // Seed 001 line 10: ping minimum 67 ms, the sum of the one-way delays both ways.
        let rtt = one_way_us(&t, &p, "pharlap", "speedy") + one_way_us(&t, &p, "speedy", "pharlap");
        assert_eq!(rtt, 67_000);
    }
}
