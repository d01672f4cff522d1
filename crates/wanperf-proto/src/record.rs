//! Result records (the `wanperf/1` NDJSON schema) and the pure merge of both ends' samples
//! into them.
//!
//! Each end samples its own streams' cumulative counters at interval boundaries. The client
//! receives the server's samples over the control connection; [`Merger`] pairs them by
//! interval index and turns them into [`IntervalRecord`]s carrying sender-side TCP state and
//! receiver-side goodput. [`summarize`] builds the final [`Summary`] from both final reports.
//!
//! The same types read the records back (the archive's `import wanperf`, and through it
//! `--save` and studies): a field renamed here is renamed for the reader too. A field that
//! records written by an earlier wanperf lack is `#[serde(default)]`, so those still read.

use crate::msg::{
    CpuUsage, Direction, HostCapture, Role, SideInterval, SideReport, StreamFinal, StreamSample, TcpInfo, TestSpec,
    Transport, UdpCounters,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Schema name written in every start record.
pub const SCHEMA: &str = "wanperf/1";

/// Which way one stream carries data, seen from the client.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Way {
    /// Client to server (the default: what a record that does not say meant).
    #[default]
    Up,
    /// Server to client.
    Down,
}

impl Way {
    /// Direction of stream `id` in `spec`.
    pub fn of(spec: &TestSpec, id: u32) -> Way {
        match spec.client_role(id) {
            Role::Sender => Way::Up,
            Role::Receiver => Way::Down,
        }
    }

    /// Name as written in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Way::Up => "up",
            Way::Down => "down",
        }
    }
}

/// One data connection as opened by the client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnectionInfo {
    /// Stream id.
    pub id: u32,
    /// Direction.
    pub direction: Way,
    /// Client address.
    pub local: String,
    /// Server address.
    pub remote: String,
    /// SO_SNDBUF granted on the client socket (bytes, as the kernel reports it).
    pub sndbuf: Option<u64>,
    /// SO_RCVBUF granted on the client socket.
    pub rcvbuf: Option<u64>,
}

/// First record of a test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartRecord {
    /// Always `start`.
    pub event: String,
    /// Always [`SCHEMA`].
    pub schema: String,
    /// Client software version.
    pub version: String,
    /// Wall-clock start, seconds since the Unix epoch.
    pub timestamp: f64,
    /// Server address as given.
    pub server: String,
    /// The test.
    pub test: TestSpec,
    /// Server software version.
    #[serde(default)]
    pub server_version: String,
    /// Client host capture.
    pub client_host: HostCapture,
    /// Server host capture.
    pub server_host: HostCapture,
    /// Data connections.
    #[serde(default)]
    pub connections: Vec<ConnectionInfo>,
    /// Warnings (e.g. a window the kernel capped).
    #[serde(default)]
    pub warnings: Vec<String>,
    /// The far end reports no intervals (an iperf3 server): streams it receives show the
    /// sender's rate in interval records, and its received bytes come with the end record.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub one_ended: bool,
}

/// One stream in one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamInterval {
    /// Stream id.
    pub id: u32,
    /// Direction.
    #[serde(default)]
    pub direction: Way,
    /// Bytes the sender wrote in the interval.
    #[serde(default)]
    pub sent_bytes: u64,
    /// Bytes the receiver read in the interval.
    pub received_bytes: u64,
    /// Receiver goodput over the interval.
    pub throughput_bps: f64,
    /// Segments the sender retransmitted in the interval.
    pub retransmits: u64,
    /// Sender's TCP_INFO at the end of the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpInfo>,
    /// Receiver's rcv_space (autotuned receive window estimate) in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcv_space: Option<u32>,
    /// UDP: packets, lost, out-of-order and duplicates in the interval; jitter at its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpCounters>,
}

/// Sum over streams.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Sum {
    /// Bytes sent.
    pub sent_bytes: u64,
    /// Bytes received.
    pub received_bytes: u64,
    /// Receiver goodput.
    pub throughput_bps: f64,
    /// Retransmitted segments.
    pub retransmits: u64,
}

/// One interval of a test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalRecord {
    /// Always `interval`.
    pub event: String,
    /// 0-based index.
    #[serde(default)]
    pub index: u32,
    /// Start, seconds since the test start.
    pub start_s: f64,
    /// End, seconds since the test start.
    pub end_s: f64,
    /// True if inside `--omit` (left out of the summary).
    #[serde(default)]
    pub omitted: bool,
    /// Per stream.
    pub streams: Vec<StreamInterval>,
    /// All streams.
    pub sum: Sum,
    /// Per direction (bidir tests only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sums: Option<BTreeMap<Way, Sum>>,
}

