//! The console's record sinks: the readable table (`TableSink`, iperf3's layout with
//! wanperf's columns), NDJSON (`JsonSink`, with a progress bar on a terminal) and `Recorder`
//! (keeps the records for `--save`). A closed pipe (`wanperf tput … | head`) ends the process
//! quietly with success.

use crate::client::Sink;
use std::io::{self, Write};
use wanperf_proto::msg::{Direction, TcpInfo, Transport};
use wanperf_proto::record::{EndRecord, IntervalRecord, StartRecord, Way};
use wanperf_proto::units::{fmt_bytes, fmt_rate, fmt_usecs};

/// Writes `text` and flushes; a closed pipe ends the process with success.
pub fn emit(out: &mut impl Write, text: &str) {
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        if e.kind() == io::ErrorKind::BrokenPipe {
            // The reader went away: nothing left to tell anyone.
            std::process::exit(0);
        }
    }
}

/// One line to standard output (`outln!`); a closed pipe ends the process with success.
pub fn line(args: std::fmt::Arguments) {
    emit(&mut io::stdout().lock(), &format!("{args}\n"));
}

/// NDJSON: one record per line, flushed as it happens. When stderr is a terminal, a progress
/// bar there shows how far the test is (the table output is its own progress display).
pub struct JsonSink<W: Write> {
    out: W,
    bar: Option<indicatif::ProgressBar>,
    by_bytes: bool,
    received: u64,
}

impl JsonSink<io::Stdout> {
    /// To standard output.
    pub fn stdout() -> Self {
        JsonSink { out: io::stdout(), bar: None, by_bytes: false, received: 0 }
    }
}

fn progress_bar(rec: &StartRecord) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if !io::stderr().is_terminal() {
        return None;
    }
    let (len, template) = match (rec.test.duration_s, rec.test.bytes) {
        (Some(d), _) => ((d * 10.0) as u64, format!("{{bar:30}} {{elapsed}} of {d} s, {{msg}}")),
        (_, Some(b)) => (b, "{bar:30} {bytes} of {total_bytes}, {msg}".to_string()),
        _ => return None,
    };
    let bar = indicatif::ProgressBar::with_draw_target(Some(len), indicatif::ProgressDrawTarget::stderr());
    if let Ok(style) = indicatif::ProgressStyle::with_template(&template) {
        bar.set_style(style);
    }
    Some(bar)
}

impl<W: Write> JsonSink<W> {
    fn line<T: serde::Serialize>(&mut self, v: &T) {
        let mut s = serde_json::to_string(v).unwrap_or_else(|e| format!("{{\"event\":\"error\",\"message\":\"{e}\"}}"));
        s.push('\n');
        emit(&mut self.out, &s);
    }
}

impl<W: Write> Sink for JsonSink<W> {
    fn start(&mut self, rec: &StartRecord) {
        self.bar = progress_bar(rec);
        self.by_bytes = rec.test.duration_s.is_none();
        self.line(rec);
    }
    fn interval(&mut self, rec: &IntervalRecord) {
        if let Some(bar) = &self.bar {
            self.received += rec.sum.received_bytes;
            bar.set_message(fmt_rate(rec.sum.throughput_bps));
            // Bars count tenths of a second for -t tests and bytes for -n tests.
            bar.set_position(if self.by_bytes { self.received } else { (rec.end_s * 10.0) as u64 });
        }
        self.line(rec);
    }
    fn end(&mut self, rec: &EndRecord) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        self.line(rec);
    }
    fn file(&mut self, rec: &wanperf_copy::spec::FileRecord) {
        self.line(rec);
    }
}

/// The human-readable table.
pub struct TableSink<W: Write> {
    out: W,
    udp: bool,
    bidir: bool,
    streams: usize,
    one_ended: bool,
}

impl TableSink<io::Stdout> {
    /// To standard output.
    pub fn stdout() -> Self {
        TableSink { out: io::stdout(), udp: false, bidir: false, streams: 1, one_ended: false }
    }
}

