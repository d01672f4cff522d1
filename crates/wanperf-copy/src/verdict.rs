//! What limited a transfer: the copy pipeline's stages, the network's side from TCP_INFO,
//! the hosts' CPUs — pure functions of what both ends measured.
//!
//! A pipeline with bounded queues runs at the pace of its slowest stage: stages downstream of
//! it wait for input (starved), stages upstream wait for room (blocked), and it alone is busy
//! nearly all the time. So the limiter is found from the downstream end (disk write, then
//! decompression, verification, the network, hashing, compression, disk read): the first
//! stage busy at least [`BUSY`] of the time. Backpressure only ever runs upstream, which is
//! why the order matters: a slow disk at the receiver also keeps the sender's socket writes
//! waiting. Time in a socket write is the network's, unless the kernel spent it copying on a
//! saturated CPU (loopback), or the receiver's window or the sender's buffer held it back,
//! which TCP_INFO tells (Web100's SndLim* times).

use crate::spec::{Stage, StageStat};
use serde::{Deserialize, Serialize};

/// Share of the time a stage must be busy to be named the limit.
pub const BUSY: f64 = 0.75;
/// Share of a host's cores in use that counts as a saturated CPU.
pub const CPU_SATURATED: f64 = 0.85;
/// Share of a sender's busy time spent limited by the receive window or send buffer that
/// names them.
pub const SNDLIM: f64 = 0.4;

/// The class of limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// A pipeline stage of a copy.
    Stage(Stage),
    /// The network path itself (congestion window, loss, capacity).
    Network,
    /// The receiver's advertised window (its receive buffer).
    ReceiveWindow,
    /// The sender's send buffer.
    SendBuffer,
    /// The sender's CPU.
    SenderCpu,
    /// The receiver's CPU.
    ReceiverCpu,
    /// Both ends' CPUs (one host).
    HostCpu,
    /// The application: the sender did not keep data in flight (pacing, -b, idle streams).
    Application,
}

/// Another part's room.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Headroom {
    /// What (e.g. `disk read`).
    pub what: String,
    /// What it could do, bytes/s.
    pub capacity_bytes_s: f64,
    /// Capacity over the achieved rate.
    pub times: f64,
}

/// The verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// The limit.
    pub limit: Limit,
    /// Which end it is at (`sender`, `receiver`, or empty for the path).
    #[serde(default)]
    pub at: String,
    /// The rate the limit allowed, bytes/s.
    #[serde(default)]
    pub rate_bytes_s: f64,
    /// One line for people.
    pub text: String,
    /// The measurements behind it.
    #[serde(default)]
    pub evidence: Vec<String>,
    /// The others' room.
    #[serde(default)]
    pub headroom: Vec<Headroom>,
    /// What the stages' ceilings measured alone say of it (`wanperf copy --probe`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<ProbeCheck>,
}

/// A solo ceiling within this factor of the copy's rate confirms that the part limited it.
pub const CONFIRMS: f64 = 1.25;

/// What `--probe` says of a verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeCheck {
    /// Whether the ceilings measured alone agree with the verdict.
    pub confirmed: bool,
    /// One line for people.
    pub text: String,
    /// Every ceiling measured: what (`disk read (sender)`), bytes/s (none if it failed), how.
    pub ceilings: Vec<(String, Option<f64>, String)>,
}

impl ProbeCheck {
    /// The evidence lines: one per ceiling, then the check.
    pub fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .ceilings
            .iter()
            .map(|(what, rate, how)| match rate {
                Some(r) => format!("alone (--probe): {what} does {} ({how})", mb(*r)),
                None => format!("alone (--probe): {what} not measured: {how}"),
            })
            .collect();
        out.push(self.text.clone());
        out
    }
}

