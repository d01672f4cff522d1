//! The headline tables a study run prints at its end, one line per cell (pure: from the
//! archived cells to lines of text).

use crate::spec::{self, Study};
use serde_json::Value;
use wanperf_archive::{CellAggregate, StoredCell};

/// A cell's axis values, formatted for a table.
fn axis_cells(axes: &[String], params: &std::collections::BTreeMap<String, Value>) -> Vec<String> {
    axes.iter().map(|a| params.get(a).map_or("-".into(), |v| crate::axis::fmt_value(a, v))).collect()
}

/// Right-aligned columns at least `min` wide, each wider where a value needs it (a pair
/// `pharlap->speedy@speedy-ge`, a policer `1M,100K,port=test`), then each row's free text.
fn columns(rows: &[(Vec<String>, String)], min: usize) -> Vec<String> {
    let n = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let width: Vec<usize> = (0..n)
        .map(|i| rows.iter().filter_map(|r| r.0.get(i)).map(|v| v.chars().count() + 2).max().unwrap_or(0).max(min))
        .collect();
    rows.iter()
        .map(|(cells, text)| {
            let mut line: String = cells.iter().zip(&width).map(|(v, w)| format!("{v:>w$}")).collect();
            if !text.is_empty() {
                line.push_str("  ");
                line.push_str(text);
            }
            line
        })
        .collect()
}

/// The headline table of a copy study: per cell, the data rate, the bytes on the wire, the
/// time and what limited the copy (its verdict).
pub fn copy(study: &Study, cells: &[StoredCell]) -> Vec<String> {
    let axes: Vec<String> = study.axes.iter().map(|a| spec::param_key(&a.name)).collect();
    let mut head: Vec<String> = axes.clone();
    head.extend(["rep", "data rate", "on the wire", "time"].map(String::from));
    let mut out = vec![(head, "limited by".to_string())];
    for c in cells.iter().map(|c| &c.cell) {
        let copy = &c.summary["copy"];
        let mut row = axis_cells(&axes, &c.params);
        row.push((c.repeat + 1).to_string());
        row.push(copy["rate_bytes_s"].as_f64().map_or("-".into(), |r| wanperf_units::fmt_rate(r * 8.0)));
        row.push(copy["wire_bytes"].as_u64().map_or("-".into(), wanperf_units::fmt_bytes));
        row.push(copy["wall_s"].as_f64().map_or("-".into(), |t| format!("{t:.2} s")));
        let text = c.summary["verdict"]["text"].as_str().unwrap_or("");
        let why = match &c.failure {
            Some(f) => format!("(failed: {f})"),
            None => text.split(": ").next().unwrap_or("").trim_start_matches("limited by ").to_string(),
        };
        out.push((row, why));
    }
    columns(&out, 12)
}

/// The headline table of a capacity study: per cell, the capacity, the available bandwidth,
/// the capacity back and the bottleneck's hop.
pub fn capacity(study: &Study, cells: &[StoredCell]) -> Vec<String> {
    let axes: Vec<String> = study.axes.iter().map(|a| spec::param_key(&a.name)).collect();
    let mut head: Vec<String> = axes.clone();
    head.extend(["rep", "capacity", "available", "back"].map(String::from));
    // Rates are up to 13 characters ("999.00 Mbit/s"): wider columns than the other tables'.
    let mut out = vec![(head, "bottleneck".to_string())];
    for c in cells.iter().map(|c| &c.cell) {
        let r = &c.summary["capacity"];
        let rate = |v: &Value| v.as_f64().map_or("-".into(), wanperf_units::fmt_rate);
        let mut row = axis_cells(&axes, &c.params);
        row.push((c.repeat + 1).to_string());
        row.push(rate(&r["capacity"]["bps"]));
        row.push(rate(&r["available"]["bps"]));
        row.push(rate(&r["reverse"]["capacity"]["bps"]));
        let at = match (&c.failure, r["bottleneck"]["ttl"].as_u64()) {
            (Some(f), _) => format!("(failed: {f})"),
            (None, Some(t)) if r["bottleneck"]["destination"] == true => format!("hop {t}, the last link"),
            (None, Some(t)) => format!("hop {t} ({})", r["bottleneck"]["address"].as_str().unwrap_or("no answer")),
            (None, None) => "-".into(),
        };
        out.push((row, at));
    }
    columns(&out, 14)
}

