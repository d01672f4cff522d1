//! Study files checked by the command line's own flags (`wanperf::study::flags`): planning,
//! estimates, link axes over presets, errors that name their line.

use wanperf::study::flags::{parse, path_config, CliFlags};
use wanperf_study::spec::*;

const SEED000: &str = r#"
name = "seed000"
description = "Effect of load on RTT and loss"

[path]
preset = "slac-cern-2000"

[measure]
kind = "load"
duration = "4s"
idle = "2s"
interval = "100ms"

[sweep]
streams = [1, 5]
window = ["16k", "64k", "256k"]

[run]
repeats = 2
order = "random"
seed = 3
pause = "1s"
"#;

#[test]
fn a_sweep_too_large_to_plan_is_an_error() {
    // fuzz/corpus/study_toml/crash-sweep-1e7-cells: 200 bytes asked for 10^7 cells, and
    // `parse` listed them all (a timeout, then out of memory).
    let text = "name = \"x\"\n[measure]\nkind = \"ping\"\n[sweep]\n\
                seed = [1,2,3,4,5,6,7,8,9,10]\ntxqueuelen = [1,2,3,4,5,6,7,8,9,10]\n\
                count = [1,2,3,4,5,6,7,8,9,10]\nsize = [64,65,66,67,68,69,70,71,72,73]\n\
                [run]\nrepeats = 1000\n";
    let e = parse(text).unwrap_err();
    assert!(e.message.contains("10 × 10 × 10 × 10 cells × 1000 repeats"), "{e}");
    // At the limit it still parses.
    let ok = text.replace("repeats = 1000", "repeats = 10");
    assert_eq!(parse(&ok).unwrap().cells().len() as u64, MAX_CELLS);
}

#[test]
fn parses_and_plans_the_product_of_the_axes() {
    let s = parse(SEED000).unwrap();
    assert_eq!(s.kind, Kind::Load);
    assert_eq!(s.repeats, 2);
    assert_eq!(s.pause_s, 1.0);
    let cells = s.cells();
    assert_eq!(cells.len(), 2 * 3 * 2);
    // Every (index, repeat) exactly once, and the same shuffled order every time.
    let mut seen: Vec<(u32, u32)> = cells.iter().map(|c| (c.index, c.repeat)).collect();
    assert_eq!(s.cells(), cells);
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 12);
    let c = cells.iter().find(|c| c.index == 4 && c.repeat == 0).unwrap();
    // streams slowest: index 4 = streams 5, window 64k.
    assert_eq!(c.values, vec![("streams".into(), "5".into()), ("window".into(), "64k".into())]);
    let argv = s.measure_argv(c, "198.18.0.2", None);
    assert_eq!(argv[..2], ["load".to_string(), "198.18.0.2".to_string()]);
    assert!(argv.windows(2).any(|w| w == ["--load-time", "4s"]));
    assert!(argv.windows(2).any(|w| w == ["--streams", "5"]));
    assert_eq!(argv.last().unwrap(), "--json");
    let p = s.params(c);
    assert_eq!(p["window"], serde_json::json!(65536));
    assert_eq!(p["streams"], serde_json::json!(5));
    assert_eq!(s.link_argv(c), vec!["--preset", "slac-cern-2000"]);
    assert_eq!(s.estimate_s(c, &CliFlags), 4.0 + 2.0 + 2.0 + 1.0);
}

#[test]
fn link_axes_override_the_preset() {
    let text = SEED000.replace("[sweep]", "[sweep]\nqueue = [\"100kB\", \"300kB\"]");
    let s = parse(&text).unwrap();
    let c = &s.cells()[0];
    let args = s.link_argv(c);
    assert_eq!(args[..2], ["--preset".to_string(), "slac-cern-2000".to_string()]);
    assert!(args.contains(&"--queue".to_string()));
    let cfg = path_config(&s.link_argv(c)).unwrap();
    assert!(cfg.up.delay_ns > 0);
    assert!(s.params(c)["queue"].is_number());
}

fn error_of(text: &str) -> StudyError {
    parse(text).unwrap_err()
}

