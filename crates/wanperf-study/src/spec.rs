//! Study files: parsing, validation and the plan of cells. Pure: no I/O, no clock.
//!
//! A study names a path (an emulator preset and link options, or a real host running
//! `wanperf serve`), a measurement (`tput`, `ping` or `load`) with its options, sweep axes,
//! and how to run the cells (repeats, order, pauses). Every option is checked by the same
//! parser the command line uses, and an error points at the line of the file that caused it.

use rand::{seq::SliceRandom, SeedableRng};
use serde::Serialize;
use std::collections::BTreeMap;
use wanperf_toml::{err, scalar, Lines, Spanned, Table, Value};
use wanperf_units as units;

pub use crate::axis::{normalize, param_key, Axis, Kind};

/// A study-file error with the line (1-based) it points to (the error of every file wanperf
/// reads).
pub use wanperf_toml::Error as StudyError;

/// Where the measurement runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    /// An emulated path: `wanperf serve` on its right host, the measurement on its left.
    Path {
        /// Link options as `path run` flags (a preset first, if any).
        link: Vec<(String, String)>,
    },
    /// An emulated network (`[net]`): `wanperf serve` on each cell's destination host, the
    /// measurement on its source, the topology's and the study's cross traffic running.
    Net(crate::net::NetTarget),
    /// A real host running `wanperf serve`.
    Host {
        /// Name or address.
        host: String,
        /// Its port.
        port: u16,
    },
}

/// Order of the cells.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "lowercase", tag = "order")]
pub enum Order {
    /// As the sweep lists them, repeats last.
    Sequential,
    /// Shuffled with a seed (so a resumed run keeps the same order).
    Random {
        /// Shuffle seed.
        seed: u64,
    },
}

/// A parsed, validated study.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Study {
    /// Name.
    pub name: String,
    /// What it is for.
    pub description: String,
    /// Where it runs.
    pub target: Target,
    /// What it measures.
    pub kind: Kind,
    /// Fixed measurement options, as (flag, value) pairs.
    pub measure: Vec<(String, String)>,
    /// Sweep axes, in file order.
    pub axes: Vec<Axis>,
    /// Repeats of every cell.
    pub repeats: u32,
    /// Cell order.
    pub order: Order,
    /// Pause between cells, seconds.
    pub pause_s: f64,
    /// What must hold (`[[expect]]`), checked after every run.
    pub expects: Vec<crate::expect::Expect>,
}

/// One planned cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellPlan {
    /// Position in the sweep's product (stable whatever the order).
    pub index: u32,
    /// Repeat number, 0-based.
    pub repeat: u32,
    /// Axis name → value.
    pub values: Vec<(String, String)>,
}

/// Options of `path run` a study may set or sweep (TOML key = flag without `--`, `_` for `-`).
const LINK_KEYS: &[&str] = &[
    "preset",
    "rtt",
    "delay_up",
    "delay_down",
    "jitter",
    "reorder",
    "rate",
    "rate_up",
    "rate_down",
    "trace_up",
    "trace_down",
    "queue",
    "queue_up",
    "queue_down",
    "aqm",
    "loss",
    "loss_up",
    "loss_down",
    "loss_model",
    "policer",
    "priority",
    "txqueuelen",
    "mtu",
    "seed",
    "host_nice",
    "host_left",
    "host_right",
];

/// Study-wide names whose flag differs per measurement.
fn alias(kind: Kind, key: &str) -> Option<&'static str> {
    Some(match (kind, key) {
        (Kind::Tput, "duration") => "time",
        (Kind::Load, "duration") => "load-time",
        (Kind::Load, "idle") => "idle-time",
        (Kind::Copy, "streams") => "parallel",
        _ => return None,
    })
}

/// Most cells (the product of the axes, times the repeats) a study may plan: far more than
/// any study can run (a day of one-second cells), few enough to list.
pub const MAX_CELLS: u64 = 100_000;

/// Measurement options a study may not set: wanperf sets them itself.
const RESERVED: &[&str] = &["json", "host", "port", "help", "save", "db", "server"];

/// Keys of a copy study that describe the data the runner makes for each cell, not options of
/// `wanperf copy`: `size` (in all), `files` (how many, of equal size) and `content`.
pub const DATA_KEYS: &[&str] = &["size", "files", "content"];

/// What a copy cell copies: `files` files of `size / files` bytes each, made by the runner.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DataSpec {
    /// Bytes in all.
    pub size: u64,
    /// Files.
    pub files: u32,
    /// What is in them.
    pub content: Content,
}

/// The content of a copy study's files (it decides what compression can do).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Content {
    /// Incompressible bytes.
    Random,
    /// Words: zstd shrinks them about 3–4×.
    Text,
    /// All zero bytes.
    Zeros,
}

/// Most files a copy cell may make (each is a file on the local disk).
pub const MAX_FILES: u32 = 1_000_000;

/// Checks one data key of a copy study.
fn check_data(key: &str, val: &str) -> Result<(), String> {
    match key {
        "size" => units::parse_size(val).map_err(|e| format!("`size`: {e}")).and_then(|b| {
            if b == 0 {
                Err("`size` must be above 0".into())
            } else {
                Ok(())
            }
        }),
        "files" => val
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=MAX_FILES).contains(n))
            .map(|_| ())
            .ok_or_else(|| format!("`files` must be 1–{MAX_FILES}, not `{val}`")),
        "content" => Content::parse(val).map(|_| ()),
        _ => Err(format!("`{key}` is not a data key")),
    }
}

impl Content {
    fn parse(v: &str) -> Result<Content, String> {
        match v {
            "random" => Ok(Content::Random),
            "text" => Ok(Content::Text),
            "zeros" => Ok(Content::Zeros),
            _ => Err(format!("`content` must be random, text or zeros, not `{v}`")),
        }
    }
}

/// How the command line checks a study's options: with the very parsers of its flags, so that
/// a study file accepts exactly what the commands do.
pub trait Flags {
    /// Checks a command line, `argv` as `wanperf ARGV…` takes it (the command first). The
    /// error is one line.
    fn check_command(&self, argv: &[String]) -> Result<(), String>;
    /// Checks link flags as `wanperf path run FLAGS…` takes them (a preset first, if any). The
    /// error is one line.
    fn check_link(&self, flags: &[String]) -> Result<(), String>;
    /// The bottleneck rate of the path these link flags make, bit/s, if it has a constant one
    /// (for time estimates).
    fn bottleneck_bps(&self, flags: &[String]) -> Option<f64>;
    /// The path these link flags make, as the values an expectation's bound may use
    /// ([`crate::expect::VARIABLES`]: `rtt`, `rate`, `queue`, `loss`, `policer_rate`, `burst`,
    /// `mtu`, …) in bits, bit/s and seconds; a value the path does not have (an unlimited
    /// rate, no policer) is left out.
    fn link_values(&self, flags: &[String]) -> BTreeMap<String, f64>;
    /// Checks a cell's network (the topology, its traffic and settings, the pair) and returns
    /// the values of the pair's route as [`Flags::link_values`] names them. The error is one
    /// line.
    fn net_values(&self, _net: &crate::net::NetCell) -> Result<BTreeMap<String, f64>, String> {
        Err("this checker knows no networks".into())
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    name: Spanned<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    path: Option<Table>,
    #[serde(default)]
    net: Option<Table>,
    measure: Table,
    #[serde(default)]
    sweep: Option<Table>,
    #[serde(default)]
    run: Option<RunSection>,
    #[serde(default)]
    expect: Vec<Spanned<crate::expect::ExpectSection>>,
    /// The reduced grid (`--quick`), merged by [`crate::quick::apply`] before parsing.
    #[serde(default)]
    #[allow(dead_code)]
    quick: Option<serde::de::IgnoredAny>,
}

#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RunSection {
    repeats: Option<Spanned<i64>>,
    order: Option<Spanned<String>>,
    seed: Option<u64>,
    pause: Option<Spanned<String>>,
}

