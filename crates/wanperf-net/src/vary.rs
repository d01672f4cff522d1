//! A network as a study cell sees it (pure): the topology with the cell's settings applied
//! (`link.NAME.KEY`, `host.NAME.KEY`, `traffic.NAME.KEY`, each one option as the topology file
//! writes it), the measured pair's two ends (a host, a host's address on one of its links, or
//! an address), and the values of the route between them that a study's expectations use.

use crate::linkopts;
use crate::plan::Plan;
use crate::topo::{range, Topology, Traffic, HOST_MODEL_KEYS};
use std::collections::BTreeMap;
use std::net::IpAddr;
use wanperf_emu::config::{parse_delay, parse_link_rate, QueueLimit, Rate};

/// What a setting's key names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Setting<'a> {
    /// An option of a named link.
    Link(&'a str, &'a str),
    /// An option of a named host.
    Host(&'a str, &'a str),
    /// An option of a named cross-traffic entry.
    Traffic(&'a str, &'a str),
}

/// Splits `link.chicago-geneva.rate` into what it names; `None` for a key of another kind.
pub fn setting(key: &str) -> Option<Setting<'_>> {
    let (kind, rest) = key.split_once('.')?;
    let (name, opt) = rest.rsplit_once('.')?;
    if name.is_empty() || opt.is_empty() {
        return None;
    }
    match kind {
        "link" => Some(Setting::Link(name, opt)),
        "host" => Some(Setting::Host(name, opt)),
        "traffic" => Some(Setting::Traffic(name, opt)),
        _ => None,
    }
}

/// Options a `host.NAME.KEY` setting may name.
fn host_keys() -> Vec<&'static str> {
    let mut v = vec!["txqueuelen"];
    v.extend(HOST_MODEL_KEYS);
    v
}

/// The topology with `settings` applied in order (`traffic.NAME.rate = "off"` removes that
/// cross traffic once all are applied). Errors are one line naming the key.
pub fn apply(
    t: &Topology,
    settings: &[(String, String)],
    read: &dyn Fn(&str) -> Result<String, String>,
) -> Result<Topology, String> {
    let mut t = t.clone();
    let mut off = Vec::new();
    for (key, value) in settings {
        let s = setting(key).ok_or_else(|| {
            format!("`{key}` is not a network setting (link.NAME.KEY, host.NAME.KEY or traffic.NAME.KEY)")
        })?;
        let at = |e: String| format!("`{key}`: {e}");
        match s {
            Setting::Link(name, opt) => {
                let li = t.link(name).ok_or_else(|| {
                    let names: Vec<&str> = t.links.iter().map(|l| l.name.as_str()).collect();
                    format!("`{key}`: no link is called `{name}` (links: {})", names.join(", "))
                })?;
                let l = &mut t.links[li];
                match opt {
                    "mtu" => l.mtu = uint(value, range::MTU).map_err(at)? as u32,
                    "cost" => l.cost = uint(value, range::COST).map_err(at)? as u32,
                    _ => {
                        let values: Vec<String> = if opt.starts_with("priority") {
                            value.split(';').map(str::to_string).collect()
                        } else {
                            vec![value.clone()]
                        };
                        linkopts::apply(&mut l.ab, &mut l.ba, opt, &values, read).map_err(at)?;
                    }
                }
            }
            Setting::Host(name, opt) => {
                let n = t.node(name).filter(|&n| !t.nodes[n].is_router()).ok_or_else(|| {
                    let names: Vec<&str> = t.hosts().map(|h| t.nodes[h].name.as_str()).collect();
                    format!("`{key}`: no host is called `{name}` (hosts: {})", names.join(", "))
                })?;
                let node = &mut t.nodes[n];
                match opt {
                    "txqueuelen" => node.txqueuelen = Some(uint(value, range::TXQUEUELEN).map_err(at)? as u32),
                    _ if HOST_MODEL_KEYS.contains(&opt) => node.model.set(opt, value).map_err(|e| at(e.to_string()))?,
                    _ => return Err(at(format!("unknown host option `{opt}` (known: {})", host_keys().join(", ")))),
                }
            }
            Setting::Traffic(name, opt) => {
                let x = t.traffic.iter_mut().find(|x| x.name() == name).ok_or_else(|| {
                    format!("`{key}`: no cross traffic is called `{name}` (give its [[traffic]] a `name`)")
                })?;
                if opt == "rate" && value == "off" {
                    off.push(name.to_string());
                    continue;
                }
                traffic(x, opt, value).map_err(at)?;
            }
        }
    }
    t.traffic.retain(|x| !off.iter().any(|n| n == x.name()));
    Ok(t)
}

