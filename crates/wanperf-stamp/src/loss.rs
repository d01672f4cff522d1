//! Loss each way.
//!
//! A round trip that did not come back was lost on the way there or on the way back. A
//! stateful reflector numbers the packets it received in the session itself (RFC 8972 §4),
//! and a Direct Measurement TLV carries its receive counter: either tells how many of the
//! sender's packets up to an answered one reached it, so the rest of the losses up to there
//! happened on the way back. Packets after the last answer are lost in a direction nobody
//! can tell.

use serde::{Deserialize, Serialize};

/// One answered probe: the sender's number, the reflector's number and, when it sent a
/// Direct Measurement TLV, its receive counter (packets of the session it had received,
/// this one included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answered {
    /// The sender's sequence number.
    pub sender_seq: u32,
    /// The reflector's sequence number.
    pub reflector_seq: u32,
    /// The reflector's receive counter, if it reported one (non-zero).
    pub reflector_rx: Option<u32>,
}

/// Losses split by direction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Split {
    /// Probes up to and including the last answered one (the split's basis).
    pub basis: u64,
    /// Of those, lost on the way to the reflector.
    pub forward: u64,
    /// Of those, reflected but lost on the way back.
    pub reverse: u64,
    /// Lost after the last answer (direction unknown).
    pub unknown: u64,
    /// Forward loss, percent of `basis`.
    pub forward_pct: f64,
    /// Reverse loss, percent of the probes that reached the reflector.
    pub reverse_pct: f64,
}

/// The split for `sent` probes numbered from 0 and their unique answers; `None` when the
/// reflector's numbers say nothing (stateless: every reflector number equals the sender's,
/// and no receive counter came) or nothing was answered.
pub fn split(sent: u64, answers: &[Answered]) -> Option<Split> {
    let last = answers.iter().max_by_key(|a| a.sender_seq)?;
    let basis = u64::from(last.sender_seq) + 1;
    let reached = match last.reflector_rx {
        Some(rx) => u64::from(rx),
        None => {
            if answers.iter().all(|a| a.reflector_seq == a.sender_seq) {
                return None;
            }
            u64::from(last.reflector_seq) + 1
        }
    };
    let reached = reached.min(basis);
    let answered = answers.iter().filter(|a| u64::from(a.sender_seq) < basis).count() as u64;
    let forward = basis - reached;
    let reverse = reached.saturating_sub(answered);
    Some(Split {
        basis,
        forward,
        reverse,
        unknown: sent.saturating_sub(basis),
        forward_pct: 100.0 * forward as f64 / basis as f64,
        reverse_pct: if reached > 0 { 100.0 * reverse as f64 / reached as f64 } else { 0.0 },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A virtual session: which probes the forward and the reverse path drop; the answers a
    /// stateful reflector gives.
    fn session(sent: u32, fwd_drop: impl Fn(u32) -> bool, rev_drop: impl Fn(u32) -> bool, dm: bool) -> Vec<Answered> {
        let mut rx = 0u32;
        let mut out = vec![];
        for s in 0..sent {
            if fwd_drop(s) {
                continue;
            }
            rx += 1;
            if !rev_drop(s) {
                out.push(Answered { sender_seq: s, reflector_seq: rx - 1, reflector_rx: dm.then_some(rx) });
            }
        }
        out
    }

    #[test]
    fn a_stateful_reflectors_numbers_split_the_losses_exactly() {
        for dm in [false, true] {
            // Every 10th lost on the way there, every 7th of the rest on the way back; the
            // last five probes answered by nobody.
            let a = session(1000, |s| s % 10 == 3 || s >= 995, |s| s % 7 == 0, dm);
            let s = split(1000, &a).unwrap();
            let basis = u64::from(a.last().unwrap().sender_seq) + 1;
            let fwd = (0..basis as u32).filter(|s| s % 10 == 3).count() as u64;
            let rev = (0..basis as u32).filter(|s| s % 10 != 3 && s % 7 == 0).count() as u64;
            assert_eq!((s.basis, s.forward, s.reverse, s.unknown), (basis, fwd, rev, 1000 - basis), "dm {dm}");
        }
    }

    #[test]
    fn a_stateless_reflector_says_nothing_about_direction() {
        let a: Vec<Answered> = (0..100)
            .filter(|s| s % 5 != 0)
            .map(|s| Answered { sender_seq: s, reflector_seq: s, reflector_rx: None })
            .collect();
        assert_eq!(split(100, &a), None);
        assert_eq!(split(100, &[]), None);
    }

    #[test]
    fn no_loss_is_no_loss_either_way() {
        let a = session(50, |_| false, |_| false, false);
        let s = split(50, &a);
        // Stateful with nothing lost: every number matches, which reads as stateless.
        assert_eq!(s, None);
        let a = session(50, |_| false, |_| false, true);
        let s = split(50, &a).unwrap();
        assert_eq!((s.forward, s.reverse, s.unknown), (0, 0, 0));
    }
}
