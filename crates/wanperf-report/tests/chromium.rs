//! The report in a real browser: headless Chromium loads the file (nothing to fetch), runs
//! its script, and every figure's SVG must have laid out with a non-empty box
//! (`<body data-figures="N/N">`). Skipped when no Chromium is installed, except under CI.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use wanperf_report::{report, synthetic};

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"].into_iter().find(|b| {
        Command::new(b).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
    })
}

/// Chromium's DOM of `file` after load, with a 90-second limit.
fn dump_dom(bin: &str, file: &Path, profile: &Path) -> String {
    let mut child = Command::new(bin)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=2000", "--dump-dom"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("file://{}", file.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium");
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut s).map(|_| s)
    });
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            panic!("chromium did not finish in 90 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    reader.join().unwrap().expect("read chromium's output")
}

#[test]
fn every_figure_lays_out_in_chromium() {
    let Some(bin) = chromium() else {
        assert!(std::env::var_os("CI").is_none(), "no chromium found, and CI is set (.ci/run installs it)");
        eprintln!("skipped: no chromium binary found (apt-get install chromium)");
        return;
    };
    let dir = std::env::temp_dir().join(format!("wanperf-report-chromium-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let runs = [
        (
            "seed000",
            synthetic::load_study("seed 000 <script>x()</script>", &[2, 10], &[16_384, 65_536, 262_144], 60, true),
        ),
        ("tput", synthetic::tput_study(&[1, 2, 4, 8])),
    ];
    for (name, data) in runs {
        let r = report(&data);
        let n = r.figures.len();
        assert!(n > 0);
        let file = dir.join(format!("{name}.html"));
        std::fs::write(&file, &r.html).unwrap();
        let dom = dump_dom(bin, &file, &dir.join("profile"));
        let body = dom.find("<body").map(|i| &dom[i..i + dom[i..].find('>').unwrap()]).expect("a body in the DOM");
        assert!(body.contains(&format!("data-figures=\"{n}/{n}\"")), "{name}: {body}");
    }
    // The site page (`wanperf flows report`): utilization and utilization against RTT.
    let r = wanperf_report::site_report(&synthetic::site("site <b>x</b>"));
    assert_eq!(r.figures.len(), 2);
    let file = dir.join("site.html");
    std::fs::write(&file, &r.html).unwrap();
    let dom = dump_dom(bin, &file, &dir.join("profile"));
    let body = dom.find("<body").map(|i| &dom[i..i + dom[i..].find('>').unwrap()]).expect("a body in the DOM");
    assert!(body.contains("data-figures=\"2/2\""), "site: {body}");
    let _ = std::fs::remove_dir_all(&dir);
}
