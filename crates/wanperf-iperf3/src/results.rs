//! The result objects both ends exchange after `ExchangeResults` (client first), and their
//! mapping to and from wanperf's per-stream reports.
//!
//! iperf3 resets its counters when `--omit` ends, so the bytes, retransmits and times in a
//! result object cover the measured part only; its `packets` (the highest UDP packet number
//! seen, or sent) covers the whole test.

use crate::wire::{stream_id, stream_index};
use serde::{Deserialize, Deserializer, Serialize};
use wanperf_proto::msg::{CpuUsage, Role, SideReport, StreamFinal, TestSpec, Transport, UdpCounters};

/// One end's results.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// CPU use of the process over the test, % of one core (user + system).
    #[serde(deserialize_with = "num")]
    pub cpu_util_total: f64,
    /// User part.
    #[serde(deserialize_with = "num")]
    pub cpu_util_user: f64,
    /// System part.
    #[serde(deserialize_with = "num")]
    pub cpu_util_system: f64,
    /// 1 if the sender's retransmit counts are known, 0 if not, -1 from a pure receiver.
    #[serde(deserialize_with = "num_i64")]
    pub sender_has_retransmits: i64,
    /// Congestion control the end's TCP streams used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion_used: Option<String>,
    /// Per stream.
    pub streams: Vec<StreamResult>,
    /// The server's own JSON output (when asked for and the server runs with -J).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_output_json: Option<serde_json::Value>,
    /// The server's own text output (when asked for and the server runs without -J).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_output_text: Option<String>,
}

/// One stream's results.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamResult {
    /// iperf3 stream id (1, 3, 4, …).
    #[serde(deserialize_with = "num_i64")]
    pub id: i64,
    /// Bytes sent (by a sender) or received (by a receiver) after --omit.
    #[serde(deserialize_with = "num_u64")]
    pub bytes: u64,
    /// TCP retransmits of a sender after --omit; -1 when not known.
    #[serde(deserialize_with = "num_i64")]
    pub retransmits: i64,
    /// UDP receiver's jitter, seconds.
    #[serde(deserialize_with = "num")]
    pub jitter: f64,
    /// UDP receiver's lost packets.
    #[serde(deserialize_with = "num_i64")]
    pub errors: i64,
    /// Lost packets during --omit (3.13 and later).
    #[serde(default, deserialize_with = "opt_i64", skip_serializing_if = "Option::is_none")]
    pub omitted_errors: Option<i64>,
    /// UDP: highest packet number received (receiver) or packets sent (sender).
    #[serde(deserialize_with = "num_i64")]
    pub packets: i64,
    /// Packets during --omit (3.13 and later).
    #[serde(default, deserialize_with = "opt_i64", skip_serializing_if = "Option::is_none")]
    pub omitted_packets: Option<i64>,
    /// Seconds from the end of --omit to the stream's start (0).
    #[serde(default, deserialize_with = "opt_num", skip_serializing_if = "Option::is_none")]
    pub start_time: Option<f64>,
    /// Seconds from the end of --omit to the stream's end.
    #[serde(default, deserialize_with = "opt_num", skip_serializing_if = "Option::is_none")]
    pub end_time: Option<f64>,
}

// cJSON writes every number as a double and may use exponent notation for large ones, so
// numbers are read as f64 whatever their field's type.
fn num<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    f64::deserialize(d)
}

fn num_i64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    Ok(f64::deserialize(d)?.round() as i64)
}

fn num_u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    Ok(f64::deserialize(d)?.round().max(0.0) as u64)
}

fn opt_num<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    Option::<f64>::deserialize(d)
}

fn opt_i64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.map(|v| v.round() as i64))
}

/// What one end knows of a stream at the end of --omit: bytes sent, bytes received,
/// retransmits, and UDP packets and losses so far (zeros without --omit).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Baseline {
    /// Bytes sent.
    pub sent: u64,
    /// Bytes received.
    pub received: u64,
    /// Retransmits.
    pub retransmits: u64,
}

/// Which end of the test a report belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The client.
    Client,
    /// The server.
    Server,
}

fn role_of(spec: &TestSpec, end: End, index: u32) -> Role {
    match (end, spec.client_role(index)) {
        (End::Client, r) => r,
        (End::Server, Role::Sender) => Role::Receiver,
        (End::Server, Role::Receiver) => Role::Sender,
    }
}