fn uint(v: &str, within: std::ops::RangeInclusive<u64>) -> Result<u64, String> {
    v.parse::<u64>()
        .ok()
        .filter(|n| within.contains(n))
        .ok_or_else(|| format!("`{v}` is not a whole number in {}–{}", within.start(), within.end()))
}

/// One option of a cross-traffic entry, as its [[traffic]] table writes it.
fn traffic(x: &mut Traffic, opt: &str, v: &str) -> Result<(), String> {
    let secs = |v: &str| -> Result<u64, String> {
        parse_delay(if opt == "start" { "start" } else { "stop" }, v).map_err(|e| e.to_string())
    };
    match (x, opt) {
        (Traffic::Link { rate_bps, .. }, "rate") => {
            *rate_bps = parse_link_rate("rate", v).map_err(|e| e.to_string())?
        }
        (Traffic::Link { packet, .. }, "packet") => *packet = uint(v, range::PACKET)? as usize,
        (Traffic::Tcp { rate_bps, .. }, "rate") => {
            *rate_bps =
                if v == "unlimited" { None } else { Some(parse_link_rate("rate", v).map_err(|e| e.to_string())?) }
        }
        (Traffic::Tcp { flows, .. }, "flows") => *flows = uint(v, range::FLOWS)? as u32,
        (Traffic::Link { start_ns, stop_ns, .. } | Traffic::Tcp { start_ns, stop_ns, .. }, "start" | "stop") => {
            let ns = secs(v)?;
            if opt == "start" {
                *start_ns = ns;
            } else {
                *stop_ns = Some(ns);
            }
            if stop_ns.is_some_and(|s| s <= *start_ns) {
                return Err("`stop` must be after `start`".into());
            }
        }
        (x, _) => {
            let known = match x {
                Traffic::Link { .. } => "rate (or off), packet, start, stop",
                Traffic::Tcp { .. } => "rate (or off, unlimited), flows, start, stop",
            };
            return Err(format!("unknown cross-traffic option `{opt}` (known: {known})"));
        }
    }
    Ok(())
}

/// One end of a measured pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The host.
    pub node: usize,
    /// The address the measurement uses.
    pub addr: IpAddr,
}

/// A pair's end as a study names it: `speedy` (the host's first address, as its name
/// resolves), `speedy@speedy-ge` (its address on that link) or an address of a host.
pub fn endpoint(t: &Topology, plan: &Plan, text: &str) -> Result<Endpoint, String> {
    let hosts = || t.hosts().map(|h| t.nodes[h].name.as_str()).collect::<Vec<_>>().join(", ");
    let host = |name: &str| -> Result<usize, String> {
        match t.node(name) {
            Some(n) if t.nodes[n].is_router() => Err(format!("`{name}` is a router: a measurement runs between hosts")),
            Some(n) => Ok(n),
            None => Err(format!("no host is called `{name}` in {} (hosts: {})", t.name, hosts())),
        }
    };
    if let Ok(addr) = text.parse::<IpAddr>() {
        let i = plan
            .ifaces
            .iter()
            .find(|i| IpAddr::V4(i.v4) == addr || IpAddr::V6(i.v6) == addr)
            .ok_or_else(|| format!("no interface of {} has the address {addr}", t.name))?;
        host(&t.nodes[i.node].name)?;
        return Ok(Endpoint { node: i.node, addr });
    }
    match text.split_once('@') {
        None => {
            let node = host(text)?;
            let addr = plan.addr_of(node).ok_or_else(|| format!("host `{text}` has no link"))?;
            Ok(Endpoint { node, addr: IpAddr::V4(addr) })
        }
        Some((name, link)) => {
            let node = host(name)?;
            let li = t.link(link).ok_or_else(|| format!("`{text}`: no link is called `{link}`"))?;
            let i = plan
                .ifaces_of(node)
                .find(|i| i.link == li)
                .ok_or_else(|| format!("`{text}`: link `{link}` does not end at `{name}`"))?;
            Ok(Endpoint { node, addr: IpAddr::V4(i.v4) })
        }
    }
}

