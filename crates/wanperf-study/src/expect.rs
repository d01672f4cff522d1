//! Stated expectations (`[[expect]]` in a study file): what must hold on a correct path, in
//! the units users write, checked after every run. Pure: parsed once against the study's
//! axes and each cell's configuration, evaluated over archived cells.
//!
//! An expectation names a metric, optionally a selection of cells (`where`, by axis values),
//! and either bounds (`min`, `max`) or a trend along one axis (`rises_with`, `falls_with`).
//! Bounds are small expressions over the cell's own configuration — `1.05 * window / rtt`,
//! `queue / rate + 2 ms` — with units carried through: sizes are bits, rates bit/s, times
//! seconds, and a bound whose unit is not the metric's is refused when the file is read.

use crate::axis::{fmt_value, normalize, param_key, Axis, Kind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
pub use wanperf_archive::Verdict;
use wanperf_archive::{CellAggregate, StoredCell};
use wanperf_toml::{err, scalar, Lines, Spanned, Table};
use wanperf_units as units;

/// A physical dimension: the exponents of bit and second (a rate is bit¹·s⁻¹).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Dim {
    /// Exponent of the bit.
    pub bit: i8,
    /// Exponent of the second.
    pub sec: i8,
}

const NONE: Dim = Dim { bit: 0, sec: 0 };
const BITS: Dim = Dim { bit: 1, sec: 0 };
const SECS: Dim = Dim { bit: 0, sec: 1 };
const RATE: Dim = Dim { bit: 1, sec: -1 };

impl Dim {
    fn times(self, o: Dim) -> Dim {
        Dim { bit: self.bit.saturating_add(o.bit), sec: self.sec.saturating_add(o.sec) }
    }
    fn over(self, o: Dim) -> Dim {
        Dim { bit: self.bit.saturating_sub(o.bit), sec: self.sec.saturating_sub(o.sec) }
    }
    /// How users name it.
    pub fn name(self) -> String {
        match (self.bit, self.sec) {
            (0, 0) => "a plain number".into(),
            (1, 0) => "a size".into(),
            (0, 1) => "a time".into(),
            (1, -1) => "a rate".into(),
            (b, s) => format!("bit^{b}·s^{s}"),
        }
    }
    /// A value of this dimension as users read it.
    pub fn fmt(self, v: f64) -> String {
        match (self.bit, self.sec) {
            (1, 0) if v >= 0.0 => units::fmt_bytes((v / 8.0).round() as u64),
            (0, 1) => format!("{:.3} ms", v * 1e3),
            (1, -1) => units::fmt_rate(v),
            // Counts (drops, events) as whole numbers; fractions with four places.
            (0, 0) if v.fract() == 0.0 && v.abs() < 1e15 => format!("{v:.0}"),
            (0, 0) => format!("{v:.4}"),
            _ => format!("{v:.4e}"),
        }
    }
}

/// What an expectation measures in each cell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Goodput, bit/s (a copy's data rate).
    Goodput,
    /// Mean RTT of the probes without load, s (a ping study's probes).
    RttIdle,
    /// Mean RTT of the probes under load, s.
    RttLoaded,
    /// Loaded minus idle mean RTT, s.
    RttRise,
    /// Lowest RTT without load, s.
    RttMin,
    /// Fraction of idle probes lost.
    LossIdle,
    /// Fraction of loaded probes lost.
    LossLoaded,
    /// Retransmitted segments.
    Retransmits,
    /// The path's capacity, bit/s.
    Capacity,
    /// Available bandwidth, bit/s.
    Available,
    /// Mean one-way delay left → right (client → server) without load, s.
    OwdFwdIdle,
    /// … under load.
    OwdFwdLoaded,
    /// … loaded minus idle.
    OwdFwdRise,
    /// Mean one-way delay right → left without load, s.
    OwdRevIdle,
    /// … under load.
    OwdRevLoaded,
    /// … loaded minus idle.
    OwdRevRise,
    /// A counter of the emulated path's elements in the measured direction (left → right on a
    /// path, along the route from → to on a network), summed over the links and classes: the
    /// counter's name in the emulator's records (`queue_drops`, `policer_drops`,
    /// `random_losses`, `policed`).
    Counter(&'static str),
    /// A statistic of the probes' RTTs in one phase, s (a plain number for none): seed 000's
    /// and 002's tables (median, IQR, stdev, percentiles, extremes).
    RttStat {
        /// Under load (else idle).
        loaded: bool,
        /// Which statistic.
        stat: Stat,
    },
    /// A statistic of a tput cell's per-interval goodput (all streams), bit/s: the fastest
    /// second (`goodput_max`), the median second, the IQR — seed 002's thrulay tables. An
    /// interval shorter than half the others (the last, cut short) is left out.
    GoodputStat(Stat),
    /// The most payload a tput cell's receiver had ahead of the policer's rate at any
    /// interval's end: max over t of bytes(0..t) − policer_rate·t, bits. A token bucket of
    /// `burst` bounds it by `burst` (the payload is less than the wire's bytes).
    BurstUsed,
    /// A named link of a network cell (`link.NAME.util`, `link.NAME.util_max`), bit/s, in the
    /// measured direction when the route crosses it (else its busier one), from the
    /// emulator's per-second series (MRTG's view of the link): the bits it carried in the
    /// cell over the measurement's `duration` (without one, over the seconds it carried at
    /// least a tenth of its busiest second's bytes), or its busiest second.
    LinkUtil {
        /// The link's name.
        link: String,
        /// The busiest second (else the average).
        peak: bool,
    },
}

/// A statistic of a set of RTTs (`rtt_median`, `rtt_loaded_p95`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stat {
    /// The median.
    Median,
    /// The interquartile range (75th − 25th percentile).
    Iqr,
    /// The standard deviation.
    Stdev,
    /// The 5th percentile.
    P5,
    /// The 25th.
    P25,
    /// The 75th.
    P75,
    /// The 95th.
    P95,
    /// The 99th.
    P99,
    /// The largest.
    Max,
    /// The smallest (loaded only: `rtt_min` is the idle one).
    Min,
}

const STATS: &[(&str, Stat)] = &[
    ("median", Stat::Median),
    ("iqr", Stat::Iqr),
    ("stdev", Stat::Stdev),
    ("p5", Stat::P5),
    ("p25", Stat::P25),
    ("p75", Stat::P75),
    ("p95", Stat::P95),
    ("p99", Stat::P99),
    ("max", Stat::Max),
    ("min", Stat::Min),
];

/// A metric by its name in files: one of [`METRICS`], `rtt_STAT` (idle), `rtt_loaded_STAT`
/// or `goodput_STAT` (per interval), with its dimension and the kinds of study that have it.
fn find_metric(name: &str) -> Option<(Metric, Dim, &'static [Kind])> {
    if let Some((_, m, d, k)) = METRICS.iter().find(|m| m.0 == name) {
        return Some((m.clone(), *d, k));
    }
    if let Some((link, what)) = name.strip_prefix("link.").and_then(|r| r.rsplit_once('.')) {
        let peak = match what {
            "util" => false,
            "util_max" => true,
            _ => return None,
        };
        return (!link.is_empty()).then(|| (Metric::LinkUtil { link: link.to_string(), peak }, RATE, EMULATED));
    }
    let stat = |s: &str| STATS.iter().find(|(n, _)| *n == s).map(|x| x.1);
    if let Some(s) = name.strip_prefix("goodput_") {
        return Some((Metric::GoodputStat(stat(s)?), RATE, &[Kind::Tput]));
    }
    if let Some(s) = name.strip_prefix("rtt_loaded_") {
        return Some((Metric::RttStat { loaded: true, stat: stat(s)? }, SECS, &[Kind::Load]));
    }
    // The idle minimum has its own name and meaning (rtt_min, from the aggregate).
    let s = stat(name.strip_prefix("rtt_")?).filter(|s| *s != Stat::Min)?;
    Some((Metric::RttStat { loaded: false, stat: s }, SECS, &[Kind::Ping, Kind::Load]))
}

