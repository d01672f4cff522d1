//! A study on an emulated network (`[net]`): the topology (a file or a preset), cross traffic
//! the study adds to it, fixed settings of its links, hosts and traffic, and the measured
//! pairs. Pure: what the settings and pairs mean is checked by the caller's
//! [`crate::spec::Flags::net_values`], against the topology itself.

use serde::Serialize;
use wanperf_toml::{err, scalar, Lines, Table, Value};

/// The `[net]` table, read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NetTarget {
    /// A topology file or a preset's name (`wanperf net presets`).
    pub topology: String,
    /// Cross traffic the study adds (`[[net.traffic]]`), each as a topology file's
    /// `[[traffic]]` table.
    pub traffic: Vec<String>,
    /// Fixed settings (`link.NAME.KEY = value`, `host.…`, `traffic.…`), in file order.
    pub settings: Vec<(String, String)>,
    /// The measured pairs (source, destination); several make the axis `pair`.
    pub pairs: Vec<(String, String)>,
}

/// One cell's network: what [`crate::spec::Flags::net_values`] checks and the runner starts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NetCell {
    /// The topology file or preset.
    pub topology: String,
    /// Cross traffic added to it (topology-file `[[traffic]]` tables).
    pub traffic: Vec<String>,
    /// Settings: the study's fixed ones, then the cell's axis values.
    pub settings: Vec<(String, String)>,
    /// The measurement's source host.
    pub from: String,
    /// Its destination: a host, `host@link` or an address.
    pub to: String,
}

/// Whether `key` names a network setting (`link.NAME.KEY`, `host.NAME.KEY`,
/// `traffic.NAME.KEY`).
pub fn is_setting(key: &str) -> bool {
    wanperf_net::vary::setting(key).is_some()
}

/// A pair as written (`slac->cern`) or as a two-element array.
fn pair(v: &Value) -> Option<(String, String)> {
    match v {
        Value::String(s) => {
            let (a, b) = s.split_once("->")?;
            Some((a.trim().to_string(), b.trim().to_string())).filter(|(a, b)| !a.is_empty() && !b.is_empty())
        }
        Value::Array(a) if a.len() == 2 => Some((a[0].as_str()?.to_string(), a[1].as_str()?.to_string())),
        _ => None,
    }
}

/// A pair as an axis value: `slac->cern`.
pub fn pair_value(from: &str, to: &str) -> String {
    format!("{from}->{to}")
}

/// Splits a `pair` axis value back into its ends.
pub fn split_pair(v: &str) -> Option<(&str, &str)> {
    v.split_once("->")
}

/// Flattens TOML's dotted keys (`link.slac-esnet.rate = …` is a nested table) into
/// `(link.slac-esnet.rate, line, value)`; quoted dotted keys arrive whole.
pub fn flatten(t: Table, lines: &Lines<'_>) -> Vec<(String, usize, Value)> {
    fn walk(prefix: &str, v: Value, line: usize, out: &mut Vec<(String, usize, Value)>) {
        match v {
            Value::Table(t) => {
                for (k, v) in t {
                    walk(&format!("{prefix}.{k}"), v, line, out);
                }
            }
            v => out.push((prefix.to_string(), line, v)),
        }
    }
    let mut out = Vec::new();
    let mut items: Vec<_> = t.into_iter().collect();
    items.sort_by_key(|(k, _)| k.span().start);
    for (k, v) in items {
        let line = lines.of(k.span().start);
        let key = k.get_ref().clone();
        match v.into_inner() {
            Value::Table(t) => walk(&key, Value::Table(t), line, &mut out),
            v => out.push((key, line, v)),
        }
    }
    out
}

