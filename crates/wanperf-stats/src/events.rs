//! Event detection on long series with the plateau method of SLAC's IEPM-BW: a history
//! buffer describes normal behaviour; a point beyond β·σ of the history's mean goes to a
//! trigger buffer instead; when the trigger buffer is full and its mean differs from the
//! history's by more than δ %, an event fires and the trigger buffer becomes the new history.
//! σ counts as at least 1 % of the mean ([`NOISE_FLOOR`]).

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// The least σ a history is taken to have, as a share of its mean. No measurement repeats
/// better than that; a history of identical values (an emulated path's 9.32, 9.32, …) would
/// otherwise send a last-digit wobble (9.31) to the trigger buffer, where it dilutes the new
/// level's mean and moves the event's start.
pub const NOISE_FLOOR: f64 = 0.01;

/// Detector settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PlateauConfig {
    /// History buffer length (points).
    pub history: usize,
    /// Points the history needs before points are judged against it (at most `history`).
    pub min_history: usize,
    /// Trigger buffer length (points).
    pub trigger: usize,
    /// A point is a trigger candidate beyond β standard deviations of the history mean.
    pub beta: f64,
    /// An event needs the buffer means to differ by more than δ percent.
    pub delta_pct: f64,
    /// … and by more than this much in the series' own unit (0: no floor), so that a small
    /// series' relative swings (1 → 1.5 ms) are not events.
    pub min_change: f64,
}

impl Default for PlateauConfig {
    fn default() -> Self {
        PlateauConfig { history: 20, min_history: 20, trigger: 5, beta: 2.0, delta_pct: 40.0, min_change: 0.0 }
    }
}

/// A detected change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Index of the first point of the new level.
    pub start: usize,
    /// Index at which the event was confirmed.
    pub confirmed: usize,
    /// Mean before.
    pub before: f64,
    /// Mean after.
    pub after: f64,
    /// Change in percent of `before`.
    pub change_pct: f64,
}

fn mean_sd(v: &VecDeque<f64>) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    let sd = if v.len() > 1 { (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1.0)).sqrt() } else { 0.0 };
    (m, sd)
}

/// The detector run online: points are pushed one at a time and an event is returned by the
/// push that confirms it (the monitoring mesh runs one per pair and metric). The points are
/// numbered from 0 in push order, non-finite ones included (and ignored).
///
/// ```
/// use wanperf_stats::events::{Plateau, PlateauConfig};
/// let mut d = Plateau::new(PlateauConfig { min_history: 5, trigger: 3, ..PlateauConfig::default() });
/// for x in [74.0, 75.0, 73.0, 76.0, 74.0, 75.0] {
///     assert!(d.push(x).is_none());
/// }
/// assert!(d.push(0.8).is_none() && d.push(0.9).is_none());
/// let e = d.push(0.7).unwrap();
/// assert_eq!((e.start, e.confirmed), (6, 8));
/// assert!(e.change_pct < -98.0);
/// ```
#[derive(Debug, Clone)]
pub struct Plateau {
    cfg: PlateauConfig,
    history: VecDeque<f64>,
    trigger: Vec<(usize, f64)>,
    next: usize,
}

impl Plateau {
    /// A detector that has seen nothing.
    pub fn new(cfg: PlateauConfig) -> Plateau {
        Plateau { cfg, history: VecDeque::new(), trigger: Vec::new(), next: 0 }
    }

    /// Points in the history buffer.
    pub fn history_len(&self) -> usize {
        self.history.len()
    }

    /// Adds the next point; returns the event it confirms, if any. After an event the
    /// trigger buffer's points are the new history.
    pub fn push(&mut self, x: f64) -> Option<Event> {
        let i = self.next;
        self.next += 1;
        let cfg = self.cfg;
        if !x.is_finite() {
            return None;
        }
        if self.history.len() < cfg.min_history.clamp(1, cfg.history.max(1)) {
            self.history.push_back(x);
            return None;
        }
        let (m, sd) = mean_sd(&self.history);
        if (x - m).abs() > cfg.beta * sd.max(m.abs() * NOISE_FLOOR) {
            self.trigger.push((i, x));
            if self.trigger.len() < cfg.trigger.max(1) {
                return None;
            }
            let tm = self.trigger.iter().map(|t| t.1).sum::<f64>() / self.trigger.len() as f64;
            let change = if m != 0.0 { 100.0 * (tm - m) / m.abs() } else { f64::INFINITY };
            let event = (change.abs() > cfg.delta_pct && (tm - m).abs() > cfg.min_change).then(|| {
                self.history = self.trigger.iter().map(|t| t.1).collect();
                Event { start: self.trigger[0].0, confirmed: i, before: m, after: tm, change_pct: change }
            });
            self.trigger.clear();
            event
        } else {
            // A normal point: the history absorbs it and any half-filled trigger is dropped.
            self.trigger.clear();
            self.history.push_back(x);
            if self.history.len() > cfg.history {
                self.history.pop_front();
            }
            None
        }
    }
}