/// Every metric: its name in files, its dimension, and the kinds of study that have it.
const METRICS: &[(&str, Metric, Dim, &[Kind])] = &[
    ("goodput", Metric::Goodput, RATE, &[Kind::Tput, Kind::Load, Kind::Copy]),
    ("rtt", Metric::RttIdle, SECS, &[Kind::Ping, Kind::Load]),
    ("rtt_idle", Metric::RttIdle, SECS, &[Kind::Ping, Kind::Load]),
    ("rtt_loaded", Metric::RttLoaded, SECS, &[Kind::Load]),
    ("rtt_rise", Metric::RttRise, SECS, &[Kind::Load]),
    ("rtt_min", Metric::RttMin, SECS, &[Kind::Ping, Kind::Load]),
    ("loss", Metric::LossIdle, NONE, &[Kind::Ping, Kind::Load]),
    ("loss_idle", Metric::LossIdle, NONE, &[Kind::Ping, Kind::Load]),
    ("loss_loaded", Metric::LossLoaded, NONE, &[Kind::Load]),
    ("retransmits", Metric::Retransmits, NONE, &[Kind::Tput]),
    ("capacity", Metric::Capacity, RATE, &[Kind::Capacity]),
    ("available", Metric::Available, RATE, &[Kind::Capacity]),
    ("owd_fwd", Metric::OwdFwdIdle, SECS, &[Kind::Ping, Kind::Load]),
    ("owd_fwd_idle", Metric::OwdFwdIdle, SECS, &[Kind::Ping, Kind::Load]),
    ("owd_fwd_loaded", Metric::OwdFwdLoaded, SECS, &[Kind::Load]),
    ("owd_fwd_rise", Metric::OwdFwdRise, SECS, &[Kind::Load]),
    ("owd_rev", Metric::OwdRevIdle, SECS, &[Kind::Ping, Kind::Load]),
    ("owd_rev_idle", Metric::OwdRevIdle, SECS, &[Kind::Ping, Kind::Load]),
    ("owd_rev_loaded", Metric::OwdRevLoaded, SECS, &[Kind::Load]),
    ("owd_rev_rise", Metric::OwdRevRise, SECS, &[Kind::Load]),
    ("queue_drops", Metric::Counter("queue_drops"), NONE, EMULATED),
    ("policer_drops", Metric::Counter("policer_drops"), NONE, EMULATED),
    ("policed", Metric::Counter("policed"), NONE, EMULATED),
    ("random_losses", Metric::Counter("random_losses"), NONE, EMULATED),
    ("burst_used", Metric::BurstUsed, BITS, &[Kind::Tput]),
];

/// The kinds whose cells store the emulator's counters.
const EMULATED: &[Kind] = &[Kind::Tput, Kind::Load, Kind::Ping, Kind::Copy];

impl Metric {
    fn dim(&self) -> Dim {
        match self {
            Metric::RttStat { .. } => SECS,
            Metric::GoodputStat(_) | Metric::LinkUtil { .. } => RATE,
            m => METRICS.iter().find(|x| x.1 == *m).map_or(NONE, |x| x.2),
        }
    }
}

/// The configuration values a bound may use, with their dimensions (all in bits, bit/s and
/// seconds): the path's (as its options and preset make it, the measured direction's where
/// the two differ) and the measurement's.
pub const VARIABLES: &[(&str, Dim, &str)] = &[
    ("rtt", SECS, "the path's base round-trip time"),
    ("delay_up", SECS, "one-way delay, left → right"),
    ("delay_down", SECS, "one-way delay, right → left"),
    ("rate", RATE, "the bottleneck rate left → right"),
    ("rate_up", RATE, "the bottleneck rate left → right"),
    ("rate_down", RATE, "the bottleneck rate right → left"),
    ("queue", BITS, "the bottleneck queue left → right"),
    ("queue_up", BITS, "the bottleneck queue left → right"),
    ("queue_down", BITS, "the bottleneck queue right → left"),
    ("loss", NONE, "random loss left → right (a fraction)"),
    ("loss_down", NONE, "random loss right → left (a fraction)"),
    ("policer_rate", RATE, "the policer's rate left → right"),
    ("burst", BITS, "the policer's burst left → right"),
    ("mtu", BITS, "the path's MTU"),
    ("txqueuelen", NONE, "the sending host's interface queue (packets)"),
    ("cpu_left", NONE, "the left (sending) host's CPU quota, cores"),
    ("cpu_right", NONE, "the right host's CPU quota, cores"),
    ("wmem_left", BITS, "the left host's TCP send buffer maximum (tcp_wmem)"),
    ("wmem_right", BITS, "the right host's TCP send buffer maximum (tcp_wmem)"),
    ("rmem_left", BITS, "the left host's TCP receive buffer maximum (tcp_rmem)"),
    ("rmem_right", BITS, "the right host's TCP receive buffer maximum (tcp_rmem)"),
    ("disk_read_left", RATE, "the left host's disk read limit"),
    ("disk_read_right", RATE, "the right host's disk read limit"),
    ("disk_write_left", RATE, "the left host's disk write limit"),
    ("disk_write_right", RATE, "the right host's disk write limit"),
    ("window", BITS, "the measurement's socket buffer (`window`)"),
    ("streams", NONE, "parallel streams"),
    ("duration", SECS, "the measurement's duration"),
    ("bitrate", RATE, "the measurement's target bitrate"),
    ("goodput", RATE, "the cell's own measured goodput (to bound another metric by it)"),
];

fn variable(name: &str) -> Option<Dim> {
    VARIABLES.iter().find(|v| v.0 == name).map(|v| v.1)
}

/// A bound's expression.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Expr {
    /// A number in base units.
    Num(f64),
    /// A configuration value.
    Var(String),
    /// An operation.
    Op(char, Box<Expr>, Box<Expr>),
}

impl Expr {
    /// Its value in a cell's configuration; `Err` names a variable the cell has no value of.
    pub fn eval(&self, config: &BTreeMap<String, f64>) -> Result<f64, String> {
        Ok(match self {
            Expr::Num(v) => *v,
            Expr::Var(n) => *config.get(n).ok_or_else(|| n.clone())?,
            Expr::Op(op, a, b) => {
                let (a, b) = (a.eval(config)?, b.eval(config)?);
                match op {
                    '+' => a + b,
                    '-' => a - b,
                    '*' => a * b,
                    _ => a / b,
                }
            }
        })
    }

    fn vars(&self, out: &mut Vec<String>) {
        match self {
            Expr::Num(_) => {}
            Expr::Var(n) => out.push(n.clone()),
            Expr::Op(_, a, b) => {
                a.vars(out);
                b.vars(out);
            }
        }
    }
}

/// Parses a bound: numbers with units (`2 ms`, `64K`, `10 Mbit/s`, `5 %`), configuration
/// names, `+ - * /` and parentheses. Returns the expression and its dimension.
pub fn parse_expr(text: &str) -> Result<(Expr, Dim), String> {
    parse_bound(text, None)
}

/// [`parse_expr`] where the name `baseline` is the expectation's baseline cell's value, of
/// dimension `baseline` (None: there is no baseline).
fn parse_bound(text: &str, baseline: Option<Dim>) -> Result<(Expr, Dim), String> {
    let toks = tokens(text)?;
    let mut p = Parser { toks, at: 0, depth: 0, baseline };
    let e = p.sum()?;
    if p.at < p.toks.len() {
        return Err(format!("unexpected `{}` in `{text}`", p.toks[p.at].show()));
    }
    Ok(e)
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64, Dim),
    Name(String),
    Sym(char),
}

impl Tok {
    fn show(&self) -> String {
        match self {
            Tok::Num(v, _) => v.to_string(),
            Tok::Name(n) => n.clone(),
            Tok::Sym(c) => c.to_string(),
        }
    }
}

