//! The running network: a network namespace per host and router, a device per interface,
//! addresses, routes and sysctls set over rtnetlink and /proc/sys from inside each namespace,
//! and the emulator's I/O loop ([`wanperf_emu::fabric`]) carrying every link.
//!
//! Routers are namespaces with the kernel's forwarding on: TTL expiry, ICMP time-exceeded and
//! unreachable, fragmentation-needed / packet-too-big and ICMP rate limiting are the kernel's.
//! Nothing is mounted and every namespace is anonymous, held by a descriptor of this process
//! (and the processes inside), so however the owner ends the kernel removes everything.

use crate::export::{ExportStats, Exporter};
use crate::gen::Generator;
use crate::plan::Plan;
use crate::topo::{NodeKind, Topology, Traffic};
use std::net::IpAddr;
use std::os::fd::{OwnedFd, RawFd};
use std::process::Command;
use std::sync::{Arc, Mutex};
use wanperf_emu::config::DirConfig;
use wanperf_emu::fabric::{Control, End, Fabric, IcmpShape, Injection, Injector, LinkSpec, LinkStats, Tap};
use wanperf_emu::netns::{self, EnvError, Netns};
use wanperf_emu::packet;
use wanperf_host::cgroup::HostGroup;

const ETHERNET_HEADER: usize = 14;

/// How the network runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Niceness of commands run on hosts (the I/O loop keeps normal priority).
    pub host_nice: i32,
}

impl Default for Options {
    fn default() -> Self {
        Options { host_nice: 10 }
    }
}

/// A running network; dropping it stops the links and frees every namespace.
pub struct Network {
    topo: Topology,
    plan: Plan,
    nodes: Vec<Netns>,
    _middle: Option<Netns>,
    fabric: Fabric,
    host_nice: i32,
    /// The CPUs the hosts' commands run on (empty: any; see `cpu_split`).
    host_cpus: Vec<usize>,
    /// Current link configurations (what `set` changes).
    configs: Vec<(DirConfig, DirConfig)>,
    export: Option<Arc<Mutex<ExportStats>>>,
    /// Each node's limits (CPU quota, disk rates), if its model has any (after `nodes`:
    /// dropped once the namespaces are gone).
    quotas: Vec<Option<HostGroup>>,
}

/// What a host's model did: the model, and its CPU quota's accounting when it has one.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HostReport {
    /// The host.
    pub host: String,
    /// Its model, in the text form (`cpu=0.25,sack=off`).
    pub model: String,
    /// The model in words.
    pub described: String,
    /// The CPU quota's accounting so far (`cpu.stat`).
    pub cpu: Option<wanperf_host::cgroup::CpuStats>,
    /// The quota, cores.
    pub cpu_cores: Option<f64>,
    /// The host's disk limits and what reached the machine's disks under them (none without
    /// any).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk: Option<DiskReport>,
    /// The TCP settings as the host's kernel reports them now (`/proc/sys` key, value).
    pub settings: Vec<(String, String)>,
    /// The settings whose value in the kernel is not the one the model set (key, the kernel's
    /// value, the model's).
    pub not_held: Vec<(String, String, String)>,
    /// Its interfaces' transmit queues as the kernel counts them (a host with `txqueuelen`):
    /// seed 003's "SendStall", a full queue's drops on the sending host itself.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<IfaceQueue>,
}

/// A host's disk limits (bit/s, as its model set them) and the bytes that reached the disks.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DiskReport {
    /// The read limit.
    pub read_bps: Option<u64>,
    /// The write limit.
    pub write_bps: Option<u64>,
    /// What the kernel counted under them.
    #[serde(flatten)]
    pub done: wanperf_host::cgroup::DiskStats,
    /// The disks they apply to, `MAJ:MIN`.
    pub disks: Vec<String>,
}

/// One host interface's transmit queue: its length and what its queueing discipline did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct IfaceQueue {
    /// The device (`wan0`).
    pub dev: String,
    /// Its `txqueuelen`, packets.
    pub txqueuelen: Option<u32>,
    /// The kernel's counters of its root queueing discipline.
    pub qdisc: wanperf_emu::netns::QdiscStats,
    /// Packets the device itself dropped on transmit (`ip -s link`'s TX dropped): where a TUN
    /// device's full queue of `txqueuelen` packets drops.
    pub tx_dropped: u64,
}