impl Study {
    /// Parses and validates a study file, its options checked by `flags`.
    pub fn parse(text: &str, flags: &dyn Flags) -> Result<Study, StudyError> {
        let lines = Lines::new(text);
        let file: File = wanperf_toml::parse(text)?;
        let name = file.name.get_ref().trim().to_string();
        if name.is_empty() {
            return Err(err(lines.of(file.name.span().start), "`name` must not be empty"));
        }
        // Measurement.
        let mut measure_tbl = file.measure;
        let kind_key = measure_tbl.keys().find(|k| k.get_ref() == "kind").cloned();
        let kind = match kind_key.and_then(|k| measure_tbl.remove(&k)) {
            None => return Err(err(0, "[measure] needs `kind` (tput, ping, load, copy, capacity or trace)")),
            Some(v) => match v.get_ref().as_str() {
                Some("tput") => Kind::Tput,
                Some("ping") => Kind::Ping,
                Some("load") => Kind::Load,
                Some("copy") => Kind::Copy,
                Some("capacity") => Kind::Capacity,
                Some("trace") => Kind::Trace,
                _ => {
                    return Err(err(
                        lines.of(v.span().start),
                        "`kind` must be tput, ping, load, copy, capacity or trace",
                    ))
                }
            },
        };
        let mut study = Study {
            name,
            description: file.description,
            target: Target::Path { link: Vec::new() },
            kind,
            measure: Vec::new(),
            axes: Vec::new(),
            repeats: 1,
            order: Order::Sequential,
            pause_s: 0.0,
            expects: Vec::new(),
        };
        // Where: a host, or a path (the default: an ideal emulated path).
        let mut link = Vec::new();
        let mut host: Option<(String, u16)> = None;
        let mut host_port = 5301u16;
        let file_has_path = file.path.is_some();
        for (k, v) in file.path.unwrap_or_default() {
            let line = lines.of(k.span().start);
            let key = k.get_ref().as_str();
            match key {
                "host" => host = Some((scalar(v.get_ref()).unwrap_or_default(), 0)),
                "port" => {
                    host_port = v
                        .get_ref()
                        .as_integer()
                        .and_then(|p| u16::try_from(p).ok())
                        .filter(|p| *p > 0)
                        .ok_or_else(|| err(line, "`port` must be 1–65535"))?
                }
                _ if LINK_KEYS.contains(&key) => {
                    let val =
                        scalar(v.get_ref()).ok_or_else(|| err(line, format!("`{key}` must be a single value")))?;
                    check_link(flags, &[(key.to_string(), val.clone())])
                        .map_err(|m| err(lines.of(v.span().start), m))?;
                    link.push((key.to_string(), val));
                }
                _ => {
                    return Err(err(
                        line,
                        format!(
                            "unknown path option `{key}` (use host/port, or link options: {})",
                            LINK_KEYS.join(", ")
                        ),
                    ))
                }
            }
        }
        if let Some(net) = file.net {
            if file_has_path {
                return Err(err(0, "a study has [path] or [net], not both"));
            }
            let check = |c: &crate::net::NetCell| flags.net_values(c).map(drop);
            let t = crate::net::parse(net, &lines, &check)?;
            if t.pairs.len() > 1 {
                let values = t.pairs.iter().map(|(a, b)| crate::net::pair_value(a, b)).collect();
                study.axes.push(Axis { name: "pair".into(), values, link: true });
            }
            study.target = Target::Net(t);
        } else if let Some((h, _)) = host {
            if !link.is_empty() {
                return Err(err(0, "[path] sets both `host` and link options: a real host has no emulated link"));
            }
            study.target = Target::Host { host: h, port: host_port };
        } else {
            // The preset first, so explicit options override it.
            link.sort_by_key(|(k, _)| k != "preset");
            study.target = Target::Path { link };
        }
        for (k, v) in measure_tbl {
            let key = k.get_ref().as_str();
            let line = lines.of(k.span().start);
            if RESERVED.contains(&key) {
                return Err(err(line, format!("`{key}` is set by the study runner")));
            }
            if LINK_KEYS.contains(&key) {
                return Err(err(line, format!("`{key}` is a link option: put it under [path] or [sweep]")));
            }
            let val = scalar(v.get_ref()).ok_or_else(|| err(line, format!("`{key}` must be a single value")))?;
            let flag = study.flag(key);
            study.check_measure(flags, &[(flag.clone(), val.clone())]).map_err(|m| err(lines.of(v.span().start), m))?;
            study.measure.push((flag, val));
        }
        // Sweep axes, in file order: the first axis changes slowest. Dotted keys
        // (`link.slac-esnet.rate`) name a network's settings.
        for (key, line, v) in crate::net::flatten(file.sweep.unwrap_or_default(), &lines) {
            let values: Vec<String> = match &v {
                Value::Array(a) => a
                    .iter()
                    .map(|x| scalar(x).ok_or_else(|| err(line, format!("`{key}` values must be scalars"))))
                    .collect::<Result<_, _>>()?,
                x => vec![scalar(x).ok_or_else(|| err(line, format!("`{key}` must be a list of values")))?],
            };
            if values.is_empty() {
                return Err(err(line, format!("sweep axis `{key}` has no values")));
            }
            let is_link = match &study.target {
                Target::Net(_) if crate::net::is_setting(&key) => true,
                Target::Net(_) if key == "pair" => {
                    return Err(err(line, "the pairs of a [net] study are [net] `pairs`, not a sweep axis"))
                }
                Target::Net(_) if LINK_KEYS.contains(&key.as_str()) => {
                    return Err(err(
                        line,
                        format!("`{key}` is a path option; on a network sweep a link's: link.NAME.{key}"),
                    ))
                }
                _ if crate::net::is_setting(&key) => {
                    return Err(err(line, format!("`{key}` is a network setting: the study needs [net]")))
                }
                Target::Path { .. } => LINK_KEYS.contains(&key.as_str()),
                Target::Net(_) => false,
                Target::Host { .. } => {
                    if LINK_KEYS.contains(&key.as_str()) {
                        let what = if key == "preset" {
                            "a preset sweep needs an emulated path, not [path] host".to_string()
                        } else {
                            format!("`{key}` is a link option; a real host has no emulated link")
                        };
                        return Err(err(line, what));
                    }
                    false
                }
            };
            let name = if is_link { key.clone() } else { study.flag(&key) };
            if !is_link && RESERVED.contains(&key.as_str()) {
                return Err(err(line, format!("`{key}` is set by the study runner")));
            }
            for val in &values {
                let r = match &study.target {
                    Target::Net(t) => {
                        let mut c = study.net_cell_of(t, &[]);
                        c.settings.push((key.clone(), val.clone()));
                        flags.net_values(&c).map(drop)
                    }
                    _ if is_link => check_link(flags, &[(key.clone(), val.clone())]),
                    _ => study.check_measure(flags, &[(name.clone(), val.clone())]),
                };
                r.map_err(|m| {
                    let m = if m.contains("unexpected argument") {
                        format!("unknown sweep axis `{key}` for a {} study", study.kind.command())
                    } else {
                        m
                    };
                    err(line, m)
                })?;
            }
            study.axes.push(Axis { name, values, link: is_link });
        }
        // How to run.
        let run = file.run.unwrap_or_default();
        if let Some(r) = run.repeats {
            study.repeats = u32::try_from(*r.get_ref())
                .ok()
                .filter(|n| (1..=1000).contains(n))
                .ok_or_else(|| err(lines.of(r.span().start), "`repeats` must be 1–1000"))?;
        }
        if let Some(o) = run.order {
            study.order = match o.get_ref().as_str() {
                "sequential" => Order::Sequential,
                "random" => Order::Random { seed: run.seed.unwrap_or(1) },
                _ => return Err(err(lines.of(o.span().start), "`order` must be sequential or random")),
            };
        }
        if let Some(p) = run.pause {
            study.pause_s = units::parse_duration(p.get_ref())
                .map_err(|e| err(lines.of(p.span().start), format!("`pause`: {e}")))?;
        }
        // The plan must stay small enough to list: a few lines of sweep could otherwise ask
        // for billions of cells (found by fuzzing: `cells()` ran out of memory).
        let planned = study
            .axes
            .iter()
            .try_fold(u64::from(study.repeats), |n, a| n.checked_mul(a.values.len() as u64))
            .filter(|n| *n <= MAX_CELLS);
        if planned.is_none() {
            let sizes: Vec<String> = study.axes.iter().map(|a| a.values.len().to_string()).collect();
            return Err(err(
                0,
                format!(
                    "the sweep plans {} cells × {} repeats: more than the {MAX_CELLS} a study may have",
                    if sizes.is_empty() { "1".to_string() } else { sizes.join(" × ") },
                    study.repeats
                ),
            ));
        }
        // The whole first cell, so options that conflict with each other are caught now.
        if let Some(first) = study.cells().first() {
            study.check_measure(flags, &study.measure_args(first)).map_err(|m| err(0, format!("[measure]: {m}")))?;
            match &study.target {
                Target::Net(_) => {
                    let c = study.net_cell(first).expect("a [net] study's cell has a network");
                    flags.net_values(&c).map_err(|m| err(0, format!("[net]: {m}")))?;
                }
                _ => check_link(flags, &study.link_args(first)).map_err(|m| err(0, format!("[path]: {m}")))?,
            }
        }
        if !file.expect.is_empty() {
            let configs = study.configs(flags);
            let cells = study.planned();
            study.expects = crate::expect::parse_all(file.expect, &lines, study.kind, &study.axes, &cells, &configs)?;
        }
        Ok(study)
    }

