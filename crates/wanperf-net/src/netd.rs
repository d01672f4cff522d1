//! A running network with its cross traffic ([`Session`]), and the daemon that owns a named
//! network (`wanperf net up NAME`) with its replies.

use crate::child::{on_node, stop_child, wait_ready};
use crate::daemon::{self, Answer, Kind, Request};
use crate::export::ExportStats;
use crate::run::{Network, Options};
use crate::topo::{Topology, Traffic};
use crate::traffic::{traffic_reports, TrafficReport};
use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};
use wanperf_emu::config::DirConfig;
use wanperf_emu::fabric::LinkStats;

fn read_file(p: &str) -> Result<String, String> {
    std::fs::read_to_string(p).map_err(|e| e.to_string())
}

/// Loads a topology file, or a preset by name. Errors are one line with the file and line.
pub fn load(arg: &str) -> Result<Topology> {
    let src = Source::of(arg)?;
    Topology::parse(&src.text, &|f| src.read(f)).map_err(|e| anyhow!("{}: {e}", src.label))
}

/// A topology's text, what to call it in errors, and where trace files named in it are.
struct Source {
    text: String,
    label: String,
    base: PathBuf,
}

impl Source {
    /// A topology file, or a preset by name.
    fn of(arg: &str) -> Result<Source> {
        let path = std::path::Path::new(arg);
        let (text, label) = if path.exists() {
            (std::fs::read_to_string(path).with_context(|| format!("cannot read {arg}"))?, arg.to_string())
        } else if let Some(p) = crate::presets::find(arg) {
            (p.toml, format!("preset {arg}"))
        } else {
            let names: Vec<String> = crate::presets::all().into_iter().map(|p| p.name).collect();
            bail!("{arg}: no such file, and no preset of that name (presets: {})", names.join(", "));
        };
        Ok(Source { text, label, base: path.parent().map(|p| p.to_path_buf()).unwrap_or_default() })
    }

    /// A trace file named in it (relative to the topology file).
    fn read(&self, f: &str) -> Result<String, String> {
        read_file(&self.base.join(f).display().to_string())
    }
}

/// A study cell's network: the topology with the cell's cross traffic and settings, the
/// measured pair, and its route.
#[derive(Debug, Clone)]
pub struct CellNet {
    /// The topology as the cell runs it.
    pub topology: Topology,
    /// The measurement's source.
    pub from: crate::vary::Endpoint,
    /// Its destination.
    pub to: crate::vary::Endpoint,
    /// The route's values ([`crate::vary::route_values`]).
    pub values: std::collections::BTreeMap<String, f64>,
    /// The links the measurement crosses, `slac-esnet slac-gw → esnet` each.
    pub route: Vec<String>,
}

/// Loads `topology` (a file or preset) with `traffic` added (topology-file `[[traffic]]`
/// tables), `settings` applied (`link.NAME.KEY`, …, see [`crate::vary::apply`]), and the pair
/// `from` → `to` resolved. Errors are one line.
pub fn load_cell(
    topology: &str,
    traffic: &[String],
    settings: &[(String, String)],
    from: &str,
    to: &str,
) -> Result<CellNet> {
    let src = Source::of(topology)?;
    let (read, label) = (|f: &str| src.read(f), &src.label);
    // The study's traffic after the file's: an error past the file's last line is in it.
    let file_lines = src.text.lines().count();
    let all = std::iter::once(src.text.as_str()).chain(traffic.iter().map(String::as_str)).collect::<Vec<_>>();
    let t = Topology::parse(&all.join("\n"), &read).map_err(|e| match e.line > file_lines {
        true => anyhow!("cross traffic on {label}: {}", e.message),
        false => anyhow!("{label}: {e}"),
    })?;
    let t = crate::vary::apply(&t, settings, &read).map_err(|e| anyhow!("{e}"))?;
    let plan = crate::plan::Plan::new(&t).map_err(|e| anyhow!("{label}: {e}"))?;
    let from = crate::vary::endpoint(&t, &plan, from).map_err(|e| anyhow!("from: {e}"))?;
    let to = crate::vary::endpoint(&t, &plan, to).map_err(|e| anyhow!("to: {e}"))?;
    if from.node == to.node {
        bail!("`from` and `to` are the same host ({})", t.nodes[from.node].name);
    }
    let values = crate::vary::route_values(&t, &plan, &from, &to).map_err(|e| anyhow!("{e}"))?;
    let route = plan
        .walk_links(from.node, to.addr)
        .unwrap_or_default()
        .into_iter()
        .map(|(li, ab)| {
            let l = &t.links[li];
            let (a, b) = (&t.nodes[l.a].name, &t.nodes[l.b].name);
            if ab {
                format!("{} {a} → {b}", l.name)
            } else {
                format!("{} {b} → {a}", l.name)
            }
        })
        .collect();
    Ok(CellNet { topology: t, from, to, values, route })
}

