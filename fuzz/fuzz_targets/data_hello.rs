//! The first bytes of a data connection.
#![no_main]
use libfuzzer_sys::fuzz_target;
use wanperf_proto::data::DataHello;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = DataHello::decode(data) {
        assert_eq!(DataHello::decode(&h.encode()), Ok(h));
    }
});
