//! The mesh file: TOML → a validated [`Mesh`]. Pure; every error names its line.
//!
//! ```toml
//! [mesh]
//! name = "iepm"                 # required
//! summary = "60s"               # latency summary period (default 60 s)
//! silent_after = 2              # a host is "silent" after this many of its intervals without results
//! heartbeat = "30s"             # an agent with nothing to send says it is alive this often
//!
//! [[site]]
//! name = "slac"
//! [[site]]
//! name = "cern"
//!
//! [[host]]
//! name = "slac1"
//! site = "slac"
//! address = "198.18.1.2"
//! port = 5301
//! key = "wanperf-ed25519 AAAA... slac1"
//!
//! [[group]]
//! name = "all"
//! type = "mesh"
//! members = ["slac1", "cern1", "in2p3"]
//!
//! [[test]]
//! name = "rtt"
//! type = "latency"
//! group = "all"
//! rate = 10
//!
//! [[test]]
//! name = "bulk"
//! type = "throughput"
//! group = "all"
//! interval = "30m"
//! slip = "5m"
//! windows = ["00:00-06:00", "20:00-24:00"]
//!
//! [[test]]
//! name = "route"
//! type = "trace"
//! group = "all"
//! interval = "1h"
//!
//! [[expect]]
//! group = "all"
//! throughput_min = "10M"
//! loss_max = 0.02
//! rtt_max = "200ms"
//! ```
//!
//! # Keys
//!
//! Units follow the project's conventions ([`wanperf_proto::units`]): sizes in bytes with
//! k/M/G = 1024ⁿ (`64k`), rates in bit/s with k/M/G = 1000ⁿ (`10M`), durations with `ms`,
//! `s`, `m`, `h` (a bare number is seconds). Names of hosts are `[a-z0-9-]`, names of sites,
//! groups and tests `[a-z0-9_-]`, 1–63 characters, unique within their kind. Any key not
//! listed here is an error, as is a table other than these.
//!
//! **`[mesh]`** (required)
//! - `name` — the mesh's name, 1–64 printable characters (required).
//! - `summary` — the latency summary period, 1 s – 1 h (default `60s`). Agents cut probes into
//!   periods of this length aligned to multiples of it in Unix time.
//! - `silent_after` — a host is *silent* after this many of its result intervals without any
//!   result, 1–1000 (default 2). Its result interval is [`Mesh::report_interval`], and at
//!   least `heartbeat`, at most twice it.
//! - `heartbeat` — an agent with no results to send sends an empty batch this often, 5 s – 1 h
//!   (default `30s`): a shorter one finds a dead agent sooner.
//!
//! **`[[site]]`**
//! - `name` — required.
//!
//! **`[[host]]`** — one per agent.
//! - `name` — required, `[a-z0-9-]`.
//! - `site` — required; a `[[site]]`'s name.
//! - `address` — required; an IPv4 or IPv6 address, or a DNS name. No two hosts may have the
//!   same address and port.
//! - `port` — the port of the agent's embedded `wanperf serve`, 1–65535 (default 5301).
//! - `key` — the agent's public key line, `wanperf-ed25519 BASE64 [comment]` (optional). A
//!   central that checks keys accepts results only from hosts with a key.
//!
//! **`[[group]]`** — who tests whom.
//! - `name` — required.
//! - `type` — `mesh` (default), `disjoint` or `star`.
//! - `mesh`: `members` = at least two hosts; every ordered pair of different members.
//! - `disjoint`: `a` and `b` = at least one host each, no host in both; every (a, b) and (b, a).
//! - `star`: `center` = a host, `members` = at least one other host; (center, m) and
//!   (m, center) for every member.
//!
//! A list may not name a host twice.
//!
//! **`[[test]]`**
//! - `name` — required.
//! - `type` — required: `latency`, `throughput`, `trace` or `capacity`.
//! - `group` — required; a `[[group]]`'s name. The test runs on every pair of the group, the
//!   pair's first host (the source) running it.
//! - `latency` (continuous UDP probes): `rate` probes/s, 0.1–1000 (default 10); `size` bytes,
//!   40–9000 (default 64); `dscp` 0–63 (optional).
//! - `throughput`: `duration` 1 s – 1 h (default `10s`); `streams` 1–128 (default 1);
//!   `window` a size, 1k–2G (optional); `reverse` true/false (default false: the source
//!   sends); `udp_rate` a rate of at least 1k (optional: a UDP test at this rate instead of TCP).
//! - `trace` (`wanperf trace` from the source to the destination, Paris-style: one flow
//!   identifier, per-hop RTT and loss): `rounds` 1–100 (default 3, one a second); `method`
//!   `udp` (default) or `icmp`; `max_ttl` 1–64 (default 30). A trace whose route differs
//!   from the pair's previous one is a route-change event.
//! - `capacity` (`wanperf capacity` from the source to the destination's agent: the narrow
//!   link's rate, the available bandwidth, the bottleneck's hop): `budget` bytes a run may
//!   send, 100k–100M (default 1 MB, 10^6 bytes); `time` seconds it may take, 1–60 s (default `10s`). A
//!   capacity that moves by a fifth, twice in a row, is an event.
//! - `throughput`, `trace` and `capacity` are scheduled:
//!   - `interval` (required) — how often each pair runs, 10 s – 7 days; for throughput and
//!     capacity at least one run's slot (`duration` or `time` + the guard of 2 s + 10 %).
//!   - `slip` — each run starts at a pseudo-random offset in [0, slip) after its interval's
//!     start, 0 – `interval` (default 0).
//!   - `windows` — UTC times of day `"HH:MM-HH:MM"` when runs may start; the end may be `24:00`
//!     and must be after the start (a window over midnight is two windows). Default: always.
//!
//! A latency test has no schedule keys (it runs continuously).
//!
//! **`[[expect]]`** — fixed thresholds for the status grid.
//! - `group` — applies to every pair the group produces; or
//! - `src` and `dst` — one pair (this wins over group-level expects, field by field).
//! - `throughput_min` — a rate: less is bad.
//! - `loss_max` — a fraction 0–1: more is bad.
//! - `rtt_max` — a duration: a longer RTT is bad.
//!
//! At least one threshold is required, and a group or a pair has at most one `[[expect]]`.

use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use wanperf_proto::auth::{KeyError, PublicKey};
use wanperf_toml::{err, fmt_secs, Lines, Reader, Spanned, Table};

/// The agent's port when the file does not give one (its embedded `wanperf serve`).
pub const DEFAULT_PORT: u16 = 5301;
/// Rounds of a trace test when the file does not give them.
pub const DEFAULT_TRACE_ROUNDS: u32 = 3;
/// The latency summary period when the file does not give one, seconds.
pub const DEFAULT_SUMMARY_S: f64 = 60.0;
/// Result intervals without results before a host is silent, by default.
pub const DEFAULT_SILENT_AFTER: u32 = 2;
/// How often an agent with nothing to send tells central it is alive, by default, seconds.
pub const DEFAULT_HEARTBEAT_S: f64 = 30.0;

