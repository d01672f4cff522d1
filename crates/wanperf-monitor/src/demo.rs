//! A monitoring mesh on an emulated network ([`run_scenario`]): a `wanperf net` preset's
//! hosts each with an agent, central on the first, a link changed part way through, and the
//! events central raised. `wanperf mesh demo` is one (the IEPM 2000 sites, the dashboard on
//! this machine's loopback); `wanperf reproduce` runs seed 001's drop as another.

use anyhow::{anyhow, Context, Result};
use std::io::BufRead;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use wanperf_sys::INTERRUPTED;

/// The demo's sites: the IEPM 2000 network's hosts.
pub const DEMO_SITES: [&str; 6] = ["slac", "cern", "in2p3", "colorado", "caltech", "fnal"];

/// A mesh file over `sites` (one `all` group of them), with their public keys and addresses,
/// followed by `tests` (groups, tests and expectations as a mesh file writes them).
pub fn mesh_file(name: &str, summary: &str, sites: &[&str], keys: &[String], addrs: &[String], tests: &str) -> String {
    let mut m = format!("# wanperf: the {name} sites\n[mesh]\nname = \"{name}\"\nsummary = \"{summary}\"\n\n");
    for s in sites {
        m.push_str(&format!("[[site]]\nname = \"{s}\"\n"));
    }
    for (i, s) in sites.iter().enumerate() {
        m.push_str(&format!(
            "[[host]]\nname = \"{s}\"\nsite = \"{s}\"\naddress = \"{}\"\nkey = \"{}\"\n",
            addrs[i], keys[i]
        ));
    }
    m.push_str("[[group]]\nname = \"all\"\ntype = \"mesh\"\nmembers = [");
    m.push_str(&sites.iter().map(|s| format!("\"{s}\"")).collect::<Vec<_>>().join(", "));
    m.push_str("]\n");
    m.push_str(tests);
    m
}

/// The demo's mesh file, with the sites' public keys and addresses.
pub fn demo_mesh(keys: &[String], addrs: &[String]) -> String {
    let mut m = String::new();
    m.push_str("[[test]]\nname = \"rtt\"\ntype = \"latency\"\ngroup = \"all\"\nrate = 10\n");
    // Two throughput pairs that share no host run side by side: SLAC↔CERN across the
    // Atlantic, FNAL↔Caltech within the US.
    for (g, a, b) in [("slac-cern", "slac", "cern"), ("fnal-caltech", "fnal", "caltech")] {
        m.push_str(&format!("[[group]]\nname = \"{g}\"\ntype = \"mesh\"\nmembers = [\"{a}\", \"{b}\"]\n"));
        m.push_str(&format!(
            "[[test]]\nname = \"bulk-{g}\"\ntype = \"throughput\"\ngroup = \"{g}\"\ninterval = \"15s\"\nduration = \"3s\"\n"
        ));
        // And the same pairs' capacity, narrow link and bottleneck hop, every 30 s.
        m.push_str(&format!(
            "[[test]]\nname = \"capacity-{g}\"\ntype = \"capacity\"\ngroup = \"{g}\"\ninterval = \"30s\"\nslip = \"10s\"\nbudget = \"600k\"\ntime = \"5s\"\n"
        ));
    }
    // Every path traced every minute: the routers of the emulated network, hop by hop.
    m.push_str("[[test]]\nname = \"route\"\ntype = \"trace\"\ngroup = \"all\"\ninterval = \"60s\"\nslip = \"30s\"\n");
    m.push_str("[[expect]]\ngroup = \"all\"\nloss_max = 0.05\n");
    mesh_file("iepm-2000", "10s", &DEMO_SITES, keys, addrs, &m)
}

/// The demo's processes and network, torn down whatever happens.
struct DemoRun {
    exe: PathBuf,
    net: String,
    /// (name, process), stopped in reverse order.
    children: Vec<(String, std::process::Child)>,
    dir: PathBuf,
}

