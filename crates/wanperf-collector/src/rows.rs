//! The flow core's values as the archive's rows and back: flow bins, interface counters and
//! exporters' counters (one place for both directions, so a renamed field fails to compile
//! here rather than drift between writer and reader).

use wanperf_archive::{CounterRow, ExporterRow, FlowRow};
use wanperf_flows::{BinKey, BinRow, Decoder, IfCounters};

/// A flow bin as stored.
pub fn flow_row(r: &BinRow) -> FlowRow {
    FlowRow {
        bin_unix: r.key.bin_ms as f64 / 1000.0,
        bin_s: r.bin_len_ms as f64 / 1000.0,
        exporter: r.key.exporter.to_string(),
        domain: i64::from(r.key.domain),
        src: r.key.src.to_string(),
        dst: r.key.dst.to_string(),
        proto: i64::from(r.key.proto),
        sport: i64::from(r.key.sport),
        dport: i64::from(r.key.dport),
        sampling: i64::from(r.key.sampling),
        bytes: r.bytes,
        packets: r.packets,
        flows: r.flows,
        raw_bytes: r.raw_bytes,
        raw_packets: r.raw_packets,
    }
}

/// A stored flow bin as the core's (None when a stored field does not fit it).
pub fn bin_row(r: &FlowRow) -> Option<BinRow> {
    Some(BinRow {
        key: BinKey {
            bin_ms: (r.bin_unix * 1000.0).round() as u64,
            exporter: r.exporter.parse().ok()?,
            domain: u32::try_from(r.domain).ok()?,
            src: r.src.parse().ok()?,
            dst: r.dst.parse().ok()?,
            proto: u8::try_from(r.proto).ok()?,
            sport: u16::try_from(r.sport).ok()?,
            dport: u16::try_from(r.dport).ok()?,
            sampling: u32::try_from(r.sampling).ok()?,
        },
        bin_len_ms: (r.bin_s * 1000.0).round() as u64,
        bytes: r.bytes,
        packets: r.packets,
        flows: r.flows,
        raw_bytes: r.raw_bytes,
        raw_packets: r.raw_packets,
    })
}

/// An interface reading as stored, with where it came from (`rtnetlink`, `snmp`, `sflow`).
pub fn counter_row(c: &IfCounters, source: &str) -> CounterRow {
    CounterRow {
        device: c.device.clone(),
        interface: c.interface.clone(),
        source: source.to_string(),
        at_unix: c.at_ms as f64 / 1000.0,
        speed_bps: c.speed_bps.map(|s| s as i64),
        in_octets: c.in_octets as i64,
        out_octets: c.out_octets as i64,
        in_errors: c.in_errors as i64,
        out_errors: c.out_errors as i64,
        in_drops: c.in_drops as i64,
        out_drops: c.out_drops as i64,
        width: i64::from(c.width),
    }
}

/// Stored sFlow counter samples and polled readings alike, as the pure core's readings.
pub fn if_counters(r: &CounterRow) -> IfCounters {
    IfCounters {
        device: r.device.clone(),
        interface: r.interface.clone(),
        at_ms: (r.at_unix * 1000.0).round() as u64,
        speed_bps: r.speed_bps.map(|s| s as u64),
        in_octets: r.in_octets as u64,
        out_octets: r.out_octets as u64,
        in_errors: r.in_errors as u64,
        out_errors: r.out_errors as u64,
        in_drops: r.in_drops as u64,
        out_drops: r.out_drops as u64,
        width: r.width as u8,
    }
}

/// The decoder's per-exporter counters as stored for session `session` (its start, Unix
/// seconds) at `now_unix`, with the collector's socket drops.
pub fn exporter_rows(d: &Decoder, session: f64, drops: u64, now_unix: f64) -> Vec<ExporterRow> {
    d.stats()
        .into_iter()
        .map(|s| ExporterRow {
            session_unix: session,
            exporter: s.exporter.to_string(),
            protocol: s.protocol.name().into(),
            domain: i64::from(s.domain),
            seq_unit: s.protocol.seq_unit().into(),
            datagrams: s.datagrams as i64,
            records: s.records as i64,
            malformed: s.malformed as i64,
            awaiting_template: s.awaiting_template as i64,
            expected: s.seq.expected as i64,
            lost: s.seq.lost as i64,
            resets: s.seq.resets as i64,
            sampling: i64::from(s.sampling),
            socket_drops: drops as i64,
            updated_unix: now_unix,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_go_to_the_archive_and_come_back_the_same() {
        let b = BinRow {
            key: BinKey {
                bin_ms: 1_700_000_100_000,
                exporter: "198.18.0.1".parse().unwrap(),
                domain: 3,
                src: "198.18.1.2".parse().unwrap(),
                dst: "fd57:414e::2".parse().unwrap(),
                proto: 17,
                sport: 5301,
                dport: 40000,
                sampling: 10,
            },
            bin_len_ms: 300_000,
            bytes: 1500.0,
            packets: 10.0,
            flows: 2.0,
            raw_bytes: 150.0,
            raw_packets: 1.0,
        };
        assert_eq!(bin_row(&flow_row(&b)), Some(b));
        let c = IfCounters {
            device: "r1".into(),
            interface: "wan0".into(),
            at_ms: 1_700_000_000_123,
            speed_bps: Some(25_000_000),
            in_octets: 1 << 40,
            out_octets: 7,
            in_errors: 1,
            out_errors: 2,
            in_drops: 3,
            out_drops: 4,
            width: 64,
        };
        let r = counter_row(&c, "sflow");
        assert_eq!(r.source, "sflow");
        assert_eq!(if_counters(&r), c);
    }
}
