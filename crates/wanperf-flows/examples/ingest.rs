//! Decoder and binner cost per record, without sockets: the UDP payloads of a capture (classic
//! pcap, Ethernet or raw IP) fed to one `Decoder` and one `Binner` again and again.
//!
//!     cargo run --release -p wanperf-flows --example ingest -- export.pcap [loops]
//!
//! Prints nanoseconds per record for decoding alone and for decoding and binning (a developer's
//! view of what `bench/flows.sh` measures end to end, where the socket's cost is added).

use std::net::IpAddr;
use std::time::Instant;
use wanperf_flows::{Binner, Decoder};

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: ingest FILE.pcap [loops]");
        std::process::exit(2);
    };
    let loops: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(200);
    let data = match std::fs::read(&path) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("ingest: cannot read {path}: {e}");
            std::process::exit(1);
        }
    };
    let datagrams = udp_payloads(&data);
    if datagrams.is_empty() {
        eprintln!("ingest: no UDP datagrams in {path}");
        std::process::exit(1);
    }
    for bin in [false, true] {
        let mut d = Decoder::new();
        let mut binner = Binner::new(300_000);
        let (mut flows, mut counters) = (Vec::new(), Vec::new());
        let mut records = 0usize;
        let t = Instant::now();
        for i in 0..loops {
            for (from, p) in &datagrams {
                flows.clear();
                counters.clear();
                records += d.feed(*from, 1_700_000_000_000 + i as u64, p, &mut flows, &mut counters);
                if bin {
                    for f in &flows {
                        binner.add(f);
                    }
                }
            }
        }
        let ns = t.elapsed().as_nanos() as f64;
        println!(
            "{:<16} {records} records in {:.3} s: {:.1} ns/record, {:.2} M records/s ({} rows held)",
            if bin { "decode + bin" } else { "decode" },
            ns / 1e9,
            ns / records.max(1) as f64,
            records as f64 / ns * 1e3,
            binner.len()
        );
    }
}

/// (source address, UDP payload) of every IPv4/UDP packet in a classic pcap file.
fn udp_payloads(d: &[u8]) -> Vec<(IpAddr, Vec<u8>)> {
    let mut out = Vec::new();
    if d.len() < 24 {
        return out;
    }
    let le = d[0..4] == [0xd4, 0xc3, 0xb2, 0xa1] || d[0..4] == [0x4d, 0x3c, 0xb2, 0xa1];
    let u32_at = |b: &[u8]| {
        let a = [b[0], b[1], b[2], b[3]];
        if le {
            u32::from_le_bytes(a)
        } else {
            u32::from_be_bytes(a)
        }
    };
    let link = u32_at(&d[20..24]);
    let mut at = 24;
    while at + 16 <= d.len() {
        let caplen = u32_at(&d[at + 8..at + 12]) as usize;
        let Some(frame) = d.get(at + 16..at + 16 + caplen) else { break };
        at += 16 + caplen;
        let sliced = match link {
            1 => etherparse::SlicedPacket::from_ethernet(frame),
            _ => etherparse::SlicedPacket::from_ip(frame),
        };
        let Ok(p) = sliced else { continue };
        let (Some(etherparse::NetSlice::Ipv4(ip)), Some(etherparse::TransportSlice::Udp(udp))) = (p.net, p.transport)
        else {
            continue;
        };
        out.push((IpAddr::V4(ip.header().source_addr()), udp.payload().to_vec()));
    }
    out
}
