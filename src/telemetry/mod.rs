//! What the running daemon counts and tells the outside: the Prometheus
//! metrics and the live part of `scangate status` ([`live::LiveStatus`]).
//! A leaf: it imports no pipeline stage, only the shared vocabulary.
//!
//! [`Telemetry`] is one shared handle, updated by the typed events of
//! [`crate::events`] (each logs and counts): the sources report a
//! scanner's connects, disconnects, reads and ACKs; the outbox writer
//! (embedded store) and the claimer (facility store) report decisions.
//! Values that live in the database (undecided scans, facility state and
//! clock, audit records, sizes) are sampled by the daemon's publisher
//! every `[metrics] interval_s` and set here ([`Telemetry::record`]); the
//! publisher also writes the textfile and the status file, and the
//! `/metrics` endpoint serves [`Telemetry::encode`].
//!
//! `scangate_audit_last_anchor_timestamp_seconds` is set by the anchor
//! thread ([`Telemetry::anchored`]) each time it has anchored the chain
//! head outside the database or found it anchored already: a stale value
//! means the head is no longer being anchored.
//!
//! One file per component, each with its series: a struct of them,
//! `register(&mut Registry) -> Self`, and the `impl Telemetry` methods
//! (the events' calls) that move them. [`Telemetry::new`] registers the
//! components in the order of the exposition, which scrapers see: keep
//! it. A new series goes into its component's `register` (after the
//! others); a new component is a `mod`, a field of `Inner` and its
//! `register` in `new`, each last.

mod build;
mod config;
mod consumers;
mod facility;
mod latency;
pub mod live;
mod metrics_http;
mod outbox;
mod scanners;
mod sink;
mod store;
pub mod tap;

use live::LiveStatus;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// How often the status file is rewritten while something in it changes
/// (a connect, a read).
pub const STATUS_EVERY: Duration = Duration::from_secs(2);
/// How often it is rewritten while nothing changes (on an SD card an idle
/// gateway should not write every 2 s).
pub const STATUS_HEARTBEAT: Duration = Duration::from_secs(30);

type FloatGauge = Gauge<f64, AtomicU64>;

/// Each component's series, in the order registered, and the registry.
struct Inner {
    scanners: scanners::ScannerMetrics,
    outbox: outbox::OutboxMetrics,
    latency: latency::Latency,
    facility: Option<facility::FacilityGauges>,
    consumers: consumers::ConsumerGauges,
    sinks: sink::SinkMetrics,
    store: store::StoreMetrics,
    metrics_http: metrics_http::HttpMetrics,
    config: config::ConfigMetrics,
    tap: tap::TapHub,
    registry: Registry,
    started_ms: i64,
}

/// The daemon's shared metrics and live status (cheap to clone).
#[derive(Clone)]
pub struct Telemetry {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry").finish_non_exhaustive()
    }
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

impl Telemetry {
    /// Metrics for a gateway with these scanners (each starts
    /// disconnected, with zero reads) and, with a facility store, its
    /// `[redis] max_clock_error_ms` (the facility series are registered
    /// only then).
    pub fn new(
        scanners_configured: &[String],
        facility_max_clock_error_ms: Option<u64>,
    ) -> Telemetry {
        let mut r = Registry::default();
        build::register(&mut r);
        // Registered in the order written: the exposition's.
        let inner = Inner {
            scanners: scanners::ScannerMetrics::register(&mut r, scanners_configured),
            outbox: outbox::OutboxMetrics::register(&mut r),
            latency: latency::Latency::register(&mut r),
            facility: facility_max_clock_error_ms.map(|max_clock_error_ms| {
                facility::FacilityGauges::register(&mut r, max_clock_error_ms)
            }),
            consumers: consumers::ConsumerGauges::register(&mut r),
            sinks: sink::SinkMetrics::register(&mut r),
            store: store::StoreMetrics::register(&mut r),
            metrics_http: metrics_http::HttpMetrics::register(&mut r),
            config: config::ConfigMetrics::register(&mut r),
            tap: tap::TapHub::register(&mut r),
            registry: r,
            started_ms: now_ms(),
        };
        Telemetry {
            inner: Arc::new(inner),
        }
    }

