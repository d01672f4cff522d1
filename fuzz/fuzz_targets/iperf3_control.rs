#![no_main]
//! iperf3's control bytes (state, cookie, JSON parameters and results, UDP headers).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    wanperf_iperf3::exercise(data);
});
