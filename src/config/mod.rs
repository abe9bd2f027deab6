//! Configuration: the TOML file, its defaults, its validation, and the one
//! step that reads what it points to ([`Settings::resolve`]).
//!
//! Each component owns the keys it reads: the serial source
//! ([`SerialConfig`]), the HID source ([`HidConfig`], per `mode`
//! [`ModeConfig`]), the facility (`[redis]`, [`RedisConfig`]). This module
//! assembles them: `kind` (and, for HID, `mode`) picks the types of a
//! `[[scanner]]` entry ([`ScannerKind`]), and each type takes its own keys.
//!
//! Parsing and validation never touch hardware, so `scangate check-config`
//! can run on a technician's laptop; it also resolves the secrets, exactly as
//! `run` does (and checks the state directory, `src/cmd/check_config.rs`: on
//! a laptop, a `state_dir` it cannot create is exit 3). Unknown keys are rejected by serde (`deny_unknown_fields` on
//! every type) so a typo never silently falls back to a default. Every field
//! is documented in `config/scangate.toml`, which a test parses.
//!
//! Why not serde's `#[serde(tag = "kind")]`: an internally tagged enum
//! buffers the table before it reads the tag, and what serde then reports
//! (an unknown key, a value out of a type's range) has lost its place in the
//! text, so the message could no longer name `scanner[0].usb_port`. The tag
//! is read first instead ([`Config::parse`]), and each type deserializes
//! straight from the parsed TOML, spans intact.

use crate::invalid::Invalid;
use serde::Deserialize;
use std::collections::HashSet;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use toml::Spanned;
use toml::de::{DeTable, DeValue, ValueDeserializer};

pub use crate::capture::ScanType;
pub use crate::facility::config::{RedisConfig, RedisSettings};
pub use crate::source::config::Scanner;
pub use crate::source::hid::config::{
    DEFAULT_HID_TIMEOUT_MS, GsKey, HidConfig, HidMode, KeyboardConfig, ModeConfig, PosConfig,
    TerminatorKey,
};
pub use crate::source::serial::config::{
    ByteString, FlowControl, MAX_AFFIX_BYTES, Parity, SerialConfig,
};

/// Where a command looks for its config file when neither `--config` nor
/// `SCANGATE_CONFIG` names one ([`locate`]).
pub const DEFAULT_PATH: &str = "/etc/scangate/scangate.toml";

/// The config file a command reads, in this order: `given` (`--config`,
/// else `SCANGATE_CONFIG`: clap reads both into one argument), else the
/// first of `defaults` that exists (every command passes
/// `[DEFAULT_PATH]`), else none: the built-in defaults. The one place
/// that decides it; README ("Commands") documents the order.
pub fn locate(given: Option<&Path>, defaults: &[&Path]) -> Option<PathBuf> {
    given.map(Path::to_owned).or_else(|| {
        defaults
            .iter()
            .find(|p| p.exists())
            .map(|p| p.to_path_buf())
    })
}

/// The whole configuration file ([`Config::parse`] reads it).
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// `[gateway]`: who this gateway is and where it keeps state.
    pub gateway: GatewayConfig,
    /// `[dedup]`: the echo window and how long exact knowledge is kept.
    pub dedup: DedupConfig,
    /// `[outbox]`: how long scans' raw bytes are kept.
    pub outbox: OutboxConfig,
    /// `[[scanner]]`: the scanners this gateway reads.
    pub scanners: Vec<ScannerConfig>,
    /// `[redis]`: the facility store; absent = embedded (the default).
    pub redis: Option<RedisConfig>,
    /// `[metrics]`: Prometheus metrics (textfile and/or `/metrics`); off by default.
    pub metrics: MetricsConfig,
    /// `[records]`: how long audit records and ledger entries stay in the
    /// database before `scangate audit prune` may remove archived ones.
    pub records: RecordsConfig,
}

