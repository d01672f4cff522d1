//! Files for `wanperf copy`, opened so that nothing outside a base directory is ever touched:
//! every path is walked one component at a time with `openat(…, O_NOFOLLOW)`, so a symbolic
//! link under a server's `--root` (or under a client's destination) cannot lead out of it.
//! The `*at` calls themselves are `wanperf_sys::fs`'s, re-exported here.

use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;
use wanperf_copy::paths::RelPath;
use wanperf_copy::spec::{Entry, Kind};

pub(crate) use wanperf_sys::fs::Aligned;
pub use wanperf_sys::fs::{openat, rename_at, stat_at, syncfs, unlink_at};

/// Opens a directory by path (following links: the user named it).
pub fn open_base(path: &Path) -> io::Result<OwnedFd> {
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC).open(path)?;
    Ok(f.into())
}

/// Why a walk under the base failed, in words.
fn walk_error(rel: &str, e: io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(libc::ELOOP) | Some(libc::ENOTDIR) => io::Error::other(format!(
            "`{rel}` is a symbolic link or not a directory; copies never follow links inside the copy's root"
        )),
        _ => io::Error::new(e.kind(), format!("`{rel}`: {e}")),
    }
}

/// The directory `rel` under `base`, created (mode 0755) where missing if `create`.
pub fn open_dir(base: &OwnedFd, rel: &RelPath, create: bool) -> io::Result<OwnedFd> {
    let mut cur = base.try_clone()?;
    let mut so_far = String::new();
    for c in rel.components() {
        if !so_far.is_empty() {
            so_far.push('/');
        }
        so_far.push_str(c);
        let flags = libc::O_DIRECTORY | libc::O_RDONLY;
        cur = match openat(&cur, c, flags, 0) {
            Ok(fd) => fd,
            Err(e) if e.kind() == io::ErrorKind::NotFound && create => {
                if let Err(e) = wanperf_sys::fs::mkdirat(&cur, c, 0o755) {
                    if e.kind() != io::ErrorKind::AlreadyExists {
                        return Err(walk_error(&so_far, e));
                    }
                }
                openat(&cur, c, flags, 0).map_err(|e| walk_error(&so_far, e))?
            }
            Err(e) => return Err(walk_error(&so_far, e)),
        };
    }
    Ok(cur)
}

/// Whether an open source file still has the size and modification time its manifest entry
/// recorded.
pub fn as_listed(f: &File, e: &Entry) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let m = f.metadata()?;
    Ok(m.size() == e.size && m.mtime() * 1_000_000_000 + m.mtime_nsec() == e.mtime_ns)
}

/// Modification time of a stat in ns.
pub fn mtime_ns(st: &libc::stat) -> i64 {
    st.st_mtime * 1_000_000_000 + st.st_mtime_nsec
}

/// Sets the permission bits and modification time of an open file.
pub fn set_meta(f: &File, mode: u32, mtime_ns: i64) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    f.set_permissions(std::fs::Permissions::from_mode(mode & 0o7777))?;
    let t = if mtime_ns >= 0 {
        std::time::UNIX_EPOCH + std::time::Duration::from_nanos(mtime_ns as u64)
    } else {
        std::time::UNIX_EPOCH - std::time::Duration::from_nanos(mtime_ns.unsigned_abs())
    };
    f.set_modified(t)
}

/// Names in a directory (without `.` and `..`), sorted.
fn list(dir: &OwnedFd) -> io::Result<Vec<String>> {
    wanperf_sys::fs::list_dir(dir)
}

/// Where a sender reads one manifest entry from.
#[derive(Debug, Clone)]
pub struct Source {
    /// The directory holding it.
    pub dir: Arc<OwnedFd>,
    /// Its name there.
    pub name: String,
}

impl Source {
    /// Opens the file for reading.
    pub fn open(&self) -> io::Result<File> {
        Ok(File::from(openat(&self.dir, &self.name, libc::O_RDONLY, 0)?))
    }
}

/// A manifest and where each entry comes from; `skipped` counts links and special files
/// left out.
#[derive(Debug, Default)]
pub struct Scan {
    /// Entries in order (directories before what they hold).
    pub entries: Vec<Entry>,
    /// Source of each entry (directories have one too).
    pub sources: Vec<Source>,
    /// Symbolic links, devices, sockets left out.
    pub skipped: Vec<String>,
}

