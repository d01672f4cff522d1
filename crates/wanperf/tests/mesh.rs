//! A monitoring mesh on an emulated network: six sites around a core router, an agent on each
//! and `wanperf central` on a seventh host, run for a few minutes while the test changes
//! things: a link's rate is halved (an event on that pair, and only there), central is killed
//! and restarted (no result lost: every agent's results are in the archive without a gap),
//! the mesh file changes (every agent follows), an agent with a wrong key is refused, and an
//! agent killed outright is reported silent.
//! Exclusivity is checked in the archive (no two throughput runs share a host at once), and
//! the dashboard is loaded in headless Chromium inside central's namespace.

mod common;

use common::*;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wanperf_archive::{MeshQuery, MeshRow};

const SITES: usize = 6;
/// Throughput test interval, s: the rate drop must show within 3 of them.
const TPUT_EVERY: f64 = 10.0;

/// h1…h6 each behind its own 20 Mbit/s access link to a core router (one-way delays 2–12 ms),
/// and the central host c on a fast link.
fn topology() -> String {
    let mut t = String::from("name = \"mesh\"\n[[router]]\nname = \"core\"\n");
    for i in 1..=SITES {
        t.push_str(&format!("[[host]]\nname = \"h{i}\"\n"));
    }
    t.push_str("[[host]]\nname = \"c\"\n");
    for i in 1..=SITES {
        t.push_str(&format!(
            "[[link]]\na = \"h{i}\"\nb = \"core\"\nname = \"l{i}\"\nrate = \"20M\"\ndelay = \"{}ms\"\nqueue = \"60kB\"\n",
            2 * i
        ));
    }
    t.push_str("[[link]]\na = \"c\"\nb = \"core\"\nname = \"lc\"\ndelay = \"1ms\"\n");
    t
}

/// Host i's address: link i−1's `a` end.
fn addr(i: usize) -> String {
    format!("198.18.{}.1", i - 1)
}

fn mesh_file(keys: &[String], extra_test: bool) -> String {
    let mut m =
        String::from("[mesh]\nname = \"test-mesh\"\nsummary = \"10s\"\nsilent_after = 2\nheartbeat = \"15s\"\n");
    for i in 1..=SITES {
        m.push_str(&format!("[[site]]\nname = \"site{i}\"\n"));
    }
    for i in 1..=SITES {
        m.push_str(&format!(
            "[[host]]\nname = \"h{i}\"\nsite = \"site{i}\"\naddress = \"{}\"\nkey = \"{}\"\n",
            addr(i),
            keys[i - 1]
        ));
    }
    let all: Vec<String> = (1..=SITES).map(|i| format!("\"h{i}\"")).collect();
    m.push_str(&format!("[[group]]\nname = \"all\"\ntype = \"mesh\"\nmembers = [{}]\n", all.join(", ")));
    // Throughput between pairs of sites that share no access link with another pair.
    for (a, b) in [(1, 2), (3, 4), (5, 6)] {
        m.push_str(&format!("[[group]]\nname = \"p{a}{b}\"\ntype = \"mesh\"\nmembers = [\"h{a}\", \"h{b}\"]\n"));
        m.push_str(&format!(
            "[[test]]\nname = \"bulk{a}{b}\"\ntype = \"throughput\"\ngroup = \"p{a}{b}\"\ninterval = \"{TPUT_EVERY}s\"\nduration = \"2s\"\n"
        ));
    }
    m.push_str("[[test]]\nname = \"rtt\"\ntype = \"latency\"\ngroup = \"all\"\nrate = 10\n");
    if extra_test {
        m.push_str("[[test]]\nname = \"rtt-slow\"\ntype = \"latency\"\ngroup = \"p12\"\nrate = 2\n");
    }
    m
}

/// A daemon started with `net exec`, its stderr collected; killed on drop.
struct Daemon {
    child: Child,
    log: Arc<Mutex<Vec<String>>>,
}

