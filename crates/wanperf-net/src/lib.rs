//! Emulated networks for wanperf: hosts and routers in their own network namespaces, joined by
//! emulated links, with the kernel doing the forwarding and the ICMP.
//!
//! The pure part ([`topo`], [`plan`], [`linkopts`], [`gen`]) turns a topology file into
//! interfaces, addresses and routes and decides when cross traffic arrives; the I/O shell
//! ([`run`]) builds the namespaces and moves packets through `wanperf-emu`'s link cells;
//! [`export`] meters what the links deliver and sends it as NetFlow v9 / IPFIX.
//!
//! Around them, what the `path` and `net` commands run: [`child`] (the processes started in
//! the namespaces, one readiness rule, containment), [`daemon`] (named paths and networks:
//! typed requests over a Unix socket), [`pathd`] and [`netd`] (the two daemons; a network's
//! cross traffic) and [`show`] (what they print).

#![forbid(unsafe_code)]

pub mod child;
pub mod daemon;
pub mod export;
pub mod gen;
pub mod linkopts;
pub mod listen;
pub mod netd;
pub mod path;
pub mod pathd;
pub mod plan;
pub mod presets;
pub mod run;
pub mod show;
pub mod topo;
pub mod traffic;
pub mod vary;
