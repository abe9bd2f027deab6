//! What the running daemon tells the outside: Prometheus metrics
//! (`[metrics]`: a node_exporter textfile and/or a `/metrics` endpoint, in
//! the Prometheus text format 0.0.4) and the live part of `scangate
//! status` (the status file, [`crate::status::LiveStatus`]).
//!
//! [`Telemetry`] is one shared handle, updated by the typed events of
//! [`crate::events`] (each logs and counts): the sources report a scanner's
//! connects, disconnects, reads and ACKs through it
//! ([`crate::source::ToOutbox`]); the outbox writer (embedded store) and the
//! claimer's `observe` callback (facility store) report decisions. Values
//! that live in the database (undecided scans, facility state and clock,
//! audit records, sizes) are sampled from a read-only connection every
//! `[metrics] interval_s` by [`run`], which also rewrites the textfile and,
//! every [`STATUS_EVERY`] while it changes (else every
//! [`STATUS_HEARTBEAT`]), the status file.
//!
//! `scangate_audit_last_anchor_timestamp_seconds` is set by the anchor
//! thread ([`Telemetry::anchored`]) each time it has anchored the chain head
//! outside the database or found it anchored already (every
//! [`crate::store::identity::ANCHOR_EVERY`]): a stale value means the head
//! is no longer being anchored.

pub mod http;

use crate::config::Config;
use crate::model::Decision;
use crate::model::ScanState;
use crate::shutdown::Stop;
use crate::status::{LiveScanner, LiveStatus};
use crate::store::Store;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
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
struct StateLabel {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    commit: &'static str,
    target: &'static str,
}

type FloatGauge = Gauge<f64, AtomicU64>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GroupLabel {
    group: String,
}

/// The facility store's gauges (registered only with `[redis]`).
struct FacilityGauges {
    up: Gauge,
    clock_offset: FloatGauge,
    clock_bound: FloatGauge,
    stream_entries: Gauge,
    oldest_unacked: Family<GroupLabel, FloatGauge>,
}

struct Inner {
    registry: Registry,
    scans_read: Family<ScannerLabel, Counter>,
    decisions: Family<DecisionLabels, Counter>,
    scanner_up: Family<ScannerLabel, Gauge>,
    last_read: Family<ScannerLabel, FloatGauge>,
    undecided: Family<StateLabel, Gauge>,
    oldest_age: FloatGauge,
    ack_latency: Histogram,
    commit_latency: Histogram,
    facility: Option<FacilityGauges>,
    audit_records: Counter,
    last_anchor: FloatGauge,
    database_bytes: Gauge,
    free_bytes: Gauge,
    days_left: FloatGauge,
    /// What `scangate status` shows of each scanner, by name.
    scanners: Mutex<BTreeMap<String, LiveScanner>>,
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
    /// Metrics for a gateway with this configuration: every configured
    /// scanner starts disconnected, with zero reads.
    pub fn new(cfg: &Config) -> Telemetry {
        let mut registry = Registry::default();
        let build = Family::<BuildLabels, Gauge>::default();
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
                commit: env!("SCANGATE_COMMIT"),
                target: env!("SCANGATE_TARGET"),
            })
            .set(1);
        registry.register(
            "scangate_build_info",
            "This scangate build (always 1)",
            build,
        );
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
        let facility = cfg.redis.as_ref().map(|redis| {
            let max_clock_error = FloatGauge::default();
            max_clock_error.set(redis.max_clock_error_ms as f64 / 1e3);
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
        });
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
        let mut scanners = BTreeMap::new();
        for sc in &cfg.scanners {
            zero_series(&scans_read, &scanner_up, &last_read, &decisions, &sc.name);
            scanners.insert(sc.name.clone(), LiveScanner::new(&sc.name));
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
                scanner_up,
                last_read,
                undecided,
                oldest_age,
                ack_latency,
                commit_latency,
                facility,
                audit_records,
                last_anchor,
                database_bytes,
                free_bytes,
                days_left,
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

    /// Refresh the values kept in the database from `store` (in
    /// `state_dir`).
    /// Returns the sample, for what else is judged from it.
    pub fn sample(
        &self,
        store: &Store,
        state_dir: &Path,
    ) -> Result<crate::status::StoredSample, crate::store::StoreError> {
        let i = &self.inner;
        let sample = crate::status::StoredSample::read(store, state_dir)?;
        let gauge = |state: ScanState| {
            i.undecided.get_or_create(&StateLabel {
                state: state.as_str(),
            })
        };
        gauge(ScanState::Pending).set(sample.pending);
        gauge(ScanState::Unresolved).set(sample.unresolved);
        i.oldest_age
            .set(sample.oldest_age_s(now_ms()).unwrap_or(0.0));
        let seen = i.audit_records.get();
        i.audit_records
            .inc_by(sample.audit_records.saturating_sub(seen));
        i.database_bytes.set(sample.database_bytes as i64);
        i.free_bytes.set(
            sample
                .space
                .free_bytes
                .map_or(-1, |b| b.min(i64::MAX as u64) as i64),
        );
        i.days_left.set(sample.space.days_left.unwrap_or(-1.0));
        if let Some(f) = &i.facility {
            f.up.set(sample.facility.as_ref().is_some_and(|s| s.answering) as i64);
            if let Some(c) = &sample.facility_clock {
                f.clock_offset.set(c.offset_ms / 1e3);
                f.clock_bound.set(c.bound_ms / 1e3);
            }
            if let Some(s) = &sample.ledger_stream {
                f.stream_entries.set(s.length.min(i64::MAX as u64) as i64);
                f.oldest_unacked.clear();
                for (group, _, age) in sample.ledger_groups(now_ms()) {
                    f.oldest_unacked
                        .get_or_create(&GroupLabel { group })
                        .set(age.unwrap_or(0.0));
                }
            }
        }
        Ok(sample)
    }
}

