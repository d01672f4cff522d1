//! `wanperf agent`, `wanperf central` and `wanperf mesh`: argument parsing and glue around
//! `wanperf-monitor` (the daemons) and `wanperf-mesh` (the mesh file, the plan).

use crate::store::describe_db;
use anyhow::{anyhow, Context, Result};
use clap::{Args, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use wanperf_monitor::agent::{AgentConfig, MeshSource};
use wanperf_monitor::central::CentralConfig;

/// `wanperf agent`.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  wanperf agent --name slac1 --central http://central.example:8080 --key ~/.config/wanperf/id_ed25519
  wanperf agent --name slac1 --mesh mesh.toml --central http://10.0.0.1:8080 --key agent.key

The agent answers tests on its host's port from the mesh file (an embedded `wanperf serve`
open only to the mesh's hosts, one test at a time, their keys required when the file lists
keys), probes every peer of its latency tests continuously (one summary a minute: median,
IQR, min, p90, loss, reordering, one-way delays), runs the throughput tests of the day's plan
in which it is the source (the plan is computed from the mesh file by every agent alike, so
no two throughput tests ever touch one host at once), traces the path to each peer of its
trace tests (a changed route is an event), and keeps every result — failed, refused and
missed runs too — in its spool until the central service has acknowledged it. A changed
mesh file is followed within --poll seconds, without a restart.

One-way delays are only as good as the two hosts' clocks: every batch carries the kernel's
NTP state (adjtimex: synchronized or not, the estimated error), and central shows a pair's
one-way delays with the sum of both errors. --clock-error states the error instead (hosts
with PTP, or hosts sharing one clock).")]
pub struct AgentArgs {
    /// This host's name in the mesh file.
    #[arg(long)]
    name: String,
    /// Central's base URL: results go there, and the mesh file comes from there unless --mesh.
    #[arg(long, value_name = "URL")]
    central: Option<String>,
    /// Read the mesh file from this file instead of from central.
    #[arg(long, value_name = "FILE")]
    mesh: Option<PathBuf>,
    /// The agent's private key (`wanperf keygen`): signs results, proves itself to peers.
    #[arg(long, value_name = "FILE", env = "WANPERF_KEY")]
    key: Option<PathBuf>,
    /// The spool file (default: ~/.local/share/wanperf/agent-NAME.spool).
    #[arg(long, value_name = "FILE")]
    spool: Option<PathBuf>,
    /// Most results the spool holds (a full spool drops new ones, counts them and says so).
    #[arg(long, default_value_t = 1_000_000, value_name = "N")]
    spool_max: u64,
    /// Where the embedded server listens (default 0.0.0.0 and the host's port in the mesh).
    #[arg(long, value_name = "ADDR:PORT")]
    listen: Option<SocketAddr>,
    /// How often the mesh file is checked for changes, seconds.
    #[arg(long, default_value_t = 15.0, value_name = "SECONDS")]
    poll: f64,
    /// The clock's error as you know it, e.g. 0.05ms or 2ms (default: the kernel's NTP estimate).
    #[arg(long, value_name = "DURATION", value_parser = parse_clock_error)]
    clock_error: Option<f64>,
    /// Log lines as NDJSON on stderr.
    #[arg(long)]
    json: bool,
}

/// A clock error: a duration of at most 10 s, in ms.
fn parse_clock_error(s: &str) -> Result<f64, String> {
    let v = wanperf_proto::units::parse_duration(s).map_err(|e| e.to_string())?;
    if !(0.0..=10.0).contains(&v) {
        return Err(format!("{s}: a clock error between 0 and 10 s"));
    }
    Ok(v * 1e3)
}

/// `wanperf central`.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  wanperf central --mesh mesh.toml --listen 0.0.0.0:8080
  wanperf central --mesh mesh.toml --db postgres://wanperf@db/wanperf --webhook http://chat.example/hook

