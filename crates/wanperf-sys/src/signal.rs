//! Signals: SIGINT and SIGTERM caught into a flag, and signals sent to our children.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by SIGINT or SIGTERM once [`catch_interrupts`] has been called; the commands poll it.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// From now on SIGINT and SIGTERM only set [`INTERRUPTED`] instead of ending the process.
pub fn catch_interrupts() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

/// Sends signal `sig` (`libc::SIGTERM`, …) to process `pid` (one the caller owns the id of:
/// a child not yet reaped). Pid 0 and ids beyond `pid_t` (which would name process groups or
/// every process) are refused.
pub fn send_signal(pid: u32, sig: libc::c_int) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid)
        .ok()
        .filter(|&p| p > 0)
        .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: kill takes plain values; a bad pid or signal is an error return, not undefined
    // behaviour.
    if unsafe { libc::kill(pid, sig) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sends SIGTERM to process `pid` (a child of ours: the caller owns the id).
pub fn terminate(pid: u32) -> io::Result<()> {
    send_signal(pid, libc::SIGTERM)
}

/// Sends SIGKILL to process `pid` (a child of ours not yet reaped: the caller owns the id).
pub fn kill(pid: u32) -> io::Result<()> {
    send_signal(pid, libc::SIGKILL)
}

/// Sends SIGINT to process `pid` (as Ctrl-C would).
pub fn interrupt(pid: u32) -> io::Result<()> {
    send_signal(pid, libc::SIGINT)
}

/// Sleeps `secs` seconds, or until Ctrl-C ([`INTERRUPTED`]).
pub fn sleep_unless_interrupted(secs: f64) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs_f64(secs.max(0.0));
    while std::time::Instant::now() < until && !INTERRUPTED.load(Ordering::Acquire) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A thread that sets `stop` once SIGINT or SIGTERM arrives (for daemons that take a flag of
/// their own), and ends when `stop` is set.
pub fn stop_on_interrupt(stop: std::sync::Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Acquire) {
            if INTERRUPTED.load(Ordering::Acquire) {
                stop.store(true, Ordering::Release);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    })
}