#[derive(Debug, Clone, Default, PartialEq)]
struct Cum {
    sent: u64,
    recv: u64,
    retrans: u64,
    udp: UdpCounters,
}

/// Pairs both ends' interval samples into records, in order.
#[derive(Debug)]
pub struct Merger {
    spec: TestSpec,
    local: BTreeMap<u32, SideInterval>,
    remote: BTreeMap<u32, SideInterval>,
    local_last: Option<u32>,
    remote_last: Option<u32>,
    next: u32,
    prev_end: f64,
    prev: Vec<Cum>,
    baseline: Option<(f64, Vec<Cum>)>,
    only: Option<Only>,
}

/// The one end whose samples a one-ended merger gets (an iperf3 peer reports no intervals).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Only {
    /// Only the client's own samples (wanperf client, iperf3 server).
    Local,
    /// Only the server's samples (wanperf server, iperf3 client; pushed with `push_remote`).
    Remote,
}

impl Merger {
    /// A merger for `spec`, on the client.
    pub fn new(spec: TestSpec) -> Self {
        let n = spec.connections() as usize;
        let baseline = if spec.omit_s > 0.0 { None } else { Some((0.0, vec![Cum::default(); n])) };
        Merger {
            spec,
            local: BTreeMap::new(),
            remote: BTreeMap::new(),
            local_last: None,
            remote_last: None,
            next: 0,
            prev_end: 0.0,
            prev: vec![Cum::default(); n],
            baseline,
            only: None,
        }
    }

    /// A merger that gets samples from one end only. Streams whose receiver is the silent
    /// end report the sender's rate in their intervals (their `received_bytes` stay 0): that is
    /// all one end can know until the peer's final results arrive.
    pub fn one_ended(spec: TestSpec, only: Only) -> Self {
        Merger { only: Some(only), ..Merger::new(spec) }
    }

    /// Adds the client's own samples.
    pub fn push_local(&mut self, iv: SideInterval) {
        if iv.last {
            self.local_last = Some(iv.index);
        }
        self.local.insert(iv.index, iv);
    }

    /// Adds the server's samples.
    pub fn push_remote(&mut self, iv: SideInterval) {
        if iv.last {
            self.remote_last = Some(iv.index);
        }
        self.remote.insert(iv.index, iv);
    }

    fn side_ready(map: &BTreeMap<u32, SideInterval>, last: Option<u32>, k: u32) -> bool {
        map.contains_key(&k) || last.is_some_and(|l| l < k)
    }

    fn done(&self) -> bool {
        let past = |last: Option<u32>| last.is_some_and(|l| l < self.next);
        (self.only == Some(Only::Remote) || past(self.local_last))
            && (self.only == Some(Only::Local) || past(self.remote_last))
    }

    /// The next record whose samples from both ends are in, if any.
    pub fn poll(&mut self) -> Option<IntervalRecord> {
        let k = self.next;
        if self.done()
            || (self.only != Some(Only::Remote) && !Self::side_ready(&self.local, self.local_last, k))
            || (self.only != Some(Only::Local) && !Self::side_ready(&self.remote, self.remote_last, k))
        {
            return None;
        }
        Some(self.emit(k))
    }

    /// Records left when one end will send no more (it died or timed out): emits what is
    /// there, treating missing samples as no progress.
    pub fn flush(&mut self) -> Vec<IntervalRecord> {
        let mut out = Vec::new();
        let max_k = self.local.keys().chain(self.remote.keys()).max().copied();
        if let Some(max_k) = max_k {
            while self.next <= max_k {
                let k = self.next;
                out.push(self.emit(k));
            }
        }
        out
    }

