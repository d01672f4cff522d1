//! Conflict-free throughput slots: the central's planner.
//!
//! Two throughput tests that share a host measure each other, so the central gives every
//! throughput run a slot in which neither of its hosts is in any other throughput test.
//! Capacity runs (`wanperf capacity`: trains of back-to-back packets, which a bulk transfer on
//! the same path turns into nonsense) are planned the same way, for their time limit.
//! Latency probes run all the time alongside (they are light); trace tests are not planned
//! (agents run them on their own with [`next_run`]).
//!
//! **Wanted times.** A scheduled test's pair runs once per interval. Intervals are aligned to
//! multiples of the interval in Unix time; run *k* covers `[k·I, (k+1)·I)` and is wanted at
//! `k·I + slip_offset` ([`slip_offset`]: pseudo-random in `[0, slip)`, a function of the seed,
//! the test, the pair and *k*). Outside the test's windows, a run moves to the next window
//! start — if that is still inside its own interval; otherwise the interval has no run (so an
//! interval of 30 min with a window of 00:00–06:00 gives 12 runs a night, not 12 runs plus 36
//! piled up at midnight).
//!
//! **Slots.** A run occupies `duration + guard`, guard = 2 s + 10 % of the duration (connection
//! set-up and teardown). Runs are placed greedily in order of wanted time (ties: test name,
//! then source, then destination), each at the earliest time from its wanted time at which
//! both its hosts are free and a window is open. A run that cannot start within its own
//! interval is skipped (the mesh asks for more test time than its hosts have; see
//! [`Planned::skipped`]) rather than pushing every later run back without end.
//!
//! **Stability.** The plan is a pure function of (mesh, from, to, seed, busy). It holds the
//! runs whose wanted time (after moving into a window) is in `[from, to)`; their slots may end
//! — or, when pushed, start — after `to`. Because placement only ever moves a run later and
//! runs are placed in order of wanted time, extending the horizon never changes an earlier
//! run's slot: `plan(from, to2)` for `to2 > to` contains every slot of `plan(from, to)`, and
//! has no other slot starting before `to`. A central that re-plans every few minutes should
//! keep `from` fixed (say, the start of the UTC day) and pass the previous period's slots
//! that reach into the new one as `busy` to [`plan_around`].

use crate::config::{slot_length, Mesh, Schedule, TestKind};
use crate::rng::{fnv1a, mix, unit, FNV_OFFSET};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::HashMap;

/// One throughput run's exclusive time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slot {
    /// The test's name.
    pub test: String,
    /// Source host: it runs the test.
    pub src: String,
    /// Destination host.
    pub dst: String,
    /// Start, Unix seconds.
    pub start: f64,
    /// End of the slot (start + duration + guard), Unix seconds.
    pub end: f64,
}

/// A plan with the runs that found no room.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Planned {
    /// The slots, sorted by start (then test, source, destination).
    pub slots: Vec<Slot>,
    /// Runs that could not start within their own interval, each at its wanted time.
    pub skipped: Vec<Slot>,
}

/// The slot a run of `test` wants: its pseudo-random offset in `[0, slip_s)` after the start of
/// interval `k`. A function of its arguments only (FNV-1a over them, SplitMix64's finalizer).
pub fn slip_offset(seed: u64, test: &str, src: &str, dst: &str, k: i64, slip_s: f64) -> f64 {
    if slip_s.is_nan() || slip_s <= 0.0 {
        return 0.0;
    }
    let mut h = fnv1a(FNV_OFFSET, &seed.to_le_bytes());
    for part in [test, src, dst] {
        h = fnv1a(fnv1a(h, part.as_bytes()), &[0]);
    }
    h = fnv1a(h, &k.to_le_bytes());
    // Never slip_s itself, even after rounding.
    (unit(mix(h)) * slip_s).min(slip_s * (1.0 - f64::EPSILON))
}

/// When run `k` of a pair wants to start: `k·I + slip`, moved to the next window start if
/// needed; `None` if that leaves its interval.
fn wanted(s: &Schedule, seed: u64, test: &str, src: &str, dst: &str, k: i64) -> Option<f64> {
    let base = k as f64 * s.interval_s;
    let t = s.next_window_start(base + slip_offset(seed, test, src, dst, k, s.slip_s));
    (t < base + s.interval_s).then_some(t)
}

