//! What the `path` and `net` commands print: plans, link settings and the emulator's
//! counters, as text and as JSON, and the warning when the emulator fell behind.

use crate::export::ExportStats;
use crate::plan::Plan;
use crate::topo::Topology;
use serde_json::{json, Value};
use std::io::Write;
use wanperf_emu::fabric::LinkStats;
use wanperf_emu::path::PathStats;
use wanperf_proto::units::{fmt_bytes, fmt_rate};

/// Where the path's emulator fell behind its schedule, if it did.
pub fn path_behind(s: &PathStats) -> Option<wanperf_emu::fabric::Behind> {
    let link = wanperf_emu::fabric::LinkStats { name: "the path".into(), ab: s.up.clone(), ba: s.down.clone() };
    wanperf_emu::fabric::fell_behind(std::slice::from_ref(&link))
}

/// What is said when the emulator fell behind (`dirs`: the names of the link's two
/// directions); printed under the counters after "warning: ", and stored with a study's cell.
pub fn behind_warning(b: &wanperf_emu::fabric::Behind, dirs: [&str; 2]) -> String {
    let what = if b.unread_drops > 0 {
        format!(
            "{} packet(s) were dropped by the sending device before the emulator read them (losses the configured \
             network did not make; lateness p99 {:.1} ms)",
            b.unread_drops,
            b.p99_us / 1000.0
        )
    } else {
        format!("1 % of the packets left {:.1} ms or more late", b.p99_us / 1000.0)
    };
    format!(
        "the emulator fell behind its schedule on {} ({}): {what}. \
         The offered packet rate exceeded what this machine emulates, or other work took the emulator's CPU: \
         what was measured through it is slower than the configured network (docs/emulator.md, \"Packet-rate ceiling\")",
        b.link,
        dirs[b.dir.min(1)],
    )
}

/// What is said when a network's emulator fell behind ([`behind_warning`], its directions
/// named by their nodes), if it did.
pub fn net_behind(t: &Topology, stats: &[wanperf_emu::fabric::LinkStats]) -> Option<String> {
    let b = wanperf_emu::fabric::fell_behind(stats)?;
    let l = t.links.iter().find(|l| l.name == b.link)?;
    let (a, z) = (&t.nodes[l.a].name, &t.nodes[l.b].name);
    Some(behind_warning(&b, [&format!("{a} → {z}"), &format!("{z} → {a}")]))
}

/// The counters as a readable table.
pub fn print_stats_to(s: &PathStats, out: &mut dyn std::io::Write) {
    let _ = writeln!(out, "path counters:");
    for (name, d) in [("left → right", &s.up), ("right → left", &s.down)] {
        for (class, c) in &d.classes {
            if c.packets_in == 0 {
                continue;
            }
            let mean = if c.dequeued > 0 { c.sum_queue_delay_ns as f64 / c.dequeued as f64 / 1e6 } else { 0.0 };
            let _ = writeln!(
                out,
                "  {name} {class}: {} pkts ({}) in, {} pkts ({}) out; drops: queue {}, aqm {}, policer {}, random {}; remarked {}; queue delay mean {mean:.2} ms, max {:.2} ms",
                c.packets_in,
                fmt_bytes(c.bytes_in),
                c.packets_out,
                fmt_bytes(c.bytes_out),
                c.queue_drops,
                c.aqm_drops,
                c.policer_drops,
                c.random_losses,
                c.remarks,
                c.max_queue_delay_ns as f64 / 1e6,
            );
        }
        let _ = writeln!(
            out,
            "  {name} emulator lateness: p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs; dropped unread by the sending device: {} pkts",
            d.lateness.p50_us, d.lateness.p99_us, d.lateness.max_us, d.unread_drops
        );
    }
    if let Some(b) = path_behind(s) {
        let _ = writeln!(out, "warning: {}", behind_warning(&b, ["left → right", "right → left"]));
    }
}

