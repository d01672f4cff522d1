//! `wanperf path`: the emulated wide-area path.

use anyhow::{anyhow, bail, Result};
use clap::{Args, Subcommand};
use std::os::unix::process::CommandExt;
use std::process::ExitCode;
use wanperf_emu::options::LinkOptions;
use wanperf_emu::path::{Host, PathConfig};
use wanperf_net::child::exit_code;
use wanperf_net::daemon::{Kind, Request};
use wanperf_net::path::Path;
use wanperf_net::pathd::{PathInfo, StatsReply};
use wanperf_net::show::{print_export, print_path_stats};

/// `wanperf path` subcommands.
#[derive(Subcommand, Debug)]
pub enum PathCmd {
    /// Start a path, run CMD on the left host (and --right CMD on the right), tear it down.
    Run(RunArgs),
    /// Start a named path that stays up until `path down` (for running many commands).
    Up(UpArgs),
    /// Run a command on a host of a named path: `path exec NAME left|right -- CMD`.
    Exec(ExecArgs),
    /// Print a named path's counters so far.
    Stats(NameArgs),
    /// Stop a named path and print its counters.
    Down(NameArgs),
    /// List the named paths that are up.
    List {
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Internal: the daemon behind `path up`.
    #[command(name = "__daemon", hide = true)]
    Daemon {
        /// Path name.
        name: String,
        /// Configuration as JSON.
        config: String,
    },
    /// List the presets with the numbers of the studies they come from.
    Presets,
}

/// Link options: the emulator's own (`wanperf_emu::options::LinkOptions`), as flags.
pub type LinkArgs = LinkOptions;

/// `wanperf path run`.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  wanperf path run --rtt 100ms -- ping -c 5 198.18.0.2
  wanperf path run --preset slac-cern-2000 --right 'wanperf serve --allow 198.18.0.0/15' \\
      -- sh -c 'wanperf tput $WANPERF_PEER -t 20'
  wanperf path run --rtt 170ms --rate 1G --policer 10M,1M,port=5011 -- ...

Hosts: left 198.18.0.1 / fd57:414e::1, right 198.18.0.2 / fd57:414e::2, each in its own
network namespace; nothing else is reachable from them. WANPERF_PEER holds the other host's
address in both commands. Counters go to stderr at the end; the exit status is CMD's.
Works as root, and as a normal user through an unprivileged user namespace.")]
pub struct RunArgs {
    #[command(flatten)]
    link: LinkArgs,
    /// Command for the right host, run with `sh -c` (e.g. a server); stopped when CMD ends.
    /// Its output goes to stderr, so CMD's stdout stays CMD's.
    #[arg(long, value_name = "CMD")]
    right: Option<String>,
    /// The most time the right command gets to start: CMD runs as soon as it listens (its
    /// processes hold a TCP listener or a bound UDP socket), or when this time is up.
    #[arg(long, value_name = "DURATION", default_value = "2s")]
    right_wait: String,
    /// Per-packet event log (arrival, departure, drop and why).
    #[arg(long, value_name = "FILE")]
    log: Option<std::path::PathBuf>,
    /// Export NetFlow v9 / IPFIX of every packet the path delivers to this collector
    /// (repeatable): observation domain 1 is up (left → right), 2 is down.
    #[arg(long, value_name = "ADDR:PORT")]
    export_flows: Vec<std::net::SocketAddr>,
    /// Export format.
    #[arg(long, value_enum, value_name = "FORMAT", requires = "export_flows")]
    export_format: Option<crate::args::ExportFormatArg>,
    /// Print the counters as JSON (on stderr).
    #[arg(long)]
    json: bool,
    /// The command for the left host.
    #[arg(last = true, required = true, value_name = "CMD")]
    cmd: Vec<String>,
}

/// Builds the path configuration from a preset and explicit options.
pub fn config_from(a: &LinkArgs) -> Result<PathConfig> {
    a.config().map_err(|e| anyhow!("{e}"))
}

/// `wanperf path run`.
pub fn run(a: RunArgs) -> Result<ExitCode> {
    let cfg = config_from(&a.link)?;
    let right_wait = wanperf_proto::units::parse_duration(&a.right_wait).map_err(|e| anyhow!("--right-wait: {e}"))?;
    let log = crate::args::log_sink(&a.log)?;
    let export = (!a.export_flows.is_empty()).then(|| {
        let mut e = wanperf_net::topo::FlowExport::new(a.export_flows.clone());
        if let Some(f) = a.export_format {
            e.format = f.format();
        }
        e
    });
    let path = Path::start_exporting(&cfg, log, export)?;
    let status = wanperf_net::child::run_on_path(&path, &a.cmd, a.right.as_deref(), right_wait);
    let hosts = path.host_reports();
    let (stats, export) = path.finish();
    print_path_stats(&stats, a.json, &mut std::io::stderr());
    print_export(export.as_ref(), a.json, &mut std::io::stderr());
    wanperf_net::show::print_hosts(&hosts, a.json, &mut std::io::stderr());
    let mut idle = wanperf_emu::acted::on_path(&cfg, &stats);
    idle.extend(wanperf_net::show::hosts_not_acted(&hosts));
    wanperf_net::show::print_not_acted(&idle, a.json, &mut std::io::stderr());
    let status = status?;
    Ok(status.map_or(ExitCode::from(130), |st| exit_code(&st)))
}

/// `path up`.
#[derive(Args, Debug)]
pub struct UpArgs {
    /// Name of the path (letters, digits, - and _).
    name: String,
    #[command(flatten)]
    link: LinkArgs,
}

/// `wanperf path up NAME`: starts the daemon and waits until the path is ready.
pub fn up(a: UpArgs) -> Result<ExitCode> {
    Kind::Path.check_name(&a.name)?;
    let cfg = config_from(&a.link)?;
    wanperf_net::pathd::start(&a.name, &cfg)?;
    outln!("path `{}` is up: left 198.18.0.1, right 198.18.0.2 (`wanperf path exec {} left -- CMD`)", a.name, a.name);
    Ok(ExitCode::SUCCESS)
}

/// `wanperf path presets`.
pub fn list_presets() -> Result<ExitCode> {
    wanperf_net::show::path_presets().iter().for_each(|l| outln!("{l}"));
    Ok(ExitCode::SUCCESS)
}

/// `path exec`.
#[derive(Args, Debug)]
pub struct ExecArgs {
    /// Name of the path.
    name: String,
    /// Which host: left or right.
    host: String,
    /// The command.
    #[arg(last = true, required = true, value_name = "CMD")]
    cmd: Vec<String>,
}

/// `path stats` / `path down`.
#[derive(Args, Debug)]
pub struct NameArgs {
    /// Name of the path.
    name: String,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// `wanperf path exec NAME left|right -- CMD`: runs CMD inside the host (replacing this
/// process), with WANPERF_PEER set to the other host.
pub fn exec(a: ExecArgs) -> Result<ExitCode> {
    let host = match a.host.as_str() {
        "left" => Host::Left,
        "right" => Host::Right,
        other => bail!("`{other}` is not a host: left or right"),
    };
    let info: PathInfo = Kind::Path.ask(&a.name, &Request::Info)?;
    wanperf_net::daemon::join(info.pid, info.fd(host), info.config.host_nice, &info.host_cpus, info.cgroup(host))?;
    let err = std::process::Command::new(&a.cmd[0])
        .args(&a.cmd[1..])
        .env("WANPERF_PEER", host.peer().to_string())
        .env("WANPERF_SELF", host.addr().to_string())
        .exec();
    bail!("cannot run `{}`: {err}", a.cmd[0])
}

/// `wanperf path stats NAME`.
pub fn stats(a: NameArgs) -> Result<ExitCode> {
    let r: StatsReply = Kind::Path.ask(&a.name, &Request::Stats)?;
    print_path_stats(&r.stats, a.json, &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}

/// `wanperf path down NAME`.
pub fn down(a: NameArgs) -> Result<ExitCode> {
    let r: StatsReply = Kind::Path.ask(&a.name, &Request::Down)?;
    print_path_stats(&r.stats, a.json, &mut std::io::stdout());
    Kind::Path.wait_gone(&a.name)?;
    Ok(ExitCode::SUCCESS)
}

/// `wanperf path list`.
pub fn list(json: bool) -> Result<ExitCode> {
    for l in wanperf_net::pathd::paths(&Kind::Path.live::<PathInfo>(), json) {
        outln!("{l}");
    }
    Ok(ExitCode::SUCCESS)
}
