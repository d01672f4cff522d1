//! A host's model as users write it, checked, and the kernel settings it means. Pure.
//!
//! Text form (path flags `--host-left`/`--host-right`, study values): comma-separated
//! `key=value` pairs, e.g. `cpu=0.25,sack=off,wmem=64K,cc=reno`. Topology files give the same
//! keys in a host's table (`cpu = 0.25`, `sack = false`, `tcp_wmem = "64K"`).

use serde::{Deserialize, Serialize};
use std::fmt;
use wanperf_units as units;

/// A bad host model: one line saying which key and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ModelError(pub String);

fn bad(m: impl Into<String>) -> ModelError {
    ModelError(m.into())
}

/// The CPU quota's accounting period, µs (the kernel's default CFS period).
pub const PERIOD_US: u64 = 100_000;

/// The smallest quota the kernel takes is 1 ms a period: 0.01 of a core.
pub const MIN_CPU: f64 = 0.01;

/// What an emulated host is besides its network: a CPU quota and its TCP stack's settings.
/// Every field left `None` keeps the emulator's default (no quota; SACK, timestamps and window
/// scaling on; buffers that autotune up to 64 MiB; the kernel's default congestion control).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HostModel {
    /// Cores the host's processes may use together (cgroup `cpu.max`): 0.25 is a quarter of
    /// one core.
    pub cpu: Option<f64>,
    /// Selective acknowledgements (`net.ipv4.tcp_sack`).
    pub sack: Option<bool>,
    /// TCP timestamps (`net.ipv4.tcp_timestamps`).
    pub timestamps: Option<bool>,
    /// Window scaling (`net.ipv4.tcp_window_scaling`): off caps the window at 64 KiB.
    pub window_scaling: Option<bool>,
    /// Receive buffer min, default, max, bytes (`net.ipv4.tcp_rmem`).
    pub rmem: Option<[u64; 3]>,
    /// Send buffer min, default, max, bytes (`net.ipv4.tcp_wmem`).
    pub wmem: Option<[u64; 3]>,
    /// Congestion control (`net.ipv4.tcp_congestion_control`), e.g. `reno`.
    pub cc: Option<String>,
    /// The most its processes read from the machine's disks together, bit/s (cgroup `io.max`
    /// rbps, v1 `blkio.throttle.read_bps_device`).
    pub disk_read: Option<u64>,
    /// The most they write, bit/s (`io.max` wbps, v1 `blkio.throttle.write_bps_device`).
    pub disk_write: Option<u64>,
}

/// The keys of the text form, with what each takes.
pub const KEYS: &[(&str, &str)] = &[
    ("cpu", "cores, e.g. 0.25"),
    ("sack", "on or off"),
    ("timestamps", "on or off"),
    ("window_scaling", "on or off (also wscale)"),
    ("rmem", "MAX or MIN:DEFAULT:MAX, sizes (also tcp_rmem)"),
    ("wmem", "MAX or MIN:DEFAULT:MAX, sizes (also tcp_wmem)"),
    ("cc", "a congestion control, e.g. reno"),
    ("disk_read", "a rate in bit/s, e.g. 400M (50 MB/s)"),
    ("disk_write", "a rate in bit/s, e.g. 400M (50 MB/s)"),
];

/// The slowest disk a model may have: 64 kbit/s (the kernel's throttling needs a few KB a
/// second to make progress at all).
const MIN_DISK_BPS: u64 = 64_000;

fn switch(key: &str, v: &str) -> Result<bool, ModelError> {
    match v {
        "on" | "true" | "1" | "yes" => Ok(true),
        "off" | "false" | "0" | "no" => Ok(false),
        _ => Err(bad(format!("`{key}` is on or off, not `{v}`"))),
    }
}

