//! Host models for emulated hosts: what the seeds' hosts were besides their network — a slow
//! CPU (seed 004's bbftp, limited by compression), a TCP stack of its day (SACK, window
//! scaling, timestamps, buffer limits, congestion control; seed 003's Reno).
//!
//! [`model`] is pure: a [`HostModel`] from the text users write (`cpu=0.25,sack=off`), checked,
//! and the per-network-namespace settings it means. [`cgroup`] is the shell for the CPU quota
//! and disk rates: control groups per host (cgroup v2 `cpu.max` and `io.max`, or v1
//! `cpu.cfs_quota_us` and `blkio.throttle.*`), its processes, and what the limits did
//! (throttled periods and time from `cpu.stat`; bytes that reached the disks from `io.stat`).

#![forbid(unsafe_code)]

pub mod cgroup;
pub mod model;

pub use model::{HostModel, ModelError};