impl Injector for Generator {
    fn next_at(&self) -> Option<u64> {
        Generator::next_at(self)
    }
    fn pop(&mut self, now: u64) -> Option<u64> {
        Generator::pop(self, now)
    }
}

/// Per-link decisions: offload moves 64 KiB super-packets (loss and policers still decide
/// for each of their segments, splitting a super-packet where they differ); a configured
/// txqueuelen needs the device queue to count real packets (pull mode, no offload); and a
/// link may turn it off (`offload = false`) so its interfaces count and capture wire packets.
fn link_modes(t: &Topology, li: usize) -> (bool, bool) {
    let l = &t.links[li];
    let pull = t.nodes[l.a].txqueuelen.is_some() || t.nodes[l.b].txqueuelen.is_some();
    (l.offload && !pull, pull)
}

/// A route as the kernel is told it: destination, prefix, and (next hop, device) for each
/// of its next hops (several: a multipath route).
type KernelRoute = (IpAddr, u8, Vec<(IpAddr, String)>);

fn kernel_route(plan: &Plan, r: &crate::plan::Route) -> KernelRoute {
    let hops = std::iter::once((r.via, r.iface)).chain(r.more.iter().map(|&(i, via)| (via, i)));
    (r.dst, r.prefix, hops.map(|(via, i)| (via, plan.ifaces[i].dev.clone())).collect())
}

/// Device names to interface indexes, inside the node's namespace.
fn resolve_hops(hops: &[(IpAddr, String)]) -> Result<Vec<(IpAddr, u32)>, EnvError> {
    hops.iter().map(|(via, dev)| Ok((*via, netns::ifindex(dev)?))).collect()
}

