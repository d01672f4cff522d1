//! Topology files: TOML → a validated [`Topology`]. Pure: no sockets, no clocks, no files
//! (trace files are read through a function the caller passes). Every error names its line.
//!
//! ```toml
//! name = "chain"
//! [[host]]
//! name = "a"
//! [[router]]
//! name = "r1"
//! icmp_ratelimit = "1000ms"
//! [[host]]
//! name = "b"
//! [[link]]
//! a = "a"
//! b = "r1"
//! delay = "5ms"
//! [[link]]
//! a = "r1"
//! b = "b"
//! rate = "25M"
//! ```

use crate::linkopts;
use std::net::Ipv4Addr;
use wanperf_emu::config::{parse_link_rate, DirConfig, Nanos};
use wanperf_toml::{err, scalar, Lines, Reader, Spanned, Table, Value};

/// A bad topology: the line (1-based; 0 when unknown) and what is wrong (the error of every
/// file wanperf reads).
pub use wanperf_toml::Error as TopoError;

/// Most links a topology may have (each gets its own /24 of 198.18.0.0/15).
pub const MAX_LINKS: usize = 512;
/// Most nodes.
pub const MAX_NODES: usize = 256;

/// A router's ICMP behaviour (the kernel generates the messages; these shape them).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RouterOpts {
    /// net.ipv4.icmp_ratelimit (and net.ipv6.icmp.ratelimit): least interval between ICMP
    /// errors to one destination, ms (kernel default 1000, with a burst of 6).
    pub icmp_ratelimit_ms: Option<u32>,
    /// net.ipv4.icmp_msgs_per_sec: the router's global ICMP budget (kernel default 1000).
    pub icmp_msgs_per_sec: Option<u32>,
    /// net.ipv4.icmp_msgs_burst (kernel default 50).
    pub icmp_msgs_burst: Option<u32>,
    /// Extra delay of the ICMP messages the router sends (its slow path).
    pub icmp_delay_ns: Nanos,
    /// Uniform jitter on top of `icmp_delay_ns`.
    pub icmp_jitter_ns: Nanos,
    /// Never answer: the router's ICMP messages are dropped as they leave it.
    pub icmp_silent: bool,
}

/// What a node is.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeKind {
    /// An end host: runs commands, does not forward.
    Host,
    /// A router: the kernel forwards IPv4 and IPv6.
    Router(RouterOpts),
}

/// A host or router.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Unique name.
    pub name: String,
    /// Host or router.
    pub kind: NodeKind,
    /// Transmit queue length of this node's interfaces (kernel default 1000 on TUN: 500).
    pub txqueuelen: Option<u32>,
    /// A host's model: CPU quota and TCP stack settings (the default for routers).
    pub model: wanperf_host::HostModel,
    /// Line of its table.
    pub line: usize,
}

impl Node {
    /// Whether it is a router.
    pub fn is_router(&self) -> bool {
        matches!(self.kind, NodeKind::Router(_))
    }
}

/// A link between two nodes, emulated in both directions.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkDef {
    /// Unique name (default `a-b`).
    pub name: String,
    /// Node index of end a.
    pub a: usize,
    /// Node index of end b.
    pub b: usize,
    /// a → b.
    pub ab: DirConfig,
    /// b → a.
    pub ba: DirConfig,
    /// MTU of both ends' interfaces.
    pub mtu: u32,
    /// Routing metric (default 1: shortest paths count hops).
    pub cost: u32,
    /// Segmentation offload allowed (default): false keeps every packet on this link's
    /// interfaces one wire packet, so device counters and packet captures see what the wire
    /// carries.
    pub offload: bool,
    /// The /24 its two ends share; None: the next free one in file order.
    pub subnet: Option<Ipv4Addr>,
    /// Line of its table.
    pub line: usize,
}

/// A route override: traffic from the first node to the last follows these nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct RoutePath {
    /// Node indices, first to last.
    pub nodes: Vec<usize>,
    /// Line.
    pub line: usize,
}

/// How a link-level generator spaces its packets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pattern {
    /// Evenly.
    Constant,
    /// Exponential gaps (a Poisson process).
    Poisson,
    /// Poisson at `rate × (on + off) / on` during `on`, silent during `off`, so the mean is `rate`.
    OnOff {
        /// On period.
        on_ns: Nanos,
        /// Off period.
        off_ns: Nanos,
    },
}

