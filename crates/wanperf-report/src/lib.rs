//! Self-contained HTML reports of wanperf runs (`wanperf report RUN -o report.html`).
//!
//! [`render`] turns a [`RunData`] read from the archive into one HTML page with nothing to
//! fetch: inline CSS, inline SVG figures drawn with plotters, and a few lines of script that
//! check the figures laid out. What it shows follows the data:
//!
//! * figures — throughput over streams × window (a heatmap; a line against the one swept
//!   parameter when only one varies), loaded RTT (median, average, 90th percentile, IQR)
//!   against the window, loaded and unloaded RTT histograms and CDFs, RTT against throughput
//!   with power fits and R² (seed 000), thrulay-style per-interval throughput and RTT of the
//!   best cell and of the cell with the most added delay, and TCP counters against the swept
//!   parameter. Each carries a finding computed from the data; a figure the data cannot
//!   support is replaced by a one-line note saying why;
//! * seed 000's tables (loaded against unloaded average, stdev, median, IQR, p5, p90, p95,
//!   min, max, loss),
//!   per cell and for the cell with the most added delay, plus throughput, ping and iperf3
//!   tables; the study's stated expectations and their verdicts;
//! * analysis — the best cell and how far the others fall short, BDP and window advice, the
//!   Mathis bound from the measured loss, asymmetry between directions;
//! * failures, the study's parameters, and the host captures and emulator counters.
//!
//! Every text from the data is escaped. Figures never hold more than about 2,000 points per
//! series: histograms are binned, CDFs and probe series thinned, interval series averaged in
//! buckets, so a run with a million probes renders in well under a second.
//!
//! ```no_run
//! # fn get() -> wanperf_archive::RunData { unimplemented!() }
//! let data: wanperf_archive::RunData = get();
//! std::fs::write("report.html", wanperf_report::render(&data)).unwrap();
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod figures;
mod fmt;
mod plot;
pub mod site;
pub mod synthetic;
mod tables;
mod view;

use figures::Item;
pub use figures::{Figure, MAX_POINTS};
pub use fmt::esc;
pub use tables::{runs_table, utc};

use std::fmt::Write as _;
use wanperf_archive::RunData;

/// A rendered report: the page, and what it holds.
#[derive(Debug, Clone)]
pub struct Report {
    /// The HTML document.
    pub html: String,
    /// The figures drawn, in page order.
    pub figures: Vec<Figure>,
    /// Figures left out: (name, why).
    pub skipped: Vec<(String, String)>,
}

/// Renders the run as one self-contained HTML document.
pub fn render(data: &RunData) -> String {
    report(data).html
}

/// Renders the run into `out`.
pub fn render_to(data: &RunData, out: &mut impl std::io::Write) -> std::io::Result<()> {
    out.write_all(render(data).as_bytes())
}

