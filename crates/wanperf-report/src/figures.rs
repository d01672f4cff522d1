//! Which figures a run supports, their data (binned and thinned), and the finding each states.

use crate::fmt::{bytes, dms, mbps, ms, param, pct, sig, tick, window};
use crate::plot::{self, Axes, Mark, Series};
use crate::view::{facet_label, num, sum_rows, Group, Phase, View};
use wanperf_archive::StoredCell;
use wanperf_stats::analysis::{self, cdf_points, histogram, load_diff, rank_best, thin_indices, PhaseStats};
use wanperf_stats::{calc, events, fit, summary};

/// Most points a figure draws per series.
pub const MAX_POINTS: usize = 2000;

/// A drawn figure.
#[derive(Debug, Clone)]
pub struct Figure {
    /// Stable name (`data-figure`).
    pub name: String,
    /// Title.
    pub title: String,
    /// The SVG document.
    pub svg: String,
    /// What the data says, computed from it.
    pub finding: String,
}

/// A figure, or the one-line note that stands in for one the data does not support.
#[derive(Debug, Clone)]
pub(crate) enum Item {
    /// Drawn.
    Figure(Figure),
    /// Skipped: (name, why).
    Skipped(String, String),
}

/// Most figures of one kind (facets beyond this are left to the tables).
const MAX_FACETS: usize = 12;

fn push(out: &mut Vec<Item>, name: String, title: &str, drawn: plot::Res<String>, finding: String) {
    match drawn {
        Ok(svg) => out.push(Item::Figure(Figure { name, title: title.into(), svg, finding })),
        Err(e) => out.push(Item::Skipped(name, format!("{title}: not drawn ({e})."))),
    }
}

fn skip(out: &mut Vec<Item>, name: &str, why: impl Into<String>) {
    out.push(Item::Skipped(name.into(), why.into()));
}

fn numbered(base: &str, k: usize) -> String {
    if k == 0 {
        base.to_string()
    } else {
        format!("{base}-{}", k + 1)
    }
}

/// Every figure the run supports, in report order.
pub fn all(v: &View) -> Vec<Item> {
    let mut out = Vec::new();
    // A run of traces (or capacity measurements) alone has none of the measurements'
    // figures to miss.
    if v.groups
        .iter()
        .flat_map(|g| &g.cells)
        .all(|c| c.cell.summary["trace"].is_object() || c.cell.summary["capacity"].is_object())
    {
        traces(v, &mut out);
        return out;
    }
    throughput(v, &mut out);
    rtt_against_axis(v, &mut out);
    distributions(v, &mut out);
    rtt_vs_throughput(v, &mut out);
    time_series(v, &mut out);
    interval_scatter(v, &mut out);
    policer_envelope(v, &mut out);
    link_utilization(v, &mut out);
    tcp_state(v, &mut out);
    tcp_counters(v, &mut out);
    traces(v, &mut out);
    out
}

/// The senders' TCP state against the swept axis (seed 003's srtt and cwnd against
/// txqueuelen): the median congestion window over the streams' intervals, and the median
/// smoothed RTT, per cell.
fn tcp_state(v: &View, out: &mut Vec<Item>) {
    let cwnd = |g: &Group| {
        let mut c: Vec<f64> = g
            .cells
            .iter()
            .flat_map(|c| c.cell.intervals.iter())
            .filter(|r| r.stream >= 0)
            .filter_map(|r| Some(r.cwnd_bytes? as f64 / 1024.0))
            .collect();
        c.sort_by(f64::total_cmp);
        summary::quantile_sorted(&c, 0.5)
    };
    let gs: Vec<&Group> = v.groups.iter().filter(|g| g.srtt_ms.is_some() || cwnd(g).is_some()).collect();
    if gs.len() < 2 {
        return;
    }
    let Some(x) = sweep_axis(v, &gs) else { return };
    let (x_desc, f, log) = axis_of(x);
    let pts = |m: &dyn Fn(&Group) -> Option<f64>| -> Vec<(f64, f64)> {
        mean_points(gs.iter().filter_map(|g| Some((axis_value(g, x)? * f, m(g)?))).collect())
    };
    let (cw, rt) = (pts(&|g| cwnd(g)), pts(&|g| g.srtt_ms));
    if cw.is_empty() && rt.is_empty() {
        return;
    }
    let title = format!("TCP state against {x}");
    let mut top = Axes::new("congestion window", x_desc.clone(), "median cwnd (KiB)");
    let mut bottom = Axes::new("smoothed RTT", x_desc, "median srtt (ms)");
    for a in [&mut top, &mut bottom] {
        a.x_log = log;
        a.y_zero = true;
        if x == "window" {
            a.x_ticks = Some(gs.iter().filter_map(|g| g.window).map(|w| w as f64 / 1024.0).collect());
        }
    }
    let say = |name: &str, p: &[(f64, f64)], unit: &str| match (p.first(), p.last()) {
        (Some(a), Some(b)) if p.len() > 1 => {
            format!(
                "Median {name} goes from {} {unit} at the smallest {x} to {} {unit} at the largest.",
                sig(a.1),
                sig(b.1)
            )
        }
        _ => String::new(),
    };
    let finding = format!("{} {}", say("cwnd", &cw, "KiB"), say("smoothed RTT", &rt, "ms")).trim().to_string();
    let drawn = plot::two_panel(
        &title,
        (&top, &[Series::new("cwnd (median of the streams' intervals)", cw.clone(), Mark::LinePoints, 0)]),
        (&bottom, &[Series::new("srtt (median)", rt.clone(), Mark::LinePoints, 1)]),
    );
    push(out, "tcp-state".into(), &title, drawn, finding);
}

/// Most cells that get a token-bucket figure each.
const MAX_ENVELOPES: usize = 4;

