//! A seed's report, pure: one self-contained HTML page with the seed's published numbers
//! beside the new run's, the findings table, and every study's own report sections.

use crate::findings::{counts, Row, Status};
use crate::registry::{Published, Seed};
use std::fmt::Write as _;
use wanperf_archive::RunData;
use wanperf_report::esc;
use wanperf_study::expect::fmt_in;

/// A published number and what the new run measured for it.
pub struct PublishedRow<'a> {
    /// The seed's number.
    pub published: &'a Published,
    /// The new run's median over the same cells (base units, unit), or why there is none.
    pub measured: Result<(f64, &'static str), String>,
}

/// What the page shows.
pub struct SeedPage<'a> {
    /// The seed.
    pub seed: &'a Seed,
    /// Its findings.
    pub rows: &'a [Row],
    /// Its published numbers.
    pub published: Vec<PublishedRow<'a>>,
    /// Each study's file and run.
    pub runs: Vec<(String, RunData)>,
    /// Whether this was the reduced grid.
    pub quick: bool,
    /// The software that ran it.
    pub software: String,
}

const STYLE: &str = "<style>td.pass{color:#1a7f37;font-weight:600}td.fail{color:#b42318;font-weight:700}\
td.skip{color:#57606a}section.run{border-top:3px solid #d0d7de;margin-top:2.5em}</style>\n";

/// The page's HTML.
pub fn render(p: &SeedPage) -> String {
    let s = p.seed;
    let c = counts(p.rows);
    let mut h = String::from(STYLE);
    let _ = writeln!(
        h,
        "<header><h1>Seed {}: {}</h1><p class=\"meta\">Reproduced by {} {}— the seed's text: <code>{}</code>. \
         Every check states what physics guarantees on a correct emulation; the seed's own numbers are beside \
         the new run's, not held to them.</p></header>",
        esc(&s.id),
        esc(&s.title),
        esc(&p.software),
        if p.quick { "on the reduced grid (<code>--quick</code>) " } else { "" },
        esc(&s.file)
    );
    let _ = writeln!(
        h,
        "<p id=\"summary\" data-passed=\"{}\" data-failed=\"{}\"><b>{}</b></p>",
        c.passed,
        c.failed,
        esc(&c.line(&s.id))
    );
    h += "<nav><a href=\"#published\">Published vs measured</a><a href=\"#seed-findings\">Findings</a>";
    for (i, (file, _)) in p.runs.iter().enumerate() {
        let _ = write!(h, "<a href=\"#r{i}\">{}</a>", esc(file));
    }
    h += "</nav>\n";
    published(&mut h, &p.published);
    findings(&mut h, p.rows);
    for (i, (file, data)) in p.runs.iter().enumerate() {
        let body = wanperf_report::sections(data).html;
        // Each run's anchors get its own prefix: the page holds several.
        let body = body.replace("id=\"", &format!("id=\"r{i}-")).replace("href=\"#", &format!("href=\"#r{i}-"));
        let _ = writeln!(
            h,
            "<section class=\"run\" id=\"r{i}\"><h1>{} <small class=\"meta\">(run {}: {})</small></h1>\n{body}</section>",
            esc(file),
            data.run.id,
            esc(&data.run.study)
        );
    }
    wanperf_report::page(&format!("Seed {} reproduced — wanperf", s.id), &h)
}

fn published(h: &mut String, rows: &[PublishedRow]) {
    *h += "<section id=\"published\"><h2>The seed's numbers beside the new run's</h2>\n";
    if rows.is_empty() {
        *h += "<p class=\"note\">The seed publishes no number this run measures.</p></section>\n";
        return;
    }
    *h += "<div class=\"wide\"><table><tr><th class=\"l\">Seed says (line)</th><th>Seed's number</th>\
           <th>Measured now (median)</th><th class=\"l\">Metric, cells</th><th class=\"l\">Study</th></tr>\n";
    for r in rows {
        let p = r.published;
        let cells: Vec<String> = p.select().iter().map(|(k, v)| format!("{k} = {v}")).collect();
        let measured = match &r.measured {
            Ok((v, unit)) => esc(&fmt_in(unit, *v)),
            Err(why) => format!("<span class=\"note\">{}</span>", esc(why)),
        };
        let _ = writeln!(
            h,
            "<tr><td class=\"w\">“{}” (line {})</td><td>{}</td><td>{measured}</td><td class=\"l\">{}{}</td><td class=\"l\">{}</td></tr>",
            esc(&p.quote),
            p.line,
            esc(&p.value),
            esc(&p.metric),
            if cells.is_empty() { String::new() } else { format!(" where {}", esc(&cells.join(", "))) },
            esc(&p.study)
        );
    }
    *h += "</table></div></section>\n";
}

fn findings(h: &mut String, rows: &[Row]) {
    *h += "<section id=\"seed-findings\"><h2>Findings and their checks</h2>\n\
           <div class=\"wide\"><table><tr><th class=\"l\">Finding</th><th>Line</th><th class=\"l\">What the seed found</th>\
           <th>Result</th><th class=\"l\">Checks (study: bound [cells]: measured)</th></tr>\n";
    for r in rows {
        let (class, word) = match &r.status {
            Status::Pass => ("pass", "PASS"),
            Status::Fail => ("fail", "FAIL"),
            Status::Unchecked(_) => ("skip", "not checkable"),
            Status::FullRunOnly => ("skip", "full run only"),
            Status::NotRun(_) => ("fail", "NOT RUN"),
        };
        let mut checks = String::new();
        match &r.status {
            Status::Unchecked(why) | Status::NotRun(why) => checks += &esc(why),
            Status::FullRunOnly => checks += "its checks need the full run's longer tests",
            _ => {}
        }
        for (file, v) in &r.checks {
            let _ = write!(
                checks,
                "<div class=\"{}\">{}: {}</div>",
                if v.pass { "pass" } else { "fail" },
                esc(file.trim_end_matches(".toml")),
                esc(&wanperf_study::expect::line(v))
            );
        }
        if let Some(p) = &r.partial {
            let _ = write!(checks, "<div class=\"note\">Not covered: {}</div>", esc(p));
        }
        let _ = writeln!(
            h,
            "<tr data-finding=\"{id}\" data-status=\"{class}\"><td class=\"l\">{id}</td><td>{}</td><td class=\"w\">{}</td>\
             <td class=\"{class}\">{word}</td><td class=\"w\">{checks}</td></tr>",
            r.line,
            esc(&r.finding),
            id = esc(&r.id)
        );
    }
    *h += "</table></div></section>\n";
}
