//! NetFlow v5, v9 and IPFIX read in place: a template is compiled once, when it arrives, into
//! the offsets of the fields a [`Flow`] needs, and every data record is then read at those
//! offsets without allocating (variable-length IPFIX records are walked field by field).
//!
//! State is kept per scope — exporter address × version × observation domain (v9 source id,
//! IPFIX observation domain, v5 engine) — never per source port: its templates and options
//! templates, the sampling rate its options data announced, and data sets that came before
//! their template (held, bounded, and decoded when the template comes). Templates not
//! refreshed for [`TEMPLATE_TTL`] are forgotten; IPFIX withdrawals (RFC 7011 §8.1) are honoured.
//! Memory is bounded under a flood of exporters: at most [`MAX_SCOPES`] scopes, the least
//! recently heard ones evicted first.

use super::uptime_span;
use crate::record::Flow;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Templates not refreshed for this long are forgotten (exporters resend theirs every few
/// minutes at most).
pub const TEMPLATE_TTL_MS: u64 = 30 * 60 * 1000;
/// Scopes (exporter × version × domain) remembered at once.
pub const MAX_SCOPES: usize = 4096;
/// Templates one scope may define.
pub const MAX_TEMPLATES_PER_SCOPE: usize = 1024;
/// Data sets held for their template, per scope.
pub const MAX_HELD_SETS: usize = 256;
/// Bytes of data sets held for their template, over all scopes.
pub const MAX_HELD_BYTES: usize = 16 << 20;
/// Heap bytes of one scope's templates.
pub const MAX_SCOPE_TEMPLATE_BYTES: usize = 4 << 20;
/// Heap bytes of all templates (beyond it the least recently heard scopes are forgotten).
pub const MAX_TEMPLATE_BYTES: usize = 64 << 20;
/// Seconds from the NTP epoch (1900) to the Unix epoch.
const NTP_UNIX_OFFSET_S: u64 = 2_208_988_800;
/// IPFIX's length of a variable-length field (RFC 7011 §7).
const VARLEN: u16 = 0xffff;

/// Who sent a datagram: exporter address, protocol version and observation domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Scope {
    pub exporter: IpAddr,
    pub version: u16,
    pub domain: u32,
}

impl std::hash::Hash for Scope {
    // Two words instead of the derived field-by-field hash (looked up for every datagram).
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        h.write_u128(super::addr_word(self.exporter));
        h.write_u64(u64::from(self.version) << 32 | u64::from(self.domain));
    }
}

/// What a field of a template becomes in a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Bytes,
    Packets,
    Proto,
    Sport,
    Dport,
    Src,
    Dst,
    Icmp,
    UpFirst,
    UpLast,
    StartS,
    EndS,
    StartMs,
    EndMs,
    StartNtp,
    EndNtp,
    InitMs,
    Sampling,
    Interval,
    Space,
}

impl Slot {
    /// The slot of an IANA (or NetFlow v9, which shares the first numbers) information element.
    fn of(id: u16) -> Option<Slot> {
        Some(match id {
            // octetDeltaCount, octetTotalCount, postOctetDeltaCount (first one present wins)
            1 | 85 | 23 => Slot::Bytes,
            2 | 86 | 24 => Slot::Packets,
            4 => Slot::Proto,
            7 => Slot::Sport,
            11 => Slot::Dport,
            8 | 27 => Slot::Src,
            12 | 28 => Slot::Dst,
            32 | 139 => Slot::Icmp,
            21 => Slot::UpLast,
            22 => Slot::UpFirst,
            150 => Slot::StartS,
            151 => Slot::EndS,
            152 => Slot::StartMs,
            153 => Slot::EndMs,
            154 | 156 => Slot::StartNtp,
            155 | 157 => Slot::EndNtp,
            160 => Slot::InitMs,
            // samplingInterval; v9's FLOW_SAMPLER_RANDOM_INTERVAL in options data
            34 | 50 => Slot::Sampling,
            305 => Slot::Interval,
            306 => Slot::Space,
            _ => return None,
        })
    }
}

