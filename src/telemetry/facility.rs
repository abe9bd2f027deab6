//! The facility store's series (registered only with `[redis]`): up, the
//! clock's offset and error bound, `max_clock_error_ms` as configured,
//! the facility ledger stream's length and its consumer groups' oldest
//! unacknowledged entries (sampled).

use super::{FacilitySummary, FloatGauge, Sampled};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GroupLabel {
    group: String,
}

/// The facility store's gauges.
pub(super) struct FacilityGauges {
    up: Gauge,
    clock_offset: FloatGauge,
    clock_bound: FloatGauge,
    stream_entries: Gauge,
    oldest_unacked: Family<GroupLabel, FloatGauge>,
}

impl FacilityGauges {
    /// The facility store's series, registered in `registry`, with
    /// `[redis] max_clock_error_ms` as configured.
    pub(super) fn register(registry: &mut Registry, max_clock_error_ms: u64) -> FacilityGauges {
        let max_clock_error = FloatGauge::default();
        max_clock_error.set(max_clock_error_ms as f64 / 1e3);
        registry.register(
            "scangate_facility_max_clock_error_seconds",
            "[redis] max_clock_error_ms as configured: a capture whose facility time is less certain than this waits",
            max_clock_error,
        );
        let g = FacilityGauges {
            up: Gauge::default(),
            clock_offset: FloatGauge::default(),
            clock_bound: FloatGauge::default(),
            stream_entries: Gauge::default(),
            oldest_unacked: Family::default(),
        };
        registry.register(
            "scangate_facility_ledger_stream_entries",
            "Entries in the facility ledger stream, as the claimer's last trim found them (-1: not yet)",
            g.stream_entries.clone(),
        );
        g.stream_entries.set(-1);
        registry.register(
            "scangate_facility_ledger_oldest_unacked_age_seconds",
            "Per consumer group of the facility ledger stream: age of its oldest entry not acknowledged (0: none)",
            g.oldest_unacked.clone(),
        );
        registry.register(
            "scangate_facility_up",
            "1 while the facility Redis answers the claimer (sampled)",
            g.up.clone(),
        );
        registry.register(
            "scangate_facility_clock_offset_seconds",
            "The facility Redis's clock minus this gateway's wall clock, as last measured",
            g.clock_offset.clone(),
        );
        registry.register(
            "scangate_facility_clock_error_bound_seconds",
            "The offset is within plus or minus this",
            g.clock_bound.clone(),
        );
        g
    }

    /// Set them from `s`; a consumer group gone has no series.
    pub(super) fn record(&self, s: &Sampled) {
        self.up.set(s.facility_up as i64);
        if let Some((offset_ms, bound_ms)) = s.facility_clock {
            self.clock_offset.set(offset_ms / 1e3);
            self.clock_bound.set(bound_ms / 1e3);
        }
        if let Some(stream) = &s.ledger_stream {
            self.stream_entries
                .set(stream.length.min(i64::MAX as u64) as i64);
            self.oldest_unacked.clear();
            for (group, age) in &stream.oldest_unacked_s {
                self.oldest_unacked
                    .get_or_create(&GroupLabel {
                        group: group.clone(),
                    })
                    .set(age.unwrap_or(0.0));
            }
        }
    }

    /// As last sampled.
    pub(super) fn summary(&self) -> FacilitySummary {
        FacilitySummary {
            up: self.up.get() == 1,
            offset_ms: self.clock_offset.get() * 1e3,
            bound_ms: self.clock_bound.get() * 1e3,
        }
    }
}