/// Checks a copy's verdict against its stages' ceilings measured alone: `sender` and
/// `receiver` are each end's probes, `network` the memory-to-memory test of the same path
/// with the same streams and windows (as a probe of [`Stage::Send`]).
///
/// * A stage named as the limit is confirmed when alone it does at most [`CONFIRMS`] × the
///   copy's rate (the network's classes — path, receive window, send buffer — by the
///   memory-to-memory test);
/// * the CPU is confirmed when no part alone is that slow (each is fast alone; together they
///   share the cores); a part that is, is named instead.
pub fn confirm(
    v: &Verdict,
    sender: &[crate::spec::StageProbe],
    receiver: &[crate::spec::StageProbe],
    network: Option<&crate::spec::StageProbe>,
) -> ProbeCheck {
    let rate = v.rate_bytes_s;
    let all: Vec<(&str, &crate::spec::StageProbe)> = sender
        .iter()
        .map(|p| ("sender", p))
        .chain(receiver.iter().map(|p| ("receiver", p)))
        .chain(network.map(|p| ("path", p)))
        .collect();
    let label = |at: &str, p: &crate::spec::StageProbe| {
        if p.stage == Stage::Send {
            "the network (memory to memory)".to_string()
        } else {
            format!("{} ({at})", p.stage.name())
        }
    };
    let ceilings: Vec<(String, Option<f64>, String)> =
        all.iter().map(|(at, p)| (label(at, p), p.rate_bytes_s, p.how.clone())).collect();
    let times = |c: f64| if rate > 0.0 { c / rate } else { f64::INFINITY };
    let target: Option<(&str, &crate::spec::StageProbe)> = match v.limit {
        Limit::Stage(Stage::Send) | Limit::Network | Limit::ReceiveWindow | Limit::SendBuffer => {
            all.iter().find(|(at, _)| *at == "path").copied()
        }
        Limit::Stage(st) => all.iter().find(|(at, p)| p.stage == st && *at == v.at).copied(),
        _ => None,
    };
    let (confirmed, text) = match (v.limit, target) {
        (Limit::HostCpu | Limit::SenderCpu | Limit::ReceiverCpu, _) => {
            let slowest = all
                .iter()
                .filter_map(|(at, p)| p.rate_bytes_s.map(|r| (at, p, r)))
                .min_by(|a, b| a.2.total_cmp(&b.2));
            match slowest {
                None => (false, "--probe measured no ceiling to compare".to_string()),
                Some((at, p, r)) if times(r) <= CONFIRMS => (
                    false,
                    format!(
                        "--probe points elsewhere: {} alone does only {}, {:.2}× the copy's {}",
                        label(at, p),
                        mb(r),
                        times(r),
                        mb(rate)
                    ),
                ),
                Some((at, p, r)) => (
                    true,
                    format!(
                        "--probe confirms it: every part alone is faster, the slowest ({}) {}, {:.1}× the copy's {}; together they share the cores",
                        label(at, p),
                        mb(r),
                        times(r),
                        mb(rate)
                    ),
                ),
            }
        }
        (_, Some((at, p))) => match p.rate_bytes_s {
            Some(r) if times(r) <= CONFIRMS => (
                true,
                format!("--probe confirms it: {} alone does {}, {:.2}× the copy's {}", label(at, p), mb(r), times(r), mb(rate)),
            ),
            Some(r) => (
                false,
                format!(
                    "--probe does not confirm it: {} alone does {}, {:.1}× the copy's {} (it was held back by another part, or by the CPU they share)",
                    label(at, p),
                    mb(r),
                    times(r),
                    mb(rate)
                ),
            ),
            None => (false, format!("--probe could not measure {}: {}", label(at, p), p.how)),
        },
        (_, None) => (false, "--probe has no ceiling for this limit".to_string()),
    };
    ProbeCheck { confirmed, text, ceilings }
}

/// One end's CPU over the transfer.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Cpu {
    /// CPU seconds (user + system).
    pub cpu_s: f64,
    /// Wall seconds.
    pub wall_s: f64,
    /// Cores of the host.
    pub cores: u32,
    /// Share of the host's cores busy (all processes), where measured.
    #[serde(default)]
    pub host_busy: Option<f64>,
    /// The CPU quota the process ran under (its control group's), cores, if any: what it
    /// could use, whatever the host's cores.
    #[serde(default)]
    pub quota: Option<f64>,
}

impl Cpu {
    /// Cores in use on average.
    pub fn cores_used(&self) -> f64 {
        if self.wall_s > 0.0 {
            self.cpu_s / self.wall_s
        } else {
            0.0
        }
    }
}

/// The sender's TCP view, summed over its streams (final TCP_INFO).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct TcpSide {
    /// Streams.
    pub streams: u32,
    /// Sum of tcpi_busy_time, µs.
    pub busy_us: u64,
    /// Sum of tcpi_rwnd_limited, µs.
    pub rwnd_limited_us: u64,
    /// Sum of tcpi_sndbuf_limited, µs.
    pub sndbuf_limited_us: u64,
    /// Retransmitted segments.
    pub retransmits: u64,
    /// Smallest minimum RTT, µs.
    pub min_rtt_us: Option<u32>,
    /// Receive buffer granted at the receiver (per stream), bytes.
    pub rcvbuf: Option<u64>,
    /// Send buffer granted at the sender (per stream), bytes.
    pub sndbuf: Option<u64>,
    /// Smallest receive window the receiver advertised at the end, bytes.
    pub snd_wnd: Option<u32>,
    /// QUIC streams (quinn's state): no SndLim timers, `min_rtt_us` is the smoothed RTT and
    /// `snd_wnd` the stream's flow-control window, so rate × RTT filling it is the window limit.
    #[serde(default)]
    pub quic: bool,
}

impl TcpSide {
    /// Whether the bytes in flight per stream (rate × min RTT) filled the window the
    /// receiver advertised (≥ 75 %): the receive window held the sender back, whatever the
    /// kernel's own SndLim timers say (they split such a stream between window and buffer).
    fn window_full(&self, rate_bytes_s: f64) -> Option<f64> {
        let (rtt, wnd) = (self.min_rtt_us?, self.snd_wnd?);
        if wnd == 0 || self.streams == 0 || rtt < 1000 {
            return None;
        }
        let flight = rate_bytes_s / f64::from(self.streams) * f64::from(rtt) / 1e6;
        let share = flight / f64::from(wnd);
        (share >= 0.75).then_some(share)
    }
}

fn mb(bytes_s: f64) -> String {
    if bytes_s >= 1e9 {
        format!("{:.2} GB/s", bytes_s / 1e9)
    } else if bytes_s >= 1e6 {
        format!("{:.1} MB/s", bytes_s / 1e6)
    } else {
        format!("{:.1} kB/s", bytes_s / 1e3)
    }
}

fn kib(b: u64) -> String {
    if b >= 1 << 20 {
        format!("{:.1} MiB", b as f64 / 1048576.0)
    } else {
        format!("{} KiB", b / 1024)
    }
}

fn pct(x: f64) -> String {
    format!("{:.0} %", 100.0 * x)
}

/// A stage with the end it ran at.
#[derive(Debug, Clone, PartialEq)]
pub struct AtStage<'a> {
    /// `sender` or `receiver`.
    pub at: &'static str,
    /// Its numbers.
    pub stat: &'a StageStat,
}

