//! The daemon's life: starting, each stage's start and end, a stage failing, a reload, a stage wedged.

use super::Event;
use crate::telemetry::Telemetry;
use std::time::Duration;

// The log targets operators filter on (`RUST_LOG`, the journal): keep the values.
const DAEMON_TARGET: &str = "scangate::daemon";
const NOTIFY_TARGET: &str = "scangate::notify";
const RELOAD_TARGET: &str = "scangate::reload";

/// The daemon starts: its state, identity and scanners.
pub struct Starting<'a> {
    /// The database.
    pub db: &'a std::path::Path,
    /// `[gateway] facility`.
    pub facility: &'a str,
    /// `[gateway] id`.
    pub gateway: &'a str,
    /// How many scanners are configured.
    pub scanners: usize,
    /// `[dedup] window_ms`.
    pub window_ms: u64,
    /// Whether a facility Redis decides (else the embedded gate).
    pub facility_redis: bool,
}

/// A key of an earlier release found in the config file and carried over
/// (WARN, at start and at each reload, until the file is edited).
pub struct OldConfigKey<'a> {
    /// The key, e.g. `redis.require_synced_clock`.
    pub key: &'a str,
    /// The whole warning: what, where, the fix ([`crate::config::Carried::warning`]).
    pub warning: &'a str,
}

/// The config file was read (at start, at a reload): every key of an
/// earlier release it carries over, a WARN each; how many is
/// `scangate_config_old_keys` (0: none).
pub struct OldConfigKeys<'a> {
    /// The keys, in the file's order.
    pub keys: &'a [OldConfigKey<'a>],
    /// The metrics it updates.
    pub telemetry: &'a Telemetry,
}

impl Event for OldConfigKeys<'_> {
    /// Log each (WARN) and set the gauge.
    fn emit(self) {
        for old in self.keys {
            tracing::warn!(target: DAEMON_TARGET, key = %old.key, "{}", old.warning);
        }
        self.telemetry.config_old_keys(self.keys.len());
    }
}

/// A file the configuration names (the config, a secret, a CA file) that
/// others may read or change further than it should (WARN, at start and
/// at each reload, until its mode is fixed; never a refusal).
pub struct ConfigFileExposed<'a> {
    /// The file.
    pub path: &'a std::path::Path,
    /// Its permission bits.
    pub mode: u32,
    /// The whole warning: what names it, who may do what, the fix
    /// ([`crate::config::exposure::Exposed::warning`]).
    pub warning: &'a str,
}

impl Event for ConfigFileExposed<'_> {
    /// Log it (WARN).
    fn emit(self) {
        tracing::warn!(
            target: DAEMON_TARGET,
            path = %self.path.display(), mode = format_args!("{:04o}", self.mode & 0o7777),
            "{}", self.warning
        );
    }
}

impl Event for Starting<'_> {
    /// Log it (INFO).
    fn emit(self) {
        tracing::info!(
            target: DAEMON_TARGET,
            db = %self.db.display(), facility = %self.facility, gateway = %self.gateway,
            scanners = self.scanners, window_ms = self.window_ms,
            store = if self.facility_redis { "facility redis" } else { "embedded" },
            version = crate::build::VERSION, schema = crate::build::SCHEMA_VERSION,
            commit = crate::build::COMMIT,
            "scangate starting: release {}, schema {}", crate::build::VERSION, crate::build::SCHEMA_VERSION
        );
    }
}

/// What the configuration the daemon starts with leaves undone (WARN).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartWarning {
    /// Scans wait for a facility store that is no longer configured.
    NoFacilityStore {
        /// How many.
        waiting: i64,
    },
    /// No scanner is configured.
    NoScanners,
}

impl Event for StartWarning {
    /// Log it (WARN).
    fn emit(self) {
        match self {
            StartWarning::NoFacilityStore { waiting } => tracing::warn!(
                target: DAEMON_TARGET,
                scans = waiting,
                "{waiting} scans wait for a facility store that is not configured ([redis]): they stay undecided. Fix: restore the [redis] section, or, if the facility store is gone for good, stop scangate and run `scangate outbox decide-locally`"
            ),
            StartWarning::NoScanners => tracing::warn!(
                target: DAEMON_TARGET,
                "no [[scanner]] is configured: nothing will be read. Fix: add a [[scanner]] section for each scanner (`scangate devices` lists what is attached) and restart"
            ),
        }
    }
}

/// Where the daemon's life stands (INFO): ready, stopping, stopped.
pub enum Lifecycle<'a> {
    /// Every scanner is up (or the setup time is over): systemd is told.
    Ready {
        /// The status line.
        status: &'a str,
    },
    /// Asked to stop.
    Stopping,
    /// Draining takes long: the stop timeout is extended.
    StopExtended {
        /// The status line (`stopping: draining for N s`).
        line: &'a str,
        /// By how much.
        by: Duration,
    },
    /// Stopped, with what was decided.
    Stopped {
        /// The counts.
        stats: &'a crate::model::GateStats,
    },
}

