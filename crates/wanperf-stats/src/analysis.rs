//! The arithmetic behind a report's written findings: loaded-minus-unloaded RTT differences
//! (seed 000's tables), the best (streams, window) cell and how far the others fall short,
//! BDP and window advice, the Mathis bound against a measured loss rate, asymmetry between
//! directions, and the binning and thinning that keep figures small.
//!
//! ```
//! use wanperf_stats::analysis::{load_diff, PhaseStats};
//! let loaded = PhaseStats::of(&[250.0, 260.0, 270.0], 3);
//! let unloaded = PhaseStats::of(&[166.0, 167.0, 168.0], 3);
//! let d = load_diff(&loaded, &unloaded).unwrap();
//! assert_eq!(d.median_ms, 93.0);
//! // 93 ms of queue at 25 Mbit/s is 290 625 bytes.
//! assert!((d.queued_bytes(25e6) - 290_625.0).abs() < 1e-6);
//! ```

use crate::calc;
use crate::summary::{mean, quantile_sorted, stdev};
use serde::{Deserialize, Serialize};

/// RTT statistics of one probe phase: the rows of seed 000's tables plus the 90th percentile
/// its RTT-against-window figure draws.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RttStats {
    /// Mean, ms.
    pub avg: f64,
    /// Sample standard deviation, ms.
    pub stdev: f64,
    /// Median, ms.
    pub median: f64,
    /// Interquartile range (p75 − p25), ms.
    pub iqr: f64,
    /// Minimum, ms.
    pub min: f64,
    /// Maximum, ms.
    pub max: f64,
    /// 90th percentile, ms (none when only a summary without it is known).
    pub p90: Option<f64>,
    /// 5th percentile, ms (seed 002's ping tables; none when only a summary without it is
    /// known).
    #[serde(default)]
    pub p5: Option<f64>,
    /// 95th percentile, ms.
    #[serde(default)]
    pub p95: Option<f64>,
}

impl RttStats {
    /// Statistics of sorted, finite RTTs (type-7 quantiles); `None` when empty.
    pub fn of_sorted(sorted: &[f64]) -> Option<RttStats> {
        let q = |p| quantile_sorted(sorted, p);
        Some(RttStats {
            avg: mean(sorted)?,
            stdev: stdev(sorted)?,
            median: q(0.5)?,
            iqr: q(0.75)? - q(0.25)?,
            min: *sorted.first()?,
            max: *sorted.last()?,
            p90: q(0.9),
            p5: q(0.05),
            p95: q(0.95),
        })
    }
}

/// One probe phase (loaded, unloaded, or a plain ping): what was sent, what came back, and
/// the RTTs of what came back.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PhaseStats {
    /// Probes sent.
    pub sent: u64,
    /// Probes answered in time.
    pub received: u64,
    /// 100 × (sent − received) / sent; 0 when nothing was sent.
    pub loss_pct: f64,
    /// RTT statistics; none when no probe was answered.
    pub rtt: Option<RttStats>,
}

impl PhaseStats {
    /// From the sorted RTTs of the answered probes and the number sent.
    pub fn of(sorted_rtts_ms: &[f64], sent: u64) -> PhaseStats {
        let received = sorted_rtts_ms.len() as u64;
        let sent = sent.max(received);
        let loss_pct = if sent == 0 { 0.0 } else { 100.0 * (sent - received) as f64 / sent as f64 };
        PhaseStats { sent, received, loss_pct, rtt: RttStats::of_sorted(sorted_rtts_ms) }
    }
}

/// Loaded minus unloaded, statistic by statistic (ms; loss in percentage points).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LoadDiff {
    /// Difference of means.
    pub avg_ms: f64,
    /// Difference of medians: the added delay (seed 000's "about 100 msec").
    pub median_ms: f64,
    /// Difference of standard deviations.
    pub stdev_ms: f64,
    /// Difference of IQRs.
    pub iqr_ms: f64,
    /// Difference of minima (seed 000: under 3 ms; a path change if large).
    pub min_ms: f64,
    /// Difference of maxima.
    pub max_ms: f64,
    /// Difference of 90th percentiles, when both are known.
    pub p90_ms: Option<f64>,
    /// Difference of loss percentages, percentage points.
    pub loss_pct: f64,
}

impl LoadDiff {
    /// Bytes a queue must hold to add the median difference at `rate_bps` (seed 000: 100 ms at
    /// 25 Mbit/s ≈ 300 kB). A negative difference counts as no queue.
    pub fn queued_bytes(&self, rate_bps: f64) -> f64 {
        calc::queue_bytes(self.median_ms.max(0.0) / 1000.0, rate_bps)
    }
}

