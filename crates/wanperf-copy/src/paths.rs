//! Relative paths a server may touch under its `--root`.
//!
//! Every path that crosses the wire is relative, `/`-separated, and made only of normal
//! components: no leading `/`, no `..`, no `.` (other than a whole path of `.` meaning the
//! root itself), no empty components, no NUL, no backslash-free tricks needed — the check
//! is on components, not on strings. Symbolic links are a matter for the I/O shell, which
//! opens every component without following links.

use serde::{Deserialize, Serialize};
use std::fmt;
use thiserror::Error;

/// Why a path is refused.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum PathError {
    /// Starts with `/`.
    #[error("`{0}` is absolute; paths are relative to the server's --root")]
    Absolute(String),
    /// Has a `..` component.
    #[error("`{0}` climbs out with `..`; paths must stay inside the server's --root")]
    Parent(String),
    /// Has an empty or `.` component, or is empty.
    #[error("`{0}` is not a plain relative path (empty or `.` components)")]
    Odd(String),
    /// Has a NUL byte.
    #[error("a path contains a NUL byte")]
    Nul,
    /// Too long.
    #[error("a path is longer than {MAX_PATH} bytes")]
    Long,
}

/// Longest path accepted (Linux's PATH_MAX).
pub const MAX_PATH: usize = 4096;

/// A checked relative path; [`RelPath::root`] (`.`) is the root itself.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RelPath(String);

impl RelPath {
    /// The root itself.
    pub fn root() -> Self {
        RelPath(".".into())
    }

    /// Checks `s`. A trailing `/` is allowed and dropped; `.` and the empty string name the
    /// root.
    pub fn parse(s: &str) -> Result<Self, PathError> {
        if s.len() > MAX_PATH {
            return Err(PathError::Long);
        }
        if s.contains('\0') {
            return Err(PathError::Nul);
        }
        if s.starts_with('/') {
            return Err(PathError::Absolute(s.into()));
        }
        let t = s.trim_end_matches('/');
        if t.is_empty() || t == "." {
            return Ok(Self::root());
        }
        for c in t.split('/') {
            match c {
                ".." => return Err(PathError::Parent(s.into())),
                "" | "." => return Err(PathError::Odd(s.into())),
                _ => {}
            }
        }
        Ok(RelPath(t.into()))
    }

    /// Whether this is the root.
    pub fn is_root(&self) -> bool {
        self.0 == "."
    }

    /// `self/name` (name must be one normal component).
    pub fn join(&self, name: &str) -> Result<Self, PathError> {
        let one = RelPath::parse(name)?;
        if one.is_root() || one.0.contains('/') {
            return Err(PathError::Odd(name.into()));
        }
        Ok(if self.is_root() { one } else { RelPath(format!("{}/{}", self.0, one.0)) })
    }

    /// `self/other` for a checked relative `other`.
    pub fn join_rel(&self, other: &RelPath) -> Self {
        match (self.is_root(), other.is_root()) {
            (true, _) => other.clone(),
            (_, true) => self.clone(),
            _ => RelPath(format!("{}/{}", self.0, other.0)),
        }
    }

    /// The components (none for the root).
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.0.split('/').filter(|c| *c != ".")
    }

    /// The directory holding this path (the root for a top-level name and for the root).
    pub fn parent(&self) -> RelPath {
        match self.0.rsplit_once('/') {
            Some((dir, _)) => RelPath(dir.into()),
            None => Self::root(),
        }
    }

    /// The last component (`.` for the root).
    pub fn file_name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or(".")
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// This path with its first component replaced by `name` (one normal component): where a
    /// source's entry lands when the destination names the source ([`takes_dest_name`]).
    pub fn renamed_top(&self, name: &str) -> Result<Self, PathError> {
        let top = RelPath::root().join(name)?;
        Ok(match self.0.split_once('/') {
            _ if self.is_root() => top,
            Some((_, rest)) => RelPath(format!("{}/{rest}", top.0)),
            None => top,
        })
    }
}

