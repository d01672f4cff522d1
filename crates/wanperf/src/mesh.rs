//! `wanperf agent`, `wanperf central` and `wanperf mesh`: argument parsing and glue around
//! `wanperf-monitor` (the daemons) and `wanperf-mesh` (the mesh file, the plan).

use crate::store::describe_db;
use anyhow::{anyhow, Context, Result};
use clap::{Args, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
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

/// A flag set by SIGINT/SIGTERM, for daemons that take an `Arc<AtomicBool>`.
fn stop_flag() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    drop(wanperf_sys::stop_on_interrupt(stop.clone()));
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
    let log = crate::output::stderr_log(a.json);
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
        crate::output::stderr_log(a.json),
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
    Ok(wanperf_monitor::read_mesh(file)?.0)
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
            for l in m.describe() {
                outln!("{l}");
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

/// `wanperf mesh demo`.
pub fn demo(a: DemoArgs) -> Result<ExitCode> {
    if !(a.minutes >= 1.0 && a.minutes <= 120.0) {
        return Err(anyhow!("--minutes must be 1 to 120"));
    }
    wanperf_monitor::demo::run(a.minutes, a.port, &describe_db(a.db.as_deref()))?;
    Ok(ExitCode::SUCCESS)
}
