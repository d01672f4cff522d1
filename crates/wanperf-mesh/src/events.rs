//! Online event detection per pair and metric, and the one line of text each event carries.
//!
//! ```
//! use wanperf_mesh::events::{Detector, EventKind};
//! use wanperf_mesh::status::Metric;
//! let mut d = Detector::new("slac1", "cern1", Metric::Throughput);
//! let t0 = 1_700_000_000.0;
//! for i in 0..10 {
//!     assert!(d.push(t0 + 1800.0 * i as f64, 74e6).is_none());
//! }
//! assert!(d.push(t0 + 18_000.0, 0.8e6).is_none());
//! assert!(d.push(t0 + 19_800.0, 0.8e6).is_none());
//! let e = d.push(t0 + 21_600.0, 0.8e6).unwrap();
//! assert_eq!(e.kind, EventKind::Drop);
//! assert_eq!(e.text, "slac1→cern1 throughput 74.0 → 0.8 Mbit/s since 03:13 UTC (3 tests)");
//! ```

use crate::status::Metric;
use crate::wire::TraceResult;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use wanperf_stats::events::{Plateau, PlateauConfig};
use wanperf_stats::summary::{quantile_sorted, sorted_finite};

/// Values a detector keeps.
pub const HISTORY: usize = 200;
/// Earlier values a level shift is judged against, at least.
pub const MIN_EARLIER: usize = 5;
/// Consecutive throughput results beyond the threshold for a throughput event.
pub const THROUGHPUT_RUN: usize = 3;
/// Consecutive capacity runs beyond the threshold for a capacity event.
pub const CAPACITY_RUN: usize = 2;
/// Consecutive RTT summaries beyond the threshold for an RTT event.
pub const RTT_RUN: usize = 5;
/// Consecutive loss summaries ≥ [`LOSS_ON`] for a loss onset.
pub const LOSS_ONSET_RUN: usize = 3;
/// Consecutive loss summaries < [`LOSS_OFF`] for the end of a loss episode.
pub const LOSS_END_RUN: usize = 5;
/// Loss at or above this is lossy (1 %).
pub const LOSS_ON: f64 = 0.01;
/// Loss below this is clean (0.5 %).
pub const LOSS_OFF: f64 = 0.005;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// The level fell (throughput worse, or RTT better).
    Drop,
    /// The level rose (throughput better, or RTT worse).
    Rise,
    /// Loss began.
    LossOnset,
    /// Loss ended.
    LossEnd,
    /// An agent stopped delivering results.
    Silent,
    /// A silent agent delivers results again.
    Back,
    /// A trace found other routers than the pair's previous trace.
    RouteChange,
}

/// A detected change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// When the new level began (the first value of it), Unix seconds; for `Silent`, the last
    /// result; for `Back`, now.
    pub t: f64,
    /// Source host (for agent events, the host).
    pub src: String,
    /// Destination host (empty for agent events).
    pub dst: String,
    /// The metric ([`Metric::Agent`] for `Silent` and `Back`).
    pub metric: Metric,
    /// What happened.
    pub kind: EventKind,
    /// The level before: median of the earlier values.
    pub before: Option<f64>,
    /// The level after: median of the values that made the event.
    pub after: Option<f64>,
    /// Values that made the event.
    pub n: usize,
    /// One line for people.
    pub text: String,
}

