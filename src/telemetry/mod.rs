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

mod build;
pub mod live;
mod metrics_http;
mod sink;

use crate::model::{Decision, ScanState};
use live::{LiveScanner, LiveStatus};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often the status file is rewritten while something in it changes
/// (a connect, a read).
pub const STATUS_EVERY: Duration = Duration::from_secs(2);
/// How often it is rewritten while nothing changes (on an SD card an idle
/// gateway should not write every 2 s).
pub const STATUS_HEARTBEAT: Duration = Duration::from_secs(30);

/// Latency buckets in seconds (read → ACK, read → decision): 0.5 ms … 30 s.
const LATENCY_BUCKETS: [f64; 16] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ScannerLabel {
    scanner: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    scanner: String,
    decision: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FeedbackLabels {
    scanner: String,
    told: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

type FloatGauge = Gauge<f64, AtomicU64>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GroupLabel {
    group: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConsumerLabel {
    consumer: String,
}

/// The gauges of the consumers of the gateway's own ledger
/// (`ledger export --follow --consumer`), one series each.
#[derive(Default)]
struct ConsumerGauges {
    acked_seq: Family<ConsumerLabel, Gauge>,
    behind: Family<ConsumerLabel, Gauge>,
    oldest_unacked: Family<ConsumerLabel, FloatGauge>,
}

impl ConsumerGauges {
    fn register(registry: &mut Registry) -> ConsumerGauges {
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
    fn set(&self, consumers: &[SampledConsumer]) {
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

/// The facility store's gauges (registered only with `[redis]`).
struct FacilityGauges {
    up: Gauge,
    clock_offset: FloatGauge,
    clock_bound: FloatGauge,
    stream_entries: Gauge,
    oldest_unacked: Family<GroupLabel, FloatGauge>,
}

impl FacilityGauges {
    /// The facility store's series, registered in `registry`, with
    /// `[redis] max_clock_error_ms` as configured.
    fn register(registry: &mut Registry, max_clock_error_ms: u64) -> FacilityGauges {
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
}

struct Inner {
    registry: Registry,
    scans_read: Family<ScannerLabel, Counter>,
    decisions: Family<DecisionLabels, Counter>,
    ambiguous: Family<ScannerLabel, Counter>,
    feedback: Family<FeedbackLabels, Counter>,
    scanner_up: Family<ScannerLabel, Gauge>,
    last_read: Family<ScannerLabel, FloatGauge>,
    undecided: Family<StateLabel, Gauge>,
    oldest_age: FloatGauge,
    ack_latency: Histogram,
    commit_latency: Histogram,
    facility: Option<FacilityGauges>,
    consumers: ConsumerGauges,
    sinks: sink::SinkMetrics,
    audit_records: Counter,
    last_anchor: FloatGauge,
    database_bytes: Gauge,
    free_bytes: Gauge,
    days_left: FloatGauge,
    metrics_http: metrics_http::HttpMetrics,
    /// What `scangate status` shows of each scanner, by name.
    scanners: Mutex<BTreeMap<String, LiveScanner>>,
    started_ms: i64,
}

/// An ambiguous echo decided this soon after its read (ns) counts towards
/// a burst in `status`.
const AMBIGUOUS_LIVE_NS: i64 = 60_000_000_000;

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
        let mut registry = Registry::default();
        build::register(&mut registry);
        let scans_read = Family::<ScannerLabel, Counter>::default();
        registry.register(
            "scangate_scans_read",
            "Scans read per scanner since start (each is made durable, then ACKed)",
            scans_read.clone(),
        );
        let decisions = Family::<DecisionLabels, Counter>::default();
        registry.register(
            "scangate_decisions",
            "Decisions since start per scanner: committed, suppressed, rejected, or unresolved (a scan left waiting for the facility store, counted once however often it is retried)",
            decisions.clone(),
        );
        let ambiguous = Family::<ScannerLabel, Counter>::default();
        registry.register(
            "scangate_ambiguous_echoes",
            "Echoes per scanner since start of a label without a serial (counted in the suppressed decisions too): another identical item, a re-scan and a double-fire read alike, so each may be an under-count. A burst on one scanner: someone may be counting identical items",
            ambiguous.clone(),
        );
        let feedback = Family::<FeedbackLabels, Counter>::default();
        registry.register(
            "scangate_feedback",
            "Signals to scanners and the gateway LED since start, per scanner, what was told and the outcome: sent; skipped (the decision came later than the scanner's feedback max_delay_ms after the read); or failed (the device refused the write)",
            feedback.clone(),
        );
        let scanner_up = Family::<ScannerLabel, Gauge>::default();
        registry.register(
            "scangate_scanner_up",
            "1 while the scanner's device is open",
            scanner_up.clone(),
        );
        let last_read = Family::<ScannerLabel, FloatGauge>::default();
        registry.register(
            "scangate_scanner_last_read_timestamp_seconds",
            "Unix time of the scanner's last read since start (0: none yet)",
            last_read.clone(),
        );
        let undecided = Family::<StateLabel, Gauge>::default();
        registry.register(
            "scangate_outbox_undecided",
            "Scans in the outbox without a final decision, by state (sampled every interval_s)",
            undecided.clone(),
        );
        let oldest_age = FloatGauge::default();
        registry.register(
            "scangate_outbox_oldest_undecided_age_seconds",
            "Age of the oldest pending or unresolved scan (0: none; sampled)",
            oldest_age.clone(),
        );
        let ack_latency = Histogram::new(LATENCY_BUCKETS);
        registry.register(
            "scangate_ack_latency_seconds",
            "Frame read to ACK written (the scan is durable before)",
            ack_latency.clone(),
        );
        let commit_latency = Histogram::new(LATENCY_BUCKETS);
        registry.register(
            "scangate_commit_latency_seconds",
            "Scan read to its final decision (scans read during this boot)",
            commit_latency.clone(),
        );
        let facility = facility_max_clock_error_ms
            .map(|max_clock_error_ms| FacilityGauges::register(&mut registry, max_clock_error_ms));
        let consumers = ConsumerGauges::register(&mut registry);
        let sinks = sink::SinkMetrics::register(&mut registry);
        let audit_records = Counter::default();
        registry.register(
            "scangate_audit_records",
            "Records in the hash-chained audit trail (sampled)",
            audit_records.clone(),
        );
        let last_anchor = FloatGauge::default();
        registry.register(
            "scangate_audit_last_anchor_timestamp_seconds",
            "Unix time the audit chain head was last anchored outside the database (the state-id file), or found anchored already; checked every 5 s (0: not yet)",
            last_anchor.clone(),
        );
        let database_bytes = Gauge::default();
        registry.register(
            "scangate_database_bytes",
            "Size of the database file and its write-ahead log",
            database_bytes.clone(),
        );
        let free_bytes = Gauge::default();
        registry.register(
            "scangate_state_free_bytes",
            "Free space for scangate in the state directory's file system",
            free_bytes.clone(),
        );
        let days_left = FloatGauge::default();
        registry.register(
            "scangate_state_days_left",
            "Days until the state directory's file system is full at the database's growth of the last 24 hours (-1: unknown or not growing)",
            days_left.clone(),
        );
        let metrics_http = metrics_http::HttpMetrics::register(&mut registry);
        let mut scanners = BTreeMap::new();
        for name in scanners_configured {
            zero_series(&scans_read, &scanner_up, &last_read, &decisions, name);
            ambiguous.get_or_create(&Self::label(name)).inc_by(0);
            scanners.insert(name.clone(), LiveScanner::new(name));
        }
        for state in [ScanState::Pending, ScanState::Unresolved] {
            undecided
                .get_or_create(&StateLabel {
                    state: state.as_str(),
                })
                .set(0);
        }
        Telemetry {
            inner: Arc::new(Inner {
                registry,
                scans_read,
                decisions,
                ambiguous,
                feedback,
                scanner_up,
                last_read,
                undecided,
                oldest_age,
                ack_latency,
                commit_latency,
                facility,
                consumers,
                sinks,
                audit_records,
                last_anchor,
                database_bytes,
                free_bytes,
                days_left,
                metrics_http,
                scanners: Mutex::new(scanners),
                started_ms: now_ms(),
            }),
        }
    }

    /// The metrics in the Prometheus text format (0.0.4).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut out, &self.inner.registry)
            .expect("writing to a String does not fail");
        out
    }

    /// The configured scanners changed (a reload): a new one starts
    /// disconnected with zero reads, a removed one's series are gone.
    pub fn set_scanners(&self, names: &[String]) {
        let i = &self.inner;
        let mut scanners = i.scanners.lock().unwrap_or_else(|p| p.into_inner());
        for gone in scanners
            .keys()
            .filter(|n| !names.contains(n))
            .cloned()
            .collect::<Vec<_>>()
        {
            let label = Self::label(&gone);
            i.scans_read.remove(&label);
            i.scanner_up.remove(&label);
            i.last_read.remove(&label);
            i.ambiguous.remove(&label);
            for decision in ScanState::ALL {
                i.decisions.remove(&DecisionLabels {
                    scanner: gone.clone(),
                    decision: decision.as_str(),
                });
            }
            scanners.remove(&gone);
        }
        for name in names {
            if !scanners.contains_key(name) {
                zero_series(
                    &i.scans_read,
                    &i.scanner_up,
                    &i.last_read,
                    &i.decisions,
                    name,
                );
                i.ambiguous.get_or_create(&Self::label(name)).inc_by(0);
                scanners.insert(name.clone(), LiveScanner::new(name));
            }
        }
    }

    /// The few figures of systemd's one-line status: scanners connected
    /// and configured (now), undecided scans and the facility store as last
    /// sampled from the database (every `[metrics] interval_s`).
    pub fn summary(&self) -> Summary {
        let i = &self.inner;
        let (up, configured) = {
            let scanners = i.scanners.lock().unwrap_or_else(|p| p.into_inner());
            (
                scanners.values().filter(|s| s.connected).count(),
                scanners.len(),
            )
        };
        let undecided = [ScanState::Pending, ScanState::Unresolved]
            .iter()
            .map(|s| {
                i.undecided
                    .get_or_create(&StateLabel { state: s.as_str() })
                    .get()
            })
            .sum();
        Summary {
            scanners_up: up,
            scanners: configured,
            undecided,
            facility: i.facility.as_ref().map(|f| FacilitySummary {
                up: f.up.get() == 1,
                offset_ms: f.clock_offset.get() * 1e3,
                bound_ms: f.clock_bound.get() * 1e3,
            }),
        }
    }

    fn with_scanner(&self, name: &str, f: impl FnOnce(&mut LiveScanner)) {
        let mut scanners = self
            .inner
            .scanners
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(s) = scanners.get_mut(name) {
            s.roll_day();
            f(s);
        }
    }

    fn label(name: &str) -> ScannerLabel {
        ScannerLabel {
            scanner: name.to_string(),
        }
    }

    /// Scanner `name` opened `device`.
    pub(crate) fn scanner_connected(&self, name: &str, device: &str) {
        self.inner
            .scanner_up
            .get_or_create(&Self::label(name))
            .set(1);
        self.with_scanner(name, |s| {
            s.connected = true;
            s.device = Some(device.to_string());
            s.since_ms = Some(now_ms());
        });
    }

    /// Scanner `name` went away (or stopped).
    pub(crate) fn scanner_disconnected(&self, name: &str) {
        self.inner
            .scanner_up
            .get_or_create(&Self::label(name))
            .set(0);
        self.with_scanner(name, |s| {
            s.connected = false;
            s.since_ms = Some(now_ms());
        });
    }

    /// Scanner `name` read a scan (before it is durable).
    /// A signal to scanner `name` (`told`) was `outcome` (`sent`, `skipped`).
    pub(crate) fn feedback(&self, name: &str, told: &'static str, outcome: &'static str) {
        self.inner
            .feedback
            .get_or_create(&FeedbackLabels {
                scanner: name.to_string(),
                told,
                outcome,
            })
            .inc();
    }

    pub(crate) fn scan_read(&self, name: &str) {
        let label = Self::label(name);
        let now = now_ms();
        self.inner.scans_read.get_or_create(&label).inc();
        self.inner
            .last_read
            .get_or_create(&label)
            .set(now as f64 / 1e3);
        self.with_scanner(name, |s| {
            s.last_read_ms = Some(now);
            s.reads_today += 1;
        });
    }

    /// The audit chain head is anchored outside the database, as of now.
    pub fn anchored(&self) {
        self.inner.last_anchor.set(now_ms() as f64 / 1e3);
    }

    /// An ACK was written `took` after its frame was read.
    pub(crate) fn acked(&self, took: Duration) {
        self.inner.ack_latency.observe(took.as_secs_f64());
    }

    /// Count one decision ([`crate::events::Decided`]), made at `now` on
    /// the boot clock.
    pub(crate) fn count_decision(&self, d: &Decision, now: i64) {
        let state = d.verdict.state();
        // A scan left unresolved again (a retry) is counted once.
        if state == ScanState::Pending
            || (state == ScanState::Unresolved && d.was == ScanState::Unresolved)
        {
            return;
        }
        self.inner
            .decisions
            .get_or_create(&DecisionLabels {
                scanner: d.scanner.clone(),
                decision: state.as_str(),
            })
            .inc();
        if state.is_final()
            && let Some(read) = d.read_boot_ns
        {
            self.inner
                .commit_latency
                .observe((now - read).max(0) as f64 / 1e9);
        }
        if state == ScanState::Rejected {
            self.with_scanner(&d.scanner, |s| s.rejects_today += 1);
        }
        if d.ambiguous {
            self.inner
                .ambiguous
                .get_or_create(&Self::label(&d.scanner))
                .inc();
            // A burst is people at a counter now: not an outage's replay.
            let live = d
                .read_boot_ns
                .is_some_and(|read| now - read < AMBIGUOUS_LIVE_NS);
            self.with_scanner(&d.scanner, |s| s.ambiguous(now_ms(), live));
        }
    }

    /// The live part of `scangate status`, as of now.
    pub fn live(&self) -> LiveStatus {
        let scanners = self
            .inner
            .scanners
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        LiveStatus {
            written_ms: now_ms(),
            pid: std::process::id(),
            started_ms: self.inner.started_ms,
            every_ms: STATUS_HEARTBEAT.as_millis() as i64,
            version: Some(crate::build::VERSION.to_string()),
            commit: Some(crate::build::COMMIT.to_string()),
            scanners: scanners
                .values()
                .cloned()
                .map(|mut s| {
                    s.roll_day();
                    s
                })
                .collect(),
        }
    }

    /// Set the values sampled from the database.
    pub fn record(&self, s: &Sampled) {
        let i = &self.inner;
        let gauge = |state: ScanState| {
            i.undecided.get_or_create(&StateLabel {
                state: state.as_str(),
            })
        };
        gauge(ScanState::Pending).set(s.pending);
        gauge(ScanState::Unresolved).set(s.unresolved);
        i.oldest_age.set(s.oldest_age_s.unwrap_or(0.0));
        let seen = i.audit_records.get();
        i.audit_records.inc_by(s.audit_records.saturating_sub(seen));
        i.database_bytes.set(s.database_bytes as i64);
        i.free_bytes
            .set(s.free_bytes.map_or(-1, |b| b.min(i64::MAX as u64) as i64));
        i.days_left.set(s.days_left.unwrap_or(-1.0));
        i.consumers.set(&s.ledger_consumers);
        if let Some(f) = &i.facility {
            f.up.set(s.facility_up as i64);
            if let Some((offset_ms, bound_ms)) = s.facility_clock {
                f.clock_offset.set(offset_ms / 1e3);
                f.clock_bound.set(bound_ms / 1e3);
            }
            if let Some(stream) = &s.ledger_stream {
                f.stream_entries
                    .set(stream.length.min(i64::MAX as u64) as i64);
                f.oldest_unacked.clear();
                for (group, age) in &stream.oldest_unacked_s {
                    f.oldest_unacked
                        .get_or_create(&GroupLabel {
                            group: group.clone(),
                        })
                        .set(age.unwrap_or(0.0));
                }
            }
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

/// A scanner's series, at zero (configured, never read).
fn zero_series(
    scans_read: &Family<ScannerLabel, Counter>,
    scanner_up: &Family<ScannerLabel, Gauge>,
    last_read: &Family<ScannerLabel, FloatGauge>,
    decisions: &Family<DecisionLabels, Counter>,
    name: &str,
) {
    let label = ScannerLabel {
        scanner: name.to_string(),
    };
    scans_read.get_or_create(&label).inc_by(0);
    scanner_up.get_or_create(&label).set(0);
    last_read.get_or_create(&label).set(0.0);
    for decision in ScanState::ALL.iter().filter(|s| **s != ScanState::Pending) {
        decisions
            .get_or_create(&DecisionLabels {
                scanner: name.to_string(),
                decision: decision.as_str(),
            })
            .inc_by(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn telemetry(redis: bool) -> Telemetry {
        Telemetry::new(&["counter-1".to_string()], redis.then_some(500))
    }

    #[test]
    fn every_documented_series_is_exported_the_facility_ones_only_with_redis() {
        let names = [
            "scangate_build_info{",
            "scangate_scans_read_total{scanner=\"counter-1\"} 0",
            "scangate_decisions_total{scanner=\"counter-1\",decision=\"unresolved\"} 0",
            "scangate_scanner_up{scanner=\"counter-1\"} 0",
            "scangate_scanner_last_read_timestamp_seconds{scanner=\"counter-1\"}",
            "scangate_outbox_undecided{state=\"pending\"}",
            "scangate_outbox_oldest_undecided_age_seconds",
            "scangate_ack_latency_seconds_bucket{",
            "scangate_commit_latency_seconds_count",
            "scangate_audit_records_total",
            "scangate_database_bytes",
            "scangate_state_free_bytes",
            "scangate_state_days_left",
            "scangate_metrics_http_dropped_connections_total{reason=\"room\"} 0",
        ];
        let facility = [
            "scangate_facility_up",
            "scangate_facility_clock_offset_seconds",
            "scangate_facility_clock_error_bound_seconds",
            "scangate_facility_ledger_stream_entries",
        ];
        let with = telemetry(true).encode();
        let without = telemetry(false).encode();
        for n in names {
            assert!(with.contains(n) && without.contains(n), "{n}:\n{with}");
        }
        for n in facility {
            assert!(with.contains(n) && !without.contains(n), "{n}");
        }
    }
}
