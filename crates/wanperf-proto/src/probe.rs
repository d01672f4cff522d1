//! UDP echo probes (`wanperf ping`): one 40-byte header, request and reply alike.
//!
//! ```text
//! 0       4       6       8               16              24              32              40
//! | WNPE  | ver   | flags | seq (u64)     | client tx     | server rx     | server tx     | padding…
//! ```
//! Flags: 1 = reply, 2 = short (answer with the header only), 4 = train (see
//! [`TrainRequest`]: 12 more bytes after the header), 8 = count (see [`Count`]: the reply
//! carries, in the 8 bytes after the header, how many probes the server has had from this
//! client's address and port), 16 = recursive train (see [`RptRequest`] and [`RptReport`]).
//! All big endian. The client's timestamp is opaque to the server; the server's two
//! timestamps are its wall clock (ns since the Unix epoch) when the request arrived (kernel
//! receive time where available) and when the reply left. Their difference is the server's
//! turnaround, which the client takes out of the round trip.

use crate::msg::PROTOCOL_VERSION;

/// First bytes of every probe.
pub const PROBE_MAGIC: [u8; 4] = *b"WNPE";
/// Header length.
pub const PROBE_HEADER_LEN: usize = 40;
const FLAG_REPLY: u16 = 1;
const FLAG_SHORT: u16 = 2;
const FLAG_TRAIN: u16 = 4;
const FLAG_COUNT: u16 = 8;
const FLAG_RPT: u16 = 16;

/// Header and train fields.
pub const TRAIN_REQUEST_LEN: usize = PROBE_HEADER_LEN + 12;
/// A train request with a pacing gap (see [`TrainRequest::gap_ns`]).
pub const TRAIN_PACED_LEN: usize = TRAIN_REQUEST_LEN + 4;
/// Longest gap between a paced train's packets the server keeps, ns (10 ms).
pub const TRAIN_MAX_GAP_NS: u32 = 10_000_000;
/// Most packets the server sends for one request.
pub const TRAIN_MAX_COUNT: u16 = 64;
/// Largest packet it sends (UDP payload bytes).
pub const TRAIN_MAX_SIZE: u16 = 8952;

/// `wanperf capacity --reverse`: a probe asking the server for a train of `count` packets of
/// `size` UDP payload bytes back to back (flag 4; after the header: token u64, count u16,
/// size u16), so the path toward the client is measured with the client's kernel timestamps.
///
/// The server sends a train only with the token it gave this client address: a request
/// without it is answered with one packet no larger than the request, carrying the token
/// (`count` 0) — a sender with a forged address never sees the token, so the server cannot
/// be made to flood anyone (QUIC's address validation, in one round trip). The train's
/// packets are replies (flags 1 | 4) numbered from the request's `seq`, each with the
/// server's receive and send times, `count` and `size` as asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrainRequest {
    /// The server's token for this client (0 to ask for it).
    pub token: u64,
    /// Packets wanted (0 with a token answer).
    pub count: u16,
    /// Their UDP payload size.
    pub size: u16,
    /// Time between the packets' departures, ns (u32 after the size, in a request of
    /// [`TRAIN_PACED_LEN`] bytes or more): 0 sends them back to back; more paces them
    /// (`wanperf capacity`'s self-loading streams of the way back). An older server ignores
    /// it and sends back to back, which each packet's send time shows.
    pub gap_ns: u32,
}

impl TrainRequest {
    /// Marks the probe already written at the start of `buf` (at least
    /// [`TRAIN_REQUEST_LEN`] bytes) as a train request or answer and writes the fields.
    pub fn write(&self, buf: &mut [u8]) {
        let flags = u16::from_be_bytes([buf[6], buf[7]]) | FLAG_TRAIN;
        buf[6..8].copy_from_slice(&flags.to_be_bytes());
        buf[40..48].copy_from_slice(&self.token.to_be_bytes());
        buf[48..50].copy_from_slice(&self.count.to_be_bytes());
        buf[50..52].copy_from_slice(&self.size.to_be_bytes());
        if buf.len() >= TRAIN_PACED_LEN {
            buf[52..56].copy_from_slice(&self.gap_ns.to_be_bytes());
        }
    }