/// Seed 002's token bucket, per cell whose emulated path had a policer left → right: the
/// bytes the measurement delivered, cumulated over its intervals, against what the bucket can
/// pass, burst + rate × t. A policed flow stays under the line; a flow above it was not policed
/// (its packets did not match the policer's selector, or the policer was off).
fn policer_envelope(v: &View, out: &mut Vec<Item>) {
    let mut k = 0;
    for g in &v.groups {
        let Some(c) = g.cells.iter().find(|c| !c.cell.intervals.is_empty()) else { continue };
        let p = c.cell.emulator.as_ref().map(|e| &e["config"]["up"]["policer"]);
        let (Some(rate), Some(burst)) =
            (p.and_then(|p| num(p.get("rate_bps"))), p.and_then(|p| num(p.get("burst_bytes"))))
        else {
            continue;
        };
        if k == MAX_ENVELOPES {
            break;
        }
        let mut total = 0.0;
        let mut got = vec![(0.0, 0.0)];
        for r in sum_rows(c) {
            total += r.bytes as f64;
            got.push((r.end_s, total / 1e6));
        }
        let end = got.last().map_or(0.0, |x| x.0);
        let bound = |t: f64| (burst + rate / 8.0 * t) / 1e6;
        let envelope = vec![(0.0, bound(0.0)), (end, bound(end))];
        // The largest excess over the envelope (negative: the closest it came, below).
        let (at, over) =
            got.iter().map(|&(t, mb)| (t, mb - bound(t))).fold(
                (0.0, f64::NEG_INFINITY),
                |a, b| {
                    if b.1 > a.1 {
                        b
                    } else {
                        a
                    }
                },
            );
        let label = group_label(v, g);
        let finding = if over <= 0.0 {
            format!(
                "{label}: the delivered bytes stay within the token bucket ({} MB burst + {} Mbit/s × t), \
                 at most {} MB under it: policed.",
                sig(burst / 1e6),
                sig(rate / 1e6),
                sig(-over)
            )
        } else {
            format!(
                "{label}: {} MB above the token bucket ({} MB burst + {} Mbit/s × t) at {} s: the measurement \
                 was not policed by it.",
                sig(over),
                sig(burst / 1e6),
                sig(rate / 1e6),
                sig(at)
            )
        };
        let title = format!("Delivered bytes against the token bucket, {label}");
        let mut axes = Axes::new(title.clone(), "time since start (s)", "delivered (MB)");
        axes.y_zero = true;
        let series = [
            Series::new("delivered", bucket_means(&got, MAX_POINTS), Mark::LinePoints, 0),
            Series::new("burst + rate × t", envelope, Mark::Dashed, 1),
        ];
        push(out, numbered("token-bucket", k), &title, plot::xy(&axes, &series), finding);
        k += 1;
    }
}

/// On a network, each cell's route link by link: the bits each link carried in each second in
/// the measured direction (MRTG's view of the links during the test, cross traffic included),
/// and which link was the busiest.
fn link_utilization(v: &View, out: &mut Vec<Item>) {
    let mut k = 0;
    for g in &v.groups {
        let Some(e) = g.cells.iter().filter_map(|c| c.cell.emulator.as_ref()).find(|e| e["route"].is_array()) else {
            continue;
        };
        if k == MAX_FACETS {
            break;
        }
        let mut series = Vec::new();
        let mut busiest: Option<(String, f64)> = None;
        for h in wanperf_archive::route_links(e) {
            let pts: Vec<(f64, f64)> = h.dir["per_second_bytes"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .filter_map(|(s, b)| Some((s as f64 + 1.0, b.as_f64()? * 8.0 / 1e6)))
                .collect();
            let peak = pts.iter().map(|p| p.1).fold(0.0, f64::max);
            if busiest.as_ref().is_none_or(|b| peak > b.1) {
                busiest = Some((h.hop.to_string(), peak));
            }
            let i = series.len();
            series.push(Series::new(h.hop, bucket_means(&pts, MAX_POINTS), Mark::Line, i));
        }
        let Some((hop, peak)) = busiest else { continue };
        let label = group_label(v, g);
        let title = format!("Link utilization along the route, {label}");
        let finding =
            format!("{label}: the route's busiest link was {hop}, {} Mbit/s in its busiest second.", sig(peak));
        let mut axes = Axes::new(title.clone(), "seconds since the network came up", "carried (Mbit/s)");
        axes.y_zero = true;
        push(out, numbered("link-utilization", k), &title, plot::xy(&axes, &series), finding);
        k += 1;
    }
}

/// The first answering address of a stored trace hop (`addrs` is `[[address, count], …]`).
pub(crate) fn hop_addr(h: &serde_json::Value) -> Option<&str> {
    h["addrs"].get(0)?.get(0)?.as_str()
}

/// Per-hop RTT ladders with loss, one per stored trace (`wanperf trace --save`): the RTT's
/// minimum, median and 90th percentile at each TTL above, each hop's loss and the path's
/// below, and a finding that names the biggest RTT step, where loss starts and which hops only
/// limit their ICMP replies.
fn traces(v: &View, out: &mut Vec<Item>) {
    let cells: Vec<(&Group, &StoredCell)> = v
        .groups
        .iter()
        .flat_map(|g| g.cells.iter().map(move |c| (g, *c)))
        .filter(|(_, c)| c.cell.summary["trace"].is_object())
        .collect();
    for (k, (g, c)) in cells.into_iter().take(MAX_FACETS).enumerate() {
        let s = &c.cell.summary;
        let hops = s["trace"]["hops"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        let at = |h: &serde_json::Value, q: &str| Some((h["ttl"].as_f64()?, h["rtt_ms"][q].as_f64()?));
        let rtt = |q: &str| -> Vec<(f64, f64)> { hops.iter().filter_map(|h| at(h, q)).collect() };
        let loss = |key: &str| -> Vec<(f64, f64)> {
            hops.iter().filter_map(|h| Some((h["ttl"].as_f64()?, h[key].as_f64()?))).collect()
        };
        let top = vec![
            Series::new("minimum", rtt("min"), Mark::LinePoints, 0),
            Series::new("median", rtt("median"), Mark::LinePoints, 1),
            Series::new("90th percentile", rtt("p90"), Mark::Dashed, 2),
        ];
        let bottom = vec![
            Series::new("unanswered at the hop", loss("loss_pct"), Mark::Points, 3),
            Series::new("path loss up to the hop", loss("path_loss_pct"), Mark::LinePoints, 1),
        ];
        let host = s["host"].as_str().unwrap_or("?");
        let label = group_label(v, g);
        let title = if label == "the cell" {
            format!("Per-hop RTT and loss, trace to {host}")
        } else {
            format!("Per-hop RTT and loss, trace to {host} ({label})")
        };
        // A tick at every hop (TTLs are whole numbers) while they fit.
        let ttls: Vec<f64> = hops.iter().filter_map(|h| h["ttl"].as_f64()).collect();
        let ticks = (ttls.len() <= 32).then_some(ttls);
        let mut ax = Axes::new("round-trip time to each hop", "hop (TTL)", "RTT (ms)");
        ax.y_zero = true;
        ax.x_ticks = ticks.clone();
        let mut lx = Axes::new("loss", "hop (TTL)", "loss (%)");
        lx.y_zero = true;
        lx.x_ticks = ticks;
        let drawn = if top[0].points.is_empty() {
            Err("no hop answered".into())
        } else {
            plot::two_panel(&title, (&ax, &top), (&lx, &bottom))
        };
        push(out, numbered("trace", k), &title, drawn, trace_finding(s, hops));
    }
}

fn trace_finding(s: &serde_json::Value, hops: &[serde_json::Value]) -> String {
    let answered: Vec<(u64, f64)> =
        hops.iter().filter_map(|h| Some((h["ttl"].as_u64()?, h["rtt_ms"]["min"].as_f64()?))).collect();
    let mut f = format!(
        "{} hops, {} answering{}.",
        hops.len(),
        answered.len(),
        if s["trace"]["reached"].as_bool() == Some(true) {
            ", the destination among them"
        } else {
            "; the destination did not answer"
        }
    );
    // The largest rise of the minimum RTT from one answering hop to the next.
    if let Some(((t0, a), (t1, b))) =
        answered.windows(2).map(|w| (w[0], w[1])).max_by(|x, y| (x.1 .1 - x.0 .1).total_cmp(&(y.1 .1 - y.0 .1)))
    {
        f +=
            &format!(" The minimum RTT rises most from hop {t0} to hop {t1}: {} to {} (+{}).", ms(a), ms(b), ms(b - a));
    }
    let limited: Vec<String> = hops
        .iter()
        .filter(|h| h["icmp_only_loss_pct"].as_f64().unwrap_or(0.0) > 0.0)
        .filter_map(|h| Some(format!("{} ({})", h["ttl"].as_u64()?, pct(h["icmp_only_loss_pct"].as_f64()?))))
        .collect();
    if !limited.is_empty() {
        f += &format!(" Hops that only limit their ICMP replies (not path loss): {}.", limited.join(", "));
    }
    match hops.iter().find(|h| h["path_loss_pct"].as_f64().unwrap_or(0.0) > 0.0) {
        Some(h) => {
            let way = match h["loss_direction"].as_str() {
                Some("forward") => " (the probes: on the way there)",
                Some("reverse") => " (the answers: on the way back)",
                _ => "",
            };
            f += &format!(
                " Path loss starts at hop {}{}: {} up to it{way}.",
                h["ttl"].as_u64().unwrap_or(0),
                hop_addr(h).map_or(String::new(), |a| format!(" ({a})")),
                pct(h["path_loss_pct"].as_f64().unwrap_or(0.0))
            );
        }
        None => f += " No loss on the path.",
    }
    let w = &s["trace"]["one_way"];
    if let (Some(fwd), Some(rev)) = (w["forward_loss_pct"].as_f64(), w["reverse_loss_pct"].as_f64()) {
        f += &format!(
            " The server at the destination counted the probes: {} lost on the way there, {} of its answers on the way back.",
            pct(fwd),
            pct(rev)
        );
    }
    if let Some(m) = s["trace"]["path_mtu"].as_u64() {
        f += &format!(" Path MTU {m} B.");
    }
    let changes = s["trace"]["route_changes"].as_array().map_or(0, Vec::len);
    if changes > 0 {
        f += &format!(" {changes} route change(s) between rounds.");
    }
    f
}

/// A label for a group from the params that vary (or "the cell" when none do).
pub fn group_label(v: &View, g: &Group) -> String {
    let l = facet_label(g.params, &v.varying, &[]);
    if l.is_empty() {
        "the cell".into()
    } else {
        l
    }
}

/// How a swept param is drawn on an axis: label with unit, factor from stored units, log.
fn axis_of(key: &str) -> (String, f64, bool) {
    match key {
        "window" => ("window per stream (KiB, log scale)".into(), 1.0 / 1024.0, true),
        "streams" => ("parallel streams (count)".into(), 1.0, false),
        "rate" => ("path rate (Mbit/s, log scale)".into(), 1e-6, true),
        "rtt" => ("path RTT (ms)".into(), 1000.0, false),
        "loss" => ("path loss (%)".into(), 100.0, false),
        "queue" => ("queue (KiB)".into(), 1.0 / 1024.0, false),
        "txqueuelen" => ("host interface queue, txqueuelen (packets, log scale)".into(), 1.0, true),
        "duration" => ("duration (s)".into(), 1.0, false),
        "bitrate" => ("target bitrate (Mbit/s)".into(), 1e-6, false),
        k => (format!("{k} (study units)"), 1.0, false),
    }
}

fn axis_value(g: &Group, key: &str) -> Option<f64> {
    match key {
        "window" => g.window.map(|w| w as f64),
        "streams" => g.streams.map(f64::from),
        k => num(g.params.get(k)),
    }
}

/// The x axis for "against the swept parameter": window, else streams, else another number.
fn sweep_axis<'v>(v: &'v View, groups: &[&Group]) -> Option<&'v str> {
    let mut keys: Vec<&str> = v.varying.iter().map(String::as_str).collect();
    keys.sort_by_key(|k| *k != "window");
    keys.into_iter().find(|k| {
        let mut xs: Vec<f64> = groups.iter().filter_map(|g| axis_value(g, k)).collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        xs.len() > 1
    })
}