/// Runs the detector over `series` and returns the events it finds.
pub fn plateau(series: &[f64], cfg: PlateauConfig) -> Vec<Event> {
    let mut d = Plateau::new(cfg);
    series.iter().filter_map(|&x| d.push(x)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noise(i: usize) -> f64 {
        // Deterministic noise in [-1, 1].
        (((i as u64).wrapping_mul(2654435761) % 2001) as f64 / 1000.0) - 1.0
    }

    #[test]
    fn flags_seed_001s_drop() {
        // 70–80 Mbit/s, then under 1 Mbit/s (seed 001).
        let mut s: Vec<f64> = (0..60).map(|i| 75.0 + 5.0 * noise(i)).collect();
        s.extend((60..100).map(|i| 0.5 + 0.4 * noise(i)));
        let ev = plateau(&s, PlateauConfig::default());
        assert_eq!(ev.len(), 1, "{ev:?}");
        assert_eq!(ev[0].start, 60);
        assert!(ev[0].change_pct < -95.0);
    }

    #[test]
    fn quiet_on_noise_and_finds_steps_up() {
        let s: Vec<f64> = (0..500).map(|i| 100.0 + 10.0 * noise(i)).collect();
        assert!(plateau(&s, PlateauConfig::default()).is_empty());
        let mut s: Vec<f64> = (0..40).map(|i| 10.0 + noise(i)).collect();
        s.extend((40..80).map(|i| 30.0 + noise(i)));
        let ev = plateau(&s, PlateauConfig::default());
        assert_eq!(ev.len(), 1);
        assert!(ev[0].change_pct > 150.0);
    }

    #[test]
    fn online_and_batch_agree_and_short_histories_judge_early() {
        let mut s: Vec<f64> = (0..30).map(|i| 50.0 + 3.0 * noise(i)).collect();
        s.push(f64::NAN);
        s.extend((31..60).map(|i| 20.0 + noise(i)));
        s.extend((60..90).map(|i| 50.0 + 3.0 * noise(i)));
        let cfg = PlateauConfig::default();
        let batch = plateau(&s, cfg);
        let mut d = Plateau::new(cfg);
        let online: Vec<Event> = s.iter().filter_map(|&x| d.push(x)).collect();
        assert_eq!(batch, online);
        assert_eq!(batch.len(), 2, "{batch:?}");
        assert_eq!((batch[0].start, batch[1].start), (31, 60));
        // With min_history 5 a change after 6 points is found; with the default it is not.
        let mut short: Vec<f64> = (0..6).map(|i| 50.0 + noise(i)).collect();
        short.extend([10.0; 5]);
        assert!(plateau(&short, cfg).is_empty());
        let ev = plateau(&short, PlateauConfig { min_history: 5, ..cfg });
        assert_eq!((ev.len(), ev[0].start, ev[0].confirmed), (1, 6, 10));
        // The absolute floor: a 1 → 2 step (+100 %) is an event only without it.
        let mut small: Vec<f64> = (0..20).map(|i| 1.0 + 0.01 * noise(i)).collect();
        small.extend([2.0; 5]);
        assert_eq!(plateau(&small, cfg).len(), 1);
        assert!(plateau(&small, PlateauConfig { min_change: 2.0, ..cfg }).is_empty());
    }

    #[test]
    fn a_last_digit_wobble_on_a_flat_history_is_not_part_of_the_change() {
        // Seed 001's drop on an emulated path: identical results, one a hundredth lower, then
        // the drop. The new level is the drop's, and it starts at the drop.
        let series = [9.32, 9.32, 9.32, 9.32, 9.32, 9.32, 9.31, 0.76, 0.75, 0.75];
        let e = plateau(&series, PlateauConfig { min_history: 5, trigger: 3, ..PlateauConfig::default() });
        assert_eq!(e.len(), 1);
        assert_eq!((e[0].start, e[0].confirmed), (7, 9));
        assert!((e[0].after - 0.7533).abs() < 1e-3, "{:?}", e[0]);
    }
}