/// The plan as JSON: nodes with their interfaces, links, routes.
pub fn plan_json(t: &Topology, p: &Plan) -> Value {
    let nodes: Vec<Value> = t
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let ifs: Vec<Value> = p
                .ifaces_of(i)
                .map(|f| json!({"dev": f.dev, "link": t.links[f.link].name, "ipv4": f.v4, "ipv6": f.v6, "mtu": f.mtu}))
                .collect();
            json!({"name": n.name, "kind": if n.is_router() {"router"} else {"host"}, "interfaces": ifs})
        })
        .collect();
    let links: Vec<Value> = t
        .links
        .iter()
        .map(|l| json!({"name": l.name, "a": t.nodes[l.a].name, "b": t.nodes[l.b].name, "ab": l.ab, "ba": l.ba, "mtu": l.mtu, "cost": l.cost}))
        .collect();
    let routes: Vec<Value> = p
        .routes
        .iter()
        .map(|r| {
            let mut v = json!({"node": t.nodes[r.node].name, "dst": format!("{}/{}", r.dst, r.prefix), "via": r.via, "dev": p.ifaces[r.iface].dev});
            if !r.more.is_empty() {
                v["ecmp"] = r.more.iter().map(|&(i, via)| json!({"via": via, "dev": p.ifaces[i].dev})).collect();
            }
            v
        })
        .collect();
    json!({"name": t.name, "nodes": nodes, "links": links, "routes": routes})
}

pub fn describe_dir(d: &wanperf_emu::config::DirConfig) -> String {
    let rate = match &d.rate {
        wanperf_emu::config::Rate::Unlimited => "unlimited".to_string(),
        wanperf_emu::config::Rate::Constant(b) => fmt_rate(*b as f64),
        wanperf_emu::config::Rate::Trace(t) => format!("trace (mean {})", fmt_rate(t.mean_bps())),
    };
    format!("{} ms, {rate}", d.delay_ns as f64 / 1e6)
}

/// The plan as text: a line per node with its addresses, a line per link.
pub fn print_plan(t: &Topology, p: &Plan, out: &mut dyn Write) {
    let _ = writeln!(
        out,
        "network `{}`: {} hosts, {} routers, {} links",
        t.name,
        t.hosts().count(),
        t.nodes.len() - t.hosts().count(),
        t.links.len()
    );
    for (i, n) in t.nodes.iter().enumerate() {
        let addrs: Vec<String> =
            p.ifaces_of(i).map(|f| format!("{} {} ({})", f.dev, f.v4, t.links[f.link].name)).collect();
        let _ =
            writeln!(out, "  {:<7} {:<12} {}", if n.is_router() { "router" } else { "host" }, n.name, addrs.join(", "));
    }
    for l in &t.links {
        let _ = writeln!(
            out,
            "  link {:<20} {} → {}: {}; {} → {}: {}",
            l.name,
            t.nodes[l.a].name,
            t.nodes[l.b].name,
            describe_dir(&l.ab),
            t.nodes[l.b].name,
            t.nodes[l.a].name,
            describe_dir(&l.ba)
        );
    }
}

/// One direction's counters as text: packets and bytes, drops by cause, queue delay, the
/// busiest second and the last one, cross traffic, and how late the emulator sent packets
/// past their due time (a network that is late by a millisecond is not the one configured).
pub fn dir_counters(d: &wanperf_emu::fabric::DirStats) -> String {
    let served = d.total(|c| c.dequeued);
    let mean = if served > 0 { d.total(|c| c.sum_queue_delay_ns) as f64 / served as f64 / 1e6 } else { 0.0 };
    let maxq = d.classes.values().map(|c| c.max_queue_delay_ns).max().unwrap_or(0) as f64 / 1e6;
    let second = |b: Option<&u64>| fmt_rate(b.copied().unwrap_or(0) as f64 * 8.0);
    format!(
        "{} pkts ({}) in, {} out; drops: queue {}, aqm {}, policer {}, random {}; queue delay mean {mean:.2} ms, max {maxq:.2} ms; peak {}, last second {}{}; emulator late p99 {:.0} µs, max {:.0} µs{}",
        d.total(|c| c.packets_in),
        fmt_bytes(d.total(|c| c.bytes_in)),
        d.total(|c| c.packets_out),
        d.total(|c| c.queue_drops),
        d.total(|c| c.aqm_drops),
        d.total(|c| c.policer_drops),
        d.total(|c| c.random_losses),
        second(d.per_second_bytes.iter().max()),
        second(d.per_second_bytes.last()),
        if d.injected > 0 { format!("; {} cross-traffic pkts", d.injected) } else { String::new() },
        d.lateness.p99_us,
        d.lateness.max_us,
        if d.unread_drops > 0 { format!("; {} pkts dropped unread by the sending device", d.unread_drops) } else { String::new() },
    )
}

