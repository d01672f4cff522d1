//! Named, long-lived paths and networks: the daemons behind `path up` and `net up`, and the
//! `path exec`, `stats`, `down` and `list` that ask them.
//!
//! `path up NAME` starts a small daemon (`wanperf path __daemon`) that owns the path and
//! answers one-line JSON requests on a Unix socket in the runtime directory. `path exec`
//! asks it where the namespaces are (`/proc/PID/fd/N` of the daemon's namespace descriptors),
//! joins them and runs the command; `path down` stops the daemon, which frees everything.

use crate::INTERRUPTED;
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{ExitCode, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use wanperf_emu::path::{Host, PathConfig};
use wanperf_net::path::Path;

/// `path exec`.
#[derive(Args, Debug)]
pub struct ExecArgs {
    /// Name of the path.
    name: String,
    /// Which host: left or right.
    host: String,
    /// The command.
    #[arg(last = true, required = true, value_name = "CMD")]
    cmd: Vec<String>,
}

/// `path stats` / `path down`.
#[derive(Args, Debug)]
pub struct NameArgs {
    /// Name of the path.
    name: String,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// Where the paths' sockets live.
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

pub(crate) fn check_name(name: &str) -> Result<()> {
    check_name_of("path", name)
}

/// Names of paths and networks: letters, digits, - and _, at most 64.
pub(crate) fn check_name_of(what: &str, name: &str) -> Result<()> {
    if name.is_empty() || name.len() > 64 || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        bail!("`{name}` is not a {what} name (letters, digits, - and _, at most 64)");
    }
    Ok(())
}

pub(crate) fn socket_path(name: &str) -> PathBuf {
    runtime_dir().join(format!("{name}.sock"))
}

fn request(name: &str, req: Value) -> Result<Value> {
    check_name(name)?;
    ask(&socket_path(name), "path", name, req)
}

/// Sends one request to the daemon of the `what` (path or network) called `name` on `sock`.
pub(crate) fn ask(sock: &std::path::Path, what: &str, name: &str, req: Value) -> Result<Value> {
    let mut s = UnixStream::connect(sock).map_err(|_| {
        let cmd = if what == "network" { "net" } else { what };
        anyhow!("no {what} named `{name}` is up (see `wanperf {cmd} list`)")
    })?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    writeln!(s, "{req}")?;
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line)?;
    let v: Value = serde_json::from_str(&line).map_err(|_| anyhow!("{what} `{name}` sent no answer"))?;
    if let Some(e) = v.get("error").and_then(Value::as_str) {
        bail!("{e}");
    }
    Ok(v)
}

/// Starts `wanperf ARGS` as the daemon of the `what` (path or network) `name`, listening on
/// `sock`, and waits for its first line: `ready`, or the one-line error it failed with.
pub fn start_daemon(what: &str, sock: &std::path::Path, name: &str, args: &[&str]) -> Result<()> {
    if let Some(dir) = sock.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    if UnixStream::connect(sock).is_ok() {
        bail!("a {what} named `{name}` is already up");
    }
    let _ = std::fs::remove_file(sock);
    let exe = std::env::current_exe().context("cannot find the wanperf executable")?;
    let mut child = std::process::Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .with_context(|| format!("cannot start the {what} daemon"))?;
    let out = child.stdout.take().expect("piped");
    let mut line = String::new();
    BufReader::new(out).read_line(&mut line)?;
    match line.trim() {
        "ready" => Ok(()),
        "" => {
            let _ = child.wait();
            bail!("the {what} daemon failed")
        }
        other => {
            let _ = child.wait();
            bail!("{}", other.strip_prefix("error: ").unwrap_or(other))
        }
    }
}

/// Tells `up` (which reads the daemon's standard output) how starting went: `ready`, or one
/// `error: …` line.
pub(crate) fn report(line: &str) {
    outln!("{line}");
    let _ = std::io::stdout().flush();
}

/// A daemon's answer to one request.
pub(crate) enum Answer {
    /// Reply and keep serving.
    Reply(Value),
    /// Reply and stop.
    Last(Value),
}