/// A number's unit: its value in base units and its dimension.
fn unit(num: &str, unit: &str) -> Result<(f64, Dim), String> {
    let whole = format!("{num}{unit}");
    let bad = |e: units::UnitError| format!("`{num} {unit}`: {e}");
    if unit.is_empty() {
        return num.parse::<f64>().map(|v| (v, NONE)).map_err(|_| format!("`{num}` is not a number"));
    }
    if unit == "%" {
        return num.parse::<f64>().map(|v| (v / 100.0, NONE)).map_err(|_| format!("`{num}` is not a number"));
    }
    if unit.ends_with("bit/s") || unit.ends_with("bps") || unit.ends_with("b/s") {
        return units::parse_rate(&whole.replace("b/s", "bit/s")).map(|v| (v as f64, RATE)).map_err(bad);
    }
    if ["s", "sec", "ms", "us", "µs", "min", "h"].contains(&unit) {
        return units::parse_duration(&whole).map(|v| (v, SECS)).map_err(bad);
    }
    if unit == "m" {
        return Err(format!("`{num}m` is ambiguous: write `{num} min` or `{num} MiB`"));
    }
    // `kb/s` is kilobits a second, so a size in `b` would read as bytes beside it: refuse it.
    if matches!(unit, "b" | "kb" | "Kb" | "mb" | "Mb" | "gb" | "Gb") {
        return Err(format!(
            "`{num} {unit}` is ambiguous: a size is bytes (`{num} {}B`, `{num} {}iB`), a rate bits a second (`{num} {unit}it/s`)",
            unit.trim_end_matches('b').to_uppercase(),
            unit.trim_end_matches('b').to_uppercase()
        ));
    }
    if unit.ends_with("bit") {
        return Err(format!("`{num}{unit}`: a rate is written with /s (`{num} {unit}/s`); a size in bytes"));
    }
    units::parse_size(&whole).map(|v| (v as f64 * 8.0, BITS)).map_err(bad)
}

fn tokens(text: &str) -> Result<Vec<Tok>, String> {
    let cs: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i];
        if c.is_whitespace() {
            i += 1;
        } else if "+-*/()×".contains(c) {
            out.push(Tok::Sym(if c == '×' { '*' } else { c }));
            i += 1;
        } else if c.is_ascii_digit() || c == '.' {
            let s = i;
            while i < cs.len()
                && (cs[i].is_ascii_digit()
                    || cs[i] == '.'
                    || (cs[i] == 'e' && cs.get(i + 1).is_some_and(|d| d.is_ascii_digit() || *d == '-' || *d == '+')))
            {
                if cs[i] == 'e' {
                    i += 1; // the exponent's sign or first digit
                }
                i += 1;
            }
            let num: String = cs[s..i].iter().collect();
            // A unit may follow, after a space or not: letters, µ, '/', '%'.
            let mut j = i;
            while j < cs.len() && cs[j] == ' ' {
                j += 1;
            }
            let u0 = j;
            while j < cs.len()
                && (cs[j].is_ascii_alphabetic() || cs[j] == 'µ' || cs[j] == '%' || (cs[j] == '/' && j > u0))
            {
                // "/" belongs to the unit only as in bit/s, b/s.
                let per_second = cs[j + 1..].starts_with(&['s'])
                    && !cs.get(j + 2).is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_');
                if cs[j] == '/' && !per_second {
                    break;
                }
                j += 1;
            }
            let u: String = cs[u0..j].iter().collect();
            // A name after a space is a variable only if it is one (`2 rtt` is not allowed:
            // write `2 * rtt`).
            let (v, d) = unit(&num, &u).map_err(|e| {
                if variable(&u).is_some() {
                    format!("`{num} {u}`: write `{num} * {u}`")
                } else {
                    e
                }
            })?;
            out.push(Tok::Num(v, d));
            i = if u.is_empty() { i } else { j };
        } else if c.is_ascii_alphabetic() || c == '_' {
            let s = i;
            while i < cs.len() && (cs[i].is_ascii_alphanumeric() || cs[i] == '_') {
                i += 1;
            }
            out.push(Tok::Name(cs[s..i].iter().collect()));
        } else {
            return Err(format!("unexpected `{c}` in `{text}`"));
        }
    }
    if out.is_empty() {
        return Err("the bound is empty".into());
    }
    Ok(out)
}

/// Deepest nesting of parentheses and signs a bound may have.
const MAX_DEPTH: usize = 32;

struct Parser {
    toks: Vec<Tok>,
    at: usize,
    /// Parentheses and signs open around the current atom.
    depth: usize,
    /// The dimension of `baseline`, when the expectation has one.
    baseline: Option<Dim>,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at)
    }
    fn sum(&mut self) -> Result<(Expr, Dim), String> {
        let (mut e, d) = self.product()?;
        while let Some(Tok::Sym(op @ ('+' | '-'))) = self.peek().cloned() {
            self.at += 1;
            let (r, rd) = self.product()?;
            if rd != d {
                return Err(format!("`{op}` between {} and {}", d.name(), rd.name()));
            }
            e = Expr::Op(op, Box::new(e), Box::new(r));
        }
        Ok((e, d))
    }
    fn product(&mut self) -> Result<(Expr, Dim), String> {
        let (mut e, mut d) = self.atom()?;
        while let Some(Tok::Sym(op @ ('*' | '/'))) = self.peek().cloned() {
            self.at += 1;
            let (r, rd) = self.atom()?;
            d = if op == '*' { d.times(rd) } else { d.over(rd) };
            e = Expr::Op(op, Box::new(e), Box::new(r));
        }
        Ok((e, d))
    }
    fn atom(&mut self) -> Result<(Expr, Dim), String> {
        let t = self.peek().cloned().ok_or("the bound ends too early")?;
        self.at += 1;
        if matches!(t, Tok::Sym('(' | '-')) {
            if self.depth >= MAX_DEPTH {
                return Err(format!("nested more than {MAX_DEPTH} deep"));
            }
            self.depth += 1;
            let r = self.atom_inner(t);
            self.depth -= 1;
            return r;
        }
        self.atom_inner(t)
    }
    fn atom_inner(&mut self, t: Tok) -> Result<(Expr, Dim), String> {
        match t {
            Tok::Num(v, d) => Ok((Expr::Num(v), d)),
            Tok::Name(n) => match variable(&n).or_else(|| self.baseline.filter(|_| n == "baseline")) {
                Some(d) => Ok((Expr::Var(n), d)),
                None if n == "baseline" => {
                    Err("`baseline` needs the expectation's `baseline` (e.g. { \"traffic.bulk.rate\" = \"off\" })"
                        .into())
                }
                None => Err(format!(
                    "unknown name `{n}` (a bound may use {})",
                    VARIABLES.iter().map(|v| v.0).collect::<Vec<_>>().join(", ")
                )),
            },
            Tok::Sym('(') => {
                let e = self.sum()?;
                match self.peek() {
                    Some(Tok::Sym(')')) => {
                        self.at += 1;
                        Ok(e)
                    }
                    _ => Err("a `(` is not closed".into()),
                }
            }
            Tok::Sym('-') => {
                let (e, d) = self.atom()?;
                Ok((Expr::Op('-', Box::new(Expr::Num(0.0)), Box::new(e)), d))
            }
            Tok::Sym(c) => Err(format!("unexpected `{c}`")),
        }
    }
}

/// What an expectation checks.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "check")]
pub enum Check {
    /// Each selected cell's metric (the median over its repeats) within bounds.
    Bounds {
        /// Lower bound, as written and parsed.
        min: Option<(String, Expr)>,
        /// Upper bound.
        max: Option<(String, Expr)>,
    },
    /// Along one axis (the other axes fixed), each next value's metric is at least (rises)
    /// or at most (falls) the previous one's, within a tolerance, until the metric reaches
    /// `until` (rises) — from there on it need only stay.
    Trend {
        /// The axis (its archive name).
        axis: String,
        /// True for rises.
        rises: bool,
        /// A relative dip (or rise) allowed between neighbours, e.g. 0.05.
        tolerance: f64,
        /// The value from which on a rise is no longer needed.
        until: Option<(String, Expr)>,
    },
}

/// One `[[expect]]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Expect {
    /// Its line in the study file.
    pub line: usize,
    /// The metric's name as written.
    pub metric_name: String,
    /// What it measures.
    pub metric: Metric,
    /// Axis (archive name) → value: the cells it is about (all when empty).
    pub select: Vec<(String, serde_json::Value)>,
    /// Axis (archive name) → value: each selected cell is compared with the cell that has
    /// this value on that axis and its own on the others; bounds name its metric `baseline`.
    /// Cells on the baseline value are the reference, not checked.
    pub baseline: Option<(String, serde_json::Value)>,
    /// The check.
    pub check: Check,
    /// Why it must hold (a seed's words, a formula's source), shown with its verdict.
    pub why: String,
    /// The seed finding it checks (`002-3`), when it checks one (`wanperf reproduce`).
    pub finding: Option<String>,
}