Central stores the agents' results in the archive (SQLite, or PostgreSQL for a large mesh),
serves the mesh file to agents (a changed file reaches them within their poll period) and
the dashboard at / : the grid (source × destination, each cell split into throughput, loss
and RTT, coloured against the pair's own baseline and the mesh's expectations; rows and
columns that fail together called out), pair pages (SmokePing-style RTT smoke, throughput
history, one-way delays, events), events and alerts (level shifts, loss onset, silent
agents) to the log and a webhook, and /metrics for Prometheus. Only hosts of the mesh file
holding their listed key are heard.")]
pub struct CentralArgs {
    /// The mesh file.
    #[arg(long, value_name = "FILE")]
    mesh: PathBuf,
    /// Address to listen on (port 0: any free port, printed).
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR:PORT")]
    listen: SocketAddr,
    /// Archive: a SQLite file or a postgres:// URL (default: $WANPERF_DB, or
    /// ~/.local/share/wanperf/archive.sqlite).
    #[arg(long, value_name = "DB")]
    db: Option<String>,
    /// POST each alert as JSON to this URL (http only).
    #[arg(long, value_name = "URL")]
    webhook: Option<String>,
    /// Accept unsigned results from hosts that have no key in the mesh file.
    #[arg(long)]
    insecure: bool,
    /// How often the mesh file is checked for changes, seconds.
    #[arg(long, default_value_t = 5.0, value_name = "SECONDS")]
    reload: f64,
    /// Log lines as NDJSON on stderr.
    #[arg(long)]
    json: bool,
    /// Internal: also serve on this inherited listening socket (`mesh demo`).
    #[arg(long, hide = true, value_name = "FD")]
    listen_fd: Option<i32>,
}

/// `wanperf mesh`.
#[derive(Subcommand, Debug)]
pub enum MeshCmd {
    /// Check a mesh file: hosts, tests and their pairs, or the first error with its line.
    Check {
        /// The mesh file.
        file: PathBuf,
        /// Print it as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Bring up a small mesh on the seeds' IEPM 2000 network for a few minutes, with an
    /// injected problem, and serve its dashboard on this machine.
    Demo(DemoArgs),
    /// The throughput plan every agent follows: the slots of the next HOURS (no two share a host).
    Plan {
        /// The mesh file.
        file: PathBuf,
        /// Hours from now.
        #[arg(long, default_value_t = 24.0)]
        hours: f64,
        /// Only this host's slots (as source or destination).
        #[arg(long)]
        host: Option<String>,
        /// Print NDJSON, one slot a line.
        #[arg(long)]
        json: bool,
    },
}

fn logger(json: bool) -> wanperf_monitor::Log {
    crate::output::stderr_log(json)
}

/// A flag set by SIGINT/SIGTERM, for daemons that take an `Arc<AtomicBool>`.
fn stop_flag() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    drop(crate::stop_on_interrupt(stop.clone()));
    stop
}

fn check_url(url: &str, what: &str) -> Result<()> {
    if !url.starts_with("http://") {
        return Err(anyhow!("{what} {url}: only http:// URLs (put a TLS proxy in front for https)"));
    }
    Ok(())
}

