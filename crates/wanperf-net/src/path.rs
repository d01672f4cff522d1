//! `wanperf path`: the two-host special case of the network engine. A [`PathConfig`] becomes
//! a topology of hosts `left` and `right` joined by one link (`up` is a → b), run by the same
//! [`Network`] code as any other topology.

use crate::export::ExportStats;
use crate::run::{Network, Options};
use crate::topo::{FlowExport, LinkDef, Node, NodeKind, Topology};
use std::os::fd::RawFd;
use std::process::Command;
use wanperf_emu::netns::EnvError;
use wanperf_emu::path::{Host, PathConfig, PathStats};

/// The topology of a path.
pub fn topology(cfg: &PathConfig) -> Topology {
    let host = |name: &str, model: &wanperf_host::HostModel| Node {
        name: name.into(),
        kind: NodeKind::Host,
        txqueuelen: cfg.txqueuelen,
        model: model.clone(),
        line: 0,
    };
    Topology {
        name: "path".into(),
        nodes: vec![host("left", &cfg.left_host), host("right", &cfg.right_host)],
        links: vec![LinkDef {
            name: "path".into(),
            a: 0,
            b: 1,
            ab: cfg.up.clone(),
            ba: cfg.down.clone(),
            mtu: cfg.mtu,
            cost: 1,
            offload: true,
            subnet: None,
            line: 0,
        }],
        routes: Vec::new(),
        traffic: Vec::new(),
        seed: cfg.seed,
        export: None,
        ecmp: false,
    }
}

/// A running path; dropping it stops forwarding and frees the namespaces.
pub struct Path {
    net: Network,
}

fn node(h: Host) -> usize {
    match h {
        Host::Left => 0,
        Host::Right => 1,
    }
}

impl Path {
    /// Creates both hosts and starts forwarding.
    pub fn start(cfg: &PathConfig, log: Option<Box<dyn std::io::Write + Send>>) -> Result<Path, EnvError> {
        Path::start_exporting(cfg, log, None)
    }

    /// As [`Path::start`], exporting flow records of both directions (observation domain 1 is
    /// up, left → right; 2 is down).
    pub fn start_exporting(
        cfg: &PathConfig,
        log: Option<Box<dyn std::io::Write + Send>>,
        export: Option<FlowExport>,
    ) -> Result<Path, EnvError> {
        let mut t = topology(cfg);
        t.export = export;
        let net = Network::start(&t, &Options { host_nice: cfg.host_nice }, log)?;
        Ok(Path { net })
    }

    /// A command that will run inside `host`, with `WANPERF_PEER` set to the other host.
    pub fn command(&self, host: Host, program: &str) -> Command {
        let mut c = Command::new(program);
        self.enter(host, &mut c);
        c
    }

    /// Makes `cmd` run inside `host` (and sets `WANPERF_PEER`, `WANPERF_SELF`).
    pub fn enter(&self, host: Host, cmd: &mut Command) {
        self.net.enter(node(host), cmd);
    }

    /// The counters so far (refreshed every 100 ms).
    pub fn stats(&self) -> PathStats {
        to_path_stats(self.net.stats())
    }

    /// The descriptor that keeps `host`'s network namespace alive (for `/proc/PID/fd/N`).
    pub fn ns_fd(&self, host: Host) -> RawFd {
        self.net.ns_fd(node(host))
    }

    /// The control group of a host's CPU quota, if its model has one.
    pub fn cgroup_dir(&self, host: Host) -> Vec<String> {
        self.net.cgroup_dir(node(host))
    }

    /// What each host's model did so far (hosts with a model only).
    pub fn host_reports(&self) -> Vec<crate::run::HostReport> {
        self.net.host_reports()
    }

    /// The CPUs the hosts' commands keep to (empty: any).
    pub fn host_cpus(&self) -> &[usize] {
        self.net.host_cpus()
    }

    /// Stops forwarding and returns the counters.
    pub fn stop(self) -> PathStats {
        self.finish().0
    }

    /// Stops forwarding: the counters, and what the flow exporter sent (when it exports).
    pub fn finish(self) -> (PathStats, Option<ExportStats>) {
        let (links, export) = self.net.finish();
        (to_path_stats(links), export)
    }
}

fn to_path_stats(links: Vec<wanperf_emu::fabric::LinkStats>) -> PathStats {
    links.into_iter().next().map(|l| PathStats { up: l.ab, down: l.ba }).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Plan;

    #[test]
    fn a_path_is_two_hosts_and_one_link_with_the_old_addresses() {
        let cfg = PathConfig {
            up: wanperf_emu::config::DirConfig { delay_ns: 5, ..Default::default() },
            down: Default::default(),
            mtu: 9000,
            txqueuelen: Some(10),
            seed: 3,
            host_nice: 10,
            left_host: wanperf_host::HostModel::parse("cpu=0.5").unwrap(),
            right_host: Default::default(),
        };
        let t = topology(&cfg);
        let p = Plan::new(&t).unwrap();
        assert_eq!(p.addr_of(0), Some(wanperf_emu::path::LEFT_V4));
        assert_eq!(p.addr_of(1), Some(wanperf_emu::path::RIGHT_V4));
        assert_eq!(p.ifaces[0].v6, wanperf_emu::path::LEFT_V6);
        assert_eq!(p.ifaces[1].dev, wanperf_emu::path::DEVICE);
        assert_eq!((p.ifaces[0].mtu, p.ifaces[0].txqueuelen), (9000, Some(10)));
        assert_eq!(t.links[0].ab.delay_ns, 5);
    }
}
