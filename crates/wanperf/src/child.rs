//! Child processes the commands start: when one is ready (one rule everywhere: it holds a
//! listening socket), waiting for one, and stopping one.

use crate::INTERRUPTED;
use anyhow::{bail, Result};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ExitCode, ExitStatus};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wanperf_net::listen;

/// Whether `c` is ready: it listens (it or a descendant holds a TCP listener or a bound UDP
/// socket, read from /proc — see [`listen::held_by`]).
fn listening(c: &Child) -> bool {
    listen::held_by(c.id()).is_ok_and(|l| !l.is_empty())
}

/// Waits until each command listens, or has ended, or `most_s` seconds have passed, or
/// Ctrl-C.
pub(crate) fn wait_listening(commands: &mut [Child], most_s: f64) {
    let until = Instant::now() + Duration::from_secs_f64(most_s.max(0.0));
    let ready = |c: &mut Child| !matches!(c.try_wait(), Ok(None)) || listening(c);
    while !commands.iter_mut().all(ready) && Instant::now() < until && !INTERRUPTED.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits (at most `most_s` seconds) until the server `c` listens. Its piped output is drained
/// from now on (so it never blocks on a full pipe), and if it ends or never listens, the error
/// names `what` and the last line it wrote.
pub(crate) fn wait_ready(c: &mut Child, what: &str, most_s: f64) -> Result<()> {
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
pub(crate) fn exit_code(st: &ExitStatus) -> ExitCode {
    let code = st.code().unwrap_or(128 + std::os::unix::process::ExitStatusExt::signal(st).unwrap_or(0));
    ExitCode::from(code.clamp(0, 255) as u8)
}

/// Waits for `c` to exit; on Ctrl-C or at `deadline` stops it (see [`stop_child`]) and
/// returns `None`.
pub(crate) fn wait_child(c: &mut Child, deadline: Option<Instant>) -> Option<ExitStatus> {
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
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Stops `c`: SIGTERM, then after 3 s SIGKILL; reaps it.
pub(crate) fn stop_child(c: &mut Child) {
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
