//! Helpers shared by the integration tests: a `wanperf serve` child on an ephemeral port and
//! a client runner with a hard time limit.
#![allow(dead_code)]

use serde_json::Value;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_wanperf");

/// Shell functions for scripts that run clients one after another against one `iperf3 -s`
/// (`iperf3_next`, `iperf3c`; see the file).
pub const IPERF3_SH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/common/iperf3.sh");

/// A `wanperf serve` child process, killed on drop.
pub struct Server {
    pub child: Child,
    pub port: u16,
    pub log: Arc<Mutex<Vec<String>>>,
    /// The port for iperf3 clients, when started with --iperf3-port.
    pub iperf3_port: Option<u16>,
    /// The STAMP reflector's port, when started with --stamp-port.
    pub stamp_port: Option<u16>,
    /// The OWAMP server's port, when started with --owamp-port.
    pub owamp_port: Option<u16>,
}

impl Server {
    pub fn start(extra: &[&str]) -> Server {
        Server::start_on("127.0.0.1:0", extra)
    }

    pub fn start_on(listen: &str, extra: &[&str]) -> Server {
        let mut cmd = Command::new(BIN);
        cmd.args(["serve", "--listen", listen]).args(extra);
        Server::spawn(cmd)
    }

    /// A server from a prepared command (environment, another user), told to print its
    /// banner on stderr.
    pub fn spawn(mut cmd: Command) -> Server {
        let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("spawn server");
        let stderr = child.stderr.take().unwrap();
        let mut lines = BufReader::new(stderr).lines();
        let port_of = |line: &str, after: &str| {
            line.split_once(after)
                .and_then(|(_, rest)| rest.split_whitespace().next())
                .and_then(|a| a.rsplit_once(':'))
                .and_then(|(_, p)| p.parse::<u16>().ok())
        };
        // With --iperf3-port, "iperf3 clients on ADDR:PORT (...)", with --stamp-port "STAMP
        // and TWAMP-Light reflector on ADDR:PORT (...)" and with --root "copies into and out
        // of DIR" come before the banner.
        let mut first = lines.next().expect("server printed nothing").unwrap();
        let (mut iperf3_port, mut stamp_port, mut owamp_port) = (None, None, None);
        loop {
            if first.starts_with("iperf3 clients on ") {
                iperf3_port = port_of(&first, "iperf3 clients on ");
            } else if first.starts_with("STAMP and TWAMP-Light reflector on ") {
                stamp_port = port_of(&first, "reflector on ");
            } else if first.starts_with("OWAMP server on ") {
                owamp_port = port_of(&first, "OWAMP server on ");
            } else if !first.starts_with("copies into") {
                break;
            }
            first = lines.next().expect("server printed no banner").unwrap();
        }
        // "wanperf X listening on ADDR:PORT for ..."
        let port = port_of(&first, " listening on ").unwrap_or_else(|| panic!("no port in `{first}`"));
        let log = Arc::new(Mutex::new(vec![first]));
        let l2 = log.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                l2.lock().unwrap().push(line);
            }
        });
        Server { child, port, log, iperf3_port, stamp_port, owamp_port }
    }

    pub fn port_s(&self) -> String {
        self.port.to_string()
    }

    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    pub fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// Stops the server as Ctrl-C does; everything it logged, up to "server stopped".
    pub fn interrupt(mut self) -> String {
        wanperf_sys::signal::send_signal(self.child.id(), libc::SIGINT).unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "the server ended with {status}: {}", self.log_text());
        // The log reader sees the pipe's end just after the process's.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !self.log_text().contains("server stopped") && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.log_text()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs wanperf with `args`, failing the test if it takes longer than `limit`.
