//! OWAMP-Control messages (RFC 4656 §3), unauthenticated mode.
//!
//! Every message is a whole number of 16-octet blocks; each that has an HMAC field carries it
//! zeroed (the open mode neither fills nor checks it). Readers take a buffer that may hold
//! less than a message and say how much they need: `Ok(None)` until it is all there, then the
//! message and the octets it took.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use thiserror::Error;

/// Modes: unauthenticated.
pub const MODE_OPEN: u32 = 1;
/// Modes: authenticated.
pub const MODE_AUTHENTICATED: u32 = 2;
/// Modes: encrypted.
pub const MODE_ENCRYPTED: u32 = 4;

/// Accept: OK.
pub const ACCEPT_OK: u8 = 0;
/// Accept: failure, reason unspecified (catch-all).
pub const ACCEPT_FAILURE: u8 = 1;
/// Accept: internal error.
pub const ACCEPT_INTERNAL: u8 = 2;
/// Accept: some aspect of the request is not supported.
pub const ACCEPT_UNSUPPORTED: u8 = 3;
/// Accept: cannot perform the request due to permanent resource limitations.
pub const ACCEPT_PERMANENT: u8 = 4;
/// Accept: cannot perform the request due to temporary resource limitations.
pub const ACCEPT_TEMPORARY: u8 = 5;

/// What an Accept value means, for an error line.
pub fn accept_text(a: u8) -> &'static str {
    match a {
        ACCEPT_OK => "accepted",
        ACCEPT_FAILURE => "refused",
        ACCEPT_INTERNAL => "internal error",
        ACCEPT_UNSUPPORTED => "not supported",
        ACCEPT_PERMANENT => "permanent resource limit",
        ACCEPT_TEMPORARY => "temporary resource limit",
        _ => "unknown Accept value",
    }
}

/// Command numbers (the first octet of client commands).
pub mod command {
    /// Request-Session.
    pub const REQUEST_SESSION: u8 = 1;
    /// Start-Sessions.
    pub const START_SESSIONS: u8 = 2;
    /// Stop-Sessions.
    pub const STOP_SESSIONS: u8 = 3;
    /// Fetch-Session.
    pub const FETCH_SESSION: u8 = 4;
}

/// A malformed message.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ControlError {
    /// A field holds what the protocol does not allow.
    #[error("OWAMP-Control: {0}")]
    Invalid(String),
}

fn invalid<T>(s: impl Into<String>) -> Result<T, ControlError> {
    Err(ControlError::Invalid(s.into()))
}

/// A parse result: `None` until the buffer holds the whole message.
pub type Parsed<T> = Result<Option<(T, usize)>, ControlError>;

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be64(b: &[u8], at: usize) -> u64 {
    (u64::from(be32(b, at)) << 32) | u64::from(be32(b, at + 4))
}
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn pad16(n: usize) -> usize {
    n.div_ceil(16) * 16
}

/// Server Greeting (64 octets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Greeting {
    /// Modes offered (bits).
    pub modes: u32,
    /// Challenge (authenticated modes).
    pub challenge: [u8; 16],
    /// Salt (authenticated modes).
    pub salt: [u8; 16],
    /// PBKDF2 iteration count (authenticated modes).
    pub count: u32,
}

impl Greeting {
    /// Octets on the wire.
    pub const LEN: usize = 64;

    /// The message.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; Self::LEN];
        b[12..16].copy_from_slice(&self.modes.to_be_bytes());
        b[16..32].copy_from_slice(&self.challenge);
        b[32..48].copy_from_slice(&self.salt);
        b[48..52].copy_from_slice(&self.count.to_be_bytes());
        b
    }

    /// Reads one.
    pub fn parse(b: &[u8]) -> Parsed<Greeting> {
        if b.len() < Self::LEN {
            return Ok(None);
        }
        let mut challenge = [0u8; 16];
        challenge.copy_from_slice(&b[16..32]);
        let mut salt = [0u8; 16];
        salt.copy_from_slice(&b[32..48]);
        Ok(Some((Greeting { modes: be32(b, 12), challenge, salt, count: be32(b, 48) }, Self::LEN)))
    }
}