impl AtStage<'_> {
    fn util(&self, wall_s: f64) -> f64 {
        let t = f64::from(self.stat.threads.max(1));
        if wall_s > 0.0 {
            (self.stat.busy_s / (t * wall_s)).min(1.0)
        } else {
            0.0
        }
    }
    fn capacity(&self) -> f64 {
        let t = f64::from(self.stat.threads.max(1));
        if self.stat.busy_s > 0.0 {
            self.stat.bytes as f64 * t / self.stat.busy_s
        } else {
            f64::INFINITY
        }
    }
    /// Share of its busy time that was CPU: on one, or ready and waiting for one.
    fn cpu_share(&self) -> Option<f64> {
        let c = self.stat.cpu_s? + self.stat.cpu_wait_s.unwrap_or(0.0);
        (self.stat.busy_s > 0.0).then(|| c / self.stat.busy_s)
    }
}

fn downstream_rank(s: Stage) -> u8 {
    match s {
        Stage::Write => 0,
        Stage::Decompress => 1,
        Stage::Verify => 2,
        Stage::Send => 3,
        Stage::Hash => 4,
        Stage::Compress => 5,
        Stage::Read => 6,
        Stage::Receive => 7,
    }
}

/// Everything a copy's verdict is made from.
#[derive(Debug, Clone)]
pub struct CopyInputs<'a> {
    /// Both ends' stages.
    pub stages: Vec<AtStage<'a>>,
    /// Seconds the copy ran (first block to last write).
    pub wall_s: f64,
    /// File bytes moved.
    pub bytes: u64,
    /// Sender CPU.
    pub sender_cpu: Cpu,
    /// Receiver CPU.
    pub receiver_cpu: Cpu,
    /// Both ends on one host (their CPUs are one pool).
    pub same_host: bool,
    /// The sender's TCP view.
    pub tcp: TcpSide,
    /// Compression in use, for the text (`zstd -3`).
    pub compression: String,
    /// The two ends talk over loopback: the "network" is the kernel copying on the CPUs.
    pub loopback: bool,
    /// The receiver wrote with O_DIRECT (no page cache).
    pub direct_write: bool,
}