/// Groups split by the varying params other than `x`, in order of first appearance.
fn facets<'g, 'a>(v: &View, groups: &[&'g Group<'a>], except: &[&str]) -> Vec<(String, Vec<&'g Group<'a>>)> {
    let mut out: Vec<(String, Vec<&Group>)> = Vec::new();
    for g in groups {
        let l = facet_label(g.params, &v.varying, except);
        match out.iter_mut().find(|(k, _)| *k == l) {
            Some((_, gs)) => gs.push(g),
            None => out.push((l, vec![g])),
        }
    }
    out
}

fn mean_points(mut pts: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<(f64, f64, usize)> = Vec::new();
    for (x, y) in pts {
        match out.last_mut() {
            Some(l) if l.0 == x => {
                l.1 += y;
                l.2 += 1;
            }
            _ => out.push((x, y, 1)),
        }
    }
    out.into_iter().map(|(x, s, n)| (x, s / n as f64)).collect()
}

fn bdp_note(v: &View, groups: &[&Group]) -> String {
    let (Some((rate, _)), Some((rtt, _))) = (v.rate, v.base_rtt) else {
        return String::new();
    };
    let bdp = calc::bdp_bytes(rate, rtt / 1000.0);
    let limited = groups
        .iter()
        .filter(|g| {
            let a = analysis::window_advice(rate, rtt / 1000.0, g.streams.unwrap_or(1), g.window.map(|w| w as f64));
            a.window_limited == Some(true)
        })
        .count();
    format!(
        " The bandwidth-delay product is {} × {} = {}; {limited} of {} cells have streams × window below it \
         (window-limited).",
        mbps(rate),
        ms(rtt),
        bytes(bdp),
        groups.len()
    )
}

fn best_finding(v: &View, groups: &[&Group]) -> String {
    let tputs: Vec<f64> = groups.iter().map(|g| g.tput_bps.unwrap_or(f64::NAN)).collect();
    let Some(r) = rank_best(&tputs) else {
        return "No cell moved data.".into();
    };
    let best = groups[r.best];
    let mut others: Vec<f64> =
        r.shortfall_pct.iter().enumerate().filter(|(i, s)| *i != r.best && s.is_finite()).map(|(_, s)| *s).collect();
    others.sort_by(f64::total_cmp);
    let mut s = format!("Best: {} at {}.", group_label(v, best), mbps(r.best_value));
    if let (Some(lo), Some(hi)) = (others.first(), others.last()) {
        let med = summary::quantile_sorted(&others, 0.5).unwrap_or(*lo);
        s += &format!(
            " The other {} cells fall short of it by {} to {} (median {}).",
            others.len(),
            pct(*lo),
            pct(*hi),
            pct(med)
        );
    }
    s + &bdp_note(v, groups)
}

