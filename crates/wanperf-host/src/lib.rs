//! Host models for emulated hosts: what the seeds' hosts were besides their network — a slow
//! CPU (seed 004's bbftp, limited by compression), a TCP stack of its day (SACK, window
//! scaling, timestamps, buffer limits, congestion control; seed 003's Reno).
//!
//! [`model`] is pure: a [`HostModel`] from the text users write (`cpu=0.25,sack=off`), checked,
//! and the per-network-namespace settings it means. [`cgroup`] is the shell for the CPU quota:
//! a control group per host (cgroup v2 `cpu.max`, or v1 `cpu.cfs_quota_us`), its processes,
//! and what the quota did (throttled periods and time, from the kernel's `cpu.stat`).

#![forbid(unsafe_code)]

pub mod cgroup;
pub mod model;

pub use model::{HostModel, ModelError};
