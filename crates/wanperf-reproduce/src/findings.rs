//! A seed's findings table, pure: each finding with the verdicts of the checks that state it
//! (from every study of the seed), or why it has none.

use crate::registry::{Compare, Finding, MeshRun, Seed};
use serde::Serialize;
use wanperf_archive::Verdict;
use wanperf_study::axis::fmt_value;

/// What one study of a seed gave.
#[derive(Debug, Clone, Default)]
pub struct StudyResult {
    /// Its file.
    pub file: String,
    /// The finding each `[[expect]]` states, by position (as run: after `--quick`).
    pub findings: Vec<Option<String>>,
    /// Its verdicts.
    pub verdicts: Vec<Verdict>,
    /// Findings its `[quick]` table left to the full run.
    pub dropped: Vec<String>,
    /// Why it did not run, or did not finish.
    pub error: Option<String>,
}

/// How a finding came out.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "status", content = "why")]
pub enum Status {
    /// Every check held.
    Pass,
    /// A check failed (or nothing was measured for it).
    Fail,
    /// No check states it; why.
    Unchecked(String),
    /// Its checks need the full run (`--quick` left them out).
    FullRunOnly,
    /// Its study did not run; why.
    NotRun(String),
}

/// One row of the findings table.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The finding's id.
    pub id: String,
    /// Its line in the seed.
    pub line: u32,
    /// The finding.
    pub finding: String,
    /// What its checks do not cover.
    pub partial: Option<String>,
    /// How it came out.
    #[serde(flatten)]
    pub status: Status,
    /// Its checks: (study file, verdict).
    pub checks: Vec<(String, Verdict)>,
}

/// The findings table of `seed` from its studies' results.
pub fn rows(seed: &Seed, results: &[StudyResult]) -> Vec<Row> {
    seed.findings.iter().map(|f| row(f, results)).collect()
}

fn row(f: &Finding, results: &[StudyResult]) -> Row {
    let checks: Vec<(String, Verdict)> = results
        .iter()
        .flat_map(|r| {
            r.verdicts
                .iter()
                .filter(|v| r.findings.get(v.expect as usize).and_then(|x| x.as_deref()) == Some(f.id.as_str()))
                .map(|v| (r.file.clone(), v.clone()))
        })
        .collect();
    let status = if let Some(why) = &f.unchecked {
        Status::Unchecked(why.clone())
    } else if !checks.is_empty() {
        if checks.iter().all(|(_, v)| v.pass) {
            Status::Pass
        } else {
            Status::Fail
        }
    } else if let Some(r) =
        results.iter().find(|r| r.error.is_some() && r.findings.iter().flatten().any(|x| *x == f.id))
    {
        Status::NotRun(format!("{}: {}", r.file, r.error.clone().unwrap_or_default()))
    } else if results.iter().any(|r| r.dropped.contains(&f.id)) {
        Status::FullRunOnly
    } else if let Some(r) = results.iter().find(|r| r.error.is_some()) {
        Status::NotRun(format!("{}: {}", r.file, r.error.clone().unwrap_or_default()))
    } else {
        // Listed as checked, yet no check ran: nothing measured is not a pass.
        Status::Fail
    };
    Row { id: f.id.clone(), line: f.line, finding: f.finding.clone(), partial: f.partial.clone(), status, checks }
}

