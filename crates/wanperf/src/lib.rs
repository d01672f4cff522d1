//! The `wanperf` command line as a library: the binary (`main.rs`) parses arguments and calls
//! these modules; fuzz targets and tests reach the pure parsers (study files) through it.
//! Its system calls go through wanperf-sys: no unsafe code here.

#![forbid(unsafe_code)]

/// `println!` for a command's output: when the reader has gone (`wanperf net stats | head`)
/// the command ends quietly with success, where `println!` would panic on the closed pipe.
/// (SIGPIPE stays ignored: daemons' sockets must see EPIPE as an error, not die of it.)
#[macro_export]
macro_rules! outln {
    () => {
        $crate::output::line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::output::line(format_args!($($arg)*))
    };
}

pub mod args;
pub mod calc;
pub mod capacity;
pub mod child;
pub mod copy;
pub mod counters;
pub mod flows;
pub mod keep;
pub mod keys;
pub mod load;
pub mod mesh;
pub mod net;
pub mod output;
pub mod path;
pub mod pathd;
pub mod ping;
pub mod store;
pub mod study;
pub mod tput;
pub mod trace;
pub mod util;

use std::sync::atomic::{AtomicBool, Ordering};

/// Software version reported to peers and in records.
pub fn software() -> String {
    format!("wanperf {}", env!("CARGO_PKG_VERSION"))
}

/// Set by SIGINT/SIGTERM; every command polls it.
pub use wanperf_sys::INTERRUPTED;

/// Sleeps `secs` seconds, or until Ctrl-C.
pub fn sleep_unless_interrupted(secs: f64) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs_f64(secs.max(0.0));
    while std::time::Instant::now() < until && !INTERRUPTED.load(Ordering::Acquire) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A thread that sets `stop` once SIGINT or SIGTERM arrives (for daemons that take a flag of
/// their own), and ends when `stop` is set.
pub fn stop_on_interrupt(stop: std::sync::Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Acquire) {
            if INTERRUPTED.load(Ordering::Acquire) {
                stop.store(true, Ordering::Release);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    })
}

/// SIGINT and SIGTERM set [`INTERRUPTED`] instead of ending the process.
pub fn install_signal_handlers() {
    wanperf_sys::catch_interrupts();
}