/// The headline table of a trace study: per cell, the hops, the destination's RTT and the
/// path's loss, and what the trace found on the way (where loss starts, rate-limited
/// routers, route changes, the path MTU).
pub fn trace(study: &Study, cells: &[StoredCell]) -> Vec<String> {
    let axes: Vec<String> = study.axes.iter().map(|a| spec::param_key(&a.name)).collect();
    let mut head: Vec<String> = axes.clone();
    head.extend(["rep", "hops", "RTT min", "RTT median", "loss", "forward", "reverse"].map(String::from));
    let mut out = vec![(head, "found".to_string())];
    for c in cells.iter().map(|c| &c.cell) {
        let t = &c.summary["trace"];
        let hops = t["hops"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        let last = hops.iter().rev().find(|h| h["destination"] == true);
        let ms = |k: &str| last.and_then(|h| h["rtt_ms"][k].as_f64()).map_or("-".into(), |x| format!("{x:.2} ms"));
        let mut row = axis_cells(&axes, &c.params);
        row.push((c.repeat + 1).to_string());
        row.push(last.and_then(|h| h["ttl"].as_u64()).map_or("-".into(), |t| t.to_string()));
        row.push(ms("min"));
        row.push(ms("median"));
        let pct = |v: Option<f64>| v.map_or("-".into(), |l| format!("{l:.1} %"));
        row.push(pct(last.and_then(|h| h["path_loss_pct"].as_f64())));
        // Split by the study's server (none when it did not answer).
        row.push(pct(t["one_way"]["forward_loss_pct"].as_f64()));
        row.push(pct(t["one_way"]["reverse_loss_pct"].as_f64()));
        let mut found: Vec<String> = Vec::new();
        if let Some(f) = &c.failure {
            found.push(format!("(failed: {f})"));
        }
        for h in hops {
            let ttl = h["ttl"].as_u64().unwrap_or(0);
            let note = h["note"].as_str().unwrap_or("");
            if note.contains("loss starts here") {
                found.push(match h["loss_direction"].as_str() {
                    Some("forward") => format!("loss starts at hop {ttl} (on the way there)"),
                    Some("reverse") => format!("loss starts at hop {ttl} (on the way back)"),
                    _ => format!("loss starts at hop {ttl}"),
                });
            }
            if note.contains("rate-limited") {
                found.push(format!("hop {ttl} rate-limited"));
            }
        }
        if let Some(n) = t["route_changes"].as_array().map(Vec::len).filter(|n| *n > 0) {
            found.push(format!("{n} route change{}", if n == 1 { "" } else { "s" }));
        }
        if let Some(m) = t["path_mtu"].as_u64() {
            found.push(format!("path MTU {m} B"));
        }
        out.push((row, found.join("; ")));
    }
    columns(&out, 12)
}

/// The headline table: per cell, throughput and (for probes) loaded/unloaded RTT and loss.
pub fn measured(study: &Study, aggs: &[CellAggregate]) -> Vec<String> {
    let axes: Vec<String> = study.axes.iter().map(|a| spec::param_key(&a.name)).collect();
    let mut head: Vec<String> = axes.clone();
    head.extend(["rep", "goodput", "RTT idle", "RTT loaded", "loss"].map(String::from));
    let mut out = vec![(head, String::new())];
    for c in aggs {
        let mut row = axis_cells(&axes, &c.params);
        row.push((c.repeat + 1).to_string());
        row.push(c.mean_throughput_bps.map_or("-".into(), wanperf_units::fmt_rate));
        let ms = |p: &str| c.phases.get(p).and_then(|x| x.mean_ms).map_or("-".into(), |m| format!("{m:.1} ms"));
        // Load studies have both phases; a ping study's probes are all "idle" (no load).
        let (idle, loaded) = if c.phases.contains_key("loaded") { ("unloaded", "loaded") } else { ("", "-") };
        row.push(ms(idle));
        row.push(ms(loaded));
        let lossy = if loaded == "-" { idle } else { loaded };
        row.push(c.phases.get(lossy).map_or("-".into(), |x| format!("{:.1} %", x.loss_pct)));
        out.push((row, if c.ok { String::new() } else { "(failed)".into() }));
    }
    columns(&out, 12)
}