fn cwnd_text(t: &TcpInfo) -> String {
    fmt_bytes(u64::from(t.cwnd) * u64::from(t.snd_mss.max(1)))
}

impl<W: Write> TableSink<W> {
    fn id(&self, id: u32, way: Way) -> String {
        if self.bidir {
            format!("[{id:>3} {:<4}]", way.name())
        } else {
            format!("[{id:>3}]")
        }
    }

    fn header(&self) -> String {
        let id = if self.bidir { "[ ID dir ]" } else { "[ ID]" };
        if self.udp {
            format!(
                "{id} {:<17} {:>10} {:>13} {:>10} {:>16}\n",
                "Interval", "Transfer", "Goodput", "Jitter", "Lost/Total"
            )
        } else {
            format!(
                "{id} {:<17} {:>10} {:>13} {:>6} {:>10} {:>9}\n",
                "Interval", "Transfer", "Goodput", "Retr", "Cwnd", "RTT"
            )
        }
    }
}

impl<W: Write> Sink for TableSink<W> {
    fn start(&mut self, r: &StartRecord) {
        self.udp = r.test.transport == Transport::Udp;
        self.bidir = r.test.direction == Direction::Bidir;
        self.streams = r.test.streams as usize;
        let t = &r.test;
        let mut s = String::new();
        let sh = &r.server_host;
        self.one_ended = r.one_ended;
        if sh.kernel.is_empty() {
            s += &format!(
                "{} → {} ({} server)\n",
                r.version,
                r.server,
                if r.server_version.is_empty() { "unknown" } else { &r.server_version }
            );
        } else {
            s += &format!(
                "{} → {} ({}, Linux {}, {} CPU)\n",
                r.version,
                r.server,
                if r.server_version.is_empty() { "server" } else { &r.server_version },
                sh.kernel,
                sh.cpus
            );
        }
        if r.one_ended {
            s += "(the far end reports no intervals: streams it receives show what was sent; its counts come at the end)\n";
        }
        let dir = match t.direction {
            Direction::Up => "client → server",
            Direction::Down => "server → client (reverse)",
            Direction::Bidir => "both directions",
        };
        let len = match (t.duration_s, t.bytes) {
            (Some(d), _) => format!("{d} s"),
            (_, Some(b)) => fmt_bytes(b),
            _ => String::new(),
        };
        let quic = t.transport == Transport::Quic;
        // QUIC's congestion control is quinn's, not the kernel's.
        let cc = if quic {
            crate::client::quic_tuning(t).cc_name()
        } else {
            t.cc.clone().or_else(|| r.client_host.congestion_control.clone()).unwrap_or_else(|| "default".into())
        };
        let name = match t.transport {
            Transport::Tcp if t.mptcp => "MPTCP",
            Transport::Tcp => "TCP",
            Transport::Udp => "UDP",
            Transport::Quic => "QUIC",
        };
        s += &format!(
            "{name} {dir}, {} stream(s), {len}, block {}, window {}, cc {cc}{}{}\n",
            t.streams,
            if t.block_size == 0 { "adaptive".to_string() } else { fmt_bytes(u64::from(t.block_size)) },
            t.window.map_or_else(|| if quic { fmt_bytes(t.quic_window()) } else { "autotuned".into() }, fmt_bytes),
            t.rate_bps.map_or_else(String::new, |b| format!(", rate {}", fmt_rate(b as f64))),
            if t.zerocopy { ", zero-copy" } else { "" },
        );
        if let Some(i) = &r.client_host.interface {
            s += &format!(
                "local interface {} ({}), MTU {} B, txqueuelen {}\n",
                i.name,
                i.address,
                i.mtu.map_or("?".into(), |v| v.to_string()),
                i.txqueuelen.map_or("?".into(), |v| v.to_string())
            );
        }
        for c in &r.connections {
            s += &format!(
                "{} {} → {}  sndbuf {}  rcvbuf {}\n",
                self.id(c.id, c.direction),
                c.local,
                c.remote,
                c.sndbuf.map_or("?".into(), fmt_bytes),
                c.rcvbuf.map_or("?".into(), fmt_bytes)
            );
        }
        for w in &r.warnings {
            s += &format!("warning: {w}\n");
        }
        s += &self.header();
        emit(&mut self.out, &s);
    }