    /// The train fields of a probe that has them (flag 4 and the length).
    pub fn read(buf: &[u8]) -> Option<TrainRequest> {
        Probe::read(buf)?;
        if buf.len() < TRAIN_REQUEST_LEN || u16::from_be_bytes([buf[6], buf[7]]) & FLAG_TRAIN == 0 {
            return None;
        }
        let mut t = [0u8; 8];
        t.copy_from_slice(&buf[40..48]);
        Some(TrainRequest {
            token: u64::from_be_bytes(t),
            count: u16::from_be_bytes([buf[48], buf[49]]),
            size: u16::from_be_bytes([buf[50], buf[51]]),
            gap_ns: if buf.len() >= TRAIN_PACED_LEN {
                u32::from_be_bytes([buf[52], buf[53], buf[54], buf[55]])
            } else {
                0
            },
        })
    }
}

/// A recursive train request: a train request and heads (u8), 0 (u8), wait (u16, ms).
pub const RPT_REQUEST_LEN: usize = TRAIN_PACED_LEN + 4;
/// Most head (and tail) packets of a recursive train.
pub const RPT_MAX_HEADS: u8 = 32;
/// Longest the server waits for the routers' answers, ms.
pub const RPT_MAX_WAIT_MS: u16 = 2000;
/// A recursive train's packet numbers, from the request's `seq`: head packet of TTL `t` at
/// `seq + t`, tail packet of TTL `t` at `seq + RPT_TAIL + t`, large packet `i` at
/// `seq + RPT_LOAD + i`; the request takes `RPT_SEQS` numbers.
pub const RPT_TAIL: u64 = 256;
/// See [`RPT_TAIL`].
pub const RPT_LOAD: u64 = 512;
/// See [`RPT_TAIL`].
pub const RPT_SEQS: u64 = 768;
/// Routers' answers in one report packet, at most.
pub const RPT_REPORT_MAX: usize = 32;
const RPT_ENTRY_LEN: usize = 28;

/// `wanperf capacity --locate-back`: a train request (flags 4 | 16, [`RPT_REQUEST_LEN`]
/// bytes) asking the server for a recursive packet train toward the client — `heads` small
/// packets with TTL 1, 2, … `heads`, the train's `count` packets of `size` bytes, and
/// `heads` small packets with TTL `heads` … 2, 1 — back to back, numbered as [`RPT_TAIL`]
/// says, each a train reply (flags 1 | 4). Every router on the way back answers a head and a
/// tail packet with an ICMP time exceeded, which comes to the server: the server collects
/// the answers for `wait_ms` (with the kernel's receive times) and sends them to the client
/// as [`RptReport`]s. The same token and byte budget as any train; an older server sends a
/// plain train (flag 16 unknown) and no report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RptRequest {
    /// The train: token, large packets and their size (no gap).
    pub train: TrainRequest,
    /// Head (and tail) packets, 1 ..= [`RPT_MAX_HEADS`].
    pub heads: u8,
    /// How long the server collects answers, ms (at most [`RPT_MAX_WAIT_MS`]).
    pub wait_ms: u16,
}

impl RptRequest {
    /// Marks the probe already written at the start of `buf` (at least [`RPT_REQUEST_LEN`]
    /// bytes) as a recursive train request and writes the fields.
    pub fn write(&self, buf: &mut [u8]) {
        TrainRequest { gap_ns: 0, ..self.train }.write(buf);
        let flags = u16::from_be_bytes([buf[6], buf[7]]) | FLAG_RPT;
        buf[6..8].copy_from_slice(&flags.to_be_bytes());
        buf[56] = self.heads;
        buf[57] = 0;
        buf[58..60].copy_from_slice(&self.wait_ms.to_be_bytes());
    }

