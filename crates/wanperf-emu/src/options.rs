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

/// Every option of `wanperf path` (see `wanperf path run --help`); `None`: the preset's or the
/// default.
#[derive(Debug, Clone, Default)]
#[allow(missing_docs)]
pub struct LinkOptions {
    pub preset: Option<String>,
    pub rtt: Option<String>,
    pub delay_up: Option<String>,
    pub delay_down: Option<String>,
    pub jitter: Option<String>,
    pub reorder: bool,
    pub rate: Option<String>,
    pub rate_up: Option<String>,
    pub rate_down: Option<String>,
    pub trace_up: Option<std::path::PathBuf>,
    pub trace_down: Option<std::path::PathBuf>,
    pub queue: Option<String>,
    pub queue_up: Option<String>,
    pub queue_down: Option<String>,
    pub aqm: Option<String>,
    pub loss: Option<String>,
    pub loss_up: Option<String>,
    pub loss_down: Option<String>,
    pub loss_model: Option<String>,
    pub policer: Option<String>,
    pub priority: Vec<String>,
    pub txqueuelen: Option<u32>,
    pub mtu: Option<u32>,
    pub seed: Option<u64>,
    pub host_nice: Option<i32>,
    pub host_left: Option<String>,
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