/// The sections serde reads as they are; `[[scanner]]` is only checked to
/// be an array here, its tables are read by [`scanner`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Sections {
    #[serde(default)]
    gateway: GatewayConfig,
    #[serde(default)]
    dedup: DedupConfig,
    #[serde(default)]
    outbox: OutboxConfig,
    #[serde(default, rename = "scanner")]
    _scanner: Vec<serde::de::IgnoredAny>,
    #[serde(default)]
    redis: Option<RedisConfig>,
    #[serde(default)]
    metrics: MetricsConfig,
    #[serde(default)]
    records: RecordsConfig,
}

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
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            facility: default_facility(),
            id: default_gateway_id(),
            state_dir: None,
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

fn default_metrics_interval() -> u64 {
    15
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
fn default_window_ms() -> u64 {
    3000
}
fn default_retention_hours() -> u64 {
    72
}

/// A configuration problem: which file, which key, what is wrong, how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The config file, if one was read.
    pub file: Option<PathBuf>,
    /// The offending key, e.g. `scanner[1].quantity`.
    pub key: String,
    /// What is wrong.
    pub problem: String,
    /// What to do about it.
    pub fix: String,
}

impl ConfigError {
    /// A component's refusal, its key already named from the file's top
    /// ([`Invalid::within`]).
    pub fn new(file: Option<&Path>, e: Invalid) -> ConfigError {
        ConfigError {
            file: file.map(Path::to_owned),
            key: e.key,
            problem: e.problem,
            fix: e.fix,
        }
    }

    /// What the TOML parser or serde refused; the key comes from the
    /// error's place in `text`.
    fn from_toml(text: &str, file: Option<&Path>, e: toml::de::Error) -> ConfigError {
        let (key, at) = match e.span() {
            Some(span) => {
                let (line, column) = line_column(text, span.start);
                (
                    locate_key(text, span.start),
                    format!(" (line {line}, column {column})"),
                )
            }
            None => ("(file)".into(), String::new()),
        };
        ConfigError {
            file: file.map(Path::to_owned),
            key,
            problem: format!("{}{at}", e.message().trim_end()),
            fix: "compare with the documented example config/scangate.toml".into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            Some(p) => write!(f, "{}: ", p.display())?,
            None => write!(f, "built-in defaults: ")?,
        }
        write!(f, "`{}`: {}. Fix: {}", self.key, self.problem, self.fix)
    }
}

impl std::error::Error for ConfigError {}

