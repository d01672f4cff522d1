//! The tables `wanperf capacity` and `wanperf trace` print: their reports as text (pure:
//! values in, lines out).

use crate::capacity::Capacity;
use crate::measure::{Bottleneck, Report as CapacityReport};
use crate::trace::Report as TraceReport;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use wanperf_proto::units::fmt_rate;

// ---- capacity ------------------------------------------------------------------------

fn range(lo: f64, hi: f64) -> String {
    format!("{} – {}", fmt_rate(lo), fmt_rate(hi))
}

/// A capacity estimate's row of the table, or why there is none.
fn capacity_row(out: &mut dyn Write, label: &str, c: Option<&Capacity>, why_not: &str) -> std::io::Result<()> {
    match c {
        // Span 0: from the recursive trains' length at the narrow link.
        Some(c) if c.span == 0 => writeln!(
            out,
            "  {label:<20} {:>12}   ({}; the recursive trains' length at the narrow link, {} trains)",
            fmt_rate(c.bps),
            range(c.low_bps, c.high_bps),
            c.in_mode
        )?,
        Some(c) => writeln!(
            out,
            "  {label:<20} {:>12}   ({}; windows of {} packets, {} of {} in the mode)",
            fmt_rate(c.bps),
            range(c.low_bps, c.high_bps),
            c.span + 1,
            c.in_mode,
            c.samples
        )?,
        None => writeln!(out, "  {label:<20} unknown ({why_not})")?,
    }
    Ok(())
}

/// The capacity trains' mode `p` set aside for `c`, when one was.
fn set_aside_row(out: &mut dyn Write, p: Option<&Capacity>, c: Option<&Capacity>) -> std::io::Result<()> {
    let (Some(p), Some(c)) = (p, c) else { return Ok(()) };
    let why = if p.bps > c.bps {
        "a faster mode of the capacity's trains (a link after the narrow one sent them on back to back)"
    } else {
        "a slower mode of the capacity's trains (cross traffic on a link after the narrow one came between them)"
    };
    writeln!(out, "  set aside            {}: {why}", fmt_rate(p.bps))?;
    Ok(())
}

/// An available-bandwidth estimate's row; `whose` says whose streams they were.
fn avail_row(out: &mut dyn Write, label: &str, a: &crate::capacity::Avail, whose: &str) -> std::io::Result<()> {
    if a.used == 0 {
        writeln!(
            out,
            "  {label:<20} {:>12}   (no cross traffic seen: none of {} streams{whose} up to {} was spread)",
            fmt_rate(a.bps),
            a.streams,
            fmt_rate(a.low_bps)
        )?;
    } else {
        writeln!(
            out,
            "  {label:<20} {:>12}   ({}; from {} of {} streams{whose}{})",
            fmt_rate(a.bps),
            range(a.low_bps, a.high_bps),
            a.used,
            a.streams,
            a.tight_capacity_bps.map_or(String::new(), |t| format!(", at the tight link's {}", fmt_rate(t)))
        )?;
    }
    Ok(())
}

/// The link into hop `ttl` in words (`far`: what the destination is).
fn hop_words(ttl: u8, destination: bool, address: Option<std::net::IpAddr>, far: &str) -> String {
    match (destination, address) {
        (true, _) => format!("the last link, into {far}"),
        (false, Some(a)) => format!("the link into hop {ttl} ({a})"),
        (false, None) => format!("the link into hop {ttl} (no answer from its router)"),
    }
}

/// The rows of a located bottleneck: where, a tight link, the gap per hop. `far` names the
/// destination.
fn bottleneck_rows(
    out: &mut dyn Write,
    label: &str,
    b: &Bottleneck,
    hops: Option<u8>,
    far: &str,
) -> std::io::Result<()> {
    let gap = b.location.gaps.iter().find(|g| g.ttl == b.ttl).map_or(0.0, |g| g.gap_us);
    writeln!(
        out,
        "  {label:<20} {}: the train is {:.0} µs long after it ({:.0} µs before)",
        hop_words(b.ttl, b.destination, b.address, far),
        gap,
        gap - b.location.growth_us
    )?;
    if let Some(t) = &b.tight {
        writeln!(out,
            "  tight link           {}: the train grew {:.0} % more there (cross traffic leaves less than the narrow link has)",
            hop_words(t.ttl, t.destination, t.address, far),
            (t.stretch - 1.0) * 100.0
        )?;
    }
    writeln!(out, "  {:>4}  {:<28} {:>12}", "hop", "router", "train gap")?;
    for g in &b.location.gaps {
        let who = if Some(g.ttl) == hops {
            far.to_string()
        } else {
            b.routers.iter().find(|x| x.0 == g.ttl).map_or("*".into(), |x| x.1.to_string())
        };
        writeln!(out, "  {:>4}  {:<28} {:>9.0} µs", g.ttl, who, g.gap_us)?;
    }
    Ok(())
}

