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
