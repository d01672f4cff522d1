//! The report's tables and text sections: seed 000's loaded-against-unloaded statistics,
//! throughput, copy, verdict and ping tables, the analysis (best cell, BDP and window, Mathis, asymmetry),
//! failures, the study's parameters and the host captures. Everything from the data is
//! escaped here.

use crate::figures::group_label;
use crate::fmt::{bytes, esc, mbps, ms, sig};
use crate::view::{num, Group, Phase, View};
use serde_json::Value;
use std::fmt::Write as _;
use wanperf_archive::StoredCell;
use wanperf_stats::analysis::{self, load_diff, rank_best, RttStats};

/// A table cell with a number (or a dash).
fn td(x: Option<f64>) -> String {
    match x {
        Some(x) if x.is_finite() => format!("<td>{}</td>", sig(x)),
        _ => "<td>–</td>".into(),
    }
}

/// A table cell with a count.
fn tdi(x: u64) -> String {
    format!("<td>{x}</td>")
}

/// A table cell with a count, or a dash where there is none.
fn td_opt(x: Option<u64>) -> String {
    x.map_or_else(|| "<td>–</td>".to_string(), tdi)
}

fn tdl(s: &str) -> String {
    format!("<td class=\"l\">{}</td>", esc(s))
}

/// UTC date and time of a Unix time.
pub fn utc(unix: f64) -> String {
    if !unix.is_finite() {
        return "?".into();
    }
    let secs = unix.floor() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days to civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// `wanperf runs`: one line per run (id, study, cells stored of planned, start, status).
pub fn runs_table(runs: &[wanperf_archive::RunInfo]) -> Vec<String> {
    let mut out = vec![format!("{:>5}  {:<28} {:>11}  {:<23} status", "run", "study", "cells", "started")];
    for r in runs {
        out.push(format!(
            "{:>5}  {:<28} {:>5} of {:<3} {:<23} {}",
            r.id,
            r.study,
            r.cells_done,
            r.cells_planned,
            utc(r.started_unix),
            r.status.as_str()
        ));
    }
    out
}

/// The line under the title: run, status, software, times, cells.
pub fn run_line(v: &View) -> String {
    let r = &v.data.run;
    let mut s =
        format!("Run {} · {} · {} · started {}", r.id, esc(r.status.as_str()), esc(&r.software), utc(r.started_unix));
    if let Some(f) = r.finished_unix {
        let _ = write!(s, " · finished {} ({} s)", utc(f), sig(f - r.started_unix));
    }
    let _ = write!(s, " · {} of {} cells measured", r.cells_done, r.cells_planned);
    if !v.failures.is_empty() {
        let _ = write!(s, " · <span class=\"bad\">{} failed</span>", v.failures.len());
    }
    s
}

/// One statistic of an RTT summary.
type Stat = fn(&RttStats) -> Option<f64>;

fn rtt_of(p: Option<&Phase>) -> Option<RttStats> {
    p.and_then(|p| p.stats.rtt)
}

/// Seed 000's tables and the throughput and ping tables.
pub fn statistics(v: &View) -> String {
    let mut h = String::from("<section id=\"tables\"><h2>Tables</h2>\n");
    let load: Vec<&Group> = v.load_groups().collect();
    if !load.is_empty() {
        // The cell with the most added delay, as seed 000's vertical table.
        let top = load
            .iter()
            .max_by(|a, b| {
                let d = |g: &Group| {
                    load_diff(&g.loaded.as_ref().unwrap().stats, &g.unloaded.as_ref().unwrap().stats)
                        .map_or(f64::NEG_INFINITY, |d| d.median_ms)
                };
                d(a).total_cmp(&d(b))
            })
            .unwrap();
        let (lp, up) = (&top.loaded.as_ref().unwrap().stats, &top.unloaded.as_ref().unwrap().stats);
        let _ = write!(
            h,
            "<h3>Loaded against unloaded RTT, {}{}</h3>\n<table><tr><th class=\"l\"></th><th>Loaded</th><th>NoLoad</th>\
             <th>Difference</th><th class=\"l\">Units</th></tr>\n",
            esc(&group_label(v, top)),
            if load.len() > 1 { " (the cell with the most added delay)" } else { "" }
        );
        let (l, u) = (lp.rtt, up.rtt);
        let rows: [(&str, Stat); 9] = [
            ("Average", |r| Some(r.avg)),
            ("Stdev", |r| Some(r.stdev)),
            ("Median", |r| Some(r.median)),
            ("IQR", |r| Some(r.iqr)),
            ("5th percentile", |r| r.p5),
            ("90th percentile", |r| r.p90),
            ("95th percentile", |r| r.p95),
            ("Min", |r| Some(r.min)),
            ("Max", |r| Some(r.max)),
        ];
        for (name, f) in rows {
            let (a, b) = (l.as_ref().and_then(f), u.as_ref().and_then(f));
            let _ = writeln!(
                h,
                "<tr><th class=\"l\">{name}</th>{}{}{}<td class=\"l\">ms</td></tr>",
                td(a),
                td(b),
                td(a.zip(b).map(|(a, b)| a - b))
            );
        }
        let _ = writeln!(
            h,
            "<tr><th class=\"l\">Loss</th>{}{}{}<td class=\"l\">%</td></tr>\
             <tr><th class=\"l\">Probes sent</th>{}{}<td></td><td class=\"l\">probes</td></tr></table>",
            td(Some(lp.loss_pct)),
            td(Some(up.loss_pct)),
            td(Some(lp.loss_pct - up.loss_pct)),
            tdi(lp.sent),
            tdi(up.sent)
        );

        // Every load cell, loaded / unloaded side by side.
        let rpm = load.iter().any(|g| g.cells.iter().any(|c| num(c.cell.summary.get("rpm")).is_some()));
        h += "<h3>Every load cell: loaded (L) against unloaded (U) probes</h3><div class=\"wide\"><table>\n<tr>\
              <th class=\"l\" rowspan=\"2\">cell</th><th rowspan=\"2\">repeats</th><th rowspan=\"2\">goodput<br>(Mbit/s)</th>\
              <th rowspan=\"2\">retransmits<br>(segments)</th><th rowspan=\"2\">added median<br>RTT (ms)</th>";
        if rpm {
            h += "<th rowspan=\"2\">RPM<br>(round trips/min)</th>";
        }
        for s in ["Average", "Stdev", "Median", "IQR", "p90", "Min", "Max"] {
            let _ = write!(h, "<th colspan=\"2\">{s} (ms)</th>");
        }
        h += "<th colspan=\"2\">Loss (%)</th></tr>\n<tr>";
        for _ in 0..8 {
            h += "<th>L</th><th>U</th>";
        }
        h += "</tr>\n";
        for g in &load {
            let (l, u) = (rtt_of(g.loaded.as_ref()), rtt_of(g.unloaded.as_ref()));
            let d = load_diff(&g.loaded.as_ref().unwrap().stats, &g.unloaded.as_ref().unwrap().stats);
            let _ = write!(
                h,
                "<tr>{}{}{}{}{}",
                tdl(&group_label(v, g)),
                tdi(g.cells.len() as u64),
                td(g.tput_bps.map(|t| t / 1e6)),
                td(g.retransmits),
                td(d.map(|d| d.median_ms))
            );
            if rpm {
                let r: Vec<f64> = g.cells.iter().filter_map(|c| num(c.cell.summary.get("rpm"))).collect();
                h += &td(wanperf_stats::summary::mean(&r));
            }
            let stats: [Stat; 7] = [
                |r| Some(r.avg),
                |r| Some(r.stdev),
                |r| Some(r.median),
                |r| Some(r.iqr),
                |r| r.p90,
                |r| Some(r.min),
                |r| Some(r.max),
            ];
            for f in stats {
                h += &td(l.as_ref().and_then(f));
                h += &td(u.as_ref().and_then(f));
            }
            h += &td(g.loaded.as_ref().map(|p| p.stats.loss_pct));
            h += &td(g.unloaded.as_ref().map(|p| p.stats.loss_pct));
            h += "</tr>\n";
        }
        h += "</table></div>\n";
        h += &one_way(v, &load);
    }

    let tput: Vec<&Group> = v.groups.iter().filter(|g| g.kind != "load" && g.tput_bps.is_some()).collect();
    if !tput.is_empty() {
        h += "<h3>Throughput</h3><div class=\"wide\"><table>\n<tr><th class=\"l\">cell</th><th class=\"l\">kind</th>\
              <th>repeats</th><th>goodput (Mbit/s)</th><th>retransmits (segments)</th><th>sent (MB)</th>\
              <th>duration (s)</th><th>sender CPU (%)</th><th>receiver CPU (%)</th><th>UDP loss (%)</th>\
              <th>UDP jitter (ms)</th></tr>\n";
        for g in tput {
            let m = |path: &[&str]| {
                let v: Vec<f64> = g
                    .cells
                    .iter()
                    .filter_map(|c| num(path.iter().try_fold(&c.cell.summary, |v, k| v.get(k))))
                    .collect();
                wanperf_stats::summary::mean(&v)
            };
            let _ = writeln!(
                h,
                "<tr>{}{}{}{}{}{}{}{}{}{}{}</tr>",
                tdl(&group_label(v, g)),
                tdl(&g.kind),
                tdi(g.cells.len() as u64),
                td(g.tput_bps.map(|t| t / 1e6)),
                td(g.retransmits),
                td(g.sent_bytes.map(|b| b / 1e6)),
                td(m(&["duration_s"])),
                td(m(&["cpu", "sender_pct"])),
                td(m(&["cpu", "receiver_pct"])),
                td(m(&["udp", "loss_pct"])),
                td(m(&["udp", "jitter_ms"]))
            );
        }
        h += "</table></div>\n";
    }

    h += &copies(v);
    h += &verdicts(v);
    h += &traces(v);
    h += &capacities(v);

    let ping: Vec<&Group> = v.groups.iter().filter(|g| g.plain.is_some()).collect();
    if !ping.is_empty() {
        h += "<h3>Probes</h3><div class=\"wide\"><table>\n<tr><th class=\"l\">cell</th><th>sent</th><th>loss (%)</th>\
              <th>Average (ms)</th><th>Stdev (ms)</th><th>Median (ms)</th><th>IQR (ms)</th><th>p5 (ms)</th>\
              <th>p90 (ms)</th><th>p95 (ms)</th><th>Min (ms)</th><th>Max (ms)</th></tr>\n";
        for g in &ping {
            let p = &g.plain.as_ref().unwrap().stats;
            let r = p.rtt;
            let f = |f: Stat| td(r.as_ref().and_then(f));
            let _ = writeln!(
                h,
                "<tr>{}{}{}{}{}{}{}{}{}{}{}{}</tr>",
                tdl(&group_label(v, g)),
                tdi(p.sent),
                td(Some(p.loss_pct)),
                f(|r| Some(r.avg)),
                f(|r| Some(r.stdev)),
                f(|r| Some(r.median)),
                f(|r| Some(r.iqr)),
                f(|r| r.p5),
                f(|r| r.p90),
                f(|r| r.p95),
                f(|r| Some(r.min)),
                f(|r| Some(r.max))
            );
        }
        h += "</table></div>\n";
        h += &ping_one_way(v, &ping);
    }
    if v.groups.is_empty() {
        h += "<p class=\"note\">No cell was measured successfully.</p>\n";
    }
    h += "</section>\n";
    h
}

/// Every successful cell with its group, where `keep` says so.
fn cells_where<'v, 'a>(v: &'v View<'a>, keep: impl Fn(&StoredCell) -> bool) -> Vec<(&'v Group<'a>, &'a StoredCell)> {
    v.groups.iter().flat_map(|g| g.cells.iter().map(move |c| (g, *c))).filter(|(_, c)| keep(c)).collect()
}

/// Traces: per hop, who answered, loss at the hop and on the path, RTT, and what the loss means.
fn traces(v: &View) -> String {
    let cells = cells_where(v, |c| c.cell.summary["trace"].is_object());
    let mut h = String::new();
    for (g, c) in cells {
        let s = &c.cell.summary;
        let _ = write!(
            h,
            "<h3>Trace to {} ({}), {}</h3><div class=\"wide\"><table>\n<tr><th>hop</th><th class=\"l\">address</th>\
             <th>probes</th><th>loss at the hop (%)</th><th>path loss (%)</th><th>RTT min (ms)</th><th>median (ms)</th>\
             <th>p90 (ms)</th><th class=\"l\">note</th></tr>\n",
            esc(s["host"].as_str().unwrap_or("?")),
            esc(s["address"].as_str().unwrap_or("?")),
            esc(&group_label(v, g))
        );
        for hop in s["trace"]["hops"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
            let r = |q: &str| num(hop["rtt_ms"].get(q));
            let _ = writeln!(
                h,
                "<tr>{}{}{}{}{}{}{}{}{}</tr>",
                tdi(hop["ttl"].as_u64().unwrap_or(0)),
                tdl(crate::figures::hop_addr(hop).unwrap_or("*")),
                tdi(hop["sent"].as_u64().unwrap_or(0)),
                td(num(hop.get("loss_pct"))),
                td(num(hop.get("path_loss_pct"))),
                td(r("min")),
                td(r("median")),
                td(r("p90")),
                tdl(hop["note"].as_str().unwrap_or(if hop["destination"] == true { "destination" } else { "" })),
            );
        }
        h += "</table></div>\n";
        let w = &s["trace"]["one_way"];
        if let (Some(fwd), Some(rev)) = (w["forward_loss_pct"].as_f64(), w["reverse_loss_pct"].as_f64()) {
            let _ = writeln!(
                h,
                "<p>Counted by the server at the destination: {fwd:.2} % of {} probes lost on the way there, \
                 {rev:.2} % of {} answers on the way back.</p>",
                w["sent"].as_u64().unwrap_or(0),
                w["arrived"].as_u64().unwrap_or(0)
            );
        }
    }
    h
}

/// Where a capacity report's bottleneck `b` is ("–" when not located), and its tight link.
fn hop_text(b: &serde_json::Value) -> String {
    let at = |b: &serde_json::Value| match b["destination"].as_bool() {
        Some(true) => "the last link".to_string(),
        _ => format!("into hop {} ({})", b["ttl"].as_u64().unwrap_or(0), b["address"].as_str().unwrap_or("no answer")),
    };
    match (b, &b["tight"]) {
        (serde_json::Value::Null, _) => "–".to_string(),
        (b, serde_json::Value::Null) => at(b),
        (b, t) => format!("{}; tight: {}", at(b), at(t)),
    }
}

/// Capacity measurements (`wanperf capacity --save`): the narrow link's rate each way with
/// its range, the available bandwidth and the bottleneck's hop each way (the way back's
/// when they were asked for), and what the estimate cost.
fn capacities(v: &View) -> String {
    let cells = cells_where(v, |c| c.cell.summary["capacity"].is_object());
    if cells.is_empty() {
        return String::new();
    }
    let mut h = "<h3>Capacity and available bandwidth</h3><div class=\"wide\"><table>\n<tr><th class=\"l\">to</th>\
                 <th>RTT (ms)</th><th>capacity (Mbit/s)</th><th>range (Mbit/s)</th><th>available (Mbit/s)</th>\
                 <th>range (Mbit/s)</th><th class=\"l\">bottleneck</th><th>capacity back (Mbit/s)</th>\
                 <th>available back (Mbit/s)</th><th class=\"l\">bottleneck back</th>\
                 <th>cost (MB)</th><th>time (s)</th></tr>\n"
        .to_string();
    let mbit = |x: &serde_json::Value| x.as_f64().map(|b| b / 1e6);
    let range = |x: &serde_json::Value| match (mbit(&x["low_bps"]), mbit(&x["high_bps"])) {
        (Some(a), Some(b)) => format!("{a:.1} – {b:.1}"),
        _ => "–".into(),
    };
    for (_, c) in cells {
        let s = &c.cell.summary;
        let r = &s["capacity"];
        let _ = writeln!(
            h,
            "<tr>{}{}{}{}{}{}{}{}{}{}{}{}</tr>",
            tdl(&format!("{} ({})", s["host"].as_str().unwrap_or("?"), s["address"].as_str().unwrap_or("?"))),
            td(r["rtt_ms"].as_f64()),
            td(mbit(&r["capacity"]["bps"])),
            tdl(&range(&r["capacity"])),
            td(mbit(&r["available"]["bps"])),
            tdl(&range(&r["available"])),
            tdl(&hop_text(&r["bottleneck"])),
            td(mbit(&r["reverse"]["capacity"]["bps"])),
            td(mbit(&r["reverse"]["available"]["bps"])),
            tdl(&hop_text(&r["reverse"]["bottleneck"])),
            td(r["bytes_sent"].as_f64().map(|b| b / 1e6)),
            td(r["seconds"].as_f64()),
        );
    }
    h += "</table></div>\n";
    h
}

/// Copies: files, bytes, rate, compression, what was resumed and resent, per cell.
fn copies(v: &View) -> String {
    let cells = cells_where(v, |c| c.cell.summary["copy"].is_object());
    if cells.is_empty() {
        return String::new();
    }
    let mut h = "<h3>Copies</h3><div class=\"wide\"><table>\n<tr><th class=\"l\">cell</th><th>repeat</th>\
                 <th class=\"l\">way</th><th>files</th><th>left alone</th><th>bytes (MB)</th><th>on the wire (MB)</th>\
                 <th>time (s)</th><th>rate (MB/s)</th><th class=\"l\">compression</th><th>resumed (MB)</th>\
                 <th>blocks resent</th></tr>\n"
        .to_string();
    for (g, c) in cells {
        let s = &c.cell.summary["copy"];
        let u = |k: &str| s[k].as_u64().unwrap_or(0);
        let _ = writeln!(
            h,
            "<tr>{}{}{}{}{}{}{}{}{}{}{}{}</tr>",
            tdl(&group_label(v, g)),
            tdi(u64::from(c.cell.repeat) + 1),
            tdl(c.cell.params.get("way").and_then(Value::as_str).unwrap_or("")),
            tdi(u("files")),
            tdi(u("skipped_files")),
            td(Some(u("bytes") as f64 / 1e6)),
            td(Some(u("wire_bytes") as f64 / 1e6)),
            td(num(s.get("wall_s"))),
            td(num(s.get("rate_bytes_s")).map(|r| r / 1e6)),
            tdl(s["compression"].as_str().unwrap_or("")),
            td(Some(u("resumed_bytes") as f64 / 1e6)),
            tdi(u("resent_blocks")),
        );
    }
    h += "</table></div>\n";
    h
}

/// What limited each test or copy (its verdict), with the evidence behind it.
fn verdicts(v: &View) -> String {
    let cells = cells_where(v, |c| c.cell.summary["verdict"]["text"].is_string());
    if cells.is_empty() {
        return String::new();
    }
    let mut h = "<h3>What limited it</h3><div class=\"wide\"><table>\n<tr><th class=\"l\">cell</th><th>repeat</th>\
                 <th class=\"l\">kind</th><th class=\"l\">verdict</th><th class=\"l\">evidence</th></tr>\n"
        .to_string();
    for (g, c) in cells {
        let verdict = &c.cell.summary["verdict"];
        let evidence: Vec<String> =
            verdict["evidence"].as_array().into_iter().flatten().filter_map(Value::as_str).map(esc).collect();
        let _ = writeln!(
            h,
            "<tr>{}{}{}<td class=\"w\" data-verdict=\"{}\">{}</td><td class=\"w\">{}</td></tr>",
            tdl(&group_label(v, g)),
            tdi(u64::from(c.cell.repeat) + 1),
            tdl(&c.cell.kind),
            // A copy stage's limit is `{"stage": "read"}`: its stage names it.
            esc(verdict["limit"].as_str().or_else(|| verdict["limit"]["stage"].as_str()).unwrap_or("")),
            esc(verdict["text"].as_str().unwrap_or("")),
            evidence.join("<br>")
        );
    }
    h += "</table></div>\n";
    h
}

/// Best cell and shortfalls, BDP and window advice, the Mathis bound, direction asymmetry.
pub fn analysis(v: &View) -> String {
    let mut h = String::from("<section id=\"analysis\"><h2>Analysis</h2>\n");
    let rtt_s = v.base_rtt.map(|r| r.0 / 1000.0);
    match (v.rate, v.base_rtt) {
        (Some((rate, rs)), Some((rtt, ts))) => {
            let _ = writeln!(
                h,
                "<p>Path: rate {} ({}), base RTT {} ({}); bandwidth-delay product {}.</p>",
                mbps(rate),
                esc(rs),
                ms(rtt),
                esc(ts),
                bytes(wanperf_stats::calc::bdp_bytes(rate, rtt / 1000.0))
            );
        }
        _ => h += "<p class=\"note\">No path rate or base RTT known: no BDP or window advice.</p>\n",
    }
    let gs: Vec<&Group> = v.groups.iter().filter(|g| g.tput_bps.is_some()).collect();
    if !gs.is_empty() {
        let ranking = rank_best(&gs.iter().map(|g| g.tput_bps.unwrap_or(f64::NAN)).collect::<Vec<_>>());
        h += "<div class=\"wide\"><table>\n<tr><th class=\"l\">cell</th><th>goodput (Mbit/s)</th>\
              <th>short of best (%)</th><th>streams × window (KiB)</th><th>window limit (Mbit/s)</th>\
              <th class=\"l\">window-limited</th><th>window per stream for the BDP (KiB)</th>\
              <th>loss rate (%)</th><th>RTT for Mathis (ms)</th><th>Mathis bound (Mbit/s)</th></tr>\n";
        let mss = v.groups.iter().find_map(|g| g.mss).unwrap_or(1448.0);
        for (i, g) in gs.iter().enumerate() {
            let n = g.streams.unwrap_or(1);
            let advice = match (v.rate, rtt_s) {
                (Some((rate, _)), Some(rtt)) => {
                    Some(analysis::window_advice(v.rate_for(g).unwrap_or(rate), rtt, n, g.window.map(|w| w as f64)))
                }
                _ => None,
            };
            // Under load the round trip is the loaded one (probes, else TCP's own), else the base.
            let rtt_ms = rtt_of(g.loaded.as_ref()).map(|r| r.median).or(g.srtt_ms).or(v.base_rtt.map(|r| r.0));
            let m = rtt_ms.and_then(|r| {
                analysis::mathis_check(g.mss.unwrap_or(mss), r / 1000.0, g.retransmits? as u64, g.sent_bytes?, n)
            });
            let _ = writeln!(
                h,
                "<tr>{}{}{}{}{}{}{}{}{}{}</tr>",
                tdl(&group_label(v, g)),
                td(g.tput_bps.map(|t| t / 1e6)),
                td(ranking.as_ref().map(|r| r.shortfall_pct[i])),
                td(g.window.map(|w| f64::from(n) * w as f64 / 1024.0)),
                td(advice.and_then(|a| a.window_limit_bps).map(|b| b / 1e6)),
                tdl(match advice.and_then(|a| a.window_limited) {
                    Some(true) => "yes",
                    Some(false) => "no",
                    None => "–",
                }),
                td(advice.map(|a| a.per_stream_bytes / 1024.0)),
                td(m.map(|m| 100.0 * m.loss)),
                td(rtt_ms),
                td(m.map(|m| m.bound_bps / 1e6))
            );
        }
        let _ = writeln!(
            h,
            "</table></div><p class=\"note\">Window limit: streams × window / base RTT. Loss rate: retransmitted \
             segments over segments sent (bytes / {} B). Mathis bound: streams × MSS / RTT × √1.5 / √loss, none \
             without retransmits. kB = 1000 bytes, KiB = 1024 bytes.</p>",
            sig(mss)
        );
    }
    h += &asymmetry(v);
    h += "</section>\n";
    h
}

fn asymmetry(v: &View) -> String {
    let mut rows = Vec::new();
    // Cells that differ only in direction.
    for up in v.groups.iter().filter(|g| g.params.get("direction").and_then(Value::as_str) == Some("up")) {
        let down = v.groups.iter().find(|g| {
            g.kind == up.kind
                && g.params.get("direction").and_then(Value::as_str) == Some("down")
                && g.params
                    .iter()
                    .filter(|(k, _)| *k != "direction")
                    .eq(up.params.iter().filter(|(k, _)| *k != "direction"))
        });
        if let (Some(d), Some(ut)) = (down, up.tput_bps) {
            if let Some(dt) = d.tput_bps {
                let l = crate::view::facet_label(up.params, &v.varying, &["direction"]);
                rows.push((if l.is_empty() { "up against down".to_string() } else { l }, ut, dt));
            }
        }
    }
    // Bidirectional tests.
    for g in &v.groups {
        let t = |d: &str| {
            let x: Vec<f64> = g
                .cells
                .iter()
                .filter_map(|c| num(c.cell.summary.get("directions")?.get(d)?.get("throughput_bps")))
                .collect();
            wanperf_stats::summary::mean(&x)
        };
        if let (Some(u), Some(d)) = (t("up"), t("down")) {
            rows.push((format!("{} (bidirectional)", group_label(v, g)), u, d));
        }
    }
    if rows.is_empty() {
        return "<p class=\"note\">No asymmetry: the run has no up and down measurements of the same cell.</p>\n"
            .into();
    }
    let mut h = String::from(
        "<h3>Asymmetry between directions</h3><table>\n<tr><th class=\"l\">cell</th><th>up (Mbit/s)</th>\
         <th>down (Mbit/s)</th><th class=\"l\">faster</th><th>faster / slower</th><th>slower short by (%)</th></tr>\n",
    );
    for (label, u, d) in rows {
        if let Some(a) = analysis::asymmetry(u, d) {
            let _ = writeln!(
                h,
                "<tr>{}{}{}{}{}{}</tr>",
                tdl(&label),
                td(Some(u / 1e6)),
                td(Some(d / 1e6)),
                tdl(&a.faster),
                td(Some(a.ratio)),
                td(Some(a.shortfall_pct))
            );
        }
    }
    h + "</table>\n"
}

/// Failed cells, as data.
pub fn failures(v: &View) -> String {
    let mut h = String::from("<section id=\"failures\"><h2>Failures</h2>\n");
    if v.failures.is_empty() {
        h += "<p>No cell failed.</p>\n";
    } else {
        h += "<table>\n<tr><th>cell</th><th>repeat</th><th class=\"l\">kind</th><th class=\"l\">parameters</th>\
              <th class=\"l\">started</th><th class=\"l\">why</th></tr>\n";
        for c in &v.failures {
            let params = c.cell.params.iter().map(|(k, v)| crate::fmt::param(k, v)).collect::<Vec<_>>().join(", ");
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td>{}{}{}<td class=\"w\">{}</td></tr>",
                c.cell.index,
                c.cell.repeat,
                tdl(&c.cell.kind),
                tdl(&params),
                tdl(&utc(c.cell.started_unix)),
                esc(c.cell.failure.as_deref().unwrap_or("(no reason stored)"))
            );
        }
        h += "</table>\n";
    }
    h + "</section>\n"
}

