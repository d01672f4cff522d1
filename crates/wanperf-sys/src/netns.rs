//! Namespaces and the devices of an emulated network: joining and creating namespaces, TUN
//! devices, packet sockets and ethtool settings.

use crate::errno::cvt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

fn unshare(flags: libc::c_int) -> io::Result<()> {
    // SAFETY: unshare takes flags only.
    if unsafe { libc::unshare(flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Puts the children this process creates next into a new PID namespace (the first becomes
/// its init: when it ends, the kernel ends every process inside).
pub fn unshare_pid_namespace() -> io::Result<()> {
    unshare(libc::CLONE_NEWPID)
}

/// Moves this process into a new user namespace (refused to a multithreaded process).
pub fn unshare_user_namespace() -> io::Result<()> {
    unshare(libc::CLONE_NEWUSER)
}

/// Moves the calling thread into a new network namespace.
pub fn unshare_net_namespace() -> io::Result<()> {
    unshare(libc::CLONE_NEWNET)
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

/// Opens `/dev/net/tun` (read-write, non-blocking, close-on-exec): a TUN device to be, once
/// [`attach_tun`] names it.
pub fn open_tun() -> io::Result<OwnedFd> {
    // SAFETY: the path is a valid C string.
    let fd = cvt(unsafe { libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) })?;
    // SAFETY: fd was just opened and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Makes `tun` (from [`open_tun`]) the TUN device `name` (cut to 15 bytes) in the calling
/// thread's namespace (IFF_TUN | IFF_NO_PI). With `offload`, packets carry a virtio-net header
/// and may be TCP segmentation-offload super-packets of up to 64 KiB (IFF_VNET_HDR,
/// TUNSETOFFLOAD with checksum and TSO), and UDP ones too where the kernel has them (USO,
/// Linux 6.2 and later). Returns whether the device took UDP segmentation offload (an older
/// kernel refuses it, and the device then has the rest).
pub fn attach_tun(tun: &impl AsFd, name: &str, offload: bool) -> io::Result<bool> {
    let fd = tun.as_fd().as_raw_fd();
    // struct ifreq: 16 bytes of name, then a short of flags (the union is 24 bytes).
    let mut ifr = [0u8; 40];
    let n = name.len().min(15);
    ifr[..n].copy_from_slice(&name.as_bytes()[..n]);
    let mut flags = (libc::IFF_TUN | libc::IFF_NO_PI) as u16;
    if offload {
        flags |= libc::IFF_VNET_HDR as u16;
    }
    ifr[16..18].copy_from_slice(&flags.to_ne_bytes());
    // SAFETY: ifr is a correctly sized ifreq for TUNSETIFF, alive for the call.
    if unsafe { libc::ioctl(fd, libc::TUNSETIFF, ifr.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if !offload {
        return Ok(false);
    }
    let set = |features: libc::c_uint| {
        // SAFETY: TUNSETOFFLOAD takes the feature bits as its argument, no pointer.
        match unsafe { libc::ioctl(fd, libc::TUNSETOFFLOAD, features as libc::c_ulong) } {
            0 => Ok(()),
            _ => Err(io::Error::last_os_error()),
        }
    };
    let features = libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO6;
    if set(features | TUN_F_USO4 | TUN_F_USO6).is_ok() {
        return Ok(true);
    }
    set(features).map(|()| false)
}

/// TUNSETOFFLOAD bits for UDP segmentation offload (linux/if_tun.h; not in libc yet).
const TUN_F_USO4: libc::c_uint = 0x20;
const TUN_F_USO6: libc::c_uint = 0x40;

/// A datagram socket to carry interface ioctls such as [`ethtool_set`] (AF_INET,
/// close-on-exec).
pub fn ioctl_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket call.
    let s = cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: s was just created and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(s) })
}

/// Sends the ethtool command `cmd` (an `ETHTOOL_S*` taking a `struct ethtool_value`) with
/// `value` for interface `name` (cut to 15 bytes) through `sock` (see [`ioctl_socket`]).
pub fn ethtool_set(sock: &impl AsFd, name: &str, cmd: u32, value: u32) -> io::Result<()> {
    let mut ev: [u32; 2] = [cmd, value];
    let mut ifr = [0u8; 40];
    let n = name.len().min(15);
    ifr[..n].copy_from_slice(&name.as_bytes()[..n]);
    let ptr = ev.as_mut_ptr() as usize;
    ifr[16..24].copy_from_slice(&ptr.to_ne_bytes());
    // SAFETY: ifr carries a pointer to `ev`, a valid ethtool_value that outlives the call,
    // for SIOCETHTOOL.
    if unsafe { libc::ioctl(sock.as_fd().as_raw_fd(), libc::SIOCETHTOOL, ifr.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A raw packet socket for protocol `proto` (an ETH_P_* in network byte order), not yet
/// bound (non-blocking, close-on-exec).
pub fn packet_socket(proto: u16) -> io::Result<OwnedFd> {
    // SAFETY: plain socket call.
    let fd = cvt(unsafe {
        libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, i32::from(proto))
    })?;
    // SAFETY: fd was just created and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Binds packet socket `sock` to interface `ifindex` for protocol `proto` (network byte
/// order).
pub fn bind_packet(sock: &impl AsFd, ifindex: u32, proto: u16) -> io::Result<()> {
    // SAFETY: an all-zero sockaddr_ll is valid; fields set below.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = proto;
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: sll is a valid sockaddr_ll of the size given, alive for the call.
    let rc = unsafe {
        libc::bind(
            sock.as_fd().as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