/// One field of a template as the wire gives it.
#[derive(Debug, Clone, Copy)]
struct Field {
    slot: Option<Slot>,
    len: u16,
}

/// A template compiled for reading.
#[derive(Debug)]
struct Template {
    options: bool,
    /// Every field (walked for variable-length records).
    fields: Box<[Field]>,
    /// (offset, length, slot) of the fields a flow needs, for fixed-length records.
    plan: Box<[(u16, u16, Slot)]>,
    /// Record length when no field is variable-length.
    fixed: Option<usize>,
    /// The shortest a record can be.
    min_len: usize,
    refreshed_ms: u64,
}

impl Template {
    fn compile(options: bool, fields: Vec<Field>, now_ms: u64) -> Template {
        let mut plan = Vec::new();
        let mut at = 0usize;
        let mut fixed = true;
        let mut min_len = 0usize;
        for f in &fields {
            if f.len == VARLEN {
                fixed = false;
                min_len += 1;
                continue;
            }
            if let Some(slot) = f.slot {
                if fixed && at <= usize::from(u16::MAX) {
                    plan.push((at as u16, f.len, slot));
                }
            }
            at += usize::from(f.len);
            min_len += usize::from(f.len);
        }
        Template {
            options,
            fields: fields.into_boxed_slice(),
            plan: if fixed { plan.into_boxed_slice() } else { Box::default() },
            fixed: fixed.then_some(at),
            min_len,
            refreshed_ms: now_ms,
        }
    }

    /// Heap bytes it holds (for the flood bound).
    fn weight(&self) -> usize {
        self.fields.len() * std::mem::size_of::<Field>() + self.plan.len() * 6 + 64
    }
}

/// A data set that came before its template.
struct Held {
    id: u16,
    body: Vec<u8>,
    ctx: Ctx,
    at_ms: u64,
}

/// What a data record's times are relative to.
#[derive(Debug, Clone, Copy)]
struct Ctx {
    export_ms: u64,
    /// v9's header sysUpTime (IPFIX has none).
    uptime: Option<u32>,
}

#[derive(Default)]
struct ScopeState {
    templates: HashMap<u16, Template, foldhash::fast::RandomState>,
    held: Vec<Held>,
    /// The sampling rate options data announced.
    sampling: Option<u32>,
    heard_ms: u64,
    /// Heap bytes of its templates.
    weight: usize,
}

/// What one datagram gave, for the exporter's accounting.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Outcome {
    /// Flows appended (including held data the datagram's templates released).
    pub flows: usize,
    /// Data and options-data records of this datagram that were read (IPFIX counts these in
    /// its sequence numbers).
    pub records: u32,
    /// Data sets of this datagram held for their template.
    pub held: u64,
    /// Held data sets of earlier datagrams decoded now.
    pub released: u64,
    /// Parts of the datagram that could not be read.
    pub malformed: u64,
    /// Sequence number and what this datagram adds to it (v5: flows, v9: 1, IPFIX: records).
    pub seq: Option<(u32, u32)>,
    /// The scope's sampling rate after this datagram (1 when none was announced).
    pub sampling: u32,
}

/// Every scope's templates and held data.
#[derive(Default)]
pub(super) struct Netflow {
    scopes: HashMap<Scope, ScopeState, foldhash::fast::RandomState>,
    held_bytes: usize,
    template_bytes: usize,
}

/// Which template set is read.
#[derive(Debug, Clone, Copy)]
struct Kind {
    options: bool,
    /// IPFIX's layout: enterprise numbers, scope field counts, withdrawals.
    ipfix: bool,
}