fn today() -> chrono::NaiveDate {
    chrono::Local::now().date_naive()
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

impl LiveScanner {
    /// A configured scanner before its first connect.
    fn new(name: &str) -> LiveScanner {
        LiveScanner {
            name: name.to_string(),
            device: None,
            connected: false,
            since_ms: None,
            last_read_ms: None,
            reads_today: 0,
            rejects_today: 0,
            day: today(),
        }
    }

    /// Start today's counts afresh after midnight (local time).
    fn roll_day(&mut self) {
        let day = today();
        if self.day != day {
            self.day = day;
            self.reads_today = 0;
            self.rejects_today = 0;
        }
    }
}

/// Write `contents` to `path` atomically: a temporary file in the same
/// directory (its name does not end in `.prom`, so node_exporter never reads
/// it), then a rename over `path`. The file gets the permission bits and
/// group of `like` (whoever may read that may read it), else `rw-r--r--`.
pub fn write_atomically(path: &Path, contents: &[u8], like: Option<&Path>) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".scangate-")
        .suffix(".tmp")
        .tempfile_in(dir)?;
    tmp.write_all(contents)?;
    let like = like.and_then(|p| std::fs::metadata(p).ok());
    if let Some(m) = &like
        && m.gid() != tmp.as_file().metadata()?.gid()
    {
        // Only the owner (or root) may do this; a failure keeps the
        // process's own group.
        let _ = std::os::unix::fs::fchown(tmp.as_file(), None, Some(m.gid()));
    }
    let mode = like.map_or(0o644, |m| m.permissions().mode() & 0o666);
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode))?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// What [`run`] publishes where.
pub struct Publish {
    /// The state directory (database, status file).
    pub state_dir: PathBuf,
    /// `[metrics] textfile`.
    pub textfile: Option<PathBuf>,
    /// `[metrics] interval_s`.
    pub interval: Duration,
    /// `[outbox] warn_days_left`: a WARN when the disk lasts fewer days.
    pub warn_days_left: u64,
}