/// The verdicts of a seed's comparisons across studies ([`Compare`]), one per checked cell,
/// with `expect` the comparison's position: each cell of `study` (its parameters, its
/// metric's median) against the cell of `against` with its values on every axis both have.
/// `medians` gives each study's cells by file (`None`: the study did not run).
pub fn compare(compares: &[Compare], medians: &dyn Fn(&str, &str) -> Option<Vec<CellMedian>>) -> Vec<Verdict> {
    let mut out = Vec::new();
    for (i, c) in compares.iter().enumerate() {
        let text = format!(
            "{} of {} {} × {} of {} at equal settings",
            c.metric,
            c.study,
            match (c.min, c.max) {
                (Some(lo), Some(hi)) => format!("within {lo}–{hi}"),
                (Some(lo), None) => format!("≥ {lo}"),
                (None, hi) => format!("≤ {}", hi.unwrap_or(f64::INFINITY)),
            },
            c.metric,
            c.against
        );
        let verdict = |cells: String, pass, measured: Option<f64>, bound: Option<f64>, note: &str| Verdict {
            expect: i as u32,
            text: text.clone(),
            cells,
            pass,
            measured,
            bound,
            margin: measured.zip(bound).map(|(m, b)| if c.min == Some(b) { m / b - 1.0 } else { 1.0 - m / b }),
            note: [c.why.as_str(), note].iter().filter(|s| !s.is_empty()).cloned().collect::<Vec<_>>().join(" — "),
            ..Verdict::default()
        };
        let (Some(a), Some(b)) = (medians(&c.study, &c.metric), medians(&c.against, &c.metric)) else {
            out.push(verdict(String::new(), false, None, None, "a study of it did not run"));
            continue;
        };
        if a.is_empty() {
            out.push(verdict(String::new(), false, None, None, "no stored cell"));
        }
        for (params, x) in &a {
            let label = params.iter().map(|(k, v)| format!("{k} = {}", fmt_value(k, v))).collect::<Vec<_>>().join(", ");
            let twin = b.iter().find(|(o, _)| params.iter().all(|(k, v)| o.get(k).is_none_or(|w| w == v)));
            let (Some(x), Some((_, Some(y)))) = (x, twin) else {
                let why =
                    if twin.is_none() { "no cell with these settings in the other study" } else { "not measured" };
                out.push(verdict(label, false, None, None, why));
                continue;
            };
            let r = x / y;
            let pass = c.min.is_none_or(|lo| r >= lo) && c.max.is_none_or(|hi| r <= hi);
            // The nearer bound is reported.
            let bound = match (c.min, c.max) {
                (Some(lo), Some(hi)) => Some(if r / lo < hi / r { lo } else { hi }),
                (lo, hi) => lo.or(hi),
            };
            out.push(verdict(label, pass, Some(r), bound, ""));
        }
    }
    out
}

/// The verdicts of a mesh run from the events central raised (their texts, `src→dst metric
/// …`): exactly one throughput event on the changed pair, none on any other.
pub fn mesh_verdicts(m: &MeshRun, events: &[String]) -> Vec<Verdict> {
    let throughput = |e: &&String| e.split_whitespace().nth(1) == Some("throughput");
    let on_pair = |e: &&String| e.split_whitespace().next() == Some(m.pair.as_str());
    let mine: Vec<&String> = events.iter().filter(throughput).filter(on_pair).collect();
    let others: Vec<&String> = events.iter().filter(throughput).filter(|e| !on_pair(e)).collect();
    let listed = |v: &[&String]| v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("; ");
    let cells =
        format!("mesh on {}, `net set {}` at {:.0} % of {:.0} s", m.net, m.change.join(" "), m.at * 100.0, m.seconds);
    let v = |text: String, n: usize, want: usize, list: String| Verdict {
        expect: 0,
        text,
        cells: cells.clone(),
        pass: n == want,
        measured: Some(n as f64),
        bound: Some(want as f64),
        note: [m.why.clone(), list].into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>().join(" — "),
        ..Verdict::default()
    };
    vec![
        v(format!("throughput events on {} = 1", m.pair), mine.len(), 1, listed(&mine)),
        v("throughput events on the other pairs = 0".into(), others.len(), 0, listed(&others)),
    ]
}

/// A stored cell's parameters.
pub type Params = std::collections::BTreeMap<String, serde_json::Value>;

/// A stored cell's parameters and a metric's median in it (`None`: not measured).
pub type CellMedian = (Params, Option<f64>);

/// A seed's counts: (findings passed, failed, unchecked, full run only, not run) and
/// (checks held, checks in all).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Findings whose every check held.
    pub passed: usize,
    /// Findings with a failed check.
    pub failed: usize,
    /// Findings no check states.
    pub unchecked: usize,
    /// Findings checked only in the full run.
    pub full_run_only: usize,
    /// Findings whose study did not run.
    pub not_run: usize,
    /// Checks that held.
    pub checks_held: usize,
    /// Checks evaluated.
    pub checks: usize,
}

