//! Event detection on long series with the plateau method of SLAC's IEPM-BW: a history
//! buffer describes normal behaviour; a point beyond β·σ of the history's mean goes to a
//! trigger buffer instead; when the trigger buffer is full and its mean differs from the
//! history's by more than δ %, an event fires and the trigger buffer becomes the new history.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Detector settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PlateauConfig {
    /// History buffer length (points).
    pub history: usize,
    /// Trigger buffer length (points).
    pub trigger: usize,
    /// A point is a trigger candidate beyond β standard deviations of the history mean.
    pub beta: f64,
    /// An event needs the buffer means to differ by more than δ percent.
    pub delta_pct: f64,
}

impl Default for PlateauConfig {
    fn default() -> Self {
        PlateauConfig { history: 20, trigger: 5, beta: 2.0, delta_pct: 40.0 }
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

/// Runs the detector over `series` and returns the events it finds.
pub fn plateau(series: &[f64], cfg: PlateauConfig) -> Vec<Event> {
    let mut history: VecDeque<f64> = VecDeque::new();
    let mut trigger: Vec<(usize, f64)> = Vec::new();
    let mut events = Vec::new();
    for (i, &x) in series.iter().enumerate() {
        if !x.is_finite() {
            continue;
        }
        if history.len() < cfg.history {
            history.push_back(x);
            continue;
        }
        let (m, sd) = mean_sd(&history);
        if (x - m).abs() > cfg.beta * sd.max(m.abs() * 1e-9) {
            trigger.push((i, x));
            if trigger.len() >= cfg.trigger {
                let tm = trigger.iter().map(|t| t.1).sum::<f64>() / trigger.len() as f64;
                let change = if m != 0.0 { 100.0 * (tm - m) / m.abs() } else { f64::INFINITY };
                if change.abs() > cfg.delta_pct {
                    events.push(Event { start: trigger[0].0, confirmed: i, before: m, after: tm, change_pct: change });
                    history = trigger.iter().map(|t| t.1).collect();
                }
                trigger.clear();
            }
        } else {
            // A normal point: the history absorbs it and any half-filled trigger is dropped.
            trigger.clear();
            history.push_back(x);
            if history.len() > cfg.history {
                history.pop_front();
            }
        }
    }
    events
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
}
