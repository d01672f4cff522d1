//! One latency summary period: what an agent reports for a pair every `summary` seconds
//! instead of every probe (SmokePing's idea: a distribution per period, not a mean).
//!
//! ```
//! use wanperf_mesh::summary::{Binner, Probe};
//! let mut b = Binner::new(60.0);
//! let probe = |seq: u64, sent: f64| Probe { seq, sent, rtt_ms: Some(10.0), owd_fwd_ms: None, owd_rev_ms: None };
//! assert_eq!(b.push(probe(1, 1_700_000_010.0)), None);
//! // The first probe of the next minute closes the period [1_699_999_980, 1_700_000_040).
//! let s = b.push(probe(2, 1_700_000_050.0)).unwrap();
//! assert_eq!((s.start, s.end, s.sent, s.median_ms), (1_699_999_980.0, 1_700_000_040.0, 1, Some(10.0)));
//! ```

use serde::{Deserialize, Serialize};
use wanperf_stats::summary::{quantile_sorted, sorted_finite};

/// One probe's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// Sequence number (per pair, increasing as sent).
    pub seq: u64,
    /// When it was sent, Unix seconds.
    pub sent: f64,
    /// Round-trip time, ms; `None` (or a value that is not finite): lost.
    pub rtt_ms: Option<f64>,
    /// One-way delay source → destination, ms (when both clocks are trusted).
    pub owd_fwd_ms: Option<f64>,
    /// One-way delay destination → source, ms.
    pub owd_rev_ms: Option<f64>,
}

impl Probe {
    /// Whether it was answered (a finite RTT).
    pub fn answered(&self) -> bool {
        self.rtt_ms.is_some_and(f64::is_finite)
    }
}

/// The summary of one period of probes for one pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Start of the period, Unix seconds.
    pub start: f64,
    /// End of the period (exclusive), Unix seconds.
    pub end: f64,
    /// Probes sent.
    pub sent: u64,
    /// Probes not answered.
    pub lost: u64,
    /// `lost / sent` (0 when nothing was sent).
    pub loss: f64,
    /// Least RTT, ms.
    pub min_ms: Option<f64>,
    /// 25th percentile of the RTTs, ms.
    pub p25_ms: Option<f64>,
    /// Median RTT, ms.
    pub median_ms: Option<f64>,
    /// 75th percentile, ms.
    pub p75_ms: Option<f64>,
    /// 90th percentile, ms.
    pub p90_ms: Option<f64>,
    /// Greatest RTT, ms.
    pub max_ms: Option<f64>,
    /// p75 − p25, ms.
    pub iqr_ms: Option<f64>,
    /// Answered probes that arrived after a probe with a higher sequence number.
    pub reordered: u64,
    /// Duplicate answers (counted by the caller).
    pub duplicates: u64,
    /// Median one-way delay source → destination, ms.
    pub owd_fwd_median_ms: Option<f64>,
    /// Median one-way delay destination → source, ms.
    pub owd_rev_median_ms: Option<f64>,
}

/// Summarizes the probes of the period [start, end).
///
/// Every probe given counts as sent (the caller decides which belong to the period). A probe
/// is lost when its `rtt_ms` is `None` or not finite. RTT percentiles are type 7 (linear
/// between closest ranks, as R and NumPy) over the answered probes. `reordered` counts the
/// answered probes whose `seq` is lower than that of an answered probe before them **in the
/// slice**, so the slice must hold the answered probes in the order their answers arrived
/// (lost probes may be anywhere; they are ignored for reordering). `duplicates` is passed
/// through. One-way medians are over the answered probes that carry them.
pub fn summarize(start: f64, end: f64, probes: &[Probe], duplicates: u64) -> LatencySummary {
    let answered = || probes.iter().filter(|p| p.answered());
    let rtts = sorted_finite(&answered().filter_map(|p| p.rtt_ms).collect::<Vec<_>>());
    let sent = probes.len() as u64;
    let lost = sent - rtts.len() as u64;
    let q = |p: f64| quantile_sorted(&rtts, p);
    let mut reordered = 0;
    let mut highest: Option<u64> = None;
    for p in answered() {
        if highest.is_some_and(|h| p.seq < h) {
            reordered += 1;
        } else {
            highest = Some(p.seq);
        }
    }
    let median_of = |f: fn(&Probe) -> Option<f64>| {
        quantile_sorted(&sorted_finite(&answered().filter_map(f).collect::<Vec<_>>()), 0.5)
    };
    LatencySummary {
        start,
        end,
        sent,
        lost,
        loss: if sent > 0 { lost as f64 / sent as f64 } else { 0.0 },
        min_ms: rtts.first().copied(),
        p25_ms: q(0.25),
        median_ms: q(0.5),
        p75_ms: q(0.75),
        p90_ms: q(0.9),
        max_ms: rtts.last().copied(),
        iqr_ms: q(0.75).zip(q(0.25)).map(|(a, b)| a - b),
        reordered,
        duplicates,
        owd_fwd_median_ms: median_of(|p| p.owd_fwd_ms),
        owd_rev_median_ms: median_of(|p| p.owd_rev_ms),
    }
}

