//! A path's options as the command line and study files give them (strings, as users write
//! them) → a [`PathConfig`], starting from a preset; errors name the option.

use crate::config::{parse_delay, parse_link_rate, Aqm, LossModel, PolicerConfig, QueueLimit, Rate, Selector, Trace};
use crate::path::PathConfig;
use crate::presets;

/// Why the options do not make a path.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct OptionError(String);

impl From<crate::config::ConfigError> for OptionError {
    fn from(e: crate::config::ConfigError) -> Self {
        OptionError(e.to_string())
    }
}

macro_rules! err {
    ($($arg:tt)*) => {
        OptionError(format!($($arg)*))
    };
}

/// Every option of `wanperf path` as users write it (`None`: the preset's or the default).
/// With the `cli` feature these are the command line's own flags (clap), their help the docs
/// below, so a study's link axes and `path run` take exactly the same options.
#[derive(Debug, Clone, Default)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct LinkOptions {
    /// Start from a seed study's path (see `wanperf path presets`); explicit options override it.
    #[cfg_attr(feature = "cli", arg(long))]
    pub preset: Option<String>,
    /// Round-trip propagation delay, split evenly (e.g. 166ms).
    #[cfg_attr(feature = "cli", arg(long, value_name = "DURATION"))]
    pub rtt: Option<String>,
    /// One-way delay left → right.
    #[cfg_attr(feature = "cli", arg(long, value_name = "DURATION"))]
    pub delay_up: Option<String>,
    /// One-way delay right → left.
    #[cfg_attr(feature = "cli", arg(long, value_name = "DURATION"))]
    pub delay_down: Option<String>,
    /// Random extra delay per packet, 0..=J (never reorders unless --reorder).
    #[cfg_attr(feature = "cli", arg(long, value_name = "DURATION"))]
    pub jitter: Option<String>,
    /// Let jitter reorder packets.
    #[cfg_attr(feature = "cli", arg(long))]
    pub reorder: bool,
    /// Bottleneck rate both ways (e.g. 25M).
    #[cfg_attr(feature = "cli", arg(long, value_name = "RATE"))]
    pub rate: Option<String>,
    /// Bottleneck rate left → right.
    #[cfg_attr(feature = "cli", arg(long, value_name = "RATE"))]
    pub rate_up: Option<String>,
    /// Bottleneck rate right → left.
    #[cfg_attr(feature = "cli", arg(long, value_name = "RATE"))]
    pub rate_down: Option<String>,
    /// Left → right capacity from a mahimahi trace (ms timestamps of 1500-byte opportunities).
    #[cfg_attr(feature = "cli", arg(long, value_name = "FILE"))]
    pub trace_up: Option<std::path::PathBuf>,
    /// Right → left capacity from a mahimahi trace.
    #[cfg_attr(feature = "cli", arg(long, value_name = "FILE"))]
    pub trace_down: Option<std::path::PathBuf>,
    /// Bottleneck buffer per direction and class: bytes (300kB) or packets (2100p).
    #[cfg_attr(feature = "cli", arg(long, value_name = "SIZE|Np"))]
    pub queue: Option<String>,
    /// Bottleneck queue left → right alone (as --queue).
    #[cfg_attr(feature = "cli", arg(long, value_name = "SIZE|Np"))]
    pub queue_up: Option<String>,
    /// Bottleneck queue right → left alone (as --queue).
    #[cfg_attr(feature = "cli", arg(long, value_name = "SIZE|Np"))]
    pub queue_down: Option<String>,
    /// Queue discipline: droptail, codel (RFC 8289), fq (per-flow queues, deficit round robin,
    /// drop from the longest flow) or fq_codel (fq with CoDel per flow, RFC 8290).
    #[cfg_attr(feature = "cli", arg(long, value_name = "NAME"))]
    pub aqm: Option<String>,
    /// Random loss probability in each direction (0.01 or 1%).
    #[cfg_attr(feature = "cli", arg(long, value_name = "P"))]
    pub loss: Option<String>,
    /// Random loss left → right only (overrides --loss that way).
    #[cfg_attr(feature = "cli", arg(long, value_name = "P"))]
    pub loss_up: Option<String>,
    /// Random loss right → left only (overrides --loss that way).
    #[cfg_attr(feature = "cli", arg(long, value_name = "P"))]
    pub loss_down: Option<String>,
    /// Loss model in each direction: Gilbert-Elliott ge:p,r[,h,k], or bit errors ber:P (a packet
    /// of L bytes lost with probability 1 − (1 − P)^(8L)).
    #[cfg_attr(feature = "cli", arg(long, value_name = "MODEL"))]
    pub loss_model: Option<String>,
    /// Token-bucket policer left → right: RATE,BURST[,dscp=N|port=N|port=test][,action=drop|remark]
    /// (port=test: the measurement's own traffic, ports 5301 and 5201; none: a preset's off).
    #[cfg_attr(feature = "cli", arg(long, value_name = "SPEC"))]
    pub policer: Option<String>,
    /// Serve these packets first at the bottleneck (dscp=N, port=N or port=test; repeatable).
    #[cfg_attr(feature = "cli", arg(long, value_name = "SELECTOR"))]
    pub priority: Vec<String>,
    /// Transmit queue length of both hosts' interfaces.
    #[cfg_attr(feature = "cli", arg(long, value_name = "N"))]
    pub txqueuelen: Option<u32>,
    /// MTU of both hosts' interfaces.
    #[cfg_attr(feature = "cli", arg(long, value_name = "BYTES"))]
    pub mtu: Option<u32>,
    /// Seed for random loss and jitter.
    #[cfg_attr(feature = "cli", arg(long, value_name = "N"))]
    pub seed: Option<u64>,
    /// Niceness of the hosts' commands, 0–19 (default 10). The emulator keeps normal
    /// priority, so on a busy machine the hosts wait for a core, not the packets on the wire.
    #[cfg_attr(feature = "cli", arg(long, value_name = "N"))]
    pub host_nice: Option<i32>,
    /// The left host's model: cpu=CORES (a CPU quota for everything it runs), sack=on|off,
    /// timestamps=on|off, window_scaling=on|off, rmem=/wmem=MAX or MIN:DEFAULT:MAX (TCP
    /// buffers), cc=NAME; e.g. cpu=0.25,sack=off. See docs/emulator.md, "Host models".
    #[cfg_attr(feature = "cli", arg(long, value_name = "MODEL"))]
    pub host_left: Option<String>,
    /// The right host's model (as --host-left).
    #[cfg_attr(feature = "cli", arg(long, value_name = "MODEL"))]
    pub host_right: Option<String>,
}

