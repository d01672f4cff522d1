//! A file handed to `wanperf import --iperf3`: `iperf3 -J` output, or anything else.
#![no_main]
use libfuzzer_sys::fuzz_target;
use wanperf_archive::import::import_iperf3;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok((run, cell)) = import_iperf3(text) else { return };
    // What imports must be storable: finite numbers, and the JSON the archive keeps reads
    // back to the same records.
    assert!(run.started_unix.is_finite() && cell.started_unix.is_finite() && cell.duration_s.is_finite());
    for r in &cell.intervals {
        assert!(r.start_s.is_finite() && r.end_s.is_finite() && r.throughput_bps.is_finite(), "{r:?}");
    }
    let j = serde_json::to_string(&(&run, &cell)).unwrap();
    let back: (wanperf_archive::NewRun, wanperf_archive::CellRecord) = serde_json::from_str(&j).unwrap();
    assert_eq!(back, (run, cell));
});