/// Sysctls every node gets, and a router's extras; with `ecmp`, multipath routes hash
/// flows by addresses, protocol and ports (policy 1), as per-flow load balancers do.
fn configure_node(kind: &NodeKind, ecmp: bool, model: &[(&'static str, String)]) -> Result<(), EnvError> {
    if ecmp {
        netns::sysctl("net/ipv4/fib_multipath_hash_policy", "1")?;
        netns::sysctl("net/ipv6/fib_multipath_hash_policy", "1")?;
    }
    // Asymmetric routes are the point of some topologies: no reverse-path filtering, and
    // routers do not redirect hosts around themselves.
    for k in ["net/ipv4/conf/all/rp_filter", "net/ipv4/conf/default/rp_filter"] {
        netns::sysctl(k, "0")?;
    }
    // Hosts tuned for long fat paths, as the seeds' were (autotuning up to 64 MiB).
    netns::sysctl("net/ipv4/tcp_rmem", "4096 131072 67108864")?;
    netns::sysctl("net/ipv4/tcp_wmem", "4096 16384 67108864")?;
    match kind {
        NodeKind::Host => {
            // A new namespace starts with ping sockets closed ("1 0"); real hosts let users ping.
            // In an unprivileged user namespace only the mapped group (0) can be named.
            netns::sysctl("net/ipv4/ping_group_range", "0 2147483647")
                .or_else(|_| netns::sysctl("net/ipv4/ping_group_range", "0 0"))?;
            // The host's model over the defaults above (tcp_rmem, tcp_wmem, SACK, …).
            for (k, v) in model {
                netns::sysctl(k, v)?;
            }
        }
        NodeKind::Router(o) => {
            netns::sysctl("net/ipv4/ip_forward", "1")?;
            netns::sysctl("net/ipv6/conf/all/forwarding", "1")?;
            netns::sysctl("net/ipv6/conf/default/forwarding", "1")?;
            for k in ["net/ipv4/conf/all/send_redirects", "net/ipv4/conf/default/send_redirects"] {
                netns::sysctl(k, "0")?;
            }
            if let Some(ms) = o.icmp_ratelimit_ms {
                netns::sysctl("net/ipv4/icmp_ratelimit", &ms.to_string())?;
                netns::sysctl("net/ipv6/icmp/ratelimit", &ms.to_string())?;
            }
            if let Some(n) = o.icmp_msgs_per_sec {
                netns::sysctl("net/ipv4/icmp_msgs_per_sec", &n.to_string())?;
            }
            if let Some(n) = o.icmp_msgs_burst {
                netns::sysctl("net/ipv4/icmp_msgs_burst", &n.to_string())?;
            }
        }
    }
    Ok(())
}

fn configure_iface(dev: &str, i: &crate::plan::Iface, ring: Option<u32>) -> Result<u32, EnvError> {
    let idx = netns::ifindex(dev)?;
    netns::set_link(idx, Some(i.mtu), i.txqueuelen.or(ring))?;
    netns::add_address(idx, IpAddr::V4(i.v4), 24)?;
    netns::add_address(idx, IpAddr::V6(i.v6), 64)?;
    Ok(idx)
}

/// A TUN device's queue where no `txqueuelen` is configured, packets. The kernel's default
/// (500) is no host's: a TUN device frees what it queues, so TCP Small Queues never hold a
/// sender back, and twenty Reno streams' slow-start bursts on the 170 ms OSCARS path
/// overflowed it whenever the emulator was a few milliseconds late — 3008 packets in one
/// run, goodput 92 Mbit/s where the path carries 228 (bench/host_ring.sh). A real host's
/// queue holds such bursts: TSQ keeps each socket's share small, and fq_codel, Debian's
/// default qdisc, holds 10 240 packets. Packets waiting here are late as in a busy host's
/// queue, and whatever still overflows is counted as the link's `unread_drops`.
const TUN_RING: u32 = 10_000;

/// A TUN device for `iface`, made and configured inside its node, and whether the emulator may
/// join the UDP datagrams it writes to it (the device took UDP segmentation offload).
fn tun_end(nodes: &[Netns], iface: &crate::plan::Iface, offload: bool) -> Result<(OwnedFd, bool), EnvError> {
    let iface = iface.clone();
    nodes[iface.node].run(move || -> Result<(OwnedFd, bool), EnvError> {
        let end = netns::create_tun(&iface.dev, offload)?;
        configure_iface(&iface.dev, &iface, Some(TUN_RING))?;
        Ok(end)
    })?
}

/// A veth pair for `iface`: its end in the node, configured there, and the far end `far` in
/// the middle namespace, read and written through a packet socket (returned).
fn veth_end(
    middle: &Netns,
    nodes: &[Netns],
    iface: &crate::plan::Iface,
    far: &str,
    offload: bool,
) -> Result<OwnedFd, EnvError> {
    let ns = &nodes[iface.node];
    let (far2, dev, nsfd, mtu) = (far.to_string(), iface.dev.clone(), ns.raw_fd(), iface.mtu);
    middle.run(move || -> Result<(), EnvError> {
        netns::create_veth(&far2, &dev, nsfd)?;
        netns::set_link(netns::ifindex(&far2)?, Some(mtu), None)
    })??;
    let iface = iface.clone();
    ns.run(move || -> Result<(), EnvError> {
        if !offload {
            netns::disable_segmentation(&iface.dev)?;
        }
        configure_iface(&iface.dev, &iface, None).map(drop)
    })??;
    let far = far.to_string();
    middle.run(move || netns::packet_socket(&far, offload))?
}

impl Network {
    /// Builds the network and starts forwarding.
    pub fn start(
        topo: &Topology,
        opts: &Options,
        log: Option<Box<dyn std::io::Write + Send>>,
    ) -> Result<Network, EnvError> {
        let plan = Plan::new(topo)
            .map_err(|e| EnvError::Sys { what: "planning addresses", err: std::io::Error::other(e.to_string()) })?;
        let mut nodes = Vec::with_capacity(topo.nodes.len());
        let mut quotas = Vec::with_capacity(topo.nodes.len());
        for n in &topo.nodes {
            let ns = Netns::new()?;
            let (kind, ecmp, model) = (n.kind.clone(), topo.ecmp, n.model.sysctls());
            ns.run(move || configure_node(&kind, ecmp, &model))??;
            nodes.push(ns);
            let (cpu, disk) = (n.model.cpu_quota_us(), n.model.disk_bytes_s());
            quotas.push(match cpu.is_some() || disk.is_some() {
                true => Some(HostGroup::create(&n.name, cpu, disk).map_err(|e| EnvError::Sys {
                    what: "setting up a host's limits",
                    err: std::io::Error::other(e.to_string()),
                })?),
                false => None,
            });
        }
        // Devices: TUN where this user may open /dev/net/tun, else veth pairs into a middle
        // namespace read through packet sockets (same as `path`). The first device tells which.
        let mut first = None;
        if let Some(&(ia, _)) = plan.ends.first() {
            match tun_end(&nodes, &plan.ifaces[ia], link_modes(topo, 0).0) {
                Ok(fd) => first = Some(fd),
                Err(EnvError::TunAccess) => {}
                Err(e) => return Err(e),
            }
        }
        let middle = if first.is_none() && !plan.ends.is_empty() { Some(Netns::new()?) } else { None };
        let mut ends: Vec<[Option<(OwnedFd, bool)>; 2]> = Vec::new();
        for (li, &(ia, ib)) in plan.ends.iter().enumerate() {
            let (offload, _) = link_modes(topo, li);
            let mut pair: [Option<(OwnedFd, bool)>; 2] = [None, None];
            for (side, ii) in [ia, ib].into_iter().enumerate() {
                let iface = &plan.ifaces[ii];
                pair[side] = Some(match (&middle, first.take()) {
                    (_, Some(fd)) => fd,
                    (Some(m), None) => {
                        (veth_end(m, &nodes, iface, &format!("l{li}{}", ['a', 'b'][side]), offload)?, false)
                    }
                    (None, None) => tun_end(&nodes, iface, offload)?,
                });
            }
            ends.push(pair);
        }
        // Routes, once every device exists.
        for (ni, ns) in nodes.iter().enumerate() {
            let routes: Vec<KernelRoute> =
                plan.routes.iter().filter(|r| r.node == ni).map(|r| kernel_route(&plan, r)).collect();
            // A host with several interfaces offers each further one to MPTCP as a subflow
            // endpoint (`ip mptcp endpoint add ADDR dev IF subflow`): an MPTCP connection
            // from it (`tput --mptcp`) then opens a subflow on every interface, as seed 001's
            // speedy could have used both of its. Plain TCP is unaffected.
            let extra: Vec<(IpAddr, String)> = match topo.nodes[ni].kind {
                NodeKind::Host => plan.ifaces_of(ni).skip(1).map(|i| (IpAddr::V4(i.v4), i.dev.clone())).collect(),
                NodeKind::Router(_) => Vec::new(),
            };
            ns.run(move || -> Result<(), EnvError> {
                for (dst, prefix, hops) in routes {
                    netns::add_route(dst, prefix, &resolve_hops(&hops)?)?;
                }
                if !extra.is_empty() {
                    let eps = extra
                        .iter()
                        .map(|(a, dev)| Ok((*a, netns::ifindex(dev)?)))
                        .collect::<Result<Vec<_>, EnvError>>()?;
                    // Not fatal: without the endpoints an MPTCP test has one subflow, and its
                    // end record lists the subflows it had.
                    let _ = wanperf_emu::mptcp::subflow_endpoints(&eps);
                }
                Ok(())
            })??;
        }
        let l2 = if middle.is_some() { ETHERNET_HEADER } else { 0 };
        let shape = |node: usize| -> Option<IcmpShape> {
            match &topo.nodes[node].kind {
                NodeKind::Router(o) if o.icmp_silent || o.icmp_delay_ns > 0 || o.icmp_jitter_ns > 0 => {
                    Some(IcmpShape {
                        addrs: plan.ifaces_of(node).flat_map(|i| [IpAddr::V4(i.v4), IpAddr::V6(i.v6)]).collect(),
                        delay_ns: o.icmp_delay_ns,
                        jitter_ns: o.icmp_jitter_ns,
                        silent: o.icmp_silent,
                    })
                }
                _ => None,
            }
        };
        let router = |node: usize| matches!(topo.nodes[node].kind, NodeKind::Router(_));
        let mut specs = Vec::new();
        for (li, (l, [a, b])) in topo.links.iter().zip(ends).enumerate() {
            let (offload, pull) = link_modes(topo, li);
            let remark = match (offload, l2) {
                (false, 0) => packet::remark_scavenger,
                (false, _) => packet::remark_scavenger_eth,
                (true, 0) => packet::remark_scavenger_vnet,
                (true, _) => packet::remark_scavenger_vnet_eth,
            };
            specs.push(LinkSpec {
                name: l.name.clone(),
                dir_names: [format!("{}:ab", l.name), format!("{}:ba", l.name)],
                a: End::new(a.expect("made above"), l.a, router(l.a), shape(l.a)),
                b: End::new(b.expect("made above"), l.b, router(l.b), shape(l.b)),
                ab: l.ab.clone(),
                ba: l.ba.clone(),
                mtu: l.mtu,
                offload,
                pull,
                l2,
                seed: topo.seed.wrapping_add(li as u64 * 0x1000_0001),
                remark,
            });
        }
        let injections = topo
            .traffic
            .iter()
            .enumerate()
            .filter_map(|(i, t)| match *t {
                Traffic::Link { link, ab, pattern, rate_bps, packet, start_ns, stop_ns, .. } => Some(Injection {
                    link,
                    ab,
                    packet,
                    source: Box::new(Generator::new(
                        pattern,
                        rate_bps,
                        packet,
                        start_ns,
                        stop_ns,
                        topo.seed ^ (i as u64 + 1),
                    )),
                }),
                Traffic::Tcp { .. } => None,
            })
            .collect();
        let (tap, export) = match &topo.export {
            None => (None, None),
            Some(cfg) => {
                let (e, stats) = Exporter::new(cfg, topo.links.len())
                    .map_err(|err| EnvError::Sys { what: "opening the flow export socket", err })?;
                (Some(Box::new(e) as Box<dyn Tap>), Some(stats))
            }
        };
        let split = wanperf_emu::path::cpu_split();
        let fabric = Fabric::start(specs, injections, log, tap, split.as_ref().map(|s| s.0))?;
        let configs = topo.links.iter().map(|l| (l.ab.clone(), l.ba.clone())).collect();
        Ok(Network {
            topo: topo.clone(),
            plan,
            nodes,
            _middle: middle,
            fabric,
            host_nice: opts.host_nice,
            host_cpus: split.map(|s| s.1).unwrap_or_default(),
            configs,
            export,
            quotas,
        })
    }

    /// The topology it runs.
    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    /// Its addresses and routes.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The descriptor that keeps `node`'s network namespace alive (for `/proc/PID/fd/N`).
    pub fn ns_fd(&self, node: usize) -> RawFd {
        self.nodes[node].raw_fd()
    }

    /// The control groups of a node's limits (none without any): what a process joining the
    /// node joins too.
    pub fn cgroup_dir(&self, node: usize) -> Vec<String> {
        let g = self.quotas.get(node).and_then(|q| q.as_ref());
        g.map(|g| g.dirs().iter().map(|d| d.display().to_string()).collect()).unwrap_or_default()
    }

    /// The environment commands on the network get: `WANPERF_ADDR_<NAME>` (each node's first
    /// IPv4 address), `WANPERF_ADDR6_<NAME>`, `WANPERF_SELF`, and `WANPERF_PEER` (the other
    /// host when there are two).
    pub fn env(&self, node: usize) -> Vec<(String, String)> {
        env_for(&self.topo, &self.plan, node)
    }

    /// The CPUs the hosts' commands keep to (empty: any): all this process may use but the
    /// emulator's.
    pub fn host_cpus(&self) -> &[usize] {
        &self.host_cpus
    }

    /// Makes `cmd` run inside `node` (network namespace, niceness, the hosts' CPUs, dies with
    /// this process).
    pub fn enter(&self, node: usize, cmd: &mut Command) {
        let fd = self.nodes[node].raw_fd();
        cmd.envs(self.env(node));
        let nice = self.host_nice;
        let cpus = self.host_cpus.clone();
        let cgroups = self.quotas.get(node).and_then(|q| q.as_ref()).map(HostGroup::procs_fds).unwrap_or_default();
        // The namespace's descriptor stays open until exec (the node owns it), and so does the
        // quota's `cgroup.procs`.
        wanperf_sys::process::set_up_child(
            cmd,
            wanperf_sys::process::ChildSetup { netns: Some(fd), nice, cpus, die_with_parent: true, cgroups },
        );
    }

    /// What each host's model did so far (hosts with a model only).
    pub fn host_reports(&self) -> Vec<HostReport> {
        let mut out = Vec::new();
        for (i, n) in self.topo.nodes.iter().enumerate() {
            if n.model.is_default() && n.txqueuelen.is_none() {
                continue;
            }
            let quota = self.quotas.get(i).and_then(|q| q.as_ref());
            let asked = n.model.sysctls();
            let keys: Vec<&'static str> = asked.iter().map(|(k, _)| *k).collect();
            let settings = self.nodes[i]
                .run(move || {
                    keys.iter()
                        .map(|k| {
                            let v = std::fs::read_to_string(format!("/proc/sys/{k}")).unwrap_or_default();
                            (k.to_string(), v.split_whitespace().collect::<Vec<_>>().join(" "))
                        })
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default();
            // The kernel prints the triples with tabs; compared word by word.
            let words = |v: &str| v.split_whitespace().collect::<Vec<_>>().join(" ");
            let not_held = asked
                .iter()
                .zip(&settings)
                .filter(|((_, want), (_, have))| words(want) != *have)
                .map(|((_, want), (k, have))| (k.clone(), have.clone(), words(want)))
                .collect();
            let queues = match n.txqueuelen {
                None => Vec::new(),
                Some(_) => {
                    let devs: Vec<(String, Option<u32>)> =
                        self.plan.ifaces_of(i).map(|f| (f.dev.clone(), f.txqueuelen)).collect();
                    self.nodes[i]
                        .run(move || {
                            let stats = netns::qdisc_stats().unwrap_or_default();
                            let dropped = netns::tx_dropped().unwrap_or_default();
                            devs.into_iter()
                                .filter_map(|(dev, txqueuelen)| {
                                    let idx = netns::ifindex(&dev).ok()?;
                                    let qdisc = stats.iter().find(|q| q.ifindex == idx)?.clone();
                                    let tx_dropped = dropped.iter().find(|d| d.0 == idx).map_or(0, |d| d.1);
                                    Some(IfaceQueue { dev, txqueuelen, qdisc, tx_dropped })
                                })
                                .collect()
                        })
                        .unwrap_or_default()
                }
            };
            out.push(HostReport {
                host: n.name.clone(),
                model: n.model.to_string(),
                described: n.model.describe(),
                cpu: quota.and_then(HostGroup::cpu_stats),
                cpu_cores: quota.and_then(HostGroup::cores),
                disk: quota.and_then(|g| {
                    Some(DiskReport {
                        read_bps: n.model.disk_read,
                        write_bps: n.model.disk_write,
                        done: g.disk_stats()?,
                        disks: g.disks().to_vec(),
                    })
                }),
                settings,
                not_held,
                queues,
            });
        }
        out
    }

    /// What the flow exporter has sent so far (None: the topology exports nothing).
    pub fn export_stats(&self) -> Option<ExportStats> {
        self.export.as_ref().map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).clone())
    }

    /// Every link's counters so far (refreshed every 100 ms), with what each end's device
    /// dropped before the emulator read it.
    pub fn stats(&self) -> Vec<LinkStats> {
        let mut links = self.fabric.stats();
        add_unread_drops(&self.plan, &self.nodes, self._middle.is_some(), &mut links);
        links
    }

    /// A link's current configuration.
    pub fn link_config(&self, link: usize) -> Option<&(DirConfig, DirConfig)> {
        self.configs.get(link)
    }

    /// Changes a link while the network runs.
    pub fn set(&mut self, link: usize, ab: DirConfig, ba: DirConfig) {
        if let Some(c) = self.configs.get_mut(link) {
            *c = (ab.clone(), ba.clone());
            self.fabric.control(Control::Set { link, ab, ba });
        }
    }

    /// Changes a link's routing cost while the network runs: routes are computed again and
    /// every node's changed routes replaced (a route change mid-run). Returns how many
    /// routes changed.
    pub fn set_cost(&mut self, link: usize, cost: u32) -> Result<usize, EnvError> {
        let mut topo = self.topo.clone();
        let Some(l) = topo.links.get_mut(link) else { return Ok(0) };
        l.cost = cost.max(1);
        let plan = Plan::new(&topo)
            .map_err(|e| EnvError::Sys { what: "planning routes", err: std::io::Error::other(e.to_string()) })?;
        let changed: Vec<crate::plan::Route> =
            plan.routes.iter().filter(|r| !self.plan.routes.contains(r)).cloned().collect();
        for (ni, ns) in self.nodes.iter().enumerate() {
            let mine: Vec<KernelRoute> =
                changed.iter().filter(|r| r.node == ni).map(|r| kernel_route(&plan, r)).collect();
            if mine.is_empty() {
                continue;
            }
            ns.run(move || -> Result<(), EnvError> {
                for (dst, prefix, hops) in mine {
                    netns::replace_route(dst, prefix, &resolve_hops(&hops)?)?;
                }
                Ok(())
            })??;
        }
        self.topo = topo;
        self.plan = plan;
        Ok(changed.len())
    }

    /// Stops forwarding and returns the counters.
    pub fn stop(self) -> Vec<LinkStats> {
        self.finish().0
    }

    /// Stops forwarding: every link's counters and, when the topology exports flows, what the
    /// exporter sent (every open record is exported as the links stop).
    pub fn finish(self) -> (Vec<LinkStats>, Option<ExportStats>) {
        // The devices' drops are read while the loop still holds their TUN descriptors:
        // stopping it closes them, and a closed TUN device is gone with its counters.
        let mut before = self.fabric.stats();
        add_unread_drops(&self.plan, &self.nodes, self._middle.is_some(), &mut before);
        let Network { fabric, export, .. } = self;
        let mut links = fabric.stop();
        for (l, b) in links.iter_mut().zip(&before) {
            (l.ab.unread_drops, l.ba.unread_drops) = (b.ab.unread_drops, b.ba.unread_drops);
        }
        let export = export.map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).clone());
        (links, export)
    }
}