/// The configured elements (policer, priority class, random loss) that never acted in a cell,
/// from the emulator's counters (`emulator.idle`): shown first, because those cells did not
/// measure the path that was configured. Empty when every element acted.
pub fn not_acted(v: &View) -> String {
    emulator_warnings(
        v,
        "idle",
        "not-acted",
        "Configured but never acted",
        "In these cells part of the configured path saw none of the traffic: what they measured is the path \
         without it.",
        "what did not act",
    )
}

/// The cells where the emulator fell behind its schedule (`emulator.behind`: packets the
/// sending device dropped unread, or 1 % of them a millisecond late): what they measured is
/// slower than the configured network. Empty when it kept up everywhere.
pub fn fell_behind(v: &View) -> String {
    emulator_warnings(
        v,
        "behind",
        "fell-behind",
        "The emulator fell behind",
        "In these cells the emulator did not keep the configured network's schedule: the results are \
         lower bounds of what that network carries, not measurements of it.",
        "what happened",
    )
}

/// A warning section listing the cells whose emulator record has sentences under `key` (an
/// array of them, or one).
fn emulator_warnings(v: &View, key: &str, id: &str, title: &str, intro: &str, column: &str) -> String {
    let cells: Vec<_> = v
        .data
        .cells
        .iter()
        .filter_map(|c| {
            let said = &c.cell.emulator.as_ref()?[key];
            let lines: Vec<&str> = match said.as_array() {
                Some(a) => a.iter().filter_map(|x| x.as_str()).collect(),
                None => said.as_str().into_iter().collect(),
            };
            (!lines.is_empty()).then_some((c, lines))
        })
        .collect();
    if cells.is_empty() {
        return String::new();
    }
    let mut h = format!(
        "<section id=\"{id}\" class=\"warn\"><h2>{title}</h2>\n<p>{intro}</p>\n<table>\n<tr><th>cell</th>\
         <th>repeat</th><th class=\"l\">parameters</th><th class=\"l\">{column}</th></tr>\n"
    );
    for (c, lines) in cells {
        let params = c.cell.params.iter().map(|(k, v)| crate::fmt::param(k, v)).collect::<Vec<_>>().join(", ");
        let what: Vec<String> = lines.into_iter().map(esc).collect();
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td>{}<td class=\"w\">{}</td></tr>",
            c.cell.index,
            c.cell.repeat,
            tdl(&params),
            what.join("<br>")
        );
    }
    h + "</table>\n</section>\n"
}

