//! Link configuration for one direction, and parsing of the option strings that describe it.

use serde::{Deserialize, Serialize};
use thiserror::Error;
use wanperf_units::{parse_duration, parse_rate, parse_size};

/// Buckets of a flow-fair queue (fq_codel's default).
pub const FLOWS: usize = 1024;

/// Nanoseconds of virtual or real time since the emulator started.
pub type Nanos = u64;

/// A bad link option.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ConfigError {
    /// A value that is not what the option takes.
    #[error("{option}: {msg}")]
    Bad {
        /// Option name.
        option: &'static str,
        /// What is wrong.
        msg: String,
    },
    /// A trace file problem, with its line.
    #[error("trace {path}: line {line}: {msg}")]
    Trace {
        /// File.
        path: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        msg: String,
    },
}

fn bad(option: &'static str, msg: impl Into<String>) -> ConfigError {
    ConfigError::Bad { option, msg: msg.into() }
}

/// Which packets a policer or priority rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Selector {
    /// Packets with this DSCP.
    Dscp(u8),
    /// Packets from or to this TCP/UDP port.
    Port(u16),
    /// The measurement's own traffic (`port=test`): packets from or to the ports a wanperf
    /// measurement uses by default ([`TEST_PORTS`]: `wanperf serve`'s, and iperf3's for
    /// `--iperf3` studies, and [`TEST_DATA_PORTS`], where `wanperf serve` puts the data of UDP,
    /// QUIC and MPTCP tests), so a reservation polices the test as seed 002's did the thrulay
    /// flow, whatever its transport.
    Test,
}

/// The ports `port=test` selects: `wanperf serve`'s (5301) and iperf3's (5201).
pub const TEST_PORTS: [u16; 2] = [5301, 5201];

/// `wanperf serve`'s default data ports (`wanperf_proto::msg::DATA_PORTS`, held equal by a
/// test of the wanperf crate): a UDP test's streams, a QUIC test's endpoint, an MPTCP test's
/// listener. `port=test` selects them too.
pub const TEST_DATA_PORTS: std::ops::RangeInclusive<u16> = 5320..=5399;

impl Selector {
    /// Whether a packet matches.
    pub fn matches(&self, h: &crate::packet::Headers) -> bool {
        match *self {
            Selector::Dscp(d) => h.dscp == d,
            Selector::Port(p) => h.src_port == p || h.dst_port == p,
            Selector::Test => {
                [h.src_port, h.dst_port].iter().any(|p| TEST_PORTS.contains(p) || TEST_DATA_PORTS.contains(p))
            }
        }
    }

    /// As the option is written (`dscp=46`, `port=5011`, `port=test`).
    pub fn describe(&self) -> String {
        match self {
            Selector::Dscp(d) => format!("dscp={d}"),
            Selector::Port(p) => format!("port={p}"),
            Selector::Test => "port=test".into(),
        }
    }

    /// Parses `dscp=N`, `port=N` or `port=test`.
    pub fn parse(option: &'static str, s: &str) -> Result<Selector, ConfigError> {
        match s.split_once('=') {
            Some(("dscp", v)) => match v.parse::<u8>() {
                Ok(d) if d <= 63 => Ok(Selector::Dscp(d)),
                _ => Err(bad(option, format!("`{v}` is not a DSCP (0..=63)"))),
            },
            Some(("port", "test")) => Ok(Selector::Test),
            Some(("port", v)) => v.parse::<u16>().map(Selector::Port).map_err(|_| {
                bad(option, format!("`{v}` is not a port (a number, or `test` for the measurement's own)"))
            }),
            _ => Err(bad(option, format!("`{s}` is not dscp=N, port=N or port=test"))),
        }
    }
}

/// The bottleneck's capacity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Rate {
    /// No bottleneck: packets leave as they arrive.
    Unlimited,
    /// Constant rate in bit/s.
    Constant(u64),
    /// A mahimahi trace: delivery opportunities of 1500 bytes at these millisecond offsets,
    /// repeating with the period of the last one.
    Trace(Trace),
}

