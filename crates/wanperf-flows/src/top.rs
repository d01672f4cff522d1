//! The seed's questions of the flows: top sources, destinations and communicating pairs, and
//! the protocol/application mix, each in and out of the local networks.

use crate::bins::BinRow;
use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::IpAddr;

/// What the rows are grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Key {
    /// Source address.
    Src,
    /// Destination address.
    Dst,
    /// Source, destination, protocol and ports (nfdump's `record`).
    Pair,
}

/// What the rows are ranked by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// Bytes (sampling-corrected).
    Bytes,
    /// Packets (sampling-corrected).
    Packets,
    /// Flow records.
    Flows,
}

/// Traffic direction relative to the local networks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dir {
    /// Destination local, source not.
    In,
    /// Source local, destination not.
    Out,
}

/// The direction of a row (None: both ends local, or neither, or no local networks given).
pub fn direction(src: IpAddr, dst: IpAddr, local: &[IpNet]) -> Option<Dir> {
    let s = local.iter().any(|n| n.contains(&src));
    let d = local.iter().any(|n| n.contains(&dst));
    match (s, d) {
        (false, true) => Some(Dir::In),
        (true, false) => Some(Dir::Out),
        _ => None,
    }
}

/// One row of a top table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopRow {
    /// Rank, from 1.
    pub rank: usize,
    /// Source (src and pair tables).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub src: Option<IpAddr>,
    /// Destination (dst and pair tables).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dst: Option<IpAddr>,
    /// Protocol (pair table).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proto: Option<u8>,
    /// Source port (pair table).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sport: Option<u16>,
    /// Destination port (pair table).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dport: Option<u16>,
    /// Bytes.
    pub bytes: f64,
    /// Packets.
    pub packets: f64,
    /// Flow records.
    pub flows: f64,
    /// Share of the ranked metric over all rows considered, percent.
    pub share_pct: f64,
}

type GroupKey = (Option<IpAddr>, Option<IpAddr>, Option<u8>, Option<u16>, Option<u16>);

/// The top `n` groups of `rows` by `metric` (0: all), in `dir` when given; ties are broken by
/// the key in ascending order, so the same data always gives the same table.
pub fn top(rows: &[BinRow], key: Key, metric: Metric, dir: Option<Dir>, local: &[IpNet], n: usize) -> Vec<TopRow> {
    let mut groups: BTreeMap<GroupKey, [f64; 3]> = BTreeMap::new();
    for r in rows {
        let k = &r.key;
        if let Some(d) = dir {
            if direction(k.src, k.dst, local) != Some(d) {
                continue;
            }
        }
        let g = match key {
            Key::Src => (Some(k.src), None, None, None, None),
            Key::Dst => (None, Some(k.dst), None, None, None),
            Key::Pair => (Some(k.src), Some(k.dst), Some(k.proto), Some(k.sport), Some(k.dport)),
        };
        let e = groups.entry(g).or_default();
        e[0] += r.bytes;
        e[1] += r.packets;
        e[2] += r.flows;
    }
    let idx = match metric {
        Metric::Bytes => 0,
        Metric::Packets => 1,
        Metric::Flows => 2,
    };
    let total: f64 = groups.values().map(|v| v[idx]).sum();
    let mut v: Vec<(GroupKey, [f64; 3])> = groups.into_iter().collect();
    // Stable sort over key-ordered groups: equal values stay in key order.
    v.sort_by(|a, b| b.1[idx].total_cmp(&a.1[idx]));
    if n > 0 {
        v.truncate(n);
    }
    v.into_iter()
        .enumerate()
        .map(|(i, (g, s))| TopRow {
            rank: i + 1,
            src: g.0,
            dst: g.1,
            proto: g.2,
            sport: g.3,
            dport: g.4,
            bytes: s[0],
            packets: s[1],
            flows: s[2],
            share_pct: if total > 0.0 { 100.0 * s[idx] / total } else { 0.0 },
        })
        .collect()
}

/// One application of the protocol mix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MixRow {
    /// Application (`ssh`, `AFS`, `iperf3`, …) or `TCP other`, `UDP other`, `ICMP`, …
    pub app: String,
    /// Bytes into the local networks (all bytes when none are given).
    pub bytes_in: f64,
    /// Bytes out of the local networks.
    pub bytes_out: f64,
    /// Share of all bytes in, percent.
    pub share_in_pct: f64,
    /// Share of all bytes out, percent.
    pub share_out_pct: f64,
    /// Flow records.
    pub flows: f64,
}

/// Well-known services by (protocol, port). The seed's mix: FTP, ssh, Objectivity, AFS over UDP.
const SERVICES: &[(u8, u16, &str)] = &[
    (6, 20, "FTP data"),
    (6, 21, "FTP"),
    (6, 22, "ssh"),
    (6, 25, "SMTP"),
    (17, 53, "DNS"),
    (6, 53, "DNS"),
    (6, 80, "HTTP"),
    (17, 123, "NTP"),
    (17, 161, "SNMP"),
    (6, 443, "HTTPS"),
    (17, 443, "QUIC"),
    (6, 873, "rsync"),
    (6, 2049, "NFS"),
    (17, 2049, "NFS"),
    (6, 2811, "GridFTP"),
    (6, 5001, "iperf2"),
    (6, 5201, "iperf3"),
    (17, 5201, "iperf3"),
    (6, 5299, "wanperf"),
    (17, 5299, "wanperf"),
    (6, 6779, "Objectivity"),
    (17, 7000, "AFS"),
    (17, 7001, "AFS"),
    (17, 7002, "AFS"),
    (17, 7003, "AFS"),
    (17, 7005, "AFS"),
    (17, 7007, "AFS"),
];