#[test]
fn errors_point_to_the_line() {
    // Unknown axis.
    let e = error_of(&SEED000.replace("[sweep]", "[sweep]\nbogus = [1, 2]"));
    assert_eq!(e.line, 15, "{e}");
    assert!(e.message.contains("unknown sweep axis `bogus`"), "{e}");
    // Bad unit in a sweep value.
    let e = error_of(&SEED000.replace("\"64k\"", "\"64 furlongs\""));
    assert_eq!(e.line, 16, "{e}");
    assert!(e.message.contains("window") || e.message.contains("furlongs"), "{e}");
    // Empty sweep.
    let e = error_of(&SEED000.replace("streams = [1, 5]", "streams = []"));
    assert_eq!(e.line, 15, "{e}");
    assert!(e.message.contains("no values"), "{e}");
    // Unknown preset.
    let e = error_of(&SEED000.replace("slac-cern-2000", "atlantis-1999"));
    assert_eq!(e.line, 6, "{e}");
    assert!(e.message.contains("unknown preset"), "{e}");
    // Bad unit in a link option, and in a measurement option.
    let e = error_of(&SEED000.replace("preset = \"slac-cern-2000\"", "rtt = \"-5ms\""));
    assert_eq!(e.line, 6, "{e}");
    let e = error_of(&SEED000.replace("idle = \"2s\"", "idle = \"2 fortnights\""));
    assert_eq!(e.line, 11, "{e}");
    // Unknown section key, TOML syntax.
    let e = error_of(&SEED000.replace("[run]", "[run]\nspeed = 3"));
    assert_eq!(e.line, 19, "{e}");
    let e = error_of(&SEED000.replace("kind = \"load\"", "kind = load"));
    assert_eq!(e.line, 9, "{e}");
    assert!(error_of(&SEED000.replace("kind = \"load\"", "kind = \"iperf\""))
        .message
        .contains("tput, ping, load, copy, capacity or trace"));
    // Reserved options and misplaced link options.
    assert!(error_of(&SEED000.replace("idle = \"2s\"", "json = true")).message.contains("set by the study runner"));
    assert!(error_of(&SEED000.replace("idle = \"2s\"", "rtt = \"10ms\"")).message.contains("link option"));
}

#[test]
fn a_trace_study_probes_the_server_and_refuses_what_it_cannot_send() {
    let text = "name = \"t\"\n[path]\nrtt = \"20ms\"\n[measure]\nkind = \"trace\"\ncount = 200\ninterval = \"10ms\"\n[sweep]\nloss = [\"0\", \"0.02\"]\n";
    let s = parse(text).unwrap();
    assert_eq!(s.kind, Kind::Trace);
    let cells = s.cells();
    assert_eq!(cells.len(), 2);
    let argv = s.measure_argv(&cells[0], "198.18.0.2", None);
    assert_eq!(&argv[..3], ["trace", "198.18.0.2", "--server"], "{argv:?}");
    assert!(argv.ends_with(&["--json".to_string()]) && argv.contains(&"200".to_string()), "{argv:?}");
    // A real host's server port is the probes' port.
    let host = text
        .replace("rtt = \"20ms\"", "host = \"127.0.0.1\"\nport = 5999")
        .replace("[sweep]\nloss = [\"0\", \"0.02\"]\n", "");
    let s = parse(&host).unwrap();
    let argv = s.measure_argv(&s.cells()[0], "127.0.0.1", Some(5999));
    assert!(argv.windows(2).any(|w| w == ["--port", "5999"]), "{argv:?}");
    // 200 rounds 10 ms apart and the last probes' wait.
    assert!((s.estimate_s(&s.cells()[0], &CliFlags) - 4.0).abs() < 1e-9);
    for bad in ["icmp = true", "tcp = true", "multipath = 4"] {
        let e = error_of(&text.replace("count = 200", bad));
        assert!(e.message.contains("for `wanperf trace` alone"), "{bad}: {e}");
    }
    assert!(error_of(&text.replace("count = 200", "server = true")).message.contains("set by the study runner"));
}