/// A mahimahi-format trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// Opportunity times in ms, non-decreasing.
    pub opportunities_ms: Vec<u64>,
    /// Repeat period in ms (the last opportunity's time).
    pub period_ms: u64,
}

impl Trace {
    /// Bytes per delivery opportunity (mahimahi's MTU).
    pub const OPPORTUNITY_BYTES: usize = 1500;

    /// Parses a trace: one integer millisecond timestamp per line, non-decreasing, not empty.
    pub fn parse(path: &str, text: &str) -> Result<Trace, ConfigError> {
        let mut v = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let t = line.trim();
            if t.is_empty() {
                continue;
            }
            let ms: u64 = t.parse().map_err(|_| ConfigError::Trace {
                path: path.into(),
                line: i + 1,
                msg: format!("`{t}` is not a millisecond timestamp"),
            })?;
            if let Some(&prev) = v.last() {
                if ms < prev {
                    return Err(ConfigError::Trace {
                        path: path.into(),
                        line: i + 1,
                        msg: format!("{ms} ms comes after {prev} ms: timestamps must not decrease"),
                    });
                }
            }
            v.push(ms);
        }
        let Some(&period) = v.last() else {
            return Err(ConfigError::Trace { path: path.into(), line: 0, msg: "the trace is empty".into() });
        };
        if period == 0 {
            return Err(ConfigError::Trace {
                path: path.into(),
                line: v.len(),
                msg: "the trace must span more than 0 ms".into(),
            });
        }
        Ok(Trace { opportunities_ms: v, period_ms: period })
    }

    /// Average capacity in bit/s.
    pub fn mean_bps(&self) -> f64 {
        self.opportunities_ms.len() as f64 * Self::OPPORTUNITY_BYTES as f64 * 8.0 / (self.period_ms as f64 / 1000.0)
    }
}

/// How much the bottleneck buffer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum QueueLimit {
    /// Packets.
    Packets(usize),
    /// Bytes.
    Bytes(usize),
}

impl QueueLimit {
    /// Parses `2100p` (packets) or a size such as `300kB` (bytes, k = 1024).
    pub fn parse(s: &str) -> Result<QueueLimit, ConfigError> {
        let t = s.trim();
        let q = if let Some(n) = t.strip_suffix('p') {
            QueueLimit::Packets(
                n.trim().parse().map_err(|_| bad("--queue", format!("`{s}` is not a packet count (e.g. 2100p)")))?,
            )
        } else {
            QueueLimit::Bytes(parse_size(t).map_err(|e| bad("--queue", e.to_string()))? as usize)
        };
        match q {
            QueueLimit::Packets(0) | QueueLimit::Bytes(0) => Err(bad("--queue", "the queue must hold something")),
            q => Ok(q),
        }
    }
}

/// Queue discipline at the bottleneck.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Aqm {
    /// Drop arrivals when full.
    DropTail,
    /// CoDel (RFC 8289) on top of the limit.
    CoDel {
        /// Target sojourn time, ns.
        target_ns: Nanos,
        /// Interval, ns.
        interval_ns: Nanos,
    },
    /// Flow-fair queueing: per-flow queues served by deficit round robin, the longest flow
    /// dropped from when full (fq_codel without CoDel).
    Fq,
    /// Flow-fair queueing with CoDel per flow (fq_codel, RFC 8290).
    FqCoDel {
        /// Target sojourn time, ns.
        target_ns: Nanos,
        /// Interval, ns.
        interval_ns: Nanos,
    },
}

/// A queue discipline wanperf does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not droptail, codel, fq or fq_codel")]
pub struct UnknownAqm(pub String);

impl Aqm {
    /// CoDel with the RFC's defaults (5 ms target, 100 ms interval).
    pub fn codel() -> Aqm {
        Aqm::CoDel { target_ns: 5_000_000, interval_ns: 100_000_000 }
    }

