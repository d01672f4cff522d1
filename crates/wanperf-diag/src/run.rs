//! Runs a trace: rounds of probes on a schedule, replies read as they come, the pure
//! [`Trace`] fed with both.

use crate::probe::{realtime_ns, Got, Method, Prober};
use crate::trace::{Plan, Report, Trace};
use std::io;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Settings of a trace run.
#[derive(Debug, Clone)]
pub struct Options {
    /// UDP, ICMP echo or TCP SYN.
    pub method: Method,
    /// UDP or TCP destination port.
    pub port: u16,
    /// Rounds.
    pub rounds: u32,
    /// Time between rounds.
    pub interval: Duration,
    /// A probe unanswered after this long is lost.
    pub wait: Duration,
    /// First TTL.
    pub first_ttl: u8,
    /// Last TTL while the destination has not answered.
    pub max_ttl: u8,
    /// Probe size on the wire, bytes.
    pub size: usize,
    /// Path MTU discovery: DF set, the size lowered as routers report smaller MTUs.
    pub mtu: bool,
    /// Time between the probes of one round.
    pub gap: Duration,
    /// Flow identifiers the rounds take in turn (1: one flow, Paris-style; more: the paths
    /// of per-flow load balancers). UDP varies the destination port, TCP the source port.
    pub flows: u16,
    /// UDP probes go to a `wanperf serve` on `port`, which answers and counts them.
    pub server: bool,
}

/// TTLs probed beyond the farthest answer while the destination is unknown.
const WINDOW: u8 = 3;

fn pump(p: &mut Prober, t: &mut Trace, until: Instant) -> io::Result<()> {
    loop {
        while let Some(g) = p.read()? {
            match g {
                Got::Reply(r) => t.reply(r),
                Got::Echo(r, count) => {
                    t.reply(r);
                    t.server_count(r.seq, count);
                }
                Got::LocalMtu(m) => t.local_mtu(m),
                Got::Other => {}
            }
        }
        t.expire(realtime_ns());
        let now = Instant::now();
        if now >= until {
            return Ok(());
        }
        let ms = (until - now).as_micros().div_ceil(1000).min(100) as i32;
        p.wait(ms)?;
    }
}

/// Traces the path to `dst`; `on_round` sees the trace after each round and may stop it by
/// returning false.
pub fn trace(dst: IpAddr, o: &Options, mut on_round: impl FnMut(u32, &Trace) -> bool) -> io::Result<Report> {
    let mut p = Prober::new(dst, o.method, o.port, o.mtu, o.server)?;
    let mut t = Trace::new(Plan {
        first_ttl: o.first_ttl,
        max_ttl: o.max_ttl,
        wait_ns: o.wait.as_nanos() as u64,
        flows: o.flows.max(1),
        server: o.server,
        interval_ns: o.interval.as_nanos() as u64,
    });
    let start = Instant::now();
    let mut last_send = start;
    for round in 1..=o.rounds {
        pump(&mut p, &mut t, start + o.interval * (round - 1))?;
        for ttl in t.ttls() {
            // Until the destination is known, at most WINDOW TTLs beyond the farthest answer:
            // a burst far past the destination would spend its ICMP rate limit's tokens.
            while t.ttls().contains(&ttl) && ttl > t.frontier().saturating_add(WINDOW) && t.expire(realtime_ns()) > 0 {
                pump(&mut p, &mut t, Instant::now() + Duration::from_millis(5))?;
            }
            // TCP probes go one at a time: until the last one's answer, or its wait is over.
            while p.busy() && last_send + o.wait > Instant::now() {
                pump(&mut p, &mut t, (Instant::now() + Duration::from_millis(5)).min(last_send + o.wait))?;
            }
            // Once the destination is known, probes beyond it are not sent.
            if !t.ttls().contains(&ttl) {
                break;
            }
            let size = t.size().unwrap_or(o.size);
            match p.send(ttl, t.next_seq(), size, t.flow(round)) {
                Ok(at) => {
                    t.sent(round, ttl, at, size);
                }
                // Larger than the first link's MTU: the error queue says which, the next probe
                // is smaller.
                Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) => {}
                Err(e) => return Err(e),
            }
            last_send = Instant::now();
            pump(&mut p, &mut t, last_send + o.gap)?;
        }
        if !on_round(round, &t) {
            break;
        }
    }
    // The last round's stragglers.
    let end = last_send + o.wait;
    while Instant::now() < end && (t.expire(realtime_ns()) > 0 || p.busy()) {
        pump(&mut p, &mut t, (Instant::now() + Duration::from_millis(20)).min(end))?;
    }
    t.expire(u64::MAX / 2);
    Ok(t.report())
}