fn valid_ident(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

impl Config {
    /// Read and validate a config file; `None` means "no file": all defaults.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let Some(path) = path else {
            let cfg = Config::default();
            cfg.validate(None)?;
            return Ok(cfg);
        };
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: Some(path.to_owned()),
            key: "(file)".into(),
            problem: format!("cannot read the config file: {e}"),
            fix: "check the path (given with --config or SCANGATE_CONFIG, else the default /etc/scangate/scangate.toml) and that the service user may read it".into(),
        })?;
        Config::parse(&text, Some(path))
    }

    /// Parse and validate config text (`file` is only used in messages).
    pub fn parse(text: &str, file: Option<&Path>) -> Result<Config, ConfigError> {
        let toml_error = |e| ConfigError::from_toml(text, file, e);
        let doc = DeTable::parse(text).map_err(toml_error)?;
        let span = doc.span();
        let root = doc.into_inner();
        let tables = root.get("scanner").cloned();
        let sections =
            Sections::deserialize(toml::de::Deserializer::from(Spanned::new(span, root)))
                .map_err(toml_error)?;
        let mut scanners = Vec::new();
        // `Sections` checked that `scanner` is an array.
        if let Some(DeValue::Array(tables)) = tables.map(Spanned::into_inner) {
            for (i, table) in tables.into_iter().enumerate() {
                scanners.push(scanner(table).map_err(|refused| match refused {
                    Refused::Toml(e) => toml_error(e),
                    Refused::Invalid(e) => {
                        ConfigError::new(file, e.within(&format!("scanner[{i}]")))
                    }
                })?);
            }
        }
        let cfg = Config {
            gateway: sections.gateway,
            dedup: sections.dedup,
            outbox: sections.outbox,
            scanners,
            redis: sections.redis,
            metrics: sections.metrics,
            records: sections.records,
        };
        cfg.validate(file)?;
        Ok(cfg)
    }

    fn validate(&self, file: Option<&Path>) -> Result<(), ConfigError> {
        let err = |key: String, problem: String, fix: &str| ConfigError {
            file: file.map(Path::to_owned),
            key,
            problem,
            fix: fix.into(),
        };
        if !valid_ident(&self.gateway.facility) {
            return Err(err(
                "gateway.facility".into(),
                format!("{:?} is not a valid identifier", self.gateway.facility),
                "use 1-64 letters, digits, '-', '_' or '.'",
            ));
        }
        if !(1..=3600).contains(&self.metrics.interval_s) {
            return Err(err(
                "metrics.interval_s".into(),
                format!("{} is out of range", self.metrics.interval_s),
                "use 1..=3600 seconds (default 15)",
            ));
        }
        if let Some(path) = &self.metrics.textfile
            && (path.extension().is_none_or(|e| e != "prom") || path.file_name().is_none())
        {
            return Err(err(
                "metrics.textfile".into(),
                format!("{} does not end in .prom", path.display()),
                "name a file ending in .prom (node_exporter's textfile collector reads only those), e.g. /var/lib/prometheus/node-exporter/scangate.prom",
            ));
        }
        if !valid_ident(&self.gateway.id) {
            return Err(err(
                "gateway.id".into(),
                format!("{:?} is not a valid identifier", self.gateway.id),
                "use 1-64 letters, digits, '-', '_' or '.'",
            ));
        }
        if self.dedup.window_ms == 0 || self.dedup.window_ms > 3_600_000 {
            return Err(err(
                "dedup.window_ms".into(),
                format!("{} is out of range", self.dedup.window_ms),
                "use 1..=3600000 milliseconds (default 3000)",
            ));
        }
        if self.dedup.retention_hours == 0 || self.dedup.retention_hours > 24 * 366 {
            return Err(err(
                "dedup.retention_hours".into(),
                format!("{} is out of range", self.dedup.retention_hours),
                "use 1..=8784 hours (default 72)",
            ));
        }
        if self.outbox.keep_raw_hours == 0 || self.outbox.keep_raw_hours > 24 * 366 {
            return Err(err(
                "outbox.keep_raw_hours".into(),
                format!("{} is out of range", self.outbox.keep_raw_hours),
                "use 1..=8784 hours (default 72)",
            ));
        }
        if self.outbox.min_free_mb > 1_048_576 {
            return Err(err(
                "outbox.min_free_mb".into(),
                format!("{} is out of range", self.outbox.min_free_mb),
                "use 0 (off) ..=1048576 MiB (default 50)",
            ));
        }
        if self.outbox.warn_days_left > 3660 {
            return Err(err(
                "outbox.warn_days_left".into(),
                format!("{} is out of range", self.outbox.warn_days_left),
                "use 0 (off) ..=3660 days (default 14)",
            ));
        }
        if self.records.keep_days < MIN_KEEP_DAYS || self.records.keep_days > 36_600 {
            return Err(err(
                "records.keep_days".into(),
                format!("{} is out of range", self.records.keep_days),
                "use 730..=36600 days (default 730): records of controlled substances are kept at least two years (21 CFR 1304.04)",
            ));
        }
        if self.dedup.window_ms > self.dedup.retention_hours * 3_600_000 {
            return Err(err(
                "dedup.window_ms".into(),
                "the echo window is longer than the retention horizon".into(),
                "make dedup.retention_hours cover dedup.window_ms",
            ));
        }
        if let Some(redis) = &self.redis {
            redis
                .validate()
                .map_err(|e| ConfigError::new(file, e.within("redis")))?;
            // Two gateways' facility times of one pick may each be off by
            // the bound: together well inside the window.
            if redis.max_clock_error_ms * 4 > self.dedup.window_ms {
                return Err(err(
                    "redis.max_clock_error_ms".into(),
                    format!(
                        "{} ms is more than a quarter of dedup.window_ms ({} ms)",
                        redis.max_clock_error_ms, self.dedup.window_ms
                    ),
                    "lower max_clock_error_ms (default 250), or widen dedup.window_ms",
                ));
            }
        }
        let mut names = HashSet::new();
        for (i, s) in self.scanners.iter().enumerate() {
            let key = |field: &str| format!("scanner[{i}].{field}");
            if !valid_ident(&s.name) {
                return Err(err(
                    key("name"),
                    format!("{:?} is not a valid scanner name", s.name),
                    "use 1-64 letters, digits, '-', '_' or '.'",
                ));
            }
            if !names.insert(s.name.as_str()) {
                return Err(err(
                    key("name"),
                    format!("scanner name {:?} is used twice", s.name),
                    "give every [[scanner]] its own name",
                ));
            }
            match &s.kind {
                ScannerKind::Serial(serial) => serial.validate(),
                ScannerKind::Hid(hid) => hid.validate(),
            }
            .map_err(|e| ConfigError::new(file, e.within(&format!("scanner[{i}]"))))?;
            if s.quantity == 0 || s.quantity > 100_000 {
                return Err(err(
                    key("quantity"),
                    format!("{} is out of range", s.quantity),
                    "use 1..=100000 units per read (default 1)",
                ));
            }
            if !(16..=1 << 20).contains(&s.max_frame_bytes) {
                return Err(err(
                    key("max_frame_bytes"),
                    format!("{} is out of range", s.max_frame_bytes),
                    "use 16..=1048576 bytes (default 4096)",
                ));
            }
        }
        Ok(())
    }

    /// The state directory: `[gateway] state_dir`, else `$STATE_DIRECTORY`
    /// (first entry), else `./scangate-state`.
    pub fn state_dir(&self) -> PathBuf {
        if let Some(dir) = &self.gateway.state_dir {
            return dir.clone();
        }
        if let Some(env) = std::env::var_os("STATE_DIRECTORY") {
            let env = env.to_string_lossy().into_owned();
            if let Some(first) = env.split(':').find(|s| !s.is_empty()) {
                return PathBuf::from(first);
            }
        }
        PathBuf::from("scangate-state")
    }

    /// The echo window in milliseconds, as a signed number for time arithmetic.
    pub fn window_ms(&self) -> i64 {
        self.dedup.window_ms as i64
    }

    /// `[dedup] retention_hours`: how long a commit is remembered.
    pub fn retention(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.dedup.retention_hours * 3600)
    }

    /// What a connection to the facility store is for: this gateway's
    /// facility, window and retention (`facility::connect`).
    pub fn facility_terms(&self) -> (&str, i64, std::time::Duration) {
        (&self.gateway.facility, self.window_ms(), self.retention())
    }
}