fn throughput(v: &View, out: &mut Vec<Item>) {
    let gs: Vec<&Group> = v.groups.iter().filter(|g| g.tput_bps.is_some()).collect();
    if gs.is_empty() {
        return skip(out, "throughput", "No throughput figure: no cell measured throughput.");
    }
    let sweeps = |k: &str| {
        let mut xs: Vec<String> = gs.iter().map(|g| format!("{:?}", axis_value(g, k))).collect();
        xs.sort();
        xs.dedup();
        xs.len() > 1
    };
    if sweeps("streams") && sweeps("window") {
        for (k, (facet, fg)) in facets(v, &gs, &["streams", "window"]).into_iter().take(MAX_FACETS).enumerate() {
            let mut windows: Vec<Option<u64>> = fg.iter().map(|g| g.window).collect();
            windows.sort_by_key(|w| w.unwrap_or(u64::MAX));
            windows.dedup();
            let mut streams: Vec<Option<u32>> = fg.iter().map(|g| g.streams).collect();
            streams.sort();
            streams.dedup();
            let values: Vec<Vec<Option<f64>>> = streams
                .iter()
                .map(|s| {
                    windows
                        .iter()
                        .map(|w| fg.iter().find(|g| g.streams == *s && g.window == *w).and_then(|g| g.tput_bps))
                        .map(|t| t.map(|t| t / 1e6))
                        .collect()
                })
                .collect();
            let xl: Vec<String> = windows.iter().map(|w| window(*w)).collect();
            let yl: Vec<String> = streams.iter().map(|s| s.map_or("?".into(), |s| s.to_string())).collect();
            let title = if facet.is_empty() {
                "Throughput (Mbit/s) by streams × window".to_string()
            } else {
                format!("Throughput (Mbit/s) by streams × window, {facet}")
            };
            let axes = Axes::new(&title, "window per stream (KiB)", "parallel streams (count)");
            let drawn = plot::heatmap(&axes, &xl, &yl, &values, &sig);
            push(out, numbered("throughput-heatmap", k), &title, drawn, best_finding(v, &fg));
        }
        return;
    }
    let Some(x) = sweep_axis(v, &gs) else {
        let t = gs[0].tput_bps.unwrap_or(0.0);
        return skip(
            out,
            "throughput",
            format!("No throughput figure: one cell ({}); a heatmap needs several streams and windows.", mbps(t)),
        );
    };
    let (x_desc, f, log) = axis_of(x);
    let series: Vec<Series> = facets(v, &gs, &[x])
        .into_iter()
        .take(8)
        .enumerate()
        .map(|(i, (facet, fg))| {
            let pts = fg.iter().filter_map(|g| Some((axis_value(g, x)? * f, g.tput_bps? / 1e6))).collect();
            Series::new(if facet.is_empty() { "goodput".into() } else { facet }, mean_points(pts), Mark::LinePoints, i)
        })
        .collect();
    let title = format!("Throughput against {x}");
    let mut axes = Axes::new(&title, x_desc, "goodput (Mbit/s)");
    axes.x_log = log;
    axes.y_zero = true;
    if x == "window" {
        axes.x_ticks = Some(gs.iter().filter_map(|g| g.window).map(|w| w as f64 / 1024.0).collect());
    }
    let drawn = plot::xy(&axes, &series);
    push(out, "throughput".into(), &title, drawn, best_finding(v, &gs));
}

fn rtt_against_axis(v: &View, out: &mut Vec<Item>) {
    let gs: Vec<&Group> = v.load_groups().collect();
    if gs.is_empty() {
        return skip(out, "rtt-window", "No RTT-against-window figure: the run has no loaded and idle probe phases.");
    }
    let Some(x) = sweep_axis(v, &gs) else {
        return skip(
            out,
            "rtt-window",
            "No RTT-against-window figure: one load cell (its loaded and unloaded RTT are in the table).",
        );
    };
    let (x_desc, f, log) = axis_of(x);
    for (k, (facet, fg)) in facets(v, &gs, &[x]).into_iter().take(MAX_FACETS).enumerate() {
        let mut fg: Vec<&Group> = fg.into_iter().filter(|g| axis_value(g, x).is_some()).collect();
        fg.sort_by(|a, b| axis_value(a, x).partial_cmp(&axis_value(b, x)).unwrap_or(std::cmp::Ordering::Equal));
        let pts = |phase: PhaseOf, stat: fn(&analysis::RttStats) -> Option<f64>| {
            mean_points(
                fg.iter()
                    .filter_map(|g| Some((axis_value(g, x)? * f, stat(&phase(g)?.stats.rtt?)?)))
                    .collect::<Vec<_>>(),
            )
        };
        let (loaded, unloaded): (PhaseOf, PhaseOf) = (ph_loaded, ph_unloaded);
        let med = pts(loaded, |r| Some(r.median));
        let series = vec![
            Series::new("loaded median", med.clone(), Mark::LinePoints, 0),
            Series::new("loaded average", pts(loaded, |r| Some(r.avg)), Mark::LinePoints, 3),
            Series::new("loaded 90th percentile", pts(loaded, |r| r.p90), Mark::LinePoints, 1),
            Series::new("loaded IQR", pts(loaded, |r| Some(r.iqr)), Mark::LinePoints, 4),
            Series::new("unloaded median", pts(unloaded, |r| Some(r.median)), Mark::Dashed, 7),
        ];
        let title = if facet.is_empty() {
            format!("Loaded RTT against {x}")
        } else {
            format!("Loaded RTT against {x}, {facet}")
        };
        let mut axes = Axes::new(&title, x_desc.clone(), "RTT and IQR (ms)");
        axes.x_log = log;
        axes.y_zero = true;
        if x == "window" {
            axes.x_ticks = Some(fg.iter().filter_map(|g| g.window).map(|w| w as f64 / 1024.0).collect());
        }
        let xl = |g: &Group| match x {
            "window" => window(g.window),
            k => g.params.get(k).map_or_else(|| format!("{k} ?"), |val| param(k, val)),
        };
        let mut finding = String::new();
        if let (Some(a), Some(b)) = (fg.first(), fg.last()) {
            let m = |g: &Group| g.loaded.as_ref().and_then(|p| p.stats.rtt).map_or(f64::NAN, |r| r.median);
            let um: Vec<f64> = fg.iter().filter_map(|g| g.unloaded.as_ref()?.stats.rtt.map(|r| r.median)).collect();
            finding = format!(
                "Loaded median RTT goes from {} at {} to {} at {} (unloaded median {}).",
                ms(m(a)),
                xl(a),
                ms(m(b)),
                xl(b),
                ms(summary::mean(&um).unwrap_or(f64::NAN))
            );
            if let Some((i, d)) =
                fg.windows(2).map(|w| m(w[1]) - m(w[0])).enumerate().max_by(|a, b| a.1.total_cmp(&b.1))
            {
                if d >= 1.0 && fg.len() > 2 {
                    finding +=
                        &format!(" The steepest rise is between {} and {}: {}.", xl(fg[i]), xl(fg[i + 1]), dms(d));
                }
            }
            if let (Some(ta), Some(tb)) = (a.tput_bps, b.tput_bps) {
                finding += &format!(" Throughput meanwhile goes from {} to {}.", mbps(ta), mbps(tb));
            }
        }
        push(out, numbered(&format!("rtt-{x}"), k), &title, plot::xy(&axes, &series), finding);
    }
}