/// Counts the table's rows.
pub fn counts(rows: &[Row]) -> Counts {
    let mut c = Counts::default();
    for r in rows {
        match r.status {
            Status::Pass => c.passed += 1,
            Status::Fail => c.failed += 1,
            Status::Unchecked(_) => c.unchecked += 1,
            Status::FullRunOnly => c.full_run_only += 1,
            Status::NotRun(_) => c.not_run += 1,
        }
        c.checks += r.checks.len();
        c.checks_held += r.checks.iter().filter(|(_, v)| v.pass).count();
    }
    c
}

impl Counts {
    /// The seed's summary line: `seed 002: 11 of 12 findings held (31 of 33 checks), 1 FAILED; 3 not checkable`.
    pub fn line(&self, id: &str) -> String {
        let checked = self.passed + self.failed;
        let mut s = format!(
            "seed {id}: {} of {checked} checked findings held ({} of {} checks)",
            self.passed, self.checks_held, self.checks
        );
        if self.failed > 0 {
            s += &format!(", {} FAILED", self.failed);
        }
        if self.not_run > 0 {
            s += &format!(", {} not run", self.not_run);
        }
        if self.full_run_only > 0 {
            s += &format!("; {} checked only in the full run", self.full_run_only);
        }
        s += &format!("; {} not checkable on an emulator", self.unchecked);
        s
    }

