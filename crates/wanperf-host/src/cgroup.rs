//! A host's CPU quota as a control group: made when the network starts, joined by every
//! process the host runs (each writes itself into `cgroup.procs` before it execs), read for
//! what the quota did, removed with the network.
//!
//! cgroup v2 (`cpu.max`) where a cgroup2 hierarchy offers the cpu controller, else v1's cpu
//! controller (`cpu.cfs_quota_us`); the two parsers below are pure and tested on the kernel's
//! text.

use serde::Serialize;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};

/// Why a quota could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// No hierarchy offers the cpu controller.
    #[error("a CPU quota needs the cpu controller of cgroup v2 or v1, and none is mounted here")]
    NoController,
    /// A file of the hierarchy refused.
    #[error("CPU quota: {what} {}: {err}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// On which file.
        path: PathBuf,
        /// The error.
        err: io::Error,
    },
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> CgroupError + 'a {
    move |err| CgroupError::Io { what, path: path.to_path_buf(), err }
}

/// The mount points of a cgroup2 hierarchy and of the v1 hierarchy holding `cpu`, from
/// `/proc/self/mountinfo`.
pub fn mounts(mountinfo: &str) -> (Option<PathBuf>, Option<PathBuf>) {
    let (mut v2, mut v1) = (None, None);
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else { continue };
        let Some(point) = left.split(' ').nth(4) else { continue };
        let mut r = right.split(' ');
        let (fstype, _source, opts) = (r.next(), r.next(), r.next().unwrap_or(""));
        match fstype {
            Some("cgroup2") if v2.is_none() => v2 = Some(PathBuf::from(point)),
            Some("cgroup") if v1.is_none() && opts.split(',').any(|o| o == "cpu") => v1 = Some(PathBuf::from(point)),
            _ => {}
        }
    }
    (v2, v1)
}

/// What a quota did: the kernel's `cpu.stat`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CpuStats {
    /// Accounting periods in which the group ran.
    pub periods: u64,
    /// Periods in which it ran out of quota and waited.
    pub throttled: u64,
    /// Time it waited, seconds.
    pub throttled_s: f64,
    /// CPU time used, seconds (cgroup v2 counts it here; v1 in another controller).
    pub usage_s: Option<f64>,
}

/// Parses `cpu.stat` of either version (v1: `throttled_time` in ns; v2: `*_usec`).
pub fn parse_cpu_stat(text: &str) -> CpuStats {
    let mut s = CpuStats::default();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let (Some(k), Some(v)) = (it.next(), it.next().and_then(|v| v.parse::<u64>().ok())) else { continue };
        match k {
            "nr_periods" => s.periods = v,
            "nr_throttled" => s.throttled = v,
            "throttled_time" => s.throttled_s = v as f64 / 1e9,
            "throttled_usec" => s.throttled_s = v as f64 / 1e6,
            "usage_usec" => s.usage_s = Some(v as f64 / 1e6),
            _ => {}
        }
    }
    s
}

/// A process's control group in the hierarchy that holds the cpu controller, from
/// `/proc/self/cgroup` (`0::/a/b` for v2; `4:cpu,cpuacct:/a/b` for v1).
pub fn own_group(proc_cgroup: &str, v2: bool) -> Option<String> {
    proc_cgroup.lines().find_map(|l| {
        let mut it = l.splitn(3, ':');
        let (_, ctl, path) = (it.next()?, it.next()?, it.next()?);
        let ours = if v2 { ctl.is_empty() } else { ctl.split(',').any(|c| c == "cpu") };
        ours.then(|| path.to_string())
    })
}

/// A quota in cores from v2's `cpu.max` (`25000 100000`; `max …` is none) or v1's quota and
/// period (`-1` is none).
pub fn quota_cores(quota: &str, period: &str) -> Option<f64> {
    let q: f64 = quota.trim().parse().ok().filter(|q: &f64| *q > 0.0)?;
    let p: f64 = period.trim().parse().ok().filter(|p: &f64| *p > 0.0)?;
    Some(q / p)
}