/// Seed 004's one-way delays, loaded against unloaded, per load cell and direction: where the
/// queue the load builds is (the way there, the way back, or both). Mean of each phase's mean
/// one-way delay over the repeats; empty when the probes measured none (TCP or ICMP probes).
fn one_way(v: &View, load: &[&Group]) -> String {
    let m = |g: &Group, phase: &str, dir: &str| {
        let x: Vec<f64> = g
            .cells
            .iter()
            .filter_map(|c| num(c.cell.summary.get(phase).and_then(|p| p.get(dir)).and_then(|d| d.get("avg"))))
            .collect();
        wanperf_stats::summary::mean(&x)
    };
    if !load.iter().any(|g| m(g, "loaded", "owd_fwd_ms").is_some()) {
        return String::new();
    }
    let mut h = String::from(
        "<h3>One-way delays, loaded against unloaded</h3><p class=\"note\">Mean one-way delay of the probes each \
         way, with the clock offset they estimate: the load's queue shows on the way it goes.</p>\
         <div class=\"wide\"><table>\n<tr><th class=\"l\">cell</th><th>there, loaded (ms)</th>\
         <th>there, unloaded (ms)</th><th>there, added (ms)</th><th>back, loaded (ms)</th>\
         <th>back, unloaded (ms)</th><th>back, added (ms)</th></tr>\n",
    );
    for g in load {
        let (fl, fu) = (m(g, "loaded", "owd_fwd_ms"), m(g, "unloaded", "owd_fwd_ms"));
        let (rl, ru) = (m(g, "loaded", "owd_rev_ms"), m(g, "unloaded", "owd_rev_ms"));
        let _ = writeln!(
            h,
            "<tr>{}{}{}{}{}{}{}</tr>",
            tdl(&group_label(v, g)),
            td(fl),
            td(fu),
            td(fl.zip(fu).map(|(a, b)| a - b)),
            td(rl),
            td(ru),
            td(rl.zip(ru).map(|(a, b)| a - b))
        );
    }
    h + "</table></div>\n"
}

