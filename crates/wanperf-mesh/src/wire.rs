//! Agent ↔ central messages (serde types) and the batch signature.
//!
//! An agent posts a [`Batch`] of results as JSON; the central answers with an [`Ack`]. Results
//! carry an agent-local `seq` that strictly increases and is never reused, so a batch sent
//! twice (a lost answer, a retry) is stored once: the central counts such results as
//! duplicates, and the agent forgets everything up to [`Ack::upto`].
//!
//! **Signature.** The agent signs [`signing_message`]`(agent, time, body)` — the exact bytes
//! of the body it posts, its name and the Unix time in whole seconds — with its Ed25519 key
//! (`wanperf_proto::auth::PrivateKey::sign_message`), and sends the agent, time and signature alongside the body (the HTTP
//! side chooses the headers). The central looks up the host's `key` in the mesh and accepts
//! the batch only if the time is within ±[`MAX_SKEW_S`] of its clock and the signature
//! verifies ([`verify_batch`]). The message begins with its own context line, so a batch
//! signature is never valid as a `wanperf serve` handshake signature or the reverse.
//!
//! ```
//! use wanperf_mesh::wire::{signing_message, verify_batch};
//! use wanperf_proto::auth::PrivateKey;
//! let key = PrivateKey::from_seed([5; 32], "cern1");
//! let body = br#"{"agent":"cern1","results":[]}"#;
//! let sig = key.sign_message(&signing_message("cern1", 1_700_000_000, body));
//! assert!(verify_batch(&key.public(), "cern1", 1_700_000_000, body, &sig, 1_700_000_100.0).is_ok());
//! assert!(verify_batch(&key.public(), "cern1", 1_700_000_000, body, &sig, 1_700_000_400.0).is_err());
//! ```

use crate::config::{Mesh, TestKind};
use crate::summary::LatencySummary;
use serde::{Deserialize, Serialize};
use thiserror::Error;
use wanperf_proto::auth::PublicKey;

/// The first line of every signed batch message.
pub const CONTEXT: &[u8] = b"wanperf-mesh/1\n";
/// Most seconds a batch's signed time may differ from the central's clock.
pub const MAX_SKEW_S: i64 = 300;

/// Results from one agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Batch {
    /// The agent's host name in the mesh.
    pub agent: String,
    /// Its results, in `seq` order.
    pub results: Vec<MeshResult>,
    /// The state of the agent's clock when it sent the batch (for one-way delays).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<Clock>,
}

/// What an agent knows of its clock's error (the kernel's NTP state, or what its operator
/// stated): one-way delays between two hosts are good to the sum of their errors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Clock {
    /// Whether the clock is synchronized (the kernel's NTP state, or stated).
    pub synced: bool,
    /// Its estimated error, ms (`None`: unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_ms: Option<f64>,
    /// Where the figure comes from: `kernel` (adjtimex) or `stated` (the agent's option).
    pub source: String,
}

impl Clock {
    /// The error of a one-way delay measured between clocks `a` and `b`, ms: the sum of
    /// their errors when both are synchronized and state one.
    pub fn pair_error_ms(a: Option<&Clock>, b: Option<&Clock>) -> Option<f64> {
        match (a, b) {
            (Some(a), Some(b)) if a.synced && b.synced => Some(a.error_ms? + b.error_ms?),
            _ => None,
        }
    }
}

/// One result: a latency summary period, a throughput run or a trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeshResult {
    /// Agent-local sequence number: strictly increasing, never reused.
    pub seq: u64,
    /// The test's name in the mesh.
    pub test: String,
    /// The test's kind.
    pub kind: ResultKind,
    /// Source host (the agent).
    pub src: String,
    /// Destination host.
    pub dst: String,
    /// Start, Unix seconds (for latency, the summary period's start).
    pub start: f64,
    /// End, Unix seconds.
    pub end: f64,
    /// How the run went.
    pub status: RunStatus,
    /// Why it did not go well (failed, refused, missed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The summary of a latency period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencySummary>,
    /// The outcome of a throughput run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<ThroughputResult>,
    /// The outcome of a trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceResult>,
    /// The outcome of a capacity run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityResult>,
}