/// `MAX` or `MIN:DEFAULT:MAX` (also space-separated, as the sysctl prints it).
fn buffers(key: &str, v: &str) -> Result<[u64; 3], ModelError> {
    let parts: Vec<&str> = v.split([':', ' ']).filter(|p| !p.is_empty()).collect();
    let size = |p: &str| units::parse_size(p).map_err(|e| bad(format!("`{key}`: {e}")));
    let [min, def, max] = match parts.as_slice() {
        [max] => {
            let max = size(max)?;
            [4096.min(max), 131_072.min(max), max]
        }
        [a, b, c] => [size(a)?, size(b)?, size(c)?],
        _ => return Err(bad(format!("`{key}` is MAX or MIN:DEFAULT:MAX, not `{v}`"))),
    };
    if !(min <= def && def <= max) {
        return Err(bad(format!("`{key}`: MIN ≤ DEFAULT ≤ MAX, not `{v}`")));
    }
    // The kernel holds them as ints.
    if min < 1024 || max > i32::MAX as u64 {
        return Err(bad(format!("`{key}`: sizes from 1 KiB to 2 GiB, not `{v}`")));
    }
    Ok([min, def, max])
}

impl HostModel {
    /// Parses the text form; empty or `none` is the default host.
    pub fn parse(s: &str) -> Result<HostModel, ModelError> {
        let mut m = HostModel::default();
        let s = s.trim();
        if s.is_empty() || s == "none" {
            return Ok(m);
        }
        for part in s.split(',').map(str::trim) {
            let (k, v) =
                part.split_once('=').ok_or_else(|| bad(format!("`{part}` is not key=value (keys: {})", key_list())))?;
            m.set(k.trim(), v.trim())?;
        }
        Ok(m)
    }

