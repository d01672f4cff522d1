//! Control-protocol messages and the test specification they carry.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use thiserror::Error;

pub use crate::data::PROTOCOL_VERSION;
/// Default TCP (and UDP) port of `wanperf serve`.
pub const DEFAULT_PORT: u16 = 5301;
/// The server's ports for a test's own data sockets (a UDP test's streams, a QUIC test's
/// endpoint, an MPTCP test's listener) unless `serve --data-ports` says otherwise: a known
/// range, so a firewall rule or the emulator's `port=test` selector can name a test's data
/// (5311, below it, is the emulated networks' cross traffic).
pub const DATA_PORTS: std::ops::RangeInclusive<u16> = 5320..=5399;
/// Most parallel streams a test may ask for.
pub const MAX_STREAMS: u32 = 128;
/// Longest test a client may ask for, whatever the server allows (one day).
pub const MAX_DURATION_S: f64 = 86_400.0;
/// Shortest reporting interval.
pub const MIN_INTERVAL_S: f64 = 0.1;
/// Largest TCP block (one write or read).
pub const MAX_TCP_BLOCK: u32 = 16 * 1024 * 1024;
/// A QUIC stream's flow-control window without `-w`: 16 MiB, a gigabit's worth at 130 ms.
pub const QUIC_DEFAULT_WINDOW: u64 = 16 << 20;
/// Largest UDP payload over IPv4.
pub const MAX_UDP_BLOCK: u32 = 65_507;

/// Transport of the data streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// Bulk TCP.
    Tcp,
    /// Paced UDP with sequence numbers and send timestamps.
    Udp,
    /// Bulk QUIC (`tput --quic`): a QUIC stream per stream, on connections of their own or
    /// shared (`--quic-connections`), certificates pinned both ways.
    Quic,
}

/// Which way the data flows, seen from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Client sends, server receives (the default).
    Up,
    /// Server sends, client receives (`-R`).
    Down,
    /// Both at once (`--bidir`): `streams` each way.
    Bidir,
}

impl Direction {
    /// The direction `-R` and `--bidir` ask for (`--bidir` wins).
    pub fn from_flags(reverse: bool, bidir: bool) -> Direction {
        if bidir {
            Direction::Bidir
        } else if reverse {
            Direction::Down
        } else {
            Direction::Up
        }
    }
}

/// Which end of a stream a process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Writes the data.
    Sender,
    /// Reads the data.
    Receiver,
}

impl Role {
    /// The other end's role.
    pub fn opposite(self) -> Role {
        match self {
            Role::Sender => Role::Receiver,
            Role::Receiver => Role::Sender,
        }
    }
}

/// What the client asks the server to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestSpec {
    /// TCP or UDP.
    pub transport: Transport,
    /// Data direction.
    pub direction: Direction,
    /// Parallel streams per direction (1..=128).
    pub streams: u32,
    /// Test length in seconds (`-t`); `None` when `bytes` is set.
    pub duration_s: Option<f64>,
    /// Bytes to send per direction (`-n`), split over the streams.
    pub bytes: Option<u64>,
    /// Reporting interval in seconds (1 where a spec or record leaves it out).
    #[serde(default = "one_second")]
    pub interval_s: f64,
    /// Seconds at the start left out of the summary.
    #[serde(default)]
    pub omit_s: f64,
    /// Bytes per write (TCP; 0 = adaptive, about 1 ms of data between 64 KiB and 256 KiB) or
    /// datagram payload (UDP).
    #[serde(default)]
    pub block_size: u32,
    /// Requested socket buffer (SO_SNDBUF and SO_RCVBUF), both ends.
    pub window: Option<u64>,
    /// Congestion control algorithm, both ends.
    pub cc: Option<String>,
    /// DSCP code point (0..=63) on data and control.
    pub dscp: Option<u8>,
    /// Target rate per direction in bit/s (UDP pacing; TCP pacing cap if set).
    pub rate_bps: Option<u64>,
    /// Use the zero-copy send path and discard on receive.
    #[serde(default)]
    pub zerocopy: bool,
    /// Run even if the kernel grants less buffer than `window` asks (report what it granted).
    #[serde(default)]
    pub accept_capped_window: bool,
    /// A file copy instead of a memory-to-memory test (`wanperf copy`): the test runs until
    /// the files are done, with neither a duration nor a byte count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy: Option<wanperf_copy::spec::CopySpec>,
    /// Multipath TCP (`--mptcp`): the data connections are MPTCP sockets, to a listener the
    /// server opens for the test; they use as many subflows as the hosts' MPTCP endpoints give.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mptcp: bool,
    /// QUIC: the SHA-256 fingerprint (64 hex digits) of the certificate the client's data
    /// connections show; the server accepts no other, and a keyed client's signature covers
    /// it with the rest of the spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic_cert: Option<String>,
    /// QUIC: how many connections carry the test's streams (`--quic-connections`); stream `id`
    /// goes on connection `id % n`, so streams sharing one share its congestion controller.
    /// None: a connection per stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic_connections: Option<u32>,
}

