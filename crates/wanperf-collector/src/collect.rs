//! The flow collector's loop (`wanperf flows collect`): UDP export in, decoded and binned by
//! the pure core ([`wanperf_flows::Decoder`], [`wanperf_flows::Binner`]), finished bins and the
//! exporters' counters written to the archive every flush and at the end.

use crate::rows::{counter_row, exporter_rows, flow_row};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use wanperf_archive::{ExporterRow, FlowRow, Store};
use wanperf_flows::{Binner, Decoder};

/// Most flow rows held in memory (about 40 MB) before they are written, whatever the time: a
/// flood of exporters or flows writes early (a bin's later flows add rows; queries sum them).
pub const MAX_HELD_ROWS: usize = 250_000;
/// Datagrams (of up to 64 KiB) per receive system call.
const BATCH: usize = 32;
/// Receive batches drained from one socket before the flush and stop checks run.
const MAX_BATCHES: usize = 1_000;
/// Pause after the queues are drained: waking for every datagram costs more CPU than decoding
/// it (interrupt moderation, in user space). Records are binned by minutes, so this delay is
/// nothing, and the socket buffer holds far more than arrives meanwhile.
const MODERATION: Duration = Duration::from_micros(200);
/// Socket receive buffer asked for: bursts of export must not overflow it while a bin is
/// written.
const RECV_BUFFER: usize = 16 << 20;

/// How the collector runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// Bin length, ms.
    pub bin_ms: u64,
    /// How often finished bins and counters are written.
    pub flush: Duration,
    /// Stop after this long (None: when `stop` is set).
    pub duration: Option<Duration>,
}

impl Config {
    /// The collector's flags in seconds, checked: the bin length (`--bin`, 1 s to a day), how
    /// often to write (`--flush`, above 0, at most an hour) and the run's length
    /// (`--duration`, positive; none: until `stop`).
    pub fn from_flags(bin_s: f64, flush_s: f64, duration_s: Option<f64>) -> anyhow::Result<Config> {
        let bin_ms = crate::util::check_bin(bin_s)?;
        if !(flush_s > 0.0 && flush_s <= 3600.0) {
            anyhow::bail!("--flush must be above 0 and at most 3600 seconds");
        }
        crate::util::check_duration(duration_s)?;
        Ok(Config {
            bin_ms,
            flush: Duration::from_secs_f64(flush_s),
            duration: duration_s.map(Duration::from_secs_f64),
        })
    }
}

/// What a collector session stored, at its end.
#[derive(Debug, Clone, serde::Serialize)]
pub struct End {
    /// Flow bin rows stored.
    pub rows_stored: usize,
    /// Interface counter samples (sFlow) stored.
    pub counter_samples_stored: usize,
    /// Datagrams that were not NetFlow, IPFIX or sFlow.
    pub unknown_datagrams: u64,
    /// Datagrams the kernel dropped at the collector's sockets.
    pub socket_drops: u64,
    /// Each exporter's counters.
    pub exporters: Vec<ExporterRow>,
}

/// Why the collector stopped early.
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    /// A socket could not be opened or bound.
    #[error("cannot listen on {addr}: {err}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        err: io::Error,
    },
    /// Storing failed.
    #[error("cannot store {what}: {err}")]
    Store {
        /// Flows or counter samples.
        what: &'static str,
        /// Why.
        err: wanperf_archive::ArchiveError,
    },
}

/// A collector bound to its UDP addresses.
pub struct Collector {
    sockets: Vec<UdpSocket>,
}

fn now_unix() -> f64 {
    crate::now_ms() as f64 / 1000.0
}

impl Collector {
    /// Binds every address (port 0: a free port; see [`Collector::local_addrs`]).
    pub fn bind(listen: &[SocketAddr]) -> Result<Collector, CollectError> {
        let mut sockets = Vec::new();
        for addr in listen {
            let err = |err| CollectError::Listen { addr: *addr, err };
            let s =
                socket2::Socket::new(socket2::Domain::for_address(*addr), socket2::Type::DGRAM, None).map_err(err)?;
            let _ = s.set_recv_buffer_size(RECV_BUFFER);
            s.bind(&(*addr).into()).map_err(err)?;
            let s: UdpSocket = s.into();
            s.set_nonblocking(true).map_err(err)?;
            sockets.push(s);
        }
        Ok(Collector { sockets })
    }