    /// `droptail`, `codel`, `fq` or `fq_codel`.
    pub fn parse(s: &str) -> Result<Aqm, UnknownAqm> {
        Ok(match s {
            "droptail" => Aqm::DropTail,
            "codel" => Aqm::codel(),
            "fq" => Aqm::Fq,
            "fq_codel" => Aqm::FqCoDel { target_ns: 5_000_000, interval_ns: 100_000_000 },
            v => return Err(UnknownAqm(v.to_string())),
        })
    }

    /// CoDel's target and interval, if CoDel runs.
    pub fn codel_params(&self) -> Option<(Nanos, Nanos)> {
        match *self {
            Aqm::CoDel { target_ns, interval_ns } | Aqm::FqCoDel { target_ns, interval_ns } => {
                Some((target_ns, interval_ns))
            }
            Aqm::DropTail | Aqm::Fq => None,
        }
    }

    /// Flow buckets of each class queue: 1 (a FIFO) or [`FLOWS`].
    pub fn buckets(&self) -> usize {
        match self {
            Aqm::Fq | Aqm::FqCoDel { .. } => FLOWS,
            Aqm::DropTail | Aqm::CoDel { .. } => 1,
        }
    }
}

/// Random loss.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum LossModel {
    /// No random loss.
    None,
    /// Each packet lost with probability p.
    Bernoulli(f64),
    /// Gilbert-Elliott: p = P(good→bad), r = P(bad→good), h = P(delivery | bad),
    /// k = P(delivery | good) — netem's `gemodel p r 1-h 1-k` in probabilities.
    GilbertElliott {
        /// Good → bad.
        p: f64,
        /// Bad → good.
        r: f64,
        /// Delivery probability in the bad state.
        h: f64,
        /// Delivery probability in the good state.
        k: f64,
    },
    /// Bit errors: each bit wrong with this probability, so a packet of L bytes is lost with
    /// probability 1 − (1 − ber)^(8L) — big packets more often than small ones (seed 001's
    /// large pings lost where small ones were not).
    Ber(f64),
}

/// The probability that a packet of `len` bytes has a bit error: 1 − (1 − ber)^(8·len),
/// computed without cancellation for the tiny rates links have.
pub fn ber_loss(ber: f64, len: usize) -> f64 {
    -f64::exp_m1(8.0 * len as f64 * f64::ln_1p(-ber))
}

fn prob(option: &'static str, s: &str) -> Result<f64, ConfigError> {
    let t = s.trim();
    let (num, scale) = match t.strip_suffix('%') {
        Some(n) => (n, 0.01),
        None => (t, 1.0),
    };
    let v: f64 = num.parse().map_err(|_| bad(option, format!("`{s}` is not a probability (0.01 or 1%)")))?;
    let v = v * scale;
    if !(0.0..=1.0).contains(&v) {
        return Err(bad(option, format!("`{s}` is not between 0 and 1")));
    }
    Ok(v)
}

impl LossModel {
    /// `--loss P` (0.01 or 1%).
    pub fn bernoulli(s: &str) -> Result<LossModel, ConfigError> {
        Ok(LossModel::Bernoulli(prob("--loss", s)?))
    }