pub fn print_stats(
    t: &Topology,
    (stats, export): &(Vec<LinkStats>, Option<ExportStats>),
    json_out: bool,
    out: &mut dyn Write,
) {
    if json_out {
        let behind = wanperf_emu::fabric::fell_behind(stats);
        let not_acted = links_not_acted(t, stats);
        let v = json!({"event": "net_stats", "links": stats, "export": export, "fell_behind": behind, "not_acted": not_acted});
        let _ = writeln!(out, "{v}");
        return;
    }
    if let (Some(e), Some(cfg)) = (export, &t.export) {
        let to: Vec<String> = cfg.collectors.iter().map(|c| c.to_string()).collect();
        let _ = writeln!(
            out,
            "flow export ({}): {} records ({} pkts, {} B) in {} messages to {}{}{}",
            match cfg.format {
                wanperf_flows::export::Format::Ipfix => "IPFIX",
                wanperf_flows::export::Format::V9 => "NetFlow v9",
            },
            e.records,
            e.packets,
            e.bytes,
            e.messages,
            to.join(", "),
            if e.send_errors > 0 { format!("; {} sends failed", e.send_errors) } else { String::new() },
            if e.non_ip_packets > 0 {
                format!("; {} non-IP pkts not exported", e.non_ip_packets)
            } else {
                String::new()
            },
        );
    }
    let _ = writeln!(out, "link counters:");
    for (l, s) in t.links.iter().zip(stats) {
        for (from, to, d) in [(l.a, l.b, &s.ab), (l.b, l.a, &s.ba)] {
            if d.total(|c| c.packets_in) > 0 {
                let _ =
                    writeln!(out, "  {} {} → {}: {}", l.name, t.nodes[from].name, t.nodes[to].name, dir_counters(d));
            }
        }
    }
    print_not_acted(&links_not_acted(t, stats), false, out);
    if let Some(w) = net_behind(t, stats) {
        let _ = writeln!(out, "warning: {w}");
    }
}

/// What a path's flow exporter sent.
pub fn print_export(e: Option<&ExportStats>, json: bool, out: &mut dyn Write) {
    let Some(e) = e else { return };
    if json {
        let _ = writeln!(out, "{}", json!({"event": "flow_export", "export": e}));
    } else {
        let _ = writeln!(
            out,
            "flow export: {} records ({} pkts, {} B) in {} messages{}",
            e.records,
            e.packets,
            e.bytes,
            e.messages,
            if e.send_errors > 0 { format!("; {} sends failed", e.send_errors) } else { String::new() }
        );
    }
}

/// A path's counters, as JSON or as text.
pub fn print_path_stats(s: &PathStats, json: bool, out: &mut dyn Write) {
    if json {
        let _ = writeln!(out, "{}", json!({"event": "path", "stats": s, "fell_behind": path_behind(s)}));
    } else {
        print_stats_to(s, out);
    }
}

/// A network's links' counters as the daemon replies them (`net stats`, `net down`).
pub fn print_links(name: &str, stats: &[LinkStats], export: Option<&ExportStats>, json: bool, out: &mut dyn Write) {
    if json {
        let behind = wanperf_emu::fabric::fell_behind(stats);
        let _ = writeln!(
            out,
            "{}",
            json!({"event": "net_stats", "name": name, "links": stats, "export": export, "fell_behind": behind})
        );
        return;
    }
    for s in stats {
        for (dir, d) in [("a → b", &s.ab), ("b → a", &s.ba)] {
            let _ = writeln!(out, "{:<20} {dir}: {}", s.name, dir_counters(d));
        }
    }
    if let Some(b) = wanperf_emu::fabric::fell_behind(stats) {
        let _ = writeln!(out, "warning: {}", behind_warning(&b, ["a → b", "b → a"]));
    }
}

/// Every node's routes, a line each (ECMP next hops after `|`).
pub fn print_routes(t: &Topology, p: &Plan, out: &mut dyn Write) {
    for (i, n) in t.nodes.iter().enumerate() {
        for r in p.routes.iter().filter(|r| r.node == i) {
            let more: String = r.more.iter().map(|&(i, via)| format!(" | via {via} dev {}", p.ifaces[i].dev)).collect();
            let _ = writeln!(
                out,
                "  route {:<12} {}/{} via {} dev {}{more}",
                n.name, r.dst, r.prefix, r.via, p.ifaces[r.iface].dev
            );
        }
    }
}