    fn emit(&mut self, k: u32) -> IntervalRecord {
        let local = self.local.remove(&k);
        let remote = self.remote.remove(&k);
        self.next = k + 1;
        let end_s = local.iter().chain(remote.iter()).map(|s| s.t_s).fold(self.prev_end, f64::max);
        let start_s = self.prev_end;
        let dt = (end_s - start_s).max(1e-9);
        let find = |side: &Option<SideInterval>, id: u32| -> Option<StreamSample> {
            side.as_ref().and_then(|s| s.streams.iter().find(|x| x.id == id).cloned())
        };
        let mut streams = Vec::with_capacity(self.prev.len());
        for id in 0..self.prev.len() as u32 {
            let way = Way::of(&self.spec, id);
            let (snd, rcv) = match way {
                Way::Up => (find(&local, id), find(&remote, id)),
                Way::Down => (find(&remote, id), find(&local, id)),
            };
            let p = self.prev[id as usize].clone();
            let mut cur = p.clone();
            if let Some(s) = &snd {
                cur.sent = s.bytes.max(p.sent);
                if let Some(t) = &s.tcp {
                    cur.retrans = u64::from(t.total_retrans).max(p.retrans);
                }
            }
            if let Some(r) = &rcv {
                cur.recv = r.bytes.max(p.recv);
                if let Some(u) = &r.udp {
                    cur.udp = u.clone();
                }
            }
            let received = cur.recv - p.recv;
            let silent_receiver =
                matches!((self.only, way), (Some(Only::Local), Way::Up) | (Some(Only::Remote), Way::Down));
            let rate_bytes = if silent_receiver { cur.sent - p.sent } else { received };
            let udp = rcv.as_ref().and_then(|r| r.udp.as_ref()).map(|u| UdpCounters {
                packets: u.packets.saturating_sub(p.udp.packets),
                lost: u.lost.saturating_sub(p.udp.lost),
                out_of_order: u.out_of_order.saturating_sub(p.udp.out_of_order),
                duplicates: u.duplicates.saturating_sub(p.udp.duplicates),
                jitter_ms: u.jitter_ms,
            });
            streams.push(StreamInterval {
                id,
                direction: way,
                sent_bytes: cur.sent - p.sent,
                received_bytes: received,
                throughput_bps: rate_bytes as f64 * 8.0 / dt,
                retransmits: cur.retrans - p.retrans,
                tcp: snd.and_then(|s| s.tcp),
                rcv_space: rcv.as_ref().and_then(|r| r.tcp.as_ref()).map(|t| t.rcv_space),
                udp,
            });
            self.prev[id as usize] = cur;
        }
        // Judge by the nominal boundary: sample times wobble by scheduling delay.
        let nominal_end = f64::from(k + 1) * self.spec.interval_s;
        let omitted = self.spec.omit_s > 0.0 && nominal_end <= self.spec.omit_s + 1e-9;
        if self.baseline.is_none() && !omitted {
            // First interval past --omit: the summary counts from where the previous one ended.
            let mut base = self.prev.clone();
            for (b, s) in base.iter_mut().zip(&streams) {
                b.sent -= s.sent_bytes;
                b.recv -= s.received_bytes;
                b.retrans -= s.retransmits;
            }
            self.baseline = Some((start_s, base));
        }
        self.prev_end = end_s;
        let sum = sum_of(streams.iter());
        let sums = (self.spec.direction == Direction::Bidir).then(|| {
            [Way::Up, Way::Down].into_iter().map(|w| (w, sum_of(streams.iter().filter(|s| s.direction == w)))).collect()
        });
        IntervalRecord { event: "interval".into(), index: k, start_s, end_s, omitted, streams, sum, sums }
    }

    /// Where the summary starts: seconds, and per stream (sent, received, retransmits) then.
    pub fn baseline(&self) -> (f64, Vec<(u64, u64, u64)>) {
        match &self.baseline {
            Some((t, b)) => (*t, b.iter().map(|c| (c.sent, c.recv, c.retrans)).collect()),
            // Omit never ended (test shorter than --omit): count everything.
            None => (0.0, vec![(0, 0, 0); self.prev.len()]),
        }
    }
}

fn sum_of<'a>(it: impl Iterator<Item = &'a StreamInterval>) -> Sum {
    let mut s = Sum::default();
    for x in it {
        s.sent_bytes += x.sent_bytes;
        s.received_bytes += x.received_bytes;
        s.retransmits += x.retransmits;
        s.throughput_bps += x.throughput_bps;
    }
    s
}

/// CPU use of both ends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CpuSummary {
    /// The sending end, % of one core (client in bidir tests).
    pub sender_pct: f64,
    /// The receiving end, % of one core (server in bidir tests).
    pub receiver_pct: f64,
    /// The client, % of one core.
    pub client_pct: f64,
    /// The server's test threads, % of one core.
    pub server_pct: f64,
    /// Client CPU seconds (user + system).
    pub client_s: f64,
    /// Server CPU seconds (user + system) of the test's threads.
    pub server_s: f64,
}