    /// Every cell's configuration (by index), the values its expectations' bounds use.
    pub fn configs(&self, flags: &dyn Flags) -> crate::expect::Configs {
        self.cells().iter().filter(|c| c.repeat == 0).map(|c| (c.index, self.config(c, flags))).collect()
    }

    /// A cell's configuration: its path's values (an emulated path's, as its options and preset
    /// make it) and its measurement's (`window`, `streams`, `duration`, `bitrate`), in bits,
    /// bit/s and seconds.
    pub fn config(&self, cell: &CellPlan, flags: &dyn Flags) -> BTreeMap<String, f64> {
        let path = match &self.target {
            Target::Path { .. } => flags.link_values(&self.link_argv(cell)),
            Target::Net(_) => self.net_cell(cell).and_then(|c| flags.net_values(&c).ok()).unwrap_or_default(),
            Target::Host { .. } => BTreeMap::new(),
        };
        self.config_with(cell, path)
    }

    /// A cell's configuration from its path's values as given (`path`: e.g. those stored with
    /// a run, which today's presets may no longer give) and its measurement's.
    pub fn config_with(&self, cell: &CellPlan, path: BTreeMap<String, f64>) -> BTreeMap<String, f64> {
        let mut v = path;
        for (k, val) in self.measure_args(cell) {
            let x = match param_key(&k).as_str() {
                "window" => units::parse_size(&val).ok().map(|b| ("window", b as f64 * 8.0)),
                "streams" => val.parse::<f64>().ok().map(|n| ("streams", n)),
                "duration" => units::parse_duration(&val).ok().map(|d| ("duration", d)),
                // A tput's --omit runs before its measured duration (the link carries both).
                "omit" => units::parse_duration(&val).ok().map(|d| ("omit", d)),
                "bitrate" => units::parse_rate(&val).ok().map(|r| ("bitrate", r as f64)),
                _ => None,
            };
            if let Some((k, x)) = x {
                v.insert(k.to_string(), x);
            }
        }
        v.entry("streams".to_string()).or_insert(1.0);
        // A cell measured right → left (`direction = "down"`, `reverse`) is bounded by that
        // direction's path: its rate, queue and loss; the policer values describe left → right.
        let args = self.measure_args(cell);
        if args.iter().any(|(k, x)| (k == "direction" && x == "down") || (k == "reverse" && x == "true")) {
            for (k, from) in [("rate", "rate_down"), ("queue", "queue_down"), ("loss", "loss_down")] {
                match v.get(from).copied() {
                    Some(x) => v.insert(k.to_string(), x),
                    None => v.remove(k),
                };
            }
            v.remove("policer_rate");
            v.remove("burst");
        }
        v
    }

    /// The measurement flag for a study key.
    fn flag(&self, key: &str) -> String {
        alias(self.kind, key).map_or_else(|| key.replace('_', "-"), str::to_string)
    }

    fn check_measure(&self, f: &dyn Flags, opts: &[(String, String)]) -> Result<(), String> {
        for (k, val) in opts {
            if k == "direction" && !DIRECTIONS.iter().any(|(d, _)| d == val) {
                return Err(format!("`direction` must be up, down or bidir, not `{val}`"));
            }
            if k == "transport" && (self.kind != Kind::Tput || !TRANSPORTS.iter().any(|(t, _)| t == val)) {
                return Err(format!("`transport` is a tput study's: tcp, udp or quic, not `{val}`"));
            }
            if self.kind == Kind::Copy && DATA_KEYS.contains(&k.as_str()) {
                check_data(k, val)?;
            }
            if self.kind == Kind::Trace && ["icmp", "tcp", "multipath"].contains(&k.as_str()) {
                return Err(format!(
                    "a trace study sends UDP probes to the study's `wanperf serve` (it counts them): \
                     `{k}` is for `wanperf trace` alone"
                ));
            }
        }
        let mut argv = vec![self.kind.command().to_string(), "host.invalid".to_string()];
        if self.kind == Kind::Copy {
            argv = vec!["copy".into(), "data".into(), "host.invalid:".into()];
        }
        let opts: Vec<(String, String)> = opts.iter().filter(|(k, _)| !self.is_data(k)).cloned().collect();
        argv.extend(flags(&opts));
        f.check_command(&argv)
    }

    /// Every cell: the product of the axes (first axis slowest), times the repeats, in the
    /// study's order.
    pub fn cells(&self) -> Vec<CellPlan> {
        let mut combos: Vec<Vec<(String, String)>> = vec![Vec::new()];
        for a in &self.axes {
            combos = combos
                .into_iter()
                .flat_map(|c| {
                    a.values.iter().map(move |v| {
                        let mut c = c.clone();
                        c.push((a.name.clone(), v.clone()));
                        c
                    })
                })
                .collect();
        }
        let mut cells: Vec<CellPlan> = (0..self.repeats)
            .flat_map(|r| {
                combos.iter().enumerate().map(move |(i, v)| CellPlan { index: i as u32, repeat: r, values: v.clone() })
            })
            .collect();
        if let Order::Random { seed } = self.order {
            cells.shuffle(&mut rand::rngs::SmallRng::seed_from_u64(seed));
        }
        cells
    }

    /// Whether a cell value of axis `name` configures the path or network (not the measurement).
    fn is_link_axis(&self, name: &str) -> bool {
        self.axes.iter().any(|a| a.name == name && a.link)
    }

    /// A [net] study's cell's network: the study's traffic and settings, then the cell's axis
    /// values; its pair (the `pair` axis's, or the only one). None on a path or host.
    pub fn net_cell(&self, cell: &CellPlan) -> Option<crate::net::NetCell> {
        let Target::Net(t) = &self.target else { return None };
        Some(self.net_cell_of(t, &cell.values))
    }

    fn net_cell_of(&self, t: &crate::net::NetTarget, values: &[(String, String)]) -> crate::net::NetCell {
        let mut settings = t.settings.clone();
        let mut pair = t.pairs.first().cloned().unwrap_or_default();
        for (k, v) in values {
            if k == "pair" {
                if let Some((a, b)) = crate::net::split_pair(v) {
                    pair = (a.to_string(), b.to_string());
                }
            } else if crate::net::is_setting(k) {
                settings.push((k.clone(), v.clone()));
            }
        }
        crate::net::NetCell {
            topology: t.topology.clone(),
            traffic: t.traffic.clone(),
            settings,
            from: pair.0,
            to: pair.1,
        }
    }

    /// `path run` link flags for a cell (none for a real host or a network).
    pub fn link_args(&self, cell: &CellPlan) -> Vec<(String, String)> {
        let Target::Path { link } = &self.target else { return Vec::new() };
        let mut v = link.clone();
        for (k, val) in cell.values.iter().filter(|(k, _)| self.is_link_axis(k)) {
            v.retain(|(x, _)| x != k);
            v.push((k.clone(), val.clone()));
        }
        v.sort_by_key(|(k, _)| k != "preset");
        v
    }

