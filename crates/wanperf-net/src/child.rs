//! Child processes the commands start: when one is ready (one rule everywhere: it holds a
//! listening socket), waiting for one, and stopping one.
//! Also the containment every measured command runs under (`wanperf __contain`).

use crate::listen;
use anyhow::{bail, Result};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ExitCode, ExitStatus};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wanperf_sys::INTERRUPTED;

/// Whether `c` is ready: it listens (it or a descendant holds a TCP listener or a bound UDP
/// socket, read from /proc — see [`listen::held_by`]).
fn listening(c: &Child) -> bool {
    listen::held_by(c.id()).is_ok_and(|l| !l.is_empty())
}

/// Waits until each command listens, or has ended, or `most_s` seconds have passed, or
/// Ctrl-C.
pub fn wait_listening(commands: &mut [Child], most_s: f64) {
    let until = Instant::now() + Duration::from_secs_f64(most_s.max(0.0));
    let ready = |c: &mut Child| !matches!(c.try_wait(), Ok(None)) || listening(c);
    while !commands.iter_mut().all(ready) && Instant::now() < until && !INTERRUPTED.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits (at most `most_s` seconds) until the server `c` listens. Its piped output is drained
/// from now on (so it never blocks on a full pipe), and if it ends or never listens, the error
/// names `what` and the last line it wrote.
pub fn wait_ready(c: &mut Child, what: &str, most_s: f64) -> Result<()> {
    let last = Arc::new(Mutex::new(String::new()));
    let outs: [Option<Box<dyn Read + Send>>; 2] = [
        c.stdout.take().map(|o| Box::new(o) as Box<dyn Read + Send>),
        c.stderr.take().map(|o| Box::new(o) as Box<dyn Read + Send>),
    ];
    for out in outs.into_iter().flatten() {
        let last = last.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(|l| l.ok()) {
                if !line.trim().is_empty() {
                    *last.lock().unwrap_or_else(|e| e.into_inner()) = line.trim().to_string();
                }
            }
        });
    }
    wait_listening(std::slice::from_mut(c), most_s);
    if listening(c) {
        return Ok(());
    }
    // Give its last words a moment to arrive.
    std::thread::sleep(Duration::from_millis(50));
    let said = last.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let said = if said.is_empty() { String::new() } else { format!(": {said}") };
    match c.try_wait() {
        Ok(Some(st)) => bail!("{what} did not start ({st}){said}"),
        _ if INTERRUPTED.load(Ordering::Acquire) => bail!("interrupted while {what} started"),
        _ => bail!("{what} did not listen within {most_s:.0} s{said}"),
    }
}

/// A child's exit status as our own exit code (128 + N for signal N, as shells do).
pub fn exit_code(st: &ExitStatus) -> ExitCode {
    let code = st.code().unwrap_or(128 + std::os::unix::process::ExitStatusExt::signal(st).unwrap_or(0));
    ExitCode::from(code.clamp(0, 255) as u8)
}

/// Waits for `c` to exit; on Ctrl-C or at `deadline` stops it (see [`stop_child`]) and
/// returns `None`.
pub fn wait_child(c: &mut Child, deadline: Option<Instant>) -> Option<ExitStatus> {
    wait_child_ticking(c, deadline, &mut || {})
}