impl Results {
    /// This end's results in iperf3's terms, from its report. `base[i]` is stream i's state
    /// at the end of --omit; `server_output` is the text a server returns when asked for it.
    pub fn from_report(
        spec: &TestSpec,
        end: End,
        report: &SideReport,
        base: &[Baseline],
        server_output: Option<String>,
    ) -> Results {
        let omit = spec.omit_s;
        let mut any_tcp_sender = false;
        let mut any_sender = false;
        let streams = report
            .streams
            .iter()
            .map(|s| {
                let role = role_of(spec, end, s.id);
                let b = base.get(s.id as usize).copied().unwrap_or_default();
                let sender = role == Role::Sender;
                any_sender |= sender;
                let tcp_sender = sender && spec.transport == Transport::Tcp;
                any_tcp_sender |= tcp_sender;
                let udp = s.udp.clone().unwrap_or_default();
                let (packets, errors) =
                    if sender { (udp.packets as i64, 0) } else { ((udp.packets + udp.lost) as i64, udp.lost as i64) };
                StreamResult {
                    id: stream_id(s.id),
                    bytes: s.bytes.saturating_sub(if sender { b.sent } else { b.received }),
                    retransmits: if tcp_sender {
                        s.tcp.as_ref().map_or(0, |t| u64::from(t.total_retrans).saturating_sub(b.retransmits)) as i64
                    } else {
                        -1
                    },
                    jitter: if sender { 0.0 } else { udp.jitter_ms / 1000.0 },
                    errors,
                    omitted_errors: Some(0),
                    packets,
                    omitted_packets: Some(0),
                    start_time: Some(0.0),
                    end_time: Some((s.duration_s - omit).max(0.0)),
                }
            })
            .collect();
        let pct = |x: f64| if report.cpu.wall_s > 0.0 { 100.0 * x / report.cpu.wall_s } else { 0.0 };
        Results {
            cpu_util_total: pct(report.cpu.user_s + report.cpu.system_s),
            cpu_util_user: pct(report.cpu.user_s),
            cpu_util_system: pct(report.cpu.system_s),
            sender_has_retransmits: if !any_sender { -1 } else { i64::from(any_tcp_sender) },
            congestion_used: report.streams.iter().find_map(|s| s.cc.clone()),
            streams,
            server_output_json: None,
            server_output_text: server_output,
        }
    }

    /// The peer's results as a wanperf report for [`wanperf_proto::record::summarize`]: stream
    /// ids mapped back, durations counted from the test's start (as wanperf's are), UDP
    /// packets as distinct datagrams received (receivers) or sent (senders). Unknown stream ids
    /// are an error: they mean the two ends disagree about the test.
    pub fn to_report(&self, spec: &TestSpec, peer: End) -> Result<SideReport, String> {
        let omit = spec.omit_s;
        let mut streams = Vec::with_capacity(self.streams.len());
        let mut wall: f64 = 0.0;
        for r in &self.streams {
            let index = stream_index(r.id)
                .filter(|i| *i < spec.connections())
                .ok_or_else(|| format!("the iperf3 peer reported stream id {} this test does not have", r.id))?;
            let role = role_of(spec, peer, index);
            let duration = r.end_time.unwrap_or(0.0) - r.start_time.unwrap_or(0.0) + omit;
            wall = wall.max(duration);
            let udp = (spec.transport == Transport::Udp).then(|| match role {
                Role::Sender => UdpCounters { packets: r.packets.max(0) as u64, ..Default::default() },
                Role::Receiver => {
                    let lost = r.errors.max(0) as u64;
                    UdpCounters {
                        packets: (r.packets.max(0) as u64).saturating_sub(lost),
                        lost,
                        jitter_ms: r.jitter * 1000.0,
                        ..Default::default()
                    }
                }
            });
            streams.push(StreamFinal {
                id: index,
                role: Some(role),
                bytes: r.bytes,
                duration_s: duration,
                retransmits: (role == Role::Sender && r.retransmits >= 0).then_some(r.retransmits as u64),
                udp,
                cc: (role == Role::Sender && spec.transport == Transport::Tcp)
                    .then(|| self.congestion_used.clone())
                    .flatten(),
                ..Default::default()
            });
        }
        let part = |pct: f64| pct / 100.0 * wall;
        Ok(SideReport {
            streams,
            cpu: CpuUsage { user_s: part(self.cpu_util_user), system_s: part(self.cpu_util_system), wall_s: wall },
            tcp_counters: Default::default(),
            copy: None,
        })
    }

    /// The server's software version, when its output came as JSON (e.g. "iperf 3.12").
    pub fn server_version(&self) -> Option<String> {
        let start = self.server_output_json.as_ref()?.get("start")?;
        start.get("version").and_then(|v| v.as_str()).map(str::to_string)
    }

