//! System calls' return values as `io::Result`.

/// `Err(last OS error)` when a call returned −1 (or any negative value), else its value.
pub(crate) fn cvt(rc: libc::c_int) -> std::io::Result<libc::c_int> {
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}
