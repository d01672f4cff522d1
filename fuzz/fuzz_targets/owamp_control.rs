//! Bytes on an OWAMP control connection, read as each message a peer may send.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| wanperf_owamp::exercise(data));
