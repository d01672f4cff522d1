//! The command line's own parsers as a study's checker ([`wanperf_study::spec::Flags`]): a
//! study file accepts exactly what the commands' flags do.

use anyhow::Result;
use clap::Parser;
use wanperf_study::spec::{Flags, Study, StudyError};

#[derive(Parser, Debug)]
#[command(name = "wanperf", no_binary_name = true)]
enum MeasureCli {
    Tput(crate::tput::TputArgs),
    Load(crate::load::LoadArgs),
    Ping(crate::ping::PingArgs),
    Copy(crate::copy::CopyArgs),
    Capacity(crate::capacity::CapacityArgs),
    Trace(crate::trace::TraceArgs),
}

#[derive(Parser, Debug)]
#[command(name = "path", no_binary_name = true)]
struct LinkCli {
    #[command(flatten)]
    link: crate::path::LinkArgs,
}

/// The first line of a clap error, without its decorations.
fn clap_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let first = text.lines().next().unwrap_or("invalid value").trim_start_matches("error: ");
    first.trim_end_matches(':').to_string()
}

/// The commands' flags, as a study's checker.
pub struct CliFlags;

impl Flags for CliFlags {
    fn check_command(&self, argv: &[String]) -> Result<(), String> {
        MeasureCli::try_parse_from(argv).map(|_| ()).map_err(|e| clap_line(&e))
    }

    fn check_link(&self, flags: &[String]) -> Result<(), String> {
        let cli = LinkCli::try_parse_from(flags).map_err(|e| clap_line(&e))?;
        crate::path::config_from(&cli.link).map(|_| ()).map_err(|e| format!("{e:#}"))
    }

    fn bottleneck_bps(&self, flags: &[String]) -> Option<f64> {
        let cli = LinkCli::try_parse_from(flags).ok()?;
        match crate::path::config_from(&cli.link).ok()?.up.rate {
            wanperf_emu::config::Rate::Constant(u) => Some(u as f64),
            _ => None,
        }
    }

    fn link_values(&self, flags: &[String]) -> std::collections::BTreeMap<String, f64> {
        let Ok(cli) = LinkCli::try_parse_from(flags) else { return Default::default() };
        crate::path::config_from(&cli.link).map(|c| c.values()).unwrap_or_default()
    }

    fn net_values(&self, n: &wanperf_study::net::NetCell) -> Result<std::collections::BTreeMap<String, f64>, String> {
        wanperf_net::netd::load_cell(&n.topology, &n.traffic, &n.settings, &n.from, &n.to)
            .map(|c| c.values)
            .map_err(|e| format!("{e:#}"))
    }
}

/// Parses and validates a study file with the commands' own flags.
pub fn parse(text: &str) -> Result<Study, StudyError> {
    Study::parse(text, &CliFlags)
}

/// The emulated path of a cell's link flags (`Study::link_argv`).
pub fn path_config(link_argv: &[String]) -> Result<wanperf_emu::path::PathConfig> {
    let cli = LinkCli::try_parse_from(link_argv).map_err(|e| anyhow::anyhow!(clap_line(&e)))?;
    crate::path::config_from(&cli.link)
}