    /// Whether the seed reproduced: no check failed and every study ran.
    pub fn ok(&self) -> bool {
        self.failed == 0 && self.not_run == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::parse;

    fn seed() -> Seed {
        parse(
            r#"[[seed]]
id = "002"
title = "t"
file = "f"
studies = ["a.toml", "b.toml"]
[[seed.finding]]
id = "002-1"
line = 1
finding = "a"
[[seed.finding]]
id = "002-2"
line = 2
finding = "b"
[[seed.finding]]
id = "002-3"
line = 3
finding = "c"
[[seed.finding]]
id = "002-N1"
line = 4
finding = "d"
unchecked = "policy"
"#,
        )
        .unwrap()
        .remove(0)
    }

    fn v(expect: u32, pass: bool) -> Verdict {
        Verdict { expect, pass, ..Verdict::default() }
    }

    #[test]
    fn each_finding_gets_its_checks_from_every_study() {
        let a = StudyResult {
            file: "a.toml".into(),
            findings: vec![Some("002-1".into()), Some("002-2".into()), None],
            verdicts: vec![v(0, true), v(1, true), v(2, false)],
            ..StudyResult::default()
        };
        let b = StudyResult {
            file: "b.toml".into(),
            findings: vec![Some("002-2".into())],
            verdicts: vec![v(0, false)],
            dropped: vec!["002-3".into()],
            ..StudyResult::default()
        };
        let r = rows(&seed(), &[a, b]);
        assert_eq!(r[0].status, Status::Pass);
        assert_eq!(r[1].status, Status::Fail, "one of its two checks failed");
        assert_eq!(r[1].checks.len(), 2);
        assert_eq!(r[2].status, Status::FullRunOnly);
        assert_eq!(r[3].status, Status::Unchecked("policy".into()));
        let c = counts(&r);
        assert_eq!((c.passed, c.failed, c.unchecked, c.full_run_only, c.checks_held, c.checks), (1, 1, 1, 1, 2, 3));
        assert!(!c.ok());
        assert!(c.line("002").contains("1 of 2 checked findings held (2 of 3 checks), 1 FAILED"), "{}", c.line("002"));
    }

    #[test]
    fn a_study_that_did_not_run_and_a_check_that_never_ran_are_not_passes() {
        let a = StudyResult {
            file: "a.toml".into(),
            findings: vec![Some("002-1".into())],
            error: Some("interrupted".into()),
            ..StudyResult::default()
        };
        let r = rows(&seed(), &[a]);
        assert!(matches!(&r[0].status, Status::NotRun(w) if w.contains("interrupted")));
        let r = rows(&seed(), &[StudyResult { file: "a.toml".into(), ..StudyResult::default() }]);
        assert_eq!(r[0].status, Status::Fail);
        assert!(!counts(&r).ok());
    }

    #[test]
    fn a_comparison_pairs_cells_of_equal_settings_and_bounds_their_ratio() {
        let c = Compare {
            finding: "001-8".into(),
            metric: "goodput".into(),
            study: "copy.toml".into(),
            against: "tput.toml".into(),
            min: Some(0.7),
            max: Some(1.05),
            why: "same windows".into(),
        };
        let p =
            |s: u32, w: u32| -> Params { [("streams".to_string(), s.into()), ("window".to_string(), w.into())].into() };
        let copy =
            vec![(p(1, 65536), Some(9e6)), (p(3, 65536), Some(40e6)), (p(8, 65536), None), (p(1, 262144), Some(1e6))];
        let tput = vec![(p(3, 65536), Some(30e6)), (p(1, 65536), Some(10e6)), (p(8, 65536), Some(80e6))];
        let files = |f: &str, _: &str| match f {
            "copy.toml" => Some(copy.clone()),
            "tput.toml" => Some(tput.clone()),
            _ => None,
        };
        let v = compare(std::slice::from_ref(&c), &files);
        assert_eq!(v.len(), 4);
        // 9 of 10: inside, nearer the ceiling (by ratio: 1.05 / 0.9 < 0.9 / 0.7).
        assert!(v[0].pass && (v[0].measured.unwrap() - 0.9).abs() < 1e-12 && v[0].bound == Some(1.05), "{:?}", v[0]);
        assert!((v[0].margin.unwrap() - (1.0 - 0.9 / 1.05)).abs() < 1e-12);
        assert_eq!(v[0].cells, "streams = 1, window = 64.0 KiB");
        // A copy faster than iperf at the same windows is a wrong measurement.
        assert!(!v[1].pass && v[1].bound == Some(1.05), "{:?}", v[1]);
        // Nothing measured, or nothing to compare with, is no pass.
        assert!(!v[2].pass && v[2].note.contains("not measured"), "{:?}", v[2]);
        assert!(!v[3].pass && v[3].note.contains("no cell with these settings"), "{:?}", v[3]);
        let v = compare(&[Compare { against: "gone.toml".into(), ..c }], &files);
        assert!(v.len() == 1 && !v[0].pass && v[0].note.contains("did not run"));
    }

    #[test]
    fn a_mesh_run_needs_one_throughput_event_on_its_pair_and_none_elsewhere() {
        let m = MeshRun {
            finding: "001-6".into(),
            net: "umich-2001".into(),
            hosts: vec!["pharlap".into(), "speedy".into()],
            interval: "12s".into(),
            duration: "3s".into(),
            seconds: 180.0,
            at: 0.5,
            change: vec!["abilene-umich-gw".into(), "rate_ab=800k".into()],
            pair: "pharlap→speedy".into(),
            why: "a level shift".into(),
        };
        let drop = "pharlap→speedy throughput 9.6 → 0.7 Mbit/s since 18:03 UTC (3 tests)".to_string();
        let rtt = "speedy→pharlap rtt 67.1 → 90.2 ms since 18:03 UTC (5 summaries)".to_string();
        let v = mesh_verdicts(&m, &[drop.clone(), rtt.clone()]);
        assert!(v.iter().all(|x| x.pass), "{v:?}");
        assert!(v[0].note.contains("9.6 → 0.7"), "{}", v[0].note);
        // No event, two events, or one on the pair not changed: each fails.
        assert!(!mesh_verdicts(&m, std::slice::from_ref(&rtt))[0].pass);
        assert!(!mesh_verdicts(&m, &[drop.clone(), drop.clone()])[0].pass);
        let other = "speedy→pharlap throughput 9.6 → 4.0 Mbit/s since 18:03 UTC (3 tests)".to_string();
        let v = mesh_verdicts(&m, &[drop, other]);
        assert!(v[0].pass && !v[1].pass && v[1].measured == Some(1.0), "{v:?}");
    }
}
