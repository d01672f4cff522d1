//! `--compress auto`: compress while it pays, with time passed in.
//!
//! Two questions decide it. Does the data compress? The ratio of the blocks tried is kept
//! as a moving average; above 0.97 (less than 3 % saved) compression stops, and one block in
//! 64 is still tried so that data which starts to compress later turns it back on. Can the
//! CPU keep up? Every `period` the controller runs a short trial with the other choice and
//! keeps whichever moved more file bytes per second — compression that is slower than the
//! network it saves turns itself off, and turns on again when the network is the slower.

/// The controller.
#[derive(Debug, Clone)]
pub struct Auto {
    ratio: f64,
    samples: u32,
    incompressible: bool,
    /// Whether compression is chosen on rate grounds.
    on: bool,
    phase: Phase,
    period_s: f64,
    trial_s: f64,
    why: &'static str,
}

#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Measuring the chosen setting from `t0` with `bytes0` sent.
    Steady { t0: f64, bytes0: u64 },
    /// Trying the other setting; `rate` is what the chosen one did.
    Trial { t0: f64, bytes0: u64, rate: f64 },
}

/// Blocks tried while data looks incompressible: one in this many.
pub const RETRY_EVERY: u64 = 64;

impl Default for Auto {
    fn default() -> Self {
        Self::new(8.0, 1.0)
    }
}

impl Auto {
    /// A controller that re-checks its choice every `period_s` with a trial of `trial_s`.
    pub fn new(period_s: f64, trial_s: f64) -> Self {
        Auto {
            ratio: 0.0,
            samples: 0,
            incompressible: false,
            on: true,
            phase: Phase::Steady { t0: 0.0, bytes0: 0 },
            period_s,
            trial_s,
            why: "compressing",
        }
    }

    /// Whether to compress the `seq`-th block handed out (0, 1, …) now.
    pub fn compress(&self, seq: u64) -> bool {
        if self.incompressible {
            return seq.is_multiple_of(RETRY_EVERY);
        }
        let trial = matches!(self.phase, Phase::Trial { .. });
        self.on != trial
    }

    /// A block of `raw` bytes compressed to `compressed` bytes.
    pub fn observe_ratio(&mut self, raw: u32, compressed: u32) {
        if raw == 0 {
            return;
        }
        let r = (f64::from(compressed) / f64::from(raw)).min(1.0);
        self.samples += 1;
        let w = if self.samples < 8 { 1.0 / f64::from(self.samples) } else { 0.125 };
        self.ratio += w * (r - self.ratio);
        if self.samples >= 4 && self.ratio >= 0.97 {
            self.incompressible = true;
            self.why = "off: the data does not compress";
        } else if self.incompressible && r < 0.9 {
            self.incompressible = false;
            self.ratio = r;
            self.samples = 1;
            self.why = "compressing";
        }
    }

    /// Progress: `bytes` file bytes handed to the network by `now_s`.
    pub fn observe_progress(&mut self, now_s: f64, bytes: u64) {
        if self.incompressible {
            self.phase = Phase::Steady { t0: now_s, bytes0: bytes };
            return;
        }
        match self.phase {
            Phase::Steady { t0, bytes0 } if now_s - t0 >= self.period_s => {
                let rate = (bytes - bytes0) as f64 / (now_s - t0);
                self.phase = Phase::Trial { t0: now_s, bytes0: bytes, rate };
            }
            Phase::Trial { t0, bytes0, rate } if now_s - t0 >= self.trial_s => {
                let trial = (bytes - bytes0) as f64 / (now_s - t0);
                if trial > rate * 1.1 {
                    self.on = !self.on;
                    self.why = if self.on {
                        "compressing"
                    } else {
                        "off: the CPU cannot compress as fast as the network sends"
                    };
                }
                self.phase = Phase::Steady { t0: now_s, bytes0: bytes };
            }
            _ => {}
        }
    }

    /// Mean compressed/raw ratio of the blocks tried.
    pub fn ratio(&self) -> f64 {
        self.ratio
    }

    /// What it decided and why.
    pub fn describe(&self) -> &'static str {
        self.why
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incompressible_data_turns_it_off_then_compressible_data_back_on() {
        let mut a = Auto::default();
        assert!(a.compress(0) && a.compress(1));
        for _ in 0..4 {
            a.observe_ratio(1000, 1001);
        }
        assert!(!a.compress(1));
        assert!(a.compress(RETRY_EVERY));
        assert_eq!(a.describe(), "off: the data does not compress");
        a.observe_ratio(1000, 300);
        assert!(a.compress(1));
    }

    #[test]
    fn a_slow_compressor_loses_its_trial_and_a_fast_one_keeps_its_place() {
        // Compression moves 100 B/s; without it 300 B/s.
        let mut a = Auto::new(8.0, 1.0);
        a.observe_ratio(1000, 500);
        let mut t = 0.0;
        let mut bytes = 0u64;
        for _ in 0..200 {
            t += 0.1;
            bytes += if a.compress(1) { 10 } else { 30 };
            a.observe_progress(t, bytes);
        }
        assert!(!a.compress(1), "{}", a.describe());
        assert!(a.describe().contains("CPU"));
        // Compression that moves more stays on.
        let mut b = Auto::new(8.0, 1.0);
        b.observe_ratio(1000, 500);
        let (mut t, mut bytes) = (0.0, 0u64);
        for _ in 0..200 {
            t += 0.1;
            bytes += if b.compress(1) { 30 } else { 10 };
            b.observe_progress(t, bytes);
        }
        assert!(b.compress(1));
    }
}
