//! `scangate status [--json]`: the gateway's health at one glance, for a
//! technician and for a monitor (exit 0 healthy, 1 degraded with every
//! reason listed).
//!
//! What only the running daemon knows — which scanner is connected to which
//! device, the reads and rejects of today — it publishes in the status file
//! ([`STATUS_FILE`] in the state directory, [`LiveStatus`]), rewritten
//! atomically every [`crate::telemetry::STATUS_EVERY`] while it changes and
//! every [`crate::telemetry::STATUS_HEARTBEAT`] while not. A state directory
//! whose lock nobody holds, or a file older than [`STALE_AFTER_MS`], means
//! the daemon is not running. Everything else is read from the database, read-only: the
//! command never writes, and works for any member of the service's group
//! with read access, daemon running or stopped.

use super::{Failure, load};
use crate::cli::args::ConfigArg;
use crate::config::{Config, ScannerKind};
use crate::daemon::publish::StoredSample;
use crate::exit::Exit;
use crate::store::space::{Floor, MIB, Space, days_left_warning, mib};
use crate::store::{Store, StoreError};
use crate::telemetry::live::{LiveStatus, STATUS_FILE};
use serde::Serialize;
use std::path::Path;

mod data;
mod sinks;
pub use data::DataView;
pub use sinks::SinkView;

/// A status file older than this (three heartbeats) means the daemon is
/// not running, or hangs.
pub const STALE_AFTER_MS: i64 = 3 * crate::telemetry::STATUS_HEARTBEAT.as_millis() as i64;
/// Less free space than this in the state directory's file system (or
/// twice `[outbox] min_free_mb`, if more) is a degraded gateway.
pub const LOW_FREE_BYTES: u64 = 100 * 1024 * 1024;
/// A burst of ambiguous echoes on a scanner shows this long (ms).
const AMBIGUOUS_SHOWN_MS: i64 = 10 * 60_000;

/// An undecided scan older than this (seconds) is a degraded gateway.
pub const OLD_UNDECIDED_S: f64 = 60.0;

/// The daemon, as its status file tells.
#[derive(Debug, Clone, Serialize)]
pub struct DaemonView {
    /// It is running (a fresh status file of a live process).
    pub running: bool,
    /// Its process id (from the status file).
    pub pid: Option<u32>,
    /// When it started (Unix ms).
    pub started_ms: Option<i64>,
    /// Seconds since the status file was written (`None`: no file).
    pub status_age_s: Option<f64>,
    /// The release it runs, as its status file says (`None`: not known,
    /// or a release before 0.2.0, which did not say).
    pub version: Option<String>,
    /// The commit it was built from (`None`: not known).
    pub commit: Option<String>,
}

/// This `scangate` build: the one installed, which a running daemon
/// started before an upgrade may not be.
#[derive(Debug, Clone, Serialize)]
pub struct BuildView {
    /// Its release version.
    pub version: &'static str,
    /// The database schema version it reads and writes.
    pub schema: i64,
    /// The commit it was built from.
    pub commit: &'static str,
}

/// One configured scanner.
#[derive(Debug, Clone, Serialize)]
pub struct ScannerView {
    /// Its name.
    pub name: String,
    /// `serial` or `hid`.
    pub kind: &'static str,
    /// The configured device (serial path; HID: as configured).
    pub configured: String,
    /// Its device is open (false while the daemon is not running).
    pub connected: bool,
    /// The device it has open, or had last.
    pub device: Option<String>,
    /// What that device says it is (its USB descriptors: model, serial
    /// number, release), when it is on USB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity: Option<crate::model::Identity>,
    /// The software revision it reported itself (Zebra SSI), when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub software: Option<String>,
    /// Since when connected or disconnected (Unix ms).
    pub since_ms: Option<i64>,
    /// Last read (Unix ms) since the daemon started.
    pub last_read_ms: Option<i64>,
    /// Reads today (local time), counted since the daemon started.
    pub reads_today: u64,
    /// Rejected reads today.
    pub rejects_today: u64,
    /// Ambiguous echoes today: labels without a serial taken for echoes.
    pub ambiguous_today: u64,
    /// Reads today the checks at the counter told an alert about.
    pub alerts_today: u64,
    /// The last alerts since the daemon started, oldest first.
    pub recent_alerts: Vec<crate::telemetry::live::RecentAlert>,
    /// Alerts no ACKNOWLEDGE label read on it has acknowledged yet (while
    /// the daemon runs).
    pub unacknowledged_alerts: u64,
    /// Its last ACKNOWLEDGE read since the daemon started (Unix ms).
    pub acknowledged_ms: Option<i64>,
}