    /// Measurement flags for a cell (fixed options, then the cell's axis values).
    pub fn measure_args(&self, cell: &CellPlan) -> Vec<(String, String)> {
        let mut v = self.measure.clone();
        for (k, val) in cell.values.iter().filter(|(k, _)| !self.is_link_axis(k)) {
            v.retain(|(x, _)| x != k);
            v.push((k.clone(), val.clone()));
        }
        v
    }

    /// The full measurement command line (after `wanperf`) against `host`; a copy's data
    /// directory is shown as `DATA`.
    pub fn measure_argv(&self, cell: &CellPlan, host: &str, port: Option<u16>) -> Vec<String> {
        self.argv_with_data(cell, host, port, "DATA")
    }

    /// The measurement command line with a copy's source `data` (a directory the runner made).
    pub fn argv_with_data(&self, cell: &CellPlan, host: &str, port: Option<u16>, data: &str) -> Vec<String> {
        let mut argv = vec![self.kind.command().to_string()];
        if self.kind == Kind::Copy {
            let dest = if host.contains(':') { format!("[{host}]:") } else { format!("{host}:") };
            argv.extend([data.to_string(), dest]);
        } else {
            argv.push(host.to_string());
        }
        // A study's trace goes to the `wanperf serve` every study has at the far end: it
        // answers every probe (no ICMP rate limit) and splits the loss by direction.
        if self.kind == Kind::Trace {
            argv.push("--server".to_string());
        }
        if let Some(p) = port {
            argv.extend(["--port".to_string(), p.to_string()]);
        }
        let opts: Vec<(String, String)> =
            self.measure_args(cell).into_iter().filter(|(k, _)| !self.is_data(k)).collect();
        argv.extend(flags(&opts));
        // Emulated hosts share this machine's clock: one-way delays need no offset estimate
        // (which would split a loaded direction's rise over both).
        if matches!(self.kind, Kind::Ping | Kind::Load)
            && !matches!(self.target, Target::Host { .. })
            && !opts.iter().any(|(k, _)| k == "clock-offset")
        {
            argv.extend(["--clock-offset".to_string(), "0".to_string()]);
        }
        argv.push("--json".into());
        argv
    }

    /// Whether `key` describes a copy's data rather than an option of the command.
    fn is_data(&self, key: &str) -> bool {
        self.kind == Kind::Copy && DATA_KEYS.contains(&key)
    }

    /// What a copy cell copies (`None` for other kinds): 64 MB of random bytes in one file
    /// unless the study says otherwise.
    pub fn data(&self, cell: &CellPlan) -> Option<DataSpec> {
        if self.kind != Kind::Copy {
            return None;
        }
        let args = self.measure_args(cell);
        let get = |k: &str| args.iter().rev().find(|(f, _)| f == k).map(|(_, v)| v.as_str());
        Some(DataSpec {
            size: get("size").and_then(|v| units::parse_size(v).ok()).unwrap_or(64_000_000),
            files: get("files").and_then(|v| v.parse().ok()).unwrap_or(1),
            content: get("content").and_then(|v| Content::parse(v).ok()).unwrap_or(Content::Random),
        })
    }

    /// The link flags as `path run` arguments.
    pub fn link_argv(&self, cell: &CellPlan) -> Vec<String> {
        flags(&self.link_args(cell))
    }

    /// Expected wall time of `cells` run one after another, seconds: each cell's estimate and
    /// the pause after it.
    pub fn time_s<'a>(&self, cells: impl IntoIterator<Item = &'a CellPlan>, f: &dyn Flags) -> f64 {
        cells.into_iter().map(|c| self.estimate_s(c, f) + self.pause_s).sum()
    }

    /// Expected wall time of a cell, seconds (measurement only; path setup is quick); `f`
    /// knows the path's bottleneck.
    pub fn estimate_s(&self, cell: &CellPlan, f: &dyn Flags) -> f64 {
        let args = self.measure_args(cell);
        let get = |k: &str| args.iter().rev().find(|(f, _)| f == k).map(|(_, v)| v.as_str());
        let dur = |k: &str, d: f64| get(k).and_then(|v| units::parse_duration(v).ok()).unwrap_or(d);
        let list = |k: &str| get(k).map_or(1, |v| v.split(',').count()) as f64;
        match self.kind {
            // --omit runs before the measured time, as iperf3's -O.
            Kind::Tput => dur("time", 10.0) + dur("omit", 0.0) + 1.0,
            Kind::Capacity => dur("time", 10.0) + 2.0,
            Kind::Trace => {
                let rounds = get("count").and_then(|c| c.parse::<f64>().ok()).unwrap_or(10.0);
                rounds * dur("interval", 1.0) + dur("wait", 2.0)
            }
            Kind::Ping => {
                let n = get("count").and_then(|c| c.parse::<f64>().ok()).unwrap_or(10.0);
                n * dur("interval", 1.0) + dur("timeout", 2.0)
            }
            Kind::Copy => {
                let d = self.data(cell).unwrap_or(DataSpec { size: 0, files: 1, content: Content::Random });
                // The path's bottleneck where it is emulated, else a conservative 100 Mbit/s.
                let rate = f
                    .bottleneck_bps(&self.link_argv(cell))
                    .filter(|_| matches!(self.target, Target::Path { .. }))
                    .unwrap_or(if matches!(self.target, Target::Host { .. }) { 1e8 } else { 1e9 });
                // Or its windows' rate, when they are set and slower: streams × window / RTT.
                let config = self.config(cell, f);
                let windows = match (config.get("window"), config.get("rtt")) {
                    (Some(w), Some(rtt)) if *rtt > 0.0 => config["streams"] * w / rtt,
                    _ => f64::INFINITY,
                };
                let rate = rate.min(windows);
                let probe = if get("probe") == Some("true") { 15.0 } else { 0.0 };
                d.size as f64 * 8.0 / rate + f64::from(d.files) / 1000.0 + 3.0 + probe
            }
            Kind::Load => {
                let cycles = get("cycles").and_then(|c| c.parse::<f64>().ok()).unwrap_or(1.0);
                let cell = cycles * (dur("load-time", 10.0) + dur("idle-time", 10.0)) + dur("timeout", 2.0) + 1.0;
                list("streams") * list("window") * cell
            }
        }
    }

    /// A cell's parameters for the archive: axis → value, numbers in base units (bytes, bit/s,
    /// seconds) where the axis has a unit.
    /// Each planned cell (its first repeat) as expectations select it.
    pub fn planned(&self) -> Vec<crate::expect::PlannedCell> {
        self.cells()
            .iter()
            .filter(|c| c.repeat == 0)
            .map(|c| crate::expect::PlannedCell { index: c.index, params: self.params(c), values: c.values.clone() })
            .collect()
    }

    pub fn params(&self, cell: &CellPlan) -> BTreeMap<String, serde_json::Value> {
        cell.values
            .iter()
            .map(|(k, v)| {
                let key = param_key(k);
                let value = normalize(&key, v);
                (key, value)
            })
            .collect()
    }
}

/// The values of the study-wide `direction` axis and the flag each means.
const DIRECTIONS: [(&str, Option<&str>); 3] = [("up", None), ("down", Some("--reverse")), ("bidir", Some("--bidir"))];

/// A tput study's `transport` (a sweep axis too: `transport = ["tcp", "quic"]`) as flags.
const TRANSPORTS: [(&str, Option<&str>); 3] = [("tcp", None), ("udp", Some("--udp")), ("quic", Some("--quic"))];

/// (flag, value) pairs as arguments; `true` is a bare flag, `false` leaves it out;
/// `direction` becomes `--reverse` or `--bidir` (or nothing, for up), `transport` `--udp` or
/// `--quic` (or nothing, for tcp).
fn flags(opts: &[(String, String)]) -> Vec<String> {
    let mut v = Vec::new();
    for (k, val) in opts {
        let named = match k.as_str() {
            "direction" => DIRECTIONS.iter().find(|(d, _)| d == val),
            "transport" => TRANSPORTS.iter().find(|(t, _)| t == val),
            _ => None,
        };
        if let Some((_, f)) = named {
            v.extend(f.map(String::from));
            continue;
        }
        let flag = format!("--{}", k.replace('_', "-"));
        match val.as_str() {
            "true" => v.push(flag),
            "false" => {}
            _ => {
                v.push(flag);
                v.push(val.clone());
            }
        }
    }
    v
}

