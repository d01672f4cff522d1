//! `wanperf reproduce`: the five seed studies re-run on their emulated paths and networks,
//! every checkable finding checked.
//!
//! Pure: [`registry`] (scenarios/seeds.toml: each seed's studies, published numbers and
//! findings, each with its checks — the `[[expect]]` entries tagged with its id — or the
//! reason it has none), [`findings`] (the findings table from the studies' verdicts) and
//! [`page`] (the seed's self-contained HTML report). The shell, [`run`], runs the studies
//! with the study runner into the archive and writes the reports.

#![forbid(unsafe_code)]

pub mod findings;
pub mod page;
pub mod registry;
pub mod run;

include!(concat!(env!("OUT_DIR"), "/scenarios.rs"));

#[cfg(test)]
mod tests {
    use super::*;

    /// The built-in registry agrees with the built-in study files: every finding has a check
    /// or a reason, every check names a listed finding, and every seed study file is in a seed.
    #[test]
    fn the_built_in_registry_and_studies_agree() {
        let text = |n: &str| SCENARIOS.iter().find(|(f, _)| *f == n).map(|(_, t)| t.to_string());
        let seeds = registry::parse(&text("seeds.toml").expect("scenarios/seeds.toml")).unwrap();
        assert_eq!(seeds.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(), ["000", "001", "002", "003", "004"]);
        for s in &seeds {
            let p = registry::problems(s, &text);
            assert!(p.is_empty(), "{p:#?}");
        }
        for (f, _) in SCENARIOS.iter().filter(|(f, _)| f.starts_with("seed") && *f != "seeds.toml") {
            assert!(seeds.iter().any(|s| s.studies.iter().any(|x| x == f)), "{f} is in no seed of seeds.toml");
        }
    }
}
