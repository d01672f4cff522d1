//! Link-level cross traffic: when a generator's packets arrive, as a pure state machine in
//! virtual time (the I/O loop asks what is due; tests drive it with made-up clocks).

use crate::topo::Pattern;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use wanperf_emu::config::Nanos;

/// One generator.
#[derive(Debug, Clone)]
pub struct Generator {
    pattern: Pattern,
    /// Mean gap in "on" time, ns (fractional).
    gap: f64,
    start: Nanos,
    stop: Option<Nanos>,
    rng: SmallRng,
    /// Position in on-time (ns since start, counting only on periods).
    on_time: f64,
    next: Option<Nanos>,
}

impl Generator {
    /// A generator of `packet`-byte packets at a mean of `rate_bps`, from `start` to `stop`.
    pub fn new(
        pattern: Pattern,
        rate_bps: u64,
        packet: usize,
        start: Nanos,
        stop: Option<Nanos>,
        seed: u64,
    ) -> Generator {
        let mean_gap = packet as f64 * 8.0 * 1e9 / rate_bps.max(1) as f64;
        // On-off keeps the mean: during `on` it sends (on + off) / on times faster.
        let gap = match pattern {
            Pattern::OnOff { on_ns, off_ns } => mean_gap * on_ns as f64 / (on_ns + off_ns) as f64,
            _ => mean_gap,
        };
        let mut g =
            Generator { pattern, gap, start, stop, rng: SmallRng::seed_from_u64(seed), on_time: 0.0, next: None };
        g.next = g.wall(0.0);
        g
    }

    fn wall(&self, on_time: f64) -> Option<Nanos> {
        let t = match self.pattern {
            Pattern::OnOff { on_ns, off_ns } => {
                let periods = (on_time / on_ns as f64).floor();
                let within = on_time - periods * on_ns as f64;
                self.start as f64 + periods * (on_ns + off_ns) as f64 + within
            }
            _ => self.start as f64 + on_time,
        };
        let t = t as Nanos;
        match self.stop {
            Some(s) if t >= s => None,
            _ => Some(t),
        }
    }

    /// When the next packet is due (None: finished).
    pub fn next_at(&self) -> Option<Nanos> {
        self.next
    }

    /// Takes the next packet if it is due by `now`; returns its due time.
    pub fn pop(&mut self, now: Nanos) -> Option<Nanos> {
        let due = self.next.filter(|&t| t <= now)?;
        let step = match self.pattern {
            Pattern::Constant => self.gap,
            // Exponential gaps: -ln(U) × mean, U in (0, 1].
            _ => -(1.0 - self.rng.random::<f64>()).ln() * self.gap,
        };
        self.on_time += step;
        self.next = self.wall(self.on_time);
        Some(due)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(g: &mut Generator, until: Nanos) -> Vec<Nanos> {
        let mut out = Vec::new();
        while let Some(t) = g.pop(until) {
            out.push(t);
        }
        out
    }

    #[test]
    fn constant_rate_spaces_packets_evenly_between_start_and_stop() {
        // 12 Mbit/s of 1500-byte packets: one per ms.
        let mut g = Generator::new(Pattern::Constant, 12_000_000, 1500, 1_000_000_000, Some(2_000_000_000), 1);
        assert_eq!(g.pop(999_999_999), None, "nothing before start");
        let ts = count(&mut g, 10_000_000_000);
        assert_eq!(ts.len(), 1000);
        assert_eq!(ts[0], 1_000_000_000);
        assert_eq!(ts[1] - ts[0], 1_000_000);
        assert!(*ts.last().unwrap() < 2_000_000_000);
        assert_eq!(g.next_at(), None);
    }

    #[test]
    fn poisson_keeps_its_mean_rate() {
        let mut g = Generator::new(Pattern::Poisson, 10_000_000, 1250, 0, Some(100_000_000_000), 7);
        // 10 Mbit/s of 1250-byte packets: 1000 per second, 100 000 in 100 s (± a few σ = 316).
        let n = count(&mut g, 100_000_000_000).len() as f64;
        assert!((n - 100_000.0).abs() < 1500.0, "{n}");
    }

    #[test]
    fn on_off_is_silent_when_off_and_keeps_the_mean() {
        let on_off = Pattern::OnOff { on_ns: 100_000_000, off_ns: 300_000_000 };
        let mut g = Generator::new(on_off, 10_000_000, 1250, 0, Some(40_000_000_000), 3);
        let ts = count(&mut g, 40_000_000_000);
        assert!(ts.iter().all(|t| t % 400_000_000 < 100_000_000), "a packet in an off period");
        let n = ts.len() as f64;
        assert!((n - 40_000.0).abs() < 800.0, "{n}");
    }
}