/// [`TestSpec::interval_s`] where it is not given.
fn one_second() -> f64 {
    1.0
}

impl TestSpec {
    /// A TCP upload of `streams` streams for `secs` seconds with defaults elsewhere.
    pub fn tcp(streams: u32, secs: f64) -> Self {
        TestSpec {
            transport: Transport::Tcp,
            direction: Direction::Up,
            streams,
            duration_s: Some(secs),
            bytes: None,
            interval_s: 1.0,
            omit_s: 0.0,
            block_size: 0,
            window: None,
            cc: None,
            dscp: None,
            rate_bps: None,
            zerocopy: false,
            accept_capped_window: false,
            copy: None,
            mptcp: false,
            quic_cert: None,
            quic_connections: None,
        }
    }

    /// How long the test should take: its duration, or for a paced byte count, bytes / rate.
    pub fn expected_duration_s(&self) -> Option<f64> {
        self.duration_s.or_else(|| {
            let per_stream = self.per_stream_bytes(0)? as f64 * 8.0;
            Some(per_stream / self.per_stream_rate()? as f64)
        })
    }

    /// Number of data connections (or UDP flows) the test opens.
    pub fn connections(&self) -> u32 {
        match self.direction {
            Direction::Bidir => self.streams * 2,
            _ => self.streams,
        }
    }

    /// Who sends on stream `id`, seen from the client. In bidir tests the first `streams`
    /// ids go up and the rest down.
    pub fn client_role(&self, id: u32) -> Role {
        match self.direction {
            Direction::Up => Role::Sender,
            Direction::Down => Role::Receiver,
            Direction::Bidir if id < self.streams => Role::Sender,
            Direction::Bidir => Role::Receiver,
        }
    }

