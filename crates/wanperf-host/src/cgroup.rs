//! A host's limits as control groups: a CPU quota and disk rates, made when the network
//! starts, joined by every process the host runs (each writes itself into each group's
//! `cgroup.procs` before it execs), read for what the limits did, removed with the network.
//!
//! cgroup v2 (`cpu.max`, `io.max`: one group) where a cgroup2 hierarchy offers the
//! controllers, else v1's cpu controller (`cpu.cfs_quota_us`) and blkio controller
//! (`blkio.throttle.*_bps_device`), a group in each; the parsers below are pure and tested on
//! the kernel's text.

use serde::Serialize;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};

/// Why a quota could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// No hierarchy offers a controller the limits need (`cpu`, `io`).
    #[error("a host's {0} limit needs the {1} controller of cgroup v2 (or {2} of v1), and none is mounted here")]
    NoController(&'static str, &'static str, &'static str),
    /// Disk limits, and no disk to put them on.
    #[error("a host's disk limit needs a disk, and /sys/block lists none (only loop or RAM devices)")]
    NoDisk,
    /// A file of the hierarchy refused.
    #[error("host limits: {what} {}: {err}", path.display())]
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
    (v2_mount(mountinfo), v1_mount(mountinfo, "cpu"))
}

fn mount_lines(mountinfo: &str) -> impl Iterator<Item = (&str, &str, &str)> {
    mountinfo.lines().filter_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let point = left.split(' ').nth(4)?;
        let mut r = right.split(' ');
        let (fstype, _source, opts) = (r.next()?, r.next(), r.next().unwrap_or(""));
        Some((point, fstype, opts))
    })
}

/// The first cgroup2 hierarchy's mount point.
pub fn v2_mount(mountinfo: &str) -> Option<PathBuf> {
    mount_lines(mountinfo).find(|l| l.1 == "cgroup2").map(|l| PathBuf::from(l.0))
}

/// The mount point of the v1 hierarchy holding `controller` (`cpu`, `blkio`).
pub fn v1_mount(mountinfo: &str, controller: &str) -> Option<PathBuf> {
    mount_lines(mountinfo)
        .find(|l| l.1 == "cgroup" && l.2.split(',').any(|o| o == controller))
        .map(|l| PathBuf::from(l.0))
}

/// What disk limits did: the bytes that reached the limited disks, summed over them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct DiskStats {
    /// Bytes read from the disks.
    pub read_bytes: u64,
    /// Bytes written to them.
    pub write_bytes: u64,
}

/// Parses v2's `io.stat` (`254:0 rbytes=… wbytes=… …`) or v1's
/// `blkio.throttle.io_service_bytes` (`254:0 Read N`, `254:0 Write N`), summed over `devices`.
pub fn parse_io_stat(text: &str, devices: &[String]) -> DiskStats {
    let mut s = DiskStats::default();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let Some(dev) = it.next() else { continue };
        if !devices.iter().any(|d| d == dev) {
            continue;
        }
        let rest: Vec<&str> = it.collect();
        match rest.as_slice() {
            ["Read", n] => s.read_bytes += n.parse::<u64>().unwrap_or(0),
            ["Write", n] => s.write_bytes += n.parse::<u64>().unwrap_or(0),
            kv => {
                for x in kv {
                    match x.split_once('=') {
                        Some(("rbytes", n)) => s.read_bytes += n.parse::<u64>().unwrap_or(0),
                        Some(("wbytes", n)) => s.write_bytes += n.parse::<u64>().unwrap_or(0),
                        _ => {}
                    }
                }
            }
        }
    }
    s
}

/// The machine's disks as `MAJ:MIN` (`/sys/block/*/dev`): every block device with a size,
/// not a loop, RAM or compressed-RAM device (the kernel throttles whole disks).
pub fn disks() -> Vec<String> {
    let Ok(rd) = fs::read_dir("/sys/block") else { return Vec::new() };
    let mut v: Vec<String> = rd
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().to_string();
            !["loop", "ram", "zram"].iter().any(|p| n.starts_with(p))
        })
        .filter(|e| {
            fs::read_to_string(e.path().join("size")).is_ok_and(|t| t.trim().parse::<u64>().is_ok_and(|n| n > 0))
        })
        .filter_map(|e| fs::read_to_string(e.path().join("dev")).ok().map(|t| t.trim().to_string()))
        .collect();
    v.sort();
    v
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

/// One control group directory this process made, with its `cgroup.procs` open; removed on
/// drop (what is still in it goes back to the parent first).
#[derive(Debug)]
struct Group {
    dir: PathBuf,
    parent: PathBuf,
    procs: File,
}

impl Drop for Group {
    fn drop(&mut self) {
        remove(&self.dir, &self.parent);
    }
}

