//! Path diagnostics for wanperf: where on the path delay, loss and MTU limits are.
//!
//! The pure core ([`trace`]) decides what a set of probes and replies says about each hop;
//! the I/O shell ([`probe`], [`run`]) sends TTL-limited probes from an unprivileged socket
//! and reads the ICMP errors and echo replies with the kernel's timestamps.
//!
//! `wanperf capacity` likewise: [`capacity`] turns trains' timings into the capacity, the
//! available bandwidth and the bottleneck's hop; [`train`] sends the trains to a `wanperf
//! serve` (whose UDP echo stamps each packet with the kernel's receive time) and collects the
//! stamps and the routers' ICMP answers.

#![forbid(unsafe_code)]

pub mod answer;
pub mod capacity;
pub mod measure;
pub mod probe;
pub mod run;
pub mod syn;
pub mod text;
pub mod trace;
pub mod train;
