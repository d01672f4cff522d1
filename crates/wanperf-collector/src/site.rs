//! The data of `wanperf flows report`'s page, read from the archive: top talkers and the
//! application mix from the flows, each interface's utilization series, and the RTT probes of
//! the runs that overlap them.

use crate::util::Selection;
use anyhow::{Context, Result};
use ipnet::IpNet;
use wanperf_flows::{BinRow, Key, Metric};
use wanperf_report::site::SiteData;

/// What the page shows.
pub struct Query<'a> {
    /// Page title.
    pub title: String,
    /// From this Unix time.
    pub from: Option<f64>,
    /// Until this Unix time.
    pub to: Option<f64>,
    /// Local networks (in and out are relative to them).
    pub local: &'a [IpNet],
    /// How many top talkers.
    pub top: usize,
    /// How many top pairs.
    pub pairs: usize,
    /// Runs whose probes to show (none: those that overlap the readings, at most 8).
    pub runs: &'a [i64],
}

/// The page's data from the flows `rows` and the archive.
pub fn data(store: &mut dyn wanperf_archive::Store, rows: &[BinRow], sel: &Selection, q: &Query) -> Result<SiteData> {
    let links: Vec<wanperf_report::site::Link> = crate::util::select(store, sel)?
        .into_iter()
        .map(|((device, interface, source), series)| wanperf_report::site::Link {
            saturated: series.saturation(sel.pct, sel.bins),
            device,
            interface,
            source,
            series,
        })
        .collect();
    let runs = if q.runs.is_empty() {
        // The runs that overlap the readings (or the flows' range when there are none).
        let span = links
            .iter()
            .flat_map(|l| l.series.bins.iter().map(move |b| (b.bin_ms, b.bin_ms + l.series.bin_len_ms)))
            .chain(rows.iter().map(|r| (r.key.bin_ms, r.key.bin_ms + r.bin_len_ms)))
            .fold(None, |acc: Option<(u64, u64)>, (lo, hi)| {
                Some(acc.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))))
            });
        let mut ids: Vec<i64> = match span {
            Some((lo, hi)) => store
                .runs()?
                .iter()
                .filter(|r| {
                    r.started_unix * 1000.0 <= hi as f64 && r.finished_unix.unwrap_or(f64::MAX) * 1000.0 >= lo as f64
                })
                .map(|r| r.id)
                .collect(),
            None => Vec::new(),
        };
        ids.sort_unstable_by(|a, b| b.cmp(a));
        ids.truncate(8);
        ids.sort_unstable();
        ids
    } else {
        q.runs.to_vec()
    };
    let paths = paths_of(store, &runs)?;
    Ok(SiteData {
        title: q.title.clone(),
        from_unix: q.from,
        to_unix: q.to,
        local: q.local.iter().map(|n| n.to_string()).collect(),
        top_src: wanperf_flows::top(rows, Key::Src, Metric::Bytes, None, q.local, q.top),
        top_dst: wanperf_flows::top(rows, Key::Dst, Metric::Bytes, None, q.local, q.top),
        pairs: wanperf_flows::top(rows, Key::Pair, Metric::Bytes, None, q.local, q.pairs),
        mix: wanperf_flows::mix(rows, q.local),
        links,
        paths,
    })
}

/// Probes of the cells of `runs` with probes, as paths in absolute time.
fn paths_of(store: &mut dyn wanperf_archive::Store, runs: &[i64]) -> Result<Vec<wanperf_report::site::Path>> {
    let mut paths = Vec::new();
    for &id in runs {
        let data = store.run_data(id).with_context(|| format!("run {id}"))?;
        for c in data.cells.iter().filter(|c| !c.cell.probes.is_empty()) {
            let target =
                data.run.spec.get("target").and_then(|t| t.as_str()).map(|t| format!(" to {t}")).unwrap_or_default();
            paths.push(wanperf_report::site::Path {
                label: format!("run {id} cell {} ({}{target})", c.cell.index, c.cell.kind),
                probes: c.cell.probes.iter().map(|p| (c.cell.started_unix + p.sent_s, p.rtt_ms)).collect(),
            });
        }
    }
    Ok(paths)
}
