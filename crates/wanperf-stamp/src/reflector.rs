//! What a Session-Reflector answers (RFC 8762 §4.3, RFC 8972 §4), with the time passed in.
//!
//! The I/O shell reads a datagram with its kernel receive time, TTL and TOS, checks its
//! allow-list, reads the clock for the transmit time and calls [`Reflector::reflect`]; what
//! comes back is the packet to send and the TOS to send it with. Everything a stranger can
//! make it keep is bounded: sessions (stateful mode) and per-source token buckets are tables
//! of at most [`Config::max_sessions`] and [`Config::max_sources`] entries.

use crate::packet::{Auth, Reflected, Test};
use crate::time::{ErrorEstimate, Format};
use crate::tlv::{method, sync, Tlv, Value, FLAG_U};
use serde::Serialize;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

/// How the reflector behaves.
#[derive(Debug, Clone)]
pub struct Config {
    /// Unauthenticated or authenticated (the senders must use the same).
    pub auth: Auth,
    /// Stateful (RFC 8972 §4: the reflector numbers each session's packets itself, so the
    /// sender tells forward from reverse loss) or stateless (the sender's number is echoed).
    pub stateful: bool,
    /// Timestamps' format.
    pub format: Format,
    /// This host's clock error (its S flag and estimate).
    pub error: ErrorEstimate,
    /// Packets a second one source address may have reflected (its bucket refills at this
    /// rate).
    pub rate_pps: f64,
    /// Packets one source may have reflected at once (the bucket's depth).
    pub burst: f64,
    /// Most sessions kept; past it, new senders are answered statelessly.
    pub max_sessions: usize,
    /// Most source buckets kept.
    pub max_sources: usize,
    /// A session or bucket unused for this long (ns) is forgotten.
    pub idle_ns: u64,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            auth: Auth::Open,
            stateful: true,
            format: Format::Ntp,
            error: ErrorEstimate::UNKNOWN,
            rate_pps: 10_000.0,
            burst: 1_000.0,
            max_sessions: 16_384,
            max_sources: 16_384,
            idle_ns: 300_000_000_000,
        }
    }
}

/// A datagram as it arrived.
#[derive(Debug, Clone, Copy)]
pub struct Arrival<'a> {
    /// Its sender.
    pub from: SocketAddr,
    /// Its octets.
    pub packet: &'a [u8],
    /// Kernel receive time, ns since the epoch.
    pub rx_ns: u64,
    /// TTL or hop limit on arrival.
    pub ttl: Option<u8>,
    /// TOS or traffic class on arrival (DSCP and ECN).
    pub tos: Option<u8>,
}

/// What to send back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The reflected packet.
    pub packet: Vec<u8>,
    /// TOS to send it with (a Class of Service TLV asks for one), if any.
    pub tos: Option<u8>,
}

/// What the reflector has done, for its log and its tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// Packets reflected.
    pub reflected: u64,
    /// Not test packets of this mode (too short).
    pub malformed: u64,
    /// Authenticated mode: HMAC did not match.
    pub bad_hmac: u64,
    /// Over their source's rate.
    pub limited: u64,
    /// Answered statelessly because the session table was full.
    pub table_full: u64,
    /// From senders the allow-list refuses (counted by the I/O shell, which checks it).
    pub not_allowed: u64,
}

#[derive(Debug, Clone, Copy)]
struct Session {
    received: u32,
    sent: u32,
    last_ns: u64,
}

/// A reflector's state.
#[derive(Debug)]
pub struct Reflector {
    cfg: Config,
    sessions: HashMap<(SocketAddr, u16), Session>,
    buckets: HashMap<IpAddr, (f64, u64)>,
    /// What it has done.
    pub counters: Counters,
}

impl Reflector {
    /// A reflector with no sessions.
    pub fn new(cfg: Config) -> Reflector {
        Reflector { cfg, sessions: HashMap::new(), buckets: HashMap::new(), counters: Counters::default() }
    }

