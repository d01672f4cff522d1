//! The one reader of wanperf's TOML files — topologies (`wanperf net`), meshes (`wanperf
//! mesh`) and studies (`wanperf study`): every error names the line of the file that caused
//! it, and every table is read key by key, each key at most once, so that a key nobody read
//! (a typo, an option of another table) is an error with its line, not silently ignored.
//!
//! Pure: text in, values or an [`Error`] out.

#![forbid(unsafe_code)]

use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::ops::RangeInclusive;
pub use toml::{Spanned, Value};
use wanperf_units as units;

/// A bad file: the line (1-based; 0 when the error concerns the whole file) and what is wrong,
/// one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", render(*.line, .message))]
pub struct Error {
    /// Line in the file (0: the whole file).
    pub line: usize,
    /// What is wrong, one line.
    pub message: String,
}

fn render(line: usize, message: &str) -> String {
    if line > 0 {
        format!("line {line}: {message}")
    } else {
        message.to_string()
    }
}

/// An [`Error`] at `line`.
pub fn err(line: usize, message: impl Into<String>) -> Error {
    Error { line, message: message.into() }
}

/// A table as read: keys and values with where they are.
pub type Table = BTreeMap<Spanned<String>, Spanned<Value>>;

/// Byte offsets of a text to 1-based line numbers.
#[derive(Debug, Clone, Copy)]
pub struct Lines<'a>(&'a str);

impl<'a> Lines<'a> {
    /// The lines of `text`.
    pub fn new(text: &'a str) -> Lines<'a> {
        Lines(text)
    }

    /// The line of byte `offset`.
    pub fn of(&self, offset: usize) -> usize {
        self.0[..offset.min(self.0.len())].matches('\n').count() + 1
    }

    /// The line where `s` starts.
    pub fn at<T>(&self, s: &Spanned<T>) -> usize {
        self.of(s.span().start)
    }
}

/// Deserializes `text` into `T` (whose tables are usually [`Spanned`] [`Table`]s, read with
/// [`Reader`]); a syntax error or an unknown top-level key names its line.
pub fn parse<T: DeserializeOwned>(text: &str) -> Result<T, Error> {
    let lines = Lines(text);
    toml::from_str(text).map_err(|e| {
        let line = e.span().map_or(0, |s| lines.of(s.start));
        err(line, e.message().trim().to_string())
    })
}

/// A TOML scalar as the command line would write it: strings bare, numbers and booleans as
/// text; None for arrays, tables and dates.
pub fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Integer(i) => Some(i.to_string()),
        Value::Float(f) => Some(f.to_string()),
        Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Seconds for a range's ends in messages: whole days and hours as such.
pub fn fmt_secs(s: f64) -> String {
    const DAY: f64 = 86_400.0;
    if s >= DAY && s % DAY == 0.0 {
        format!("{} d", s / DAY)
    } else if s >= 3600.0 && s % 3600.0 == 0.0 {
        format!("{} h", s / 3600.0)
    } else {
        format!("{s} s")
    }
}

/// Reads one table's keys, each at most once; [`Reader::finish`] complains about leftovers.
#[derive(Debug, Clone)]
pub struct Reader {
    /// The table's line.
    pub line: usize,
    what: String,
    /// (key, its line, value), in file order.
    entries: Vec<(String, usize, Value)>,
}

impl Reader {
    /// The reader of table `t`, a `what` (for messages: "this {what} has no `name`").
    pub fn new(lines: &Lines<'_>, t: Spanned<Table>, what: &str) -> Reader {
        let line = lines.at(&t);
        Reader::of(lines, t.into_inner(), line, what)
    }

    /// The reader of a table whose own position is not kept, at `line`.
    pub fn of(lines: &Lines<'_>, t: Table, line: usize, what: &str) -> Reader {
        let mut entries: Vec<(String, usize, Value)> = t
            .into_iter()
            .map(|(k, v)| {
                let l = lines.at(&k);
                (k.into_inner(), l, v.into_inner())
            })
            .collect();
        entries.sort_by_key(|e| e.1);
        Reader { line, what: what.to_string(), entries }
    }

    /// Names the table anew for later messages (once a `type` key has said what it is).
    pub fn set_what(&mut self, what: impl Into<String>) {
        self.what = what.into();
    }

    /// The keys not yet taken and their lines, in file order.
    pub fn keys(&self) -> impl Iterator<Item = (&str, usize)> {
        self.entries.iter().map(|e| (e.0.as_str(), e.1))
    }

    /// The value of `key` and its line, taken out.
    pub fn take(&mut self, key: &str) -> Option<(usize, Value)> {
        let i = self.entries.iter().position(|e| e.0 == key)?;
        let (_, l, v) = self.entries.remove(i);
        Some((l, v))
    }