/// One stream over the whole test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamSummary {
    /// Stream id.
    pub id: u32,
    /// Direction.
    pub direction: Way,
    /// Receiver goodput.
    pub throughput_bps: f64,
    /// Bytes sent.
    pub sent_bytes: u64,
    /// Bytes received.
    pub received_bytes: u64,
    /// Segments retransmitted.
    pub retransmits: u64,
    /// Seconds from the start (after --omit) to the receiver's last byte.
    pub duration_s: f64,
    /// SO_SNDBUF granted at the sender.
    pub sender_sndbuf: Option<u64>,
    /// SO_RCVBUF granted at the receiver.
    pub receiver_rcvbuf: Option<u64>,
    /// Congestion control the sender ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_cc: Option<String>,
    /// DSCP the sender marked data with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_dscp: Option<u8>,
    /// Sender's final TCP_INFO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpInfo>,
    /// UDP: receiver's final counters with `lost` made exact by the sender's count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpCounters>,
    /// UDP datagrams sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packets_sent: Option<u64>,
    /// Why the stream ended early, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// MPTCP: the sender's subflows at the end (addresses and TCP_INFO: `bytes_acked` is
    /// what each carried).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subflows: Vec<crate::msg::Subflow>,
}

/// UDP over all streams.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UdpSummary {
    /// Datagrams sent.
    pub packets_sent: u64,
    /// Distinct datagrams received.
    pub packets_received: u64,
    /// Datagrams lost.
    pub lost: u64,
    /// Lost as a percentage of sent.
    pub loss_pct: f64,
    /// Mean of the streams' RFC 3550 jitter, ms.
    pub jitter_ms: f64,
    /// Datagrams out of order.
    pub out_of_order: u64,
    /// Duplicate datagrams.
    pub duplicates: u64,
}

/// Totals for one direction.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DirectionSummary {
    /// Receiver goodput.
    pub throughput_bps: f64,
    /// Bytes sent.
    pub sent_bytes: u64,
    /// Bytes received.
    pub received_bytes: u64,
    /// Retransmits.
    pub retransmits: u64,
    /// Seconds.
    pub duration_s: f64,
}

/// The test's result: the `summary` of the end record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Summary {
    /// Receiver goodput, bit/s (both directions together in bidir tests).
    pub throughput_bps: f64,
    /// Payload bytes sent.
    pub sent_bytes: u64,
    /// Payload bytes received.
    pub received_bytes: u64,
    /// Retransmitted segments.
    pub retransmits: u64,
    /// Measured seconds (after --omit) to the receivers' last byte.
    pub duration_s: f64,
    /// Seconds left out at the start.
    pub omitted_s: f64,
    /// CPU.
    pub cpu: CpuSummary,
    /// Per stream.
    pub streams: Vec<StreamSummary>,
    /// Per direction (bidir tests only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directions: Option<BTreeMap<Way, DirectionSummary>>,
    /// UDP totals (UDP tests only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpSummary>,
    /// Host TCP counter deltas over the test, per end (`client`, `server`).
    pub tcp_counters: BTreeMap<String, BTreeMap<String, i64>>,
    /// What limited the result, with the evidence (TCP one-way tests and copies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<wanperf_copy::verdict::Verdict>,
    /// A copy's files, bytes and pipeline, both ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy: Option<CopySummary>,
}

/// What a copy did, from both ends' reports.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CopySummary {
    /// Files completed by the receiver.
    pub files: u64,
    /// Files left alone (already there).
    pub skipped_files: u64,
    /// File bytes written by the receiver.
    pub bytes: u64,
    /// Bytes on the wire (headers, compressed payloads).
    pub wire_bytes: u64,
    /// Bytes the receiver already had in partial files.
    pub resumed_bytes: u64,
    /// Blocks sent again after failing their check.
    pub resent_blocks: u64,
    /// Seconds from the first block to the last write.
    pub wall_s: f64,
    /// File bytes per second over `wall_s`.
    pub rate_bytes_s: f64,
    /// Compression as used.
    pub compression: String,
    /// The sender's report.
    pub sender: wanperf_copy::spec::CopyReport,
    /// The receiver's report.
    pub receiver: wanperf_copy::spec::CopyReport,
}