fn default_heartbeat() -> f64 {
    DEFAULT_HEARTBEAT_S
}

/// A bad mesh file: the line (1-based; 0 when unknown) and what is wrong (the error of every
/// file wanperf reads).
pub use wanperf_toml::Error as MeshError;

/// A validated mesh.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mesh {
    /// Its name.
    pub name: String,
    /// Latency summary period, seconds.
    pub summary_s: f64,
    /// Result intervals without results before a host is silent.
    pub silent_after: u32,
    /// Agents send an empty batch at least this often, seconds; a host's result interval is
    /// never shorter (nor more than twice it).
    #[serde(default = "default_heartbeat")]
    pub heartbeat_s: f64,
    /// Site names, in file order.
    pub sites: Vec<String>,
    /// Hosts, in file order.
    pub hosts: Vec<Host>,
    /// Groups, in file order.
    pub groups: Vec<Group>,
    /// Tests, in file order.
    pub tests: Vec<Test>,
    /// Thresholds, in file order.
    pub expects: Vec<Expect>,
}

/// A host running an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Host {
    /// Unique name, `[a-z0-9-]+`.
    pub name: String,
    /// Its site.
    pub site: String,
    /// IP address (v4 or v6) or DNS name.
    pub address: String,
    /// The agent's `wanperf serve` port.
    pub port: u16,
    /// The agent's public key line, as written (trimmed); it parses with
    /// [`PublicKey::parse`].
    pub key: Option<String>,
}

/// A named set of host pairs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Group {
    /// Unique name.
    pub name: String,
    /// How its pairs are formed.
    pub kind: GroupKind,
}

/// How a group forms its pairs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupKind {
    /// Every ordered pair of different members.
    Mesh(Vec<String>),
    /// Every (a, b) and (b, a).
    Disjoint(Vec<String>, Vec<String>),
    /// (center, m) and (m, center) for every member.
    Star {
        /// The hub.
        center: String,
        /// The spokes.
        members: Vec<String>,
    },
}

/// A test run on every pair of a group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Test {
    /// Unique name.
    pub name: String,
    /// Its group.
    pub group: String,
    /// What it measures and how.
    pub kind: TestKind,
    /// When it runs: `Some` for throughput and trace tests, `None` for latency (continuous).
    pub schedule: Option<Schedule>,
}

/// What a test measures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TestKind {
    /// Continuous UDP probes.
    Latency {
        /// Probes per second.
        rate: f64,
        /// Probe size, bytes.
        size: u32,
        /// DSCP of the probes.
        dscp: Option<u8>,
        /// Probe with STAMP (RFC 8762) to this UDP port on each destination (its agent
        /// reflects there; a router or perfSONAR node may be a destination too); None:
        /// wanperf's own probes to the agent's port.
        stamp_port: Option<u16>,
    },
    /// A bulk transfer.
    Throughput {
        /// Length of a run, seconds.
        duration_s: f64,
        /// Parallel streams.
        streams: u32,
        /// Socket buffer (window) size, bytes.
        window: Option<u64>,
        /// The destination sends (the source still runs the test).
        reverse: bool,
        /// A UDP test at this rate, bit/s (None: TCP).
        udp_rate: Option<u64>,
    },
    /// A path trace (`wanperf trace`: Paris-style probes, per-hop RTT and loss).
    Trace {
        /// Rounds (each probes every hop once, one a second).
        rounds: u32,
        /// ICMP echo probes instead of UDP.
        icmp: bool,
        /// Highest TTL probed.
        max_ttl: u8,
    },
    /// The path's capacity, available bandwidth and bottleneck hop (`wanperf capacity`).
    Capacity {
        /// Most bytes a run sends.
        budget: u64,
        /// Most seconds a run takes.
        time_s: f64,
    },
}

impl TestKind {
    /// `latency`, `throughput`, `trace` or `capacity`.
    pub fn name(&self) -> &'static str {
        match self {
            TestKind::Latency { .. } => "latency",
            TestKind::Throughput { .. } => "throughput",
            TestKind::Trace { .. } => "trace",
            TestKind::Capacity { .. } => "capacity",
        }
    }
}

/// When a scheduled test runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    /// Each pair runs once per interval, seconds. Intervals are aligned to multiples of it in
    /// Unix time.
    pub interval_s: f64,
    /// A run starts at a pseudo-random offset in [0, slip) after its interval's start, seconds.
    pub slip_s: f64,
    /// UTC times of day when a run may start, seconds of day `[start, end)`, as written.
    /// Empty: always.
    pub windows: Vec<(u32, u32)>,
}

impl Schedule {
    /// The windows that are well formed (start < end), as seconds of day.
    fn valid_windows(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        self.windows.iter().filter(|(a, b)| a < b).map(|&(a, b)| (f64::from(a), f64::from(b)))
    }

    /// Whether a run may start at `t` (Unix seconds): always when there are no windows.
    pub fn in_window(&self, t: f64) -> bool {
        let s = t.rem_euclid(DAY);
        let mut any = false;
        for (a, b) in self.valid_windows() {
            if a <= s && s < b {
                return true;
            }
            any = true;
        }
        !any
    }

    /// The earliest time ≥ `t` at which a run may start: `t` itself when it is in a window,
    /// else the next window's start.
    pub fn next_window_start(&self, t: f64) -> f64 {
        if self.in_window(t) {
            return t;
        }
        let day = (t / DAY).floor() * DAY;
        let s = t - day;
        self.valid_windows().map(|(a, _)| if a > s { day + a } else { day + DAY + a }).fold(f64::INFINITY, f64::min)
    }
}

const DAY: f64 = 86_400.0;

/// Thresholds for a group's pairs or one pair.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Expect {
    /// The group it applies to.
    pub group: Option<String>,
    /// The pair's source (with `dst`).
    pub src: Option<String>,
    /// The pair's destination (with `src`).
    pub dst: Option<String>,
    /// Throughput below this is bad, bit/s.
    pub throughput_min: Option<f64>,
    /// Loss above this fraction is bad.
    pub loss_max: Option<f64>,
    /// RTT above this is bad, ms.
    pub rtt_max_ms: Option<f64>,
}

impl Group {
    /// Its ordered pairs: deduplicated, never (x, x), in a fixed order (members' order;
    /// `disjoint`: (a₁, b₁), (b₁, a₁), (a₁, b₂), …; `star`: (center, m₁), (m₁, center), …).
    pub fn pairs(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut both = |x: &String, y: &String| {
            out.push((x.clone(), y.clone()));
            out.push((y.clone(), x.clone()));
        };
        match &self.kind {
            GroupKind::Mesh(m) => {
                for (i, x) in m.iter().enumerate() {
                    for (j, y) in m.iter().enumerate() {
                        if i != j {
                            out.push((x.clone(), y.clone()));
                        }
                    }
                }
            }
            GroupKind::Disjoint(a, b) => {
                for x in a {
                    for y in b {
                        both(x, y);
                    }
                }
            }
            GroupKind::Star { center, members } => {
                for m in members {
                    both(center, m);
                }
            }
        }
        let mut seen = HashSet::new();
        out.retain(|(x, y)| x != y && seen.insert((x.clone(), y.clone())));
        out
    }