    /// The fields of a request that is one (flags 4 | 16, not a reply, the length).
    pub fn read(buf: &[u8]) -> Option<RptRequest> {
        let train = TrainRequest::read(buf)?;
        let flags = u16::from_be_bytes([buf[6], buf[7]]);
        if buf.len() < RPT_REQUEST_LEN || flags & FLAG_RPT == 0 || flags & FLAG_REPLY != 0 {
            return None;
        }
        Some(RptRequest { train, heads: buf[56], wait_ms: u16::from_be_bytes([buf[58], buf[59]]) })
    }
}

/// The destination's loss split by direction, from the server's [`Count`]: probes that never
/// reached the server (forward) and replies that never came back (reverse), over the probes up
/// to the last one whose reply brought the server's count (`wanperf trace --server`'s
/// `one_way`, a mesh trace result's too).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct OneWayLoss {
    /// Probes sent far enough to reach the destination.
    pub sent: u32,
    /// Of those, how many the server had.
    pub arrived: u32,
    /// Replies that came back in time.
    pub answered: u32,
    /// (sent − arrived) / sent, %.
    pub forward_loss_pct: f64,
    /// (arrived − answered) / arrived, %.
    pub reverse_loss_pct: f64,
}

/// A router's answer to one of a recursive train's TTL-limited packets, as the server heard it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RptAnswer {
    /// The packet's TTL (the router's hop from the server).
    pub ttl: u8,
    /// A tail packet (else a head packet).
    pub tail: bool,
    /// The router.
    pub from: std::net::IpAddr,
    /// When its answer reached the server (kernel time, ns since the epoch, the server's clock).
    pub at_ns: u64,
}

/// The server's report of the routers' answers to a recursive train (flags 1 | 16, the
/// request's header echoed): part and parts (u8 each), answers (u16), then per answer TTL
/// (u8), tail (u8), address family (4 or 6), 0, the time (u64) and the address (16 bytes,
/// an IPv4 address in the first 4). At most [`RPT_REPORT_MAX`] answers a packet; a train
/// with none is reported by one packet with none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RptReport {
    /// This packet's number, 0-based.
    pub part: u8,
    /// Packets of the report.
    pub parts: u8,
    /// Their answers.
    pub answers: Vec<RptAnswer>,
}

impl RptReport {
    /// The report of `answers` in packets: the reply header `p` (marked a report) and each
    /// part.
    pub fn packets(p: &Probe, answers: &[RptAnswer]) -> Vec<Vec<u8>> {
        let chunks: Vec<&[RptAnswer]> =
            if answers.is_empty() { vec![&[][..]] } else { answers.chunks(RPT_REPORT_MAX).collect() };
        let parts = chunks.len().min(usize::from(u8::MAX)) as u8;
        chunks
            .iter()
            .take(usize::from(parts))
            .enumerate()
            .map(|(i, c)| {
                let mut b = vec![0u8; PROBE_HEADER_LEN + 4 + RPT_ENTRY_LEN * c.len()];
                Probe { reply: true, ..*p }.write(&mut b);
                b[6..8].copy_from_slice(&(FLAG_REPLY | FLAG_RPT).to_be_bytes());
                b[40] = i as u8;
                b[41] = parts;
                b[42..44].copy_from_slice(&(c.len() as u16).to_be_bytes());
                for (k, a) in c.iter().enumerate() {
                    let e = &mut b[44 + RPT_ENTRY_LEN * k..44 + RPT_ENTRY_LEN * (k + 1)];
                    e[0] = a.ttl;
                    e[1] = u8::from(a.tail);
                    e[4..12].copy_from_slice(&a.at_ns.to_be_bytes());
                    match a.from {
                        std::net::IpAddr::V4(v) => {
                            e[2] = 4;
                            e[12..16].copy_from_slice(&v.octets());
                        }
                        std::net::IpAddr::V6(v) => {
                            e[2] = 6;
                            e[12..28].copy_from_slice(&v.octets());
                        }
                    }
                }
                b
            })
            .collect()
    }

