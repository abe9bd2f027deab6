//! The database's series: audit records, the last anchor of the chain
//! head, the database's size, the state directory's free space and days
//! left (sampled, the anchor set by the anchor thread).

use super::{FloatGauge, Sampled, Telemetry, now_ms};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The database's series.
#[derive(Default)]
pub(super) struct StoreMetrics {
    audit_records: Counter,
    last_anchor: FloatGauge,
    database_bytes: Gauge,
    free_bytes: Gauge,
    days_left: FloatGauge,
}

impl StoreMetrics {
    /// Registered in `registry`.
    pub(super) fn register(registry: &mut Registry) -> StoreMetrics {
        let m = StoreMetrics::default();
        registry.register(
            "scangate_audit_records",
            "Records in the hash-chained audit trail (sampled)",
            m.audit_records.clone(),
        );
        registry.register(
            "scangate_audit_last_anchor_timestamp_seconds",
            "Unix time the audit chain head was last anchored outside the database (the state-id file), or found anchored already; checked every 5 s (0: not yet)",
            m.last_anchor.clone(),
        );
        registry.register(
            "scangate_database_bytes",
            "Size of the database file and its write-ahead log",
            m.database_bytes.clone(),
        );
        registry.register(
            "scangate_state_free_bytes",
            "Free space for scangate in the state directory's file system",
            m.free_bytes.clone(),
        );
        registry.register(
            "scangate_state_days_left",
            "Days until the state directory's file system is full at the database's growth of the last 24 hours (-1: unknown or not growing)",
            m.days_left.clone(),
        );
        m
    }

    /// Set them from `s`.
    pub(super) fn record(&self, s: &Sampled) {
        let seen = self.audit_records.get();
        self.audit_records
            .inc_by(s.audit_records.saturating_sub(seen));
        self.database_bytes.set(s.database_bytes as i64);
        self.free_bytes
            .set(s.free_bytes.map_or(-1, |b| b.min(i64::MAX as u64) as i64));
        self.days_left.set(s.days_left.unwrap_or(-1.0));
    }
}

impl Telemetry {
    /// The audit chain head is anchored outside the database, as of now.
    pub fn anchored(&self) {
        self.inner.store.last_anchor.set(now_ms() as f64 / 1e3);
    }
}