fn check_link(f: &dyn Flags, opts: &[(String, String)]) -> Result<(), String> {
    f.check_link(&flags(opts))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A checker that takes every command and link flag but `--window 7` and `--rate slow`.
    struct Stub;
    impl Flags for Stub {
        fn check_command(&self, argv: &[String]) -> Result<(), String> {
            match argv.windows(2).any(|w| w == ["--window", "7"]) {
                true => Err("invalid value '7' for '--window'".into()),
                false => Ok(()),
            }
        }
        fn check_link(&self, flags: &[String]) -> Result<(), String> {
            match flags.windows(2).any(|w| w == ["--rate", "slow"]) {
                true => Err("invalid value 'slow' for '--rate'".into()),
                false => Ok(()),
            }
        }
        fn bottleneck_bps(&self, _: &[String]) -> Option<f64> {
            Some(8e6)
        }
        fn link_values(&self, _: &[String]) -> BTreeMap<String, f64> {
            [("rate", 8e6), ("rtt", 0.1)].into_iter().map(|(k, v)| (k.to_string(), v)).collect()
        }
    }

    const STUDY: &str = "name = \"s\"\n[path]\nrate = \"10M\"\n[measure]\nkind = \"tput\"\ntime = \"2s\"\n[sweep]\nwindow = [\"64k\", \"7\"]\nstreams = [1, 2]\n";

    #[test]
    fn the_checker_passed_in_decides_and_the_error_names_the_line() {
        // The sweep's values go through the checker one by one: `7` is refused on line 8.
        let e = Study::parse(STUDY, &Stub).unwrap_err();
        assert_eq!((e.line, e.message.as_str()), (8, "invalid value '7' for '--window'"));
        let e = Study::parse(&STUDY.replace("\"10M\"", "\"slow\""), &Stub).unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        // Without the refused value: 2 × 2 cells, first axis slowest, each with its command.
        let s = Study::parse(&STUDY.replace(", \"7\"", ", \"128k\""), &Stub).unwrap();
        let cells = s.cells();
        assert_eq!(cells.len(), 4);
        assert_eq!(
            cells[1].values,
            vec![("window".to_string(), "64k".to_string()), ("streams".to_string(), "2".to_string())]
        );
        let argv = s.measure_argv(&cells[1], "198.18.0.2", None);
        assert_eq!(argv[..2], ["tput".to_string(), "198.18.0.2".to_string()]);
        assert!(argv.windows(2).any(|w| w == ["--parallel", "2"] || w == ["--streams", "2"]), "{argv:?}");
        assert_eq!(s.estimate_s(&cells[0], &Stub), 3.0);
    }

    #[test]
    fn a_transport_axis_puts_tcp_and_quic_side_by_side() {
        let text = "name = \"s\"\n[measure]\nkind = \"tput\"\n[sweep]\ntransport = [\"tcp\", \"quic\"]\n";
        let s = Study::parse(text, &Stub).unwrap();
        let cells = s.cells();
        let argv = |i: usize| s.measure_argv(&cells[i], "198.18.0.2", None);
        assert!(!argv(0).iter().any(|a| a == "--quic" || a == "--udp" || a.contains("transport")), "{:?}", argv(0));
        assert!(argv(1).iter().any(|a| a == "--quic"), "{:?}", argv(1));
        let e = Study::parse(&text.replace("\"quic\"", "\"sctp\""), &Stub).unwrap_err();
        assert!(e.message.contains("tcp, udp or quic, not `sctp`"), "{e}");
    }
}

/// Expectations parsed with a study and evaluated on stored cells.
#[cfg(test)]
mod expect_tests {
    use super::*;
    use crate::expect::{evaluate, line, Verdict};
    use wanperf_archive::{CellAggregate, StoredCell};