/// Set-Up-Response (164 octets): the mode chosen; in the open mode the key identity, token
/// and IV are zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetupResponse {
    /// The mode chosen.
    pub mode: u32,
}

impl SetupResponse {
    /// Octets on the wire.
    pub const LEN: usize = 164;

    /// The message.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; Self::LEN];
        b[..4].copy_from_slice(&self.mode.to_be_bytes());
        b
    }

    /// Reads one.
    pub fn parse(b: &[u8]) -> Parsed<SetupResponse> {
        if b.len() < Self::LEN {
            return Ok(None);
        }
        Ok(Some((SetupResponse { mode: be32(b, 0) }, Self::LEN)))
    }
}

/// Server-Start (48 octets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerStart {
    /// Accept.
    pub accept: u8,
    /// When the server started (NTP timestamp).
    pub start_time: u64,
}

impl ServerStart {
    /// Octets on the wire.
    pub const LEN: usize = 48;

    /// The message.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; Self::LEN];
        b[15] = self.accept;
        b[32..40].copy_from_slice(&self.start_time.to_be_bytes());
        b
    }

    /// Reads one.
    pub fn parse(b: &[u8]) -> Parsed<ServerStart> {
        if b.len() < Self::LEN {
            return Ok(None);
        }
        Ok(Some((ServerStart { accept: b[15], start_time: be64(b, 32) }, Self::LEN)))
    }
}

/// One schedule slot: an exponential gap of this mean, or a fixed one (32.32 seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Exponentially distributed (type 0) rather than fixed (type 1).
    pub exponential: bool,
    /// The mean or the gap, 32.32 seconds.
    pub param: u64,
}

/// Request-Session (112 octets, a 16-octet block per slot, and a 16-octet HMAC block).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestSession {
    /// The server is to send.
    pub conf_sender: bool,
    /// The server is to receive.
    pub conf_receiver: bool,
    /// Packets in the session.
    pub packets: u32,
    /// Sender's address and port.
    pub sender: (IpAddr, u16),
    /// Receiver's address and port.
    pub receiver: (IpAddr, u16),
    /// Session identifier (the receiver's choice; zero in a request the server receives).
    pub sid: [u8; 16],
    /// Octets of padding after each test packet's 14.
    pub padding: u32,
    /// When the session starts (NTP timestamp).
    pub start_time: u64,
    /// How long after a packet's send time it counts as lost (32.32 seconds).
    pub timeout: u64,
    /// Type-P descriptor (DSCP << 24, or 0).
    pub type_p: u32,
    /// The schedule.
    pub slots: Vec<Slot>,
}

/// Most schedule slots a request may have here (each costs 16 octets; the reference client
/// sends one).
pub const MAX_SLOTS: u32 = 4096;

fn put_addr(b: &mut [u8], a: IpAddr) {
    match a {
        IpAddr::V4(v4) => b[..4].copy_from_slice(&v4.octets()),
        IpAddr::V6(v6) => b[..16].copy_from_slice(&v6.octets()),
    }
}

fn get_addr(b: &[u8], v6: bool) -> IpAddr {
    if v6 {
        let mut o = [0u8; 16];
        o.copy_from_slice(&b[..16]);
        IpAddr::V6(Ipv6Addr::from(o))
    } else {
        IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))
    }
}

impl RequestSession {
    /// Octets before the slots.
    pub const HEAD: usize = 112;

