//! `wanperf flows`: collect NetFlow v5/v9, IPFIX and sFlow export into the archive, and answer
//! the seed's questions of it (top talkers, pairs, the protocol mix, export loss).

use crate::store::{describe_db, open_store, open_store_read_only};
use crate::INTERRUPTED;
use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use ipnet::IpNet;
use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use wanperf_collector::collect::{self, Collector};
use wanperf_collector::rows::bin_row;
use wanperf_flows::{BinRow, Dir, Key, Metric};

/// `wanperf flows …`.
#[derive(Subcommand, Debug)]
pub enum FlowsCmd {
    /// Receive NetFlow v5/v9, IPFIX and sFlow v5 export and store it in time bins.
    Collect(CollectArgs),
    /// Top sources, destinations or pairs by bytes, packets or flows.
    Top(TopArgs),
    /// The protocol/application mix, in and out.
    Mix(MixArgs),
    /// What each exporter sent, and how much of it was lost on the way.
    Exporters(ExportersArgs),
    /// One HTML page: utilization in and out over time, each link against the RTT and loss
    /// the archive measured meanwhile, the top talkers, pairs and the protocol mix.
    Report(ReportArgs),
}

/// `wanperf flows collect`.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  wanperf flows collect --listen 0.0.0.0:2055 --listen 0.0.0.0:6343
  wanperf flows collect --listen 127.0.0.1:0 --duration 60 --db flows.sqlite

Every protocol is accepted on every port (the datagram says which it is). Templates are kept per
exporter address and observation domain, never per source port; data that arrives before its
template is held and decoded when the template comes. Sampled records are stored corrected by
their sampling rate, with the raw values and the rate beside them. Export loss is counted from
each exporter's sequence numbers (see `wanperf flows exporters`). Finished bins are written every
--flush seconds and everything on exit (Ctrl-C, SIGTERM or --duration).")]
pub struct CollectArgs {
    /// UDP address to receive export on (repeat for several; port 0 picks a free port, printed).
    #[arg(long, value_name = "ADDR:PORT", required = true)]
    listen: Vec<SocketAddr>,
    /// Archive: a SQLite file or a postgres:// URL (default: $WANPERF_DB, or
    /// ~/.local/share/wanperf/archive.sqlite).
    #[arg(long, value_name = "DB")]
    db: Option<String>,
    /// Bin length in seconds.
    #[arg(long, default_value_t = 300.0, value_name = "SECONDS")]
    bin: f64,
    /// How often finished bins and exporter counters are written, seconds.
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    flush: f64,
    /// Stop after this many seconds (default: run until Ctrl-C or SIGTERM).
    #[arg(long, value_name = "SECONDS")]
    duration: Option<f64>,
    /// Print the exporters' counters as JSON on exit.
    #[arg(long)]
    json: bool,
}

/// Options shared by the queries.
#[derive(Args, Debug, Clone)]
pub struct QueryArgs {
    /// Archive (as for `collect`).
    #[arg(long, value_name = "DB")]
    db: Option<String>,
    /// From this time, Unix seconds (default: the beginning).
    #[arg(long, value_name = "UNIX")]
    from: Option<f64>,
    /// Until this time, Unix seconds (default: now and later).
    #[arg(long, value_name = "UNIX")]
    to: Option<f64>,
    /// The local networks: traffic to them is "in", from them "out" (repeatable).
    #[arg(long, value_name = "CIDR")]
    local: Vec<IpNet>,
    /// Only records from this exporter (its address).
    #[arg(long, value_name = "ADDR")]
    exporter: Option<std::net::IpAddr>,
    /// Only records of this observation domain / source id (the emulator exports each link
    /// direction as its own: 2 × link + 1 for a → b, 2 × link + 2 for b → a).
    #[arg(long, value_name = "ID")]
    domain: Option<u32>,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// Grouping of `flows top`.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum KeyArg {
    /// Source address.
    Src,
    /// Destination address.
    Dst,
    /// Source, destination, protocol and ports.
    Pair,
}

/// Ranking of `flows top`.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum MetricArg {
    /// Bytes.
    Bytes,
    /// Packets.
    Packets,
    /// Flow records.
    Flows,
}

