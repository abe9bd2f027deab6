//! The latency histograms: `scangate_ack_latency_seconds` (frame read →
//! ACK written) and `scangate_commit_latency_seconds` (read → final
//! decision, moved by [`Telemetry::count_decision`]).

use super::Telemetry;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::time::Duration;

/// Latency buckets in seconds (read → ACK, read → decision): 0.5 ms … 30 s.
const LATENCY_BUCKETS: [f64; 16] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0,
];

/// The two histograms.
pub(super) struct Latency {
    ack: Histogram,
    commit: Histogram,
}

impl Latency {
    /// Registered in `registry`.
    pub(super) fn register(registry: &mut Registry) -> Latency {
        let m = Latency {
            ack: Histogram::new(LATENCY_BUCKETS),
            commit: Histogram::new(LATENCY_BUCKETS),
        };
        registry.register(
            "scangate_ack_latency_seconds",
            "Frame read to ACK written (the scan is durable before)",
            m.ack.clone(),
        );
        registry.register(
            "scangate_commit_latency_seconds",
            "Scan read to its final decision (scans read during this boot)",
            m.commit.clone(),
        );
        m
    }

    /// A scan read `took_ns` ago (boot clock) got its final decision.
    pub(super) fn decided(&self, took_ns: i64) {
        self.commit.observe(took_ns.max(0) as f64 / 1e9);
    }
}

impl Telemetry {
    /// An ACK was written `took` after its frame was read.
    pub(crate) fn acked(&self, took: Duration) {
        self.inner.latency.ack.observe(took.as_secs_f64());
    }
}