/// Fills each direction's `unread_drops` from the kernel: the transmit drops of the TUN
/// device that feeds it (`ip -s link`'s TX dropped), where no `txqueuelen` is configured
/// (a configured queue is the host's model, in its host report). Through veth pairs (`veth`:
/// no TUN access) the packet sockets' drops are not counted.
fn add_unread_drops(plan: &Plan, nodes: &[Netns], veth: bool, links: &mut [LinkStats]) {
    if veth {
        return;
    }
    for (ni, ns) in nodes.iter().enumerate() {
        let ends: Vec<(usize, usize, String)> = plan
            .ends
            .iter()
            .enumerate()
            .flat_map(|(li, &(ia, ib))| [(li, 0, ia), (li, 1, ib)])
            .map(|(li, dir, ii)| (li, dir, &plan.ifaces[ii]))
            .filter(|(_, _, f)| f.node == ni && f.txqueuelen.is_none())
            .map(|(li, dir, f)| (li, dir, f.dev.clone()))
            .collect();
        if ends.is_empty() {
            continue;
        }
        let counted = ns
            .run(move || {
                let dropped = netns::tx_dropped().unwrap_or_default();
                ends.into_iter()
                    .filter_map(|(li, dir, dev)| {
                        let idx = netns::ifindex(&dev).ok()?;
                        Some((li, dir, dropped.iter().find(|d| d.0 == idx).map_or(0, |d| d.1)))
                    })
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        for (li, dir, n) in counted {
            if let Some(l) = links.get_mut(li) {
                if dir == 0 { &mut l.ab } else { &mut l.ba }.unread_drops = n;
            }
        }
    }
}

/// An environment variable's name for a node (`WANPERF_ADDR_CERN_GW` for `cern-gw`).
pub fn env_name(prefix: &str, node: &str) -> String {
    let n: String =
        node.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' }).collect();
    format!("{prefix}{n}")
}

/// See [`Network::env`].
pub fn env_for(t: &Topology, p: &Plan, node: usize) -> Vec<(String, String)> {
    let mut env = Vec::new();
    for (i, n) in t.nodes.iter().enumerate() {
        if let Some(first) = p.ifaces_of(i).next() {
            env.push((env_name("WANPERF_ADDR_", &n.name), first.v4.to_string()));
            env.push((env_name("WANPERF_ADDR6_", &n.name), first.v6.to_string()));
        }
    }
    if let Some(a) = p.addr_of(node) {
        env.push(("WANPERF_SELF".into(), a.to_string()));
    }
    let hosts: Vec<usize> = t.hosts().collect();
    if hosts.len() == 2 && hosts.contains(&node) {
        let other = if hosts[0] == node { hosts[1] } else { hosts[0] };
        if let Some(a) = p.addr_of(other) {
            env.push(("WANPERF_PEER".into(), a.to_string()));
        }
    }
    env.push(("WANPERF_NODE".into(), t.nodes[node].name.clone()));
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_names_every_node() {
        let t = Topology::parse(
            "[[host]]\nname = \"slac\"\n[[host]]\nname = \"cern-gw\"\n[[link]]\na = \"slac\"\nb = \"cern-gw\"\n",
            &|_| Err("no".into()),
        )
        .unwrap();
        let p = Plan::new(&t).unwrap();
        let env = env_for(&t, &p, 0);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("WANPERF_ADDR_CERN_GW"), Some("198.18.0.2"));
        assert_eq!(get("WANPERF_ADDR6_SLAC"), Some("fd57:414e::1"));
        assert_eq!(get("WANPERF_SELF"), Some("198.18.0.1"));
        assert_eq!(get("WANPERF_PEER"), Some("198.18.0.2"));
        assert_eq!(get("WANPERF_NODE"), Some("slac"));
    }
}
