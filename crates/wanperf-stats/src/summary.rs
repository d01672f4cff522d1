//! Summaries of a sample: the seed tables' average, stdev, median, IQR, min, max and
//! percentiles, and the delay-variation measures probes report.

use serde::{Deserialize, Serialize};

/// Quantile `q` (0..=1) of sorted data by linear interpolation between closest ranks
/// (Hyndman & Fan type 7, the default of R and NumPy). `None` for empty data.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() || !(0.0..=1.0).contains(&q) {
        return None;
    }
    let h = (sorted.len() - 1) as f64 * q;
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    Some(sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo]))
}

/// The finite values of `data`, sorted.
pub fn sorted_finite(data: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = data.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v
}

/// Arithmetic mean.
pub fn mean(data: &[f64]) -> Option<f64> {
    (!data.is_empty()).then(|| data.iter().sum::<f64>() / data.len() as f64)
}

/// Sample standard deviation (n − 1); 0 for a single value.
pub fn stdev(data: &[f64]) -> Option<f64> {
    let m = mean(data)?;
    if data.len() < 2 {
        return Some(0.0);
    }
    let ss: f64 = data.iter().map(|x| (x - m) * (x - m)).sum();
    Some((ss / (data.len() - 1) as f64).sqrt())
}

/// The usual summary of a sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Values summarized.
    pub count: usize,
    /// Mean.
    pub avg: f64,
    /// Sample standard deviation.
    pub stdev: f64,
    /// Median.
    pub median: f64,
    /// Interquartile range (p75 − p25).
    pub iqr: f64,
    /// Minimum.
    pub min: f64,
    /// Maximum.
    pub max: f64,
    /// 5th percentile.
    pub p5: f64,
    /// 25th percentile.
    pub p25: f64,
    /// 75th percentile.
    pub p75: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
}

impl Summary {
    /// Summarizes the finite values of `data`; `None` if there are none.
    pub fn of(data: &[f64]) -> Option<Summary> {
        let s = sorted_finite(data);
        let q = |p| quantile_sorted(&s, p).expect("non-empty");
        if s.is_empty() {
            return None;
        }
        Some(Summary {
            count: s.len(),
            avg: mean(&s)?,
            stdev: stdev(&s)?,
            median: q(0.5),
            iqr: q(0.75) - q(0.25),
            min: s[0],
            max: s[s.len() - 1],
            p5: q(0.05),
            p25: q(0.25),
            p75: q(0.75),
            p95: q(0.95),
            p99: q(0.99),
        })
    }
}

/// Inter-packet delay variation (RFC 3393) of consecutive delays: `d[i+1] − d[i]` for each
/// pair of consecutive values that are both present (a lost probe breaks the pair).
pub fn ipdv(delays: &[Option<f64>]) -> Vec<f64> {
    delays
        .windows(2)
        .filter_map(|w| match (w[0], w[1]) {
            (Some(a), Some(b)) => Some(b - a),
            _ => None,
        })
        .collect()
}

/// Interarrival jitter as RFC 3550 defines it (J += (|D| − J) / 16) over consecutive values;
/// for RTT series this is the same estimator applied to round trips.
pub fn rfc3550_jitter(delays: &[f64]) -> f64 {
    let mut j = 0.0;
    for w in delays.windows(2) {
        j += ((w[1] - w[0]).abs() - j) / 16.0;
    }
    j
}