/// Cuts one pair's probes into periods online, keeping at most one period's probes.
///
/// Periods are aligned to multiples of `period_s` in Unix time: the period of a probe is
/// `floor(sent / period_s)`. Push each probe once its fate is known (answered, or declared
/// lost after the agent's timeout), in that order. A probe whose period is later than the open
/// one closes the open period (returning its summary) and opens its own; a probe whose period
/// is earlier than the open one (a probe declared lost after the next period began) is counted
/// in the open period, so no probe is ever dropped from the totals. Periods without probes give
/// no summary. Probes with a `sent` time that is not finite are ignored.
#[derive(Debug, Clone)]
pub struct Binner {
    period_s: f64,
    current: Option<i64>,
    probes: Vec<Probe>,
    duplicates: u64,
}

impl Binner {
    /// A binner with periods of `period_s` seconds (a value that is not a positive finite
    /// number is taken as 60 s).
    pub fn new(period_s: f64) -> Binner {
        let period_s = if period_s.is_finite() && period_s > 0.0 { period_s } else { 60.0 };
        Binner { period_s, current: None, probes: Vec::new(), duplicates: 0 }
    }

    /// The period length, seconds.
    pub fn period_s(&self) -> f64 {
        self.period_s
    }

    /// Adds a probe; returns the summary of the period it closes, if any.
    pub fn push(&mut self, p: Probe) -> Option<LatencySummary> {
        if !p.sent.is_finite() {
            return None;
        }
        let index = (p.sent / self.period_s).floor() as i64;
        let closed = match self.current {
            Some(c) if index > c => self.close(),
            _ => None,
        };
        if !matches!(self.current, Some(c) if index <= c) {
            self.current = Some(index);
        }
        self.probes.push(p);
        closed
    }

    /// Counts a duplicate answer in the open period.
    pub fn duplicate(&mut self) {
        self.duplicates += 1;
    }

    /// Closes the open period (at shutdown, or when the agent stops probing this pair).
    pub fn flush(&mut self) -> Option<LatencySummary> {
        let s = self.close();
        self.current = None;
        s
    }

