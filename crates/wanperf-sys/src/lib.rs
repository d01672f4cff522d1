//! The system calls wanperf makes that Rust's standard library does not wrap, as safe
//! functions with their preconditions checked or documented: the one home of the workspace's
//! unsafe code. Every `unsafe` block carries a `// SAFETY:` comment; every other crate of the
//! workspace declares `#![forbid(unsafe_code)]` and calls these instead.
//!
//! By topic:
//! - [`signal`]: SIGINT/SIGTERM catching, sending signals to children;
//! - [`process`]: sessions, ids, what a child does between fork and exec, timer slack, CPU
//!   time, CPU affinity and niceness, the kernel's clock discipline;
//! - [`fd`]: adopting inherited descriptors, close-on-exec, raw reads and writes;
//! - [`poll`]: waiting for descriptors;
//! - [`fs`]: `openat`-style file access under a directory descriptor, preallocation,
//!   O_DIRECT buffers, page-cache advice;
//! - [`sockopt`]: socket options, TCP_INFO, TCP_CONGESTION, pacing, zero-copy discard;
//! - [`msg`]: batched and timestamped datagrams, the socket error queue;
//! - [`splice`]: the vmsplice/splice zero-copy sender;
//! - [`iface`]: interface names, indices and addresses;
//! - [`netns`]: namespaces, TUN devices, packet sockets, ethtool;
//! - [`mem`]: glibc allocator tuning.
//!
//! Functions that take a [`RawFd`](std::os::fd::RawFd) are memory-safe whatever the number:
//! a closed descriptor or one of the wrong kind gives an error (EBADF, ENOTSOCK, …). The
//! caller passes descriptors it holds open, as with the standard library's `AsRawFd`.

mod errno;
pub mod fd;
pub mod fs;
pub mod iface;
pub mod mem;
pub mod msg;
pub mod netns;
pub mod poll;
pub mod process;
pub mod signal;
pub mod sockopt;
pub mod splice;

// The names the command line has always used.
pub use fd::{adopt_fd, keep_across_exec};
pub use fs::rename_noreplace;
pub use netns::{join_namespace, unshare_pid_namespace};
pub use poll::{poll_one, poll_readable};
pub use process::{clock_state, die_with_parent, euid, new_session};
pub use signal::{catch_interrupts, kill, sleep_unless_interrupted, stop_on_interrupt, terminate, INTERRUPTED};

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn descriptors_polling_and_processes() {
        // A socket with a datagram waiting is readable, an idle one is not.
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        a.send_to(b"x", b.local_addr().unwrap()).unwrap();
        assert_eq!(poll_readable(&[&a, &b], 1000).unwrap(), vec![false, true]);
        // Adopting: closed or standard descriptors are refused.
        assert!(adopt_fd(1).is_err());
        assert!(adopt_fd(1_000_000).is_err());
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        keep_across_exec(&l).unwrap();
        // SIGTERM reaches a child.
        let mut c = Command::new("sleep").arg("30").spawn().unwrap();
        terminate(c.id()).unwrap();
        assert!(!c.wait().unwrap().success());
        assert!(euid() < u32::MAX);
        // SIGKILL too.
        let mut c = Command::new("sleep").arg("30").spawn().unwrap();
        kill(c.id()).unwrap();
        assert!(!c.wait().unwrap().success());
        assert!(poll_one(&a, libc::POLLOUT, 0).unwrap());
        // Renaming refuses to replace.
        let d = std::env::temp_dir().join(format!("wanperf-sys-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("a"), "a").unwrap();
        std::fs::write(d.join("b"), "b").unwrap();
        assert!(rename_noreplace(&d.join("a"), &d.join("b")).is_err());
        rename_noreplace(&d.join("a"), &d.join("c")).unwrap();
        assert_eq!(std::fs::read_to_string(d.join("c")).unwrap(), "a");
        std::fs::remove_dir_all(&d).unwrap();
        assert!(clock_state().0 >= -1);
    }

    #[test]
    fn files_under_a_directory_descriptor() {
        use std::os::fd::AsFd;
        let d = std::env::temp_dir().join(format!("wanperf-sys-fs-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let base: std::os::fd::OwnedFd = std::fs::File::open(&d).unwrap().into();
        fs::mkdirat(&base, "sub", 0o755).unwrap();
        assert_eq!(fs::mkdirat(&base, "sub", 0o755).unwrap_err().kind(), std::io::ErrorKind::AlreadyExists);
        let f = std::fs::File::from(fs::openat(&base, "f", libc::O_WRONLY | libc::O_CREAT, 0o600).unwrap());
        fs::fallocate(&f, 0, 8192)
            .or_else(|e| if e.raw_os_error() == Some(libc::EOPNOTSUPP) { Ok(()) } else { Err(e) })
            .unwrap();
        assert!(fs::fs_type(&f).is_ok());
        let _ = fs::drop_cache(&f);
        fs::syncfs(&f).unwrap();
        std::os::unix::fs::symlink("f", d.join("link")).unwrap();
        // Links are not followed.
        assert_eq!(fs::openat(&base, "link", libc::O_RDONLY, 0).unwrap_err().raw_os_error(), Some(libc::ELOOP));
        assert_eq!(fs::stat_at(&base, "link").unwrap().st_mode & libc::S_IFMT, libc::S_IFLNK);
        assert!(fs::openat(&base, "a\0b", libc::O_RDONLY, 0).is_err());
        assert_eq!(fs::list_dir(&base.as_fd()).unwrap(), ["f", "link", "sub"]);
        fs::rename_at(&base, "f", "g").unwrap();
        fs::unlink_at(&base, "g").unwrap();
        fs::unlink_at(&base, "g").unwrap();
        let mut a = fs::Aligned::new(100);
        assert_eq!(a.as_ref().as_ptr() as usize % 4096, 0);
        a.as_mut().fill(7);
        assert_eq!(a.as_ref(), &[7u8; 100][..]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn cpus_and_children() {
        let cpus = process::cpu_affinity().unwrap();
        assert!(!cpus.is_empty());
        process::set_cpu_affinity(&cpus).unwrap();
        let (u, s) = process::process_cpu();
        assert!(u >= 0.0 && s >= 0.0);
        // A child keeps to one CPU, lowered in priority.
        let mut c = Command::new("sh");
        c.args(["-c", "grep Cpus_allowed_list /proc/self/status; cut -d' ' -f19 /proc/self/stat"]);
        process::set_up_child(
            &mut c,
            process::ChildSetup { cpus: vec![cpus[0]], nice: 5, die_with_parent: true, ..Default::default() },
        );
        let out = String::from_utf8(c.output().unwrap().stdout).unwrap();
        assert!(out.contains(&format!("\t{}\n", cpus[0])), "{out}");
        assert!(out.trim_end().ends_with('5'), "{out}");
        // A namespace descriptor that is not one fails the spawn.
        let f = std::fs::File::open("/dev/null").unwrap();
        let mut c = Command::new("true");
        process::set_up_child(
            &mut c,
            process::ChildSetup { netns: Some(std::os::fd::AsRawFd::as_raw_fd(&f)), ..Default::default() },
        );
        assert!(c.status().is_err());
        assert!(signal::send_signal(0, libc::SIGTERM).is_err());
    }
}
