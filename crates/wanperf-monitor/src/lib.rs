//! wanperf's monitoring mesh, the I/O shell around the pure `wanperf-mesh` core:
//! [`agent`] (`wanperf agent`), [`central`] (`wanperf central`), the agent's [`spool`], the
//! central's live [`view`] (pure: time passed in) and its [`metrics`]; and the [`demo`] on an
//! emulated network.

#![forbid(unsafe_code)]

pub mod agent;
pub mod central;
pub mod demo;
pub mod metrics;
pub mod spool;
pub mod view;

/// Receives one line per noteworthy event.
pub type Log = std::sync::Arc<dyn Fn(&str) + Send + Sync>;

/// Reads and checks a mesh file; returns it with its text. Errors name the file (and line).
pub fn read_mesh(path: &std::path::Path) -> Result<(wanperf_mesh::config::Mesh, String), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read mesh file {}: {e}", path.display()))?;
    let mesh = wanperf_mesh::config::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((mesh, text))
}

/// The serde name of a unit enum variant (`latency`, `ok`, …).
pub(crate) fn serde_name<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}
