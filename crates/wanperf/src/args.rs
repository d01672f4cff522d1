//! What several commands' flags share: value parsers with units, and the flow export format.

use wanperf_proto::units;

/// Parses a size flag (k/M/G as powers of 1024).
pub(crate) fn size(s: &str) -> Result<u64, String> {
    units::parse_size(s).map_err(|e| e.to_string())
}

/// Flow export format.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum ExportFormatArg {
    /// IPFIX (RFC 7011).
    Ipfix,
    /// NetFlow v9 (RFC 3954).
    V9,
}

impl ExportFormatArg {
    /// The encoder's format.
    pub fn format(self) -> wanperf_flows::export::Format {
        match self {
            ExportFormatArg::Ipfix => wanperf_flows::export::Format::Ipfix,
            ExportFormatArg::V9 => wanperf_flows::export::Format::V9,
        }
    }
}

/// The per-packet event log of `--log FILE` (none without the flag).
pub fn log_sink(p: &Option<std::path::PathBuf>) -> anyhow::Result<Option<Box<dyn std::io::Write + Send>>> {
    use anyhow::Context;
    Ok(match p {
        Some(p) => Some(Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("cannot create {}", p.display()))?,
        ))),
        None => None,
    })
}

/// Which interfaces' readings, in bins of what length, and what counts as saturated (`util
/// show`, `flows report`).
#[derive(clap::Args, Debug)]
pub struct UtilSelect {
    /// Only this device's interfaces.
    #[arg(long, value_name = "NAME")]
    device: Option<String>,
    /// Only these interfaces (repeatable).
    #[arg(long, value_name = "NAME")]
    iface: Vec<String>,
    /// Utilization bin length, seconds.
    #[arg(long, default_value_t = 300.0, value_name = "SECONDS")]
    bin: f64,
    /// Interface speeds the devices do not give (IFACE=RATE; repeatable).
    #[arg(long, value_name = "IFACE=RATE")]
    speed: Vec<String>,
    /// Saturation threshold, percent of the speed.
    #[arg(long, default_value_t = 95.0, value_name = "PERCENT")]
    pct: f64,
    /// Consecutive bins at or above --pct that make a saturated run.
    #[arg(long, default_value_t = 3, value_name = "N")]
    bins: usize,
}

impl UtilSelect {
    /// The checked selection of the readings between `from` and `to` (Unix seconds).
    pub fn selection(&self, from: Option<f64>, to: Option<f64>) -> anyhow::Result<wanperf_collector::util::Selection> {
        let bin_ms = wanperf_collector::util::check_bin(self.bin)?;
        let speeds = wanperf_collector::util::speeds(&self.speed)?;
        if !(self.pct > 0.0 && self.pct <= 100.0) {
            anyhow::bail!("--pct must be above 0 and at most 100");
        }
        Ok(wanperf_collector::util::Selection {
            device: self.device.clone(),
            iface: self.iface.clone(),
            from,
            to,
            bin_ms,
            speeds,
            pct: self.pct,
            bins: self.bins,
        })
    }
}

/// A duration flag that must be above zero, in seconds (`--interval 100ms`).
pub fn positive_secs(flag: &str, s: &str) -> anyhow::Result<f64> {
    let v = wanperf_proto::units::parse_duration(s).map_err(|e| anyhow::anyhow!("{flag}: {e}"))?;
    if v <= 0.0 {
        anyhow::bail!("{flag} must be more than 0 s");
    }
    Ok(v)
}

/// The first address of `host` (a name or an address) with `port`.
pub fn resolve(host: &str, port: u16) -> anyhow::Result<std::net::SocketAddr> {
    use anyhow::Context;
    use std::net::ToSocketAddrs;
    let mut addrs = (host, port).to_socket_addrs().with_context(|| format!("cannot resolve {host}"))?;
    addrs.next().with_context(|| format!("{host} has no address"))
}
