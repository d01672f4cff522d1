//! The passive view of a site (`wanperf flows report`): who uses the links (seed 000's top
//! sources, destinations and pairs, the protocol mix in and out), how full they are (MRTG's
//! utilization in and out over time, saturated runs), and whether that load explains the RTT
//! and loss the archive measured over the same time (seed 004's question), with the finding
//! computed from the data.

use crate::figures::{Figure, Item};
use crate::fmt::{esc, mbps, ms, pct, sig};
use crate::plot::{self, Axes, Mark, Series};
use crate::tables::utc;
use plotters::style::RGBColor;
use std::fmt::Write as _;
use wanperf_flows::top::{MixRow, TopRow};
use wanperf_flows::util::{Saturation, UtilSeries};

/// One interface's utilization.
#[derive(Debug, Clone)]
pub struct Link {
    /// Device (host name, namespace, SNMP agent).
    pub device: String,
    /// Interface name.
    pub interface: String,
    /// Where the readings came from (`netlink`, `snmp`, `sflow`).
    pub source: String,
    /// The binned readings.
    pub series: UtilSeries,
    /// Saturated runs.
    pub saturated: Vec<Saturation>,
}

/// RTT probes of one measured path, in absolute time.
#[derive(Debug, Clone)]
pub struct Path {
    /// What was measured ("run 12: ping 198.18.0.1").
    pub label: String,
    /// (Unix seconds sent, RTT in ms or none when lost).
    pub probes: Vec<(f64, Option<f64>)>,
}

/// Everything the site report shows, already selected and ranked.
#[derive(Debug, Clone, Default)]
pub struct SiteData {
    /// Page title.
    pub title: String,
    /// The time range selected, Unix seconds (none: all).
    pub from_unix: Option<f64>,
    /// End of the range.
    pub to_unix: Option<f64>,
    /// The local networks (CIDR text) that define in and out.
    pub local: Vec<String>,
    /// Top sources by bytes.
    pub top_src: Vec<TopRow>,
    /// Top destinations by bytes.
    pub top_dst: Vec<TopRow>,
    /// Top communicating pairs by bytes.
    pub pairs: Vec<TopRow>,
    /// The application mix.
    pub mix: Vec<MixRow>,
    /// Interfaces.
    pub links: Vec<Link>,
    /// Measured paths.
    pub paths: Vec<Path>,
}

/// Utilization of a link laid against one path's RTT and loss, bin by bin.
#[derive(Debug, Clone, PartialEq)]
pub struct Against {
    /// Bins with utilization and at least one answered probe.
    pub bins: usize,
    /// The path's lowest RTT over the range, ms (the base queueing delay is measured from).
    pub base_ms: f64,
    /// Pearson correlation of the bins' queueing delay (median RTT − base) with utilization in.
    pub r_in: Option<f64>,
    /// With utilization out.
    pub r_out: Option<f64>,
    /// With the busier direction's utilization.
    pub r_busier: Option<f64>,
    /// Median queueing delay, ms, in the busiest quarter of the bins (by the busier direction).
    pub busy_delay_ms: f64,
    /// In the idlest quarter.
    pub idle_delay_ms: f64,
    /// Loss, percent, in the busiest quarter.
    pub busy_loss_pct: f64,
    /// Loss in the idlest quarter.
    pub idle_loss_pct: f64,
    /// Per bin: (bin start Unix ms, bit/s in, bit/s out, queueing delay ms, loss %).
    pub points: Vec<(u64, f64, f64, f64, f64)>,
}

fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
    let f = wanperf_stats::fit::linear(x, y).ok()?;
    let ys = wanperf_stats::summary::stdev(y)?;
    if f.n < 3 || ys == 0.0 || !f.r2.is_finite() {
        return None;
    }
    Some(f.r2.sqrt().copysign(f.b))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    wanperf_stats::summary::quantile_sorted(&v, 0.5).unwrap_or(f64::NAN)
}

