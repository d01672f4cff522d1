//! From a topology to what the kernel is told: interfaces with addresses, and routes.
//!
//! Every link is its own subnet: the n-th /24 of 198.18.0.0/15 (198.18.0.0/24, 198.18.1.0/24,
//! …, then 198.19.x.0/24) and the n-th /64 of fd57:414e::/48; end `a` is .1 / ::1, end `b`
//! .2 / ::2. A two-host network therefore has the addresses `wanperf path` always had.
//!
//! Routes are shortest paths by the links' `cost` (default 1, so hops), computed from every
//! node to every link's subnet, ties going to the lower-numbered link — or, with `ecmp =
//! true`, to all of the tied links at once (a multipath route); `[[route]] path = […]`
//! adds host routes (/32, /128) for the last node's addresses along the given nodes, which
//! win over the subnet routes by being more specific. Destination-based, as IP is: a router
//! on such a path sends everything for that destination that way, whoever sent it.

use crate::topo::{TopoError, Topology};
use serde::Serialize;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

impl Topology {
    /// Parses and validates a topology file: its structure ([`Topology::read`]) and its
    /// addresses (explicit subnets may collide). `read` loads trace files named in it.
    pub fn parse(text: &str, read: &dyn Fn(&str) -> Result<String, String>) -> Result<Topology, TopoError> {
        let topo = Topology::read(text, read)?;
        Plan::new(&topo)?;
        Ok(topo)
    }
}

/// One interface: one end of a link.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Iface {
    /// Node index.
    pub node: usize,
    /// Link index.
    pub link: usize,
    /// Device name inside the node (`wan0`, `wan1`, … in link order).
    pub dev: String,
    /// IPv4 address (/24).
    pub v4: Ipv4Addr,
    /// IPv6 address (/64).
    pub v6: Ipv6Addr,
    /// The other end's IPv4 address.
    pub peer_v4: Ipv4Addr,
    /// The other end's IPv6 address.
    pub peer_v6: Ipv6Addr,
    /// MTU.
    pub mtu: u32,
    /// Transmit queue length, if set.
    pub txqueuelen: Option<u32>,
}

/// One route in one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Route {
    /// Node index.
    pub node: usize,
    /// Destination.
    pub dst: IpAddr,
    /// Prefix length.
    pub prefix: u8,
    /// Interface index (into `Plan::ifaces`) it leaves by.
    pub iface: usize,
    /// Next hop (the neighbour's address on that link).
    pub via: IpAddr,
    /// Further equal-cost next hops (interface, neighbour's address) with `ecmp`: the route
    /// is a multipath route over these and the first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub more: Vec<(usize, IpAddr)>,
}

/// Interfaces and routes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    /// Every interface; link `i`'s ends are `ends[i]`.
    pub ifaces: Vec<Iface>,
    /// (a's interface, b's interface) per link.
    pub ends: Vec<(usize, usize)>,
    /// Every route of every node.
    pub routes: Vec<Route>,
}

/// The /24 and /64 of subnet number `n` (0..512).
pub fn subnet(n: usize) -> (Ipv4Addr, Ipv6Addr) {
    let v4 = Ipv4Addr::new(198, 18 + (n / 256) as u8, (n % 256) as u8, 0);
    let v6 = Ipv6Addr::new(0xfd57, 0x414e, 0, n as u16, 0, 0, 0, 0);
    (v4, v6)
}

fn host(v4: Ipv4Addr, v6: Ipv6Addr, h: u8) -> (Ipv4Addr, Ipv6Addr) {
    let o = v4.octets();
    let s = v6.segments();
    (Ipv4Addr::new(o[0], o[1], o[2], h), Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, u16::from(h)))
}

/// Shortest-path distances and first hops from `s`: (distance, first link) per node.
fn dijkstra(t: &Topology, s: usize) -> Vec<Option<(u64, usize)>> {
    let n = t.nodes.len();
    let mut best: Vec<Option<(u64, usize)>> = vec![None; n];
    let mut done = vec![false; n];
    let mut dist = vec![u64::MAX; n];
    dist[s] = 0;
    for _ in 0..n {
        // n ≤ 256: the quadratic version is plenty and obviously deterministic.
        let Some(u) = (0..n).filter(|&i| !done[i] && dist[i] != u64::MAX).min_by_key(|&i| (dist[i], i)) else { break };
        done[u] = true;
        for (li, l) in t.links.iter().enumerate() {
            let v = if l.a == u {
                l.b
            } else if l.b == u {
                l.a
            } else {
                continue;
            };
            let d = dist[u] + u64::from(l.cost);
            let first = if u == s { li } else { best[u].map_or(li, |b| b.1) };
            let better = match best[v] {
                None => v != s,
                Some((bd, bl)) => d < bd || (d == bd && first < bl),
            };
            if better && !done[v] {
                dist[v] = d;
                best[v] = Some((d, first));
            }
        }
    }
    best
}