impl Expect {
    /// The expectation in one line, as users wrote it: `goodput ≤ 1.05 * window / rtt where
    /// streams = 1`.
    pub fn text(&self) -> String {
        let mut s = match &self.check {
            Check::Bounds { min, max } => match (min, max) {
                (Some((lo, _)), Some((hi, _))) => format!("{lo} ≤ {} ≤ {hi}", self.metric_name),
                (Some((lo, _)), None) => format!("{} ≥ {lo}", self.metric_name),
                (None, Some((hi, _))) => format!("{} ≤ {hi}", self.metric_name),
                (None, None) => self.metric_name.clone(),
            },
            Check::Trend { axis, rises, tolerance, until } => {
                let mut s = format!("{} {} with {axis}", self.metric_name, if *rises { "rises" } else { "falls" });
                if let Some((u, _)) = until {
                    s.push_str(&format!(" until {u}"));
                }
                if *tolerance > 0.0 {
                    s.push_str(&format!(" (± {:.0} %)", tolerance * 100.0));
                }
                s
            }
        };
        if !self.select.is_empty() {
            let w: Vec<String> = self.select.iter().map(|(k, v)| format!("{k} = {}", fmt_value(k, v))).collect();
            s.push_str(&format!(" where {}", w.join(", ")));
        }
        if let Some((k, v)) = &self.baseline {
            s.push_str(&format!(" (baseline: {k} = {})", fmt_value(k, v)));
        }
        s
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExpectSection {
    metric: Spanned<String>,
    #[serde(rename = "where", default)]
    select: Option<Spanned<Table>>,
    #[serde(default)]
    baseline: Option<Spanned<Table>>,
    #[serde(default)]
    min: Option<Spanned<String>>,
    #[serde(default)]
    max: Option<Spanned<String>>,
    #[serde(default)]
    rises_with: Option<Spanned<String>>,
    #[serde(default)]
    falls_with: Option<Spanned<String>>,
    #[serde(default)]
    until: Option<Spanned<String>>,
    #[serde(default)]
    tolerance: Option<Spanned<String>>,
    #[serde(default)]
    why: String,
    #[serde(default)]
    finding: Option<String>,
}

/// The configuration of every cell of a study (by index): what bounds are evaluated in.
pub type Configs = BTreeMap<u32, BTreeMap<String, f64>>;

/// A planned cell as expectations see it when the file is read.
pub struct PlannedCell {
    /// Its index.
    pub index: u32,
    /// Axis (archive name) → value, as stored.
    pub params: BTreeMap<String, serde_json::Value>,
    /// Axis → value as written.
    pub values: Vec<(String, String)>,
}

/// Parses a study's `[[expect]]` sections against its kind, its axes and its cells (one per
/// index) with their configurations, so a bound naming a value some selected cell lacks is
/// refused now, not after the run.
pub(crate) fn parse_all(
    sections: Vec<Spanned<ExpectSection>>,
    lines: &Lines<'_>,
    kind: Kind,
    study_axes: &[Axis],
    cells: &[PlannedCell],
    configs: &Configs,
) -> Result<Vec<Expect>, wanperf_toml::Error> {
    let mut out = Vec::new();
    for s in sections {
        let line = lines.of(s.span().start);
        let s = s.into_inner();
        let at = |sp: &Spanned<String>| lines.of(sp.span().start);
        let name = s.metric.get_ref().trim().to_string();
        let found = find_metric(&name);
        let Some((metric, dim, kinds)) = found else {
            return Err(err(
                at(&s.metric),
                format!(
                    "unknown metric `{name}` (one of {}, link.NAME.util, link.NAME.util_max, or rtt_STAT / rtt_loaded_STAT / goodput_STAT with STAT one of {})",
                    METRICS.iter().map(|m| m.0).collect::<Vec<_>>().join(", "),
                    STATS.iter().map(|x| x.0).collect::<Vec<_>>().join(", ")
                ),
            ));
        };
        if !kinds.contains(&kind) {
            return Err(err(at(&s.metric), format!("a {} study has no `{name}`", kind.command())));
        }
        // The cells it is about.
        let axes: Vec<String> = study_axes.iter().map(|a| param_key(&a.name)).collect();
        let mut select = Vec::new();
        if let Some(t) = s.select {
            for (key, kl, v) in crate::net::flatten(t.into_inner(), lines) {
                if !axes.contains(&key) {
                    return Err(err(
                        kl,
                        format!("`where` names `{key}`, which is not a sweep axis (axes: {})", axes.join(", ")),
                    ));
                }
                let raw = scalar(&v).ok_or_else(|| err(kl, format!("`{key}` must be a single value")))?;
                let val = normalize(&key, &raw);
                let axis = study_axes.iter().find(|a| param_key(&a.name) == key);
                if !axis.is_some_and(|a| a.values.iter().any(|x| normalize(&key, x) == val)) {
                    return Err(err(kl, format!("no cell has {key} = {raw}")));
                }
                select.push((key, val));
            }
        }
        let mut baseline = None;
        if let Some(t) = s.baseline {
            let tl = lines.of(t.span().start);
            let items = crate::net::flatten(t.into_inner(), lines);
            let [(key, kl, v)] = items.as_slice() else {
                return Err(err(tl, "`baseline` names one axis and its value (e.g. { streams = 1 })"));
            };
            if !axes.contains(key) {
                return Err(err(
                    *kl,
                    format!("`baseline` names `{key}`, which is not a sweep axis (axes: {})", axes.join(", ")),
                ));
            }
            if select.iter().any(|(k, _)| k == key) {
                return Err(err(*kl, format!("`where` fixes `{key}`, the axis the baseline is on")));
            }
            let raw = scalar(v).ok_or_else(|| err(*kl, format!("`{key}` must be a single value")))?;
            let val = normalize(key, &raw);
            let axis = study_axes.iter().find(|a| param_key(&a.name) == *key);
            if !axis.is_some_and(|a| a.values.iter().any(|x| normalize(key, x) == val)) {
                return Err(err(*kl, format!("no cell has {key} = {raw}")));
            }
            baseline = Some((key.clone(), val));
        }
        let bound = |sp: &Spanned<String>, what: &str| -> Result<(String, Expr), wanperf_toml::Error> {
            let text = sp.get_ref().trim().to_string();
            let (e, d) = parse_bound(&text, baseline.as_ref().map(|_| dim))
                .map_err(|m| err(at(sp), format!("`{what}`: {m}")))?;
            if d != dim {
                return Err(err(
                    at(sp),
                    format!("`{what} = \"{text}\"` is {}, and `{name}` is {}", d.name(), dim.name()),
                ));
            }
            Ok((text, e))
        };
        let trend = match (&s.rises_with, &s.falls_with) {
            (Some(a), None) => Some((a, true)),
            (None, Some(a)) => Some((a, false)),
            (Some(_), Some(b)) => return Err(err(at(b), "an expectation rises or falls, not both")),
            (None, None) => None,
        };
        let check = match trend {
            Some((a, rises)) => {
                if baseline.is_some() {
                    return Err(err(
                        line,
                        "a trend compares neighbouring cells itself: `baseline` goes with `min`/`max`",
                    ));
                }
                if let Some(m) = s.min.as_ref().or(s.max.as_ref()) {
                    return Err(err(at(m), "a trend (`rises_with`/`falls_with`) takes no `min` or `max`"));
                }
                let axis = a.get_ref().trim().to_string();
                if !axes.contains(&axis) {
                    return Err(err(at(a), format!("`{axis}` is not a sweep axis (axes: {})", axes.join(", "))));
                }
                if select.iter().any(|(k, _)| *k == axis) {
                    return Err(err(at(a), format!("`where` fixes `{axis}`, the axis it should change along")));
                }
                let tolerance = match &s.tolerance {
                    None => 0.0,
                    Some(t) => match parse_expr(t.get_ref()) {
                        Ok((Expr::Num(v), d)) if d == NONE && (0.0..1.0).contains(&v) => v,
                        _ => return Err(err(at(t), "`tolerance` is a fraction below 1 (e.g. `5 %` or `0.05`)")),
                    },
                };
                let until = match &s.until {
                    Some(u) if rises => Some(bound(u, "until")?),
                    Some(u) => return Err(err(at(u), "`until` goes with `rises_with`")),
                    None => None,
                };
                Check::Trend { axis, rises, tolerance, until }
            }
            None => {
                if let Some(u) = s.until.as_ref().or(s.tolerance.as_ref()) {
                    return Err(err(at(u), "`until` and `tolerance` go with `rises_with`/`falls_with`"));
                }
                let min = s.min.as_ref().map(|m| bound(m, "min")).transpose()?;
                let max = s.max.as_ref().map(|m| bound(m, "max")).transpose()?;
                if min.is_none() && max.is_none() {
                    return Err(err(line, format!("`{name}`: say `min`, `max`, `rises_with` or `falls_with`")));
                }
                Check::Bounds { min, max }
            }
        };
        let finding = s.finding.map(|f| f.trim().to_string()).filter(|f| !f.is_empty());
        let e = Expect { line, metric_name: name, metric, select, baseline, check, why: s.why, finding };
        // Every selected cell must have every value its bounds use.
        let mut vars = Vec::new();
        match &e.check {
            Check::Bounds { min, max } => {
                for (_, x) in min.iter().chain(max.iter()) {
                    x.vars(&mut vars);
                }
            }
            Check::Trend { until, .. } => {
                for (_, x) in until.iter() {
                    x.vars(&mut vars);
                }
            }
        }
        vars.retain(|v| v != "baseline");
        // `goodput` is the cell's own measurement, not its configuration.
        if vars.iter().any(|v| v == "goodput") {
            if e.metric == Metric::Goodput {
                return Err(err(line, "`goodput` bounded by itself says nothing: bound another metric by it"));
            }
            if !matches!(kind, Kind::Tput | Kind::Load | Kind::Copy) {
                return Err(err(line, format!("a {} study measures no `goodput` to bound by", kind.command())));
            }
            if matches!(e.check, Check::Trend { .. }) {
                return Err(err(line, "`until` is a configured value: `goodput` goes in `min`/`max`"));
            }
            vars.retain(|v| v != "goodput");
        }
        for cell in cells {
            if !selects(&e.select, &cell.params) {
                continue;
            }
            let config = configs.get(&cell.index).cloned().unwrap_or_default();
            if let Some(v) = vars.iter().find(|v| !config.contains_key(*v)) {
                let which: Vec<String> = cell.values.iter().map(|(k, v)| format!("{k} = {v}")).collect();
                // The line of the bound that names it.
                let bound_line = [s.min.as_ref(), s.max.as_ref(), s.until.as_ref()]
                    .into_iter()
                    .flatten()
                    .find(|b| b.get_ref().contains(v.as_str()))
                    .map_or(line, at);
                return Err(err(
                    bound_line,
                    format!(
                        "the bound uses `{v}`, which {} has no value of (set it in the study)",
                        if which.is_empty() {
                            "the study".to_string()
                        } else {
                            format!("the cell {}", which.join(", "))
                        }
                    ),
                ));
            }
        }
        out.push(e);
    }
    Ok(out)
}

/// The first of `cells` a selection as users write it picks (`streams=4 window=64K`: axis
/// values separated by spaces, all must match, as `where` matches them); the error names the
/// pair no cell has and the values its axis does have.
pub fn select_cell(run: i64, cells: &[StoredCell], selection: &str) -> Result<u32, String> {
    let mut want = Vec::new();
    for pair in selection.split_whitespace() {
        let (k, v) = pair.split_once('=').ok_or_else(|| format!("`{pair}` is not AXIS=VALUE"))?;
        let key = param_key(k.trim());
        want.push((key.clone(), normalize(&key, v.trim())));
    }
    if want.is_empty() {
        return Err("it needs AXIS=VALUE".into());
    }
    if let Some(c) = cells.iter().find(|c| selects(&want, &c.cell.params)) {
        return Ok(c.cell.index);
    }
    let (k, v) = want.iter().find(|(k, v)| !cells.iter().any(|c| c.cell.params.get(k) == Some(v))).unwrap_or(&want[0]);
    let mut have: Vec<String> = cells.iter().filter_map(|c| c.cell.params.get(k).map(|x| fmt_value(k, x))).collect();
    have.sort();
    have.dedup();
    Err(format!(
        "no cell of run {run} has {k} = {} (`{k}`: {})",
        fmt_value(k, v),
        if have.is_empty() { "not an axis of this run".to_string() } else { have.join(", ") }
    ))
}

/// A cell as a verdict names it: its values of the axes `e` does not fix (nor `skip`).
fn cell_label(axes: &[String], e: &Expect, params: &BTreeMap<String, serde_json::Value>, skip: &str) -> String {
    axes.iter()
        .filter(|a| a.as_str() != skip && !e.select.iter().any(|(k, _)| k == *a))
        .filter_map(|a| params.get(a).map(|v| format!("{a} = {}", fmt_value(a, v))))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether a cell's stored `params` hold every (axis, value) of `select` (`where`,
/// `report --series`).
pub fn selects(select: &[(String, serde_json::Value)], params: &BTreeMap<String, serde_json::Value>) -> bool {
    select.iter().all(|(k, v)| params.get(k) == Some(v))
}

/// Verdicts for the planned cells that were never stored (a run stopped or cut short): each
/// cell an expectation selects fails as not measured, so no bound is judged on part of its
/// cells without saying so. `stored`: the indices of the cells the run stored.
pub fn unmeasured(
    expects: &[Expect],
    axes: &[String],
    planned: &[PlannedCell],
    stored: &std::collections::BTreeSet<u32>,
) -> Vec<Verdict> {
    let mut out = Vec::new();
    for (i, e) in expects.iter().enumerate() {
        for c in planned.iter().filter(|c| !stored.contains(&c.index) && selects(&e.select, &c.params)) {
            let cells = cell_label(axes, e, &c.params, "");
            out.push(Verdict {
                expect: i as u32,
                line: e.line as u32,
                text: e.text(),
                cells,
                pass: false,
                unit: unit_name(e.metric.dim()).into(),
                note: "not measured: the run ended before this cell was stored".into(),
                ..Verdict::default()
            });
        }
    }
    out
}

/// A verdict's dimension, from its unit.
fn verdict_dim(v: &Verdict) -> Dim {
    unit_dim(&v.unit)
}

fn unit_dim(unit: &str) -> Dim {
    match unit {
        "bit/s" => RATE,
        "s" => SECS,
        "bit" => BITS,
        _ => NONE,
    }
}

/// A value in base units (`bit/s`, `s`, `bit` or none) as verdicts print it: `9.45 Mbit/s`.
pub fn fmt_in(unit: &str, x: f64) -> String {
    unit_dim(unit).fmt(x)
}

/// A verdict in one line: `PASS  line 14  goodput ≤ … [streams = 1]: 4.98 Mbit/s, bound
/// 5.25 Mbit/s (5.1 % inside)`.
pub fn line(v: &Verdict) -> String {
    let d = verdict_dim(v);
    let value = match (v.measured, v.bound, v.margin) {
        (Some(m), Some(b), Some(g)) => format!(
            "{}, bound {} ({:.1} % {})",
            d.fmt(m),
            d.fmt(b),
            g.abs() * 100.0,
            if g >= 0.0 { "inside" } else { "outside" }
        ),
        (Some(m), _, _) => d.fmt(m),
        _ => "nothing measured".into(),
    };
    let cells = if v.cells.is_empty() { String::new() } else { format!(" [{}]", v.cells) };
    // A check from no study file's line (reproduce's comparisons and mesh runs) has none.
    let at = if v.line > 0 { format!("line {}  ", v.line) } else { String::new() };
    format!("{}  {at}{}{cells}: {value}", if v.pass { "PASS" } else { "FAIL" }, v.text)
}

fn unit_name(d: Dim) -> &'static str {
    match (d.bit, d.sec) {
        (1, -1) => "bit/s",
        (0, 1) => "s",
        (1, 0) => "bit",
        _ => "",
    }
}

/// The median of a metric (named as in `[[expect]]`) over the stored cells whose axes have the
/// values in `select` (axis → value as written in the study), in base units with its unit name
/// (`bit/s`, `s`, …); `None` when no selected cell measured it. What `wanperf reproduce` puts
/// beside a seed's published number.
pub fn median_where(
    metric: &str,
    select: &[(String, String)],
    aggs: &[CellAggregate],
    cells: &[StoredCell],
) -> Result<Option<(f64, &'static str)>, String> {
    let m = find_metric(metric).ok_or_else(|| format!("unknown metric `{metric}`"))?.0;
    let select: Vec<(String, serde_json::Value)> = select.iter().map(|(k, v)| (k.clone(), normalize(k, v))).collect();
    let by_key: BTreeMap<(u32, u32), &StoredCell> = cells.iter().map(|c| ((c.cell.index, c.cell.repeat), c)).collect();
    let values: Vec<f64> = aggs
        .iter()
        .filter(|a| selects(&select, &a.params))
        .filter_map(|a| by_key.get(&(a.index, a.repeat)).and_then(|c| metric_value(&m, a, c, None)))
        .collect();
    Ok(median(values).map(|v| (v, unit_name(m.dim()))))
}

/// Each stored cell (one per index) with its parameters and the median of a metric (named as
/// in `[[expect]]`) over its measured repeats (`None`: none measured it), and the metric's
/// unit name. What `wanperf reproduce` compares across studies, cell by cell.
pub fn medians_by_cell<'a>(
    metric: &str,
    aggs: &'a [CellAggregate],
    cells: &[StoredCell],
) -> Result<(CellMedians<'a>, &'static str), String> {
    let m = find_metric(metric).ok_or_else(|| format!("unknown metric `{metric}`"))?.0;
    let by_key: BTreeMap<(u32, u32), &StoredCell> = cells.iter().map(|c| ((c.cell.index, c.cell.repeat), c)).collect();
    let mut out: BTreeMap<u32, (&BTreeMap<String, serde_json::Value>, Vec<f64>)> = BTreeMap::new();
    for a in aggs {
        let e = out.entry(a.index).or_insert((&a.params, Vec::new()));
        e.1.extend(by_key.get(&(a.index, a.repeat)).and_then(|c| metric_value(&m, a, c, None)));
    }
    Ok((out.into_values().map(|(p, v)| (p, median(v))).collect(), unit_name(m.dim())))
}

/// Cells' parameters with a metric's median in each ([`medians_by_cell`]).
pub type CellMedians<'a> = Vec<(&'a BTreeMap<String, serde_json::Value>, Option<f64>)>;