impl LinkOptions {
    /// The path these options make (reads trace files).
    pub fn config(&self) -> Result<PathConfig, OptionError> {
        let mut cfg = match &self.preset {
            Some(name) => presets::find(name)
                .ok_or_else(|| {
                    let names: Vec<&str> = presets::all().iter().map(|p| p.name).collect();
                    err!("unknown preset `{name}` (known: {})", names.join(", "))
                })?
                .path(),
            None => PathConfig {
                up: Default::default(),
                down: Default::default(),
                mtu: 1500,
                txqueuelen: None,
                seed: 1,
                host_nice: crate::path::DEFAULT_HOST_NICE,
                left_host: Default::default(),
                right_host: Default::default(),
            },
        };
        if let Some(rtt) = &self.rtt {
            let d = parse_delay("--rtt", rtt)?;
            cfg.up.delay_ns = d / 2;
            cfg.down.delay_ns = d - d / 2;
        }
        if let Some(d) = &self.delay_up {
            cfg.up.delay_ns = parse_delay("--delay-up", d)?;
        }
        if let Some(d) = &self.delay_down {
            cfg.down.delay_ns = parse_delay("--delay-down", d)?;
        }
        if let Some(j) = &self.jitter {
            let j = parse_delay("--jitter", j)?;
            cfg.up.jitter_ns = j;
            cfg.down.jitter_ns = j;
        }
        cfg.up.reorder |= self.reorder;
        cfg.down.reorder |= self.reorder;
        if let Some(r) = &self.rate {
            let r = parse_link_rate("--rate", r)?;
            cfg.up.rate = Rate::Constant(r);
            cfg.down.rate = Rate::Constant(r);
        }
        if let Some(r) = &self.rate_up {
            cfg.up.rate = Rate::Constant(parse_link_rate("--rate-up", r)?);
        }
        if let Some(r) = &self.rate_down {
            cfg.down.rate = Rate::Constant(parse_link_rate("--rate-down", r)?);
        }
        for (file, dir) in [(&self.trace_up, &mut cfg.up), (&self.trace_down, &mut cfg.down)] {
            if let Some(f) = file {
                let text = std::fs::read_to_string(f).map_err(|e| err!("cannot read trace {}: {e}", f.display()))?;
                dir.rate = Rate::Trace(Trace::parse(&f.display().to_string(), &text)?);
            }
        }
        if let Some(q) = &self.queue {
            let q = QueueLimit::parse(q)?;
            cfg.up.queue = q;
            cfg.down.queue = q;
        }
        // One direction's queue alone, as a net link's queue_ab / queue_ba.
        for (q, dir, flag) in
            [(&self.queue_up, &mut cfg.up, "--queue-up"), (&self.queue_down, &mut cfg.down, "--queue-down")]
        {
            if let Some(q) = q {
                dir.queue =
                    QueueLimit::parse(q).map_err(|e| OptionError(e.to_string().replacen("--queue", flag, 1)))?;
            }
        }
        if let Some(aqm) = &self.aqm {
            let aqm = Aqm::parse(aqm).map_err(|m| err!("--aqm: {m}"))?;
            cfg.up.aqm = aqm;
            cfg.down.aqm = aqm;
        }
        if self.loss.is_some() && self.loss_model.is_some() {
            return Err(err!("give --loss or --loss-model, not both"));
        }
        let loss = match (&self.loss, &self.loss_model) {
            (Some(p), _) => Some(LossModel::bernoulli(p)?),
            (_, Some(m)) => Some(LossModel::parse(m)?),
            _ => None,
        };
        if let Some(l) = loss {
            cfg.up.loss = l;
            cfg.down.loss = l;
        }
        if let Some(p) = &self.loss_up {
            cfg.up.loss =
                LossModel::bernoulli(p).map_err(|e| OptionError(e.to_string().replacen("--loss", "--loss-up", 1)))?;
        }
        if let Some(p) = &self.loss_down {
            cfg.down.loss =
                LossModel::bernoulli(p).map_err(|e| OptionError(e.to_string().replacen("--loss", "--loss-down", 1)))?;
        }
        if let Some(p) = &self.policer {
            // `none` takes a preset's policer off (a study's sweep can compare the two).
            cfg.up.policer = if p == "none" { None } else { Some(PolicerConfig::parse(p)?) };
        }
        for s in &self.priority {
            let sel = Selector::parse("--priority", s)?;
            cfg.up.priority.push(sel);
            cfg.down.priority.push(sel);
        }
        if let Some(q) = self.txqueuelen {
            if q == 0 {
                return Err(err!("--txqueuelen must be at least 1"));
            }
            cfg.txqueuelen = Some(q);
        }
        if let Some(m) = self.mtu {
            if !(576..=65_535).contains(&m) {
                return Err(err!("--mtu must be between 576 and 65535 bytes"));
            }
            cfg.mtu = m;
        }
        if let Some(s) = self.seed {
            cfg.seed = s;
        }
        if let Some(n) = self.host_nice {
            if !(0..=19).contains(&n) {
                return Err(err!("--host-nice must be between 0 and 19"));
            }
            cfg.host_nice = n;
        }
        for (text, model, flag) in [
            (&self.host_left, &mut cfg.left_host, "--host-left"),
            (&self.host_right, &mut cfg.right_host, "--host-right"),
        ] {
            if let Some(t) = text {
                *model = wanperf_host::HostModel::parse(t).map_err(|e| err!("{flag}: {e}"))?;
            }
        }
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oscars_preset_polices_the_test_and_none_takes_it_off() {
        let preset = LinkOptions { preset: Some("slac-cern-2005-oscars1".into()), ..Default::default() };
        let p = preset.config().unwrap().up.policer.expect("the reservation");
        assert_eq!((p.rate_bps, p.selector), (1_000_000, Some(crate::config::Selector::Test)));
        let off = LinkOptions { policer: Some("none".into()), ..preset.clone() };
        // Queues per direction, over the preset's 10 MB both ways.
        let q = LinkOptions { queue_up: Some("100kB".into()), ..preset }.config().unwrap();
        assert_eq!((q.up.queue, q.down.queue), (QueueLimit::Bytes(100 * 1024), QueueLimit::Bytes(10_000_000)));
        let bad = LinkOptions { queue_down: Some("lots".into()), ..Default::default() };
        assert!(bad.config().unwrap_err().to_string().contains("--queue-down"), "{}", bad.config().unwrap_err());
        assert_eq!(off.config().unwrap().up.policer, None);
        let bad = LinkOptions { policer: Some("1M,1M,port=tset".into()), ..Default::default() };
        assert!(bad.config().unwrap_err().to_string().contains("or `test` for the measurement's own"));
    }
}