/// The link's bins against the path's probes: the queueing delay and loss of the probes sent in
/// each bin, and how they follow the link's load. None when fewer than 3 bins have both.
pub fn against(series: &UtilSeries, path: &Path) -> Option<Against> {
    let len = series.bin_len_ms.max(1);
    let base = path.probes.iter().filter_map(|p| p.1).fold(f64::INFINITY, f64::min);
    if !base.is_finite() {
        return None;
    }
    let mut points = Vec::new();
    for b in series.bins.iter().filter(|b| b.covered_ms > 0) {
        let (lo, hi) = (b.bin_ms as f64 / 1000.0, (b.bin_ms + len) as f64 / 1000.0);
        let inside: Vec<Option<f64>> = path.probes.iter().filter(|p| p.0 >= lo && p.0 < hi).map(|p| p.1).collect();
        let rtts: Vec<f64> = inside.iter().flatten().copied().collect();
        if rtts.is_empty() {
            continue;
        }
        let loss = 100.0 * (inside.len() - rtts.len()) as f64 / inside.len() as f64;
        points.push((b.bin_ms, b.in_bps, b.out_bps, median(rtts) - base, loss));
    }
    if points.len() < 3 {
        return None;
    }
    let col = |f: fn(&(u64, f64, f64, f64, f64)) -> f64| points.iter().map(f).collect::<Vec<f64>>();
    let (u_in, u_out, delay) = (col(|p| p.1), col(|p| p.2), col(|p| p.3));
    let busier: Vec<f64> = u_in.iter().zip(&u_out).map(|(a, b)| a.max(*b)).collect();
    // Quarters by the busier direction's utilization (at least one bin each).
    let mut order: Vec<usize> = (0..points.len()).collect();
    order.sort_by(|&a, &b| busier[a].total_cmp(&busier[b]).then(a.cmp(&b)));
    let q = (points.len() / 4).max(1);
    let (idle, busy) = (&order[..q], &order[order.len() - q..]);
    let delay_of = |ix: &[usize]| median(ix.iter().map(|&i| points[i].3).collect());
    let loss_of = |ix: &[usize]| ix.iter().map(|&i| points[i].4).sum::<f64>() / ix.len() as f64;
    Some(Against {
        bins: points.len(),
        base_ms: base,
        r_in: pearson(&u_in, &delay),
        r_out: pearson(&u_out, &delay),
        r_busier: pearson(&busier, &delay),
        busy_delay_ms: delay_of(busy),
        idle_delay_ms: delay_of(idle),
        busy_loss_pct: loss_of(busy),
        idle_loss_pct: loss_of(idle),
        points,
    })
}

fn r_text(r: Option<f64>) -> String {
    r.map_or("–".into(), |r| format!("{r:+.2}"))
}

/// What [`against`] says, in words.
pub fn against_finding(a: &Against) -> String {
    let verdict = match a.r_busier {
        Some(r) if r >= 0.7 => "the delay follows this link's load: this link's queue explains the latency",
        Some(r) if r >= 0.4 => "the delay partly follows this link's load",
        Some(_) => "the delay does not follow this link's load: look for the queue elsewhere on the path",
        None => "the delay did not vary enough to tell",
    };
    format!(
        "Over {} bins, queueing delay (median RTT above the path's minimum of {}) correlates with \
         utilization r = {} out, {} in, {} with the busier direction; {verdict}. Busiest quarter of \
         the bins: +{} queueing delay and {} loss; idlest quarter: +{} and {}.",
        a.bins,
        ms(a.base_ms),
        r_text(a.r_out),
        r_text(a.r_in),
        r_text(a.r_busier),
        ms(a.busy_delay_ms),
        pct(a.busy_loss_pct),
        ms(a.idle_delay_ms),
        pct(a.idle_loss_pct),
    )
}

/// The x axis of a time range: (unit label, seconds per unit).
fn time_unit(span_s: f64) -> (&'static str, f64) {
    if span_s <= 900.0 {
        ("s", 1.0)
    } else if span_s <= 2.0 * 86_400.0 {
        ("min", 60.0)
    } else {
        ("h", 3600.0)
    }
}

const IN_GREEN: RGBColor = RGBColor(0, 150, 0);
const OUT_BLUE: RGBColor = RGBColor(0, 70, 200);

