//! `wanperf copy`'s paths as users write them (scp's and rsync's conventions): `HOST:PATH`
//! or `[V6]:PATH` on exactly one side, and the destination rule (an existing directory or a
//! trailing `/` receives the sources under their own names; otherwise a single source takes
//! the destination's name).

use crate::client::CopyLocal;
use std::path::{Path, PathBuf};
use wanperf_copy::paths::{takes_dest_name, RelPath};
use wanperf_copy::spec::Way;

/// Why the paths do not make a copy.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PlanError(String);

macro_rules! bail {
    ($($arg:tt)*) => {
        return Err(PlanError(format!($($arg)*)))
    };
}

/// `HOST:PATH` (or `[V6]:PATH`) → (host, path); a local path has a `/` before any `:`.
pub fn split_remote(s: &str) -> Option<(String, String)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (h, p) = rest.split_once("]:")?;
        return Some((h.to_string(), p.to_string()));
    }
    let (h, p) = s.split_once(':')?;
    if h.is_empty() || h.contains('/') {
        return None;
    }
    Some((h.to_string(), p.to_string()))
}

/// What the arguments ask for.
#[derive(Debug)]
pub struct Plan {
    /// Server host.
    pub host: String,
    /// Push or pull.
    pub way: Way,
    /// Remote paths under the root.
    pub remote: Vec<RelPath>,
    /// Local side.
    pub local: CopyLocal,
    /// A push whose destination names its single source (the server decides, as only it
    /// knows whether the destination is a directory).
    pub dest_names_source: bool,
}

/// Reads the paths: sources then destination, exactly one side remote.
pub fn plan(paths: &[String]) -> Result<Plan, PlanError> {
    let Some((dst, srcs)) = paths.split_last().filter(|(_, s)| !s.is_empty()) else {
        bail!("a copy needs a source and a destination");
    };
    let rel = |p: &str| RelPath::parse(p).map_err(|e| PlanError(e.to_string()));
    match split_remote(dst) {
        Some((host, p)) => {
            if let Some(s) = srcs.iter().find(|s| split_remote(s).is_some()) {
                bail!("`{s}` and `{dst}` are both remote; one side of a copy is local");
            }
            Ok(Plan {
                host,
                way: Way::Push,
                remote: vec![rel(&p)?],
                local: CopyLocal::Push(srcs.iter().map(PathBuf::from).collect()),
                dest_names_source: takes_dest_name(srcs.len(), false, &p),
            })
        }
        None => {
            let mut host: Option<String> = None;
            let mut remote = Vec::new();
            for s in srcs {
                let Some((h, p)) = split_remote(s) else {
                    bail!("`{s}` and `{dst}` are both local; name the server as HOST:PATH");
                };
                if host.as_ref().is_some_and(|x| *x != h) {
                    bail!("sources come from one server at a time (`{s}` names another)");
                }
                host = Some(h);
                remote.push(rel(&p)?);
            }
            // scp's rule, decided here: the destination is ours.
            let dst_path = PathBuf::from(dst);
            let local = match dst_path.file_name().and_then(|n| n.to_str()) {
                Some(name) if takes_dest_name(remote.len(), remote[0].is_root(), dst) && !dst_path.is_dir() => {
                    let dir = dst_path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
                    CopyLocal::Pull(dir.to_path_buf(), Some(name.to_string()))
                }
                _ => CopyLocal::Pull(dst_path, None),
            };
            Ok(Plan {
                host: host.expect("at least one source"),
                way: Way::Pull,
                remote,
                local,
                dest_names_source: false,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_syntax() {
        assert_eq!(split_remote("host:a/b"), Some(("host".into(), "a/b".into())));
        assert_eq!(split_remote("[::1]:x"), Some(("::1".into(), "x".into())));
        assert_eq!(split_remote("198.18.0.2:"), Some(("198.18.0.2".into(), String::new())));
        assert_eq!(split_remote("./a:b"), None);
        assert_eq!(split_remote("plain"), None);
        assert_eq!(split_remote(":x"), None);
    }

    #[test]
    fn plans() {
        let p = plan(&["a".into(), "b/".into(), "h:dst".into()]).unwrap();
        assert_eq!(p.way, Way::Push);
        assert_eq!(p.remote[0].as_str(), "dst");
        let q = plan(&["h:x".into(), "h:y/z".into(), "out".into()]).unwrap();
        assert_eq!(q.way, Way::Pull);
        assert_eq!(q.remote.len(), 2);
        assert!(plan(&["a".into(), "b".into()]).unwrap_err().to_string().contains("both local"));
        assert!(plan(&["h:a".into(), "g:b".into()]).unwrap_err().to_string().contains("both remote"));
        assert!(plan(&["h:a".into(), "g:b".into(), "o".into()]).unwrap_err().to_string().contains("one server"));
        assert!(plan(&["a".into(), "h:../x".into()]).unwrap_err().to_string().contains(".."));
        assert!(plan(&["a".into(), "h:/etc".into()]).unwrap_err().to_string().contains("absolute"));
    }
}