/// One-way delays of ping cells (wanperf's or STAMP's probes), each way, with the clock offset
/// they rest on: cells swept over a load (cross traffic on or off) show on which way the queue
/// is. Means over the repeats; empty when no probe measured one (ICMP, TCP).
fn ping_one_way(v: &View, ping: &[&Group]) -> String {
    let m = |g: &Group, key: &str, field: Option<&str>| {
        let x: Vec<f64> = g
            .cells
            .iter()
            .filter_map(|c| {
                let x = c.cell.summary.get(key);
                num(match field {
                    Some(f) => x.and_then(|d| d.get(f)),
                    None => x,
                })
            })
            .collect();
        wanperf_stats::summary::mean(&x)
    };
    if !ping.iter().any(|g| m(g, "owd_fwd_ms", Some("avg")).is_some()) {
        return String::new();
    }
    let mut h = String::from(
        "<h3>One-way delays</h3><p class=\"note\">Mean one-way delay of the probes each way, and the \
         clock offset (far end minus near end) they rest on: 0 on emulated hosts, which share one clock.</p>\
         <div class=\"wide\"><table>\n<tr><th class=\"l\">cell</th><th>there, mean (ms)</th><th>there, median (ms)</th>\
         <th>back, mean (ms)</th><th>back, median (ms)</th><th>clock offset (ms)</th></tr>\n",
    );
    for g in ping {
        let _ = writeln!(
            h,
            "<tr>{}{}{}{}{}{}</tr>",
            tdl(&group_label(v, g)),
            td(m(g, "owd_fwd_ms", Some("avg"))),
            td(m(g, "owd_fwd_ms", Some("median"))),
            td(m(g, "owd_rev_ms", Some("avg"))),
            td(m(g, "owd_rev_ms", Some("median"))),
            td(m(g, "clock_offset_ms", None))
        );
    }
    h + "</table></div>\n"
}

