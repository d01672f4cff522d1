//! Load generator for `bench/mesh.sh`: simulated agents speaking the agents' protocol
//! (signed batches of one-minute latency summaries) against a `wanperf central`.
//!
//! ```text
//! mesh_load mesh N [PORT RATE]             # a mesh file of N hosts (a0…), keys from fixed seeds
//! mesh_load send URL N THREADS SECONDS B   # N agents' summaries in batches of B, for SECONDS
//! mesh_load year URL N                     # a year of one-minute summaries of a0 → a1
//! mesh_load key I                          # agent I's private key file
//! ```
//! `send` prints one JSON line: results acknowledged, rate, and batch round-trip quantiles.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wanperf_mesh::summary::LatencySummary;
use wanperf_mesh::wire::{Ack, Batch, MeshResult, ResultKind, RunStatus};
use wanperf_proto::auth::PrivateKey;

fn key(i: usize) -> PrivateKey {
    let mut seed = [7u8; 32];
    seed[..8].copy_from_slice(&(i as u64).to_le_bytes());
    PrivateKey::from_seed(seed, &format!("a{i}"))
}

fn now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64()
}

fn summary(t: f64, x: u64) -> LatencySummary {
    let base = 20.0 + (x % 17) as f64;
    LatencySummary {
        start: t,
        end: t + 60.0,
        sent: 600,
        lost: x % 3,
        loss: (x % 3) as f64 / 600.0,
        min_ms: Some(base),
        p25_ms: Some(base + 0.2),
        median_ms: Some(base + 0.4),
        p75_ms: Some(base + 0.7),
        p90_ms: Some(base + 1.1),
        max_ms: Some(base + 9.0),
        iqr_ms: Some(0.5),
        reordered: 0,
        duplicates: 0,
        owd_fwd_median_ms: None,
        owd_rev_median_ms: None,
    }
}

fn result(seq: u64, src: usize, dst: usize, t: f64) -> MeshResult {
    MeshResult {
        seq,
        test: "rtt".into(),
        kind: ResultKind::Latency,
        src: format!("a{src}"),
        dst: format!("a{dst}"),
        start: t,
        end: t + 60.0,
        status: RunStatus::Ok,
        reason: None,
        latency: Some(summary(t, seq)),
        throughput: None,
        trace: None,
        capacity: None,
    }
}

fn post(url: &str, k: &PrivateKey, agent: &str, results: Vec<MeshResult>) -> Result<Ack, String> {
    let body = serde_json::to_vec(&Batch { agent: agent.into(), results, clock: None }).map_err(|e| e.to_string())?;
    let time = now() as i64;
    let sig = k.sign_message(&wanperf_mesh::wire::signing_message(agent, time, &body));
    ureq::post(&format!("{url}/api/v1/results"))
        .timeout(Duration::from_secs(60))
        .set("x-wanperf-agent", agent)
        .set("x-wanperf-time", &time.to_string())
        .set("x-wanperf-signature", &sig)
        .send_bytes(&body)
        .map_err(|e| e.to_string())?
        .into_json::<Ack>()
        .map_err(|e| e.to_string())
}

fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n = |i: usize| -> usize { args.get(i).and_then(|a| a.parse().ok()).expect("a number argument") };
    match args.first().map(String::as_str) {
        Some("mesh") => {
            let agents = n(1);
            let port: u16 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(5301);
            let rate: f64 = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(10.0);
            println!("[mesh]\nname = \"load\"\n[[site]]\nname = \"s\"");
            for i in 0..agents {
                println!(
                    "[[host]]\nname = \"a{i}\"\nsite = \"s\"\naddress = \"127.{}.{}.{}\"\nport = {port}\nkey = \"{}\"",
                    ((i + 1) >> 16) & 255,
                    ((i + 1) >> 8) & 255,
                    (i + 1) & 255,
                    key(i).public().to_line()
                );
            }
            let members: Vec<String> = (0..agents).map(|i| format!("\"a{i}\"")).collect();
            println!("[[group]]\nname = \"all\"\ntype = \"mesh\"\nmembers = [{}]", members.join(", "));
            println!("[[test]]\nname = \"rtt\"\ntype = \"latency\"\ngroup = \"all\"\nrate = {rate}");
        }
        Some("key") => print!("{}", key(n(1)).to_text()),
        Some("send") => {
            let url = args[1].clone();
            let (agents, threads, seconds, batch) = (n(2), n(3), n(4) as f64, n(5));
            let keys: Arc<Vec<PrivateKey>> = Arc::new((0..agents).map(key).collect());
            let acked = Arc::new(AtomicU64::new(0));
            let errors = Arc::new(AtomicU64::new(0));
            let rtts = Arc::new(Mutex::new(Vec::new()));
            let stop = Arc::new(AtomicBool::new(false));
            let t0 = Instant::now();
            let handles: Vec<_> = (0..threads)
                .map(|th| {
                    let (keys, acked, errors, rtts, stop, url) =
                        (keys.clone(), acked.clone(), errors.clone(), rtts.clone(), stop.clone(), url.clone());
                    std::thread::spawn(move || {
                        // This thread's agents, each with its own sequence.
                        let mine: Vec<usize> = (0..agents).filter(|a| a % threads == th).collect();
                        let mut seqs = vec![0u64; mine.len()];
                        let mut j = 0usize;
                        while !stop.load(Ordering::Relaxed) && t0.elapsed().as_secs_f64() < seconds {
                            let slot = j % mine.len();
                            let a = mine[slot];
                            j += 1;
                            let t = now() - 60.0;
                            let results: Vec<MeshResult> = (0..batch)
                                .map(|b| {
                                    seqs[slot] += 1;
                                    let dst = (a + 1 + b % (agents - 1)) % agents;
                                    result(seqs[slot], a, dst, t)
                                })
                                .collect();
                            let s = Instant::now();
                            match post(&url, &keys[a], &format!("a{a}"), results) {
                                Ok(ack) => {
                                    acked.fetch_add(ack.accepted, Ordering::Relaxed);
                                    rtts.lock().unwrap().push(s.elapsed().as_secs_f64() * 1e3);
                                }
                                Err(e) => {
                                    if errors.fetch_add(1, Ordering::Relaxed) == 0 {
                                        eprintln!("mesh_load: {e}");
                                    }
                                }
                            }
                        }
                    })
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
            let secs = t0.elapsed().as_secs_f64();
            let mut r = rtts.lock().unwrap().clone();
            let a = acked.load(Ordering::Relaxed);
            println!(
                "{}",
                serde_json::json!({
                    "results": a, "seconds": secs, "per_second": a as f64 / secs,
                    "batches": r.len(), "errors": errors.load(Ordering::Relaxed),
                    "batch_ms_p50": quantile(&mut r, 0.5), "batch_ms_p99": quantile(&mut r, 0.99),
                })
            );
        }
        Some("year") => {
            let url = args[1].clone();
            let k = key(0);
            let start = now() - 365.0 * 86_400.0;
            let total = 365 * 1440u64;
            let mut seq = 1_000_000_000u64;
            let mut i = 0u64;
            while i < total {
                let results: Vec<MeshResult> = (i..(i + 5000).min(total))
                    .map(|m| {
                        seq += 1;
                        result(seq, 0, 1, start + m as f64 * 60.0)
                    })
                    .collect();
                i += results.len() as u64;
                post(&url, &k, "a0", results).expect("post");
            }
            println!("{}", serde_json::json!({ "summaries": total }));
        }
        _ => {
            eprintln!("usage: mesh_load mesh N | send URL N THREADS SECONDS BATCH | year URL N");
            std::process::exit(2);
        }
    }
}
