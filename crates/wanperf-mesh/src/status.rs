//! Baselines, the status of one value, and the grid's callouts.
//!
//! Each pair's new values are judged twice: against the fixed thresholds of its
//! [`Expect`](crate::config::Expect) (a broken one is always [`Status::Bad`]), and against
//! the pair's own history summarized as a robust [`Baseline`] (median and scaled MAD), so a
//! path that is always 150 ms away is fine at 150 ms and a path that is always 2 ms away is
//! not. [`callouts`] then reads the grid as a whole: a row or column that is bad while the rest
//! is fine points at a host (or a site), not at many paths.

use crate::config::Expect;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use wanperf_stats::summary::median_mad;

/// What a value measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// Throughput, bit/s (higher is better).
    Throughput,
    /// Loss, a fraction (lower is better).
    Loss,
    /// Round-trip time, ms (lower is better).
    Rtt,
    /// The agent itself: its results arrive or not (the metric of silent/back events).
    Agent,
    /// The path's hops (the metric of route-change events).
    Route,
    /// The narrow link's capacity, bit/s (`wanperf capacity`).
    Capacity,
}

/// How a value looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Within thresholds and near its baseline.
    Ok,
    /// Worse than usual.
    Warn,
    /// Breaks a threshold, or far worse than usual.
    Bad,
    /// Nothing to judge it against (or no value).
    Unknown,
}

/// A pair's usual level of one metric.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// Values it was computed from.
    pub n: usize,
    /// Their median.
    pub median: f64,
    /// Their median absolute deviation from the median, × 1.4826 (the standard deviation of
    /// normal data).
    pub mad: f64,
}

/// The baseline of a history: `None` with fewer than 5 finite values. Values that are not
/// finite are ignored.
pub fn baseline(history: &[f64]) -> Option<Baseline> {
    let n = history.iter().filter(|x| x.is_finite()).count();
    if n < 5 {
        return None;
    }
    let (median, mad) = median_mad(history)?;
    Some(Baseline { n, median, mad })
}

/// The status of one new `value` of `metric` for a pair.
///
/// The rule, in order (m = the baseline's median, d = its MAD):
/// 1. A value that is not finite, or of [`Metric::Agent`], [`Metric::Route`] or
///    [`Metric::Capacity`] (not a grid metric), is `Unknown`.
/// 2. A broken fixed threshold of `expect` is `Bad`: throughput `< throughput_min`, loss
///    `> loss_max`, RTT `> rtt_max_ms`.
/// 3. Without a baseline: `Ok` if the expect has a threshold for this metric (and it held),
///    otherwise `Unknown`.
/// 4. Against the baseline (comparisons strict, so a value exactly at a limit is the better
///    status):
///    - throughput (lower is worse): `Bad` if `value < m − max(4d, 0.3m)`, else `Warn` if
///      `value < m − max(2d, 0.15m)`, else `Ok`;
///    - RTT, ms (higher is worse): `Bad` if `value > m + max(4d, 0.25m, 1)`, else `Warn` if
///      `value > m + max(2d, 0.1m, 0.5)`, else `Ok`;
///    - loss (higher is worse): `Bad` if `value − m > max(0.02, 4d)`, else `Warn` if
///      `value − m > max(0.005, 2d)`, else `Ok`.
pub fn classify(metric: Metric, value: f64, base: Option<&Baseline>, expect: &Expect) -> Status {
    if !value.is_finite() {
        return Status::Unknown;
    }
    let broken = match metric {
        Metric::Throughput => expect.throughput_min.map(|t| value < t),
        Metric::Loss => expect.loss_max.map(|t| value > t),
        Metric::Rtt => expect.rtt_max_ms.map(|t| value > t),
        Metric::Agent | Metric::Route | Metric::Capacity => return Status::Unknown,
    };
    if broken == Some(true) {
        return Status::Bad;
    }
    let Some(b) = base else {
        return if broken.is_some() { Status::Ok } else { Status::Unknown };
    };
    let (m, d) = (b.median, b.mad);
    let (bad, warn) = match metric {
        Metric::Throughput => (value < m - (4.0 * d).max(0.3 * m), value < m - (2.0 * d).max(0.15 * m)),
        Metric::Rtt => (value > m + (4.0 * d).max(0.25 * m).max(1.0), value > m + (2.0 * d).max(0.1 * m).max(0.5)),
        Metric::Loss => (value - m > (4.0 * d).max(0.02), value - m > (2.0 * d).max(0.005)),
        Metric::Agent | Metric::Route | Metric::Capacity => (false, false),
    };
    if bad {
        Status::Bad
    } else if warn {
        Status::Warn
    } else {
        Status::Ok
    }
}