    fn close(&mut self) -> Option<LatencySummary> {
        let c = self.current?;
        if self.probes.is_empty() {
            return None;
        }
        let start = c as f64 * self.period_s;
        let s = summarize(start, start + self.period_s, &self.probes, self.duplicates);
        self.probes.clear();
        self.duplicates = 0;
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(seq: u64, sent: f64, rtt: Option<f64>) -> Probe {
        Probe { seq, sent, rtt_ms: rtt, owd_fwd_ms: None, owd_rev_ms: None }
    }

    #[test]
    fn summary_of_a_period() {
        let mut ps: Vec<Probe> = (1..=8).map(|i| probe(i, i as f64, Some(i as f64))).collect();
        ps.push(probe(9, 9.0, None));
        ps.push(probe(10, 10.0, Some(f64::NAN)));
        ps[0].owd_fwd_ms = Some(3.0);
        ps[1].owd_fwd_ms = Some(5.0);
        ps[2].owd_rev_ms = Some(7.0);
        ps[8].owd_fwd_ms = Some(100.0); // lost: ignored
        let s = summarize(0.0, 60.0, &ps, 2);
        assert_eq!((s.sent, s.lost, s.loss, s.duplicates, s.reordered), (10, 2, 0.2, 2, 0));
        assert_eq!((s.min_ms, s.max_ms, s.median_ms), (Some(1.0), Some(8.0), Some(4.5)));
        // Type 7 over 1..8: h = 7q.
        assert_eq!((s.p25_ms, s.p75_ms, s.iqr_ms), (Some(2.75), Some(6.25), Some(3.5)));
        assert!((s.p90_ms.unwrap() - 7.3).abs() < 1e-12);
        assert_eq!((s.owd_fwd_median_ms, s.owd_rev_median_ms), (Some(4.0), Some(7.0)));
        let e = summarize(0.0, 60.0, &[], 0);
        assert_eq!((e.sent, e.loss, e.median_ms, e.iqr_ms), (0, 0.0, None, None));
    }

    #[test]
    fn reordering_counts_late_arrivals_in_slice_order() {
        let order = [1u64, 2, 5, 3, 4, 6, 8, 7];
        let mut ps: Vec<Probe> = order.iter().map(|&s| probe(s, s as f64, Some(10.0))).collect();
        // A lost probe with a high sequence number does not make later answers reordered.
        ps.insert(1, probe(99, 99.0, None));
        assert_eq!(summarize(0.0, 1.0, &ps, 0).reordered, 3); // 3, 4 and 7
                                                              // Equal sequence numbers (duplicates) are not reordering.
        let d = [probe(1, 0.0, Some(1.0)), probe(1, 0.0, Some(1.0)), probe(2, 0.0, Some(1.0))];
        assert_eq!(summarize(0.0, 1.0, &d, 1).reordered, 0);
    }

    #[test]
    fn the_binner_closes_aligned_periods() {
        let mut b = Binner::new(60.0);
        let t0 = 1_700_000_000.0; // 20 s into a minute-aligned period starting at …9980
        let mut closed = Vec::new();
        let mut seq = 0;
        for i in 0..300 {
            // 1 probe/s for 5 minutes; every 10th lost.
            seq += 1;
            let rtt = if i % 10 == 9 { None } else { Some(100.0 + (i % 7) as f64) };
            closed.extend(b.push(probe(seq, t0 + i as f64, rtt)));
        }
        closed.extend(b.flush());
        assert_eq!(b.flush(), None);
        let sent: Vec<u64> = closed.iter().map(|s| s.sent).collect();
        assert_eq!(sent, [40, 60, 60, 60, 60, 20]);
        assert_eq!(closed[0].start, 1_699_999_980.0);
        for w in closed.windows(2) {
            assert_eq!(w[0].end, w[1].start);
            assert_eq!(w[0].end - w[0].start, 60.0);
        }
        assert_eq!(closed.iter().map(|s| s.lost).sum::<u64>(), 30);
        // A period closes exactly when the first probe of a later one arrives.
        let mut b = Binner::new(10.0);
        assert!(b.push(probe(1, 5.0, Some(1.0))).is_none());
        assert!(b.push(probe(2, 9.999, Some(1.0))).is_none());
        // A lost probe of the period already closed counts in the open one.
        let s = b.push(probe(3, 35.0, Some(1.0))).unwrap();
        assert_eq!((s.start, s.end, s.sent), (0.0, 10.0, 2));
        b.duplicate();
        assert!(b.push(probe(2, 9.5, None)).is_none());
        assert!(b.push(probe(4, f64::NAN, None)).is_none());
        let s = b.flush().unwrap();
        assert_eq!((s.start, s.sent, s.lost, s.duplicates), (30.0, 2, 1, 1));
    }

    #[test]
    fn a_bad_period_falls_back_to_a_minute() {
        assert_eq!(Binner::new(0.0).period_s(), 60.0);
        assert_eq!(Binner::new(f64::NAN).period_s(), 60.0);
        assert_eq!(Binner::new(30.0).period_s(), 30.0);
    }
}