/// The sender's TCP view of a one-way test: its streams' final TCP_INFO summed.
fn tcp_side(sender: &SideReport, receiver: &SideReport) -> wanperf_copy::verdict::TcpSide {
    let mut t = wanperf_copy::verdict::TcpSide::default();
    for s in &sender.streams {
        t.streams += 1;
        // An MPTCP stream's own TCP_INFO is one subflow's: its subflows together are the
        // stream (their SndLim times add up; the window is the smallest's).
        let infos: Vec<&TcpInfo> =
            if s.subflows.is_empty() { s.tcp.iter().collect() } else { s.subflows.iter().map(|f| &f.tcp).collect() };
        for i in infos {
            t.busy_us += i.busy_time_us.unwrap_or(0);
            t.rwnd_limited_us += i.rwnd_limited_us.unwrap_or(0);
            t.sndbuf_limited_us += i.sndbuf_limited_us.unwrap_or(0);
            t.retransmits += u64::from(i.total_retrans);
            t.snd_wnd = match (t.snd_wnd, i.snd_wnd) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            t.min_rtt_us = match (t.min_rtt_us, i.min_rtt_us) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        t.sndbuf = t.sndbuf.or(s.sndbuf);
    }
    t.rcvbuf = receiver.streams.iter().find_map(|s| s.rcvbuf);
    t
}

/// What limited a one-way TCP test or a copy, from both ends' reports and host captures
/// (`None` for UDP and bidirectional tests, or without the server's report).
pub fn verdict(
    spec: &TestSpec,
    summary: &Summary,
    client: &SideReport,
    server: Option<&SideReport>,
    client_host: &crate::msg::HostCapture,
    server_host: &crate::msg::HostCapture,
    loopback: bool,
) -> Option<wanperf_copy::verdict::Verdict> {
    use wanperf_copy::verdict::{self as v, AtStage, Cpu};
    let server = server?;
    // UDP is paced by the test itself; TCP and QUIC find their own rate, and what held it is
    // the question (QUIC's samples carry quinn's window and losses; its CPU is the process's).
    if spec.transport == Transport::Udp {
        return None;
    }
    let (sender, receiver) = sender_first(spec, client, server)?;
    let (sh, rh) = sender_first(spec, client_host, server_host)?;
    let cpu = |r: &SideReport, h: &crate::msg::HostCapture| Cpu {
        cpu_s: r.cpu.user_s + r.cpu.system_s,
        wall_s: r.cpu.wall_s,
        cores: h.cpus,
        host_busy: r.copy.as_ref().and_then(|c| c.host_cpu_busy),
        quota: h.cpu_quota,
    };
    let same_host = !client_host.hostname.is_empty() && client_host.hostname == server_host.hostname;
    let mut tcp = tcp_side(sender, receiver);
    if spec.transport == Transport::Quic {
        // quinn's smoothed RTT stands for the minimum, the stream's flow-control window for
        // the advertised one: rate × RTT filling it is QUIC's window limit.
        tcp.quic = true;
        tcp.min_rtt_us =
            sender.streams.iter().filter_map(|s| s.tcp.as_ref().map(|t| t.srtt_us)).filter(|r| *r > 0).min();
        tcp.snd_wnd = Some(spec.quic_window().min(u64::from(u32::MAX)) as u32);
    }
    if spec.copy.is_some() {
        let (sc, rc) = (sender.copy.as_ref()?, receiver.copy.as_ref()?);
        let stages = sc
            .stages
            .iter()
            .map(|s| AtStage { at: "sender", stat: s })
            .chain(rc.stages.iter().map(|s| AtStage { at: "receiver", stat: s }))
            .collect();
        return v::copy(&v::CopyInputs {
            stages,
            wall_s: rc.wall_s.max(sc.wall_s),
            bytes: rc.bytes,
            sender_cpu: cpu(sender, sh),
            receiver_cpu: cpu(receiver, rh),
            same_host,
            tcp,
            compression: sc.compression.clone(),
            loopback,
            direct_write: rc.direct,
        });
    }
    v::tput(&v::TputInputs {
        rate_bytes_s: summary.throughput_bps / 8.0,
        wall_s: summary.duration_s,
        tcp,
        sender_cpu: cpu(sender, sh),
        receiver_cpu: cpu(receiver, rh),
        same_host,
        paced_bytes_s: spec.rate_bps.map(|r| r as f64 / 8.0),
        loopback,
    })
}

/// `(sender's, receiver's)` of a one-way test's client and server things (a copy's way
/// follows its direction); `None` in both directions at once.
fn sender_first<T>(spec: &TestSpec, client: T, server: T) -> Option<(T, T)> {
    match spec.direction {
        Direction::Up => Some((client, server)),
        Direction::Down => Some((server, client)),
        Direction::Bidir => None,
    }
}

/// The copy summary from both ends' reports.
pub fn copy_summary(spec: &TestSpec, client: &SideReport, server: Option<&SideReport>) -> Option<CopySummary> {
    spec.copy.as_ref()?;
    let empty = wanperf_copy::spec::CopyReport::default();
    let (cl, sv) = (client.copy.as_ref().unwrap_or(&empty), server.and_then(|s| s.copy.as_ref()).unwrap_or(&empty));
    let (snd, rcv) = sender_first(spec, cl, sv)?;
    let wall_s = rcv.wall_s.max(snd.wall_s);
    Some(CopySummary {
        files: rcv.files,
        skipped_files: rcv.skipped_files,
        bytes: rcv.bytes,
        wire_bytes: rcv.wire_bytes,
        resumed_bytes: rcv.resumed_bytes,
        resent_blocks: rcv.resent_blocks,
        wall_s,
        rate_bytes_s: if wall_s > 0.0 { rcv.bytes as f64 / wall_s } else { 0.0 },
        compression: snd.compression.clone(),
        sender: snd.clone(),
        receiver: rcv.clone(),
    })
}

/// The last record of a test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EndRecord {
    /// Always `end`.
    pub event: String,
    /// False if the test was cut short (the summary holds what was measured).
    pub complete: bool,
    /// Why it was cut short.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The result.
    pub summary: Summary,
    /// The server's software, when it is learned only at the end (an iperf3 server names its
    /// version in its JSON output; the start record then says just "iperf3").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_version: Option<String>,
}