/// The index of node `name`, or an error listing the nodes.
pub fn node_of(t: &Topology, name: &str) -> Result<usize> {
    t.node(name).ok_or_else(|| {
        let names: Vec<&str> = t.nodes.iter().map(|n| n.name.as_str()).collect();
        anyhow!("no node `{name}` in {} (nodes: {})", t.name, names.join(", "))
    })
}

/// `--on NODE=CMD` arguments as (node, command).
pub fn commands_on(t: &Topology, on: &[String]) -> Result<Vec<(usize, String)>> {
    on.iter()
        .map(|o| {
            let (n, cmd) = o.split_once('=').ok_or_else(|| anyhow!("--on `{o}`: write NODE=CMD"))?;
            Ok((node_of(t, n)?, cmd.to_string()))
        })
        .collect()
}

/// The hosts' scheduling priority must be 0–19.
pub fn check_nice(n: i32) -> Result<()> {
    if !(0..=19).contains(&n) {
        bail!("--host-nice must be between 0 and 19");
    }
    Ok(())
}

/// The port of the `wanperf serve` that receives TCP cross traffic: not a measurement's
/// (5301, 5201), so `port=test` selectors never match cross traffic.
pub const CROSS_PORT: u16 = 5311;

/// One TCP cross-traffic entry while the network runs.
struct Flow {
    /// Its index in the topology's traffic.
    index: usize,
    /// Its `tput` while it runs.
    child: Option<Child>,
    /// Whether it has run.
    done: bool,
    /// The reader of its `tput`'s output: bytes received and seconds covered, when it ends.
    tally: Option<std::thread::JoinHandle<(u64, f64)>>,
}

/// A running network with its cross-traffic processes.
pub struct Session {
    net: Network,
    started: Instant,
    /// The `wanperf serve` of every host that receives TCP cross traffic.
    servers: Vec<Child>,
    flows: Vec<Flow>,
    exe: PathBuf,
}

/// Sums the received bytes of a `tput --json`'s interval records and the seconds they cover,
/// until its output ends.
fn tally(out: impl Read) -> (u64, f64) {
    let mut got = (0u64, 0.0f64);
    for line in BufReader::new(out).lines().map_while(|l| l.ok()) {
        let Ok(r) = serde_json::from_str::<Value>(&line) else { continue };
        if r["event"] != "interval" {
            continue;
        }
        got.0 +=
            r["streams"].as_array().into_iter().flatten().filter_map(|s| s["received_bytes"].as_u64()).sum::<u64>();
        got.1 = r["end_s"].as_f64().unwrap_or(got.1);
    }
    got
}

impl Session {
    /// Starts the network and a `wanperf serve` on every host that receives TCP cross traffic;
    /// the cross traffic starts as [`Session::tick`] finds it due.
    pub fn start(t: &Topology, nice: i32, log: Option<Box<dyn Write + Send>>) -> Result<Session> {
        let net = Network::start(t, &Options { host_nice: nice }, log)?;
        let exe = crate::child::exe()?;
        let mut s = Session { net, started: Instant::now(), servers: Vec::new(), flows: Vec::new(), exe };
        // One `wanperf serve` on every host that receives TCP cross traffic, before anything runs.
        let mut receivers: Vec<usize> =
            t.traffic.iter().filter_map(|x| if let Traffic::Tcp { to, .. } = x { Some(*to) } else { None }).collect();
        receivers.sort_unstable();
        receivers.dedup();
        for to in receivers {
            let exe = s.exe.display().to_string();
            let listen = format!("0.0.0.0:{CROSS_PORT}");
            let argv: Vec<String> =
                [exe.as_str(), "serve", "--listen", &listen, "--allow", "198.18.0.0/15"].map(String::from).to_vec();
            let mut c = s.contained(to, &argv);
            c.stdout(Stdio::null()).stderr(Stdio::piped()).stdin(Stdio::null());
            let mut child = c.spawn().context("cannot start the cross-traffic server")?;
            wait_ready(&mut child, "the cross-traffic server", 10.0)?;
            s.servers.push(child);
        }
        for (index, x) in t.traffic.iter().enumerate() {
            if matches!(x, Traffic::Tcp { .. }) {
                s.flows.push(Flow { index, child: None, done: false, tally: None });
            }
        }
        s.started = Instant::now();
        Ok(s)
    }