/// Cross traffic.
#[derive(Debug, Clone, PartialEq)]
pub enum Traffic {
    /// Synthetic packets injected into one direction of a link's queue (they load the link
    /// and vanish at its far end).
    Link {
        /// Its name (`name`, or `traffic1`, `traffic2`, … in file order).
        name: String,
        /// Link index.
        link: usize,
        /// true: a → b; false: b → a.
        ab: bool,
        /// Spacing.
        pattern: Pattern,
        /// Mean rate, bit/s (wire bytes).
        rate_bps: u64,
        /// Packet size, bytes.
        packet: usize,
        /// Start, after the network is up.
        start_ns: Nanos,
        /// Stop (None: until the network goes down).
        stop_ns: Option<Nanos>,
        /// Line.
        line: usize,
    },
    /// Bulk TCP between two hosts (`wanperf serve` on `to`, `wanperf tput` on `from`).
    Tcp {
        /// Its name.
        name: String,
        /// Sending host.
        from: usize,
        /// Receiving host.
        to: usize,
        /// Parallel flows.
        flows: u32,
        /// A cap on all flows together, bit/s (TCP pacing: `wanperf tput -b`); None: as fast as
        /// TCP goes.
        rate_bps: Option<u64>,
        /// Start.
        start_ns: Nanos,
        /// Stop (None: 3600 s).
        stop_ns: Option<Nanos>,
        /// Line.
        line: usize,
    },
}

impl Traffic {
    /// Its name.
    pub fn name(&self) -> &str {
        match self {
            Traffic::Link { name, .. } | Traffic::Tcp { name, .. } => name,
        }
    }

    /// Its line in the file.
    pub fn line(&self) -> usize {
        match self {
            Traffic::Link { line, .. } | Traffic::Tcp { line, .. } => *line,
        }
    }
}

/// A validated topology.
#[derive(Debug, Clone, PartialEq)]
pub struct Topology {
    /// Its name.
    pub name: String,
    /// Hosts and routers, in file order (hosts first as written, then routers as written,
    /// each kind keeping its order).
    pub nodes: Vec<Node>,
    /// Links in file order.
    pub links: Vec<LinkDef>,
    /// Route overrides.
    pub routes: Vec<RoutePath>,
    /// Cross traffic.
    pub traffic: Vec<Traffic>,
    /// Seed for loss, jitter and generators.
    pub seed: u64,
    /// Flow records of what crosses the links, exported to collectors.
    pub export: Option<FlowExport>,
    /// Equal-cost multipath: where several shortest paths lead to a subnet, a node's route
    /// spreads flows over all of them (the kernel's hash of addresses, protocol and ports),
    /// as per-flow load balancers do.
    pub ecmp: bool,
}

/// The `[export]` table: NetFlow v9 / IPFIX from the emulator's own view of every packet a
/// link delivers (observation domain `2 × link + 1` for a → b, `2 × link + 2` for b → a).
#[derive(Debug, Clone, PartialEq)]
pub struct FlowExport {
    /// Where the messages go (from the machine's own network, e.g. 127.0.0.1:4739).
    pub collectors: Vec<std::net::SocketAddr>,
    /// NetFlow v9 or IPFIX (default).
    pub format: wanperf_flows::export::Format,
    /// A record open this long is exported (and a new one started).
    pub active_ns: Nanos,
    /// A record without packets for this long is exported.
    pub idle_ns: Nanos,
    /// Open records per link direction before all are exported early.
    pub max_flows: usize,
}

impl FlowExport {
    /// IPFIX to `collectors`, active timeout 60 s, idle 15 s, 65,536 open records.
    pub fn new(collectors: Vec<std::net::SocketAddr>) -> Self {
        FlowExport {
            collectors,
            format: wanperf_flows::export::Format::Ipfix,
            active_ns: 60_000_000_000,
            idle_ns: 15_000_000_000,
            max_flows: 65_536,
        }
    }
}