/// The configuration with everything it points to read: what `run` works
/// with. `check-config` resolves the same way, so it refuses what `run`
/// would (an unreadable `password_file` or `ca_file`).
#[derive(Debug, Clone)]
pub struct Settings {
    /// The validated configuration.
    pub config: Config,
    /// `[redis]` with its password and CA read; `None`: embedded store.
    pub redis: Option<RedisSettings>,
}

impl Settings {
    /// Read the secrets and files `cfg` names (once; errors name the key).
    pub fn resolve(cfg: &Config) -> Result<Settings, ConfigError> {
        Settings::resolve_from(cfg, None)
    }

    /// [`Config::load`], then [`Settings::resolve`]; errors name the file.
    pub fn load(path: Option<&Path>) -> Result<Settings, ConfigError> {
        Settings::resolve_from(&Config::load(path)?, path)
    }

    fn resolve_from(cfg: &Config, file: Option<&Path>) -> Result<Settings, ConfigError> {
        let redis = match &cfg.redis {
            None => None,
            Some(r) => Some(
                r.resolve()
                    .map_err(|e| ConfigError::new(file, e.within("redis")))?,
            ),
        };
        Ok(Settings {
            config: cfg.clone(),
            redis,
        })
    }
}

/// Why a `[[scanner]]` table was refused: by serde (the error's span names
/// the key) or by a check here (the key relative to the scanner).
enum Refused {
    Toml(toml::de::Error),
    Invalid(Invalid),
}