/// `wanperf agent`.
pub fn agent(a: AgentArgs) -> Result<ExitCode> {
    let source = match (&a.mesh, &a.central) {
        (Some(f), _) => MeshSource::File(f.clone()),
        (None, Some(c)) => MeshSource::Central(c.clone()),
        (None, None) => return Err(anyhow!("give --central URL (or --mesh FILE to read the mesh locally)")),
    };
    if let Some(c) = &a.central {
        check_url(c, "--central")?;
    }
    if !(a.poll > 0.0 && a.poll <= 60.0) {
        return Err(anyhow!(
            "--poll must be more than 0 and at most 60 s (a changed mesh must reach agents in a minute)"
        ));
    }
    let spool = a
        .spool
        .clone()
        .unwrap_or_else(|| wanperf_archive::default_path().with_file_name(format!("agent-{}.spool", a.name)));
    let cfg = AgentConfig {
        name: a.name.clone(),
        mesh: source,
        central: a.central.clone(),
        key_path: a.key.clone(),
        spool,
        spool_max: a.spool_max,
        listen: a.listen,
        exe: std::env::current_exe().context("cannot find the wanperf binary")?,
        poll_every: Duration::from_secs_f64(a.poll),
        clock_error_ms: a.clock_error,
    };
    let log = logger(a.json);
    let stop = stop_flag();
    let name = a.name.clone();
    wanperf_monitor::agent::run(cfg, stop, |addr| eprintln!("wanperf agent {name} listening on {addr}"), log)
        .map_err(|e| anyhow!("{e}"))?;
    Ok(ExitCode::SUCCESS)
}

/// `wanperf central`.
pub fn central(a: CentralArgs) -> Result<ExitCode> {
    if let Some(w) = &a.webhook {
        check_url(w, "--webhook")?;
    }
    if !(a.reload > 0.0 && a.reload <= 60.0) {
        return Err(anyhow!("--reload must be more than 0 and at most 60 s"));
    }
    let db = describe_db(a.db.as_deref());
    let cfg = CentralConfig {
        listen: a.listen,
        db: db.clone(),
        mesh_path: a.mesh.clone(),
        insecure: a.insecure,
        webhook: a.webhook.clone(),
        reload_every: Duration::from_secs_f64(a.reload),
        extra_listeners: match a.listen_fd {
            Some(fd) => vec![Arc::new(inherited_listener(fd)?)],
            None => Vec::new(),
        },
    };
    let stop = stop_flag();
    wanperf_monitor::central::run(
        cfg,
        stop,
        |addr| eprintln!("wanperf central listening on http://{addr}/ (archive {db})"),
        logger(a.json),
    )
    .map_err(|e| anyhow!("{e}"))?;
    Ok(ExitCode::SUCCESS)
}

/// A listening TCP socket handed down by the parent as descriptor `fd`.
fn inherited_listener(fd: i32) -> Result<std::net::TcpListener> {
    let l = std::net::TcpListener::from(wanperf_sys::adopt_fd(fd).map_err(|e| anyhow!("--listen-fd {fd}: {e}"))?);
    l.local_addr().map_err(|e| anyhow!("--listen-fd {fd}: not a listening socket: {e}"))?;
    Ok(l)
}

fn load(file: &std::path::Path) -> Result<wanperf_mesh::config::Mesh> {
    Ok(wanperf_monitor::read_mesh(file).map_err(|e| anyhow!("{e}"))?.0)
}

/// `wanperf mesh …`.
pub fn mesh(cmd: MeshCmd) -> Result<ExitCode> {
    match cmd {
        MeshCmd::Check { file, json } => {
            let m = load(&file)?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&m)?);
                return Ok(ExitCode::SUCCESS);
            }
            outln!("mesh {} (digest {}): {} sites, {} hosts", m.name, m.digest(), m.sites.len(), m.hosts.len());
            for t in &m.tests {
                let pairs = m.pairs(t);
                let every = t.schedule.as_ref().map_or_else(String::new, |s| format!(", every {} s", s.interval_s));
                outln!("  test {} ({:?}{every}): {} pairs", t.name, t.kind, pairs.len());
            }
            Ok(ExitCode::SUCCESS)
        }
        MeshCmd::Plan { file, hours, host, json } => {
            if !(hours > 0.0 && hours <= 168.0) {
                return Err(anyhow!("--hours must be more than 0 and at most 168"));
            }
            let m = load(&file)?;
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs_f64();
            let mut view = wanperf_monitor::view::View::new(Arc::new(m), now);
            let slots = view.slots(now, now + hours * 3600.0, host.as_deref());
            for s in &slots {
                if json {
                    outln!("{}", serde_json::to_string(s)?);
                } else {
                    outln!("{:>12.0} s  {:>6.1} s  {} {}→{}", s.start - now, s.end - s.start, s.test, s.src, s.dst);
                }
            }
            if !json {
                outln!("{} slots in the next {hours} h (start in seconds from now, length)", slots.len());
            }
            Ok(ExitCode::SUCCESS)
        }
        MeshCmd::Demo(a) => demo(a),
    }
}

