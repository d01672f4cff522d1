//! Socket options both ends apply to data (and control) sockets, and the pre-flight checks
//! that turn a kernel's silent capping into a clear message.

use crate::sys;
use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use wanperf_proto::units::fmt_bytes;

/// Options for one data socket.
#[derive(Debug, Clone, Default)]
pub struct SockOpts {
    /// SO_SNDBUF and SO_RCVBUF request.
    pub window: Option<u64>,
    /// TCP congestion control.
    pub cc: Option<String>,
    /// DSCP.
    pub dscp: Option<u8>,
    /// Local address to bind.
    pub bind: Option<IpAddr>,
    /// Interface to bind (SO_BINDTODEVICE).
    pub bind_dev: Option<String>,
    /// SO_MAX_PACING_RATE in bit/s (TCP).
    pub pace_bps: Option<u64>,
    /// An MPTCP socket (IPPROTO_MPTCP) instead of a TCP one.
    pub mptcp: bool,
}

/// A stream socket for `addr`: MPTCP (IPPROTO_MPTCP) when asked, else TCP; a kernel that
/// does not allow MPTCP gets one clear line.
pub fn stream_socket(addr: std::net::SocketAddr, mptcp: bool) -> io::Result<Socket> {
    if !mptcp {
        return Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP));
    }
    Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::from(wanperf_sys::sockopt::IPPROTO_MPTCP)))
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("this kernel does not allow MPTCP (no CONFIG_MPTCP, or sysctl net.mptcp.enabled = 0): {e}"),
            )
        })
}

/// Whether `s` is an MPTCP socket.
pub fn is_mptcp(s: &Socket) -> bool {
    s.protocol().ok().flatten() == Some(Protocol::from(wanperf_sys::sockopt::IPPROTO_MPTCP))
}

/// Why options could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum OptError {
    /// The window asked for is above what the kernel grants.
    #[error("window {asked} asked, but the kernel granted only {granted_snd} of send buffer and {granted_rcv} of receive buffer (net.core.wmem_max = {wmem}, net.core.rmem_max = {rmem}); raise them with `sysctl -w net.core.wmem_max=N net.core.rmem_max=N`, or pass --accept-capped-window to measure with what is granted")]
    WindowCapped {
        /// Requested.
        asked: String,
        /// Granted send buffer (per getsockopt, which reports twice the usable window).
        granted_snd: String,
        /// Granted receive buffer.
        granted_rcv: String,
        /// sysctl value.
        wmem: String,
        /// sysctl value.
        rmem: String,
    },
    /// The congestion control is not available.
    #[error("congestion control `{name}` is not available on {host} (available: {available}); load it with `modprobe tcp_{name}`")]
    Cc {
        /// Requested.
        name: String,
        /// Which end.
        host: &'static str,
        /// What the kernel offers.
        available: String,
    },
    /// Binding to an interface failed.
    #[error("cannot bind to interface `{dev}`: {err}")]
    BindDev {
        /// Interface.
        dev: String,
        /// OS error.
        err: io::Error,
    },
    /// Binding to an address failed.
    #[error("cannot bind to local address {addr}: {err}")]
    Bind {
        /// Address.
        addr: IpAddr,
        /// OS error.
        err: io::Error,
    },
    /// Another socket call failed.
    #[error("{what}: {err}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// OS error.
        err: io::Error,
    },
}

fn io_err(what: &'static str) -> impl FnOnce(io::Error) -> OptError {
    move |err| OptError::Io { what, err }
}

impl SockOpts {
    /// Applies everything that must precede connect/listen. `host` names this end in errors.
    pub fn apply(&self, s: &Socket, ipv6: bool, host: &'static str) -> Result<(), OptError> {
        if let Some(w) = self.window {
            // Both buffers, so either direction of a test sees the same window (iperf semantics).
            s.set_send_buffer_size(w as usize).map_err(io_err("setting SO_SNDBUF"))?;
            s.set_recv_buffer_size(w as usize).map_err(io_err("setting SO_RCVBUF"))?;
        }
        if let Some(cc) = &self.cc {
            sys::set_congestion(s.as_raw_fd(), cc).map_err(|_| OptError::Cc {
                name: cc.clone(),
                host,
                available: sys::available_cc().join(" "),
            })?;
        }
        if let Some(d) = self.dscp {
            sys::set_dscp(s, ipv6, d).map_err(io_err("setting DSCP"))?;
        }
        if let Some(dev) = &self.bind_dev {
            s.bind_device(Some(dev.as_bytes())).map_err(|err| OptError::BindDev { dev: dev.clone(), err })?;
        }
        if let Some(addr) = self.bind {
            s.bind(&std::net::SocketAddr::new(addr, 0).into()).map_err(|err| OptError::Bind { addr, err })?;
        }
        if let Some(bps) = self.pace_bps {
            sys::set_max_pacing(s.as_raw_fd(), bps).map_err(io_err("setting SO_MAX_PACING_RATE"))?;
        }
        Ok(())
    }
}

/// Checks, on a scratch socket, that the kernel grants `window` and the congestion control.
/// Returns the (sndbuf, rcvbuf) the kernel reports for the window.
pub fn preflight(
    window: Option<u64>,
    cc: Option<&str>,
    accept_capped: bool,
    host: &'static str,
) -> Result<Option<(u64, u64)>, OptError> {
    let s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).map_err(io_err("creating a socket"))?;
    SockOpts { window, cc: cc.map(str::to_string), ..Default::default() }.apply(&s, false, host)?;
    let Some(w) = window else { return Ok(None) };
    let snd = s.send_buffer_size().map_err(io_err("reading SO_SNDBUF"))? as u64;
    let rcv = s.recv_buffer_size().map_err(io_err("reading SO_RCVBUF"))? as u64;
    // Linux doubles the request for bookkeeping overhead; less than double means capped.
    if (snd < 2 * w || rcv < 2 * w) && !accept_capped {
        let (rmem, wmem) = sys::buffer_max();
        let show = |v: Option<u64>| v.map_or("?".into(), fmt_bytes);
        return Err(OptError::WindowCapped {
            asked: fmt_bytes(w),
            granted_snd: fmt_bytes(snd),
            granted_rcv: fmt_bytes(rcv),
            wmem: show(wmem),
            rmem: show(rmem),
        });
    }
    Ok(Some((snd, rcv)))
}

/// A note for the start record when the window was capped but the user accepted it.
pub fn capped_note(window: u64, granted: (u64, u64)) -> Option<String> {
    (granted.0 < 2 * window || granted.1 < 2 * window).then(|| {
        format!(
            "window {} capped by the kernel: SO_SNDBUF {}, SO_RCVBUF {} granted",
            fmt_bytes(window),
            fmt_bytes(granted.0),
            fmt_bytes(granted.1)
        )
    })
}

/// UDP socket buffers: the window asked for, or else 4 MiB (within net.core.*mem_max), so a
/// receiver that is briefly descheduled does not drop datagrams the network delivered.
pub fn size_udp_buffers(s: &socket2::SockRef<'_>, window: Option<u64>) {
    let size = window.unwrap_or(4 << 20) as usize;
    let _ = s.set_recv_buffer_size(size);
    let _ = s.set_send_buffer_size(size);
}