    /// Every key not yet taken, in file order, taken out (for tables whose keys are open:
    /// link options, sweep axes); [`Reader::put_back`] returns the ones not used.
    pub fn take_rest(&mut self) -> Vec<(String, usize, Value)> {
        std::mem::take(&mut self.entries)
    }

    /// Returns entries taken with [`Reader::take_rest`] that were not used.
    pub fn put_back(&mut self, rest: Vec<(String, usize, Value)>) {
        self.entries.extend(rest);
        self.entries.sort_by_key(|e| e.1);
    }

    /// "this {what} has no `key`{hint}", at the table's line.
    pub fn missing(&self, key: &str, hint: &str) -> Error {
        err(self.line, format!("this {} has no `{key}`{hint}", self.what))
    }

    /// A TOML string.
    pub fn string(&mut self, key: &str) -> Result<Option<(usize, String)>, Error> {
        match self.take(key) {
            None => Ok(None),
            Some((l, Value::String(s))) => Ok(Some((l, s))),
            Some((l, _)) => Err(err(l, format!("`{key}` must be a string"))),
        }
    }

    /// A TOML string that must be there.
    pub fn required(&mut self, key: &str) -> Result<(usize, String), Error> {
        self.string(key)?.ok_or_else(|| self.missing(key, ""))
    }

    /// Any scalar, as text ([`scalar`]): for values with units, names that may look like
    /// numbers.
    pub fn text(&mut self, key: &str) -> Result<Option<(usize, String)>, Error> {
        match self.take(key) {
            None => Ok(None),
            Some((l, v)) => {
                scalar(&v).map(|s| Some((l, s))).ok_or_else(|| err(l, format!("`{key}` must be a single value")))
            }
        }
    }

    /// Any scalar as text that must be there.
    pub fn required_text(&mut self, key: &str) -> Result<(usize, String), Error> {
        self.text(key)?.ok_or_else(|| self.missing(key, ""))
    }

    /// An integer within `range`.
    pub fn uint(&mut self, key: &str, range: RangeInclusive<u64>) -> Result<Option<u64>, Error> {
        match self.take(key) {
            None => Ok(None),
            Some((_, Value::Integer(i))) if i >= 0 && range.contains(&(i as u64)) => Ok(Some(i as u64)),
            Some((l, _)) => Err(err(l, format!("`{key}` must be an integer in {}–{}", range.start(), range.end()))),
        }
    }

    /// A number within `range`.
    pub fn float(&mut self, key: &str, range: RangeInclusive<f64>) -> Result<Option<f64>, Error> {
        let (l, v) = match self.take(key) {
            None => return Ok(None),
            Some((l, Value::Integer(i))) => (l, i as f64),
            Some((l, Value::Float(f))) => (l, f),
            Some((l, _)) => return Err(err(l, format!("`{key}` must be a number"))),
        };
        if !range.contains(&v) {
            return Err(err(l, format!("`{key}` must be within {}–{}, not {v}", range.start(), range.end())));
        }
        Ok(Some(v))
    }

    /// true or false.
    pub fn boolean(&mut self, key: &str) -> Result<Option<bool>, Error> {
        match self.take(key) {
            None => Ok(None),
            Some((_, Value::Boolean(b))) => Ok(Some(b)),
            Some((l, _)) => Err(err(l, format!("`{key}` must be true or false"))),
        }
    }

    /// A list of strings.
    pub fn strings(&mut self, key: &str) -> Result<Option<(usize, Vec<String>)>, Error> {
        match self.take(key) {
            None => Ok(None),
            Some((l, Value::Array(items))) => items
                .into_iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s),
                    _ => Err(err(l, format!("`{key}` must be a list of strings"))),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(|v| Some((l, v))),
            Some((l, _)) => Err(err(l, format!("`{key}` must be a list of strings"))),
        }
    }

    /// A duration ([`units::parse_duration`]) in seconds within `range`.
    pub fn duration(&mut self, key: &str, range: RangeInclusive<f64>) -> Result<Option<(usize, f64)>, Error> {
        let Some((l, s)) = self.text(key)? else { return Ok(None) };
        let secs = units::parse_duration(&s).map_err(|e| err(l, format!("`{key}`: {e}")))?;
        if !range.contains(&secs) {
            return Err(err(
                l,
                format!("`{key}`: {s} is not within {} – {}", fmt_secs(*range.start()), fmt_secs(*range.end())),
            ));
        }
        Ok(Some((l, secs)))
    }

    /// A rate ([`units::parse_rate`]) in bit/s within `range`.
    pub fn rate(&mut self, key: &str, range: RangeInclusive<u64>) -> Result<Option<u64>, Error> {
        let Some((l, s)) = self.text(key)? else { return Ok(None) };
        let v = units::parse_rate(&s).map_err(|e| err(l, format!("`{key}`: {e}")))?;
        if !range.contains(&v) {
            return Err(err(l, format!("`{key}`: {s} is not within {} – {} bit/s", range.start(), range.end())));
        }
        Ok(Some(v))
    }