#[inline]
pub(super) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline]
pub(super) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// An unsigned big-endian number of 1 to 8 bytes (reduced-size encoding, RFC 7011 §6.2).
#[inline]
fn uint(b: &[u8]) -> Option<u64> {
    match b.len() {
        1 => Some(u64::from(b[0])),
        2 => Some(u64::from(be16(b, 0))),
        4 => Some(u64::from(be32(b, 0))),
        8 => Some(u64::from_be_bytes(b.try_into().ok()?)),
        3 | 5..=7 => Some(b.iter().fold(0, |a, &x| a << 8 | u64::from(x))),
        _ => None,
    }
}

fn ip(b: &[u8]) -> Option<IpAddr> {
    match b.len() {
        4 => Some(IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))),
        16 => {
            let a: [u8; 16] = b.try_into().ok()?;
            Some(IpAddr::V6(Ipv6Addr::from(a)))
        }
        _ => None,
    }
}

/// NTP timestamp (seconds since 1900, 2^-32 fractions) as Unix milliseconds.
fn ntp_ms(v: &[u8]) -> Option<u64> {
    if v.len() != 8 {
        return None;
    }
    let secs = u64::from(be32(v, 0)).checked_sub(NTP_UNIX_OFFSET_S)?;
    Some(secs * 1000 + ((u64::from(be32(v, 4)) * 1000) >> 32))
}

/// The fields of one data record.
#[derive(Default)]
struct Acc {
    src: Option<IpAddr>,
    dst: Option<IpAddr>,
    proto: Option<u8>,
    sport: Option<u16>,
    dport: Option<u16>,
    icmp: Option<u16>,
    bytes: Option<u64>,
    packets: Option<u64>,
    up_first: Option<u64>,
    up_last: Option<u64>,
    abs_start: Option<u64>,
    abs_end: Option<u64>,
    init_ms: Option<u64>,
    sampling: Option<u32>,
    interval: Option<u64>,
    space: Option<u64>,
}

impl Acc {
    #[inline(always)]
    fn put(&mut self, slot: Slot, v: &[u8]) {
        match slot {
            Slot::Bytes => self.bytes = self.bytes.or(uint(v)),
            Slot::Packets => self.packets = self.packets.or(uint(v)),
            Slot::Proto => self.proto = uint(v).and_then(|x| u8::try_from(x).ok()),
            Slot::Sport => self.sport = uint(v).and_then(|x| u16::try_from(x).ok()),
            Slot::Dport => self.dport = uint(v).and_then(|x| u16::try_from(x).ok()),
            Slot::Icmp => self.icmp = uint(v).and_then(|x| u16::try_from(x).ok()),
            Slot::Src => self.src = ip(v),
            Slot::Dst => self.dst = ip(v),
            Slot::UpFirst => self.up_first = uint(v),
            Slot::UpLast => self.up_last = uint(v),
            Slot::StartS => self.abs_start = uint(v).and_then(|s| s.checked_mul(1000)),
            Slot::EndS => self.abs_end = uint(v).and_then(|s| s.checked_mul(1000)),
            Slot::StartMs => self.abs_start = uint(v),
            Slot::EndMs => self.abs_end = uint(v),
            Slot::StartNtp => self.abs_start = ntp_ms(v),
            Slot::EndNtp => self.abs_end = ntp_ms(v),
            Slot::InitMs => self.init_ms = uint(v),
            Slot::Sampling => self.sampling = uint(v).filter(|&r| r > 0).map(|r| r.min(u64::from(u32::MAX)) as u32),
            Slot::Interval => self.interval = uint(v),
            Slot::Space => self.space = uint(v),
        }
    }

    /// The record's own sampling rate: interval + space over interval (RFC 5477) when both are
    /// given, else samplingInterval.
    fn rate(&self) -> Option<u32> {
        match (self.interval, self.space) {
            (Some(i), Some(s)) if i > 0 => Some((i.saturating_add(s) / i).clamp(1, u64::from(u32::MAX)) as u32),
            _ => self.sampling,
        }
    }

