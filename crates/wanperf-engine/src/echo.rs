//! The server's UDP echo responder for `wanperf ping`: on the server's port, it stamps each
//! probe with the kernel's receive time and its own send time and returns it to allowed
//! clients (others get nothing, so the server is no reflector) — as large as it came, or only
//! its header when the probe asks for a short reply (`wanperf capacity`'s trains).

use crate::sys;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use wanperf_proto::probe::{Probe, PROBE_HEADER_LEN};

/// Answers probes on `sock` until `stop` is set. `allowed` decides per client address.
pub fn run_echo(sock: UdpSocket, allowed: impl Fn(std::net::IpAddr) -> bool, stop: Arc<AtomicBool>) {
    let _ = sys::enable_rx_timestamps(sock.as_raw_fd());
    let _ = sock.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buf = vec![0u8; 65_536];
    while !stop.load(Ordering::Acquire) {
        let Ok(r) = sys::recv_timestamped(sock.as_raw_fd(), &mut buf) else { continue };
        let Some(from) = r.from else { continue };
        let Some(p) = Probe::read(&buf[..r.len]) else { continue };
        if p.reply || r.len < PROBE_HEADER_LEN || !allowed(from.ip()) {
            continue;
        }
        let reply = Probe {
            reply: true,
            server_rx_ns: r.kernel_ns.unwrap_or_else(sys::realtime_ns),
            server_tx_ns: sys::realtime_ns(),
            ..p
        };
        reply.write(&mut buf);
        let len = if p.short { PROBE_HEADER_LEN } else { r.len };
        let _ = sock.send_to(&buf[..len], from);
    }
}