/// Direction filter.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum DirArg {
    /// Into the --local networks.
    In,
    /// Out of the --local networks.
    Out,
}

/// `wanperf flows top`.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  wanperf flows top                                  # top 25 sources by bytes
  wanperf flows top --key dst --by packets -n 10
  wanperf flows top --key pair -n 14                 # the seed's 14 communicating pairs
  wanperf flows top --local 198.18.0.0/24 --dir out  # what leaves the site

Ties are broken by the key (lower address first), so the same data always gives the same
table. Bytes and packets are corrected by each record's sampling rate.")]
pub struct TopArgs {
    #[command(flatten)]
    q: QueryArgs,
    /// Group by.
    #[arg(long, value_enum, default_value = "src")]
    key: KeyArg,
    /// Rank by.
    #[arg(long = "by", value_enum, default_value = "bytes")]
    by: MetricArg,
    /// Only traffic in or out of the --local networks.
    #[arg(long, value_enum, requires = "local")]
    dir: Option<DirArg>,
    /// Rows (0: all).
    #[arg(short = 'n', long, default_value_t = 25)]
    n: usize,
}

/// `wanperf flows mix`.
#[derive(Args, Debug)]
pub struct MixArgs {
    #[command(flatten)]
    q: QueryArgs,
}

/// `wanperf flows exporters`.
#[derive(Args, Debug)]
pub struct ExportersArgs {
    /// Archive (as for `collect`).
    #[arg(long, value_name = "DB")]
    db: Option<String>,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// `wanperf flows report`.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  wanperf flows report -o site.html                      # everything in the archive
  wanperf flows report --local 198.18.0.0/16 --device r1 --iface wan0 --speed wan0=43M
  wanperf flows report --from 1795500000 --to 1795586400 --run 12 --bin 60 --json

The page has MRTG's view of every selected interface (average rate in and out per bin, gaps
left as gaps, saturated runs named), each interface laid against the RTT and loss of every
measured path in the archive over the same time (by default the runs that overlap the
readings; --run picks them), with the correlation of queueing delay and utilization per
direction as the finding (does this link's load explain the latency?), and seed 000's tables:
top sources, destinations and pairs by bytes, and the protocol mix in and out of --local.")]
pub struct ReportArgs {
    #[command(flatten)]
    q: QueryArgs,
    /// Rows of the top source and destination tables.
    #[arg(short = 'n', long, default_value_t = 25)]
    n: usize,
    /// Rows of the top pairs table.
    #[arg(long, default_value_t = 14)]
    pairs: usize,
    #[command(flatten)]
    select: crate::args::UtilSelect,
    /// Runs whose RTT probes to lay against the utilization (repeatable; default: the runs
    /// that overlap the readings, at most 8).
    #[arg(long, value_name = "ID")]
    run: Vec<i64>,
    /// Page title.
    #[arg(long, default_value = "Who uses the links, and what it does to latency")]
    title: String,
    /// The HTML file to write.
    #[arg(short, long, default_value = "site.html")]
    output: std::path::PathBuf,
}

/// `wanperf flows report`.
pub fn report(a: ReportArgs) -> Result<ExitCode> {
    let sel = a.select.selection(a.q.from, a.q.to)?;
    let rows = load(&a.q)?;
    let mut store = open_store_read_only(a.q.db.as_deref())?;
    let q = wanperf_collector::site::Query {
        title: a.title.clone(),
        from: a.q.from,
        to: a.q.to,
        local: &a.q.local,
        top: a.n,
        pairs: a.pairs,
        runs: &a.run,
    };
    let data = wanperf_collector::site::data(store.as_mut(), &rows, &sel, &q)?;
    let r = wanperf_report::site_report(&data);
    std::fs::write(&a.output, &r.html).with_context(|| format!("cannot write {}", a.output.display()))?;
    if a.q.json {
        outln!(
            "{}",
            serde_json::json!({
                "event": "flows_report",
                "output": a.output,
                "flow_rows": rows.len(),
                "interfaces": data.links.len(),
                "paths": data.paths.len(),
                "figures": r.figures.iter().map(|f| serde_json::json!({"name": f.name, "finding": f.finding})).collect::<Vec<_>>(),
                "skipped": r.skipped.iter().map(|(n, why)| serde_json::json!({"name": n, "why": why})).collect::<Vec<_>>(),
            })
        );
    } else {
        for f in &r.figures {
            outln!("{}: {}", f.title, f.finding);
        }
        outln!(
            "{}: {} figures, {} flow bin rows, {} interfaces, {} measured paths",
            a.output.display(),
            r.figures.len(),
            rows.len(),
            data.links.len(),
            data.paths.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `wanperf flows collect`.
pub fn collect(a: CollectArgs) -> Result<ExitCode> {
    let cfg = collect::Config::from_flags(a.bin, a.flush, a.duration)?;
    let mut store = open_store(a.db.as_deref())?;
    let c = Collector::bind(&a.listen)?;
    for local in c.local_addrs() {
        eprintln!("wanperf flows collect listening on {local} (udp), archive {}", describe_db(a.db.as_deref()));
    }
    let _ = std::io::stderr().flush();
    let end = c.run(store.as_mut(), &cfg, &INTERRUPTED)?;
    if a.json {
        let mut v = serde_json::to_value(&end)?;
        v["event"] = "flows_collect_end".into();
        outln!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        let _ = wanperf_collector::text::exporters_table(&mut std::io::stdout(), &end.exporters);
        eprintln!("{}", wanperf_collector::text::collect_end(&end));
    }
    Ok(ExitCode::SUCCESS)
}

fn load(q: &QueryArgs) -> Result<Vec<BinRow>> {
    let mut store = open_store_read_only(q.db.as_deref())?;
    let rows = store.flows(q.from.unwrap_or(0.0), q.to.unwrap_or(f64::MAX))?;
    Ok(rows
        .iter()
        .filter_map(bin_row)
        .filter(|r| q.exporter.is_none_or(|e| r.key.exporter == e) && q.domain.is_none_or(|d| r.key.domain == d))
        .collect())
}

/// `wanperf flows top`.
pub fn top(a: TopArgs) -> Result<ExitCode> {
    let rows = load(&a.q)?;
    let key = match a.key {
        KeyArg::Src => Key::Src,
        KeyArg::Dst => Key::Dst,
        KeyArg::Pair => Key::Pair,
    };
    let metric = match a.by {
        MetricArg::Bytes => Metric::Bytes,
        MetricArg::Packets => Metric::Packets,
        MetricArg::Flows => Metric::Flows,
    };
    let dir = a.dir.map(|d| match d {
        DirArg::In => Dir::In,
        DirArg::Out => Dir::Out,
    });
    let t = wanperf_flows::top(&rows, key, metric, dir, &a.q.local, a.n);
    if a.q.json {
        outln!("{}", serde_json::to_string_pretty(&t)?);
        return Ok(ExitCode::SUCCESS);
    }
    if t.is_empty() {
        outln!("no flows in the archive for that time range");
        return Ok(ExitCode::SUCCESS);
    }
    let _ = wanperf_collector::text::top_table(&mut std::io::stdout(), key, &t);
    Ok(ExitCode::SUCCESS)
}

/// `wanperf flows mix`.
pub fn mix(a: MixArgs) -> Result<ExitCode> {
    let rows = load(&a.q)?;
    let m = wanperf_flows::mix(&rows, &a.q.local);
    if a.q.json {
        outln!("{}", serde_json::to_string_pretty(&m)?);
        return Ok(ExitCode::SUCCESS);
    }
    let _ = wanperf_collector::text::mix_table(&mut std::io::stdout(), &m, a.q.local.is_empty());
    Ok(ExitCode::SUCCESS)
}

/// `wanperf flows exporters`.
pub fn exporters(a: ExportersArgs) -> Result<ExitCode> {
    let mut store = open_store_read_only(a.db.as_deref())?;
    let ex = store.exporters()?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&ex)?);
    } else {
        let _ = wanperf_collector::text::exporters_table(&mut std::io::stdout(), &ex);
    }
    Ok(ExitCode::SUCCESS)
}