/// Which stage (or the network, or the CPU) limited a copy.
pub fn copy(inp: &CopyInputs<'_>) -> Option<Verdict> {
    if inp.wall_s <= 0.0 || inp.bytes == 0 {
        return None;
    }
    let rate = inp.bytes as f64 / inp.wall_s;
    let mut cands: Vec<&AtStage<'_>> = inp.stages.iter().filter(|s| s.stat.stage != Stage::Receive).collect();
    cands.sort_by_key(|s| downstream_rank(s.stat.stage));
    let utils: Vec<f64> = cands.iter().map(|s| s.util(inp.wall_s)).collect();
    let pick = utils
        .iter()
        .position(|&u| u >= BUSY)
        .or_else(|| utils.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|(i, _)| i))?;
    let lim = cands[pick];
    let mut evidence: Vec<String> = cands
        .iter()
        .zip(&utils)
        .filter(|(s, _)| s.stat.bytes > 0 && s.stat.busy_s > 0.0)
        .map(|(s, u)| {
            let cpu = s.cpu_share().map(|c| format!(", {} of it on CPU", pct(c.min(1.0)))).unwrap_or_default();
            format!(
                "{} ({}, {} thread{}): busy {}{}, could do {}",
                s.stat.stage.name(),
                s.at,
                s.stat.threads,
                if s.stat.threads == 1 { "" } else { "s" },
                pct(*u),
                cpu,
                mb(s.capacity())
            )
        })
        .collect();
    let host_cpu = host_cpu(inp);
    if let Some((_, line)) = &host_cpu {
        evidence.push(line.clone());
    }
    // Every other stage's room, and the text naming the disks', the network's and
    // compression's.
    let room = |except: Option<Stage>| -> (Vec<Headroom>, String) {
        let others: Vec<&&AtStage<'_>> =
            cands.iter().filter(|s| Some(s.stat.stage) != except && s.capacity().is_finite()).collect();
        let parts: Vec<String> = others
            .iter()
            .filter(|s| matches!(s.stat.stage, Stage::Read | Stage::Write | Stage::Send | Stage::Compress))
            .map(|s| format!("{} could do {}", s.stat.stage.name(), mb(s.capacity())))
            .collect();
        let hr = others
            .iter()
            .map(|s| Headroom {
                what: format!("{} ({})", s.stat.stage.name(), s.at),
                capacity_bytes_s: s.capacity(),
                times: s.capacity() / rate,
            })
            .collect();
        (hr, if parts.is_empty() { String::new() } else { format!("; {}", parts.join(", ")) })
    };
    let stage = lim.stat.stage;
    // On a saturated CPU a stage's busy time is partly waiting for a core. If one CPU-heavy
    // stage used most of the CPU, it is the limit; otherwise the CPU as a whole is.
    if let Some((limit, line)) = &host_cpu {
        let total: f64 = cands.iter().filter_map(|s| s.stat.cpu_s).sum();
        let top = cands
            .iter()
            .filter(|s| s.stat.cpu_s.is_some())
            .max_by(|a, b| a.stat.cpu_s.unwrap_or(0.0).total_cmp(&b.stat.cpu_s.unwrap_or(0.0)));
        let heavy = top.filter(|t| {
            total > 0.0
                && t.stat.cpu_s.unwrap_or(0.0) >= 0.5 * total
                && matches!(t.stat.stage, Stage::Compress | Stage::Decompress | Stage::Hash | Stage::Verify)
        });
        match heavy {
            Some(t) => {
                let st = t.stat.stage;
                let detail = match st {
                    Stage::Compress | Stage::Decompress => format!(" ({})", inp.compression),
                    _ => String::new(),
                };
                let (hr, room_text) = room(Some(st));
                return Some(Verdict {
                    limit: Limit::Stage(st),
                    at: t.at.into(),
                    rate_bytes_s: rate,
                    text: format!(
                        "limited by {} on the {}{detail}: {} of the CPU time ({line}): {}{}",
                        st.name(),
                        t.at,
                        pct(t.stat.cpu_s.unwrap_or(0.0) / total),
                        mb(rate),
                        room_text
                    ),
                    evidence,
                    headroom: hr,
                    probe: None,
                });
            }
            None => {
                let at = match limit {
                    Limit::SenderCpu => "sender",
                    Limit::ReceiverCpu => "receiver",
                    _ => "",
                };
                return Some(Verdict {
                    limit: *limit,
                    at: at.into(),
                    rate_bytes_s: rate,
                    text: format!("limited by the CPU ({line}): {}", mb(rate)),
                    evidence,
                    headroom: room(None).0,
                    probe: None,
                });
            }
        }
    }
    // Loopback carries data as fast as the kernel copies it: the CPUs, not a network. A disk
    // stage that spent most of its busy time on the CPU was copying to or from the page
    // cache, not waiting for a device.
    let page_cache = matches!(stage, Stage::Read | Stage::Write) && lim.cpu_share().is_some_and(|c| c >= 0.5);
    if (stage == Stage::Send && inp.loopback) || page_cache {
        let (limit, at) = if inp.same_host || inp.loopback {
            (Limit::HostCpu, "")
        } else if lim.at == "sender" {
            (Limit::SenderCpu, "sender")
        } else {
            (Limit::ReceiverCpu, "receiver")
        };
        let share = pct(lim.cpu_share().unwrap_or(0.0).min(1.0));
        let why = if page_cache && stage == Stage::Write && inp.direct_write {
            format!(
                "disk write on the {} spent {share} of its busy time on the CPU (O_DIRECT, past the page cache)",
                lim.at
            )
        } else if page_cache {
            format!("{} on the {} ran from the page cache ({share} of its busy time on the CPU)", stage.name(), lim.at)
        } else {
            "over loopback the network is the kernel copying on the CPUs".to_string()
        };
        let (hr, room_text) = room(Some(stage));
        return Some(Verdict {
            limit,
            at: at.into(),
            rate_bytes_s: rate,
            text: format!("limited by the CPU: {why}: {}{room_text}", mb(rate)),
            evidence,
            headroom: hr,
            probe: None,
        });
    }
    if stage == Stage::Send {
        let t = &inp.tcp;
        let busy = t.busy_us.max(1) as f64;
        let full = t.window_full(rate);
        let (limit, why) = if t.rwnd_limited_us as f64 / busy >= SNDLIM || full.is_some() {
            (
                Limit::ReceiveWindow,
                format!(
                    "the receiver's window: {}{}",
                    match full {
                        Some(f) => format!(
                            "{} in flight per stream filled {} of the {} window it advertised",
                            kib((rate / f64::from(t.streams.max(1)) * f64::from(t.min_rtt_us.unwrap_or(0)) / 1e6)
                                as u64),
                            pct(f.min(1.0)),
                            kib(u64::from(t.snd_wnd.unwrap_or(0)))
                        ),
                        None => format!("receive-window-limited {} of the time", pct(t.rwnd_limited_us as f64 / busy)),
                    },
                    t.rcvbuf.map(|b| format!(", {} buffer per stream", kib(b))).unwrap_or_default()
                ),
            )
        } else if t.sndbuf_limited_us as f64 / busy >= SNDLIM {
            (
                Limit::SendBuffer,
                format!(
                    "the sender's buffer: send-buffer-limited {} of the time{}",
                    pct(t.sndbuf_limited_us as f64 / busy),
                    t.sndbuf.map(|b| format!(", {} per stream", kib(b))).unwrap_or_default()
                ),
            )
        } else {
            (
                Limit::Network,
                format!(
                    "the network path: the sender's streams were congestion-window-limited{}{}",
                    if t.retransmits > 0 { format!(", {} retransmits", t.retransmits) } else { String::new() },
                    t.min_rtt_us.map(|r| format!(", RTT {:.1} ms", f64::from(r) / 1000.0)).unwrap_or_default()
                ),
            )
        };
        evidence.push(format!(
            "TCP: busy {} s, receive-window-limited {} s, send-buffer-limited {} s over {} stream(s)",
            t.busy_us as f64 / 1e6,
            t.rwnd_limited_us as f64 / 1e6,
            t.sndbuf_limited_us as f64 / 1e6,
            t.streams
        ));
        let (hr, room_text) = room(Some(Stage::Send));
        let window = match (limit, t.min_rtt_us) {
            (Limit::ReceiveWindow | Limit::SendBuffer, Some(r)) if r > 0 => {
                format!(" (a window of W moves at most W/RTT: the path's RTT is {:.1} ms)", f64::from(r) / 1000.0)
            }
            _ => String::new(),
        };
        return Some(Verdict {
            limit,
            at: match limit {
                Limit::ReceiveWindow => "receiver".into(),
                Limit::SendBuffer => "sender".into(),
                _ => String::new(),
            },
            rate_bytes_s: rate,
            text: format!("limited by {why}: {}{window}{room_text}", mb(rate)),
            evidence,
            headroom: hr,
            probe: None,
        });
    }
    let detail = match stage {
        Stage::Compress | Stage::Decompress => format!(" ({})", inp.compression),
        _ => String::new(),
    };
    let (hr, room_text) = room(Some(stage));
    let text = format!(
        "limited by {} on the {}{detail}, {} thread{} busy {}: {}{}",
        stage.name(),
        lim.at,
        lim.stat.threads,
        if lim.stat.threads == 1 { "" } else { "s" },
        pct(lim.util(inp.wall_s)),
        mb(rate),
        room_text
    );
    Some(Verdict {
        limit: Limit::Stage(stage),
        at: lim.at.into(),
        rate_bytes_s: rate,
        text,
        evidence,
        headroom: hr,
        probe: None,
    })
}

