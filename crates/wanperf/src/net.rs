//! `wanperf net`: emulated networks of hosts, routers and links (glue over `wanperf-net`).
//!
//! `net run FILE -- CMD` builds the network, runs CMD on a host and tears everything down;
//! `net up FILE NAME` hands the network to a small daemon (`net __daemon`) that answers
//! one-line JSON requests on a Unix socket, for `exec`, `stats`, `set`, `down` and `list`.

use crate::args::ExportFormatArg;
use anyhow::{anyhow, bail, Result};
use clap::{Args, Subcommand};
use serde_json::json;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use wanperf_net::child::exit_code;
use wanperf_net::daemon::{Kind, Request};
use wanperf_net::netd::{check_nice, load, node_of, NetInfo, Session, SetReply, StatsReply};
use wanperf_net::plan::Plan;
use wanperf_net::show::{plan_json, print_links, print_plan};
use wanperf_net::topo::FlowExport;

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

/// `net show`.
pub fn show(a: ShowArgs) -> Result<ExitCode> {
    let t = load(&a.topology)?;
    let p = Plan::new(&t).map_err(|e| anyhow!("{e}"))?;
    let mut out = std::io::stdout().lock();
    wanperf_net::show::print_plan_as(&t, &p, a.json, &mut out);
    if !a.json {
        wanperf_net::show::print_routes(&t, &p, &mut out);
    }
    Ok(ExitCode::SUCCESS)
}

/// `net presets`.
pub fn presets(name: Option<String>, json_out: bool) -> Result<ExitCode> {
    let lines = wanperf_net::show::net_presets(name.as_deref(), json_out).map_err(|e| anyhow!("{e}"))?;
    lines.iter().for_each(|l| outln!("{l}"));
    Ok(ExitCode::SUCCESS)
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
    let others = wanperf_net::netd::commands_on(&t, &a.on)?;
    let mut s = Session::start(&t, a.host_nice, crate::args::log_sink(&a.log)?)?;
    wanperf_net::show::print_plan_as(&t, s.net().plan(), a.json, &mut std::io::stderr());
    let status = s.run(host, &a.cmd, &others, wait);
    let hosts = s.net().host_reports();
    wanperf_net::show::print_end(&t, s.finish(), &hosts, a.json, &mut std::io::stderr());
    let status = status?;
    Ok(status.map_or(ExitCode::from(130), |st| exit_code(&st)))
}

/// `net up`: checks the topology, starts the daemon, waits until the network is ready.
pub fn up(a: UpArgs) -> Result<ExitCode> {
    Kind::Network.check_name(&a.name)?;
    check_nice(a.host_nice)?;
    let t = load(&a.topology)?;
    wanperf_net::netd::start(&a.name, &a.topology, a.host_nice)?;
    let p = Plan::new(&t).map_err(|e| anyhow!("{e}"))?;
    if a.json {
        outln!("{}", json!({"event": "net_up", "name": a.name, "plan": plan_json(&t, &p)}));
    } else {
        print_plan(&t, &p, &mut std::io::stdout());
        outln!("network `{}` is up (`wanperf net exec {} NODE -- CMD`, `wanperf net down {}`)", a.name, a.name, a.name);
    }
    Ok(ExitCode::SUCCESS)
}

/// `net set`.
pub fn set(a: SetArgs) -> Result<ExitCode> {
    let r: SetReply = Kind::Network.ask(&a.name, &Request::Set { link: a.link.clone(), options: a.options.clone() })?;
    r.lines(a.json).iter().for_each(|l| outln!("{l}"));
    Ok(ExitCode::SUCCESS)
}

/// `net exec NAME NODE -- CMD`: runs CMD inside the node (replacing this process), with the
/// environment `net run` gives.
pub fn exec(a: ExecArgs) -> Result<ExitCode> {
    let info: NetInfo = Kind::Network.ask(&a.name, &Request::Info)?;
    let env = info.join(&a.node)?;
    let err = Command::new(&a.cmd[0]).args(&a.cmd[1..]).envs(env).exec();
    bail!("cannot run `{}`: {err}", a.cmd[0])
}

fn print_reply_stats(name: &str, r: StatsReply, link: Option<&str>, json_out: bool) -> Result<()> {
    let r = r.only(link, name)?;
    print_links(name, &r.links, r.export.as_ref(), json_out, &mut std::io::stdout());
    Ok(())
}

/// `net stats`.
pub fn stats(a: StatsArgs) -> Result<ExitCode> {
    let r: StatsReply = Kind::Network.ask(&a.name, &Request::Stats)?;
    print_reply_stats(&a.name, r, a.link.as_deref(), a.json)?;
    Ok(ExitCode::SUCCESS)
}

/// `net down`.
pub fn down(a: NameArgs) -> Result<ExitCode> {
    let r: StatsReply = Kind::Network.ask(&a.name, &Request::Down)?;
    print_reply_stats(&a.name, r, None, a.json)?;
    Kind::Network.wait_gone(&a.name)?;
    Ok(ExitCode::SUCCESS)
}

/// `net list`.
pub fn list(json_out: bool) -> Result<ExitCode> {
    for l in wanperf_net::netd::networks(&Kind::Network.live::<NetInfo>(), json_out) {
        outln!("{l}");
    }
    Ok(ExitCode::SUCCESS)
}