/// An emulator counter in the measured direction, summed over its classes and, on a network,
/// over the links of the route (`"NAME a → b"`, each link's direction from its `a` end): a
/// path cell stores `stats.up` (left → right), a network cell every link's `ab` and `ba`.
fn forward_counter(e: &serde_json::Value, key: &str) -> Option<f64> {
    let sum = |dir: &serde_json::Value| -> Option<f64> {
        Some(dir["classes"].as_object()?.values().filter_map(|c| c[key].as_f64()).sum())
    };
    if let Some(up) = e.get("stats").and_then(|s| s.get("up")) {
        return sum(up);
    }
    // Every hop of the route must be in the record: a counter summed over part of it is no sum.
    let hops = wanperf_archive::route_links(e);
    if hops.len() != e["route"].as_array()?.len() {
        return None;
    }
    hops.iter().map(|h| sum(h.dir)).sum()
}

/// A named link's utilization in a network cell's emulator record, bit/s ([`Metric::LinkUtil`]).
fn link_util(e: &serde_json::Value, name: &str, peak: bool, duration: Option<f64>) -> Option<f64> {
    let link = e["links"].as_array()?.iter().find(|l| l["name"] == name)?;
    let series = |dir: &serde_json::Value| -> Vec<f64> {
        dir["per_second_bytes"].as_array().map_or_else(Vec::new, |s| s.iter().filter_map(|b| b.as_f64()).collect())
    };
    // The measured direction where the route crosses the link, else the busier one.
    let v = match wanperf_archive::route_links(e).into_iter().find(|h| h.name == name) {
        Some(h) => series(h.dir),
        None => {
            let (ab, ba) = (series(&link["ab"]), series(&link["ba"]));
            if ab.iter().sum::<f64>() >= ba.iter().sum::<f64>() {
                ab
            } else {
                ba
            }
        }
    };
    let most = v.iter().copied().fold(0.0, f64::max);
    if peak {
        return Some(most * 8.0);
    }
    let total = v.iter().sum::<f64>() * 8.0;
    let over = match duration {
        Some(d) if d > 0.0 => d,
        _ => v.iter().filter(|b| **b > 0.0 && **b >= most / 10.0).count() as f64,
    };
    Some(if over > 0.0 { total / over } else { 0.0 })
}

