//! `wanperf agent`, `wanperf central` and `wanperf mesh`: argument parsing and glue around
//! `wanperf-monitor` (the daemons) and `wanperf-mesh` (the mesh file, the plan).

use crate::study::describe_db;
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
no two throughput tests ever touch one host at once), and keeps every result — failed,
refused and missed runs too — in its spool until the central service has acknowledged it.
A changed mesh file is followed within --poll seconds, without a restart.")]
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
    /// Log lines as NDJSON on stderr.
    #[arg(long)]
    json: bool,
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
    Arc::new(move |line: &str| {
        if json {
            let ts =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
            eprintln!("{}", serde_json::json!({"event": "log", "timestamp": ts, "message": line}));
        } else {
            eprintln!("{line}");
        }
    })
}

/// A flag set by SIGINT/SIGTERM, for daemons that take an `Arc<AtomicBool>`.
fn stop_flag() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    std::thread::spawn(move || {
        while !crate::INTERRUPTED.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(50));
        }
        s.store(true, Ordering::Release);
    });
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

fn load(file: &std::path::Path) -> Result<wanperf_mesh::config::Mesh> {
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    wanperf_mesh::config::parse(&text).map_err(|e| anyhow!("{}: {e}", file.display()))
}

/// `wanperf mesh …`.
pub fn mesh(cmd: MeshCmd) -> Result<ExitCode> {
    match cmd {
        MeshCmd::Check { file, json } => {
            let m = load(&file)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&m)?);
                return Ok(ExitCode::SUCCESS);
            }
            println!("mesh {} (digest {}): {} sites, {} hosts", m.name, m.digest(), m.sites.len(), m.hosts.len());
            for t in &m.tests {
                let pairs = m.pairs(t);
                let every = t.schedule.as_ref().map_or_else(String::new, |s| format!(", every {} s", s.interval_s));
                println!("  test {} ({:?}{every}): {} pairs", t.name, t.kind, pairs.len());
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
                    println!("{}", serde_json::to_string(s)?);
                } else {
                    println!("{:>12.0} s  {:>6.1} s  {} {}→{}", s.start - now, s.end - s.start, s.test, s.src, s.dst);
                }
            }
            if !json {
                println!("{} slots in the next {hours} h (start in seconds from now, length)", slots.len());
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