impl Drop for DemoRun {
    fn drop(&mut self) {
        for (_, c) in self.children.iter_mut().rev() {
            wanperf_net::child::stop_child(c);
        }
        let _ = std::process::Command::new(&self.exe)
            .args(["net", "down", &self.net])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A line above the progress bar, or on stderr when there is no bar (not a terminal).
fn say(bar: &indicatif::ProgressBar, line: &str) {
    if bar.is_hidden() {
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
}

/// A mesh on an emulated network: what [`run_scenario`] brings up, changes and watches.
pub struct Scenario<'a> {
    /// The `wanperf net` preset.
    pub preset: &'a str,
    /// Its hosts that run an agent; central runs on the first.
    pub sites: &'a [&'a str],
    /// The mesh file from the sites' public keys and addresses (in `sites`' order).
    pub mesh: &'a dyn Fn(&[String], &[String]) -> String,
    /// How long the mesh runs, s.
    pub seconds: f64,
    /// When the link changes, as a share of the run.
    pub change_at: f64,
    /// `wanperf net set` arguments after the network's name: the link, then `key=value`s.
    pub change: &'a [&'a str],
    /// The line printed when it changed.
    pub change_says: &'a str,
    /// The archive central stores results in.
    pub db: &'a str,
    /// A listening socket on this machine that central also serves (the dashboard).
    pub dashboard: Option<std::net::TcpListener>,
}

/// `wanperf mesh demo`: the IEPM 2000 network with an agent on every host and central on
/// SLAC's, for `minutes`, the dashboard on 127.0.0.1:`port`, results into the archive `db`.
pub fn run(minutes: f64, port: u16, db: &str) -> Result<()> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", port))
        .with_context(|| format!("cannot listen on 127.0.0.1:{} (try --port 0)", port))?;
    let url = format!("http://{}/", listener.local_addr()?);
    eprintln!("wanperf mesh demo: the IEPM 2000 network, 6 agents, central on slac (archive {db})");
    eprintln!("dashboard: {url}  (open it now; the mesh runs {} min)", minutes);
    let events = run_scenario(Scenario {
        preset: "iepm-2000",
        sites: &DEMO_SITES,
        mesh: &demo_mesh,
        seconds: minutes * 60.0,
        change_at: 0.4,
        change: &["geneva-cern", "rate_ab=2M"],
        change_says: "the Geneva→CERN link now carries 2 Mbit/s (was 100 Mbit/s)",
        db,
        dashboard: Some(listener),
    })?;
    eprintln!("stopping: {} events; the results are in the archive ({db})", events.len());
    Ok(())
}