/// Binds `sock`, reports `ready` (or why not), and answers one-line JSON requests until a
/// handler answers [`Answer::Last`] or the daemon is interrupted; `idle` runs between
/// connections, at least every 10 ms. The socket is removed at the end. Returns whether it
/// could listen.
pub(crate) fn serve_requests(
    sock: &std::path::Path,
    mut idle: impl FnMut(),
    mut handle: impl FnMut(&Value) -> Answer,
) -> Result<bool> {
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
        let req: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        match handle(&req) {
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

/// `wanperf path __daemon NAME CONFIG`: owns one path until asked to stop.
pub fn daemon(name: &str, cfg_json: &str) -> Result<ExitCode> {
    let cfg: PathConfig = serde_json::from_str(cfg_json).context("bad path configuration")?;
    wanperf_sys::new_session();
    let path = match Path::start(&cfg, None) {
        Ok(p) => p,
        Err(e) => {
            report(&format!("error: {e}"));
            return Ok(ExitCode::FAILURE);
        }
    };
    let started = Instant::now();
    let listening = serve_requests(
        &socket_path(name),
        || {},
        |req| match req["op"].as_str() {
            Some("info") => Answer::Reply(json!({
                "name": name,
                "pid": std::process::id(),
                "left_fd": path.ns_fd(Host::Left),
                "right_fd": path.ns_fd(Host::Right),
                "host_cpus": path.host_cpus(),
                "uptime_s": started.elapsed().as_secs_f64(),
                "config": cfg,
            })),
            Some("stats") => Answer::Reply(json!({ "stats": path.stats() })),
            Some("down") => {
                // Commands started with `path exec` end with the path (they would keep its
                // namespaces alive).
                let fds = [path.ns_fd(Host::Left), path.ns_fd(Host::Right)];
                wanperf_emu::netns::end_processes_in(&fds, Duration::from_secs(2));
                Answer::Last(json!({ "stats": path.stats() }))
            }
            _ => Answer::Reply(json!({ "error": "unknown request" })),
        },
    )?;
    drop(path);
    Ok(if listening { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// `wanperf path exec NAME left|right -- CMD`: runs CMD inside the host (replacing this
/// process), with WANPERF_PEER set to the other host.
pub fn exec(a: ExecArgs) -> Result<ExitCode> {
    let host = match a.host.as_str() {
        "left" => Host::Left,
        "right" => Host::Right,
        other => bail!("`{other}` is not a host: left or right"),
    };
    let info = request(&a.name, json!({"op": "info"}))?;
    let pid = info["pid"].as_u64().ok_or_else(|| anyhow!("bad answer from the path daemon"))?;
    let fd = info[if host == Host::Left { "left_fd" } else { "right_fd" }].as_i64().unwrap_or(-1);
    join_namespaces(pid, fd)?;
    wanperf_emu::path::renice(info["config"]["host_nice"].as_i64().unwrap_or(0) as i32)
        .context("cannot lower the command's priority")?;
    pin_host(&info)?;
    let err = std::process::Command::new(&a.cmd[0])
        .args(&a.cmd[1..])
        .env("WANPERF_PEER", host.peer().to_string())
        .env("WANPERF_SELF", host.addr().to_string())
        .exec();
    bail!("cannot run `{}`: {err}", a.cmd[0])
}

/// Keeps this process on the CPUs a daemon's `info` answer gives its hosts (`host_cpus`;
/// none listed: any).
pub fn pin_host(info: &Value) -> Result<()> {
    let cpus: Vec<usize> = serde_json::from_value(info["host_cpus"].clone()).unwrap_or_default();
    wanperf_emu::path::pin(&cpus).context("cannot keep the command to the hosts' CPUs")
}

/// Joins the network namespace behind descriptor `fd` of daemon `pid` (and the daemon's user
/// namespace first, when it runs in one of its own: unprivileged paths and networks).
pub fn join_namespaces(pid: u64, fd: i64) -> Result<()> {
    // Join the daemon's user namespace if it runs in one of its own (unprivileged paths).
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
    Ok(())
}

fn print_stats(v: &Value, json: bool) {
    let st = serde_json::from_value::<wanperf_emu::path::PathStats>(v["stats"].clone());
    if json {
        let behind = st.ok().and_then(|s| crate::counters::path_behind(&s));
        outln!("{}", json!({"event": "path", "stats": v["stats"], "fell_behind": behind}));
    } else if let Ok(st) = st {
        crate::counters::print_stats_to(&st, &mut std::io::stdout());
    }
}

/// `wanperf path stats NAME`.
pub fn stats(a: NameArgs) -> Result<ExitCode> {
    let v = request(&a.name, json!({"op": "stats"}))?;
    print_stats(&v, a.json);
    Ok(ExitCode::SUCCESS)
}

/// `wanperf path down NAME`.
pub fn down(a: NameArgs) -> Result<ExitCode> {
    let v = request(&a.name, json!({"op": "down"}))?;
    print_stats(&v, a.json);
    // Wait until the daemon has let go of the socket.
    let until = Instant::now() + Duration::from_secs(5);
    while socket_path(&a.name).exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(ExitCode::SUCCESS)
}

/// The `info` answers of the daemons (paths or networks) whose sockets are in `dir`; a socket
/// nobody answers on is left over from a killed daemon and is removed.
pub(crate) fn live_daemons(dir: &std::path::Path, what: &str) -> Vec<Value> {
    let mut rows = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        let Some(name) = p.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".sock")) else {
            continue;
        };
        match ask(&p, what, name, json!({"op": "info"})) {
            Ok(info) => rows.push(info),
            Err(_) => {
                let _ = std::fs::remove_file(&p);
            }
        }
    }
    rows
}

/// `wanperf path list`.
pub fn list(json: bool) -> Result<ExitCode> {
    let rows = live_daemons(&runtime_dir(), "path");
    if json {
        outln!("{}", json!({"event": "paths", "paths": rows}));
    } else if rows.is_empty() {
        outln!("no paths are up");
    } else {
        for r in rows {
            let c = &r["config"];
            let rtt =
                (c["up"]["delay_ns"].as_u64().unwrap_or(0) + c["down"]["delay_ns"].as_u64().unwrap_or(0)) as f64 / 1e6;
            outln!(
                "{:<20} RTT {rtt:.1} ms, up {:.0} s",
                r["name"].as_str().unwrap_or("?"),
                r["uptime_s"].as_f64().unwrap_or(0.0)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