/// The outcome of a capacity run (`wanperf capacity`, source → destination).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityResult {
    /// The narrow link's capacity, bit/s.
    pub bps: f64,
    /// Its uncertainty: the 10th and 90th percentiles of the estimates in the mode, bit/s.
    pub low_bps: f64,
    /// See `low_bps`.
    pub high_bps: f64,
    /// The available bandwidth, bit/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_bps: Option<f64>,
    /// The hop the bottleneck link leads into (TTL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bottleneck_ttl: Option<u8>,
    /// That hop's router (or the destination).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bottleneck_address: Option<String>,
    /// Bytes the run sent.
    pub bytes: u64,
    /// Seconds it took.
    pub seconds: f64,
}

/// The outcome of a trace: the hops in TTL order, as `wanperf trace` reports them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceResult {
    /// Hops in TTL order (a TTL nobody answered at has no address).
    pub hops: Vec<TraceHop>,
    /// Whether the destination answered.
    pub reached: bool,
    /// The smallest MTU a router reported, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_mtu: Option<u32>,
    /// Rounds completed.
    pub rounds: u32,
    /// The destination's loss split by direction, from its agent's counts of the probes it
    /// had (UDP traces go to the agent's echo and ask for them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_way: Option<OneWayLoss>,
}

pub use wanperf_proto::probe::OneWayLoss;

/// One hop of a trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceHop {
    /// TTL.
    pub ttl: u8,
    /// Addresses that answered, most frequent first (several: a load-balanced hop).
    pub addrs: Vec<String>,
    /// Share of probes unanswered, %.
    pub loss_pct: f64,
    /// Loss the path has up to this hop, % (the rest is the router not answering).
    pub path_loss_pct: f64,
    /// Median RTT of the answered probes, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_ms: Option<f64>,
    /// `rate-limited`, `loss starts here` (with `, on the way there` or `, on the way back`
    /// where the server's split names the direction), or nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl TraceResult {
    /// The route: each hop's addresses, up to the destination (or the last hop probed).
    pub fn route(&self) -> Vec<&[String]> {
        self.hops.iter().map(|h| h.addrs.as_slice()).collect()
    }
}

/// A result's kind (as the test's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResultKind {
    /// A latency summary period.
    Latency,
    /// A throughput run.
    Throughput,
    /// A trace.
    Trace,
    /// A capacity run.
    Capacity,
}

/// How a run went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Measured.
    Ok,
    /// Tried and failed (no connection, an error midway).
    Failed,
    /// The destination refused it (busy, not authorized).
    Refused,
    /// Not run: the agent was down or late for its slot.
    Missed,
}

/// The outcome of a throughput run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThroughputResult {
    /// Goodput, bit/s.
    pub bps: f64,
    /// Streams used.
    pub streams: u32,
    /// Socket buffer asked for, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<u64>,
    /// TCP retransmissions (sender).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    /// Smoothed RTT during the run, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_ms: Option<f64>,
    /// What limited the run, in words (wanperf's verdict).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
}

/// The central's answer to a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ack {
    /// Results stored now.
    pub accepted: u64,
    /// Results already stored before (same agent and seq).
    pub duplicates: u64,
    /// Every result of this agent with `seq ≤ upto` is stored: the agent may forget them.
    pub upto: u64,
}

impl MeshResult {
    /// Checks a result against the mesh as the central receives it from `agent`: the source is
    /// the agent, the test exists with this kind, the pair is one of the test's, the times are
    /// finite and in order, and an `ok` latency or throughput result carries its payload.
    pub fn validate(&self, mesh: &Mesh, agent: &str) -> Result<(), InvalidResult> {
        let seq = self.seq;
        if self.src != agent {
            return Err(InvalidResult::NotFromAgent { seq, src: self.src.clone(), agent: agent.to_string() });
        }
        let test = mesh.test(&self.test).ok_or_else(|| InvalidResult::NoTest { seq, test: self.test.clone() })?;
        let kind = match test.kind {
            TestKind::Latency { .. } => ResultKind::Latency,
            TestKind::Throughput { .. } => ResultKind::Throughput,
            TestKind::Trace { .. } => ResultKind::Trace,
            TestKind::Capacity { .. } => ResultKind::Capacity,
        };
        let (test_name, kind_name) = (self.test.clone(), test.kind.name());
        if kind != self.kind {
            return Err(InvalidResult::WrongKind { seq, test: test_name, kind: kind_name });
        }
        if !mesh.group(&test.group).is_some_and(|g| g.contains_pair(&self.src, &self.dst)) {
            let (src, dst) = (self.src.clone(), self.dst.clone());
            return Err(InvalidResult::NotAPair { seq, src, dst, test: test_name });
        }
        if !(self.start.is_finite() && self.end.is_finite() && self.start <= self.end) {
            return Err(InvalidResult::Times { seq });
        }
        if self.status == RunStatus::Ok {
            let missing = match self.kind {
                ResultKind::Latency => self.latency.is_none(),
                ResultKind::Throughput => self.throughput.is_none(),
                ResultKind::Trace => self.trace.is_none(),
                ResultKind::Capacity => self.capacity.is_none(),
            };
            if missing {
                return Err(InvalidResult::NoPayload { seq, kind: kind_name });
            }
        }
        Ok(())
    }
}