    /// The message.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; Self::HEAD + 16 * self.slots.len() + 16];
        b[0] = command::REQUEST_SESSION;
        b[1] = if self.sender.0.is_ipv6() { 6 } else { 4 };
        b[2] = u8::from(self.conf_sender);
        b[3] = u8::from(self.conf_receiver);
        b[4..8].copy_from_slice(&(self.slots.len() as u32).to_be_bytes());
        b[8..12].copy_from_slice(&self.packets.to_be_bytes());
        b[12..14].copy_from_slice(&self.sender.1.to_be_bytes());
        b[14..16].copy_from_slice(&self.receiver.1.to_be_bytes());
        put_addr(&mut b[16..32], self.sender.0);
        put_addr(&mut b[32..48], self.receiver.0);
        b[48..64].copy_from_slice(&self.sid);
        b[64..68].copy_from_slice(&self.padding.to_be_bytes());
        b[68..76].copy_from_slice(&self.start_time.to_be_bytes());
        b[76..84].copy_from_slice(&self.timeout.to_be_bytes());
        b[84..88].copy_from_slice(&self.type_p.to_be_bytes());
        for (i, s) in self.slots.iter().enumerate() {
            let at = Self::HEAD + 16 * i;
            b[at] = if s.exponential { 0 } else { 1 };
            b[at + 8..at + 16].copy_from_slice(&s.param.to_be_bytes());
        }
        b
    }

    /// Reads one (its first octet is the command number, 1).
    pub fn parse(b: &[u8]) -> Parsed<RequestSession> {
        if b.len() < Self::HEAD {
            return Ok(None);
        }
        if b[0] != command::REQUEST_SESSION {
            return invalid(format!("expected Request-Session (1), got command {}", b[0]));
        }
        let v6 = match b[1] & 0x0f {
            4 => false,
            6 => true,
            v => return invalid(format!("IP version {v} in Request-Session")),
        };
        let nslots = be32(b, 4);
        if nslots == 0 || nslots > MAX_SLOTS {
            return invalid(format!("{nslots} schedule slots (1 to {MAX_SLOTS} are taken)"));
        }
        let len = Self::HEAD + 16 * nslots as usize + 16;
        if b.len() < len {
            return Ok(None);
        }
        let mut slots = Vec::with_capacity(nslots as usize);
        for i in 0..nslots as usize {
            let at = Self::HEAD + 16 * i;
            let exponential = match b[at] {
                0 => true,
                1 => false,
                t => return invalid(format!("schedule slot type {t} (0 exponential, 1 fixed)")),
            };
            slots.push(Slot { exponential, param: be64(b, at + 8) });
        }
        let mut sid = [0u8; 16];
        sid.copy_from_slice(&b[48..64]);
        Ok(Some((
            RequestSession {
                conf_sender: b[2] != 0,
                conf_receiver: b[3] != 0,
                packets: be32(b, 8),
                sender: (get_addr(&b[16..32], v6), be16(b, 12)),
                receiver: (get_addr(&b[32..48], v6), be16(b, 14)),
                sid,
                padding: be32(b, 64),
                start_time: be64(b, 68),
                timeout: be64(b, 76),
                type_p: be32(b, 84),
                slots,
            },
            len,
        )))
    }
}

/// Accept-Session (48 octets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcceptSession {
    /// Accept.
    pub accept: u8,
    /// The server's test port (its receiving port, or the port it sends from).
    pub port: u16,
    /// The session identifier.
    pub sid: [u8; 16],
}

impl AcceptSession {
    /// Octets on the wire.
    pub const LEN: usize = 48;

    /// The message.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; Self::LEN];
        b[0] = self.accept;
        b[2..4].copy_from_slice(&self.port.to_be_bytes());
        b[4..20].copy_from_slice(&self.sid);
        b
    }

    /// Reads one.
    pub fn parse(b: &[u8]) -> Parsed<AcceptSession> {
        if b.len() < Self::LEN {
            return Ok(None);
        }
        let mut sid = [0u8; 16];
        sid.copy_from_slice(&b[4..20]);
        Ok(Some((AcceptSession { accept: b[0], port: be16(b, 2), sid }, Self::LEN)))
    }
}