    /// Whether (src, dst) is one of its pairs.
    pub fn contains_pair(&self, src: &str, dst: &str) -> bool {
        let has = |v: &[String], x: &str| v.iter().any(|m| m == x);
        src != dst
            && match &self.kind {
                GroupKind::Mesh(m) => has(m, src) && has(m, dst),
                GroupKind::Disjoint(a, b) => (has(a, src) && has(b, dst)) || (has(b, src) && has(a, dst)),
                GroupKind::Star { center, members } => {
                    (center == src && has(members, dst)) || (center == dst && has(members, src))
                }
            }
    }
}

impl Mesh {
    /// `mesh check`'s lines: the mesh, its digest and size, and each test's schedule and pairs.
    pub fn describe(&self) -> Vec<String> {
        let mut out = vec![format!(
            "mesh {} (digest {}): {} sites, {} hosts",
            self.name,
            self.digest(),
            self.sites.len(),
            self.hosts.len()
        )];
        for t in &self.tests {
            let every = t.schedule.as_ref().map_or_else(String::new, |s| format!(", every {} s", s.interval_s));
            out.push(format!("  test {} ({:?}{every}): {} pairs", t.name, t.kind, self.pairs(t).len()));
        }
        out
    }

    /// The host called `name`.
    pub fn host(&self, name: &str) -> Option<&Host> {
        self.hosts.iter().find(|h| h.name == name)
    }

    /// The group called `name`.
    pub fn group(&self, name: &str) -> Option<&Group> {
        self.groups.iter().find(|g| g.name == name)
    }

    /// The test called `name`.
    pub fn test(&self, name: &str) -> Option<&Test> {
        self.tests.iter().find(|t| t.name == name)
    }

    /// The site of host `host`.
    pub fn site_of(&self, host: &str) -> Option<&str> {
        self.host(host).map(|h| h.site.as_str())
    }

    /// The ordered (source, destination) pairs `test` runs on: its group's
    /// [`pairs`](Group::pairs) (empty if the group does not exist).
    pub fn pairs(&self, test: &Test) -> Vec<(String, String)> {
        self.group(&test.group).map(Group::pairs).unwrap_or_default()
    }

    /// The tests `host` runs as the source, with each destination, in file order of the tests
    /// and pair order within a test.
    pub fn tests_from(&self, host: &str) -> Vec<(&Test, String)> {
        let mut out = Vec::new();
        for t in &self.tests {
            for (s, d) in self.pairs(t) {
                if s == host {
                    out.push((t, d));
                }
            }
        }
        out
    }

    /// Every host that shares a test pair with `host`, in either direction, sorted.
    pub fn peers(&self, host: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .tests
            .iter()
            .flat_map(|t| self.pairs(t))
            .filter_map(|(s, d)| {
                if s == host {
                    Some(d)
                } else if d == host {
                    Some(s)
                } else {
                    None
                }
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The thresholds for (src, dst), merged field by field: the pair's own `[[expect]]` first,
    /// then group-level ones whose group produces this pair, in file order; a field none sets
    /// is `None`. The result has `src` and `dst` set and no `group`.
    pub fn expect_for(&self, src: &str, dst: &str) -> Expect {
        let mut e = Expect { src: Some(src.into()), dst: Some(dst.into()), ..Expect::default() };
        let pair = self.expects.iter().filter(|x| x.src.as_deref() == Some(src) && x.dst.as_deref() == Some(dst));
        let groups = self
            .expects
            .iter()
            .filter(|x| x.group.as_deref().and_then(|g| self.group(g)).is_some_and(|g| g.contains_pair(src, dst)));
        for x in pair.chain(groups) {
            e.throughput_min = e.throughput_min.or(x.throughput_min);
            e.loss_max = e.loss_max.or(x.loss_max);
            e.rtt_max_ms = e.rtt_max_ms.or(x.rtt_max_ms);
        }
        e
    }

    /// A stable hex digest (BLAKE3 of the canonical JSON of the validated mesh): equal for
    /// equal meshes whatever the file's comments and formatting, different when anything that
    /// matters changes. Agents compare it to tell a changed mesh.
    pub fn digest(&self) -> String {
        blake3::hash(&serde_json::to_vec(self).unwrap_or_default()).to_hex().to_string()
    }

    /// How often `host` is expected to deliver results as a source, seconds: the summary period
    /// if it sources a latency test, otherwise the shortest interval of the scheduled tests it
    /// sources; `None` when it sources nothing. A host is silent after
    /// [`silent_after`](Mesh::silent_after) of these without results.
    pub fn report_interval(&self, host: &str) -> Option<f64> {
        self.tests_from(host)
            .iter()
            .map(|(t, _)| t.schedule.as_ref().map_or(self.summary_s, |s| s.interval_s))
            .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.min(x))))
    }
}

/// The slot a throughput run occupies: its duration plus a guard of 2 s + 10 % of it for
/// connection set-up and teardown.
pub fn slot_length(duration_s: f64) -> f64 {
    duration_s + 2.0 + 0.1 * duration_s
}

// ---------------------------------------------------------------------------------------
// Parsing.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    mesh: Option<Spanned<Table>>,
    #[serde(default)]
    site: Vec<Spanned<Table>>,
    #[serde(default)]
    host: Vec<Spanned<Table>>,
    #[serde(default)]
    group: Vec<Spanned<Table>>,
    #[serde(default)]
    test: Vec<Spanned<Table>>,
    #[serde(default)]
    expect: Vec<Spanned<Table>>,
}

/// Names already defined, for duplicates and references.
struct Names {
    what: &'static str,
    lines: HashMap<String, usize>,
}

impl Names {
    fn new(what: &'static str) -> Names {
        Names { what, lines: HashMap::new() }
    }

    fn define(&mut self, name: &str, line: usize, hosts: bool) -> Result<(), MeshError> {
        valid_name(name, hosts).map_err(|m| err(line, format!("{} {m}", self.what)))?;
        if let Some(l) = self.lines.get(name) {
            return Err(err(line, format!("{} `{name}` is already defined on line {l}", self.what)));
        }
        self.lines.insert(name.to_string(), line);
        Ok(())
    }

    fn check(&self, key: &str, name: &str, line: usize) -> Result<(), MeshError> {
        if self.lines.contains_key(name) {
            Ok(())
        } else {
            Err(err(line, format!("`{key}`: no {} is called `{name}`", self.what)))
        }
    }
}