pub fn run(args: &[&str], limit: Duration) -> Output {
    let mut child =
        Command::new(BIN).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn wanperf");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let to = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let (err_tx, err_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        let _ = err_tx.send(v);
    });
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            // What it said before it hung (its children may hold the pipe a little longer).
            let said = err_rx.recv_timeout(Duration::from_secs(5)).unwrap_or_default();
            let said = String::from_utf8_lossy(&said);
            let tail: Vec<&str> = said.lines().rev().take(40).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            panic!("wanperf {args:?} did not finish within {limit:?} (hang); its stderr ended:\n{}", tail.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output { status, stdout: to.join().unwrap(), stderr: err_rx.recv().unwrap_or_default() }
}

/// Parses NDJSON output.
pub fn records(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line `{l}`: {e}")))
        .collect()
}

/// Runs a JSON tput against `server` and returns its records, asserting success.
pub fn tput_json(server: &Server, extra: &[&str]) -> Vec<Value> {
    tput_json_to(server, "127.0.0.1", extra)
}

/// Like [`tput_json`] against another server address.
pub fn tput_json_to(server: &Server, host: &str, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["tput", host, "-p"];
    let port = server.port_s();
    args.push(&port);
    args.push("--json");
    args.extend_from_slice(extra);
    let out = run(&args, Duration::from_secs(60));
    assert!(
        out.status.success(),
        "tput {extra:?} failed: {}\nstdout: {}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    records(&out)
}

pub fn end(recs: &[Value]) -> &Value {
    let last = recs.last().expect("no records");
    assert_eq!(last["event"], "end", "last record is not end: {last}");
    last
}

pub fn intervals(recs: &[Value]) -> Vec<&Value> {
    recs.iter().filter(|r| r["event"] == "interval").collect()
}

pub fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not an unsigned integer: {v}"))
}

pub fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Whether this machine lets us build emulated paths; fails under CI (which must be able to),
/// skips loudly elsewhere.
pub fn paths_available() -> bool {
    let out = run(&["path", "run", "--", "true"], Duration::from_secs(20));
    if out.status.success() {
        return true;
    }
    let why = String::from_utf8_lossy(&out.stderr).to_string();
    if std::env::var_os("CI").is_some() {
        panic!("cannot create emulated paths here: {why}");
    }
    eprintln!("SKIPPED: cannot create emulated paths here: {why}");
    false
}

/// The `--right` command that runs a wanperf server for the left host on port 5301.
pub fn right_server() -> String {
    format!("{BIN} serve --listen 0.0.0.0:5301 --allow 198.18.0.0/15")
}

/// `wanperf path run LINK --right '<wanperf serve>' -- wanperf CMD`, with a time limit.
pub fn on_path(link: &[&str], cmd: &[&str], limit: Duration) -> Output {
    on_path_serving(&[], link, cmd, limit)
}

/// [`on_path`] with more of `serve`'s flags (`--stamp-port 862`, …).
pub fn on_path_serving(serve: &[&str], link: &[&str], cmd: &[&str], limit: Duration) -> Output {
    let right = [right_server()].into_iter().chain(serve.iter().map(|s| s.to_string())).collect::<Vec<_>>().join(" ");
    let mut args = vec!["path", "run"];
    args.extend_from_slice(link);
    args.extend(["--right", &right, "--", BIN]);
    args.extend_from_slice(cmd);
    run(&args, limit)
}

/// The packets the emulator's random loss dropped in direction `dir` (`up`, `down`), from
/// `path run --json`'s stderr.
pub fn random_losses(stderr: &[u8], dir: &str) -> u64 {
    u(&path_stats(stderr)[dir]["classes"]["best_effort"]["random_losses"])
}