/// Why the central refuses a result an agent sent.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum InvalidResult {
    /// Another host's result.
    #[error("result {seq} is from {src}, not from the agent {agent}")]
    NotFromAgent {
        /// The result's number.
        seq: u64,
        /// Its source.
        src: String,
        /// The agent that sent it.
        agent: String,
    },
    /// The mesh has no such test.
    #[error("result {seq}: no test `{test}`")]
    NoTest {
        /// The result's number.
        seq: u64,
        /// The test it names.
        test: String,
    },
    /// The test is of another kind.
    #[error("result {seq}: test `{test}` is a {kind} test")]
    WrongKind {
        /// The result's number.
        seq: u64,
        /// The test.
        test: String,
        /// The test's kind.
        kind: &'static str,
    },
    /// The pair is not one of the test's.
    #[error("result {seq}: {src}→{dst} is not a pair of test `{test}`")]
    NotAPair {
        /// The result's number.
        seq: u64,
        /// Source.
        src: String,
        /// Destination.
        dst: String,
        /// The test.
        test: String,
    },
    /// Start and end are not times in order.
    #[error("result {seq}: start and end must be times with start ≤ end")]
    Times {
        /// The result's number.
        seq: u64,
    },
    /// An ok result without its measurement.
    #[error("result {seq}: an ok {kind} result without its payload")]
    NoPayload {
        /// The result's number.
        seq: u64,
        /// The test's kind.
        kind: &'static str,
    },
}

/// Why a batch's signature was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    /// The signed time is too far from the central's clock.
    #[error(
        "the batch was signed at {time}, {skew} s from this clock (at most {MAX_SKEW_S} s): check the agent's clock"
    )]
    Skew {
        /// The signed time.
        time: i64,
        /// Its distance from the clock, seconds.
        skew: i64,
    },
    /// The signature is malformed or does not verify.
    #[error("the batch signature does not verify (wrong key, or an altered batch)")]
    BadSignature,
}

/// What an agent signs: [`CONTEXT`], then `agent`, a newline, `time` in decimal, a newline, and
/// the body's bytes.
pub fn signing_message(agent: &str, time: i64, body: &[u8]) -> Vec<u8> {
    let time = time.to_string();
    let mut m = Vec::with_capacity(CONTEXT.len() + agent.len() + time.len() + 2 + body.len());
    m.extend_from_slice(CONTEXT);
    m.extend_from_slice(agent.as_bytes());
    m.push(b'\n');
    m.extend_from_slice(time.as_bytes());
    m.push(b'\n');
    m.extend_from_slice(body);
    m
}

