//! STAMP and TWAMP-Light on sockets: the Session-Sender behind `wanperf ping --stamp` /
//! `--twamp-light` (a [`Prober`] for the ping loop, so its records, statistics and one-way
//! delays are wanperf's own), and the Session-Reflector behind `wanperf serve --stamp-port`.
//! The packets, the reflector's decisions and the loss split are `wanperf_stamp`'s, pure.

use crate::probe::{Clocks, Extras, ProbeSocket, Prober};
use crate::sys;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use wanperf_stamp::loss::{split, Answered};
use wanperf_stamp::packet::{Auth, Reflected, Test};
use wanperf_stamp::reflector::{Arrival, Config, Counters, Reflector};
use wanperf_stamp::time::{from_wire, to_wire, ErrorEstimate, Format};
use wanperf_stamp::tlv::{self, Tlv, Value, FLAG_I};

/// This host's clock as an Error Estimate field: synchronized when the kernel's clock
/// discipline says so (adjtimex: not STA_UNSYNC, not TIME_ERROR), with its estimated error;
/// otherwise unsynchronized, with [`ErrorEstimate::UNKNOWN`]'s one second.
pub fn local_error_estimate() -> ErrorEstimate {
    let (state, unsync, esterror_us) = wanperf_sys::clock_state();
    if state < 0 || state == 5 || unsync {
        return ErrorEstimate::UNKNOWN;
    }
    ErrorEstimate::of(esterror_us.max(1) as f64 * 1e-6, true, Format::Ntp)
}

/// The Session-Sender.
pub(crate) struct StampProber {
    sock: ProbeSocket,
    auth: Auth,
    twamp_light: bool,
    size: usize,
    dscp: Option<u8>,
    ssid: u16,
    error: ErrorEstimate,
    sent: u32,
    out: Vec<u8>,
    /// The first answer to each probe.
    answered: HashMap<u32, Answered>,
    reflector_error: Option<ErrorEstimate>,
}

impl StampProber {
    /// A sender to `addr` of `count` probes of `size` octets (DSCP `dscp`), TWAMP-Light's
    /// packets or STAMP's, authenticated with `key`.
    pub(crate) fn new(
        addr: SocketAddr,
        dscp: Option<u8>,
        size: usize,
        count: u64,
        twamp_light: bool,
        key: Option<Vec<u8>>,
    ) -> std::io::Result<Self> {
        let auth = match (key, twamp_light) {
            (Some(_), true) => return Err(std::io::Error::other(
                "TWAMP-Light has no authenticated mode here (its keys come from TWAMP-Control): use --stamp with a key",
            )),
            (Some(k), false) => Auth::Hmac(k),
            (None, _) => Auth::Open,
        };
        if count > u64::from(u32::MAX) {
            return Err(std::io::Error::other("STAMP numbers packets with 32 bits: at most 4294967295 per run"));
        }
        let mut ssid = [0u8; 2];
        let _ = getrandom::fill(&mut ssid);
        Ok(StampProber {
            sock: ProbeSocket::connect(dscp, addr)?,
            // TWAMP-Light reflectors keep the sender's SSID octets as MBZ: none is sent.
            ssid: if twamp_light { 0 } else { u16::from_be_bytes(ssid).max(1) },
            size: size.max(auth.base_len()),
            auth,
            twamp_light,
            dscp,
            error: local_error_estimate(),
            sent: 0,
            out: Vec::new(),
            answered: HashMap::new(),
            reflector_error: None,
        })
    }
}

impl Prober for StampProber {
    fn fd(&self) -> std::os::fd::RawFd {
        self.sock.sock.as_raw_fd()
    }

    fn send(&mut self, seq: u64, wall_ns: u64) -> std::io::Result<()> {
        self.sent = self.sent.wrapping_add(1);
        let mut tlvs = Vec::new();
        if !self.twamp_light {
            // The reflector's counters split the losses by direction; the class of service
            // asks it to answer with the probes' DSCP and says what arrived there.
            tlvs.push(Tlv::new(Value::DirectMeasurement { s_tx: self.sent, r_rx: 0, r_tx: 0 }));
            if let Some(d) = self.dscp {
                tlvs.push(Tlv::new(Value::ClassOfService { dscp1: d, ecn1: 0, dscp2: 0, ecn2: 0, rp: 0 }));
            }
        }
        let t = Test { seq: seq as u32, timestamp: to_wire(wall_ns, Format::Ntp), error: self.error, ssid: self.ssid };
        // Authenticated TLVs end with a 20-octet HMAC TLV.
        let hmac_tlv = if matches!(self.auth, Auth::Hmac(_)) && !tlvs.is_empty() { 20 } else { 0 };
        let len = self.size.max(self.auth.base_len() + tlv::wire_len(&tlvs) + hmac_tlv);
        t.encode(&mut self.out, &self.auth, &tlvs, len);
        self.sock.send(seq, &self.out)
    }

    fn tx_stamps(&mut self) -> Vec<(u64, u64)> {
        self.sock.tx_stamps()
    }