/// Start-Sessions (32 octets).
pub fn start_sessions() -> Vec<u8> {
    let mut b = vec![0u8; 32];
    b[0] = command::START_SESSIONS;
    b
}

/// Start-Ack, or any other 32-octet answer with an Accept in its first octet (32 octets).
pub fn ack(accept: u8) -> Vec<u8> {
    let mut b = vec![0u8; 32];
    b[0] = accept;
    b
}

/// Reads a Start-Ack: its Accept.
pub fn parse_ack(b: &[u8]) -> Parsed<u8> {
    Ok((b.len() >= 32).then(|| (b[0], 32)))
}

/// One sent session's end in Stop-Sessions: the next sequence number it would have sent and
/// the ranges it skipped (sent too late to count).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionEnd {
    /// The session.
    pub sid: [u8; 16],
    /// Packets sent (the next sequence number).
    pub next_seq: u32,
    /// Skipped ranges (first, last).
    pub skips: Vec<(u32, u32)>,
}

/// Stop-Sessions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopSessions {
    /// Accept (0: the sessions ended normally).
    pub accept: u8,
    /// The sessions the writer sent.
    pub sessions: Vec<SessionEnd>,
}

/// Most sessions or skip ranges read from one message here.
pub const MAX_LIST: u32 = 65_536;

impl StopSessions {
    /// The message.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; 16];
        b[0] = command::STOP_SESSIONS;
        b[1] = self.accept;
        b[4..8].copy_from_slice(&(self.sessions.len() as u32).to_be_bytes());
        for s in &self.sessions {
            b.extend_from_slice(&s.sid);
            let mut body = Vec::with_capacity(8 + 8 * s.skips.len());
            body.extend_from_slice(&s.next_seq.to_be_bytes());
            body.extend_from_slice(&(s.skips.len() as u32).to_be_bytes());
            for (first, last) in &s.skips {
                body.extend_from_slice(&first.to_be_bytes());
                body.extend_from_slice(&last.to_be_bytes());
            }
            body.resize(pad16(body.len()), 0);
            b.extend_from_slice(&body);
        }
        b.extend_from_slice(&[0u8; 16]);
        b
    }

    /// Reads one (its first octet is the command number, 3).
    pub fn parse(b: &[u8]) -> Parsed<StopSessions> {
        if b.len() < 16 {
            return Ok(None);
        }
        if b[0] != command::STOP_SESSIONS {
            return invalid(format!("expected Stop-Sessions (3), got command {}", b[0]));
        }
        let n = be32(b, 4);
        if n > MAX_LIST {
            return invalid(format!("{n} sessions in Stop-Sessions"));
        }
        let mut at = 16;
        let mut sessions = Vec::new();
        for _ in 0..n {
            if b.len() < at + 32 {
                return Ok(None);
            }
            let mut sid = [0u8; 16];
            sid.copy_from_slice(&b[at..at + 16]);
            let next_seq = be32(b, at + 16);
            let k = be32(b, at + 20);
            if k > MAX_LIST {
                return invalid(format!("{k} skip ranges in Stop-Sessions"));
            }
            let body = pad16(8 + 8 * k as usize);
            if b.len() < at + 16 + body {
                return Ok(None);
            }
            let skips = (0..k as usize)
                .map(|i| {
                    let o = at + 24 + 8 * i;
                    (be32(b, o), be32(b, o + 4))
                })
                .collect();
            sessions.push(SessionEnd { sid, next_seq, skips });
            at += 16 + body;
        }
        if b.len() < at + 16 {
            return Ok(None);
        }
        Ok(Some((StopSessions { accept: b[1], sessions }, at + 16)))
    }
}

/// Fetch-Session (48 octets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchSession {
    /// First sequence number wanted.
    pub begin: u32,
    /// Last (0xFFFFFFFF: all).
    pub end: u32,
    /// The session.
    pub sid: [u8; 16],
}

