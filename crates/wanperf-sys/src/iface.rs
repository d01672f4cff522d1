//! Network interfaces: index by name, name by address.

use std::ffi::CString;
use std::io;
use std::net::IpAddr;

/// The index of interface `name` in the calling thread's network namespace.
pub fn if_index(name: &str) -> io::Result<u32> {
    let c = CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in name"))?;
    // SAFETY: c is a valid NUL-terminated string that outlives the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(i)
    }
}

/// The name of the interface holding address `local` (getifaddrs), if one does.
pub fn interface_name_of(local: IpAddr) -> Option<String> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return None;
    }
    let mut found = None;
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: cur is a node of the list getifaddrs returned, alive until freeifaddrs.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: ifa_addr is non-null and points at a sockaddr of the family it names.
        let addr = unsafe {
            match i32::from((*ifa.ifa_addr).sa_family) {
                libc::AF_INET => {
                    let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                    Some(IpAddr::from(u32::from_be(sin.sin_addr.s_addr).to_be_bytes()))
                }
                libc::AF_INET6 => {
                    let sin6 = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                    Some(IpAddr::from(sin6.sin6_addr.s6_addr))
                }
                _ => None,
            }
        };
        if addr == Some(local) {
            // SAFETY: ifa_name is a NUL-terminated string owned by the list; copied out here.
            let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }.to_string_lossy().into_owned();
            found = Some(name);
            break;
        }
    }
    // SAFETY: head came from getifaddrs and is freed once; nothing borrowed from it remains.
    unsafe { libc::freeifaddrs(head) };
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_by_name_and_address() {
        assert!(if_index("lo").unwrap() > 0);
        assert!(if_index("no-such-if0").is_err());
        assert!(if_index("a\0b").is_err());
        assert_eq!(interface_name_of("127.0.0.1".parse().unwrap()).as_deref(), Some("lo"));
        assert_eq!(interface_name_of("192.0.2.254".parse().unwrap()), None);
    }
}