/// What a path's or network's configuration never did (see `wanperf_emu::acted`), as warnings.
pub fn print_not_acted(lines: &[String], json: bool, out: &mut dyn Write) {
    if lines.is_empty() {
        return;
    }
    if json {
        let _ = writeln!(out, "{}", json!({"event": "not_acted", "elements": lines}));
    } else {
        for l in lines {
            let _ = writeln!(out, "warning: {l}");
        }
    }
}

/// What each link's configuration in `t` never did, over the links' counters.
pub fn links_not_acted(t: &Topology, stats: &[LinkStats]) -> Vec<String> {
    let mut out = Vec::new();
    for (l, s) in t.links.iter().zip(stats) {
        let (a, b) = (&t.nodes[l.a].name, &t.nodes[l.b].name);
        let names = [format!("link {} {a} → {b}", l.name), format!("link {} {b} → {a}", l.name)];
        out.extend(wanperf_emu::acted::idle_both((&l.ab, &l.ba), (&s.ab, &s.ba), [&names[0], &names[1]]));
    }
    out
}

/// The address plan as `net show` and `net run` print it: a `net` record (`--json`), or the
/// table.
pub fn print_plan_as(t: &Topology, p: &Plan, json: bool, out: &mut dyn Write) {
    if json {
        let _ = writeln!(out, "{}", json!({"event": "net", "plan": plan_json(t, p)}));
    } else {
        print_plan(t, p, out);
    }
}

/// What a network run leaves when it ends ([`crate::netd::Session::finish`]): the links'
/// counters, the hosts' models, what the cross traffic carried, and what never acted.
pub fn print_end(
    t: &Topology,
    (links, export, traffic): (Vec<LinkStats>, Option<ExportStats>, Vec<crate::traffic::TrafficReport>),
    hosts: &[crate::run::HostReport],
    json: bool,
    out: &mut dyn Write,
) {
    print_stats(t, &(links, export), json, out);
    print_hosts(hosts, json, out);
    print_traffic(&traffic, json, out);
    let mut idle = hosts_not_acted(hosts);
    idle.extend(crate::traffic::traffic_not_acted(&traffic));
    print_not_acted(&idle, json, out);
}

/// What each cross-traffic entry did, one line each (`--json`: one `traffic` record).
pub fn print_traffic(reports: &[crate::traffic::TrafficReport], json: bool, out: &mut dyn Write) {
    if reports.is_empty() {
        return;
    }
    if json {
        let _ = writeln!(out, "{}", json!({"event": "traffic", "traffic": reports}));
        return;
    }
    for r in reports {
        let _ = writeln!(out, "{}", r.line());
    }
}

/// What each host's model did, one line per host (`--json`: one `hosts` record).
pub fn print_hosts(reports: &[crate::run::HostReport], json: bool, out: &mut dyn Write) {
    if reports.is_empty() {
        return;
    }
    if json {
        let _ = writeln!(out, "{}", json!({"event": "hosts", "hosts": reports}));
        return;
    }
    for r in reports {
        let mut parts = vec![r.described.clone()];
        if let Some(d) = &r.disk {
            parts.push(format!(
                "disks {}: {} read, {} written",
                d.disks.join(" "),
                fmt_bytes(d.done.read_bytes),
                fmt_bytes(d.done.write_bytes)
            ));
        }
        if let (Some(c), Some(cores)) = (&r.cpu, r.cpu_cores) {
            parts.push(format!(
                "CPU quota {cores} cores: throttled in {} of {} periods ({:.2} s waiting)",
                c.throttled, c.periods, c.throttled_s
            ));
        }
        if !r.settings.is_empty() {
            let s: Vec<String> = r.settings.iter().map(|(k, v)| format!("{} = {v}", k.replace('/', "."))).collect();
            parts.push(format!("kernel: {}", s.join(", ")));
        }
        for q in &r.queues {
            parts.push(format!(
                "{} queue ({}, txqueuelen {}): {} pkts sent, {} dropped when full (device {}, qdisc {}), {} requeued",
                q.dev,
                q.qdisc.kind,
                q.txqueuelen.map_or("default".into(), |n| n.to_string()),
                q.qdisc.packets,
                q.tx_dropped + q.qdisc.drops,
                q.tx_dropped,
                q.qdisc.drops,
                q.qdisc.requeues
            ));
        }
        let _ = writeln!(out, "host {}: {}", r.host, parts.join("; "));
    }
}