    /// Sets one key from its text (the text form's and a topology file's keys).
    pub fn set(&mut self, key: &str, v: &str) -> Result<(), ModelError> {
        match key {
            "cpu" => {
                let c: f64 = v.parse().map_err(|_| bad(format!("`cpu` is a number of cores, not `{v}`")))?;
                if !(MIN_CPU..=1024.0).contains(&c) {
                    return Err(bad(format!("`cpu` is {MIN_CPU}–1024 cores, not `{v}`")));
                }
                self.cpu = Some(c);
            }
            "sack" => self.sack = Some(switch(key, v)?),
            "timestamps" => self.timestamps = Some(switch(key, v)?),
            "window_scaling" | "wscale" => self.window_scaling = Some(switch("window_scaling", v)?),
            "rmem" | "tcp_rmem" => self.rmem = Some(buffers("rmem", v)?),
            "wmem" | "tcp_wmem" => self.wmem = Some(buffers("wmem", v)?),
            "cc" => {
                // The kernel's names: at most 15 characters of [a-z0-9_].
                if v.is_empty() || v.len() > 15 || !v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    return Err(bad(format!("`cc` is a congestion control's name (e.g. reno, cubic), not `{v}`")));
                }
                self.cc = Some(v.to_string());
            }
            "disk_read" | "disk_write" => {
                let r = units::parse_rate(v).map_err(|e| bad(format!("`{key}`: {e}")))?;
                if r < MIN_DISK_BPS {
                    return Err(bad(format!("`{key}` is at least 64k (bit/s), not `{v}`")));
                }
                if key == "disk_read" {
                    self.disk_read = Some(r);
                } else {
                    self.disk_write = Some(r);
                }
            }
            _ => return Err(bad(format!("unknown host key `{key}` (keys: {})", key_list()))),
        }
        Ok(())
    }

    /// True when nothing differs from the emulator's default host.
    pub fn is_default(&self) -> bool {
        *self == HostModel::default()
    }

    /// The CPU quota as the kernel takes it: (quota, period) in µs a period.
    pub fn cpu_quota_us(&self) -> Option<(u64, u64)> {
        self.cpu.map(|c| (((c * PERIOD_US as f64).round() as u64).max(1000), PERIOD_US))
    }

    /// The disk limits as the kernel takes them, bytes a second (read, write); None: neither.
    pub fn disk_bytes_s(&self) -> Option<(Option<u64>, Option<u64>)> {
        let b = |r: Option<u64>| r.map(|r| (r / 8).max(1));
        (self.disk_read.is_some() || self.disk_write.is_some()).then(|| (b(self.disk_read), b(self.disk_write)))
    }

    /// The model's limits as a study's bounds name them, each key with `suffix` (`_left`,
    /// `_right`): `cpu` (cores), `wmem` and `rmem` (the TCP buffers' maximum, bits),
    /// `disk_read` and `disk_write` (bit/s). What the model leaves alone is left out.
    pub fn values(&self, suffix: &str) -> Vec<(String, f64)> {
        let mut v = Vec::new();
        if let Some(c) = self.cpu {
            v.push((format!("cpu{suffix}"), c));
        }
        for (k, t) in [("wmem", self.wmem), ("rmem", self.rmem)] {
            if let Some(t) = t {
                v.push((format!("{k}{suffix}"), t[2] as f64 * 8.0));
            }
        }
        for (k, r) in [("disk_read", self.disk_read), ("disk_write", self.disk_write)] {
            if let Some(r) = r {
                v.push((format!("{k}{suffix}"), r as f64));
            }
        }
        v
    }

    /// The network namespace's settings this model means, as (`/proc/sys` key, value), to be
    /// written after the emulator's defaults.
    pub fn sysctls(&self) -> Vec<(&'static str, String)> {
        let on = |b: bool| if b { "1" } else { "0" }.to_string();
        let triple = |t: &[u64; 3]| format!("{} {} {}", t[0], t[1], t[2]);
        let mut v = Vec::new();
        if let Some(b) = self.sack {
            v.push(("net/ipv4/tcp_sack", on(b)));
        }
        if let Some(b) = self.timestamps {
            v.push(("net/ipv4/tcp_timestamps", on(b)));
        }
        if let Some(b) = self.window_scaling {
            v.push(("net/ipv4/tcp_window_scaling", on(b)));
        }
        if let Some(t) = &self.rmem {
            v.push(("net/ipv4/tcp_rmem", triple(t)));
        }
        if let Some(t) = &self.wmem {
            v.push(("net/ipv4/tcp_wmem", triple(t)));
        }
        if let Some(c) = &self.cc {
            v.push(("net/ipv4/tcp_congestion_control", c.clone()));
        }
        v
    }

    /// Each field that is set: (its text form `key=value`, its words).
    fn fields(&self) -> Vec<(String, String)> {
        let onoff = |b: bool| if b { "on" } else { "off" };
        let mut v = Vec::new();
        if let Some(c) = self.cpu {
            v.push((format!("cpu={c}"), format!("{c} core{}", if c == 1.0 { "" } else { "s" })));
        }
        for (key, words, b) in [
            ("sack", "SACK", self.sack),
            ("timestamps", "timestamps", self.timestamps),
            ("window_scaling", "window scaling", self.window_scaling),
        ] {
            if let Some(b) = b {
                v.push((format!("{key}={}", onoff(b)), format!("{words} {}", onoff(b))));
            }
        }
        for (key, words, t) in [("rmem", "receive", &self.rmem), ("wmem", "send", &self.wmem)] {
            if let Some(t) = t {
                v.push((
                    format!("{key}={}:{}:{}", t[0], t[1], t[2]),
                    format!("{words} buffers ≤ {}", units::fmt_bytes(t[2])),
                ));
            }
        }
        if let Some(c) = &self.cc {
            v.push((format!("cc={c}"), c.clone()));
        }
        for (key, words, r) in
            [("disk_read", "disk reads", self.disk_read), ("disk_write", "disk writes", self.disk_write)]
        {
            if let Some(r) = r {
                v.push((format!("{key}={r}"), format!("{words} ≤ {}", units::fmt_rate(r as f64))));
            }
        }
        v
    }

    /// In words: `0.25 core, SACK off, send buffers ≤ 64.0 KiB, reno`.
    pub fn describe(&self) -> String {
        let v: Vec<String> = self.fields().into_iter().map(|f| f.1).collect();
        if v.is_empty() {
            "the default host".into()
        } else {
            v.join(", ")
        }
    }
}

