//! A datagram on a STAMP port: a test packet as the reflector reads and answers it (stateful,
//! unauthenticated and authenticated), and a reflected packet as the sender reads it.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| wanperf_stamp::exercise(data));
