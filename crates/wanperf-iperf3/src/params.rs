//! The parameter object a client sends after `ParamExchange`, and its mapping to wanperf's
//! [`TestSpec`] in both directions.

use crate::errors;
use serde::{Deserialize, Serialize};
use thiserror::Error;
use wanperf_proto::msg::{Direction, TestSpec, Transport};

/// iperf3's longest test (and its `time` limit), seconds.
pub const MAX_TIME_S: u64 = 86_400;
/// iperf3's longest `--omit`, seconds.
pub const MAX_OMIT_S: u64 = 600;
/// iperf3's default TCP block (the length of each write).
pub const DEFAULT_TCP_LEN: u64 = 128 * 1024;

fn is_false(b: &bool) -> bool {
    !*b
}

/// The client's parameters (the fields wanperf reads or writes; others are ignored).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Params {
    /// TCP test.
    #[serde(default, skip_serializing_if = "is_false")]
    pub tcp: bool,
    /// UDP test.
    #[serde(default, skip_serializing_if = "is_false")]
    pub udp: bool,
    /// SCTP test (not supported by wanperf).
    #[serde(default, skip_serializing_if = "is_false")]
    pub sctp: bool,
    /// Seconds left out at the start, whole.
    #[serde(default)]
    pub omit: u64,
    /// Seconds after the omitted ones (0 with -n or -k), whole.
    #[serde(default)]
    pub time: u64,
    /// Bytes to send, all streams together (0: by time).
    #[serde(default)]
    pub num: u64,
    /// Blocks to send (0: by time or bytes).
    #[serde(default)]
    pub blockcount: u64,
    /// TCP maximum segment size.
    #[serde(default, rename = "MSS", skip_serializing_if = "Option::is_none")]
    pub mss: Option<u64>,
    /// TCP_NODELAY.
    #[serde(default, skip_serializing_if = "is_false")]
    pub nodelay: bool,
    /// Streams per direction.
    #[serde(default = "one")]
    pub parallel: u32,
    /// The server sends.
    #[serde(default, skip_serializing_if = "is_false")]
    pub reverse: bool,
    /// Both directions.
    #[serde(default, skip_serializing_if = "is_false")]
    pub bidirectional: bool,
    /// Socket buffer size, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<u64>,
    /// Block length (TCP write size, UDP datagram payload), bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub len: Option<u64>,
    /// Rate per stream, bit/s (UDP pacing; TCP pacing when set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<u64>,
    /// IP TOS byte.
    #[serde(default, rename = "TOS", skip_serializing_if = "Option::is_none")]
    pub tos: Option<u32>,
    /// Congestion control to use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion: Option<String>,
    /// Ask the server for its own output in the results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub get_server_output: Option<u32>,
    /// 64-bit UDP packet counters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_counters_64bit: Option<u32>,
    /// The server's sends use zero copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zerocopy: Option<u32>,
    /// RSA-encrypted credentials (see [`crate::auth`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authtoken: Option<String>,
    /// Client software version (3.1 and later send it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_version: Option<String>,
}

fn one() -> u32 {
    1
}

/// Why a test cannot be expressed in iperf3's parameters, or parameters are refused.
#[derive(Debug, Error, PartialEq)]
pub enum ParamsError {
    /// iperf3 counts time in whole seconds.
    #[error("{what} must be whole seconds with --iperf3 (iperf3 servers take integers), got {secs} s")]
    WholeSeconds {
        /// Which option.
        what: &'static str,
        /// Value given.
        secs: f64,
    },
    /// A value outside iperf3's range.
    #[error("{0}")]
    Range(String),
    /// SCTP or another protocol wanperf does not run.
    #[error("iperf3 clients asked for a protocol wanperf does not run (only TCP and UDP)")]
    Protocol,
    /// The test is valid for iperf3 but not for wanperf.
    #[error("{0}")]
    Spec(String),
}

impl ParamsError {
    /// The iperf3 error code a server sends for it.
    pub fn code(&self) -> i32 {
        match self {
            ParamsError::Protocol => 131,
            _ => errors::RECV_PARAMS,
        }
    }
}

fn whole(what: &'static str, secs: f64) -> Result<u64, ParamsError> {
    if secs.fract().abs() > 1e-9 || secs < 0.0 {
        return Err(ParamsError::WholeSeconds { what, secs });
    }
    Ok(secs.round() as u64)
}