    /// The pacing rate of one TCP stream that sends: the test's own rate per stream, at most
    /// an equal share of `cap_bps` (a server's --max-rate) per stream.
    pub fn sender_pace(&self, cap_bps: Option<u64>) -> Option<u64> {
        let share = cap_bps.map(|c| (c / u64::from(self.streams.max(1))).max(1));
        match (self.per_stream_rate(), share) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The rate each stream is paced at, if any.
    pub fn per_stream_rate(&self) -> Option<u64> {
        self.rate_bps.map(|r| (r / self.streams.max(1) as u64).max(1))
    }

    /// Bytes each sending stream carries in a `-n` test (the first streams take the remainder).
    pub fn per_stream_bytes(&self, id: u32) -> Option<u64> {
        let total = self.bytes?;
        let n = self.streams.max(1) as u64;
        let idx = (id % self.streams.max(1)) as u64;
        Some(total / n + u64::from(idx < total % n))
    }

    /// A QUIC test's flow-control window per stream: `-w`, or [`QUIC_DEFAULT_WINDOW`], within
    /// 64 KiB and 1 GiB.
    pub fn quic_window(&self) -> u64 {
        // QUIC's windows are variable-length integers; below 64 KiB a stream would crawl.
        self.window.unwrap_or(QUIC_DEFAULT_WINDOW).clamp(64 << 10, (1 << 30) - 1)
    }

    /// A QUIC test's connections (`--quic-connections`, or one per stream).
    pub fn quic_connections(&self) -> u32 {
        self.quic_connections.unwrap_or(self.connections()).clamp(1, self.connections().max(1))
    }

    /// The QUIC connection stream `id` goes on.
    pub fn quic_connection_of(&self, id: u32) -> u32 {
        id % self.quic_connections()
    }

    /// The streams on QUIC connection `k`, by id (`k`, `k + n`, …).
    pub fn quic_streams_on(&self, k: u32) -> impl Iterator<Item = u32> {
        (k..self.connections()).step_by(self.quic_connections() as usize)
    }

    /// The most streams one QUIC connection carries.
    pub fn quic_streams_per_connection(&self) -> u32 {
        self.connections().div_ceil(self.quic_connections())
    }

    /// Checks the spec on its own terms (the server adds its limits on top).
    pub fn validate(&self) -> Result<(), SpecError> {
        if self.streams == 0 || self.streams > MAX_STREAMS {
            return Err(SpecError::Streams(self.streams));
        }
        if let Some(c) = &self.copy {
            c.validate().map_err(|e| SpecError::Copy(e.to_string()))?;
            let way = match self.direction {
                Direction::Up => wanperf_copy::spec::Way::Push,
                Direction::Down => wanperf_copy::spec::Way::Pull,
                Direction::Bidir => return Err(SpecError::Copy("a copy goes one way".into())),
            };
            if self.transport != Transport::Tcp || way != c.way || self.duration_s.is_some() || self.bytes.is_some() {
                return Err(SpecError::Copy("a copy is TCP, one way, with no duration or byte count".into()));
            }
        }
        match (self.duration_s, self.bytes) {
            (None, None) if self.copy.is_some() => {}
            (Some(_), Some(_)) => return Err(SpecError::DurationAndBytes),
            (None, None) => return Err(SpecError::NoLength),
            (Some(d), None) if !d.is_finite() || d <= 0.0 || d > MAX_DURATION_S => return Err(SpecError::Duration(d)),
            (None, Some(0)) => return Err(SpecError::ZeroBytes),
            _ => {}
        }
        if !self.interval_s.is_finite() || self.interval_s < MIN_INTERVAL_S - 1e-9 || self.interval_s > 3600.0 {
            return Err(SpecError::Interval(self.interval_s));
        }
        if !self.omit_s.is_finite() || self.omit_s < 0.0 {
            return Err(SpecError::Omit(self.omit_s));
        }
        if let Some(d) = self.duration_s {
            if self.omit_s >= d {
                return Err(SpecError::Omit(self.omit_s));
            }
        }
        let max_block = match self.transport {
            Transport::Tcp | Transport::Quic => MAX_TCP_BLOCK,
            Transport::Udp => MAX_UDP_BLOCK,
        };
        let min_block = match self.transport {
            Transport::Tcp | Transport::Quic => 0,
            Transport::Udp => crate::data::UDP_HEADER_LEN as u32,
        };
        if self.block_size < min_block || self.block_size > max_block {
            return Err(SpecError::Block { got: self.block_size, min: min_block, max: max_block });
        }
        if let Some(w) = self.window {
            if w < 1024 || w > i32::MAX as u64 / 2 {
                return Err(SpecError::Window(w));
            }
        }
        if let Some(cc) = &self.cc {
            if cc.is_empty() || cc.len() > 15 || !cc.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return Err(SpecError::Cc(cc.clone()));
            }
        }
        if let Some(d) = self.dscp {
            if d > 63 {
                return Err(SpecError::Dscp(d));
            }
        }
        match (self.transport, self.rate_bps) {
            (_, Some(0)) => return Err(SpecError::ZeroRate),
            (Transport::Udp, None) => return Err(SpecError::UdpNeedsRate),
            (Transport::Quic, Some(_)) => return Err(SpecError::Transport("QUIC tests are not paced (-b)")),
            _ => {}
        }
        let pinned =
            self.quic_cert.as_deref().is_some_and(|c| c.len() == 64 && c.bytes().all(|b| b.is_ascii_hexdigit()));
        match (self.transport, &self.quic_cert) {
            (Transport::Quic, _) if !pinned => {
                return Err(SpecError::Transport("a QUIC test names its client certificate (64 hex digits of SHA-256)"))
            }
            (Transport::Tcp | Transport::Udp, Some(_)) => {
                return Err(SpecError::Transport("a client certificate belongs to QUIC tests only"))
            }
            _ => {}
        }
        match self.quic_connections {
            Some(_) if self.transport != Transport::Quic => {
                return Err(SpecError::Transport("--quic-connections is for QUIC tests (--quic)"))
            }
            Some(n) if n == 0 || n > self.connections() => {
                return Err(SpecError::Transport("--quic-connections is between 1 and the test's streams"))
            }
            _ => {}
        }
        if self.mptcp && (self.transport != Transport::Tcp || self.copy.is_some()) {
            return Err(SpecError::Transport("MPTCP is for TCP throughput tests (not -u, --quic or a copy)"));
        }
        if self.mptcp && self.rate_bps.is_some() {
            return Err(SpecError::Transport(
                "MPTCP tests are not paced (-b): the kernel takes no pacing cap on MPTCP sockets",
            ));
        }
        Ok(())
    }
}