impl Topology {
    /// The node called `name`.
    pub fn node(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// The link called `name`.
    pub fn link(&self, name: &str) -> Option<usize> {
        self.links.iter().position(|l| l.name == name)
    }

    /// Hosts' indices.
    pub fn hosts(&self) -> impl Iterator<Item = usize> + '_ {
        self.nodes.iter().enumerate().filter(|(_, n)| !n.is_router()).map(|(i, _)| i)
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    name: Option<String>,
    description: Option<String>,
    seed: Option<u64>,
    #[serde(default)]
    ecmp: bool,
    #[serde(default)]
    host: Vec<Spanned<Table>>,
    #[serde(default)]
    router: Vec<Spanned<Table>>,
    #[serde(default)]
    link: Vec<Spanned<Table>>,
    #[serde(default)]
    route: Vec<Spanned<Table>>,
    #[serde(default)]
    traffic: Vec<Spanned<Table>>,
    export: Option<Spanned<Table>>,
}

/// A duration within 0 s – 24 h, ns.
fn duration(r: &mut Reader, key: &str) -> Result<Option<Nanos>, TopoError> {
    Ok(r.duration(key, 0.0..=86_400.0)?.map(|(_, secs)| (secs * 1e9).round() as Nanos))
}

impl Topology {
    /// Reads and validates a topology file's structure (see [`Topology::parse`], which also
    /// checks that its addresses can be planned). `read` loads trace files named in it. Each
    /// table is read by a function of its own (below); this checks what spans tables.
    pub(crate) fn read(text: &str, read: &dyn Fn(&str) -> Result<String, String>) -> Result<Topology, TopoError> {
        let lines = Lines::new(text);
        let file: File = wanperf_toml::parse(text)?;
        let mut nodes: Vec<Node> = Vec::new();
        let hosts = file.host.into_iter().map(|t| host(&lines, t));
        let routers = file.router.into_iter().map(|t| router(&lines, t));
        for n in hosts.chain(routers) {
            let n = n?;
            valid_name(&n.name).map_err(|m| err(n.line, m))?;
            if let Some(other) = nodes.iter().find(|o| o.name == n.name) {
                return Err(err(n.line, format!("`{}` is already defined on line {}", n.name, other.line)));
            }
            nodes.push(n);
        }
        if nodes.len() > MAX_NODES {
            return Err(err(0, format!("{} nodes: at most {MAX_NODES}", nodes.len())));
        }
        let mut links: Vec<LinkDef> = Vec::new();
        for t in file.link {
            let l = link(&lines, t, &nodes, &links, read)?;
            links.push(l);
        }
        if links.len() > MAX_LINKS {
            return Err(err(0, format!("{} links: at most {MAX_LINKS}", links.len())));
        }
        let routes = file.route.into_iter().map(|t| route(&lines, t, &nodes, &links)).collect::<Result<Vec<_>, _>>()?;
        let mut traffic: Vec<Traffic> = Vec::new();
        for (i, t) in file.traffic.into_iter().enumerate() {
            let x = traffic_table(&lines, t, i, &nodes, &links)?;
            if let Some(o) = traffic.iter().find(|o| o.name() == x.name()) {
                return Err(err(x.line(), format!("traffic `{}` is already defined on line {}", x.name(), o.line())));
            }
            traffic.push(x);
        }
        let _ = file.description;
        let export = match file.export {
            None => None,
            Some(t) => Some(parse_export(Reader::new(&lines, t, "[export] table"))?),
        };
        let topo = Topology {
            name: file.name.unwrap_or_else(|| "net".into()),
            nodes,
            links,
            routes,
            traffic,
            seed: file.seed.unwrap_or(1),
            export,
            ecmp: file.ecmp,
        };
        check_graph(&topo)?;
        Ok(topo)
    }
}

/// The node called `name` (`key`: which key named it, for the error at line `l`).
fn node_ref(nodes: &[Node], l: usize, key: &str, name: &str) -> Result<usize, TopoError> {
    nodes
        .iter()
        .position(|n| n.name == name)
        .ok_or_else(|| err(l, format!("`{key}`: no host or router is called `{name}`")))
}

/// A `[[host]]` table.
fn host(lines: &Lines<'_>, t: Spanned<Table>) -> Result<Node, TopoError> {
    let mut r = Reader::new(lines, t, "host");
    let (_, name) = r.required_text("name")?;
    let txq = r.uint("txqueuelen", range::TXQUEUELEN)?.map(|v| v as u32);
    let line = r.line;
    // The host model's keys, each read as the text form reads it.
    let mut model = wanperf_host::HostModel::default();
    for key in HOST_MODEL_KEYS {
        let Some((l, v)) = r.take(key) else { continue };
        let text = match v {
            Value::Boolean(b) => if b { "on" } else { "off" }.to_string(),
            v => scalar(&v).ok_or_else(|| err(l, format!("`{key}` must be a single value")))?,
        };
        model.set(key, &text).map_err(|e| err(l, e.to_string()))?;
    }
    let mut known = vec!["name", "txqueuelen"];
    known.extend(HOST_MODEL_KEYS);
    r.finish(&known)?;
    Ok(Node { name, kind: NodeKind::Host, txqueuelen: txq, model, line })
}

/// A host table's keys for its model (`wanperf_host::HostModel`).
/// The values a topology's numbers may take, as its tables and a study's settings
/// (`crate::vary`) check them.
pub(crate) mod range {
    use std::ops::RangeInclusive;
    /// A host's or router's transmit queue, packets.
    pub const TXQUEUELEN: RangeInclusive<u64> = 1..=1_000_000;
    /// A link's MTU, bytes.
    pub const MTU: RangeInclusive<u64> = 576..=65_535;
    /// A link's routing cost.
    pub const COST: RangeInclusive<u64> = 1..=1_000_000;
    /// A generator's packet, bytes.
    pub const PACKET: RangeInclusive<u64> = 64..=65_535;
    /// TCP cross traffic's flows.
    pub const FLOWS: RangeInclusive<u64> = 1..=128;
}

pub(crate) const HOST_MODEL_KEYS: [&str; 9] =
    ["cpu", "sack", "timestamps", "window_scaling", "tcp_rmem", "tcp_wmem", "cc", "disk_read", "disk_write"];

/// A `[[router]]` table.
fn router(lines: &Lines<'_>, t: Spanned<Table>) -> Result<Node, TopoError> {
    let mut r = Reader::new(lines, t, "router");
    let (_, name) = r.required_text("name")?;
    let txq = r.uint("txqueuelen", range::TXQUEUELEN)?.map(|v| v as u32);
    let mut o = RouterOpts {
        icmp_ratelimit_ms: duration(&mut r, "icmp_ratelimit")?.map(|ns| (ns / 1_000_000) as u32),
        icmp_msgs_per_sec: r.uint("icmp_msgs_per_sec", 0..=1_000_000)?.map(|v| v as u32),
        icmp_msgs_burst: r.uint("icmp_msgs_burst", 1..=1_000_000)?.map(|v| v as u32),
        icmp_delay_ns: duration(&mut r, "icmp_delay")?.unwrap_or(0),
        icmp_jitter_ns: duration(&mut r, "icmp_jitter")?.unwrap_or(0),
        icmp_silent: false,
    };
    if o.icmp_delay_ns > 10_000_000_000 || o.icmp_jitter_ns > 10_000_000_000 {
        return Err(err(r.line, "icmp_delay and icmp_jitter must be at most 10 s"));
    }
    if let Some((l, v)) = r.text("icmp")? {
        o.icmp_silent = match v.as_str() {
            "answer" => false,
            "silent" => true,
            _ => return Err(err(l, format!("`icmp` must be answer or silent, not `{v}`"))),
        };
    }
    let line = r.line;
    r.finish(&[
        "name",
        "txqueuelen",
        "icmp_ratelimit",
        "icmp_msgs_per_sec",
        "icmp_msgs_burst",
        "icmp_delay",
        "icmp_jitter",
        "icmp",
    ])?;
    Ok(Node { name, kind: NodeKind::Router(o), txqueuelen: txq, model: Default::default(), line })
}

/// A `[[link]]` table (`links`: those before it, whose names it may not take again).
fn link(
    lines: &Lines<'_>,
    t: Spanned<Table>,
    nodes: &[Node],
    links: &[LinkDef],
    read: &dyn Fn(&str) -> Result<String, String>,
) -> Result<LinkDef, TopoError> {
    let mut r = Reader::new(lines, t, "link");
    let (la, a) = r.required_text("a")?;
    let a = node_ref(nodes, la, "a", &a)?;
    let (lb, b) = r.required_text("b")?;
    let b = node_ref(nodes, lb, "b", &b)?;
    if a == b {
        return Err(err(lb, format!("a link from `{}` to itself", nodes[a].name)));
    }
    let name = match r.text("name")? {
        Some((l, n)) => {
            valid_name(&n).map_err(|m| err(l, m))?;
            n
        }
        None => format!("{}-{}", nodes[a].name, nodes[b].name),
    };
    if let Some(o) = links.iter().find(|o| o.name == name) {
        return Err(err(
            r.line,
            format!("a link called `{name}` is already defined on line {} (give it a `name`)", o.line),
        ));
    }
    let mtu = r.uint("mtu", range::MTU)?.unwrap_or(1500) as u32;
    let cost = r.uint("cost", range::COST)?.unwrap_or(1) as u32;
    let offload = match r.take("offload") {
        None => true,
        Some((_, Value::Boolean(b))) => b,
        Some((l, _)) => return Err(err(l, "`offload` must be true or false")),
    };
    let subnet = match r.text("subnet")? {
        None => None,
        Some((l, s)) => Some(parse_subnet(&s).map_err(|m| err(l, m))?),
    };
    let (mut ab, mut ba) = (DirConfig::default(), DirConfig::default());
    // `rtt` first, so `delay_ab` may refine it whatever the order in the file.
    let mut opts: Vec<(String, usize, Value)> = r.take_rest();
    opts.sort_by_key(|(k, l, _)| (k != "rtt", *l));
    let mut rest = Vec::new();
    for (k, l, v) in opts {
        if !linkopts::is_dir_key(&k) {
            rest.push((k, l, v));
            continue;
        }
        let values: Vec<String> = match &v {
            Value::Array(items) => items.iter().map(scalar).collect::<Option<_>>(),
            v => scalar(v).map(|s| vec![s]),
        }
        .ok_or_else(|| err(l, format!("`{k}` must be a value or an array of values")))?;
        linkopts::apply(&mut ab, &mut ba, &k, &values, read).map_err(|m| err(l, m))?;
    }
    r.put_back(rest);
    let line = r.line;
    let mut known = vec!["a", "b", "name", "mtu", "cost", "offload", "subnet"];
    known.extend(linkopts::DIR_KEYS);
    r.finish(&known)?;
    Ok(LinkDef { name, a, b, ab, ba, mtu, cost, offload, subnet, line })
}

/// A `[[route]]` table: a path of nodes joined by links, routers inside.
fn route(lines: &Lines<'_>, t: Spanned<Table>, nodes: &[Node], links: &[LinkDef]) -> Result<RoutePath, TopoError> {
    let mut r = Reader::new(lines, t, "route");
    let line = r.line;
    let (l, v) = r.take("path").ok_or_else(|| err(line, "this route has no `path` (a list of node names)"))?;
    let names: Vec<String> = match v {
        Value::Array(items) => items.iter().map(|i| i.as_str().map(str::to_string)).collect::<Option<_>>(),
        _ => None,
    }
    .ok_or_else(|| err(l, "`path` must be a list of node names"))?;
    if names.len() < 2 {
        return Err(err(l, "`path` needs at least two nodes"));
    }
    let mut path = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let id = node_ref(nodes, l, "path", n)?;
        if path.contains(&id) {
            return Err(err(l, format!("`path` visits `{n}` twice")));
        }
        if i > 0 && !links.iter().any(|k| (k.a == id && k.b == path[i - 1]) || (k.b == id && k.a == path[i - 1])) {
            return Err(err(l, format!("`path` goes from `{}` to `{n}`, but no link joins them", names[i - 1])));
        }
        if i > 0 && i < names.len() - 1 && !nodes[id].is_router() {
            return Err(err(l, format!("`path` passes through host `{n}`; only routers forward")));
        }
        path.push(id);
    }
    r.finish(&["path"])?;
    Ok(RoutePath { nodes: path, line })
}