    /// A command that runs `argv` contained on `node`.
    pub fn contained(&self, node: usize, argv: &[String]) -> Command {
        on_node(&self.net, &self.exe, node, argv)
    }

    /// The running network.
    pub fn net(&self) -> &Network {
        &self.net
    }

    /// Starts the TCP cross traffic that is due and reaps what has ended.
    pub fn tick(&mut self) {
        let now = self.started.elapsed().as_nanos() as u64;
        let Session { net, flows, exe, .. } = self;
        for f in flows.iter_mut() {
            let Traffic::Tcp { from, to, flows, rate_bps, start_ns, stop_ns, .. } = net.topology().traffic[f.index]
            else {
                continue;
            };
            if let Some(c) = f.child.as_mut() {
                if matches!(c.try_wait(), Ok(Some(_))) {
                    f.child = None;
                    f.done = true;
                }
                continue;
            }
            if f.done || now < start_ns {
                continue;
            }
            let secs = (stop_ns.unwrap_or(start_ns + 3_600_000_000_000) - start_ns) as f64 / 1e9;
            let addr = net.plan().addr_of(to).expect("hosts have addresses").to_string();
            let mut argv: Vec<String> = vec![
                exe.display().to_string(),
                "tput".into(),
                addr,
                "-p".into(),
                CROSS_PORT.to_string(),
                "-P".into(),
                flows.to_string(),
                "-t".into(),
                format!("{secs:.3}"),
                "--json".into(),
            ];
            if let Some(b) = rate_bps {
                argv.extend(["-b".to_string(), b.to_string()]);
            }
            let mut c = on_node(net, exe, from, &argv);
            c.stdout(Stdio::piped()).stderr(Stdio::null()).stdin(Stdio::null());
            match c.spawn() {
                Ok(mut ch) => {
                    if let Some(out) = ch.stdout.take() {
                        f.tally = Some(std::thread::spawn(move || tally(out)));
                    }
                    f.child = Some(ch);
                }
                Err(_) => f.done = true,
            }
        }
    }

    /// Runs `c` (a command made by [`Session::contained`], its output as the caller set it)
    /// to its end while the cross traffic runs; at `deadline` or on Ctrl-C it is stopped and
    /// this returns `None`.
    pub fn wait(&mut self, c: &mut Child, deadline: Option<Instant>) -> Option<std::process::ExitStatus> {
        crate::child::wait_child_ticking(c, deadline, &mut || self.tick())
    }

    /// Runs `cmd` on node `host` while the cross traffic runs, after starting each of `others`
    /// (node, shell command; their output goes to stderr) and waiting at most `wait_s` until
    /// each listens; the others are stopped when `cmd` ends. `None`: interrupted.
    pub fn run(
        &mut self,
        host: usize,
        cmd: &[String],
        others: &[(usize, String)],
        wait_s: f64,
    ) -> Result<Option<std::process::ExitStatus>> {
        let mut side = Vec::new();
        let stop_all = |side: &mut Vec<Child>| side.iter_mut().for_each(stop_child);
        for (n, line) in others {
            let mut c = self.contained(*n, &["sh".to_string(), "-c".to_string(), line.clone()]);
            if let Ok(fd) = std::os::fd::AsFd::as_fd(&std::io::stderr()).try_clone_to_owned() {
                c.stdout(Stdio::from(fd));
            }
            match c.spawn() {
                Ok(ch) => side.push(ch),
                Err(e) => {
                    stop_all(&mut side);
                    bail!("cannot start `{line}` on {}: {e}", self.net.topology().nodes[*n].name);
                }
            }
        }
        crate::child::wait_listening(&mut side, wait_s);
        let status = match self.contained(host, cmd).spawn() {
            Ok(mut child) => self.wait(&mut child, None),
            Err(e) => {
                stop_all(&mut side);
                bail!("cannot run `{}` on {}: {e}", cmd[0], self.net.topology().nodes[host].name);
            }
        };
        stop_all(&mut side);
        Ok(status)
    }

    /// Stops the cross traffic and the network; the links' counters and the flow export's.
    pub fn stop(self) -> (Vec<LinkStats>, Option<ExportStats>) {
        let (stats, export, _) = self.finish();
        (stats, export)
    }

