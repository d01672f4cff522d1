//! What comes back for a probe, shared by every kind of probe: an extended socket error (an
//! ICMP answer read from the error queue) classified, what one read found, and waiting for a
//! socket to be ready.

use crate::trace::{Answer, Reply};
use wanperf_engine::sys::{SO_EE_ORIGIN_ICMP, SO_EE_ORIGIN_ICMP6};

/// What an extended socket error says about a probe.
pub fn classify(v6: bool, origin: u8, kind: u8, code: u8, info: u32) -> Option<Answer> {
    match (origin, v6) {
        (SO_EE_ORIGIN_ICMP, false) => match (kind, code) {
            (11, _) => Some(Answer::TimeExceeded),
            (3, 3) => Some(Answer::Reached),
            (3, 4) => Some(Answer::FragNeeded(info)),
            (3, c) => Some(Answer::Unreachable(c)),
            _ => None,
        },
        (SO_EE_ORIGIN_ICMP6, true) => match (kind, code) {
            (3, _) => Some(Answer::TimeExceeded),
            (1, 4) => Some(Answer::Reached),
            (1, c) => Some(Answer::Unreachable(c)),
            (2, _) => Some(Answer::FragNeeded(info)),
            _ => None,
        },
        _ => None,
    }
}

pub(crate) use wanperf_sys::poll_one;

/// What one read found.
pub enum Got {
    /// A reply to a probe.
    Reply(Reply),
    /// A send failed locally because the first link's MTU is smaller: that MTU.
    LocalMtu(u32),
    /// The `wanperf serve` at the destination answered a probe: the reply (its time less the
    /// server's turnaround) and the server's count of this trace's probes.
    Echo(Reply, u64),
    /// Something else (not ours, unparseable).
    Other,
}
