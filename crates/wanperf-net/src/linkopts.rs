//! A link's options as `key = value` pairs: the topology file's `[[link]]` tables and
//! `wanperf net set NAME LINK key=value …` read them through the same function, and the names
//! are `wanperf path`'s flags (`rate`, `delay`, `queue`, `loss`, `policer`, …) with a
//! `_ab`/`_ba` suffix for one direction (a → b is the direction from the link's `a` node).

use wanperf_emu::config::{
    parse_delay, parse_link_rate, Aqm, DirConfig, LossModel, PolicerConfig, QueueLimit, Rate, Selector, Trace,
};

/// Which directions a key applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// Both.
    Both,
    /// a → b only.
    Ab,
    /// b → a only.
    Ba,
}

/// Every per-direction key (without suffix), for error messages and `--help`.
pub const DIR_KEYS: &[&str] = &[
    "delay",
    "rtt",
    "jitter",
    "reorder",
    "rate",
    "trace",
    "queue",
    "aqm",
    "loss",
    "loss_model",
    "policer",
    "priority",
];

/// Splits `rate_ab` into (`rate`, Ab).
pub fn split_key(key: &str) -> (&str, Which) {
    if let Some(k) = key.strip_suffix("_ab") {
        (k, Which::Ab)
    } else if let Some(k) = key.strip_suffix("_ba") {
        (k, Which::Ba)
    } else {
        (key, Which::Both)
    }
}

/// Whether `key` (possibly suffixed) is a per-direction link option.
pub fn is_dir_key(key: &str) -> bool {
    let (k, w) = split_key(key);
    DIR_KEYS.contains(&k) && !(k == "rtt" && w != Which::Both)
}

/// Applies one option to the two directions. `values` is one value, or several for
/// `priority` (a TOML array); `read` loads a trace file. Errors are one line, naming the key.
pub fn apply(
    ab: &mut DirConfig,
    ba: &mut DirConfig,
    key: &str,
    values: &[String],
    read: &dyn Fn(&str) -> Result<String, String>,
) -> Result<(), String> {
    let (k, which) = split_key(key);
    let one = || -> Result<&str, String> {
        match values {
            [v] => Ok(v.as_str()),
            _ => Err(format!("`{key}` takes one value")),
        }
    };
    let e = |x: wanperf_emu::config::ConfigError| x.to_string();
    let mut dirs: Vec<&mut DirConfig> = match which {
        Which::Both => vec![ab, ba],
        Which::Ab => vec![ab],
        Which::Ba => vec![ba],
    };
    match k {
        "rtt" if which == Which::Both => {
            let d = parse_delay("rtt", one()?).map_err(e)?;
            dirs[0].delay_ns = d / 2;
            dirs[1].delay_ns = d - d / 2;
        }
        "delay" => {
            let d = parse_delay("delay", one()?).map_err(e)?;
            dirs.iter_mut().for_each(|c| c.delay_ns = d);
        }
        "jitter" => {
            let d = parse_delay("jitter", one()?).map_err(e)?;
            dirs.iter_mut().for_each(|c| c.jitter_ns = d);
        }
        "reorder" => {
            let b = match one()? {
                "true" => true,
                "false" => false,
                v => return Err(format!("`{key}` must be true or false, not `{v}`")),
            };
            dirs.iter_mut().for_each(|c| c.reorder = b);
        }
        "rate" => {
            let v = one()?;
            let r =
                if v == "unlimited" { Rate::Unlimited } else { Rate::Constant(parse_link_rate("rate", v).map_err(e)?) };
            dirs.iter_mut().for_each(|c| c.rate = r.clone());
        }
        "trace" => {
            let file = one()?;
            let text = read(file).map_err(|m| format!("`{key}`: cannot read trace {file}: {m}"))?;
            let t = Trace::parse(file, &text).map_err(e)?;
            dirs.iter_mut().for_each(|c| c.rate = Rate::Trace(t.clone()));
        }
        "queue" => {
            let q = QueueLimit::parse(one()?).map_err(e)?;
            dirs.iter_mut().for_each(|c| c.queue = q);
        }
        "aqm" => {
            let a = Aqm::parse(one()?).map_err(|m| format!("`{key}`: {m}"))?;
            dirs.iter_mut().for_each(|c| c.aqm = a);
        }
        "loss" => {
            let l = LossModel::bernoulli(one()?).map_err(e)?;
            dirs.iter_mut().for_each(|c| c.loss = l);
        }
        "loss_model" => {
            let l = LossModel::parse(one()?).map_err(e)?;
            dirs.iter_mut().for_each(|c| c.loss = l);
        }
        "policer" => {
            let v = one()?;
            let p = if v == "none" { None } else { Some(PolicerConfig::parse(v).map_err(e)?) };
            dirs.iter_mut().for_each(|c| c.policer = p);
        }
        "priority" => {
            let sels =
                values.iter().map(|v| Selector::parse("priority", v).map_err(e)).collect::<Result<Vec<_>, _>>()?;
            dirs.iter_mut().for_each(|c| c.priority = sels.clone());
        }
        _ => {
            return Err(format!(
                "unknown link option `{key}` (known: {}, each also with _ab or _ba for one direction; rtt for both)",
                DIR_KEYS.join(", ")
            ))
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none(_: &str) -> Result<String, String> {
        Err("no files here".into())
    }

    #[test]
    fn both_directions_or_one() {
        let (mut ab, mut ba) = (DirConfig::default(), DirConfig::default());
        apply(&mut ab, &mut ba, "rate", &["25M".into()], &none).unwrap();
        apply(&mut ab, &mut ba, "rate_ba", &["2M".into()], &none).unwrap();
        apply(&mut ab, &mut ba, "rtt", &["101ms".into()], &none).unwrap();
        assert_eq!(ab.rate, Rate::Constant(25_000_000));
        assert_eq!(ba.rate, Rate::Constant(2_000_000));
        assert_eq!(ab.delay_ns + ba.delay_ns, 101_000_000);
        apply(&mut ab, &mut ba, "delay_ab", &["7ms".into()], &none).unwrap();
        assert_eq!(ab.delay_ns, 7_000_000);
        apply(&mut ab, &mut ba, "priority", &["dscp=46".into(), "port=22".into()], &none).unwrap();
        assert_eq!(ba.priority.len(), 2);
        apply(&mut ab, &mut ba, "rate", &["unlimited".into()], &none).unwrap();
        assert_eq!(ab.rate, Rate::Unlimited);
    }

    #[test]
    fn bad_values_name_the_key() {
        let (mut ab, mut ba) = (DirConfig::default(), DirConfig::default());
        let e = apply(&mut ab, &mut ba, "rate", &["fast".into()], &none).unwrap_err();
        assert!(e.contains("rate"), "{e}");
        let e = apply(&mut ab, &mut ba, "colour", &["red".into()], &none).unwrap_err();
        assert!(e.contains("unknown link option `colour`"), "{e}");
        assert!(apply(&mut ab, &mut ba, "rtt_ab", &["1ms".into()], &none).is_err());
        let e = apply(&mut ab, &mut ba, "trace_ab", &["x.trace".into()], &none).unwrap_err();
        assert!(e.contains("cannot read trace x.trace"), "{e}");
        assert!(!is_dir_key("rtt_ba") && is_dir_key("rate_ba") && is_dir_key("queue"));
    }
}