/// One cell of the grid: a pair's status (of whatever metric the grid shows).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// Source host (the row).
    pub src: String,
    /// Destination host (the column).
    pub dst: String,
    /// Its status.
    pub status: Status,
}

/// What a callout points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CalloutKind {
    /// A source host: its paths out are bad.
    Row,
    /// A destination host: its paths in are bad.
    Column,
    /// Every host of a site.
    Site,
}

/// A pattern in the grid that points at a host or a site rather than at paths.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Callout {
    /// Row, column or site.
    pub kind: CalloutKind,
    /// The host (row, column) or the site.
    pub name: String,
    /// Bad cells in it.
    pub bad: usize,
    /// Cells in it with a known status.
    pub of: usize,
    /// One line for people.
    pub text: String,
}

#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    n: usize,
    bad: usize,
    warn: usize,
}

impl Tally {
    fn of<'a>(cells: impl Iterator<Item = &'a Cell>) -> Tally {
        let mut t = Tally::default();
        for c in cells {
            match c.status {
                Status::Unknown => continue,
                Status::Bad => t.bad += 1,
                Status::Warn => t.warn += 1,
                Status::Ok => {}
            }
            t.n += 1;
        }
        t
    }

    /// ≥ 75 % bad, or ≥ 75 % warn or bad with at least half bad (no minimum size).
    fn mostly_bad(&self) -> bool {
        self.n > 0
            && (4 * self.bad >= 3 * self.n || (4 * (self.bad + self.warn) >= 3 * self.n && 2 * self.bad >= self.n))
    }

    /// Less than 25 % bad (or empty).
    fn mostly_fine(&self) -> bool {
        4 * self.bad < self.n || self.n == 0
    }
}

/// Whether a line (row or column of a set of hosts) stands out: at least 3 known cells,
/// mostly bad, and the cells touching none of the hosts mostly fine.
fn stands_out(cells: &[Cell], line: impl Fn(&Cell) -> bool, touches: impl Fn(&Cell) -> bool) -> Option<Tally> {
    let t = Tally::of(cells.iter().filter(|c| line(c)));
    (t.n >= 3 && t.mostly_bad() && Tally::of(cells.iter().filter(|c| !touches(c))).mostly_fine()).then_some(t)
}

fn src_of(c: &Cell) -> &str {
    &c.src
}

fn dst_of(c: &Cell) -> &str {
    &c.dst
}

fn degraded(t: &Tally) -> String {
    if t.warn > 0 {
        format!(" and {} degraded", t.warn)
    } else {
        String::new()
    }
}