impl FetchSession {
    /// Octets on the wire.
    pub const LEN: usize = 48;

    /// The message.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; Self::LEN];
        b[0] = command::FETCH_SESSION;
        b[8..12].copy_from_slice(&self.begin.to_be_bytes());
        b[12..16].copy_from_slice(&self.end.to_be_bytes());
        b[16..32].copy_from_slice(&self.sid);
        b
    }

    /// Reads one.
    pub fn parse(b: &[u8]) -> Parsed<FetchSession> {
        if b.len() < Self::LEN {
            return Ok(None);
        }
        if b[0] != command::FETCH_SESSION {
            return invalid(format!("expected Fetch-Session (4), got command {}", b[0]));
        }
        let mut sid = [0u8; 16];
        sid.copy_from_slice(&b[16..32]);
        Ok(Some((FetchSession { begin: be32(b, 8), end: be32(b, 12), sid }, Self::LEN)))
    }
}

/// One packet's record: its send time and error estimate (the scheduled time for a lost
/// one), its receive time (0: lost) and error estimate, and its TTL on arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// Sequence number.
    pub seq: u32,
    /// Sender's error estimate (16 bits).
    pub send_error: u16,
    /// Receiver's error estimate.
    pub recv_error: u16,
    /// Send time (NTP timestamp).
    pub send_time: u64,
    /// Receive time (0 for a lost packet).
    pub recv_time: u64,
    /// TTL on arrival (255 when not known).
    pub ttl: u8,
}

impl Record {
    /// Octets on the wire.
    pub const LEN: usize = 25;

    fn write(&self, b: &mut Vec<u8>) {
        b.extend_from_slice(&self.seq.to_be_bytes());
        b.extend_from_slice(&self.send_error.to_be_bytes());
        b.extend_from_slice(&self.recv_error.to_be_bytes());
        b.extend_from_slice(&self.send_time.to_be_bytes());
        b.extend_from_slice(&self.recv_time.to_be_bytes());
        b.push(self.ttl);
    }

    fn read(b: &[u8]) -> Record {
        Record {
            seq: be32(b, 0),
            send_error: be16(b, 4),
            recv_error: be16(b, 6),
            send_time: be64(b, 8),
            recv_time: be64(b, 16),
            ttl: b[24],
        }
    }

    /// Lost (no receive time).
    pub fn lost(&self) -> bool {
        self.recv_time == 0
    }
}

/// A fetched session: Fetch-Ack and what follows it when accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// Accept.
    pub accept: u8,
    /// The session ended normally.
    pub finished: bool,
    /// The sender's next sequence number (when finished).
    pub next_seq: u32,
    /// The session's request as the server stored it.
    pub request: Option<RequestSession>,
    /// Skipped ranges.
    pub skips: Vec<(u32, u32)>,
    /// The records.
    pub records: Vec<Record>,
}

/// Most records a fetch may bring here (a day at 100 packets a second is 8.6 million).
pub const MAX_RECORDS: u32 = 50_000_000;