impl Params {
    /// The parameters for `spec`, as wanperf's client sends them. Only what changes the far
    /// end's behaviour is sent: -Z and the reporting interval stay local.
    pub fn from_spec(spec: &TestSpec, client_version: &str) -> Result<Params, ParamsError> {
        let omit = whole("--omit", spec.omit_s)?;
        let time = match spec.duration_s {
            Some(d) => whole("-t", d)?.saturating_sub(omit),
            None => 0,
        };
        if spec.duration_s.is_some() && time == 0 {
            return Err(ParamsError::Range("with --iperf3 the test must last at least 1 s after --omit".into()));
        }
        if time > MAX_TIME_S || omit > MAX_OMIT_S {
            return Err(ParamsError::Range(format!(
                "iperf3 servers take at most {MAX_TIME_S} s of test and {MAX_OMIT_S} s of --omit"
            )));
        }
        if spec.streams > crate::wire::MAX_STREAMS {
            return Err(ParamsError::Range(format!(
                "iperf3 servers take at most {} streams",
                crate::wire::MAX_STREAMS
            )));
        }
        let udp = spec.transport == Transport::Udp;
        Ok(Params {
            tcp: !udp,
            udp,
            omit,
            time,
            num: spec.bytes.unwrap_or(0),
            parallel: spec.streams,
            reverse: spec.direction == Direction::Down,
            bidirectional: spec.direction == Direction::Bidir,
            window: spec.window,
            len: Some(if spec.block_size == 0 { DEFAULT_TCP_LEN } else { u64::from(spec.block_size) }),
            bandwidth: spec.per_stream_rate(),
            tos: spec.dscp.map(|d| u32::from(d) << 2),
            congestion: spec.cc.clone(),
            get_server_output: Some(1),
            udp_counters_64bit: udp.then_some(1),
            client_version: Some(client_version.to_string()),
            ..Params::default()
        })
    }

    /// The test a client's parameters ask for, for wanperf's server. `interval_s` is the
    /// server's own sampling interval. The spec is checked on wanperf's terms (the server's
    /// limits come on top).
    pub fn to_spec(&self, interval_s: f64) -> Result<TestSpec, ParamsError> {
        if self.sctp || (self.tcp && self.udp) {
            return Err(ParamsError::Protocol);
        }
        if self.parallel == 0 || self.parallel > crate::wire::MAX_STREAMS {
            return Err(ParamsError::Range(format!("{} parallel streams (1 to 128 allowed)", self.parallel)));
        }
        if self.time > MAX_TIME_S || self.omit > MAX_OMIT_S {
            return Err(ParamsError::Range(format!("time {} s with omit {} s is out of range", self.time, self.omit)));
        }
        let transport = if self.udp { Transport::Udp } else { Transport::Tcp };
        let len = self.len.unwrap_or(if self.udp { 1448 } else { DEFAULT_TCP_LEN });
        let block = u32::try_from(len).map_err(|_| ParamsError::Range(format!("block length {len} B")))?;
        let bytes = if self.num > 0 {
            Some(self.num)
        } else if self.blockcount > 0 {
            Some(self.blockcount.saturating_mul(len.max(1)))
        } else {
            None
        };
        if bytes.is_none() && self.time == 0 {
            return Err(ParamsError::Range("an unlimited test (-t 0) is not served; give a duration".into()));
        }
        let streams = self.parallel;
        let rate_bps = match self.bandwidth {
            Some(0) | None if self.udp => Some(1_000_000 * u64::from(streams)),
            Some(0) | None => None,
            Some(b) => Some(b.saturating_mul(u64::from(streams))),
        };
        let spec = TestSpec {
            transport,
            direction: Direction::from_flags(self.reverse, self.bidirectional),
            streams,
            duration_s: bytes.is_none().then_some((self.time + self.omit) as f64),
            bytes,
            interval_s,
            omit_s: self.omit as f64,
            block_size: block,
            window: self.window.filter(|w| *w > 0),
            cc: self.congestion.clone().filter(|c| !c.is_empty()),
            dscp: self.tos.map(|t| ((t >> 2) & 63) as u8).filter(|d| *d > 0),
            rate_bps,
            zerocopy: !self.udp && self.zerocopy.unwrap_or(0) != 0,
            accept_capped_window: true,
            copy: None,
            mptcp: false,
            quic_cert: None,
            quic_connections: None,
        };
        spec.validate().map_err(|e| ParamsError::Spec(e.to_string()))?;
        Ok(spec)
    }

