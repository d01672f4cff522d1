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
pub mod copy;
pub mod flows;
pub mod keep;
pub mod keys;
pub mod load;
pub mod mesh;
pub mod net;
pub mod output;
pub mod path;
pub mod ping;
pub mod store;
pub mod study;
pub mod tput;
pub mod trace;
pub mod util;

/// Software version reported to peers and in records.
pub fn software() -> String {
    format!("wanperf {}", env!("CARGO_PKG_VERSION"))
}

/// Set by SIGINT/SIGTERM; every command polls it.
pub use wanperf_sys::INTERRUPTED;