/// [`wait_child`], calling `tick` every 10 ms while it waits (a network's cross traffic
/// starts on its schedule meanwhile: `netd::Session::tick`).
pub fn wait_child_ticking(c: &mut Child, deadline: Option<Instant>, tick: &mut dyn FnMut()) -> Option<ExitStatus> {
    loop {
        match c.try_wait() {
            Ok(Some(st)) => return Some(st),
            Ok(None) => {}
            Err(_) => return None,
        }
        if INTERRUPTED.load(Ordering::Acquire) || deadline.is_some_and(|d| Instant::now() > d) {
            stop_child(c);
            return None;
        }
        tick();
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Stops `c`: SIGTERM, then after 3 s SIGKILL; reaps it.
pub fn stop_child(c: &mut Child) {
    if matches!(c.try_wait(), Ok(None)) {
        let _ = wanperf_sys::terminate(c.id());
        let until = Instant::now() + Duration::from_secs(3);
        while Instant::now() < until {
            if !matches!(c.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = c.kill();
    }
    let _ = c.wait();
}

/// The hidden subcommand of the `wanperf` executable that runs a command contained (see
/// [`contain`]); the binary routes it here.
pub const CONTAIN: &str = "__contain";

/// The wanperf executable (to run contained commands and daemons).
pub fn exe() -> Result<std::path::PathBuf> {
    std::env::current_exe().map_err(|e| anyhow::anyhow!("cannot find the wanperf executable: {e}"))
}

/// The command line that runs `argv` contained on `host` of `path`: as init of its own PID
/// namespace, under a `wanperf __contain` that dies with this process. When either goes, the
/// kernel kills every process the command started, so a killed `path run` leaves nothing
/// behind.
pub fn on_path(
    path: &crate::path::Path,
    host: wanperf_emu::path::Host,
    argv: &[String],
) -> Result<std::process::Command> {
    let mut c = path.command(host, &exe()?.display().to_string());
    c.arg(CONTAIN).arg("--").args(argv);
    Ok(c)
}

/// The command line that runs `argv` contained on `node` of `net` (as [`on_path`]).
pub fn on_node(
    net: &crate::run::Network,
    exe: &std::path::Path,
    node: usize,
    argv: &[String],
) -> std::process::Command {
    let mut c = std::process::Command::new(exe);
    net.enter(node, &mut c);
    c.arg(CONTAIN).arg("--").args(argv);
    c
}

/// `wanperf __contain -- CMD`: runs CMD as PID 1 of a new PID namespace and passes on its
/// exit status; SIGTERM/SIGINT are forwarded, and after 1 s turn into SIGKILL.
pub fn contain(cmd: &[String]) -> Result<ExitCode> {
    wanperf_sys::unshare_pid_namespace().map_err(|e| anyhow::anyhow!("cannot create a PID namespace: {e}"))?;
    let mut c = std::process::Command::new(&cmd[0]);
    c.args(&cmd[1..]);
    wanperf_sys::die_with_parent(&mut c);
    let mut child = c.spawn().map_err(|e| anyhow::anyhow!("cannot run `{}`: {e}", cmd[0]))?;
    let mut term_at: Option<Instant> = None;
    loop {
        if let Some(st) = child.try_wait()? {
            return Ok(exit_code(&st));
        }
        if INTERRUPTED.load(Ordering::Acquire) {
            match term_at {
                None => {
                    let _ = wanperf_sys::terminate(child.id());
                    term_at = Some(Instant::now());
                }
                Some(t) if t.elapsed() > Duration::from_secs(1) => {
                    let _ = child.kill();
                }
                _ => {}
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `cmd` contained on the left host of `path`, after starting `right` (a shell command;
/// its output goes to stderr) on the right host and waiting at most `wait_s` until it
/// listens; the right command is stopped when `cmd` ends. `None`: interrupted.
pub fn run_on_path(
    path: &crate::path::Path,
    cmd: &[String],
    right: Option<&str>,
    wait_s: f64,
) -> Result<Option<ExitStatus>> {
    use wanperf_emu::path::Host;
    let mut right = match right {
        Some(line) => {
            let mut c = on_path(path, Host::Right, &["sh".to_string(), "-c".to_string(), line.to_string()])?;
            // Keep CMD's standard output its own: what the right command prints goes to stderr.
            if let Ok(fd) = std::os::fd::AsFd::as_fd(&std::io::stderr()).try_clone_to_owned() {
                c.stdout(std::process::Stdio::from(fd));
            }
            Some(c.spawn().map_err(|e| anyhow::anyhow!("cannot start the right command `{line}`: {e}"))?)
        }
        None => None,
    };
    wait_listening(right.as_mut_slice(), wait_s);
    let status = match on_path(path, Host::Left, cmd).and_then(|mut c| Ok(c.spawn()?)) {
        Ok(mut child) => wait_child(&mut child, None),
        Err(e) => {
            right.iter_mut().for_each(stop_child);
            bail!("cannot run `{}` on the left host: {e}", cmd[0]);
        }
    };
    right.iter_mut().for_each(stop_child);
    Ok(status)
}
