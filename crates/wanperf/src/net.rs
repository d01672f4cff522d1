//! `wanperf net`: emulated networks of hosts, routers and links (glue over `wanperf-net`).
//!
//! `net run FILE -- CMD` builds the network, runs CMD on a host and tears everything down;
//! `net up FILE NAME` hands the network to a small daemon (`net __daemon`) that answers
//! one-line JSON requests on a Unix socket, for `exec`, `stats`, `set`, `down` and `list`.

use crate::args::ExportFormatArg;
use crate::child::{stop_child, wait_child};
use crate::INTERRUPTED;
use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use serde_json::{json, Value};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use wanperf_emu::fabric::LinkStats;
use wanperf_net::export::ExportStats;
use wanperf_net::plan::Plan;
use wanperf_net::run::{Network, Options};
use wanperf_net::topo::{FlowExport, Topology, Traffic};
use wanperf_proto::units::{fmt_bytes, fmt_rate};

/// `wanperf net` subcommands.
#[derive(Subcommand, Debug)]
pub enum NetCmd {
    /// Build a network, run CMD on one of its hosts, tear it down.
    Run(RunArgs),
    /// Build a named network that stays up until `net down NAME`.
    Up(UpArgs),
    /// Run a command on a node of a named network: `net exec NAME NODE -- CMD`.
    Exec(ExecArgs),
    /// Per-link, per-direction counters of a named network (packets, bytes, drops by cause,
    /// queue delay, per-second utilization).
    Stats(StatsArgs),
    /// Change links of a named network while it runs: `net set NAME LINK rate=10M delay=5ms`.
    Set(SetArgs),
    /// Stop a named network and print its counters.
    Down(NameArgs),
    /// List the named networks that are up.
    List {
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Check a topology and print its nodes, addresses and routes without building it.
    Show(ShowArgs),
    /// List the built-in topologies, or print one (a file to start from).
    Presets {
        /// Print this preset's topology file.
        name: Option<String>,
        /// JSON output (name, source and the topology text).
        #[arg(long)]
        json: bool,
    },
    /// Internal: the daemon behind `net up`.
    #[command(name = "__daemon", hide = true)]
    Daemon {
        /// Network name.
        name: String,
        /// Topology file (or preset).
        topology: String,
        /// Host niceness.
        nice: i32,
    },
}

/// `net run`.
#[derive(Args, Debug)]
#[command(after_long_help = "\
TOPOLOGY is a topology file (docs/net.md) or a preset name (`wanperf net presets`).

Examples:
  wanperf net run iepm-2000 --host slac -- traceroute -n $WANPERF_ADDR_CERN
  wanperf net run iepm-2000 --host slac --on cern='wanperf serve' \\
      -- sh -c 'wanperf tput $WANPERF_ADDR_CERN -t 20'
  wanperf net run chain.toml -- mtr -n -r -c 20 198.18.4.2

Every command gets WANPERF_ADDR_<NODE> (each node's first IPv4 address; WANPERF_ADDR6_<NODE>
for IPv6), WANPERF_SELF, WANPERF_NODE, and WANPERF_PEER when there are exactly two hosts.
Routers forward with the kernel (TTL, ICMP time-exceeded and unreachable, path MTU discovery,
ICMP rate limits); only the links are emulated. Counters go to stderr at the end; the exit
status is CMD's. Works as root, and as a normal user through an unprivileged user namespace.")]
pub struct RunArgs {
    /// Topology file or preset name.
    topology: String,
    /// The host CMD runs on (default: the first host).
    #[arg(long, value_name = "NODE")]
    host: Option<String>,
    /// Also run a command on another node, with `sh -c`, stopped when CMD ends (repeatable):
    /// --on cern='wanperf serve'. Its output goes to stderr.
    #[arg(long = "on", value_name = "NODE=CMD")]
    on: Vec<String>,
    /// The most time the --on commands get to start: CMD runs as soon as each listens (its
    /// processes hold a TCP listener or a bound UDP socket), or when this time is up.
    #[arg(long, value_name = "DURATION", default_value = "2s")]
    wait: String,
    /// Niceness of the nodes' commands, 0–19 (the emulator keeps normal priority).
    #[arg(long, value_name = "N", default_value_t = 10)]
    host_nice: i32,
    /// Per-packet event log (arrival, departure, drop and why), per link and direction.
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Export NetFlow v9 / IPFIX of every packet the links deliver to this collector
    /// (repeatable; replaces the topology's [export] collectors). One observation domain per
    /// link direction: 2 × link + 1 for a → b, 2 × link + 2 for b → a (links counted from 0 in
    /// file order).
    #[arg(long, value_name = "ADDR:PORT")]
    export_flows: Vec<std::net::SocketAddr>,
    /// Export format.
    #[arg(long, value_enum, value_name = "FORMAT")]
    export_format: Option<ExportFormatArg>,
    /// Print the plan and the counters as JSON (on stderr).
    #[arg(long)]
    json: bool,
    /// The command.
    #[arg(last = true, required = true, value_name = "CMD")]
    cmd: Vec<String>,
}

/// `net up`.
#[derive(Args, Debug)]
pub struct UpArgs {
    /// Topology file or preset name.
    topology: String,
    /// Name for the running network (letters, digits, - and _).
    name: String,
    /// Niceness of the nodes' commands, 0–19.
    #[arg(long, value_name = "N", default_value_t = 10)]
    host_nice: i32,
    /// Print the plan as JSON.
    #[arg(long)]
    json: bool,
}

/// `net exec`.
#[derive(Args, Debug)]
pub struct ExecArgs {
    /// Network name.
    name: String,
    /// Host or router.
    node: String,
    /// The command.
    #[arg(last = true, required = true, value_name = "CMD")]
    cmd: Vec<String>,
}

/// `net stats`.
#[derive(Args, Debug)]
pub struct StatsArgs {
    /// Network name.
    name: String,
    /// Only this link.
    #[arg(long)]
    link: Option<String>,
    /// JSON output (with the per-second utilization series).
    #[arg(long)]
    json: bool,
}

/// `net set`.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Options are the topology file's link keys: delay, rtt, jitter, reorder, rate (or `unlimited`),
trace, queue, aqm, loss, loss_model, policer (or `none`), priority; add _ab or _ba for one
direction (a → b is from the link's `a` node). Applied within 50 ms; packets already queued
keep their times. `cost=N` changes the link's routing metric: routes are recomputed and the
changed ones replaced in every node (a route change mid-run); `loss=1` cuts the link.

Example: wanperf net set lab chicago-geneva rate_ba=10M queue=100kB")]
pub struct SetArgs {
    /// Network name.
    name: String,
    /// Link name (`net show` lists them).
    link: String,
    /// KEY=VALUE options.
    #[arg(required = true, value_name = "KEY=VALUE")]
    options: Vec<String>,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// `net down`.
#[derive(Args, Debug)]
pub struct NameArgs {
    /// Network name.
    name: String,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// `net show`.
#[derive(Args, Debug)]
pub struct ShowArgs {
    /// Topology file or preset name.
    topology: String,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

fn read_file(p: &str) -> Result<String, String> {
    std::fs::read_to_string(p).map_err(|e| e.to_string())
}

/// Loads a topology file, or a preset by name. Errors are one line with the file and line.
pub fn load(arg: &str) -> Result<Topology> {
    let path = std::path::Path::new(arg);
    let (text, label) = if path.exists() {
        (std::fs::read_to_string(path).with_context(|| format!("cannot read {arg}"))?, arg.to_string())
    } else if let Some(p) = wanperf_net::presets::find(arg) {
        (p.toml, format!("preset {arg}"))
    } else {
        let names: Vec<String> = wanperf_net::presets::all().into_iter().map(|p| p.name).collect();
        bail!("{arg}: no such file, and no preset of that name (presets: {})", names.join(", "));
    };
    // Trace files are relative to the topology file.
    let base = path.parent().map(|p| p.to_path_buf()).unwrap_or_default();
    let read = move |f: &str| read_file(&base.join(f).display().to_string());
    Topology::parse(&text, &read).map_err(|e| anyhow!("{label}: {e}"))
}

fn node_of(t: &Topology, name: &str) -> Result<usize> {
    t.node(name).ok_or_else(|| {
        let names: Vec<&str> = t.nodes.iter().map(|n| n.name.as_str()).collect();
        anyhow!("no node `{name}` in {} (nodes: {})", t.name, names.join(", "))
    })
}

/// The plan as JSON: nodes with their interfaces, links, routes.
fn plan_json(t: &Topology, p: &Plan) -> Value {
    let nodes: Vec<Value> = t
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let ifs: Vec<Value> = p
                .ifaces_of(i)
                .map(|f| json!({"dev": f.dev, "link": t.links[f.link].name, "ipv4": f.v4, "ipv6": f.v6, "mtu": f.mtu}))
                .collect();
            json!({"name": n.name, "kind": if n.is_router() {"router"} else {"host"}, "interfaces": ifs})
        })
        .collect();
    let links: Vec<Value> = t
        .links
        .iter()
        .map(|l| json!({"name": l.name, "a": t.nodes[l.a].name, "b": t.nodes[l.b].name, "ab": l.ab, "ba": l.ba, "mtu": l.mtu, "cost": l.cost}))
        .collect();
    let routes: Vec<Value> = p
        .routes
        .iter()
        .map(|r| {
            let mut v = json!({"node": t.nodes[r.node].name, "dst": format!("{}/{}", r.dst, r.prefix), "via": r.via, "dev": p.ifaces[r.iface].dev});
            if !r.more.is_empty() {
                v["ecmp"] = r.more.iter().map(|&(i, via)| json!({"via": via, "dev": p.ifaces[i].dev})).collect();
            }
            v
        })
        .collect();
    json!({"name": t.name, "nodes": nodes, "links": links, "routes": routes})
}

fn describe_dir(d: &wanperf_emu::config::DirConfig) -> String {
    let rate = match &d.rate {
        wanperf_emu::config::Rate::Unlimited => "unlimited".to_string(),
        wanperf_emu::config::Rate::Constant(b) => fmt_rate(*b as f64),
        wanperf_emu::config::Rate::Trace(t) => format!("trace (mean {})", fmt_rate(t.mean_bps())),
    };
    format!("{} ms, {rate}", d.delay_ns as f64 / 1e6)
}

/// The plan as text: a line per node with its addresses, a line per link.
fn print_plan(t: &Topology, p: &Plan, out: &mut dyn Write) {
    let _ = writeln!(
        out,
        "network `{}`: {} hosts, {} routers, {} links",
        t.name,
        t.hosts().count(),
        t.nodes.len() - t.hosts().count(),
        t.links.len()
    );
    for (i, n) in t.nodes.iter().enumerate() {
        let addrs: Vec<String> =
            p.ifaces_of(i).map(|f| format!("{} {} ({})", f.dev, f.v4, t.links[f.link].name)).collect();
        let _ =
            writeln!(out, "  {:<7} {:<12} {}", if n.is_router() { "router" } else { "host" }, n.name, addrs.join(", "));
    }
    for l in &t.links {
        let _ = writeln!(
            out,
            "  link {:<20} {} → {}: {}; {} → {}: {}",
            l.name,
            t.nodes[l.a].name,
            t.nodes[l.b].name,
            describe_dir(&l.ab),
            t.nodes[l.b].name,
            t.nodes[l.a].name,
            describe_dir(&l.ba)
        );
    }
}

/// `net show`.
pub fn show(a: ShowArgs) -> Result<ExitCode> {
    let t = load(&a.topology)?;
    let p = Plan::new(&t).map_err(|e| anyhow!("{e}"))?;
    if a.json {
        outln!("{}", json!({"event": "net", "plan": plan_json(&t, &p)}));
    } else {
        let mut out = std::io::stdout().lock();
        print_plan(&t, &p, &mut out);
        for (i, n) in t.nodes.iter().enumerate() {
            for r in p.routes.iter().filter(|r| r.node == i) {
                let more: String =
                    r.more.iter().map(|&(i, via)| format!(" | via {via} dev {}", p.ifaces[i].dev)).collect();
                let _ = writeln!(
                    out,
                    "  route {:<12} {}/{} via {} dev {}{more}",
                    n.name, r.dst, r.prefix, r.via, p.ifaces[r.iface].dev
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `net presets`.
pub fn presets(name: Option<String>, json_out: bool) -> Result<ExitCode> {
    let as_json = |p: &wanperf_net::presets::NetPreset| json!({"name": p.name, "source": p.source, "topology": p.toml});
    match name {
        Some(n) => {
            let p =
                wanperf_net::presets::find(&n).ok_or_else(|| anyhow!("no preset `{n}` (see `wanperf net presets`)"))?;
            if json_out {
                outln!("{}", json!({"event": "net_preset", "preset": as_json(&p)}));
            } else {
                outln!("{}", p.toml.trim_end_matches('\n'));
            }
        }
        None if json_out => {
            let all: Vec<Value> = wanperf_net::presets::all().iter().map(as_json).collect();
            outln!("{}", json!({"event": "net_presets", "presets": all}));
        }
        None => {
            for p in wanperf_net::presets::all() {
                outln!("{:<24} {}", p.name, p.source);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A running network with its cross-traffic processes.
struct Session {
    net: Network,
    started: Instant,
    /// The `wanperf serve` of every host that receives TCP cross traffic.
    servers: Vec<Child>,
    /// Per TCP traffic entry: its index in the topology, its `tput` while it runs, and
    /// whether it has run.
    flows: Vec<(usize, Option<Child>, bool)>,
    exe: String,
}

/// A command that runs `argv` contained on `node` of `net` (see `path::contained`).
fn contained(net: &Network, exe: &str, node: usize, argv: &[String]) -> Command {
    let mut c = Command::new(exe);
    net.enter(node, &mut c);
    c.arg("__contain").arg("--").args(argv);
    c
}

impl Session {
    fn start(t: &Topology, nice: i32, log: Option<Box<dyn Write + Send>>) -> Result<Session> {
        let net = Network::start(t, &Options { host_nice: nice }, log)?;
        let exe = std::env::current_exe().context("cannot find the wanperf executable")?.display().to_string();
        let mut s = Session { net, started: Instant::now(), servers: Vec::new(), flows: Vec::new(), exe };
        // One `wanperf serve` on every host that receives TCP cross traffic, before anything runs.
        let mut receivers: Vec<usize> =
            t.traffic.iter().filter_map(|x| if let Traffic::Tcp { to, .. } = x { Some(*to) } else { None }).collect();
        receivers.sort_unstable();
        receivers.dedup();
        for to in receivers {
            let argv: Vec<String> = [s.exe.as_str(), "serve", "--listen", "0.0.0.0:5301", "--allow", "198.18.0.0/15"]
                .map(String::from)
                .to_vec();
            let mut c = s.contained(to, &argv);
            c.stdout(Stdio::null()).stderr(Stdio::piped()).stdin(Stdio::null());
            let mut child = c.spawn().context("cannot start the cross-traffic server")?;
            crate::child::wait_ready(&mut child, "the cross-traffic server", 10.0)?;
            s.servers.push(child);
        }
        for (i, x) in t.traffic.iter().enumerate() {
            if matches!(x, Traffic::Tcp { .. }) {
                s.flows.push((i, None, false));
            }
        }
        s.started = Instant::now();
        Ok(s)
    }

    /// A command that runs `argv` contained on `node`.
    fn contained(&self, node: usize, argv: &[String]) -> Command {
        contained(&self.net, &self.exe, node, argv)
    }

    /// Starts the TCP cross traffic that is due and reaps what has ended.
    fn tick(&mut self) {
        let now = self.started.elapsed().as_nanos() as u64;
        let Session { net, flows, exe, .. } = self;
        for (i, child, done) in flows.iter_mut() {
            let Traffic::Tcp { from, to, flows, rate_bps, start_ns, stop_ns, .. } = net.topology().traffic[*i] else {
                continue;
            };
            if let Some(c) = child.as_mut() {
                if matches!(c.try_wait(), Ok(Some(_))) {
                    *child = None;
                    *done = true;
                }
                continue;
            }
            if *done || now < start_ns {
                continue;
            }
            let secs = (stop_ns.unwrap_or(start_ns + 3_600_000_000_000) - start_ns) as f64 / 1e9;
            let addr = net.plan().addr_of(to).expect("hosts have addresses").to_string();
            let argv: Vec<String> = vec![
                exe.clone(),
                "tput".into(),
                addr,
                "-p".into(),
                "5301".into(),
                "-P".into(),
                flows.to_string(),
                "-t".into(),
                format!("{secs:.3}"),
                "--json".into(),
            ];
            let argv: Vec<String> = match rate_bps {
                Some(b) => argv.into_iter().chain(["-b".to_string(), b.to_string()]).collect(),
                None => argv,
            };
            let mut c = contained(net, exe, from, &argv);
            c.stdout(Stdio::null()).stderr(Stdio::null()).stdin(Stdio::null());
            match c.spawn() {
                Ok(ch) => *child = Some(ch),
                Err(_) => *done = true,
            }
        }
    }

    fn stop(mut self) -> (Vec<LinkStats>, Option<ExportStats>) {
        for (_, c, _) in &mut self.flows {
            if let Some(c) = c.as_mut() {
                stop_child(c);
            }
        }
        self.servers.iter_mut().for_each(stop_child);
        self.net.finish()
    }
}

/// One direction's counters as text: packets and bytes, drops by cause, queue delay, the
/// busiest second and the last one, cross traffic, and how late the emulator sent packets
/// past their due time (a network that is late by a millisecond is not the one configured).
fn dir_counters(d: &wanperf_emu::fabric::DirStats) -> String {
    let served = d.total(|c| c.dequeued);
    let mean = if served > 0 { d.total(|c| c.sum_queue_delay_ns) as f64 / served as f64 / 1e6 } else { 0.0 };
    let maxq = d.classes.values().map(|c| c.max_queue_delay_ns).max().unwrap_or(0) as f64 / 1e6;
    let second = |b: Option<&u64>| fmt_rate(b.copied().unwrap_or(0) as f64 * 8.0);
    format!(
        "{} pkts ({}) in, {} out; drops: queue {}, aqm {}, policer {}, random {}; queue delay mean {mean:.2} ms, max {maxq:.2} ms; peak {}, last second {}{}; emulator late p99 {:.0} µs, max {:.0} µs",
        d.total(|c| c.packets_in),
        fmt_bytes(d.total(|c| c.bytes_in)),
        d.total(|c| c.packets_out),
        d.total(|c| c.queue_drops),
        d.total(|c| c.aqm_drops),
        d.total(|c| c.policer_drops),
        d.total(|c| c.random_losses),
        second(d.per_second_bytes.iter().max()),
        second(d.per_second_bytes.last()),
        if d.injected > 0 { format!("; {} cross-traffic pkts", d.injected) } else { String::new() },
        d.lateness.p99_us,
        d.lateness.max_us,
    )
}

fn print_stats(
    t: &Topology,
    (stats, export): &(Vec<LinkStats>, Option<ExportStats>),
    json_out: bool,
    out: &mut dyn Write,
) {
    if json_out {
        let behind = wanperf_emu::fabric::fell_behind(stats);
        let _ =
            writeln!(out, "{}", json!({"event": "net_stats", "links": stats, "export": export, "fell_behind": behind}));
        return;
    }
    if let (Some(e), Some(cfg)) = (export, &t.export) {
        let to: Vec<String> = cfg.collectors.iter().map(|c| c.to_string()).collect();
        let _ = writeln!(
            out,
            "flow export ({}): {} records ({} pkts, {} B) in {} messages to {}{}{}",
            match cfg.format {
                wanperf_flows::export::Format::Ipfix => "IPFIX",
                wanperf_flows::export::Format::V9 => "NetFlow v9",
            },
            e.records,
            e.packets,
            e.bytes,
            e.messages,
            to.join(", "),
            if e.send_errors > 0 { format!("; {} sends failed", e.send_errors) } else { String::new() },
            if e.non_ip_packets > 0 {
                format!("; {} non-IP pkts not exported", e.non_ip_packets)
            } else {
                String::new()
            },
        );
    }
    let _ = writeln!(out, "link counters:");
    for (l, s) in t.links.iter().zip(stats) {
        for (from, to, d) in [(l.a, l.b, &s.ab), (l.b, l.a, &s.ba)] {
            if d.total(|c| c.packets_in) > 0 {
                let _ =
                    writeln!(out, "  {} {} → {}: {}", l.name, t.nodes[from].name, t.nodes[to].name, dir_counters(d));
            }
        }
    }
    if let Some(b) = wanperf_emu::fabric::fell_behind(stats) {
        if let Some(l) = t.links.iter().find(|l| l.name == b.link) {
            let (a, z) = (&t.nodes[l.a].name, &t.nodes[l.b].name);
            let _ = writeln!(
                out,
                "{}",
                crate::counters::behind_warning(&b, [&format!("{a} → {z}"), &format!("{z} → {a}")])
            );
        }
    }
}

fn log_sink(p: &Option<PathBuf>) -> Result<Option<Box<dyn Write + Send>>> {
    Ok(match p {
        Some(p) => Some(Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("cannot create {}", p.display()))?,
        ))),
        None => None,
    })
}

fn check_nice(n: i32) -> Result<()> {
    if !(0..=19).contains(&n) {
        bail!("--host-nice must be between 0 and 19");
    }
    Ok(())
}

/// `net run`.
pub fn run(a: RunArgs) -> Result<ExitCode> {
    check_nice(a.host_nice)?;
    let mut t = load(&a.topology)?;
    if !a.export_flows.is_empty() {
        let mut e = t.export.take().unwrap_or_else(|| FlowExport::new(Vec::new()));
        e.collectors = a.export_flows.clone();
        t.export = Some(e);
    }
    if let Some(f) = a.export_format {
        let Some(e) = t.export.as_mut() else { bail!("--export-format needs --export-flows or an [export] table") };
        e.format = f.format();
    }
    let wait = wanperf_proto::units::parse_duration(&a.wait).map_err(|e| anyhow!("--wait: {e}"))?;
    let host = match &a.host {
        Some(h) => node_of(&t, h)?,
        None => t.hosts().next().expect("a topology has a host"),
    };
    let mut others = Vec::new();
    for o in &a.on {
        let (n, cmd) = o.split_once('=').ok_or_else(|| anyhow!("--on `{o}`: write NODE=CMD"))?;
        others.push((node_of(&t, n)?, cmd.to_string()));
    }
    let mut s = Session::start(&t, a.host_nice, log_sink(&a.log)?)?;
    if a.json {
        eprintln!("{}", json!({"event": "net", "plan": plan_json(&t, s.net.plan())}));
    } else {
        print_plan(&t, s.net.plan(), &mut std::io::stderr());
    }
    let mut side = Vec::new();
    for (n, cmd) in &others {
        let mut c = s.contained(*n, &["sh".to_string(), "-c".to_string(), cmd.clone()]);
        if let Ok(fd) = std::os::fd::AsFd::as_fd(&std::io::stderr()).try_clone_to_owned() {
            c.stdout(Stdio::from(fd));
        }
        side.push(c.spawn().with_context(|| format!("cannot start `{cmd}` on {}", t.nodes[*n].name))?);
    }
    crate::child::wait_listening(&mut side, wait);
    let status = match s.contained(host, &a.cmd).spawn() {
        Ok(mut child) => loop {
            s.tick();
            match child.try_wait() {
                Ok(Some(st)) => break Some(st),
                Ok(None) if INTERRUPTED.load(Ordering::Acquire) => break wait_child(&mut child, None),
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                Err(_) => break None,
            }
        },
        Err(e) => {
            side.iter_mut().for_each(stop_child);
            print_stats(&t, &s.stop(), a.json, &mut std::io::stderr());
            bail!("cannot run `{}` on {}: {e}", a.cmd[0], t.nodes[host].name);
        }
    };
    side.iter_mut().for_each(stop_child);
    print_stats(&t, &s.stop(), a.json, &mut std::io::stderr());
    Ok(status.map_or(ExitCode::from(130), |st| crate::child::exit_code(&st)))
}

// ---- named networks -------------------------------------------------------------------

fn runtime_dir() -> PathBuf {
    crate::pathd::runtime_dir().join("net")
}

fn check_name(name: &str) -> Result<()> {
    crate::pathd::check_name_of("network", name)
}

fn socket_path(name: &str) -> PathBuf {
    runtime_dir().join(format!("{name}.sock"))
}

fn request(name: &str, req: Value) -> Result<Value> {
    check_name(name)?;
    crate::pathd::ask(&socket_path(name), "network", name, req)
}

/// `net up`: checks the topology, starts the daemon, waits until the network is ready.
pub fn up(a: UpArgs) -> Result<ExitCode> {
    check_name(&a.name)?;
    check_nice(a.host_nice)?;
    let t = load(&a.topology)?;
    // The daemon reads the same file; give it an absolute path.
    let topo_arg = if std::path::Path::new(&a.topology).exists() {
        std::fs::canonicalize(&a.topology)?.display().to_string()
    } else {
        a.topology.clone()
    };
    let nice = a.host_nice.to_string();
    crate::pathd::start_daemon(
        "network",
        &socket_path(&a.name),
        &a.name,
        &["net", "__daemon", &a.name, &topo_arg, &nice],
    )?;
    let p = Plan::new(&t).map_err(|e| anyhow!("{e}"))?;
    if a.json {
        outln!("{}", json!({"event": "net_up", "name": a.name, "plan": plan_json(&t, &p)}));
    } else {
        print_plan(&t, &p, &mut std::io::stdout());
        outln!("network `{}` is up (`wanperf net exec {} NODE -- CMD`, `wanperf net down {}`)", a.name, a.name, a.name);
    }
    Ok(ExitCode::SUCCESS)
}

/// `net __daemon NAME TOPOLOGY NICE`: owns one network until asked to stop.
pub fn daemon(name: &str, topology: &str, nice: i32) -> Result<ExitCode> {
    use crate::pathd::{report, Answer};
    wanperf_sys::new_session();
    let t = match load(topology) {
        Ok(t) => t,
        Err(e) => {
            report(&format!("error: {e:#}"));
            return Ok(ExitCode::FAILURE);
        }
    };
    let session = match Session::start(&t, nice, None) {
        Ok(s) => Some(s),
        Err(e) => {
            report(&format!("error: {e:#}"));
            return Ok(ExitCode::FAILURE);
        }
    };
    let started = Instant::now();
    let cell = std::cell::RefCell::new(session);
    let listening = crate::pathd::serve_requests(
        &socket_path(name),
        || {
            if let Some(s) = cell.borrow_mut().as_mut() {
                s.tick();
            }
        },
        |req| {
            let mut guard = cell.borrow_mut();
            let Some(s) = guard.as_mut() else { return Answer::Last(json!({ "error": "stopped" })) };
            match req["op"].as_str() {
                Some("info") => {
                    let fds: Vec<i32> = (0..t.nodes.len()).map(|i| s.net.ns_fd(i)).collect();
                    Answer::Reply(json!({"name": name, "pid": std::process::id(), "fds": fds, "nice": nice,
                           "host_cpus": s.net.host_cpus(),
                           "uptime_s": started.elapsed().as_secs_f64(), "plan": plan_json(&t, s.net.plan()),
                           "nodes": t.nodes.iter().map(|n| n.name.clone()).collect::<Vec<_>>(),
                           "env": (0..t.nodes.len()).map(|i| s.net.env(i)).collect::<Vec<_>>()}))
                }
                Some("stats") => Answer::Reply(json!({ "links": s.net.stats(), "export": s.net.export_stats() })),
                Some("set") => Answer::Reply(set_link(&mut s.net, req)),
                Some("down") => {
                    // Commands started with `net exec` would keep the nodes' namespaces (and
                    // themselves) alive after the network is gone: they end with it.
                    let fds: Vec<i32> = (0..t.nodes.len()).map(|i| s.net.ns_fd(i)).collect();
                    wanperf_emu::netns::end_processes_in(&fds, Duration::from_secs(2));
                    let (stats, export) = guard.take().map(Session::stop).unwrap_or_default();
                    Answer::Last(json!({ "links": stats, "export": export }))
                }
                _ => Answer::Reply(json!({ "error": "unknown request" })),
            }
        },
    )?;
    if let Some(s) = cell.into_inner() {
        drop(s.stop());
    }
    Ok(if listening { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Applies `net set` options in the daemon; the reply is the link's new configuration.
fn set_link(net: &mut Network, req: &Value) -> Value {
    let t = net.topology();
    let link_name = req["link"].as_str().unwrap_or("");
    let Some(li) = t.link(link_name) else {
        let names: Vec<&str> = t.links.iter().map(|l| l.name.as_str()).collect();
        return json!({"error": format!("no link `{link_name}` (links: {})", names.join(", "))});
    };
    let (mut ab, mut ba) = net.link_config(li).cloned().expect("link exists");
    let mut cost = None;
    for o in req["options"].as_array().into_iter().flatten() {
        let o = o.as_str().unwrap_or("");
        let Some((k, v)) = o.split_once('=') else {
            return json!({"error": format!("`{o}`: write KEY=VALUE")});
        };
        if k == "cost" {
            match v.parse::<u32>() {
                Ok(c) if (1..=1_000_000).contains(&c) => cost = Some(c),
                _ => return json!({"error": format!("`cost` must be an integer in 1–1000000, not `{v}`")}),
            }
            continue;
        }
        let values: Vec<String> =
            if k.starts_with("priority") { v.split(';').map(str::to_string).collect() } else { vec![v.to_string()] };
        if let Err(e) = wanperf_net::linkopts::apply(&mut ab, &mut ba, k, &values, &|f| read_file(f)) {
            return json!({"error": e});
        }
    }
    let link_name = link_name.to_string();
    net.set(li, ab.clone(), ba.clone());
    let mut reply = json!({"link": link_name, "ab": ab, "ba": ba});
    if let Some(c) = cost {
        match net.set_cost(li, c) {
            Ok(n) => reply["routes_changed"] = json!(n),
            Err(e) => return json!({"error": format!("re-routing: {e}")}),
        }
    }
    reply
}

/// `net set`.
pub fn set(a: SetArgs) -> Result<ExitCode> {
    let v = request(&a.name, json!({"op": "set", "link": a.link, "options": a.options}))?;
    if a.json {
        outln!(
            "{}",
            json!({"event": "net_set", "link": v["link"], "ab": v["ab"], "ba": v["ba"], "routes_changed": v["routes_changed"]})
        );
    } else {
        let ab: wanperf_emu::config::DirConfig = serde_json::from_value(v["ab"].clone())?;
        let ba: wanperf_emu::config::DirConfig = serde_json::from_value(v["ba"].clone())?;
        outln!("link {}: a → b {}; b → a {}", a.link, describe_dir(&ab), describe_dir(&ba));
        if let Some(n) = v["routes_changed"].as_u64() {
            outln!("routes recomputed: {n} changed");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `net exec NAME NODE -- CMD`: runs CMD inside the node (replacing this process).
pub fn exec(a: ExecArgs) -> Result<ExitCode> {
    let info = request(&a.name, json!({"op": "info"}))?;
    let nodes: Vec<String> = serde_json::from_value(info["nodes"].clone()).unwrap_or_default();
    let node = nodes
        .iter()
        .position(|n| *n == a.node)
        .ok_or_else(|| anyhow!("no node `{}` in network `{}` (nodes: {})", a.node, a.name, nodes.join(", ")))?;
    let pid = info["pid"].as_u64().ok_or_else(|| anyhow!("bad answer from the network daemon"))?;
    let fd = info["fds"][node].as_i64().unwrap_or(-1);
    crate::pathd::join_namespaces(pid, fd)?;
    wanperf_emu::path::renice(info["nice"].as_i64().unwrap_or(0) as i32)
        .context("cannot lower the command's priority")?;
    crate::pathd::pin_host(&info)?;
    // The same environment `net run` gives.
    let env: Vec<(String, String)> = serde_json::from_value(info["env"][node].clone()).unwrap_or_default();
    let mut c = Command::new(&a.cmd[0]);
    c.args(&a.cmd[1..]).envs(env);
    let err = c.exec();
    bail!("cannot run `{}`: {err}", a.cmd[0])
}

fn print_reply_stats(name: &str, v: &Value, link: Option<&str>, json_out: bool) -> Result<()> {
    let mut stats: Vec<LinkStats> =
        serde_json::from_value(v["links"].clone()).context("bad counters from the daemon")?;
    if let Some(l) = link {
        stats.retain(|s| s.name == l);
        if stats.is_empty() {
            bail!("no link `{l}` in network `{name}`");
        }
    }
    if json_out {
        let behind = wanperf_emu::fabric::fell_behind(&stats);
        outln!(
            "{}",
            json!({"event": "net_stats", "name": name, "links": stats, "export": v["export"], "fell_behind": behind})
        );
    } else {
        for s in &stats {
            for (dir, d) in [("a → b", &s.ab), ("b → a", &s.ba)] {
                outln!("{:<20} {dir}: {}", s.name, dir_counters(d));
            }
        }
        if let Some(b) = wanperf_emu::fabric::fell_behind(&stats) {
            outln!("{}", crate::counters::behind_warning(&b, ["a → b", "b → a"]));
        }
    }
    Ok(())
}

/// `net stats`.
pub fn stats(a: StatsArgs) -> Result<ExitCode> {
    let v = request(&a.name, json!({"op": "stats"}))?;
    print_reply_stats(&a.name, &v, a.link.as_deref(), a.json)?;
    Ok(ExitCode::SUCCESS)
}

/// `net down`.
pub fn down(a: NameArgs) -> Result<ExitCode> {
    let v = request(&a.name, json!({"op": "down"}))?;
    print_reply_stats(&a.name, &v, None, a.json)?;
    let until = Instant::now() + Duration::from_secs(5);
    while socket_path(&a.name).exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(ExitCode::SUCCESS)
}

/// `net list`.
pub fn list(json_out: bool) -> Result<ExitCode> {
    let rows: Vec<Value> = crate::pathd::live_daemons(&runtime_dir(), "network")
        .into_iter()
        .map(|info| {
            json!({"name": info["name"], "pid": info["pid"], "uptime_s": info["uptime_s"],
                   "nodes": info["nodes"].as_array().map_or(0, Vec::len),
                   "links": info["plan"]["links"].as_array().map_or(0, Vec::len)})
        })
        .collect();
    if json_out {
        outln!("{}", json!({"event": "networks", "networks": rows}));
    } else if rows.is_empty() {
        outln!("no networks are up");
    } else {
        for r in rows {
            outln!(
                "{:<20} {} nodes, {} links, up {:.0} s",
                r["name"].as_str().unwrap_or("?"),
                r["nodes"],
                r["links"],
                r["uptime_s"].as_f64().unwrap_or(0.0)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