/// The application a row belongs to.
pub fn app(proto: u8, sport: u16, dport: u16) -> String {
    for &(p, port, name) in SERVICES {
        if p == proto && (dport == port || sport == port) {
            return name.to_string();
        }
    }
    match proto {
        1 => "ICMP".into(),
        58 => "ICMPv6".into(),
        6 => "TCP other".into(),
        17 => "UDP other".into(),
        p => format!("IP proto {p}"),
    }
}

/// The application mix in and out, by bytes (largest total first, then by name).
pub fn mix(rows: &[BinRow], local: &[IpNet]) -> Vec<MixRow> {
    let mut m: BTreeMap<String, [f64; 3]> = BTreeMap::new();
    for r in rows {
        let k = &r.key;
        let e = m.entry(app(k.proto, k.sport, k.dport)).or_default();
        match (local.is_empty(), direction(k.src, k.dst, local)) {
            (true, _) | (false, Some(Dir::In)) => e[0] += r.bytes,
            (false, Some(Dir::Out)) => e[1] += r.bytes,
            (false, None) => {}
        }
        e[2] += r.flows;
    }
    let tin: f64 = m.values().map(|v| v[0]).sum();
    let tout: f64 = m.values().map(|v| v[1]).sum();
    let mut v: Vec<MixRow> = m
        .into_iter()
        .map(|(app, s)| MixRow {
            app,
            bytes_in: s[0],
            bytes_out: s[1],
            share_in_pct: if tin > 0.0 { 100.0 * s[0] / tin } else { 0.0 },
            share_out_pct: if tout > 0.0 { 100.0 * s[1] / tout } else { 0.0 },
            flows: s[2],
        })
        .collect();
    v.sort_by(|a, b| (b.bytes_in + b.bytes_out).total_cmp(&(a.bytes_in + a.bytes_out)));
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bins::{BinKey, BinRow};

    fn row(src: [u8; 4], dst: [u8; 4], proto: u8, sport: u16, dport: u16, bytes: f64) -> BinRow {
        BinRow {
            key: BinKey {
                bin_ms: 0,
                exporter: [198, 18, 0, 1].into(),
                domain: 0,
                src: src.into(),
                dst: dst.into(),
                proto,
                sport,
                dport,
                sampling: 1,
            },
            bin_len_ms: 300_000,
            bytes,
            packets: bytes / 100.0,
            flows: 1.0,
            raw_bytes: bytes,
            raw_packets: bytes / 100.0,
        }
    }

    #[test]
    fn top_sources_sum_over_rows_and_ties_break_by_address() {
        let rows = vec![
            row([10, 0, 0, 2], [10, 9, 0, 1], 6, 1, 22, 500.0),
            row([10, 0, 0, 1], [10, 9, 0, 1], 6, 1, 22, 300.0),
            row([10, 0, 0, 1], [10, 9, 0, 2], 17, 7001, 7000, 200.0),
            row([10, 0, 0, 3], [10, 9, 0, 2], 6, 1, 80, 100.0),
        ];
        let t = top(&rows, Key::Src, Metric::Bytes, None, &[], 0);
        let order: Vec<String> = t.iter().map(|r| r.src.unwrap().to_string()).collect();
        // 10.0.0.1 and 10.0.0.2 tie at 500: the lower address first.
        assert_eq!(order, ["10.0.0.1", "10.0.0.2", "10.0.0.3"]);
        assert!((t[0].share_pct - 500.0 / 11.0).abs() < 1e-9);
        let p = top(&rows, Key::Pair, Metric::Flows, None, &[], 2);
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].dport, Some(22));
    }

    #[test]
    fn direction_and_mix_follow_the_local_networks() {
        let local: Vec<IpNet> = vec!["10.0.0.0/24".parse().unwrap()];
        let rows = vec![
            row([10, 0, 0, 1], [192, 0, 2, 1], 6, 40000, 22, 1000.0),
            row([192, 0, 2, 1], [10, 0, 0, 1], 17, 7001, 7000, 400.0),
            row([192, 0, 2, 1], [10, 0, 0, 1], 6, 50000, 5201, 600.0),
        ];
        let out = top(&rows, Key::Dst, Metric::Bytes, Some(Dir::Out), &local, 0);
        assert_eq!(out.len(), 1);
        let m = mix(&rows, &local);
        assert_eq!(m[0].app, "ssh");
        assert!((m[0].share_out_pct - 100.0).abs() < 1e-9);
        let afs = m.iter().find(|r| r.app == "AFS").unwrap();
        assert!((afs.share_in_pct - 40.0).abs() < 1e-9);
    }
}
