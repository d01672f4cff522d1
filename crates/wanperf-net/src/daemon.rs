//! Named, long-lived paths and networks: the daemons behind `path up` and `net up`, and how
//! the other commands ask them.
//!
//! `up NAME` starts a small daemon (`wanperf path|net __daemon`) that owns the path or network
//! and answers one-line JSON requests ([`Request`]) on a Unix socket in the runtime directory
//! with one-line JSON replies (the reply types of [`crate::pathd`] and [`crate::netd`], or
//! `{"error": …}`). `exec` asks where the namespaces are (`/proc/PID/fd/N` of the daemon's
//! namespace descriptors), joins them and runs the command; `down` stops the daemon, which
//! frees everything.

use anyhow::{anyhow, bail, Context, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use wanperf_sys::INTERRUPTED;

/// A request to a daemon (one JSON line: `{"op": "info"}`, …).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Request {
    /// Where the namespaces are, and what the daemon owns.
    Info,
    /// The counters so far.
    Stats,
    /// Change a link of a network (`net set`): `options` are `KEY=VALUE`.
    Set { link: String, options: Vec<String> },
    /// Stop, ending every command started inside, and answer the final counters.
    Down,
}

/// What a daemon is: a path or a network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Path,
    Network,
}

impl Kind {
    /// As messages name it.
    pub fn word(self) -> &'static str {
        match self {
            Kind::Path => "path",
            Kind::Network => "network",
        }
    }

    /// The command that manages it.
    fn command(self) -> &'static str {
        match self {
            Kind::Path => "path",
            Kind::Network => "net",
        }
    }

    /// Where its sockets live.
    pub fn dir(self) -> PathBuf {
        match self {
            Kind::Path => runtime_dir(),
            Kind::Network => runtime_dir().join("net"),
        }
    }

    /// The socket of the one called `name` (checked: see [`Kind::check_name`]).
    pub fn socket(self, name: &str) -> Result<PathBuf> {
        self.check_name(name)?;
        Ok(self.dir().join(format!("{name}.sock")))
    }

    /// Names: letters, digits, - and _, at most 64.
    pub fn check_name(self, name: &str) -> Result<()> {
        if name.is_empty()
            || name.len() > 64
            || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            bail!("`{name}` is not a {} name (letters, digits, - and _, at most 64)", self.word());
        }
        Ok(())
    }

    /// Sends `req` to the daemon called `name` and reads its reply as `T`.
    pub fn ask<T: DeserializeOwned>(self, name: &str, req: &Request) -> Result<T> {
        ask(&self.socket(name)?, self, name, req)
    }

    /// Waits (at most 5 s) until the daemon called `name` has let go of its socket.
    pub fn wait_gone(self, name: &str) -> Result<()> {
        let sock = self.socket(name)?;
        let until = Instant::now() + Duration::from_secs(5);
        while sock.exists() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    /// The `info` replies of the daemons that are up; a socket nobody answers on is left
    /// over from a killed daemon and is removed.
    pub fn live<T: DeserializeOwned>(self) -> Vec<T> {
        let mut rows = Vec::new();
        for e in std::fs::read_dir(self.dir()).into_iter().flatten().flatten() {
            let p = e.path();
            let Some(name) = p.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".sock")) else {
                continue;
            };
            match ask(&p, self, name, &Request::Info) {
                Ok(info) => rows.push(info),
                Err(_) => {
                    let _ = std::fs::remove_file(&p);
                }
            }
        }
        rows
    }
}

/// Where the daemons' sockets live.
pub fn runtime_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("WANPERF_RUNTIME_DIR") {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR") {
        return PathBuf::from(d).join("wanperf");
    }
    let uid = wanperf_sys::euid();
    if uid == 0 {
        PathBuf::from("/run/wanperf")
    } else {
        std::env::temp_dir().join(format!("wanperf-{uid}"))
    }
}

/// Sends one request to the daemon of the `kind` called `name` on `sock`.
fn ask<T: DeserializeOwned>(sock: &Path, kind: Kind, name: &str, req: &Request) -> Result<T> {
    let mut s = UnixStream::connect(sock)
        .map_err(|_| anyhow!("no {} named `{name}` is up (see `wanperf {} list`)", kind.word(), kind.command()))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    writeln!(s, "{}", serde_json::to_string(req)?)?;
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line)?;
    let v: Value = serde_json::from_str(&line).map_err(|_| anyhow!("{} `{name}` sent no answer", kind.word()))?;
    if let Some(e) = v.get("error").and_then(Value::as_str) {
        bail!("{e}");
    }
    serde_json::from_value(v).map_err(|e| anyhow!("bad answer from the {} daemon: {e}", kind.word()))
}

/// Starts `wanperf ARGS` as the daemon of the `kind` called `name`, and waits for its first
/// line: `ready`, or the one-line error it failed with.
pub fn start(kind: Kind, name: &str, args: &[&str]) -> Result<()> {
    let sock = kind.socket(name)?;
    if let Some(dir) = sock.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    if UnixStream::connect(&sock).is_ok() {
        bail!("a {} named `{name}` is already up", kind.word());
    }
    let _ = std::fs::remove_file(&sock);
    let mut child = std::process::Command::new(crate::child::exe()?)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .with_context(|| format!("cannot start the {} daemon", kind.word()))?;
    let out = child.stdout.take().expect("piped");
    let mut line = String::new();
    BufReader::new(out).read_line(&mut line)?;
    match line.trim() {
        "ready" => Ok(()),
        "" => {
            let _ = child.wait();
            bail!("the {} daemon failed", kind.word())
        }
        other => {
            let _ = child.wait();
            bail!("{}", other.strip_prefix("error: ").unwrap_or(other))
        }
    }
}