/// The central's check of a posted batch: `time` within ±[`MAX_SKEW_S`] of `now`, and
/// `signature` (base64, from `PrivateKey::sign_message`) valid for
/// [`signing_message`]`(agent, time, body)` under the host's `key` (strict Ed25519
/// verification, as `wanperf serve` checks handshakes).
pub fn verify_batch(
    key: &PublicKey,
    agent: &str,
    time: i64,
    body: &[u8],
    signature: &str,
    now: f64,
) -> Result<(), WireError> {
    let skew = time as f64 - now;
    if skew.is_nan() || skew.abs() > MAX_SKEW_S as f64 {
        return Err(WireError::Skew { time, skew: skew.round() as i64 });
    }
    key.verify_message(&signing_message(agent, time, body), signature.trim()).map_err(|_| WireError::BadSignature)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;
    use crate::summary::{summarize, Probe};
    use wanperf_proto::auth::PrivateKey;

    fn result(seq: u64) -> MeshResult {
        let probes: Vec<Probe> = (0..10)
            .map(|i| Probe { seq: i, sent: 60.0 + i as f64, rtt_ms: Some(150.0), owd_fwd_ms: None, owd_rev_ms: None })
            .collect();
        MeshResult {
            seq,
            test: "rtt".into(),
            kind: ResultKind::Latency,
            src: "slac1".into(),
            dst: "cern1".into(),
            start: 60.0,
            end: 120.0,
            status: RunStatus::Ok,
            reason: None,
            latency: Some(summarize(60.0, 120.0, &probes, 0)),
            throughput: None,
            trace: None,
            capacity: None,
        }
    }

    #[test]
    fn messages_round_trip_in_lowercase() {
        let mut t = result(2);
        t.test = "bulk".into();
        t.kind = ResultKind::Throughput;
        t.status = RunStatus::Refused;
        t.reason = Some("busy".into());
        t.latency = None;
        t.throughput = Some(ThroughputResult {
            bps: 9.4e8,
            streams: 4,
            window: Some(1 << 24),
            retransmits: Some(12),
            rtt_ms: Some(150.2),
            verdict: None,
        });
        let b = Batch { agent: "slac1".into(), results: vec![result(1), t], clock: None };
        let json = serde_json::to_string(&b).unwrap();
        assert!(json.contains("\"kind\":\"throughput\"") && json.contains("\"status\":\"refused\""), "{json}");
        assert!(json.contains("\"kind\":\"latency\"") && json.contains("\"status\":\"ok\""), "{json}");
        assert!(!json.contains("verdict") && !json.contains("\"reason\":null"), "{json}");
        assert_eq!(serde_json::from_str::<Batch>(&json).unwrap(), b);
        let ack = Ack { accepted: 1, duplicates: 1, upto: 2 };
        assert_eq!(serde_json::to_string(&ack).unwrap(), r#"{"accepted":1,"duplicates":1,"upto":2}"#);
        assert_eq!(serde_json::to_string(&RunStatus::Missed).unwrap(), "\"missed\"");
        assert_eq!(serde_json::to_string(&ResultKind::Trace).unwrap(), "\"trace\"");
        // Missing optional fields read as None.
        let min = r#"{"seq":3,"test":"route","kind":"trace","src":"a","dst":"b","start":1,"end":2,"status":"failed"}"#;
        let r: MeshResult = serde_json::from_str(min).unwrap();
        assert_eq!((r.reason, r.latency, r.throughput, r.trace), (None, None, None, None));
        // A trace and the clock round trip too; a batch without `clock` reads as None.
        let mut tr = result(3);
        tr.kind = ResultKind::Trace;
        tr.latency = None;
        tr.trace = Some(TraceResult {
            hops: vec![
                TraceHop {
                    ttl: 1,
                    addrs: vec!["198.18.0.1".into()],
                    loss_pct: 0.0,
                    path_loss_pct: 0.0,
                    rtt_ms: Some(1.5),
                    note: None,
                },
                TraceHop {
                    ttl: 2,
                    addrs: vec![],
                    loss_pct: 100.0,
                    path_loss_pct: 0.0,
                    rtt_ms: None,
                    note: Some("rate-limited".into()),
                },
            ],
            reached: false,
            path_mtu: Some(1400),
            rounds: 3,
            one_way: Some(OneWayLoss {
                sent: 3,
                arrived: 2,
                answered: 2,
                forward_loss_pct: 100.0 / 3.0,
                reverse_loss_pct: 0.0,
            }),
        });
        let clock = Clock { synced: true, error_ms: Some(0.5), source: "kernel".into() };
        let b = Batch { agent: "slac1".into(), results: vec![tr], clock: Some(clock.clone()) };
        assert_eq!(serde_json::from_str::<Batch>(&serde_json::to_string(&b).unwrap()).unwrap(), b);
        let old: Batch = serde_json::from_str(r#"{"agent":"a","results":[]}"#).unwrap();
        assert_eq!(old.clock, None);
        // One-way delays are good to the sum of both clocks' errors, when both are synced.
        let unsynced = Clock { synced: false, ..clock.clone() };
        let unknown = Clock { error_ms: None, ..clock.clone() };
        assert_eq!(Clock::pair_error_ms(Some(&clock), Some(&clock)), Some(1.0));
        assert_eq!(Clock::pair_error_ms(Some(&clock), Some(&unsynced)), None);
        assert_eq!(Clock::pair_error_ms(Some(&unknown), Some(&clock)), None);
        assert_eq!(Clock::pair_error_ms(None, Some(&clock)), None);
    }

    #[test]
    fn the_signed_message_is_exact() {
        assert_eq!(signing_message("cern1", 1_700_000_000, b"{}"), b"wanperf-mesh/1\ncern1\n1700000000\n{}".to_vec());
        assert_eq!(signing_message("a", -5, b""), b"wanperf-mesh/1\na\n-5\n".to_vec());
    }

    #[test]
    fn signatures_verify_only_for_the_same_key_agent_time_and_body() {
        let key = PrivateKey::from_seed([3; 32], "slac1");
        let other = PrivateKey::from_seed([4; 32], "cern1");
        let body = serde_json::to_vec(&Batch { agent: "slac1".into(), results: vec![result(1)], clock: None }).unwrap();
        let now = 1_700_000_000.0;
        let t = now as i64 - 100;
        let sig = key.sign_message(&signing_message("slac1", t, &body));
        let pk = key.public();
        assert_eq!(verify_batch(&pk, "slac1", t, &body, &sig, now), Ok(()));
        // Through the text form the mesh file holds.
        let from_line = PublicKey::parse(&pk.to_line()).unwrap();
        assert_eq!(verify_batch(&from_line, "slac1", t, &body, &sig, now), Ok(()));
        let mut altered = body.clone();
        altered[10] ^= 1;
        assert_eq!(verify_batch(&pk, "slac1", t, &altered, &sig, now), Err(WireError::BadSignature));
        assert_eq!(verify_batch(&pk, "cern1", t, &body, &sig, now), Err(WireError::BadSignature));
        assert_eq!(verify_batch(&pk, "slac1", t + 1, &body, &sig, now), Err(WireError::BadSignature));
        assert_eq!(verify_batch(&other.public(), "slac1", t, &body, &sig, now), Err(WireError::BadSignature));
        assert_eq!(verify_batch(&pk, "slac1", t, &body, "not base64!", now), Err(WireError::BadSignature));
        assert_eq!(verify_batch(&pk, "slac1", t, &body, "AAAA", now), Err(WireError::BadSignature));
        // Clock skew, both ways; exactly 300 s is fine.
        let at = |time: i64| key.sign_message(&signing_message("slac1", time, &body));
        let now_i = now as i64;
        assert_eq!(verify_batch(&pk, "slac1", now_i - 300, &body, &at(now_i - 300), now), Ok(()));
        assert_eq!(
            verify_batch(&pk, "slac1", now_i - 301, &body, &at(now_i - 301), now),
            Err(WireError::Skew { time: now_i - 301, skew: -301 })
        );
        assert!(matches!(
            verify_batch(&pk, "slac1", now_i + 301, &body, &at(now_i + 301), now),
            Err(WireError::Skew { .. })
        ));
        assert!(matches!(verify_batch(&pk, "slac1", t, &body, &sig, f64::NAN), Err(WireError::Skew { .. })));
        // Deterministic (Ed25519).
        assert_eq!(sig, key.sign_message(&signing_message("slac1", t, &body)));
    }

    #[test]
    fn results_are_checked_against_the_mesh() {
        let mesh = parse(&crate::config::tests::example()).unwrap();
        let ok = result(1);
        assert_eq!(ok.validate(&mesh, "slac1"), Ok(()));
        assert!(ok.validate(&mesh, "cern1").unwrap_err().to_string().contains("not from the agent"));
        let mut r = ok.clone();
        r.test = "nope".into();
        assert!(r.validate(&mesh, "slac1").unwrap_err().to_string().contains("no test"));
        let mut r = ok.clone();
        r.kind = ResultKind::Trace;
        assert!(r.validate(&mesh, "slac1").unwrap_err().to_string().contains("is a latency test"));
        let mut r = ok.clone();
        r.dst = "cern2".into();
        assert!(r.validate(&mesh, "slac1").unwrap_err().to_string().contains("not a pair"));
        let mut r = ok.clone();
        r.end = 0.0;
        assert!(r.validate(&mesh, "slac1").is_err());
        let mut r = ok.clone();
        r.latency = None;
        assert!(r.validate(&mesh, "slac1").is_err());
        r.status = RunStatus::Failed;
        assert_eq!(r.validate(&mesh, "slac1"), Ok(()));
        // An ok trace needs its hops.
        let mut r = ok.clone();
        (r.test, r.kind, r.dst, r.latency) = ("route".into(), ResultKind::Trace, "cern2".into(), None);
        r.src = "slac1".into();
        assert!(r.validate(&mesh, "slac1").unwrap_err().to_string().contains("without its payload"), "{r:?}");
        r.trace = Some(TraceResult { hops: vec![], reached: true, path_mtu: None, rounds: 1, one_way: None });
        assert_eq!(r.validate(&mesh, "slac1"), Ok(()));
    }
}