    /// The metrics in the Prometheus text format (0.0.4).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut out, &self.inner.registry)
            .expect("writing to a String does not fail");
        out
    }

    /// The few figures of systemd's one-line status: scanners connected
    /// and configured (now), undecided scans and the facility store as last
    /// sampled from the database (every `[metrics] interval_s`).
    pub fn summary(&self) -> Summary {
        let i = &self.inner;
        let (scanners_up, scanners) = i.scanners.counts();
        Summary {
            scanners_up,
            scanners,
            undecided: i.outbox.undecided(),
            facility: i.facility.as_ref().map(|f| f.summary()),
        }
    }

    /// The live part of `scangate status`, as of now.
    pub fn live(&self) -> LiveStatus {
        LiveStatus {
            written_ms: now_ms(),
            pid: std::process::id(),
            started_ms: self.inner.started_ms,
            every_ms: STATUS_HEARTBEAT.as_millis() as i64,
            version: Some(crate::build::VERSION.to_string()),
            commit: Some(crate::build::COMMIT.to_string()),
            scanners: self.inner.scanners.live(),
        }
    }

    /// Set the values sampled from the database.
    pub fn record(&self, s: &Sampled) {
        let i = &self.inner;
        i.outbox.record(s);
        i.store.record(s);
        i.consumers.record(&s.ledger_consumers);
        if let Some(f) = &i.facility {
            f.record(s);
        }
    }
}

/// The values sampled from the database every `[metrics] interval_s`
/// ([`Telemetry::record`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sampled {
    /// Scans waiting for their first decision.
    pub pending: i64,
    /// Scans waiting for the facility store.
    pub unresolved: i64,
    /// Age of the oldest of them, in seconds.
    pub oldest_age_s: Option<f64>,
    /// Audit records (the chain head's position).
    pub audit_records: u64,
    /// The database file and its write-ahead log.
    pub database_bytes: u64,
    /// Free space for scangate in the state directory's file system.
    pub free_bytes: Option<u64>,
    /// Days until that file system is full at the last day's growth.
    pub days_left: Option<f64>,
    /// The facility store answered the claimer, as it last recorded.
    pub facility_up: bool,
    /// The facility clock's offset and its error bound (ms), as last measured.
    pub facility_clock: Option<(f64, f64)>,
    /// The facility ledger stream as the last trim found it.
    pub ledger_stream: Option<SampledStream>,
    /// The consumers of the gateway's own ledger.
    pub ledger_consumers: Vec<SampledConsumer>,
}

/// A consumer of the gateway's own ledger in [`Sampled`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SampledConsumer {
    /// Its name.
    pub name: String,
    /// Its cursor: the last entry it acknowledged.
    pub acked_seq: i64,
    /// Entries after it.
    pub behind: i64,
    /// Age (s, by capture time) of the oldest of them.
    pub oldest_unacked_s: Option<f64>,
}

/// The facility ledger stream in [`Sampled`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SampledStream {
    /// Entries in it.
    pub length: u64,
    /// Per consumer group, the age (s) of its oldest unacknowledged entry.
    pub oldest_unacked_s: Vec<(String, Option<f64>)>,
}

/// What [`Telemetry::summary`] reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Scanners with their device open.
    pub scanners_up: usize,
    /// Scanners configured.
    pub scanners: usize,
    /// Scans pending or unresolved (as last sampled).
    pub undecided: i64,
    /// With `[redis]`: the facility store as last sampled.
    pub facility: Option<FacilitySummary>,
}

/// The facility store in a [`Summary`].
#[derive(Debug, Clone, PartialEq)]
pub struct FacilitySummary {
    /// It answered the claimer.
    pub up: bool,
    /// This gateway's clock offset to it (ms).
    pub offset_ms: f64,
    /// The offset's error bound (ms).
    pub bound_ms: f64,
}

#[cfg(test)]
mod tests;
