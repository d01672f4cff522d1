//! What the parts of a study share: the kinds of measurement, a sweep axis, and an axis's
//! name and values as the archive stores them. Pure.

use serde::Serialize;
use wanperf_units as units;

/// What a study measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Bulk throughput (`wanperf tput`).
    Tput,
    /// Probes alone (`wanperf ping`).
    Ping,
    /// Loaded vs unloaded probes (`wanperf load`).
    Load,
    /// A file copy (`wanperf copy`) of data the runner makes for each cell.
    Copy,
    /// Capacity, available bandwidth and the bottleneck's hop (`wanperf capacity`).
    Capacity,
    /// A hop-by-hop trace: per-hop RTT and loss (`wanperf trace`).
    Trace,
}

impl Kind {
    /// The subcommand.
    pub fn command(self) -> &'static str {
        match self {
            Kind::Tput => "tput",
            Kind::Ping => "ping",
            Kind::Load => "load",
            Kind::Copy => "copy",
            Kind::Capacity => "capacity",
            Kind::Trace => "trace",
        }
    }
}

/// One sweep axis.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Axis {
    /// Its name (a link option or a measurement option).
    pub name: String,
    /// Its values as the command line takes them.
    pub values: Vec<String>,
    /// True for a link option (each cell then gets a path of its own configuration).
    pub link: bool,
}

/// The archive's name for an axis: the study-wide name where the flag differs by
/// measurement (`duration`), with `_` for `-`.
pub fn param_key(axis: &str) -> String {
    if axis.contains('.') {
        // A network's setting (`link.slac-esnet.rate`) keeps the names it was given.
        return axis.to_string();
    }
    match axis {
        "time" | "load-time" => "duration".into(),
        "parallel" => "streams".into(),
        _ => axis.replace('-', "_"),
    }
}

/// The name whose unit an axis's values have: a network setting's option without its
/// direction (`link.x.queue_ab` → `queue`), else the axis itself.
fn unit_key(key: &str) -> &str {
    match key.rsplit_once('.') {
        Some((_, opt)) => opt.strip_suffix("_ab").or_else(|| opt.strip_suffix("_ba")).unwrap_or(opt),
        None => key,
    }
}

/// A value in base units when its axis has one (as the archive stores it).
pub fn normalize(key: &str, v: &str) -> serde_json::Value {
    let num = match unit_key(key) {
        "window" | "length" | "bytes" | "size" | "block" => units::parse_size(v).ok().map(|b| b as f64),
        "queue" | "queue_up" | "queue_down" if !v.ends_with('p') => units::parse_size(v).ok().map(|b| b as f64),
        "rate" | "rate_up" | "rate_down" | "bitrate" => units::parse_rate(v).ok().map(|b| b as f64),
        "rtt" | "delay" | "delay_up" | "delay_down" | "duration" | "idle_time" | "interval" | "jitter" => {
            units::parse_duration(v).ok()
        }
        _ => v.parse::<f64>().ok(),
    };
    match num {
        Some(n) if n.fract() == 0.0 && n.abs() < 9e15 => serde_json::Value::from(n as i64),
        Some(n) => serde_json::Value::from(n),
        None => serde_json::Value::from(v),
    }
}

/// An axis value as users read it: sizes in binary units, rates in bit/s, times in ms, the
/// rest as stored (the headline tables and the expectations' cells say it alike).
pub fn fmt_value(key: &str, v: &serde_json::Value) -> String {
    match (unit_key(key), v.as_f64()) {
        ("window" | "queue" | "queue_up" | "queue_down" | "size" | "block", Some(b)) => units::fmt_bytes(b as u64),
        ("rate" | "rate_up" | "rate_down" | "bitrate", Some(r)) => units::fmt_rate(r),
        // Whole milliseconds where that says it all; sub-millisecond values keep their digits
        // (trend lines are grouped by this text).
        ("rtt" | "delay" | "delay_up" | "delay_down" | "duration", Some(s)) => {
            let ms = s * 1000.0;
            if (ms - ms.round()).abs() < 1e-9 {
                format!("{ms:.0} ms")
            } else {
                format!("{} ms", (ms * 1000.0).round() / 1000.0)
            }
        }
        _ => v.as_str().map_or_else(|| v.to_string(), str::to_string),
    }
}