/// The outbox's undecided scans.
#[derive(Debug, Clone, Serialize)]
pub struct OutboxView {
    /// Waiting for their first decision.
    pub pending: i64,
    /// Waiting for the facility store.
    pub unresolved: i64,
    /// Age in seconds of the oldest of them (`None`: none).
    pub oldest_undecided_age_s: Option<f64>,
}

/// The facility store (with `[redis]`).
#[derive(Debug, Clone, Serialize)]
pub struct FacilityView {
    /// It answered the claimer last (`None`: no word yet).
    pub answering: Option<bool>,
    /// Answering since (Unix ms).
    pub answering_since_ms: Option<i64>,
    /// Failing since (Unix ms).
    pub failing_since_ms: Option<i64>,
    /// Why it fails.
    pub reason: Option<String>,
    /// The facility clock minus this gateway's wall clock (ms).
    pub clock_offset_ms: Option<f64>,
    /// ± this (ms).
    pub clock_bound_ms: Option<f64>,
    /// The facility ledger stream, as the claimer's last trim found it
    /// (`None`: not trimmed yet).
    pub ledger_stream: Option<LedgerStreamView>,
}

/// The facility ledger stream (`scangate:{f}:ledger`).
#[derive(Debug, Clone, Serialize)]
pub struct LedgerStreamView {
    /// When the claimer last looked (trimmed), the server's Unix ms.
    pub at_ms: i64,
    /// Entries in it.
    pub length: u64,
    /// Age in seconds of the oldest entry some consumer group has not
    /// acknowledged (`None`: none).
    pub oldest_unacked_age_s: Option<f64>,
    /// Each consumer group (none: nothing is ever trimmed).
    pub groups: Vec<LedgerGroupView>,
}

/// One consumer group of the ledger stream.
#[derive(Debug, Clone, Serialize)]
pub struct LedgerGroupView {
    /// Its name.
    pub name: String,
    /// Entries delivered to it, not acknowledged.
    pub pending: u64,
    /// Age in seconds of its oldest unacknowledged entry (`None`: it has
    /// acknowledged everything).
    pub oldest_unacked_age_s: Option<f64>,
}

/// A consumer of the gateway's own ledger (`ledger export --follow
/// --consumer`), with its cursor.
#[derive(Debug, Clone, Serialize)]
pub struct LedgerConsumerView {
    /// Its name.
    pub name: String,
    /// Its cursor: the position of the last entry it acknowledged.
    pub acked_seq: i64,
    /// Entries after it, not acknowledged.
    pub behind: i64,
    /// Age in seconds, by capture time, of the oldest of them (`None`:
    /// it has acknowledged everything).
    pub oldest_unacked_age_s: Option<f64>,
    /// When it last acknowledged (Unix ms; `None`: never).
    pub acked_ms: Option<i64>,
    /// When it was registered (Unix ms).
    pub registered_ms: i64,
}

impl LedgerConsumerView {
    /// `lag` as seen at `now_ms`.
    pub fn of(lag: &crate::ledger::cursor::Lag, now_ms: i64) -> LedgerConsumerView {
        LedgerConsumerView {
            name: lag.name.clone(),
            acked_seq: lag.acked_seq,
            behind: lag.behind,
            oldest_unacked_age_s: lag
                .oldest_unacked_ms
                .map(|ms| crate::daemon::publish::age_s(now_ms, ms)),
            acked_ms: lag.acked_ms,
            registered_ms: lag.registered_ms,
        }
    }
}

/// Storage.
#[derive(Debug, Clone, Serialize)]
pub struct StorageView {
    /// The database file and its write-ahead log, in bytes.
    pub database_bytes: u64,
    /// Free bytes, growth and days left (`free_bytes`, `reusable_bytes`,
    /// `growth_bytes_per_day`, `days_left`).
    #[serde(flatten)]
    pub space: Space,
    /// `[outbox] warn_days_left`.
    pub warn_days_left: u64,
    /// `[outbox] min_free_mb` in bytes: below it no scan is stored or ACKed.
    pub min_free_bytes: u64,
    /// Free space is below that floor: the gateway does not ACK.
    pub below_floor: bool,
}