impl From<toml::de::Error> for Refused {
    fn from(e: toml::de::Error) -> Self {
        Refused::Toml(e)
    }
}

impl From<Invalid> for Refused {
    fn from(e: Invalid) -> Self {
        Refused::Invalid(e)
    }
}

/// `kind`, read before the rest of a `[[scanner]]` table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KindTag {
    kind: Kind,
}

/// The values of `kind`.
#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Serial,
    Hid,
}

/// `mode`, read before the rest of a `kind = "hid"` table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModeTag {
    #[serde(default)]
    mode: Option<HidMode>,
}

/// One `[[scanner]]` table: the common keys, `kind`, then the kind's (and
/// for HID the mode's) types, each deserialized from its own keys.
fn scanner(table: Spanned<DeValue<'_>>) -> Result<ScannerConfig, Refused> {
    let span = table.span();
    let DeValue::Table(mut t) = table.into_inner() else {
        return Err(Invalid::new(
            "",
            "a scanner entry must be a table",
            "write each scanner as a [[scanner]] table, as in config/scangate.toml",
        )
        .into());
    };
    let common: Scanner<()> = take(&mut t, &span, fields_of::<Scanner<()>>())?;
    let KindTag { kind } = take(&mut t, &span, &["kind"])?;
    let kind = match kind {
        Kind::Serial => {
            let serial = fields_of::<SerialConfig>();
            let hid_only = [
                &["mode"][..],
                fields_of::<HidConfig>(),
                fields_of::<PosConfig>(),
                fields_of::<KeyboardConfig>(),
            ]
            .concat();
            if let Some(field) = first_key_of(&t, &hid_only, serial) {
                return Err(Invalid::new(
                    field.as_str(),
                    format!("`{field}` applies only to HID scanners"),
                    "remove it, or set kind = \"hid\" if this is a USB HID scanner",
                )
                .into());
            }
            ScannerKind::Serial(rest(t, span)?)
        }
        Kind::Hid => ScannerKind::Hid(hid(t, span)?),
    };
    Ok(common.with_kind(kind))
}

/// The keys of a `kind = "hid"` table (the common keys and `kind` taken).
fn hid(mut t: DeTable<'_>, span: Range<usize>) -> Result<HidConfig, Refused> {
    let ModeTag { mode } = take(&mut t, &span, &["mode"])?;
    let Some(mode) = mode else {
        return Err(Invalid::new(
            "mode",
            "a HID scanner needs a mode",
            "set mode = \"pos\" (HID POS, preferred) or mode = \"keyboard\" (keyboard wedge); `scangate devices` shows which",
        )
        .into());
    };
    // Serial keys on a HID scanner: those that would change the framing or
    // answer the scanner are refused; the line settings (a copied serial
    // entry's `baud = 9600`, `parity = "none"`) were always accepted and
    // ignored, and still are, their types and `baud`'s range checked.
    let hid_keys = fields_of::<HidConfig>();
    let serial_only: Vec<&str> = fields_of::<SerialConfig>()
        .iter()
        .copied()
        .filter(|k| !hid_keys.contains(k))
        .collect();
    let serial: SerialConfig = take(&mut t, &span, &serial_only)?;
    if let Some(field) = serial.framing_key_set() {
        return Err(Invalid::new(
            field,
            format!("`{field}` applies only to serial scanners"),
            "remove it: HID reports carry their own framing",
        )
        .into());
    }
    serial.validate_baud()?;
    let (own, other) = match mode {
        HidMode::Pos => (fields_of::<PosConfig>(), fields_of::<KeyboardConfig>()),
        HidMode::Keyboard => (fields_of::<KeyboardConfig>(), fields_of::<PosConfig>()),
    };
    if let Some(field) = first_key_of(&t, other, own) {
        return Err(Invalid::new(
            field.as_str(),
            format!("`{field}` does not apply to mode = \"{}\"", mode.as_str()),
            "remove it, or change `mode`",
        )
        .into());
    }
    let mode = match mode {
        HidMode::Pos => ModeConfig::Pos(take(&mut t, &span, own)?),
        HidMode::Keyboard => ModeConfig::Keyboard(take(&mut t, &span, own)?),
    };
    let mut hid: HidConfig = rest(t, span)?;
    hid.mode = mode;
    Ok(hid)
}