/// A metric's value in one stored cell (base units), if the cell has it; `config` is the
/// cell's configuration (what [`Metric::BurstUsed`] needs the policer's rate from).
pub fn metric_value(
    metric: &Metric,
    agg: &CellAggregate,
    cell: &StoredCell,
    config: Option<&BTreeMap<String, f64>>,
) -> Option<f64> {
    if !agg.ok {
        return None;
    }
    let phase = |p: &str| agg.phases.get(p);
    // A ping study's probes carry no phase; a load study's idle ones are "unloaded".
    let idle = || phase("unloaded").or_else(|| phase(""));
    let s = &cell.cell.summary;
    match metric {
        Metric::Goodput => match cell.cell.kind.as_str() {
            "copy" => s["copy"]["rate_bytes_s"].as_f64().map(|r| r * 8.0),
            _ => agg.mean_throughput_bps,
        },
        Metric::RttIdle => idle()?.mean_ms.map(|m| m / 1e3),
        Metric::RttLoaded => phase("loaded")?.mean_ms.map(|m| m / 1e3),
        Metric::RttRise => Some((phase("loaded")?.mean_ms? - phase("unloaded")?.mean_ms?) / 1e3),
        Metric::RttMin => idle()?.min_ms.map(|m| m / 1e3),
        Metric::LossIdle => idle().filter(|p| p.sent > 0).map(|p| p.loss_pct / 100.0),
        Metric::LossLoaded => phase("loaded").filter(|p| p.sent > 0).map(|p| p.loss_pct / 100.0),
        Metric::Retransmits => Some(agg.retransmits as f64),
        Metric::Capacity => s["capacity"]["capacity"]["bps"].as_f64(),
        Metric::OwdFwdIdle | Metric::OwdFwdLoaded | Metric::OwdFwdRise => owd(s, "owd_fwd_ms", metric),
        Metric::OwdRevIdle | Metric::OwdRevLoaded | Metric::OwdRevRise => owd(s, "owd_rev_ms", metric),
        Metric::Available => s["available"]["bps"].as_f64().or_else(|| s["capacity"]["available"]["bps"].as_f64()),
        Metric::Counter(key) => forward_counter(cell.cell.emulator.as_ref()?, key),
        Metric::LinkUtil { link, peak } => {
            // The link carried the whole test: its measured duration and the --omit before it.
            let ran = config.and_then(|c| Some(c.get("duration")? + c.get("omit").copied().unwrap_or(0.0)));
            link_util(cell.cell.emulator.as_ref()?, link, *peak, ran)
        }
        Metric::RttStat { loaded, stat } => {
            // From the cell's own probes: a ping study's carry no phase, a load study's idle
            // ones are "unloaded".
            let rtts: Vec<f64> = cell
                .cell
                .probes
                .iter()
                .filter(|p| if *loaded { p.phase == "loaded" } else { p.phase == "unloaded" || p.phase.is_empty() })
                .filter_map(|p| p.rtt_ms)
                .collect();
            stat_of(&rtts, *stat).map(|ms| ms / 1e3)
        }
        Metric::GoodputStat(stat) => {
            let rates: Vec<f64> = whole_intervals(&cell.cell.intervals).map(|r| r.throughput_bps).collect();
            stat_of(&rates, *stat)
        }
        Metric::BurstUsed => {
            let rate = *config?.get("policer_rate")?;
            let mut bits = 0.0;
            let mut most: f64 = 0.0;
            for r in cell.cell.intervals.iter().filter(|r| r.stream == -1) {
                bits += r.bytes as f64 * 8.0;
                most = most.max(bits - rate * r.end_s);
            }
            Some(most)
        }
    }
}