/// Loaded minus unloaded; `None` when either phase has no answered probe.
pub fn load_diff(loaded: &PhaseStats, unloaded: &PhaseStats) -> Option<LoadDiff> {
    let (l, u) = (loaded.rtt?, unloaded.rtt?);
    Some(LoadDiff {
        avg_ms: l.avg - u.avg,
        median_ms: l.median - u.median,
        stdev_ms: l.stdev - u.stdev,
        iqr_ms: l.iqr - u.iqr,
        min_ms: l.min - u.min,
        max_ms: l.max - u.max,
        p90_ms: l.p90.zip(u.p90).map(|(a, b)| a - b),
        loss_pct: loaded.loss_pct - unloaded.loss_pct,
    })
}

/// The best of a set of values (e.g. cells' throughput) and how far each falls short of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ranking {
    /// Index of the best value (the first, on ties).
    pub best: usize,
    /// The best value.
    pub best_value: f64,
    /// Per input, `100 × (best − value) / best` (0 for the best; NaN for a non-finite input).
    pub shortfall_pct: Vec<f64>,
}

/// Ranks `values` by the highest; `None` when no value is finite and positive.
pub fn rank_best(values: &[f64]) -> Option<Ranking> {
    let (best, &best_value) = values.iter().enumerate().filter(|(_, v)| v.is_finite() && **v > 0.0).fold(
        None,
        |acc: Option<(usize, &f64)>, (i, v)| match acc {
            Some((_, b)) if *b >= *v => acc,
            _ => Some((i, v)),
        },
    )?;
    let shortfall_pct =
        values.iter().map(|v| if v.is_finite() { 100.0 * (best_value - v) / best_value } else { f64::NAN }).collect();
    Some(Ranking { best, best_value, shortfall_pct })
}

/// What a path's bandwidth-delay product asks of the window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WindowAdvice {
    /// Bandwidth-delay product, bytes.
    pub bdp_bytes: f64,
    /// Window each stream needs so that all together cover the BDP, bytes.
    pub per_stream_bytes: f64,
    /// The rate the given window allows over all streams (streams × window / RTT), bit/s.
    pub window_limit_bps: Option<f64>,
    /// Whether that rate is below the path rate, i.e. the window, not the path, limits.
    pub window_limited: Option<bool>,
}

/// Window advice for `streams` streams on a path of `rate_bps` and round trip `rtt_s`, with
/// `window_bytes` per stream if one was set.
pub fn window_advice(rate_bps: f64, rtt_s: f64, streams: u32, window_bytes: Option<f64>) -> WindowAdvice {
    let bdp_bytes = calc::bdp_bytes(rate_bps, rtt_s);
    let n = f64::from(streams.max(1));
    let window_limit_bps = window_bytes.map(|w| n * calc::window_rate_bps(w, rtt_s));
    WindowAdvice {
        bdp_bytes,
        per_stream_bytes: bdp_bytes / n,
        window_limit_bps,
        window_limited: window_limit_bps.map(|l| l < rate_bps),
    }
}

/// The Mathis bound for a measured loss rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MathisCheck {
    /// Loss rate: retransmitted segments over segments sent (`bytes / mss`).
    pub loss: f64,
    /// The bound for one stream, bit/s.
    pub per_stream_bps: f64,
    /// The bound for all streams (streams × one stream's, assuming the loss spreads evenly).
    pub bound_bps: f64,
}

/// Mathis et al.'s bound from retransmits over the bytes sent, for `streams` streams with
/// segments of `mss` bytes and round trip `rtt_s`. `None` without loss (no bound) or data.
pub fn mathis_check(mss: f64, rtt_s: f64, retransmits: u64, sent_bytes: f64, streams: u32) -> Option<MathisCheck> {
    let segments = sent_bytes / mss;
    if retransmits == 0 || segments < 1.0 || rtt_s <= 0.0 {
        return None;
    }
    let loss = (retransmits as f64 / segments).min(1.0);
    let per_stream_bps = calc::mathis_bps(mss, rtt_s, loss);
    Some(MathisCheck { loss, per_stream_bps, bound_bps: per_stream_bps * f64::from(streams.max(1)) })
}

/// Throughput in one direction against the other.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Asymmetry {
    /// Upload (client → server), bit/s.
    pub up_bps: f64,
    /// Download, bit/s.
    pub down_bps: f64,
    /// `"up"`, `"down"`, or `"neither"` when equal.
    pub faster: String,
    /// Faster over slower (1 when equal; infinite when the slower is 0).
    pub ratio: f64,
    /// `100 × (faster − slower) / faster`: how far the slower falls short.
    pub shortfall_pct: f64,
}