impl Fetched {
    /// The answer to a Fetch-Session: Fetch-Ack (32 octets), then, when accepted, the session's
    /// request, its skip ranges and its records, each part padded to 16 octets and followed by
    /// a zeroed HMAC block.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; 32];
        b[0] = self.accept;
        b[1] = u8::from(self.finished);
        b[4..8].copy_from_slice(&self.next_seq.to_be_bytes());
        b[8..12].copy_from_slice(&(self.skips.len() as u32).to_be_bytes());
        b[12..16].copy_from_slice(&(self.records.len() as u32).to_be_bytes());
        let Some(req) = self.request.as_ref().filter(|_| self.accept == ACCEPT_OK) else { return b };
        b.extend_from_slice(&req.encode());
        let mut skips = Vec::new();
        for (first, last) in &self.skips {
            skips.extend_from_slice(&first.to_be_bytes());
            skips.extend_from_slice(&last.to_be_bytes());
        }
        skips.resize(pad16(skips.len()), 0);
        b.extend_from_slice(&skips);
        b.extend_from_slice(&[0u8; 16]);
        let mut recs = Vec::with_capacity(pad16(Record::LEN * self.records.len()));
        for r in &self.records {
            r.write(&mut recs);
        }
        recs.resize(pad16(recs.len()), 0);
        b.extend_from_slice(&recs);
        b.extend_from_slice(&[0u8; 16]);
        b
    }

    /// Reads one.
    pub fn parse(b: &[u8]) -> Parsed<Fetched> {
        if b.len() < 32 {
            return Ok(None);
        }
        let (accept, finished) = (b[0], b[1] != 0);
        let (next_seq, nskips, nrecs) = (be32(b, 4), be32(b, 8), be32(b, 12));
        if accept != ACCEPT_OK {
            let f = Fetched { accept, finished, next_seq, request: None, skips: vec![], records: vec![] };
            return Ok(Some((f, 32)));
        }
        if nskips > MAX_LIST || nrecs > MAX_RECORDS {
            return invalid(format!("a fetch of {nskips} skip ranges and {nrecs} records"));
        }
        let Some((request, used)) = RequestSession::parse(&b[32..])? else { return Ok(None) };
        let mut at = 32 + used;
        let skip_len = pad16(8 * nskips as usize) + 16;
        if b.len() < at + skip_len {
            return Ok(None);
        }
        let skips = (0..nskips as usize).map(|i| (be32(b, at + 8 * i), be32(b, at + 8 * i + 4))).collect();
        at += skip_len;
        let rec_len = pad16(Record::LEN * nrecs as usize) + 16;
        if b.len() < at + rec_len {
            return Ok(None);
        }
        let records = (0..nrecs as usize).map(|i| Record::read(&b[at + Record::LEN * i..])).collect();
        at += rec_len;
        Ok(Some((Fetched { accept, finished, next_seq, request: Some(request), skips, records }, at)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> RequestSession {
        RequestSession {
            conf_sender: false,
            conf_receiver: true,
            packets: 100,
            sender: ("198.18.0.1".parse().unwrap(), 8760),
            receiver: ("198.18.0.2".parse().unwrap(), 0),
            sid: [0; 16],
            padding: 0,
            start_time: 0xe6e6_0000_8000_0000,
            timeout: 2 << 32,
            type_p: 0,
            slots: vec![Slot { exponential: true, param: 0x1999_9999 }],
        }
    }

    #[test]
    fn message_lengths_are_the_rfcs() {
        assert_eq!(Greeting { modes: 7, challenge: [1; 16], salt: [2; 16], count: 2048 }.encode().len(), 64);
        assert_eq!(SetupResponse { mode: MODE_OPEN }.encode().len(), 164);
        assert_eq!(ServerStart { accept: 0, start_time: 5 }.encode().len(), 48);
        // One slot: 112 + 16 + 16, as the reference client sends.
        assert_eq!(request().encode().len(), 144);
        assert_eq!(AcceptSession { accept: 0, port: 9000, sid: [3; 16] }.encode().len(), 48);
        assert_eq!(start_sessions().len(), 32);
        // No sessions: 32 octets; one without skips: 64.
        assert_eq!(StopSessions { accept: 0, sessions: vec![] }.encode().len(), 32);
        let one = StopSessions { accept: 0, sessions: vec![SessionEnd { sid: [4; 16], next_seq: 100, skips: vec![] }] };
        assert_eq!(one.encode().len(), 64);
        assert_eq!(FetchSession { begin: 0, end: u32::MAX, sid: [5; 16] }.encode().len(), 48);
    }

    #[test]
    fn fields_sit_where_rfc_4656_puts_them() {
        let b = request().encode();
        assert_eq!(&b[..4], &[1, 4, 0, 1]);
        assert_eq!(be32(&b, 4), 1);
        assert_eq!(be32(&b, 8), 100);
        assert_eq!(be16(&b, 12), 8760);
        assert_eq!(&b[16..20], &[198, 18, 0, 1]);
        assert_eq!(&b[32..36], &[198, 18, 0, 2]);
        assert_eq!(be64(&b, 76), 2 << 32);
        assert_eq!(b[112], 0);
        assert_eq!(be64(&b, 120), 0x1999_9999);
        let g = Greeting { modes: 7, challenge: [1; 16], salt: [2; 16], count: 2048 }.encode();
        assert_eq!(be32(&g, 12), 7);
        assert_eq!(be32(&g, 48), 2048);
        assert_eq!(ServerStart { accept: 3, start_time: 9 }.encode()[15], 3);
    }

    #[test]
    fn every_message_reads_back_and_waits_for_its_last_octet() {
        fn whole<T: PartialEq + std::fmt::Debug>(b: &[u8], parse: impl Fn(&[u8]) -> Parsed<T>, want: T) {
            for cut in 0..b.len() {
                assert_eq!(parse(&b[..cut]).unwrap(), None, "{want:?} cut at {cut}");
            }
            let mut more = b.to_vec();
            more.extend_from_slice(&[9; 7]);
            assert_eq!(parse(&more).unwrap(), Some((want, b.len())));
        }
        let r = request();
        whole(&r.encode(), RequestSession::parse, r.clone());
        let v6 = RequestSession {
            sender: ("fd00::1".parse().unwrap(), 1),
            receiver: ("fd00::2".parse().unwrap(), 2),
            ..r.clone()
        };
        whole(&v6.encode(), RequestSession::parse, v6);
        let s = StopSessions {
            accept: 0,
            sessions: vec![
                SessionEnd { sid: [1; 16], next_seq: 10, skips: vec![(3, 4)] },
                SessionEnd { sid: [2; 16], next_seq: 20, skips: vec![(1, 1), (5, 9)] },
            ],
        };
        whole(&s.encode(), StopSessions::parse, s.clone());
        let f = Fetched {
            accept: 0,
            finished: true,
            next_seq: 3,
            request: Some(r),
            skips: vec![(1, 1)],
            records: vec![
                Record { seq: 0, send_error: 1, recv_error: 1, send_time: 10, recv_time: 20, ttl: 255 },
                Record { seq: 1, send_error: 1, recv_error: 1, send_time: 11, recv_time: 0, ttl: 255 },
                Record { seq: 2, send_error: 1, recv_error: 1, send_time: 12, recv_time: 22, ttl: 64 },
            ],
        };
        let b = f.encode();
        // Ack 32, request 144, skips 16 + 16, records 75 → 80 + 16.
        assert_eq!(b.len(), 32 + 144 + 32 + 96);
        whole(&b, Fetched::parse, f);
        let g = Greeting { modes: 1, challenge: [0; 16], salt: [0; 16], count: 1024 };
        whole(&g.encode(), Greeting::parse, g);
        let a = AcceptSession { accept: 0, port: 9000, sid: [7; 16] };
        whole(&a.encode(), AcceptSession::parse, a);
        let fs = FetchSession { begin: 0, end: u32::MAX, sid: [6; 16] };
        whole(&fs.encode(), FetchSession::parse, fs);
    }

    #[test]
    fn hostile_counts_are_refused_not_allocated() {
        let mut b = request().encode();
        b[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(RequestSession::parse(&b).is_err());
        b[4..8].copy_from_slice(&1u32.to_be_bytes());
        b[112] = 7;
        assert!(RequestSession::parse(&b).is_err());
        let mut s = StopSessions { accept: 0, sessions: vec![] }.encode();
        s[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(StopSessions::parse(&s).is_err());
        let mut f = vec![0u8; 32];
        f[12..16].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(Fetched::parse(&f).is_err());
    }
}