fn valid_name(n: &str, host: bool) -> Result<(), String> {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || (!host && c == '_');
    if n.is_empty() || n.len() > 63 || !n.chars().all(ok) {
        let chars = if host { "a–z, 0–9 and -" } else { "a–z, 0–9, - and _" };
        return Err(format!("name `{n}`: use 1–63 of {chars}"));
    }
    Ok(())
}

fn valid_address(a: &str) -> bool {
    if a.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    let name = a.strip_suffix('.').unwrap_or(a);
    let label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    // A last label of digits only would be a malformed IPv4 address (1.2.3).
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(label)
        && !name.rsplit('.').next().is_some_and(|l| l.bytes().all(|b| b.is_ascii_digit()))
}

fn key_error(e: KeyError) -> String {
    match e {
        KeyError::Format { want, .. } => format!("not a wanperf public key (expected `{want} BASE64 [comment]`)"),
        KeyError::Bytes { why, .. } => why,
        KeyError::Empty => "empty".into(),
    }
}

/// Parses `"HH:MM-HH:MM"` into seconds of day; the end may be 24:00 and must be after the start.
fn parse_window(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("window `{s}`: expected HH:MM-HH:MM (UTC; the end may be 24:00)");
    let hm = |t: &str| -> Option<u32> {
        let (h, m) = t.trim().split_once(':')?;
        let digits = |x: &str| (1..=2).contains(&x.len()) && x.bytes().all(|b| b.is_ascii_digit());
        if !digits(h) || m.len() != 2 || !digits(m) {
            return None;
        }
        let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
        (m < 60 && (h < 24 || (h == 24 && m == 0))).then_some(h * 3600 + m * 60)
    };
    let (a, b) = s.split_once('-').ok_or_else(bad)?;
    let (a, b) = (hm(a).ok_or_else(bad)?, hm(b).ok_or_else(bad)?);
    if a == 86_400 {
        return Err(bad());
    }
    if b <= a {
        return Err(format!("window `{s}`: the end must be after the start (write one over midnight as two)"));
    }
    Ok((a, b))
}