/// Sample the database, rewrite the textfile every `interval` and the
/// status file every [`STATUS_EVERY`], until `stop`. Failures are logged
/// (once per kind of failure) and retried at the next tick: metrics never
/// stop the gateway.
pub async fn run(telemetry: Telemetry, publish: Publish, mut stop: Stop) {
    let Publish {
        state_dir,
        textfile,
        interval,
        warn_days_left,
    } = publish;
    // The days-left warning last logged (logged again when it clears).
    let mut warned = false;
    let mut store: Option<Store> = None;
    let mut last_error: Option<String> = None;
    let mut next_sample = tokio::time::Instant::now();
    let status_path = state_dir.join(crate::status::STATUS_FILE);
    let db = state_dir.join(crate::store::DB_FILE);
    let mut published: Option<(Vec<LiveScanner>, tokio::time::Instant)> = None;
    loop {
        let now = tokio::time::Instant::now();
        let sample_now = now >= next_sample;
        if sample_now {
            next_sample = now + interval;
        }
        let live = telemetry.live();
        let write_status = published.as_ref().is_none_or(|(scanners, at)| {
            *scanners != live.scanners || now.duration_since(*at) >= STATUS_HEARTBEAT
        });
        if write_status {
            published = Some((live.scanners.clone(), now));
        }
        let (t, dir, tf, sp, db) = (
            telemetry.clone(),
            state_dir.clone(),
            textfile.clone(),
            status_path.clone(),
            db.clone(),
        );
        let mut held = store.take();
        let joined = tokio::task::spawn_blocking(move || {
            let mut errors = Vec::new();
            let mut short = None;
            if sample_now {
                if held.is_none() {
                    match Store::open_read_only(&dir) {
                        Ok(s) => held = Some(s),
                        Err(e) => errors.push(format!("cannot read the database to sample it: {e}")),
                    }
                }
                if let Some(s) = &held {
                    match t.sample(s, &dir) {
                        Ok(sample) => {
                            short = Some(crate::status::days_left_warning(
                                &dir,
                                &sample.space,
                                warn_days_left,
                            ))
                        }
                        Err(e) => {
                            errors.push(format!("cannot sample the database: {e}"));
                            held = None;
                        }
                    }
                }
                if let Some(tf) = &tf
                    && let Err(e) = write_atomically(tf, t.encode().as_bytes(), None)
                {
                    errors.push(format!(
                        "cannot write [metrics] textfile {}: {e}. Fix: make its directory writable for the service user (Debian's is /var/lib/prometheus/node-exporter)",
                        tf.display()
                    ));
                }
            }
            let live = serde_json::to_vec(&live).expect("status serialises");
            if write_status && let Err(e) = write_atomically(&sp, &live, Some(&db)) {
                errors.push(format!("cannot write the status file {}: {e}", sp.display()));
            }
            (held, errors, short)
        })
        .await;
        match joined {
            Ok((held, errors, short)) => {
                store = held;
                match short {
                    Some(Some(w)) if !warned => {
                        crate::events::DiskSpace::Short { warning: &w }.emit();
                        warned = true;
                    }
                    Some(None) if warned => {
                        crate::events::DiskSpace::Lasts.emit();
                        warned = false;
                    }
                    _ => {}
                }
                let joined = (!errors.is_empty()).then(|| errors.join("; "));
                if joined != last_error {
                    if joined.is_some() || last_error.is_some() {
                        crate::events::PublishFailed {
                            errors: joined.as_deref(),
                        }
                        .emit();
                    }
                    last_error = joined;
                }
            }
            Err(e) => crate::events::MetricsFailed {
                step: crate::events::MetricsStep::Sampling,
                error: &e,
            }
            .emit(),
        }
        let wait =
            STATUS_EVERY.min(next_sample.saturating_duration_since(tokio::time::Instant::now()));
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.wait() => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::clock::boot_ns;
    use crate::model::Verdict;

    fn config(redis: bool) -> Config {
        let text = format!(
            "[[scanner]]\nname = \"counter-1\"\nkind = \"serial\"\npath = \"/dev/null\"\nscan_type = \"dispense\"\n{}",
            if redis {
                "[redis]\nurl = \"redis://127.0.0.1:6379/0\"\n"
            } else {
                ""
            }
        );
        Config::parse(&text, None).unwrap()
    }

    fn decision(verdict: Verdict, was: ScanState) -> Decision {
        Decision {
            scan_uuid: "u".into(),
            verdict,
            content_key: None,
            scanner: "counter-1".into(),
            read_boot_ns: Some(boot_ns()),
            was,
        }
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
        ];
        let facility = [
            "scangate_facility_up",
            "scangate_facility_clock_offset_seconds",
            "scangate_facility_clock_error_bound_seconds",
            "scangate_facility_ledger_stream_entries",
        ];
        let with = Telemetry::new(&config(true)).encode();
        let without = Telemetry::new(&config(false)).encode();
        for n in names {
            assert!(with.contains(n) && without.contains(n), "{n}:\n{with}");
        }
        for n in facility {
            assert!(with.contains(n) && !without.contains(n), "{n}");
        }
    }

    #[test]
    fn a_retried_unresolved_scan_counts_once_and_rejects_count_today() {
        let t = Telemetry::new(&config(false));
        let decided = |d: Decision| crate::events::Decided { decisions: &[d] }.emit(&t);
        t.scan_read("counter-1");
        decided(decision(
            Verdict::Unresolved { reason: "x".into() },
            ScanState::Pending,
        ));
        decided(decision(
            Verdict::Unresolved { reason: "x".into() },
            ScanState::Unresolved,
        ));
        decided(decision(Verdict::Committed, ScanState::Unresolved));
        decided(decision(
            Verdict::Rejected { reason: "x".into() },
            ScanState::Pending,
        ));
        let text = t.encode();
        let count = |d: &str| {
            text.lines()
                .find(|l| {
                    l.starts_with("scangate_decisions_total") && l.contains(&format!("\"{d}\""))
                })
                .and_then(|l| l.rsplit(' ').next())
                .map(str::to_string)
        };
        assert_eq!(count("unresolved").as_deref(), Some("1"), "{text}");
        assert_eq!(count("committed").as_deref(), Some("1"), "{text}");
        assert_eq!(count("rejected").as_deref(), Some("1"), "{text}");
        assert!(
            text.contains("scangate_commit_latency_seconds_count 2"),
            "{text}"
        );
        let live = t.live();
        assert_eq!(
            (live.scanners[0].reads_today, live.scanners[0].rejects_today),
            (1, 1)
        );
    }
}