impl Daemon {
    fn start(net: &str, host: &str, args: &[&str], ready: &str) -> Daemon {
        let mut child = Command::new(BIN)
            .args(["net", "exec", net, host, "--", BIN])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let l2 = log.clone();
        let stderr = child.stderr.take().unwrap();
        let ready = ready.to_string();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                // Logged before it is announced: whoever hears of it finds it in the log.
                let is_ready = line.contains(&ready);
                l2.lock().unwrap().push(line);
                if is_ready {
                    let _ = tx.send(());
                }
            }
        });
        if rx.recv_timeout(Duration::from_secs(30)).is_err() {
            let _ = child.kill();
            panic!("{args:?} on {host} did not become ready: {}", log.lock().unwrap().join("\n"));
        }
        Daemon { child, log }
    }

    fn text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// Waits until a log line contains `what`.
    fn wait_for(&self, what: &str, limit: Duration) -> bool {
        let t = Instant::now();
        while t.elapsed() < limit {
            if self.log.lock().unwrap().iter().any(|l| l.contains(what)) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        false
    }

    /// SIGTERM, then the exit within `limit`.
    fn stop(mut self, limit: Duration) -> String {
        let _ = wanperf_sys::terminate(self.child.id());
        let t = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            assert!(t.elapsed() < limit, "did not stop within {limit:?} after SIGTERM: {}", self.text());
            std::thread::sleep(Duration::from_millis(50));
        }
        self.text()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn keygen(dir: &Path, name: &str) -> (PathBuf, String) {
    let key = dir.join(format!("{name}.key"));
    ok(&run(&["keygen", "-o", key.to_str().unwrap(), "-C", name], Duration::from_secs(10)));
    let public = std::fs::read_to_string(dir.join(format!("{name}.key.pub"))).unwrap();
    (key, public.lines().find(|l| l.starts_with("wanperf")).unwrap().trim().to_string())
}

fn results(db: &Path) -> Vec<MeshRow> {
    let mut store = wanperf_archive::open_read_only(db.to_str().unwrap()).unwrap();
    store.mesh_results(&MeshQuery { from_unix: 0.0, to_unix: 1e12, ..Default::default() }).unwrap()
}

/// Chromium's DOM of central's dashboard at `hash`, loaded inside the central host.
fn dashboard_dom(net: &str, dir: &Path, hash: &str) -> String {
    let profile = dir.join(format!("chromium-{}", hash.len()));
    chromium_dom(net, "c", &profile, &format!("http://198.18.6.1:8080/{hash}"))
}

/// Chromium's DOM of `url`, loaded on `host` of the network.
///
/// The page is dumped when 8 s of virtual time have passed, and virtual time stands still
/// while a fetch is pending: a fetch that never ends (seen once in CI: Chromium ran past the
/// test's two minutes) would hold the dump forever. `--timeout` bounds that in real time:
/// Chromium then stops loading and dumps the page as it is, and the test's assertions say
/// what is missing, with Chromium's own log.
fn chromium_dom(net: &str, host: &str, profile: &Path, url: &str) -> String {
    let out = run(
        &[
            "net",
            "exec",
            net,
            host,
            "--",
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--virtual-time-budget=8000",
            "--timeout=60000",
            &format!("--user-data-dir={}", profile.display()),
            "--dump-dom",
            url,
        ],
        Duration::from_secs(120),
    );
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    if !dom.contains("last refresh") || !out.status.success() {
        eprintln!("chromium on {host} ({}) said:\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    }
    dom
}

fn chromium_here() -> bool {
    Command::new("chromium")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn a_mesh_on_an_emulated_network_finds_a_halved_link_and_loses_nothing() {
    let _g = serial();
    if !paths_available() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("wanperf-mesh-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let topo = topo_file("mesh", &topology());
    let net = format!("mesh{}", std::process::id());
    let _up = Up::new(&topo, &net);

    let keys: Vec<(PathBuf, String)> = (1..=SITES).map(|i| keygen(&dir, &format!("h{i}"))).collect();
    let publics: Vec<String> = keys.iter().map(|k| k.1.clone()).collect();
    let mesh_path = dir.join("mesh.toml");
    std::fs::write(&mesh_path, mesh_file(&publics, false)).unwrap();
    let db = dir.join("central.sqlite");
    let central_args = [
        "central",
        "--mesh",
        mesh_path.to_str().unwrap(),
        "--listen",
        "0.0.0.0:8080",
        "--db",
        db.to_str().unwrap(),
        "--reload",
        "1",
    ];
    let mut central = Some(Daemon::start(&net, "c", &central_args, "wanperf central listening on"));
    let central_url = "http://198.18.6.1:8080";
    let t0 = Instant::now();
    let mut agents = Vec::new();
    for i in 1..=SITES {
        let name = format!("h{i}");
        let spool = dir.join(format!("{name}.spool"));
        let args = [
            "agent",
            "--name",
            &name,
            "--central",
            central_url,
            "--key",
            keys[i - 1].0.to_str().unwrap(),
            "--spool",
            spool.to_str().unwrap(),
            "--poll",
            "2",
        ];
        agents.push(Daemon::start(&net, &name, &args, "listening on"));
    }

    // An agent holding a key the mesh does not list for it is refused, and says so.
    let (wrong_key, _) = keygen(&dir, "intruder");
    let intruder = Daemon::start(
        &net,
        "h1",
        &[
            "agent",
            "--name",
            "h1",
            "--mesh",
            mesh_path.to_str().unwrap(),
            "--central",
            central_url,
            "--key",
            wrong_key.to_str().unwrap(),
            "--spool",
            dir.join("intruder.spool").to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ],
        "",
    );
    // It refuses to start at all: its key is not the one listed for h1.
    let t = Instant::now();
    let mut intruder = intruder;
    while intruder.child.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = intruder.child.try_wait().unwrap().expect("an agent with the wrong key kept running");
    assert!(!status.success());
    // Its last words may still be on their way through the log reader when it has exited.
    let said = intruder.wait_for("does not match the key the mesh file lists", Duration::from_secs(10));
    assert!(said, "{}", intruder.text());

    // Baseline: at least six throughput runs of every pair before the change.
    std::thread::sleep(Duration::from_secs_f64(7.0 * TPUT_EVERY));

    // Kill central for a while (results pile up in the spools), then start it again.
    let c = central.take().unwrap();
    drop(c); // SIGKILL
    std::thread::sleep(Duration::from_secs(15));
    central = Some(Daemon::start(&net, "c", &central_args, "wanperf central listening on"));

    // Halve h1's uplink: h1→h2's throughput drops (20 → 10 Mbit/s); nothing else should.
    ok(&run(&["net", "set", &net, "l1", "rate_ab=10M"], Duration::from_secs(10)));
    let changed_at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    let c = central.as_ref().unwrap();
    let found = c.wait_for("ALERT h1→h2 throughput", Duration::from_secs_f64(4.0 * TPUT_EVERY + 20.0));
    assert!(found, "no throughput event for h1→h2 within 4 intervals:\n{}", c.text());

    // An agent killed outright is reported silent within two of its contact intervals (the
    // mesh's 15 s heartbeat here); its spool keeps what it had not sent. It is killed now, so that
    // the wait for its silence runs while the others follow a mesh change and the dashboard
    // is read.
    let h6 = agents.pop().unwrap();
    drop(h6); // SIGKILL

    // The mesh file changes: every agent follows within a minute (here: the poll of 2 s).
    std::fs::write(&mesh_path, mesh_file(&publics, true)).unwrap();
    for (i, a) in agents.iter().enumerate() {
        assert!(
            a.wait_for("mesh `test-mesh` changed", Duration::from_secs(60)),
            "h{} did not follow:\n{}",
            i + 1,
            a.text()
        );
    }

    // The dashboard in Chromium, inside central's network.
    if chromium_here() {
        let grid = dashboard_dom(&net, &dir, "#/");
        let cells = grid.matches("data-src=").count();
        assert!(cells >= SITES * (SITES - 1), "grid has {cells} cells:\n{grid}");
        assert!(!grid.contains("data-status=\"unknown\""), "a cell has no data:\n{grid}");
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
        let range = format!("#/pair/h1/h2?from={:.0}&to={:.0}", now - t0.elapsed().as_secs_f64(), now + 5.0);
        let pair = dashboard_dom(&net, &dir, &range);
        assert!(pair.matches("class=\"slot\"").count() > 5, "no RTT smoke:\n{pair}");
        assert!(pair.contains("class=\"point"), "no throughput series:\n{pair}");
        assert!(pair.contains("event-line"), "the event is not on the pair's time axis:\n{pair}");
    } else {
        assert!(std::env::var_os("CI").is_none(), "no chromium, and CI is set");
    }

    let c = central.as_ref().unwrap();
    assert!(c.wait_for("ALERT h6 silent since", Duration::from_secs(45)), "h6 not reported silent:\n{}", c.text());

    // Stop the agents; once their spools are empty, every result is in the archive.
    let mut logs = Vec::new();
    for a in agents {
        logs.push(a.stop(Duration::from_secs(40)));
    }
    let central_log = central.take().unwrap().stop(Duration::from_secs(10));
    let elapsed = t0.elapsed().as_secs_f64();
    let rows = results(&db);
    for i in 1..=SITES {
        let name = format!("h{i}");
        let spool = wanperf_monitor::spool::Spool::open(&dir.join(format!("{name}.spool")), 1_000_000).unwrap();
        let mine: Vec<i64> = rows.iter().filter(|r| r.agent == name).map(|r| r.seq).collect();
        let held = spool.len() as i64;
        // Nothing lost: what the archive holds and what is still spooled are together every
        // number from 1 (the spool numbers without gaps); nothing is stored twice. (A batch
        // stored just before its agent was killed is in both, until the agent resends it.)
        let mut sorted = mine.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), mine.len(), "{name}: a result stored twice");
        let mut all = sorted.clone();
        all.extend(spool.peek(1_000_000).unwrap().iter().map(|r| r.seq as i64));
        all.sort_unstable();
        all.dedup();
        let max = all.last().copied().unwrap_or(0);
        assert_eq!(all, (1..=max).collect::<Vec<_>>(), "{name}: results lost (neither stored nor spooled)");
        assert!(sorted.len() as i64 >= max - held, "{name}: spooled results missing");
        if i == SITES {
            continue; // killed early on purpose
        }
        // One latency summary per peer per 10 s, give or take the first and last.
        let summaries = rows.iter().filter(|r| r.agent == name && r.kind == "latency" && r.status == "ok").count();
        let want = (SITES - 1) as f64 * elapsed / 10.0;
        assert!(
            summaries as f64 + held as f64 >= 0.7 * want,
            "{name}: {summaries} summaries, about {want:.0} expected"
        );
    }
    // No two throughput runs touched one host at once.
    let mut runs: Vec<&MeshRow> = rows.iter().filter(|r| r.kind == "throughput" && r.status == "ok").collect();
    assert!(runs.len() >= 6 * 6, "only {} throughput runs", runs.len());
    runs.sort_by(|a, b| a.start_unix.total_cmp(&b.start_unix));
    for (i, a) in runs.iter().enumerate() {
        for b in &runs[i + 1..] {
            if b.start_unix >= a.end_unix {
                break;
            }
            let share = [&a.src, &a.dst].iter().any(|h| **h == b.src || **h == b.dst);
            assert!(!share, "overlapping runs on one host: {a:?} and {b:?}");
        }
    }
    // The drop is on h1→h2 only: no other pair has a throughput event after the change.
    let alerts: Vec<&str> = central_log.lines().filter(|l| l.contains("ALERT") && l.contains("throughput")).collect();
    for a in &alerts {
        assert!(a.contains("h1→h2"), "a throughput event on another pair: {a}\n{central_log}");
    }
    let after: Vec<f64> = rows
        .iter()
        .filter(|r| r.src == "h1" && r.dst == "h2" && r.kind == "throughput" && r.start_unix > changed_at + 1.0)
        .filter_map(|r| r.value)
        .collect();
    assert!(after.iter().all(|v| *v < 12e6), "h1→h2 after the change: {after:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Trace and capacity tests in a mesh: the diamond network (a and b joined over r1–r2 at 20
/// Mbit/s, or over r1–r3–r2, 8 Mbit/s, when r1–r2 costs more), an agent on each end and
/// central on a. When r1–r2's cost rises mid-run, the next traces of both directions go
/// through r3: a route-change event on each pair, with the hop and both addresses; the
/// capacity runs find 20 and then 8 Mbit/s, a capacity event; the pair page shows the new
/// route hop by hop, the capacity runs, and the one-way delays with the clock error both
/// agents stated.
#[test]
fn trace_and_capacity_tests_turn_a_route_change_into_events() {
    let _g = serial();
    if !paths_available() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("wanperf-mesh-trace-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let topo = topo_file("mesh-diamond", DIAMOND.split("[[route]]").next().unwrap());
    let net = format!("mt{}", std::process::id());
    let _up = Up::new(&topo, &net);
    // a is 198.18.0.1 (the a–r1 link), b 198.18.2.2 (the r2–b link).
    let mesh = "[mesh]\nname = \"diamond\"\nsummary = \"10s\"\n[[site]]\nname = \"s\"\n\
        [[host]]\nname = \"a\"\nsite = \"s\"\naddress = \"198.18.0.1\"\n\
        [[host]]\nname = \"b\"\nsite = \"s\"\naddress = \"198.18.2.2\"\n\
        [[group]]\nname = \"ab\"\nmembers = [\"a\", \"b\"]\n\
        [[test]]\nname = \"rtt\"\ntype = \"latency\"\ngroup = \"ab\"\nrate = 5\n\
        [[test]]\nname = \"route\"\ntype = \"trace\"\ngroup = \"ab\"\ninterval = \"10s\"\nrounds = 2\n\
        [[test]]\nname = \"cap\"\ntype = \"capacity\"\ngroup = \"ab\"\ninterval = \"10s\"\nbudget = \"300k\"\ntime = \"4s\"\n";
    let mesh_path = dir.join("mesh.toml");
    std::fs::write(&mesh_path, mesh).unwrap();
    let db = dir.join("central.sqlite");
    let m = mesh_path.to_str().unwrap();
    let central = Daemon::start(
        &net,
        "a",
        &["central", "--mesh", m, "--listen", "0.0.0.0:8080", "--db", db.to_str().unwrap(), "--insecure"],
        "wanperf central listening on",
    );
    let mut agents = Vec::new();
    for h in ["a", "b"] {
        let spool = dir.join(format!("{h}.spool"));
        let args = [
            "agent",
            "--name",
            h,
            "--mesh",
            m,
            "--central",
            "http://198.18.0.1:8080",
            "--spool",
            spool.to_str().unwrap(),
            "--clock-error",
            "0.1ms",
        ];
        agents.push(Daemon::start(&net, h, &args, "listening on"));
    }
    // Two traces of each direction and three capacity runs of a→b on the first route, then
    // the change.
    let count = |kind: &str, src: &str| {
        results(&db).into_iter().filter(|r| r.kind == kind && r.src == src && r.status == "ok").count()
    };
    let t = Instant::now();
    let ready = || count("trace", "a") >= 2 && count("trace", "b") >= 2 && count("capacity", "a") >= 3;
    while !ready() && t.elapsed() < Duration::from_secs(90) {
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(ready(), "not enough traces and capacity runs stored:\n{}", central.text());
    assert!(!central.text().contains("route changed"), "a route change before any:\n{}", central.text());
    ok(&run(&["net", "set", &net, "r1-r2", "cost=10"], Duration::from_secs(10)));
    let changed_at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    for (pair, hop) in [("a→b", "hop 2 198.18.1.2 → 198.18.3.2"), ("b→a", "hop 2 198.18.1.1 → 198.18.4.1")] {
        let found = central.wait_for(&format!("{pair} route changed"), Duration::from_secs(40));
        assert!(found, "no route change event for {pair}:\n{}", central.text());
        let text = central.text();
        let line = text.lines().find(|l| l.contains(&format!("{pair} route changed"))).unwrap();
        assert!(line.contains("ALERT") && line.contains(hop) && line.contains("(3 → 4 hops)"), "{line}");
    }
    // The capacity runs: 20 Mbit/s before (the link into r2, hop 2), 8 after (into r3).
    let found = central.wait_for("a→b capacity", Duration::from_secs(60));
    assert!(found, "no capacity event for a→b:\n{}", central.text());
    let text = central.text();
    let line = text.lines().find(|l| l.contains("a→b capacity")).unwrap();
    // "a→b capacity 20.0 → 8.0 Mbit/s since …": before is the earlier runs' mean, after the
    // two new runs' (one of which may straddle the change).
    let nums: Vec<f64> = line
        .split("capacity ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .filter_map(|w| w.parse::<f64>().ok())
        .take(2)
        .collect();
    assert!(line.contains("ALERT") && line.contains("Mbit/s"), "{line}");
    assert!((nums[0] - 20.0).abs() <= 0.4 && nums[1] < 14.0, "{line}");
    let caps: Vec<(f64, f64, Option<u64>)> = results(&db)
        .iter()
        .filter(|r| r.kind == "capacity" && r.src == "a" && r.status == "ok")
        .map(|r| (r.start_unix, r.value.unwrap(), r.detail["capacity"]["bottleneck_ttl"].as_u64()))
        .collect();
    for (t, bps, ttl) in &caps {
        // A run that straddles the change is either; the others are one or the other.
        if (*t - changed_at).abs() < 6.0 {
            continue;
        }
        let want = if *t < changed_at { 20e6 } else { 8e6 };
        assert!((bps - want).abs() <= 0.02 * want, "a→b capacity {bps} at {t} (change at {changed_at}): {caps:?}");
        assert_eq!(*ttl, Some(2), "{caps:?}");
    }
    // The archive holds every trace with its hops: the last of a→b goes a, r1, r3, r2, b.
    let rows = results(&db);
    let last = rows
        .iter()
        .filter(|r| r.kind == "trace" && r.src == "a")
        .max_by(|x, y| x.start_unix.total_cmp(&y.start_unix))
        .unwrap();
    let hops: Vec<&str> =
        last.detail["trace"]["hops"].as_array().unwrap().iter().filter_map(|h| h["addrs"][0].as_str()).collect();
    assert_eq!(hops, ["198.18.0.2", "198.18.3.2", "198.18.4.2", "198.18.2.2"], "{:?}", last.detail);
    // Each trace went to the other agent's echo and has its counts: the destination's loss
    // split by direction, over every probe that reached it (two rounds at least).
    for r in rows.iter().filter(|r| r.kind == "trace" && r.status == "ok") {
        let w = &r.detail["trace"]["one_way"];
        let n = |k: &str| w[k].as_u64().unwrap_or_else(|| panic!("no {k} in {:?}", r.detail));
        assert!(n("sent") >= 2 && n("arrived") <= n("sent") && n("answered") <= n("arrived"), "{:?}", r.detail);
        let pct = |k: &str| w[k].as_f64().unwrap();
        let there = 100.0 * (n("sent") - n("arrived")) as f64 / n("sent") as f64;
        assert!((pct("forward_loss_pct") - there).abs() < 1e-6, "{:?}", r.detail);
        assert!(pct("reverse_loss_pct") >= 0.0, "{:?}", r.detail);
    }

    if chromium_here() {
        let dom = chromium_dom(&net, "a", &dir.join("chromium"), "http://198.18.0.1:8080/#/pair/a/b");
        let route = dom.split("id=\"route\"").nth(1).unwrap_or_else(|| panic!("no route table:\n{dom}"));
        let route = route.split("</table>").next().unwrap();
        assert!(route.contains("198.18.3.2") && route.contains("198.18.4.2"), "{route}");
        assert!(dom.contains("clock error ± 0.2 ms"), "the clock error is not shown:\n{dom}");
        assert!(dom.contains("route changed"), "the route change is not among the pair's events");
        assert!(dom.contains("lost on the way there"), "the trace's loss by direction is not shown:\n{dom}");
        assert!(dom.contains("capacity-point"), "no capacity runs on the throughput chart");
    }
    for a in agents {
        a.stop(Duration::from_secs(15));
    }
    central.stop(Duration::from_secs(15));
    let _ = std::fs::remove_dir_all(&dir);
}