    fn interval(&mut self, r: &IntervalRecord) {
        if r.end_s - r.start_s < 1e-3 && r.sum.sent_bytes == 0 && r.sum.received_bytes == 0 {
            return;
        }
        let span = format!("{:>6.2}-{:<6.2} s", r.start_s, r.end_s);
        let omit = if r.omitted { "  (omitted)" } else { "" };
        let mut s = String::new();
        // One-ended (iperf3 far end): what the silent receiver got is not known yet.
        let moved = |st: &wanperf_proto::record::StreamInterval| {
            if self.one_ended && st.direction == Way::Up {
                st.sent_bytes
            } else {
                st.received_bytes
            }
        };
        for st in &r.streams {
            if self.udp {
                let (jit, lost, total) =
                    st.udp.as_ref().map_or((0.0, 0, 0), |u| (u.jitter_ms, u.lost, u.packets + u.lost));
                s += &format!(
                    "{} {span} {:>10} {:>13} {:>7.3} ms {:>16}{omit}\n",
                    self.id(st.id, st.direction),
                    fmt_bytes(moved(st)),
                    fmt_rate(st.throughput_bps),
                    jit,
                    format!("{lost}/{total}"),
                );
            } else {
                let (cwnd, rtt) = st
                    .tcp
                    .as_ref()
                    .map_or(("-".into(), "-".into()), |t| (cwnd_text(t), fmt_usecs(f64::from(t.srtt_us))));
                s += &format!(
                    "{} {span} {:>10} {:>13} {:>6} {:>10} {:>9}{omit}\n",
                    self.id(st.id, st.direction),
                    fmt_bytes(moved(st)),
                    fmt_rate(st.throughput_bps),
                    st.retransmits,
                    cwnd,
                    rtt
                );
            }
        }
        if r.streams.len() > 1 {
            let label = if self.bidir { "[SUM     ]" } else { "[SUM]" };
            s += &format!(
                "{label} {span} {:>10} {:>13} {:>6}{omit}\n",
                fmt_bytes(r.streams.iter().map(moved).sum()),
                fmt_rate(r.sum.throughput_bps),
                if self.udp { String::new() } else { r.sum.retransmits.to_string() }
            );
        }
        emit(&mut self.out, &s);
    }