    fn flow(&self, scope: &Scope, rate: u32, ctx: Ctx) -> Option<Flow> {
        let (src, dst) = (self.src?, self.dst?);
        let bytes = self.bytes?;
        let packets = self.packets.unwrap_or(0);
        let (start_ms, end_ms) = match (self.abs_start, self.abs_end, self.up_first, self.up_last) {
            (Some(s), Some(e), _, _) => (s.min(e), e.max(s)),
            (_, _, Some(f), Some(l)) => match (ctx.uptime, self.init_ms) {
                (Some(up), _) => uptime_span(ctx.export_ms, up, f as u32, l as u32),
                (None, Some(init)) => (init.saturating_add(f.min(l)), init.saturating_add(l.max(f))),
                (None, None) => (ctx.export_ms, ctx.export_ms),
            },
            _ => (ctx.export_ms, ctx.export_ms),
        };
        let proto = self.proto.unwrap_or(0);
        let icmp = matches!(proto, 1 | 58);
        Some(Flow {
            exporter: scope.exporter,
            domain: scope.domain,
            src,
            dst,
            proto,
            sport: if icmp { 0 } else { self.sport.unwrap_or(0) },
            dport: if icmp { self.icmp.or(self.dport).unwrap_or(0) } else { self.dport.unwrap_or(0) },
            bytes,
            packets,
            start_ms,
            end_ms,
            sampling: rate.max(1),
        })
    }
}