/// Responsiveness as the IETF IPPM responsiveness draft computes it: 60 000 ms over the
/// equal-weight mean of the foreign-flow latency (probes on separate flows) and the self
/// latency (on the load-generating connections), each the 95 % trimmed mean of its samples.
/// The draft's foreign term averages TCP, TLS and HTTP handshakes; here the foreign flow is
/// wanperf's UDP probe, and the self term is the load connections' TCP_INFO smoothed RTT
/// (the draft's HTTP/2 self probe also includes the sender's socket-buffer wait).
/// Without self samples the foreign term stands alone.
pub fn rpm(foreign_ms: &[f64], self_ms: &[f64]) -> (Option<f64>, Option<f64>, Option<f64>) {
    let tm = |v: &[f64]| trimmed_mean(v, 0.95).filter(|m| *m > 0.0);
    let (f, s) = (tm(foreign_ms), tm(self_ms));
    let latency = match (f, s) {
        (Some(f), Some(s)) => Some(0.5 * f + 0.5 * s),
        (f, None) => f,
        (None, s) => s,
    };
    (latency.map(|l| 60_000.0 / l), f, s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn hand_computed_summary() {
        // 1..=10: mean 5.5, sample stdev sqrt(55/6), type-7 quartiles 3.25 and 7.75.
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        let s = Summary::of(&v).unwrap();
        assert_eq!(s.count, 10);
        assert!((s.avg - 5.5).abs() < 1e-12);
        assert!((s.stdev - (55.0f64 / 6.0).sqrt()).abs() < 1e-12);
        assert!((s.median - 5.5).abs() < 1e-12);
        assert!((s.p25 - 3.25).abs() < 1e-12 && (s.p75 - 7.75).abs() < 1e-12);
        assert!((s.iqr - 4.5).abs() < 1e-12);
        assert!((s.p95 - 9.55).abs() < 1e-12);
        assert_eq!((s.min, s.max), (1.0, 10.0));
        assert!(Summary::of(&[]).is_none());
        assert!(Summary::of(&[f64::NAN]).is_none());
        let one = Summary::of(&[3.0]).unwrap();
        assert_eq!((one.stdev, one.iqr, one.median), (0.0, 0.0, 3.0));
    }

    #[test]
    fn ipdv_skips_losses_and_jitter_converges() {
        let d = [Some(10.0), Some(12.0), None, Some(11.0), Some(15.0)];
        assert_eq!(ipdv(&d), vec![2.0, 4.0]);
        // Alternating 0/1: |D| = 1 every step; J approaches 1.
        let alt: Vec<f64> = (0..500).map(|i| f64::from(i % 2)).collect();
        assert!((rfc3550_jitter(&alt) - 1.0).abs() < 1e-9);
        assert_eq!(rfc3550_jitter(&[5.0; 10]), 0.0);
    }

    proptest! {
        #[test]
        fn quantiles_are_ordered_and_bounded(mut v in prop::collection::vec(-1e6f64..1e6, 1..200), a in 0.0f64..1.0, b in 0.0f64..1.0) {
            v.sort_by(f64::total_cmp);
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            let ql = quantile_sorted(&v, lo).unwrap();
            let qh = quantile_sorted(&v, hi).unwrap();
            prop_assert!(ql <= qh + 1e-9);
            prop_assert!(ql >= v[0] - 1e-9 && qh <= v[v.len() - 1] + 1e-9);
            let s = Summary::of(&v).unwrap();
            prop_assert!(s.iqr >= 0.0 && s.stdev >= 0.0);
            prop_assert!(s.min <= s.median && s.median <= s.max);
        }
    }
}

/// The median of the finite values of `data` and their robust spread: the median absolute
/// deviation from it × 1.4826 (the standard deviation of normal data, but not moved by a few
/// outliers). `None` without finite values.
pub fn median_mad(data: &[f64]) -> Option<(f64, f64)> {
    let s = sorted_finite(data);
    let median = quantile_sorted(&s, 0.5)?;
    let dev = sorted_finite(&s.iter().map(|x| (x - median).abs()).collect::<Vec<_>>());
    Some((median, 1.4826 * quantile_sorted(&dev, 0.5)?))
}

/// Mean of the values at or below the `keep` quantile (0..=1): the IETF responsiveness
/// draft's trimmed mean (it keeps the lowest 95 %).
pub fn trimmed_mean(data: &[f64], keep: f64) -> Option<f64> {
    let s = sorted_finite(data);
    let n = ((s.len() as f64) * keep).ceil().max(1.0) as usize;
    mean(&s[..n.min(s.len())])
}

#[cfg(test)]
mod trim_tests {
    use super::*;

    #[test]
    fn trimmed_mean_drops_the_top() {
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        // Keep 95 % of 20 = 19 values: mean of 1..=19 = 10.
        assert_eq!(trimmed_mean(&v, 0.95), Some(10.0));
        assert_eq!(trimmed_mean(&[], 0.95), None);
    }

    #[test]
    fn median_mad_ignores_an_outlier() {
        let (m, mad) = median_mad(&[1.0, 2.0, 3.0, 4.0, 1000.0, f64::NAN]).unwrap();
        assert_eq!(m, 3.0);
        assert!((mad - 1.4826).abs() < 1e-12, "{mad}");
        assert_eq!(median_mad(&[]), None);
    }

    #[test]
    fn rpm_weighs_foreign_and_self_latency_equally() {
        // 20 values 10..=29 ms: the 95 % trimmed mean drops the top value (29) -> mean of 10..=28 = 19.
        let foreign: Vec<f64> = (10..30).map(f64::from).collect();
        let own = vec![40.0; 20];
        let (r, f, s) = rpm(&foreign, &own);
        assert_eq!(f, Some(19.0));
        assert_eq!(s, Some(40.0));
        assert!((r.unwrap() - 60_000.0 / 29.5).abs() < 1e-9);
        // Foreign only.
        assert_eq!(rpm(&[60.0], &[]).0, Some(1000.0));
        assert_eq!(rpm(&[], &[]).0, None);
    }
}