/// Whether a copy's destination names its source, by the rule of scp and cp: with exactly one
/// source (not a whole root) and a destination that neither ends in `/` nor is the root, the
/// source is written *as* the destination — unless the destination turns out to be an
/// existing directory (which only the receiving end can tell), where it lands inside under its
/// own name, as do several sources always.
pub fn takes_dest_name(sources: usize, source_is_root: bool, dest: &str) -> bool {
    let d = dest.trim();
    sources == 1 && !source_is_root && !d.is_empty() && !d.ends_with('/') && d != "." && !d.ends_with("/.")
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for RelPath {
    type Error = PathError;
    fn try_from(s: String) -> Result<Self, PathError> {
        RelPath::parse(&s)
    }
}

impl From<RelPath> for String {
    fn from(p: RelPath) -> String {
        p.0
    }
}

/// Name of the partial file kept for `name` while it is being received.
pub fn partial_name(name: &str) -> String {
    format!(".{name}.wanperf-part")
}

/// Name of the journal kept beside the partial file of `name`.
pub fn journal_name(name: &str) -> String {
    format!(".{name}.wanperf-journal")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_paths_pass_and_escapes_do_not() {
        for ok in ["a", "a/b/c", "dir/", "ünïcødé/файл", "a..b", "..a", ".hidden/x"] {
            assert!(RelPath::parse(ok).is_ok(), "{ok}");
        }
        assert!(RelPath::parse("").unwrap().is_root());
        assert!(RelPath::parse("./").unwrap().is_root());
        assert_eq!(RelPath::parse("/etc/passwd"), Err(PathError::Absolute("/etc/passwd".into())));
        assert_eq!(RelPath::parse("a/../../b"), Err(PathError::Parent("a/../../b".into())));
        assert_eq!(RelPath::parse(".."), Err(PathError::Parent("..".into())));
        assert_eq!(RelPath::parse("a//b"), Err(PathError::Odd("a//b".into())));
        assert_eq!(RelPath::parse("a/./b"), Err(PathError::Odd("a/./b".into())));
        assert_eq!(RelPath::parse("a\0b"), Err(PathError::Nul));
        assert_eq!(RelPath::parse(&"x".repeat(5000)), Err(PathError::Long));
    }

    #[test]
    fn join_takes_one_component() {
        let r = RelPath::root();
        assert_eq!(r.join("a").unwrap().as_str(), "a");
        assert_eq!(r.join("a").unwrap().join("b").unwrap().as_str(), "a/b");
        assert!(r.join("a/b").is_err());
        assert!(r.join("..").is_err());
        assert!(r.join(".").is_err());
        assert_eq!(RelPath::parse("x/y").unwrap().file_name(), "y");
        assert_eq!(RelPath::parse("x/y").unwrap().components().collect::<Vec<_>>(), vec!["x", "y"]);
        assert_eq!(r.components().count(), 0);
        assert_eq!(RelPath::parse("x/y/z").unwrap().parent().as_str(), "x/y");
        assert!(RelPath::parse("x").unwrap().parent().is_root());
        assert!(r.parent().is_root());
    }

    #[test]
    fn serde_checks_on_the_way_in() {
        assert!(serde_json::from_str::<RelPath>("\"../x\"").is_err());
        assert_eq!(serde_json::from_str::<RelPath>("\"a/b\"").unwrap().as_str(), "a/b");
    }

    #[test]
    fn a_single_source_takes_the_destinations_name_as_with_scp() {
        // One source into a plain name: the name is the copy's.
        assert!(takes_dest_name(1, false, "big.dat"));
        assert!(takes_dest_name(1, false, "in/big.dat"));
        // A trailing `/`, the root, several sources, or a whole root as the source: inside.
        assert!(!takes_dest_name(1, false, "incoming/"));
        assert!(!takes_dest_name(1, false, ""));
        assert!(!takes_dest_name(1, false, "."));
        assert!(!takes_dest_name(1, false, "a/."));
        assert!(!takes_dest_name(2, false, "big.dat"));
        assert!(!takes_dest_name(1, true, "big.dat"));
        // The source's own name gives way to the destination's, down the whole tree.
        let p = |s: &str| RelPath::parse(s).unwrap();
        assert_eq!(p("run1/a/b.root").renamed_top("run9").unwrap(), p("run9/a/b.root"));
        assert_eq!(p("big.dat").renamed_top("copy.dat").unwrap(), p("copy.dat"));
        assert!(p("x").renamed_top("a/b").is_err());
        assert!(p("x").renamed_top("..").is_err());
    }
}