impl Plan {
    /// Addresses and routes for `t`.
    pub fn new(t: &Topology) -> Result<Plan, TopoError> {
        // Subnets: the ones the file names, then the next free in link order.
        let mut used: Vec<Option<usize>> = vec![None; crate::topo::MAX_LINKS];
        let mut numbers = vec![usize::MAX; t.links.len()];
        for (i, l) in t.links.iter().enumerate() {
            if let Some(s) = l.subnet {
                let o = s.octets();
                let n = (usize::from(o[1]) - 18) * 256 + usize::from(o[2]);
                if let Some(j) = used[n] {
                    return Err(TopoError {
                        line: l.line,
                        message: format!(
                            "duplicate address: links `{}` (line {}) and `{}` both use {s}/24",
                            t.links[j].name, t.links[j].line, l.name
                        ),
                    });
                }
                used[n] = Some(i);
                numbers[i] = n;
            }
        }
        let mut next = 0;
        for (i, num) in numbers.iter_mut().enumerate() {
            if *num == usize::MAX {
                while used[next].is_some() {
                    next += 1;
                }
                used[next] = Some(i);
                *num = next;
            }
        }
        let mut ifaces = Vec::new();
        let mut ends = Vec::new();
        let mut per_node = vec![0usize; t.nodes.len()];
        for (li, l) in t.links.iter().enumerate() {
            let (s4, s6) = subnet(numbers[li]);
            let (a4, a6) = host(s4, s6, 1);
            let (b4, b6) = host(s4, s6, 2);
            let mut mk = |node: usize, v4, v6, peer_v4, peer_v6| {
                let dev = format!("wan{}", per_node[node]);
                per_node[node] += 1;
                ifaces.push(Iface {
                    node,
                    link: li,
                    dev,
                    v4,
                    v6,
                    peer_v4,
                    peer_v6,
                    mtu: l.mtu,
                    txqueuelen: t.nodes[node].txqueuelen,
                });
                ifaces.len() - 1
            };
            let ia = mk(l.a, a4, a6, b4, b6);
            let ib = mk(l.b, b4, b6, a4, a6);
            ends.push((ia, ib));
        }
        let iface_of = |node: usize, link: usize| -> usize {
            let (a, b) = ends[link];
            if ifaces[a].node == node {
                a
            } else {
                b
            }
        };
        let mut routes = Vec::new();
        let all: Vec<Vec<Option<(u64, usize)>>> = (0..t.nodes.len()).map(|s| dijkstra(t, s)).collect();
        // Distance from `v` to the nearer end of link `li` (0 at an end).
        let to_link = |v: usize, li: usize| -> Option<u64> {
            let l = &t.links[li];
            [l.a, l.b].into_iter().filter_map(|e| if e == v { Some(0) } else { all[v][e].map(|x| x.0) }).min()
        };
        for (s, best) in all.iter().enumerate() {
            for (li, l) in t.links.iter().enumerate() {
                if l.a == s || l.b == s {
                    continue;
                }
                // Toward the nearer end of the link (ties: end a).
                let hop = [l.a, l.b].into_iter().filter_map(|e| best[e]).min_by_key(|&(d, first)| (d, first));
                let Some((d, first)) = hop else { continue };
                let out = iface_of(s, first);
                // With ECMP, every other link out of `s` that starts a path as short.
                let more: Vec<usize> = if t.ecmp {
                    (0..t.links.len())
                        .filter(|&x| x != first && (t.links[x].a == s || t.links[x].b == s))
                        .filter(|&x| {
                            let v = if t.links[x].a == s { t.links[x].b } else { t.links[x].a };
                            to_link(v, li).is_some_and(|rest| rest + u64::from(t.links[x].cost) == d)
                        })
                        .map(|x| iface_of(s, x))
                        .collect()
                } else {
                    Vec::new()
                };
                let (s4, s6) = subnet(numbers[li]);
                routes.push(Route {
                    node: s,
                    dst: IpAddr::V4(s4),
                    prefix: 24,
                    iface: out,
                    via: IpAddr::V4(ifaces[out].peer_v4),
                    more: more.iter().map(|&i| (i, IpAddr::V4(ifaces[i].peer_v4))).collect(),
                });
                routes.push(Route {
                    node: s,
                    dst: IpAddr::V6(s6),
                    prefix: 64,
                    iface: out,
                    via: IpAddr::V6(ifaces[out].peer_v6),
                    more: more.iter().map(|&i| (i, IpAddr::V6(ifaces[i].peer_v6))).collect(),
                });
            }
        }
        for r in &t.routes {
            let dst = *r.nodes.last().expect("at least two nodes");
            let targets: Vec<(Ipv4Addr, Ipv6Addr)> =
                ifaces.iter().filter(|i| i.node == dst).map(|i| (i.v4, i.v6)).collect();
            for w in r.nodes.windows(2) {
                let (here, there) = (w[0], w[1]);
                let link = (0..t.links.len())
                    .filter(|&li| {
                        let l = &t.links[li];
                        (l.a == here && l.b == there) || (l.b == here && l.a == there)
                    })
                    .min_by_key(|&li| (t.links[li].cost, li))
                    .expect("the parser checked that a link joins them");
                let out = iface_of(here, link);
                for &(v4, v6) in &targets {
                    // A later override for the same destination at the same node replaces an earlier one.
                    routes.retain(|x| !(x.node == here && x.dst == IpAddr::V4(v4) && x.prefix == 32));
                    routes.retain(|x| !(x.node == here && x.dst == IpAddr::V6(v6) && x.prefix == 128));
                    routes.push(Route {
                        node: here,
                        dst: IpAddr::V4(v4),
                        prefix: 32,
                        iface: out,
                        via: IpAddr::V4(ifaces[out].peer_v4),
                        more: Vec::new(),
                    });
                    routes.push(Route {
                        node: here,
                        dst: IpAddr::V6(v6),
                        prefix: 128,
                        iface: out,
                        via: IpAddr::V6(ifaces[out].peer_v6),
                        more: Vec::new(),
                    });
                }
            }
        }
        Ok(Plan { ifaces, ends, routes })
    }