/// A `[[traffic]]` table: a generator on a link, or TCP between two hosts.
fn traffic_table(
    lines: &Lines<'_>,
    t: Spanned<Table>,
    index: usize,
    nodes: &[Node],
    links: &[LinkDef],
) -> Result<Traffic, TopoError> {
    let mut r = Reader::new(lines, t, "traffic");
    let line = r.line;
    let name = match r.text("name")? {
        Some((l, n)) => {
            valid_name(&n).map_err(|m| err(l, m))?;
            n
        }
        None => format!("traffic{}", index + 1),
    };
    let start_ns = duration(&mut r, "start")?.unwrap_or(0);
    let stop_ns = duration(&mut r, "stop")?;
    if stop_ns.is_some_and(|s| s <= start_ns) {
        return Err(err(line, "`stop` must be after `start`"));
    }
    if let Some((l, link)) = r.text("link")? {
        let li = links
            .iter()
            .position(|k| k.name == link)
            .ok_or_else(|| err(l, format!("`link`: no link is called `{link}`")))?;
        let ab = match r.text("direction")? {
            None => true,
            Some((_, d)) if d == "ab" => true,
            Some((_, d)) if d == "ba" => false,
            Some((l, d)) => return Err(err(l, format!("`direction` must be ab or ba, not `{d}`"))),
        };
        let (lr, rate) = r.required_text("rate")?;
        let rate_bps = parse_link_rate("rate", &rate).map_err(|e| err(lr, e.to_string()))?;
        let packet = r.uint("packet", range::PACKET)?.unwrap_or(1500) as usize;
        let pattern = match r.text("pattern")? {
            None => Pattern::Poisson,
            Some((_, p)) if p == "poisson" => Pattern::Poisson,
            Some((_, p)) if p == "constant" => Pattern::Constant,
            Some((l, p)) if p == "onoff" => {
                let on_ns = duration(&mut r, "on")?.unwrap_or(1_000_000_000);
                let off_ns = duration(&mut r, "off")?.unwrap_or(1_000_000_000);
                if on_ns == 0 {
                    return Err(err(l, "`on` must be more than 0"));
                }
                Pattern::OnOff { on_ns, off_ns }
            }
            Some((l, p)) => return Err(err(l, format!("`pattern` must be poisson, constant or onoff, not `{p}`"))),
        };
        r.finish(&["name", "link", "direction", "rate", "packet", "pattern", "on", "off", "start", "stop"])?;
        Ok(Traffic::Link { name, link: li, ab, pattern, rate_bps, packet, start_ns, stop_ns, line })
    } else {
        let (lf, from) = r
            .text("from")?
            .ok_or_else(|| err(line, "traffic needs `link` (a generator) or `from` and `to` (TCP between hosts)"))?;
        let from = node_ref(nodes, lf, "from", &from)?;
        let (lt, to) = r.required_text("to")?;
        let to = node_ref(nodes, lt, "to", &to)?;
        for (id, l) in [(from, lf), (to, lt)] {
            if nodes[id].is_router() {
                return Err(err(l, format!("`{}` is a router; TCP traffic runs between hosts", nodes[id].name)));
            }
        }
        if from == to {
            return Err(err(lt, "`from` and `to` are the same host"));
        }
        let flows = r.uint("flows", range::FLOWS)?.unwrap_or(1) as u32;
        let rate_bps = match r.text("rate")? {
            None => None,
            Some((lr, rate)) => Some(parse_link_rate("rate", &rate).map_err(|e| err(lr, e.to_string()))?),
        };
        r.finish(&["name", "from", "to", "flows", "rate", "start", "stop"])?;
        Ok(Traffic::Tcp { name, from, to, flows, rate_bps, start_ns, stop_ns, line })
    }
}

