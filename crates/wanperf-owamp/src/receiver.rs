//! A session's two ends, with the time passed in: the receiver's records (what came, when,
//! with what TTL; what never did) and the sender's plan (which packet is due, which were too
//! late to send and are skipped).

use crate::control::{Record, RequestSession, SessionEnd};
use crate::schedule::Schedule;
use wanperf_stamp::packet::{Auth, Test};

/// Most packets a session may have here (its records are kept in memory: about 40 octets
/// each).
pub const MAX_PACKETS: u32 = 10_000_000;

/// Why a test packet was not recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Shorter than 14 octets plus the session's padding.
    Short,
    /// A sequence number past the session's packets.
    OutOfRange,
    /// Its send time is more than the timeout away from its scheduled time or its arrival.
    OffSchedule,
    /// A second copy.
    Duplicate,
}

#[derive(Debug, Clone, Copy)]
struct Got {
    send_time: u64,
    send_error: u16,
    recv_time: u64,
    recv_error: u16,
    ttl: u8,
}

/// The receiving end of one session.
pub struct Receiver {
    scheduled: Vec<u64>,
    timeout: u64,
    padding: usize,
    got: Vec<Option<Got>>,
    /// Copies of packets already recorded.
    pub duplicates: u64,
}

impl Receiver {
    /// The receiver of `req` (its packets bounded by [`MAX_PACKETS`]).
    pub fn new(req: &RequestSession) -> Option<Receiver> {
        if req.packets > MAX_PACKETS {
            return None;
        }
        Some(Receiver {
            scheduled: Schedule::times(&req.slots, &req.sid, req.start_time, req.packets),
            timeout: req.timeout,
            padding: req.padding as usize,
            got: vec![None; req.packets as usize],
            duplicates: 0,
        })
    }

    /// When the session is over (NTP): the last packet's time plus the timeout.
    pub fn ends_at(&self) -> u64 {
        self.scheduled.last().copied().unwrap_or(0).saturating_add(self.timeout)
    }

    /// A test packet that arrived at `recv_time` (NTP) with this receive error estimate and
    /// TTL.
    pub fn arrive(&mut self, packet: &[u8], recv_time: u64, recv_error: u16, ttl: u8) -> Result<u32, Refused> {
        if packet.len() < 14 + self.padding {
            return Err(Refused::Short);
        }
        let (t, _) = Test::decode(packet, &Auth::Open).map_err(|_| Refused::Short)?;
        let Some(&sched) = self.scheduled.get(t.seq as usize) else { return Err(Refused::OutOfRange) };
        if t.timestamp.abs_diff(sched) > self.timeout || t.timestamp.abs_diff(recv_time) > self.timeout {
            return Err(Refused::OffSchedule);
        }
        let slot = &mut self.got[t.seq as usize];
        if slot.is_some() {
            self.duplicates += 1;
            return Err(Refused::Duplicate);
        }
        *slot = Some(Got { send_time: t.timestamp, send_error: t.error.to_bits(), recv_time, recv_error, ttl });
        Ok(t.seq)
    }

    /// The records of the packets up to `next_seq` (all of them when `None`): a lost one has
    /// its scheduled send time and no receive time.
    pub fn records(&self, next_seq: Option<u32>) -> Vec<Record> {
        let n = next_seq.map_or(self.got.len(), |s| (s as usize).min(self.got.len()));
        (0..n)
            .map(|i| match self.got[i] {
                Some(g) => Record {
                    seq: i as u32,
                    send_error: g.send_error,
                    recv_error: g.recv_error,
                    send_time: g.send_time,
                    recv_time: g.recv_time,
                    ttl: g.ttl,
                },
                None => Record {
                    seq: i as u32,
                    send_error: 1,
                    recv_error: 1,
                    send_time: self.scheduled[i],
                    recv_time: 0,
                    ttl: 255,
                },
            })
            .collect()
    }
}

/// The sending end of one session.
pub struct Sender {
    sid: [u8; 16],
    scheduled: Vec<u64>,
    timeout: u64,
    next: u32,
    skips: Vec<(u32, u32)>,
}

impl Sender {
    /// The sender of `req` (its packets bounded by [`MAX_PACKETS`]).
    pub fn new(req: &RequestSession) -> Option<Sender> {
        (req.packets <= MAX_PACKETS).then(|| Sender {
            sid: req.sid,
            scheduled: Schedule::times(&req.slots, &req.sid, req.start_time, req.packets),
            timeout: req.timeout,
            next: 0,
            skips: vec![],
        })
    }

    /// When the next packet is due (NTP), or `None` when all are sent.
    pub fn next_due(&self) -> Option<u64> {
        self.scheduled.get(self.next as usize).copied()
    }