    /// `--loss-model ge:p,r,h,k` (h and k default to 0 and 1: the bad state loses all, the
    /// good state none — the simple Gilbert model), or `ber:P` (bit errors, e.g. `ber:1e-7`).
    pub fn parse(s: &str) -> Result<LossModel, ConfigError> {
        if let Some(b) = s.strip_prefix("ber:") {
            return match b.trim().parse::<f64>() {
                Ok(p) if p > 0.0 && p < 1e-3 => Ok(LossModel::Ber(p)),
                _ => Err(bad("--loss-model", format!("`{b}` is not a bit error rate above 0 and below 0.001"))),
            };
        }
        let Some(rest) = s.strip_prefix("ge:") else {
            return Err(bad("--loss-model", format!("`{s}` is not ge:p,r[,h,k] or ber:P")));
        };
        let parts: Vec<&str> = rest.split(',').collect();
        if !(2..=4).contains(&parts.len()) {
            return Err(bad("--loss-model", format!("`{s}` needs 2 to 4 numbers: ge:p,r[,h,k]")));
        }
        let p = prob("--loss-model", parts[0])?;
        let r = prob("--loss-model", parts[1])?;
        let h = parts.get(2).map_or(Ok(0.0), |x| prob("--loss-model", x))?;
        let k = parts.get(3).map_or(Ok(1.0), |x| prob("--loss-model", x))?;
        Ok(LossModel::GilbertElliott { p, r, h, k })
    }

    /// Long-run loss probability (bit errors: of a 1500-byte packet).
    pub fn mean_loss(&self) -> f64 {
        match *self {
            LossModel::None => 0.0,
            LossModel::Bernoulli(p) => p,
            LossModel::Ber(b) => ber_loss(b, 1500),
            LossModel::GilbertElliott { p, r, h, k } => {
                if p + r == 0.0 {
                    1.0 - k
                } else {
                    let pi_bad = p / (p + r);
                    pi_bad * (1.0 - h) + (1.0 - pi_bad) * (1.0 - k)
                }
            }
        }
    }
}

/// What a policer does with packets beyond its profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PolicerAction {
    /// Discard them.
    Drop,
    /// Re-mark them to the scavenger class (below best effort), as OSCARS did.
    Remark,
}

/// A token-bucket policer (Juniper `bandwidth-limit` and `burst-size-limit`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PolicerConfig {
    /// Token rate, bit/s.
    pub rate_bps: u64,
    /// Bucket depth, bytes.
    pub burst_bytes: u64,
    /// Packets it applies to (all if none).
    pub selector: Option<Selector>,
    /// Out-of-profile action.
    pub action: PolicerAction,
}

impl PolicerConfig {
    /// Parses `RATE,BURST[,dscp=N|port=N|port=test][,action=drop|remark]`, e.g. `10M,1M,dscp=46`.
    pub fn parse(s: &str) -> Result<PolicerConfig, ConfigError> {
        const O: &str = "--policer";
        let parts: Vec<&str> = s.split(',').map(str::trim).collect();
        if parts.len() < 2 {
            return Err(bad(O, format!("`{s}` is not RATE,BURST[,dscp=N|port=N|port=test][,action=drop|remark]")));
        }
        let rate_bps = parse_rate(parts[0]).map_err(|e| bad(O, e.to_string()))?;
        if rate_bps == 0 {
            return Err(bad(O, "the rate must be more than 0 bit/s"));
        }
        let burst_bytes = parse_size(parts[1]).map_err(|e| bad(O, e.to_string()))?;
        if burst_bytes == 0 {
            return Err(bad(O, "the burst-size-limit must be more than 0 bytes (one MTU at least)"));
        }
        let mut cfg = PolicerConfig { rate_bps, burst_bytes, selector: None, action: PolicerAction::Drop };
        for extra in &parts[2..] {
            match extra.split_once('=') {
                Some(("action", "drop")) => cfg.action = PolicerAction::Drop,
                Some(("action", "remark")) => cfg.action = PolicerAction::Remark,
                Some(("action", a)) => return Err(bad(O, format!("action `{a}` is not drop or remark"))),
                _ => cfg.selector = Some(Selector::parse(O, extra)?),
            }
        }
        Ok(cfg)
    }
}

/// Everything about one direction of the emulated link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirConfig {
    /// One-way propagation delay.
    pub delay_ns: Nanos,
    /// Uniform jitter added to the delay, 0..=jitter.
    pub jitter_ns: Nanos,
    /// Whether jitter may reorder packets.
    pub reorder: bool,
    /// Bottleneck capacity.
    pub rate: Rate,
    /// Bottleneck buffer.
    pub queue: QueueLimit,
    /// Queue discipline.
    pub aqm: Aqm,
    /// Random loss.
    pub loss: LossModel,
    /// Ingress policer.
    pub policer: Option<PolicerConfig>,
    /// Packets served before best effort (strict priority).
    pub priority: Vec<Selector>,
}