    /// The server's `uname` line, when its output came as JSON.
    pub fn server_system(&self) -> Option<String> {
        let start = self.server_output_json.as_ref()?.get("start")?;
        start.get("system_info").and_then(|v| v.as_str()).map(str::to_string)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wanperf_proto::msg::{Direction, TcpInfo};

    #[test]
    fn iperf3_results_parse_including_cjson_doubles() {
        // As iperf3 3.12's server sends them after `-c X -P 2` (with a large byte count in
        // exponent notation, as cJSON writes numbers past 1e15).
        let text = br#"{"cpu_util_total":12.5,"cpu_util_user":2.5,"cpu_util_system":10,"sender_has_retransmits":-1,"congestion_used":"cubic","streams":[{"id":1,"bytes":1.2e15,"retransmits":-1,"jitter":0,"errors":0,"packets":0,"start_time":0,"end_time":10.000123},{"id":3,"bytes":1048576,"retransmits":-1,"jitter":0,"errors":0,"packets":0,"start_time":0,"end_time":10.0002}]}"#;
        let r: Results = crate::wire::parse_json(text).unwrap();
        assert_eq!(r.streams[0].bytes, 1_200_000_000_000_000);
        let spec = TestSpec::tcp(2, 10.0);
        let rep = r.to_report(&spec, End::Server).unwrap();
        assert_eq!(rep.streams[1].id, 1);
        assert_eq!(rep.streams[1].role, Some(Role::Receiver));
        assert_eq!(rep.streams[1].bytes, 1_048_576);
        assert!((rep.cpu.wall_s - 10.0002).abs() < 1e-9);
        assert!((rep.cpu.system_s - 1.00002).abs() < 1e-6);
        assert_eq!(r.server_version(), None);
    }

    #[test]
    fn unknown_stream_ids_are_refused() {
        let r = Results { streams: vec![StreamResult { id: 7, ..Default::default() }], ..Default::default() };
        assert!(r.to_report(&TestSpec::tcp(2, 1.0), End::Server).unwrap_err().contains("stream id 7"));
    }

    #[test]
    fn udp_receiver_counts_become_distinct_packets_and_loss() {
        let mut spec = TestSpec::tcp(1, 5.0);
        spec.transport = Transport::Udp;
        spec.rate_bps = Some(1_000_000);
        let r = Results {
            streams: vec![StreamResult {
                id: 1,
                bytes: 98_000,
                jitter: 0.0005,
                errors: 2,
                packets: 100,
                end_time: Some(5.0),
                ..Default::default()
            }],
            ..Default::default()
        };
        let rep = r.to_report(&spec, End::Server).unwrap();
        let u = rep.streams[0].udp.clone().unwrap();
        assert_eq!((u.packets, u.lost), (98, 2));
        assert!((u.jitter_ms - 0.5).abs() < 1e-12);
    }

    #[test]
    fn a_report_becomes_results_after_omit_and_back() {
        let mut spec = TestSpec::tcp(1, 10.0);
        spec.direction = Direction::Down;
        spec.omit_s = 2.0;
        // The server sends: its report, with 1000 bytes and 3 retransmits during --omit.
        let server = SideReport {
            streams: vec![StreamFinal {
                id: 0,
                role: Some(Role::Sender),
                bytes: 11_000,
                duration_s: 10.0,
                tcp: Some(TcpInfo { total_retrans: 5, ..Default::default() }),
                cc: Some("bbr".into()),
                ..Default::default()
            }],
            cpu: CpuUsage { user_s: 1.0, system_s: 1.0, wall_s: 10.0 },
            ..Default::default()
        };
        let base = [Baseline { sent: 1000, received: 0, retransmits: 3 }];
        let r = Results::from_report(&spec, End::Server, &server, &base, Some("served by wanperf".into()));
        assert_eq!(r.streams[0].id, 1);
        assert_eq!(r.streams[0].bytes, 10_000);
        assert_eq!(r.streams[0].retransmits, 2);
        assert_eq!(r.streams[0].end_time, Some(8.0));
        assert_eq!(r.sender_has_retransmits, 1);
        assert!((r.cpu_util_total - 20.0).abs() < 1e-9);
        assert_eq!(r.congestion_used.as_deref(), Some("bbr"));
        // What a client makes of it: the measured part, timed from the test's start.
        let wire = crate::wire::json_frame(&r);
        let back: Results = crate::wire::parse_json(&wire[4..]).unwrap();
        let rep = back.to_report(&spec, End::Server).unwrap();
        assert_eq!(rep.streams[0].bytes, 10_000);
        assert_eq!(rep.streams[0].retransmits, Some(2));
        assert!((rep.streams[0].duration_s - 10.0).abs() < 1e-9);
        assert_eq!(rep.streams[0].cc.as_deref(), Some("bbr"));
    }

    #[test]
    fn version_comes_from_the_servers_json_output() {
        let r = Results {
            server_output_json: Some(serde_json::json!({"start": {"version": "iperf 3.12", "system_info": "Linux x"}})),
            ..Default::default()
        };
        assert_eq!(r.server_version().as_deref(), Some("iperf 3.12"));
        assert_eq!(r.server_system().as_deref(), Some("Linux x"));
    }
}