/// Watches one pair's values of one metric and reports level shifts and loss episodes.
///
/// **Throughput and RTT: level shifts**, by the plateau detector of IEPM-BW
/// ([`wanperf_stats::events::Plateau`], run online): the history buffer (the last values
/// that looked normal) describes the pair; a value beyond β = 2 standard deviations of the
/// history's mean is a trigger candidate, and an event fires when *k* candidates in a row
/// have a mean that differs from the history's by more than δ — then the candidates become
/// the history, so one change gives one event. Values are judged once the history holds
/// [`MIN_EARLIER`] of them.
/// - throughput (*k* = 3 results, history 20, δ = 40 %): `Drop` or `Rise`;
/// - RTT, ms (*k* = 5 summaries, history 30, δ = 25 % and at least 2 ms): `Rise` or `Drop`.
/// - capacity (*k* = 2 runs, history 10, judged from 3, δ = 20 %): `Drop` or `Rise`.
///   A series that already swings (summaries with and without a bulk test in them) has a
///   wide σ and must leave it.
///
/// An event's `t` is the first value of the new level, `before` and `after` the two means.
///
/// **Loss** (fractions): `LossOnset` when the last 3 values are all ≥ 1 % and the median of
/// the values before them (at least [`MIN_EARLIER`]) is < 0.5 %; then `LossEnd` when 5
/// consecutive values are < 0.5 %, after which the history is reset to those 5.
///
/// Values (or times) that are not finite are ignored.
#[derive(Debug, Clone)]
pub struct Detector {
    src: String,
    dst: String,
    metric: Metric,
    /// Loss values and their times.
    history: VecDeque<(f64, f64)>,
    /// The first time of the loss episode under way.
    onset: Option<f64>,
    /// The level-shift detector (throughput and RTT).
    level: Option<Plateau>,
    /// Times of the values given to `level`, by their index there (the newest [`HISTORY`]).
    times: VecDeque<(usize, f64)>,
    pushed: usize,
}

/// The plateau detector's settings for a metric's level shifts (`None`: not a level metric).
pub fn plateau_config(metric: Metric) -> Option<PlateauConfig> {
    let base = PlateauConfig { min_history: MIN_EARLIER, beta: 2.0, ..PlateauConfig::default() };
    match metric {
        Metric::Throughput => Some(PlateauConfig { history: 20, trigger: THROUGHPUT_RUN, delta_pct: 40.0, ..base }),
        Metric::Rtt => Some(PlateauConfig { history: 30, trigger: RTT_RUN, delta_pct: 25.0, min_change: 2.0, ..base }),
        // A capacity is steady (the narrow link's rate): a fifth off, twice in a row, after
        // three runs.
        Metric::Capacity => {
            Some(PlateauConfig { history: 10, min_history: 3, trigger: CAPACITY_RUN, delta_pct: 20.0, ..base })
        }
        _ => None,
    }
}

fn median(v: impl Iterator<Item = f64>) -> Option<f64> {
    quantile_sorted(&sorted_finite(&v.collect::<Vec<_>>()), 0.5)
}

impl Detector {
    /// A detector for `metric` on src → dst (one of [`Metric::Agent`] or [`Metric::Route`]
    /// never fires: those events come from [`silent_event`] and [`route_change`]).
    pub fn new(src: impl Into<String>, dst: impl Into<String>, metric: Metric) -> Detector {
        Detector {
            src: src.into(),
            dst: dst.into(),
            metric,
            history: VecDeque::new(),
            onset: None,
            level: plateau_config(metric).map(Plateau::new),
            times: VecDeque::new(),
            pushed: 0,
        }
    }

    /// Whether a loss episode is under way.
    pub fn in_loss(&self) -> bool {
        self.onset.is_some()
    }

    /// Adds the value measured at `t`; returns the event it completes, if any.
    pub fn push(&mut self, t: f64, value: f64) -> Option<Event> {
        if !t.is_finite() || !value.is_finite() {
            return None;
        }
        if let Some(level) = &mut self.level {
            let i = self.pushed;
            self.pushed += 1;
            self.times.push_back((i, t));
            if self.times.len() > HISTORY {
                self.times.pop_front();
            }
            let e = level.push(value)?;
            let kind = if e.after < e.before { EventKind::Drop } else { EventKind::Rise };
            let start = self.times.iter().find(|x| x.0 == e.start).map_or(t, |x| x.1);
            return Some(self.event(kind, start, e.before, e.after, e.confirmed - e.start + 1));
        }
        self.history.push_back((t, value));
        if self.history.len() > HISTORY {
            self.history.pop_front();
        }
        match self.metric {
            Metric::Loss => self.loss(),
            _ => None,
        }
    }

