//! The series of the consumers of the gateway's own ledger (`ledger
//! export --follow --consumer`, and each `[[sink]]`'s `sink.<name>`): each
//! one's cursor, entries behind it and the oldest one's age (sampled).

use super::{FloatGauge, SampledConsumer};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConsumerLabel {
    consumer: String,
}

/// The consumers' gauges, one series each.
#[derive(Default)]
pub(super) struct ConsumerGauges {
    acked_seq: Family<ConsumerLabel, Gauge>,
    behind: Family<ConsumerLabel, Gauge>,
    oldest_unacked: Family<ConsumerLabel, FloatGauge>,
}

impl ConsumerGauges {
    /// Registered in `registry` (no consumer yet).
    pub(super) fn register(registry: &mut Registry) -> ConsumerGauges {
        let g = ConsumerGauges::default();
        registry.register(
            "scangate_ledger_consumer_acked_seq",
            "Per consumer of this gateway's own ledger: its cursor, the position of the last entry it acknowledged (sampled)",
            g.acked_seq.clone(),
        );
        registry.register(
            "scangate_ledger_consumer_behind_entries",
            "Per consumer of this gateway's own ledger: entries after its cursor, not acknowledged (sampled)",
            g.behind.clone(),
        );
        registry.register(
            "scangate_ledger_consumer_oldest_unacked_age_seconds",
            "Per consumer of this gateway's own ledger: age, by capture time, of the oldest entry it has not acknowledged (0: none; sampled)",
            g.oldest_unacked.clone(),
        );
        g
    }

    /// Set them from `consumers`; a consumer gone has no series.
    pub(super) fn record(&self, consumers: &[SampledConsumer]) {
        self.acked_seq.clear();
        self.behind.clear();
        self.oldest_unacked.clear();
        for c in consumers {
            let label = ConsumerLabel {
                consumer: c.name.clone(),
            };
            self.acked_seq.get_or_create(&label).set(c.acked_seq);
            self.behind.get_or_create(&label).set(c.behind);
            self.oldest_unacked
                .get_or_create(&label)
                .set(c.oldest_unacked_s.unwrap_or(0.0));
        }
    }
}