/// A host's limits as control groups (one on cgroup v2; on v1 one per controller), removed on
/// drop.
#[derive(Debug)]
pub struct HostGroup {
    groups: Vec<Group>,
    /// The directory holding `cpu.stat` (the CPU quota's), if any.
    cpu_dir: Option<PathBuf>,
    /// The directory holding the disk statistics, and whether it is v2's `io.stat`.
    io_dir: Option<(PathBuf, bool)>,
    cores: Option<f64>,
    disks: Vec<String>,
}

const PREFIX: &str = "wanperf-";

/// A CPU quota as the kernel takes it: `quota_us` of CPU time every `period_us`.
pub type Cpu = (u64, u64);

/// Disk rates as the kernel takes them, bytes a second: (read, write).
pub type Disk = (Option<u64>, Option<u64>);

impl HostGroup {
    /// Makes the groups for host `name` (named after this process and it) with a CPU quota
    /// and disk rates, each where a hierarchy offers its controller.
    pub fn create(name: &str, cpu: Option<Cpu>, disk: Option<Disk>) -> Result<HostGroup, CgroupError> {
        let info = Path::new("/proc/self/mountinfo");
        let text = fs::read_to_string(info).map_err(io_err("reading", info))?;
        let offers = |m: &Path, c: &str| {
            fs::read_to_string(m.join("cgroup.controllers")).is_ok_and(|l| l.split_whitespace().any(|x| x == c))
        };
        let need: Vec<&str> = [cpu.map(|_| "cpu"), disk.map(|_| "io")].into_iter().flatten().collect();
        let v2 = v2_mount(&text).filter(|m| need.iter().all(|c| offers(m, c)));
        let clean: String = name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
        let disks = if disk.is_some() { disks() } else { Vec::new() };
        if disk.is_some() && disks.is_empty() {
            return Err(CgroupError::NoDisk);
        }
        let mut h = HostGroup { groups: Vec::new(), cpu_dir: None, io_dir: None, cores: None, disks };
        if let Some(m) = v2 {
            // Children of the root get a controller only once the root hands it down.
            let ctl = m.join("cgroup.subtree_control");
            for c in &need {
                if !fs::read_to_string(&ctl).is_ok_and(|l| l.split_whitespace().any(|x| x == *c)) {
                    fs::write(&ctl, format!("+{c}")).map_err(io_err("enabling a controller in", &ctl))?;
                }
            }
            let g = make_group(&m, &clean)?;
            if let Some((q, p)) = cpu {
                write(&g.dir.join("cpu.max"), &format!("{q} {p}"))?;
                h.cpu_dir = Some(g.dir.clone());
            }
            if let Some((r, w)) = disk {
                for d in &h.disks {
                    let max = |x: Option<u64>| x.map_or("max".to_string(), |b| b.to_string());
                    write(&g.dir.join("io.max"), &format!("{d} rbps={} wbps={}", max(r), max(w)))?;
                }
                h.io_dir = Some((g.dir.clone(), true));
            }
            h.groups.push(g);
        } else {
            if let Some((q, p)) = cpu {
                let m = v1_mount(&text, "cpu").ok_or(CgroupError::NoController("CPU", "cpu", "cpu"))?;
                let g = make_group(&m, &clean)?;
                write(&g.dir.join("cpu.cfs_period_us"), &p.to_string())?;
                write(&g.dir.join("cpu.cfs_quota_us"), &q.to_string())?;
                h.cpu_dir = Some(g.dir.clone());
                h.groups.push(g);
            }
            if let Some((r, w)) = disk {
                let m = v1_mount(&text, "blkio").ok_or(CgroupError::NoController("disk", "io", "blkio"))?;
                let g = make_group(&m, &clean)?;
                for d in &h.disks {
                    if let Some(b) = r {
                        write(&g.dir.join("blkio.throttle.read_bps_device"), &format!("{d} {b}"))?;
                    }
                    if let Some(b) = w {
                        write(&g.dir.join("blkio.throttle.write_bps_device"), &format!("{d} {b}"))?;
                    }
                }
                h.io_dir = Some((g.dir.clone(), false));
                h.groups.push(g);
            }
        }
        h.cores = cpu.map(|(q, p)| q as f64 / p as f64);
        Ok(h)
    }

    /// Each group's `cgroup.procs`, open for writing: a child writes `0` to each before it
    /// execs to join them (with everything it later starts).
    pub fn procs_fds(&self) -> Vec<RawFd> {
        self.groups.iter().map(|g| g.procs.as_raw_fd()).collect()
    }

    /// The CPU quota, in cores.
    pub fn cores(&self) -> Option<f64> {
        self.cores
    }