    /// A size ([`units::parse_size`]) in bytes within `range`.
    pub fn size(&mut self, key: &str, range: RangeInclusive<u64>) -> Result<Option<u64>, Error> {
        let Some((l, s)) = self.text(key)? else { return Ok(None) };
        let v = units::parse_size(&s).map_err(|e| err(l, format!("`{key}`: {e}")))?;
        if !range.contains(&v) {
            return Err(err(l, format!("`{key}`: {s} is not within {}–{} bytes", range.start(), range.end())));
        }
        Ok(Some(v))
    }

    /// Done: any key left is unknown here (`known`: the keys this table takes).
    pub fn finish(self, known: &[&str]) -> Result<(), Error> {
        match self.entries.first() {
            None => Ok(()),
            Some((k, l, _)) => {
                Err(err(*l, format!("unknown key `{k}` in a {} (known: {})", self.what, known.join(", "))))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        #[serde(default)]
        thing: Vec<Spanned<Table>>,
    }

    fn things(text: &str) -> (Lines<'_>, Vec<Spanned<Table>>) {
        (Lines::new(text), parse::<File>(text).unwrap().thing)
    }

    #[test]
    fn every_error_names_its_line() {
        let text = "[[thing]]\nname = \"a\"\nrate = \"10M\"\nsize = \"3k\"\nwait = \"2s\"\nn = 7\nok = true\ntags = [\"x\", \"y\"]\nf = 0.5\n";
        let (lines, t) = things(text);
        let mut r = Reader::new(&lines, t.into_iter().next().unwrap(), "thing");
        assert_eq!(r.line, 1);
        assert_eq!(r.required("name").unwrap(), (2, "a".into()));
        assert_eq!(r.rate("rate", 1..=u64::MAX).unwrap(), Some(10_000_000));
        assert_eq!(r.size("size", 1..=u64::MAX).unwrap(), Some(3072));
        assert_eq!(r.duration("wait", 0.0..=10.0).unwrap(), Some((5, 2.0)));
        assert_eq!(r.uint("n", 0..=10).unwrap(), Some(7));
        assert_eq!(r.boolean("ok").unwrap(), Some(true));
        assert_eq!(r.strings("tags").unwrap(), Some((8, vec!["x".into(), "y".into()])));
        assert_eq!(r.float("f", 0.0..=1.0).unwrap(), Some(0.5));
        assert_eq!(r.string("absent").unwrap(), None);
        r.finish(&[]).unwrap();
        // Wrong types and ranges, each at its key's line.
        let (lines, t) = things("[[thing]]\n\nn = 70\nname = 3\nwait = \"2m\"\nodd = 1\n");
        let mut r = Reader::new(&lines, t.into_iter().next().unwrap(), "thing");
        assert_eq!(r.uint("n", 0..=10).unwrap_err().to_string(), "line 3: `n` must be an integer in 0–10");
        assert_eq!(r.string("name").unwrap_err().to_string(), "line 4: `name` must be a string");
        assert_eq!(
            r.duration("wait", 0.0..=60.0).unwrap_err().to_string(),
            "line 5: `wait`: 2m is not within 0 s – 60 s"
        );
        assert_eq!(r.missing("kind", " (tput or ping)").to_string(), "line 1: this thing has no `kind` (tput or ping)");
        assert_eq!(
            r.finish(&["n", "name", "wait"]).unwrap_err().to_string(),
            "line 6: unknown key `odd` in a thing (known: n, name, wait)"
        );
    }

    #[test]
    fn syntax_errors_and_unknown_tables_name_their_line() {
        let e = parse::<File>("[[thing]]\nname = \n").err().unwrap();
        assert_eq!(e.line, 2, "{e}");
        let e = parse::<File>("\n\n[other]\n").err().unwrap();
        assert_eq!(e.line, 3, "{e}");
        assert_eq!(err(0, "whole file").to_string(), "whole file");
    }

    #[test]
    fn open_tables_take_the_rest_and_put_back_what_they_do_not_use() {
        let (lines, t) = things("[[thing]]\nname = \"x\"\nb = 1\na = [1, 2]\n");
        let mut r = Reader::new(&lines, t.into_iter().next().unwrap(), "thing");
        r.required("name").unwrap();
        let rest = r.take_rest();
        assert_eq!(rest.iter().map(|e| e.0.as_str()).collect::<Vec<_>>(), vec!["b", "a"]);
        r.put_back(rest.into_iter().filter(|e| e.0 == "a").collect());
        assert_eq!(r.finish(&["name"]).unwrap_err().line, 4);
        assert_eq!(scalar(&Value::Array(vec![])), None);
        assert_eq!(scalar(&Value::Boolean(true)), Some("true".into()));
    }
}