    /// [`Session::stop`], with what each cross-traffic entry did ([`traffic_reports`]).
    pub fn finish(mut self) -> (Vec<LinkStats>, Option<ExportStats>, Vec<TrafficReport>) {
        let elapsed_s = self.started.elapsed().as_secs_f64();
        for f in &mut self.flows {
            if let Some(c) = f.child.as_mut() {
                stop_child(c);
            }
        }
        self.servers.iter_mut().for_each(stop_child);
        let t = self.net.topology().clone();
        // Each reader ends with its `tput`'s output, which ended with the process.
        let tcp: Vec<(String, u64, f64)> = self
            .flows
            .iter_mut()
            .map(|f| {
                let g = f.tally.take().and_then(|h| h.join().ok()).unwrap_or((0, 0.0));
                (t.traffic[f.index].name().to_string(), g.0, g.1)
            })
            .collect();
        let (stats, export) = self.net.finish();
        let reports = traffic_reports(&t, &stats, &tcp, elapsed_s);
        (stats, export, reports)
    }
}

/// The reply to [`Request::Info`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NetInfo {
    pub name: String,
    pub pid: u32,
    /// Each node's network namespace descriptor in the daemon.
    pub fds: Vec<i32>,
    pub nice: i32,
    pub host_cpus: Vec<usize>,
    pub uptime_s: f64,
    /// The plan as `net show --json` prints it.
    pub plan: Value,
    pub nodes: Vec<String>,
    /// Each node's environment (`WANPERF_ADDR_…`), as `net run` gives it.
    pub env: Vec<Vec<(String, String)>>,
    /// Each node's limits' control groups (CPU quota, disk rates; none without any).
    #[serde(default)]
    pub cgroups: Vec<Vec<String>>,
}

/// The reply to [`Request::Stats`] and [`Request::Down`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StatsReply {
    pub links: Vec<LinkStats>,
    pub export: Option<ExportStats>,
}

/// The reply to [`Request::Set`]: the link's new configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SetReply {
    pub link: String,
    pub ab: DirConfig,
    pub ba: DirConfig,
    /// How many routes changed, when the link's cost was set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routes_changed: Option<usize>,
}

impl SetReply {
    /// What `net set` prints: the link's new configuration each way (with `json`, a record).
    pub fn lines(&self, json: bool) -> Vec<String> {
        if json {
            let v = serde_json::json!({"event": "net_set", "link": self.link, "ab": self.ab, "ba": self.ba,
                "routes_changed": self.routes_changed});
            return vec![v.to_string()];
        }
        let d = crate::show::describe_dir;
        let mut out = vec![format!("link {}: a → b {}; b → a {}", self.link, d(&self.ab), d(&self.ba))];
        out.extend(self.routes_changed.map(|n| format!("routes recomputed: {n} changed")));
        out
    }
}

impl NetInfo {
    /// Joins `node` of this network (its namespace, niceness, CPUs and CPU quota), as
    /// `net exec` does before it runs a command there; returns the node's environment.
    pub fn join(&self, node: &str) -> Result<Vec<(String, String)>> {
        let i =
            self.nodes.iter().position(|n| n == node).ok_or_else(|| {
                anyhow!("no node `{node}` in network `{}` (nodes: {})", self.name, self.nodes.join(", "))
            })?;
        let cgroups = self.cgroups.get(i).cloned().unwrap_or_default();
        daemon::join(self.pid, self.fds[i], self.nice, &self.host_cpus, &cgroups)?;
        Ok(self.env.get(i).cloned().unwrap_or_default())
    }
}

impl StatsReply {
    /// Keeps one link's counters (`name`: the network's, for the error).
    pub fn only(mut self, link: Option<&str>, name: &str) -> Result<StatsReply> {
        if let Some(l) = link {
            self.links.retain(|s| s.name == l);
            if self.links.is_empty() {
                bail!("no link `{l}` in network `{name}`");
            }
        }
        Ok(self)
    }
}

/// Starts the daemon of network `name` on `topology` (a file, made absolute, or a preset).
pub fn start(name: &str, topology: &str, nice: i32) -> Result<()> {
    // The daemon reads the same file; give it an absolute path.
    let topo_arg = if std::path::Path::new(topology).exists() {
        std::fs::canonicalize(topology)?.display().to_string()
    } else {
        topology.to_string()
    };
    daemon::start(Kind::Network, name, &["net", "__daemon", name, &topo_arg, &nice.to_string()])
}