impl Event for Lifecycle<'_> {
    /// Log it (INFO).
    fn emit(self) {
        match self {
            Lifecycle::Ready { status } => {
                tracing::info!(target: DAEMON_TARGET, status = %status, "ready")
            }
            Lifecycle::Stopping => tracing::info!(
                target: DAEMON_TARGET,
                "stopping: closing scanners, draining the outbox"
            ),
            Lifecycle::StopExtended { line, by } => tracing::info!(
                target: DAEMON_TARGET,
                "{line}; the stop timeout is extended by {by:?}"
            ),
            Lifecycle::Stopped { stats } => tracing::info!(
                target: DAEMON_TARGET,
                committed = stats.committed,
                suppressed = stats.suppressed,
                rejected = stats.rejected,
                exact_lookups = stats.exact_lookups,
                lookups_saved_by_bloom = stats.lookups_saved,
                "scangate stopped"
            ),
        }
    }
}

/// How a stage of the daemon ended when it should not have (ERROR, the
/// anchor thread's panic a WARN).
pub enum StageFailed<'a> {
    /// A stage panicked (`the {stage} {why}`).
    Panicked {
        /// The stage, as told.
        stage: &'a dyn std::fmt::Display,
        /// `panicked: …`.
        why: &'a str,
    },
    /// A scanner's task panicked while a reload stopped it.
    ScannerPanickedOnReload {
        /// The scanner.
        scanner: &'a str,
        /// `panicked: …`.
        why: &'a str,
    },
    /// The database failed its integrity check.
    Corrupt {
        /// The database.
        db: &'a std::path::Path,
        /// What the check found.
        detail: &'a str,
        /// Whether the daemon stops for it (else it was found stopping).
        stopping: bool,
    },
    /// A scanner's task ended (it should run until shutdown).
    ScannerEnded {
        /// How.
        detail: &'a str,
    },
    /// The outbox writer stopped.
    WriterStopped,
    /// The facility claimer stopped.
    ClaimerStopped,
    /// The outbox writer found the facility claimer gone.
    ClaimerGone,
    /// The raw-bytes sweeper stopped.
    SweeperStopped {
        /// How.
        why: &'a str,
    },
    /// A `[[sink]]`'s thread stopped.
    SinkStopped {
        /// Which, and how.
        why: &'a str,
    },
    /// The anchor thread panicked (WARN).
    AnchorThreadPanicked,
    /// A metrics/status publisher task failed.
    PublisherFailed {
        /// How.
        error: &'a dyn std::fmt::Display,
    },
}

impl Event for StageFailed<'_> {
    /// Log it: ERROR, the anchor thread's panic WARN.
    fn emit(self) {
        match self {
            StageFailed::Panicked { stage, why } => {
                tracing::error!(target: DAEMON_TARGET, "the {stage} {why}")
            }
            StageFailed::ScannerPanickedOnReload { scanner, why } => tracing::error!(
                target: DAEMON_TARGET,
                scanner = %scanner,
                "the scanner's task {why} while a reload stopped it"
            ),
            StageFailed::Corrupt {
                db,
                detail,
                stopping: false,
            } => tracing::error!(
                target: DAEMON_TARGET,
                db = %db.display(),
                "the database failed its integrity check: {detail}"
            ),
            StageFailed::Corrupt {
                db,
                detail,
                stopping: true,
            } => tracing::error!(
                target: DAEMON_TARGET,
                db = %db.display(),
                "the database failed its integrity check: {detail}; stopping"
            ),
            StageFailed::ScannerEnded { detail } => tracing::error!(
                target: DAEMON_TARGET,
                "a scanner task ended unexpectedly ({detail}); stopping"
            ),
            StageFailed::WriterStopped => tracing::error!(
                target: DAEMON_TARGET,
                "the outbox writer stopped unexpectedly; closing scanners"
            ),
            StageFailed::ClaimerStopped => tracing::error!(
                target: DAEMON_TARGET,
                "the facility claimer stopped unexpectedly; stopping"
            ),
            StageFailed::ClaimerGone => tracing::error!(
                target: DAEMON_TARGET,
                "the facility claimer is gone; stopping"
            ),
            StageFailed::SweeperStopped { why } => tracing::error!(
                target: DAEMON_TARGET,
                "the raw-bytes sweeper stopped unexpectedly ({why}); stopping"
            ),
            StageFailed::SinkStopped { why } => tracing::error!(
                target: DAEMON_TARGET,
                "a sink's thread stopped unexpectedly ({why}); stopping"
            ),
            StageFailed::AnchorThreadPanicked => tracing::warn!(
                target: DAEMON_TARGET,
                "the anchor thread panicked; the chain head was not anchored at stop"
            ),
            StageFailed::PublisherFailed { error } => tracing::error!(
                target: DAEMON_TARGET,
                "the metrics/status publisher failed: {error}"
            ),
        }
    }
}

