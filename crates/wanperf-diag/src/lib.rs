//! Path diagnostics for wanperf: where on the path delay, loss and MTU limits are.
//!
//! The pure core ([`trace`]) decides what a set of probes and replies says about each hop;
//! the I/O shell ([`probe`], [`run`]) sends TTL-limited probes from an unprivileged socket
//! and reads the ICMP errors and echo replies with the kernel's timestamps.

pub mod probe;
pub mod run;
pub mod trace;