/// One statistic of a set of values.
fn stat_of(v: &[f64], stat: Stat) -> Option<f64> {
    let x = wanperf_stats::summary::Summary::of(v)?;
    Some(match stat {
        Stat::Median => x.median,
        Stat::Iqr => x.iqr,
        Stat::Stdev => x.stdev,
        Stat::P5 => x.p5,
        Stat::P25 => x.p25,
        Stat::P75 => x.p75,
        Stat::P95 => x.p95,
        Stat::P99 => x.p99,
        Stat::Max => x.max,
        Stat::Min => x.min,
    })
}

/// A cell's all-stream interval rows, without one shorter than half the median interval (the
/// last, cut short by the test's end, says little of a rate; a last interval that ran long,
/// as one that waited for the end's tail, stays).
fn whole_intervals(rows: &[wanperf_archive::IntervalRow]) -> impl Iterator<Item = &wanperf_archive::IntervalRow> {
    let sums = rows.iter().filter(|r| r.stream == -1);
    let typical = median(sums.clone().map(|r| r.end_s - r.start_s).collect()).unwrap_or(0.0);
    sums.filter(move |r| r.end_s - r.start_s >= typical / 2.0)
}

/// A one-way delay metric from a cell's summary (a load cell's per phase, a ping's own), s:
/// the mean of the phase's one-way delays, each direction with the clock offset the probes
/// estimated (on an emulated path both hosts share one clock).
fn owd(s: &serde_json::Value, key: &str, metric: &Metric) -> Option<f64> {
    let mean = |phase: &serde_json::Value| phase[key]["avg"].as_f64().map(|ms| ms / 1e3);
    // A ping study's summary is the phase itself.
    let idle = || if s["unloaded"].is_null() { mean(s) } else { mean(&s["unloaded"]) };
    match metric {
        Metric::OwdFwdIdle | Metric::OwdRevIdle => idle(),
        Metric::OwdFwdLoaded | Metric::OwdRevLoaded => mean(&s["loaded"]),
        _ => Some(mean(&s["loaded"])? - idle()?),
    }
}

/// The median of `g`'s baseline cell: the one with `value` on `axis` and `g`'s values on
/// every other axis.
fn baseline_of(groups: &BTreeMap<u32, Group<'_>>, g: &Group<'_>, axis: &str, value: &serde_json::Value) -> Option<f64> {
    let twin = groups.values().find(|o| {
        o.params.get(axis) == Some(value) && g.params.iter().all(|(k, v)| k == axis || o.params.get(k) == Some(v))
    })?;
    median(twin.values.clone())
}

/// A group's median judged against its bounds.
struct Judged {
    measured: f64,
    /// The nearer bound.
    bound: f64,
    /// The margin to it, as a fraction of it.
    margin: f64,
    /// Whether every bound holds.
    pass: bool,
}

/// A group's median against bounds evaluated in `config`, or why it cannot be judged (with
/// what was measured, if anything).
fn within(
    g: &Group<'_>,
    config: &BTreeMap<String, f64>,
    min: Option<&(String, Expr)>,
    max: Option<&(String, Expr)>,
) -> Result<Judged, (Option<f64>, String)> {
    let m = median(g.values.clone()).ok_or((None, "every repeat failed".to_string()))?;
    let eval = |b: Option<&(String, Expr)>| b.map(|(_, x)| x.eval(config)).transpose();
    let (lo, hi) = match (eval(min), eval(max)) {
        (Ok(lo), Ok(hi)) => (lo, hi),
        (Err(v), _) | (_, Err(v)) => return Err((Some(m), format!("no `{v}` in this cell"))),
    };
    // A bound that divides by a zero (`window / rtt` on a path without delay) bounds nothing:
    // that is not a pass.
    if lo.into_iter().chain(hi).any(|b| !b.is_finite()) {
        let note = "the bound is not a finite number in this cell (a value it divides by is 0)";
        return Err((Some(m), note.to_string()));
    }
    // Margin to each bound, as a fraction of it; the nearer bound is reported.
    let rel = |d: f64, b: f64| {
        if b.abs() > 0.0 {
            d / b.abs()
        } else if d == 0.0 {
            0.0
        } else {
            d.signum() * 1e9
        }
    };
    let mut cands = Vec::new();
    if let Some(b) = lo {
        cands.push((b, rel(m - b, b), m >= b));
    }
    if let Some(b) = hi {
        cands.push((b, rel(b - m, b), m <= b));
    }
    let pass = cands.iter().all(|c| c.2);
    let (b, margin, _) = cands.into_iter().min_by(|x, y| x.1.total_cmp(&y.1)).expect("a bounds check has min or max");
    Ok(Judged { measured: m, bound: b, margin, pass })
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// A cell group on a trend's axis: its value there, its index, the group.
type Point<'g, 'a> = (f64, u32, &'g Group<'a>);

/// A stored cell group (one index, its repeats): what an expectation is evaluated on.
struct Group<'a> {
    params: &'a BTreeMap<String, serde_json::Value>,
    values: Vec<f64>,
    failed: usize,
    /// Its repeats' goodput (what a bound's `goodput` is).
    goodput: Vec<f64>,
}