impl Default for DirConfig {
    fn default() -> Self {
        DirConfig {
            delay_ns: 0,
            jitter_ns: 0,
            reorder: false,
            rate: Rate::Unlimited,
            queue: QueueLimit::Packets(1000),
            aqm: Aqm::DropTail,
            loss: LossModel::None,
            policer: None,
            priority: Vec::new(),
        }
    }
}

/// Parses a delay such as `83ms` into ns.
pub fn parse_delay(option: &'static str, s: &str) -> Result<Nanos, ConfigError> {
    let secs = parse_duration(s).map_err(|e| bad(option, e.to_string()))?;
    if secs > 10.0 {
        return Err(bad(option, format!("{s} is more than 10 s")));
    }
    Ok((secs * 1e9).round() as Nanos)
}

/// Parses a bottleneck rate; zero is refused.
pub fn parse_link_rate(option: &'static str, s: &str) -> Result<u64, ConfigError> {
    match parse_rate(s) {
        Ok(0) => Err(bad(option, "the rate must be more than 0 bit/s")),
        Ok(r) => Ok(r),
        Err(e) => Err(bad(option, e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_policer_loss_parsing() {
        assert_eq!(QueueLimit::parse("300kB"), Ok(QueueLimit::Bytes(307_200)));
        assert_eq!(QueueLimit::parse("2100p"), Ok(QueueLimit::Packets(2100)));
        assert!(QueueLimit::parse("0p").is_err());
        assert!(QueueLimit::parse("lots").is_err());
        let p = PolicerConfig::parse("10M,1M,dscp=46,action=remark").unwrap();
        assert_eq!(p.rate_bps, 10_000_000);
        assert_eq!(p.burst_bytes, 1 << 20);
        assert_eq!(p.selector, Some(Selector::Dscp(46)));
        assert_eq!(p.action, PolicerAction::Remark);
        assert!(PolicerConfig::parse("10M,0").unwrap_err().to_string().contains("burst"));
        assert!(PolicerConfig::parse("0,10k").is_err());
        assert!(PolicerConfig::parse("10M").is_err());
        assert!(PolicerConfig::parse("10M,10k,port=x").is_err());
        assert_eq!(LossModel::bernoulli("1%"), Ok(LossModel::Bernoulli(0.01)));
        assert!(LossModel::bernoulli("1.5").is_err());
        let ge = LossModel::parse("ge:0.01,0.3").unwrap();
        assert!((ge.mean_loss() - 0.01 / 0.31).abs() < 1e-12);
        assert!(LossModel::parse("ge:1").is_err());
        assert!(parse_delay("--delay", "-5ms").is_err());
        assert_eq!(parse_delay("--delay", "83ms"), Ok(83_000_000));
        assert!(parse_link_rate("--rate", "0").is_err());
    }

    #[test]
    fn traces() {
        let t = Trace::parse("t", "1\n1\n2\n\n4\n").unwrap();
        assert_eq!(t.opportunities_ms, vec![1, 1, 2, 4]);
        assert_eq!(t.period_ms, 4);
        assert!((t.mean_bps() - 4.0 * 1500.0 * 8.0 / 0.004).abs() < 1e-6);
        assert!(Trace::parse("t", "").unwrap_err().to_string().contains("empty"));
        let e = Trace::parse("t", "1\n3\n2\n").unwrap_err().to_string();
        assert!(e.contains("line 3"), "{e}");
        assert!(Trace::parse("t", "0\n0\n").is_err());
        assert!(Trace::parse("t", "1\nx\n").unwrap_err().to_string().contains("line 2"));
    }
}