/// Runs a [`Scenario`]: brings its network up, central and an agent on every site, changes
/// the link part way through, and returns central's events (their one-line texts, as
/// `ALERT` lines give them) when the time is up or on Ctrl-C (the caller tells them apart by
/// `INTERRUPTED`); everything is torn down whatever happens. Progress on stderr.
pub fn run_scenario(sc: Scenario<'_>) -> Result<Vec<String>> {
    let exe = std::env::current_exe().context("cannot find the wanperf binary")?;
    let id = std::process::id();
    let dir = std::env::temp_dir().join(format!("wanperf-mesh-{}-{id}", sc.preset));
    std::fs::create_dir_all(&dir)?;
    let net = format!("mesh{id}");
    let mut run = DemoRun { exe: exe.clone(), net: net.clone(), children: Vec::new(), dir: dir.clone() };

    let mut keys = Vec::new();
    for s in sc.sites {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|e| anyhow!("no randomness for keys: {e}"))?;
        let k = wanperf_proto::auth::PrivateKey::from_seed(seed, s);
        let path = dir.join(format!("{s}.key"));
        {
            use std::os::unix::fs::OpenOptionsExt;
            let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path)?;
            std::io::Write::write_all(&mut f, k.to_text().as_bytes())?;
        }
        keys.push((path, k.public().to_line()));
    }
    let ok = Command::new(&exe).args(["net", "up", sc.preset, &net]).stdout(Stdio::null()).output()?;
    if !ok.status.success() {
        return Err(anyhow!("cannot bring up the network: {}", String::from_utf8_lossy(&ok.stderr).trim()));
    }
    // Every host's first address, from the same plan `net up` builds.
    let preset = wanperf_net::presets::find(sc.preset).ok_or_else(|| anyhow!("no {} preset", sc.preset))?;
    let topo = wanperf_net::topo::Topology::parse(&preset.toml, &|f| Err(format!("no file {f} in a preset")))
        .map_err(|e| anyhow!("{}: {e}", sc.preset))?;
    let plan = wanperf_net::plan::Plan::new(&topo).map_err(|e| anyhow!("{}: {e}", sc.preset))?;
    let addrs: Vec<String> = sc
        .sites
        .iter()
        .map(|s| {
            topo.node(s)
                .and_then(|n| plan.addr_of(n))
                .map(|a| a.to_string())
                .ok_or_else(|| anyhow!("no address for {s} in the {} preset", sc.preset))
        })
        .collect::<Result<_>>()?;
    let mesh_path = dir.join("mesh.toml");
    std::fs::write(&mesh_path, (sc.mesh)(&keys.iter().map(|k| k.1.clone()).collect::<Vec<_>>(), &addrs))?;
    let central_addr = format!("{}:8080", addrs[0]);

    // Central, with the dashboard's socket (if any) inherited (descriptor flags cleared for exec).
    let mut central = Command::new(&exe);
    central
        .args(["net", "exec", &net, sc.sites[0], "--"])
        .arg(&exe)
        .args(["central", "--mesh"])
        .arg(&mesh_path)
        .args(["--listen", &central_addr, "--db", sc.db, "--reload", "2"]);
    if let Some(l) = &sc.dashboard {
        wanperf_sys::keep_across_exec(l).context("cannot hand the listening socket to central")?;
        central.args(["--listen-fd", &l.as_raw_fd().to_string()]);
    }
    let alerts = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let mut central = central.stdin(Stdio::null()).stderr(Stdio::piped()).spawn()?;
    drop(sc.dashboard);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let stderr = central.stderr.take().ok_or_else(|| anyhow!("no stderr"))?;
    let al = alerts.clone();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(std::result::Result::ok) {
            if line.contains("listening on") {
                let _ = ready_tx.send(Ok(()));
            } else if let Some(t) = line.strip_prefix("ALERT ") {
                al.lock().unwrap().push(t.to_string());
            } else if line.starts_with("error") {
                let _ = ready_tx.send(Err(line.clone()));
            }
        }
    });
    run.children.push(("central".into(), central));
    match ready_rx.recv_timeout(Duration::from_secs(30)) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(anyhow!("central: {e}")),
        Err(_) => return Err(anyhow!("central did not start within 30 s")),
    }
    let central_url = format!("http://{central_addr}");
    for (i, s) in sc.sites.iter().enumerate() {
        let c = Command::new(&exe)
            .args(["net", "exec", &net, s, "--"])
            .arg(&exe)
            // All the hosts read one kernel clock: their one-way delays have no clock error.
            .args(["agent", "--name", s, "--central", &central_url, "--poll", "5", "--clock-error", "0"])
            .arg("--key")
            .arg(&keys[i].0)
            .arg("--spool")
            .arg(dir.join(format!("{s}.spool")))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        run.children.push((s.to_string(), c));
    }
    let total = sc.seconds;
    let inject_at = sc.change_at * total;
    let bar = indicatif::ProgressBar::new(total as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} s  {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let t0 = std::time::Instant::now();
    let mut injected = false;
    let mut shown_alerts = 0;
    while t0.elapsed().as_secs_f64() < total && !INTERRUPTED.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(250));
        bar.set_position(t0.elapsed().as_secs());
        if !injected && t0.elapsed().as_secs_f64() >= inject_at {
            injected = true;
            let o = Command::new(&exe).args(["net", "set", &net]).args(sc.change).output()?;
            if !o.status.success() {
                bar.finish_and_clear();
                return Err(anyhow!("cannot change the link: {}", String::from_utf8_lossy(&o.stderr).trim()));
            }
            say(&bar, &format!("changed: {}", sc.change_says));
        }
        let new: Vec<String> = alerts.lock().unwrap()[shown_alerts..].to_vec();
        for a in new {
            say(&bar, &format!("event: {a}"));
            shown_alerts += 1;
        }
        for (name, c) in &mut run.children {
            if let Ok(Some(st)) = c.try_wait() {
                bar.finish_and_clear();
                return Err(anyhow!("{name} stopped early ({st})"));
            }
        }
    }
    bar.finish_and_clear();
    drop(run);
    let events = alerts.lock().unwrap().clone();
    Ok(events)
}
