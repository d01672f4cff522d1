//! The console: command output that survives a closed pipe, and daemons' logs. The record
//! sinks (table, NDJSON, recorder) are the engine's (`wanperf_engine::console`).

use std::io;
pub use wanperf_engine::console::{line, JsonSink, Recorder, TableSink};

/// A progress bar on stderr with `template` when `show`, counting to `len`.
pub fn bar(show: bool, len: u64, template: &str) -> Option<indicatif::ProgressBar> {
    show.then(|| {
        let b = indicatif::ProgressBar::with_draw_target(Some(len), indicatif::ProgressDrawTarget::stderr());
        b.set_style(
            indicatif::ProgressStyle::with_template(template)
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    })
}

/// Whether an error chain ends in a closed pipe (`wanperf ... | head`), a clean exit.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<io::Error>().is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe))
}

/// A daemon's log: one line per event on stderr, as text or (`json`) as wanperf/1 `log`
/// records with a Unix timestamp.
pub fn stderr_log(json: bool) -> std::sync::Arc<dyn Fn(&str) + Send + Sync> {
    std::sync::Arc::new(move |line: &str| {
        if json {
            let ts =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
            eprintln!("{}", serde_json::json!({"event": "log", "timestamp": ts, "message": line}));
        } else {
            eprintln!("{line}");
        }
    })
}
