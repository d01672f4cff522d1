//! The daemon that owns a named path (`wanperf path up NAME`), and its replies.

use crate::daemon::{self, Answer, Kind, Request};
use crate::path::Path;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use wanperf_emu::path::{Host, PathConfig, PathStats};

/// The reply to [`Request::Info`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PathInfo {
    pub name: String,
    pub pid: u32,
    pub left_fd: i32,
    pub right_fd: i32,
    pub host_cpus: Vec<usize>,
    pub uptime_s: f64,
    pub config: PathConfig,
    /// The hosts' limits' control groups (CPU quota, disk rates), left and right.
    #[serde(default)]
    pub cgroups: [Vec<String>; 2],
}

impl PathInfo {
    /// The control groups of `host`'s limits (none without any).
    pub fn cgroup(&self, host: Host) -> &[String] {
        &self.cgroups[usize::from(host != Host::Left)]
    }

    /// The namespace descriptor of `host`.
    pub fn fd(&self, host: Host) -> i32 {
        if host == Host::Left {
            self.left_fd
        } else {
            self.right_fd
        }
    }
}

/// The reply to [`Request::Stats`] and [`Request::Down`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatsReply {
    pub stats: PathStats,
}

/// The hidden command line that runs the daemon of path `name` with `cfg`.
pub fn start(name: &str, cfg: &PathConfig) -> Result<()> {
    let cfg = serde_json::to_string(cfg)?;
    daemon::start(Kind::Path, name, &["path", "__daemon", name, &cfg])
}

/// `wanperf path __daemon NAME CONFIG`: owns one path until asked to stop.
pub fn run(name: &str, cfg_json: &str) -> Result<ExitCode> {
    let cfg: PathConfig = serde_json::from_str(cfg_json).context("bad path configuration")?;
    wanperf_sys::new_session();
    let path = match Path::start(&cfg, None) {
        Ok(p) => p,
        Err(e) => {
            daemon::report(&format!("error: {e}"));
            return Ok(ExitCode::FAILURE);
        }
    };
    let started = Instant::now();
    let listening = daemon::serve(
        &Kind::Path.socket(name)?,
        || {},
        |req| match req {
            Request::Info => Answer::reply(&PathInfo {
                name: name.to_string(),
                pid: std::process::id(),
                left_fd: path.ns_fd(Host::Left),
                right_fd: path.ns_fd(Host::Right),
                host_cpus: path.host_cpus().to_vec(),
                uptime_s: started.elapsed().as_secs_f64(),
                config: cfg.clone(),
                cgroups: [path.cgroup_dir(Host::Left), path.cgroup_dir(Host::Right)],
            }),
            Request::Stats => Answer::reply(&StatsReply { stats: path.stats() }),
            Request::Down => {
                // Commands started with `path exec` end with the path (they would keep its
                // namespaces alive).
                let fds = [path.ns_fd(Host::Left), path.ns_fd(Host::Right)];
                wanperf_emu::netns::end_processes_in(&fds, Duration::from_secs(2));
                Answer::last(&StatsReply { stats: path.stats() })
            }
            Request::Set { .. } => Answer::error("a path has no links to set: use `wanperf net`"),
        },
    )?;
    drop(path);
    Ok(if listening { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// `path list`: the named paths that are up, a line each (or one JSON record).
pub fn paths(up: &[PathInfo], json: bool) -> Vec<String> {
    if json {
        return vec![serde_json::json!({"event": "paths", "paths": up}).to_string()];
    }
    if up.is_empty() {
        return vec!["no paths are up".into()];
    }
    up.iter()
        .map(|r| {
            let rtt = (r.config.up.delay_ns + r.config.down.delay_ns) as f64 / 1e6;
            format!("{:<20} RTT {rtt:.1} ms, up {:.0} s", r.name, r.uptime_s)
        })
        .collect()
}
