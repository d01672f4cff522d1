//! `serve` under a hostile crowd: while 50 legitimate keyed tests run through it, ten other
//! addresses (127.0.0.2–11: all of 127/8 is loopback) open 1000 connections that send
//! garbage, truncated frames, absurd lengths, a valid request and then silence (slowloris),
//! half a frame header, or data hellos with unknown cookies, or close at once. Every
//! legitimate test must complete, and afterwards the server's descriptors, threads and
//! memory must be back near where they started. Bounded in count and time.
//!
//! `WANPERF_HOSTILE_SCALE=N` multiplies the crowd (bench/hostile.sh runs it larger).

mod common;
use common::*;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wanperf_proto::data::DataHello;
use wanperf_proto::frame::encode;
use wanperf_proto::msg::{Msg, TestSpec};

const SOURCES: u8 = 10;
const LEGIT: usize = 50;
const LANES: usize = 5;
/// How much more resident memory the server may keep after the storm than before it.
const MEMORY_MARGIN_KIB: u64 = 8 * 1024;

/// What the server process holds: open descriptors, threads, resident memory (KiB).
#[derive(Debug, Clone, Copy)]
struct Held {
    fds: usize,
    threads: usize,
    rss_kib: u64,
}

fn held(pid: u32) -> Held {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap()
    };
    Held { fds, threads: field("Threads:") as usize, rss_kib: field("VmRSS:") }
}

/// A TCP connection from 127.0.0.`src`.
fn connect_from(src: u8, port: u16) -> Option<TcpStream> {
    let s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).ok()?;
    s.bind(&SockAddr::from(SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, src), 0))).ok()?;
    s.connect_timeout(&SockAddr::from(SocketAddr::from(([127, 0, 0, 1], port))), Duration::from_secs(2)).ok()?;
    let s: TcpStream = s.into();
    s.set_write_timeout(Some(Duration::from_millis(500))).ok()?;
    Some(s)
}

/// One hostile connection of kind `k`; returned when it is to be held open.
fn attack(k: usize, src: u8, port: u16) -> Option<TcpStream> {
    let mut s = connect_from(src, port)?;
    let request = encode(&Msg::Request { software: "crowd".into(), spec: TestSpec::tcp(4, 30.0) });
    let mut header = request[..12].to_vec();
    // Every other connection is a slow one that is held open.
    let kind = if k % 2 == 1 { 4 + (k / 2) % 2 } else { [0, 1, 2, 3, 6, 7][(k / 2) % 6] };
    let r = match kind {
        // Garbage.
        0 => s.write_all(&[0x5a; 200]),
        // A truncated frame, then close.
        1 => s.write_all(&request[..request.len() / 2]),
        // A frame claiming 4 GiB.
        2 => {
            header[8..12].copy_from_slice(&u32::MAX.to_be_bytes());
            s.write_all(&header)
        }
        // A frame over the pre-admission limit but under the protocol's (1 MiB), sent whole.
        3 => {
            header[8..12].copy_from_slice(&(1u32 << 20).to_be_bytes());
            s.write_all(&header).and_then(|()| s.write_all(&vec![b' '; 1 << 20]))
        }
        // A valid request, then silence (slowloris): held open.
        4 => return s.write_all(&request).ok().map(|()| s),
        // Half a header, then silence: held open.
        5 => return s.write_all(&request[..6]).ok().map(|()| s),
        // Data hellos with unknown cookies.
        6 => s.write_all(&DataHello { cookie: [k as u8; 16], stream: 0 }.encode()),
        // Connect and close.
        _ => Ok(()),
    };
    let _ = r;
    None
}