impl Scan {
    /// Adds `name` in `dir` as manifest path `path`, recursing into directories.
    pub fn add(&mut self, dir: &Arc<OwnedFd>, name: &str, path: RelPath) -> io::Result<()> {
        let st = stat_at(dir, name).map_err(|e| io::Error::new(e.kind(), format!("`{path}`: {e}")))?;
        let fmt = st.st_mode & libc::S_IFMT;
        let entry =
            |kind, size| Entry { path: path.clone(), kind, size, mode: st.st_mode & 0o7777, mtime_ns: mtime_ns(&st) };
        if fmt == libc::S_IFREG {
            self.entries.push(entry(Kind::File, st.st_size as u64));
            self.sources.push(Source { dir: dir.clone(), name: name.into() });
        } else if fmt == libc::S_IFDIR {
            let sub = Arc::new(
                openat(dir, name, libc::O_DIRECTORY | libc::O_RDONLY, 0)
                    .map_err(|e| io::Error::new(e.kind(), format!("`{path}`: {e}")))?,
            );
            if !path.is_root() {
                self.entries.push(entry(Kind::Dir, 0));
                self.sources.push(Source { dir: dir.clone(), name: name.into() });
            }
            for n in list(&sub)? {
                let child = path.join(&n).map_err(|e| io::Error::other(e.to_string()))?;
                self.add(&sub, &n, child)?;
            }
        } else {
            self.skipped.push(path.to_string());
        }
        Ok(())
    }
}

/// Scans local paths named by the user (a client pushing): each lands under its own name.
/// A name the user typed may be a symbolic link (followed, as scp and rsync do for their
/// arguments); links inside a tree are left out.
pub fn scan_local(paths: &[std::path::PathBuf]) -> io::Result<Scan> {
    let mut scan = Scan::default();
    for p in paths {
        let ctx = |e: io::Error| io::Error::new(e.kind(), format!("`{}`: {e}", p.display()));
        let abs = if p.is_absolute() { p.clone() } else { std::env::current_dir()?.join(p) };
        let real = std::fs::canonicalize(&abs).map_err(ctx)?;
        let name = abs
            .file_name()
            .or(real.file_name())
            .and_then(|n| n.to_str())
            .filter(|n| *n != "..")
            .ok_or_else(|| io::Error::other(format!("`{}` has no file name to copy under", p.display())))?
            .to_string();
        let rname = real.file_name().and_then(|n| n.to_str()).unwrap_or(".").to_string();
        let dir = Arc::new(open_base(real.parent().unwrap_or(Path::new("/"))).map_err(ctx)?);
        let rel = RelPath::parse(&name).map_err(|e| io::Error::other(e.to_string()))?;
        scan.add(&dir, &rname, rel)?;
    }
    Ok(scan)
}

/// Scans sources under a server's root (a client pulling): each lands under its last name;
/// `.` sends what the root holds.
pub fn scan_root(root: &OwnedFd, rels: &[RelPath]) -> io::Result<Scan> {
    let mut scan = Scan::default();
    for rel in rels {
        if rel.is_root() {
            let dir = Arc::new(root.try_clone()?);
            for n in list(&dir)? {
                let child = RelPath::root().join(&n).map_err(|e| io::Error::other(e.to_string()))?;
                scan.add(&dir, &n, child)?;
            }
            continue;
        }
        let comps: Vec<&str> = rel.components().collect();
        let parent =
            RelPath::parse(&comps[..comps.len() - 1].join("/")).map_err(|e| io::Error::other(e.to_string()))?;
        let dir = Arc::new(open_dir(root, &parent, false)?);
        let name = rel.file_name().to_string();
        let st = stat_at(&dir, &name).map_err(|e| io::Error::new(e.kind(), format!("`{rel}`: {e}")))?;
        if st.st_mode & libc::S_IFMT == libc::S_IFLNK {
            return Err(io::Error::other(format!(
                "`{rel}` is a symbolic link; copies never follow links inside the copy's root"
            )));
        }
        let top = RelPath::parse(&name).map_err(|e| io::Error::other(e.to_string()))?;
        scan.add(&dir, &name, top)?;
    }
    Ok(scan)
}
