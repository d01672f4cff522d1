//! Whether a server started on an emulated node listens yet: the sockets its processes hold
//! (`/proc/PID/fd`), looked up in the socket tables of its network namespace
//! (`/proc/PID/net/tcp`, `tcp6`, `udp`, `udp6`). `net run --on` and `path run --right` start CMD
//! as soon as their commands listen, instead of after a fixed sleep that is too short on a
//! loaded machine and too long on an idle one. Only the command's own sockets count, so two
//! servers on one node are each waited for.

use std::collections::BTreeSet;
use std::io;

/// A socket that waits for peers: TCP in LISTEN, or UDP bound to a port and not connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Listener {
    /// UDP (else TCP).
    pub udp: bool,
    /// Local port.
    pub port: u16,
    /// The socket's inode (what `/proc/PID/fd/N` links to: `socket:[INODE]`).
    pub inode: u64,
}

/// One socket of a `/proc/net/{tcp,tcp6,udp,udp6}` table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Socket {
    /// Local port.
    pub local_port: u16,
    /// Remote port (0: not connected).
    pub remote_port: u16,
    /// The kernel's state number (TCP_LISTEN 0x0A; an unconnected UDP socket TCP_CLOSE 0x07).
    pub state: u8,
    /// The socket's inode.
    pub inode: u64,
    /// Datagrams it dropped (UDP tables' last column; 0 for TCP).
    pub drops: u64,
}

/// The sockets of one `/proc/net/{tcp,tcp6,udp,udp6}` table (`udp`: which kind it is): the one
/// reader of those tables. Lines that do not parse are skipped.
pub fn sockets(table: &str, udp: bool) -> Vec<Socket> {
    let port = |addr: &str| addr.rsplit_once(':').and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            Some(Socket {
                local_port: port(f.get(1)?)?,
                remote_port: port(f.get(2)?)?,
                state: u8::from_str_radix(f.get(3)?, 16).ok()?,
                inode: f.get(9)?.parse().ok()?,
                drops: if udp { f.get(12).and_then(|d| d.parse().ok()).unwrap_or(0) } else { 0 },
            })
        })
        .collect()
}

/// The listeners in one `/proc/net/{tcp,tcp6,udp,udp6}` table (`udp`: which kind it is).
pub fn parse(table: &str, udp: bool) -> Vec<Listener> {
    sockets(table, udp)
        .into_iter()
        .filter(|s| if udp { s.state == 0x07 && s.remote_port == 0 && s.local_port != 0 } else { s.state == 0x0A })
        .map(|s| Listener { udp, port: s.local_port, inode: s.inode })
        .collect()
}

