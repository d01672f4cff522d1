#![no_main]
//! What `wanperf flows collect` decodes from exporters: NetFlow v5/v9, IPFIX and sFlow datagrams.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    wanperf_flows::exercise(data);
});
