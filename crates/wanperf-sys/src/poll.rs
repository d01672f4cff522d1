//! Waiting for descriptors: one general wrapper, [`poll_fds`] (ppoll with a nanosecond
//! timeout), and the two shapes most callers want on top of it.

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

pub use libc::pollfd as PollFd;

/// Waits until one of `fds` has one of its `events` or `timeout` has passed (`None`: no
/// limit); the kernel fills each `revents`. Returns how many have events (0 on a timeout).
/// An interrupted wait is `Err` with kind `Interrupted`. Descriptors are plain numbers here:
/// a closed one gets POLLNVAL, a negative one is skipped. Allocates nothing.
pub fn poll_fds(fds: &mut [PollFd], timeout: Option<Duration>) -> io::Result<usize> {
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let tp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: fds is a valid array of pollfd of the length given, tp is null or points to a
    // live timespec, and the signal mask is null (unchanged); all outlive the call.
    let n = unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, tp, std::ptr::null()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

fn ms(timeout_ms: i32) -> Option<Duration> {
    u64::try_from(timeout_ms).ok().map(Duration::from_millis)
}

/// Waits up to `timeout_ms` (negative: no limit) until one of `fds` is readable; which are
/// (false for all on a timeout or an interrupted wait).
pub fn poll_readable(fds: &[&impl AsFd], timeout_ms: i32) -> io::Result<Vec<bool>> {
    let mut p: Vec<PollFd> =
        fds.iter().map(|f| PollFd { fd: f.as_fd().as_raw_fd(), events: libc::POLLIN, revents: 0 }).collect();
    match poll_fds(&mut p, ms(timeout_ms)) {
        Ok(_) => Ok(p.iter().map(|x| x.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0).collect()),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(vec![false; p.len()]),
        Err(e) => Err(e),
    }
}

/// Waits up to `timeout_ms` (negative: no limit) for `events` (`libc::POLLIN`, `POLLOUT`,
/// `POLLERR`, …) on `fd`; false on a timeout or an interrupted wait.
pub fn poll_one(fd: &impl AsFd, events: libc::c_short, timeout_ms: i32) -> io::Result<bool> {
    let mut p = [PollFd { fd: fd.as_fd().as_raw_fd(), events, revents: 0 }];
    match poll_fds(&mut p, ms(timeout_ms)) {
        Ok(n) => Ok(n > 0),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(false),
        Err(e) => Err(e),
    }
}
