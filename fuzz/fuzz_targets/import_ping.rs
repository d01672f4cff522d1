//! A file handed to `wanperf import --ping`: iputils `ping` output (with or without `-D`),
//! or anything else.
#![no_main]
use libfuzzer_sys::fuzz_target;
use wanperf_archive::import::{import_ping, MAX_PING_PROBES};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok((run, cell)) = import_ping(text) else { return };
    // Bounded, finite, and storable: the JSON the archive keeps reads back the same.
    assert!(cell.probes.len() as u64 <= MAX_PING_PROBES);
    assert!(run.started_unix.is_finite() && cell.started_unix.is_finite() && cell.duration_s.is_finite());
    for p in &cell.probes {
        assert!(p.sent_s.is_finite() && p.rtt_ms.is_none_or(f64::is_finite), "{p:?}");
    }
    // The JSON round trip on the first 1000 probes (a few lines may claim a million probes;
    // serializing them all made each run take seconds and says nothing more).
    let mut cell = cell;
    cell.probes.truncate(1000);
    let j = serde_json::to_string(&(&run, &cell)).unwrap();
    let back: (wanperf_archive::NewRun, wanperf_archive::CellRecord) = serde_json::from_str(&j).unwrap();
    assert_eq!(back, (run, cell));
});