/// All answered probes of a phase over the groups, sorted.
/// Picks one phase of a group.
type PhaseOf = for<'x, 'y> fn(&'x Group<'y>) -> Option<&'x Phase>;

fn ph_loaded<'x>(g: &'x Group) -> Option<&'x Phase> {
    g.loaded.as_ref()
}

fn ph_unloaded<'x>(g: &'x Group) -> Option<&'x Phase> {
    g.unloaded.as_ref()
}

fn ph_plain<'x>(g: &'x Group) -> Option<&'x Phase> {
    g.plain.as_ref()
}

fn pooled(groups: &[&Group], phase: PhaseOf) -> Option<(Vec<f64>, u64)> {
    let ps: Vec<&Phase> = groups.iter().filter_map(|g| phase(g)).filter(|p| p.stats.sent > 0).collect();
    if ps.is_empty() || ps.iter().all(|p| p.sorted.is_empty() && p.stats.received > 0) {
        return None;
    }
    let mut all: Vec<f64> = ps.iter().flat_map(|p| p.sorted.iter().copied()).collect();
    all.sort_by(f64::total_cmp);
    Some((all, ps.iter().map(|p| p.stats.sent).sum()))
}

fn mss_of(v: &View) -> f64 {
    v.groups.iter().find_map(|g| g.mss).unwrap_or(1448.0)
}

fn distributions(v: &View, out: &mut Vec<Item>) {
    let all: Vec<&Group> = v.groups.iter().collect();
    let mut samples: Vec<(String, Vec<f64>, u64)> = Vec::new();
    let phases: [(&str, PhaseOf); 3] = [("loaded", ph_loaded), ("unloaded", ph_unloaded), ("probes", ph_plain)];
    for (label, phase) in phases {
        if let Some((s, sent)) = pooled(&all, phase) {
            samples.push((label.into(), s, sent));
        }
    }
    if samples.iter().all(|s| s.1.is_empty()) {
        let why = if v.groups.iter().any(|g| g.loaded.is_some() || g.plain.is_some()) {
            "the run stored probe summaries but no probes."
        } else {
            "the run has no probes (throughput only)."
        };
        skip(out, "rtt-histogram", format!("No RTT histogram: {why}"));
        return skip(out, "rtt-cdf", format!("No RTT CDF: {why}"));
    }
    let stats: Vec<PhaseStats> = samples.iter().map(|(_, s, sent)| PhaseStats::of(s, *sent)).collect();
    let pooled_note = if v.groups.len() > 1 { " (all cells pooled)" } else { "" };

    // The finding shared by both figures: loaded against unloaded, or the plain probes.
    let diff_text = match (samples.iter().position(|s| s.0 == "loaded"), samples.iter().position(|s| s.0 == "unloaded"))
    {
        (Some(l), Some(u)) => match load_diff(&stats[l], &stats[u]) {
            Some(d) => {
                let (lr, ur) = (stats[l].rtt.unwrap(), stats[u].rtt.unwrap());
                let mut s = format!(
                    "Loaded median RTT {} against {} unloaded{pooled_note}: {}",
                    ms(lr.median),
                    ms(ur.median),
                    dms(d.median_ms)
                );
                if let Some((rate, _)) = v.rate {
                    let q = d.queued_bytes(rate);
                    s += &format!(
                        " ≈ {} queued at {} (≈ {} packets of {} B)",
                        bytes(q),
                        mbps(rate),
                        sig(calc::packets(q, mss_of(v))),
                        mss_of(v)
                    );
                }
                s + &format!(
                    ". IQR {} against {}; loss {} against {}.",
                    ms(lr.iqr),
                    ms(ur.iqr),
                    pct(stats[l].loss_pct),
                    pct(stats[u].loss_pct)
                )
            }
            None => "One of the phases has no answered probe.".into(),
        },
        _ => match stats.iter().zip(&samples).find_map(|(st, s)| Some((st.rtt?, st, &s.0))) {
            Some((r, st, label)) => format!(
                "{label}: median RTT {}, IQR {}, min {}, max {}, loss {}{pooled_note}.",
                ms(r.median),
                ms(r.iqr),
                ms(r.min),
                ms(r.max),
                pct(st.loss_pct)
            ),
            None => "No probe was answered.".into(),
        },
    };

    // Histogram over the common range; a far tail (beyond twice the span to the highest 99.5th
    // percentile) is cut at that percentile, and the finding says how many probes it left out.
    let lo = samples.iter().filter_map(|s| s.1.first().copied()).fold(f64::INFINITY, f64::min);
    let max = samples.iter().filter_map(|s| s.1.last().copied()).fold(f64::NEG_INFINITY, f64::max);
    let p995 = samples.iter().filter_map(|s| summary::quantile_sorted(&s.1, 0.995)).fold(f64::NEG_INFINITY, f64::max);
    let hi = if max - lo > 2.0 * (p995 - lo) { p995 } else { max }.max(lo + 1e-3);
    let cut: usize = samples.iter().map(|s| s.1.len() - s.1.partition_point(|x| *x <= hi)).sum();
    let bins: Vec<(String, Vec<f64>)> = samples
        .iter()
        .filter(|s| !s.1.is_empty())
        .map(|(l, s, _)| {
            let n = s.len() as f64;
            (l.clone(), histogram(s, lo, hi, 60).into_iter().map(|c| 100.0 * c as f64 / n).collect())
        })
        .collect();
    let title = "RTT distribution, loaded and unloaded";
    let axes = Axes::new(title, "RTT (ms)", "share of the phase's probes (%)");
    let mut finding = diff_text.clone();
    if cut > 0 {
        finding += &format!(" {cut} probes above {} (the 99.5th percentile) are off the chart.", ms(hi));
    }
    push(out, "rtt-histogram".into(), title, plot::histogram(&axes, lo, hi, &bins), finding);

    // CDFs, thinned; plus the loaded CDFs of the cells with the most and least added delay.
    let mut series: Vec<Series> = samples
        .iter()
        .enumerate()
        .map(|(i, (l, s, _))| {
            Series::new(
                format!("{l}{pooled_note}"),
                cdf_points(s, MAX_POINTS).into_iter().map(|(x, f)| (x, 100.0 * f)).collect(),
                Mark::Line,
                i,
            )
        })
        .collect();
    let mut added: Vec<(&Group, f64)> = v
        .load_groups()
        .filter_map(|g| Some((g, load_diff(&g.loaded.as_ref()?.stats, &g.unloaded.as_ref()?.stats)?.median_ms)))
        .filter(|(g, _)| !g.loaded.as_ref().is_some_and(|p| p.sorted.is_empty()))
        .collect();
    added.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut cdf_finding = samples
        .iter()
        .zip(&stats)
        .filter_map(|(s, st)| Some(format!("90 % of {} probes came back within {}", s.0, ms(st.rtt?.p90?))))
        .collect::<Vec<_>>()
        .join("; ");
    cdf_finding += ".";
    if added.len() > 1 {
        for (k, (g, d)) in [added[added.len() - 1], added[0]].into_iter().enumerate() {
            let p = g.loaded.as_ref().unwrap();
            let pts = cdf_points(&p.sorted, MAX_POINTS).into_iter().map(|(x, f)| (x, 100.0 * f)).collect();
            series.push(Series::new(format!("loaded, {}", group_label(v, g)), pts, Mark::Dashed, 3 + k));
            let which = if k == 0 { "most" } else { "least" };
            cdf_finding += &format!(" The cell with the {which} added delay, {}, adds {}", group_label(v, g), dms(d));
            if let Some(rate) = v.rate_for(g).filter(|_| d > 0.0) {
                let q = wanperf_stats::calc::queue_bytes(d / 1000.0, rate);
                cdf_finding += &format!(" ≈ {} queued at {}", bytes(q), mbps(rate));
            }
            cdf_finding += ".";
        }
    }
    let title = "Cumulative RTT distribution";
    let mut axes = Axes::new(title, "RTT (ms)", "probes at or below (%)");
    axes.y_zero = true;
    push(out, "rtt-cdf".into(), title, plot::xy(&axes, &series), format!("{diff_text} {cdf_finding}"));
}