#[test]
fn legitimate_tests_complete_through_a_hostile_crowd_and_the_server_gives_everything_back() {
    let scale: usize = std::env::var("WANPERF_HOSTILE_SCALE").ok().and_then(|v| v.parse().ok()).unwrap_or(1).max(1);
    let hostile = 1000 * scale;
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    let dir: PathBuf = std::env::temp_dir().join(format!("wanperf-hostile-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("k");
    assert!(run(&["keygen", "-o", &key.display().to_string()], Duration::from_secs(10)).status.success());
    let ak = dir.join("authorized_keys");
    std::fs::copy(dir.join("k.pub"), &ak).unwrap();
    let server = Server::start(&["--authorized-keys", &ak.display().to_string(), "--handshake-timeout", "2s"]);
    let (port, pid) = (server.port, server.child.id());
    let key_s = key.display().to_string();
    let legit = |t: &str| {
        std::process::Command::new(BIN)
            .args(["tput", "127.0.0.1", "-p", &port.to_string(), "-t", t, "--key", &key_s, "--json"])
            .env("HOME", &dir)
            .output()
            .unwrap()
    };
    // Warm up (first test's allocations, host capture), then the baseline.
    for _ in 0..2 {
        assert!(legit("0.2").status.success());
    }
    let before = settle(pid, None);

    // The crowd: SOURCES addresses, each opening its share paced over about 5 s and holding
    // up to 40 of its slow connections open at once (more than the per-host cap of 16).
    let opened = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let crowd: Vec<_> = (0..SOURCES)
        .map(|i| {
            let opened = opened.clone();
            std::thread::spawn(move || {
                let src = 2 + i;
                let share = hostile / usize::from(SOURCES);
                let pace = Duration::from_secs(5) / share as u32;
                let mut held: std::collections::VecDeque<TcpStream> = Default::default();
                for k in 0..share {
                    if t0.elapsed() > Duration::from_secs(60) {
                        break; // bounded, whatever happens
                    }
                    if let Some(s) = attack(k + usize::from(i), src, port) {
                        held.push_back(s);
                        if held.len() > 40 {
                            held.pop_front();
                        }
                    }
                    opened.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(pace);
                }
            })
        })
        .collect();

    // Meanwhile 50 short legitimate tests, in 5 lanes.
    let failures = Arc::new(Mutex::new(Vec::new()));
    let done = Arc::new(AtomicUsize::new(0));
    let lanes: Vec<_> = (0..LANES)
        .map(|_| {
            let (failures, done, dir, key_s) = (failures.clone(), done.clone(), dir.clone(), key_s.clone());
            std::thread::spawn(move || {
                for _ in 0..LEGIT / LANES {
                    let out = std::process::Command::new(BIN)
                        .args(["tput", "127.0.0.1", "-p", &port.to_string(), "-t", "0.2", "--key", &key_s, "--json"])
                        .env("HOME", &dir)
                        .output()
                        .unwrap();
                    let ok = out.status.success()
                        && records(&out).last().is_some_and(|e| e["complete"].as_bool() == Some(true));
                    if ok {
                        done.fetch_add(1, Ordering::Relaxed);
                    } else {
                        failures.lock().unwrap().push(String::from_utf8_lossy(&out.stderr).trim().to_string());
                    }
                }
            })
        })
        .collect();
    for l in lanes {
        l.join().unwrap();
    }
    let peak = held(pid);
    for c in crowd {
        c.join().unwrap();
    }
    let storm = t0.elapsed();
    let failures = failures.lock().unwrap().clone();
    assert!(failures.is_empty(), "{} legitimate tests failed: {failures:#?}", failures.len());
    assert_eq!(done.load(Ordering::Relaxed), LEGIT);

    // Afterwards: everything given back (the slow connections time out within 2 s, and the
    // server trims its allocator once the crowd's threads are gone).
    let mut after = settle(pid, Some(before));
    let t1 = Instant::now();
    while after.rss_kib > before.rss_kib + MEMORY_MARGIN_KIB && t1.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(100));
        after = held(pid);
    }
    let log = server.log_text();
    let capped = log.lines().filter(|l| l.contains("closed connection from") && l.contains("at once")).count();
    eprintln!(
        "hostile crowd: {} connections from {SOURCES} addresses over {:.1} s, {LEGIT} legitimate tests all \
         complete; server before {before:?}, at the peak {peak:?}, after {after:?}; {capped} cap log lines",
        opened.load(Ordering::Relaxed),
        storm.as_secs_f64()
    );
    assert!(after.fds <= before.fds + 2, "descriptors: {before:?} → {after:?}");
    assert!(after.threads <= before.threads + 1, "threads: {before:?} → {after:?}");
    assert!(
        after.rss_kib <= before.rss_kib + MEMORY_MARGIN_KIB,
        "memory: {before:?} → {after:?}; largest mappings:\n{}",
        largest_mappings(pid)
    );
    // The legitimate address was never refused; the crowd met the per-host cap.
    assert!(
        !log.lines().any(|l| l.contains("127.0.0.1:") && (l.contains("refused") || l.contains("at once"))),
        "{log}"
    );
    assert!(capped > 0, "the per-host cap was never reached:\n{log}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Waits (bounded) until the server's descriptors and threads stop changing, or fall back to
/// `target`'s, and returns what it holds then.
fn settle(pid: u32, target: Option<Held>) -> Held {
    let t0 = Instant::now();
    let mut last = held(pid);
    let mut stable = 0;
    while t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
        let now = held(pid);
        if let Some(t) = target {
            if now.fds <= t.fds && now.threads <= t.threads {
                return now;
            }
        } else if now.fds == last.fds && now.threads == last.threads {
            stable += 1;
            if stable >= 5 {
                return now;
            }
        } else {
            stable = 0;
        }
        last = now;
    }
    last
}

/// The server's mappings holding the most resident memory (for a failure message).
fn largest_mappings(pid: u32) -> String {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let mut maps: Vec<(u64, String)> = Vec::new();
    let mut name = String::new();
    for l in smaps.lines() {
        if let Some(kb) = l.strip_prefix("Rss:") {
            let kb: u64 = kb.trim().trim_end_matches(" kB").trim().parse().unwrap_or(0);
            maps.push((kb, name.clone()));
        } else if l.split_whitespace().next().is_some_and(|w| w.contains('-') && !w.ends_with(':')) {
            name = l.to_string();
        }
    }
    maps.sort_by_key(|m| std::cmp::Reverse(m.0));
    maps.iter().take(8).map(|(kb, n)| format!("{kb} kB {n}")).collect::<Vec<_>>().join("\n")
}
