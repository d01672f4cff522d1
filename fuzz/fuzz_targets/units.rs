//! One flag or study value as typed: a size, a rate or a duration (`64k`, `25M`, `250ms`).
#![no_main]
use libfuzzer_sys::fuzz_target;
use wanperf_proto::units::{parse_duration, parse_rate, parse_size};

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    // Whatever parses must be a plain, in-range value that prints and parses back the same.
    if let Ok(n) = parse_size(s) {
        assert!(n <= u64::MAX / 2);
        if n < 1 << 53 {
            assert_eq!(parse_size(&n.to_string()), Ok(n));
        }
    }
    if let Ok(n) = parse_rate(s) {
        assert!(n <= 1_000_000_000_000_000);
        assert_eq!(parse_rate(&n.to_string()), Ok(n));
    }
    if let Ok(d) = parse_duration(s) {
        assert!(d.is_finite() && d >= 0.0 && d <= 1e9, "{d}");
        assert_eq!(parse_duration(&d.to_string()), Ok(d));
    }
});
