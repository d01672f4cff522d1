//! The engine's system interface: TCP_INFO read into the protocol's terms, DSCP, CPU
//! accounting, the host's /proc and /sys counters, and the host capture. The system calls
//! themselves live in `wanperf-sys` (socket options, batched and timestamped datagrams, the
//! splice sender, rusage) and are re-exported here under the names the engine has always used.

use socket2::Socket;
use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::RawFd;
use wanperf_proto::msg::{CpuUsage, HostCapture, InterfaceCapture, TcpInfo};

pub use wanperf_sys::msg::{
    icmp_pending, recv_error, recv_timestamped, recv_tx_timestamp, send_batch, send_train_to, Received, RecvBatch,
    SockError, SO_EE_ORIGIN_ICMP, SO_EE_ORIGIN_ICMP6, SO_EE_ORIGIN_LOCAL,
};
pub use wanperf_sys::process::{process_cpu, set_timer_slack_ns, thread_cpu};
pub use wanperf_sys::sockopt::{
    congestion, enable_rx_timestamps, enable_tx_timestamps, rcvbuf, recv_discard, set_congestion, set_max_pacing,
    set_rcvlowat, setsockopt_raw,
};
pub use wanperf_sys::splice::SpliceSender;

/// Reads TCP_INFO. Fields are taken by their offsets in `struct tcp_info` (linux/tcp.h);
/// fields past the length the kernel returned are `None`.
pub fn tcp_info(fd: RawFd) -> io::Result<TcpInfo> {
    Ok(tcp_info_from(&wanperf_sys::sockopt::tcp_info_bytes(fd)?))
}

/// TCP_INFO's bytes (a socket's or an MPTCP subflow's) in the protocol's terms.
pub fn tcp_info_from(b: &wanperf_sys::sockopt::TcpInfoBytes) -> TcpInfo {
    let g32 = |o| b.u32_at(o).unwrap_or(0);
    let ssthresh = g32(76);
    TcpInfo {
        cwnd: g32(80),
        ssthresh: (ssthresh < 0x7fff_ffff).then_some(ssthresh),
        snd_mss: g32(16),
        srtt_us: g32(68),
        rttvar_us: g32(72),
        min_rtt_us: b.u32_at(148),
        total_retrans: g32(100),
        lost: g32(32),
        unacked: g32(24),
        reordering: g32(88),
        delivery_rate_bps: b.u64_at(160).map(|v| v.saturating_mul(8)),
        pacing_rate_bps: b.u64_at(104).map(|v| if v == u64::MAX { v } else { v.saturating_mul(8) }),
        snd_wnd: b.u32_at(228),
        rcv_space: g32(96),
        busy_time_us: b.u64_at(168),
        rwnd_limited_us: b.u64_at(176),
        sndbuf_limited_us: b.u64_at(184),
        bytes_acked: b.u64_at(120),
        bytes_retrans: b.u64_at(208),
        snd_cwnd_bytes: None,
        // tcpi_options (byte 5): TCPI_OPT_TIMESTAMPS 1, TCPI_OPT_SACK 2, TCPI_OPT_WSCALE 4; the
        // shifts in byte 6, tcpi_snd_wscale in its low four bits.
        sack: b.u8_at(5).map(|o| o & 2 != 0),
        timestamps: b.u8_at(5).map(|o| o & 1 != 0),
        wscale: b.u8_at(5).filter(|o| o & 4 != 0).and_then(|_| b.u8_at(6)).map(|w| [w & 0xf, w >> 4]),
        congestion_events: None,
    }
}

/// The DSCP a socket marks with (IPv4 TOS or IPv6 traffic class, whichever family it is).
pub fn dscp(s: &Socket) -> Option<u8> {
    let v6 = s.local_addr().ok()?.is_ipv6();
    let tos = if v6 { s.tclass_v6().ok()? } else { s.tos().ok()? };
    Some((tos >> 2) as u8)
}

/// Sets the DSCP code point on a socket of the given family.
pub fn set_dscp(sock: &Socket, ipv6: bool, dscp: u8) -> io::Result<()> {
    let tos = u32::from(dscp) << 2;
    if ipv6 {
        sock.set_tclass_v6(tos)
    } else {
        sock.set_tos(tos)
    }
}