/// Why a test specification is unacceptable, whoever checks it.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum SpecError {
    /// Stream count out of range.
    #[error("streams must be between 1 and {MAX_STREAMS}, got {0}")]
    Streams(u32),
    /// Both -t and -n.
    #[error("give either a duration (-t) or a byte count (-n), not both")]
    DurationAndBytes,
    /// Neither -t nor -n.
    #[error("the test needs a duration (-t) or a byte count (-n)")]
    NoLength,
    /// Duration out of range.
    #[error("the test's duration (-t, and --omit before it) must be more than 0 s and at most {MAX_DURATION_S} s, got {0} s")]
    Duration(f64),
    /// `-n 0`.
    #[error("byte count must be more than 0")]
    ZeroBytes,
    /// Interval out of range.
    #[error("interval must be between {MIN_INTERVAL_S} s and 3600 s, got {0} s")]
    Interval(f64),
    /// Omit not shorter than the test.
    #[error("--omit must be at least 0 s and shorter than the test, got {0} s")]
    Omit(f64),
    /// Block size out of range.
    #[error("block size must be between {min} and {max} bytes, got {got}")]
    Block {
        /// Requested.
        got: u32,
        /// Smallest allowed.
        min: u32,
        /// Largest allowed.
        max: u32,
    },
    /// Window out of range.
    #[error("window must be between 1 KiB and 1 GiB, got {0} B")]
    Window(u64),
    /// Congestion-control name not plausible.
    #[error("`{0}` is not a congestion control name (e.g. cubic, bbr, reno)")]
    Cc(String),
    /// DSCP above 63.
    #[error("DSCP must be between 0 and 63, got {0}")]
    Dscp(u8),
    /// Settings the test's transport (QUIC, MPTCP) cannot take.
    #[error("{0}")]
    Transport(&'static str),
    /// `-b 0`.
    #[error("rate must be more than 0 bit/s")]
    ZeroRate,
    /// `-u` without `-b`.
    #[error("UDP tests need a rate (-b), e.g. -b 100M")]
    UdpNeedsRate,
    /// The copy part is invalid.
    #[error("{0}")]
    Copy(String),
}

/// What the host looked like when it measured (seed 001 and 003 lessons: buffers, CC, MTU,
/// txqueuelen and the interface actually used all change the answer).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HostCapture {
    /// Host name.
    pub hostname: String,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// CPU model name.
    pub cpu_model: String,
    /// Online CPUs.
    pub cpus: u32,
    /// The CPU quota of the process's control group, in cores (cgroup `cpu.max` or v1's CFS
    /// quota, the smallest up its ancestors), if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_quota: Option<f64>,
    /// `net.core.rmem_max`.
    pub rmem_max: Option<u64>,
    /// `net.core.wmem_max`.
    pub wmem_max: Option<u64>,
    /// `net.ipv4.tcp_rmem` (min, default, max).
    pub tcp_rmem: Option<[u64; 3]>,
    /// `net.ipv4.tcp_wmem` (min, default, max).
    pub tcp_wmem: Option<[u64; 3]>,
    /// `net.ipv4.tcp_congestion_control`.
    pub congestion_control: Option<String>,
    /// `net.ipv4.tcp_available_congestion_control`.
    pub available_congestion_control: Vec<String>,
    /// The interface the route to the peer uses.
    pub interface: Option<InterfaceCapture>,
}

/// The interface a test's traffic leaves by.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InterfaceCapture {
    /// Interface name.
    pub name: String,
    /// Local address on it.
    pub address: String,
    /// MTU in bytes.
    pub mtu: Option<u32>,
    /// Transmit queue length in packets.
    pub txqueuelen: Option<u32>,
    /// Link speed in Mbit/s, where the driver says.
    pub speed_mbps: Option<u64>,
}

