//! A study file (`wanperf study run FILE`): TOML text, validated option by option.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(study) = wanperf::study::flags::parse(text) else { return };
    // A parsed study plans its cells, and every cell's command lines and parameters build
    // (the runner calls these for each cell; a study that parses must not fail later).
    let cells = study.cells();
    assert!(!cells.is_empty());
    for c in cells.iter().take(64) {
        let _ = study.measure_argv(c, "host.invalid", Some(5301));
        let _ = study.link_argv(c);
        let _ = study.params(c);
        assert!(!study.estimate_s(c, &wanperf::study::flags::CliFlags).is_nan());
    }
    // Parsing is deterministic.
    assert_eq!(wanperf::study::flags::parse(text).ok(), Some(study));
});