/// CPU used between two readings over `wall_s` seconds.
pub fn cpu_between(before: (f64, f64), after: (f64, f64), wall_s: f64) -> CpuUsage {
    CpuUsage { user_s: (after.0 - before.0).max(0.0), system_s: (after.1 - before.1).max(0.0), wall_s }
}

/// The host's TCP counters: `TcpExt.*` from /proc/net/netstat and `Tcp.*` from /proc/net/snmp.
pub fn tcp_counters() -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for (path, prefix) in [("/proc/net/netstat", "TcpExt:"), ("/proc/net/snmp", "Tcp:")] {
        if let Ok(text) = std::fs::read_to_string(path) {
            parse_proc_pairs(&text, prefix, &mut out);
        }
    }
    out
}

/// Parses the header/value line pairs of /proc/net/{netstat,snmp} for one prefix.
pub fn parse_proc_pairs(text: &str, prefix: &str, out: &mut BTreeMap<String, i64>) {
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with(prefix)).collect();
    for pair in lines.chunks(2) {
        if let [names, values] = pair {
            let name = prefix.trim_end_matches(':');
            for (k, v) in names.split_whitespace().skip(1).zip(values.split_whitespace().skip(1)) {
                if let Ok(v) = v.parse::<i64>() {
                    out.insert(format!("{name}.{k}"), v);
                }
            }
        }
    }
}

/// Non-zero differences `after - before` (gauges like Tcp.CurrEstab included as differences).
pub fn counter_delta(before: &BTreeMap<String, i64>, after: &BTreeMap<String, i64>) -> BTreeMap<String, i64> {
    after
        .iter()
        .filter_map(|(k, v)| {
            let d = v - before.get(k).copied().unwrap_or(0);
            (d != 0 && k != "Tcp.MaxConn" && k != "Tcp.RtoMin" && k != "Tcp.RtoMax" && k != "Tcp.RtoAlgorithm")
                .then(|| (k.clone(), d))
        })
        .collect()
}