    /// Where it listens.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.sockets.iter().filter_map(|s| s.local_addr().ok()).collect()
    }

    fn drops(&self) -> u64 {
        self.local_addrs().iter().map(|a| wanperf_net::listen::udp_drops(a.port())).sum()
    }

    /// Receives, decodes and stores until `stop` is set or the configured duration has passed;
    /// everything held is stored before it returns.
    pub fn run(&self, store: &mut dyn Store, cfg: &Config, stop: &AtomicBool) -> Result<End, CollectError> {
        let session = now_unix();
        let drops0 = self.drops();
        let mut decoder = Decoder::new();
        let mut binner = Binner::new(cfg.bin_ms);
        let (mut flows, mut counters, mut pending_counters) = (Vec::new(), Vec::new(), Vec::new());
        let (mut rows_stored, mut counter_samples_stored) = (0usize, 0usize);
        let started = Instant::now();
        let mut last_flush = Instant::now();
        let mut batch = wanperf_engine::sys::RecvBatch::new(BATCH, 65_536);
        loop {
            let stopping = stop.load(Ordering::Acquire) || cfg.duration.is_some_and(|d| started.elapsed() >= d);
            let full = binner.len() >= MAX_HELD_ROWS;
            if stopping || full || last_flush.elapsed() >= cfg.flush {
                let rows = if stopping || full {
                    binner.drain_all()
                } else {
                    binner.drain_before(crate::now_ms().saturating_sub(cfg.bin_ms / 5))
                };
                let drops = self.drops().saturating_sub(drops0);
                let out: Vec<FlowRow> = rows.iter().map(flow_row).collect();
                store
                    .store_flows(&out, &exporter_rows(&decoder, session, drops, now_unix()))
                    .map_err(|err| CollectError::Store { what: "flows", err })?;
                rows_stored += out.len();
                if !pending_counters.is_empty() {
                    let rows: Vec<_> = pending_counters.iter().map(|c| counter_row(c, "sflow")).collect();
                    store
                        .store_counters(&rows)
                        .map_err(|err| CollectError::Store { what: "sFlow counter samples", err })?;
                    counter_samples_stored += pending_counters.len();
                    pending_counters.clear();
                }
                last_flush = Instant::now();
                if stopping {
                    break;
                }
            }
            let ready = wanperf_sys::poll_readable(&self.sockets.iter().collect::<Vec<_>>(), 200).unwrap_or_default();
            if !ready.contains(&true) {
                continue;
            }
            let mut drained = true;
            for s in &self.sockets {
                let mut batches = 0;
                while let Ok(n) = batch.recv(s.as_raw_fd()) {
                    let now = crate::now_ms();
                    for (from, datagram) in batch.iter() {
                        let Some(from) = from else { continue };
                        flows.clear();
                        decoder.feed(from.ip(), now, datagram, &mut flows, &mut counters);
                        for f in &flows {
                            binner.add(f);
                        }
                    }
                    pending_counters.append(&mut counters);
                    batches += 1;
                    if n < BATCH {
                        break; // the queue is empty: poll, rather than a receive that finds nothing
                    }
                    if batches == MAX_BATCHES {
                        drained = false;
                        break;
                    }
                }
            }
            if drained {
                std::thread::sleep(MODERATION);
            }
        }
        let socket_drops = self.drops().saturating_sub(drops0);
        Ok(End {
            rows_stored,
            counter_samples_stored,
            unknown_datagrams: decoder.unknown,
            socket_drops,
            exporters: exporter_rows(&decoder, session, socket_drops, now_unix()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_make_a_checked_config() {
        let c = Config::from_flags(300.0, 10.0, Some(60.0)).unwrap();
        assert_eq!((c.bin_ms, c.flush, c.duration), (300_000, Duration::from_secs(10), Some(Duration::from_secs(60))));
        assert_eq!(Config::from_flags(0.5, 10.0, None).unwrap_err().to_string(), "--bin must be 1 to 86400 seconds");
        let e = Config::from_flags(300.0, 0.0, None).unwrap_err().to_string();
        assert_eq!(e, "--flush must be above 0 and at most 3600 seconds");
        let e = Config::from_flags(300.0, 10.0, Some(-1.0)).unwrap_err().to_string();
        assert_eq!(e, "--duration must be a positive number of seconds");
    }
}