    /// A node's interfaces, in device order.
    pub fn ifaces_of(&self, node: usize) -> impl Iterator<Item = &Iface> + '_ {
        self.ifaces.iter().filter(move |i| i.node == node)
    }

    /// A node's first IPv4 address (what its name stands for).
    pub fn addr_of(&self, node: usize) -> Option<Ipv4Addr> {
        self.ifaces_of(node).next().map(|i| i.v4)
    }

    /// The route `node` uses for `dst` (longest prefix).
    pub fn lookup(&self, node: usize, dst: IpAddr) -> Option<&Route> {
        self.routes.iter().filter(|r| r.node == node && contains(r.dst, r.prefix, dst)).max_by_key(|r| r.prefix)
    }

    /// The nodes a packet from `src` to address `dst` visits, by following routes (None on a
    /// loop or a dead end; a multipath route's first next hop). For tests and for `net` to
    /// print.
    pub fn walk(&self, src: usize, dst: IpAddr) -> Option<Vec<usize>> {
        let hops = self.walk_links(src, dst)?;
        let mut nodes = vec![src];
        for (link, ab) in hops {
            let (a, b) = self.ends[link];
            nodes.push(if ab { self.ifaces[b].node } else { self.ifaces[a].node });
        }
        Some(nodes)
    }

    /// The links a packet from `src` to address `dst` crosses, each with its direction (true:
    /// a → b), by following routes as [`Plan::walk`] does; several links may join the same
    /// two nodes, so this, not the nodes, says which one carries it.
    pub fn walk_links(&self, src: usize, dst: IpAddr) -> Option<Vec<(usize, bool)>> {
        let mut at = src;
        let mut seen = vec![src];
        let mut hops = Vec::new();
        loop {
            if self.ifaces_of(at).any(|i| IpAddr::V4(i.v4) == dst || IpAddr::V6(i.v6) == dst) {
                return Some(hops);
            }
            // Directly connected subnet?
            let direct = self.ifaces_of(at).find(|i| match dst {
                IpAddr::V4(d) => d.octets()[..3] == i.v4.octets()[..3],
                IpAddr::V6(d) => d.segments()[..4] == i.v6.segments()[..4],
            });
            let out = match (self.lookup(at, dst), direct) {
                (Some(r), _) if r.prefix >= 32 => r.iface,
                (_, Some(i)) => self.ifaces.iter().position(|x| x == i)?,
                (Some(r), None) => r.iface,
                (None, None) => return None,
            };
            let link = self.ifaces[out].link;
            let (a, b) = self.ends[link];
            let next = if a == out { self.ifaces[b].node } else { self.ifaces[a].node };
            if seen.contains(&next) {
                return None;
            }
            hops.push((link, a == out));
            seen.push(next);
            at = next;
        }
    }
}