/// The kernel's TCP_INFO for one socket, the fields seed 003 reads through Web100.
/// Fields the running kernel does not fill are `None`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TcpInfo {
    /// Congestion window in segments.
    pub cwnd: u32,
    /// Slow-start threshold in segments (`None` while infinite).
    pub ssthresh: Option<u32>,
    /// Sender MSS in bytes.
    pub snd_mss: u32,
    /// Smoothed RTT in µs.
    pub srtt_us: u32,
    /// RTT variance in µs.
    pub rttvar_us: u32,
    /// Minimum RTT seen in µs.
    pub min_rtt_us: Option<u32>,
    /// Retransmitted segments over the connection's life.
    pub total_retrans: u32,
    /// Segments currently considered lost.
    pub lost: u32,
    /// Segments sent but not yet acknowledged.
    pub unacked: u32,
    /// Reordering metric.
    pub reordering: u32,
    /// Delivery-rate estimate in bit/s.
    pub delivery_rate_bps: Option<u64>,
    /// Pacing rate in bit/s.
    pub pacing_rate_bps: Option<u64>,
    /// Peer's advertised receive window in bytes.
    pub snd_wnd: Option<u32>,
    /// Receiver's space estimate (autotuning) in bytes.
    pub rcv_space: u32,
    /// Time with data in flight, in µs (Web100 SndLimTimeCwnd analogue).
    pub busy_time_us: Option<u64>,
    /// Time limited by the receiver window, in µs (SndLimTimeRwin).
    pub rwnd_limited_us: Option<u64>,
    /// Time limited by the send buffer, in µs (SndLimTimeSnd).
    pub sndbuf_limited_us: Option<u64>,
    /// Bytes acknowledged.
    pub bytes_acked: Option<u64>,
    /// Bytes retransmitted.
    pub bytes_retrans: Option<u64>,
    /// Congestion window in bytes, where a record carries it under this name (or as
    /// `cwnd_bytes`): what the archive's import reads into its intervals' `cwnd_bytes`.
    /// Reading TCP_INFO leaves it `None` (the kernel gives [`Self::cwnd`] in segments of
    /// [`Self::snd_mss`]), and it is written only when set.
    #[serde(alias = "cwnd_bytes", skip_serializing_if = "Option::is_none")]
    pub snd_cwnd_bytes: Option<u64>,
    /// Whether the connection negotiated SACK (`tcpi_options`); both ends must allow it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sack: Option<bool>,
    /// Whether it negotiated timestamps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamps: Option<bool>,
    /// The window scale shifts it negotiated, [send, receive]; `None` without window scaling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wscale: Option<[u8; 2]>,
    /// QUIC: the times the congestion controller cut its window (quinn's path statistics;
    /// TCP_INFO has no such count).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub congestion_events: Option<u64>,
}

/// UDP counters for one flow, as seen by one end.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UdpCounters {
    /// Datagrams sent (sender) or received (receiver, duplicates excluded).
    pub packets: u64,
    /// Datagrams missing at the receiver (highest sequence + 1 - distinct received).
    pub lost: u64,
    /// Datagrams that arrived after a later one.
    pub out_of_order: u64,
    /// Datagrams received more than once.
    pub duplicates: u64,
    /// RFC 3550 interarrival jitter in ms.
    pub jitter_ms: f64,
}

/// One stream's cumulative counters at one instant, as one end saw them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamSample {
    /// Stream id.
    pub id: u32,
    /// Payload bytes moved so far by this end (sent or received).
    pub bytes: u64,
    /// TCP_INFO at the instant (TCP only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpInfo>,
    /// UDP counters at the instant (UDP only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpCounters>,
}

/// Samples of every stream one end holds, taken at the end of interval `index`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SideInterval {
    /// 0-based interval number.
    pub index: u32,
    /// Seconds since the start when the sample was taken.
    pub t_s: f64,
    /// True for the final, possibly partial, sample.
    pub last: bool,
    /// Per-stream cumulative samples.
    pub streams: Vec<StreamSample>,
}

/// CPU used by one end over the test.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuUsage {
    /// User-mode CPU seconds.
    pub user_s: f64,
    /// Kernel-mode CPU seconds.
    pub system_s: f64,
    /// Wall-clock seconds of the measurement.
    pub wall_s: f64,
}

impl CpuUsage {
    /// CPU use as a percentage of one core.
    pub fn pct(&self) -> f64 {
        if self.wall_s > 0.0 {
            100.0 * (self.user_s + self.system_s) / self.wall_s
        } else {
            0.0
        }
    }
}