    /// The packet to send at `now` (NTP), if one is due: its sequence number. Packets more
    /// than the timeout late are skipped (recorded as skip ranges), not sent.
    pub fn due(&mut self, now: u64) -> Option<u32> {
        while let Some(&t) = self.scheduled.get(self.next as usize) {
            if t > now {
                return None;
            }
            let seq = self.next;
            self.next += 1;
            if now - t > self.timeout {
                match self.skips.last_mut() {
                    Some((_, last)) if *last + 1 == seq => *last = seq,
                    _ => self.skips.push((seq, seq)),
                }
                continue;
            }
            return Some(seq);
        }
        None
    }

    /// All packets are sent (or skipped).
    pub fn done(&self) -> bool {
        self.next as usize >= self.scheduled.len()
    }

    /// The session's end, for Stop-Sessions.
    pub fn end(&self) -> SessionEnd {
        SessionEnd { sid: self.sid, next_seq: self.next, skips: self.skips.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::Slot;
    use crate::secs_to_num64;
    use wanperf_stamp::time::ErrorEstimate;

    const START: u64 = 3_900_000_000 << 32;

    fn req(packets: u32) -> RequestSession {
        RequestSession {
            conf_sender: false,
            conf_receiver: true,
            packets,
            sender: ("198.18.0.1".parse().unwrap(), 9000),
            receiver: ("198.18.0.2".parse().unwrap(), 0),
            sid: [9; 16],
            padding: 10,
            start_time: START,
            timeout: secs_to_num64(2.0),
            type_p: 0,
            slots: vec![Slot { exponential: true, param: secs_to_num64(0.1) }],
        }
    }

    fn packet(seq: u32, at: u64) -> Vec<u8> {
        let mut b = Vec::new();
        Test { seq, timestamp: at, error: ErrorEstimate::UNKNOWN, ssid: 0 }.encode(&mut b, &Auth::Open, &[], 24);
        b.truncate(24);
        b
    }

    #[test]
    fn a_sender_and_a_receiver_of_one_request_agree_on_every_time() {
        let r = req(50);
        let mut tx = Sender::new(&r).unwrap();
        let mut rx = Receiver::new(&r).unwrap();
        let oneway = secs_to_num64(0.030);
        // Walk virtual time in 1 ms steps; drop every 7th packet on the way.
        let mut now = START;
        while !tx.done() {
            while let Some(seq) = tx.due(now) {
                if seq % 7 != 3 {
                    assert_eq!(rx.arrive(&packet(seq, now), now + oneway, 1, 62), Ok(seq));
                }
            }
            now += secs_to_num64(0.001);
        }
        assert!(tx.end().skips.is_empty() && tx.end().next_seq == 50);
        let recs = rx.records(Some(tx.end().next_seq));
        assert_eq!(recs.len(), 50);
        for r in &recs {
            assert_eq!(r.lost(), r.seq % 7 == 3, "{r:?}");
            if !r.lost() {
                let d = crate::num64_to_secs(r.recv_time - r.send_time);
                assert!((d - 0.030).abs() < 1e-6, "{d}");
                assert_eq!(r.ttl, 62);
            }
        }
        assert!(rx.ends_at() > recs.last().unwrap().send_time);
    }

    #[test]
    fn packets_off_schedule_or_out_of_range_are_refused() {
        let r = req(5);
        let mut rx = Receiver::new(&r).unwrap();
        let t0 = Schedule::times(&r.slots, &r.sid, START, 1)[0];
        assert_eq!(rx.arrive(&packet(9, t0), t0, 1, 64), Err(Refused::OutOfRange));
        assert_eq!(
            rx.arrive(&packet(0, t0 + secs_to_num64(3.0)), t0 + secs_to_num64(3.0), 1, 64),
            Err(Refused::OffSchedule)
        );
        assert_eq!(rx.arrive(&packet(0, t0)[..20], t0, 1, 64), Err(Refused::Short));
        assert_eq!(rx.arrive(&packet(0, t0), t0, 1, 64), Ok(0));
        assert_eq!(rx.arrive(&packet(0, t0), t0, 1, 64), Err(Refused::Duplicate));
        assert_eq!(rx.duplicates, 1);
    }

    #[test]
    fn a_late_sender_skips_rather_than_sends_stale_packets() {
        let r = req(40);
        let mut tx = Sender::new(&r).unwrap();
        // Asleep for the first 3 s: what was due more than 2 s ago is skipped.
        let now = START + secs_to_num64(3.0);
        let mut sent = vec![];
        while let Some(s) = tx.due(now) {
            sent.push(s);
        }
        let end = tx.end();
        assert_eq!(end.skips.len(), 1);
        let (first, last) = end.skips[0];
        assert_eq!(first, 0);
        assert_eq!(sent.first().copied(), Some(last + 1));
        assert!(Sender::new(&RequestSession { packets: MAX_PACKETS + 1, ..r }).is_none());
    }
}
