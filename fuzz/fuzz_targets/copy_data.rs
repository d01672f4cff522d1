#![no_main]
//! What a copy decodes from a peer: block headers, resume journals, paths, copy messages.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    wanperf_copy::exercise(data);
});
