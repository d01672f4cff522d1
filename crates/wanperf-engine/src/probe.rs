//! What the ping loop (`crate::ping`) drives: a probe transport ([`Prober`]) and the UDP
//! socket wanperf's probes and STAMP's share ([`ProbeSocket`]), with what a transport adds to
//! a run's summary ([`Extras`]). Transports live beside the loop (`ping`'s own, ICMP) or in
//! their protocol's module (`stamp`).

use crate::sys;
use serde::{Deserialize, Serialize};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

/// What a transport knows beyond the probes' fates: the loss split by direction and both
/// clocks' stated errors (STAMP's reflectors tell them).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Extras {
    /// Losses split by direction.
    pub loss_each_way: Option<wanperf_stamp::loss::Split>,
    /// Both ends' clocks.
    pub clocks: Option<Clocks>,
}

/// The clocks of a STAMP or TWAMP-Light run, as each end's Error Estimate field states them.
/// When both say they are synchronized (and no offset was given), one-way delays use them
/// as they are, and the offset's uncertainty is the sum of the two errors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Clocks {
    /// This host's clock is synchronized (the kernel's clock discipline says so).
    pub sender_synchronized: bool,
    /// Its stated error, ms.
    pub sender_error_ms: f64,
    /// The reflector's S flag.
    pub reflector_synchronized: bool,
    /// Its stated error, ms (none when its field was malformed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reflector_error_ms: Option<f64>,
}

/// A probe transport: sends numbered probes and recognises their answers.
pub(crate) trait Prober {
    fn fd(&self) -> std::os::fd::RawFd;
    fn send(&mut self, seq: u64, wall_ns: u64) -> std::io::Result<()>;
    /// Kernel transmit timestamps that have come in: (probe number, ns since the epoch).
    fn tx_stamps(&mut self) -> Vec<(u64, u64)> {
        Vec::new()
    }
    /// The probe number an answer belongs to, and the server's receive and send times if
    /// the answer carries them.
    fn parse(&mut self, buf: &[u8]) -> Option<(u64, Option<(u64, u64)>)>;
    /// The server's clock minus ours and its uncertainty, ns, when both clocks state it
    /// (synchronized clocks: 0 ± their errors); None: estimate it from the fastest probe.
    fn stated_offset(&self) -> Option<(f64, f64)> {
        None
    }
    /// What only this transport knows, for the run's summary (`sent` probes were sent).
    fn finish(&self, _sent: u64) -> Extras {
        Extras::default()
    }
}

/// A connected UDP socket for probes, with the kernel's receive stamps (and transmit stamps
/// where it gives them) — the same for wanperf's probes and STAMP's.
pub(crate) struct ProbeSocket {
    pub(crate) sock: UdpSocket,
    /// Kernel transmit timestamps are on; the probe number of each datagram sent, in order
    /// (the kernel numbers the stamps by send).
    tx: Option<Vec<u64>>,
    /// Stamps still to come (the error queue is read only while some are).
    awaiting: usize,
}

impl ProbeSocket {
    pub(crate) fn connect(dscp: Option<u8>, addr: SocketAddr) -> std::io::Result<Self> {
        let bind: SocketAddr =
            if addr.is_ipv6() { "[::]:0".parse().expect("addr") } else { "0.0.0.0:0".parse().expect("addr") };
        let sock = UdpSocket::bind(bind)?;
        sock.connect(addr)?;
        sock.set_nonblocking(true)?;
        if let Some(d) = dscp {
            sys::set_dscp(&socket2::SockRef::from(&sock), addr.is_ipv6(), d)?;
        }
        sys::enable_rx_timestamps(sock.as_raw_fd())?;
        let tx = sys::enable_tx_timestamps(sock.as_raw_fd()).ok().map(|()| Vec::new());
        Ok(ProbeSocket { sock, tx, awaiting: 0 })
    }

    /// Sends probe `seq`'s datagram.
    pub(crate) fn send(&mut self, seq: u64, b: &[u8]) -> std::io::Result<()> {
        self.sock.send(b)?;
        if let Some(sent) = self.tx.as_mut() {
            sent.push(seq);
            self.awaiting += 1;
        }
        Ok(())
    }

    /// The transmit stamps that have come in.
    pub(crate) fn tx_stamps(&mut self) -> Vec<(u64, u64)> {
        let mut v = Vec::new();
        if let Some(sent) = &self.tx {
            while self.awaiting > 0 {
                let Ok(Some((id, ns))) = sys::recv_tx_timestamp(self.sock.as_raw_fd()) else { break };
                self.awaiting -= 1;
                if let Some(&seq) = sent.get(id as usize) {
                    v.push((seq, ns));
                }
            }
        }
        v
    }
}