/// The audit trail, as its recorded head says (`audit verify` checks it).
#[derive(Debug, Clone, Serialize)]
pub struct AuditView {
    /// Records written: the head's position (records `audit prune`
    /// removed after archiving them count too).
    pub records: u64,
    /// The last record's hash.
    pub head: Option<String>,
    /// The last chain head anchored outside the database (the state-id
    /// file): its record, if the file can be read.
    pub anchored_seq: Option<i64>,
    /// When that file was last written (Unix ms).
    pub anchored_at_ms: Option<i64>,
}

/// `scangate status --json`.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// No reason to worry.
    pub healthy: bool,
    /// This build (`scangate --version`).
    pub build: BuildView,
    /// Why not: each a sentence naming what and what to do.
    pub degraded: Vec<String>,
    /// The daemon.
    pub daemon: DaemonView,
    /// Every configured scanner.
    pub scanners: Vec<ScannerView>,
    /// The outbox.
    pub outbox: OutboxView,
    /// The facility store (`None` without `[redis]`).
    pub facility: Option<FacilityView>,
    /// The consumers of the gateway's own ledger.
    pub ledger_consumers: Vec<LedgerConsumerView>,
    /// Each `[[sink]]`.
    pub sinks: Vec<SinkView>,
    /// Storage.
    pub storage: StorageView,
    /// The audit trail.
    pub audit: AuditView,
    /// The product data (the FDA NDC Directory).
    pub products: DataView,
    /// The recall data (openFDA's drug recalls).
    pub recalls: DataView,
}

/// The longest status file read (a gateway's with a hundred scanners is
/// tens of kilobytes).
const STATUS_FILE_LIMIT: u64 = 4 * 1024 * 1024;

