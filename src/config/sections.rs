//! The sections of the config file, as each is read: `[gateway]`,
//! `[dedup]`, `[outbox]`, `[metrics]`, `[records]`, `[checks]`, and what a
//! `[[scanner]]` entry is ([`ScannerConfig`]: the common keys, and its
//! kind's); their defaults.

use crate::source::config::Scanner;
use crate::source::hid::config::HidConfig;
use crate::source::serial::config::SerialConfig;
use serde::Deserialize;
use std::path::PathBuf;

/// `[gateway]` section.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewayConfig {
    /// Facility identifier; part of every content key and of the Redis hash tag.
    #[serde(default = "default_facility")]
    pub facility: String,
    /// This gateway's identifier, written into every ledger entry.
    #[serde(default = "default_gateway_id")]
    pub id: String,
    /// Directory for the SQLite database. Default: `$STATE_DIRECTORY`
    /// (systemd `StateDirectory=`) or `./scangate-state`.
    #[serde(default)]
    pub state_dir: Option<PathBuf>,
    /// The facility's GS1 Global Location Number (13 digits): the
    /// `readPoint` and `bizLocation` of its EPCIS events. None: they have
    /// none.
    #[serde(default)]
    pub gln: Option<String>,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            facility: default_facility(),
            id: default_gateway_id(),
            state_dir: None,
            gln: None,
        }
    }
}

/// `[dedup]` section.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DedupConfig {
    /// Two scans with the same content key whose capture times are at most
    /// this far apart are one physical pick (milliseconds).
    #[serde(default = "default_window_ms")]
    pub window_ms: u64,
    /// How long the Bloom pre-filter remembers committed content keys (hours).
    #[serde(default = "default_retention_hours")]
    pub retention_hours: u64,
}

impl Default for DedupConfig {
    fn default() -> Self {
        DedupConfig {
            window_ms: default_window_ms(),
            retention_hours: default_retention_hours(),
        }
    }
}

/// `[outbox]` section.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutboxConfig {
    /// Hours a decided scan's raw bytes (exactly what the scanner sent) are
    /// kept for diagnosis; then they are overwritten. A mistaken scan of a
    /// prescription label or wristband may carry patient data, and nothing
    /// needs the bytes once the scan is decided.
    #[serde(default = "default_retention_hours")]
    pub keep_raw_hours: u64,
    /// Free MiB the state directory's file system must keep: below it the
    /// outbox writer stores no scan, so no ACK goes out (as on a full
    /// disk), until space is back (0 = off; default 50).
    #[serde(default = "default_min_free_mb")]
    pub min_free_mb: u64,
    /// Warn (log, `status`) when the free space lasts fewer days than this
    /// at the last 24 hours' growth (0 = off; default 14).
    #[serde(default = "default_warn_days_left")]
    pub warn_days_left: u64,
}

fn default_min_free_mb() -> u64 {
    50
}

fn default_warn_days_left() -> u64 {
    14
}

/// `[metrics]` section: where the daemon publishes its Prometheus metrics.
/// Both ways are optional; neither set = no metrics.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// A file for node_exporter's textfile collector (its name must end in
    /// `.prom`), rewritten atomically every `interval_s`.
    pub textfile: Option<PathBuf>,
    /// Address of a `/metrics` HTTP endpoint, e.g. `127.0.0.1:9464`.
    pub listen: Option<std::net::SocketAddr>,
    /// Seconds between two refreshes of the sampled values and of the
    /// textfile (1..=3600, default 15).
    #[serde(default = "default_metrics_interval")]
    pub interval_s: u64,
}

pub(super) fn default_metrics_interval() -> u64 {
    15
}

impl MetricsConfig {
    /// The warning for a `listen` address that is not a loopback address,
    /// if it is one: the endpoint has no authentication and answers
    /// whoever reaches it. A choice, not an error: the metrics carry no
    /// secrets and no patient data.
    pub fn exposure_warning(&self) -> Option<String> {
        let addr = self.listen?;
        if addr.ip().to_canonical().is_loopback() {
            return None;
        }
        Some(format!(
            "[metrics] listen = \"{addr}\" is not a loopback address: /metrics answers anyone who can reach port {} of this gateway, without authentication. The metrics carry no secrets and no patient data, but they show scan volumes, scanner names and the gateway's health. Fix, unless that is intended: listen on 127.0.0.1 (a Prometheus or agent on this gateway), or let a firewall admit only the Prometheus server",
            addr.port()
        ))
    }
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            textfile: None,
            listen: None,
            interval_s: default_metrics_interval(),
        }
    }
}

/// `[records]` section: retention of the audit trail and the ledger.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordsConfig {
    /// Days an audit record (and the ledger entry it commits) stays in the
    /// database; only older records that are in a verified archive (and,
    /// with `[redis]`, anchored) may be pruned. At least
    /// [`MIN_KEEP_DAYS`] (21 CFR 1304.04: two years).
    #[serde(default = "default_keep_days")]
    pub keep_days: u64,
    /// Days past `keep_days` that `audit prune` keeps a ledger entry a
    /// registered consumer has not acknowledged (`ledger export --follow
    /// --consumer`); older ones are pruned all the same, and the log and
    /// the checkpoint record say so. Default 90.
    #[serde(default = "default_consumer_hold_days")]
    pub consumer_hold_days: u64,
}