    fn cfg(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    /// Takes every option; the path has these values (its bottleneck is its `rate`).
    struct Values(&'static [(&'static str, f64)]);
    impl Flags for Values {
        fn check_command(&self, _: &[String]) -> Result<(), String> {
            Ok(())
        }
        fn check_link(&self, _: &[String]) -> Result<(), String> {
            Ok(())
        }
        fn bottleneck_bps(&self, _: &[String]) -> Option<f64> {
            self.0.iter().find(|v| v.0 == "rate").map(|v| v.1)
        }
        fn link_values(&self, _: &[String]) -> BTreeMap<String, f64> {
            cfg(self.0)
        }
    }

    /// A path of 10 Mbit/s, 100 ms, a 125 kB queue.
    const ANY: Values = Values(&[("rate", 1e7), ("rtt", 0.1), ("queue", 1e6)]);

    /// A path 10 Mbit/s up and 2 Mbit/s down, with a policer up.
    const ASYM: Values = Values(&[
        ("rate", 1e7),
        ("rate_up", 1e7),
        ("rate_down", 2e6),
        ("queue", 1e6),
        ("queue_down", 2e5),
        ("burst", 8e6),
    ]);

    #[test]
    fn a_cell_measured_down_is_bounded_by_the_down_direction() {
        let text = "name = \"s\"\n[measure]\nkind = \"tput\"\n[sweep]\ndirection = [\"up\", \"down\"]\n";
        let s = Study::parse(text, &ASYM).unwrap();
        let cells = s.cells();
        let (up, down) = (s.config(&cells[0], &ASYM), s.config(&cells[1], &ASYM));
        assert_eq!((up["rate"], up["queue"], up.get("burst")), (1e7, 1e6, Some(&8e6)));
        assert_eq!((down["rate"], down["queue"], down.get("burst")), (2e6, 2e5, None));
    }

    const BASE: &str = "name = \"s\"\n[path]\nrate = \"10M\"\n[measure]\nkind = \"tput\"\n[sweep]\nwindow = [\"64K\", \"1M\"]\nstreams = [1, 4]\n";

    fn parse(expects: &str) -> Result<Study, wanperf_toml::Error> {
        Study::parse(&format!("{BASE}{expects}"), &ANY)
    }

    #[test]
    fn every_malformed_expectation_is_one_error_naming_its_line() {
        // Lines 1–8 are the study; the expectation starts on line 9.
        for (body, line, says) in [
            ("[[expect]]\nmetric = \"speed\"\nmax = \"1\"\n", 10, "unknown metric `speed`"),
            ("[[expect]]\nmetric = \"rtt_rise\"\nmax = \"1 ms\"\n", 10, "a tput study has no `rtt_rise`"),
            ("[[expect]]\nmetric = \"goodput\"\nmax = \"window\"\n", 11, "is a size, and `goodput` is a rate"),
            ("[[expect]]\nmetric = \"goodput\"\nmax = \"2 rate\"\n", 11, "write `2 * rate`"),
            ("[[expect]]\nmetric = \"goodput\"\nwhere = { cc = \"bbr\" }\nmax = \"rate\"\n", 11, "not a sweep axis"),
            (
                "[[expect]]\nmetric = \"goodput\"\nwhere = { streams = 3 }\nmax = \"rate\"\n",
                11,
                "no cell has streams = 3",
            ),
            ("[[expect]]\nmetric = \"goodput\"\n", 9, "say `min`, `max`"),
            ("[[expect]]\nmetric = \"goodput\"\nrises_with = \"rtt\"\n", 11, "`rtt` is not a sweep axis"),
            ("[[expect]]\nmetric = \"goodput\"\nrises_with = \"streams\"\nmax = \"rate\"\n", 12, "takes no `min`"),
            ("[[expect]]\nmetric = \"goodput\"\nmax = \"rate\"\nuntil = \"rate\"\n", 12, "go with `rises_with`"),
            ("[[expect]]\nmetric = \"goodput\"\nrises_with = \"streams\"\ntolerance = \"2\"\n", 12, "fraction below 1"),
            ("[[expect]]\nmetric = \"goodput\"\nmax = \"burst / rtt\"\n", 11, "uses `burst`"),
            ("[[expect]]\nmetric = \"goodput\"\nmax = \"12000 b / rtt\"\n", 11, "is ambiguous"),
            ("[[expect]]\nmetric = \"goodput\"\nmax = \"wmem_left / rtt\"\n", 11, "uses `wmem_left`"),
            ("[[expect]]\nmetric = \"goodput\"\nmax = \"64 kb / rtt\"\n", 11, "is ambiguous"),
            ("[[expect]]\nmetric = \"goodput\"\nmax = \"64K/streams\"\n", 11, "is a size"),
            (
                "[[expect]]\nmetric = \"goodput\"\nmax = \"((((((((((((((((((((((((((((((((((rate))))))))))))))))))))))))))))))))))\"\n",
                11,
                "nested more than 32 deep",
            ),
            ("[[expect]]\nmetric = \"goodput\"\nmax = \"rate\"\ncolour = 1\n", 12, "unknown field `colour`"),
            ("[[expect]]\nmetric = \"goodput\"\nmin = \"2 * baseline\"\n", 11, "needs the expectation's `baseline`"),
            (
                "[[expect]]\nmetric = \"goodput\"\nbaseline = { streams = 3 }\nmin = \"baseline\"\n",
                11,
                "no cell has streams = 3",
            ),
            (
                "[[expect]]\nmetric = \"goodput\"\nbaseline = { streams = 1 }\nrises_with = \"window\"\n",
                9,
                "`baseline` goes with `min`/`max`",
            ),
            (
                "[[expect]]\nmetric = \"goodput\"\nbaseline = { streams = 1 }\nmin = \"baseline * rate\"\n",
                12,
                "is bit^2",
            ),
        ] {
            let e = parse(body).unwrap_err();
            assert!(e.message.contains(says), "{body}: {e}");
            assert_eq!(e.line, line, "{body}: {e}");
            assert!(!e.to_string().contains('\n'), "{e}");
        }
    }

    fn agg(index: u32, repeat: u32, window: u64, streams: u32, bps: Option<f64>) -> (CellAggregate, StoredCell) {
        let params: BTreeMap<String, serde_json::Value> =
            [("window".to_string(), window.into()), ("streams".to_string(), streams.into())].into();
        let a = CellAggregate {
            index,
            repeat,
            params: params.clone(),
            ok: bps.is_some(),
            mean_throughput_bps: bps,
            ..Default::default()
        };
        let c = StoredCell {
            id: 0,
            run_id: 1,
            cell: wanperf_archive::CellRecord {
                index,
                repeat,
                kind: "tput".into(),
                params,
                ok: bps.is_some(),
                ..Default::default()
            },
        };
        (a, c)
    }

    #[test]
    fn bounds_use_each_cells_own_window_and_trends_stop_at_until() {
        let s = parse(
            "[[expect]]\nmetric = \"goodput\"\nwhere = { streams = 1 }\nmax = \"1.05 * window / rtt\"\n\
             [[expect]]\nmetric = \"goodput\"\nrises_with = \"streams\"\nuntil = \"0.9 * rate\"\n",
        )
        .unwrap();
        assert_eq!(s.expects.len(), 2);
        assert_eq!(s.expects[0].text(), "goodput ≤ 1.05 * window / rtt where streams = 1");
        let configs = s.configs(&ANY);
        // Cells: (64K,1) (64K,4) (1M,1) (1M,4). 64K/100 ms = 5.24 Mbit/s; 1M/100 ms = 83.9.
        let rows = [
            agg(0, 0, 65536, 1, Some(5.0e6)),
            agg(1, 0, 65536, 4, Some(9.5e6)),
            agg(2, 0, 1 << 20, 1, Some(9.6e6)),
            agg(3, 0, 1 << 20, 4, Some(9.4e6)),
        ];
        let (aggs, cells): (Vec<_>, Vec<_>) = rows.into_iter().unzip();
        let axes = vec!["window".to_string(), "streams".to_string()];
        let v = evaluate(&s.expects, &axes, &aggs, &cells, &configs);
        // The bound: two cells with streams = 1, each against its own window.
        assert_eq!(v.iter().filter(|x| x.expect == 0).count(), 2);
        assert!(v[0].pass && (v[0].bound.unwrap() - 1.05 * 65536.0 * 8.0 / 0.1).abs() < 1e-6, "{:?}", v[0]);
        assert_eq!(v[0].cells, "window = 64.0 KiB");
        assert!(v[1].pass, "{:?}", v[1]);
        // The trend: 64K rises 5.0 → 9.5 (pass); 1M is at 9.6 ≥ 9 Mbit/s already, and 9.4 stays
        // above 0.9 × rate: pass.
        let t: Vec<&Verdict> = v.iter().filter(|x| x.expect == 1).collect();
        assert_eq!(t.len(), 2);
        assert!(t.iter().all(|x| x.pass), "{t:?}");
        assert_eq!(t[1].cells, "streams 1 → 4, window = 1.00 MiB");
        // Had 1M fallen below the bound with more streams, or 64K not risen, they would fail.
        let rows = [
            agg(0, 0, 65536, 1, Some(5.0e6)),
            agg(1, 0, 65536, 4, Some(4.0e6)),
            agg(2, 0, 1 << 20, 1, Some(9.6e6)),
            agg(3, 0, 1 << 20, 4, Some(7.0e6)),
        ];
        let (aggs, cells): (Vec<_>, Vec<_>) = rows.into_iter().unzip();
        let v = evaluate(&s.expects, &axes, &aggs, &cells, &configs);
        let t: Vec<&Verdict> = v.iter().filter(|x| x.expect == 1).collect();
        assert!(t.iter().all(|x| !x.pass), "{t:?}");
        assert!(t[0].margin.unwrap() < 0.0);
    }

    #[test]
    fn nothing_measured_is_not_a_pass_and_repeats_give_a_median() {
        let s = parse("[[expect]]\nmetric = \"goodput\"\nmin = \"1 Mbit/s\"\n").unwrap();
        let configs = s.configs(&ANY);
        let rows = [
            agg(0, 0, 65536, 1, Some(1.0e6 * 0.5)),
            agg(0, 1, 65536, 1, Some(2.0e6)),
            agg(0, 2, 65536, 1, Some(3.0e6)),
            agg(1, 0, 65536, 4, None),
        ];
        let (aggs, cells): (Vec<_>, Vec<_>) = rows.into_iter().unzip();
        let axes = vec!["window".to_string(), "streams".to_string()];
        let v = evaluate(&s.expects, &axes, &aggs, &cells, &configs);
        assert_eq!(v.len(), 2);
        assert!(v[0].pass && v[0].measured == Some(2.0e6), "{:?}", v[0]);
        assert!(!v[1].pass && v[1].measured.is_none() && v[1].note.contains("every repeat failed"), "{:?}", v[1]);
        assert!(line(&v[1]).starts_with("FAIL  line 9  goodput ≥ 1 Mbit/s"), "{}", line(&v[1]));
    }

    #[test]
    fn cells_a_stopped_run_never_stored_fail_as_not_measured() {
        let s = parse("[[expect]]\nmetric = \"goodput\"\nmin = \"1 Mbit/s\"\n").unwrap();
        let planned = s.planned();
        assert!(planned.len() >= 2, "the test study plans several cells");
        let axes = vec!["window".to_string(), "streams".to_string()];
        let stored: std::collections::BTreeSet<u32> = [planned[0].index].into();
        let v = crate::expect::unmeasured(&s.expects, &axes, &planned, &stored);
        assert_eq!(v.len(), planned.len() - 1, "{v:?}");
        assert!(v.iter().all(|v| !v.pass && v.measured.is_none() && v.note.starts_with("not measured")), "{v:?}");
        // Each names its cell.
        assert!(v.iter().all(|v| v.cells.contains("streams = ")), "{v:?}");
        // Every cell stored: nothing to add.
        let all: std::collections::BTreeSet<u32> = planned.iter().map(|c| c.index).collect();
        assert!(crate::expect::unmeasured(&s.expects, &axes, &planned, &all).is_empty());
    }

    #[test]
    fn rtt_statistics_come_from_each_phases_own_probes() {
        let text = "name = \"s\"\n[measure]\nkind = \"load\"\n[sweep]\nstreams = [1]\n\
                    [[expect]]\nmetric = \"rtt_loaded_p95\"\nmax = \"rtt + 100 ms\"\n\
                    [[expect]]\nmetric = \"rtt_median\"\nmax = \"rtt + 1 ms\"\n\
                    [[expect]]\nmetric = \"rtt_loaded_min\"\nmin = \"rtt\"\n";
        let st = Study::parse(text, &ANY).unwrap();
        let (a, mut c) = agg(0, 0, 65536, 1, Some(1e6));
        c.cell.kind = "load".into();
        // Idle probes at 100.0–100.9 ms, loaded ones at 150–249 ms.
        for i in 0..100u32 {
            let p = |phase: &str, ms: f64| wanperf_archive::ProbeRow {
                seq: u64::from(i),
                phase: phase.into(),
                sent_s: f64::from(i),
                rtt_ms: Some(ms),
                late: false,
            };
            c.cell.probes.push(p("unloaded", 100.0 + f64::from(i % 10) / 10.0));
            c.cell.probes.push(p("loaded", 150.0 + f64::from(i)));
        }
        let v = evaluate(&st.expects, &["streams".into()], &[a], &[c], &st.configs(&ANY));
        assert_eq!(v.len(), 3);
        let m = |i: usize| v[i].measured.unwrap() * 1e3;
        assert!((m(0) - 244.05).abs() < 0.1, "p95 of 150..249 ms: {}", line(&v[0]));
        assert!(!v[0].pass, "244 ms is above rtt + 100 ms = 200 ms");
        assert!((m(1) - 100.45).abs() < 0.01 && v[1].pass, "{}", line(&v[1]));
        assert!((m(2) - 150.0).abs() < 1e-9 && v[2].pass, "{}", line(&v[2]));
        for bad in ["rtt_mode", "rtt_loaded_avg"] {
            let e = Study::parse(&text.replace("rtt_median", bad), &ANY).unwrap_err();
            assert!(e.message.contains("rtt_STAT / rtt_loaded_STAT"), "{e}");
        }
        let e = Study::parse(&text.replace("kind = \"load\"", "kind = \"ping\""), &ANY).unwrap_err();
        assert!(e.message.contains("a ping study has no `rtt_loaded_p95`"), "{e}");
    }

    #[test]
    fn per_interval_goodput_and_the_burst_ahead_of_a_policer() {
        // A 1 Mbit/s policer with a 100 KiB (819,200-bit) bucket.
        const POLICED: Values = Values(&[("rate", 1e7), ("rtt", 0.1), ("policer_rate", 1e6), ("burst", 819_200.0)]);
        let text = "name = \"s\"\n[measure]\nkind = \"tput\"\n[sweep]\nstreams = [1]\n\
                    [[expect]]\nmetric = \"goodput_max\"\nmax = \"policer_rate + burst / 1 s\"\n\
                    [[expect]]\nmetric = \"goodput_median\"\nmax = \"policer_rate\"\n\
                    [[expect]]\nmetric = \"burst_used\"\nmax = \"burst\"\n";
        let st = Study::parse(text, &POLICED).unwrap();
        let (a, mut c) = agg(0, 0, 65536, 1, Some(1e6));
        // Seconds of 1.7, 1.0 and 0.5 Mbit, then 0.1 s at 5 Mbit/s (cut short by the end).
        for (i, (start, end, mbit)) in
            [(0.0, 1.0, 1.7), (1.0, 2.0, 1.0), (2.0, 3.0, 0.5), (3.0, 3.1, 0.5)].iter().enumerate()
        {
            let bytes = (mbit * 1e6 / 8.0) as u64;
            let row = |stream| wanperf_archive::IntervalRow {
                stream,
                start_s: *start,
                end_s: *end,
                bytes,
                throughput_bps: mbit * 1e6 / (end - start),
                ..Default::default()
            };
            c.cell.intervals.extend([row(i32::try_from(i).unwrap() + 10), row(-1)]);
        }
        let v = evaluate(
            &st.expects,
            &["streams".into()],
            std::slice::from_ref(&a),
            std::slice::from_ref(&c),
            &st.configs(&POLICED),
        );
        assert_eq!(v.len(), 3);
        // The fastest whole second (the short last interval left out), under 1.82 Mbit/s.
        assert!((v[0].measured.unwrap() - 1.7e6).abs() < 1.0 && v[0].pass, "{}", line(&v[0]));
        assert!((v[1].measured.unwrap() - 1.0e6).abs() < 1.0 && v[1].pass, "{}", line(&v[1]));
        // 1.7 Mbit at 1 s is 0.7 Mbit ahead of the rate; never more after.
        assert!((v[2].measured.unwrap() - 0.7e6).abs() < 8.0 && v[2].pass, "{}", line(&v[2]));
        // A last interval that ran long (the test's tail, 2 s at 0.25 Mbit/s) is a rate like the
        // others: it stays, and it does not hide the fastest second.
        let mut long = c.clone();
        long.cell.intervals.iter_mut().filter(|r| r.start_s == 3.0).for_each(|r| {
            r.end_s = 5.0;
            r.throughput_bps = 0.25e6;
        });
        let v = evaluate(&st.expects, &["streams".into()], std::slice::from_ref(&a), &[long], &st.configs(&POLICED));
        assert!((v[0].measured.unwrap() - 1.7e6).abs() < 1.0, "{}", line(&v[0]));
        // A receiver 1 Mbit ahead of a 100 KiB bucket is a policer that did not act.
        c.cell.intervals.iter_mut().filter(|r| r.start_s == 0.0).for_each(|r| r.bytes = 2_000_000 / 8);
        let v = evaluate(&st.expects, &["streams".into()], &[a], &[c], &st.configs(&POLICED));
        assert!(!v[2].pass && (v[2].measured.unwrap() - 1.0e6).abs() < 8.0, "{}", line(&v[2]));
        // Without a policer there is no rate to be ahead of: no value, not a pass.
        let st = Study::parse(text, &ANY).unwrap_err();
        assert!(st.message.contains("policer_rate"), "{st}");
        let e = Study::parse(&text.replace("goodput_max", "goodput_avg"), &POLICED).unwrap_err();
        assert!(e.message.contains("goodput_STAT"), "{e}");
    }

    #[test]
    fn a_links_utilization_is_read_in_the_measured_direction_and_bounded_by_the_goodput() {
        let text = "name = \"s\"\n[measure]\nkind = \"tput\"\nduration = \"4s\"\n[sweep]\nstreams = [1]\n\
                    [[expect]]\nmetric = \"link.esnet.util\"\nmin = \"goodput\"\nmax = \"1.1 * goodput\"\n\
                    [[expect]]\nmetric = \"link.esnet.util_max\"\nmax = \"rate\"\n\
                    [[expect]]\nmetric = \"link.nowhere.util\"\nmax = \"rate\"\n";
        let st = Study::parse(text, &ANY).unwrap();
        let (a, mut c) = agg(0, 0, 65536, 1, Some(8e6));
        // The route crosses `esnet` from its b end: its b → a series is the test's (four
        // seconds of 1.05 MB: 8.4 Mbit/s), a → b the acknowledgements.
        c.cell.emulator = Some(serde_json::json!({
            "route": ["lan slac → gw", "esnet esnet → gw"],
            "links": [{"name": "esnet", "a": "gw", "b": "esnet",
                "ab": {"per_second_bytes": [0, 50_000, 50_000, 50_000, 50_000, 0]},
                "ba": {"per_second_bytes": [0, 1_050_000, 1_050_000, 1_050_000, 1_050_000, 0]}}]
        }));
        let v = evaluate(
            &st.expects,
            &["streams".into()],
            std::slice::from_ref(&a),
            std::slice::from_ref(&c),
            &st.configs(&ANY),
        );
        assert_eq!(v.len(), 3);
        // 4.2 MB over the 4-s test: 8.4 Mbit/s, 1.05 × the 8 Mbit/s goodput.
        assert!((v[0].measured.unwrap() - 8.4e6).abs() < 1.0 && v[0].pass, "{}", line(&v[0]));
        assert!((v[0].bound.unwrap() - 8.8e6).abs() < 1.0, "the nearer bound is 1.1 × goodput: {}", line(&v[0]));
        assert!((v[1].measured.unwrap() - 8.4e6).abs() < 1.0 && v[1].pass, "{}", line(&v[1]));
        assert!(!v[2].pass && v[2].note.contains("no cell's network has a link `nowhere`"), "{}", line(&v[2]));
        // A link carrying less than the test's own goodput is a wrong measurement.
        let (a, c) = (CellAggregate { mean_throughput_bps: Some(9e6), ..a }, c);
        let v = evaluate(&st.expects, &["streams".into()], &[a], &[c], &st.configs(&ANY));
        assert!(!v[0].pass && (v[0].bound.unwrap() - 9e6).abs() < 1.0, "{}", line(&v[0]));
        // goodput bounds another metric, not itself, and only where it is measured.
        let bad = text.replace("link.esnet.util\"", "goodput\"");
        assert!(Study::parse(&bad, &ANY).unwrap_err().message.contains("bounded by itself"));
        let ping =
            "name = \"s\"\n[measure]\nkind = \"ping\"\n[[expect]]\nmetric = \"rtt\"\nmax = \"1500B / goodput\"\n";
        assert!(Study::parse(ping, &ANY).unwrap_err().message.contains("a ping study measures no `goodput`"));
    }

    #[test]
    fn vacuous_checks_fail_and_tolerance_follows_the_size() {
        let s = parse(
            "[[expect]]\nmetric = \"goodput\"\nmax = \"64K / rtt\"\n\
             [[expect]]\nmetric = \"goodput\"\nfalls_with = \"streams\"\ntolerance = \"10 %\"\n",
        )
        .unwrap();
        let axes = vec!["window".to_string(), "streams".to_string()];
        // A path without delay: 64K / rtt is no bound, and that is no pass.
        let mut flat = s.configs(&ANY);
        flat.values_mut().for_each(|c| {
            c.insert("rtt".into(), 0.0);
        });
        let rows = [agg(0, 0, 65536, 1, Some(-1.0)), agg(1, 0, 65536, 4, Some(-1.05))];
        let (aggs, cells): (Vec<_>, Vec<_>) = rows.into_iter().unzip();
        let v = evaluate(&s.expects, &axes, &aggs, &cells, &flat);
        assert!(v.iter().filter(|x| x.expect == 0).all(|x| !x.pass && x.note.contains("not a finite")), "{v:?}");
        // -1.0 then -1.05 falls, within 10 % of the first value's size (the ceiling is -0.9).
        let t: Vec<&Verdict> = v.iter().filter(|x| x.expect == 1).collect();
        assert_eq!(t.len(), 1);
        assert!(t[0].pass && (t[0].bound.unwrap() + 0.9).abs() < 1e-12, "{:?}", t[0]);
        // One value of the axis along a line is no trend: a failed verdict, not silence.
        let rows = [agg(0, 0, 65536, 1, Some(5e6)), agg(2, 0, 1 << 20, 1, Some(9e6))];
        let (aggs, cells): (Vec<_>, Vec<_>) = rows.into_iter().unzip();
        let v = evaluate(&s.expects, &axes, &aggs, &cells, &s.configs(&ANY));
        let t: Vec<&Verdict> = v.iter().filter(|x| x.expect == 1).collect();
        assert_eq!(t.len(), 2, "{t:?}");
        assert!(t.iter().all(|x| !x.pass && x.note.contains("fewer than two")), "{t:?}");
    }
}

