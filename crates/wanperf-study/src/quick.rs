//! A study's reduced grid: the `[quick]` table of a study file, merged over the file
//! (`wanperf study run --quick`, `wanperf reproduce --quick`).
//!
//! ```toml
//! [quick]
//! measure.duration = "8s"      # a value replaces the file's
//! sweep.streams = [1, 20]      # an axis's values replace its list
//! drop = ["002-7"]             # findings whose [[expect]] entries need the full run
//! ```
//!
//! The merged text is a study file like any other, so it is parsed, stored with the run and
//! re-checked (`study check`) exactly as the full one.

use crate::spec::StudyError;
use toml_edit::{DocumentMut, Item, TableLike};
use wanperf_toml::err;

/// A study's reduced grid.
#[derive(Debug, Clone, PartialEq)]
pub struct Quick {
    /// The study text with its `[quick]` table merged in and removed.
    pub text: String,
    /// The findings whose `[[expect]]` entries it removed (`drop`): checked in the full run only.
    pub dropped: Vec<String>,
}

/// The study's reduced grid; `None` when it has no `[quick]` table.
pub fn apply(text: &str) -> Result<Option<Quick>, StudyError> {
    let mut doc: DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        let line = e.span().map_or(0, |s| text[..s.start.min(text.len())].lines().count().max(1));
        err(line, e.message().trim().to_string())
    })?;
    let Some(quick) = doc.remove("quick") else { return Ok(None) };
    let Some(quick) = quick.as_table_like() else {
        return Err(err(0, "`quick` must be a table of the values a quick run changes"));
    };
    let mut dropped = Vec::new();
    for (key, item) in quick.iter() {
        if key == "drop" {
            dropped = strings(item).ok_or_else(|| err(0, "[quick] `drop` is a list of findings (e.g. [\"002-7\"])"))?;
            drop_findings(&mut doc, &dropped)?;
            continue;
        }
        merge(doc.as_table_mut(), key, item, key)?;
    }
    Ok(Some(Quick { text: doc.to_string(), dropped }))
}

fn strings(item: &Item) -> Option<Vec<String>> {
    item.as_array()?.iter().map(|v| v.as_str().map(str::to_string)).collect()
}

/// Sets `key` of `into` to `item`, descending into tables so that only leaves are replaced.
fn merge(into: &mut dyn TableLike, key: &str, item: &Item, path: &str) -> Result<(), StudyError> {
    match item.as_table_like() {
        // A table (also a dotted key's or an inline one) merges into the file's table of that name.
        Some(t) if !item.is_inline_table() || into.get(key).is_some_and(|x| x.is_table_like()) => {
            if into.get(key).is_none() {
                into.insert(key, Item::Table(toml_edit::Table::new()));
            }
            let target = into
                .get_mut(key)
                .and_then(|x| x.as_table_like_mut())
                .ok_or_else(|| err(0, format!("[quick] `{path}` is a table, and the study's `{path}` is a value")))?;
            for (k, v) in t.iter() {
                merge(target, k, v, &format!("{path}.{k}"))?;
            }
            Ok(())
        }
        _ => {
            if into.get(key).is_some_and(|x| x.is_table_like()) && !item.is_table_like() {
                return Err(err(0, format!("[quick] `{path}` is a value, and the study's `{path}` is a table")));
            }
            let value = match item {
                Item::Value(v) => Item::Value(v.clone().decorated("", "")),
                other => other.clone(),
            };
            into.insert(key, value);
            Ok(())
        }
    }
}

/// Removes the `[[expect]]` entries that check one of `ids`.
fn drop_findings(doc: &mut DocumentMut, ids: &[String]) -> Result<(), StudyError> {
    let Some(expects) = doc.get_mut("expect").and_then(|e| e.as_array_of_tables_mut()) else {
        return Err(err(0, "[quick] `drop` names findings, and the study has no [[expect]]"));
    };
    for id in ids {
        if !expects.iter().any(|t| t.get("finding").and_then(|f| f.as_str()) == Some(id.as_str())) {
            return Err(err(0, format!("[quick] drops finding `{id}`, which no [[expect]] checks")));
        }
    }
    expects.retain(|t| !t.get("finding").and_then(|f| f.as_str()).is_some_and(|f| ids.iter().any(|i| i == f)));
    if expects.is_empty() {
        doc.remove("expect");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"name = "s"
[path]
rtt = "10ms"
[measure]
kind = "tput"
duration = "60s"
[sweep]
streams = [1, 2, 4, 8]
window = ["64k", "1M"]

[[expect]]
metric = "goodput"
finding = "001-4"
max = "rate"

[[expect]]
metric = "goodput"
finding = "001-5"
max = "rate"

[quick]
measure.duration = "5s"
sweep.streams = [1, 8]
run.repeats = 1
drop = ["001-5"]
"#;

    #[test]
    fn quick_values_replace_the_files_and_dropped_findings_go() {
        let q = apply(FILE).unwrap().unwrap();
        assert_eq!(q.dropped, vec!["001-5".to_string()]);
        let doc: toml::Table = toml::from_str(&q.text).unwrap();
        assert_eq!(doc["measure"]["duration"].as_str(), Some("5s"));
        assert_eq!(doc["measure"]["kind"].as_str(), Some("tput"), "the rest stays");
        assert_eq!(doc["sweep"]["streams"].as_array().unwrap().len(), 2);
        assert_eq!(doc["sweep"]["window"].as_array().unwrap().len(), 2);
        assert_eq!(doc["run"]["repeats"].as_integer(), Some(1));
        let ex = doc["expect"].as_array().unwrap();
        assert_eq!(ex.len(), 1);
        assert_eq!(ex[0]["finding"].as_str(), Some("001-4"));
        assert!(doc.get("quick").is_none());
    }

    #[test]
    fn no_quick_table_is_none_and_bad_ones_are_errors() {
        assert_eq!(apply("name = \"s\"\n[measure]\nkind = \"tput\"\n").unwrap(), None);
        let e = apply(&FILE.replace("drop = [\"001-5\"]", "drop = [\"009-1\"]")).unwrap_err();
        assert!(e.message.contains("009-1"), "{}", e.message);
        let e = apply(&FILE.replace("run.repeats = 1", "path.rtt.x = 1")).unwrap_err();
        assert!(e.message.contains("path.rtt"), "{}", e.message);
        assert!(apply("name = \n").is_err());
    }
}