/// Mbit/s series in and out, split at gaps so a gap is drawn as a gap.
fn util_series(s: &UtilSeries, t0_ms: u64, unit: f64) -> Vec<Series> {
    let len = s.bin_len_ms.max(1);
    let mut out = Vec::new();
    let mut runs: Vec<Vec<&wanperf_flows::util::UtilBin>> = Vec::new();
    for b in s.bins.iter().filter(|b| b.covered_ms > 0) {
        match runs.last_mut() {
            Some(r) if r.last().is_some_and(|p| p.bin_ms + len == b.bin_ms) => r.push(b),
            _ => runs.push(vec![b]),
        }
    }
    for (k, run) in runs.iter().enumerate() {
        // The middle of each bin, so a one-bin run is a point between its neighbours' lines.
        let x = |b: &wanperf_flows::util::UtilBin| {
            (b.bin_ms.saturating_sub(t0_ms) as f64 + len as f64 / 2.0) / 1000.0 / unit
        };
        let mark = if run.len() == 1 { Mark::Points } else { Mark::Line };
        let pts_in = run.iter().map(|b| (x(b), b.in_bps / 1e6)).collect();
        let pts_out = run.iter().map(|b| (x(b), b.out_bps / 1e6)).collect();
        let label = |l: &str| if k == 0 { l.to_string() } else { String::new() };
        out.push(Series { label: label("in"), points: pts_in, mark, color: IN_GREEN });
        out.push(Series { label: label("out"), points: pts_out, mark, color: OUT_BLUE });
    }
    out
}

fn link_name(l: &Link) -> String {
    format!("{} {} ({})", l.device, l.interface, l.source)
}

fn util_finding(l: &Link) -> String {
    let s = &l.series;
    let bins: Vec<_> = s.bins.iter().filter(|b| b.covered_ms > 0).collect();
    let covered: f64 = bins.iter().map(|b| b.covered_ms as f64).sum::<f64>() / 1000.0;
    let avg = |f: fn(&wanperf_flows::util::UtilBin) -> f64| {
        bins.iter().map(|b| f(b) * b.covered_ms as f64).sum::<f64>() / 1000.0 / covered.max(1e-9)
    };
    let peak = |f: fn(&wanperf_flows::util::UtilBin) -> f64| bins.iter().map(|b| f(b)).fold(0.0, f64::max);
    let speed = bins.iter().rev().find_map(|b| b.speed_bps);
    let of =
        |x: f64| speed.map_or(String::new(), |sp| format!(" ({} of {})", pct(100.0 * x / sp as f64), mbps(sp as f64)));
    let mut f = format!(
        "{}: in averaged {} and peaked at {}{} per {}-s bin; out averaged {} and peaked at {}{}.",
        link_name(l),
        mbps(avg(|b| b.in_bps)),
        mbps(peak(|b| b.in_bps)),
        of(peak(|b| b.in_bps)),
        sig(s.bin_len_ms as f64 / 1000.0),
        mbps(avg(|b| b.out_bps)),
        mbps(peak(|b| b.out_bps)),
        of(peak(|b| b.out_bps)),
    );
    if l.saturated.is_empty() {
        f += " No saturated run.";
    } else {
        for r in &l.saturated {
            let _ = write!(
                f,
                " Saturated {} from {} to {} (up to {}).",
                r.dir,
                utc(r.from_ms as f64 / 1000.0),
                utc(r.to_ms as f64 / 1000.0),
                pct(r.peak_pct)
            );
        }
    }
    if s.resets > 0 || s.wraps > 0 {
        let _ = write!(f, " {} counter wraps taken, {} resets left as gaps.", s.wraps, s.resets);
    }
    f
}

