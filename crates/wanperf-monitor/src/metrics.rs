//! `/metrics`: central's counters in the Prometheus/OpenMetrics text format
//! (prometheus-client).

use crate::view::View;
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use wanperf_mesh::wire::Batch;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    kind: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AgentLabels {
    agent: String,
}

/// Central's metrics.
pub struct Metrics {
    registry: Registry,
    results: Family<ResultLabels, Counter>,
    batches: Counter,
    duplicates: Counter,
    /// Batches refused (unknown agent, no or bad signature, clock skew).
    pub refused: Counter,
    lag: Histogram,
    last_seen: Family<AgentLabels, Gauge<f64, AtomicU64>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers everything.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("wanperf_central");
        let results = Family::<ResultLabels, Counter>::default();
        registry.register("results", "Results stored, by kind and status", results.clone());
        let batches = Counter::default();
        registry.register("batches", "Batches acknowledged", batches.clone());
        let duplicates = Counter::default();
        registry.register("duplicates", "Results received again (retries) and not stored twice", duplicates.clone());
        let refused = Counter::default();
        registry.register(
            "refused_batches",
            "Batches refused: unknown agent, bad signature, clock skew",
            refused.clone(),
        );
        let lag = Histogram::new([0.1, 0.5, 1.0, 5.0, 10.0, 60.0, 300.0, 3600.0, 86_400.0]);
        registry.register("ingest_lag_seconds", "From a result's end to its storage", lag.clone());
        let last_seen = Family::<AgentLabels, Gauge<f64, AtomicU64>>::default();
        registry.register("agent_last_seen_seconds", "Unix time of each agent's last batch", last_seen.clone());
        Metrics { registry, results, batches, duplicates, refused, lag, last_seen }
    }

    /// A stored batch.
    pub fn batch(&self, b: &Batch, accepted: u64, now: f64) {
        self.batches.inc();
        self.duplicates.inc_by(b.results.len() as u64 - accepted.min(b.results.len() as u64));
        for r in &b.results {
            let labels = ResultLabels { kind: crate::serde_name(&r.kind), status: crate::serde_name(&r.status) };
            self.results.get_or_create(&labels).inc();
            self.lag.observe((now - r.end).max(0.0));
        }
    }

    /// The text of `/metrics`.
    pub fn render(&self, view: &View, _now: f64) -> String {
        for (agent, t) in view.last_seen() {
            self.last_seen.get_or_create(&AgentLabels { agent: agent.clone() }).set(*t);
        }
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}