/// One stream at the end of the test, as one end saw it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamFinal {
    /// Stream id.
    pub id: u32,
    /// This end's role on the stream.
    pub role: Option<Role>,
    /// Payload bytes this end moved.
    pub bytes: u64,
    /// Seconds from the start to this end's last byte.
    pub duration_s: f64,
    /// SO_SNDBUF the kernel granted (bytes, as getsockopt reports it).
    pub sndbuf: Option<u64>,
    /// SO_RCVBUF the kernel granted.
    pub rcvbuf: Option<u64>,
    /// Final TCP_INFO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpInfo>,
    /// Final UDP counters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpCounters>,
    /// Why the stream ended early, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Congestion control the socket ran (TCP_CONGESTION at the end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cc: Option<String>,
    /// DSCP the socket marked its packets with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dscp: Option<u8>,
    /// Retransmitted segments when the sender's TCP_INFO is not at hand (an iperf3 peer
    /// reports only the count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    /// MPTCP: each subflow at the end, with its addresses and TCP_INFO.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subflows: Vec<Subflow>,
}

/// One MPTCP subflow of a stream at the end of the test.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Subflow {
    /// This end's address and port.
    pub local: String,
    /// The far end's.
    pub remote: String,
    /// The subflow's TCP_INFO (`bytes_acked`: what it carried, as this end acknowledged or
    /// had acknowledged).
    pub tcp: TcpInfo,
}

/// Everything one end measured, sent at the end of the test.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SideReport {
    /// Per-stream finals.
    pub streams: Vec<StreamFinal>,
    /// CPU used by this end's test threads (or process).
    pub cpu: CpuUsage,
    /// Deltas of /proc/net/netstat TcpExt and /proc/net/snmp Tcp counters over the test.
    pub tcp_counters: BTreeMap<String, i64>,
    /// What this end's copy pipeline did (copies only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy: Option<wanperf_copy::spec::CopyReport>,
}

/// A control-protocol message. Encoded as JSON inside a [`crate::frame`] frame.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Msg {
    /// Client → server: run this test.
    Request {
        /// Client software version.
        software: String,
        /// The test.
        spec: TestSpec,
    },
    /// Server → client (servers with authorized keys): prove you hold a listed key.
    Challenge {
        /// Hex of this connection's fresh random nonce.
        nonce: String,
    },
    /// Client → server: the proof, see [`crate::auth`].
    Auth {
        /// The client's public key, `wanperf-ed25519 BASE64 [comment]`.
        key: String,
        /// The exact JSON text of the requested spec that was signed.
        spec: String,
        /// Base64 Ed25519 signature over `wanperf-auth-v1\0 ‖ nonce ‖ spec`.
        signature: String,
    },
    /// Server → client: test admitted.
    Accepted {
        /// Hex cookie every data connection must present.
        cookie: String,
        /// Server software version.
        software: String,
        /// Server host capture.
        host: HostCapture,
        /// UDP ports of the server's flows, one per stream (UDP tests only).
        udp_ports: Vec<u16>,
        /// Pacing cap the client must apply to what it sends (server --max-rate), bit/s.
        pace_bps: Option<u64>,
        /// QUIC tests: the SHA-256 fingerprint of the certificate the server's QUIC endpoint
        /// shows (its port is the one in `udp_ports`); the client accepts no other.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        quic_cert: Option<String>,
        /// MPTCP tests: the port of the listener the server opened for the test's data
        /// connections (MPTCP sockets).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        data_port: Option<u16>,
    },
    /// Server → client: test not admitted.
    Refused {
        /// One line saying why.
        reason: String,
    },
    /// Server → client: every data connection is attached.
    Ready,
    /// Client → server: go.
    Start,
    /// Server → client: the server's samples for an interval.
    Interval(SideInterval),
    /// Client → server: the client's streams are done; here is its report.
    Finish {
        /// Client's final report.
        report: SideReport,
    },
    /// Server → client: the server's final report.
    Results {
        /// Server's final report.
        report: SideReport,
    },
    /// Either way, while a copy runs: the copy's own exchange (manifest, wants, resends).
    Copy(wanperf_copy::spec::CopyMsg),
    /// Either way: the test is aborted.
    Error {
        /// One line saying why.
        message: String,
    },
}