/// What each configured element of the emulated path did in each cell, from the emulator's
/// own counters (summed over the classes) and the hosts' CPU quotas: packets in, the queue's
/// drops, the packets the policer decided on and dropped, re-marks, random losses, and the
/// periods a host's quota throttled.
fn element_counters(emu: &[(&StoredCell, &Value)]) -> String {
    let what = if emu.iter().any(|(_, e)| e["links"].is_array()) { "network" } else { "path" };
    let mut h = format!(
        "<h3>What the {what}'s elements did</h3><div class=\"wide\"><table>\n<tr><th class=\"l\">cell</th>\
         <th class=\"l\">direction</th><th>packets in</th><th>queue drops</th><th>policed</th><th>policer drops</th>\
         <th>re-marked</th><th>random losses</th><th>sender's queue drops</th><th class=\"l\">hosts</th></tr>\n",
    );
    for (c, e) in emu {
        let params = c.cell.params.iter().map(|(k, v)| crate::fmt::param(k, v)).collect::<Vec<_>>().join(", ");
        let hosts: String = e["hosts"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[])
            .iter()
            .map(|x| {
                let cpu = match (x["cpu"]["throttled"].as_u64(), x["cpu"]["periods"].as_u64()) {
                    (Some(t), Some(p)) => format!(": CPU quota throttled in {t} of {p} periods"),
                    _ => String::new(),
                };
                let queues: String = x["queues"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|q| format!(", txqueuelen {}", q["txqueuelen"].as_u64().unwrap_or(0)))
                    .collect();
                format!("{} ({}){cpu}{queues}", x["host"].as_str().unwrap_or("?"), x["model"].as_str().unwrap_or(""))
            })
            .collect::<Vec<_>>()
            .join("; ");
        // A path's two directions, or each direction of a network's links that carried packets.
        // (what the row says, the sending node, the direction's counters)
        let mut dirs: Vec<(String, &str, &Value)> = Vec::new();
        match e["links"].as_array() {
            Some(links) => {
                // The links on the measured route (both ways), and any other that dropped,
                // policed or carried cross traffic: not the stray neighbour discovery elsewhere.
                let on_route: Vec<&str> = wanperf_archive::route_links(e).iter().map(|h| h.name).collect();
                let acted = |d: &Value| {
                    d["injected"].as_u64().unwrap_or(0) > 0
                        || d["classes"].as_object().is_some_and(|m| {
                            m.values().any(|x| {
                                ["queue_drops", "policed", "random_losses"]
                                    .iter()
                                    .any(|f| x[*f].as_u64().unwrap_or(0) > 0)
                            })
                        })
                };
                for l in links {
                    if !on_route.contains(&l["name"].as_str().unwrap_or("")) && !acted(&l["ab"]) && !acted(&l["ba"]) {
                        continue;
                    }
                    let (name, a, b) = (
                        l["name"].as_str().unwrap_or("?"),
                        l["a"].as_str().unwrap_or("?"),
                        l["b"].as_str().unwrap_or("?"),
                    );
                    for (k, from, to) in [("ab", a, b), ("ba", b, a)] {
                        let carried = l[k]["classes"]
                            .as_object()
                            .is_some_and(|m| m.values().any(|x| x["packets_in"].as_u64().unwrap_or(0) > 0));
                        if carried {
                            dirs.push((format!("{name} {from} → {to}"), from, &l[k]));
                        }
                    }
                }
            }
            None => {
                dirs.push(("left → right".into(), "left", &e["stats"]["up"]));
                dirs.push(("right → left".into(), "right", &e["stats"]["down"]));
            }
        }
        // The sending host's own interface-queue drops (device and qdisc; seed 003's
        // SendStall), where it reports them: a path's left host sends up, a network's the
        // direction's first node.
        let host_drops = |name: &str| -> Option<u64> {
            let x = e["hosts"].as_array()?.iter().find(|x| x["host"] == name)?;
            let qs = x["queues"].as_array().filter(|q| !q.is_empty())?;
            Some(
                qs.iter()
                    .map(|q| q["qdisc"]["drops"].as_u64().unwrap_or(0) + q["tx_dropped"].as_u64().unwrap_or(0))
                    .sum(),
            )
        };
        for (n, (dir, sender, d)) in dirs.iter().enumerate() {
            let classes = d["classes"].as_object();
            let sum = |f: &str| -> u64 { classes.map_or(0, |m| m.values().filter_map(|x| x[f].as_u64()).sum()) };
            let _ = writeln!(
                h,
                "<tr>{}{}{}{}{}{}{}{}{}{}</tr>",
                tdl(&format!(
                    "{} (repeat {})",
                    if params.is_empty() { "the cell".to_string() } else { params.clone() },
                    c.cell.repeat + 1
                )),
                tdl(dir),
                tdi(sum("packets_in")),
                tdi(sum("queue_drops")),
                tdi(sum("policed")),
                tdi(sum("policer_drops")),
                tdi(sum("remarks")),
                tdi(sum("random_losses")),
                td_opt(host_drops(sender)),
                tdl(if n == 0 { &hosts } else { "" })
            );
        }
    }
    h += "</table></div>\n";
    h + &cross_traffic(emu)
}

