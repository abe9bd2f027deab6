//! The outbox's series, sampled from the database: undecided scans by
//! state (`scangate_outbox_undecided`) and the oldest one's age.

use super::{FloatGauge, Sampled};
use crate::model::ScanState;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The states a scan waits in.
const UNDECIDED: [ScanState; 2] = [ScanState::Pending, ScanState::Unresolved];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

/// The outbox's series.
pub(super) struct OutboxMetrics {
    undecided: Family<StateLabel, Gauge>,
    oldest_age: FloatGauge,
}

impl OutboxMetrics {
    /// Registered in `registry`, each state at zero.
    pub(super) fn register(registry: &mut Registry) -> OutboxMetrics {
        let m = OutboxMetrics {
            undecided: Family::default(),
            oldest_age: FloatGauge::default(),
        };
        registry.register(
            "scangate_outbox_undecided",
            "Scans in the outbox without a final decision, by state (sampled every interval_s)",
            m.undecided.clone(),
        );
        registry.register(
            "scangate_outbox_oldest_undecided_age_seconds",
            "Age of the oldest pending or unresolved scan (0: none; sampled)",
            m.oldest_age.clone(),
        );
        for state in UNDECIDED {
            m.gauge(state).set(0);
        }
        m
    }

    fn gauge(&self, state: ScanState) -> Gauge {
        self.undecided
            .get_or_create(&StateLabel {
                state: state.as_str(),
            })
            .clone()
    }

    /// Set them from `s`.
    pub(super) fn record(&self, s: &Sampled) {
        self.gauge(ScanState::Pending).set(s.pending);
        self.gauge(ScanState::Unresolved).set(s.unresolved);
        self.oldest_age.set(s.oldest_age_s.unwrap_or(0.0));
    }

    /// Scans pending or unresolved, as last sampled.
    pub(super) fn undecided(&self) -> i64 {
        UNDECIDED.iter().map(|s| self.gauge(*s).get()).sum()
    }
}
