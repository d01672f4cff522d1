//! The tables `wanperf flows top`, `mix`, `collect` and `exporters` print (pure: rows in,
//! lines out).

use std::io::Write;
use std::net::IpAddr;
use wanperf_archive::ExporterRow;
use wanperf_flows::{Key, MixRow, TopRow};

fn si(v: f64, unit: &str) -> String {
    let (d, p) = if v >= 1e12 {
        (1e12, "T")
    } else if v >= 1e9 {
        (1e9, "G")
    } else if v >= 1e6 {
        (1e6, "M")
    } else if v >= 1e3 {
        (1e3, "k")
    } else {
        (1.0, "")
    };
    format!("{:.2} {p}{unit}", v / d)
}

fn endpoint(a: Option<IpAddr>, port: Option<u16>) -> String {
    match a {
        Some(IpAddr::V6(v6)) => format!("[{v6}]:{}", port.unwrap_or(0)),
        Some(v4) => format!("{v4}:{}", port.unwrap_or(0)),
        None => String::new(),
    }
}

/// Top talkers as a table.
pub fn top_table(out: &mut dyn Write, key: Key, t: &[TopRow]) -> std::io::Result<()> {
    let head = match key {
        Key::Src => format!("{:<4} {:<40}", "rank", "source"),
        Key::Dst => format!("{:<4} {:<40}", "rank", "destination"),
        Key::Pair => format!("{:<4} {:<46} {:<46} {:>5}", "rank", "source:port", "destination:port", "proto"),
    };
    writeln!(out, "{head} {:>14} {:>14} {:>10} {:>7}", "bytes", "packets", "flows", "share")?;
    for r in t {
        let k = match key {
            Key::Src => format!("{:<4} {:<40}", r.rank, r.src.map(|x| x.to_string()).unwrap_or_default()),
            Key::Dst => format!("{:<4} {:<40}", r.rank, r.dst.map(|x| x.to_string()).unwrap_or_default()),
            Key::Pair => format!(
                "{:<4} {:<46} {:<46} {:>5}",
                r.rank,
                endpoint(r.src, r.sport),
                endpoint(r.dst, r.dport),
                r.proto.unwrap_or(0)
            ),
        };
        writeln!(
            out,
            "{k} {:>14} {:>14} {:>10.1} {:>6.1}%",
            si(r.bytes, "B"),
            si(r.packets, "pkt"),
            r.flows,
            r.share_pct
        )?;
    }
    Ok(())
}

/// The application mix as a table (`all_in`: no local networks given, so no in and out).
pub fn mix_table(out: &mut dyn Write, m: &[MixRow], all_in: bool) -> std::io::Result<()> {
    if all_in {
        writeln!(out, "{:<14} {:>14} {:>7} {:>10}", "application", "bytes", "share", "flows")?;
        for r in m {
            writeln!(out, "{:<14} {:>14} {:>6.1}% {:>10.1}", r.app, si(r.bytes_in, "B"), r.share_in_pct, r.flows)?;
        }
    } else {
        writeln!(
            out,
            "{:<14} {:>14} {:>7} {:>14} {:>7} {:>10}",
            "application", "in", "share", "out", "share", "flows"
        )?;
        for r in m {
            writeln!(
                out,
                "{:<14} {:>14} {:>6.1}% {:>14} {:>6.1}% {:>10.1}",
                r.app,
                si(r.bytes_in, "B"),
                r.share_in_pct,
                si(r.bytes_out, "B"),
                r.share_out_pct,
                r.flows
            )?;
        }
    }
    Ok(())
}

/// The exporters and what each sent, lost and mangled.
pub fn exporters_table(out: &mut dyn Write, ex: &[ExporterRow]) -> std::io::Result<()> {
    if ex.is_empty() {
        writeln!(out, "no exporter has sent anything")?;
        return Ok(());
    }
    writeln!(
        out,
        "{:<40} {:<11} {:>10} {:>10} {:>10} {:>9} {:>8} {:>9}",
        "exporter (domain)", "protocol", "datagrams", "records", "lost", "loss", "sampling", "malformed"
    )?;
    for e in ex {
        let loss = if e.expected > 0 { 100.0 * e.lost as f64 / e.expected as f64 } else { 0.0 };
        writeln!(
            out,
            "{:<40} {:<11} {:>10} {:>10} {:>10} {:>8.2}% {:>8} {:>9}",
            format!("{} ({})", e.exporter, e.domain),
            e.protocol,
            e.datagrams,
            e.records,
            format!("{} {}", e.lost, e.seq_unit),
            loss,
            format!("1:{}", e.sampling),
            e.malformed
        )?;
    }
    Ok(())
}

/// The last line of `flows collect`: what it stored, and what it could not read.
pub fn collect_end(end: &crate::collect::End) -> String {
    format!(
        "stored {} flow bin rows and {} interface counter samples; {} datagrams were not NetFlow/IPFIX/sFlow",
        end.rows_stored, end.counter_samples_stored, end.unknown_datagrams
    )
}
