//! The publisher: what the running daemon tells the outside, every
//! `[metrics] interval_s` and every [`STATUS_EVERY`]. It samples the
//! database read-only ([`StoredSample`]) into [`Telemetry`], rewrites the
//! node_exporter textfile, and rewrites the status file while something in
//! it changes (else every [`STATUS_HEARTBEAT`]). Failures are logged once
//! per kind and retried: metrics never stop the gateway.

use crate::audit;
use crate::claimer::records;
use crate::events::{self, Event as _};
use crate::ledger::cursor::Lag;
use crate::model::{ClockSample, FacilityState, LedgerStream};
use crate::shutdown::Stop;
use crate::store::space::{Space, days_left_warning};
use crate::store::{DB_FILE, Store, StoreError};
use crate::telemetry::live::{LiveScanner, STATUS_FILE};
use crate::telemetry::{
    STATUS_EVERY, STATUS_HEARTBEAT, Sampled, SampledConsumer, SampledStream, Telemetry,
};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// What the database says, read-only (also sampled for metrics).
#[derive(Debug, Clone)]
pub struct StoredSample {
    /// Scans waiting for their first decision.
    pub pending: i64,
    /// Scans waiting for the facility store.
    pub unresolved: i64,
    /// Capture time of the oldest of them (Unix ms).
    pub oldest_ms: Option<i64>,
    /// The facility store as the claimer last saw it.
    pub facility: Option<FacilityState>,
    /// The facility clock as the claimer last measured it.
    pub facility_clock: Option<ClockSample>,
    /// Audit records (the recorded chain head's position).
    pub audit_records: u64,
    /// The recorded chain head's hash.
    pub audit_head: Option<String>,
    /// The database file and its write-ahead log.
    pub database_bytes: u64,
    /// Free space, growth and days left in the state directory.
    pub space: Space,
    /// The facility ledger stream as the claimer's last trim found it.
    pub ledger_stream: Option<LedgerStream>,
    /// The consumers of the gateway's own ledger.
    pub ledger_consumers: Vec<Lag>,
    /// The `[[sink]]`s' held batches.
    pub sink_batches: Vec<crate::sink::held::Held>,
}

impl StoredSample {
    /// Read it from `store` (in `state_dir`).
    pub fn read(store: &Store, state_dir: &Path) -> Result<StoredSample, StoreError> {
        let (pending, unresolved, oldest_ms) = store.undecided()?;
        let (facility, facility_clock) = records::state_and_clock(store)?;
        let head = audit::recorded_head(store)?;
        let size = |name: &str| std::fs::metadata(state_dir.join(name)).map_or(0, |m| m.len());
        let database_bytes = size(DB_FILE) + size(&format!("{DB_FILE}-wal"));
        let space = store.space(state_dir, chrono::Utc::now().timestamp_millis())?;
        let ledger_stream = records::ledger_stream(store)?;
        let (ledger_consumers, sink_batches) = {
            let r = store.read()?;
            let lags = crate::ledger::cursor::lags(&r).map_err(|e| store.err_at(e))?;
            let held = crate::sink::held::all(&r).map_err(|e| store.err_at(e))?;
            (lags, held)
        };
        Ok(StoredSample {
            pending,
            unresolved,
            oldest_ms,
            facility,
            facility_clock,
            audit_records: head.as_ref().map_or(0, |(n, _)| (*n).max(0) as u64),
            audit_head: head.map(|(_, h)| h),
            database_bytes,
            space,
            ledger_stream,
            ledger_consumers,
            sink_batches,
        })
    }

    /// The facility ledger stream's consumer groups at `now_ms` (this
    /// gateway's clock, put on the facility's by the last measured offset,
    /// as stream ids are the server's ms): `(group, pending, age in
    /// seconds of its oldest unacknowledged entry)`.
    pub fn ledger_groups(&self, now_ms: i64) -> Vec<(String, u64, Option<f64>)> {
        let offset = self.facility_clock.as_ref().map_or(0.0, |c| c.offset_ms);
        let facility_now = now_ms as f64 + offset;
        self.ledger_stream
            .iter()
            .flat_map(|s| &s.groups)
            .map(|g| {
                let age = g
                    .oldest_unacked_ms()
                    .map(|ms| ((facility_now - ms as f64) / 1e3).max(0.0));
                (g.name.clone(), g.pending, age)
            })
            .collect()
    }