/// `[net]` studies: pairs, settings as axes, and each mistake on its own line.
#[cfg(test)]
mod net_tests {
    use super::*;

    /// Takes every command; a network is refused when a value is `bad`, a host `nobody`, or
    /// the added traffic says `bogus`.
    struct Nets;
    impl Flags for Nets {
        fn check_command(&self, _: &[String]) -> Result<(), String> {
            Ok(())
        }
        fn check_link(&self, _: &[String]) -> Result<(), String> {
            Ok(())
        }
        fn bottleneck_bps(&self, _: &[String]) -> Option<f64> {
            None
        }
        fn link_values(&self, _: &[String]) -> BTreeMap<String, f64> {
            BTreeMap::new()
        }
        fn net_values(&self, n: &crate::net::NetCell) -> Result<BTreeMap<String, f64>, String> {
            if n.settings.iter().any(|(_, v)| v == "bad") {
                return Err("refused value".into());
            }
            if [&n.from, &n.to].iter().any(|h| h.as_str() == "nobody") {
                return Err("no host is called `nobody`".into());
            }
            if n.traffic.iter().any(|t| t.contains("bogus")) {
                return Err("bogus traffic".into());
            }
            Ok([("rate".to_string(), 1e7), ("rtt".to_string(), 0.1)].into_iter().collect())
        }
    }