impl Msg {
    /// Short name for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Msg::Request { .. } => "request",
            Msg::Challenge { .. } => "challenge",
            Msg::Auth { .. } => "auth",
            Msg::Accepted { .. } => "accepted",
            Msg::Refused { .. } => "refused",
            Msg::Ready => "ready",
            Msg::Start => "start",
            Msg::Interval(_) => "interval",
            Msg::Finish { .. } => "finish",
            Msg::Results { .. } => "results",
            Msg::Copy(_) => "copy",
            Msg::Error { .. } => "error",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quic_streams_spread_over_the_connections_asked_for() {
        let q = TestSpec {
            transport: Transport::Quic,
            streams: 3,
            direction: Direction::Bidir,
            quic_cert: Some("a".repeat(64)),
            ..TestSpec::tcp(3, 5.0)
        };
        // A connection per stream (six: three each way) without the option.
        assert_eq!((q.quic_connections(), q.quic_streams_per_connection()), (6, 1));
        let two = TestSpec { quic_connections: Some(4), ..q.clone() };
        assert!(two.validate().is_ok());
        let on: Vec<u32> = (0..6).map(|id| two.quic_connection_of(id)).collect();
        assert_eq!((on, two.quic_streams_per_connection()), (vec![0, 1, 2, 3, 0, 1], 2));
        assert_eq!(two.quic_streams_on(1).collect::<Vec<_>>(), [1, 5]);
        for bad in [Some(0), Some(7)] {
            assert!(TestSpec { quic_connections: bad, ..q.clone() }.validate().is_err(), "{bad:?}");
        }
        let tcp = TestSpec { quic_connections: Some(1), ..TestSpec::tcp(2, 5.0) };
        assert!(tcp.validate().is_err());
    }

    #[test]
    fn validate_rejects_each_bad_field() {
        let ok = TestSpec::tcp(2, 5.0);
        assert!(ok.validate().is_ok());
        let cases: Vec<(TestSpec, SpecError)> = vec![
            (TestSpec { streams: 0, ..ok.clone() }, SpecError::Streams(0)),
            (TestSpec { streams: 129, ..ok.clone() }, SpecError::Streams(129)),
            (TestSpec { duration_s: Some(-1.0), ..ok.clone() }, SpecError::Duration(-1.0)),
            (TestSpec { duration_s: Some(1e9), ..ok.clone() }, SpecError::Duration(1e9)),
            (TestSpec { bytes: Some(5), ..ok.clone() }, SpecError::DurationAndBytes),
            (TestSpec { duration_s: None, ..ok.clone() }, SpecError::NoLength),
            (TestSpec { duration_s: None, bytes: Some(0), ..ok.clone() }, SpecError::ZeroBytes),
            (TestSpec { interval_s: 0.01, ..ok.clone() }, SpecError::Interval(0.01)),
            (TestSpec { omit_s: 5.0, ..ok.clone() }, SpecError::Omit(5.0)),
            (TestSpec { window: Some(10), ..ok.clone() }, SpecError::Window(10)),
            (TestSpec { cc: Some("bb r".into()), ..ok.clone() }, SpecError::Cc("bb r".into())),
            (TestSpec { dscp: Some(64), ..ok.clone() }, SpecError::Dscp(64)),
            (TestSpec { rate_bps: Some(0), ..ok.clone() }, SpecError::ZeroRate),
            (TestSpec { transport: Transport::Udp, block_size: 1400, ..ok.clone() }, SpecError::UdpNeedsRate),
            (
                TestSpec { transport: Transport::Udp, rate_bps: Some(1), block_size: 70_000, ..ok.clone() },
                SpecError::Block { got: 70_000, min: 24, max: MAX_UDP_BLOCK },
            ),
        ];
        for (spec, want) in cases {
            assert_eq!(spec.validate(), Err(want));
        }
    }

    #[test]
    fn roles_and_byte_split() {
        let mut s = TestSpec::tcp(3, 1.0);
        s.direction = Direction::Bidir;
        assert_eq!(s.connections(), 6);
        assert_eq!(s.client_role(2), Role::Sender);
        assert_eq!(s.client_role(3), Role::Receiver);
        s.duration_s = None;
        s.bytes = Some(10);
        let split: Vec<u64> = (0..3).map(|i| s.per_stream_bytes(i).unwrap()).collect();
        assert_eq!(split, vec![4, 3, 3]);
        assert_eq!(s.per_stream_bytes(3), Some(4));
    }
}
