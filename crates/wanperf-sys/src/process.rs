//! This process and its children: sessions, ids, what a child does between fork and exec,
//! timer slack, CPU time, CPU affinity and niceness, and the kernel's clock discipline.

use std::io;
use std::os::fd::RawFd;
use std::process::Command;

/// Starts a new session (detaches from the caller's terminal and its signals).
pub fn new_session() {
    // SAFETY: setsid has no preconditions; failing (already a session leader) changes nothing.
    unsafe { libc::setsid() };
}

/// The effective user id.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The effective group id.
pub fn egid() -> u32 {
    // SAFETY: getegid has no preconditions and cannot fail.
    unsafe { libc::getegid() }
}

/// What a child process does between fork and exec, in this order: join a network
/// namespace, lower its priority, keep to some CPUs, and ask for SIGKILL when its parent dies.
#[derive(Debug, Clone, Default)]
pub struct ChildSetup {
    /// A network namespace descriptor to join (`setns(…, CLONE_NEWNET)`); it must stay open
    /// until the command is spawned (if it is not, the spawn fails with EBADF).
    pub netns: Option<RawFd>,
    /// Niceness to lower the child to (0: unchanged).
    pub nice: i32,
    /// CPUs the child keeps to (empty: unchanged).
    pub cpus: Vec<usize>,
    /// SIGKILL the child when this process (its parent) dies, kill -9 included.
    pub die_with_parent: bool,
    /// Control groups' `cgroup.procs`, open for writing: the child writes `0` to each (joins
    /// the groups) before it execs. They must stay open until the command is spawned.
    pub cgroups: Vec<RawFd>,
}

/// Makes `cmd`'s process do `setup` before it execs (a failed step fails the spawn).
pub fn set_up_child(cmd: &mut Command, setup: ChildSetup) {
    use std::os::unix::process::CommandExt;
    let ChildSetup { netns, nice, cpus, die_with_parent, cgroups } = setup;
    // SAFETY: the closure runs between fork and exec and only makes async-signal-safe calls
    // (write, setns, setpriority, sched_setaffinity, prctl) that allocate nothing: the CPU list
    // and the groups' descriptors were allocated before the fork, and the CPU set, the written
    // byte and errors live on the stack or in static memory.
    unsafe {
        cmd.pre_exec(move || {
            for &fd in &cgroups {
                // "0": the writing process itself.
                if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(io::Error::last_os_error());
                }
            }
            if let Some(fd) = netns {
                if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            set_nice(nice)?;
            if !cpus.is_empty() {
                set_cpu_affinity(&cpus)?;
            }
            if die_with_parent {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            }
            Ok(())
        });
    }
}

/// The command's process gets SIGKILL when this process (its parent) dies, kill -9 included.
pub fn die_with_parent(c: &mut Command) {
    set_up_child(c, ChildSetup { die_with_parent: true, ..ChildSetup::default() });
}

/// Lets the calling thread's sleeps end within `ns` of their deadline (the default slack is
/// 50 µs), so paced senders keep their schedule.
pub fn set_timer_slack_ns(ns: u64) {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and affects only this thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) };
}

fn rusage(who: libc::c_int) -> (f64, f64) {
    // SAFETY: an all-zero rusage is valid; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: ru is a valid out-pointer.
    unsafe { libc::getrusage(who, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

/// CPU seconds (user, system) of the calling thread.
pub fn thread_cpu() -> (f64, f64) {
    rusage(libc::RUSAGE_THREAD)
}

/// CPU seconds (user, system) of the whole process.
pub fn process_cpu() -> (f64, f64) {
    rusage(libc::RUSAGE_SELF)
}

/// The CPUs the calling thread may run on (sched_getaffinity), in increasing order.
pub fn cpu_affinity() -> io::Result<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity writes at most its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: set is a valid out-pointer of the size given.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: CPU_ISSET reads within the set for indices below CPU_SETSIZE.
    Ok((0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect())
}

/// Keeps the calling thread (in a child before exec: the process) on `cpus` (those at or
/// beyond CPU_SETSIZE are left out). Allocates nothing, so a child may call it before exec.
pub fn set_cpu_affinity(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes within it for indices below
    // CPU_SETSIZE; sched_setaffinity reads it and affects only the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(c, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Sets the calling process's niceness to `nice` (raising priority needs privileges);
/// nothing for 0. Allocates nothing, so a child may call it before exec.
pub fn set_nice(nice: i32) -> io::Result<()> {
    // SAFETY: setpriority takes plain integers and affects only this process.
    if nice != 0 && unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The kernel's clock discipline as adjtimex(2) reads it: (its state, TIME_OK … TIME_ERROR or
/// −1 on failure; whether it is marked unsynchronized (STA_UNSYNC); the estimated error, µs).
pub fn clock_state() -> (i32, bool, i64) {
    // SAFETY: adjtimex with modes = 0 only reads the kernel's state into `tx`, a zeroed struct
    // owned here.
    let (state, tx) = unsafe {
        let mut tx: libc::timex = std::mem::zeroed();
        (libc::adjtimex(&mut tx), tx)
    };
    // `c_long` is 32 bits on some targets: the cast is not always to the same type.
    #[allow(clippy::unnecessary_cast)]
    let esterror = tx.esterror as i64;
    (state, tx.status & libc::STA_UNSYNC != 0, esterror)
}