/// What each cell's cross traffic did on an emulated network: the rate it was set to and the
/// rate it carried while it ran (empty when no cell had any).
fn cross_traffic(emu: &[(&StoredCell, &Value)]) -> String {
    let rows: Vec<(&StoredCell, &Value)> =
        emu.iter().flat_map(|(c, e)| e["traffic"].as_array().into_iter().flatten().map(move |t| (*c, t))).collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut h = String::from(
        "<h3>Cross traffic</h3><div class=\"wide\"><table>\n<tr><th class=\"l\">cell</th><th class=\"l\">traffic</th>\
         <th class=\"l\">where</th><th>set</th><th>carried</th><th>ran</th></tr>\n",
    );
    for (c, t) in rows {
        let params = c.cell.params.iter().map(|(k, v)| crate::fmt::param(k, v)).collect::<Vec<_>>().join(", ");
        let _ = writeln!(
            h,
            "<tr>{}{}{}{}{}{}</tr>",
            tdl(&format!(
                "{} (repeat {})",
                if params.is_empty() { "the cell".to_string() } else { params },
                c.cell.repeat + 1
            )),
            tdl(t["name"].as_str().unwrap_or("?")),
            tdl(t["what"].as_str().unwrap_or("")),
            tdl(&t["set_bps"].as_f64().map_or("as fast as TCP goes".to_string(), mbps)),
            tdl(&mbps(t["carried_bps"].as_f64().unwrap_or(0.0))),
            tdl(&format!("{:.1} s", t["active_s"].as_f64().unwrap_or(0.0)))
        );
    }
    h + "</table></div>\n"
}

