//! A seed's findings table, pure: each finding with the verdicts of the checks that state it
//! (from every study of the seed), or why it has none.

use crate::registry::{Finding, Seed};
use serde::Serialize;
use wanperf_archive::Verdict;

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
}
