//! UDP echo probes (`wanperf ping`): one 40-byte header, request and reply alike.
//!
//! ```text
//! 0       4       6       8               16              24              32              40
//! | WNPE  | ver   | flags | seq (u64)     | client tx     | server rx     | server tx     | padding…
//! ```
//! Flags: 1 = reply, 2 = short (answer with the header only), 4 = train (see
//! [`TrainRequest`]: 12 more bytes after the header), 8 = count (see [`Count`]: the reply
//! carries, in the 8 bytes after the header, how many probes the server has had from this
//! client's address and port).
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
}