/// `net __daemon NAME TOPOLOGY NICE`: owns one network until asked to stop.
pub fn run(name: &str, topology: &str, nice: i32) -> Result<ExitCode> {
    wanperf_sys::new_session();
    let started = load(topology).and_then(|t| Session::start(&t, nice, None).map(|s| (t, s)));
    let (t, session) = match started {
        Ok(x) => x,
        Err(e) => {
            daemon::report(&format!("error: {e:#}"));
            return Ok(ExitCode::FAILURE);
        }
    };
    let started = Instant::now();
    let cell = std::cell::RefCell::new(Some(session));
    let listening = daemon::serve(
        &Kind::Network.socket(name)?,
        || {
            if let Some(s) = cell.borrow_mut().as_mut() {
                s.tick();
            }
        },
        |req| {
            let mut guard = cell.borrow_mut();
            let Some(s) = guard.as_mut() else { return Answer::Last(serde_json::json!({ "error": "stopped" })) };
            match req {
                Request::Info => Answer::reply(&NetInfo {
                    name: name.to_string(),
                    pid: std::process::id(),
                    fds: (0..t.nodes.len()).map(|i| s.net.ns_fd(i)).collect(),
                    nice,
                    host_cpus: s.net.host_cpus().to_vec(),
                    uptime_s: started.elapsed().as_secs_f64(),
                    plan: crate::show::plan_json(&t, s.net.plan()),
                    nodes: t.nodes.iter().map(|n| n.name.clone()).collect(),
                    env: (0..t.nodes.len()).map(|i| s.net.env(i)).collect(),
                    cgroups: (0..t.nodes.len()).map(|i| s.net.cgroup_dir(i)).collect(),
                }),
                Request::Stats => Answer::reply(&StatsReply { links: s.net.stats(), export: s.net.export_stats() }),
                Request::Set { link, options } => match set_link(&mut s.net, link, options) {
                    Ok(r) => Answer::reply(&r),
                    Err(e) => Answer::error(&e),
                },
                Request::Down => {
                    // Commands started with `net exec` would keep the nodes' namespaces (and
                    // themselves) alive after the network is gone: they end with it.
                    let fds: Vec<i32> = (0..t.nodes.len()).map(|i| s.net.ns_fd(i)).collect();
                    wanperf_emu::netns::end_processes_in(&fds, Duration::from_secs(2));
                    let (links, export) = guard.take().map(Session::stop).unwrap_or_default();
                    Answer::last(&StatsReply { links, export })
                }
            }
        },
    )?;
    if let Some(s) = cell.into_inner() {
        drop(s.stop());
    }
    Ok(if listening { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Applies `net set` options (`KEY=VALUE`) to link `link_name`.
fn set_link(net: &mut Network, link_name: &str, options: &[String]) -> Result<SetReply, String> {
    let t = net.topology();
    let Some(li) = t.link(link_name) else {
        let names: Vec<&str> = t.links.iter().map(|l| l.name.as_str()).collect();
        return Err(format!("no link `{link_name}` (links: {})", names.join(", ")));
    };
    let (mut ab, mut ba) = net.link_config(li).cloned().expect("link exists");
    let mut cost = None;
    for o in options {
        let Some((k, v)) = o.split_once('=') else {
            return Err(format!("`{o}`: write KEY=VALUE"));
        };
        if k == "cost" {
            match v.parse::<u32>() {
                Ok(c) if (1..=1_000_000).contains(&c) => cost = Some(c),
                _ => return Err(format!("`cost` must be an integer in 1–1000000, not `{v}`")),
            }
            continue;
        }
        let values: Vec<String> =
            if k.starts_with("priority") { v.split(';').map(str::to_string).collect() } else { vec![v.to_string()] };
        crate::linkopts::apply(&mut ab, &mut ba, k, &values, &|f| read_file(f))?;
    }
    net.set(li, ab.clone(), ba.clone());
    let routes_changed = match cost {
        Some(c) => Some(net.set_cost(li, c).map_err(|e| format!("re-routing: {e}"))?),
        None => None,
    };
    Ok(SetReply { link: link_name.to_string(), ab, ba, routes_changed })
}

/// `net list`: the named networks that are up, a line each (or one JSON record).
pub fn networks(up: &[NetInfo], json: bool) -> Vec<String> {
    let links = |i: &NetInfo| i.plan["links"].as_array().map_or(0, Vec::len);
    if json {
        let rows: Vec<Value> = up
            .iter()
            .map(|i| serde_json::json!({"name": i.name, "pid": i.pid, "uptime_s": i.uptime_s, "nodes": i.nodes.len(), "links": links(i)}))
            .collect();
        return vec![serde_json::json!({"event": "networks", "networks": rows}).to_string()];
    }
    if up.is_empty() {
        return vec!["no networks are up".into()];
    }
    up.iter()
        .map(|i| format!("{:<20} {} nodes, {} links, up {:.0} s", i.name, i.nodes.len(), links(i), i.uptime_s))
        .collect()
}