/// Asserts that the measured one-way medians (`fwd` left → right, `rev` back, ms) are the
/// configured ones: never 0.1 ms below, and above by at most 0.3 ms plus the emulator's own
/// stated median lateness each way. The emulator's lateness starts when it has read a packet;
/// what comes before (the sending host's stack, the emulator's wake-up to read the TUN
/// device) and after (the receiving host's stack) is not in it, and on a busy 2-core VM it
/// reached 0.11–0.23 ms at the median (CI: 30.108 and 10.115 ms with p50 lateness 0.7 µs).
pub fn assert_one_way(stderr: &[u8], (fwd, rev): (f64, f64), (want_fwd, want_rev): (f64, f64), what: &Value) {
    let stats = path_stats(stderr);
    let ok = |dir: &str, ms: f64, want: f64| {
        let late_ms = stats[dir]["lateness"]["p50_us"].as_f64().unwrap_or(0.0) / 1e3;
        ms >= want - 0.1 && ms <= want + 0.3 + late_ms
    };
    assert!(
        ok("up", fwd, want_fwd) && ok("down", rev, want_rev),
        "one-way medians {fwd} / {rev} ms (emulator lateness up {}, down {}): {what}",
        stats["up"]["lateness"],
        stats["down"]["lateness"]
    );
}

/// The emulator's counters from `path run --json`'s stderr.
pub fn path_stats(stderr: &[u8]) -> Value {
    let text = String::from_utf8_lossy(stderr);
    let line = text
        .lines()
        .find(|l| l.starts_with("{\"event\":\"path\""))
        .unwrap_or_else(|| panic!("no path stats in {text}"));
    serde_json::from_str::<Value>(line).unwrap()["stats"].clone()
}