    /// The groups' directories (a process joins a host by writing its PID into each).
    pub fn dirs(&self) -> Vec<&Path> {
        self.groups.iter().map(|g| g.dir.as_path()).collect()
    }

    /// What the CPU quota did so far (None without one).
    pub fn cpu_stats(&self) -> Option<CpuStats> {
        Some(parse_cpu_stat(&fs::read_to_string(self.cpu_dir.as_ref()?.join("cpu.stat")).ok()?))
    }

    /// What reached the limited disks so far (None without disk limits).
    pub fn disk_stats(&self) -> Option<DiskStats> {
        let (dir, v2) = self.io_dir.as_ref()?;
        let file = if *v2 { "io.stat" } else { "blkio.throttle.io_service_bytes" };
        Some(parse_io_stat(&fs::read_to_string(dir.join(file)).ok()?, &self.disks))
    }

    /// The disks the limits apply to, `MAJ:MIN`.
    pub fn disks(&self) -> &[String] {
        &self.disks
    }

    /// Processes in the groups now.
    pub fn pids(&self) -> Vec<i32> {
        let mut v: Vec<i32> = self.groups.iter().flat_map(|g| pids(&g.dir)).collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

fn write(f: &Path, text: &str) -> Result<(), CgroupError> {
    fs::write(f, text).map_err(io_err("writing", f))
}

/// A new group under `parent` for host `clean`, its `cgroup.procs` open.
fn make_group(parent: &Path, clean: &str) -> Result<Group, CgroupError> {
    sweep_stale(parent);
    // A number of its own for every group this process makes: two hosts whose names clean
    // up alike (`a-b`, `a_b`), or a study's successive cells, never share one.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = parent.join(format!("{PREFIX}{}-{n}-{clean}", std::process::id()));
    // A directory already there belongs to someone else (another PID namespace's wanperf
    // with this PID): refused, not shared.
    fs::create_dir(&dir).map_err(io_err("making", &dir))?;
    match OpenOptions::new().write(true).open(dir.join("cgroup.procs")) {
        Ok(procs) => Ok(Group { dir, parent: parent.to_path_buf(), procs }),
        Err(e) => {
            let _ = fs::remove_dir(&dir);
            Err(io_err("opening", &dir.join("cgroup.procs"))(e))
        }
    }
}

fn pids(dir: &Path) -> Vec<i32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Removes a group: what is still in it goes back to the parent first. A group whose last
/// process is still exiting is busy (EBUSY) for a moment: tried again for up to 200 ms, so a
/// host's group does not outlive its run.
fn remove(dir: &Path, parent: &Path) {
    for attempt in 0..40 {
        for pid in pids(dir) {
            let _ = fs::write(parent.join("cgroup.procs"), pid.to_string());
        }
        match fs::remove_dir(dir) {
            Err(e) if e.kind() == std::io::ErrorKind::ResourceBusy && attempt < 39 => {
                std::thread::sleep(std::time::Duration::from_millis(5))
            }
            _ => return,
        }
    }
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
    fn io_stat_of_either_version_for_the_limited_disks() {
        let d = vec!["254:0".to_string()];
        let v2 = "254:0 rbytes=4096 wbytes=25165824 rios=1 wios=96 dbytes=0 dios=0\n7:0 rbytes=9 wbytes=9\n";
        assert_eq!(parse_io_stat(v2, &d), DiskStats { read_bytes: 4096, write_bytes: 25_165_824 });
        let v1 = "254:0 Read 8192\n254:0 Write 1048576\n254:0 Sync 0\n254:0 Total 1056768\n7:0 Read 5\nTotal 1056773\n";
        assert_eq!(parse_io_stat(v1, &d), DiskStats { read_bytes: 8192, write_bytes: 1_048_576 });
        let info = "34 30 0:30 / /sys/fs/cgroup/blkio rw,nosuid - cgroup cgroup rw,blkio\n";
        assert_eq!(v1_mount(info, "blkio"), Some(PathBuf::from("/sys/fs/cgroup/blkio")));
        assert_eq!(v1_mount(info, "cpu"), None);
    }

    #[test]
    fn cpu_stat_of_either_version() {
        let v1 = "nr_periods 52\nnr_throttled 40\nthrottled_time 3100000000\nnr_bursts 0\n";
        assert_eq!(parse_cpu_stat(v1), CpuStats { periods: 52, throttled: 40, throttled_s: 3.1, usage_s: None });
        let v2 = "usage_usec 500000\nuser_usec 400000\nsystem_usec 100000\nnr_periods 20\nnr_throttled 15\nthrottled_usec 1500000\n";
        assert_eq!(parse_cpu_stat(v2), CpuStats { periods: 20, throttled: 15, throttled_s: 1.5, usage_s: Some(0.5) });
    }
}
