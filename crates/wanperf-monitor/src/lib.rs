//! wanperf's monitoring mesh, the I/O shell around the pure `wanperf-mesh` core:
//! [`agent`] (`wanperf agent`), [`central`] (`wanperf central`), the agent's [`spool`], the
//! central's live [`view`] (pure: time passed in) and its [`metrics`].

pub mod agent;
pub mod central;
pub mod metrics;
pub mod spool;
pub mod view;

/// Receives one line per noteworthy event.
pub type Log = std::sync::Arc<dyn Fn(&str) + Send + Sync>;

/// The serde name of a unit enum variant (`latency`, `ok`, …).
pub(crate) fn serde_name<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}
