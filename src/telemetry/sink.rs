//! The HTTP sinks' series (`[[sink]]`): entries delivered, failed
//! attempts by kind, and whether a sink is blocked. Their lag is the
//! ledger consumer series of `sink.<name>`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::Telemetry;

impl Telemetry {
    /// The configured `[[sink]]`s: a series of each at zero.
    pub fn set_sinks(&self, names: &[String]) {
        for name in names {
            let label = SinkLabel { sink: name.clone() };
            let m = &self.inner.sinks;
            m.delivered.get_or_create(&label).inc_by(0);
            m.blocked.get_or_create(&label).set(0);
        }
    }

    /// `entries` delivered by sink `sink` ([`crate::events::SinkEvent`]).
    pub(crate) fn sink_delivered(&self, sink: &str, entries: u64) {
        self.inner.sinks.delivered(sink, entries);
    }

    /// A failed attempt of sink `sink`; `blocked`: a retry will not mend it.
    pub(crate) fn sink_failure(&self, sink: &str, kind: &str, blocked: bool) {
        self.inner.sinks.failure(sink, kind, blocked);
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SinkLabel {
    sink: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailureLabels {
    sink: String,
    kind: String,
}

/// The sinks' series.
#[derive(Default)]
pub(super) struct SinkMetrics {
    delivered: Family<SinkLabel, Counter>,
    failures: Family<FailureLabels, Counter>,
    blocked: Family<SinkLabel, Gauge>,
}

impl SinkMetrics {
    /// Registered in `registry` (no sink yet: [`Telemetry::set_sinks`]).
    pub(super) fn register(registry: &mut Registry) -> SinkMetrics {
        let m = SinkMetrics::default();
        registry.register(
            "scangate_sink_delivered_entries",
            "Per [[sink]]: ledger entries its receiver took (2xx) since start; an entry sent again after a failure counts again",
            m.delivered.clone(),
        );
        registry.register(
            "scangate_sink_failures",
            "Per [[sink]] and kind (connect, timeout, tls, status_5xx, status_408, status_409, status_425, status_429, status_4xx, status_3xx, ca_file, epcis, database, io): failed attempts since start",
            m.failures.clone(),
        );
        registry.register(
            "scangate_sink_blocked",
            "Per [[sink]]: 1 while its receiver refuses its held batch in a way a retry will not change (a 4xx, a 3xx): kept, not dropped, until an operator acts",
            m.blocked.clone(),
        );
        m
    }

    /// `entries` delivered by sink `sink`: it is not blocked.
    pub(super) fn delivered(&self, sink: &str, entries: u64) {
        let label = SinkLabel { sink: sink.into() };
        self.delivered.get_or_create(&label).inc_by(entries);
        self.blocked.get_or_create(&label).set(0);
    }

    /// A failed attempt of sink `sink`, of `kind`; `blocked`: a retry will
    /// not change it.
    pub(super) fn failure(&self, sink: &str, kind: &str, blocked: bool) {
        self.failures
            .get_or_create(&FailureLabels {
                sink: sink.into(),
                kind: kind.into(),
            })
            .inc();
        self.blocked
            .get_or_create(&SinkLabel { sink: sink.into() })
            .set(i64::from(blocked));
    }
}