/// The CPU quota this process runs under, in cores: the smallest of its control group's and
/// its ancestors' (none without one, or where the hierarchy cannot be read).
pub fn process_quota() -> Option<f64> {
    let (v2, v1) = mounts(&fs::read_to_string("/proc/self/mountinfo").ok()?);
    let cgroup = fs::read_to_string("/proc/self/cgroup").ok()?;
    let (mount, group, is_v2) = match (v1, v2) {
        (Some(m), _) if own_group(&cgroup, false).is_some() => (m, own_group(&cgroup, false)?, false),
        (_, Some(m)) => (m, own_group(&cgroup, true)?, true),
        _ => return None,
    };
    let mut dir = mount.join(group.trim_start_matches('/'));
    let mut best: Option<f64> = None;
    loop {
        let q = if is_v2 {
            fs::read_to_string(dir.join("cpu.max")).ok().and_then(|t| {
                let mut it = t.split_whitespace();
                quota_cores(it.next()?, it.next()?)
            })
        } else {
            match (fs::read_to_string(dir.join("cpu.cfs_quota_us")), fs::read_to_string(dir.join("cpu.cfs_period_us")))
            {
                (Ok(q), Ok(p)) => quota_cores(&q, &p),
                _ => None,
            }
        };
        if let Some(q) = q {
            best = Some(best.map_or(q, |b| b.min(q)));
        }
        if dir == mount || !dir.pop() {
            break;
        }
    }
    best
}

/// A control group with a CPU quota, removed on drop.
#[derive(Debug)]
pub struct CpuQuota {
    dir: PathBuf,
    parent: PathBuf,
    procs: File,
    cores: f64,
}

const PREFIX: &str = "wanperf-";

impl CpuQuota {
    /// Makes a group named after this process and `name` with `quota_us` of CPU time every
    /// `period_us`.
    pub fn create(name: &str, quota_us: u64, period_us: u64) -> Result<CpuQuota, CgroupError> {
        let info = Path::new("/proc/self/mountinfo");
        let text = fs::read_to_string(info).map_err(io_err("reading", info))?;
        let (v2, v1) = mounts(&text);
        let v2 = v2.filter(|m| fs::read_to_string(m.join("cgroup.controllers")).is_ok_and(|c| offers_cpu(&c)));
        let (parent, is_v2) = match (v2, v1) {
            (Some(m), _) => (m, true),
            (None, Some(m)) => (m, false),
            (None, None) => return Err(CgroupError::NoController),
        };
        sweep_stale(&parent);
        let clean: String = name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
        // A number of its own for every group this process makes: two hosts whose names clean
        // up alike (`a-b`, `a_b`), or a study's successive cells, never share one.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = parent.join(format!("{PREFIX}{}-{n}-{clean}", std::process::id()));
        if is_v2 {
            // Children of the root get the cpu controller only once the root hands it down.
            let ctl = parent.join("cgroup.subtree_control");
            let on = fs::read_to_string(&ctl).is_ok_and(|c| offers_cpu(&c));
            if !on {
                fs::write(&ctl, "+cpu").map_err(io_err("enabling the cpu controller in", &ctl))?;
            }
        }
        // A directory already there belongs to someone else (another PID namespace's wanperf
        // with this PID): refused, not shared.
        fs::create_dir(&dir).map_err(io_err("making", &dir))?;
        let procs = match OpenOptions::new().write(true).open(dir.join("cgroup.procs")) {
            Ok(f) => f,
            Err(e) => {
                let _ = fs::remove_dir(&dir);
                return Err(io_err("opening", &dir.join("cgroup.procs"))(e));
            }
        };
        let q = CpuQuota { procs, dir, parent, cores: quota_us as f64 / period_us as f64 };
        if is_v2 {
            let f = q.dir.join("cpu.max");
            fs::write(&f, format!("{quota_us} {period_us}")).map_err(io_err("writing", &f))?;
        } else {
            let f = q.dir.join("cpu.cfs_period_us");
            fs::write(&f, period_us.to_string()).map_err(io_err("writing", &f))?;
            let f = q.dir.join("cpu.cfs_quota_us");
            fs::write(&f, quota_us.to_string()).map_err(io_err("writing", &f))?;
        }
        Ok(q)
    }