fn parse_export(mut r: Reader) -> Result<FlowExport, TopoError> {
    let line = r.line;
    let collectors = match r.take("collectors") {
        None => return Err(err(line, "the [export] table has no `collectors` (e.g. [\"127.0.0.1:4739\"])")),
        Some((l, Value::String(s))) => vec![(l, s)],
        Some((l, Value::Array(a))) => a
            .into_iter()
            .map(|v| match v {
                Value::String(s) => Ok((l, s)),
                _ => Err(err(l, "`collectors` must be addresses like \"127.0.0.1:4739\"")),
            })
            .collect::<Result<_, _>>()?,
        Some((l, _)) => return Err(err(l, "`collectors` must be addresses like \"127.0.0.1:4739\"")),
    };
    let collectors = collectors
        .into_iter()
        .map(|(l, s)| s.parse().map_err(|_| err(l, format!("`collectors`: `{s}` is not ADDR:PORT"))))
        .collect::<Result<Vec<std::net::SocketAddr>, _>>()?;
    if collectors.is_empty() {
        return Err(err(line, "`collectors` is empty"));
    }
    let mut e = FlowExport::new(collectors);
    if let Some((l, f)) = r.text("format")? {
        e.format = match f.as_str() {
            "ipfix" => wanperf_flows::export::Format::Ipfix,
            "v9" | "netflow9" => wanperf_flows::export::Format::V9,
            _ => return Err(err(l, format!("`format`: `{f}` is not ipfix or v9"))),
        };
    }
    if let Some(a) = duration(&mut r, "active_timeout")? {
        e.active_ns = a.max(1_000_000_000);
    }
    if let Some(i) = duration(&mut r, "idle_timeout")? {
        e.idle_ns = i.max(1_000_000_000);
    }
    if let Some(n) = r.uint("max_flows", 1..=10_000_000)? {
        e.max_flows = n as usize;
    }
    r.finish(&["collectors", "format", "active_timeout", "idle_timeout", "max_flows"])?;
    Ok(e)
}