    fn end(&mut self, r: &EndRecord) {
        let m = &r.summary;
        let mut s = String::from("- - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -\n");
        let id_hdr = if self.bidir { "[ ID dir ]" } else { "[ ID]" };
        s += &format!(
            "{id_hdr} {:<10} {:>10} {:>10} {:>13} {:>6}  sender at end\n",
            "Time",
            "Sent",
            "Received",
            "Goodput",
            if self.udp { "Lost" } else { "Retr" }
        );
        for st in &m.streams {
            let extra = match (&st.tcp, &st.udp) {
                (Some(t), _) => format!(
                    "cwnd {}, srtt {}, min_rtt {}",
                    cwnd_text(t),
                    fmt_usecs(f64::from(t.srtt_us)),
                    t.min_rtt_us.map_or("?".into(), |v| fmt_usecs(f64::from(v)))
                ),
                (None, Some(u)) => format!(
                    "jitter {:.3} ms, out of order {}, duplicates {}",
                    u.jitter_ms, u.out_of_order, u.duplicates
                ),
                _ => String::new(),
            };
            let loss = if self.udp { st.udp.as_ref().map_or(0, |u| u.lost) } else { st.retransmits };
            s += &format!(
                "{} {:>8.2} s {:>10} {:>10} {:>13} {:>6}  {extra}{}\n",
                self.id(st.id, st.direction),
                st.duration_s,
                fmt_bytes(st.sent_bytes),
                fmt_bytes(st.received_bytes),
                fmt_rate(st.throughput_bps),
                loss,
                st.error.as_ref().map_or_else(String::new, |e| format!("  error: {e}")),
            );
            // MPTCP: what each subflow carried (bytes its sender had acknowledged).
            for f in &st.subflows {
                s += &format!(
                    "      subflow {} → {}: {} acknowledged, {} retransmits, srtt {}\n",
                    f.local,
                    f.remote,
                    f.tcp.bytes_acked.map_or_else(|| "?".into(), fmt_bytes),
                    f.tcp.total_retrans,
                    fmt_usecs(f64::from(f.tcp.srtt_us))
                );
            }
        }
        if let Some(dirs) = &m.directions {
            for (w, d) in dirs {
                s += &format!(
                    "[SUM {:<4}] {:>8.2} s {:>10} {:>10} {:>13} {:>6}\n",
                    w.name(),
                    d.duration_s,
                    fmt_bytes(d.sent_bytes),
                    fmt_bytes(d.received_bytes),
                    fmt_rate(d.throughput_bps),
                    d.retransmits
                );
            }
        }
        if m.streams.len() > 1 || m.directions.is_some() {
            let label = if self.bidir { "[SUM     ]" } else { "[SUM]" };
            s += &format!(
                "{label} {:>8.2} s {:>10} {:>10} {:>13} {:>6}\n",
                m.duration_s,
                fmt_bytes(m.sent_bytes),
                fmt_bytes(m.received_bytes),
                fmt_rate(m.throughput_bps),
                if self.udp { m.udp.as_ref().map_or(0, |u| u.lost) } else { m.retransmits }
            );
        }
        if let Some(u) = &m.udp {
            s += &format!(
                "UDP: {} sent, {} received, {} lost ({:.3} %), jitter {:.3} ms, {} out of order, {} duplicates\n",
                u.packets_sent, u.packets_received, u.lost, u.loss_pct, u.jitter_ms, u.out_of_order, u.duplicates
            );
        }
        if m.omitted_s > 0.0 {
            s += &format!("(first {:.2} s omitted from the summary)\n", m.omitted_s);
        }
        s += &format!(
            "CPU: sender {:.1} %, receiver {:.1} % of one core (client {:.2} s, server {:.2} s)\n",
            m.cpu.sender_pct, m.cpu.receiver_pct, m.cpu.client_s, m.cpu.server_s
        );
        if let Some(v) = &m.verdict {
            s += &format!("Verdict: {}\n", v.text);
        }
        for (who, counters) in &m.tcp_counters {
            let picked: Vec<String> = [
                "Tcp.RetransSegs",
                "TcpExt.TCPTimeouts",
                "TcpExt.TCPLossProbes",
                "TcpExt.TCPFastRetrans",
                "TcpExt.TCPSackRecovery",
                "TcpExt.TCPSlowStartRetrans",
                "TcpExt.TCPDSACKRecv",
                "TcpExt.TCPOFOQueue",
                "TcpExt.TCPRcvQDrop",
            ]
            .iter()
            .filter_map(|k| counters.get(*k).map(|v| format!("{} {v:+}", k.split('.').nth(1).unwrap_or(k))))
            .collect();
            if !picked.is_empty() {
                s += &format!("TCP counters ({who} host): {}\n", picked.join(", "));
            }
        }
        if let Some(v) = &r.server_version {
            s += &format!("far end: {v}\n");
        }
        if !r.complete {
            s += &format!("INCOMPLETE: {}\n", r.error.as_deref().unwrap_or("the test ended early"));
        }
        emit(&mut self.out, &s);
    }
}