/// Compares the two directions; `None` when both are 0 or either is not finite.
pub fn asymmetry(up_bps: f64, down_bps: f64) -> Option<Asymmetry> {
    if !up_bps.is_finite() || !down_bps.is_finite() || (up_bps <= 0.0 && down_bps <= 0.0) {
        return None;
    }
    let (fast, slow) = (up_bps.max(down_bps), up_bps.min(down_bps));
    let faster = if up_bps > down_bps {
        "up"
    } else if down_bps > up_bps {
        "down"
    } else {
        "neither"
    };
    let ratio = if slow > 0.0 { fast / slow } else { f64::INFINITY };
    Some(Asymmetry { up_bps, down_bps, faster: faster.into(), ratio, shortfall_pct: 100.0 * (fast - slow) / fast })
}

/// Counts of `data` in `bins` equal bins over `[lo, hi]`; values outside are left out, `hi`
/// itself falls in the last bin. Empty when `bins` is 0 or the range is empty.
pub fn histogram(data: &[f64], lo: f64, hi: f64, bins: usize) -> Vec<u64> {
    if bins == 0 || lo.is_nan() || hi.is_nan() || hi <= lo {
        return Vec::new();
    }
    let mut counts = vec![0u64; bins];
    let width = (hi - lo) / bins as f64;
    for &v in data {
        if v >= lo && v <= hi {
            let i = (((v - lo) / width) as usize).min(bins - 1);
            counts[i] += 1;
        }
    }
    counts
}

/// At most `max` points `(value, cumulative fraction 0..=1)` of the empirical CDF of sorted
/// data: every value when there are few, else the values at evenly spaced ranks (first and
/// last kept).
pub fn cdf_points(sorted: &[f64], max: usize) -> Vec<(f64, f64)> {
    let n = sorted.len();
    thin_indices(n, max).into_iter().map(|i| (sorted[i], (i + 1) as f64 / n as f64)).collect()
}