fn find_final(r: &SideReport, id: u32) -> Option<&StreamFinal> {
    r.streams.iter().find(|s| s.id == id)
}

/// Builds the summary from both ends' final reports. `client` is the client's report,
/// `server` the server's (absent if the server never sent one).
pub fn summarize(spec: &TestSpec, merger: &Merger, client: &SideReport, server: Option<&SideReport>) -> Summary {
    let (omit_t, base) = merger.baseline();
    let empty = SideReport::default();
    let server_r = server.unwrap_or(&empty);
    let mut streams = Vec::new();
    for id in 0..spec.connections() {
        let way = Way::of(spec, id);
        let (snd, rcv) = match way {
            Way::Up => (find_final(client, id), find_final(server_r, id)),
            Way::Down => (find_final(server_r, id), find_final(client, id)),
        };
        let (b_sent, b_recv, b_retr) = base.get(id as usize).copied().unwrap_or_default();
        let sent = snd.map_or(0, |s| s.bytes).saturating_sub(b_sent);
        let received = rcv.map_or(0, |r| r.bytes).saturating_sub(b_recv);
        // An MPTCP stream's retransmissions are its subflows' together.
        let retrans = snd
            .and_then(|s| match s.subflows.is_empty() {
                true => s.tcp.as_ref().map(|t| u64::from(t.total_retrans)).or(s.retransmits),
                false => Some(s.subflows.iter().map(|f| u64::from(f.tcp.total_retrans)).sum()),
            })
            .unwrap_or(0)
            .saturating_sub(b_retr);
        let dur = rcv.or(snd).map_or(0.0, |r| r.duration_s) - omit_t;
        let dur = dur.max(0.0);
        let udp = rcv.and_then(|r| r.udp.clone()).map(|mut u| {
            if let Some(sent_pk) = snd.and_then(|s| s.udp.as_ref()).map(|s| s.packets) {
                u.lost = sent_pk.saturating_sub(u.packets);
            }
            u
        });
        streams.push(StreamSummary {
            id,
            direction: way,
            throughput_bps: if dur > 0.0 { received as f64 * 8.0 / dur } else { 0.0 },
            sent_bytes: sent,
            received_bytes: received,
            retransmits: retrans,
            duration_s: dur,
            sender_sndbuf: snd.and_then(|s| s.sndbuf),
            receiver_rcvbuf: rcv.and_then(|r| r.rcvbuf),
            sender_cc: snd.and_then(|s| s.cc.clone()),
            sender_dscp: snd.and_then(|s| s.dscp),
            tcp: snd.and_then(|s| s.tcp.clone()),
            udp,
            packets_sent: snd.and_then(|s| s.udp.as_ref()).map(|u| u.packets),
            error: snd.and_then(|s| s.error.clone()).or_else(|| rcv.and_then(|r| r.error.clone())),
            subflows: snd.map(|s| s.subflows.clone()).unwrap_or_default(),
        });
    }
    let dir_sum = |w: Option<Way>| {
        let sel: Vec<&StreamSummary> = streams.iter().filter(|s| w.is_none_or(|w| s.direction == w)).collect();
        let duration_s = sel.iter().map(|s| s.duration_s).fold(0.0, f64::max);
        let received: u64 = sel.iter().map(|s| s.received_bytes).sum();
        DirectionSummary {
            throughput_bps: if duration_s > 0.0 { received as f64 * 8.0 / duration_s } else { 0.0 },
            sent_bytes: sel.iter().map(|s| s.sent_bytes).sum(),
            received_bytes: received,
            retransmits: sel.iter().map(|s| s.retransmits).sum(),
            duration_s,
        }
    };
    let total = dir_sum(None);
    let cpu_of = |c: &CpuUsage| (c.pct(), c.user_s + c.system_s);
    let (client_pct, client_s) = cpu_of(&client.cpu);
    let (server_pct, server_s) = cpu_of(&server_r.cpu);
    let (sender_pct, receiver_pct) = match spec.direction {
        Direction::Down => (server_pct, client_pct),
        _ => (client_pct, server_pct),
    };
    let udp = (spec.transport == Transport::Udp).then(|| {
        let mut u = UdpSummary::default();
        let mut jit = Vec::new();
        for s in &streams {
            u.packets_sent += s.packets_sent.unwrap_or(0);
            if let Some(c) = &s.udp {
                u.packets_received += c.packets;
                u.lost += c.lost;
                u.out_of_order += c.out_of_order;
                u.duplicates += c.duplicates;
                jit.push(c.jitter_ms);
            }
        }
        u.loss_pct = if u.packets_sent > 0 { 100.0 * u.lost as f64 / u.packets_sent as f64 } else { 0.0 };
        u.jitter_ms = if jit.is_empty() { 0.0 } else { jit.iter().sum::<f64>() / jit.len() as f64 };
        u
    });
    let mut tcp_counters = BTreeMap::new();
    tcp_counters.insert("client".to_string(), client.tcp_counters.clone());
    if server.is_some() {
        tcp_counters.insert("server".to_string(), server_r.tcp_counters.clone());
    }
    Summary {
        throughput_bps: total.throughput_bps,
        sent_bytes: total.sent_bytes,
        received_bytes: total.received_bytes,
        retransmits: total.retransmits,
        duration_s: total.duration_s,
        omitted_s: omit_t,
        cpu: CpuSummary { sender_pct, receiver_pct, client_pct, server_pct, client_s, server_s },
        directions: (spec.direction == Direction::Bidir)
            .then(|| [Way::Up, Way::Down].into_iter().map(|w| (w, dir_sum(Some(w)))).collect()),
        streams,
        udp,
        tcp_counters,
        verdict: None,
        copy: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(index: u32, t_s: f64, last: bool, bytes: &[(u32, u64)]) -> SideInterval {
        SideInterval {
            index,
            t_s,
            last,
            streams: bytes.iter().map(|&(id, b)| StreamSample { id, bytes: b, tcp: None, udp: None }).collect(),
        }
    }

    #[test]
    fn pairs_by_index_and_waits_for_both() {
        let spec = TestSpec::tcp(2, 2.0);
        let mut m = Merger::new(spec);
        m.push_local(sample(0, 1.0, false, &[(0, 100), (1, 50)]));
        assert!(m.poll().is_none());
        m.push_remote(sample(0, 1.001, false, &[(0, 90), (1, 50)]));
        let r = m.poll().unwrap();
        assert_eq!(r.sum.sent_bytes, 150);
        assert_eq!(r.sum.received_bytes, 140);
        assert_eq!(r.streams[0].direction, Way::Up);
        // Sender finished at index 1, receiver's last sample is index 2.
        m.push_local(sample(1, 2.0, true, &[(0, 200), (1, 100)]));
        m.push_remote(sample(1, 2.0, false, &[(0, 180), (1, 100)]));
        m.push_remote(sample(2, 2.01, true, &[(0, 200), (1, 100)]));
        let r1 = m.poll().unwrap();
        let r2 = m.poll().unwrap();
        assert!(m.poll().is_none());
        assert_eq!(r1.sum.received_bytes + r2.sum.received_bytes + 140, 300);
        assert_eq!(r2.sum.sent_bytes, 0);
        assert!((r2.end_s - 2.01).abs() < 1e-12);
    }

    #[test]
    fn summary_matches_finals_and_omit_baseline() {
        let mut spec = TestSpec::tcp(1, 3.0);
        spec.omit_s = 1.0;
        let mut m = Merger::new(spec.clone());
        for k in 0..3u32 {
            let b = u64::from(k + 1) * 1000;
            m.push_local(sample(k, f64::from(k + 1), k == 2, &[(0, b)]));
            m.push_remote(sample(k, f64::from(k + 1), k == 2, &[(0, b)]));
        }
        let recs: Vec<_> = std::iter::from_fn(|| m.poll()).collect();
        assert_eq!(recs.len(), 3);
        assert!(recs[0].omitted && !recs[1].omitted);
        let fin = |bytes| SideReport {
            streams: vec![StreamFinal { id: 0, bytes, duration_s: 3.0, ..Default::default() }],
            cpu: CpuUsage { user_s: 0.5, system_s: 0.5, wall_s: 2.0 },
            ..Default::default()
        };
        let s = summarize(&spec, &m, &fin(3000), Some(&fin(3000)));
        assert_eq!(s.sent_bytes, 2000);
        assert_eq!(s.received_bytes, 2000);
        assert!((s.duration_s - 2.0).abs() < 1e-12);
        assert!((s.throughput_bps - 8000.0).abs() < 1e-9);
        assert!((s.cpu.sender_pct - 50.0).abs() < 1e-9);
    }

    #[test]
    fn reverse_and_udp_loss_from_sender_count() {
        let mut spec = TestSpec::tcp(1, 1.0);
        spec.direction = Direction::Down;
        spec.transport = Transport::Udp;
        let m = Merger::new(spec.clone());
        let server = SideReport {
            streams: vec![StreamFinal {
                id: 0,
                bytes: 1000,
                duration_s: 1.0,
                udp: Some(UdpCounters { packets: 10, ..Default::default() }),
                ..Default::default()
            }],
            ..Default::default()
        };
        let client = SideReport {
            streams: vec![StreamFinal {
                id: 0,
                bytes: 700,
                duration_s: 1.0,
                udp: Some(UdpCounters { packets: 7, lost: 1, ..Default::default() }),
                ..Default::default()
            }],
            ..Default::default()
        };
        let s = summarize(&spec, &m, &client, Some(&server));
        assert_eq!((s.sent_bytes, s.received_bytes), (1000, 700));
        let u = s.udp.unwrap();
        assert_eq!((u.packets_sent, u.lost), (10, 3));
        assert!((u.loss_pct - 30.0).abs() < 1e-9);
    }

    #[test]
    fn a_one_ended_merger_reports_the_senders_rate_for_a_silent_receiver() {
        let mut spec = TestSpec::tcp(1, 2.0);
        spec.direction = Direction::Bidir;
        let mut m = Merger::one_ended(spec, Only::Local);
        m.push_local(sample(0, 1.0, false, &[(0, 1000), (1, 500)]));
        let r = m.poll().expect("no remote samples are awaited");
        // Stream 0 goes up: its receiver is silent, so the rate is what was sent.
        assert_eq!((r.streams[0].sent_bytes, r.streams[0].received_bytes), (1000, 0));
        assert!((r.streams[0].throughput_bps - 8000.0).abs() < 1e-9);
        // Stream 1 comes down: we received it.
        assert_eq!(r.streams[1].received_bytes, 500);
        assert!((r.sum.throughput_bps - 12_000.0).abs() < 1e-9);
        m.push_local(sample(1, 2.0, true, &[(0, 2000), (1, 1000)]));
        assert!(m.poll().is_some());
        assert!(m.poll().is_none(), "done after the local end's last sample");
    }

    #[test]
    fn flush_emits_what_is_there() {
        let mut m = Merger::new(TestSpec::tcp(1, 5.0));
        m.push_local(sample(0, 1.0, false, &[(0, 10)]));
        m.push_local(sample(1, 2.0, false, &[(0, 20)]));
        m.push_remote(sample(0, 1.0, false, &[(0, 10)]));
        assert_eq!(m.poll().unwrap().sum.received_bytes, 10);
        let rest = m.flush();
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].sum.sent_bytes, 10);
        assert_eq!(rest[0].sum.received_bytes, 0);
    }
}