/// The status file, or why there is none to read.
fn read_live(state_dir: &Path) -> Result<LiveStatus, String> {
    let path = state_dir.join(STATUS_FILE);
    let text = crate::files::read_to_string(&path, STATUS_FILE_LIMIT).map_err(|e| match e {
        crate::files::FileError::Io { source, .. } => format!("{}: {source}", path.display()),
        planted => planted.to_string(),
    })?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// `scangate status [--json]`: print the status; exit 1 if degraded.
pub fn run(config: &ConfigArg, json: bool) -> Result<Exit, Failure> {
    let cfg = load(config)?;
    let st = gather(
        &cfg,
        config.path().as_deref(),
        chrono::Utc::now().timestamp_millis(),
    )?;
    if json {
        println!("{}", serde_json::to_string(&st).expect("status serialises"));
    } else {
        print!("{}", render(&st));
    }
    Ok(if st.healthy {
        Exit::Ok
    } else {
        Exit::CheckFailed
    })
}

/// Gather the status of the gateway configured by `cfg` (read from
/// `config_file`) at `now_ms`.
pub fn gather(cfg: &Config, config_file: Option<&Path>, now_ms: i64) -> Result<Status, StoreError> {
    let state_dir = cfg.state_dir();
    let store = Store::open_read_only(&state_dir)?;
    let stored = StoredSample::read(&store, &state_dir)?;
    drop(store);
    // Each step adds its reasons to worry, in this order.
    let mut degraded = Vec::new();
    let (daemon, live) = daemon_view(&state_dir, now_ms, &mut degraded);
    for old in &cfg.carried {
        degraded.push(format!("config: {}", old.warning(None)));
    }
    // A file the config names that others may read or change: a reason,
    // as the daemon's WARN is, never a refusal.
    for exposed in crate::config::exposure::exposed(cfg, config_file) {
        degraded.push(format!("config: {}", exposed.warning()));
    }
    for loose in crate::store::modes::loose(&state_dir) {
        degraded.push(format!("state: {loose}"));
    }
    let scanners = scanner_views(cfg, live.as_ref(), daemon.running, &mut degraded);
    let oldest = stored.oldest_age_s(now_ms);
    if let Some(age) = oldest.filter(|a| *a > OLD_UNDECIDED_S) {
        degraded.push(format!(
            "{} scan(s) undecided ({} pending, {} unresolved), the oldest for {age:.0} s: they are safe in the outbox and decided once the {} answers",
            stored.pending + stored.unresolved,
            stored.pending,
            stored.unresolved,
            if cfg.redis.is_some() {
                "facility store"
            } else {
                "gate"
            }
        ));
    }
    let facility = cfg
        .redis
        .as_ref()
        .map(|_| facility_view(&stored, now_ms, &mut degraded));
    let sinks = sinks::views(cfg, &stored, now_ms, &mut degraded);
    let storage = storage_view(cfg, &state_dir, &stored, &mut degraded);
    let today = chrono::DateTime::from_timestamp_millis(now_ms)
        .unwrap_or_default()
        .date_naive();
    let (products, recalls) = data::views(cfg, today, &mut degraded);
    Ok(Status {
        healthy: degraded.is_empty(),
        build: BuildView {
            version: crate::build::VERSION,
            schema: crate::build::SCHEMA_VERSION,
            commit: crate::build::COMMIT,
        },
        degraded,
        daemon,
        scanners,
        outbox: OutboxView {
            pending: stored.pending,
            unresolved: stored.unresolved,
            oldest_undecided_age_s: oldest,
        },
        facility,
        ledger_consumers: stored
            .ledger_consumers
            .iter()
            .map(|c| LedgerConsumerView::of(c, now_ms))
            .collect(),
        sinks,
        storage,
        audit: audit_view(&state_dir, &stored),
        products,
        recalls,
    })
}

/// The daemon as its status file and the state directory's lock tell, and
/// that file (`None`: it cannot be read).
fn daemon_view(
    state_dir: &Path,
    now_ms: i64,
    degraded: &mut Vec<String>,
) -> (DaemonView, Option<LiveStatus>) {
    let (live, unread) = match read_live(state_dir) {
        Ok(l) => (Some(l), None),
        Err(why) => (None, Some(why)),
    };
    let age_ms = live.as_ref().map(|l| now_ms - l.written_ms);
    // The daemon holds the state directory's lock while it runs.
    let alive = live.is_some() && crate::store::is_running(state_dir);
    let running = alive && age_ms.is_some_and(|a| a <= STALE_AFTER_MS);
    if !running {
        degraded.push(match age_ms {
            None => format!(
                "the daemon is not running, or its status file cannot be read ({}). Fix: systemctl start scangate (`journalctl -u scangate` says why it stopped); run status as a member of the service's group",
                unread.as_deref().unwrap_or("?")
            ),
            Some(a) => format!(
                "the daemon is not running (its status file was last written {:.0} s ago). Fix: systemctl start scangate; `journalctl -u scangate` says why it stopped",
                a as f64 / 1e3
            ),
        });
    }
    let version = live.as_ref().and_then(|l| l.version.clone());
    if running && version.as_deref() != Some(crate::build::VERSION) {
        degraded.push(format!(
            "the daemon runs {}, not the installed {}: it was not restarted after the upgrade. Fix: systemctl restart scangate",
            version.as_deref().map_or_else(|| "a release before 0.2.0".to_string(), |v| format!("release {v}")),
            crate::build::VERSION
        ));
    }
    let view = DaemonView {
        running,
        pid: live.as_ref().map(|l| l.pid),
        started_ms: live.as_ref().map(|l| l.started_ms),
        status_age_s: age_ms.map(|a| a as f64 / 1e3),
        version,
        commit: live.as_ref().and_then(|l| l.commit.clone()),
    };
    (view, live)
}

/// Every configured scanner, as the running daemon's status file has it.
fn scanner_views(
    cfg: &Config,
    live: Option<&LiveStatus>,
    running: bool,
    degraded: &mut Vec<String>,
) -> Vec<ScannerView> {
    let today = chrono::Local::now().date_naive();
    let now_ms = chrono::Utc::now().timestamp_millis();
    cfg.scanners
        .iter()
        .map(|sc| {
            let (kind, configured) = match &sc.kind {
                ScannerKind::Serial(s) => ("serial", s.path.display().to_string()),
                ScannerKind::Hid(h) => ("hid", h.path.display().to_string()),
            };
            let seen = live.and_then(|l| l.scanners.iter().find(|s| s.name == sc.name));
            let connected = running && seen.is_some_and(|s| s.connected);
            if running && !connected {
                degraded.push(format!(
                    "scanner {} is not connected ({kind} {configured}). Fix: check its cable and power; `scangate devices` lists what is attached",
                    sc.name
                ));
            }
            let counted = seen.filter(|s| s.day == today);
            if let Some(at) = seen
                .filter(|_| running)
                .and_then(|s| s.ambiguous_burst_ms())
                .filter(|at| now_ms - at <= AMBIGUOUS_SHOWN_MS)
            {
                degraded.push(format!(
                    "scanner {}: {} echoes of labels without a serial within a minute (the last at {}): identical items may be being counted and taken for echoes (an under-count). Fix: if this counter counts identical items, set unserialised = \"double-fire\" for it, or have staff scan the REPEAT label before each further item (`scangate labels` prints it); `scangate audit trace` shows each echo",
                    sc.name,
                    crate::telemetry::live::AMBIGUOUS_BURST,
                    crate::capture::clock::rfc3339_ms(at)
                ));
            }
            ScannerView {
                name: sc.name.clone(),
                kind,
                configured,
                connected,
                device: seen.and_then(|s| s.device.clone()),
                since_ms: seen.and_then(|s| s.since_ms),
                last_read_ms: seen.and_then(|s| s.last_read_ms),
                reads_today: counted.map_or(0, |s| s.reads_today),
                rejects_today: counted.map_or(0, |s| s.rejects_today),
                ambiguous_today: counted.map_or(0, |s| s.ambiguous_today),
                alerts_today: counted.map_or(0, |s| s.alerts_today),
                recent_alerts: seen
                    .filter(|_| running)
                    .map(|s| s.recent_alerts.clone())
                    .unwrap_or_default(),
                unacknowledged_alerts: seen.filter(|_| running).map_or(0, |s| s.unacknowledged),
                acknowledged_ms: seen.filter(|_| running).and_then(|s| s.acknowledged_ms),
                identity: seen.and_then(|s| s.identity.clone()),
                software: seen.and_then(|s| s.software.clone()),
            }
        })
        .collect()
}

/// The facility store, as the claimer last recorded it.
fn facility_view(stored: &StoredSample, now_ms: i64, degraded: &mut Vec<String>) -> FacilityView {
    let f = stored.facility.as_ref();
    if let Some(f) = f.filter(|f| !f.answering) {
        degraded.push(format!(
            "the facility store (Redis) is not answering since {}: {}. Scans wait unresolved; check the Redis server and the network ([redis] url)",
            crate::capture::clock::rfc3339_ms(f.since_ms),
            f.reason.as_deref().unwrap_or("no reason recorded")
        ));
    }
    FacilityView {
        answering: f.map(|f| f.answering),
        answering_since_ms: f.filter(|f| f.answering).map(|f| f.since_ms),
        failing_since_ms: f.filter(|f| !f.answering).map(|f| f.since_ms),
        reason: f.and_then(|f| f.reason.clone()),
        clock_offset_ms: stored.facility_clock.as_ref().map(|c| c.offset_ms),
        clock_bound_ms: stored.facility_clock.as_ref().map(|c| c.bound_ms),
        ledger_stream: stored.ledger_stream.as_ref().map(|s| {
            let groups: Vec<LedgerGroupView> = stored
                .ledger_groups(now_ms)
                .into_iter()
                .map(|(name, pending, age)| LedgerGroupView {
                    name,
                    pending,
                    oldest_unacked_age_s: age,
                })
                .collect();
            LedgerStreamView {
                at_ms: s.at_ms,
                length: s.length,
                oldest_unacked_age_s: groups
                    .iter()
                    .filter_map(|g| g.oldest_unacked_age_s)
                    .reduce(f64::max),
                groups,
            }
        }),
    }
}

/// The database's size and the state directory's free space, against the
/// `[outbox]` floor and warning.
fn storage_view(
    cfg: &Config,
    state_dir: &Path,
    stored: &StoredSample,
    degraded: &mut Vec<String>,
) -> StorageView {
    let space = &stored.space;
    let floor = Floor::new(state_dir, cfg.outbox.min_free_mb);
    let below_floor = floor.judge(space.free_bytes);
    if let Err(low) = &below_floor {
        degraded.push(low.to_string());
    } else if let Some(free) = space
        .free_bytes
        .filter(|f| *f < LOW_FREE_BYTES.max(2 * floor.bytes()))
    {
        degraded.push(format!(
            "only {} free in {}: below {} (the [outbox] min_free_mb floor) scans stop being stored and acknowledged. Fix: free space there",
            mib(free),
            state_dir.display(),
            mib(floor.bytes())
        ));
    }
    if let Some(warn) = days_left_warning(state_dir, space, cfg.outbox.warn_days_left) {
        degraded.push(warn);
    }
    StorageView {
        database_bytes: stored.database_bytes,
        space: space.clone(),
        warn_days_left: cfg.outbox.warn_days_left,
        min_free_bytes: floor.bytes(),
        below_floor: below_floor.is_err(),
    }
}

/// The audit trail's recorded head, and the head last anchored in the
/// state-id file.
fn audit_view(state_dir: &Path, stored: &StoredSample) -> AuditView {
    // (Unreadable, e.g. to a user outside the service's group: not shown.)
    let anchored = crate::store::identity::read(state_dir)
        .ok()
        .flatten()
        .and_then(|f| f.head)
        .map(|h| h.seq);
    let written = std::fs::metadata(state_dir.join(crate::store::identity::ID_FILE))
        .and_then(|m| m.modified())
        .ok()
        .map(|t| chrono::DateTime::<chrono::Utc>::from(t).timestamp_millis());
    AuditView {
        records: stored.audit_records,
        head: stored.audit_head.clone(),
        anchored_seq: anchored,
        anchored_at_ms: written.filter(|_| anchored.is_some()),
    }
}

/// One line on disk space for a technician: free, growth, days left.
pub fn render_space(space: &Space, min_free_bytes: u64) -> String {
    let free = space
        .free_bytes
        .map_or_else(|| "unknown".into(), |f| mib(f + space.reusable_bytes));
    let growth = match (space.growth_bytes_per_day, space.days_left) {
        (Some(g), Some(d)) => format!(", growing {} a day (last 24 h): {d:.0} days left", mib(g)),
        (Some(_), None) => ", not growing (last 24 h)".into(),
        _ => String::new(),
    };
    let below = space.free_bytes.is_some_and(|f| f < min_free_bytes);
    format!(
        "{free} free{growth}{}",
        if below {
            format!(
                "; BELOW the floor of {} MiB: no scan is stored or acknowledged",
                min_free_bytes / MIB
            )
        } else {
            String::new()
        }
    )
}

/// The status as text, for a technician.
pub fn render(st: &Status) -> String {
    use crate::capture::clock::rfc3339_ms;
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "{}", if st.healthy { "HEALTHY" } else { "DEGRADED" });
    for why in &st.degraded {
        let _ = writeln!(out, "  - {why}");
    }
    let d = &st.daemon;
    let _ = match (d.running, d.pid) {
        (true, Some(pid)) => writeln!(
            out,
            "daemon: running {} (pid {pid}, since {})",
            d.version.as_deref().unwrap_or("a release before 0.2.0"),
            d.started_ms.map_or_else(String::new, rfc3339_ms)
        ),
        _ => writeln!(out, "daemon: not running"),
    };
    let b = &st.build;
    let _ = writeln!(
        out,
        "installed: scangate {} (schema {}, commit {})",
        b.version, b.schema, b.commit
    );
    for s in &st.scanners {
        let _ = writeln!(
            out,
            "scanner {}: {} ({} {}{}), last read {}, today {} read(s), {} rejected, {} ambiguous, {} alert(s){}",
            s.name,
            if s.connected {
                "connected"
            } else {
                "NOT connected"
            },
            s.kind,
            s.configured,
            s.device
                .as_ref()
                .filter(|d| **d != s.configured)
                .map(|d| format!(" = {d}"))
                .unwrap_or_default(),
            s.last_read_ms.map_or_else(|| "never".into(), rfc3339_ms),
            s.reads_today,
            s.rejects_today,
            s.ambiguous_today,
            s.alerts_today,
            match (s.unacknowledged_alerts, s.acknowledged_ms) {
                (0, None) => String::new(),
                (0, Some(at)) => format!(", all acknowledged (last at {})", rfc3339_ms(at)),
                (n, _) => format!(", {n} not acknowledged"),
            }
        );
        match (&s.identity, &s.software) {
            (Some(id), Some(sw)) => writeln!(out, "  is: {}, software {sw}", id.describe()),
            (Some(id), None) => writeln!(out, "  is: {}", id.describe()),
            (None, Some(sw)) => writeln!(out, "  is: software {sw}"),
            (None, None) => Ok(()),
        }
        .ok();
        for a in &s.recent_alerts {
            let _ = writeln!(
                out,
                "  alert: {} at {} (scan {}: `scangate audit trace` it)",
                a.kind,
                rfc3339_ms(a.at_ms),
                a.scan_uuid
            );
        }
    }
    let o = &st.outbox;
    let _ = writeln!(
        out,
        "outbox: {} pending, {} unresolved{}",
        o.pending,
        o.unresolved,
        o.oldest_undecided_age_s
            .map(|a| format!(", oldest {a:.1} s"))
            .unwrap_or_default()
    );
    if let Some(f) = &st.facility {
        render_facility(&mut out, f);
    }
    for c in &st.ledger_consumers {
        let _ = writeln!(out, "ledger {}", render_consumer(c));
    }
    for sink in &st.sinks {
        let _ = writeln!(out, "{}", sinks::render(sink));
    }
    let sto = &st.storage;
    let _ = writeln!(
        out,
        "storage: database {}, {}",
        mib(sto.database_bytes),
        render_space(&sto.space, sto.min_free_bytes)
    );
    let _ = writeln!(
        out,
        "audit: {} record(s) written, head {}; {}",
        st.audit.records,
        st.audit.head.as_deref().unwrap_or("-"),
        match (st.audit.anchored_seq, st.audit.anchored_at_ms) {
            (Some(seq), Some(at)) => format!(
                "last anchored: record {seq}, at {} (state-id file)",
                rfc3339_ms(at)
            ),
            _ => "last anchored: none yet".into(),
        }
    );
    let _ = writeln!(out, "{}", data::render("products", &st.products));
    let _ = writeln!(out, "{}", data::render("recalls", &st.recalls));
    out
}