/// Parses and validates a mesh file.
pub fn parse(text: &str) -> Result<Mesh, MeshError> {
    let lines = Lines::new(text);
    let file: File = wanperf_toml::parse(text)?;
    let Some(head) = file.mesh else {
        return Err(err(1, "the file has no [mesh] table (it needs at least `name`)"));
    };
    let mut r = Reader::new(&lines, head, "[mesh] table");
    let (l, name) = r.required("name")?;
    if name.trim().is_empty() || name.chars().count() > 64 || name.chars().any(char::is_control) {
        return Err(err(l, "`name`: use 1–64 printable characters"));
    }
    let summary_s = r.duration("summary", 1.0..=3600.0)?.map_or(DEFAULT_SUMMARY_S, |d| d.1);
    let silent_after = r.uint("silent_after", 1..=1000)?.map_or(DEFAULT_SILENT_AFTER, |v| v as u32);
    let heartbeat_s = r.duration("heartbeat", 5.0..=3600.0)?.map_or(DEFAULT_HEARTBEAT_S, |d| d.1);
    r.finish(&["name", "summary", "silent_after", "heartbeat"])?;

    let mut site_names = Names::new("site");
    let mut sites = Vec::new();
    for t in file.site {
        let mut r = Reader::new(&lines, t, "site");
        let (l, name) = r.required("name")?;
        site_names.define(&name, l, false)?;
        r.finish(&["name"])?;
        sites.push(name);
    }

    let mut host_names = Names::new("host");
    let mut hosts: Vec<Host> = Vec::new();
    let mut endpoints: HashMap<(String, u16), usize> = HashMap::new();
    for t in file.host {
        let mut r = Reader::new(&lines, t, "host");
        let (l, name) = r.required("name")?;
        host_names.define(&name, l, true)?;
        let (l, site) = r.required("site")?;
        site_names.check("site", &site, l)?;
        let (l, address) = r.required("address")?;
        if !valid_address(&address) {
            return Err(err(l, format!("`address`: `{address}` is not an IP address or a DNS name")));
        }
        let port = r.uint("port", 1..=65_535)?.map_or(DEFAULT_PORT, |p| p as u16);
        if let Some(other) = endpoints.insert((address.to_ascii_lowercase(), port), r.line) {
            return Err(err(r.line, format!("{address} port {port} is already the host on line {other}")));
        }
        let key = match r.string("key")? {
            None => None,
            Some((l, k)) => {
                let k = k.trim().to_string();
                if k.contains(['\n', '\r']) {
                    return Err(err(l, "`key`: one line, `wanperf-ed25519 BASE64 [comment]`"));
                }
                PublicKey::parse(&k).map_err(|e| err(l, format!("`key`: {}", key_error(e))))?;
                Some(k)
            }
        };
        r.finish(&["name", "site", "address", "port", "key"])?;
        hosts.push(Host { name, site, address, port, key });
    }

    let mut group_names = Names::new("group");
    let mut groups = Vec::new();
    for t in file.group {
        let mut r = Reader::new(&lines, t, "group");
        let (l, name) = r.required("name")?;
        group_names.define(&name, l, false)?;
        let kind = r.string("type")?.unwrap_or((r.line, "mesh".into()));
        let list = |r: &mut Reader, key: &str, least: usize| -> Result<(usize, Vec<String>), MeshError> {
            let (l, v) = r.strings(key)?.ok_or_else(|| r.missing(key, " (a list of host names)"))?;
            if v.len() < least {
                let n = if least == 1 { "one host" } else { "two hosts" };
                return Err(err(l, format!("`{key}` needs at least {n}")));
            }
            let mut seen = HashSet::new();
            for h in &v {
                host_names.check(key, h, l)?;
                if !seen.insert(h) {
                    return Err(err(l, format!("`{key}` lists `{h}` twice")));
                }
            }
            Ok((l, v))
        };
        let (kind, known): (GroupKind, &[&str]) = match kind.1.as_str() {
            "mesh" => (GroupKind::Mesh(list(&mut r, "members", 2)?.1), &["name", "type", "members"]),
            "disjoint" => {
                let (_, a) = list(&mut r, "a", 1)?;
                let (l, b) = list(&mut r, "b", 1)?;
                if let Some(h) = b.iter().find(|h| a.contains(h)) {
                    return Err(err(l, format!("`{h}` is in both `a` and `b`")));
                }
                (GroupKind::Disjoint(a, b), &["name", "type", "a", "b"])
            }
            "star" => {
                let (lc, center) = r.required("center")?;
                host_names.check("center", &center, lc)?;
                let (l, members) = list(&mut r, "members", 1)?;
                if members.contains(&center) {
                    return Err(err(l, format!("`members` lists the center `{center}`")));
                }
                (GroupKind::Star { center, members }, &["name", "type", "center", "members"])
            }
            other => return Err(err(kind.0, format!("`type` must be mesh, disjoint or star, not `{other}`"))),
        };
        r.set_what(format!("{} group", kind_name(&kind)));
        r.finish(known)?;
        groups.push(Group { name, kind });
    }

    let mut test_names = Names::new("test");
    let mut tests = Vec::new();
    for t in file.test {
        let mut r = Reader::new(&lines, t, "test");
        let (l, name) = r.required("name")?;
        test_names.define(&name, l, false)?;
        let (lt, kind) =
            r.string("type")?.ok_or_else(|| r.missing("type", " (latency, throughput, trace or capacity)"))?;
        let (lg, group) = r.required("group")?;
        group_names.check("group", &group, lg)?;
        r.set_what(format!("{kind} test"));
        const SCHEDULE: [&str; 3] = ["interval", "slip", "windows"];
        let (kind, known): (TestKind, Vec<&str>) = match kind.as_str() {
            "latency" => {
                if let Some((k, l)) = r.keys().find(|e| SCHEDULE.contains(&e.0)) {
                    return Err(err(
                        l,
                        format!("a latency test runs continuously: `{k}` is for scheduled tests (throughput, trace, capacity)"),
                    ));
                }
                let kind = TestKind::Latency {
                    rate: r.float("rate", 0.1..=1000.0)?.unwrap_or(10.0),
                    size: r.size("size", 40..=9000)?.unwrap_or(64) as u32,
                    dscp: r.uint("dscp", 0..=63)?.map(|d| d as u8),
                    stamp_port: r.uint("stamp_port", 1..=65_535)?.map(|p| p as u16),
                };
                (kind, vec!["rate", "size", "dscp", "stamp_port"])
            }
            "throughput" => {
                let kind = TestKind::Throughput {
                    duration_s: r.duration("duration", 1.0..=3600.0)?.map_or(10.0, |d| d.1),
                    streams: r.uint("streams", 1..=128)?.unwrap_or(1) as u32,
                    window: r.size("window", 1024..=2 << 30)?,
                    reverse: r.boolean("reverse")?.unwrap_or(false),
                    udp_rate: r.rate("udp_rate", 1000..=1_000_000_000_000_000)?,
                };
                (kind, vec!["duration", "streams", "window", "reverse", "udp_rate"])
            }
            "trace" => {
                let icmp = match r.string("method")? {
                    None => false,
                    Some((_, m)) if m == "udp" => false,
                    Some((_, m)) if m == "icmp" => true,
                    Some((l, m)) => return Err(err(l, format!("`method` must be udp or icmp, not `{m}`"))),
                };
                let kind = TestKind::Trace {
                    rounds: r.uint("rounds", 1..=100)?.unwrap_or(DEFAULT_TRACE_ROUNDS as u64) as u32,
                    icmp,
                    max_ttl: r.uint("max_ttl", 1..=64)?.unwrap_or(30) as u8,
                };
                (kind, vec!["rounds", "method", "max_ttl"])
            }
            "capacity" => {
                let kind = TestKind::Capacity {
                    budget: r.size("budget", 100 * 1024..=100 << 20)?.unwrap_or(1_000_000),
                    time_s: r.duration("time", 1.0..=60.0)?.map_or(10.0, |d| d.1),
                };
                (kind, vec!["budget", "time"])
            }
            other => {
                return Err(err(lt, format!("`type` must be latency, throughput, trace or capacity, not `{other}`")))
            }
        };
        let schedule = match kind {
            TestKind::Latency { .. } => None,
            _ => Some(schedule(&mut r, &kind)?),
        };
        let mut all = vec!["name", "type", "group"];
        all.extend(known);
        if schedule.is_some() {
            all.extend(SCHEDULE);
        }
        r.finish(&all)?;
        tests.push(Test { name, group, kind, schedule });
    }

    let mut expects: Vec<Expect> = Vec::new();
    // (group, src, dst) → line, for duplicates.
    let mut expect_lines: HashMap<String, usize> = HashMap::new();
    for t in file.expect {
        let mut r = Reader::new(&lines, t, "expect");
        let line = r.line;
        let group = r.string("group")?;
        let src = r.string("src")?;
        let dst = r.string("dst")?;
        match (&group, &src, &dst) {
            (Some((l, g)), None, None) => group_names.check("group", g, *l)?,
            (None, Some((ls, s)), Some((ld, d))) => {
                host_names.check("src", s, *ls)?;
                host_names.check("dst", d, *ld)?;
                if s == d {
                    return Err(err(*ld, "`src` and `dst` are the same host"));
                }
            }
            _ => return Err(err(line, "an expect applies to a `group`, or to one pair: `src` and `dst`")),
        }
        let e = Expect {
            group: group.map(|g| g.1),
            src: src.map(|s| s.1),
            dst: dst.map(|d| d.1),
            throughput_min: r.rate("throughput_min", 1..=1_000_000_000_000_000)?.map(|v| v as f64),
            loss_max: r.float("loss_max", 0.0..=1.0)?,
            rtt_max_ms: r.duration("rtt_max", 0.001..=60.0)?.map(|d| d.1 * 1e3),
        };
        r.finish(&["group", "src", "dst", "throughput_min", "loss_max", "rtt_max"])?;
        if e.throughput_min.is_none() && e.loss_max.is_none() && e.rtt_max_ms.is_none() {
            return Err(err(line, "this expect sets no threshold (throughput_min, loss_max or rtt_max)"));
        }
        let whom = match &e.group {
            Some(g) => format!("group `{g}`"),
            None => format!("{}→{}", e.src.as_deref().unwrap_or(""), e.dst.as_deref().unwrap_or("")),
        };
        if let Some(other) = expect_lines.insert(whom.clone(), line) {
            return Err(err(line, format!("{whom} already has an expect on line {other}")));
        }
        expects.push(e);
    }

    Ok(Mesh { name, summary_s, silent_after, heartbeat_s, sites, hosts, groups, tests, expects })
}

fn kind_name(k: &GroupKind) -> &'static str {
    match k {
        GroupKind::Mesh(_) => "mesh",
        GroupKind::Disjoint(..) => "disjoint",
        GroupKind::Star { .. } => "star",
    }
}