/// Evaluates every expectation over a run's stored cells (`aggs` and `cells` matched by
/// (index, repeat)). `configs` is each cell index's
/// configuration. A cell's value is the median over its measured repeats; a selected cell
/// with no measured value fails its expectation (nothing measured is not a pass).
pub fn evaluate(
    expects: &[Expect],
    axes: &[String],
    aggs: &[CellAggregate],
    cells: &[StoredCell],
    configs: &Configs,
) -> Vec<Verdict> {
    let by_key: BTreeMap<(u32, u32), &StoredCell> = cells.iter().map(|c| ((c.cell.index, c.cell.repeat), c)).collect();
    let mut out = Vec::new();
    for (i, e) in expects.iter().enumerate() {
        let dim = e.metric.dim();
        let mut groups: BTreeMap<u32, Group<'_>> = BTreeMap::new();
        for a in aggs {
            if !selects(&e.select, &a.params) {
                continue;
            }
            let Some(c) = by_key.get(&(a.index, a.repeat)) else { continue };
            let g = groups.entry(a.index).or_insert(Group {
                params: &a.params,
                values: Vec::new(),
                failed: 0,
                goodput: Vec::new(),
            });
            match metric_value(&e.metric, a, c, configs.get(&a.index)) {
                Some(v) => g.values.push(v),
                None => g.failed += 1,
            }
            g.goodput.extend(metric_value(&Metric::Goodput, a, c, None));
        }
        let label = |p: &BTreeMap<String, serde_json::Value>, skip: &str| cell_label(axes, e, p, skip);
        let verdict = |cells: String, pass: bool, measured, bound, margin, note: String| Verdict {
            expect: i as u32,
            line: e.line as u32,
            text: e.text(),
            cells,
            pass,
            measured,
            bound,
            margin,
            unit: unit_name(dim).into(),
            note: [e.why.as_str(), note.as_str()]
                .iter()
                .filter(|s| !s.is_empty())
                .cloned()
                .collect::<Vec<_>>()
                .join(" — "),
        };
        if groups.is_empty() {
            out.push(verdict(String::new(), false, None, None, None, "no stored cell is selected".into()));
            continue;
        }
        // A link the network does not have is a mistake in the file, not a failed cell.
        if let Metric::LinkUtil { link, .. } = &e.metric {
            let links = cells.iter().find_map(|c| c.cell.emulator.as_ref()?["links"].as_array());
            if !links.is_some_and(|l| l.iter().any(|x| x["name"] == link.as_str())) {
                let note = format!("no cell's network has a link `{link}`");
                out.push(verdict(String::new(), false, None, None, None, note));
                continue;
            }
        }
        let repeats_note = |g: &Group<'_>| match (g.values.len(), g.failed) {
            (_, 0) | (0, _) => String::new(),
            (n, f) => format!("median of {n} repeats; {f} failed"),
        };
        match &e.check {
            Check::Bounds { min, max } => {
                for (idx, g) in &groups {
                    let mut config = configs.get(idx).cloned().unwrap_or_default();
                    if let Some(gp) = median(g.goodput.clone()) {
                        config.insert("goodput".into(), gp);
                    }
                    if let Some((axis, value)) = &e.baseline {
                        // The baseline's own cells are the reference, not checked.
                        if g.params.get(axis) == Some(value) {
                            continue;
                        }
                        let Some(b) = baseline_of(&groups, g, axis, value) else {
                            let note = format!(
                                "its baseline cell ({axis} = {}) has no measured value",
                                fmt_value(axis, value)
                            );
                            out.push(verdict(label(g.params, ""), false, median(g.values.clone()), None, None, note));
                            continue;
                        };
                        config.insert("baseline".into(), b);
                    }
                    out.push(match within(g, &config, min.as_ref(), max.as_ref()) {
                        Ok(j) => verdict(
                            label(g.params, ""),
                            j.pass,
                            Some(j.measured),
                            Some(j.bound),
                            Some(j.margin),
                            repeats_note(g),
                        ),
                        Err((m, note)) => verdict(label(g.params, ""), false, m, None, None, note),
                    });
                }
            }
            Check::Trend { axis, rises, tolerance, until } => {
                // Lines along the axis: the other axes' values fixed.
                // (In the study's order of cells.)
                let mut lines: Vec<(String, Vec<Point<'_, '_>>)> = Vec::new();
                for (idx, g) in &groups {
                    let x = g.params.get(axis).and_then(serde_json::Value::as_f64).unwrap_or(f64::NAN);
                    let key = label(g.params, axis);
                    match lines.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, pts)) => pts.push((x, *idx, g)),
                        None => lines.push((key, vec![(x, *idx, g)])),
                    }
                }
                for (rest, mut pts) in lines {
                    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                    // One value along the axis is no trend: nothing checked is not a pass.
                    if pts.len() < 2 {
                        out.push(verdict(
                            rest,
                            false,
                            None,
                            None,
                            None,
                            format!("fewer than two stored values of `{axis}` along this line"),
                        ));
                        continue;
                    }
                    let at = |g: &Group<'_>| g.params.get(axis).map_or("?".to_string(), |v| fmt_value(axis, v));
                    for w in pts.windows(2) {
                        let ((_, ia, ga), (_, _, gb)) = (w[0], w[1]);
                        let step = format!(
                            "{axis} {} → {}{}",
                            at(ga),
                            at(gb),
                            if rest.is_empty() { String::new() } else { format!(", {rest}") }
                        );
                        let (Some(a), Some(b)) = (median(ga.values.clone()), median(gb.values.clone())) else {
                            out.push(verdict(
                                step,
                                false,
                                None,
                                None,
                                None,
                                "a cell of this step has no measured value".into(),
                            ));
                            continue;
                        };
                        if let Some((_, u)) = until {
                            let config = configs.get(&ia).cloned().unwrap_or_default();
                            if let Ok(lim) = u.eval(&config) {
                                if a >= lim {
                                    // Already there: the rise is no longer needed, only that it stays.
                                    let floor = lim - tolerance * lim.abs();
                                    out.push(verdict(
                                        step,
                                        b >= floor,
                                        Some(b),
                                        Some(floor),
                                        Some((b - floor) / floor.abs().max(f64::MIN_POSITIVE)),
                                        "reached `until`: holds if it stays there".into(),
                                    ));
                                    continue;
                                }
                            }
                        }
                        // The tolerance is a share of the previous value's size, whatever its sign
                        // (a rise near 0 can be slightly negative).
                        let (bound, pass, margin) = if *rises {
                            let f = a - tolerance * a.abs();
                            (f, b >= f, (b - f) / f.abs().max(f64::MIN_POSITIVE))
                        } else {
                            let c = a + tolerance * a.abs();
                            (c, b <= c, (c - b) / c.abs().max(f64::MIN_POSITIVE))
                        };
                        out.push(verdict(step, pass, Some(b), Some(bound), Some(margin), String::new()));
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn bounds_carry_units_and_refuse_mixed_dimensions() {
        let (e, d) = parse_expr("1.05 * window / rtt").unwrap();
        assert_eq!(d, RATE);
        // 64 KiB over 100 ms: 5.24 Mbit/s, × 1.05.
        let v = e.eval(&cfg(&[("window", 65536.0 * 8.0), ("rtt", 0.1)])).unwrap();
        assert!((v - 1.05 * 65536.0 * 8.0 / 0.1).abs() < 1e-6, "{v}");
        let (e, d) = parse_expr("queue / rate + 2 ms").unwrap();
        assert_eq!(d, SECS);
        assert!((e.eval(&cfg(&[("queue", 8e6), ("rate", 1e8)])).unwrap() - 0.082).abs() < 1e-12);
        assert_eq!(parse_expr("10 Mbit/s").unwrap(), (Expr::Num(1e7), RATE));
        assert_eq!(parse_expr("64K").unwrap(), (Expr::Num(65536.0 * 8.0), BITS));
        assert_eq!(parse_expr("5 %").unwrap(), (Expr::Num(0.05), NONE));
        assert_eq!(parse_expr("250us").unwrap().1, SECS);
        assert_eq!(parse_expr("2 × (rtt + 1 s)").unwrap().1, SECS);
        assert_eq!(parse_expr("-1 ms + rtt").unwrap().1, SECS);
        for (bad, says) in [
            ("window + rtt", "between a size and a time"),
            ("2 rtt", "write `2 * rtt`"),
            ("5m", "ambiguous"),
            ("10 Mbit", "/s"),
            ("speed", "unknown name `speed`"),
            ("(rtt", "not closed"),
            ("rtt rtt", "unexpected `rtt`"),
            ("", "empty"),
            ("rtt $", "unexpected `$`"),
        ] {
            let e = parse_expr(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn a_verdict_line_states_value_bound_and_margin_in_units() {
        let v = Verdict {
            expect: 0,
            line: 12,
            text: "goodput ≤ 1.05 * window / rtt".into(),
            cells: "streams = 1".into(),
            pass: true,
            measured: Some(5e6),
            bound: Some(5.5e6),
            margin: Some(0.5 / 5.5),
            unit: "bit/s".into(),
            note: String::new(),
        };
        assert_eq!(
            line(&v),
            "PASS  line 12  goodput ≤ 1.05 * window / rtt [streams = 1]: 5.00 Mbit/s, bound 5.50 Mbit/s (9.1 % inside)"
        );
    }

    #[test]
    fn counters_are_summed_along_the_measured_direction() {
        let cls = |q: u64, p: u64| serde_json::json!({"classes": {"best_effort": {"queue_drops": q, "policer_drops": p}, "priority": {"queue_drops": 1, "policer_drops": 0}}});
        let path = serde_json::json!({"stats": {"up": cls(5, 7), "down": cls(100, 100)}});
        assert_eq!(forward_counter(&path, "queue_drops"), Some(6.0));
        assert_eq!(forward_counter(&path, "policer_drops"), Some(7.0));
        // A route slac → gw → cern over links written a→b and b→a.
        let net = serde_json::json!({
            "route": ["l1 slac → gw", "l2 gw → cern"],
            "links": [
                {"name": "l1", "a": "slac", "b": "gw", "ab": cls(2, 0), "ba": cls(50, 0)},
                {"name": "l2", "a": "cern", "b": "gw", "ab": cls(60, 0), "ba": cls(3, 4)},
                {"name": "l3", "a": "gw", "b": "x", "ab": cls(70, 70), "ba": cls(70, 70)}
            ]
        });
        assert_eq!(forward_counter(&net, "queue_drops"), Some(2.0 + 1.0 + 3.0 + 1.0));
        assert_eq!(forward_counter(&net, "policer_drops"), Some(4.0));
        assert_eq!(forward_counter(&serde_json::json!({"idle": []}), "queue_drops"), None);
    }
}
