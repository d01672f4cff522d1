//! Interface utilization from counter readings (MRTG's view): rates between readings, averaged
//! and maximised per bin, in and out. A 32-bit counter that went down wrapped once when that
//! gives a possible rate; anything else that goes down (a 64-bit counter, a device restart) is
//! a reset and leaves a gap, never a spike.

use crate::record::IfCounters;
use serde::{Deserialize, Serialize};

/// One bin of utilization.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UtilBin {
    /// Bin start, Unix milliseconds.
    pub bin_ms: u64,
    /// Milliseconds of the bin covered by readings (less than the bin at gaps and edges).
    pub covered_ms: u64,
    /// Average rate in, bit/s, over the covered time.
    pub in_bps: f64,
    /// Average rate out, bit/s.
    pub out_bps: f64,
    /// Highest rate in between two readings, bit/s.
    pub in_max_bps: f64,
    /// Highest rate out between two readings, bit/s.
    pub out_max_bps: f64,
    /// Errors in (receive), counted over the bin.
    pub in_errors: u64,
    /// Errors out.
    pub out_errors: u64,
    /// Drops in.
    pub in_drops: u64,
    /// Drops out.
    pub out_drops: u64,
    /// Interface speed, bit/s, when known.
    pub speed_bps: Option<u64>,
}

/// A run of saturated bins in one direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Saturation {
    /// `in` or `out`.
    pub dir: String,
    /// First saturated bin, Unix milliseconds.
    pub from_ms: u64,
    /// End of the last saturated bin.
    pub to_ms: u64,
    /// Highest average in the run, percent of the speed.
    pub peak_pct: f64,
}

/// Readings of one interface turned into bins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UtilSeries {
    /// Bin length, milliseconds.
    pub bin_len_ms: u64,
    /// Octets in over the readings (wraps taken, gaps left out).
    pub in_octets: u64,
    /// Octets out over the readings.
    pub out_octets: u64,
    /// Bins in time order.
    pub bins: Vec<UtilBin>,
    /// Counter wraps taken (32-bit counters).
    pub wraps: u64,
    /// Resets (gaps) found.
    pub resets: u64,
}

/// One counter's increase between two readings: Some(delta), or None for a reset.
fn delta(prev: u64, cur: u64, width: u8, secs: f64, speed: Option<u64>) -> (Option<u64>, bool) {
    if cur >= prev {
        return (Some(cur - prev), false);
    }
    if width == 32 && prev <= u64::from(u32::MAX) {
        let d = (1u64 << 32) - prev + cur;
        // A wrap is only believable if the rate it implies is possible on this interface (or,
        // speed unknown, below 100 Gbit/s).
        let max_bytes = speed.unwrap_or(100_000_000_000) as f64 / 8.0 * secs * 1.05;
        if (d as f64) <= max_bytes {
            return (Some(d), true);
        }
    }
    (None, false)
}

impl UtilSeries {
    /// Bins of `bin_ms` from readings of one interface (any order).
    pub fn from_readings(readings: &[IfCounters], bin_ms: u64) -> UtilSeries {
        let bin_ms = bin_ms.max(1);
        let mut r: Vec<&IfCounters> = readings.iter().collect();
        r.sort_by_key(|c| c.at_ms);
        let mut bins: std::collections::BTreeMap<u64, UtilBin> = std::collections::BTreeMap::new();
        let (mut wraps, mut resets) = (0, 0);
        let (mut in_total, mut out_total) = (0u64, 0u64);
        for w in r.windows(2) {
            let (a, b) = (w[0], w[1]);
            if b.at_ms <= a.at_ms {
                continue;
            }
            let secs = (b.at_ms - a.at_ms) as f64 / 1000.0;
            let speed = b.speed_bps.or(a.speed_bps);
            let (din, win) = delta(a.in_octets, b.in_octets, b.width, secs, speed);
            let (dout, wout) = delta(a.out_octets, b.out_octets, b.width, secs, speed);
            let (Some(din), Some(dout)) = (din, dout) else {
                resets += 1;
                continue;
            };
            wraps += u64::from(win) + u64::from(wout);
            in_total += din;
            out_total += dout;
            let (in_bps, out_bps) = (din as f64 * 8.0 / secs, dout as f64 * 8.0 / secs);
            let errs = [
                b.in_errors.saturating_sub(a.in_errors),
                b.out_errors.saturating_sub(a.out_errors),
                b.in_drops.saturating_sub(a.in_drops),
                b.out_drops.saturating_sub(a.out_drops),
            ];
            // Spread the interval over the bins it covers.
            let mut t = a.at_ms;
            let mut first = true;
            while t < b.at_ms {
                let bin = t - t % bin_ms;
                let end = b.at_ms.min(bin + bin_ms);
                let span = end - t;
                let e = bins.entry(bin).or_insert_with(|| UtilBin {
                    bin_ms: bin,
                    covered_ms: 0,
                    in_bps: 0.0,
                    out_bps: 0.0,
                    in_max_bps: 0.0,
                    out_max_bps: 0.0,
                    in_errors: 0,
                    out_errors: 0,
                    in_drops: 0,
                    out_drops: 0,
                    speed_bps: speed,
                });
                // Running average over covered time.
                let c = e.covered_ms as f64;
                let s = span as f64;
                e.in_bps = (e.in_bps * c + in_bps * s) / (c + s);
                e.out_bps = (e.out_bps * c + out_bps * s) / (c + s);
                e.covered_ms += span;
                e.in_max_bps = e.in_max_bps.max(in_bps);
                e.out_max_bps = e.out_max_bps.max(out_bps);
                if first {
                    e.in_errors += errs[0];
                    e.out_errors += errs[1];
                    e.in_drops += errs[2];
                    e.out_drops += errs[3];
                    first = false;
                }
                e.speed_bps = e.speed_bps.or(speed);
                t = end;
            }
        }
        UtilSeries {
            bin_len_ms: bin_ms,
            in_octets: in_total,
            out_octets: out_total,
            bins: bins.into_values().collect(),
            wraps,
            resets,
        }
    }