    /// Whether UDP packet counters are 64 bits wide.
    pub fn counters64(&self) -> bool {
        self.udp_counters_64bit.unwrap_or(0) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wanperf_test_becomes_iperf3_parameters() {
        let mut spec = TestSpec::tcp(4, 12.0);
        spec.omit_s = 2.0;
        spec.direction = Direction::Down;
        spec.window = Some(262_144);
        spec.cc = Some("reno".into());
        spec.dscp = Some(46);
        let p = Params::from_spec(&spec, "wanperf 0.1.0").unwrap();
        assert!(p.tcp && !p.udp && p.reverse && !p.bidirectional);
        assert_eq!((p.time, p.omit, p.num, p.parallel), (10, 2, 0, 4));
        assert_eq!(p.len, Some(DEFAULT_TCP_LEN));
        assert_eq!(p.tos, Some(184));
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["congestion"], "reno");
        assert_eq!(v["window"], 262_144);
        assert!(v.get("udp").is_none() && v.get("MSS").is_none() && v.get("authtoken").is_none());
        // And back: the server reads the same test.
        let back = p.to_spec(1.0).unwrap();
        assert_eq!(back.duration_s, Some(12.0));
        assert_eq!(back.omit_s, 2.0);
        assert_eq!(back.direction, Direction::Down);
        assert_eq!(back.dscp, Some(46));
        assert_eq!(back.block_size, DEFAULT_TCP_LEN as u32);
    }

    #[test]
    fn udp_rates_are_per_stream_on_the_wire() {
        let mut spec = TestSpec::tcp(2, 5.0);
        spec.transport = Transport::Udp;
        spec.rate_bps = Some(100_000_000);
        spec.block_size = 1400;
        let p = Params::from_spec(&spec, "x").unwrap();
        assert_eq!(p.bandwidth, Some(50_000_000));
        assert!(p.counters64());
        let back = p.to_spec(1.0).unwrap();
        assert_eq!(back.rate_bps, Some(100_000_000));
        assert_eq!(back.block_size, 1400);
    }

    #[test]
    fn iperf3s_own_parameters_parse() {
        // As iperf3 3.12 sends them for `iperf3 -c X -u -b 10M -P 2 --bidir -t 3`.
        let text = br#"{"udp":true,"omit":0,"time":3,"num":0,"blockcount":0,"parallel":2,"bidirectional":true,"len":1448,"bandwidth":10000000,"pacing_timer":1000,"client_version":"3.12"}"#;
        let p: Params = crate::wire::parse_json(text).unwrap();
        let s = p.to_spec(1.0).unwrap();
        assert_eq!(s.transport, Transport::Udp);
        assert_eq!(s.direction, Direction::Bidir);
        assert_eq!(s.connections(), 4);
        assert_eq!(s.rate_bps, Some(20_000_000));
        assert_eq!(s.duration_s, Some(3.0));
        assert!(!p.counters64());
    }

    #[test]
    fn bytes_and_blocks_end_conditions() {
        let p = Params { tcp: true, num: 1 << 20, parallel: 1, ..Params::default() };
        let s = p.to_spec(1.0).unwrap();
        assert_eq!((s.bytes, s.duration_s), (Some(1 << 20), None));
        let p = Params { tcp: true, blockcount: 10, len: Some(1000), parallel: 1, ..Params::default() };
        assert_eq!(p.to_spec(1.0).unwrap().bytes, Some(10_000));
        let mut spec = TestSpec::tcp(1, 1.0);
        spec.duration_s = None;
        spec.bytes = Some(5000);
        let p = Params::from_spec(&spec, "x").unwrap();
        assert_eq!((p.time, p.num), (0, 5000));
    }

    #[test]
    fn bad_parameters_are_refused_with_a_code() {
        let unlimited = Params { tcp: true, parallel: 1, ..Params::default() };
        assert!(matches!(unlimited.to_spec(1.0), Err(ParamsError::Range(_))));
        let sctp = Params { sctp: true, time: 1, parallel: 1, ..Params::default() };
        assert_eq!(sctp.to_spec(1.0).unwrap_err().code(), 131);
        let many = Params { tcp: true, time: 1, parallel: 500, ..Params::default() };
        assert_eq!(many.to_spec(1.0).unwrap_err().code(), errors::RECV_PARAMS);
        let mut spec = TestSpec::tcp(1, 2.5);
        assert!(matches!(Params::from_spec(&spec, "x"), Err(ParamsError::WholeSeconds { what: "-t", .. })));
        spec.duration_s = Some(2.0);
        spec.omit_s = 0.5;
        assert!(matches!(Params::from_spec(&spec, "x"), Err(ParamsError::WholeSeconds { what: "--omit", .. })));
    }
}