/// The grid's callouts: rows, columns and sites whose cells are mostly bad while the rest of
/// the grid is mostly fine.
///
/// Only cells with a known status count (`Unknown` cells are left out everywhere). A line is
/// *mostly bad* when ≥ 75 % of its cells are `Bad`, or ≥ 75 % are `Warn` or `Bad` with at
/// least half `Bad`; the rest of the grid is *mostly fine* when < 25 % of the cells outside
/// the line's hosts (neither source nor destination among them) are `Bad` (or there are none).
/// - A **row** (all cells with source h) or a **column** (destination h) is called out when
///   it has at least 3 cells, is mostly bad, and the cells touching neither h are mostly fine.
/// - A **site** (hosts grouped by `sites(host)`; only sites with at least 2 hosts in the
///   grid) is called out, once, instead of its hosts' rows and columns, when every one of
///   its hosts is called out, or when, for its rows (sources in the site) or its columns
///   (destinations in the site): each of its hosts with cells there is mostly bad on its own,
///   the site's cells there (at least 3) are mostly bad, and the cells touching none of its
///   hosts are mostly fine. Its `bad`/`of` count the cells of the direction(s) that qualified.
///
/// Ordered by kind (sites, rows, columns), then name.
pub fn callouts(cells: &[Cell], sites: &dyn Fn(&str) -> Option<String>) -> Vec<Callout> {
    let srcs: BTreeSet<&str> = cells.iter().map(|c| c.src.as_str()).collect();
    let dsts: BTreeSet<&str> = cells.iter().map(|c| c.dst.as_str()).collect();
    let mut rows: BTreeMap<&str, Tally> = BTreeMap::new();
    let mut cols: BTreeMap<&str, Tally> = BTreeMap::new();
    for &h in &srcs {
        if let Some(t) = stands_out(cells, |c| c.src == h, |c| c.src == h || c.dst == h) {
            rows.insert(h, t);
        }
    }
    for &h in &dsts {
        if let Some(t) = stands_out(cells, |c| c.dst == h, |c| c.src == h || c.dst == h) {
            cols.insert(h, t);
        }
    }

    let mut by_site: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    for &h in srcs.union(&dsts) {
        if let Some(s) = sites(h) {
            by_site.entry(s).or_default().insert(h);
        }
    }
    let mut out = Vec::new();
    let mut covered: BTreeSet<&str> = BTreeSet::new();
    for (site, hosts) in by_site.iter().filter(|(_, h)| h.len() >= 2) {
        let inside = |h: &str| hosts.contains(h);
        let touches = |c: &Cell| inside(&c.src) || inside(&c.dst);
        // One direction of the site: `end` picks the host a cell belongs to (src or dst).
        let direction = |end: fn(&Cell) -> &str| {
            let each: Vec<Tally> =
                hosts.iter().map(|&h| Tally::of(cells.iter().filter(|c| end(c) == h))).filter(|t| t.n > 0).collect();
            each.len() >= 2
                && each.iter().all(Tally::mostly_bad)
                && stands_out(cells, |c| inside(end(c)), touches).is_some()
        };
        let all_called = hosts.iter().all(|h| rows.contains_key(h) || cols.contains_key(h));
        let (from, to) = (direction(src_of), direction(dst_of));
        if !(all_called || from || to) {
            continue;
        }
        let (from, to) = if from || to {
            (from, to)
        } else {
            (hosts.iter().any(|h| rows.contains_key(h)), hosts.iter().any(|h| cols.contains_key(h)))
        };
        let t = Tally::of(cells.iter().filter(|c| (from && inside(&c.src)) || (to && inside(&c.dst))));
        let way = match (from, to) {
            (true, true) => "to and from",
            (true, false) => "from",
            _ => "to",
        };
        let names = hosts.iter().copied().collect::<Vec<_>>().join(", ");
        out.push(Callout {
            kind: CalloutKind::Site,
            name: site.clone(),
            bad: t.bad,
            of: t.n,
            text: format!(
                "site {site}: {} of {} paths {way} its hosts ({names}) are bad{} — a site problem, not a path problem",
                t.bad,
                t.n,
                degraded(&t)
            ),
        });
        covered.extend(hosts.iter().copied());
    }
    for (kind, map, way) in [(CalloutKind::Row, &rows, "from"), (CalloutKind::Column, &cols, "to")] {
        for (&h, t) in map.iter().filter(|(h, _)| !covered.contains(*h)) {
            out.push(Callout {
                kind,
                name: h.to_string(),
                bad: t.bad,
                of: t.n,
                text: format!(
                    "{h}: {} of {} paths {way} {h} are bad{} — a host or site problem, not a path problem",
                    t.bad,
                    t.n,
                    degraded(t)
                ),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thresholds(t: Option<f64>, l: Option<f64>, r: Option<f64>) -> Expect {
        Expect { throughput_min: t, loss_max: l, rtt_max_ms: r, ..Expect::default() }
    }

    #[test]
    fn baselines_need_five_finite_values() {
        assert_eq!(baseline(&[1.0, 2.0, 3.0, 4.0, f64::NAN]), None);
        let b = baseline(&[1.0, 2.0, 3.0, 4.0, 100.0, f64::INFINITY]).unwrap();
        assert_eq!((b.n, b.median), (5, 3.0));
        // |x − 3| = 2, 1, 0, 1, 97 → median 1.
        assert!((b.mad - 1.4826).abs() < 1e-12);
        assert_eq!(baseline(&[7.0; 5]).unwrap().mad, 0.0);
    }

    #[test]
    fn classify_throughput_boundaries() {
        let none = Expect::default();
        let b = Baseline { n: 20, median: 100.0, mad: 5.0 };
        let c = |v| classify(Metric::Throughput, v, Some(&b), &none);
        // max(4·5, 30) = 30 → bad below 70; max(2·5, 15) = 15 → warn below 85.
        assert_eq!(c(70.0), Status::Warn);
        assert_eq!(c(69.999), Status::Bad);
        assert_eq!(c(85.0), Status::Ok);
        assert_eq!(c(84.999), Status::Warn);
        assert_eq!(c(500.0), Status::Ok);
        // A wide MAD widens the bands: max(4·10, 30) = 40.
        let wide = Baseline { mad: 10.0, ..b };
        assert_eq!(classify(Metric::Throughput, 65.0, Some(&wide), &none), Status::Warn);
        // A fixed threshold wins over a good baseline.
        let e = thresholds(Some(110.0), None, None);
        assert_eq!(classify(Metric::Throughput, 100.0, Some(&b), &e), Status::Bad);
        assert_eq!(classify(Metric::Throughput, 110.0, None, &e), Status::Ok);
        assert_eq!(classify(Metric::Throughput, 100.0, None, &none), Status::Unknown);
        assert_eq!(classify(Metric::Throughput, f64::NAN, Some(&b), &e), Status::Unknown);
    }

    #[test]
    fn classify_rtt_boundaries() {
        let none = Expect::default();
        let b = Baseline { n: 20, median: 100.0, mad: 2.0 };
        let c = |v| classify(Metric::Rtt, v, Some(&b), &none);
        // bad above 100 + max(8, 25, 1) = 125; warn above 100 + max(4, 10, 0.5) = 110.
        assert_eq!(c(125.0), Status::Warn);
        assert_eq!(c(125.001), Status::Bad);
        assert_eq!(c(110.0), Status::Ok);
        assert_eq!(c(110.001), Status::Warn);
        assert_eq!(c(50.0), Status::Ok);
        // On a 1 ms path the floors apply: bad above 2 ms, warn above 1.5 ms.
        let lan = Baseline { n: 20, median: 1.0, mad: 0.01 };
        assert_eq!(classify(Metric::Rtt, 1.5, Some(&lan), &none), Status::Ok);
        assert_eq!(classify(Metric::Rtt, 1.6, Some(&lan), &none), Status::Warn);
        assert_eq!(classify(Metric::Rtt, 2.01, Some(&lan), &none), Status::Bad);
        let e = thresholds(None, None, Some(105.0));
        assert_eq!(classify(Metric::Rtt, 105.0, Some(&b), &e), Status::Ok);
        assert_eq!(classify(Metric::Rtt, 105.1, Some(&b), &e), Status::Bad);
        assert_eq!(classify(Metric::Rtt, 105.1, None, &thresholds(Some(1.0), Some(0.1), None)), Status::Unknown);
    }

    #[test]
    fn classify_loss_boundaries() {
        let none = Expect::default();
        let b = Baseline { n: 20, median: 0.0, mad: 0.0 };
        let c = |v| classify(Metric::Loss, v, Some(&b), &none);
        assert_eq!(c(0.005), Status::Ok);
        assert_eq!(c(0.0051), Status::Warn);
        assert_eq!(c(0.02), Status::Warn);
        assert_eq!(c(0.0201), Status::Bad);
        // A lossy baseline: m = 0.05, d = 0.01 → bad above 0.05 + 0.04, warn above 0.05 + 0.02.
        let lossy = Baseline { n: 20, median: 0.05, mad: 0.01 };
        assert_eq!(classify(Metric::Loss, 0.08, Some(&lossy), &none), Status::Warn);
        assert_eq!(classify(Metric::Loss, 0.095, Some(&lossy), &none), Status::Bad);
        assert_eq!(classify(Metric::Loss, 0.06, Some(&lossy), &none), Status::Ok);
        let e = thresholds(None, Some(0.01), None);
        assert_eq!(classify(Metric::Loss, 0.011, None, &e), Status::Bad);
        assert_eq!(classify(Metric::Loss, 0.01, None, &e), Status::Ok);
        assert_eq!(classify(Metric::Agent, 1.0, Some(&b), &e), Status::Unknown);
    }

    /// A full mesh of `hosts` with the status each pair gets from `f`.
    fn grid(hosts: &[&str], mut f: impl FnMut(&str, &str) -> Status) -> Vec<Cell> {
        let mut v = Vec::new();
        for s in hosts {
            for d in hosts {
                if s != d {
                    v.push(Cell { src: s.to_string(), dst: d.to_string(), status: f(s, d) });
                }
            }
        }
        v
    }

    fn site(h: &str) -> Option<String> {
        Some(h.trim_end_matches(|c: char| c.is_ascii_digit()).to_string())
    }

    const SIX: [&str; 6] = ["slac1", "cern1", "in2p3", "fnal1", "desy1", "ral1"];

    #[test]
    fn a_bad_row_is_called_out() {
        let cells = grid(&SIX, |s, _| if s == "cern1" { Status::Bad } else { Status::Ok });
        let c = callouts(&cells, &site);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!((c[0].kind, c[0].name.as_str(), c[0].bad, c[0].of), (CalloutKind::Row, "cern1", 5, 5));
        assert_eq!(c[0].text, "cern1: 5 of 5 paths from cern1 are bad — a host or site problem, not a path problem");
        // Warn counts with at least half bad; unknown cells do not count at all.
        let cells = grid(&SIX, |s, d| match (s, d) {
            ("cern1", "slac1" | "in2p3" | "fnal1") => Status::Bad,
            ("cern1", "desy1") => Status::Warn,
            ("cern1", _) => Status::Unknown,
            _ => Status::Ok,
        });
        let c = callouts(&cells, &site);
        assert_eq!((c.len(), c[0].bad, c[0].of), (1, 3, 4));
        assert!(c[0].text.contains("3 of 4 paths from cern1 are bad and 1 degraded"), "{}", c[0].text);
        let cells = grid(&SIX, |s, d| match (s, d) {
            ("cern1", "slac1") => Status::Bad,
            ("cern1", _) => Status::Warn,
            _ => Status::Ok,
        });
        assert!(callouts(&cells, &site).is_empty());
    }

    #[test]
    fn a_bad_column_is_called_out() {
        let cells = grid(&SIX, |_, d| if d == "desy1" { Status::Bad } else { Status::Ok });
        let c = callouts(&cells, &site);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!((c[0].kind, c[0].name.as_str(), c[0].bad, c[0].of), (CalloutKind::Column, "desy1", 5, 5));
        assert_eq!(c[0].text, "desy1: 5 of 5 paths to desy1 are bad — a host or site problem, not a path problem");
        // A host bad both ways gets both callouts, rows first.
        let cells = grid(&SIX, |s, d| if s == "ral1" || d == "ral1" { Status::Bad } else { Status::Ok });
        let c: Vec<(CalloutKind, String)> = callouts(&cells, &site).into_iter().map(|c| (c.kind, c.name)).collect();
        assert_eq!(c, [(CalloutKind::Row, "ral1".to_string()), (CalloutKind::Column, "ral1".to_string())]);
    }

    #[test]
    fn a_bad_site_is_one_callout() {
        let hosts = ["slac1", "cern1", "cern2", "in2p3", "fnal1", "desy1", "ral1", "bnl1"];
        let cern = |h: &str| h.starts_with("cern");
        let cells = grid(&hosts, |s, d| if cern(s) || cern(d) { Status::Bad } else { Status::Ok });
        let c = callouts(&cells, &site);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!((c[0].kind, c[0].name.as_str(), c[0].bad, c[0].of), (CalloutKind::Site, "cern", 26, 26));
        assert_eq!(
            c[0].text,
            "site cern: 26 of 26 paths to and from its hosts (cern1, cern2) are bad — a site problem, not a path problem"
        );
        // Only the way out: one site callout "from".
        let cells = grid(&hosts, |s, _| if cern(s) { Status::Bad } else { Status::Ok });
        let c = callouts(&cells, &site);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!((c[0].kind, c[0].bad, c[0].of), (CalloutKind::Site, 14, 14));
        assert!(c[0].text.contains("paths from its hosts"), "{}", c[0].text);
        // One host of the site bad: a row, not the site.
        let cells = grid(&hosts, |s, _| if s == "cern2" { Status::Bad } else { Status::Ok });
        let c = callouts(&cells, &site);
        assert_eq!((c.len(), c[0].kind, c[0].name.as_str()), (1, CalloutKind::Row, "cern2"));
    }

    #[test]
    fn scattered_bad_cells_are_no_callout() {
        let mut n = 0;
        let cells = grid(&SIX, |_, _| {
            n += 1;
            if n % 4 == 0 {
                Status::Bad
            } else {
                Status::Ok
            }
        });
        assert!(cells.iter().any(|c| c.status == Status::Bad));
        assert!(callouts(&cells, &site).is_empty());
        // Everything bad is a network problem, not a host one.
        let cells = grid(&SIX, |_, _| Status::Bad);
        assert!(callouts(&cells, &site).is_empty());
        // Too few cells.
        let cells = grid(&["a1", "b1"], |_, _| Status::Bad);
        assert!(callouts(&cells, &site).is_empty());
        assert!(callouts(&[], &site).is_empty());
    }
}
