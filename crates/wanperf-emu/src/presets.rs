//! The seed studies' paths, as starting points for `--preset`. Every number cites the seed
//! (a file of the seeds directory, by its number, and line) it comes from, or says it is
//! assumed; docs/emulator.md, "Presets", has the same in a table.

use crate::config::{DirConfig, LossModel, PolicerAction, PolicerConfig, QueueLimit, Rate, Selector};
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
    /// Random loss: the probability a packet is lost, in each direction (0: none).
    pub loss: f64,
}

/// Every preset.
pub fn all() -> Vec<Preset> {
    let oscars = |rate| PolicerConfig {
        rate_bps: rate,
        // seed 002 line 32: burst-size-limit "default to 1MByte" (taken as 1 MiB, the project's "1MB").
        burst_bytes: 1 << 20,
        // seed 002 lines 18-26: the reservation covered the measured flow itself (its port 5011).
        selector: Some(Selector::Test),
        // seed 002 lines 24-26: excess is dropped, not passed: the policed flow stayed under the
        // rate (874 kbit/s, 0.961 Mbit/s) on a path where best effort got 7.6-8.2 Mbit/s.
        action: PolicerAction::Drop,
    };
    // The OSCARS path SLAC→CERN (seed 002 lines 18-42), the same for both reservations.
    // seed 002 line 20: "The RTT was about 170ms".
    let oscars_rtt_ms = 170;
    // Assumed 1 Gbit/s (the seed bounds it only from below: more than 20 iperf streams
    // peaked at 450-500 Mbit/s, line 78).
    let oscars_rate_bps = 1_000_000_000;
    // Assumed: 10 MB, 80 ms at 1 Gbit/s (the seed gives no buffer).
    let oscars_queue = 10_000_000;
    // Best effort was loss-bound: one stream with a 10 MB window (a 493 Mbit/s limit) got 7.6
    // and 8.2 Mbit/s (lines 56, 62), 20 × 256 kB got 150 (7.5 a stream under a 12.3 Mbit/s
    // limit, line 58). Mathis, 1.22·MSS·8/(RTT·√p) with MSS 1448 and 170 ms, gives
    // p = 1.2e-4, 1.0e-4 and 1.2e-4: 1.1e-4.
    let oscars_loss = 1.1e-4;
    vec![
        Preset {
            name: "slac-cern-2000",
            source: "seeds 000/004: SLAC→CERN, min RTT 166 ms; bottleneck ≈ 27 Mbit/s (pathchar); load adds ≈ 100 ms of queue; 0.04 % random loss each way (2 × 256 kB streams got 8.8 Mbit/s)",
            // seed 000 line 65: min RTT 166 ms, loaded and idle (seed 004 line 46's "about 180"
            // is the typical RTT, not the minimum).
            rtt_ms: 166,
            // seed 004 line 42: pathchar's bottleneck "about 27Mbps" (CERN→SLAC, "similar"
            // SLAC→CERN). The rate must carry seed 000's measured goodputs, 24.7 Mbit/s (line 82)
            // and 26 (line 57): 27 Mbit/s carries 26.1 at MSS 1448; 25 (line 67's round figure,
            // this preset's rate before) carries only 24.1.
            rate_bps: 27_000_000,
            // seed 000 lines 61-67: the load raised the median RTT by 93 ms and the average by
            // 91.5 ("about 100msec"), so Q/C ≥ 93 ms: 100 ms at 27 Mbit/s.
            queue_bytes: 337_500,
            policer: None,
            txqueuelen: None,
            // seed 000 line 82: 2 streams × 256 kB (a 25.3 Mbit/s window limit) got 8.82 Mbit/s,
            // 4.41 a stream: Mathis at 166 ms gives p = 3.8e-4. The pings agree (round trips,
            // 2p = 0.08 %): unloaded 0.01 % and 0.07 % (line 80), "of the order of 0.1%"
            // (seed 004 line 46), 0 of 2400 (line 57).
            loss: 4e-4,
        },
        Preset {
            name: "slac-umich-2001",
            source: "seed 001: SLAC→U Michigan ping 67 ms, OC12 (622 Mbit/s) access link; no random loss",
            // seed 001 line 10: ping min/avg/max 67/67.24/67.5 ms.
            rtt_ms: 67,
            // seed 001 line 10: UMich's OC12 (622 Mbit/s) and SLAC's 622 Mbit/s to CalREN/Internet2
            // (line rates: SONET leaves about 600 Mbit/s for IP; no seed number tells them apart).
            rate_bps: 622_000_000,
            // Assumed: one BDP, 622 Mbit/s × 67 ms = 5.21 MB (the seed gives no buffer).
            queue_bytes: 5_200_000,
            policer: None,
            txqueuelen: None,
            // None: 3 streams × 256 kB ran at 70-80 Mbit/s (line 29), near their 94 Mbit/s window
            // limit, which bounds p below about 7e-5 (Mathis). Line 10's 8 in 1000 large pings
            // were lost to routers along the path (pingroute); 1000-byte pings to the host lost
            // 0 in 1000.
            loss: 0.0,
        },
        Preset {
            name: "slac-cern-2005-oscars10",
            source: "seed 002: SLAC→CERN RTT ≈ 170 ms; OSCARS reservation of 10 Mbit/s, burst-size-limit 1 MB, excess dropped, on the measurement's own traffic (port=test; the seed's was thrulay on port 5011); 0.011 % random loss (best effort's 7.6-8.2 Mbit/s a stream)",
            rtt_ms: oscars_rtt_ms,
            rate_bps: oscars_rate_bps,
            queue_bytes: oscars_queue,
            // seed 002 line 18: "a 10Mbits/s reservation".
            policer: Some(oscars(10_000_000)),
            txqueuelen: None,
            loss: oscars_loss,
        },
        Preset {
            name: "slac-cern-2005-oscars1",
            source: "seed 002: the same path with the reservation cut to 1 Mbit/s",
            rtt_ms: oscars_rtt_ms,
            rate_bps: oscars_rate_bps,
            queue_bytes: oscars_queue,
            // seed 002 line 24: "reduced the dedicated bandwith to 1 Mbits/s".
            policer: Some(oscars(1_000_000)),
            txqueuelen: None,
            loss: oscars_loss,
        },
        Preset {
            name: "datatag-2003",
            source: "seed 003: CERN→StarLight DataTAG, 120 ms, 1 Gbit/s; the 2003 default txqueuelen was 100; no random loss",
            // seed 003 line 6: "a 120ms link between CERN and STARLIGHT".
            rtt_ms: 120,
            // seed 003 line 6: hosts on SysKonnect (gigabit Ethernet) cards; line 14 measures
            // against "line rate"; line 18: over 1.5e7 packets sent (0.75 Gbit/s if in one
            // 240-s test).
            rate_bps: 1_000_000_000,
            // Assumed: one BDP, 1 Gbit/s × 120 ms = 15 MB (the seed gives no router buffer).
            queue_bytes: 15_000_000,
            policer: None,
            // seed 003 line 14: "the standard txqueuelen size o 100".
            txqueuelen: Some(100),
            // None: no loss at the receiver (line 22); line 18's 1e-7 line loss is a what-if.
            loss: 0.0,
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
            loss: if self.loss > 0.0 { LossModel::Bernoulli(self.loss) } else { LossModel::None },
            ..Default::default()
        };
        PathConfig {
            up: DirConfig { policer: self.policer, ..dir.clone() },
            down: dir,
            mtu: 1500,
            txqueuelen: self.txqueuelen,
            seed: 1,
            host_nice: crate::path::DEFAULT_HOST_NICE,
            left_host: Default::default(),
            right_host: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Mathis et al.: one Reno stream's goodput under random loss p, bit/s (MSS 1448).
    fn mathis(rtt_s: f64, p: f64) -> f64 {
        1.5f64.sqrt() * 1448.0 * 8.0 / (rtt_s * p.sqrt())
    }

    /// The most TCP goodput a rate carries (1448 payload bytes of each 1500).
    fn goodput(rate_bps: u64) -> f64 {
        rate_bps as f64 * 1448.0 / 1500.0
    }

    #[test]
    fn presets_carry_their_seed_numbers() {
        let p = find("slac-cern-2000").unwrap().path();
        assert_eq!(p.up.delay_ns + p.down.delay_ns, 166_000_000);
        assert_eq!(p.up.rate, Rate::Constant(27_000_000));
        assert_eq!((p.up.loss, p.down.loss), (LossModel::Bernoulli(4e-4), LossModel::Bernoulli(4e-4)));
        let o = find("slac-cern-2005-oscars1").unwrap().path();
        assert!(o.up.policer.unwrap().rate_bps == 1_000_000);
        assert_eq!(o.down.policer, None);
        assert_eq!(find("slac-umich-2001").unwrap().path().up.loss, LossModel::None);
        assert_eq!(find("datatag-2003").unwrap().path().down.loss, LossModel::None);
        assert!(find("nope").is_none());
        assert_eq!(all().len(), 5);
    }

    /// The arithmetic in the comments above: each number against the seed line it cites.
    #[test]
    fn presets_reproduce_the_seeds_arithmetic() {
        let s = find("slac-cern-2000").unwrap();
        let rtt = s.rtt_ms as f64 / 1e3;
        // Carries seed 000's measured 26 and 24.7 Mbit/s of goodput (a lower bound on the rate).
        assert!(goodput(s.rate_bps) >= 26e6);
        // Holds the median's 93 ms rise, and about 100 ms.
        let q_s = s.queue_bytes as f64 * 8.0 / s.rate_bps as f64;
        assert!((0.093..=0.105).contains(&q_s), "{q_s}");
        // 2 × 256 kB: 8.82 Mbit/s within 10 %, below the window and rate limits.
        let two = 2.0 * mathis(rtt, s.loss);
        assert!((two / 8.82e6 - 1.0).abs() < 0.1, "{two}");
        assert!(two < 2.0 * 262_144.0 * 8.0 / rtt && two < goodput(s.rate_bps));
        // 8 × 64 kB: limited by its window (25.3 Mbit/s), not the loss: seed 000's 24.7 within 5 %.
        let eight = (8.0 * mathis(rtt, s.loss)).min(8.0 * 65_536.0 * 8.0 / rtt).min(goodput(s.rate_bps));
        assert!((eight / 24.7e6 - 1.0).abs() < 0.05, "{eight}");
        // OSCARS best effort: one stream within seed 002's 7.6-8.2 Mbit/s.
        let o = find("slac-cern-2005-oscars10").unwrap();
        let one = mathis(o.rtt_ms as f64 / 1e3, o.loss);
        assert!((7.6e6..=8.2e6).contains(&one), "{one}");
        // And 20 × 256 kB: 150 Mbit/s within 10 %, each stream below its window's 12.3.
        assert!(one < 262_144.0 * 8.0 / 0.17 && (20.0 * one / 150e6 - 1.0).abs() < 0.1);
        // The queues assumed to be one BDP.
        for (n, q) in [("slac-umich-2001", 5_209_250.0), ("datatag-2003", 15e6)] {
            let p = find(n).unwrap();
            let bdp = p.rate_bps as f64 * p.rtt_ms as f64 / 1e3 / 8.0;
            assert!((bdp / q - 1.0).abs() < 1e-9 && (p.queue_bytes as f64 / bdp - 1.0).abs() < 0.01, "{n}");
        }
    }
}