    /// The last `k` entries and the median of those before them (at least [`MIN_EARLIER`]).
    fn split(&self, k: usize) -> Option<(f64, Vec<(f64, f64)>)> {
        let n = self.history.len();
        if n < k + MIN_EARLIER {
            return None;
        }
        let m = median(self.history.iter().take(n - k).map(|e| e.1))?;
        Some((m, self.history.iter().skip(n - k).copied().collect()))
    }

    fn loss(&mut self) -> Option<Event> {
        let run = |pred: fn(f64) -> bool| self.history.iter().rev().take_while(|e| pred(e.1)).count();
        match self.onset {
            None => {
                if run(|v| v >= LOSS_ON) != LOSS_ONSET_RUN {
                    return None;
                }
                let (m, last) = self.split(LOSS_ONSET_RUN)?;
                if m >= LOSS_OFF {
                    return None;
                }
                self.onset = Some(last[0].0);
                Some(self.fire(EventKind::LossOnset, m, &last))
            }
            Some(onset) => {
                if run(|v| v < LOSS_OFF) != LOSS_END_RUN {
                    return None;
                }
                let n = self.history.len();
                let during = self.history.iter().take(n - LOSS_END_RUN).filter(|e| e.0 >= onset);
                let before = median(during.map(|e| e.1)).unwrap_or(LOSS_ON);
                let last: Vec<(f64, f64)> = self.history.iter().skip(n - LOSS_END_RUN).copied().collect();
                self.onset = None;
                Some(self.fire(EventKind::LossEnd, before, &last))
            }
        }
    }

    /// The event made by `last`, the new level; the history restarts from it.
    /// A loss event: `after` is the median of `last`, `t` its first time.
    fn fire(&mut self, kind: EventKind, before: f64, last: &[(f64, f64)]) -> Event {
        let after = median(last.iter().map(|e| e.1)).unwrap_or(before);
        let t = last.first().map_or(0.0, |e| e.0);
        if kind != EventKind::LossOnset {
            self.history = last.iter().copied().collect();
        }
        self.event(kind, t, before, after, last.len())
    }

    fn event(&self, kind: EventKind, t: f64, before: f64, after: f64, n: usize) -> Event {
        let pair = format!("{}→{}", self.src, self.dst);
        let since = format!("since {} UTC", hhmm(t));
        let text = match self.metric {
            Metric::Throughput => {
                let (b, a, unit) = rate_pair(before, after);
                format!("{pair} throughput {b} → {a} {unit} {since} ({n} tests)")
            }
            Metric::Rtt => format!("{pair} RTT {} → {} ms {since} ({n} summaries)", ms(before), ms(after)),
            Metric::Capacity => {
                let (b, a, unit) = rate_pair(before, after);
                format!("{pair} capacity {b} → {a} {unit} {since} ({n} runs)")
            }
            _ => format!("{pair} loss {:.1} % → {:.1} % {since}", 100.0 * before, 100.0 * after),
        };
        Event {
            t,
            src: self.src.clone(),
            dst: self.dst.clone(),
            metric: self.metric,
            kind,
            before: Some(before),
            after: Some(after),
            n,
            text,
        }
    }
}

/// `HH:MM` of a Unix time, UTC.
fn hhmm(t: f64) -> String {
    let s = t.rem_euclid(86_400.0) as u64;
    format!("{:02}:{:02}", s / 3600, s % 3600 / 60)
}