    /// The figures the metrics show of it at `now_ms`.
    pub fn figures(&self, now_ms: i64) -> Sampled {
        Sampled {
            pending: self.pending,
            unresolved: self.unresolved,
            oldest_age_s: self.oldest_age_s(now_ms),
            audit_records: self.audit_records,
            database_bytes: self.database_bytes,
            free_bytes: self.space.free_bytes,
            days_left: self.space.days_left,
            facility_up: self.facility.as_ref().is_some_and(|s| s.answering),
            facility_clock: self
                .facility_clock
                .as_ref()
                .map(|c| (c.offset_ms, c.bound_ms)),
            ledger_stream: self.ledger_stream.as_ref().map(|s| SampledStream {
                length: s.length,
                oldest_unacked_s: self
                    .ledger_groups(now_ms)
                    .into_iter()
                    .map(|(group, _, age)| (group, age))
                    .collect(),
            }),
            ledger_consumers: self
                .ledger_consumers
                .iter()
                .map(|c| SampledConsumer {
                    name: c.name.clone(),
                    acked_seq: c.acked_seq,
                    behind: c.behind,
                    oldest_unacked_s: c.oldest_unacked_ms.map(|ms| age_s(now_ms, ms)),
                })
                .collect(),
        }
    }

    /// Age of the oldest undecided scan at `now_ms`, in seconds.
    pub fn oldest_age_s(&self, now_ms: i64) -> Option<f64> {
        self.oldest_ms.map(|ms| age_s(now_ms, ms))
    }
}

/// Seconds from `ms` to `now_ms` (0 if later).
pub fn age_s(now_ms: i64, ms: i64) -> f64 {
    (now_ms - ms).max(0) as f64 / 1e3
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
    let status_path = state_dir.join(STATUS_FILE);
    let db = state_dir.join(DB_FILE);
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
                    match StoredSample::read(s, &dir) {
                        Ok(sample) => {
                            t.record(&sample.figures(now_ms()));
                            short = Some(days_left_warning(
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
                        events::DiskSpace::Short { warning: &w }.emit();
                        warned = true;
                    }
                    Some(None) if warned => {
                        events::DiskSpace::Lasts.emit();
                        warned = false;
                    }
                    _ => {}
                }
                let joined = (!errors.is_empty()).then(|| errors.join("; "));
                if joined != last_error {
                    if joined.is_some() || last_error.is_some() {
                        events::PublishFailed {
                            errors: joined.as_deref(),
                        }
                        .emit();
                    }
                    last_error = joined;
                }
            }
            Err(e) => events::MetricsFailed {
                step: events::MetricsStep::Sampling,
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

/// Start publishing beside the stages, not as stages (their failures are
/// logged and retried, never a reason to stop reading scans): the
/// sampler/status-file task and, with `[metrics] listen`, the `/metrics`
/// server on `listener` (warned of when that is not a loopback address).
/// Both end on `stop`.
pub(super) fn start(
    cfg: &crate::config::Config,
    telemetry: &Telemetry,
    listener: Option<tokio::net::TcpListener>,
    stop: &Stop,
) -> Vec<tokio::task::JoinHandle<()>> {
    let publish = Publish {
        state_dir: cfg.state_dir(),
        textfile: cfg.metrics.textfile.clone(),
        interval: Duration::from_secs(cfg.metrics.interval_s),
        warn_days_left: cfg.outbox.warn_days_left,
    };
    // What the scanners were when it last ran, read before this run's
    // first status file replaces it.
    if let Some(last) = crate::telemetry::live::LiveStatus::left_in(&publish.state_dir) {
        telemetry.remember_last_run(&last);
    }
    let mut tasks = vec![tokio::spawn(run(telemetry.clone(), publish, stop.clone()))];
    tasks.extend(super::tap::start(
        &cfg.state_dir(),
        telemetry,
        &cfg.gateway.id,
        stop,
    ));
    // `[metrics] listen` cannot change at a reload: told at start only.
    if let (Some(listen), Some(warning)) = (cfg.metrics.listen, cfg.metrics.exposure_warning()) {
        events::MetricsExposed {
            listen,
            warning: &warning,
        }
        .emit();
    }
    if let Some(listener) = listener {
        tasks.push(tokio::spawn(super::metrics_http::serve(
            listener,
            telemetry.clone(),
            stop.clone(),
        )));
    }
    tasks
}

/// Wait for the publishing tasks (the stop token is set); one that failed
/// is logged.
pub(super) async fn finish(tasks: Vec<tokio::task::JoinHandle<()>>) {
    for task in tasks {
        if let Err(e) = task.await {
            events::StageFailed::PublisherFailed { error: &e }.emit();
        }
    }
}