/// The site's figures, in page order.
pub(crate) fn figures(d: &SiteData) -> Vec<Item> {
    let mut out = Vec::new();
    if d.links.is_empty() {
        out.push(Item::Skipped("util".into(), "No interface readings in this range: no utilization figure.".into()));
    }
    for (i, l) in d.links.iter().enumerate() {
        let name = if i == 0 { "util".to_string() } else { format!("util-{}", i + 1) };
        let Some(first) = l.series.bins.first() else {
            out.push(Item::Skipped(name, format!("{}: no bins.", link_name(l))));
            continue;
        };
        let t0 = first.bin_ms;
        let span = l.series.bins.last().map_or(0, |b| b.bin_ms + l.series.bin_len_ms - t0) as f64 / 1000.0;
        let (unit_name, unit) = time_unit(span);
        let x_desc = format!("time since {} ({unit_name})", utc(t0 as f64 / 1000.0));
        let mut axes = Axes::new(format!("Utilization of {}", link_name(l)), x_desc.clone(), "rate (Mbit/s)");
        axes.y_zero = true;
        let series = util_series(&l.series, t0, unit);
        let drawn = plot::xy(&axes, &series);
        push(&mut out, name, &format!("Utilization in and out, {}", link_name(l)), drawn, util_finding(l));

        for (k, p) in d.paths.iter().enumerate() {
            let name = format!("util-rtt-{}-{}", i + 1, k + 1);
            let Some(a) = against(&l.series, p) else {
                out.push(Item::Skipped(
                    name,
                    format!(
                        "{} against {}: fewer than 3 bins have both utilization and answered probes.",
                        link_name(l),
                        p.label
                    ),
                ));
                continue;
            };
            let mut top = Axes::new("", x_desc.clone(), "rate (Mbit/s)");
            top.y_zero = true;
            let mut bottom = Axes::new("", x_desc.clone(), "RTT (ms)");
            bottom.y_zero = false;
            let x = |t: f64| (t * 1000.0 - t0 as f64) / 1000.0 / unit;
            let in_range = |t: f64| t * 1000.0 >= t0 as f64 && t * 1000.0 <= t0 as f64 + span * 1000.0;
            let rtts: Vec<(f64, f64)> =
                p.probes.iter().filter(|q| in_range(q.0)).filter_map(|q| q.1.map(|r| (x(q.0), r))).collect();
            let rtts = crate::figures::bucket_means(&rtts, crate::figures::MAX_POINTS);
            let medians: Vec<(f64, f64)> = a
                .points
                .iter()
                .map(|q| (x(q.0 as f64 / 1000.0 + l.series.bin_len_ms as f64 / 2000.0), a.base_ms + q.3))
                .collect();
            let bottom_series = vec![
                Series::new("RTT of each probe", rtts, Mark::Points, 7),
                Series::new("median per bin", medians, Mark::LinePoints, 3),
            ];
            let drawn = plot::two_panel(
                &format!("{} against {}", link_name(l), p.label),
                (&top, &util_series(&l.series, t0, unit)),
                (&bottom, &bottom_series),
            );
            push(
                &mut out,
                name,
                &format!("Utilization of {} against RTT of {}", link_name(l), p.label),
                drawn,
                against_finding(&a),
            );
        }
    }
    out
}

fn push(out: &mut Vec<Item>, name: String, title: &str, drawn: plot::Res<String>, finding: String) {
    match drawn {
        Ok(svg) => out.push(Item::Figure(Figure { name, title: title.into(), svg, finding })),
        Err(e) => out.push(Item::Skipped(name, format!("{title}: not drawn ({e})."))),
    }
}

fn proto_name(p: Option<u8>) -> String {
    match p {
        Some(6) => "TCP".into(),
        Some(17) => "UDP".into(),
        Some(1) => "ICMP".into(),
        Some(58) => "ICMPv6".into(),
        Some(p) => p.to_string(),
        None => String::new(),
    }
}