/// A reload (SIGHUP) was applied (INFO, target `scangate::reload`): the
/// scanners as reloaded are set in `Telemetry` (`scangate_scanner_up`).
pub struct Reloaded<'a> {
    /// Scanners added.
    pub added: usize,
    /// Removed.
    pub removed: usize,
    /// Changed.
    pub changed: usize,
    /// The plan, as told.
    pub described: &'a str,
    /// The scanners now configured.
    pub scanners: &'a [String],
    /// The metrics it updates.
    pub telemetry: &'a Telemetry,
}

impl Event for Reloaded<'_> {
    /// Log it (INFO) and set the scanners.
    fn emit(self) {
        let (added, removed, changed) = (self.added, self.removed, self.changed);
        tracing::info!(
            target: RELOAD_TARGET,
            added, removed, changed,
            "configuration reloaded: {}", self.described
        );
        self.telemetry.set_scanners(self.scanners);
    }
}

/// The open alerts of scanners a reload added could not be read: they show
/// none not acknowledged until the next start (WARN, target
/// `scangate::reload`).
pub struct OpenAlertsUnread<'a> {
    /// The scanners added.
    pub scanners: &'a [String],
    /// Why.
    pub error: &'a dyn std::fmt::Display,
}

impl Event for OpenAlertsUnread<'_> {
    /// Log it (WARN).
    fn emit(self) {
        tracing::warn!(
            target: RELOAD_TARGET,
            "reload: the open alerts of {} could not be read ({}); scangate_alerts_unacknowledged and status show none for them until the next restart (`systemctl restart scangate` to count them)",
            self.scanners.join(", "),
            self.error
        );
    }
}

/// A reload (SIGHUP) was refused or failed (target `scangate::reload`);
/// the daemon runs on with the configuration it had.
pub enum ReloadRefused<'a> {
    /// Keys changed that need a restart (WARN).
    NeedsRestart {
        /// The keys.
        keys: &'a [String],
    },
    /// The file does not parse (ERROR).
    ConfigError {
        /// ` (line N)` or empty.
        at: &'a str,
        /// Why.
        error: &'a dyn std::fmt::Display,
        /// How many scanners the running configuration has.
        scanners: usize,
    },
    /// Reading the file did not finish (ERROR).
    ReadFailed {
        /// The file, as shown.
        shown: &'a str,
        /// Why.
        error: &'a dyn std::fmt::Display,
    },
}

impl Event for ReloadRefused<'_> {
    /// Log it: WARN when a restart is needed, else ERROR.
    fn emit(self) {
        match self {
            ReloadRefused::NeedsRestart { keys } => tracing::warn!(
                target: RELOAD_TARGET,
                keys = %keys.join(", "),
                "reload refused: {} changed, which needs a restart (`systemctl restart scangate`); still running with the configuration it started with (scanners as last reloaded)",
                keys.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
            ),
            ReloadRefused::ConfigError {
                at,
                error,
                scanners,
            } => tracing::error!(
                target: RELOAD_TARGET,
                "reload refused: configuration error{at}: {error}. Still running with the configuration read before ({scanners} scanner(s)); fix the file and reload again (`scangate check-config` shows the problem)"
            ),
            ReloadRefused::ReadFailed { shown, error } => tracing::error!(
                target: RELOAD_TARGET,
                "reload failed: reading {shown} did not finish ({error}); still running with the configuration read before"
            ),
        }
    }
}

/// A stage that has work made no progress within its bound, or makes
/// progress again (the watchdog's view, target `scangate::notify`).
pub enum Wedge<'a> {
    /// No progress for `bound`: the watchdog pings stop (ERROR).
    Stuck {
        /// The stage.
        stage: &'a str,
        /// Its bound.
        bound: Duration,
    },
    /// It makes progress again (INFO).
    Moves {
        /// The stage.
        stage: &'a str,
    },
}

impl Event for Wedge<'_> {
    /// Log it: ERROR when stuck, INFO when it moves again.
    fn emit(self) {
        match self {
            Wedge::Stuck { stage, bound } => tracing::error!(
                target: NOTIFY_TARGET,
                stage,
                "the {stage} has made no progress for {bound:?} while it has work: the watchdog pings stop, so systemd restarts scangate (scans are safe in the outbox)"
            ),
            Wedge::Moves { stage } => tracing::info!(
                target: NOTIFY_TARGET,
                stage,
                "the {stage} makes progress again; watchdog pings resume"
            ),
        }
    }
}
