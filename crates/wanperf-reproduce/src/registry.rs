//! The seed registry (`scenarios/seeds.toml`), pure: each seed's studies, its published
//! numbers and every finding with its check or the reason it has none.

use serde::Deserialize;
use std::collections::BTreeSet;
use wanperf_toml::err;

/// One seed study.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Seed {
    /// `000` … `004`.
    pub id: String,
    /// What it studied.
    pub title: String,
    /// Its file in the seeds folder.
    pub file: String,
    /// Its study files (in scenarios/), run in this order.
    pub studies: Vec<String>,
    /// The seed's own numbers, shown beside the new run's.
    #[serde(default)]
    pub published: Vec<Published>,
    /// Every finding of the seed.
    #[serde(default, rename = "finding")]
    pub findings: Vec<Finding>,
    /// Checks across two of its studies, cell by cell.
    #[serde(default, rename = "compare")]
    pub compares: Vec<Compare>,
    /// Monitoring meshes run after its studies, with the events they must raise.
    #[serde(default, rename = "mesh")]
    pub meshes: Vec<MeshRun>,
}

/// A monitoring mesh on an emulated network whose link changes part way through, and the
/// event it must raise: throughput tests both ways between every pair of `hosts` (an agent
/// on each, central on the first), `net set NET change…` at `at` of the run, then exactly
/// one throughput event on `pair` and none on the others (seed 001's drop, seen as one).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeshRun {
    /// The finding it states.
    pub finding: String,
    /// The `wanperf net` preset.
    pub net: String,
    /// Its hosts that run an agent.
    pub hosts: Vec<String>,
    /// How often each pair's throughput is tested (`12s`).
    pub interval: String,
    /// How long each test runs (`3s`).
    pub duration: String,
    /// How long the mesh runs, s.
    pub seconds: f64,
    /// When the link changes, as a share of the run.
    pub at: f64,
    /// `wanperf net set` arguments after the network: the link, then `key=value`s.
    pub change: Vec<String>,
    /// The pair the change must show on, `src→dst`.
    pub pair: String,
    /// Why.
    pub why: String,
}

impl MeshRun {
    /// How long it takes, s: its run and about 15 s to bring the network, central and the
    /// agents up and down.
    pub fn estimate_s(&self) -> f64 {
        self.seconds + 15.0
    }
}

/// A check across two studies of a seed: a metric of each cell of `study` against the same
/// metric of the cell of `against` with the same values on the axes both have, as a ratio
/// (`copy ≤ 1.05 × tput` at equal streams and windows, seed 001's bbcp against iperf).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Compare {
    /// The finding it states.
    pub finding: String,
    /// The metric (an `[[expect]]` metric name), of both.
    pub metric: String,
    /// The study whose cells are checked.
    pub study: String,
    /// The study they are compared with.
    pub against: String,
    /// The lowest ratio study / against that holds.
    #[serde(default)]
    pub min: Option<f64>,
    /// The highest.
    #[serde(default)]
    pub max: Option<f64>,
    /// Why it must hold.
    pub why: String,
}

/// A number the seed published, and where the new run measures the same thing.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Published {
    /// The study file that measures it.
    pub study: String,
    /// The metric (an `[[expect]]` metric name).
    pub metric: String,
    /// The cells (axis → value as written in the study); the median over them is shown.
    #[serde(rename = "where", default)]
    pub select: toml::Table,
    /// The seed's number, as it states it.
    pub value: String,
    /// Its line in the seed.
    pub line: u32,
    /// The seed's words.
    pub quote: String,
}

impl Published {
    /// The cells as (axis, value as written).
    pub fn select(&self) -> Vec<(String, String)> {
        self.select
            .iter()
            .map(|(k, v)| {
                let s = match v {
                    toml::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (k.clone(), s)
            })
            .collect()
    }
}

/// A finding of a seed: checked by the `[[expect]]` entries whose `finding` is its id, or not
/// checkable, with the reason.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Finding {
    /// `002-3` (`002-N1` for findings the seed states without a result to check).
    pub id: String,
    /// Its line in the seed.
    pub line: u32,
    /// The finding in a sentence.
    pub finding: String,
    /// Why no check states it (on an emulator, or what wanperf lacks).
    #[serde(default)]
    pub unchecked: Option<String>,
    /// What part of the finding its checks do not cover.
    #[serde(default)]
    pub partial: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    seed: Vec<Seed>,
}

/// Parses the registry; errors name their line.
pub fn parse(text: &str) -> Result<Vec<Seed>, wanperf_toml::Error> {
    let f: File = wanperf_toml::parse(text)?;
    let mut ids = BTreeSet::new();
    for s in &f.seed {
        if !ids.insert(s.id.clone()) {
            return Err(err(0, format!("seed {} is listed twice", s.id)));
        }
        if s.studies.is_empty() {
            return Err(err(0, format!("seed {} names no study", s.id)));
        }
        let mut fids = BTreeSet::new();
        for x in &s.findings {
            if !fids.insert(x.id.clone()) {
                return Err(err(0, format!("finding {} is listed twice", x.id)));
            }
        }
        if let Some(p) = s.published.iter().find(|p| !s.studies.contains(&p.study)) {
            return Err(err(0, format!("seed {}: a published number names {}, not one of its studies", s.id, p.study)));
        }
        for m in &s.meshes {
            if m.hosts.len() < 2
                || !(m.at > 0.0 && m.at < 1.0)
                || m.seconds.is_nan()
                || m.seconds < 30.0
                || m.change.is_empty()
            {
                return Err(err(
                    0,
                    format!(
                        "seed {}: the mesh for {} needs 2 hosts, 0 < at < 1, 30 s or more and a change",
                        s.id, m.finding
                    ),
                ));
            }
            if !m
                .pair
                .split_once('→')
                .is_some_and(|(a, b)| m.hosts.iter().any(|h| h == a) && m.hosts.iter().any(|h| h == b))
            {
                return Err(err(
                    0,
                    format!("seed {}: the mesh's pair `{}` is not two of its hosts (src→dst)", s.id, m.pair),
                ));
            }
        }
        for c in &s.compares {
            if let Some(f) = [&c.study, &c.against].into_iter().find(|f| !s.studies.contains(f)) {
                return Err(err(0, format!("seed {}: a comparison names {f}, not one of its studies", s.id)));
            }
            if c.min.is_none() && c.max.is_none() {
                return Err(err(0, format!("seed {}: the comparison for {} has neither min nor max", s.id, c.finding)));
            }
        }
    }
    Ok(f.seed)
}