fn rtt_vs_throughput(v: &View, out: &mut Vec<Item>) {
    let gs: Vec<&Group> = v.load_groups().filter(|g| g.tput_bps.is_some()).collect();
    if gs.len() < 2 {
        return skip(out, "rtt-throughput", "No RTT-against-throughput figure: it needs two or more load cells.");
    }
    let stat = |g: &Group, loaded: bool, f: fn(&analysis::RttStats) -> f64| {
        let p = if loaded { g.loaded.as_ref() } else { g.unloaded.as_ref() };
        Some((g.tput_bps? / 1e6, f(&p?.stats.rtt?)))
    };
    let pts = |loaded, f| gs.iter().filter_map(|g| stat(g, loaded, f)).collect::<Vec<_>>();
    let lavg = pts(true, |r| r.avg);
    let uavg = pts(false, |r| r.avg);
    let mut series = vec![
        Series::new("loaded average", lavg.clone(), Mark::Points, 0),
        Series::new("loaded maximum", pts(true, |r| r.max), Mark::Points, 1),
        Series::new("unloaded average", uavg.clone(), Mark::Points, 2),
        Series::new("unloaded maximum", pts(false, |r| r.max), Mark::Points, 3),
    ];
    let mut finding = String::new();
    for (name, cap, data, c) in [("loaded", "Loaded", &lavg, 0), ("unloaded", "Unloaded", &uavg, 2)] {
        let (x, y): (Vec<f64>, Vec<f64>) = data.iter().copied().unzip();
        let lin = fit::linear(&x, &y).ok();
        match fit::power(&x, &y) {
            Ok(p) => {
                let (x0, x1) = x.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(*v), b.max(*v)));
                let curve =
                    (0..=50).map(|i| x0 + (x1 - x0) * f64::from(i) / 50.0).map(|x| (x, p.power_at(x))).collect();
                series.push(Series::new(format!("power fit, {name} avg (R² = {:.2})", p.r2), curve, Mark::Dashed, c));
                finding +=
                    &format!("{cap} average RTT ≈ {}·x^{} ms with x in Mbit/s (R² = {:.2}", sig(p.a), sig(p.b), p.r2);
                if let Some(l) = lin {
                    finding += &format!("; linear {} ms per Mbit/s, R² = {:.2}", sig(l.b), l.r2);
                }
                finding += "). ";
            }
            Err(e) => finding += &format!("No power fit to the {name} averages: {e}. "),
        }
    }
    let d: Vec<(f64, f64)> = gs
        .iter()
        .filter_map(|g| load_diff(&g.loaded.as_ref()?.stats, &g.unloaded.as_ref()?.stats))
        .map(|d| (d.avg_ms, d.min_ms))
        .collect();
    let (da, dm): (Vec<f64>, Vec<f64>) = d.into_iter().unzip();
    if let (Some(a), Some(m)) = (summary::mean(&da), summary::mean(&dm)) {
        finding += &format!(
            "Averaged over the cells, loaded average RTT is {} above unloaded, and the minima differ by {}.",
            dms(a),
            dms(m)
        );
    }
    let title = "RTT against throughput";
    let axes = Axes::new(title, "load goodput (Mbit/s)", "RTT (ms)");
    push(out, "rtt-throughput".into(), title, plot::xy(&axes, &series), finding.trim().to_string());
}

/// Means of consecutive buckets so that at most `max` points remain.
pub fn bucket_means(pts: &[(f64, f64)], max: usize) -> Vec<(f64, f64)> {
    if pts.len() <= max || max == 0 {
        return pts.to_vec();
    }
    let per = pts.len().div_ceil(max);
    pts.chunks(per)
        .map(|c| {
            let n = c.len() as f64;
            (c.iter().map(|p| p.0).sum::<f64>() / n, c.iter().map(|p| p.1).sum::<f64>() / n)
        })
        .collect()
}