/// The first key of `t` (in the parser's order) that is in `foreign` but not
/// in `own`: a key of another kind or mode.
fn first_key_of(t: &DeTable<'_>, foreign: &[&str], own: &[&str]) -> Option<String> {
    t.keys()
        .map(|k| k.get_ref().as_ref())
        .find(|k| foreign.contains(k) && !own.contains(k))
        .map(str::to_string)
}

/// Move `keys` out of `t` and deserialize `T` from them (a table with `t`'s
/// span, so a missing key is reported as serde reports it for `t`).
fn take<'i, T: Deserialize<'i>>(
    t: &mut DeTable<'i>,
    span: &Range<usize>,
    keys: &[&str],
) -> Result<T, toml::de::Error> {
    let (part, left): (DeTable<'i>, DeTable<'i>) = std::mem::take(t)
        .into_iter()
        .partition(|(k, _)| keys.contains(&k.get_ref().as_ref()));
    *t = left;
    rest(part, span.clone())
}

/// Deserialize `T` from all of `t`: `deny_unknown_fields` names a stray key
/// at its place in the text.
fn rest<'i, T: Deserialize<'i>>(t: DeTable<'i>, span: Range<usize>) -> Result<T, toml::de::Error> {
    T::deserialize(ValueDeserializer::from(Spanned::new(
        span,
        DeValue::Table(t),
    )))
}

/// The keys a derived `Deserialize` struct reads (the `fields` serde's
/// derive passes to `deserialize_struct`; skipped fields are not in it).
fn fields_of<T: for<'de> Deserialize<'de>>() -> &'static [&'static str] {
    struct Probe<'a>(&'a mut &'static [&'static str]);
    #[derive(Debug)]
    struct Stop;
    impl fmt::Display for Stop {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("field probe")
        }
    }
    impl std::error::Error for Stop {}
    impl serde::de::Error for Stop {
        fn custom<M: fmt::Display>(_: M) -> Self {
            Stop
        }
    }
    impl<'de> serde::Deserializer<'de> for Probe<'_> {
        type Error = Stop;
        fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
            Err(Stop)
        }
        fn deserialize_struct<V: serde::de::Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Stop> {
            *self.0 = fields;
            Err(Stop)
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf option unit unit_struct newtype_struct seq tuple
            tuple_struct map enum identifier ignored_any
        }
    }
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Probe(&mut fields));
    fields
}

/// The 1-based line and column (in characters) of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..text.floor_char_boundary(offset.min(text.len()))];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (
        before.matches('\n').count() + 1,
        before[line_start..].chars().count() + 1,
    )
}

/// Best-effort `section.key` name for a byte offset in the TOML text.
fn locate_key(text: &str, offset: usize) -> String {
    let mut section = String::new();
    let mut counts: std::collections::HashMap<String, usize> = Default::default();
    let mut key = String::new();
    let mut pos = 0;
    for line in text.split_inclusive('\n') {
        let t = line.trim();
        if let Some(arr) = t.strip_prefix("[[").and_then(|s| s.strip_suffix("]]")) {
            let n = counts.entry(arr.trim().to_string()).or_insert(0);
            section = format!("{}[{}]", arr.trim(), *n);
            *n += 1;
            key.clear();
        } else if let Some(sec) = t.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            section = sec.trim().to_string();
            key.clear();
        } else if let Some((k, _)) = t.split_once('=')
            && !t.starts_with('#')
        {
            key = k.trim().to_string();
        }
        if pos + line.len() > offset {
            break;
        }
        pos += line.len();
    }
    match (section.is_empty(), key.is_empty()) {
        (true, _) => key,
        (false, true) => section,
        (false, false) => format!("{section}.{key}"),
    }
}

#[cfg(test)]
mod tests;