/// The seeds named on the command line (`all` for every one), in the registry's order.
pub fn select<'a>(seeds: &'a [Seed], names: &[String]) -> Result<Vec<&'a Seed>, String> {
    if names.iter().any(|n| n == "all") {
        return Ok(seeds.iter().collect());
    }
    // `2` names seed `002`.
    let is = |s: &Seed, n: &str| s.id.trim_start_matches('0') == n.trim_start_matches('0');
    if let Some(n) = names.iter().find(|n| !seeds.iter().any(|s| is(s, n))) {
        let known = seeds.iter().map(|s| s.id.as_str()).collect::<Vec<_>>().join(", ");
        return Err(format!("no seed `{n}` (one of {known}, or all)"));
    }
    Ok(seeds.iter().filter(|s| names.iter().any(|n| is(s, n))).collect())
}

/// The `finding` ids of a study text's `[[expect]]` entries, in order (`None` for an untagged one).
pub fn expect_findings(text: &str) -> Vec<Option<String>> {
    let Ok(t) = text.parse::<toml::Table>() else { return Vec::new() };
    t.get("expect")
        .and_then(|e| e.as_array())
        .map(|a| a.iter().map(|x| x.get("finding").and_then(|f| f.as_str()).map(str::to_string)).collect())
        .unwrap_or_default()
}

/// What is wrong between a seed's registry entry and its study files (`text` finds a study's
/// text): a finding with neither a check nor a reason, a check of a finding not listed, a
/// study missing. Empty when they agree.
pub fn problems(seed: &Seed, text: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut tagged = BTreeSet::new();
    for st in &seed.studies {
        match text(st) {
            None => out.push(format!("seed {}: study {st} not found", seed.id)),
            Some(t) => tagged.extend(expect_findings(&t).into_iter().flatten()),
        }
    }
    tagged.extend(seed.compares.iter().map(|c| c.finding.clone()));
    tagged.extend(seed.meshes.iter().map(|m| m.finding.clone()));
    for f in &seed.findings {
        match (&f.unchecked, tagged.contains(&f.id)) {
            (None, false) => out.push(format!("finding {} has no check and no reason why", f.id)),
            (Some(_), true) => out.push(format!("finding {} is checked and also said to be unchecked", f.id)),
            _ => {}
        }
    }
    for id in &tagged {
        if !seed.findings.iter().any(|f| f.id == *id) {
            out.push(format!("seed {}: a check names finding {id}, which the registry does not list", seed.id));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const REG: &str = r#"
[[seed]]
id = "002"
title = "OSCARS"
file = "002_x.txt"
studies = ["a.toml"]
[[seed.published]]
study = "a.toml"
metric = "goodput"
where = { policer = "1M,1MB,port=test", streams = 20 }
value = "874 kbit/s"
line = 24
quote = "874 kbits/s"
[[seed.finding]]
id = "002-1"
line = 20
finding = "one stream"
[[seed.finding]]
id = "002-N1"
line = 34
finding = "correlation"
unchecked = "sign not guaranteed"
"#;

    const STUDY: &str = "name = \"a\"\n[measure]\nkind = \"tput\"\n[[expect]]\nmetric = \"goodput\"\nfinding = \"002-1\"\nmax = \"rate\"\n[[expect]]\nmetric = \"goodput\"\nmax = \"rate\"\n";

    #[test]
    fn a_registry_and_its_studies_agree() {
        let seeds = parse(REG).unwrap();
        assert_eq!(
            seeds[0].published[0].select(),
            vec![("policer".to_string(), "1M,1MB,port=test".to_string()), ("streams".to_string(), "20".to_string())]
        );
        assert_eq!(expect_findings(STUDY), vec![Some("002-1".to_string()), None]);
        assert!(problems(&seeds[0], &|_| Some(STUDY.to_string())).is_empty());
        let p = problems(&seeds[0], &|_| Some(STUDY.replace("002-1", "002-9")));
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p[0].contains("002-1") && p[1].contains("002-9"));
        assert!(problems(&seeds[0], &|_| None)[0].contains("not found"));
    }

    #[test]
    fn seeds_are_selected_by_id_or_all() {
        let seeds = parse(REG).unwrap();
        assert_eq!(select(&seeds, &["2".into()]).unwrap().len(), 1);
        assert_eq!(select(&seeds, &["all".into()]).unwrap().len(), 1);
        assert!(select(&seeds, &["007".into()]).unwrap_err().contains("one of 002"));
        assert!(parse(&format!("{REG}{}", REG.replace("002_x", "y"))).unwrap_err().message.contains("twice"));
    }
}