/// Reads the `[net]` table; `check` validates a candidate cell (the study's traffic and
/// settings so far, one pair) against the topology, so each mistake names its own line.
pub fn parse(
    t: Table,
    lines: &Lines<'_>,
    check: &dyn Fn(&NetCell) -> Result<(), String>,
) -> Result<NetTarget, wanperf_toml::Error> {
    let mut topology = None;
    let (mut from, mut to, mut pairs_v) = (None, None, None);
    let mut traffic = Vec::new();
    let mut settings = Vec::new();
    let mut pair_line = 0;
    let mut items: Vec<_> = t.into_iter().collect();
    items.sort_by_key(|(k, _)| k.span().start);
    let mut rest = Table::new();
    for (k, v) in items {
        let line = lines.of(k.span().start);
        match k.get_ref().as_str() {
            "topology" => topology = Some((line, scalar(v.get_ref()).unwrap_or_default())),
            "from" => from = Some((line, scalar(v.get_ref()).unwrap_or_default())),
            "to" => {
                pair_line = line;
                to = Some((line, scalar(v.get_ref()).unwrap_or_default()))
            }
            "pairs" => {
                pair_line = line;
                pairs_v = Some((line, v.into_inner()))
            }
            // `[[net.traffic]]` tables are the study's own cross traffic; `traffic.NAME.KEY`
            // (a dotted key: a table) is a setting.
            "traffic" if matches!(v.get_ref(), Value::Array(_)) => {
                let Value::Array(a) = v.into_inner() else { unreachable!("matched above") };
                for x in a {
                    let Value::Table(tbl) = x else {
                        return Err(err(line, "`traffic` under [net] is a list of [[net.traffic]] tables"));
                    };
                    let body: String = tbl.iter().map(|(k, v)| format!("{k} = {v}\n")).collect();
                    traffic.push((line, format!("[[traffic]]\n{body}")));
                }
            }
            _ => {
                rest.insert(k, v);
            }
        }
    }
    let (tl, topology) = topology.ok_or_else(|| err(0, "[net] needs `topology` (a topology file or a preset)"))?;
    if topology.is_empty() {
        return Err(err(tl, "`topology` must name a topology file or a preset"));
    }
    let pairs: Vec<(String, String)> = match (pairs_v, &from, &to) {
        (Some((l, _)), Some(_), _) | (Some((l, _)), _, Some(_)) => {
            return Err(err(l, "[net] has `pairs` or `from` and `to`, not both"))
        }
        (Some((l, Value::Array(a))), None, None) if !a.is_empty() => a
            .iter()
            .map(|v| pair(v).ok_or_else(|| err(l, "each of `pairs` is \"FROM->TO\" (e.g. \"slac->cern\")")))
            .collect::<Result<_, _>>()?,
        (Some((l, _)), None, None) => return Err(err(l, "`pairs` is a list of \"FROM->TO\" (e.g. [\"slac->cern\"])")),
        (None, Some((_, f)), Some((_, t))) => vec![(f.clone(), t.clone())],
        (None, _, _) => return Err(err(tl, "[net] needs the measured pair: `from` and `to` (or `pairs`)")),
    };
    let mut target = NetTarget { topology, traffic: Vec::new(), settings: Vec::new(), pairs: Vec::new() };
    let cell = |t: &NetTarget, p: &(String, String)| NetCell {
        topology: t.topology.clone(),
        traffic: t.traffic.clone(),
        settings: t.settings.clone(),
        from: p.0.clone(),
        to: p.1.clone(),
    };
    let first = pairs[0].clone();
    check(&cell(&target, &first)).map_err(|m| err(tl, m))?;
    for (l, text) in traffic {
        target.traffic.push(text);
        check(&cell(&target, &first)).map_err(|m| err(l, format!("[[net.traffic]]: {m}")))?;
    }
    for (key, l, v) in flatten(rest, lines) {
        if !is_setting(&key) {
            return Err(err(
                l,
                format!("unknown [net] key `{key}` (topology, from, to, pairs, traffic, or link.NAME.KEY, host.NAME.KEY, traffic.NAME.KEY)"),
            ));
        }
        let val = scalar(&v).ok_or_else(|| err(l, format!("`{key}` must be a single value")))?;
        settings.push((key, val, l));
    }
    for (key, val, l) in settings {
        target.settings.push((key, val));
        check(&cell(&target, &first)).map_err(|m| err(l, m))?;
    }
    for p in &pairs {
        check(&cell(&target, p)).map_err(|m| err(pair_line, m))?;
    }
    target.pairs = pairs;
    Ok(target)
}