/// The earliest wanted start ≥ `after` of a pair's runs of a scheduled test (for agents that
/// run trace tests on their own; the same rule as the planner without conflicts). `None` if
/// the schedule allows no run within 8 days.
pub fn next_run(schedule: &Schedule, seed: u64, test: &str, src: &str, dst: &str, after: f64) -> Option<f64> {
    let i = schedule.interval_s;
    if !(i.is_finite() && i > 0.0 && after.is_finite()) {
        return None;
    }
    let first = (after / i).floor() as i64 - 1;
    let last = ((after + 8.0 * 86_400.0) / i).ceil() as i64;
    (first..=last).find_map(|k| wanted(schedule, seed, test, src, dst, k).filter(|&t| t >= after))
}

/// Plans `[from, to)` with nothing else busy: [`plan_around`]'s slots.
pub fn plan(mesh: &Mesh, from: f64, to: f64, seed: u64) -> Vec<Slot> {
    plan_around(mesh, from, to, seed, &[]).slots
}

/// Plans the throughput runs wanted in `[from, to)` around `busy` slots (already planned or
/// running: their hosts are not free during them). See the module's documentation for the
/// rules. Slots of `busy` are not repeated in the result.
pub fn plan_around(mesh: &Mesh, from: f64, to: f64, seed: u64, busy: &[Slot]) -> Planned {
    struct Run<'m> {
        at: f64,
        limit: f64,
        length: f64,
        test: &'m str,
        schedule: &'m Schedule,
        src: String,
        dst: String,
    }
    let mut out = Planned::default();
    if !(from.is_finite() && to.is_finite() && from < to) {
        return out;
    }
    let mut runs: Vec<Run> = Vec::new();
    for t in &mesh.tests {
        // Capacity runs are load tests too (trains of back-to-back packets): planned like
        // throughput runs, for their time limit.
        let duration_s = match &t.kind {
            TestKind::Throughput { duration_s, .. } => duration_s,
            TestKind::Capacity { time_s, .. } => time_s,
            _ => continue,
        };
        let Some(s) = &t.schedule else { continue };
        if !(s.interval_s.is_finite() && s.interval_s > 0.0) {
            continue;
        }
        let (first, last) = ((from / s.interval_s).floor() as i64 - 1, (to / s.interval_s).floor() as i64);
        for (src, dst) in mesh.pairs(t) {
            for k in first..=last {
                if let Some(at) = wanted(s, seed, &t.name, &src, &dst, k).filter(|a| (from..to).contains(a)) {
                    let limit = (k + 1) as f64 * s.interval_s;
                    let length = slot_length(*duration_s);
                    runs.push(Run {
                        at,
                        limit,
                        length,
                        test: &t.name,
                        schedule: s,
                        src: src.clone(),
                        dst: dst.clone(),
                    });
                }
            }
        }
    }
    runs.sort_by(|a, b| a.at.total_cmp(&b.at).then_with(|| (a.test, &a.src, &a.dst).cmp(&(b.test, &b.src, &b.dst))));

    let mut hosts: HashMap<String, Busy> = HashMap::new();
    for b in busy.iter().filter(|b| b.start < b.end) {
        for h in [&b.src, &b.dst] {
            hosts.entry(h.clone()).or_default().insert(b.start, b.end);
        }
    }
    for r in runs {
        let mut t = r.at;
        let start = loop {
            t = r.schedule.next_window_start(t);
            if t.is_nan() || t >= r.limit {
                break None;
            }
            let conflict = |h: &str| hosts.get(h).and_then(|b| b.conflict(t, r.length));
            match (conflict(&r.src), conflict(&r.dst)) {
                (None, None) => break Some(t),
                (a, b) => t = a.unwrap_or(t).max(b.unwrap_or(t)),
            }
        };
        let slot = |start: f64| Slot {
            test: r.test.to_string(),
            src: r.src.clone(),
            dst: r.dst.clone(),
            start,
            end: start + r.length,
        };
        match start {
            Some(start) => {
                for h in [&r.src, &r.dst] {
                    hosts.entry(h.clone()).or_default().insert(start, start + r.length);
                }
                out.slots.push(slot(start));
            }
            None => out.skipped.push(slot(r.at)),
        }
    }
    out.slots.sort_by(order);
    out
}