/// Whether a host's CPU was saturated, and how it is described.
fn host_cpu(inp: &CopyInputs<'_>) -> Option<(Limit, String)> {
    let (s, r) = (inp.sender_cpu, inp.receiver_cpu);
    if inp.same_host {
        let cores = s.cores.max(r.cores).max(1);
        let used = match (s.host_busy, r.host_busy) {
            (Some(a), Some(b)) => a.max(b) * f64::from(cores),
            (Some(a), None) | (None, Some(a)) => a * f64::from(cores),
            (None, None) => s.cores_used() + r.cores_used(),
        };
        return (used >= CPU_SATURATED * f64::from(cores))
            .then(|| (Limit::HostCpu, format!("both ends on one host kept {used:.2} of its {cores} cores busy")));
    }
    // Under a CPU quota below the host's cores the process's own use against the quota
    // decides (the host's other cores may be idle).
    let quota = |c: Cpu| c.quota.filter(|q| *q < f64::from(c.cores.max(1)));
    let sat = |c: Cpu| match quota(c) {
        Some(q) => c.cores_used() >= CPU_SATURATED * q,
        None => {
            c.cores > 0
                && c.host_busy.map_or(c.cores_used(), |b| b * f64::from(c.cores)) >= CPU_SATURATED * f64::from(c.cores)
        }
    };
    let of = |c: Cpu| match quota(c) {
        Some(q) => format!("{:.2} of its CPU quota of {q} cores", c.cores_used()),
        None => format!("{:.2} of its {} cores", c.cores_used(), c.cores),
    };
    if sat(s) {
        return Some((Limit::SenderCpu, format!("the sender used {}", of(s))));
    }
    if sat(r) {
        return Some((Limit::ReceiverCpu, format!("the receiver used {}", of(r))));
    }
    None
}

/// Everything a `tput` verdict is made from.
#[derive(Debug, Clone, Default)]
pub struct TputInputs {
    /// Goodput achieved, bytes/s.
    pub rate_bytes_s: f64,
    /// Test seconds.
    pub wall_s: f64,
    /// The sender's TCP view.
    pub tcp: TcpSide,
    /// Sender CPU (cores_used counts the sending threads or process).
    pub sender_cpu: Cpu,
    /// Receiver CPU.
    pub receiver_cpu: Cpu,
    /// Both ends on one host.
    pub same_host: bool,
    /// The test's own pacing target, bytes/s (`-b`).
    pub paced_bytes_s: Option<f64>,
    /// The two ends talk over loopback.
    pub loopback: bool,
}

