//! The zero-copy sender: vmsplice a buffer's pages into a pipe, splice the pipe into a socket.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A zero-copy sender: a static buffer spliced into the socket through a pipe (vmsplice the
/// buffer's pages into the pipe, splice the pipe into the socket). The pages are shared with
/// the kernel, never copied; that is safe here because the buffer never changes.
#[derive(Debug)]
pub struct SpliceSender {
    buf: Vec<u8>,
    rd: OwnedFd,
    wr: OwnedFd,
    in_pipe: usize,
}

impl SpliceSender {
    /// A sender whose buffer holds `len` bytes of pattern.
    pub fn new(len: usize) -> io::Result<SpliceSender> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: fds is a valid array of two ints.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both fds were just created and are owned here.
        let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // A pipe as large as one write (within fs.pipe-max-size); failure just means smaller chunks.
        // SAFETY: plain fcntl on an owned fd.
        unsafe { libc::fcntl(wr.as_raw_fd(), libc::F_SETPIPE_SZ, len as libc::c_int) };
        let buf = (0..len).map(|i| (i % 251) as u8).collect();
        Ok(SpliceSender { buf, rd, wr, in_pipe: 0 })
    }

    /// Moves up to `count` bytes into the socket; returns how many reached it.
    pub fn send(&mut self, sock: RawFd, count: usize) -> io::Result<usize> {
        if self.in_pipe == 0 {
            let iov =
                libc::iovec { iov_base: self.buf.as_ptr() as *mut libc::c_void, iov_len: count.min(self.buf.len()) };
            // SAFETY: iov points into self.buf, which outlives the pipe's references (the
            // pipe is drained into the socket, whose skbs hold page references of their own).
            let n = unsafe { libc::vmsplice(self.wr.as_raw_fd(), &iov, 1, 0) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            self.in_pipe = n as usize;
        }
        // SAFETY: valid fds; null offsets for pipe and socket.
        let n = unsafe {
            libc::splice(
                self.rd.as_raw_fd(),
                std::ptr::null_mut(),
                sock,
                std::ptr::null_mut(),
                self.in_pipe,
                libc::SPLICE_F_MOVE | libc::SPLICE_F_MORE,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        self.in_pipe -= n as usize;
        Ok(n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn spliced_bytes_arrive_as_the_pattern() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let tx = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut rx, _) = l.accept().unwrap();
        let mut s = SpliceSender::new(64 << 10).unwrap();
        let mut sent = 0;
        while sent < 100_000 {
            sent += s.send(tx.as_raw_fd(), 100_000 - sent).unwrap();
        }
        drop(tx);
        let mut got = Vec::new();
        rx.read_to_end(&mut got).unwrap();
        assert_eq!(got.len(), 100_000);
        // Each vmsplice starts at the buffer's start.
        assert_eq!(&got[..300], &(0..300).map(|i| (i % 251) as u8).collect::<Vec<_>>()[..]);
    }
}