/// Passes every record on to another sink and, when asked to, keeps it as a line of NDJSON,
/// so that a test or a copy can be stored in the archive when it ends (`--save`). `file`
/// records are kept too (a copy of 100,000 files keeps 100,000 short lines, a few MB).
pub struct Recorder<'a> {
    inner: &'a mut dyn Sink,
    on: bool,
    /// The records, one JSON document a line.
    pub lines: String,
}

impl<'a> Recorder<'a> {
    /// Passes records to `inner`, keeping them if `on`.
    pub fn new(inner: &'a mut dyn Sink, on: bool) -> Self {
        Recorder { inner, on, lines: String::new() }
    }
    fn keep<T: serde::Serialize>(&mut self, v: &T) {
        if !self.on {
            return;
        }
        if let Ok(s) = serde_json::to_string(v) {
            self.lines.push_str(&s);
            self.lines.push('\n');
        }
    }
}

impl Sink for Recorder<'_> {
    fn start(&mut self, rec: &StartRecord) {
        self.keep(rec);
        self.inner.start(rec);
    }
    fn interval(&mut self, rec: &IntervalRecord) {
        self.keep(rec);
        self.inner.interval(rec);
    }
    fn end(&mut self, rec: &EndRecord) {
        self.keep(rec);
        self.inner.end(rec);
    }
    fn file(&mut self, rec: &wanperf_copy::spec::FileRecord) {
        self.keep(rec);
        self.inner.file(rec);
    }
}

/// The human-readable output: a progress bar, optional per-file lines, the summary and the
/// verdict.
pub struct CopyTable {
    bar: Option<indicatif::ProgressBar>,
    verbose: bool,
    moved: u64,
}

impl CopyTable {
    /// With a line per file when `verbose`.
    pub fn new(verbose: bool) -> Self {
        CopyTable { bar: None, verbose, moved: 0 }
    }
}

impl Sink for CopyTable {
    fn start(&mut self, _rec: &StartRecord) {
        use std::io::IsTerminal;
        if std::io::stderr().is_terminal() {
            let bar = indicatif::ProgressBar::new_spinner();
            if let Ok(st) = indicatif::ProgressStyle::with_template("{spinner} {elapsed} {bytes} moved, {msg}") {
                bar.set_style(st);
            }
            bar.enable_steady_tick(std::time::Duration::from_millis(200));
            self.bar = Some(bar);
        }
    }
    fn interval(&mut self, rec: &IntervalRecord) {
        self.moved += rec.sum.received_bytes.max(rec.sum.sent_bytes);
        if let Some(b) = &self.bar {
            b.set_position(self.moved);
            b.set_message(fmt_rate(rec.sum.throughput_bps));
        }
    }
    fn file(&mut self, rec: &wanperf_copy::spec::FileRecord) {
        if self.verbose {
            let line = if rec.skipped {
                format!("{}  {}  (already there)", rec.path, fmt_bytes(rec.bytes))
            } else {
                format!("{}  {}  {}", rec.path, fmt_bytes(rec.bytes), rec.hash().unwrap_or_default())
            };
            match &self.bar {
                Some(b) => b.println(line),
                None => emit(&mut io::stdout(), &format!("{line}\n")),
            }
        }
    }
    fn end(&mut self, rec: &EndRecord) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
        let mut s = String::new();
        if let Some(c) = &rec.summary.copy {
            s += &format!(
                "copied {} file(s){}: {} in {:.2} s = {:.1} MB/s ({}); {} on the wire, compression {}\n",
                c.files,
                if c.skipped_files > 0 {
                    format!(", {} left alone (already there)", c.skipped_files)
                } else {
                    String::new()
                },
                fmt_bytes(c.bytes),
                c.wall_s,
                c.rate_bytes_s / 1e6,
                fmt_rate(c.rate_bytes_s * 8.0),
                fmt_bytes(c.wire_bytes),
                c.compression
            );
            if c.resumed_bytes > 0 {
                s += &format!("resumed: {} were already there\n", fmt_bytes(c.resumed_bytes));
            }
            if c.resent_blocks > 0 {
                s += &format!("{} block(s) failed their BLAKE3 check and were sent again\n", c.resent_blocks);
            }
        }
        if let Some(v) = &rec.summary.verdict {
            s += &format!("Verdict: {}\n", v.text);
            for e in &v.evidence {
                s += &format!("  {e}\n");
            }
        }
        emit(&mut io::stdout(), &s);
    }
}