/// What limited a TCP throughput test.
pub fn tput(inp: &TputInputs) -> Option<Verdict> {
    let t = &inp.tcp;
    if inp.wall_s <= 0.0 || t.streams == 0 {
        return None;
    }
    let rate = inp.rate_bytes_s;
    let streams = f64::from(t.streams);
    let busy_share = t.busy_us as f64 / 1e6 / (inp.wall_s * streams);
    let busy = t.busy_us.max(1) as f64;
    let rwnd = t.rwnd_limited_us as f64 / busy;
    let sndb = t.sndbuf_limited_us as f64 / busy;
    let mut evidence = vec![if t.quic {
        format!(
            "QUIC over {} connection(s): {} packets declared lost{}; flow-control window {} per stream",
            t.streams,
            t.retransmits,
            t.min_rtt_us.map(|r| format!("; smoothed RTT {:.2} ms", f64::from(r) / 1000.0)).unwrap_or_default(),
            kib(u64::from(t.snd_wnd.unwrap_or(0)))
        )
    } else {
        format!(
            "TCP over {} stream(s): data in flight {} of the time; receive-window-limited {}, send-buffer-limited {} of that{}",
            t.streams,
            pct(busy_share.min(1.0)),
            pct(rwnd),
            pct(sndb),
            t.min_rtt_us.map(|r| format!("; min RTT {:.2} ms", f64::from(r) / 1000.0)).unwrap_or_default()
        )
    }];
    let cpu_line = |name: &str, c: Cpu| {
        format!(
            "{name} CPU: {:.2} cores in use{}",
            c.cores_used(),
            if c.cores > 0 { format!(" of {}", c.cores) } else { String::new() }
        )
    };
    evidence.push(cpu_line("sender", inp.sender_cpu));
    evidence.push(cpu_line("receiver", inp.receiver_cpu));
    let v = |limit: Limit, at: &str, text: String, evidence: Vec<String>| {
        Some(Verdict { limit, at: at.into(), rate_bytes_s: rate, text, evidence, headroom: vec![], probe: None })
    };
    if let Some(p) = inp.paced_bytes_s {
        if rate >= 0.9 * p {
            return v(
                Limit::Application,
                "sender",
                format!("limited by the application: paced to {} and reached {}", mb(p), mb(rate)),
                evidence,
            );
        }
    }
    // A stream is one thread: it saturates at one core, or at the host's cores.
    let saturated = |c: Cpu| {
        let cap = if c.cores > 0 { streams.min(f64::from(c.cores)) } else { streams };
        c.cores_used() >= 0.9 * cap
    };
    if inp.same_host {
        let cores = inp.sender_cpu.cores.max(inp.receiver_cpu.cores).max(1);
        let used = inp.sender_cpu.cores_used() + inp.receiver_cpu.cores_used();
        if used >= CPU_SATURATED * f64::from(cores) {
            return v(
                Limit::HostCpu,
                "",
                format!("limited by the CPU: both ends on one host used {used:.2} of its {cores} cores: {}", mb(rate)),
                evidence,
            );
        }
    }
    if saturated(inp.sender_cpu) {
        return v(
            Limit::SenderCpu,
            "sender",
            format!(
                "limited by the sender's CPU ({:.2} cores for {} stream(s)): {}",
                inp.sender_cpu.cores_used(),
                t.streams,
                mb(rate)
            ),
            evidence,
        );
    }
    if saturated(inp.receiver_cpu) {
        return v(
            Limit::ReceiverCpu,
            "receiver",
            format!(
                "limited by the receiver's CPU ({:.2} cores for {} stream(s)): {}",
                inp.receiver_cpu.cores_used(),
                t.streams,
                mb(rate)
            ),
            evidence,
        );
    }
    // quinn keeps no SndLim timers: the window's fill is QUIC's only evidence of a limit short
    // of the network.
    let (rwnd, sndb, busy_share) = if t.quic { (0.0, 0.0, 1.0) } else { (rwnd, sndb, busy_share) };
    if rwnd >= SNDLIM || t.window_full(rate).is_some() {
        let why = match t.window_full(rate) {
            Some(f) => format!(
                "{} in flight per stream (rate × min RTT) filled {} of the {} window the receiver advertised",
                kib((rate / streams * f64::from(t.min_rtt_us.unwrap_or(0)) / 1e6) as u64),
                pct(f.min(1.0)),
                kib(u64::from(t.snd_wnd.unwrap_or(0)))
            ),
            None => format!("receive-window-limited {} of the time", pct(rwnd)),
        };
        let why = if t.quic {
            why.replace("min RTT", "smoothed RTT").replace("advertised", "granted (QUIC flow control)")
        } else {
            why
        };
        return v(
            Limit::ReceiveWindow,
            "receiver",
            format!(
                "limited by the receiver's window: {why}{}; a larger -w moves more: {}",
                t.rcvbuf.map(|b| format!(", {} receive buffer per stream", kib(b))).unwrap_or_default(),
                mb(rate)
            ),
            evidence,
        );
    }
    if sndb >= SNDLIM {
        return v(
            Limit::SendBuffer,
            "sender",
            format!(
                "limited by the sender's buffer: send-buffer-limited {} of the time{}: {}",
                pct(sndb),
                t.sndbuf.map(|b| format!(", {} per stream", kib(b))).unwrap_or_default(),
                mb(rate)
            ),
            evidence,
        );
    }
    if busy_share < 0.5 {
        return v(
            Limit::Application,
            "sender",
            format!(
                "limited by the application: the streams had data in flight only {} of the time: {}",
                pct(busy_share),
                mb(rate)
            ),
            evidence,
        );
    }
    if inp.loopback {
        return v(
            Limit::HostCpu,
            "",
            format!("limited by the CPU: over loopback the network is the kernel copying on the CPUs: {}", mb(rate)),
            evidence,
        );
    }
    v(
        Limit::Network,
        "",
        format!(
            "limited by the network path: congestion-window-limited{}: {}",
            match (t.retransmits, t.quic) {
                (0, _) => ", no retransmits".into(),
                (n, false) => format!(", {n} retransmits"),
                (n, true) => format!(", {n} packets declared lost"),
            },
            mb(rate)
        ),
        evidence,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(stage: Stage, threads: u32, busy: f64, bytes: u64, cpu: Option<f64>) -> StageStat {
        StageStat { stage, threads, busy_s: busy, starved_s: 0.0, blocked_s: 0.0, bytes, cpu_s: cpu, cpu_wait_s: None }
    }

    fn inputs<'a>(stats: &'a [(&'static str, StageStat)]) -> CopyInputs<'a> {
        CopyInputs {
            stages: stats.iter().map(|(at, s)| AtStage { at, stat: s }).collect(),
            wall_s: 10.0,
            bytes: 1_000_000_000,
            sender_cpu: Cpu { cpu_s: 5.0, wall_s: 10.0, cores: 8, host_busy: None, quota: None },
            receiver_cpu: Cpu { cpu_s: 5.0, wall_s: 10.0, cores: 8, host_busy: None, quota: None },
            same_host: false,
            tcp: TcpSide { streams: 1, busy_us: 10_000_000, ..Default::default() },
            compression: "zstd -19".into(),
            loopback: false,
            direct_write: false,
        }
    }

    const G: u64 = 1_000_000_000;

    /// A source disk busy 98 % of the copy's 10 s, everything else waiting on it.
    fn slow_source() -> [(&'static str, StageStat); 5] {
        [
            ("sender", st(Stage::Read, 1, 9.8, G, Some(0.5))),
            ("sender", st(Stage::Hash, 2, 1.0, G, Some(1.0))),
            ("sender", st(Stage::Send, 2, 1.5, G, Some(0.5))),
            ("receiver", st(Stage::Verify, 2, 1.0, G, Some(1.0))),
            ("receiver", st(Stage::Write, 1, 1.0, G, Some(0.9))),
        ]
    }

    #[test]
    fn a_slow_source_disk_is_named_although_everything_downstream_waits() {
        let s = slow_source();
        let v = copy(&inputs(&s)).unwrap();
        assert_eq!(v.limit, Limit::Stage(Stage::Read));
        assert_eq!(v.at, "sender");
        assert!((v.rate_bytes_s - 1e8).abs() < 1.0);
        assert!(v.text.starts_with("limited by disk read on the sender"), "{}", v.text);
        assert!(v.text.contains("the network could do"), "{}", v.text);
    }

    #[test]
    fn backpressure_from_a_slow_sink_does_not_blame_the_network() {
        let s = [
            ("sender", st(Stage::Read, 1, 1.0, G, Some(0.9))),
            ("sender", st(Stage::Send, 2, 19.0, G, Some(0.5))),
            ("receiver", st(Stage::Write, 1, 9.7, G, Some(0.3))),
        ];
        let v = copy(&inputs(&s)).unwrap();
        assert_eq!(v.limit, Limit::Stage(Stage::Write));
        assert_eq!(v.at, "receiver");
    }

    #[test]
    fn network_classes_come_from_tcp_info() {
        let s = [("sender", st(Stage::Read, 1, 1.0, G, Some(0.9))), ("sender", st(Stage::Send, 1, 9.9, G, Some(0.3)))];
        let mut i = inputs(&s);
        assert_eq!(copy(&i).unwrap().limit, Limit::Network);
        i.tcp.rwnd_limited_us = 8_000_000;
        i.tcp.min_rtt_us = Some(100_000);
        let v = copy(&i).unwrap();
        assert_eq!(v.limit, Limit::ReceiveWindow);
        assert!(v.text.contains("RTT is 100.0 ms"), "{}", v.text);
        i.tcp.rwnd_limited_us = 0;
        i.tcp.sndbuf_limited_us = 9_000_000;
        assert_eq!(copy(&i).unwrap().limit, Limit::SendBuffer);
    }

    #[test]
    fn a_saturated_shared_cpu_is_named_on_loopback_never_the_network_or_disk() {
        let s = [
            ("sender", st(Stage::Read, 1, 3.0, G, Some(2.9))),
            ("sender", st(Stage::Send, 1, 9.0, G, Some(8.0))),
            ("receiver", st(Stage::Write, 1, 3.0, G, Some(2.9))),
        ];
        let mut i = inputs(&s);
        i.same_host = true;
        i.sender_cpu = Cpu { cpu_s: 9.5, wall_s: 10.0, cores: 2, host_busy: None, quota: None };
        i.receiver_cpu = Cpu { cpu_s: 8.5, wall_s: 10.0, cores: 2, host_busy: None, quota: None };
        let v = copy(&i).unwrap();
        assert_eq!(v.limit, Limit::HostCpu, "{}", v.text);
        // A CPU-heavy stage on the same saturated host is still named as the stage.
        let c =
            [("sender", st(Stage::Compress, 1, 9.9, G, Some(9.8))), ("sender", st(Stage::Send, 1, 1.0, G, Some(0.5)))];
        let mut j = inputs(&c);
        j.same_host = true;
        j.sender_cpu = Cpu { cpu_s: 12.0, wall_s: 10.0, cores: 2, host_busy: None, quota: None };
        j.receiver_cpu = Cpu { cpu_s: 6.0, wall_s: 10.0, cores: 2, host_busy: None, quota: None };
        let v = copy(&j).unwrap();
        assert_eq!(v.limit, Limit::Stage(Stage::Compress));
        assert!(v.text.contains("zstd -19"), "{}", v.text);
    }

    #[test]
    fn a_quic_verdict_reads_the_window_from_its_fill_and_never_calls_it_the_application() {
        // QUIC has no SndLim timers (busy 0): without the flag that would read as an idle
        // sender. 1 MB/s at 20 ms is 20 kB in flight of a 16 MiB window: the network.
        let quic = TputInputs {
            rate_bytes_s: 1e6,
            wall_s: 4.0,
            tcp: TcpSide {
                streams: 1,
                retransmits: 12,
                min_rtt_us: Some(20_000),
                snd_wnd: Some(16 << 20),
                quic: true,
                ..Default::default()
            },
            sender_cpu: Cpu { cpu_s: 0.4, wall_s: 4.0, cores: 2, host_busy: None, quota: None },
            receiver_cpu: Cpu { cpu_s: 0.4, wall_s: 4.0, cores: 2, host_busy: None, quota: None },
            ..Default::default()
        };
        let v = tput(&quic).unwrap();
        assert_eq!(v.limit, Limit::Network, "{}", v.text);
        assert!(v.text.contains("12 packets declared lost"), "{}", v.text);
        assert!(v.evidence[0].starts_with("QUIC over 1 connection(s)"), "{:?}", v.evidence);
        // A 64 KiB flow-control window at 20 ms: 2.8 MB/s fills 88 % of it.
        let w = TputInputs { rate_bytes_s: 2.8e6, tcp: TcpSide { snd_wnd: Some(65536), ..quic.tcp }, ..quic.clone() };
        let v = tput(&w).unwrap();
        assert_eq!(v.limit, Limit::ReceiveWindow, "{}", v.text);
        assert!(v.text.contains("QUIC flow control") && v.text.contains("smoothed RTT"), "{}", v.text);
        // The same numbers as TCP with no busy time: the application (the old reading).
        let tcp = TputInputs { tcp: TcpSide { quic: false, snd_wnd: None, ..quic.tcp }, ..quic.clone() };
        assert_eq!(tput(&tcp).unwrap().limit, Limit::Application);
    }

    #[test]
    fn tput_classes() {
        let base = TputInputs {
            rate_bytes_s: 1e7,
            wall_s: 10.0,
            tcp: TcpSide {
                streams: 1,
                busy_us: 9_900_000,
                min_rtt_us: Some(100_000),
                rcvbuf: Some(65536),
                ..Default::default()
            },
            sender_cpu: Cpu { cpu_s: 1.0, wall_s: 10.0, cores: 4, host_busy: None, quota: None },
            receiver_cpu: Cpu { cpu_s: 1.0, wall_s: 10.0, cores: 4, host_busy: None, quota: None },
            same_host: false,
            paced_bytes_s: None,
            loopback: false,
        };
        assert_eq!(tput(&base).unwrap().limit, Limit::Network);
        let mut w = base.clone();
        w.tcp.rwnd_limited_us = 9_000_000;
        let v = tput(&w).unwrap();
        assert_eq!(v.limit, Limit::ReceiveWindow);
        assert!(v.text.contains("64 KiB receive buffer"), "{}", v.text);
        let mut c = base.clone();
        c.sender_cpu.cpu_s = 9.5;
        assert_eq!(tput(&c).unwrap().limit, Limit::SenderCpu);
        let mut r = base.clone();
        r.receiver_cpu.cpu_s = 9.5;
        assert_eq!(tput(&r).unwrap().limit, Limit::ReceiverCpu);
        let mut a = base.clone();
        a.tcp.busy_us = 2_000_000;
        assert_eq!(tput(&a).unwrap().limit, Limit::Application);
        let mut p = base.clone();
        p.paced_bytes_s = Some(1e7);
        assert_eq!(tput(&p).unwrap().limit, Limit::Application);
        let mut s = base;
        s.tcp.sndbuf_limited_us = 5_000_000;
        assert_eq!(tput(&s).unwrap().limit, Limit::SendBuffer);
    }

    fn probe(stage: Stage, rate: f64) -> crate::spec::StageProbe {
        // One thread, one second.
        crate::spec::StageProbe::measured(stage, rate as u64, 1.0, 1, "test")
    }

    #[test]
    fn probes_confirm_a_slow_disk_and_refute_a_fast_one() {
        let s = slow_source();
        let v = copy(&inputs(&s)).unwrap();
        assert_eq!(v.limit, Limit::Stage(Stage::Read));
        // The copy ran at 100 MB/s; the disk alone reads 105 MB/s: confirmed.
        let net = probe(Stage::Send, 1.1e9);
        let c =
            confirm(&v, &[probe(Stage::Read, 105e6), probe(Stage::Hash, 2e9)], &[probe(Stage::Write, 1e9)], Some(&net));
        assert!(c.confirmed, "{c:?}");
        assert!(c.text.contains("disk read (sender) alone does 105.0 MB/s"), "{}", c.text);
        assert_eq!(c.ceilings.len(), 4);
        // Alone it reads 400 MB/s: the verdict is not confirmed, and says so.
        let c = confirm(&v, &[probe(Stage::Read, 400e6)], &[], Some(&net));
        assert!(!c.confirmed && c.text.contains("does not confirm"), "{}", c.text);
        // The receiver's disk is not the sender's.
        let c = confirm(&v, &[], &[probe(Stage::Read, 105e6)], None);
        assert!(!c.confirmed && c.text.contains("no ceiling"), "{}", c.text);
    }

    #[test]
    fn probes_check_the_network_and_the_cpu() {
        let v = Verdict {
            limit: Limit::ReceiveWindow,
            at: String::new(),
            rate_bytes_s: 50e6,
            text: String::new(),
            evidence: vec![],
            headroom: vec![],
            probe: None,
        };
        // The memory-to-memory test with the same window does 52 MB/s: the window it is.
        assert!(confirm(&v, &[probe(Stage::Read, 1e9)], &[], Some(&probe(Stage::Send, 52e6))).confirmed);
        assert!(!confirm(&v, &[], &[], Some(&probe(Stage::Send, 500e6))).confirmed);
        let failed = crate::spec::StageProbe::failed(Stage::Send, "the server refused the test");
        let c = confirm(&v, &[], &[], Some(&failed));
        assert!(!c.confirmed && c.text.contains("refused"), "{}", c.text);
        // The CPU: every part alone at least twice as fast is the CPU shared; one part alone
        // as slow as the copy is named instead.
        let cpu = Verdict { limit: Limit::HostCpu, ..v };
        let fast = [probe(Stage::Read, 400e6), probe(Stage::Hash, 2e9)];
        let c = confirm(&cpu, &fast, &[probe(Stage::Write, 150e6)], Some(&probe(Stage::Send, 300e6)));
        assert!(c.confirmed && c.text.contains("disk write (receiver)"), "{}", c.text);
        let c = confirm(&cpu, &fast, &[probe(Stage::Write, 55e6)], None);
        assert!(!c.confirmed && c.text.contains("points elsewhere: disk write (receiver)"), "{}", c.text);
    }
}