    /// A report packet's header and contents; `None` for anything else or a malformed one.
    pub fn read(buf: &[u8]) -> Option<(Probe, RptReport)> {
        let p = Probe::read(buf)?;
        let flags = u16::from_be_bytes([buf[6], buf[7]]);
        if !p.reply || flags & FLAG_RPT == 0 || flags & FLAG_TRAIN != 0 || buf.len() < PROBE_HEADER_LEN + 4 {
            return None;
        }
        let (part, parts) = (buf[40], buf[41]);
        let n = usize::from(u16::from_be_bytes([buf[42], buf[43]]));
        if part >= parts || n > RPT_REPORT_MAX || buf.len() < PROBE_HEADER_LEN + 4 + n * RPT_ENTRY_LEN {
            return None;
        }
        let mut answers = Vec::with_capacity(n);
        for k in 0..n {
            let e = &buf[44 + RPT_ENTRY_LEN * k..44 + RPT_ENTRY_LEN * (k + 1)];
            let mut at = [0u8; 8];
            at.copy_from_slice(&e[4..12]);
            let from = match e[2] {
                4 => std::net::IpAddr::from([e[12], e[13], e[14], e[15]]),
                6 => {
                    let mut a = [0u8; 16];
                    a.copy_from_slice(&e[12..28]);
                    std::net::IpAddr::from(a)
                }
                _ => return None,
            };
            if e[1] > 1 {
                return None;
            }
            answers.push(RptAnswer { ttl: e[0], tail: e[1] == 1, from, at_ns: u64::from_be_bytes(at) });
        }
        Some((p, RptReport { part, parts, answers }))
    }
}

/// Bytes of a probe that asks for the server's count: the header and the count.
pub const COUNT_LEN: usize = PROBE_HEADER_LEN + 8;

/// `wanperf trace --server`: a probe (flag 8, at least [`COUNT_LEN`] bytes) whose reply
/// carries, as a big-endian u64 after the header, how many counting probes the server has had
/// from the client's address and port, this one included. A client that knows how many it
/// sent and how many replies came back tells the loss on the way there (sent − counted) from
/// the loss on the way back (counted − replies). Not for trains (flag 4 wins). An older
/// server's reply has only the reply flag (it writes the header anew): no count.
pub struct Count;

impl Count {
    /// Marks the probe already written at the start of `buf` (at least [`COUNT_LEN`] bytes)
    /// as asking for the count, the count field zero.
    pub fn ask(buf: &mut [u8]) {
        let flags = u16::from_be_bytes([buf[6], buf[7]]) | FLAG_COUNT;
        buf[6..8].copy_from_slice(&flags.to_be_bytes());
        buf[40..48].fill(0);
    }

    /// Whether a request asks for the count (flag 8, long enough, not a train).
    pub fn asked(buf: &[u8]) -> bool {
        let flags = if buf.len() >= 8 { u16::from_be_bytes([buf[6], buf[7]]) } else { 0 };
        buf.len() >= COUNT_LEN && flags & FLAG_COUNT != 0 && flags & FLAG_TRAIN == 0
    }

    /// Marks the reply header already written at the start of `buf` (at least [`COUNT_LEN`]
    /// bytes) as carrying `count`, and writes it.
    pub fn write(buf: &mut [u8], count: u64) {
        Count::ask(buf);
        buf[40..48].copy_from_slice(&count.to_be_bytes());
    }

    /// The server's count in a reply: `None` without flag 8 or when it is 0 (a server that
    /// does not count).
    pub fn read(buf: &[u8]) -> Option<u64> {
        let p = Probe::read(buf)?;
        if !p.reply || !Count::asked(buf) {
            return None;
        }
        let mut c = [0u8; 8];
        c.copy_from_slice(&buf[40..48]);
        Some(u64::from_be_bytes(c)).filter(|&n| n > 0)
    }
}

/// A probe request or reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    /// True for replies.
    pub reply: bool,
    /// The reply carries only the header, whatever the request's size (`wanperf capacity`'s
    /// trains: large packets out, small ones back, so the reverse path is not loaded).
    pub short: bool,
    /// Probe number.
    pub seq: u64,
    /// Client's send time (its own clock, opaque to the server).
    pub client_tx_ns: u64,
    /// Server's receive time, ns since the epoch (0 in requests).
    pub server_rx_ns: u64,
    /// Server's send time, ns since the epoch (0 in requests).
    pub server_tx_ns: u64,
}

