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
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use wanperf_stats::summary::{quantile_sorted, sorted_finite};

/// Values a detector keeps.
pub const HISTORY: usize = 200;
/// Earlier values a level shift is judged against, at least.
pub const MIN_EARLIER: usize = 5;
/// Consecutive throughput results beyond the threshold for a throughput event.
pub const THROUGHPUT_RUN: usize = 3;
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
/// **Throughput and RTT: level shifts.** Each value is compared with the median *m* of the
/// values before the last *k* (at least [`MIN_EARLIER`] of them, at most [`HISTORY`] in all).
/// An event fires when all of the last *k* values are beyond the threshold:
/// - throughput (*k* = 3 results): `Drop` when all `< 0.6·m`, `Rise` when all `> m / 0.6`;
/// - RTT, ms (*k* = 5 summaries): `Rise` when all `> max(m + max(0.25·m, 2 ms), p95 + 2 ms)`,
///   `Drop` when all `< min(m − max(0.2·m, 2 ms), p5 − 2 ms)` (the same step back: 0.2 =
///   1 − 1/1.25), p5 and p95 being those of the earlier values: a series that already swings
///   (summaries with and without a bulk test in them) must leave its own range.
///
/// It fires at the *k*-th value of the new level; its `t` is the first's. The history is then
/// reset to the *k* new values, so one change gives one event.
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
    history: VecDeque<(f64, f64)>,
    /// The first time of the loss episode under way.
    onset: Option<f64>,
}

fn median(v: impl Iterator<Item = f64>) -> Option<f64> {
    quantile_sorted(&sorted_finite(&v.collect::<Vec<_>>()), 0.5)
}

impl Detector {
    /// A detector for `metric` on src → dst (a detector of [`Metric::Agent`] never fires).
    pub fn new(src: impl Into<String>, dst: impl Into<String>, metric: Metric) -> Detector {
        Detector { src: src.into(), dst: dst.into(), metric, history: VecDeque::new(), onset: None }
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
        self.history.push_back((t, value));
        if self.history.len() > HISTORY {
            self.history.pop_front();
        }
        match self.metric {
            Metric::Throughput => self.level(THROUGHPUT_RUN),
            Metric::Rtt => self.level(RTT_RUN),
            Metric::Loss => self.loss(),
            Metric::Agent => None,
        }
    }

    /// The last `k` entries and the median of those before them.
    fn split(&self, k: usize) -> Option<(f64, Vec<(f64, f64)>)> {
        let (m, _, last) = self.split_spread(k)?;
        Some((m, last))
    }

    /// The last `k` entries, and the median, 5th and 95th percentiles of those before them.
    fn split_spread(&self, k: usize) -> Option<(f64, (f64, f64), Vec<(f64, f64)>)> {
        let n = self.history.len();
        if n < k + MIN_EARLIER {
            return None;
        }
        let earlier = sorted_finite(&self.history.iter().take(n - k).map(|e| e.1).collect::<Vec<_>>());
        let q = |p| quantile_sorted(&earlier, p);
        Some(((q(0.5))?, (q(0.05)?, q(0.95)?), self.history.iter().skip(n - k).copied().collect()))
    }

    fn level(&mut self, k: usize) -> Option<Event> {
        let (m, (lo, hi), last) = self.split_spread(k)?;
        let all = |f: &dyn Fn(f64) -> bool| last.iter().all(|e| f(e.1));
        let rise = (m + (0.25 * m).max(2.0)).max(hi + 2.0);
        let fall = (m - (0.2 * m).max(2.0)).min(lo - 2.0);
        let kind = match self.metric {
            Metric::Throughput if all(&|v| v < 0.6 * m) => EventKind::Drop,
            Metric::Throughput if all(&|v| v > m / 0.6) => EventKind::Rise,
            Metric::Rtt if all(&|v| v > rise) => EventKind::Rise,
            Metric::Rtt if all(&|v| v < fall) => EventKind::Drop,
            _ => return None,
        };
        Some(self.fire(kind, m, &last))
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
    fn fire(&mut self, kind: EventKind, before: f64, last: &[(f64, f64)]) -> Event {
        let after = median(last.iter().map(|e| e.1)).unwrap_or(before);
        let t = last.first().map_or(0.0, |e| e.0);
        if kind != EventKind::LossOnset {
            self.history = last.iter().copied().collect();
        }
        let pair = format!("{}→{}", self.src, self.dst);
        let since = format!("since {} UTC", hhmm(t));
        let n = last.len();
        let text = match self.metric {
            Metric::Throughput => {
                let (b, a, unit) = rate_pair(before, after);
                format!("{pair} throughput {b} → {a} {unit} {since} ({n} tests)")
            }
            Metric::Rtt => format!("{pair} RTT {} → {} ms {since} ({n} summaries)", ms(before), ms(after)),
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
        assert_eq!(e.before, Some(74e6));
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
}