const CSS: &str = "
body{font:15px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#1b1f24;margin:0 auto;max-width:1100px;padding:0 18px 60px}
h1{font-size:1.6em;margin:.8em 0 .2em}h2{border-bottom:1px solid #d0d7de;padding-bottom:.2em;margin-top:1.8em}
.meta{color:#57606a}.note{color:#57606a;font-style:italic;margin:.3em 0}
nav a{margin-right:1em}
figure.fig{margin:1.2em 0;padding:.6em;border:1px solid #d0d7de;border-radius:6px;background:#fff}
figure.fig svg{display:block;width:100%;max-width:760px;height:auto;margin:0 auto}
figcaption{margin-top:.4em}
table{border-collapse:collapse;margin:.6em 0;font-size:.88em;font-variant-numeric:tabular-nums}
th,td{border:1px solid #d0d7de;padding:.2em .5em;text-align:right;white-space:nowrap}
th{background:#f6f8fa}td.l,th.l{text-align:left}td.w{text-align:left;white-space:normal}
.wide{overflow-x:auto}
pre{background:#f6f8fa;padding:.6em;overflow-x:auto;font-size:.85em}
.bad{color:#b42318}
section.warn{border:2px solid #b42318;border-radius:6px;padding:0 .8em .6em;margin-top:1em;background:#fff5f5}
section.warn h2{color:#b42318;border:0;margin-top:.6em}
";

/// Sets `data-figures="<figures with a non-empty box>/<figures>"` on the body once laid out.
const SCRIPT: &str = "
window.addEventListener('load', function () {
  var figs = document.querySelectorAll('figure.fig');
  var ok = 0;
  figs.forEach(function (f) {
    var s = f.querySelector('svg');
    if (s) { var r = s.getBoundingClientRect(); if (r.width > 0 && r.height > 0) { ok++; } }
  });
  document.body.dataset.figures = ok + '/' + figs.length;
});
";

/// What the reader chose for a report.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Draw the time series of these cells (by index, in this order) instead of the ones the
    /// report picks.
    pub series: Option<Vec<u32>>,
}

/// Renders the run and says which figures it drew and which it left out.
pub fn report(data: &RunData) -> Report {
    report_with(data, &Options::default())
}

/// [`report`] with the reader's choices.
pub fn report_with(data: &RunData, opts: &Options) -> Report {
    let run = &data.run;
    let title = format!("{} — wanperf run {}", run.study, run.id);
    let mut h = format!("<header><h1>{}</h1><p class=\"meta\">{}</p></header>\n", esc(&run.study), {
        tables::run_line(&view::View::new(data))
    });
    h += "<nav><a href=\"#findings\">Findings</a><a href=\"#figures\">Figures</a><a href=\"#tables\">Tables</a>\
          <a href=\"#analysis\">Analysis</a><a href=\"#failures\">Failures</a><a href=\"#study\">Study</a>\
          <a href=\"#hosts\">Hosts</a></nav>\n";
    let body = sections_with(data, opts);
    h += &body.html;
    Report { html: page(&title, &h), figures: body.figures, skipped: body.skipped }
}

/// The run's sections (what never acted, expectations, findings, figures, tables, analysis,
/// failures, study, hosts) as a fragment for a page of several runs (`wanperf reproduce`).
pub fn sections(data: &RunData) -> Report {
    sections_with(data, &Options::default())
}

fn sections_with(data: &RunData, opts: &Options) -> Report {
    let mut v = view::View::new(data);
    v.series.clone_from(&opts.series);
    let items = figures::all(&v);
    let mut h = String::with_capacity(256 * 1024);
    h += &tables::not_acted(&v);
    h += &tables::fell_behind(&v);
    h += &tables::expectations(&v);
    let (figs, skipped) = figures_sections(&mut h, items);
    h += &tables::statistics(&v);
    h += &tables::analysis(&v);
    h += &tables::failures(&v);
    h += &tables::study(&v);
    h += &tables::hosts(&v);
    Report { html: h, figures: figs, skipped }
}

/// One self-contained page: `body` (HTML) under `title`, with the reports' style and the
/// script that counts the figures laid out.
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><style>{CSS}</style></head>\n<body>\n{body}<script>{SCRIPT}</script>\n</body></html>\n",
        esc(title)
    )
}

/// Renders the passive view of a site (`wanperf flows report`): utilization figures, each
/// link against each measured path's RTT and loss with its finding, and seed 000's top tables.
pub fn site_report(d: &site::SiteData) -> Report {
    let items = site::figures(d);
    let mut h = String::with_capacity(128 * 1024);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><style>{CSS}</style></head>\n<body>\n",
        esc(&d.title)
    );
    let range = match (d.from_unix, d.to_unix) {
        (Some(a), Some(b)) => format!("From {} to {}.", tables::utc(a), tables::utc(b)),
        (Some(a), None) => format!("From {}.", tables::utc(a)),
        (None, Some(b)) => format!("Until {}.", tables::utc(b)),
        (None, None) => "Everything in the archive.".into(),
    };
    let _ = writeln!(h, "<header><h1>{}</h1><p class=\"meta\">{}</p></header>", esc(&d.title), esc(&range));
    h +=
        "<nav><a href=\"#findings\">Findings</a><a href=\"#figures\">Figures</a><a href=\"#tables\">Tables</a></nav>\n";
    let (figs, skipped) = figures_sections(&mut h, items);
    h += &site::tables(d);
    let _ = write!(h, "<script>{SCRIPT}</script>\n</body></html>\n");
    Report { html: h, figures: figs, skipped }
}

/// The findings list and the figures section.
fn figures_sections(h: &mut String, items: Vec<Item>) -> (Vec<Figure>, Vec<(String, String)>) {
    let mut figs = Vec::new();
    let mut skipped = Vec::new();
    *h += "<section id=\"findings\"><h2>Findings</h2><ul>\n";
    for it in &items {
        if let Item::Figure(f) = it {
            let _ =
                writeln!(h, "<li><a href=\"#fig-{}\">{}</a>: {}</li>", esc(&f.name), esc(&f.title), esc(&f.finding));
        }
    }
    *h += "</ul></section>\n<section id=\"figures\"><h2>Figures</h2>\n";
    for it in items {
        match it {
            Item::Figure(f) => {
                let _ = write!(
                    h,
                    "<figure class=\"fig\" id=\"fig-{n}\" data-figure=\"{n}\">\n{svg}\n<figcaption><b>{t}.</b> {c}</figcaption></figure>\n",
                    n = esc(&f.name),
                    svg = f.svg,
                    t = esc(&f.title),
                    c = esc(&f.finding)
                );
                figs.push(f);
            }
            Item::Skipped(name, why) => {
                let _ = writeln!(h, "<p class=\"note\" data-skipped=\"{}\">{}</p>", esc(&name), esc(&why));
                skipped.push((name, why));
            }
        }
    }
    *h += "</section>\n";
    (figs, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEED: &str = "seed 000 <script>alert(1)</script>";

    fn seed_like() -> RunData {
        synthetic::load_study(SEED, &[2, 10], &[16_384, 65_536, 262_144], 60, true)
    }

    /// The SVG inside the figure named `name`.
    fn figure<'a>(html: &'a str, name: &str) -> &'a str {
        let start = html.find(&format!("data-figure=\"{name}\">")).unwrap_or_else(|| panic!("no figure {name}"));
        let end = start + html[start..].find("</figure>").unwrap();
        &html[start..end]
    }

    #[test]
    fn stated_expectations_are_a_table_near_the_top_with_units() {
        let mut d = seed_like();
        assert!(!report(&d).html.contains("id=\"expectations\""), "no section without expectations");
        let v = |pass: bool, measured: f64| wanperf_archive::Verdict {
            expect: 0,
            line: 12,
            text: "rtt_rise ≤ 1.25 * queue / rate <script>".into(),
            cells: "streams = 10".into(),
            pass,
            measured: Some(measured),
            bound: Some(0.1),
            margin: Some((0.1 - measured) / 0.1),
            unit: "s".into(),
            note: "seed 000".into(),
        };
        d.verdicts = vec![v(true, 0.09), v(false, 0.12)];
        let html = report(&d).html;
        let at = html.find("<section id=\"expectations\" class=\"warn\"><h2>Stated expectations: 1 of 2 held").unwrap();
        assert!(at < html.find("id=\"figures\"").unwrap());
        assert!(html.contains("<td>90.0 ms</td><td>100 ms</td><td>10.0 %</td>"), "{}", &html[at..at + 1500]);
        assert!(html.contains("<td>120 ms</td><td>100 ms</td><td>-20.0 %</td>"));
        assert!(html.contains("&lt;script&gt;") && !html.contains("<script>\""));
        assert_eq!(html.matches("data-pass=\"false\"").count(), 1);
    }

    #[test]
    fn cells_where_the_emulator_fell_behind_are_said_before_the_figures() {
        let mut d = seed_like();
        assert!(!report(&d).html.contains("id=\"fell-behind\""), "no section where it kept up");
        let said = "the emulator fell behind its schedule on the path (left → right): 277 packet(s) were dropped <b>";
        d.cells[1].cell.emulator = Some(serde_json::json!({ "idle": [], "behind": said }));
        let html = report(&d).html;
        let at = html.find("<section id=\"fell-behind\" class=\"warn\"><h2>The emulator fell behind</h2>").unwrap();
        assert!(at < html.find("id=\"figures\"").unwrap());
        assert!(html[at..].contains("277 packet(s) were dropped &lt;b&gt;"), "escaped, in its cell's row");
        assert_eq!(html.matches("data-figure=\"").count(), report(&seed_like()).html.matches("data-figure=\"").count());
    }

    #[test]
    fn seed_000_figures_with_units() {
        let r = report(&seed_like());
        let html = &r.html;
        let expect: [(&str, &[&str]); 7] = [
            ("throughput-heatmap", &["window per stream (KiB)", "parallel streams (count)", "Mbit/s", "23.5"]),
            ("rtt-window", &["window per stream (KiB", "RTT and IQR (ms)", "loaded 90th percentile"]),
            ("rtt-histogram", &["RTT (ms)", "share of the phase", "(%)"]),
            ("rtt-cdf", &["RTT (ms)", "probes at or below (%)"]),
            ("rtt-throughput", &["load goodput (Mbit/s)", "RTT (ms)", "R²"]),
            ("timeseries", &["time since start (s)", "goodput (Mbit/s)", "RTT (ms)"]),
            ("tcp-counters", &["window per stream (KiB", "count per cell (segments or events)"]),
        ];
        for (name, labels) in expect {
            let f = figure(html, name);
            assert!(f.contains("<svg") && f.contains("<figcaption>"), "{name}");
            for l in labels {
                assert!(f.contains(l), "figure {name} lacks {l:?}");
            }
        }
        // Facets: one RTT-against-window figure per stream count.
        assert!(html.contains("data-figure=\"rtt-window-2\""));
        assert_eq!(html.matches("<figure class=\"fig\"").count(), r.figures.len());
        assert!(r.figures.len() >= 8, "{:?}", r.figures.iter().map(|f| &f.name).collect::<Vec<_>>());
        assert!(r.skipped.is_empty(), "{:?}", r.skipped);
        assert!(html.contains("document.body.dataset.figures"));
    }

    #[test]
    fn findings_state_computed_numbers() {
        let r = report(&seed_like());
        let finding = |name: &str| &r.figures.iter().find(|f| f.name == name).unwrap().finding;
        // 10 streams × 256 KiB overfill the 290 625-byte queue: +93 ms ≈ 291 kB at 25 Mbit/s.
        let cdf = finding("rtt-cdf");
        assert!(cdf.contains("streams 10, window 256 KiB, adds +93.0 ms ≈ 291 kB queued at 25.0 Mbit/s"), "{cdf}");
        // Best cell and the shortfall of the slowest (2 × 16 KiB: 1.58 of 23.5 Mbit/s, 93.3 % short).
        let best = finding("throughput-heatmap");
        assert!(best.contains("Best: streams 2, window 256 KiB at 23.5 Mbit/s"), "{best}");
        assert!(best.contains("to 93.3 %"), "{best}");
        assert!(best.contains("518.75 kB") || best.contains("519 kB"), "{best}");
        // Loaded median RTT against window for 10 streams: 166 ms + noise, then + 43.7, + 93 ms.
        let w = finding("rtt-window-2");
        assert!(w.contains("at 16 KiB to 260 ms at 256 KiB"), "{w}");
        assert!(w.contains("steepest rise is between 64 KiB and 256 KiB"), "{w}");
        // The seed table for the worst cell shows the exact difference of medians.
        assert!(r.html.contains("<tr><th class=\"l\">Median</th><td>260</td><td>167</td><td>93.0</td>"));
    }

    #[test]
    fn data_text_is_escaped_and_nothing_is_fetched() {
        let html = render(&seed_like());
        assert!(!html.contains("<script>alert(1)"));
        assert!(html.contains("seed 000 &lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(!html.contains("<b>too many streams</b>"));
        assert!(html.contains("&lt;b&gt;too many streams&lt;/b&gt; &amp; &quot;15&quot;"));
        assert_eq!(html.matches("<script").count(), 1);
        for attr in ["src=", "href=", "url(", "@import"] {
            for (i, _) in html.match_indices(attr) {
                let rest = &html[i + attr.len()..];
                assert!(!rest.trim_start_matches(['"', '\'']).starts_with("http"), "fetch at {}", &html[i..i + 60]);
                assert!(!rest.trim_start_matches(['"', '\'']).starts_with("//"), "fetch at {}", &html[i..i + 60]);
            }
        }
        for (i, _) in html.match_indices("href=\"") {
            assert!(html[i + 6..].starts_with('#'));
        }
    }

    #[test]
    fn skips_what_the_data_cannot_support() {
        // Throughput only, one window: a line against streams, no RTT figures.
        let r = report(&synthetic::tput_study(&[1, 2, 4, 8]));
        let names: Vec<&str> = r.figures.iter().map(|f| f.name.as_str()).collect();
        assert!(names.contains(&"throughput") && !names.contains(&"throughput-heatmap"), "{names:?}");
        assert!(names.contains(&"tcp-counters") && names.contains(&"timeseries"), "{names:?}");
        // Four cells: each its own series; every interval in the goodput–RTT scatter.
        assert_eq!(names.iter().filter(|n| n.starts_with("timeseries")).count(), 4, "{names:?}");
        assert!(figure(&r.html, "interval-scatter").contains("mean smoothed RTT of the streams (ms)"));
        let skipped: Vec<&str> = r.skipped.iter().map(|s| s.0.as_str()).collect();
        for s in ["rtt-window", "rtt-histogram", "rtt-cdf", "rtt-throughput"] {
            assert!(skipped.contains(&s), "{s} not skipped: {skipped:?}");
            assert!(r.html.contains(&format!("data-skipped=\"{s}\"")));
        }
        let f = figure(&r.html, "throughput");
        assert!(f.contains("parallel streams (count)") && f.contains("goodput (Mbit/s)"));
        assert!(figure(&r.html, "tcp-counters").contains("TcpExt.TCPTimeouts"));

        // One load cell (seed 000's first experiment): distributions and a time series only.
        let one = report(&synthetic::load_study("one", &[10], &[262_144], 100, false));
        let names: Vec<&str> = one.figures.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["rtt-histogram", "rtt-cdf", "timeseries", "interval-scatter"]);
        assert!(
            one.figures[0].finding.contains("+93.0 ms ≈ 291 kB queued at 25.0 Mbit/s"),
            "{}",
            one.figures[0].finding
        );
        assert!(one.html.contains("Loaded against unloaded RTT, the cell"));
        // Seed 002's percentiles beside seed 000's statistics.
        for row in ["5th percentile", "95th percentile"] {
            let at = one.html.find(&format!("<th class=\"l\">{row}</th>")).unwrap_or_else(|| panic!("no {row} row"));
            assert!(!one.html[at..].split("</tr>").next().unwrap().contains("<td>–</td>"), "{row} has no values");
        }

        // No cells at all still makes a page.
        let mut empty = synthetic::load_study("empty", &[], &[], 1, false);
        empty.cells.clear();
        let e = report(&empty);
        assert!(e.figures.is_empty() && e.html.contains("No cell was measured successfully"));
    }

    #[test]
    fn a_million_probes_make_bounded_figures() {
        // 50 cells × 20 000 probes: every figure stays within its point budget.
        let windows: Vec<u64> = (0..10).map(|i| (8192 << (i / 2)) | ((i % 2) * 4096)).collect();
        let d = synthetic::load_study("big", &[1, 2, 5, 10, 15], &windows, 10_000, false);
        assert_eq!(d.cells.iter().map(|c| c.cell.probes.len()).sum::<usize>(), 50 * 20_001);
        let r = report(&d);
        for fig in &r.figures {
            let name = &fig.name;
            let f = figure(&r.html, name);
            assert!(f.matches("<circle").count() <= 4 * MAX_POINTS, "{name}");
            assert!(f.len() < 1_500_000, "{name}: {} bytes", f.len());
        }
        assert!(r.html.len() < 12_000_000, "{} bytes", r.html.len());
        let cdf = &r.figures.iter().find(|f| f.name == "rtt-cdf").unwrap().finding;
        assert!(cdf.contains("adds +93.0 ms"), "{cdf}");
    }

    #[test]
    fn the_site_page_has_its_figures_tables_and_findings() {
        let r = site_report(&synthetic::site("site <b>x</b>"));
        let names: Vec<&str> = r.figures.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["util", "util-rtt-1-1"]);
        let h = &r.html;
        assert!(h.contains("site &lt;b&gt;x&lt;/b&gt;") && !h.contains("<b>x</b>"));
        for want in [
            "Top 2 sources",
            "Top 1 communicating pairs",
            "<td class=\"l\">198.18.0.1</td>",
            "2,000,000,000",
            "Protocol mix",
            "bytes in",
            "Local networks: 198.18.0.0/24.",
            "rate (Mbit/s)",
            "RTT (ms)",
        ] {
            assert!(h.contains(want), "no {want:?}");
        }
        assert!(r.figures[0].finding.contains("Saturated out from 2023-11-14"), "{}", r.figures[0].finding);
        assert!(r.figures[0].finding.contains("1 resets left as gaps"), "{}", r.figures[0].finding);
        assert!(r.figures[1].finding.contains("this link's queue explains the latency"), "{}", r.figures[1].finding);
    }
}