/// Tells `up` (which reads the daemon's standard output) how starting went: `ready`, or one
/// `error: …` line.
pub fn report(line: &str) {
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// A daemon's answer to one request.
pub enum Answer {
    /// Reply and keep serving.
    Reply(Value),
    /// Reply and stop.
    Last(Value),
}

impl Answer {
    /// The reply `{"error": msg}`.
    pub fn error(msg: &str) -> Answer {
        Answer::Reply(serde_json::json!({ "error": msg }))
    }

    /// A typed reply.
    pub fn reply(v: &impl Serialize) -> Answer {
        Answer::Reply(serde_json::to_value(v).unwrap_or_default())
    }

    /// A typed last reply.
    pub fn last(v: &impl Serialize) -> Answer {
        Answer::Last(serde_json::to_value(v).unwrap_or_default())
    }
}

/// Binds `sock`, reports `ready` (or why not), and answers one-line JSON requests until a
/// handler answers [`Answer::Last`] or the daemon is interrupted; `idle` runs between
/// connections, at least every 10 ms. A line that is no [`Request`] gets an error reply.
/// The socket is removed at the end. Returns whether it could listen.
pub fn serve(sock: &Path, mut idle: impl FnMut(), mut handle: impl FnMut(&Request) -> Answer) -> Result<bool> {
    let listener = match UnixListener::bind(sock) {
        Ok(l) => l,
        Err(e) => {
            report(&format!("error: cannot listen on {}: {e}", sock.display()));
            return Ok(false);
        }
    };
    listener.set_nonblocking(true)?;
    report("ready");
    while !INTERRUPTED.load(Ordering::Acquire) {
        idle();
        let (mut c, _) = match listener.accept() {
            Ok(x) => x,
            Err(_) => {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let _ = c.set_nonblocking(false);
        let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
        let mut line = String::new();
        if BufReader::new(&c).read_line(&mut line).is_err() {
            continue;
        }
        let answer = match serde_json::from_str::<Request>(&line) {
            Ok(req) => handle(&req),
            Err(_) => Answer::error("unknown request"),
        };
        match answer {
            Answer::Reply(v) => {
                let _ = writeln!(c, "{v}");
            }
            Answer::Last(v) => {
                let _ = writeln!(c, "{v}");
                break;
            }
        }
    }
    let _ = std::fs::remove_file(sock);
    Ok(true)
}

/// Joins the network namespace behind descriptor `fd` of daemon `pid` (and the daemon's user
/// namespace first, when it runs in one of its own: unprivileged paths and networks), keeps
/// this process on the hosts' CPUs (`host_cpus`; none: any) at the hosts' `nice`.
pub fn join(pid: u32, fd: i32, nice: i32, host_cpus: &[usize], cgroups: &[String]) -> Result<()> {
    // The host's limits (CPU quota, disk rates) first, while this process may still write the
    // hierarchies.
    for dir in cgroups {
        let procs = std::path::Path::new(dir).join("cgroup.procs");
        std::fs::write(&procs, "0").with_context(|| format!("cannot join the host's limits ({})", procs.display()))?;
    }
    let theirs = std::fs::metadata(format!("/proc/{pid}/ns/user"));
    let ours = std::fs::metadata("/proc/self/ns/user");
    if let (Ok(t), Ok(o)) = (theirs, ours) {
        use std::os::unix::fs::MetadataExt;
        if t.ino() != o.ino() {
            let f =
                std::fs::File::open(format!("/proc/{pid}/ns/user")).context("cannot open the path's user namespace")?;
            // (This process is single-threaded here, as joining a user namespace needs.)
            wanperf_sys::join_namespace(&f, libc::CLONE_NEWUSER).context("cannot join the path's user namespace")?;
        }
    }
    let ns = std::fs::File::open(format!("/proc/{pid}/fd/{fd}")).context("cannot open the host's network namespace")?;
    wanperf_sys::join_namespace(&ns, libc::CLONE_NEWNET).context("cannot join the host's network namespace")?;
    drop(ns);
    wanperf_emu::path::renice(nice).context("cannot lower the command's priority")?;
    wanperf_emu::path::pin(host_cpus).context("cannot keep the command to the hosts' CPUs")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_keep_their_wire_form() {
        assert_eq!(serde_json::to_string(&Request::Info).unwrap(), r#"{"op":"info"}"#);
        let set = Request::Set { link: "l1".into(), options: vec!["rate=1M".into()] };
        assert_eq!(serde_json::to_string(&set).unwrap(), r#"{"op":"set","link":"l1","options":["rate=1M"]}"#);
        assert!(serde_json::from_str::<Request>(r#"{"op":"reboot"}"#).is_err());
    }

    #[test]
    fn names_are_checked() {
        assert!(Kind::Path.check_name("a-b_1").is_ok());
        for bad in ["", "a/b", "..", &"x".repeat(65)] {
            assert!(Kind::Network.check_name(bad).is_err(), "{bad}");
        }
    }
}