fn contains(net: IpAddr, prefix: u8, a: IpAddr) -> bool {
    match (net, a) {
        (IpAddr::V4(n), IpAddr::V4(a)) => {
            let m = if prefix == 0 { 0 } else { u32::MAX << (32 - u32::from(prefix)) };
            u32::from(n) & m == u32::from(a) & m
        }
        (IpAddr::V6(n), IpAddr::V6(a)) => {
            let m = if prefix == 0 { 0 } else { u128::MAX << (128 - u32::from(prefix)) };
            u128::from(n) & m == u128::from(a) & m
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topo(text: &str) -> Topology {
        Topology::parse(text, &|_| Err("no files".into())).unwrap()
    }

    fn names(t: &Topology, p: &[usize]) -> Vec<String> {
        p.iter().map(|&i| t.nodes[i].name.clone()).collect()
    }

    /// a — r1 — r2 — b, and a slower r1 — r3 — r2 detour.
    const DIAMOND: &str = r#"
[[host]]
name = "a"
[[host]]
name = "b"
[[router]]
name = "r1"
[[router]]
name = "r2"
[[router]]
name = "r3"
[[link]]
a = "a"
b = "r1"
[[link]]
a = "r1"
b = "r2"
[[link]]
a = "r2"
b = "b"
[[link]]
a = "r1"
b = "r3"
[[link]]
a = "r3"
b = "r2"
"#;

    #[test]
    fn two_hosts_get_the_addresses_path_has_always_had() {
        let t = topo("[[host]]\nname = \"left\"\n[[host]]\nname = \"right\"\n[[link]]\na = \"left\"\nb = \"right\"\n");
        let p = Plan::new(&t).unwrap();
        assert_eq!(p.ifaces[0].v4, Ipv4Addr::new(198, 18, 0, 1));
        assert_eq!(p.ifaces[1].v4, Ipv4Addr::new(198, 18, 0, 2));
        assert_eq!(p.ifaces[0].v6, "fd57:414e::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!((p.ifaces[0].dev.as_str(), p.ifaces[1].dev.as_str()), ("wan0", "wan0"));
        assert!(p.routes.is_empty(), "one subnet needs no routes");
    }

    #[test]
    fn shortest_paths_both_ways_and_loop_free() {
        let t = topo(DIAMOND);
        let p = Plan::new(&t).unwrap();
        let b4 = IpAddr::V4(p.addr_of(1).unwrap());
        assert_eq!(names(&t, &p.walk(0, b4).unwrap()), ["a", "r1", "r2", "b"]);
        let a4 = IpAddr::V4(p.addr_of(0).unwrap());
        assert_eq!(names(&t, &p.walk(1, a4).unwrap()), ["b", "r2", "r1", "a"]);
        // Every node reaches every address of every other node, IPv4 and IPv6.
        for s in 0..t.nodes.len() {
            for i in &p.ifaces {
                assert!(p.walk(s, IpAddr::V4(i.v4)).is_some(), "{s} → {}", i.v4);
                assert!(p.walk(s, IpAddr::V6(i.v6)).is_some(), "{s} → {}", i.v6);
            }
        }
        // The r3 links' subnets are reached through r1 or r2, whichever is nearer.
        let r3 = p.ifaces.iter().find(|i| i.node == 4).unwrap().v4;
        assert_eq!(names(&t, &p.walk(0, IpAddr::V4(r3)).unwrap()), ["a", "r1", "r3"]);
    }

    #[test]
    fn ecmp_routes_spread_over_every_equally_short_path() {
        // a — r1 — {r2 | r3 — r4} — … made equal: r1 — r2 — r4 — b beside r1 — r3 — r4.
        let text = r#"
ecmp = true
[[host]]
name = "a"
[[host]]
name = "b"
[[router]]
name = "r1"
[[router]]
name = "r2"
[[router]]
name = "r3"
[[router]]
name = "r4"
[[link]]
a = "a"
b = "r1"
[[link]]
a = "r1"
b = "r2"
[[link]]
a = "r1"
b = "r3"
[[link]]
a = "r2"
b = "r4"
[[link]]
a = "r3"
b = "r4"
[[link]]
a = "r4"
b = "b"
"#;
        let t = topo(text);
        let p = Plan::new(&t).unwrap();
        let b4 = IpAddr::V4(p.addr_of(1).unwrap());
        // r1 (node 2) reaches b's subnet over r2 and over r3.
        let r = p.lookup(2, b4).unwrap();
        let mut vias: Vec<IpAddr> = std::iter::once(r.via).chain(r.more.iter().map(|m| m.1)).collect();
        vias.sort();
        let r2 = IpAddr::V4(p.ifaces_of(3).next().unwrap().v4);
        let r3 = IpAddr::V4(p.ifaces_of(4).next().unwrap().v4);
        assert_eq!(vias, [r2, r3]);
        // r4 (node 5) reaches a's subnet both ways back; a and r2 have one way only.
        let a4 = IpAddr::V4(p.addr_of(0).unwrap());
        assert_eq!(p.lookup(5, a4).unwrap().more.len(), 1);
        assert!(p.lookup(0, b4).unwrap().more.is_empty());
        assert!(p.lookup(3, b4).unwrap().more.is_empty());
        // The subnet between r2 and r4 is one hop from r1 only through r2: no spreading.
        let r2r4 = IpAddr::V4(p.ifaces_of(3).nth(1).unwrap().v4);
        assert!(p.lookup(2, r2r4).unwrap().more.is_empty());
        // Without `ecmp`, the same network has a single path (the lower-numbered link).
        let t = topo(&text.replace("ecmp = true\n", ""));
        let p = Plan::new(&t).unwrap();
        assert!(p.routes.iter().all(|r| r.more.is_empty()));
        assert_eq!(names(&t, &p.walk(0, b4).unwrap()), ["a", "r1", "r2", "r4", "b"]);
    }

    #[test]
    fn costs_and_overrides_make_asymmetric_routes() {
        let slow = DIAMOND.replacen("a = \"r1\"\nb = \"r2\"\n", "a = \"r1\"\nb = \"r2\"\ncost = 5\n", 1);
        let t = topo(&slow);
        let p = Plan::new(&t).unwrap();
        let b4 = IpAddr::V4(p.addr_of(1).unwrap());
        assert_eq!(names(&t, &p.walk(0, b4).unwrap()), ["a", "r1", "r3", "r2", "b"]);
        let t = topo(&format!("{DIAMOND}[[route]]\npath = [\"b\", \"r2\", \"r3\", \"r1\", \"a\"]\n"));
        let p = Plan::new(&t).unwrap();
        let (a4, b4) = (IpAddr::V4(p.addr_of(0).unwrap()), IpAddr::V4(p.addr_of(1).unwrap()));
        assert_eq!(names(&t, &p.walk(0, b4).unwrap()), ["a", "r1", "r2", "b"]);
        assert_eq!(names(&t, &p.walk(1, a4).unwrap()), ["b", "r2", "r3", "r1", "a"]);
        let a6 = IpAddr::V6(p.ifaces_of(0).next().unwrap().v6);
        assert_eq!(names(&t, &p.walk(1, a6).unwrap()), ["b", "r2", "r3", "r1", "a"]);
    }

    #[test]
    fn explicit_subnets_are_kept_and_duplicates_refused() {
        let two = "[[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n[[link]]\na = \"a\"\nb = \"b\"\nsubnet = \"198.18.0.0/24\"\n[[link]]\na = \"a\"\nb = \"b\"\nname = \"second\"\n";
        let p = Plan::new(&topo(two)).unwrap();
        assert_eq!(p.ifaces[2].v4, Ipv4Addr::new(198, 18, 1, 1), "the automatic one skips the taken /24");
        let dup = format!("{two}subnet = \"198.18.0.0/24\"\n");
        let e = Topology::parse(&dup, &|_| Err("no files".into())).unwrap_err();
        assert_eq!(e.line, 9);
        assert!(e.message.starts_with("duplicate address"), "{e}");
    }

    #[test]
    fn multi_homed_hosts_have_one_device_per_link() {
        let t = topo("[[host]]\nname = \"h\"\n[[host]]\nname = \"s\"\n[[router]]\nname = \"r\"\n[[link]]\na = \"h\"\nb = \"r\"\nrate = \"10M\"\n[[link]]\na = \"h\"\nb = \"r\"\nname = \"fast\"\nrate = \"1G\"\n[[link]]\na = \"r\"\nb = \"s\"\n");
        let p = Plan::new(&t).unwrap();
        let devs: Vec<&str> = p.ifaces_of(0).map(|i| i.dev.as_str()).collect();
        assert_eq!(devs, ["wan0", "wan1"]);
        // The server's subnet is reached by the lower-numbered (first) link of equal cost.
        let s4 = IpAddr::V4(p.addr_of(1).unwrap());
        assert_eq!(p.lookup(0, s4).unwrap().iface, 0);
    }
}