/// A verdict's value in its unit.
fn verdict_value(x: Option<f64>, unit: &str) -> String {
    match (x, unit) {
        (None, _) => "–".into(),
        (Some(x), "bit/s") => mbps(x),
        (Some(x), "s") => ms(x * 1e3),
        (Some(x), "bit") => bytes(x / 8.0),
        (Some(x), _) => sig(x),
    }
}

/// The study's stated expectations (`[[expect]]`) as evaluated after the run: each with the
/// cells it was evaluated on, the measured value, the bound and the margin. Shown near the top
/// (as a warning when one failed); empty when the study states none.
pub fn expectations(v: &View) -> String {
    let vs = &v.data.verdicts;
    if vs.is_empty() {
        return String::new();
    }
    let failed = vs.iter().filter(|x| !x.pass).count();
    let mut h = format!(
        "<section id=\"expectations\"{}><h2>Stated expectations: {} of {} held</h2>\n\
         <p>What the study file says must hold on a correct path (<code>[[expect]]</code>), each evaluated on \
         the median of a cell's repeats.</p>\n<div class=\"wide\"><table>\n<tr><th>result</th><th>line</th>\
         <th class=\"l\">expectation</th><th class=\"l\">cells</th><th>measured</th><th>bound</th>\
         <th>margin</th></tr>\n",
        if failed > 0 { " class=\"warn\"" } else { "" },
        vs.len() - failed,
        vs.len()
    );
    for x in vs {
        let _ = writeln!(
            h,
            "<tr data-pass=\"{}\"><td>{}</td><td>{}</td><td class=\"l\">{}{}</td>{}<td>{}</td><td>{}</td><td>{}</td></tr>",
            x.pass,
            if x.pass { "pass" } else { "<b>FAIL</b>" },
            x.line,
            esc(&x.text),
            // Why it must hold, under it.
            if x.note.is_empty() { String::new() } else { format!("<br><small>{}</small>", esc(&x.note)) },
            tdl(if x.cells.is_empty() { "all" } else { &x.cells }),
            verdict_value(x.measured, &x.unit),
            verdict_value(x.bound, &x.unit),
            x.margin.map_or("–".into(), |m| format!("{} %", sig(m * 100.0))),
        );
    }
    h + "</table></div>\n</section>\n"
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

/// The study's name, spec and file.
pub fn study(v: &View) -> String {
    let r = &v.data.run;
    let mut h = String::from("<section id=\"study\"><h2>Study parameters</h2>\n");
    let mut constant: Vec<String> = v
        .groups
        .first()
        .map(|g| {
            g.params.iter().filter(|(k, _)| !v.varying.contains(k)).map(|(k, val)| crate::fmt::param(k, val)).collect()
        })
        .unwrap_or_default();
    // A study file's fixed options: (flag, value) pairs of its path and its measurement.
    let pairs = |x: &serde_json::Value| -> Vec<String> {
        x.as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| Some(format!("{} {}", p.get(0)?.as_str()?, p.get(1)?.as_str()?)))
            .collect()
    };
    constant.extend(pairs(&r.spec["target"]["path"]["link"]));
    constant.extend(pairs(&r.spec["measure"]));
    let _ = writeln!(
        h,
        "<p>Study <b>{}</b>, {} cells planned, {} measured. Swept: {}. Fixed: {}.</p>",
        esc(&r.study),
        r.cells_planned,
        r.cells_done,
        esc(&if v.varying.is_empty() { "nothing".into() } else { v.varying.join(", ") }),
        esc(&if constant.is_empty() { "–".into() } else { constant.join(", ") })
    );
    let _ = writeln!(h, "<h3>Specification</h3><pre>{}</pre>", esc(&pretty(&r.spec)));
    if !r.study_text.is_empty() {
        let _ = writeln!(h, "<details><summary>Study file</summary><pre>{}</pre></details>", esc(&r.study_text));
    }
    h + "</section>\n"
}

fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                flatten(&key, x, out);
            }
        }
        Value::Array(a) if a.iter().all(|x| !x.is_object() && !x.is_array()) => {
            out.push((prefix.into(), a.iter().map(scalar).collect::<Vec<_>>().join(", ")));
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                flatten(&format!("{prefix}[{i}]"), x, out);
            }
        }
        x => out.push((prefix.into(), scalar(x))),
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "–".into(),
        x => x.to_string(),
    }
}

/// Host captures (each distinct one once) and the emulator's counters per cell.
pub fn hosts(v: &View) -> String {
    let mut h = String::from("<section id=\"hosts\"><h2>Hosts and path</h2>\n");
    let mut seen: Vec<&Value> = Vec::new();
    for c in &v.data.cells {
        if let Some(x) = &c.cell.hosts {
            if !seen.contains(&x) {
                seen.push(x);
            }
        }
    }
    if seen.is_empty() {
        h += "<p class=\"note\">No host captures stored.</p>\n";
    }
    for (i, x) in seen.iter().enumerate() {
        let mut rows = Vec::new();
        flatten("", x, &mut rows);
        let _ = writeln!(
            h,
            "<h3>Host capture{}</h3><table>",
            if seen.len() > 1 { format!(" {}", i + 1) } else { String::new() }
        );
        for (k, val) in rows {
            let _ = writeln!(h, "<tr><th class=\"l\">{}</th>{}</tr>", esc(&k), tdl(&val));
        }
        h += "</table>\n";
    }
    let emu: Vec<_> = v.data.cells.iter().filter_map(|c| Some((c, c.cell.emulator.as_ref()?))).collect();
    if !emu.is_empty() {
        h += &element_counters(&emu);
        let _ = writeln!(h, "<details><summary>Emulated path counters ({} cells)</summary><pre>", emu.len());
        for (c, e) in emu {
            let params = c.cell.params.iter().map(|(k, v)| crate::fmt::param(k, v)).collect::<Vec<_>>().join(", ");
            let _ = writeln!(
                h,
                "cell {} repeat {} ({}): {}",
                c.cell.index,
                c.cell.repeat,
                esc(&params),
                esc(&serde_json::to_string(e).unwrap_or_default())
            );
        }
        h += "</pre></details>\n";
    }
    h + "</section>\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0.0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(967_335_557.0), "2000-08-27 00:19:17 UTC");
        assert_eq!(utc(1_709_251_199.0), "2024-02-29 23:59:59 UTC");
    }
}