/// The values of the route from `from` to `to` and back that a study's expectations use, in
/// bits, bit/s and seconds, named as an emulated path's ([`wanperf_emu::path::PathConfig::values`]):
/// `delay_up`/`delay_down` and `rtt` summed over the links crossed, `rate_up`/`rate_down` the
/// slowest constant rate each way (`rate` = `rate_up`) and `queue_up`/`queue_down` that
/// link's queue, `loss`/`loss_down` every link's random loss combined, the first policer
/// each way (`policer_rate`, `burst`) and the smallest MTU. Err: no route.
pub fn route_values(
    t: &Topology,
    plan: &Plan,
    from: &Endpoint,
    to: &Endpoint,
) -> Result<BTreeMap<String, f64>, String> {
    let fwd = plan
        .walk_links(from.node, to.addr)
        .ok_or_else(|| format!("no route from {} to {}", t.nodes[from.node].name, to.addr))?;
    let rev = plan
        .walk_links(to.node, from.addr)
        .ok_or_else(|| format!("no route from {} to {}", t.nodes[to.node].name, from.addr))?;
    let mut v = BTreeMap::new();
    let mut mtu = u32::MAX;
    for (suffix, hops) in [("_up", &fwd), ("_down", &rev)] {
        let mut delay = 0u64;
        let mut keep = 1.0;
        let mut bottleneck: Option<(u64, f64)> = None;
        let mut policer = None;
        for &(li, ab) in hops.iter() {
            let l = &t.links[li];
            let d = if ab { &l.ab } else { &l.ba };
            mtu = mtu.min(l.mtu);
            delay += d.delay_ns;
            keep *= 1.0 - d.loss.mean_loss();
            if let Rate::Constant(r) = d.rate {
                let q = match d.queue {
                    QueueLimit::Packets(n) => n as f64 * f64::from(l.mtu) * 8.0,
                    QueueLimit::Bytes(b) => b as f64 * 8.0,
                };
                if bottleneck.is_none_or(|(b, _)| r < b) {
                    bottleneck = Some((r, q));
                }
            }
            if policer.is_none() {
                policer = d.policer;
            }
        }
        v.insert(format!("delay{suffix}"), delay as f64 / 1e9);
        if let Some((r, q)) = bottleneck {
            v.insert(format!("rate{suffix}"), r as f64);
            v.insert(format!("queue{suffix}"), q);
        }
        v.insert(if suffix == "_up" { "loss".to_string() } else { "loss_down".to_string() }, 1.0 - keep);
        if let (Some(p), "_up") = (policer, suffix) {
            v.insert("policer_rate".into(), p.rate_bps as f64);
            v.insert("burst".into(), p.burst_bytes as f64 * 8.0);
        }
    }
    v.insert("rtt".into(), v["delay_up"] + v["delay_down"]);
    // The pair's host models, named as on a path: the source is the left host.
    for (k, x) in t.nodes[from.node].model.values("_left").into_iter().chain(t.nodes[to.node].model.values("_right")) {
        v.insert(k, x);
    }
    if let Some(q) = t.nodes[from.node].txqueuelen {
        v.insert("txqueuelen".into(), f64::from(q));
    }
    if let Some(r) = v.get("rate_up").copied() {
        v.insert("rate".into(), r);
    }
    if let Some(q) = v.get("queue_up").copied() {
        v.insert("queue".into(), q);
    }
    v.insert("mtu".into(), f64::from(mtu) * 8.0);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none(_: &str) -> Result<String, String> {
        Err("no files in tests".into())
    }

    fn umich() -> Topology {
        Topology::parse(&crate::presets::find("umich-2001").unwrap().toml, &none).unwrap()
    }

    #[test]
    fn a_pair_by_name_takes_the_slow_interface_and_by_link_the_fast_one() {
        let t = umich();
        let p = Plan::new(&t).unwrap();
        let from = endpoint(&t, &p, "pharlap").unwrap();
        let slow = endpoint(&t, &p, "speedy").unwrap();
        let ge = endpoint(&t, &p, "speedy@speedy-ge").unwrap();
        assert_ne!(slow.addr, ge.addr);
        assert_eq!(endpoint(&t, &p, &ge.addr.to_string()).unwrap(), ge);
        let v = route_values(&t, &p, &from, &slow).unwrap();
        assert_eq!(v["rate"], 10e6, "{v:?}");
        assert!((v["rtt"] - 0.067).abs() < 1e-9, "{v:?}");
        let v = route_values(&t, &p, &from, &ge).unwrap();
        assert_eq!(v["rate"], 622e6, "{v:?}");
        // The way back to pharlap from either address is the same cheapest route.
        assert_eq!(v["rate_down"], 10e6, "{v:?}");
        for bad in ["slac-gw", "nobody", "speedy@pharlap-slac-gw", "speedy@nolink", "198.19.255.1"] {
            assert!(endpoint(&t, &p, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn settings_reach_links_hosts_and_traffic_and_off_removes_traffic() {
        let mut t = umich();
        t.traffic.push(Traffic::Link {
            name: "bulk".into(),
            link: 0,
            ab: true,
            pattern: crate::topo::Pattern::Poisson,
            rate_bps: 1_000_000,
            packet: 1500,
            start_ns: 0,
            stop_ns: None,
            line: 0,
        });
        let set = |k: &str, v: &str| (k.to_string(), v.to_string());
        let v = apply(
            &t,
            &[
                set("link.speedy-slow.rate", "20M"),
                set("link.speedy-slow.queue_ab", "100kB"),
                set("host.speedy.cpu", "0.5"),
                set("host.pharlap.txqueuelen", "100"),
                set("traffic.bulk.rate", "5M"),
            ],
            &none,
        )
        .unwrap();
        let l = &v.links[v.link("speedy-slow").unwrap()];
        assert_eq!(l.ab.rate, Rate::Constant(20_000_000));
        assert_eq!(l.ab.queue, QueueLimit::Bytes(102_400));
        assert_ne!(l.ba.queue, QueueLimit::Bytes(102_400));
        assert_eq!(v.nodes[v.node("pharlap").unwrap()].txqueuelen, Some(100));
        assert!(matches!(v.traffic[0], Traffic::Link { rate_bps: 5_000_000, .. }));
        let v = apply(&t, &[set("traffic.bulk.rate", "off"), set("traffic.bulk.start", "1s")], &none).unwrap();
        assert!(v.traffic.is_empty());
        for (k, val, says) in [
            ("link.nolink.rate", "1M", "no link is called `nolink`"),
            ("link.speedy-slow.colour", "red", "unknown link option"),
            ("host.slac-gw.cpu", "0.5", "no host is called `slac-gw`"),
            ("host.speedy.colour", "red", "unknown host option"),
            ("traffic.bulk.flows", "2", "unknown cross-traffic option"),
            ("traffic.nobody.rate", "1M", "no cross traffic is called"),
            ("speedy.rate", "1M", "not a network setting"),
            ("link.speedy-slow.rate", "fast", "link.speedy-slow.rate"),
        ] {
            let e = apply(&t, &[set(k, val)], &none).unwrap_err();
            assert!(e.contains(says), "{k}: {e}");
        }
    }
}