fn default_consumer_hold_days() -> u64 {
    90
}

/// The shortest `[records] keep_days` accepted: two years (21 CFR 1304.04
/// requires records of controlled substances kept for two years).
pub const MIN_KEEP_DAYS: u64 = 730;

fn default_keep_days() -> u64 {
    MIN_KEEP_DAYS
}

impl Default for RecordsConfig {
    fn default() -> Self {
        RecordsConfig {
            keep_days: default_keep_days(),
            consumer_hold_days: default_consumer_hold_days(),
        }
    }
}

impl Default for OutboxConfig {
    fn default() -> Self {
        OutboxConfig {
            keep_raw_hours: default_retention_hours(),
            min_free_mb: default_min_free_mb(),
            warn_days_left: default_warn_days_left(),
        }
    }
}

/// `[checks]` section: the checks of a read against the product and
/// recall data (`scangate products import`, `recalls import`). Every key
/// has a default, so a config without the section loads as before.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChecksConfig {
    /// Product or recall data older than this many days (from its own
    /// date) is a `status` reason: import a newer download (1..=3650,
    /// default [`DEFAULT_MAX_DATA_AGE_DAYS`]).
    pub max_data_age_days: u64,
    /// A label expiring fewer than this many days after the read is told
    /// `expiring` (0: never; at most 3650; default
    /// [`DEFAULT_EXPIRY_WARN_DAYS`]).
    pub expiry_warn_days: u64,
    /// How long the first `receive` read of a serialised item is kept to
    /// tell a second one `suspect` (1..=3650, default
    /// [`DEFAULT_SERIAL_RETENTION_DAYS`]); in the gateway's database, and
    /// with `[redis]` in the facility store.
    pub serial_retention_days: u64,
}

/// The default `[checks] serial_retention_days`: a year of receipts (a
/// package's shelf life is typically one to three years; disk and Redis
/// memory grow with the days kept: docs/benchmarks.md).
pub const DEFAULT_SERIAL_RETENTION_DAYS: u64 = 365;

/// The default `[checks] expiry_warn_days`.
pub const DEFAULT_EXPIRY_WARN_DAYS: u64 = 30;

/// The default `[checks] max_data_age_days`: the FDA updates the NDC
/// Directory daily and openFDA its recalls weekly; 45 days leaves a
/// monthly import room for a late month.
pub const DEFAULT_MAX_DATA_AGE_DAYS: u64 = 45;

impl Default for ChecksConfig {
    fn default() -> Self {
        ChecksConfig {
            max_data_age_days: DEFAULT_MAX_DATA_AGE_DAYS,
            expiry_warn_days: DEFAULT_EXPIRY_WARN_DAYS,
            serial_retention_days: DEFAULT_SERIAL_RETENTION_DAYS,
        }
    }
}

/// A `[[scanner]]` entry of any kind.
pub type ScannerConfig = Scanner<ScannerKind>;

/// How a scanner is attached (`kind`), with that kind's keys.
#[derive(Debug, Clone)]
pub enum ScannerKind {
    /// `kind = "serial"`: RS-232 or USB CDC-ACM.
    Serial(SerialConfig),
    /// `kind = "hid"`: USB HID, HID POS or keyboard wedge (see `mode`).
    Hid(HidConfig),
}

impl From<Scanner<SerialConfig>> for ScannerConfig {
    fn from(s: Scanner<SerialConfig>) -> Self {
        let kind = ScannerKind::Serial(s.kind.clone());
        s.with_kind(kind)
    }
}

impl From<Scanner<HidConfig>> for ScannerConfig {
    fn from(s: Scanner<HidConfig>) -> Self {
        let kind = ScannerKind::Hid(s.kind.clone());
        s.with_kind(kind)
    }
}

impl ScannerConfig {
    /// The serial keys, for `kind = "serial"`.
    pub fn as_serial(&self) -> Option<&SerialConfig> {
        match &self.kind {
            ScannerKind::Serial(s) => Some(s),
            ScannerKind::Hid(_) => None,
        }
    }

    /// The HID keys, for `kind = "hid"`.
    pub fn as_hid(&self) -> Option<&HidConfig> {
        match &self.kind {
            ScannerKind::Hid(h) => Some(h),
            ScannerKind::Serial(_) => None,
        }
    }
}

fn default_facility() -> String {
    "default".into()
}
fn default_gateway_id() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| valid_ident(h))
        .unwrap_or_else(|| "gateway".into())
}
pub(super) fn default_window_ms() -> u64 {
    3000
}
pub(super) fn default_retention_hours() -> u64 {
    72
}

/// A valid facility, gateway or scanner identifier: 1-64 letters,
/// digits, `-`, `_` or `.`.
pub(super) fn valid_ident(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}