fn valid_name(n: &str) -> Result<(), String> {
    if n.is_empty() || n.len() > 32 || !n.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(format!("name `{n}`: use 1–32 letters, digits, - and _"));
    }
    Ok(())
}

fn parse_subnet(s: &str) -> Result<Ipv4Addr, String> {
    let (a, p) = s.split_once('/').unwrap_or((s, "24"));
    let a: Ipv4Addr = a.parse().map_err(|_| format!("`subnet`: `{s}` is not an IPv4 /24"))?;
    let o = a.octets();
    if p != "24" || o[3] != 0 {
        return Err(format!("`subnet`: `{s}` is not a /24 (like 198.18.7.0/24)"));
    }
    if o[0] != 198 || !(18..=19).contains(&o[1]) {
        return Err(format!("`subnet`: `{s}` is outside 198.18.0.0/15, the only range emulated hosts use"));
    }
    Ok(a)
}

/// Every node reachable from every other.
fn check_graph(t: &Topology) -> Result<(), TopoError> {
    if t.hosts().count() == 0 {
        return Err(err(0, "the topology has no [[host]]"));
    }
    let n = t.nodes.len();
    let mut seen = vec![false; n];
    let mut stack = vec![0];
    seen[0] = true;
    while let Some(i) = stack.pop() {
        for l in &t.links {
            for (x, y) in [(l.a, l.b), (l.b, l.a)] {
                if x == i && !seen[y] {
                    seen[y] = true;
                    stack.push(y);
                }
            }
        }
    }
    if let Some(i) = seen.iter().position(|s| !s) {
        let node = &t.nodes[i];
        return Err(err(
            node.line,
            format!("the network is not connected: no links lead from `{}` to `{}`", t.nodes[0].name, node.name),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none(_: &str) -> Result<String, String> {
        Err("no files in tests".into())
    }

    const CHAIN: &str = r#"
name = "chain"
[[host]]
name = "a"
[[host]]
name = "b"
txqueuelen = 100
[[router]]
name = "r1"
icmp_ratelimit = "2s"
icmp_delay = "1ms"
[[router]]
name = "r2"
icmp = "silent"
[[link]]
a = "a"
b = "r1"
delay = "5ms"
rate_ab = "10M"
[[link]]
a = "r1"
b = "r2"
rtt = "20ms"
delay_ba = "1ms"
priority = ["dscp=46"]
mtu = 1400
[[link]]
a = "r2"
b = "b"
[[traffic]]
link = "r1-r2"
rate = "5M"
pattern = "onoff"
on = "100ms"
off = "300ms"
start = "1s"
stop = "2s"
[[traffic]]
from = "b"
to = "a"
flows = 2
rate = "3M"
"#;

    #[test]
    fn a_chain_parses_with_everything_in_place() {
        let t = Topology::parse(CHAIN, &none).unwrap();
        assert_eq!(t.name, "chain");
        let names: Vec<&str> = t.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "r1", "r2"]);
        assert_eq!(t.nodes[1].txqueuelen, Some(100));
        let NodeKind::Router(o) = &t.nodes[2].kind else { panic!() };
        assert_eq!((o.icmp_ratelimit_ms, o.icmp_delay_ns, o.icmp_silent), (Some(2000), 1_000_000, false));
        let NodeKind::Router(o) = &t.nodes[3].kind else { panic!() };
        assert!(o.icmp_silent);
        assert_eq!(t.links[0].name, "a-r1");
        assert_eq!(t.links[0].ab.rate, wanperf_emu::config::Rate::Constant(10_000_000));
        assert_eq!(t.links[0].ba.rate, wanperf_emu::config::Rate::Unlimited);
        // rtt splits, then delay_ba overrides one direction, whatever the order in the file.
        assert_eq!((t.links[1].ab.delay_ns, t.links[1].ba.delay_ns), (10_000_000, 1_000_000));
        assert_eq!(t.links[1].mtu, 1400);
        assert_eq!(t.links[1].ab.priority.len(), 1);
        assert_eq!(t.traffic.len(), 2);
        assert!(matches!(
            t.traffic[0],
            Traffic::Link { link: 1, ab: true, rate_bps: 5_000_000, start_ns: 1_000_000_000, .. }
        ));
        assert!(matches!(t.traffic[1], Traffic::Tcp { from: 1, to: 0, flows: 2, rate_bps: Some(3_000_000), .. }));
    }

    fn bad(text: &str) -> TopoError {
        Topology::parse(text, &none).unwrap_err()
    }

    #[test]
    fn the_export_table_names_collectors_format_and_timeouts() {
        let pair = "[[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n[[link]]\na = \"a\"\nb = \"b\"\n";
        assert_eq!(Topology::parse(pair, &none).unwrap().export, None);
        let t = Topology::parse(
            &format!("{pair}[export]\ncollectors = [\"127.0.0.1:4739\", \"[::1]:2055\"]\nformat = \"v9\"\nactive_timeout = \"30s\"\nidle_timeout = \"5s\"\nmax_flows = 100\n"),
            &none,
        )
        .unwrap();
        let e = t.export.unwrap();
        assert_eq!(e.collectors.len(), 2);
        assert_eq!(e.format, wanperf_flows::export::Format::V9);
        assert_eq!((e.active_ns, e.idle_ns, e.max_flows), (30_000_000_000, 5_000_000_000, 100));
        let one = Topology::parse(&format!("{pair}[export]\ncollectors = \"127.0.0.1:9995\"\n"), &none).unwrap();
        assert_eq!(one.export.unwrap().format, wanperf_flows::export::Format::Ipfix);
        let e = bad(&format!("{pair}[export]\nformat = \"v9\"\n"));
        assert!(e.message.contains("no `collectors`"), "{e}");
        let e = bad(&format!("{pair}[export]\ncollectors = [\"localhost\"]\n"));
        assert_eq!((e.line, e.message.as_str()), (9, "`collectors`: `localhost` is not ADDR:PORT"));
        let e = bad(&format!("{pair}[export]\ncollectors = \"127.0.0.1:1\"\nformat = \"v5\"\n"));
        assert_eq!(e.line, 10);
        let e = bad(&format!("{pair}[export]\ncollectors = \"127.0.0.1:1\"\nsampling = 10\n"));
        assert!(e.message.starts_with("unknown key `sampling`"), "{e}");
    }

    #[test]
    fn every_bad_topology_gets_one_line_with_its_line_number() {
        let e = bad("[[host]]\nname = \"a\"\n[[link]]\na = \"a\"\nb = \"zz\"\n");
        assert_eq!((e.line, e.message.as_str()), (5, "`b`: no host or router is called `zz`"));
        let e = bad("[[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n");
        assert_eq!(e.line, 3);
        assert!(e.message.contains("not connected"), "{e}");
        let e = bad("[[host]]\nname = \"a\"\n[[host]]\nname = \"a\"\n");
        assert_eq!(e.to_string(), "line 3: `a` is already defined on line 1");
        let e = bad("[[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n[[link]]\na = \"a\"\nb = \"b\"\nsubnet = \"198.18.9.0/24\"\n[[link]]\na = \"a\"\nb = \"b\"\nname = \"two\"\nsubnet = \"198.18.9.0/24\"\n");
        assert_eq!(e.line, 9);
        assert!(
            e.message.starts_with("duplicate address: links `a-b` (line 5) and `two` both use 198.18.9.0/24"),
            "{e}"
        );
    }

    #[test]
    fn routes_must_follow_links_and_keys_must_be_known() {
        let base = "[[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n[[router]]\nname = \"r\"\n[[link]]\na = \"a\"\nb = \"r\"\n[[link]]\na = \"r\"\nb = \"b\"\n";
        let e = bad(&format!("{base}[[route]]\npath = [\"a\", \"b\"]\n"));
        assert_eq!(e.line, 14);
        assert!(e.message.contains("no link joins them"), "{e}");
        let e = bad(&format!("{base}[[route]]\npath = [\"a\", \"r\", \"a\"]\n"));
        assert!(e.message.contains("twice"), "{e}");
        let e = bad(&format!("{base}[[link]]\na = \"a\"\nb = \"b\"\ncolour = \"red\"\n"));
        assert_eq!(e.line, 16);
        assert!(e.message.contains("unknown key `colour`"), "{e}");
        let e = bad(&format!("{base}[[link]]\na = \"a\"\nb = \"b\"\nrate = \"fast\"\n"));
        assert_eq!(e.line, 16);
        let e = bad(&format!("{base}[[traffic]]\nlink = \"nope\"\nrate = \"1M\"\n"));
        assert!(e.message.contains("no link is called `nope`"), "{e}");
        let e = bad("[[host]]\nname = \"a b\"\n");
        assert!(e.message.contains("name `a b`"), "{e}");
        let e = bad("[[hosts]]\nname = \"a\"\n");
        assert_eq!(e.line, 1);
        let e = bad("[[router]]\nname = \"r\"\n");
        assert!(e.message.contains("no [[host]]"), "{e}");
        let ok = Topology::parse(&format!("{base}[[route]]\npath = [\"b\", \"r\", \"a\"]\n"), &none).unwrap();
        assert_eq!(ok.routes[0].nodes, [1, 2, 0]);
    }

    #[test]
    fn a_host_table_takes_its_model() {
        let pair = |host: &str| {
            format!("[[host]]\nname = \"a\"\n{host}[[host]]\nname = \"b\"\n[[link]]\na = \"a\"\nb = \"b\"\n")
        };
        let t = Topology::parse(&pair("cpu = 0.25\nsack = false\ntcp_wmem = \"64K\"\ncc = \"reno\"\n"), &none).unwrap();
        let m = &t.nodes[0].model;
        assert_eq!(
            (m.cpu, m.sack, m.wmem, m.cc.as_deref()),
            (Some(0.25), Some(false), Some([4096, 65536, 65536]), Some("reno"))
        );
        assert!(t.nodes[1].model.is_default());
        let e = bad(&pair("cpu = 0.25\nsack = \"sometimes\"\n"));
        assert_eq!((e.line, e.message.as_str()), (4, "`sack` is on or off, not `sometimes`"));
        let t = Topology::parse(&pair("disk_read = \"400M\"\n"), &none).unwrap();
        assert_eq!(t.nodes[0].model.disk_read, Some(400_000_000));
        let e = bad(&pair("disk_write = \"fast\"\n"));
        assert!(e.message.starts_with("`disk_write`"), "{e}");
        let e = bad(&pair("memory = \"1G\"\n"));
        assert!(e.message.starts_with("unknown key `memory`"), "{e}");
    }
}