    /// The group's `cgroup.procs`, open for writing: a child writes `0` to it before it execs
    /// to join the group (with everything it later starts).
    pub fn procs_fd(&self) -> RawFd {
        self.procs.as_raw_fd()
    }

    /// The quota, in cores.
    pub fn cores(&self) -> f64 {
        self.cores
    }

    /// The group's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What the quota did so far.
    pub fn stats(&self) -> io::Result<CpuStats> {
        Ok(parse_cpu_stat(&fs::read_to_string(self.dir.join("cpu.stat"))?))
    }

    /// Processes in the group now.
    pub fn pids(&self) -> Vec<i32> {
        pids(&self.dir)
    }
}

fn offers_cpu(list: &str) -> bool {
    list.split_whitespace().any(|c| c == "cpu")
}

fn pids(dir: &Path) -> Vec<i32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Removes a group: what is still in it goes back to the parent first.
fn remove(dir: &Path, parent: &Path) {
    for pid in pids(dir) {
        let _ = fs::write(parent.join("cgroup.procs"), pid.to_string());
    }
    let _ = fs::remove_dir(dir);
}

/// Groups left by wanperf processes that no longer exist (killed with -9): removed.
fn sweep_stale(parent: &Path) {
    let Ok(rd) = fs::read_dir(parent) else { return };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(pid) = name.strip_prefix(PREFIX).and_then(|r| r.split('-').next()).and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            remove(&e.path(), parent);
        }
    }
}

impl Drop for CpuQuota {
    fn drop(&mut self) {
        remove(&self.dir, &self.parent);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_names_both_hierarchies() {
        let text = "\
30 23 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw,nsdelegate
34 30 0:30 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct
35 30 0:31 / /sys/fs/cgroup/cpuset rw,nosuid - cgroup cgroup rw,cpuset
";
        assert_eq!(
            mounts(text),
            (Some(PathBuf::from("/sys/fs/cgroup/unified")), Some(PathBuf::from("/sys/fs/cgroup/cpu,cpuacct")))
        );
        // cpuset is not cpu; a pure v2 machine has no v1.
        assert_eq!(mounts("35 30 0:31 / /x rw - cgroup cgroup rw,cpuset\n"), (None, None));
        assert_eq!(
            mounts("25 1 0:22 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n").0,
            Some(PathBuf::from("/sys/fs/cgroup"))
        );
    }

    #[test]
    fn a_process_finds_its_group_and_quota() {
        let v1 = "9:name=systemd:/\n2:cpuacct:/\n1:cpu,cpuacct:/wanperf-7-left\n0::/\n";
        assert_eq!(own_group(v1, false).as_deref(), Some("/wanperf-7-left"));
        assert_eq!(own_group(v1, true).as_deref(), Some("/"));
        assert_eq!(own_group("0::/user.slice/x\n", true).as_deref(), Some("/user.slice/x"));
        assert_eq!(own_group("0::/user.slice/x\n", false), None);
        assert_eq!(quota_cores("25000", "100000"), Some(0.25));
        assert_eq!(quota_cores("max", "100000"), None);
        assert_eq!(quota_cores("-1", "100000"), None);
    }

    #[test]
    fn cpu_stat_of_either_version() {
        let v1 = "nr_periods 52\nnr_throttled 40\nthrottled_time 3100000000\nnr_bursts 0\n";
        assert_eq!(parse_cpu_stat(v1), CpuStats { periods: 52, throttled: 40, throttled_s: 3.1, usage_s: None });
        let v2 = "usage_usec 500000\nuser_usec 400000\nsystem_usec 100000\nnr_periods 20\nnr_throttled 15\nthrottled_usec 1500000\n";
        assert_eq!(parse_cpu_stat(v2), CpuStats { periods: 20, throttled: 15, throttled_s: 1.5, usage_s: Some(0.5) });
    }
}