    fn parse(&mut self, buf: &[u8]) -> Option<(u64, Option<(u64, u64)>)> {
        let (r, parsed) = Reflected::decode(buf, &self.auth).ok()?;
        // Another session's answer (a reflector echoes the SSID; TWAMP-Light's leave 0).
        if r.ssid != 0 && r.ssid != self.ssid {
            return None;
        }
        let f = r.error.format();
        let (t2, t3) = (from_wire(r.receive_timestamp, f)?, from_wire(r.timestamp, f)?);
        let rx = parsed.tlvs.iter().find_map(|t| match t.value {
            Value::DirectMeasurement { r_rx, .. } if r_rx > 0 && t.flags & FLAG_I == 0 => Some(r_rx),
            _ => None,
        });
        self.answered.entry(r.sender_seq).or_insert(Answered {
            sender_seq: r.sender_seq,
            reflector_seq: r.seq,
            reflector_rx: rx,
        });
        self.reflector_error = Some(r.error);
        Some((u64::from(r.sender_seq), Some((t2, t3))))
    }

    fn stated_offset(&self) -> Option<(f64, f64)> {
        let theirs = self.reflector_error?;
        if !(self.error.synchronized && theirs.synchronized) {
            return None;
        }
        Some((0.0, (self.error.seconds()? + theirs.seconds()?) * 1e9))
    }

    fn finish(&self, sent: u64) -> Extras {
        let answered: Vec<Answered> = self.answered.values().copied().collect();
        let clocks = self.reflector_error.map(|e| Clocks {
            sender_synchronized: self.error.synchronized,
            sender_error_ms: self.error.seconds().unwrap_or(1.0) * 1e3,
            reflector_synchronized: e.synchronized,
            reflector_error_ms: e.seconds().map(|x| x * 1e3),
        });
        Extras { loss_each_way: split(sent, &answered), clocks }
    }
}

/// A UDP socket for the reflector on `ip`:`port` (dual stack on `::`); port 0 takes any free
/// one (the caller reads it back).
pub fn bind(ip: IpAddr, port: u16) -> std::io::Result<UdpSocket> {
    let addr = SocketAddr::new(ip, port);
    crate::server::bind_udp(addr).map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::PermissionDenied {
            " (ports below 1024 need root or CAP_NET_BIND_SERVICE; take another with --stamp-port)"
        } else {
            ""
        };
        std::io::Error::new(e.kind(), format!("cannot bind the STAMP reflector to UDP {addr}: {e}{hint}"))
    })
}

/// A STAMP key from `path` (hex digits, 16 octets or more); the error names the file.
pub fn load_key(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| std::io::Error::new(e.kind(), format!("STAMP key {}: {e}", path.display())))?;
    wanperf_stamp::packet::key_from_hex(&text)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("STAMP key {}: {e}", path.display())))
}

/// `serve --stamp-port`: where and how to reflect.
#[derive(Debug, Clone)]
pub struct StampServe {
    /// UDP port (0: any free one, announced at start).
    pub port: u16,
    /// How.
    pub cfg: Config,
}

/// `serve --stamp-port PORT [--stamp-key FILE] [--stamp-stateless]`.
pub fn serve_at(port: u16, key: Option<&std::path::Path>, stateless: bool) -> std::io::Result<StampServe> {
    let auth = match key.map(load_key).transpose()? {
        Some(k) => Auth::Hmac(k),
        None => Auth::Open,
    };
    Ok(StampServe { port, cfg: reflector_config(auth, !stateless) })
}

/// The reflector's configuration for this host: `auth`, stateful or not, this clock's error
/// estimate, and the default bounds.
pub fn reflector_config(auth: Auth, stateful: bool) -> Config {
    Config { auth, stateful, error: local_error_estimate(), ..Config::default() }
}

/// Reflects STAMP and TWAMP-Light test packets on `sock` until `stop`; senders `allowed`
/// rejects get nothing. Returns what it did.
pub fn run_reflector(
    sock: UdpSocket,
    allowed: impl Fn(IpAddr) -> bool,
    cfg: Config,
    stop: Arc<AtomicBool>,
) -> Counters {
    let fd = sock.as_raw_fd();
    let v6 = sock.local_addr().is_ok_and(|a| a.is_ipv6());
    let _ = sys::enable_rx_timestamps(fd);
    let _ = wanperf_sys::sockopt::enable_rx_ttl_tos(fd, v6);
    let _ = sock.set_read_timeout(Some(Duration::from_millis(100)));
    let mut r = Reflector::new(cfg);
    let mut buf = vec![0u8; 65_536];
    while !stop.load(Ordering::Acquire) {
        let Ok(got) = sys::recv_timestamped(fd, &mut buf) else { continue };
        let Some(from) = got.from else { continue };
        if !allowed(from.ip()) {
            r.counters.not_allowed += 1;
            continue;
        }
        let rx_ns = got.kernel_ns.unwrap_or_else(sys::realtime_ns);
        let a = Arrival { from, packet: &buf[..got.len.min(buf.len())], rx_ns, ttl: got.ttl, tos: got.tos };
        let Some(answer) = r.reflect(&a, sys::realtime_ns()) else { continue };
        let _ = wanperf_sys::msg::send_to_tos(fd, &answer.packet, from, answer.tos);
    }
    r.counters
}