/// What a host's model never did: a CPU quota the host never ran into (no throttled period:
/// nothing it ran needed more), a disk limit no byte reached a disk under, a setting the
/// host's kernel does not hold.
pub fn hosts_not_acted(reports: &[crate::run::HostReport]) -> Vec<String> {
    let mut out = Vec::new();
    for r in reports {
        if let (Some(c), Some(cores)) = (&r.cpu, r.cpu_cores) {
            if c.throttled == 0 {
                out.push(format!(
                    "host {}: its CPU quota ({cores} cores) never throttled in {} periods: nothing it ran needed more, it never acted",
                    r.host, c.periods
                ));
            }
        }
        if let Some(d) = &r.disk {
            for (what, limit, bytes) in
                [("read", d.read_bps, d.done.read_bytes), ("write", d.write_bps, d.done.write_bytes)]
            {
                if let (Some(l), 0) = (limit, bytes) {
                    out.push(format!(
                        "host {}: its disk {what} limit ({}) never acted: no byte was {} a disk under it \
                         (page-cache hits, or buffered writes a v1 cgroup's writeback does not charge)",
                        r.host,
                        fmt_rate(l as f64),
                        if what == "read" { "read from" } else { "written to" },
                    ));
                }
            }
        }
        for (k, have, want) in &r.not_held {
            out.push(format!(
                "host {}: {} is `{have}` in its kernel, not the `{want}` its model set",
                r.host,
                k.replace('/', ".")
            ));
        }
    }
    out
}

/// `path presets`: each path preset's numbers and where they come from, two lines each.
pub fn path_presets() -> Vec<String> {
    wanperf_emu::presets::all()
        .into_iter()
        .map(|p| {
            format!(
                "{:<26} RTT {} ms, bottleneck {}, queue {}{}{}{}\n{:<26} {}",
                p.name,
                p.rtt_ms,
                fmt_rate(p.rate_bps as f64),
                fmt_bytes(p.queue_bytes as u64),
                p.policer.map_or(String::new(), |x| format!(
                    ", policer {} burst {}",
                    fmt_rate(x.rate_bps as f64),
                    fmt_bytes(x.burst_bytes)
                )),
                p.txqueuelen.map_or(String::new(), |q| format!(", txqueuelen {q}")),
                if p.loss > 0.0 { format!(", random loss {} % each way", p.loss * 100.0) } else { String::new() },
                "",
                p.source
            )
        })
        .collect()
}

/// `net presets [NAME]`: the list (a line each), or one preset's topology file; with `json`,
/// one record. The error names a preset that does not exist.
pub fn net_presets(name: Option<&str>, json_out: bool) -> Result<Vec<String>, String> {
    let as_json = |p: &crate::presets::NetPreset| json!({"name": p.name, "source": p.source, "topology": p.toml});
    Ok(match name {
        Some(n) => {
            let p = crate::presets::find(n).ok_or_else(|| format!("no preset `{n}` (see `wanperf net presets`)"))?;
            if json_out {
                vec![json!({"event": "net_preset", "preset": as_json(&p)}).to_string()]
            } else {
                vec![p.toml.trim_end_matches('\n').to_string()]
            }
        }
        None if json_out => {
            let all: Vec<Value> = crate::presets::all().iter().map(as_json).collect();
            vec![json!({"event": "net_presets", "presets": all}).to_string()]
        }
        None => crate::presets::all().iter().map(|p| format!("{:<24} {}", p.name, p.source)).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::{DiskReport, HostReport};

    fn host(disk: Option<DiskReport>) -> HostReport {
        HostReport {
            host: "right".into(),
            model: String::new(),
            described: String::new(),
            cpu: None,
            cpu_cores: None,
            disk,
            settings: Vec::new(),
            not_held: Vec::new(),
            queues: Vec::new(),
        }
    }

    #[test]
    fn a_disk_limit_no_byte_reached_never_acted() {
        let stats = |r, w| wanperf_host::cgroup::DiskStats { read_bytes: r, write_bytes: w };
        let d = |r, w| DiskReport {
            read_bps: Some(80_000_000),
            write_bps: None,
            done: stats(r, w),
            disks: vec!["254:0".into()],
        };
        let said = hosts_not_acted(&[host(Some(d(0, 25 << 20)))]);
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0]
            .starts_with("host right: its disk read limit (80.0 Mbit/s) never acted: no byte was read from a disk"));
        // Reads reached the disk: it acted; no write limit was set: nothing to say about writes.
        assert!(hosts_not_acted(&[host(Some(d(4096, 0)))]).is_empty());
        assert!(hosts_not_acted(&[host(None)]).is_empty());
    }
}
