//! The emulator as a flow exporter: a [`Tap`] on the I/O loop that meters every packet each
//! link direction delivers (the same packets its counters count) with a
//! [`wanperf_flows::export::Meter`] per direction, and sends NetFlow v9 or IPFIX from this
//! process — which stays in the machine's own network — to the collectors.
//!
//! Each link direction is its own observation domain (v9 source id): `2 × link + 1` for
//! a → b, `2 × link + 2` for b → a, so a collector keeps their sequence numbers (and loss)
//! apart. Interface numbers: link `i`'s end a is `2 × i + 1`, end b `2 × i + 2`; a → b
//! records say ingress a, egress b. Byte counts are IP bytes (the link's count less the
//! link-layer headers on veth links); packets that are not IP (ARP on veth) are counted here
//! and not exported; the synthetic cross traffic has no headers and is not metered.

use crate::topo::FlowExport;
use serde::Serialize;
use std::net::{SocketAddr, UdpSocket};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};
use wanperf_emu::config::Nanos;
use wanperf_emu::fabric::{Departure, Tap};
use wanperf_flows::export::{Ifaces, Meter, Record, Writer};

/// Largest export message, bytes (fits a 1500-byte MTU with IPv6 and UDP headers).
const MTU: usize = 1400;

/// What the exporter has done so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct ExportStats {
    /// Messages sent (to each collector).
    pub messages: u64,
    /// Flow records sent (to each collector).
    pub records: u64,
    /// Packets in those records.
    pub packets: u64,
    /// IP bytes in those records.
    pub bytes: u64,
    /// Sends that failed (counted per collector).
    pub send_errors: u64,
    /// Packets that were not IP (not exported).
    pub non_ip_packets: u64,
    /// Their bytes.
    pub non_ip_bytes: u64,
    /// Records open now (exported later).
    pub open: u64,
}

/// The observation domain of link `link`'s direction `dir` (0: a → b).
pub fn domain(link: usize, dir: usize) -> u32 {
    (2 * link + dir + 1) as u32
}

fn ifaces(link: usize, dir: usize) -> Ifaces {
    let (a, b) = ((2 * link + 1) as u32, (2 * link + 2) as u32);
    if dir == 0 {
        Ifaces { ingress: a, egress: b }
    } else {
        Ifaces { ingress: b, egress: a }
    }
}

/// The exporter (built before the loop starts, then owned by its thread).
pub struct Exporter {
    cfg: FlowExport,
    meters: Vec<[Meter; 2]>,
    writer: Option<Writer>,
    sock: UdpSocket,
    stats: Arc<Mutex<ExportStats>>,
    done: Vec<Record>,
    last_tick: Nanos,
}

impl Exporter {
    /// An exporter for `links` links; its counters are shared through the returned handle.
    pub fn new(cfg: &FlowExport, links: usize) -> std::io::Result<(Exporter, Arc<Mutex<ExportStats>>)> {
        let any: SocketAddr = if cfg.collectors.iter().all(SocketAddr::is_ipv4) {
            "0.0.0.0:0".parse().expect("literal")
        } else {
            "[::]:0".parse().expect("literal")
        };
        let sock = UdpSocket::bind(any)?;
        let meter = || Meter::new(cfg.active_ns, cfg.idle_ns, cfg.max_flows);
        let stats = Arc::new(Mutex::new(ExportStats::default()));
        let e = Exporter {
            cfg: cfg.clone(),
            meters: (0..links).map(|_| [meter(), meter()]).collect(),
            writer: None,
            sock,
            stats: stats.clone(),
            done: Vec::new(),
            last_tick: 0,
        };
        Ok((e, stats))
    }

    /// Sends what `done` holds for one domain.
    fn send(&mut self, link: usize, dir: usize, now: Nanos) {
        if self.done.is_empty() {
            return;
        }
        let Some(w) = self.writer.as_mut() else { return };
        let msgs = w.encode(domain(link, dir), ifaces(link, dir), now, &self.done);
        let mut st = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        for m in &msgs {
            for c in &self.cfg.collectors {
                if self.sock.send_to(m, c).is_err() {
                    st.send_errors += 1;
                }
            }
        }
        st.messages += msgs.len() as u64;
        st.records += self.done.len() as u64;
        st.packets += self.done.iter().map(|r| r.packets).sum::<u64>();
        st.bytes += self.done.iter().map(|r| r.bytes).sum::<u64>();
        self.done.clear();
    }

    fn sweep(&mut self, now: Nanos, flush: bool) {
        for link in 0..self.meters.len() {
            for dir in 0..2 {
                let mut done = std::mem::take(&mut self.done);
                if flush {
                    self.meters[link][dir].flush(&mut done);
                } else {
                    self.meters[link][dir].expire(now, &mut done);
                }
                self.done = done;
                self.send(link, dir, now);
            }
        }
        let mut st = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        st.open = self.meters.iter().flatten().map(|m| m.len() as u64).sum();
        (st.non_ip_packets, st.non_ip_bytes) =
            self.meters.iter().flatten().map(Meter::non_ip).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    }
}

impl Tap for Exporter {
    fn begin(&mut self, at: SystemTime) {
        let boot = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        self.writer = Some(Writer::new(self.cfg.format, boot, MTU));
    }

    fn departed(&mut self, d: &Departure<'_>) {
        let Some(m) = self.meters.get_mut(d.link) else { return };
        let mut done = std::mem::take(&mut self.done);
        m[d.dir].observe(d.now, d.ip, d.ip_bytes, u64::from(d.packets), &mut done);
        self.done = done;
        // A full cache ended its records: send them now.
        if !self.done.is_empty() {
            self.send(d.link, d.dir, d.now);
        }
    }

    fn tick(&mut self, now: Nanos) {
        self.last_tick = now;
        self.sweep(now, false);
    }

    fn finish(&mut self, now: Nanos) {
        self.sweep(now.max(self.last_tick), true);
    }
}
