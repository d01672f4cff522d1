//! The `wanperf` command line: argument parsing and glue only.

#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};
use std::process::ExitCode;
use wanperf::{calc, capacity, copy, flows, keep, keys, load, mesh, net, output, path, ping, study, tput, trace, util};

/// End-to-end network performance: measure what a path can carry and what limits it.
///
/// wanperf measures bulk TCP, UDP, QUIC and MPTCP throughput over parallel streams and windows,
/// with the transport's own counters (cwnd, RTT, retransmits, send-limit times) and the host settings that
/// shape the result; probes RTT, loss, jitter and one-way delay, with and without a load;
/// emulates wide-area paths in network namespaces; and runs declared studies into an archive
/// with HTML reports. Run `wanperf serve` on one host and `wanperf tput HOST` (or `ping`,
/// `load`) on the other; `wanperf demo` shows a whole study on one machine.
#[derive(Parser, Debug)]
#[command(name = "wanperf", version, about, long_about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the server daemon that `tput`, `ping`, `load` and `copy` clients talk to.
    Serve(tput::ServeArgs),
    /// Measure bulk TCP, UDP, QUIC or MPTCP throughput to a `wanperf serve`.
    Tput(tput::TputArgs),
    /// Copy files and trees to or from a `wanperf serve --root DIR`: parallel streams, BLAKE3
    /// per block, resume, zstd — and what limited the copy (disk, CPU, compression, network).
    Copy(copy::CopyArgs),
    /// Probe round-trip time, one-way delay, loss and jitter to a `wanperf serve`.
    Ping(ping::PingArgs),
    /// Who is using the link: collect NetFlow v5/v9, IPFIX and sFlow into the archive, then the
    /// top talkers, pairs, protocol mix and export loss.
    #[command(subcommand)]
    Flows(flows::FlowsCmd),
    /// Interface utilization, MRTG's question: counters of local interfaces (any network
    /// namespace, rtnetlink) and remote devices (SNMP IF-MIB v2c/v3) in bins, in and out.
    #[command(subcommand)]
    Util(util::UtilCmd),
    /// Per-hop path: routers in order with RTT, loss (the path's, or only a router's ICMP rate
    /// limit), MTU and route changes (Paris-style probes, unprivileged).
    Trace(trace::TraceArgs),
    /// How fast the path to a `wanperf serve` can go: its capacity (packet trains), available
    /// bandwidth (self-loading streams) and the bottleneck's hop (recursive packet trains).
    Capacity(capacity::CapacityArgs),
    /// Seed 000's experiment: RTT and loss with and without a bulk load, over streams × windows.
    Load(load::LoadArgs),
    /// Emulate a wide-area path between two network namespaces (delay, rate, queue, loss,
    /// policer, priority classes) and run commands across it.
    #[command(subcommand)]
    Path(path::PathCmd),
    /// Emulate a whole network (hosts, kernel routers, emulated links, routes, cross traffic)
    /// from a topology file, and run commands on it.
    #[command(subcommand)]
    Net(net::NetCmd),
    /// Monitoring mesh agent: answers tests, probes its peers, runs its share of the mesh's
    /// schedule, and spools every result until the central service has it.
    Agent(mesh::AgentArgs),
    /// The mesh's central service: results into the archive, the mesh file for agents, the
    /// dashboard (grid, pair pages with RTT smoke, events), alerts and /metrics.
    Central(mesh::CentralArgs),
    /// Mesh files: check one, or print the throughput plan every agent follows.
    #[command(subcommand)]
    Mesh(mesh::MeshCmd),
    /// Run declared studies (TOML files, see scenarios/) unattended into the archive.
    #[command(subcommand)]
    Study(study::StudyCmd),
    /// List the runs in the archive.
    Runs(keep::RunsArgs),
    /// Write a run's cells, intervals or probes as JSON or CSV.
    Export(keep::ExportArgs),
    /// Bring iperf3 JSON or iputils ping output into the archive.
    Import(keep::ImportArgs),
    /// Write a self-contained HTML report (figures, tables, findings) for a run.
    Report(keep::ReportArgs),
    /// Path arithmetic: bandwidth-delay product, queue size ↔ delay, window limit, Mathis bound.
    #[command(subcommand)]
    Calc(calc::CalcCmd),
    /// Re-run seed 000 ("Effect of load on RTT and loss") on an emulated SLAC→CERN 2000 path,
    /// store it and write its report (about a minute and a half).
    Demo(study::DemoArgs),
    /// Re-run the seed studies (000–004 or all) on their emulated paths and networks, check
    /// every checkable finding, and write a report per seed beside the seed's own numbers.
    Reproduce(study::ReproduceArgs),
    /// Make an Ed25519 key pair for `serve --authorized-keys` and clients' `--key`.
    Keygen(keys::KeygenArgs),
    /// Internal: run a command as init of a fresh PID namespace, so everything it starts dies
    /// with it (used by `path run` for the hosts' commands).
    #[command(name = "__contain", hide = true)]
    Contain {
        /// The command.
        #[arg(last = true, required = true)]
        cmd: Vec<String>,
    },
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                return if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                    ExitCode::from(2)
                } else {
                    ExitCode::SUCCESS
                };
            }
            // One line, not clap's three: the first line already says what is wrong.
            // Keep clap's first line and the indented lines that complete it (missing arguments).
            let text = e.render().to_string();
            let mut line = String::new();
            for (i, l) in text.lines().enumerate() {
                if i == 0 {
                    line.push_str(l.trim_end_matches(':'));
                } else if l.starts_with("  ") && !l.trim().is_empty() {
                    line.push_str(if line.ends_with("provided") { ": " } else { ", " });
                    line.push_str(l.trim());
                } else {
                    break;
                }
            }
            eprintln!("{line} (see --help)");
            return ExitCode::from(2);
        }
    };
    let needs_namespaces = match &cli.command {
        Command::Path(path::PathCmd::Run(_) | path::PathCmd::Up(_) | path::PathCmd::Daemon { .. }) => true,
        Command::Net(net::NetCmd::Run(_) | net::NetCmd::Up(_) | net::NetCmd::Daemon { .. }) => true,
        Command::Demo(_) => true,
        Command::Study(study::StudyCmd::Run(a)) => a.needs_path(),
        Command::Reproduce(a) => a.needs_path(),
        _ => false,
    };
    if needs_namespaces {
        // Before any thread exists: a normal user becomes root of a fresh user namespace,
        // where it may create network namespaces.
        if let Err(e) = wanperf_emu::netns::become_root_in_user_namespace() {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    }
    // SIGINT and SIGTERM set INTERRUPTED instead of ending the process.
    wanperf_sys::catch_interrupts();
    let result = match cli.command {
        Command::Serve(a) => tput::serve(a),
        Command::Agent(a) => mesh::agent(a),
        Command::Central(a) => mesh::central(a),
        Command::Mesh(c) => mesh::mesh(c),
        Command::Tput(a) => tput::tput(a),
        Command::Copy(a) => copy::copy(a),
        Command::Ping(a) => ping::run(a),
        Command::Flows(flows::FlowsCmd::Collect(a)) => flows::collect(a),
        Command::Flows(flows::FlowsCmd::Top(a)) => flows::top(a),
        Command::Flows(flows::FlowsCmd::Mix(a)) => flows::mix(a),
        Command::Flows(flows::FlowsCmd::Exporters(a)) => flows::exporters(a),
        Command::Flows(flows::FlowsCmd::Report(a)) => flows::report(a),
        Command::Util(util::UtilCmd::Poll(a)) => util::poll(a),
        Command::Util(util::UtilCmd::Show(a)) => util::show(a),
        Command::Trace(a) => trace::run(a),
        Command::Capacity(a) => capacity::run(a),
        Command::Load(a) => load::run(a),
        Command::Path(path::PathCmd::Run(a)) => path::run(a),
        Command::Path(path::PathCmd::Presets) => path::list_presets(),
        Command::Path(path::PathCmd::Up(a)) => path::up(a),
        Command::Path(path::PathCmd::Exec(a)) => path::exec(a),
        Command::Path(path::PathCmd::Stats(a)) => path::stats(a),
        Command::Path(path::PathCmd::Down(a)) => path::down(a),
        Command::Path(path::PathCmd::List { json }) => path::list(json),
        Command::Path(path::PathCmd::Daemon { name, config }) => wanperf_net::pathd::run(&name, &config),
        Command::Net(net::NetCmd::Run(a)) => net::run(a),
        Command::Net(net::NetCmd::Up(a)) => net::up(a),
        Command::Net(net::NetCmd::Exec(a)) => net::exec(a),
        Command::Net(net::NetCmd::Stats(a)) => net::stats(a),
        Command::Net(net::NetCmd::Set(a)) => net::set(a),
        Command::Net(net::NetCmd::Down(a)) => net::down(a),
        Command::Net(net::NetCmd::List { json }) => net::list(json),
        Command::Net(net::NetCmd::Show(a)) => net::show(a),
        Command::Net(net::NetCmd::Presets { name, json }) => net::presets(name, json),
        Command::Net(net::NetCmd::Daemon { name, topology, nice }) => wanperf_net::netd::run(&name, &topology, nice),
        Command::Study(study::StudyCmd::Run(a)) => study::run(a),
        Command::Study(study::StudyCmd::Check(a)) => study::check(a),
        Command::Runs(a) => keep::runs(a),
        Command::Export(a) => keep::export(a),
        Command::Import(a) => keep::import(a),
        Command::Report(a) => keep::report(a),
        Command::Calc(c) => calc::run(c),
        Command::Demo(a) => study::demo(a),
        Command::Reproduce(a) => study::reproduce(a),
        Command::Keygen(a) => keys::keygen(a),
        Command::Contain { cmd } => wanperf_net::child::contain(&cmd),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            if output::is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
