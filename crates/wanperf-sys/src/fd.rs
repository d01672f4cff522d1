//! Descriptors: adopting one handed down by a parent, keeping one across exec, and plain
//! reads and writes on descriptor numbers.

use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};

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

/// One read(2) of descriptor `fd` into `buf`: the bytes read (0 at end of file).
pub fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: buf is valid for writes of its length for the duration of the call.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// One write(2) of `buf` to descriptor `fd`: the bytes written.
pub fn write(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: buf is valid for reads of its length for the duration of the call.
    let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}