/// `wanperf capacity`'s table.
pub fn capacity_table(out: &mut dyn Write, host: &str, dst: SocketAddr, r: &CapacityReport) -> std::io::Result<()> {
    writeln!(out, "capacity from here to {host} ({}), RTT {:.2} ms", dst.ip(), r.rtt_ms)?;
    capacity_row(out, "capacity", r.capacity.as_ref(), "too few trains arrived whole")?;
    set_aside_row(out, r.post_narrow.as_ref(), r.capacity.as_ref())?;
    match &r.available {
        Some(a) => avail_row(out, "available bandwidth", a, "")?,
        None if r.capacity.is_some() => writeln!(out, "  available bandwidth  not measured")?,
        None => {}
    }
    if let Some(rev) = &r.reverse {
        capacity_row(out, "capacity back", rev.capacity.as_ref(), rev.note.as_deref().unwrap_or("no estimate"))?;
        set_aside_row(out, rev.post_narrow.as_ref(), rev.capacity.as_ref())?;
        match &rev.available {
            Some(a) => avail_row(out, "available back", a, " from the server")?,
            None if rev.streams > 0 => {
                writeln!(out, "  available back       unknown (too few of the server's streams arrived whole)")?
            }
            None => {}
        }
    }
    match &r.bottleneck {
        Some(b) => bottleneck_rows(out, "bottleneck", b, r.hops, "the destination")?,
        None if r.rpts > 0 => writeln!(out, "  bottleneck           not located (routers did not answer the trains)")?,
        None => {}
    }
    if let Some(rev) = r.reverse.as_ref().filter(|x| x.rpts > 0) {
        match &rev.bottleneck {
            Some(b) => bottleneck_rows(out, "bottleneck back", b, rev.hops, "this host")?,
            None if rev.rpts_unreported == rev.rpts => writeln!(out,
                "  bottleneck back      not located (the server reported none of its recursive trains: a wanperf serve older than this client?)"
            )?,
            None => writeln!(out, "  bottleneck back      not located (routers did not answer the server's trains)")?,
        }
    }
    let mb = |b: u64| b as f64 / 1e6;
    writeln!(
        out,
        "  cost                 {:.2} MB in {:.1} s: capacity {:.2} MB ({} trains), back {:.2} MB ({} trains), \
         bottleneck {:.2} MB ({} trains), available {:.2} MB ({} streams){}; {} packets lost",
        mb(r.bytes_sent),
        r.seconds,
        mb(r.cost.capacity),
        r.trains,
        mb(r.cost.reverse),
        r.reverse.as_ref().map_or(0, |x| x.trains),
        mb(r.cost.bottleneck),
        r.rpts,
        mb(r.cost.available),
        r.streams,
        match r.reverse.as_ref().filter(|x| x.streams > 0) {
            Some(x) => format!(", available back {:.2} MB ({} streams)", mb(r.cost.available_back), x.streams),
            None => String::new(),
        } + &match r.reverse.as_ref().filter(|x| x.rpts > 0) {
            Some(x) => format!(", bottleneck back {:.2} MB ({} trains)", mb(r.cost.bottleneck_back), x.rpts),
            None => String::new(),
        },
        r.lost
    )?;
    Ok(())
}

// ---- trace ---------------------------------------------------------------------------

fn ms(x: f64) -> String {
    format!("{x:.2}")
}

/// `wanperf trace`'s table.
pub fn trace_table(out: &mut dyn Write, host: &str, dst: IpAddr, r: &TraceReport) -> std::io::Result<()> {
    writeln!(out, "trace to {host} ({dst}), {} rounds", r.rounds)?;
    writeln!(
        out,
        "{:>3}  {:<28} {:>7} {:>7} {:>5}  {:>8} {:>8} {:>8} {:>8}  note",
        "hop", "address", "loss", "path", "sent", "min ms", "med ms", "p90 ms", "max ms"
    )?;
    for h in &r.hops {
        let addr = match h.addrs.as_slice() {
            [] => "*".to_string(),
            [(a, _)] => a.to_string(),
            many => many.iter().map(|(a, n)| format!("{a} ({n})")).collect::<Vec<_>>().join(", "),
        };
        let (mn, md, p9, mx) = h.rtt_ms.as_ref().map_or(("-".into(), "-".into(), "-".into(), "-".into()), |x| {
            (ms(x.min), ms(x.median), ms(x.p90), ms(x.max))
        });
        let mut note = h.note.clone().unwrap_or_default();
        if let Some(m) = h.next_mtu {
            note = format!("{note}{}next link MTU {m} B", if note.is_empty() { "" } else { "; " });
        }
        if h.destination {
            note = format!("{note}{}destination", if note.is_empty() { "" } else { "; " });
        }
        writeln!(
            out,
            "{:>3}  {:<28} {:>6.1}% {:>6.1}% {:>5}  {mn:>8} {md:>8} {p9:>8} {mx:>8}  {note}",
            h.ttl, addr, h.loss_pct, h.path_loss_pct, h.sent
        )?;
    }
    if !r.reached {
        writeln!(out, "the destination did not answer")?;
    }
    if let Some(m) = r.path_mtu {
        writeln!(out, "path MTU {m} B")?;
    }
    for c in &r.route_changes {
        writeln!(out, "route change in round {}: hop {} was {}, now {}", c.round, c.ttl, c.before, c.after)?;
    }
    if let Some(w) = &r.warning {
        writeln!(out, "warning: {w}")?;
    }
    if let Some(w) = &r.one_way {
        writeln!(
            out,
            "to the destination and back: forward loss {:.1} % ({} of {} probes never reached the server), \
             reverse loss {:.1} % ({} of {} answers never came back)",
            w.forward_loss_pct,
            w.sent - w.arrived,
            w.sent,
            w.reverse_loss_pct,
            w.arrived - w.answered,
            w.arrived
        )?;
    }
    Ok(())
}