fn time_series(v: &View, out: &mut Vec<Item>) {
    // The best cell, and the one with the most added delay when that is another.
    let with_data = |g: &&Group| g.cells.iter().any(|c| !c.cell.intervals.is_empty() || !c.cell.probes.is_empty());
    let mut picks: Vec<(&Group, &str)> = Vec::new();
    // The first of equals, as the ranking names it.
    let best = v.groups.iter().filter(with_data).fold(None, |b: Option<&Group>, g| match b {
        Some(b) if b.tput_bps.unwrap_or(-1.0) >= g.tput_bps.unwrap_or(-1.0) => Some(b),
        _ => Some(g),
    });
    if let Some(g) = best {
        picks.push((g, if g.tput_bps.is_some() && v.groups.len() > 1 { "the best cell" } else { "" }));
    }
    if let Some(g) = v
        .load_groups()
        .filter(with_data)
        .filter_map(|g| Some((g, load_diff(&g.loaded.as_ref()?.stats, &g.unloaded.as_ref()?.stats)?.median_ms)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|x| x.0)
    {
        if !picks.iter().any(|(p, _)| std::ptr::eq(*p, g)) {
            picks.push((g, "the cell with the most added delay"));
        }
    }
    // A small study gets every cell's series (seed 002 drew each reservation's), in the
    // study's order; a larger one the two above.
    let with: Vec<&Group> = v.groups.iter().filter(with_data).collect();
    if with.len() > 2 && with.len() <= MAX_SERIES_CELLS {
        picks = with.into_iter().map(|g| (g, "")).collect();
    }
    // The reader's choice (`report --series`) replaces the report's.
    if let Some(chosen) = &v.series {
        picks = chosen
            .iter()
            .filter_map(|i| v.groups.iter().filter(with_data).find(|g| g.cells.iter().any(|c| c.cell.index == *i)))
            .map(|g| (g, "chosen"))
            .collect();
        picks.dedup_by(|a, b| std::ptr::eq(a.0, b.0));
    }
    if picks.is_empty() {
        return skip(out, "timeseries", "No time series: the run stored neither intervals nor probes.");
    }
    for (k, (g, why)) in picks.into_iter().enumerate() {
        let cell = g.cells[0];
        let label = group_label(v, g);
        let title = if why.is_empty() {
            format!("Per-interval throughput and RTT, {label}")
        } else {
            format!("Per-interval throughput and RTT, {label} ({why})")
        };
        let (drawn, finding) = cell_series(cell, &title);
        push(out, numbered("timeseries", k), &title, drawn, finding);
    }
}

/// Most cells a study may have for every one to get its own time series.
const MAX_SERIES_CELLS: usize = 8;

/// Most cells drawn as series of their own in the scatter; the rest are pooled.
const MAX_SCATTER_SERIES: usize = 6;

/// Every interval of every TCP cell as a point, its goodput against its streams' mean smoothed
/// RTT (seed 002's thrulay scatter): a queue that fills shows as RTT rising with goodput, a
/// policer as goodput capped whatever the RTT. One series per cell (the first few), with a
/// linear fit over all points.
fn interval_scatter(v: &View, out: &mut Vec<Item>) {
    let mut per_cell: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for g in &v.groups {
        let mut pts = Vec::new();
        for c in &g.cells {
            // Per interval: the goodput of all streams against their mean srtt at its end.
            let srtt = srtt_points(c);
            pts.extend(
                sum_rows(c).filter_map(|r| Some((r.throughput_bps / 1e6, srtt.iter().find(|p| p.0 == r.end_s)?.1))),
            );
        }
        if !pts.is_empty() {
            per_cell.push((group_label(v, g), pts));
        }
    }
    let n: usize = per_cell.iter().map(|c| c.1.len()).sum();
    if n < 10 {
        return skip(out, "interval-scatter", "No per-interval scatter: fewer than ten TCP intervals with an RTT.");
    }
    let all: Vec<(f64, f64)> = per_cell.iter().flat_map(|c| c.1.iter().copied()).collect();
    let mut series = Vec::new();
    for (i, (label, pts)) in per_cell.iter().enumerate().take(MAX_SCATTER_SERIES) {
        let thin: Vec<(f64, f64)> = thin_indices(pts.len(), MAX_POINTS).into_iter().map(|k| pts[k]).collect();
        series.push(Series::new(label.clone(), thin, Mark::Points, i));
    }
    if per_cell.len() > MAX_SCATTER_SERIES {
        let rest: Vec<(f64, f64)> = per_cell[MAX_SCATTER_SERIES..].iter().flat_map(|c| c.1.iter().copied()).collect();
        let thin: Vec<(f64, f64)> = thin_indices(rest.len(), MAX_POINTS).into_iter().map(|k| rest[k]).collect();
        series.push(Series::new(format!("{} more cells", per_cell.len() - MAX_SCATTER_SERIES), thin, Mark::Points, 7));
    }
    let (x, y): (Vec<f64>, Vec<f64>) = all.iter().copied().unzip();
    let mut finding = format!("{n} intervals of {} cell(s).", per_cell.len());
    if let Ok(l) = fit::linear(&x, &y) {
        finding += &format!(" Linear fit: RTT ≈ {} + {}·x ms with x in Mbit/s (R² = {:.2}).", sig(l.a), sig(l.b), l.r2);
    }
    let title = "Per-interval goodput against smoothed RTT".to_string();
    let mut axes = Axes::new(&title, "goodput in the interval (Mbit/s)", "mean smoothed RTT of the streams (ms)");
    axes.y_zero = true;
    push(out, "interval-scatter".into(), &title, plot::xy(&axes, &series), finding);
}

/// A cell's smoothed RTT per interval end, ms: the mean over its streams (over the sum rows
/// where it has no per-stream rows).
fn srtt_points(cell: &StoredCell) -> Vec<(f64, f64)> {
    let per_stream = cell.cell.intervals.iter().any(|r| r.stream >= 0);
    mean_points(
        cell.cell
            .intervals
            .iter()
            .filter(|r| r.stream >= 0 || !per_stream)
            .filter_map(|r| Some((r.end_s, f64::from(r.srtt_us?) / 1000.0)))
            .collect(),
    )
}

/// Thrulay-style series of one cell: goodput per interval (sum and streams), the streams'
/// smoothed RTT, and the probes' RTT by phase.
fn cell_series(cell: &StoredCell, title: &str) -> (plot::Res<String>, String) {
    let rows: Vec<(f64, f64)> = sum_rows(cell).map(|r| (r.end_s, r.throughput_bps / 1e6)).collect();
    let mut top = Vec::new();
    if !rows.is_empty() {
        let mark = if rows.len() <= 60 { Mark::LinePoints } else { Mark::Line };
        top.push(Series::new("all streams", bucket_means(&rows, MAX_POINTS), mark, 0));
    }
    let mut ids: Vec<i32> = cell.cell.intervals.iter().map(|r| r.stream).filter(|s| *s >= 0).collect();
    ids.sort();
    ids.dedup();
    if ids.len() > 1 && ids.len() <= 16 {
        for (i, id) in ids.iter().enumerate() {
            let p: Vec<(f64, f64)> = cell
                .cell
                .intervals
                .iter()
                .filter(|r| r.stream == *id)
                .map(|r| (r.end_s, r.throughput_bps / 1e6))
                .collect();
            let label = if i == 0 { format!("each of {} streams", ids.len()) } else { String::new() };
            top.push(Series::new(label, bucket_means(&p, MAX_POINTS), Mark::Line, 7));
        }
    }
    let srtt = srtt_points(cell);
    let mut bottom = Vec::new();
    if !srtt.is_empty() {
        bottom.push(Series::new("TCP smoothed RTT (mean of streams)", bucket_means(&srtt, MAX_POINTS), Mark::Line, 0));
    }
    for (i, phase) in ["loaded", "unloaded", ""].into_iter().enumerate() {
        let p: Vec<(f64, f64)> =
            cell.cell.probes.iter().filter(|p| p.phase == phase).filter_map(|p| Some((p.sent_s, p.rtt_ms?))).collect();
        if !p.is_empty() {
            let thin: Vec<(f64, f64)> = thin_indices(p.len(), MAX_POINTS).into_iter().map(|i| p[i]).collect();
            let l = if phase.is_empty() { "probes".to_string() } else { format!("{phase} probes") };
            bottom.push(Series::new(l, thin, Mark::Points, 1 + i));
        }
    }
    let mut finding = String::new();
    if !rows.is_empty() {
        let t: Vec<f64> = rows.iter().map(|r| r.1).collect();
        let s = summary::Summary::of(&t);
        if let Some(s) = s {
            finding += &format!(
                "Goodput per interval: mean {} Mbit/s, from {} to {} (coefficient of variation {}).",
                sig(s.avg),
                sig(s.min),
                sig(s.max),
                pct(if s.avg > 0.0 { 100.0 * s.stdev / s.avg } else { 0.0 })
            );
        }
        let ev = events::plateau(&t, events::PlateauConfig::default());
        if let Some(e) = ev.first() {
            finding += &format!(
                " {} level change(s) (IEPM-BW plateau method); the first at {} s, from {} to {} Mbit/s.",
                ev.len(),
                sig(rows[e.start].0),
                sig(e.before),
                sig(e.after)
            );
        }
    }
    if !srtt.is_empty() {
        let mut r: Vec<f64> = srtt.iter().map(|p| p.1).collect();
        r.sort_by(f64::total_cmp);
        finding += &format!(
            " TCP smoothed RTT median {} (from {} to {}).",
            ms(summary::quantile_sorted(&r, 0.5).unwrap_or(f64::NAN)),
            ms(r[0]),
            ms(r[r.len() - 1])
        );
    }
    if !cell.cell.probes.is_empty() {
        finding += " Probe times count from the start of the measurement, interval times from the start of the load.";
    }
    let mut tx = Axes::new("goodput per interval", "time since start (s)", "goodput (Mbit/s)");
    tx.y_zero = true;
    let rx = Axes::new("round-trip time", "time since start (s)", "RTT (ms)");
    let drawn = match (top.is_empty(), bottom.is_empty()) {
        (false, false) => plot::two_panel(title, (&tx, &top), (&rx, &bottom)),
        (false, true) => plot::xy(&Axes { title: title.into(), ..tx }, &top),
        (true, false) => plot::xy(&Axes { title: title.into(), ..rx }, &bottom),
        (true, true) => Err("no intervals or probes".into()),
    };
    (drawn, finding.trim().to_string())
}

/// The sending end's host TCP counters of a cell (`client` unless the load flowed down).
fn sender_counters(c: &StoredCell) -> Option<&serde_json::Map<String, serde_json::Value>> {
    let tc = c.cell.summary.get("tcp_counters")?;
    let down = c.cell.params.get("direction").and_then(|d| d.as_str()) == Some("down");
    tc.get(if down { "server" } else { "client" }).and_then(|m| m.as_object())
}

fn tcp_counters(v: &View, out: &mut Vec<Item>) {
    let gs: Vec<&Group> =
        v.groups.iter().filter(|g| g.retransmits.is_some() || sender_counters(g.cells[0]).is_some()).collect();
    if gs.is_empty() {
        return skip(out, "tcp-counters", "No TCP counters figure: no cell recorded retransmits or host counters.");
    }
    let Some(x) = sweep_axis(v, &gs) else {
        let r = gs[0].retransmits.unwrap_or(0.0);
        return skip(
            out,
            "tcp-counters",
            format!("No TCP counters figure: one cell ({} retransmitted segments; see the tables).", tick(r)),
        );
    };
    let (x_desc, f, log) = axis_of(x);
    let mut series = Vec::new();
    let rt: Vec<(f64, f64)> = gs.iter().filter_map(|g| Some((axis_value(g, x)? * f, g.retransmits?))).collect();
    series.push(Series::new("retransmitted segments (per cell)", rt.clone(), Mark::Points, 1));
    series.push(Series::new("", mean_points(rt.clone()), Mark::Line, 1));
    // Host counters that moved, most first (mean over a group's repeats).
    const PREFERRED: [&str; 8] = [
        "Tcp.RetransSegs",
        "TcpExt.TCPLostRetransmit",
        "TcpExt.TCPTimeouts",
        "TcpExt.TCPLossProbes",
        "TcpExt.TCPSackRecovery",
        "TcpExt.TCPFastRetrans",
        "TcpExt.TCPSpuriousRTOs",
        "TcpExt.TCPSACKReorder",
    ];
    let counter = |g: &Group, name: &str| {
        let v: Vec<f64> = g.cells.iter().filter_map(|c| num(sender_counters(c)?.get(name))).collect();
        summary::mean(&v)
    };
    let mut shown = 0;
    for name in PREFERRED {
        let pts: Vec<(f64, f64)> = gs.iter().filter_map(|g| Some((axis_value(g, x)? * f, counter(g, name)?))).collect();
        if shown < 4 && pts.iter().any(|p| p.1 != 0.0) {
            let c = 2 + shown;
            series.push(Series::new(format!("{name} (sender host)"), pts.clone(), Mark::Points, c));
            series.push(Series::new("", mean_points(pts), Mark::Line, c));
            shown += 1;
        }
    }
    let title = format!("TCP counters against {x}");
    let mut axes = Axes::new(&title, x_desc, "count per cell (segments or events)");
    axes.x_log = log;
    axes.y_zero = true;
    if x == "window" {
        axes.x_ticks = Some(gs.iter().filter_map(|g| g.window).map(|w| w as f64 / 1024.0).collect());
    }
    let mut finding = String::new();
    let m = mean_points(rt);
    if let (Some(a), Some(b)) = (m.first(), m.last()) {
        finding = format!(
            "Retransmitted segments per cell go from {} at the smallest {x} to {} at the largest.",
            tick(a.1),
            tick(b.1)
        );
    }
    if let Some(g) = gs.iter().max_by(|a, b| a.retransmits.unwrap_or(0.0).total_cmp(&b.retransmits.unwrap_or(0.0))) {
        let r = g.retransmits.unwrap_or(0.0);
        if r > 0.0 {
            finding += &format!(" The most: {} with {} segments", group_label(v, g), tick(r));
            if let Some(sent) = g.sent_bytes.filter(|s| *s > 0.0) {
                finding += &format!(", a loss rate of {}", pct(100.0 * r * mss_of(v) / sent));
            }
            finding += ".";
        } else {
            finding += " No cell retransmitted.";
        }
    }
    push(out, "tcp-counters".into(), &title, plot::xy(&axes, &series), finding);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_finding_says_which_way_the_loss_goes_where_the_trace_knows() {
        let hop = |ttl: u64, loss: f64, dir: Option<&str>| {
            let mut h = serde_json::json!({"ttl": ttl, "addrs": [[format!("198.18.{ttl}.2"), 10]],
                "rtt_ms": {"min": ttl as f64}, "path_loss_pct": loss, "icmp_only_loss_pct": 0.0});
            if let Some(d) = dir {
                h["loss_direction"] = d.into();
            }
            h
        };
        let s = serde_json::json!({"trace": {"reached": true}});
        let f = trace_finding(&s, &[hop(1, 0.0, None), hop(2, 3.0, Some("reverse")), hop(3, 3.0, None)]);
        assert!(
            f.contains("Path loss starts at hop 2 (198.18.2.2): 3.00 % up to it (the answers: on the way back)."),
            "{f}"
        );
        let f = trace_finding(&s, &[hop(1, 0.0, None), hop(2, 3.0, None)]);
        assert!(f.contains("Path loss starts at hop 2 (198.18.2.2): 3.00 % up to it."), "{f}");
    }

    #[test]
    fn buckets_average() {
        let p: Vec<(f64, f64)> = (0..10).map(|i| (f64::from(i), f64::from(i * 2))).collect();
        assert_eq!(bucket_means(&p, 5), vec![(0.5, 1.0), (2.5, 5.0), (4.5, 9.0), (6.5, 13.0), (8.5, 17.0)]);
        assert_eq!(bucket_means(&p, 20).len(), 10);
        assert_eq!(mean_points(vec![(2.0, 4.0), (1.0, 1.0), (2.0, 6.0)]), vec![(1.0, 1.0), (2.0, 5.0)]);
    }
}