    /// Sessions held.
    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }

    /// Whether `ip` may have one more packet reflected at `now_ns`.
    fn admit(&mut self, ip: IpAddr, now_ns: u64) -> bool {
        let (rate, burst, idle) = (self.cfg.rate_pps, self.cfg.burst, self.cfg.idle_ns);
        if !self.buckets.contains_key(&ip) && self.buckets.len() >= self.cfg.max_sources {
            self.buckets.retain(|_, (tokens, at)| {
                now_ns.saturating_sub(*at) < idle && *tokens + now_ns.saturating_sub(*at) as f64 * rate / 1e9 < burst
            });
            if self.buckets.len() >= self.cfg.max_sources {
                return false;
            }
        }
        let (tokens, at) = self.buckets.entry(ip).or_insert((burst, now_ns));
        *tokens = (*tokens + now_ns.saturating_sub(*at) as f64 * rate / 1e9).min(burst);
        *at = now_ns.max(*at);
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// The session of `key` at `now_ns`, made if there is room.
    fn session(&mut self, key: (SocketAddr, u16), now_ns: u64) -> Option<&mut Session> {
        if !self.sessions.contains_key(&key) && self.sessions.len() >= self.cfg.max_sessions {
            let idle = self.cfg.idle_ns;
            self.sessions.retain(|_, s| now_ns.saturating_sub(s.last_ns) < idle);
            if self.sessions.len() >= self.cfg.max_sessions {
                return None;
            }
        }
        let s = self.sessions.entry(key).or_insert(Session { received: 0, sent: 0, last_ns: now_ns });
        s.last_ns = now_ns;
        Some(s)
    }

    /// The answer to `a`, sent at `tx_ns` (ns since the epoch), or `None` when the datagram
    /// is dropped (not a test packet of this mode, a wrong HMAC, over its source's rate).
    pub fn reflect(&mut self, a: &Arrival<'_>, tx_ns: u64) -> Option<Answer> {
        let (test, parsed) = match Test::decode(a.packet, &self.cfg.auth) {
            Ok(x) => x,
            Err(crate::packet::PacketError::Hmac) => {
                self.counters.bad_hmac += 1;
                return None;
            }
            Err(_) => {
                self.counters.malformed += 1;
                return None;
            }
        };
        if !self.admit(a.from.ip(), a.rx_ns) {
            self.counters.limited += 1;
            return None;
        }
        let stateful = self.cfg.stateful;
        let (seq, counts) = if stateful {
            match self.session((a.from, test.ssid), a.rx_ns) {
                Some(s) => {
                    s.received = s.received.wrapping_add(1);
                    let seq = s.sent;
                    s.sent = s.sent.wrapping_add(1);
                    (seq, Some((s.received, s.sent)))
                }
                None => {
                    self.counters.table_full += 1;
                    (test.seq, None)
                }
            }
        } else {
            (test.seq, None)
        };
        let synced = self.cfg.error.synchronized;
        let mut tos = None;
        let tlvs: Vec<Tlv> = parsed
            .tlvs
            .into_iter()
            .map(|t| {
                let value = match t.value {
                    Value::TimestampInfo { .. } => {
                        let s = if synced { sync::NTP } else { sync::LOCAL };
                        Value::TimestampInfo {
                            sync_in: s,
                            method_in: method::SOFTWARE,
                            sync_out: s,
                            method_out: method::SOFTWARE,
                        }
                    }
                    Value::ClassOfService { dscp1, ecn1, .. } => {
                        tos = Some((dscp1 << 2) | ecn1);
                        let got = a.tos.unwrap_or(0);
                        Value::ClassOfService { dscp1, ecn1, dscp2: got >> 2, ecn2: got & 3, rp: 0 }
                    }
                    Value::DirectMeasurement { s_tx, .. } => {
                        let (r_rx, r_tx) = counts.unwrap_or((0, 0));
                        Value::DirectMeasurement { s_tx, r_rx, r_tx }
                    }
                    v => v,
                };
                let unknown = !crate::tlv::Tlv::known(t.kind);
                Tlv { flags: if unknown { t.flags | FLAG_U } else { t.flags }, kind: t.kind, value }
            })
            .collect();
        let r = Reflected {
            seq,
            timestamp: crate::time::to_wire(tx_ns, self.cfg.format),
            error: ErrorEstimate { ptp: self.cfg.format == Format::Ptp, ..self.cfg.error },
            ssid: test.ssid,
            receive_timestamp: crate::time::to_wire(a.rx_ns, self.cfg.format),
            sender_seq: test.seq,
            sender_timestamp: test.timestamp,
            sender_error: test.error,
            sender_ttl: a.ttl.unwrap_or(0),
        };
        let mut packet = Vec::with_capacity(a.packet.len().max(self.cfg.auth.base_len()));
        // As long as it came (RFC 8762 §4.3: symmetric sizes), or the base packet's length.
        r.encode(&mut packet, &self.cfg.auth, &tlvs, a.packet.len());
        self.counters.reflected += 1;
        Some(Answer { packet, tos })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::{from_wire, to_wire};

    const T0: u64 = 1_764_355_200_000_000_000;

    fn from(port: u16) -> SocketAddr {
        SocketAddr::from(([198, 18, 0, 1], port))
    }

    fn test_packet(seq: u32, auth: &Auth, tlvs: &[Tlv], len: usize) -> Vec<u8> {
        let mut b = Vec::new();
        Test { seq, timestamp: to_wire(T0 + u64::from(seq), Format::Ntp), error: ErrorEstimate::UNKNOWN, ssid: 4 }
            .encode(&mut b, auth, tlvs, len);
        b
    }

    fn arrive(b: &[u8], port: u16, rx_ns: u64) -> Arrival<'_> {
        Arrival { from: from(port), packet: b, rx_ns, ttl: Some(62), tos: Some(0xb8 | 1) }
    }

    #[test]
    fn a_stateful_reflector_numbers_each_session_itself() {
        let mut r = Reflector::new(Config::default());
        // The sender's probes 0, 2, 3 arrive (1 was lost on the way there).
        let mut seqs = vec![];
        for s in [0u32, 2, 3] {
            let b = test_packet(s, &Auth::Open, &[], 44);
            let a = r.reflect(&arrive(&b, 5000, T0 + 1_000), T0 + 2_000).unwrap();
            let (p, _) = Reflected::decode(&a.packet, &Auth::Open).unwrap();
            assert_eq!(p.sender_seq, s);
            assert_eq!(p.sender_ttl, 62);
            assert_eq!(from_wire(p.receive_timestamp, Format::Ntp), Some(T0 + 1_000));
            assert_eq!(from_wire(p.timestamp, Format::Ntp), Some(T0 + 2_000));
            assert_eq!(p.sender_timestamp, to_wire(T0 + u64::from(s), Format::Ntp));
            seqs.push(p.seq);
        }
        assert_eq!(seqs, [0, 1, 2]);
        // Another source port is another session.
        let b = test_packet(7, &Auth::Open, &[], 44);
        let a = r.reflect(&arrive(&b, 5001, T0), T0).unwrap();
        assert_eq!(Reflected::decode(&a.packet, &Auth::Open).unwrap().0.seq, 0);
        assert_eq!(r.sessions(), 2);
        // Stateless: the sender's number comes back.
        let mut r = Reflector::new(Config { stateful: false, ..Config::default() });
        let a = r.reflect(&arrive(&b, 5000, T0), T0).unwrap();
        assert_eq!(Reflected::decode(&a.packet, &Auth::Open).unwrap().0.seq, 7);
    }

    #[test]
    fn answers_are_as_long_as_the_test_packet_and_fill_the_tlvs() {
        let mut r = Reflector::new(Config::default());
        let tlvs = [
            Tlv::new(Value::ClassOfService { dscp1: 10, ecn1: 0, dscp2: 0, ecn2: 0, rp: 0 }),
            Tlv::new(Value::DirectMeasurement { s_tx: 1, r_rx: 0, r_tx: 0 }),
            Tlv::new(Value::TimestampInfo { sync_in: 0, method_in: 0, sync_out: 0, method_out: 0 }),
            Tlv { flags: 0, kind: 99, value: Value::Other(vec![5; 6]) },
        ];
        let b = test_packet(0, &Auth::Open, &tlvs, 300);
        let a = r.reflect(&arrive(&b, 1, T0), T0).unwrap();
        assert_eq!(a.packet.len(), 300);
        assert_eq!(a.tos, Some(10 << 2));
        let (_, p) = Reflected::decode(&a.packet, &Auth::Open).unwrap();
        assert_eq!(p.tlvs[0].value, Value::ClassOfService { dscp1: 10, ecn1: 0, dscp2: 46, ecn2: 1, rp: 0 });
        assert_eq!(p.tlvs[1].value, Value::DirectMeasurement { s_tx: 1, r_rx: 1, r_tx: 1 });
        assert!(matches!(p.tlvs[2].value, Value::TimestampInfo { method_in: method::SOFTWARE, .. }));
        // An unknown TLV comes back as it was, marked U.
        assert_eq!(p.tlvs[3].flags, FLAG_U);
        assert_eq!(p.tlvs[3].value, Value::Other(vec![5; 6]));
        // A 14-octet TWAMP-Light packet gets a whole 44-octet answer.
        let a = r.reflect(&arrive(&b[..14], 2, T0), T0).unwrap();
        assert_eq!(a.packet.len(), 44);
    }

    #[test]
    fn authenticated_mode_drops_what_the_key_did_not_sign() {
        let key = Auth::Hmac(b"0123456789abcdef".to_vec());
        let mut r = Reflector::new(Config { auth: key.clone(), ..Config::default() });
        let good = test_packet(1, &key, &[], 0);
        let a = r.reflect(&arrive(&good, 1, T0), T0).unwrap();
        assert_eq!(a.packet.len(), 112);
        assert!(Reflected::decode(&a.packet, &key).is_ok());
        let forged = test_packet(1, &Auth::Hmac(b"fedcba9876543210".to_vec()), &[], 0);
        assert_eq!(r.reflect(&arrive(&forged, 1, T0), T0), None);
        let open = test_packet(1, &Auth::Open, &[], 0);
        assert_eq!(r.reflect(&arrive(&open, 1, T0), T0), None);
        assert_eq!(r.counters.bad_hmac, 1);
        assert_eq!(r.counters.malformed, 1);
        assert_eq!(r.counters.reflected, 1);
    }

    #[test]
    fn one_source_is_held_to_its_rate_and_the_tables_stay_bounded() {
        let cfg = Config { rate_pps: 100.0, burst: 10.0, max_sessions: 4, max_sources: 4, ..Config::default() };
        let mut r = Reflector::new(cfg);
        let b = test_packet(0, &Auth::Open, &[], 44);
        // 100 packets in one instant: the bucket's 10.
        let n = (0..100).filter(|_| r.reflect(&arrive(&b, 1, T0), T0).is_some()).count();
        assert_eq!(n, 10);
        // A second later, 100 more tokens but a depth of 10.
        let n = (0..100).filter(|_| r.reflect(&arrive(&b, 1, T0 + 1_000_000_000), T0).is_some()).count();
        assert_eq!(n, 10);
        assert_eq!(r.counters.limited, 180);
        // Many sources and ports: the tables never pass their bounds.
        for i in 0..1000u16 {
            let a = Arrival {
                from: SocketAddr::from(([198, 18, (i >> 8) as u8, i as u8], i)),
                ..arrive(&b, 1, T0 + 2_000_000_000)
            };
            r.reflect(&a, T0);
        }
        assert!(r.sessions() <= 4);
        assert!(r.buckets.len() <= 4);
    }
}