    const NET: &str = "name = \"n\"\n[net]\ntopology = \"t\"\npairs = [\"a->b\", \"a->b@fast\"]\n[[net.traffic]]\nname = \"bulk\"\nlink = \"x\"\nrate = \"5M\"\n[measure]\nkind = \"tput\"\n[sweep]\nlink.ab.rate = [\"1M\", \"2M\"]\ntraffic.bulk.rate = [\"off\", \"5M\"]\n";

    #[test]
    fn pairs_and_settings_are_axes_and_each_cell_has_its_network() {
        let s = Study::parse(NET, &Nets).unwrap();
        let names: Vec<&str> = s.axes.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["pair", "link.ab.rate", "traffic.bulk.rate"]);
        let cells = s.cells();
        assert_eq!(cells.len(), 8);
        let last = s.net_cell(&cells[7]).unwrap();
        assert_eq!((last.from.as_str(), last.to.as_str()), ("a", "b@fast"));
        assert_eq!(
            last.settings,
            [("link.ab.rate".to_string(), "2M".to_string()), ("traffic.bulk.rate".to_string(), "5M".to_string())]
        );
        assert!(last.traffic[0].starts_with("[[traffic]]\n") && last.traffic[0].contains("rate = \"5M\""));
        // Settings are not the measurement's options; the archive keeps their names and units.
        let argv = s.measure_argv(&cells[7], "198.18.0.2", None);
        assert!(!argv.iter().any(|a| a.contains("rate") || a.contains("pair")), "{argv:?}");
        let p = s.params(&cells[7]);
        assert_eq!(p["link.ab.rate"], serde_json::json!(2_000_000));
        assert_eq!(p["traffic.bulk.rate"], serde_json::json!(5_000_000));
        assert_eq!(p["pair"], serde_json::json!("a->b@fast"));
        assert_eq!(s.config(&cells[0], &Nets)["rate"], 1e7);
    }

    #[test]
    fn every_network_mistake_is_one_line_at_its_place() {
        for (text, line, says) in [
            (NET.replace("\"a->b@fast\"", "\"a->nobody\""), 4, "nobody"),
            (NET.replace("\"2M\"", "\"bad\""), 12, "refused value"),
            (NET.replace("rate = \"5M\"", "rate = \"bogus\""), 5, "[[net.traffic]]: bogus traffic"),
            (NET.replace("link.ab.rate", "rate"), 12, "on a network sweep a link's: link.NAME.rate"),
            (NET.replace("topology = \"t\"", "topology = \"t\"\ncolour = \"red\""), 4, "unknown [net] key `colour`"),
            (NET.replace("pairs = [\"a->b\", \"a->b@fast\"]", "pairs = [\"a\"]"), 4, "\"FROM->TO\""),
            (NET.replace("pairs = [\"a->b\", \"a->b@fast\"]", "from = \"a\""), 3, "needs the measured pair"),
            (NET.replace("[measure]", "[path]\nrate = \"1M\"\n[measure]"), 0, "[path] or [net], not both"),
        ] {
            let e = Study::parse(&text, &Nets).unwrap_err();
            assert_eq!(e.line, line, "{text}: {e}");
            assert!(e.message.contains(says), "{e}");
        }
        let path = "name = \"p\"\n[measure]\nkind = \"tput\"\n[sweep]\nlink.ab.rate = [\"1M\"]\n";
        let e = Study::parse(path, &Nets).unwrap_err();
        assert!(e.message.contains("needs [net]") && e.line == 5, "{e}");
    }
}
