//! The system calls wanperf makes that Rust's standard library does not wrap, as safe
//! functions with their preconditions checked or documented: signals, sessions, namespaces,
//! parent-death signals, descriptors and polling. Every `unsafe` block carries a `// SAFETY:`
//! comment; the crates that call these need none of their own. (Issue 37: the command line's
//! unsafe lives here; the engine's sys.rs and copy_fs.rs, and the emulator's netns.rs, are
//! the next to move.)

use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::Command;
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

/// Starts a new session (detaches from the caller's terminal and its signals).
pub fn new_session() {
    // SAFETY: setsid has no preconditions; failing (already a session leader) changes nothing.
    unsafe { libc::setsid() };
}

/// The effective user id.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Sends SIGTERM to process `pid` (a child of ours: the caller owns the id).
pub fn terminate(pid: u32) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: kill takes plain values; a bad pid is an error return, not undefined behaviour.
    if unsafe { libc::kill(pid, libc::SIGTERM) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Puts the children this process creates next into a new PID namespace (the first becomes
/// its init: when it ends, the kernel ends every process inside).
pub fn unshare_pid_namespace() -> io::Result<()> {
    // SAFETY: unshare takes flags only; it affects the children this process creates next.
    if unsafe { libc::unshare(libc::CLONE_NEWPID) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The command's process gets SIGKILL when this process (its parent) dies, kill -9 included.
pub fn die_with_parent(c: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs between fork and exec and only calls prctl, which is
    // async-signal-safe and allocates nothing.
    unsafe {
        c.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

/// Joins the namespace `ns` (an open `/proc/PID/ns/*` or namespace descriptor) of kind
/// `nstype` (`libc::CLONE_NEWNET`, `libc::CLONE_NEWUSER`, …). Joining a user namespace needs a
/// single-threaded process.
pub fn join_namespace(ns: &impl AsFd, nstype: libc::c_int) -> io::Result<()> {
    // SAFETY: the descriptor is open for the duration of the call (borrowed); setns checks
    // that it is a namespace of the given type.
    if unsafe { libc::setns(ns.as_fd().as_raw_fd(), nstype) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Waits up to `timeout_ms` until one of `fds` is readable; which are (false for all on a
/// timeout or an interrupted wait).
pub fn poll_readable(fds: &[&impl AsFd], timeout_ms: i32) -> io::Result<Vec<bool>> {
    let mut p: Vec<libc::pollfd> =
        fds.iter().map(|f| libc::pollfd { fd: f.as_fd().as_raw_fd(), events: libc::POLLIN, revents: 0 }).collect();
    // SAFETY: p is a valid array of pollfd for the duration of the call, and its descriptors
    // are borrowed open.
    let n = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted { Ok(vec![false; p.len()]) } else { Err(e) };
    }
    Ok(p.iter().map(|x| x.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0).collect())
}

/// Waits up to `timeout_ms` for `events` (`libc::POLLIN`, `POLLOUT`, `POLLERR`, …) on `fd`;
/// false on a timeout or an interrupted wait.
pub fn poll_one(fd: &impl AsFd, events: libc::c_short, timeout_ms: i32) -> io::Result<bool> {
    let mut p = libc::pollfd { fd: fd.as_fd().as_raw_fd(), events, revents: 0 };
    // SAFETY: one valid pollfd whose descriptor is borrowed open for the call.
    let n = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted { Ok(false) } else { Err(e) };
    }
    Ok(n > 0)
}

/// Sends SIGKILL to process `pid` (a child of ours not yet reaped: the caller owns the id).
pub fn kill(pid: u32) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: kill takes plain values; a bad pid is an error return, not undefined behaviour.
    if unsafe { libc::kill(pid, libc::SIGKILL) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Renames `from` to `to` unless `to` exists (renameat2 with RENAME_NOREPLACE; on file
/// systems without it, a hard link, which refuses to replace too, then `from` stays).
pub fn rename_noreplace(from: &std::path::Path, to: &std::path::Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &std::path::Path| std::ffi::CString::new(p.as_os_str().as_bytes()).map_err(io::Error::other);
    let (f, t) = (c(from)?, c(to)?);
    // SAFETY: two valid NUL-terminated paths that outlive the call.
    let rc = unsafe { libc::renameat2(libc::AT_FDCWD, f.as_ptr(), libc::AT_FDCWD, t.as_ptr(), libc::RENAME_NOREPLACE) };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP) => std::fs::hard_link(from, to),
        _ => Err(err),
    }
}

/// The kernel's clock discipline as adjtimex(2) reads it: (its state, TIME_OK … TIME_ERROR or
/// −1 on failure; whether it is marked unsynchronized (STA_UNSYNC); the estimated error, µs).
pub fn clock_state() -> (i32, bool, i64) {
    // SAFETY: adjtimex with modes = 0 only reads the kernel's state into `tx`, a zeroed struct
    // owned here.
    let (state, tx) = unsafe {
        let mut tx: libc::timex = std::mem::zeroed();
        (libc::adjtimex(&mut tx), tx)
    };
    (state, tx.status & libc::STA_UNSYNC != 0, tx.esterror as i64)
}

/// Takes ownership of descriptor number `fd`, handed to this process by its parent (e.g.
/// `--listen-fd`): it must be open, and nothing else in this process may use it afterwards.
pub fn adopt_fd(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: fcntl(F_GETFD) on a number only reads its flags; it fails on a closed one.
    if fd < 3 || unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{fd} is not an open descriptor")));
    }
    // SAFETY: the descriptor is open, and the caller was handed it to own (documented above).
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Keeps descriptor `fd` open across exec (clears FD_CLOEXEC), to hand it to a child.
pub fn keep_across_exec(fd: &impl AsFd) -> io::Result<()> {
    // SAFETY: F_SETFD on a borrowed open descriptor only changes its close-on-exec flag.
    if unsafe { libc::fcntl(fd.as_fd().as_raw_fd(), libc::F_SETFD, 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_polling_and_processes() {
        // A socket with a datagram waiting is readable, an idle one is not.
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        a.send_to(b"x", b.local_addr().unwrap()).unwrap();
        assert_eq!(poll_readable(&[&a, &b], 1000).unwrap(), vec![false, true]);
        // Adopting: closed or standard descriptors are refused.
        assert!(adopt_fd(1).is_err());
        assert!(adopt_fd(1_000_000).is_err());
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        keep_across_exec(&l).unwrap();
        // SIGTERM reaches a child.
        let mut c = Command::new("sleep").arg("30").spawn().unwrap();
        terminate(c.id()).unwrap();
        assert!(!c.wait().unwrap().success());
        assert!(euid() < u32::MAX);
        // SIGKILL too.
        let mut c = Command::new("sleep").arg("30").spawn().unwrap();
        kill(c.id()).unwrap();
        assert!(!c.wait().unwrap().success());
        assert!(poll_one(&a, libc::POLLOUT, 0).unwrap());
        // Renaming refuses to replace.
        let d = std::env::temp_dir().join(format!("wanperf-sys-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("a"), "a").unwrap();
        std::fs::write(d.join("b"), "b").unwrap();
        assert!(rename_noreplace(&d.join("a"), &d.join("b")).is_err());
        rename_noreplace(&d.join("a"), &d.join("c")).unwrap();
        assert_eq!(std::fs::read_to_string(d.join("c")).unwrap(), "a");
        std::fs::remove_dir_all(&d).unwrap();
        assert!(clock_state().0 >= -1);
    }
}