fn key_list() -> String {
    KEYS.iter().map(|k| k.0).collect::<Vec<_>>().join(", ")
}

/// The text form, which [`HostModel::parse`] reads back.
impl fmt::Display for HostModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v: Vec<String> = self.fields().into_iter().map(|f| f.0).collect();
        f.write_str(if v.is_empty() { "none" } else { "" })?;
        f.write_str(&v.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_form_round_trips_and_means_these_settings() {
        let m = HostModel::parse("cpu=0.25, sack=off, wscale=off, wmem=64K, rmem=4K:87380:6M, cc=reno").unwrap();
        assert_eq!(m.cpu, Some(0.25));
        assert_eq!(m.wmem, Some([4096, 65536, 65536]));
        assert_eq!(m.rmem, Some([4096, 87380, 6 << 20]));
        assert_eq!(HostModel::parse(&m.to_string()).unwrap(), m);
        assert_eq!(m.cpu_quota_us(), Some((25_000, 100_000)));
        assert_eq!(
            m.sysctls(),
            [
                ("net/ipv4/tcp_sack", "0".to_string()),
                ("net/ipv4/tcp_window_scaling", "0".to_string()),
                ("net/ipv4/tcp_rmem", "4096 87380 6291456".to_string()),
                ("net/ipv4/tcp_wmem", "4096 65536 65536".to_string()),
                ("net/ipv4/tcp_congestion_control", "reno".to_string()),
            ]
        );
        assert_eq!(
            m.describe(),
            "0.25 cores, SACK off, window scaling off, receive buffers ≤ 6.00 MiB, send buffers ≤ 64.0 KiB, reno"
        );
        for empty in ["", "none", "  "] {
            assert!(HostModel::parse(empty).unwrap().is_default());
        }
        assert_eq!(HostModel::default().to_string(), "none");
        // Two cores is a quota of two periods a period.
        assert_eq!(HostModel::parse("cpu=2").unwrap().cpu_quota_us(), Some((200_000, 100_000)));
        // Disk rates are bit/s like every rate; the kernel takes bytes a second.
        let v = HostModel::parse("cpu=0.25,wmem=4096:16384:16384,disk_read=400M").unwrap().values("_left");
        assert_eq!(
            v,
            [("cpu_left".to_string(), 0.25), ("wmem_left".into(), 16384.0 * 8.0), ("disk_read_left".into(), 400e6)]
        );
        assert!(HostModel::parse("sack=off").unwrap().values("_right").is_empty());
        let d = HostModel::parse("disk_write=80M").unwrap();
        assert_eq!(d.disk_bytes_s(), Some((None, Some(10_000_000))));
        assert_eq!(d.describe(), "disk writes ≤ 80.0 Mbit/s");
        assert_eq!(HostModel::parse(&d.to_string()).unwrap(), d);
        assert!(d.sysctls().is_empty() && m.disk_bytes_s().is_none());
    }

    #[test]
    fn every_mistake_is_one_line_naming_the_key() {
        for (text, says) in [
            ("cpu=0", "`cpu` is 0.01–1024 cores"),
            ("cpu=fast", "number of cores"),
            ("sack=maybe", "`sack` is on or off"),
            ("wmem=64K:16K:1M", "MIN ≤ DEFAULT ≤ MAX"),
            ("wmem=1:2", "MAX or MIN:DEFAULT:MAX"),
            ("rmem=512", "from 1 KiB"),
            ("cc=bbr;rm", "congestion control's name"),
            ("disk_read=fast", "`disk_read`"),
            ("disk_write=1k", "`disk_write` is at least 64k"),
            ("speed=1", "unknown host key `speed`"),
            ("cpu", "not key=value"),
        ] {
            let e = HostModel::parse(text).unwrap_err().to_string();
            assert!(e.contains(says), "{text}: {e}");
            assert!(!e.contains('\n'));
        }
    }
}