/// At most `max` indices into `0..n`, evenly spaced, keeping the first and the last.
pub fn thin_indices(n: usize, max: usize) -> Vec<usize> {
    if n == 0 || max == 0 {
        return Vec::new();
    }
    if n <= max {
        return (0..n).collect();
    }
    if max == 1 {
        return vec![n - 1];
    }
    let step = (n - 1) as f64 / (max - 1) as f64;
    let mut v: Vec<usize> = (0..max).map(|k| ((k as f64 * step).round() as usize).min(n - 1)).collect();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn phase_stats_by_hand() {
        // 1..=10 ms answered out of 12 sent: mean 5.5, median 5.5, IQR 7.75 − 3.25 = 4.5,
        // p90 = 1 + 0.9·9 = 9.1, loss 2/12 = 16.67 %.
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        let p = PhaseStats::of(&v, 12);
        let r = p.rtt.unwrap();
        assert_eq!((p.sent, p.received), (12, 10));
        assert!(close(p.loss_pct, 100.0 * 2.0 / 12.0));
        assert!(close(r.avg, 5.5) && close(r.median, 5.5) && close(r.iqr, 4.5));
        assert!(close(r.p90.unwrap(), 9.1));
        assert!(close(r.stdev, (55.0f64 / 6.0).sqrt()));
        assert_eq!((r.min, r.max), (1.0, 10.0));
        let none = PhaseStats::of(&[], 5);
        assert_eq!((none.loss_pct, none.rtt), (100.0, None));
        assert_eq!(PhaseStats::of(&[], 0).loss_pct, 0.0);
    }

    #[test]
    fn seed_000_load_diff() {
        // Seed 000's table: loaded avg 258.7, median 260, IQR 109, min 166, max 411 against
        // unloaded 167.2, 167, 0, 166, 189.
        let l = RttStats {
            avg: 258.7,
            stdev: 52.3,
            median: 260.0,
            iqr: 109.0,
            min: 166.0,
            max: 411.0,
            p90: None,
            p5: None,
            p95: None,
        };
        let u = RttStats {
            avg: 167.2,
            stdev: 0.9,
            median: 167.0,
            iqr: 0.0,
            min: 166.0,
            max: 189.0,
            p90: Some(168.0),
            p5: None,
            p95: None,
        };
        let lp = PhaseStats { sent: 2400, received: 2400, loss_pct: 0.0, rtt: Some(l) };
        let up = PhaseStats { sent: 2400, received: 2400, loss_pct: 0.0, rtt: Some(u) };
        let d = load_diff(&lp, &up).unwrap();
        assert!(close(d.avg_ms, 91.5) && close(d.median_ms, 93.0) && close(d.iqr_ms, 109.0));
        assert!(close(d.min_ms, 0.0) && close(d.max_ms, 222.0) && close(d.stdev_ms, 51.4));
        assert_eq!(d.p90_ms, None);
        // 93 ms at 25 Mbit/s: 0.093 × 25e6 / 8 = 290 625 B.
        assert!(close(d.queued_bytes(25e6), 290_625.0));
        let empty = PhaseStats::of(&[], 3);
        assert!(load_diff(&lp, &empty).is_none());
    }

    #[test]
    fn ranking_by_hand() {
        let r = rank_best(&[10.0, 25.0, 20.0, f64::NAN, 25.0]).unwrap();
        assert_eq!((r.best, r.best_value), (1, 25.0));
        assert!(close(r.shortfall_pct[0], 60.0) && close(r.shortfall_pct[2], 20.0));
        assert!(r.shortfall_pct[3].is_nan() && close(r.shortfall_pct[4], 0.0));
        assert!(rank_best(&[0.0, f64::NAN]).is_none());
        assert!(rank_best(&[]).is_none());
    }

    #[test]
    fn window_advice_by_hand() {
        // 25 Mbit/s × 166 ms / 8 = 518 750 B; 10 streams need 51 875 B each. 10 × 64 KiB over
        // 166 ms = 10 × 65 536 × 8 / 0.166 = 31 583 614 bit/s > 25 Mbit/s: not window-limited.
        let a = window_advice(25e6, 0.166, 10, Some(65_536.0));
        assert!(close(a.bdp_bytes, 518_750.0) && close(a.per_stream_bytes, 51_875.0));
        assert!((a.window_limit_bps.unwrap() - 31_583_614.46).abs() < 0.01);
        assert_eq!(a.window_limited, Some(false));
        // One stream of 8 KiB: 8192 × 8 / 0.166 = 394 795 bit/s, window-limited.
        let b = window_advice(25e6, 0.166, 1, Some(8192.0));
        assert_eq!(b.window_limited, Some(true));
        assert!((b.window_limit_bps.unwrap() - 394_795.18).abs() < 0.01);
        let c = window_advice(25e6, 0.166, 2, None);
        assert_eq!((c.window_limit_bps, c.window_limited), (None, None));
    }

    #[test]
    fn mathis_by_hand() {
        // 146 000 000 B in 1460 B segments = 100 000 segments; 10 retransmits: p = 1e-4.
        // One stream at 100 ms: 1460·8/0.1 × √1.5/0.01 = 14 305 020 bit/s; two: twice that.
        let m = mathis_check(1460.0, 0.1, 10, 146_000_000.0, 2).unwrap();
        assert!(close(m.loss, 1e-4));
        assert!((m.per_stream_bps - 14_305_020.1).abs() < 0.1);
        assert!((m.bound_bps - 28_610_040.2).abs() < 0.1);
        assert!(mathis_check(1460.0, 0.1, 0, 1e6, 1).is_none());
        assert!(mathis_check(1460.0, 0.1, 3, 0.0, 1).is_none());
    }

    #[test]
    fn asymmetry_by_hand() {
        let a = asymmetry(40e6, 10e6).unwrap();
        assert_eq!(a.faster, "up");
        assert!(close(a.ratio, 4.0) && close(a.shortfall_pct, 75.0));
        let b = asymmetry(5e6, 20e6).unwrap();
        assert_eq!(b.faster, "down");
        assert!(close(b.ratio, 4.0));
        let c = asymmetry(1.0, 1.0).unwrap();
        assert_eq!((c.faster.as_str(), c.ratio, c.shortfall_pct), ("neither", 1.0, 0.0));
        assert!(asymmetry(1e6, 0.0).unwrap().ratio.is_infinite());
        assert!(asymmetry(0.0, 0.0).is_none() && asymmetry(f64::NAN, 1.0).is_none());
    }

    #[test]
    fn histogram_and_thinning() {
        // [0, 10] in 5 bins of 2: 0,1 | 2,3 | 4 | (none) | 9.5,10 ; 11 is out.
        assert_eq!(histogram(&[0.0, 1.0, 2.0, 3.0, 4.0, 9.5, 10.0, 11.0], 0.0, 10.0, 5), vec![2, 2, 1, 0, 2]);
        assert!(histogram(&[1.0], 1.0, 1.0, 4).is_empty());
        assert_eq!(thin_indices(5, 10), vec![0, 1, 2, 3, 4]);
        assert_eq!(thin_indices(11, 3), vec![0, 5, 10]);
        assert_eq!(thin_indices(1_000_000, 2000).len(), 2000);
        assert_eq!(*thin_indices(1_000_000, 2000).last().unwrap(), 999_999);
        let s = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(cdf_points(&s, 10), vec![(1.0, 0.25), (2.0, 0.5), (3.0, 0.75), (4.0, 1.0)]);
        assert_eq!(cdf_points(&s, 2), vec![(1.0, 0.25), (4.0, 1.0)]);
        assert!(cdf_points(&[], 5).is_empty());
    }
}