fn num(x: f64) -> String {
    // Sampling-corrected counts may be fractional; tables show whole units.
    let n = x.round() as u64;
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn top_table(h: &mut String, caption: &str, rows: &[TopRow], key: &str) {
    let _ = write!(h, "<h3>{}</h3>", esc(caption));
    if rows.is_empty() {
        h.push_str("<p class=\"note\">No flow records in this range.</p>\n");
        return;
    }
    h.push_str("<div class=\"wide\"><table><tr><th>#</th>");
    match key {
        "pair" => h.push_str(
            "<th class=\"l\">source</th><th>port</th><th class=\"l\">destination</th><th>port</th><th class=\"l\">protocol</th>",
        ),
        "src" => h.push_str("<th class=\"l\">source</th>"),
        _ => h.push_str("<th class=\"l\">destination</th>"),
    }
    h.push_str("<th>flows</th><th>packets</th><th>bytes</th><th>share of bytes</th></tr>\n");
    for r in rows {
        let addr = |a: Option<std::net::IpAddr>| a.map_or(String::new(), |a| a.to_string());
        let _ = write!(h, "<tr><td>{}</td>", r.rank);
        match key {
            "pair" => {
                let _ = write!(
                    h,
                    "<td class=\"l\">{}</td><td>{}</td><td class=\"l\">{}</td><td>{}</td><td class=\"l\">{}</td>",
                    esc(&addr(r.src)),
                    r.sport.map_or(String::new(), |p| p.to_string()),
                    esc(&addr(r.dst)),
                    r.dport.map_or(String::new(), |p| p.to_string()),
                    proto_name(r.proto)
                );
            }
            "src" => {
                let _ = write!(h, "<td class=\"l\">{}</td>", esc(&addr(r.src)));
            }
            _ => {
                let _ = write!(h, "<td class=\"l\">{}</td>", esc(&addr(r.dst)));
            }
        }
        let _ = writeln!(
            h,
            "<td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            num(r.flows),
            num(r.packets),
            num(r.bytes),
            pct(r.share_pct)
        );
    }
    h.push_str("</table></div>\n");
}

fn mix_table(h: &mut String, d: &SiteData) {
    let (a, b) = if d.local.is_empty() { ("bytes", "—") } else { ("bytes in", "bytes out") };
    h.push_str("<h3>Protocol mix</h3>");
    if d.mix.is_empty() {
        h.push_str("<p class=\"note\">No flow records in this range.</p>\n");
        return;
    }
    let _ = writeln!(
        h,
        "<div class=\"wide\"><table><tr><th class=\"l\">application</th><th>{a}</th><th>share</th><th>{b}</th><th>share</th><th>flows</th></tr>"
    );
    for m in &d.mix {
        let _ = writeln!(
            h,
            "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&m.app),
            num(m.bytes_in),
            pct(m.share_in_pct),
            num(m.bytes_out),
            pct(m.share_out_pct),
            num(m.flows)
        );
    }
    h.push_str("</table></div>\n");
}

fn util_table(h: &mut String, d: &SiteData) {
    h.push_str("<h3>Utilization</h3>");
    if d.links.is_empty() {
        h.push_str("<p class=\"note\">No interface readings in this range.</p>\n");
        return;
    }
    h.push_str(
        "<div class=\"wide\"><table><tr><th class=\"l\">interface</th><th>bin</th><th>bins</th><th>octets in</th>\
         <th>octets out</th><th>peak in</th><th>peak out</th><th>speed</th><th class=\"l\">saturated</th>\
         <th>wraps</th><th>resets</th></tr>\n",
    );
    for l in &d.links {
        let s = &l.series;
        let peak = |f: fn(&wanperf_flows::util::UtilBin) -> f64| s.bins.iter().map(f).fold(0.0, f64::max);
        let speed = s.bins.iter().rev().find_map(|b| b.speed_bps).map_or("–".into(), |sp| mbps(sp as f64));
        let sat = if l.saturated.is_empty() {
            "no".to_string()
        } else {
            l.saturated
                .iter()
                .map(|r| format!("{} {}", r.dir, utc(r.from_ms as f64 / 1000.0)))
                .collect::<Vec<_>>()
                .join("; ")
        };
        let _ = writeln!(
            h,
            "<tr><td class=\"l\">{}</td><td>{} s</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td></tr>",
            esc(&link_name(l)),
            sig(s.bin_len_ms as f64 / 1000.0),
            s.bins.len(),
            num(s.in_octets as f64),
            num(s.out_octets as f64),
            mbps(peak(|b| b.in_bps)),
            mbps(peak(|b| b.out_bps)),
            speed,
            esc(&sat),
            s.wraps,
            s.resets
        );
    }
    h.push_str("</table></div>\n");
}

/// The tables of the site report.
pub(crate) fn tables(d: &SiteData) -> String {
    let mut h = String::from("<section id=\"tables\"><h2>Tables</h2>\n");
    if !d.local.is_empty() {
        let _ = writeln!(h, "<p class=\"meta\">Local networks: {}.</p>", esc(&d.local.join(", ")));
    }
    util_table(&mut h, d);
    top_table(&mut h, &format!("Top {} sources", d.top_src.len()), &d.top_src, "src");
    top_table(&mut h, &format!("Top {} destinations", d.top_dst.len()), &d.top_dst, "dst");
    top_table(&mut h, &format!("Top {} communicating pairs", d.pairs.len()), &d.pairs, "pair");
    mix_table(&mut h, d);
    h.push_str("</section>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use wanperf_flows::util::UtilBin;

    /// 20 one-minute bins of a 20 Mbit/s link: out ramps 0 → 19 Mbit/s, in stays at 1.
    fn ramp() -> UtilSeries {
        let bins = (0..20u64)
            .map(|i| UtilBin {
                bin_ms: 1_700_000_000_000 + i * 60_000,
                covered_ms: 60_000,
                in_bps: 1e6,
                out_bps: i as f64 * 1e6,
                speed_bps: Some(20_000_000),
                ..Default::default()
            })
            .collect();
        UtilSeries { bin_len_ms: 60_000, in_octets: 0, out_octets: 0, bins, wraps: 0, resets: 0 }
    }

    /// Probes every 10 s whose RTT is 10 ms plus `delay(bin)`, one in 20 lost in busy bins.
    fn probes(delay: impl Fn(u64) -> f64) -> Path {
        let mut p = Vec::new();
        for k in 0..120u64 {
            let t = 1_700_000_000.0 + k as f64 * 10.0;
            let bin = k / 6;
            let lost = bin >= 15 && k % 6 == 0;
            p.push((t, if lost { None } else { Some(10.0 + delay(bin)) }));
        }
        Path { label: "ping".into(), probes: p }
    }

    #[test]
    fn delay_that_follows_the_load_is_said_to() {
        let a = against(&ramp(), &probes(|bin| bin as f64 * 2.0)).unwrap();
        assert_eq!(a.bins, 20);
        assert_eq!(a.base_ms, 10.0);
        assert!(a.r_out.unwrap() > 0.99 && a.r_busier.unwrap() > 0.99, "{a:?}");
        // In never varies: no correlation can be computed.
        assert_eq!(a.r_in, None);
        // Quarters of 5 bins: delays 0..8 (median 4) and 30..38 (median 34); loss 1 in 6 in
        // the busiest five bins.
        assert_eq!((a.idle_delay_ms, a.busy_delay_ms), (4.0, 34.0));
        assert!((a.busy_loss_pct - 100.0 / 6.0).abs() < 1e-9 && a.idle_loss_pct == 0.0, "{a:?}");
        let f = against_finding(&a);
        assert!(f.contains("r = +1.00 out, – in, +1.00 with the busier direction"), "{f}");
        assert!(f.contains("this link's queue explains the latency"), "{f}");
        assert!(f.contains("+34.0 ms queueing delay and 16.7 % loss"), "{f}");
    }

    #[test]
    fn delay_that_does_not_follow_the_load_points_elsewhere() {
        // Delay high in the idle first half, low in the busy second half.
        let a = against(&ramp(), &probes(|bin| if bin < 10 { 30.0 } else { 0.0 })).unwrap();
        assert!(a.r_busier.unwrap() < 0.0, "{a:?}");
        assert!(against_finding(&a).contains("look for the queue elsewhere on the path"));
    }

    #[test]
    fn too_few_bins_with_probes_is_none() {
        let mut p = probes(|_| 0.0);
        p.probes.truncate(12); // two bins
        assert_eq!(against(&ramp(), &p), None);
        assert_eq!(against(&ramp(), &Path { label: "x".into(), probes: vec![(1.7e9, None)] }), None);
    }

    #[test]
    fn gaps_split_the_utilization_lines() {
        let mut s = ramp();
        s.bins.remove(5);
        let series = util_series(&s, s.bins[0].bin_ms, 60.0);
        // in and out before the gap, in and out after it; the legend names each once.
        assert_eq!(series.len(), 4);
        assert_eq!(series.iter().filter(|x| !x.label.is_empty()).count(), 2);
        assert_eq!(series[0].points.len(), 5);
        assert_eq!(series[0].points[0], (0.5, 1.0));
    }
}