/// `wanperf mesh demo`.
#[derive(Args, Debug)]
#[command(after_help = "Brings up the seeds' IEPM 2000 network (SLAC, CERN, IN2P3, Colorado, Caltech, FNAL;
kernel routers at SLAC, ESnet, Chicago and Geneva), an agent on every site and the central
service on SLAC's host, and prints the dashboard's address on this machine. The agents probe
every pair ten times a second (summaries every 10 s), test throughput both ways between
SLAC and CERN and between FNAL and Caltech every 15 s (and their capacity, narrow link and
bottleneck hop every 30 s), and trace every path every minute (the routers hop by hop on
each pair page); at 40 % of the run the Geneva→CERN link drops
to 2 Mbit/s (the seed's \"70-80 Mbits/s to under 1 Mbit/s\"), and the dashboard shows
where. Needs root, or
unprivileged user namespaces, as `wanperf net` does.")]
pub struct DemoArgs {
    /// How long the mesh runs, minutes.
    #[arg(long, default_value_t = 5.0)]
    minutes: f64,
    /// The dashboard's port on 127.0.0.1 (0: any free port).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Archive: a SQLite file or a postgres:// URL (default: $WANPERF_DB, or
    /// ~/.local/share/wanperf/archive.sqlite).
    #[arg(long, value_name = "DB")]
    db: Option<String>,
}

const DEMO_SITES: [&str; 6] = ["slac", "cern", "in2p3", "colorado", "caltech", "fnal"];

fn demo_mesh(keys: &[String], addrs: &[String]) -> String {
    let mut m =
        String::from("# wanperf mesh demo: the IEPM 2000 sites\n[mesh]\nname = \"iepm-2000\"\nsummary = \"10s\"\n\n");
    for s in DEMO_SITES {
        m.push_str(&format!("[[site]]\nname = \"{s}\"\n"));
    }
    for (i, s) in DEMO_SITES.iter().enumerate() {
        m.push_str(&format!(
            "[[host]]\nname = \"{s}\"\nsite = \"{s}\"\naddress = \"{}\"\nkey = \"{}\"\n",
            addrs[i], keys[i]
        ));
    }
    m.push_str("[[group]]\nname = \"all\"\ntype = \"mesh\"\nmembers = [");
    m.push_str(&DEMO_SITES.iter().map(|s| format!("\"{s}\"")).collect::<Vec<_>>().join(", "));
    m.push_str("]\n");
    m.push_str("[[test]]\nname = \"rtt\"\ntype = \"latency\"\ngroup = \"all\"\nrate = 10\n");
    // Two throughput pairs that share no host run side by side: SLAC↔CERN across the
    // Atlantic, FNAL↔Caltech within the US.
    for (g, a, b) in [("slac-cern", "slac", "cern"), ("fnal-caltech", "fnal", "caltech")] {
        m.push_str(&format!("[[group]]\nname = \"{g}\"\ntype = \"mesh\"\nmembers = [\"{a}\", \"{b}\"]\n"));
        m.push_str(&format!(
            "[[test]]\nname = \"bulk-{g}\"\ntype = \"throughput\"\ngroup = \"{g}\"\ninterval = \"15s\"\nduration = \"3s\"\n"
        ));
        // And the same pairs' capacity, narrow link and bottleneck hop, every 30 s.
        m.push_str(&format!(
            "[[test]]\nname = \"capacity-{g}\"\ntype = \"capacity\"\ngroup = \"{g}\"\ninterval = \"30s\"\nslip = \"10s\"\nbudget = \"600k\"\ntime = \"5s\"\n"
        ));
    }
    // Every path traced every minute: the routers of the emulated network, hop by hop.
    m.push_str("[[test]]\nname = \"route\"\ntype = \"trace\"\ngroup = \"all\"\ninterval = \"60s\"\nslip = \"30s\"\n");
    m.push_str("[[expect]]\ngroup = \"all\"\nloss_max = 0.05\n");
    m
}

/// The demo's processes and network, torn down whatever happens.
struct DemoRun {
    exe: PathBuf,
    net: String,
    /// (name, process), stopped in reverse order.
    children: Vec<(String, std::process::Child)>,
    dir: PathBuf,
}

impl Drop for DemoRun {
    fn drop(&mut self) {
        for (_, c) in self.children.iter_mut().rev() {
            wanperf_net::child::stop_child(c);
        }
        let _ = std::process::Command::new(&self.exe)
            .args(["net", "down", &self.net])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A line above the progress bar, or on stderr when there is no bar (not a terminal).
fn say(bar: &indicatif::ProgressBar, line: &str) {
    if bar.is_hidden() {
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
}

/// `wanperf mesh demo`.
pub fn demo(a: DemoArgs) -> Result<ExitCode> {
    use std::io::BufRead;
    use std::os::fd::AsRawFd;
    use std::process::{Command, Stdio};
    if !(a.minutes >= 1.0 && a.minutes <= 120.0) {
        return Err(anyhow!("--minutes must be 1 to 120"));
    }
    let exe = std::env::current_exe().context("cannot find the wanperf binary")?;
    let id = std::process::id();
    let dir = std::env::temp_dir().join(format!("wanperf-mesh-demo-{id}"));
    std::fs::create_dir_all(&dir)?;
    let net = format!("meshdemo{id}");
    let mut run = DemoRun { exe: exe.clone(), net: net.clone(), children: Vec::new(), dir: dir.clone() };
    // The dashboard's socket on this machine's loopback, handed to central (which runs inside
    // SLAC's emulated host) as an inherited descriptor.
    let listener = std::net::TcpListener::bind(("127.0.0.1", a.port))
        .with_context(|| format!("cannot listen on 127.0.0.1:{} (try --port 0)", a.port))?;
    let url = format!("http://{}/", listener.local_addr()?);

    let mut keys = Vec::new();
    for s in DEMO_SITES {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|e| anyhow!("no randomness for keys: {e}"))?;
        let k = wanperf_proto::auth::PrivateKey::from_seed(seed, s);
        let path = dir.join(format!("{s}.key"));
        {
            use std::os::unix::fs::OpenOptionsExt;
            let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path)?;
            std::io::Write::write_all(&mut f, k.to_text().as_bytes())?;
        }
        keys.push((path, k.public().to_line()));
    }
    let ok = Command::new(&exe).args(["net", "up", "iepm-2000", &net]).stdout(Stdio::null()).output()?;
    if !ok.status.success() {
        return Err(anyhow!("cannot bring up the network: {}", String::from_utf8_lossy(&ok.stderr).trim()));
    }
    // Every host's first address, from the same plan `net up` builds.
    let preset = wanperf_net::presets::find("iepm-2000").ok_or_else(|| anyhow!("no iepm-2000 preset"))?;
    let topo = wanperf_net::topo::Topology::parse(&preset.toml, &|f| Err(format!("no file {f} in a preset")))
        .map_err(|e| anyhow!("iepm-2000: {e}"))?;
    let plan = wanperf_net::plan::Plan::new(&topo).map_err(|e| anyhow!("iepm-2000: {e}"))?;
    let addrs: Vec<String> = DEMO_SITES
        .iter()
        .map(|s| {
            topo.node(s)
                .and_then(|n| plan.addr_of(n))
                .map(|a| a.to_string())
                .ok_or_else(|| anyhow!("no address for {s} in the iepm-2000 preset"))
        })
        .collect::<Result<_>>()?;
    let mesh_path = dir.join("mesh.toml");
    std::fs::write(&mesh_path, demo_mesh(&keys.iter().map(|k| k.1.clone()).collect::<Vec<_>>(), &addrs))?;
    let db = describe_db(a.db.as_deref());
    let central_addr = format!("{}:8080", addrs[0]);

    // Central, with the loopback socket inherited (descriptor flags cleared for exec).
    let fd = listener.as_raw_fd();
    wanperf_sys::keep_across_exec(&listener).context("cannot hand the listening socket to central")?;
    let alerts = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let mut central = Command::new(&exe)
        .args(["net", "exec", &net, "slac", "--"])
        .arg(&exe)
        .args(["central", "--mesh"])
        .arg(&mesh_path)
        .args(["--listen", &central_addr, "--db", &db, "--reload", "2", "--listen-fd", &fd.to_string()])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    drop(listener);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let stderr = central.stderr.take().ok_or_else(|| anyhow!("no stderr"))?;
    let al = alerts.clone();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(std::result::Result::ok) {
            if line.contains("listening on") {
                let _ = ready_tx.send(Ok(()));
            } else if let Some(t) = line.strip_prefix("ALERT ") {
                al.lock().unwrap().push(t.to_string());
            } else if line.starts_with("error") {
                let _ = ready_tx.send(Err(line.clone()));
            }
        }
    });
    run.children.push(("central".into(), central));
    match ready_rx.recv_timeout(Duration::from_secs(30)) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(anyhow!("central: {e}")),
        Err(_) => return Err(anyhow!("central did not start within 30 s")),
    }
    let central_url = format!("http://{central_addr}");
    for (i, s) in DEMO_SITES.iter().enumerate() {
        let c = Command::new(&exe)
            .args(["net", "exec", &net, s, "--"])
            .arg(&exe)
            // All the demo's hosts read one kernel clock: their one-way delays have no clock error.
            .args(["agent", "--name", s, "--central", &central_url, "--poll", "5", "--clock-error", "0"])
            .arg("--key")
            .arg(&keys[i].0)
            .arg("--spool")
            .arg(dir.join(format!("{s}.spool")))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        run.children.push((s.to_string(), c));
    }
    eprintln!("wanperf mesh demo: the IEPM 2000 network, 6 agents, central on slac (archive {db})");
    eprintln!("dashboard: {url}  (open it now; the mesh runs {} min)", a.minutes);
    let total = a.minutes * 60.0;
    let inject_at = 0.4 * total;
    let bar = indicatif::ProgressBar::new(total as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} s  {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let t0 = std::time::Instant::now();
    let mut injected = false;
    let mut shown_alerts = 0;
    while t0.elapsed().as_secs_f64() < total && !crate::INTERRUPTED.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(250));
        bar.set_position(t0.elapsed().as_secs());
        if !injected && t0.elapsed().as_secs_f64() >= inject_at {
            injected = true;
            let o = Command::new(&exe).args(["net", "set", &net, "geneva-cern", "rate_ab=2M"]).output()?;
            if o.status.success() {
                say(&bar, "injected: the Geneva→CERN link now carries 2 Mbit/s (was 100 Mbit/s)");
            }
        }
        let new: Vec<String> = alerts.lock().unwrap()[shown_alerts..].to_vec();
        for a in new {
            say(&bar, &format!("event: {a}"));
            shown_alerts += 1;
        }
        for (name, c) in &mut run.children {
            if let Ok(Some(st)) = c.try_wait() {
                bar.finish_and_clear();
                return Err(anyhow!("{name} stopped early ({st})"));
            }
        }
    }
    bar.finish_and_clear();
    let events = alerts.lock().unwrap().len();
    eprintln!("stopping: {events} events; the results are in the archive ({db})");
    drop(run);
    Ok(ExitCode::SUCCESS)
}
