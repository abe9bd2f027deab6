//! The `/metrics` endpoint's own series (`[metrics] listen`): connections
//! it closed without an answer.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::Telemetry;

/// The reasons the server closes a connection without an answer
/// (`crate::events::MetricsDrop`), each a series from the start.
const REASONS: [&str; 3] = ["room", "head_timeout", "write_timeout"];

impl Telemetry {
    /// The `/metrics` server closed a connection without an answer, for
    /// `reason` ([`crate::events::MetricsConnectionDropped`]).
    pub(crate) fn metrics_http_dropped(&self, reason: &'static str) {
        self.inner
            .metrics_http
            .dropped
            .get_or_create(&ReasonLabel { reason })
            .inc();
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

/// The endpoint's series.
pub(super) struct HttpMetrics {
    dropped: Family<ReasonLabel, Counter>,
}

impl HttpMetrics {
    /// Registered in `registry`, each reason at zero.
    pub(super) fn register(registry: &mut Registry) -> HttpMetrics {
        let dropped = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "scangate_metrics_http_dropped_connections",
            "Connections to [metrics] listen closed without an answer since start, by reason: room (a newer connection came at the bound on open connections, in all or from one peer, and this one, the oldest still waiting for its request head or else the oldest, made room), head_timeout (no complete request head within 2 s), write_timeout (the response not taken within 5 s)",
            dropped.clone(),
        );
        for reason in REASONS {
            dropped.get_or_create(&ReasonLabel { reason }).inc_by(0);
        }
        HttpMetrics { dropped }
    }
}