impl Probe {
    /// Writes the header into `buf` (at least [`PROBE_HEADER_LEN`] bytes).
    pub fn write(&self, buf: &mut [u8]) {
        buf[..4].copy_from_slice(&PROBE_MAGIC);
        buf[4..6].copy_from_slice(&PROTOCOL_VERSION.to_be_bytes());
        let flags = if self.reply { FLAG_REPLY } else { 0 } | if self.short { FLAG_SHORT } else { 0 };
        buf[6..8].copy_from_slice(&flags.to_be_bytes());
        buf[8..16].copy_from_slice(&self.seq.to_be_bytes());
        buf[16..24].copy_from_slice(&self.client_tx_ns.to_be_bytes());
        buf[24..32].copy_from_slice(&self.server_rx_ns.to_be_bytes());
        buf[32..40].copy_from_slice(&self.server_tx_ns.to_be_bytes());
    }

    /// Reads a probe; `None` for anything that is not one of this version.
    pub fn read(buf: &[u8]) -> Option<Probe> {
        if buf.len() < PROBE_HEADER_LEN || buf[..4] != PROBE_MAGIC {
            return None;
        }
        if u16::from_be_bytes([buf[4], buf[5]]) != PROTOCOL_VERSION {
            return None;
        }
        let u = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&buf[i..i + 8]);
            u64::from_be_bytes(a)
        };
        Some(Probe {
            reply: u16::from_be_bytes([buf[6], buf[7]]) & FLAG_REPLY != 0,
            short: u16::from_be_bytes([buf[6], buf[7]]) & FLAG_SHORT != 0,
            seq: u(8),
            client_tx_ns: u(16),
            server_rx_ns: u(24),
            server_tx_ns: u(32),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects() {
        let p = Probe { reply: true, short: false, seq: 7, client_tx_ns: 1, server_rx_ns: 2, server_tx_ns: 3 };
        let mut b = [0u8; 64];
        p.write(&mut b);
        assert_eq!(Probe::read(&b), Some(p));
        assert_eq!(Probe::read(&b[..39]), None);
        let mut bad = b;
        bad[0] = b'X';
        assert_eq!(Probe::read(&bad), None);
        let mut v = b;
        v[5] = 99;
        assert_eq!(Probe::read(&v), None);
    }

    #[test]
    fn train_requests_round_trip_and_plain_probes_are_none() {
        let p = Probe { reply: false, short: true, seq: 9, client_tx_ns: 1, server_rx_ns: 0, server_tx_ns: 0 };
        let mut b = [0u8; TRAIN_REQUEST_LEN];
        p.write(&mut b);
        assert_eq!(TrainRequest::read(&b), None);
        let t = TrainRequest { token: 0xdead_beef_0102_0304, count: 33, size: 1472, gap_ns: 0 };
        t.write(&mut b);
        assert_eq!(TrainRequest::read(&b), Some(t));
        // Still a probe (an older server echoes it as one), and the flags it had are kept.
        assert_eq!(Probe::read(&b), Some(p));
        assert_eq!(TrainRequest::read(&b[..TRAIN_REQUEST_LEN - 1]), None);
        // A paced request: the gap after the size; a 52-byte request has none.
        let mut paced = [0u8; TRAIN_PACED_LEN];
        p.write(&mut paced);
        let t = TrainRequest { gap_ns: 600_000, ..t };
        t.write(&mut paced);
        assert_eq!(TrainRequest::read(&paced), Some(t));
        assert_eq!(TrainRequest::read(&paced[..TRAIN_REQUEST_LEN]).map(|x| x.gap_ns), Some(0));
    }

    #[test]
    fn counts_are_asked_written_and_read_back() {
        let p = Probe { reply: false, short: false, seq: 3, client_tx_ns: 4, server_rx_ns: 0, server_tx_ns: 0 };
        let mut b = [0xaau8; 64];
        p.write(&mut b);
        assert!(!Count::asked(&b));
        Count::ask(&mut b);
        assert!(Count::asked(&b) && !Count::asked(&b[..COUNT_LEN - 1]));
        assert_eq!(Probe::read(&b), Some(p), "still a plain probe to an older server");
        // An older server's echo: the header written anew, without flag 8.
        let mut echo = b;
        Probe { reply: true, ..p }.write(&mut echo);
        assert_eq!(Count::read(&echo), None);
        Count::write(&mut echo, 17);
        assert_eq!(Count::read(&echo), Some(17));
        Count::write(&mut echo, 0);
        assert_eq!(Count::read(&echo), None, "0 is no count");
        assert_eq!(Count::read(&b), None, "a request carries no count");
        // A train request is never counted.
        let mut t = [0u8; TRAIN_REQUEST_LEN];
        p.write(&mut t);
        Count::ask(&mut t);
        TrainRequest { token: 1, count: 2, size: 100, gap_ns: 0 }.write(&mut t);
        assert!(!Count::asked(&t));
    }
    #[test]
    fn recursive_train_requests_and_reports_round_trip() {
        let p = Probe { reply: false, short: true, seq: 1000, client_tx_ns: 9, server_rx_ns: 0, server_tx_ns: 0 };
        let mut b = vec![0u8; RPT_REQUEST_LEN];
        p.write(&mut b);
        let r =
            RptRequest { train: TrainRequest { token: 77, count: 20, size: 1472, gap_ns: 0 }, heads: 16, wait_ms: 120 };
        r.write(&mut b);
        assert_eq!(RptRequest::read(&b), Some(r));
        // An older server reads it as a plain back-to-back train.
        assert_eq!(TrainRequest::read(&b), Some(r.train));
        assert_eq!(RptRequest::read(&b[..RPT_REQUEST_LEN - 1]), None);
        let mut plain = vec![0u8; RPT_REQUEST_LEN];
        p.write(&mut plain);
        r.train.write(&mut plain);
        assert_eq!(RptRequest::read(&plain), None, "a paced train request is not a recursive one");

        // Reports: 70 answers in three packets, v4 and v6, read back in order.
        let answers: Vec<RptAnswer> = (0..70u32)
            .map(|i| RptAnswer {
                ttl: (i / 2) as u8 + 1,
                tail: i % 2 == 1,
                from: if i % 3 == 0 { "198.18.3.1".parse().unwrap() } else { "fd00::3:1".parse().unwrap() },
                at_ns: 1_700_000_000_000_000_000 + u64::from(i) * 1000,
            })
            .collect();
        let reply = Probe { reply: true, server_rx_ns: 5, server_tx_ns: 6, ..p };
        let pkts = RptReport::packets(&reply, &answers);
        assert_eq!(pkts.len(), 3);
        let mut back = Vec::new();
        for (i, b) in pkts.iter().enumerate() {
            assert!(b.len() <= 1472, "a report packet fits a 1500-byte path");
            let (h, rep) = RptReport::read(b).unwrap();
            assert_eq!((h.seq, rep.part, rep.parts), (1000, i as u8, 3));
            // Not a train reply, a token or a count to an older client.
            assert_eq!(TrainRequest::read(b), None);
            back.extend(rep.answers);
        }
        assert_eq!(back, answers);
        // None heard: one empty packet.
        let none = RptReport::packets(&reply, &[]);
        assert_eq!(none.len(), 1);
        assert_eq!(RptReport::read(&none[0]).unwrap().1, RptReport { part: 0, parts: 1, answers: vec![] });
        // Malformed: truncated, a bad family, a request.
        assert_eq!(RptReport::read(&pkts[0][..pkts[0].len() - 1]), None);
        let mut bad = pkts[0].clone();
        bad[44 + 2] = 5;
        assert_eq!(RptReport::read(&bad), None);
        assert_eq!(RptReport::read(&b), None);
    }
}