/// The datagrams this network namespace's UDP sockets bound to `port` dropped
/// (`/proc/net/udp` and `udp6`).
pub fn udp_drops(port: u16) -> u64 {
    ["/proc/net/udp", "/proc/net/udp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|t| sockets(&t, true))
        .filter(|s| s.local_port == port)
        .map(|s| s.drops)
        .sum()
}

/// The inode of a `/proc/PID/fd/N` link's target, if it is a socket (`socket:[INODE]`).
pub fn socket_inode(link: &str) -> Option<u64> {
    link.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
}

/// The listeners that process `pid` and its descendants hold, in `pid`'s network namespace.
pub fn held_by(pid: u32) -> io::Result<Vec<Listener>> {
    let mut held = BTreeSet::new();
    for p in tree(pid)? {
        // A process that ended meanwhile holds nothing.
        let Ok(fds) = std::fs::read_dir(format!("/proc/{p}/fd")) else { continue };
        held.extend(
            fds.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter_map(|l| socket_inode(&l.to_string_lossy())),
        );
    }
    let mut all = Vec::new();
    for (name, udp) in [("tcp", false), ("tcp6", false), ("udp", true), ("udp6", true)] {
        match std::fs::read_to_string(format!("/proc/{pid}/net/{name}")) {
            Ok(t) => all.extend(parse(&t, udp).into_iter().filter(|l| held.contains(&l.inode))),
            // A kernel without IPv6 has no tcp6/udp6.
            Err(e) if e.kind() == io::ErrorKind::NotFound && name.ends_with('6') => {}
            Err(e) => return Err(e),
        }
    }
    Ok(all)
}

/// `pid` and its descendants (`/proc/PID/task/TID/children`).
fn tree(pid: u32) -> io::Result<Vec<u32>> {
    let mut all = vec![pid];
    let mut i = 0;
    while let Some(&p) = all.get(i) {
        i += 1;
        let tasks = match std::fs::read_dir(format!("/proc/{p}/task")) {
            Ok(t) => t,
            Err(e) if p == pid => return Err(e),
            Err(_) => continue,
        };
        for t in tasks.flatten() {
            let kids = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            all.extend(kids.split_whitespace().filter_map(|k| k.parse::<u32>().ok()));
        }
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:1451 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 40518 1 0000000000000000 100 0 0 10 0
   1: 0100007F:A2B4 0100007F:1451 01 00000000:00000000 00:00000000 00000000     0        0 40519 1 0000000000000000 20 4 30 10 -1
   2: 0200A8C0:0016 0100A8C0:D3F2 06 00000000:00000000 03:00000F5B 00000000     0        0 0 3 0000000000000000
";
    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:1451 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 40520 1 0000000000000000 100 0 0 10 0
";
    const UDP: &str = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  100: 00000000:1451 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 40600 2 0000000000000000 0
  101: 0100007F:C350 0100007F:1451 01 00000000:00000000 00:00000000 00000000     0        0 40601 2 0000000000000000 0
";

    #[test]
    fn listening_tcp_and_bound_udp_count_connected_sockets_do_not() {
        assert_eq!(parse(TCP, false), vec![Listener { udp: false, port: 5201, inode: 40518 }]);
        assert_eq!(parse(TCP6, false), vec![Listener { udp: false, port: 5201, inode: 40520 }]);
        // A connected UDP socket (a client) is no server.
        assert_eq!(parse(UDP, true), vec![Listener { udp: true, port: 5201, inode: 40600 }]);
        assert!(parse("header only\n", false).is_empty());
        assert!(parse("h\n 0: garbage\n 1: 0100007F:ZZZZ 00000000:0000 0A 0 0 0 0 0 1\n", false).is_empty());
        assert_eq!(socket_inode("socket:[40518]"), Some(40518));
        assert_eq!(socket_inode("pipe:[40518]"), None);
        assert_eq!(socket_inode("/dev/null"), None);
    }

    #[test]
    fn udp_tables_give_each_sockets_drops() {
        let t = "h\n  7: 00000000:0965 00000000:0000 07 00000000:00000000 00:00000000 00000000 0 0 4242 2 0000000000000000 17\n";
        let s = sockets(t, true);
        assert_eq!((s[0].local_port, s[0].state, s[0].inode, s[0].drops), (0x965, 0x07, 4242, 17));
        assert_eq!(sockets(TCP, false)[0].drops, 0);
        // Seen from the kernel: 4 MB of datagrams to a socket nobody reads overflow its
        // receive buffer, and the table counts what it dropped.
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = rx.local_addr().unwrap().port();
        assert_eq!(udp_drops(port), 0);
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        for _ in 0..4000 {
            let _ = tx.send_to(&[0u8; 1000], ("127.0.0.1", port));
        }
        assert!(udp_drops(port) > 0, "a full socket dropped nothing");
    }

    #[test]
    fn a_process_holds_its_own_listeners_and_not_its_clients() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let got = held_by(std::process::id()).unwrap();
        let has = |udp, port| got.iter().any(|x| x.udp == udp && x.port == port);
        assert!(has(false, l.local_addr().unwrap().port()), "{got:?}");
        assert!(has(true, u.local_addr().unwrap().port()), "{got:?}");
        assert!(!has(false, c.local_addr().unwrap().port()), "{got:?}");
        // A child's listener is its parent's command's too.
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        assert!(tree(std::process::id()).unwrap().contains(&child.id()));
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