/// Runs wanperf as the unprivileged user `nobody` (setpriv) with `args`, from a fresh
/// directory holding a copy of the binary and `files` (name, text). `None` means the case
/// cannot be run here: already unprivileged (the other tests cover it), or no unprivileged
/// user namespaces (which fails under CI, where they must exist).
pub fn run_as_nobody(files: &[(&str, &str)], args: &[&str]) -> Option<Output> {
    if wanperf_sys::euid() != 0 {
        eprintln!("SKIPPED: already unprivileged; the other tests cover this case");
        return None;
    }
    let nobody = ["--reuid=65534", "--regid=65534", "--clear-groups"];
    let probe = Command::new("setpriv").args(nobody).args(["unshare", "-r", "-n", "true"]).output();
    if !probe.is_ok_and(|o| o.status.success()) {
        if std::env::var_os("CI").is_some() {
            panic!("unprivileged user namespaces are not available (`unshare -r -n true` as nobody failed)");
        }
        eprintln!("SKIPPED: unprivileged user namespaces are not available here");
        return None;
    }
    use std::os::unix::fs::PermissionsExt;
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("wanperf-nobody-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = dir.join("wanperf");
    std::fs::copy(BIN, &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    for (name, text) in files {
        let f = dir.join(name);
        std::fs::write(&f, text).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let out = Command::new("setpriv").args(nobody).arg(&bin).args(args).current_dir(&dir).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    Some(out)
}

/// Per-probe RTTs in ms from iputils ping output.
pub fn ping_rtts(text: &str) -> Vec<f64> {
    text.lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.split_whitespace().next()?.parse().ok())
        .collect()
}

/// The smallest value of `v`.
pub fn least(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::INFINITY, f64::min)
}

/// The median (upper middle) of `v`, sorting it.
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// What one crossing of an emulated link may add to a ping's RTT on top of its configured delay
/// and serialization: the I/O thread's TUN (or packet socket) read and write, ~15 µs, and its
/// wake-up when it was asleep, tens of µs on an idle VM and more on a busy one (docs/net.md,
/// "What the emulator adds"). CI runs on a 2-vCPU VM have read 0.2 ms a crossing in the
/// smallest of seven pings and 0.37 ms in the smallest of three TCP SYN probes: a TUN read
/// has no kernel arrival time, so the wake-up is in every probe's RTT.
pub const CROSSING_MS: f64 = 0.5;

/// Whether `got_ms`, the smallest RTT of a set of probes over `crossings` emulated link
/// crossings whose delays and serialization add up to `want_ms`, fits: never faster than that
/// (ping prints 0.1 ms steps above 10 ms, hence 0.05 ms), at most [`CROSSING_MS`] a crossing
/// slower. The smallest, because it is the path's base delay (what the configuration sets and
/// what trace reports); each probe above it carries the VM's wake-up of the emulator thread,
/// which depends on the host's load: a CI run's 20 ms path read 20.4–20.7 ms, a median of 20.6.
pub fn rtt_fits(got_ms: f64, want_ms: f64, crossings: u32) -> bool {
    got_ms >= want_ms - 0.05 && got_ms <= want_ms + CROSSING_MS * f64::from(crossings)
}

/// Serialization in ms of an 84-byte IPv4 ping (56 data bytes) at `bps`.
pub fn ping_serialization_ms(bps: f64) -> f64 {
    84.0 * 8.0 / bps * 1e3
}

pub fn have(tool: &str) -> bool {
    let ok = Command::new(tool).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok();
    if !ok {
        if std::env::var_os("CI").is_some() {
            panic!("{tool} is not installed; .ci/run installs it");
        }
        eprintln!("SKIPPED: {tool} not installed");
    }
    ok
}

pub fn topo_file(name: &str, text: &str) -> String {
    let p = std::env::temp_dir().join(format!("wanperf-net-{}-{name}.toml", std::process::id()));
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

/// One-way delays of the chain's links: a–r1, r1–r2, …, r5–b.
pub const CHAIN_DELAYS_MS: [f64; 6] = [1.0, 2.0, 3.0, 4.0, 5.0, 1.0];

/// A 5-router chain a — r1 — … — r5 — b; `router_extra` is added to every router but r3,
/// `r3_extra` to r3, `last_link` to the r5–b link.
pub fn chain(router_extra: &str, r3_extra: &str, last_link: &str) -> String {
    chain_with(
        |r| if r == 3 { r3_extra } else { router_extra }.to_string(),
        |i| if i == 5 { last_link.to_string() } else { String::new() },
    )
}

/// The 5-router chain with `router(r)` added to router r (1–5) and `link(i)` to link i (0: a–r1,
/// …, 5: r5–b). Link 2 (r2–r3) has MTU 1400.
pub fn chain_with(router: impl Fn(usize) -> String, link: impl Fn(usize) -> String) -> String {
    let mut t = String::from("name = \"chain\"\n[[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n");
    for r in 1..=5 {
        t.push_str(&format!("[[router]]\nname = \"r{r}\"\n{}\n", router(r)));
    }
    let nodes = ["a", "r1", "r2", "r3", "r4", "r5", "b"];
    for (i, d) in CHAIN_DELAYS_MS.iter().enumerate() {
        t.push_str(&format!("[[link]]\na = \"{}\"\nb = \"{}\"\ndelay = \"{d}ms\"\n", nodes[i], nodes[i + 1]));
        if i == 2 {
            t.push_str("mtu = 1400\n");
        }
        t.push_str(&link(i));
        t.push('\n');
    }
    t
}

/// (address, RTTs in ms) per hop of `traceroute -n` output.
pub fn traceroute_hops(text: &str) -> Vec<(String, Vec<f64>)> {
    text.lines()
        .filter(|l| l.split_whitespace().next().is_some_and(|w| w.parse::<u32>().is_ok()))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let rtts = w.windows(2).filter(|p| p[1] == "ms").filter_map(|p| p[0].parse().ok()).collect();
            (w.get(1).unwrap_or(&"").to_string(), rtts)
        })
        .collect()
}

/// (address, loss %, best ms) per hop of `mtr -n -r` output.
pub fn mtr_hops(text: &str) -> Vec<(String, f64, f64)> {
    text.lines()
        .filter(|l| l.contains("|--"))
        .map(|l| {
            let w: Vec<&str> = l.split("|--").nth(1).unwrap().split_whitespace().collect();
            (w[0].to_string(), w[1].trim_end_matches('%').parse().unwrap(), w[5].parse().unwrap())
        })
        .collect()
}