/// Reads a data set's records with template `t`; flows are appended (options data sets the
/// scope's sampling rate instead). Returns the records read and whether the set's end held
/// more than padding.
fn read_set(
    t: &Template,
    body: &[u8],
    scope: &Scope,
    ctx: Ctx,
    sampling: &mut Option<u32>,
    out: &mut Vec<Flow>,
) -> (u32, bool) {
    let mut n = 0u32;
    if let Some(len) = t.fixed {
        if len == 0 {
            return (0, !body.is_empty());
        }
        let mut recs = body.chunks_exact(len);
        for rec in &mut recs {
            let mut acc = Acc::default();
            for &(at, l, slot) in t.plan.iter() {
                let at = usize::from(at);
                acc.put(slot, &rec[at..at + usize::from(l)]);
            }
            n += 1;
            emit(t, &acc, scope, ctx, sampling, out);
        }
        // Padding is shorter than a record and zero (RFC 7011 §3.3.1): anything else left over
        // is not padding.
        return (n, recs.remainder().iter().any(|&b| b != 0));
    }
    let mut at = 0usize;
    'records: while body.len() - at >= t.min_len.max(1) {
        let mut acc = Acc::default();
        let mut p = at;
        for f in t.fields.iter() {
            let len = if f.len == VARLEN {
                let Some(&first) = body.get(p) else { break 'records };
                p += 1;
                if first < 255 {
                    usize::from(first)
                } else {
                    let Some(b) = body.get(p..p + 2) else { break 'records };
                    p += 2;
                    usize::from(be16(b, 0))
                }
            } else {
                usize::from(f.len)
            };
            let Some(v) = body.get(p..p + len) else { break 'records };
            if let Some(slot) = f.slot {
                acc.put(slot, v);
            }
            p += len;
        }
        if p == at {
            break;
        }
        at = p;
        n += 1;
        emit(t, &acc, scope, ctx, sampling, out);
    }
    (n, body[at..].iter().any(|&b| b != 0))
}

#[inline]
fn emit(t: &Template, acc: &Acc, scope: &Scope, ctx: Ctx, sampling: &mut Option<u32>, out: &mut Vec<Flow>) {
    if t.options {
        if let Some(r) = acc.rate() {
            *sampling = Some(r);
        }
        return;
    }
    let rate = acc.rate().or(*sampling).unwrap_or(1);
    if let Some(f) = acc.flow(scope, rate, ctx) {
        out.push(f);
    }
}

/// A template record's fields: (id, length) pairs, IPFIX ones with an enterprise number when
/// their top bit is set. Returns the fields and the bytes read.
fn fields(b: &[u8], count: usize, ipfix: bool) -> Option<(Vec<Field>, usize)> {
    let mut at = 0;
    let mut out = Vec::with_capacity(count.min(b.len() / 4));
    for _ in 0..count {
        let raw = be16(b.get(at..at + 2)?, 0);
        let len = be16(b.get(at + 2..at + 4)?, 0);
        at += 4;
        let enterprise = ipfix && raw & 0x8000 != 0;
        if enterprise {
            b.get(at..at + 4)?;
            at += 4;
        }
        if !ipfix && len == VARLEN {
            return None;
        }
        // An enterprise-specific field is none of IANA's, whatever its number.
        out.push(Field { slot: if enterprise { None } else { Slot::of(raw) }, len });
    }
    Some((out, at))
}

impl Netflow {
    /// Decodes one NetFlow v5, v9 or IPFIX datagram of `scope` (the caller read its version
    /// and domain) received at `now_ms`.
    pub fn feed(&mut self, scope: Scope, now_ms: u64, d: &[u8], out: &mut Vec<Flow>) -> Outcome {
        let before = out.len();
        let mut o = match scope.version {
            5 => Self::v5(scope, d, out),
            9 | 10 => self.templated(scope, now_ms, d, out),
            _ => Outcome { malformed: 1, ..Outcome::default() },
        };
        o.flows = out.len() - before;
        o
    }

    /// Scopes remembered.
    #[cfg(test)]
    pub fn scopes(&self) -> usize {
        self.scopes.len()
    }

    /// NetFlow v5: a fixed header and fixed records; the header carries the sampling rate.
    fn v5(scope: Scope, d: &[u8], out: &mut Vec<Flow>) -> Outcome {
        let mut o = Outcome::default();
        if d.len() < 24 {
            o.malformed = 1;
            return o;
        }
        let count = usize::from(be16(d, 2));
        let uptime = be32(d, 4);
        let export_ms = u64::from(be32(d, 8)) * 1000 + u64::from(be32(d, 12)) / 1_000_000;
        let rate = u32::from(be16(d, 22) & 0x3fff).max(1);
        let recs = &d[24..];
        let whole = (recs.len() / 48).min(count);
        if whole < count || count == 0 {
            o.malformed = 1;
        }
        for r in recs.chunks_exact(48).take(whole) {
            let (start_ms, end_ms) = uptime_span(export_ms, uptime, be32(r, 24), be32(r, 28));
            out.push(Flow {
                exporter: scope.exporter,
                domain: scope.domain,
                src: IpAddr::V4(Ipv4Addr::new(r[0], r[1], r[2], r[3])),
                dst: IpAddr::V4(Ipv4Addr::new(r[4], r[5], r[6], r[7])),
                proto: r[38],
                sport: be16(r, 32),
                dport: be16(r, 34),
                bytes: u64::from(be32(r, 20)),
                packets: u64::from(be32(r, 16)),
                start_ms,
                end_ms,
                sampling: rate,
            });
        }
        o.seq = (whole == count).then_some((be32(d, 16), whole as u32));
        o.sampling = rate;
        o
    }

    /// The scope's state, created (and the scope table kept within bounds) if new.
    fn scope(&mut self, scope: Scope, now_ms: u64) -> &mut ScopeState {
        if self.scopes.len() >= MAX_SCOPES && !self.scopes.contains_key(&scope) {
            self.evict(now_ms);
        }
        let st = self.scopes.entry(scope).or_default();
        st.heard_ms = st.heard_ms.max(now_ms);
        st
    }

    /// Forgets the quarter of scopes heard from least recently (a flood of exporters).
    fn evict(&mut self, now_ms: u64) {
        let mut heard: Vec<u64> = self.scopes.values().map(|s| s.heard_ms).collect();
        if heard.is_empty() {
            return;
        }
        let k = heard.len() / 4;
        let (_, &mut cut, _) = heard.select_nth_unstable(k);
        let (mut held, mut weight) = (0, 0);
        self.scopes.retain(|_, s| {
            let keep = s.heard_ms > cut && now_ms.saturating_sub(s.heard_ms) < TEMPLATE_TTL_MS;
            if !keep {
                held += s.held.iter().map(|h| h.body.len()).sum::<usize>();
                weight += s.weight;
            }
            keep
        });
        self.held_bytes -= held;
        self.template_bytes -= weight;
    }

    fn templated(&mut self, scope: Scope, now_ms: u64, d: &[u8], out: &mut Vec<Flow>) -> Outcome {
        let mut o = Outcome::default();
        let ipfix = scope.version == 10;
        let (head, end) = if ipfix {
            if d.len() < 16 {
                o.malformed = 1;
                return o;
            }
            let len = usize::from(be16(d, 2));
            if len > d.len() || len < 16 {
                o.malformed = 1;
            }
            (16, len.clamp(16, d.len()))
        } else {
            if d.len() < 20 {
                o.malformed = 1;
                return o;
            }
            (20, d.len())
        };
        let ctx = if ipfix {
            Ctx { export_ms: u64::from(be32(d, 4)) * 1000, uptime: None }
        } else {
            Ctx { export_ms: u64::from(be32(d, 8)) * 1000, uptime: Some(be32(d, 4)) }
        };
        let seq = if ipfix { be32(d, 8) } else { be32(d, 12) };
        let mut held_bytes = self.held_bytes;
        let st = self.scope(scope, now_ms);
        let weight_before = st.weight;
        // The templates this message used last, looked up once.
        let mut memo: [Option<(u16, &Template)>; 4] = [None; 4];
        let mut next_memo = 0;
        let mut at = head;
        while at + 4 <= end {
            let id = be16(d, at);
            let len = usize::from(be16(d, at + 2));
            if len < 4 || at + len > end {
                o.malformed += 1;
                break;
            }
            let body = &d[at + 4..at + len];
            at += len;
            match (id, ipfix) {
                (0..=3, _) if id < 2 || ipfix => {
                    // v9: 0 templates, 1 options templates; IPFIX: 2 and 3 (0 and 1, the v9
                    // kinds, as some exporters send them)
                    let kind = Kind { options: id % 2 == 1, ipfix: id >= 2 };
                    memo = [None; 4];
                    st.read_templates(body, kind, now_ms, &scope, &mut o, &mut held_bytes, out);
                }
                (2..=255, _) => {}
                _ => {
                    // Exporters write many small data sets per message (softflowd: one record
                    // each, alternating two templates): look each template up once per message.
                    let t = match memo.iter().flatten().find(|(m, _)| *m == id) {
                        Some(&(_, t)) => Some(t),
                        None => {
                            let t = st
                                .templates
                                .get(&id)
                                .filter(|t| now_ms.saturating_sub(t.refreshed_ms) < TEMPLATE_TTL_MS);
                            if let Some(t) = t {
                                memo[next_memo % 4] = Some((id, t));
                                next_memo += 1;
                            }
                            t
                        }
                    };
                    match t {
                        Some(t) => {
                            let (n, junk) = read_set(t, body, &scope, ctx, &mut st.sampling, out);
                            o.records += n;
                            o.malformed += u64::from(junk);
                        }
                        None => {
                            memo = [None; 4];
                            o.held += 1;
                            st.hold(id, body, ctx, now_ms, &mut held_bytes);
                        }
                    }
                }
            }
        }
        o.sampling = st.sampling.unwrap_or(1);
        let weight_after = st.weight;
        self.template_bytes = self.template_bytes - weight_before + weight_after;
        self.held_bytes = held_bytes;
        if self.template_bytes > MAX_TEMPLATE_BYTES {
            self.evict(now_ms);
        }
        o.seq = Some((seq, if ipfix { o.records } else { 1 }));
        o
    }
}

impl ScopeState {
    /// Reads a template set; held data sets of each template that arrives are decoded.
    /// Unreadable parts are counted in `o.malformed`.
    #[allow(clippy::too_many_arguments)]
    fn read_templates(
        &mut self,
        mut b: &[u8],
        kind: Kind,
        now_ms: u64,
        scope: &Scope,
        o: &mut Outcome,
        held_bytes: &mut usize,
        out: &mut Vec<Flow>,
    ) {
        while b.len() >= 4 {
            let id = be16(b, 0);
            let count = usize::from(be16(b, 2));
            if id == 0 && count == 0 {
                break; // padding
            }
            if kind.ipfix && count == 0 {
                // Withdrawal: one template, or every one of this kind (id 2 or 3).
                if id == 2 || id == 3 {
                    self.templates.retain(|_, t| t.options != (id == 3));
                } else {
                    self.templates.remove(&id);
                }
                self.weight = self.templates.values().map(Template::weight).sum();
                b = &b[4..];
                continue;
            }
            let (n, head) = match (kind.options, kind.ipfix) {
                (false, _) => (count, 4),
                // field count, scope field count (≥ 1), then every field
                (true, true) if b.len() >= 6 && be16(b, 4) >= 1 && usize::from(be16(b, 4)) <= count => (count, 6),
                // v9: option scope length and option length, in bytes
                (true, false) if b.len() >= 6 && count.is_multiple_of(4) && be16(b, 4).is_multiple_of(4) => {
                    ((count + usize::from(be16(b, 4))) / 4, 6)
                }
                _ => {
                    o.malformed += 1;
                    return;
                }
            };
            let Some((fields, used)) = (id >= 256).then(|| fields(&b[head..], n, kind.ipfix)).flatten() else {
                o.malformed += 1;
                return;
            };
            b = &b[head + used..];
            let t = Template::compile(kind.options, fields, now_ms);
            let old = self.templates.get(&id).map_or(0, Template::weight);
            if self.weight - old + t.weight() > MAX_SCOPE_TEMPLATE_BYTES
                || (old == 0 && self.templates.len() >= MAX_TEMPLATES_PER_SCOPE)
            {
                o.malformed += 1;
                continue;
            }
            self.weight = self.weight - old + t.weight();
            self.templates.insert(id, t);
            self.release(id, out, scope, o, held_bytes);
        }
    }

    /// Decodes the held data sets of template `id`, oldest first.
    fn release(&mut self, id: u16, out: &mut Vec<Flow>, scope: &Scope, o: &mut Outcome, held_bytes: &mut usize) {
        if !self.held.iter().any(|h| h.id == id) {
            return;
        }
        let Some(t) = self.templates.get(&id) else { return };
        let mut keep = Vec::with_capacity(self.held.len());
        for h in std::mem::take(&mut self.held) {
            if h.id == id {
                *held_bytes -= h.body.len();
                let (_, junk) = read_set(t, &h.body, scope, h.ctx, &mut self.sampling, out);
                o.released += 1;
                o.malformed += u64::from(junk);
            } else {
                keep.push(h);
            }
        }
        self.held = keep;
    }

    /// Holds a data set for its template: within the scope's and the decoder's bounds, the
    /// oldest dropped first; sets older than the template lifetime are forgotten.
    fn hold(&mut self, id: u16, body: &[u8], ctx: Ctx, now_ms: u64, held_bytes: &mut usize) {
        let mut freed = 0;
        self.held.retain(|h| {
            let keep = now_ms.saturating_sub(h.at_ms) < TEMPLATE_TTL_MS;
            if !keep {
                freed += h.body.len();
            }
            keep
        });
        if self.held.len() >= MAX_HELD_SETS {
            freed += self.held.remove(0).body.len();
        }
        *held_bytes -= freed;
        if *held_bytes + body.len() > MAX_HELD_BYTES {
            return;
        }
        *held_bytes += body.len();
        self.held.push(Held { id, body: body.to_vec(), ctx, at_ms: now_ms });
    }
}
