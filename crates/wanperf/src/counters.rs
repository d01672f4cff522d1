//! The emulator's counters as the commands print them, and the warning when it fell behind
//! its schedule.

use wanperf_emu::path::PathStats;
use wanperf_proto::units::fmt_bytes;

/// Where the path's emulator fell behind its schedule, if it did.
pub fn path_behind(s: &PathStats) -> Option<wanperf_emu::fabric::Behind> {
    let link = wanperf_emu::fabric::LinkStats { name: "the path".into(), ab: s.up.clone(), ba: s.down.clone() };
    wanperf_emu::fabric::fell_behind(std::slice::from_ref(&link))
}

/// The warning printed under the counters when the emulator fell behind (`dirs`: the names
/// of the link's two directions).
pub fn behind_warning(b: &wanperf_emu::fabric::Behind, dirs: [&str; 2]) -> String {
    format!(
        "warning: the emulator fell behind its schedule on {} ({}): 1 % of the packets left {:.1} ms or more late. \
         The offered packet rate exceeded what this machine emulates, or other work took the emulator's CPU: \
         what was measured through it is slower than the configured network (docs/emulator.md, \"Packet-rate ceiling\")",
        b.link,
        dirs[b.dir.min(1)],
        b.p99_us / 1000.0
    )
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
            "  {name} emulator lateness: p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
            d.lateness.p50_us, d.lateness.p99_us, d.lateness.max_us
        );
    }
    if let Some(b) = path_behind(s) {
        let _ = writeln!(out, "{}", behind_warning(&b, ["left → right", "right → left"]));
    }
}
