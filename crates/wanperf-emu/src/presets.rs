//! The seed studies' paths, as starting points for `--preset`.

use crate::config::{DirConfig, PolicerAction, PolicerConfig, QueueLimit, Rate, Selector};
use crate::path::PathConfig;

/// A named path with the numbers of the study it comes from.
#[derive(Debug, Clone)]
pub struct Preset {
    /// Name for `--preset`.
    pub name: &'static str,
    /// Where the numbers come from.
    pub source: &'static str,
    /// Round-trip time, ms.
    pub rtt_ms: u64,
    /// Bottleneck, bit/s.
    pub rate_bps: u64,
    /// Bottleneck buffer, bytes.
    pub queue_bytes: usize,
    /// Policer on the left→right direction.
    pub policer: Option<PolicerConfig>,
    /// Sender interface queue.
    pub txqueuelen: Option<u32>,
}

/// Every preset.
pub fn all() -> Vec<Preset> {
    let oscars = |rate| PolicerConfig {
        rate_bps: rate,
        burst_bytes: 1 << 20,
        // The reservation polices the measurement itself (seed 002: the thrulay flow).
        selector: Some(Selector::Test),
        action: PolicerAction::Drop,
    };
    vec![
        Preset {
            name: "slac-cern-2000",
            source: "seeds 000/004: SLAC→CERN RTT ≈ 166 ms, bottleneck ≈ 25–32 Mbit/s; seed 000 reads its loaded RTT as ≈ 100 ms of queue ≈ 300 kB at 25 Mbit/s",
            rtt_ms: 166,
            rate_bps: 25_000_000,
            queue_bytes: 300_000,
            policer: None,
            txqueuelen: None,
        },
        Preset {
            name: "slac-umich-2001",
            source: "seed 001: SLAC→U Michigan ping 67 ms, OC12 (622 Mbit/s) access link",
            rtt_ms: 67,
            rate_bps: 622_000_000,
            queue_bytes: 5_200_000,
            policer: None,
            txqueuelen: None,
        },
        Preset {
            name: "slac-cern-2005-oscars10",
            source: "seed 002: SLAC→CERN RTT ≈ 170 ms; OSCARS reservation of 10 Mbit/s, burst-size-limit 1 MB, excess dropped, on the measurement's own traffic (port=test; the seed's was thrulay on port 5011)",
            rtt_ms: 170,
            rate_bps: 1_000_000_000,
            queue_bytes: 10_000_000,
            policer: Some(oscars(10_000_000)),
            txqueuelen: None,
        },
        Preset {
            name: "slac-cern-2005-oscars1",
            source: "seed 002: the same path with the reservation cut to 1 Mbit/s",
            rtt_ms: 170,
            rate_bps: 1_000_000_000,
            queue_bytes: 10_000_000,
            policer: Some(oscars(1_000_000)),
            txqueuelen: None,
        },
        Preset {
            name: "datatag-2003",
            source: "seed 003: CERN→StarLight DataTAG, 120 ms, 1 Gbit/s; the 2003 default txqueuelen was 100",
            rtt_ms: 120,
            rate_bps: 1_000_000_000,
            queue_bytes: 15_000_000,
            policer: None,
            txqueuelen: Some(100),
        },
    ]
}

/// Looks a preset up by name.
pub fn find(name: &str) -> Option<Preset> {
    all().into_iter().find(|p| p.name == name)
}

impl Preset {
    /// The path this preset describes (explicit options are applied on top by the caller).
    pub fn path(&self) -> PathConfig {
        let one_way = self.rtt_ms * 1_000_000 / 2;
        let dir = DirConfig {
            delay_ns: one_way,
            rate: Rate::Constant(self.rate_bps),
            queue: QueueLimit::Bytes(self.queue_bytes),
            ..Default::default()
        };
        PathConfig {
            up: DirConfig { policer: self.policer, ..dir.clone() },
            down: dir,
            mtu: 1500,
            txqueuelen: self.txqueuelen,
            seed: 1,
            host_nice: crate::path::DEFAULT_HOST_NICE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_carry_their_seed_numbers() {
        let p = find("slac-cern-2000").unwrap().path();
        assert_eq!(p.up.delay_ns + p.down.delay_ns, 166_000_000);
        assert_eq!(p.up.rate, Rate::Constant(25_000_000));
        assert!(find("slac-cern-2005-oscars1").unwrap().path().up.policer.unwrap().rate_bps == 1_000_000);
        assert!(find("nope").is_none());
        assert_eq!(all().len(), 5);
    }
}