/// `wanperf ping`'s line per probe, as ping prints them (nothing when `quiet`: NDJSON).
pub struct PingLines {
    /// Print nothing per probe.
    pub quiet: bool,
}

impl crate::ping::PingSink for PingLines {
    fn probe(&mut self, r: &crate::ping::ProbeRecord) {
        if self.quiet {
            return;
        }
        let line = match (r.rtt_ms, r.server_us) {
            (Some(rtt), Some(s)) => format!("seq={} rtt={rtt:.3} ms (server turnaround {s:.1} µs)\n", r.seq),
            (Some(rtt), None) => format!("seq={} rtt={rtt:.3} ms\n", r.seq),
            _ => format!("seq={} lost\n", r.seq),
        };
        emit(&mut io::stdout(), &line);
    }
}

/// `wanperf ping`'s statistics, as ping prints them: counts and loss, the RTT distribution,
/// jitter, and the one-way delays when the server stamped its clock.
pub fn ping_summary(host: &str, summary: &crate::ping::PingSummary) -> Vec<String> {
    let r = &summary.rtt_ms;
    let mut out = vec![format!(
        "--- {host} ping statistics: {} sent, {} received, {:.1} % loss ({} late), {} duplicates, {} reordered",
        summary.sent, summary.received, summary.loss_pct, summary.late, summary.duplicates, summary.reordered
    )];
    if summary.received > 0 {
        out.push(format!(
            "rtt ms: min {:.3} / avg {:.3} / max {:.3} / stdev {:.3} / median {:.3} / iqr {:.3} / p95 {:.3} / p99 {:.3}",
            r.min, r.avg, r.max, r.stdev, r.median, r.iqr, r.p95, r.p99
        ));
        out.push(format!("ipdv iqr {:.3} ms, jitter (RFC 3550) {:.3} ms", summary.ipdv_ms.iqr, summary.jitter_ms));
    }
    if let (Some(o), Some(u), Some(f), Some(b)) =
        (summary.clock_offset_ms, summary.clock_offset_uncertainty_ms, &summary.owd_fwd_ms, &summary.owd_rev_ms)
    {
        out.push(format!(
            "one-way ms (clock offset {o:.3} ± {u:.3}): forward median {:.3}, reverse median {:.3}",
            f.median, b.median
        ));
    }
    if let Some(c) = &summary.clocks {
        out.push(format!(
            "clocks (error estimates): this host {}, ± {:.3} ms; reflector {}, {}",
            if c.sender_synchronized { "synchronized" } else { "not synchronized" },
            c.sender_error_ms,
            if c.reflector_synchronized { "synchronized" } else { "not synchronized" },
            c.reflector_error_ms.map_or("no estimate".to_string(), |e| format!("± {e:.3} ms"))
        ));
    }
    match (&summary.loss_each_way, &summary.clocks) {
        (Some(l), _) => out.push(format!(
            "loss each way (probes 0–{}): forward {} ({:.2} %), reverse {} ({:.2} %); {} after the last answer, direction unknown",
            l.basis.saturating_sub(1),
            l.forward,
            l.forward_pct,
            l.reverse,
            l.reverse_pct,
            l.unknown
        )),
        (None, Some(_)) if summary.received < summary.sent => out.push(
            "loss each way: not known (a stateless reflector without counters echoes the sender's numbers)".into(),
        ),
        _ => {}
    }
    out
}