fn read_trim(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn read_u64(path: &str) -> Option<u64> {
    read_trim(path)?.parse().ok()
}

fn read_triple(path: &str) -> Option<[u64; 3]> {
    let s = read_trim(path)?;
    let v: Vec<u64> = s.split_whitespace().filter_map(|x| x.parse().ok()).collect();
    (v.len() == 3).then(|| [v[0], v[1], v[2]])
}

/// `net.core.rmem_max` and `net.core.wmem_max`.
pub fn buffer_max() -> (Option<u64>, Option<u64>) {
    (read_u64("/proc/sys/net/core/rmem_max"), read_u64("/proc/sys/net/core/wmem_max"))
}

/// Congestion control algorithms the kernel offers now.
pub fn available_cc() -> Vec<String> {
    read_trim("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// The interface whose address the kernel would use to reach `peer`.
pub fn route_interface(peer: IpAddr) -> Option<InterfaceCapture> {
    let bind: SocketAddr = if peer.is_ipv4() { "0.0.0.0:0".parse().ok()? } else { "[::]:0".parse().ok()? };
    let s = UdpSocket::bind(bind).ok()?;
    // connect() on UDP sends nothing; it only asks the routing table.
    s.connect(SocketAddr::new(peer, 9)).ok()?;
    let local = s.local_addr().ok()?.ip();
    interface_of(local)
}

/// The interface holding address `local`.
pub fn interface_of(local: IpAddr) -> Option<InterfaceCapture> {
    let name = wanperf_sys::iface::interface_name_of(local)?;
    let base = format!("/sys/class/net/{name}");
    Some(InterfaceCapture {
        mtu: read_u64(&format!("{base}/mtu")).map(|v| v as u32),
        txqueuelen: read_u64(&format!("{base}/tx_queue_len")).map(|v| v as u32),
        speed_mbps: read_trim(&format!("{base}/speed"))
            .and_then(|s| s.parse::<i64>().ok())
            .filter(|v| *v > 0)
            .map(|v| v as u64),
        address: local.to_string(),
        name,
    })
}

/// What this host looks like; `peer` selects the interface recorded.
pub fn host_capture(peer: Option<IpAddr>) -> HostCapture {
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_default();
    let (rmem_max, wmem_max) = buffer_max();
    HostCapture {
        hostname: read_trim("/proc/sys/kernel/hostname").unwrap_or_default(),
        kernel: read_trim("/proc/sys/kernel/osrelease").unwrap_or_default(),
        cpu_model,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        cpu_quota: wanperf_host::cgroup::process_quota(),
        rmem_max,
        wmem_max,
        tcp_rmem: read_triple("/proc/sys/net/ipv4/tcp_rmem"),
        tcp_wmem: read_triple("/proc/sys/net/ipv4/tcp_wmem"),
        congestion_control: read_trim("/proc/sys/net/ipv4/tcp_congestion_control"),
        available_congestion_control: available_cc(),
        interface: peer.and_then(route_interface),
    }
}

/// Waits until `at` (a `Instant`): sleeps while more than 200 µs are left, then spins, so
/// streams can be paced to a few µs.
pub fn pace_until(at: std::time::Instant) {
    loop {
        let now = std::time::Instant::now();
        if now >= at {
            return;
        }
        let left = at - now;
        if left > std::time::Duration::from_micros(200) {
            std::thread::sleep(left - std::time::Duration::from_micros(150));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Wall-clock nanoseconds since the Unix epoch.
pub fn realtime_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// The host's CPU time so far from /proc/stat: (busy, total) in clock ticks over all cores
/// (idle and iowait are not busy).
pub fn host_cpu_ticks() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    Some((total.saturating_sub(idle), total))
}

/// Share of the host's CPU busy between two [`host_cpu_ticks`] readings.
pub fn host_busy_between(a: (u64, u64), b: (u64, u64)) -> Option<f64> {
    let dt = b.1.checked_sub(a.1)?;
    (dt > 0).then(|| (b.0.saturating_sub(a.0)) as f64 / dt as f64)
}

/// Nanoseconds the calling thread has waited on a run queue for a CPU (/proc/thread-self/
/// schedstat), where the kernel keeps it.
pub fn thread_runq_wait_ns() -> Option<u64> {
    let t = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    t.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn proc_pairs_and_delta() {
        let text = "TcpExt: SyncookiesSent TCPTimeouts\nTcpExt: 0 5\nIpExt: A\nIpExt: 1\n";
        let mut a = BTreeMap::new();
        parse_proc_pairs(text, "TcpExt:", &mut a);
        assert_eq!(a.get("TcpExt.TCPTimeouts"), Some(&5));
        assert_eq!(a.len(), 2);
        let mut b = a.clone();
        b.insert("TcpExt.TCPTimeouts".into(), 9);
        let d = counter_delta(&a, &b);
        assert_eq!(d.len(), 1);
        assert_eq!(d["TcpExt.TCPTimeouts"], 4);
    }

    #[test]
    fn real_counters_and_capture() {
        let c = tcp_counters();
        assert!(c.contains_key("Tcp.ActiveOpens"), "{c:?}");
        let h = host_capture(Some("127.0.0.1".parse().unwrap()));
        assert!(!h.kernel.is_empty());
        assert!(h.cpus >= 1);
        assert_eq!(h.interface.unwrap().name, "lo");
    }

    #[test]
    fn tcp_info_on_a_live_socket() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let info = tcp_info(c.as_raw_fd()).unwrap();
        assert!(info.cwnd > 0);
        assert!(info.snd_mss > 0);
        // What the host's sysctls allow is what a loopback connection negotiates.
        let on = |k: &str| std::fs::read_to_string(format!("/proc/sys/net/ipv4/{k}")).map(|v| v.trim() != "0").ok();
        assert_eq!(info.sack, on("tcp_sack"));
        assert_eq!(info.timestamps, on("tcp_timestamps"));
        assert_eq!(info.wscale.is_some(), on("tcp_window_scaling").unwrap_or(false));
        assert!(set_congestion(c.as_raw_fd(), "no-such-cc").is_err());
        assert!(set_congestion(c.as_raw_fd(), "reno").is_ok());
    }
}
