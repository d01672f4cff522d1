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
pub fn read_mesh(path: &std::path::Path) -> Result<(wanperf_mesh::config::Mesh, String), MeshFileError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|err| MeshFileError::Read { file: file.clone(), err })?;
    let mesh = wanperf_mesh::config::parse(&text).map_err(|err| MeshFileError::Invalid { file, err })?;
    Ok((mesh, text))
}

/// Why a mesh file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum MeshFileError {
    /// It could not be read.
    #[error("cannot read mesh file {file}: {err}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        err: std::io::Error,
    },
    /// It is not a valid mesh (the error names the line).
    #[error("{file}: {err}")]
    Invalid {
        /// The file.
        file: String,
        /// Why, with the line.
        err: wanperf_mesh::config::MeshError,
    },
}

/// The serde name of a unit enum variant (`latency`, `ok`, …).
pub(crate) fn serde_name<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}