/// The schedule keys of a throughput or trace test.
fn schedule(r: &mut Reader, kind: &TestKind) -> Result<Schedule, MeshError> {
    let hint = " (how often each pair runs, e.g. \"30m\")";
    let (l, interval_s) = r.duration("interval", 10.0..=7.0 * DAY)?.ok_or_else(|| r.missing("interval", hint))?;
    if let TestKind::Throughput { duration_s, .. } | TestKind::Capacity { time_s: duration_s, .. } = kind {
        let slot = slot_length(*duration_s);
        if interval_s < slot {
            return Err(err(
                l,
                format!(
                    "`interval` {} is shorter than one run's slot ({} with the guard)",
                    fmt_secs(interval_s),
                    fmt_secs(slot)
                ),
            ));
        }
    }
    let slip_s = r.duration("slip", 0.0..=interval_s)?.map_or(0.0, |s| s.1);
    let windows = match r.strings("windows")? {
        None => Vec::new(),
        Some((l, w)) => {
            if w.is_empty() {
                return Err(err(l, "`windows` is empty (leave it out to run at any time)"));
            }
            w.iter().map(|s| parse_window(s).map_err(|m| err(l, m))).collect::<Result<_, _>>()?
        }
    };
    Ok(Schedule { interval_s, slip_s, windows })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn key_line(seed: u8, comment: &str) -> String {
        wanperf_proto::auth::PrivateKey::from_seed([seed; 32], comment).public().to_line()
    }

    pub(crate) fn example() -> String {
        format!(
            r#"# An example mesh.
[mesh]
name = "iepm"
summary = "60s"
silent_after = 3
heartbeat = "20s"

[[site]]
name = "slac"
[[site]]
name = "cern"
[[site]]
name = "in2p3"

[[host]]
name = "slac1"
site = "slac"
address = "198.18.1.2"
key = "{}"
[[host]]
name = "cern1"
site = "cern"
address = "2001:db8::1"
port = 6000
[[host]]
name = "cern2"
site = "cern"
address = "perf2.cern.example"
[[host]]
name = "in2p3"
site = "in2p3"
address = "198.18.3.2"

[[group]]
name = "all"
type = "mesh"
members = ["slac1", "cern1", "in2p3"]
[[group]]
name = "transatlantic"
type = "disjoint"
a = ["slac1"]
b = ["cern1", "cern2"]
[[group]]
name = "hub"
type = "star"
center = "cern2"
members = ["in2p3", "slac1"]

[[test]]
name = "rtt"
type = "latency"
group = "all"
rate = 5
size = "128"
dscp = 46

[[test]]
name = "bulk"
type = "throughput"
group = "transatlantic"
duration = "20s"
streams = 4
window = "16M"
interval = "30m"
slip = "5m"
windows = ["00:00-06:00", "20:00-24:00"]

[[test]]
name = "route"
type = "trace"
group = "hub"
interval = "1h"
rounds = 3

[[expect]]
group = "all"
throughput_min = "10M"
loss_max = 0.02
rtt_max = "200ms"

[[expect]]
src = "slac1"
dst = "cern1"
rtt_max = "180ms"
"#,
            key_line(1, "slac1")
        )
    }

    fn p(a: &str, b: &str) -> (String, String) {
        (a.to_string(), b.to_string())
    }

    fn bad(text: &str) -> MeshError {
        parse(text).unwrap_err()
    }

    #[test]
    fn the_example_parses_with_every_key_in_place() {
        let m = parse(&example()).unwrap();
        assert_eq!((m.name.as_str(), m.summary_s, m.silent_after, m.heartbeat_s), ("iepm", 60.0, 3, 20.0));
        assert_eq!(m.sites, ["slac", "cern", "in2p3"]);
        assert_eq!(m.hosts.len(), 4);
        assert_eq!(m.hosts[0].port, DEFAULT_PORT);
        assert_eq!(m.hosts[1].port, 6000);
        assert_eq!(m.hosts[0].key.as_deref(), Some(key_line(1, "slac1").as_str()));
        assert_eq!(m.site_of("cern2"), Some("cern"));
        assert_eq!(m.site_of("nope"), None);
        assert_eq!(m.tests[0].kind, TestKind::Latency { rate: 5.0, size: 128, dscp: Some(46), stamp_port: None });
        assert_eq!(m.tests[0].schedule, None);
        assert_eq!(
            m.tests[1].kind,
            TestKind::Throughput {
                duration_s: 20.0,
                streams: 4,
                window: Some(16 << 20),
                reverse: false,
                udp_rate: None
            }
        );
        assert_eq!(
            m.tests[1].schedule,
            Some(Schedule { interval_s: 1800.0, slip_s: 300.0, windows: vec![(0, 21_600), (72_000, 86_400)] })
        );
        assert_eq!(m.tests[2].kind, TestKind::Trace { rounds: 3, icmp: false, max_ttl: 30 });
        assert_eq!(m.tests[2].schedule.as_ref().unwrap().interval_s, 3600.0);
        assert_eq!(m.expects[0].throughput_min, Some(10e6));
        assert_eq!(m.expects[0].rtt_max_ms, Some(200.0));
    }

    #[test]
    fn a_latency_test_may_probe_with_stamp() {
        let base = "[mesh]\nname = \"x\"\n[[site]]\nname = \"s\"\n[[host]]\nname = \"a\"\nsite = \"s\"\naddress = \"10.0.0.1\"\n\
                    [[host]]\nname = \"b\"\nsite = \"s\"\naddress = \"10.0.0.2\"\n[[group]]\nname = \"g\"\nmembers = [\"a\", \"b\"]\n\
                    [[test]]\nname = \"l\"\ntype = \"latency\"\ngroup = \"g\"\n";
        let m = parse(&format!("{base}stamp_port = 862\n")).unwrap();
        assert_eq!(m.tests[0].kind, TestKind::Latency { rate: 10.0, size: 64, dscp: None, stamp_port: Some(862) });
        let e = parse(&format!("{base}stamp_port = 0\n")).unwrap_err().to_string();
        assert!(e.contains("stamp_port"), "{e}");
    }

    #[test]
    fn defaults_apply() {
        let m = parse("[mesh]\nname = \"x\"\n").unwrap();
        assert_eq!((m.summary_s, m.silent_after, m.heartbeat_s), (60.0, 2, 30.0));
        assert!(m.hosts.is_empty());
        let m = parse(&format!(
            "[mesh]\nname = \"x\"\n[[site]]\nname = \"s\"\n{}{}[[group]]\nname = \"g\"\nmembers = [\"a\", \"b\"]\n[[test]]\nname = \"l\"\ntype = \"latency\"\ngroup = \"g\"\n[[test]]\nname = \"t\"\ntype = \"throughput\"\ngroup = \"g\"\ninterval = \"1h\"\n",
            "[[host]]\nname = \"a\"\nsite = \"s\"\naddress = \"10.0.0.1\"\n",
            "[[host]]\nname = \"b\"\nsite = \"s\"\naddress = \"10.0.0.2\"\n"
        ))
        .unwrap();
        assert!(matches!(m.groups[0].kind, GroupKind::Mesh(_)));
        assert_eq!(m.tests[0].kind, TestKind::Latency { rate: 10.0, size: 64, dscp: None, stamp_port: None });
        assert_eq!(
            m.tests[1].kind,
            TestKind::Throughput { duration_s: 10.0, streams: 1, window: None, reverse: false, udp_rate: None }
        );
        assert_eq!(m.tests[1].schedule, Some(Schedule { interval_s: 3600.0, slip_s: 0.0, windows: vec![] }));
    }

    #[test]
    fn pairs_of_each_group_type() {
        let m = parse(&example()).unwrap();
        let all = m.pairs(&m.tests[0]);
        assert_eq!(
            all,
            [
                p("slac1", "cern1"),
                p("slac1", "in2p3"),
                p("cern1", "slac1"),
                p("cern1", "in2p3"),
                p("in2p3", "slac1"),
                p("in2p3", "cern1")
            ]
        );
        assert_eq!(
            m.pairs(&m.tests[1]),
            [p("slac1", "cern1"), p("cern1", "slac1"), p("slac1", "cern2"), p("cern2", "slac1")]
        );
        assert_eq!(
            m.pairs(&m.tests[2]),
            [p("cern2", "in2p3"), p("in2p3", "cern2"), p("cern2", "slac1"), p("slac1", "cern2")]
        );
        for g in &m.groups {
            for (s, d) in g.pairs() {
                assert!(g.contains_pair(&s, &d));
                assert_ne!(s, d);
            }
        }
        assert!(!m.groups[1].contains_pair("cern1", "cern2"));
        assert!(!m.groups[2].contains_pair("in2p3", "slac1"));
        // A hand-built group with repeats and self pairs still yields each pair once.
        let g = Group {
            name: "x".into(),
            kind: GroupKind::Disjoint(vec!["a".into(), "a".into()], vec!["a".into(), "b".into()]),
        };
        assert_eq!(g.pairs(), [p("a", "b"), p("b", "a")]);
    }

    #[test]
    fn tests_from_peers_and_intervals() {
        let m = parse(&example()).unwrap();
        let tests = m.tests_from("slac1");
        let from: Vec<(&str, &str)> = tests.iter().map(|(t, d)| (t.name.as_str(), d.as_str())).collect();
        assert_eq!(
            from,
            [("rtt", "cern1"), ("rtt", "in2p3"), ("bulk", "cern1"), ("bulk", "cern2"), ("route", "cern2")]
        );
        assert_eq!(m.peers("slac1"), ["cern1", "cern2", "in2p3"]);
        assert_eq!(m.peers("cern2"), ["in2p3", "slac1"]);
        assert!(m.peers("nobody").is_empty());
        assert_eq!(m.report_interval("slac1"), Some(60.0));
        assert_eq!(m.report_interval("cern2"), Some(1800.0));
        assert_eq!(m.report_interval("nobody"), None);
        assert_eq!(m.host("in2p3").unwrap().address, "198.18.3.2");
        assert!(m.test("bulk").is_some() && m.group("hub").is_some() && m.test("x").is_none());
    }

    #[test]
    fn expects_merge_pair_over_group() {
        let m = parse(&example()).unwrap();
        let e = m.expect_for("slac1", "cern1");
        assert_eq!((e.throughput_min, e.loss_max, e.rtt_max_ms), (Some(10e6), Some(0.02), Some(180.0)));
        assert_eq!((e.src.as_deref(), e.dst.as_deref(), e.group), (Some("slac1"), Some("cern1"), None));
        let e = m.expect_for("cern1", "slac1");
        assert_eq!(e.rtt_max_ms, Some(200.0));
        // slac1→cern2 is in no group with an expect.
        let e = m.expect_for("slac1", "cern2");
        assert_eq!((e.throughput_min, e.loss_max, e.rtt_max_ms), (None, None, None));
    }

    #[test]
    fn the_digest_ignores_formatting_and_sees_changes() {
        let a = parse(&example()).unwrap();
        let b = parse(&example().replace("# An example mesh.", "# another comment\n\n")).unwrap();
        assert_eq!(a.digest(), b.digest());
        assert_eq!(a.digest().len(), 64);
        let c = parse(&example().replace("rate = 5", "rate = 6")).unwrap();
        assert_ne!(a.digest(), c.digest());
        // It survives a JSON round trip (the central sends the mesh to agents).
        let back: Mesh = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
        assert_eq!(back, a);
        assert_eq!(back.digest(), a.digest());
    }

    #[test]
    fn errors_name_their_lines() {
        let ex = example();
        // The line of the first occurrence of `needle` (which may span lines).
        let at = |needle: &str| ex[..ex.find(needle).expect(needle)].matches('\n').count() + 1;
        let end = ex.lines().count() + 1;
        let windows = "windows = [\"00:00-06:00\", \"20:00-24:00\"]";
        let all = "members = [\"slac1\", \"cern1\", \"in2p3\"]";
        let hub = "members = [\"in2p3\", \"slac1\"]";
        #[rustfmt::skip]
        let cases: Vec<(String, usize, &str)> = vec![
            (ex.replace("site = \"cern\"\naddress = \"2001", "site = \"cernx\"\naddress = \"2001"), at("site = \"cern\"\naddress = \"2001"), "no site is called `cernx`"),
            (ex.replace(all, "members = [\"slac1\", \"cern9\"]"), at(all), "no host is called `cern9`"),
            (ex.replace("group = \"hub\"", "group = \"hubb\""), at("group = \"hub\""), "no group is called `hubb`"),
            (ex.replace("name = \"cern2\"", "name = \"cern1\""), at("name = \"cern2\""), "host `cern1` is already defined on line"),
            (ex.replace("name = \"route\"", "name = \"rtt\""), at("name = \"route\""), "test `rtt` is already defined"),
            (ex.replace("interval = \"1h\"\n", ""), at("[[test]]\nname = \"route\""), "trace test has no `interval`"),
            (ex.replace("\"20:00-24:00\"", "\"20:00-19:00\""), at(windows), "end must be after the start"),
            (ex.replace("\"20:00-24:00\"", "\"20:00-24:30\""), at(windows), "expected HH:MM-HH:MM"),
            (ex.replace("\"20:00-24:00\"", "\"2000-2400\""), at(windows), "expected HH:MM-HH:MM"),
            (ex.replace("windows = [", "windows = [1, "), at(windows), "a list of strings"),
            (ex.replace("rate = 5", "rate = 5000"), at("rate = 5"), "`rate` must be within 0.1–1000"),
            (ex.replace("size = \"128\"", "size = 20"), at("size = \"128\""), "`size`: 20 is not within 40–9000 bytes"),
            (ex.replace("dscp = 46", "dscp = 64"), at("dscp = 46"), "`dscp` must be an integer in 0–63"),
            (ex.replace("streams = 4", "streams = 0"), at("streams = 4"), "`streams`"),
            (ex.replace("rate = 5", "rate = 5\ninterval = \"1m\""), at("rate = 5") + 1, "runs continuously"),
            (ex.replace("rate = 5", "colour = \"red\""), at("rate = 5"), "unknown key `colour` in a latency test"),
            (ex.replace("streams = 4", "colour = \"red\""), at("streams = 4"), "unknown key `colour` in a throughput test"),
            (ex.replace("type = \"star\"", "type = \"ring\""), at("type = \"star\""), "mesh, disjoint or star"),
            (ex.replace("type = \"trace\"", "type = \"owamp\""), at("type = \"trace\""), "latency, throughput, trace or capacity"),
            (ex.replace("rounds = 3", "rounds = 0"), at("rounds = 3"), "`rounds`"),
            (ex.replace("rounds = 3", "method = \"tcp\""), at("rounds = 3"), "`method` must be udp or icmp, not `tcp`"),
            (ex.replace("rounds = 3", "max_ttl = 65"), at("rounds = 3"), "`max_ttl`"),
            (ex.replace("rounds = 3", "streams = 2"), at("rounds = 3"), "unknown key `streams` in a trace test"),
            (ex.replace("type = \"trace\"\ngroup = \"hub\"\ninterval = \"1h\"\nrounds = 3", "type = \"capacity\"\ngroup = \"hub\"\ninterval = \"1h\"\nbudget = \"10k\""), at("rounds = 3"), "`budget`"),
            (ex.replace("b = [\"cern1\", \"cern2\"]", "b = [\"cern1\", \"slac1\"]"), at("b = [\"cern1\", \"cern2\"]"), "in both `a` and `b`"),
            (ex.replace(hub, "members = [\"in2p3\", \"cern2\"]"), at(hub), "lists the center"),
            (ex.replace(hub, "members = []"), at(hub), "at least one host"),
            (ex.replace(all, "members = [\"slac1\", \"slac1\"]"), at(all), "lists `slac1` twice"),
            (ex.replace("key = \"wanperf", "key = \"ssh-ed25519"), at("key = "), "`key`: not a wanperf public key"),
            (ex.replace("key = \"wanperf-ed25519 ", "key = \"wanperf-ed25519 AAAA"), at("key = "), "`key`: 35 bytes, an Ed25519 key has 32"),
            (ex.replace("address = \"198.18.3.2\"", "address = \"bad host!\""), at("address = \"198.18.3.2\""), "not an IP address"),
            (ex.replace("address = \"198.18.3.2\"", "address = \"198.18.1.2\""), at("[[host]]\nname = \"in2p3\""), "already the host on line"),
            (ex.replace("loss_max = 0.02", "loss_max = 2"), at("loss_max = 0.02"), "`loss_max` must be within 0–1"),
            (ex.replace("throughput_min = \"10M\"", "throughput_min = \"fast\""), at("throughput_min = \"10M\""), "`throughput_min`"),
            (ex.replace("dst = \"cern1\"", "dst = \"slac1\""), at("dst = \"cern1\""), "the same host"),
            (ex.replace("src = \"slac1\"\n", ""), at("[[expect]]\nsrc"), "`src` and `dst`"),
            (format!("{ex}[[expect]]\ngroup = \"all\"\nloss_max = 0.1\n"), end, "group `all` already has an expect on line"),
            (format!("{ex}[[expect]]\ngroup = \"hub\"\n"), end, "sets no threshold"),
            (ex.replace("interval = \"30m\"", "interval = \"15s\""), at("interval = \"30m\""), "shorter than one run's slot"),
            (ex.replace("slip = \"5m\"", "slip = \"2h\""), at("slip = \"5m\""), "`slip`"),
            (ex.replace("name = \"in2p3\"\nsite", "name = \"IN2P3\"\nsite"), at("name = \"in2p3\"\nsite"), "name `IN2P3`"),
            (ex.replace("silent_after = 3", "silent_after = 0"), at("silent_after = 3"), "`silent_after`"),
            (ex.replace("heartbeat = \"20s\"", "heartbeat = \"1s\""), at("heartbeat = \"20s\""), "`heartbeat`"),
            (ex.replace("summary = \"60s\"", "summary = \"1 fortnight\""), at("summary = \"60s\""), "`summary`"),
        ];
        for (text, line, want) in cases {
            let e = bad(&text);
            assert!(e.message.contains(want), "want {want:?}, got {e}");
            assert_eq!(e.line, line, "{e} (wanted line {line})");
            assert!(e.to_string().starts_with(&format!("line {line}: ")), "{e}");
        }
    }

    #[test]
    fn file_level_errors() {
        let e = bad("[mesh]\nname = \"x\"\n[[hosts]]\nname = \"a\"\n");
        assert_eq!(e.line, 3, "{e}");
        let e = bad("[[site]]\nname = \"s\"\n");
        assert!(e.message.contains("no [mesh]"), "{e}");
        let e = bad("[mesh]\nname = \"x\"\nname = \"y\"\n");
        assert_eq!(e.line, 3, "{e}");
        let e = bad("[mesh]\nnom = \"x\"\n");
        assert_eq!((e.line, e.message.as_str()), (1, "this [mesh] table has no `name`"));
        let e = bad("[mesh]\nname = \"x\"\nperiod = 5\n");
        assert_eq!(
            e.to_string(),
            "line 3: unknown key `period` in a [mesh] table (known: name, summary, silent_after, heartbeat)"
        );
        let e = bad("[mesh]\nname = 5\n");
        assert_eq!(e.to_string(), "line 2: `name` must be a string");
        let e = bad("[mesh]\nname = \"x\"\n[[group]]\nname = \"g\"\nmembers = [\"a\"]\n");
        assert_eq!(e.line, 5);
    }

    #[test]
    fn windows_and_addresses() {
        assert_eq!(parse_window("00:00-24:00"), Ok((0, 86_400)));
        assert_eq!(parse_window("9:30-10:05"), Ok((34_200, 36_300)));
        for w in ["24:00-24:00", "10:00-10:00", "10:60-11:00", "1000-1100", "10:00", "a:00-b:00", "10:0-11:00"] {
            assert!(parse_window(w).is_err(), "{w}");
        }
        for a in ["198.18.1.2", "::1", "2001:db8::1", "perf.example.org", "perf.example.org.", "host-1"] {
            assert!(valid_address(a), "{a}");
        }
        for a in ["", "1.2.3", "999.1.1.1", "-a.example", "a..b", "a b", "[::1]", "x:80"] {
            assert!(!valid_address(a), "{a}");
        }
    }

    #[test]
    fn schedules_know_their_windows() {
        let s = Schedule { interval_s: 1800.0, slip_s: 0.0, windows: vec![(0, 21_600), (72_000, 86_400)] };
        let day = 20_000.0 * DAY;
        assert!(s.in_window(day + 100.0));
        assert!(!s.in_window(day + 21_600.0));
        assert_eq!(s.next_window_start(day + 30_000.0), day + 72_000.0);
        assert_eq!(s.next_window_start(day + 80_000.0), day + 80_000.0);
        let s = Schedule { windows: vec![(3600, 7200)], ..s };
        assert_eq!(s.next_window_start(day + 8000.0), day + DAY + 3600.0);
        assert_eq!(s.next_window_start(day + 100.0), day + 3600.0);
        let always = Schedule { windows: vec![], ..s };
        assert_eq!(always.next_window_start(day + 8000.0), day + 8000.0);
    }
}