/// Milliseconds: whole above 100, else one decimal.
fn ms(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Two rates in the unit of the larger (decimal prefixes, as `wanperf_proto::units::fmt_rate`),
/// so a drop reads `74.0 → 0.8 Mbit/s`.
fn rate_pair(a: f64, b: f64) -> (String, String, &'static str) {
    const UNITS: [&str; 5] = ["bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"];
    let mut scale = 1.0;
    let mut i = 0;
    while a.abs().max(b.abs()) >= 1000.0 * scale && i < UNITS.len() - 1 {
        scale *= 1000.0;
        i += 1;
    }
    let num = |v: f64| {
        let v = v / scale;
        if v.abs() >= 100.0 {
            format!("{v:.0}")
        } else if v == 0.0 || v.abs() >= 0.1 {
            format!("{v:.1}")
        } else {
            format!("{v:.2}")
        }
    };
    (num(a), num(b), UNITS[i])
}

/// A span of time for people: `45 s`, `7 min`, `3 h 5 min`, `4 days`.
fn span(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    if s < 120 {
        format!("{s} s")
    } else if s < 7200 {
        format!("{} min", s / 60)
    } else if s < 2 * 86_400 {
        match s % 3600 / 60 {
            0 => format!("{} h", s / 3600),
            m => format!("{} h {m} min", s / 3600),
        }
    } else {
        format!("{} days", s / 86_400)
    }
}

/// Whether `host` is silent at `now`: more than `silent_after × interval_s` seconds since its
/// last result (`interval_s`: its [`report_interval`](crate::config::Mesh::report_interval)).
/// A host never heard from (`last_seen` = `None`) is silent; a central gives new hosts a grace
/// period by passing its own start time as `last_seen` until their first result. An interval
/// that is not a positive finite number is never silent (nothing is expected).
pub fn silent(host: &str, last_seen: Option<f64>, interval_s: f64, silent_after: u32, now: f64) -> bool {
    let _ = host;
    if !(interval_s.is_finite() && interval_s > 0.0) {
        return false;
    }
    match last_seen {
        None => true,
        Some(l) => now - l > f64::from(silent_after) * interval_s,
    }
}

/// The event of a silent host: `src` = the host, `dst` empty, [`Metric::Agent`],
/// [`EventKind::Silent`], `t` = its last result (or `now` if none), e.g. "cern1 silent since
/// 14:05 UTC (no results for 7 min)".
pub fn silent_event(host: &str, last_seen: Option<f64>, now: f64) -> Event {
    let text = match last_seen {
        Some(l) => format!("{host} silent since {} UTC (no results for {})", hhmm(l), span(now - l)),
        None => format!("{host} silent (no results yet)"),
    };
    agent_event(host, EventKind::Silent, last_seen.unwrap_or(now), text)
}

/// The event of a silent host delivering again: `t` = `now`, e.g. "cern1 back at 14:12 UTC".
pub fn back_event(host: &str, now: f64) -> Event {
    agent_event(host, EventKind::Back, now, format!("{host} back at {} UTC", hhmm(now)))
}

/// Where two routes differ: `(ttl, before, after)` for each TTL at which both traces have
/// answers and no address answered in both (a hop one trace did not hear from is not a
/// change, and a load-balanced hop that keeps one of its addresses has not changed), and for
/// the destination's TTL when both reached it at different TTLs (the path got longer or
/// shorter). Addresses of a hop are joined with `|`; a hop without answers is `*`.
pub fn route_diff(before: &TraceResult, after: &TraceResult) -> Vec<(u8, String, String)> {
    let at =
        |t: &TraceResult, ttl: u8| t.hops.iter().find(|h| h.ttl == ttl).map(|h| h.addrs.clone()).unwrap_or_default();
    let show = |a: &[String]| if a.is_empty() { "*".to_string() } else { a.join("|") };
    let mut out = Vec::new();
    let ttls: std::collections::BTreeSet<u8> = before.hops.iter().chain(&after.hops).map(|h| h.ttl).collect();
    for ttl in ttls {
        let (b, a) = (at(before, ttl), at(after, ttl));
        if !b.is_empty() && !a.is_empty() && !a.iter().any(|x| b.contains(x)) {
            out.push((ttl, show(&b), show(&a)));
        }
    }
    let dest = |t: &TraceResult| t.reached.then(|| t.hops.last().map(|h| h.ttl)).flatten();
    if let (Some(b), Some(a)) = (dest(before), dest(after)) {
        if a != b && !out.iter().any(|c| c.0 == a.min(b)) {
            out.push((a.min(b), show(&at(before, a.min(b))), show(&at(after, a.min(b)))));
            out.sort();
        }
    }
    out
}

/// The event of a route change on src → dst seen by the trace at `t` (`None` if the routes
/// are the same by [`route_diff`]): `before` and `after` are the hop counts, e.g.
/// "slac1→cern1 route changed at 14:05 UTC: hop 2 198.18.1.2 → 198.18.3.2 (5 → 5 hops)".
pub fn route_change(src: &str, dst: &str, t: f64, before: &TraceResult, after: &TraceResult) -> Option<Event> {
    let diff = route_diff(before, after);
    let (ttl, b, a) = diff.first()?;
    let more = if diff.len() > 1 { format!(" and {} more hop(s)", diff.len() - 1) } else { String::new() };
    let (nb, na) = (before.hops.len(), after.hops.len());
    Some(Event {
        t,
        src: src.to_string(),
        dst: dst.to_string(),
        metric: Metric::Route,
        kind: EventKind::RouteChange,
        before: Some(nb as f64),
        after: Some(na as f64),
        n: diff.len(),
        text: format!("{src}→{dst} route changed at {} UTC: hop {ttl} {b} → {a}{more} ({nb} → {na} hops)", hhmm(t)),
    })
}

fn agent_event(host: &str, kind: EventKind, t: f64, text: String) -> Event {
    Event {
        t,
        src: host.to_string(),
        dst: String::new(),
        metric: Metric::Agent,
        kind,
        before: None,
        after: None,
        n: 0,
        text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix;

    /// 14:05 UTC on some day.
    const T: f64 = 20_000.0 * 86_400.0 + 14.0 * 3600.0 + 5.0 * 60.0;

    #[test]
    fn a_throughput_drop_fires_once_at_the_third_low_value() {
        let mut d = Detector::new("slac1", "cern1", Metric::Throughput);
        let mut events = Vec::new();
        // Five hours of 73.9–74.1 Mbit/s, every 30 min, then 0.8 Mbit/s.
        for i in 0..10 {
            assert!(d.push(T - 1800.0 * (10 - i) as f64, 73.9e6 + 0.1e6 * (i % 3) as f64).is_none());
        }
        for i in 0..20 {
            if let Some(e) = d.push(T + 1800.0 * i as f64, 0.8e6) {
                events.push((i, e));
            }
        }
        assert_eq!(events.len(), 1, "{events:?}");
        let (i, e) = &events[0];
        assert_eq!(*i, 2, "the third low value");
        assert_eq!(
            (e.src.as_str(), e.dst.as_str(), e.metric, e.kind, e.n),
            ("slac1", "cern1", Metric::Throughput, EventKind::Drop, 3)
        );
        assert_eq!(e.t, T);
        assert_eq!(e.after, Some(0.8e6));
        assert!((e.before.unwrap() - 73.99e6).abs() < 1.0, "the history's mean: {:?}", e.before);
        assert_eq!(e.text, "slac1→cern1 throughput 74.0 → 0.8 Mbit/s since 14:05 UTC (3 tests)");
        // Recovery is one rise.
        let up: Vec<Event> = (20..40).filter_map(|i| d.push(T + 1800.0 * i as f64, 74e6)).collect();
        assert_eq!(up.len(), 1);
        assert_eq!(up[0].kind, EventKind::Rise);
        assert_eq!(up[0].t, T + 1800.0 * 20.0);
        assert!(up[0].text.starts_with("slac1→cern1 throughput 0.8 → 74.0 Mbit/s since "), "{}", up[0].text);
    }

    #[test]
    fn noise_within_20_percent_never_fires() {
        for (metric, level) in
            [(Metric::Throughput, 74e6), (Metric::Throughput, 9.4e9), (Metric::Rtt, 166.0), (Metric::Rtt, 40.0)]
        {
            let mut d = Detector::new("a", "b", metric);
            let mut r = SplitMix(99);
            for i in 0..500 {
                let e = d.push(T + 60.0 * i as f64, level * r.range(0.8, 1.2));
                assert!(e.is_none(), "{metric:?} at {i}: {e:?}");
            }
        }
        // A short interruption (two low values) is not a level shift.
        let mut d = Detector::new("a", "b", Metric::Throughput);
        let values = [74.0, 75.0, 73.0, 74.0, 76.0, 74.0, 1.0, 1.0, 74.0, 75.0, 1.0, 74.0];
        assert!(values.iter().enumerate().all(|(i, &v)| d.push(T + i as f64, v * 1e6).is_none()));
    }

    #[test]
    fn an_rtt_series_that_swings_with_scheduled_tests_does_not_flap() {
        // Summaries with a bulk test in them (≈ 17 ms) beside those without (≈ 12 ms), in runs
        // of up to six: the series' own spread, not a change.
        let mut d = Detector::new("h1", "h2", Metric::Rtt);
        let pattern = [12.2, 12.2, 16.9, 16.8, 16.9, 16.9, 16.9, 16.8, 12.2, 12.3, 12.2, 12.2, 12.2, 12.2, 16.9];
        for i in 0..300 {
            let e = d.push(T + 10.0 * i as f64, pattern[i % pattern.len()]);
            assert!(e.is_none(), "at {i}: {e:?}");
        }
        // A real rise beyond that spread still fires once.
        let fired: Vec<Event> = (300..320).filter_map(|i| d.push(T + 10.0 * i as f64, 40.0)).collect();
        assert_eq!(fired.len(), 1, "{fired:?}");
        assert_eq!(fired[0].kind, EventKind::Rise);
    }

    #[test]
    fn an_rtt_rise_needs_five_summaries() {
        let mut d = Detector::new("slac1", "cern1", Metric::Rtt);
        for i in 0..30 {
            assert!(d.push(T - 60.0 * (30 - i) as f64, 166.0 + (i % 3) as f64 - 1.0).is_none());
        }
        for i in 0..4 {
            assert!(d.push(T + 60.0 * i as f64, 240.0).is_none());
        }
        let e = d.push(T + 240.0, 240.0).unwrap();
        assert_eq!((e.kind, e.t, e.n, e.before, e.after), (EventKind::Rise, T, 5, Some(166.0), Some(240.0)));
        assert_eq!(e.text, "slac1→cern1 RTT 166 → 240 ms since 14:05 UTC (5 summaries)");
        assert!((5..40).all(|i| d.push(T + 60.0 * i as f64, 240.0).is_none()));
        // Back to normal: a drop.
        let down: Vec<Event> = (40..60).filter_map(|i| d.push(T + 60.0 * i as f64, 166.0)).collect();
        assert_eq!(down.len(), 1);
        assert_eq!(down[0].kind, EventKind::Drop);
        // On a LAN the 2 ms floor holds small wobbles back.
        let mut d = Detector::new("a", "b", Metric::Rtt);
        assert!((0..50).all(|i| d.push(T + i as f64, if i < 20 { 0.3 } else { 1.9 }).is_none()));
    }

    #[test]
    fn loss_onset_and_end() {
        let mut d = Detector::new("slac1", "cern1", Metric::Loss);
        for i in 0..10 {
            assert!(d.push(T - 60.0 * (10 - i) as f64, 0.0).is_none());
        }
        assert!(d.push(T, 0.031).is_none());
        assert!(d.push(T + 60.0, 0.031).is_none());
        let e = d.push(T + 120.0, 0.031).unwrap();
        assert_eq!((e.kind, e.t, e.n, e.metric), (EventKind::LossOnset, T, 3, Metric::Loss));
        assert_eq!(e.text, "slac1→cern1 loss 0.0 % → 3.1 % since 14:05 UTC");
        assert!(d.in_loss());
        // Still lossy, with a dip that is not long enough.
        let mut t = T + 180.0;
        for v in [0.05, 0.02, 0.0, 0.0, 0.0, 0.0, 0.007, 0.0, 0.04] {
            assert!(d.push(t, v).is_none(), "{v}");
            t += 60.0;
        }
        let end: Vec<(f64, Event)> =
            (0..10).filter_map(|i| d.push(t + 60.0 * i as f64, 0.001).map(|e| (t + 60.0 * i as f64, e))).collect();
        assert_eq!(end.len(), 1, "{end:?}");
        let (at, e) = &end[0];
        assert_eq!(*at, t + 240.0, "at the fifth clean summary");
        assert_eq!((e.kind, e.t), (EventKind::LossEnd, t));
        assert!(e.text.starts_with("slac1→cern1 loss ") && e.text.ends_with("% → 0.1 % since 14:17 UTC"), "{}", e.text);
        assert!(!d.in_loss());
        // A path lossy from the start has no onset (there is no clean level to leave).
        let mut d = Detector::new("a", "b", Metric::Loss);
        assert!((0..20).all(|i| d.push(T + i as f64, 0.05).is_none()));
        // Nor does a fresh detector without five earlier values.
        let mut d = Detector::new("a", "b", Metric::Loss);
        assert!((0..3).all(|i| d.push(T + i as f64, 0.05).is_none()));
    }

    #[test]
    fn silence_and_return() {
        assert!(!silent("cern1", Some(T), 60.0, 2, T + 120.0));
        assert!(silent("cern1", Some(T), 60.0, 2, T + 120.5));
        assert!(silent("cern1", None, 60.0, 2, T));
        assert!(!silent("cern1", None, f64::NAN, 2, T));
        let e = silent_event("cern1", Some(T), T + 7.0 * 60.0);
        assert_eq!(e.text, "cern1 silent since 14:05 UTC (no results for 7 min)");
        assert_eq!(
            (e.kind, e.metric, e.src.as_str(), e.dst.as_str(), e.t),
            (EventKind::Silent, Metric::Agent, "cern1", "", T)
        );
        assert_eq!(silent_event("x", None, T).text, "x silent (no results yet)");
        let b = back_event("cern1", T + 420.0);
        assert_eq!(b.text, "cern1 back at 14:12 UTC");
        assert_eq!((b.kind, b.t), (EventKind::Back, T + 420.0));
        assert_eq!(span(45.0), "45 s");
        assert_eq!(span(3.0 * 3600.0 + 300.0), "3 h 5 min");
        assert_eq!(span(4.5 * 86_400.0), "4 days");
        assert_eq!(serde_json::to_string(&EventKind::LossOnset).unwrap(), "\"loss_onset\"");
    }

    #[test]
    fn rates_share_a_unit() {
        assert_eq!(rate_pair(74e6, 0.8e6), ("74.0".into(), "0.8".into(), "Mbit/s"));
        assert_eq!(rate_pair(9.41e9, 940e6), ("9.4".into(), "0.9".into(), "Gbit/s"));
        assert_eq!(rate_pair(500e6, 20e3), ("500".into(), "0.02".into(), "Mbit/s"));
        assert_eq!(rate_pair(0.0, 0.0), ("0.0".into(), "0.0".into(), "bit/s"));
    }

    fn trace(reached: bool, hops: &[&[&str]]) -> TraceResult {
        use crate::wire::TraceHop;
        TraceResult {
            hops: hops
                .iter()
                .enumerate()
                .map(|(i, a)| TraceHop {
                    ttl: i as u8 + 1,
                    addrs: a.iter().map(|s| s.to_string()).collect(),
                    loss_pct: 0.0,
                    path_loss_pct: 0.0,
                    rtt_ms: None,
                    note: None,
                })
                .collect(),
            reached,
            path_mtu: None,
            rounds: 3,
            one_way: None,
        }
    }

    #[test]
    fn a_route_change_is_a_hop_with_other_routers_not_a_silent_one() {
        let a = trace(true, &[&["10.0.0.1"], &["10.0.1.2"], &["10.0.9.9"]]);
        // The same route, or one with a hop that did not answer this time: no change.
        assert_eq!(route_change("s", "d", T, &a, &a), None);
        let quiet = trace(true, &[&["10.0.0.1"], &[], &["10.0.9.9"]]);
        assert_eq!(route_change("s", "d", T, &a, &quiet), None);
        assert_eq!(route_change("s", "d", T, &quiet, &a), None);
        // A load-balanced hop that keeps one of its addresses: no change.
        let lb = trace(true, &[&["10.0.0.1"], &["10.0.3.2", "10.0.1.2"], &["10.0.9.9"]]);
        assert_eq!(route_change("s", "d", T, &a, &lb), None);
        // Hop 2 through another router: one event, with the hop and both addresses.
        let b = trace(true, &[&["10.0.0.1"], &["10.0.3.2"], &["10.0.9.9"]]);
        let e = route_change("s", "d", T, &a, &b).unwrap();
        assert_eq!((e.kind, e.metric, e.n, e.t), (EventKind::RouteChange, Metric::Route, 1, T));
        assert_eq!(e.text, "s→d route changed at 14:05 UTC: hop 2 10.0.1.2 → 10.0.3.2 (3 → 3 hops)");
        // A longer path: the destination now answers one hop later.
        let long = trace(true, &[&["10.0.0.1"], &["10.0.1.2"], &["10.0.5.1"], &["10.0.9.9"]]);
        assert_eq!(route_diff(&a, &long), vec![(3, "10.0.9.9".into(), "10.0.5.1".into())]);
        let e = route_change("s", "d", T, &a, &long).unwrap();
        assert_eq!((e.before, e.after), (Some(3.0), Some(4.0)));
        // Two changed hops are counted.
        let c = trace(true, &[&["10.0.7.1"], &["10.0.3.2"], &["10.0.9.9"]]);
        let e = route_change("s", "d", T, &a, &c).unwrap();
        assert!(e.text.ends_with("hop 1 10.0.0.1 → 10.0.7.1 and 1 more hop(s) (3 → 3 hops)"), "{}", e.text);
        // A trace that did not reach the destination compares only the hops it heard.
        let cut = trace(false, &[&["10.0.0.1"], &["10.0.1.2"]]);
        assert_eq!(route_change("s", "d", T, &a, &cut), None);
    }

    #[test]
    fn a_capacity_change_fires_at_the_second_run() {
        let mut d = Detector::new("a", "b", Metric::Capacity);
        for (i, v) in [20.0e6, 19.9e6, 20.1e6, 20.0e6].iter().enumerate() {
            assert!(d.push(T - 600.0 * (4 - i) as f64, *v).is_none());
        }
        assert!(d.push(T, 8.0e6).is_none());
        let e = d.push(T + 600.0, 8.1e6).unwrap();
        assert_eq!((e.kind, e.metric, e.n, e.t), (EventKind::Drop, Metric::Capacity, 2, T));
        assert_eq!(e.text, "a→b capacity 20.0 → 8.1 Mbit/s since 14:05 UTC (2 runs)");
        // One odd run is not a change.
        let mut d = Detector::new("a", "b", Metric::Capacity);
        let runs = [20e6, 20e6, 20e6, 20e6, 9e6, 20e6, 20e6, 9e6, 20e6];
        assert!(runs.iter().enumerate().all(|(i, v)| d.push(T + i as f64, *v).is_none()));
    }
}
