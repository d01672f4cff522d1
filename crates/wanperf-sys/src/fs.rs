//! Files: access under a directory descriptor without following links (`openat`, `mkdirat`,
//! `fstatat`, `unlinkat`, `renameat`, directory listing), renaming without replacing,
//! preallocation, O_DIRECT and its aligned buffers, page-cache advice, file-system facts.

use crate::errno::cvt;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

fn cstr(s: &str) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path contains a NUL byte"))
}

/// Renames `from` to `to` unless `to` exists (renameat2 with RENAME_NOREPLACE; on file
/// systems without it, a hard link, which refuses to replace too, then `from` stays).
pub fn rename_noreplace(from: &std::path::Path, to: &std::path::Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &std::path::Path| CString::new(p.as_os_str().as_bytes()).map_err(io::Error::other);
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

/// Opens `name` in `dir` with `flags` (O_NOFOLLOW and O_CLOEXEC always added).
pub fn openat(dir: &impl AsFd, name: &str, flags: libc::c_int, mode: libc::mode_t) -> io::Result<OwnedFd> {
    let c = cstr(name)?;
    // SAFETY: a borrowed open descriptor and a NUL-terminated name that outlive the call.
    let fd = cvt(unsafe {
        libc::openat(
            dir.as_fd().as_raw_fd(),
            c.as_ptr(),
            flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            libc::c_uint::from(mode),
        )
    })?;
    // SAFETY: fd was just returned by openat and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Creates directory `name` in `dir` with `mode`.
pub fn mkdirat(dir: &impl AsFd, name: &str, mode: libc::mode_t) -> io::Result<()> {
    let c = cstr(name)?;
    // SAFETY: a borrowed open descriptor and a NUL-terminated name that outlive the call.
    cvt(unsafe { libc::mkdirat(dir.as_fd().as_raw_fd(), c.as_ptr(), mode) }).map(|_| ())
}

/// `stat` of `name` in `dir`, not following a link.
pub fn stat_at(dir: &impl AsFd, name: &str) -> io::Result<libc::stat> {
    let c = cstr(name)?;
    // SAFETY: stat is plain data, filled by the kernel.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a borrowed open descriptor, a NUL-terminated name and a valid out-pointer.
    cvt(unsafe { libc::fstatat(dir.as_fd().as_raw_fd(), c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) })?;
    Ok(st)
}

/// Removes `name` in `dir` (a file), ignoring a missing one.
pub fn unlink_at(dir: &impl AsFd, name: &str) -> io::Result<()> {
    let c = cstr(name)?;
    // SAFETY: a borrowed open descriptor and a NUL-terminated name that outlive the call.
    match cvt(unsafe { libc::unlinkat(dir.as_fd().as_raw_fd(), c.as_ptr(), 0) }) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        r => r.map(|_| ()),
    }
}

/// Renames `from` to `to` within `dir`.
pub fn rename_at(dir: &impl AsFd, from: &str, to: &str) -> io::Result<()> {
    let (a, b) = (cstr(from)?, cstr(to)?);
    let d = dir.as_fd().as_raw_fd();
    // SAFETY: a borrowed open descriptor and NUL-terminated names that outlive the call.
    cvt(unsafe { libc::renameat(d, a.as_ptr(), d, b.as_ptr()) }).map(|_| ())
}

/// Flushes the file system holding `fd` (one call makes a batch of small files durable).
pub fn syncfs(fd: &impl AsRawFd) -> io::Result<()> {
    // SAFETY: syncfs takes a descriptor number; a closed one is EBADF.
    cvt(unsafe { libc::syncfs(fd.as_raw_fd()) }).map(|_| ())
}

/// Names in a directory (without `.` and `..`), sorted.
pub fn list_dir(dir: &impl AsFd) -> io::Result<Vec<String>> {
    let dup = dir.as_fd().try_clone_to_owned()?;
    let raw = {
        use std::os::fd::IntoRawFd;
        dup.into_raw_fd()
    };
    // SAFETY: fdopendir takes ownership of `raw` (closed by closedir).
    let d = unsafe { libc::fdopendir(raw) };
    if d.is_null() {
        let e = io::Error::last_os_error();
        // SAFETY: fdopendir failed, so `raw` is still ours.
        unsafe { libc::close(raw) };
        return Err(e);
    }
    let mut out = Vec::new();
    loop {
        // SAFETY: d is a valid DIR*.
        let ent = unsafe { libc::readdir(d) };
        if ent.is_null() {
            break;
        }
        // SAFETY: readdir returned a valid dirent whose d_name is NUL-terminated.
        let name = unsafe { std::ffi::CStr::from_ptr((*ent).d_name.as_ptr()) }.to_string_lossy().into_owned();
        if name != "." && name != ".." {
            out.push(name);
        }
    }
    // SAFETY: d is valid and closed once.
    unsafe { libc::closedir(d) };
    out.sort();
    Ok(out)
}

/// Allocates `len` bytes of `fd` from `offset` (posix_fallocate); the error is the one it
/// returns (EOPNOTSUPP or EINVAL where the file system cannot).
pub fn fallocate(fd: &impl AsFd, offset: u64, len: u64) -> io::Result<()> {
    let einval = |_| io::Error::from_raw_os_error(libc::EINVAL);
    let (off, len) = (libc::off_t::try_from(offset).map_err(einval)?, libc::off_t::try_from(len).map_err(einval)?);
    // SAFETY: posix_fallocate on a borrowed open descriptor takes plain values.
    match unsafe { libc::posix_fallocate(fd.as_fd().as_raw_fd(), off, len) } {
        0 => Ok(()),
        rc => Err(io::Error::from_raw_os_error(rc)),
    }
}

/// Turns O_DIRECT off on an open file (for an unaligned tail).
pub fn clear_direct(fd: &impl AsFd) -> io::Result<()> {
    let raw = fd.as_fd().as_raw_fd();
    // SAFETY: F_GETFL on a borrowed open descriptor only reads its status flags.
    let fl = cvt(unsafe { libc::fcntl(raw, libc::F_GETFL) })?;
    // SAFETY: F_SETFL on a borrowed open descriptor only changes its status flags.
    cvt(unsafe { libc::fcntl(raw, libc::F_SETFL, fl & !libc::O_DIRECT) }).map(|_| ())
}

/// Asks the kernel to drop `fd`'s cached pages (posix_fadvise POSIX_FADV_DONTNEED over the
/// whole file), so the next reads come from the device.
pub fn drop_cache(fd: &impl AsFd) -> io::Result<()> {
    // SAFETY: posix_fadvise only advises the kernel about a borrowed open descriptor.
    match unsafe { libc::posix_fadvise(fd.as_fd().as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) } {
        0 => Ok(()),
        rc => Err(io::Error::from_raw_os_error(rc)),
    }
}

/// The type (`f_type`, a magic number such as tmpfs's 0x01021994) of the file system holding
/// `fd`.
pub fn fs_type(fd: &impl AsFd) -> io::Result<i64> {
    // SAFETY: statfs is plain data; fstatfs fills it.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a borrowed open descriptor and a valid out-pointer.
    cvt(unsafe { libc::fstatfs(fd.as_fd().as_raw_fd(), &mut st) })?;
    Ok(st.f_type as i64)
}

/// A zeroed buffer aligned to 4096 bytes, for O_DIRECT reads and writes.
pub struct Aligned {
    ptr: *mut u8,
    len: usize,
}

impl Aligned {
    fn layout(len: usize) -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(len.max(4096), 4096).expect("layout")
    }

    /// A buffer of `len` zero bytes (at least 4096 are allocated).
    pub fn new(len: usize) -> Aligned {
        // SAFETY: the layout's size is at least 4096, never zero.
        let ptr = unsafe { std::alloc::alloc_zeroed(Self::layout(len)) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(Self::layout(len));
        }
        Aligned { ptr, len }
    }
}

impl AsMut<[u8]> for Aligned {
    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid, initialized (zeroed) and exclusively ours for len bytes.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl AsRef<[u8]> for Aligned {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: ptr is valid and initialized for len bytes; borrowed shared.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with the same layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr, Self::layout(self.len)) }
    }
}
