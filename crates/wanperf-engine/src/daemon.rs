//! `wanperf serve` as a daemon: its listeners (TCP dual-stack, the UDP echo beside it, the
//! optional iperf3 port), the banner that says who may test, and the accept loops until `stop`.

use crate::server::{Log, ServerConfig};
use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        // Dual stack: [::] also takes IPv4 clients.
        let _ = s.set_only_v6(false);
    }
    s.set_reuse_address(true)?;
    s.bind(&addr.into()).map_err(|e| io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}")))?;
    s.listen(1024)?;
    Ok(s.into())
}

/// What a server offers besides wanperf's tests and probes on its port.
#[derive(Debug, Clone, Default)]
pub struct Services<'a> {
    /// iperf3 clients on this port (TCP and UDP).
    pub iperf3_port: Option<u16>,
    /// A STAMP and TWAMP-Light reflector.
    pub stamp: Option<crate::stamp::StampServe>,
    /// An OWAMP server on this TCP port.
    pub owamp_port: Option<u16>,
    /// Copies into and out of this directory.
    pub root: Option<&'a Path>,
}

/// Serves tests on `listen` (and the other `services`) until `stop`; says what it does on
/// `log`.
pub fn run(
    listen: SocketAddr,
    services: Services<'_>,
    cfg: ServerConfig,
    stop: Arc<AtomicBool>,
    log: Log,
) -> io::Result<()> {
    let Services { iperf3_port, stamp, owamp_port, root } = services;
    let allow = &cfg.allow;
    let auth = cfg.auth.clone();
    // The STAMP reflector's socket is bound before the listener: whoever sees the server
    // listen (a study waits for its TCP port) may send test packets at once.
    let reflector = match stamp {
        Some(st) => {
            let sock = crate::stamp::bind(listen.ip(), st.port)?;
            let at = sock.local_addr().map_or_else(|_| st.port.to_string(), |x| x.to_string());
            log(&format!(
                "STAMP and TWAMP-Light reflector on {at} (UDP; {}, {})",
                if st.cfg.stateful { "stateful" } else { "stateless" },
                if matches!(st.cfg.auth, wanperf_stamp::packet::Auth::Open) {
                    "unauthenticated"
                } else {
                    "authenticated"
                }
            ));
            let (c, stop) = (cfg.clone(), stop.clone());
            Some(std::thread::spawn(move || crate::stamp::run_reflector(sock, |ip| c.allowed(ip), st.cfg, stop)))
        }
        None => None,
    };
    // The OWAMP server's listener likewise.
    let owamp = match owamp_port {
        Some(port) => {
            let lo = listener(SocketAddr::new(listen.ip(), port))?;
            let at = lo.local_addr().map_or_else(|_| port.to_string(), |x| x.to_string());
            log(&format!("OWAMP server on {at} (TCP control; unauthenticated mode)"));
            let c = cfg.clone();
            let allowed: Arc<dyn Fn(std::net::IpAddr) -> bool + Send + Sync> = Arc::new(move |ip| c.allowed(ip));
            let (stop, log) = (stop.clone(), log.clone());
            Some(std::thread::spawn(move || crate::owamp::serve(lo, allowed, stop, log)))
        }
        None => None,
    };
    let l = listener(listen)?;
    let mut who = if allow.is_empty() {
        "loopback clients only (use --allow CIDR for others)".to_string()
    } else {
        allow.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    };
    match &auth {
        Some(k) => who.push_str(&format!(" holding one of {} authorized key(s)", k.len())),
        None if !allow.is_empty() => who.push_str(" (no --authorized-keys: any host there can run tests)"),
        None => {}
    }
    // Bind the probe socket before announcing the server: whoever reads the banner may ping.
    let udp = crate::server::bind_udp_like(&l);
    if let Err(e) = &udp {
        log(&format!("no UDP echo for ping probes: {e}"));
    }
    // The iperf3 port is announced before the banner, so whoever reads the banner may use it.
    let iperf3 = match iperf3_port {
        Some(port) => {
            let l3 = listener(SocketAddr::new(listen.ip(), port))?;
            let at = l3.local_addr().map_or_else(|_| port.to_string(), |x| x.to_string());
            let h = crate::iperf3_server::spawn(l3, cfg.clone(), stop.clone(), log.clone())?;
            log(&format!("iperf3 clients on {at} (TCP and UDP)"));
            Some(h)
        }
        None => None,
    };
    if let Some(r) = root {
        log(&format!("copies into and out of {}", r.display()));
    }
    log(&format!(
        "{} listening on {} for {who}",
        cfg.software,
        l.local_addr().map_or_else(|_| listen.to_string(), |x| x.to_string())
    ));
    crate::server::serve_with(l, udp.ok(), cfg, stop.clone(), log.clone())?;
    stop.store(true, Ordering::Release);
    if let Some(h) = iperf3 {
        let _ = h.join();
    }
    if let Some(h) = owamp {
        let _ = h.join();
    }
    if let Some(c) = reflector.and_then(|h| h.join().ok()) {
        log(&format!(
            "STAMP reflector: {} packets reflected; dropped {} not allowed, {} malformed, {} with a wrong HMAC, {} over their source's rate",
            c.reflected, c.not_allowed, c.malformed, c.bad_hmac, c.limited
        ));
    }
    log("server stopped");
    Ok(())
}
