//! What a configured path or link did not do: the elements (a policer, a priority class,
//! random loss) that its counters show never acted on the traffic that crossed it. A result
//! measured through a path whose policer matched nothing was not measured through that
//! policer, and must say so (pure: configuration and counters in, sentences out).

use crate::config::{DirConfig, LossModel};
use crate::stats::DirStats;
use wanperf_units::{fmt_bytes, fmt_rate};

/// Losses below this many expected are not reported as missing (at 20 expected, seeing none
/// has a probability of e^−20).
const LOSS_EXPECTED_MIN: f64 = 20.0;

/// The configured elements of one direction that did not act on its traffic, one sentence each.
pub fn idle(cfg: &DirConfig, s: &DirStats) -> Vec<String> {
    let packets = s.total(|c| c.packets_in);
    let mut out = Vec::new();
    if let Some(p) = &cfg.policer {
        if s.total(|c| c.policed) == 0 {
            let sel = p.selector.map(|s| format!(", {}", s.describe())).unwrap_or_default();
            out.push(format!(
                "its policer ({}, burst {}{sel}) matched none of the {packets} packets: it never acted",
                fmt_rate(p.rate_bps as f64),
                fmt_bytes(p.burst_bytes)
            ));
        }
    }
    if !cfg.priority.is_empty() && s.classes.get("priority").is_none_or(|c| c.packets_in == 0) {
        let sel: Vec<String> = cfg.priority.iter().map(|s| s.describe()).collect();
        out.push(format!("its priority class ({}) matched none of the {packets} packets", sel.join(", ")));
    }
    let expected = match cfg.loss {
        LossModel::Bernoulli(p) => Some((p, p * packets as f64)),
        // A bit error rate: about ber × 8 × bytes for the small rates links have.
        LossModel::Ber(b) => Some((b, b * 8.0 * s.total(|c| c.bytes_in) as f64)),
        LossModel::None | LossModel::GilbertElliott { .. } => None,
    };
    if let Some((p, expected)) = expected {
        if expected >= LOSS_EXPECTED_MIN && s.total(|c| c.random_losses) == 0 {
            let what = match cfg.loss {
                LossModel::Ber(b) => format!("bit error rate {b:e}"),
                _ => format!("{:.3} %", p * 100.0),
            };
            out.push(format!("its random loss ({what}) lost none of the {packets} packets ({expected:.0} expected)"));
        }
    }
    out
}

/// [`idle`] for both directions, each sentence starting with its direction's name.
pub fn idle_both(cfg: (&DirConfig, &DirConfig), stats: (&DirStats, &DirStats), names: [&str; 2]) -> Vec<String> {
    let mut out = Vec::new();
    for (c, s, name) in [(cfg.0, stats.0, names[0]), (cfg.1, stats.1, names[1])] {
        out.extend(idle(c, s).into_iter().map(|l| format!("{name}: {l}")));
    }
    out
}

/// [`idle`] for both directions of a path, named as `path run` names them.
pub fn on_path(cfg: &crate::path::PathConfig, stats: &crate::path::PathStats) -> Vec<String> {
    idle_both((&cfg.up, &cfg.down), (&stats.up, &stats.down), ["left → right", "right → left"])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{PolicerAction, PolicerConfig, Selector};
    use crate::link::{Link, CLASSES};
    use crate::packet::Headers;

    /// Counters of a link in virtual time after `n` 1500-byte TCP packets to `port`, 1 ms apart.
    fn run(cfg: DirConfig, port: u16, n: u64) -> DirStats {
        let mut link: Link<()> = Link::new(cfg, 7);
        for i in 0..n {
            let h = Headers { dst_port: port, src_port: 40000, ..Default::default() };
            link.push(i * 1_000_000, (), 1500, h);
            while link.pop(u64::MAX).is_some() {}
        }
        let counters = link.counters();
        DirStats {
            classes: CLASSES.iter().zip(counters).map(|(n, c)| (n.to_string(), c.clone())).collect(),
            ..Default::default()
        }
    }

    fn policer(selector: Option<Selector>) -> PolicerConfig {
        PolicerConfig { rate_bps: 1_000_000, burst_bytes: 1 << 20, selector, action: PolicerAction::Drop }
    }

    #[test]
    fn a_policer_on_another_port_is_reported_and_one_on_the_test_is_not() {
        // Seed 002's OSCARS reservation on thrulay's port, while the study measures on 5301.
        let cfg = DirConfig { policer: Some(policer(Some(Selector::Port(5011)))), ..Default::default() };
        let s = run(cfg, 5301, 100);
        assert_eq!(s.total(|c| c.policed), 0);
        let said = idle(&DirConfig { policer: Some(policer(Some(Selector::Port(5011)))), ..Default::default() }, &s);
        assert_eq!(
            said,
            ["its policer (1.00 Mbit/s, burst 1.00 MiB, port=5011) matched none of the 100 packets: it never acted"]
        );
        // port=test polices wanperf's and iperf3's ports, and wanperf's data ports (UDP, QUIC,
        // MPTCP), but not the emulated networks' cross traffic (5311) nor a port beside them.
        let data = crate::config::TEST_DATA_PORTS;
        for port in [5311, data.start() - 1, data.end() + 1] {
            let cfg = DirConfig { policer: Some(policer(Some(Selector::Test))), ..Default::default() };
            assert_eq!(run(cfg, port, 10).total(|c| c.policed), 0, "port {port}");
        }
        for port in crate::config::TEST_PORTS.into_iter().chain([*data.start(), *data.end()]) {
            let cfg = DirConfig { policer: Some(policer(Some(Selector::Test))), ..Default::default() };
            let s = run(cfg.clone(), port, 100);
            assert_eq!(s.total(|c| c.policed), 100, "port {port}");
            assert!(idle(&cfg, &s).is_empty());
        }
        // A policer that matches everything acts as soon as anything crosses.
        let all = DirConfig { policer: Some(policer(None)), ..Default::default() };
        assert!(idle(&all, &run(all.clone(), 9, 3)).is_empty());
    }

    #[test]
    fn an_empty_priority_class_and_loss_that_never_happened_are_reported() {
        let cfg = DirConfig { priority: vec![Selector::Dscp(46)], ..Default::default() };
        let said = idle(&cfg, &run(cfg.clone(), 5301, 10));
        assert_eq!(said, ["its priority class (dscp=46) matched none of the 10 packets"]);
        // 1 % of 5000 packets is 50 expected: none lost is a loss model that did not act.
        let lossy = DirConfig { loss: LossModel::Bernoulli(0.01), ..Default::default() };
        let mut s = run(lossy.clone(), 5301, 5000);
        assert!(s.total(|c| c.random_losses) > 0 && idle(&lossy, &s).is_empty());
        s.classes.values_mut().for_each(|c| c.random_losses = 0);
        assert!(idle(&lossy, &s)[0].contains("lost none of the 5000 packets (50 expected)"));
        // Too few packets to tell (1 expected): nothing said, lost or not.
        let mut few = run(lossy.clone(), 5301, 100);
        few.classes.values_mut().for_each(|c| c.random_losses = 0);
        assert!(idle(&lossy, &few).is_empty());
        let named = idle_both(
            (&cfg, &DirConfig::default()),
            (&run(cfg.clone(), 1, 1), &DirStats::default()),
            ["a → b", "b → a"],
        );
        assert_eq!(named.len(), 1);
        assert!(named[0].starts_with("a → b: its priority class"));
    }
}