fn order(a: &Slot, b: &Slot) -> Ordering {
    a.start.total_cmp(&b.start).then_with(|| (&a.test, &a.src, &a.dst).cmp(&(&b.test, &b.src, &b.dst)))
}

/// The slots whose source is `host` (the source runs the test), in the given order.
pub fn slots_for<'a>(slots: &'a [Slot], host: &str) -> impl Iterator<Item = &'a Slot> {
    let host = host.to_string();
    slots.iter().filter(move |s| s.src == host)
}

/// One host's busy time: sorted, disjoint `[start, end)` intervals.
#[derive(Debug, Default)]
struct Busy(Vec<(f64, f64)>);

impl Busy {
    /// The end of the busy interval overlapping `[t, t + len)`, if any.
    fn conflict(&self, t: f64, len: f64) -> Option<f64> {
        let i = self.0.partition_point(|iv| iv.0 < t + len);
        (i > 0 && self.0[i - 1].1 > t).then(|| self.0[i - 1].1)
    }

    /// Adds `[a, b)`, merging what it overlaps or touches.
    fn insert(&mut self, mut a: f64, mut b: f64) {
        let lo = self.0.partition_point(|iv| iv.1 < a);
        let hi = self.0.partition_point(|iv| iv.0 <= b);
        if lo < hi {
            a = a.min(self.0[lo].0);
            b = b.max(self.0[hi - 1].1);
        }
        self.0.splice(lo..hi, [(a, b)]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Group, GroupKind, Host, Test};
    use crate::rng::SplitMix;

    const DAY: f64 = 86_400.0;
    const T0: f64 = 20_000.0 * DAY; // a UTC midnight

    fn mesh(hosts: &[&str], groups: Vec<Group>, tests: Vec<Test>) -> Mesh {
        Mesh {
            name: "t".into(),
            summary_s: 60.0,
            silent_after: 2,
            heartbeat_s: crate::config::DEFAULT_HEARTBEAT_S,
            sites: vec!["s".into()],
            hosts: hosts
                .iter()
                .enumerate()
                .map(|(i, h)| Host {
                    name: h.to_string(),
                    site: "s".into(),
                    address: format!("10.0.0.{i}"),
                    port: 5301,
                    key: None,
                })
                .collect(),
            groups,
            tests,
            expects: vec![],
        }
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn tput(name: &str, group: &str, duration_s: f64, s: Schedule) -> Test {
        Test {
            name: name.into(),
            group: group.into(),
            kind: TestKind::Throughput { duration_s, streams: 1, window: None, reverse: false, udp_rate: None },
            schedule: Some(s),
        }
    }

    fn sched(interval_s: f64, slip_s: f64, windows: Vec<(u32, u32)>) -> Schedule {
        Schedule { interval_s, slip_s, windows }
    }

    /// No host is in two overlapping slots; every slot has its length and starts in a window.
    fn check(m: &Mesh, slots: &[Slot]) {
        let mut by_host: HashMap<&str, Vec<&Slot>> = HashMap::new();
        for s in slots {
            by_host.entry(&s.src).or_default().push(s);
            by_host.entry(&s.dst).or_default().push(s);
            let t = m.test(&s.test).unwrap();
            let (TestKind::Throughput { duration_s, .. }, Some(sc)) = (&t.kind, &t.schedule) else { panic!() };
            assert!((s.end - s.start - slot_length(*duration_s)).abs() < 1e-6);
            assert!(sc.in_window(s.start), "{s:?} outside {:?}", sc.windows);
            assert!(m.pairs(t).contains(&(s.src.clone(), s.dst.clone())));
        }
        for (h, mut v) in by_host {
            v.sort_by(|a, b| a.start.total_cmp(&b.start));
            for w in v.windows(2) {
                assert!(w[1].start >= w[0].end, "{h}: {:?} overlaps {:?}", w[0], w[1]);
            }
        }
        for w in slots.windows(2) {
            assert!(order(&w[0], &w[1]) != Ordering::Greater);
        }
    }

    #[test]
    fn simultaneous_runs_are_serialized() {
        let g = Group {
            name: "hub".into(),
            kind: GroupKind::Star { center: "c".into(), members: names(&["x", "y", "z"]) },
        };
        let m = mesh(&["c", "x", "y", "z"], vec![g], vec![tput("bulk", "hub", 10.0, sched(3600.0, 0.0, vec![]))]);
        let slots = plan(&m, T0, T0 + 3600.0, 1);
        check(&m, &slots);
        let got: Vec<(f64, &str, &str)> =
            slots.iter().map(|s| (s.start - T0, s.src.as_str(), s.dst.as_str())).collect();
        // All six wanted at T0; each takes 10 s + 3 s guard; ties by source then destination.
        assert_eq!(
            got,
            [(0.0, "c", "x"), (13.0, "c", "y"), (26.0, "c", "z"), (39.0, "x", "c"), (52.0, "y", "c"), (65.0, "z", "c")]
        );
        assert_eq!(slots_for(&slots, "c").count(), 3);
        assert_eq!(slots_for(&slots, "x").map(|s| s.dst.as_str()).collect::<Vec<_>>(), ["c"]);
        // Disjoint pairs run at the same time.
        let g = Group { name: "all".into(), kind: GroupKind::Disjoint(names(&["a", "b"]), names(&["c", "d"])) };
        let m = mesh(&["a", "b", "c", "d"], vec![g], vec![tput("bulk", "all", 10.0, sched(3600.0, 0.0, vec![]))]);
        let slots = plan(&m, T0, T0 + 3600.0, 1);
        check(&m, &slots);
        assert_eq!(slots.iter().filter(|s| s.start == T0).count(), 2);
    }

    #[test]
    fn windows_hold_runs_and_never_pile_them_up() {
        let g = Group { name: "all".into(), kind: GroupKind::Mesh(names(&["a", "b"])) };
        // Every 30 min, only 00:00–06:00: 12 runs a night per pair.
        let s = sched(1800.0, 300.0, vec![(0, 21_600)]);
        let m = mesh(&["a", "b"], vec![g.clone()], vec![tput("bulk", "all", 10.0, s)]);
        let slots = plan(&m, T0, T0 + 2.0 * DAY, 7);
        check(&m, &slots);
        assert_eq!(slots.len(), 2 * 2 * 12);
        assert!(slots.iter().all(|s| (s.start - T0).rem_euclid(DAY) < 21_600.0));
        // Daily at 02:00–03:00: the run wanted at midnight moves to 02:00.
        let s = sched(DAY, 0.0, vec![(7200, 10_800)]);
        let m = mesh(&["a", "b"], vec![g], vec![tput("bulk", "all", 10.0, s)]);
        let slots = plan(&m, T0, T0 + 3.0 * DAY, 7);
        check(&m, &slots);
        let starts: Vec<f64> = slots.iter().map(|s| s.start - T0).collect();
        assert_eq!(starts, [7200.0, 7213.0, DAY + 7200.0, DAY + 7213.0, 2.0 * DAY + 7200.0, 2.0 * DAY + 7213.0]);
    }

    #[test]
    fn slip_is_deterministic_and_within_bounds() {
        for k in -5..50 {
            let o = slip_offset(3, "bulk", "a", "b", k, 300.0);
            assert!((0.0..300.0).contains(&o));
            assert_eq!(o, slip_offset(3, "bulk", "a", "b", k, 300.0));
        }
        assert_ne!(slip_offset(3, "bulk", "a", "b", 1, 300.0), slip_offset(4, "bulk", "a", "b", 1, 300.0));
        assert_ne!(slip_offset(3, "bulk", "a", "b", 1, 300.0), slip_offset(3, "bulk", "b", "a", 1, 300.0));
        assert_ne!(slip_offset(3, "ab", "c", "d", 1, 300.0), slip_offset(3, "a", "bc", "d", 1, 300.0));
        assert_eq!(slip_offset(3, "bulk", "a", "b", 1, 0.0), 0.0);
        let g = Group { name: "all".into(), kind: GroupKind::Mesh(names(&["a", "b", "c"])) };
        let m = mesh(&["a", "b", "c"], vec![g], vec![tput("bulk", "all", 5.0, sched(600.0, 300.0, vec![]))]);
        let p = plan(&m, T0, T0 + DAY, 42);
        assert_eq!(p, plan(&m, T0, T0 + DAY, 42));
        assert_ne!(p, plan(&m, T0, T0 + DAY, 43));
        check(&m, &p);
        // The offsets spread over the slip.
        let offs: Vec<f64> = p.iter().map(|s| (s.start - T0).rem_euclid(600.0)).collect();
        assert!(offs.iter().any(|&o| o < 100.0) && offs.iter().any(|&o| o > 200.0));
    }

    #[test]
    fn trace_and_latency_tests_are_not_planned_and_next_run_follows_the_rule() {
        let g = Group { name: "all".into(), kind: GroupKind::Mesh(names(&["a", "b"])) };
        let s = sched(3600.0, 600.0, vec![(0, 21_600)]);
        let trace = Test {
            name: "route".into(),
            group: "all".into(),
            kind: TestKind::Trace { rounds: 3, icmp: false, max_ttl: 30 },
            schedule: Some(s.clone()),
        };
        let lat = Test {
            name: "rtt".into(),
            group: "all".into(),
            kind: TestKind::Latency { rate: 10.0, size: 64, dscp: None, stamp_port: None },
            schedule: None,
        };
        let m = mesh(&["a", "b"], vec![g], vec![trace, lat]);
        assert!(plan(&m, T0, T0 + DAY, 1).is_empty());
        let first = next_run(&s, 1, "route", "a", "b", T0).unwrap();
        assert_eq!(first, T0 + slip_offset(1, "route", "a", "b", (T0 / 3600.0) as i64, 600.0));
        let second = next_run(&s, 1, "route", "a", "b", first + 1e-3).unwrap();
        assert!((T0 + 3600.0..T0 + 4200.0).contains(&second));
        // After the window closes, the next run is the next night's first.
        let night = next_run(&s, 1, "route", "a", "b", T0 + 6.0 * 3600.0).unwrap();
        assert!((T0 + DAY..T0 + DAY + 600.0).contains(&night), "{}", night - T0);
        assert_eq!(next_run(&s, 1, "route", "a", "b", f64::NAN), None);
    }

    #[test]
    fn oversubscribed_meshes_skip_rather_than_drift() {
        let g = Group {
            name: "hub".into(),
            kind: GroupKind::Star { center: "c".into(), members: names(&["m1", "m2", "m3", "m4", "m5", "m6"]) },
        };
        let hosts = ["c", "m1", "m2", "m3", "m4", "m5", "m6"];
        // 12 pairs × 13 s through one host every 60 s cannot fit.
        let m = mesh(&hosts, vec![g], vec![tput("bulk", "hub", 10.0, sched(60.0, 0.0, vec![]))]);
        let p = plan_around(&m, T0, T0 + 3600.0, 1, &[]);
        check(&m, &p.slots);
        assert!(!p.skipped.is_empty());
        assert!(p.slots.len() >= 60 * 4, "{}", p.slots.len()); // at least 4 runs a minute fit
        assert!(p.slots.iter().all(|s| s.start < T0 + 3600.0));
        assert!(plan(&m, f64::NAN, T0, 1).is_empty());
        assert!(plan(&m, T0, T0, 1).is_empty());
    }

    #[test]
    fn busy_slots_are_respected() {
        let g = Group { name: "all".into(), kind: GroupKind::Mesh(names(&["a", "b"])) };
        let m = mesh(&["a", "b"], vec![g], vec![tput("bulk", "all", 10.0, sched(3600.0, 0.0, vec![]))]);
        let busy = [Slot { test: "other".into(), src: "b".into(), dst: "z".into(), start: T0 - 5.0, end: T0 + 100.0 }];
        let slots = plan_around(&m, T0, T0 + 3600.0, 1, &busy).slots;
        assert_eq!(slots.iter().map(|s| s.start - T0).collect::<Vec<_>>(), [100.0, 113.0]);
    }

    #[test]
    fn busy_intervals_merge() {
        let mut b = Busy::default();
        b.insert(10.0, 20.0);
        b.insert(30.0, 40.0);
        b.insert(0.0, 5.0);
        assert_eq!(b.0, [(0.0, 5.0), (10.0, 20.0), (30.0, 40.0)]);
        b.insert(18.0, 30.0);
        assert_eq!(b.0, [(0.0, 5.0), (10.0, 40.0)]);
        assert_eq!(b.conflict(5.0, 5.0), None);
        assert_eq!(b.conflict(5.0, 5.1), Some(40.0));
        assert_eq!(b.conflict(40.0, 100.0), None);
        assert_eq!(b.conflict(-10.0, 10.1), Some(5.0));
    }

    /// A random mesh: 2–7 hosts, 1–3 groups of random kinds, 1–3 throughput tests.
    fn random_mesh(r: &mut SplitMix) -> Mesh {
        let hosts: Vec<String> = (0..2 + r.below(6)).map(|i| format!("h{i}")).collect();
        let pick = |r: &mut SplitMix, n: usize, from: &[String]| -> Vec<String> {
            let mut v = from.to_vec();
            for i in (1..v.len()).rev() {
                v.swap(i, r.below(i + 1));
            }
            v.truncate(n.clamp(1, from.len()));
            v
        };
        let groups: Vec<Group> = (0..1 + r.below(3))
            .map(|i| {
                let n = hosts.len();
                let kind = match r.below(3) {
                    0 => {
                        let k = 2 + r.below(n - 1);
                        GroupKind::Mesh(pick(r, k, &hosts))
                    }
                    1 => {
                        let all = pick(r, n, &hosts);
                        let cut = 1 + r.below(n - 1);
                        GroupKind::Disjoint(all[..cut].to_vec(), all[cut..].to_vec())
                    }
                    _ => {
                        let all = pick(r, n, &hosts);
                        GroupKind::Star { center: all[0].clone(), members: all[1..2 + r.below(n - 1)].to_vec() }
                    }
                };
                Group { name: format!("g{i}"), kind }
            })
            .collect();
        let tests = (0..1 + r.below(3))
            .map(|i| {
                let duration = [1.0, 5.0, 10.0, 30.0, 60.0][r.below(5)];
                let interval = r.range(slot_length(duration).max(300.0), 4.0 * 3600.0).round();
                let slip = if r.below(2) == 0 { 0.0 } else { r.range(0.0, interval) };
                let windows = match r.below(3) {
                    0 => vec![],
                    _ => {
                        let a = r.below(20) as u32 * 3600;
                        vec![(a, a + 3600 * (1 + r.below(4) as u32))]
                    }
                };
                tput(&format!("t{i}"), &format!("g{}", r.below(groups.len())), duration, sched(interval, slip, windows))
            })
            .collect();
        let refs: Vec<&str> = hosts.iter().map(String::as_str).collect();
        mesh(&refs, groups, tests)
    }

    #[test]
    fn random_meshes_never_share_a_host_and_plans_are_prefix_stable() {
        let mut r = SplitMix(2024);
        let mut total = 0;
        for _ in 0..200 {
            let m = random_mesh(&mut r);
            let seed = r.next_u64();
            let from = T0 + r.range(0.0, DAY).round();
            let to = from + r.range(3600.0, 12.0 * 3600.0);
            let to2 = to + r.range(1.0, 6.0 * 3600.0);
            let short = plan_around(&m, from, to, seed, &[]);
            let long = plan_around(&m, from, to2, seed, &[]);
            check(&m, &short.slots);
            check(&m, &long.slots);
            for s in &short.slots {
                assert!(long.slots.contains(s), "{s:?} moved when the horizon grew");
            }
            let before = |p: &[Slot]| p.iter().filter(|s| s.start < to).cloned().collect::<Vec<_>>();
            assert_eq!(before(&short.slots), before(&long.slots));
            assert_eq!(short, plan_around(&m, from, to, seed, &[]));
            total += long.slots.len();
        }
        assert!(total > 1000, "{total}");
    }
}