/// A ledger consumer's line of [`render`] (and of `ledger consumers list`).
pub fn render_consumer(c: &LedgerConsumerView) -> String {
    use crate::capture::clock::rfc3339_ms;
    let behind = match c.oldest_unacked_age_s {
        None => "all acknowledged".to_string(),
        Some(age) => format!(
            "{} {} after it, the oldest captured {}",
            c.behind,
            if c.behind == 1 { "entry" } else { "entries" },
            age_words(age)
        ),
    };
    format!(
        "consumer {}: acknowledged through entry {}, {behind}; last acknowledged {}",
        c.name,
        c.acked_seq,
        c.acked_ms.map_or_else(|| "never".into(), rfc3339_ms)
    )
}

/// An age in seconds, roughly, for a person.
fn age_words(s: f64) -> String {
    match s {
        s if s < 120.0 => format!("{s:.0} s ago"),
        s if s < 7200.0 => format!("{:.0} min ago", s / 60.0),
        s if s < 172_800.0 => format!("{:.0} h ago", s / 3600.0),
        s => format!("{:.0} days ago", s / 86_400.0),
    }
}

/// The facility store's lines of [`render`].
fn render_facility(out: &mut String, f: &FacilityView) {
    use crate::capture::clock::rfc3339_ms;
    use std::fmt::Write;
    let state = match (f.answering, f.answering_since_ms, f.failing_since_ms) {
        (Some(true), Some(since), _) => format!("answering since {}", rfc3339_ms(since)),
        (Some(false), _, Some(since)) => format!(
            "NOT answering since {}: {}",
            rfc3339_ms(since),
            f.reason.as_deref().unwrap_or("?")
        ),
        _ => "no word from the claimer yet".into(),
    };
    let clock = match (f.clock_offset_ms, f.clock_bound_ms) {
        (Some(o), Some(b)) => format!(", clock offset {o:.1} ms ± {b:.1} ms"),
        _ => String::new(),
    };
    let _ = writeln!(out, "facility store: {state}{clock}");
    if let Some(l) = &f.ledger_stream {
        let groups = if l.groups.is_empty() {
            "no consumer group: it is never trimmed, and Redis's memory grows (read it with `scangate ledger export --follow --group NAME`)".to_string()
        } else {
            l.groups
                .iter()
                .map(|g| {
                    format!(
                        "group {}: {} pending, {}",
                        g.name,
                        g.pending,
                        g.oldest_unacked_age_s.map_or_else(
                            || "all acknowledged".to_string(),
                            |a| format!("oldest unacknowledged {a:.0} s old")
                        )
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
        };
        let _ = writeln!(
            out,
            "facility ledger stream: {} entries (as of {}); {groups}",
            l.length,
            rfc3339_ms(l.at_ms)
        );
    }
}