    /// Runs of at least `min_bins` consecutive bins at or above `pct` percent of the speed, per
    /// direction (bins without a known speed never count).
    pub fn saturation(&self, pct: f64, min_bins: usize) -> Vec<Saturation> {
        let mut out = Vec::new();
        for dir in ["in", "out"] {
            let mut run: Vec<&UtilBin> = Vec::new();
            let flush = |run: &mut Vec<&UtilBin>, out: &mut Vec<Saturation>| {
                if run.len() >= min_bins.max(1) {
                    let peak = run.iter().map(|b| util_pct(b, dir).unwrap_or(0.0)).fold(0.0, f64::max);
                    let last = run[run.len() - 1];
                    out.push(Saturation {
                        dir: dir.into(),
                        from_ms: run[0].bin_ms,
                        to_ms: last.bin_ms + self.bin_len_ms,
                        peak_pct: peak,
                    });
                }
                run.clear();
            };
            let mut prev: Option<u64> = None;
            for b in &self.bins {
                let contiguous = prev.is_none_or(|p| b.bin_ms == p + self.bin_len_ms);
                if !contiguous {
                    flush(&mut run, &mut out);
                }
                if util_pct(b, dir).is_some_and(|u| u >= pct) {
                    run.push(b);
                } else {
                    flush(&mut run, &mut out);
                }
                prev = Some(b.bin_ms);
            }
            flush(&mut run, &mut out);
        }
        out
    }
}

/// A bin's average in `dir` as a percentage of the speed.
pub fn util_pct(b: &UtilBin, dir: &str) -> Option<f64> {
    let s = b.speed_bps.filter(|&s| s > 0)? as f64;
    Some(100.0 * if dir == "in" { b.in_bps } else { b.out_bps } / s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(at_s: u64, inn: u64, out: u64, width: u8) -> IfCounters {
        IfCounters {
            device: "r1".into(),
            interface: "eth0".into(),
            at_ms: at_s * 1000,
            speed_bps: Some(100_000_000),
            in_octets: inn,
            out_octets: out,
            in_errors: 0,
            out_errors: 0,
            in_drops: 0,
            out_drops: 0,
            width,
        }
    }

    #[test]
    fn rates_are_averaged_per_bin() {
        // 10 MB/s in for 300 s = 80 Mbit/s; out idle.
        let r: Vec<IfCounters> = (0..=30).map(|i| reading(i * 10, i * 100_000_000, 0, 64)).collect();
        let s = UtilSeries::from_readings(&r, 300_000);
        assert_eq!(s.bins.len(), 1);
        assert!((s.bins[0].in_bps - 80e6).abs() < 1.0, "{}", s.bins[0].in_bps);
        assert_eq!(s.bins[0].covered_ms, 300_000);
    }

    #[test]
    fn a_32_bit_wrap_is_continuous_and_a_reset_is_a_gap() {
        let top = u64::from(u32::MAX);
        let r = vec![
            reading(0, top - 1_000_000, 0, 32),
            reading(10, 9_000_000 - 1, 0, 32), // wrapped: 10 MB in 10 s
            reading(20, 19_000_000 - 1, 0, 32),
            reading(30, 5, 0, 32), // reset: 19 MB back to 5 would be a 4.3 GB wrap, impossible at 100M
            reading(40, 10_000_005, 0, 32),
        ];
        let s = UtilSeries::from_readings(&r, 300_000);
        assert_eq!((s.wraps, s.resets), (1, 1));
        assert!((s.bins[0].in_max_bps - 8e6).abs() < 1.0);
        assert_eq!(s.bins[0].covered_ms, 30_000);
        // The wrap counts what crossed; the reset's interval counts nothing.
        assert_eq!(s.in_octets, 30_000_000);
        // 64-bit counters never wrap in practice: going down is a reset.
        let s64 = UtilSeries::from_readings(&[reading(0, 100, 0, 64), reading(10, 50, 0, 64)], 300_000);
        assert_eq!((s64.wraps, s64.resets, s64.bins.len()), (0, 1, 0));
    }

    #[test]
    fn three_saturated_bins_are_flagged_per_direction() {
        // 98 Mbit/s out for 4 bins of 60 s, in idle.
        let r: Vec<IfCounters> = (0..=24).map(|i| reading(i * 10, 0, i * 122_500_000, 64)).collect();
        let s = UtilSeries::from_readings(&r, 60_000);
        let sat = s.saturation(95.0, 3);
        assert_eq!(sat.len(), 1);
        assert_eq!(sat[0].dir, "out");
        assert_eq!((sat[0].from_ms, sat[0].to_ms), (0, 240_000));
        assert!(s.saturation(99.0, 3).is_empty());
    }
}