/// `wanperf net run TOPOLOGY --host HOST -- sh -c SCRIPT`, killed after `limit`; the script sees
/// every host's address as $WANPERF_ADDR_<NAME>.
pub fn net_sh(topology: &str, host: &str, script: &str, limit: Duration) -> Output {
    run(&["net", "run", topology, "--host", host, "--", "sh", "-c", script], limit)
}

/// A named network that goes down when the test ends, passed or failed.
pub struct Up(pub String);

impl Up {
    pub fn new(topology: &str, name: &str) -> Up {
        ok(&run(&["net", "up", topology, name], Duration::from_secs(20)));
        Up(name.to_string())
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = run(&["net", "down", &self.0], Duration::from_secs(20));
    }
}

/// A fresh scratch directory for one test (`tag`), emptied if a killed run left it.
pub fn tmpdir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("wanperf-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A command's stderr as text.
pub fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn ok(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Network tests measure timing; one at a time (within a test binary) keeps them from
/// disturbing each other.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// a — r1 — r2 — b with r1 — r3 — r2 beside it (narrower, longer); the routers answer ICMP
/// without a rate limit, and a `[[route]]` override sends b → a over r3 (an asymmetric route).
pub const DIAMOND: &str = r#"
name = "diamond"
[[host]]
name = "a"
[[host]]
name = "b"
[[router]]
name = "r1"
icmp_ratelimit = "0ms"
[[router]]
name = "r2"
icmp_ratelimit = "0ms"
[[router]]
name = "r3"
icmp_ratelimit = "0ms"
[[link]]
a = "a"
b = "r1"
rate = "100M"
delay = "2ms"
[[link]]
a = "r1"
b = "r2"
rate = "20M"
delay = "4ms"
queue = "100kB"
[[link]]
a = "r2"
b = "b"
rate = "100M"
delay = "2ms"
[[link]]
a = "r1"
b = "r3"
rate = "8M"
delay = "6ms"
queue = "100kB"
[[link]]
a = "r3"
b = "r2"
rate = "100M"
delay = "6ms"
[[route]]
path = ["b", "r2", "r3", "r1", "a"]
"#;

/// A child process, killed and reaped on drop.
pub struct Kill(pub Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A TCP port free on loopback at the time of asking (for a program that cannot bind port 0
/// and say which it got).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// An `iperf3 -s` (with `extra` arguments) listening, and its port. iperf3 cannot bind port 0
/// and say which it got, so a free port is picked first; another test's socket can take it
/// before iperf3 binds (its ephemeral ports come from the same range), and iperf3 then exits
/// with "Address already in use" (seen in CI): that port is given up and another picked.
///
/// Readiness is iperf3's own "Server listening on" line, never a probe connection: iperf3
/// takes any connection for a test, and when that test fails it closes its listening socket
/// and opens a new one, resetting a client that connected in between (seen in CI). The same
/// happens after every test, so a server serves one client invocation here.
pub fn iperf3_server(extra: &[&str]) -> (Kill, String) {
    for _ in 0..20 {
        let port = free_port().to_string();
        let mut srv = Kill(
            Command::new("iperf3")
                .args(["-s", "-p", &port, "--forceflush"])
                .args(extra)
                .stdout(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        if announced(srv.0.stdout.take().unwrap(), "Server listening on") {
            return (srv, port);
        }
    }
    panic!("iperf3 -s found no free port in 20 tries");
}

/// Whether `out` prints a line containing `want` within 10 s (false: it ended first). The rest
/// is drained in the background so the child never blocks on a full pipe.
pub fn announced(out: std::process::ChildStdout, want: &str) -> bool {
    let (tx, rx) = std::sync::mpsc::channel();
    let wanted = want.to_string();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(out).lines();
        let seen = lines.by_ref().map_while(Result::ok).any(|l| l.contains(&wanted));
        let _ = tx.send(seen);
        for _ in lines {}
    });
    rx.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|_| panic!("neither `{want}` nor the end within 10 s"))
}