#[test]
fn a_real_host_takes_no_link_options() {
    let text = r#"
name = "lan"
[path]
host = "127.0.0.1"
port = 5999
[measure]
kind = "tput"
duration = "1s"
[sweep]
streams = [1, 2]
"#;
    let s = parse(text).unwrap();
    assert_eq!(s.target, Target::Host { host: "127.0.0.1".into(), port: 5999 });
    let c = &s.cells()[1];
    let argv = s.measure_argv(c, "127.0.0.1", Some(5999));
    assert!(argv.windows(2).any(|w| w == ["--streams", "2"]));
    // The direction axis.
    let d = parse(&text.replace("[sweep]", "[sweep]\ndirection = [\"up\", \"down\", \"bidir\"]")).unwrap();
    assert_eq!(d.axes[0].name, "direction", "file order");
    let argvs: Vec<Vec<String>> = d.cells().iter().map(|c| d.measure_argv(c, "h", None)).collect();
    // direction slowest: up, up, down, down, bidir, bidir.
    assert!(!argvs[1].iter().any(|a| a == "--reverse" || a == "--bidir"));
    assert!(argvs[2].contains(&"--reverse".to_string()));
    assert!(argvs[5].contains(&"--bidir".to_string()));
    let e = error_of(&text.replace("[sweep]", "[sweep]\ndirection = [\"sideways\"]"));
    assert!(e.message.contains("up, down or bidir"), "{e}");
    assert!(argv.windows(2).any(|w| w == ["--time", "1s"]));
    assert_eq!(s.params(c)["streams"], serde_json::json!(2));
    let e = error_of(&text.replace("[sweep]", "[sweep]\nrtt = [\"10ms\"]"));
    assert!(e.message.contains("real host"), "{e}");
}

#[test]
fn a_copy_study_describes_its_data_and_copies_it_to_the_server() {
    let text = r#"
name = "copies"
[path]
preset = "slac-cern-2000"
[measure]
kind = "copy"
size = "8M"
content = "text"
streams = 4
[sweep]
compress = ["off", "3"]
files = [1, 1000]
"#;
    let s = parse(text).unwrap();
    assert_eq!(s.cells().len(), 4);
    let c = &s.cells()[3];
    assert_eq!(s.data(c), Some(DataSpec { size: 8 << 20, files: 1000, content: Content::Text }));
    let argv = s.argv_with_data(c, "198.18.0.2", None, "/tmp/x/data");
    assert_eq!(argv[..3], ["copy", "/tmp/x/data", "198.18.0.2:"]);
    // `streams` is copy's --parallel; the data keys are the runner's, not flags.
    assert!(argv.windows(2).any(|w| w == ["--parallel", "4"]), "{argv:?}");
    assert!(argv.windows(2).any(|w| w == ["--compress", "3"]), "{argv:?}");
    assert!(!argv.iter().any(|a| a == "--size" || a == "--files" || a == "--content"), "{argv:?}");
    assert_eq!(s.argv_with_data(c, "fd00::2", Some(7), "d")[2], "[fd00::2]:");
    assert_eq!(s.params(c)["files"], serde_json::json!(1000));
    // 8 MiB over the preset's 27 Mbit/s bottleneck, plus a little per file.
    let est = s.estimate_s(c, &CliFlags);
    assert!((5.0..10.0).contains(&est), "{est}");
    // Data keys are checked like options, and belong to copy studies only.
    let e = error_of(&text.replace("content = \"text\"", "content = \"lorem\""));
    assert!(e.message.contains("random, text or zeros"), "{e}");
    assert_eq!(e.line, 8, "{e}");
    let e = error_of(&text.replace("files = [1, 1000]", "files = [0]"));
    assert!(e.message.contains("`files` must be"), "{e}");
    let e = error_of(&text.replace("size = \"8M\"", "size = \"0\""));
    assert!(e.message.contains("above 0"), "{e}");
    let e = error_of(&text.replace("compress = [\"off\", \"3\"]", "compress = [\"99\"]"));
    assert_eq!(e.line, 11, "{e}");
    let e = error_of(&text.replace("streams = 4", "save = true"));
    assert!(e.message.contains("set by the study runner"), "{e}");
    let tput = parse(&text.replace("kind = \"copy\"", "kind = \"tput\"").replace("content = \"text\"\n", ""));
    assert!(tput.is_err(), "`files` is not an option of tput");
}
